#!/usr/bin/env python3
"""An incident investigator that speaks casebook's agent protocol as JSON lines.

Run it as a target: `cmd:python3 examples/agents/investigator.py` (from the repository root).

Each turn it asks casebook to answer its tool calls, one step at a time, from the case's world
snapshot: first the service's error logs (`log_fetcher`), then its error rate
(`metrics_query`). Each reply with `tool_calls` gets a next request on the same turn carrying
`tool_results` (and the calls and answers in `messages`, which is what this agent reads: it keeps
no state, so one process can serve many sessions). Once told, it answers with what the tools
said. Standard library only; logs go to stderr, never stdout.
"""

import json
import re
import sys


def service_of(question):
    """The service a question is about: the first word written `like_this`."""
    found = re.search(r"`([^`]+)`", question)
    return found.group(1) if found else "unknown"


def as_text(content):
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def plan(service, tools):
    """The calls to make, one step each, among the tools the case offers."""
    offered = {tool["name"] for tool in tools}
    steps = []
    if "log_fetcher" in offered:
        steps.append({"name": "log_fetcher", "arguments": {"service": service, "level": "error"}})
    if "metrics_query" in offered:
        steps.append({"name": "metrics_query", "arguments": {"service": service, "metric": "error_rate"}})
    return steps


def reply_to(request):
    messages = request["messages"]
    # The turn's question is its last user (or operator) message; the tool answers come after it.
    start = max(i for i, m in enumerate(messages) if m["role"] in ("user", "hitl", "system"))
    question = as_text(messages[start]["content"])
    service = service_of(question)
    told = [m for m in messages[start:] if m["role"] == "tool"]
    steps = plan(service, request.get("tools", []))
    if len(told) < len(steps):
        call = dict(steps[len(told)], id=f"inv-{request['turn']}-{len(told) + 1}")
        return {"tool_calls": [call]}
    if not told:
        return {"output": f"I cannot investigate `{service}`: I was given no tools."}
    findings = []
    for answer in told:
        said = as_text(answer["content"]) or "nothing"
        findings.append(f"{answer['name']} failed: {said}" if answer.get("is_error") else f"{answer['name']}: {said}")
    return {"output": f"Findings for {service}: " + "; ".join(findings)}


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = reply_to(json.loads(line))
        except Exception as error:  # a broken request must not kill the process: say why
            print(f"investigator: cannot answer: {error!r}", file=sys.stderr)
            reply = {"output": f"error: {error}"}
        print(json.dumps(reply, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
