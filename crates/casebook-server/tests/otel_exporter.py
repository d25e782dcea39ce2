"""Agent invocations traced with the OpenTelemetry Python SDK and sent by its OTLP/HTTP exporter
(`opentelemetry-exporter-otlp-proto-http`), configured only by the environment variables a user
sets: OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME (and
OTEL_EXPORTER_OTLP_COMPRESSION=gzip in one variant). The spans carry the attributes the
OpenTelemetry GenAI semantic conventions name: an `invoke_agent` span with a `chat` model call
asking for a tool, the `execute_tool` span, and the final `chat`.

The batch processor sends small batches often (2 spans, every 50 ms), so one invocation's spans
come in several requests. Modes:

- `send N`: N invocations; after the first half of each (model call and tool ended, agent span
  still open) it flushes, prints `flushed` and waits for a line on stdin (the test restarts the
  server then), then ends them, flushes, and prints `done`.
- `probe`: exports one span directly and prints the exporter's result (`SUCCESS`/`FAILURE`).
- `json`: prints one whole invocation as JSON, as the SDK's own encoder makes the request
  (protobuf's JSON mapping of `ExportTraceServiceRequest`), without sending it.
- `logs`: one question as `opentelemetry-instrumentation-openai-v2` 2.1b0 records it with
  `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (the shape
  `scripts/gen-traces/openai_v2_logs.py` shows): an application span around two `chat` spans
  without content, the messages as GenAI event log records (`gen_ai.system.message`,
  `gen_ai.user.message`, `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`)
  emitted inside their span; spans by `OTLPSpanExporter`, records by `OTLPLogExporter` (the
  shared endpoint, `/v1/logs` appended), both in small batches; prints `done`.
"""

import json
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def message(role, text):
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def first_half(tracer, i):
    """Starts invocation `i`: the agent span (left open) and its ended model call and tool."""
    question = f"What is the weather in city {i}?"
    agent = tracer.start_span("invoke_agent Weather Agent")
    agent.set_attribute("gen_ai.operation.name", "invoke_agent")
    agent.set_attribute("gen_ai.agent.name", "Weather Agent")
    agent.set_attribute("gen_ai.input.messages", json.dumps([message("user", question)]))
    context = trace.set_span_in_context(agent)
    call = {"type": "tool_call", "id": f"call_{i}", "name": "get_weather", "arguments": {"city": i}}
    with tracer.start_as_current_span("chat gpt-4o", context=context) as chat:
        chat.set_attribute("gen_ai.operation.name", "chat")
        chat.set_attribute("gen_ai.request.model", "gpt-4o")
        chat.set_attribute("gen_ai.input.messages", json.dumps([message("user", question)]))
        chat.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [call]}]))
    with tracer.start_as_current_span("execute_tool get_weather", context=context) as tool:
        tool.set_attribute("gen_ai.operation.name", "execute_tool")
        tool.set_attribute("gen_ai.tool.name", "get_weather")
        tool.set_attribute("gen_ai.tool.call.id", f"call_{i}")
        tool.set_attribute("gen_ai.tool.call.arguments", json.dumps({"city": i}))
        tool.set_attribute("gen_ai.tool.call.result", f"rainy in city {i}")
    return agent, context, question


def second_half(tracer, agent, context, question, i):
    answer = f"It is rainy in city {i}."
    said = [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
    with tracer.start_as_current_span("chat gpt-4o", context=context) as chat:
        chat.set_attribute("gen_ai.operation.name", "chat")
        chat.set_attribute("gen_ai.input.messages", json.dumps([message("user", question)]))
        chat.set_attribute("gen_ai.output.messages", json.dumps(said))
    agent.set_attribute("gen_ai.output.messages", json.dumps(said))
    agent.end()


def send_logs(provider):
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(), schedule_delay_millis=50, max_export_batch_size=2))
    logger_provider = LoggerProvider(resource=provider.resource)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(), schedule_delay_millis=50, max_export_batch_size=3)
    )
    tracer = provider.get_tracer("casebook.tests")
    logger = logger_provider.get_logger("opentelemetry.instrumentation.openai_v2")
    system = {"content": "You answer questions about the weather."}
    user = {"content": "What is the weather in Paris?"}
    call = {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}

    def chat(parent, events):
        with tracer.start_as_current_span("chat gpt-4o-mini", context=parent) as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.system", "openai")
            span.set_attribute("gen_ai.request.model", "gpt-4o-mini")
            context = trace.set_span_in_context(span)
            for name, body in events:
                logger.emit(context=context, event_name=name, body=body, attributes={"gen_ai.system": "openai"})

    with tracer.start_as_current_span("answer question") as app:
        parent = trace.set_span_in_context(app)
        chat(
            parent,
            [
                ("gen_ai.system.message", system),
                ("gen_ai.user.message", user),
                (
                    "gen_ai.choice",
                    {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [call]}},
                ),
            ],
        )
        chat(
            parent,
            [
                ("gen_ai.system.message", system),
                ("gen_ai.user.message", user),
                ("gen_ai.assistant.message", {"tool_calls": [call]}),
                ("gen_ai.tool.message", {"content": "rainy, 57\u00b0F", "id": "call_w1"}),
                (
                    "gen_ai.choice",
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "It is rainy in Paris, 57\u00b0F."},
                    },
                ),
            ],
        )
    provider.force_flush()
    logger_provider.force_flush()
    provider.shutdown()
    logger_provider.shutdown()
    print("done", flush=True)


def main():
    mode = sys.argv[1]
    resource = Resource.create()  # reads OTEL_SERVICE_NAME
    provider = TracerProvider(resource=resource)
    if mode == "send":
        n = int(sys.argv[2])
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(), schedule_delay_millis=50, max_export_batch_size=2)
        )
        tracer = provider.get_tracer("casebook.tests")
        started = [first_half(tracer, i) for i in range(n)]
        provider.force_flush()
        print("flushed", flush=True)
        sys.stdin.readline()
        for i, (agent, context, question) in enumerate(started):
            second_half(tracer, agent, context, question, i)
        provider.force_flush()
        provider.shutdown()
        print("done", flush=True)
    elif mode == "probe":
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("casebook.tests")
        with tracer.start_as_current_span("execute_tool get_weather") as tool:
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
        result = OTLPSpanExporter().export(memory.get_finished_spans())
        print(result.name, flush=True)
    elif mode == "json":
        from google.protobuf.json_format import MessageToJson
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("casebook.tests")
        agent, context, question = first_half(tracer, 7)
        second_half(tracer, agent, context, question, 7)
        print(MessageToJson(encode_spans(memory.get_finished_spans())), flush=True)
    elif mode == "logs":
        send_logs(provider)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
