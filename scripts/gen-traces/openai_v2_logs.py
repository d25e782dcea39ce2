"""Generates the OTLP trace and log files of casebook's log-capture tests
(`crates/casebook-formats/tests/data/capture/openai-v2-*`) with the real OpenTelemetry GenAI
instrumentation of the OpenAI client, against a fake chat-completions server on 127.0.0.1:0.

One question, as an application asks it: a plain application span (no GenAI attributes) around
two chat calls; the model first asks for `get_weather`, the application answers it, then the model
answers. Spans and log records are encoded by the SDK's own OTLP encoders
(`opentelemetry-exporter-otlp-proto-common`) and written as OTLP JSON (ids in hex, as the
collector's file exporter writes them) and, for logs, also as protobuf.

Two releases, each in a virtual environment of its own (2.1b0 needs the Events API, gone from
the SDK after 1.3x; 2.4b0 imports `opentelemetry.util.genai.instruments`, which 1.3b0 renamed):

    python3 -m venv old && old/bin/pip install opentelemetry-instrumentation-openai-v2==2.1b0 \
        opentelemetry-api==1.30.0 opentelemetry-sdk==1.30.0 opentelemetry-proto==1.30.0 \
        opentelemetry-exporter-otlp-proto-common==1.30.0 opentelemetry-instrumentation==0.51b0 \
        opentelemetry-semantic-conventions==0.51b0 openai==3.57.0 httpx
    python3 -m venv new && new/bin/pip install opentelemetry-instrumentation-openai-v2==2.4b0 \
        opentelemetry-util-genai==1.1b0 opentelemetry-sdk==1.45.2 \
        opentelemetry-exporter-otlp-proto-common==1.45.2 openai==3.57.0 httpx
    old/bin/python scripts/gen-traces/openai_v2_logs.py old crates/casebook-formats/tests/data/capture
    new/bin/python scripts/gen-traces/openai_v2_logs.py new crates/casebook-formats/tests/data/capture

- `old` (2.1b0, `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`): the spans carry no
  content; each message is a log record (`gen_ai.system.message`, `gen_ai.user.message`,
  `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`) with the content in its body.
- `new` (2.4b0 with opentelemetry-util-genai 1.1b0, `..._CAPTURE_MESSAGE_CONTENT=event_only` and
  `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`): the spans carry no content; each
  call has one `gen_ai.client.inference.operation.details` log record whose attributes hold
  `gen_ai.input.messages` / `gen_ai.output.messages`.
"""

import base64
import http.server
import json
import os
import sys
import threading

which, out_dir = sys.argv[1], sys.argv[2]
if which == "old":
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
else:
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "event_only"
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"

from google.protobuf.json_format import MessageToDict  # noqa: E402
from openai import OpenAI  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry._logs import set_logger_provider  # noqa: E402
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

try:
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
except ImportError:  # its name in older SDKs
    from opentelemetry.sdk._logs.export import InMemoryLogExporter as InMemoryLogRecordExporter
try:
    from opentelemetry._events import set_event_logger_provider
    from opentelemetry.sdk._events import EventLoggerProvider
except ImportError:  # the Events API is gone from newer SDKs
    set_event_logger_provider = None


class FakeModel(http.server.BaseHTTPRequestHandler):
    """Chat completions: a tool call first, then (once a tool message is sent) an answer."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answered = any(m.get("role") == "tool" for m in body["messages"])
        if answered:
            message = {"role": "assistant", "content": "It is rainy in Paris, 57°F."}
            finish = "stop"
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_w1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                    }
                ],
            }
            finish = "tool_calls"
        reply = {
            "id": "chatcmpl-" + ("2" if answered else "1"),
            "object": "chat.completion",
            "created": 1767225600,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), FakeModel)
threading.Thread(target=server.serve_forever, daemon=True).start()

resource = Resource.create({"service.name": "weather-bot"})
spans = InMemorySpanExporter()
tracer_provider = TracerProvider(resource=resource)
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(tracer_provider)
logs = InMemoryLogRecordExporter()
logger_provider = LoggerProvider(resource=resource)
logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
set_logger_provider(logger_provider)
if set_event_logger_provider is not None:
    set_event_logger_provider(EventLoggerProvider(logger_provider))
OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)

client = OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="test")
tools = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather at a place",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
        },
    }
]
messages = [
    {"role": "system", "content": "You answer questions about the weather."},
    {"role": "user", "content": "What is the weather in Paris?"},
]
with trace.get_tracer("weather-bot").start_as_current_span("answer question"):
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "rainy, 57°F"})
    client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
server.shutdown()


def hex_ids(value):
    """OTLP JSON writes trace and span ids in hex, not protobuf JSON's base64."""
    if isinstance(value, dict):
        return {
            k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else hex_ids(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [hex_ids(v) for v in value]
    return value


os.makedirs(out_dir, exist_ok=True)
prefix = os.path.join(out_dir, f"openai-v2-{which}")
traces = hex_ids(MessageToDict(encode_spans(spans.get_finished_spans())))
with open(f"{prefix}-traces.json", "w") as f:
    json.dump(traces, f, indent=1, ensure_ascii=False)
    f.write("\n")
records = logs.get_finished_logs()
request = encode_logs(records)
with open(f"{prefix}-logs.json", "w") as f:
    json.dump(hex_ids(MessageToDict(request)), f, indent=1, ensure_ascii=False)
    f.write("\n")
# JSON lines, one request per record, as a collector's file exporter writes batch after batch.
if which == "old":
    with open(f"{prefix}-logs.jsonl", "w") as f:
        for record in records:
            f.write(json.dumps(hex_ids(MessageToDict(encode_logs([record]))), ensure_ascii=False) + "\n")
with open(f"{prefix}-logs.pb", "wb") as f:
    f.write(request.SerializeToString())
