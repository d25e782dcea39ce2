"""Writes the OTLP JSON trace files of casebook's capture tests, with the instrumentation
libraries themselves: a real OpenAI client (or agent framework) talks to a fake model on
127.0.0.1, the library makes the spans, an in-memory exporter keeps them, and the OTLP encoder of
`opentelemetry-exporter-otlp-proto-common` with `google.protobuf.json_format` writes them as an
exporter would send them, one JSON line per question asked.

Usage: python gen.py LIBRARY OUT_FILE  (LIBRARY: see `LIBRARIES` below; run each library in its
own process, since two instrumentations of the OpenAI client cannot be active at once).
`gen.sh` makes the virtual environments with the pinned versions and writes every file.

Every app asks three questions. The fake model answers the first by asking for `get_weather`,
then, given the tool's result, with an answer; for the second (about Atlantis) it asks for the
tool too, then fails with HTTP 500 when given the result: a failed run after one tool call; the
third (about Lemuria) fails at once: a failed run whose only record of the question may be the
agent's span.
Ids are sequential and times are shifted to start on 2026-01-01, so a file differs from the
last run only where the libraries changed.
"""

import asyncio
import itertools
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SYSTEM = "You are a weather assistant. Answer in one sentence."
QUESTIONS = ["What is the weather in Paris?", "What is the weather in Atlantis?", "What is the weather in Lemuria?"]
TOOL_DESCRIPTION = "Current weather of a city."
WEATHER = {"Paris": "rainy, 12°C", "Atlantis": "under water, 4°C", "Lemuria": "sunny, 30°C"}


def get_weather(city: str) -> str:
    """Current weather of a city."""
    return WEATHER.get(city, "unknown")


# ---------------------------------------------------------------- the fake model


def city_of(text):
    return next((city for city in ("Atlantis", "Lemuria") if city in text), "Paris")


class Model(BaseHTTPRequestHandler):
    calls = itertools.count(1)

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = next(Model.calls)
        if self.path.endswith("/chat/completions"):
            self.chat(body, n)
        elif self.path.endswith("/responses"):
            self.responses_api(body, n)
        else:
            self.send(404, {"error": {"message": f"no route {self.path}"}})

    def send(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def fail(self):
        self.send(500, {"error": {"message": "The model is overloaded, try again later", "type": "server_error"}})

    def chat(self, body, n):
        messages = body["messages"]
        users = [m for m in messages if m["role"] == "user"]
        question = users[-1]["content"]
        if isinstance(question, list):
            question = " ".join(p.get("text", "") for p in question)
        city = city_of(question)
        if city == "Lemuria":
            return self.fail()
        answered = messages[-1]["role"] == "tool"
        if answered and city == "Atlantis":
            return self.fail()
        if answered:
            message = {"role": "assistant", "content": f"It is {WEATHER[city]} in {city}.", "refusal": None}
            finish = "stop"
        else:
            call = {"id": f"call_{n}", "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}
            message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
            finish = "tool_calls"
        self.send(200, {
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1767225600,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        })

    def responses_api(self, body, n):
        items = body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
        users = [i for i in items if i.get("role") == "user"]
        question = users[-1]["content"]
        if isinstance(question, list):
            question = " ".join(p.get("text", "") for p in question)
        city = city_of(question)
        if city == "Lemuria":
            return self.fail()
        answered = items[-1].get("type") == "function_call_output"
        if answered and city == "Atlantis":
            return self.fail()
        if answered:
            output = [{"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": f"It is {WEATHER[city]} in {city}.",
                                    "annotations": []}]}]
        else:
            output = [{"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "get_weather",
                       "arguments": json.dumps({"city": city}), "status": "completed"}]
        self.send(200, {
            "id": f"resp_{n}", "object": "response", "created_at": 1767225600, "status": "completed",
            "model": "gpt-4o-2024-08-06", "output": output, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": body.get("tools", []), "temperature": 1.0, "top_p": 1.0,
            "error": None, "incomplete_details": None, "instructions": body.get("instructions"),
            "metadata": {},
            "usage": {"input_tokens": 50, "output_tokens": 10, "total_tokens": 60,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}},
        })


