#!/usr/bin/env python3
"""A tiny support agent that speaks casebook's agent protocol (docs/agent-protocol.md).

Standard library only. Two ways to run it:

    python3 examples/tour/agent.py --port 9000   # HTTP: POST a request to http://127.0.0.1:9000/agent
    python3 examples/tour/agent.py               # one request a line on stdin, one reply a line on stdout
                                                 # (an experiment's `target: "cmd:python3 examples/tour/agent.py"`)

It knows a few answers by keywords of the question, and remembers an order number from earlier in
the conversation (it reads `messages`, so it keeps no state itself). It never sees the expected
answers: casebook sends only the task. Logs go to stderr.
"""

import argparse
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# (keywords that must all be in the question, the answer), the first match winning.
ANSWERS = [
    (["refund"], "Refunds take 7 business days from the day we receive the item."),
    (["charged twice"], "That is a duplicate charge: we refund it within 7 business days."),
    (["card", "billed"], "Open Billing settings, then Payment method, and add the new card."),
    (["ticket"], "Done: ticket created in the logistics queue."),
    (["return policy"], "Opened electronics can be returned within 14 days, with a 10% restocking fee."),
]


def text_of(content):
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def reply_to(request):
    """The reply to one request: its `output`."""
    messages = request.get("messages") or []
    question = text_of(messages[-1]["content"]) if messages else ""
    lowered = question.lower()
    if "which order" in lowered:
        earlier = " ".join(text_of(m["content"]) for m in messages[:-1] if m["role"] == "user")
        numbers = re.findall(r"\b\d{3,}\b", earlier)
        output = f"You mentioned order {numbers[-1]}." if numbers else "You have not mentioned an order yet."
    elif re.search(r"\border number is\b", lowered):
        output = "Order noted, thank you."
    else:
        output = next((answer for words, answer in ANSWERS if all(w in lowered for w in words)), None)
        output = output or "I do not know yet; I have passed your question to a colleague."
    return {"output": output}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/agent":
            self.send_error(404, "POST the request to /agent")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.dumps(reply_to(json.loads(self.rfile.read(length)))).encode()
            status = 200
        except (ValueError, KeyError, TypeError) as error:
            body = json.dumps({"error": f"cannot read the request: {error}"}).encode()
            status = 400
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 (the name is http.server's)
        pass  # quiet: in the tour it shares the terminal with casebook


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, help="serve HTTP on 127.0.0.1:PORT instead of reading stdin")
    args = parser.parse_args()
    if args.port is None:
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(reply_to(json.loads(line)), ensure_ascii=False), flush=True)
        return
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"agent: listening on http://127.0.0.1:{server.server_port}/agent", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