def serve():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


# ---------------------------------------------------------------- tracing


def tracing():
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class Sequential(IdGenerator):
        def __init__(self):
            self.spans = itertools.count(1)
            self.traces = itertools.count(1)

        def generate_span_id(self):
            return 0x1000_0000_0000_0000 + next(self.spans)

        def generate_trace_id(self):
            return 0x0af7651916cd43dd8448eb211c80319c + (next(self.traces) << 64)

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-app"}), id_generator=Sequential())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


BASE = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


class Writer:
    """One OTLP JSON line per batch of spans, times shifted to start at `BASE`."""

    def __init__(self, path, exporter):
        self.out = open(path, "w", encoding="utf-8")
        self.exporter = exporter
        self.shift = None

    def flush(self):
        from google.protobuf import json_format
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        spans = self.exporter.get_finished_spans()
        self.exporter.clear()
        if not spans:
            return
        if self.shift is None:
            self.shift = min(span.start_time for span in spans) - BASE
        request = encode_spans(spans)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    span.start_time_unix_nano -= self.shift
                    span.end_time_unix_nano -= self.shift
                    for event in span.events:
                        event.time_unix_nano -= self.shift
        doc = json_format.MessageToDict(request)
        self.out.write(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()


# ---------------------------------------------------------------- the apps

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": TOOL_DESCRIPTION,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def plain_openai_app(base_url, writer):
    """An app without a span of its own: the tool loop around `chat.completions.create`."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="sk-fake", max_retries=0)
    for question in QUESTIONS:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        try:
            while True:
                reply = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
                message = reply.choices[0].message
                if not message.tool_calls:
                    break
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    result = get_weather(**json.loads(call.function.arguments))
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        except Exception as e:  # the app goes on to the next question
            print(f"question failed: {e}", file=sys.stderr)
        writer.flush()


def openinference_openai(path):
    from openinference.instrumentation.openai import OpenAIInstrumentor

    provider, exporter = tracing()
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    plain_openai_app(serve(), Writer(path, exporter))


def otel_openai_v2(path):
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    provider, exporter = tracing()
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    plain_openai_app(serve(), Writer(path, exporter))


def openllmetry_openai(path):
    os.environ["TRACELOOP_TRACE_CONTENT"] = "true"
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    provider, exporter = tracing()
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    plain_openai_app(serve(), Writer(path, exporter))


def pydantic_ai(path, version):
    from openai import AsyncOpenAI
    from pydantic_ai import Agent, InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider, exporter = tracing()
    writer = Writer(path, exporter)
    client = AsyncOpenAI(base_url=serve(), api_key="sk-fake", max_retries=0)
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, name="weather_agent", instructions=SYSTEM)
    agent.instrument = InstrumentationSettings(tracer_provider=provider, version=version)
    agent.tool_plain(get_weather)
    for question in QUESTIONS:
        try:
            agent.run_sync(question)
        except Exception as e:
            print(f"question failed: {e}", file=sys.stderr)
        writer.flush()


def openai_agents(path):
    from agents import Agent, Runner, function_tool, set_default_openai_client
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    provider, exporter = tracing()
    writer = Writer(path, exporter)
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    set_default_openai_client(AsyncOpenAI(base_url=serve(), api_key="sk-fake", max_retries=0))
    agent = Agent(name="Weather agent", instructions=SYSTEM, model="gpt-4o", tools=[function_tool(get_weather)])
    for question in QUESTIONS:
        try:
            asyncio.run(Runner.run(agent, question))
        except Exception as e:
            print(f"question failed: {e}", file=sys.stderr)
        writer.flush()


LIBRARIES = {
    "openinference-openai": openinference_openai,
    "otel-openai-v2": otel_openai_v2,
    "openllmetry-openai": openllmetry_openai,
    "pydantic-ai-v5": lambda path: pydantic_ai(path, 5),
    "pydantic-ai-v2": lambda path: pydantic_ai(path, 2),
    "openai-agents": openai_agents,
}

if __name__ == "__main__":
    LIBRARIES[sys.argv[1]](sys.argv[2])
