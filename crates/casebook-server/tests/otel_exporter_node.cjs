// Agent invocations traced with the OpenTelemetry JS SDK (`@opentelemetry/sdk-trace-node`) and
// sent by its OTLP/HTTP protobuf exporter (`@opentelemetry/exporter-trace-otlp-proto`) with its
// default settings (batch processor, protobuf, the endpoint's `/v1/traces`), configured only by
// the environment variables a user sets: OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_SERVICE_NAME. The spans carry the attributes of the OpenTelemetry GenAI semantic
// conventions, as `otel_exporter.py` makes them: an `invoke_agent` span with a `chat` model call
// asking for a tool, the `execute_tool` span and the final `chat`.
//
// Usage: node otel_exporter_node.cjs N (with NODE_PATH naming the folder the packages are in,
// `target/node-otel/node_modules`): N invocations, then the provider is shut down (which exports
// what is left) and `done` is printed.

const api = require("@opentelemetry/api");
const { NodeTracerProvider, BatchSpanProcessor } = require("@opentelemetry/sdk-trace-node");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");
const { detectResources, envDetector } = require("@opentelemetry/resources");

function message(role, text) {
  return { role, parts: [{ type: "text", content: text }] };
}

function invocation(tracer, i) {
  const question = `What is the weather in city ${i}?`;
  const answer = `It is rainy in city ${i}.`;
  const agent = tracer.startSpan("invoke_agent Weather Agent", {
    attributes: {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "Weather Agent",
      "gen_ai.input.messages": JSON.stringify([message("user", question)]),
    },
  });
  const context = api.trace.setSpan(api.context.active(), agent);
  const call = { type: "tool_call", id: `call_${i}`, name: "get_weather", arguments: { city: i } };
  const chat = tracer.startSpan("chat gpt-4o", {
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "gpt-4o",
      "gen_ai.input.messages": JSON.stringify([message("user", question)]),
      "gen_ai.output.messages": JSON.stringify([{ role: "assistant", parts: [call] }]),
    },
  }, context);
  chat.end();
  const tool = tracer.startSpan("execute_tool get_weather", {
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "get_weather",
      "gen_ai.tool.call.id": `call_${i}`,
      "gen_ai.tool.call.arguments": JSON.stringify({ city: i }),
      "gen_ai.tool.call.result": `rainy in city ${i}`,
    },
  }, context);
  tool.end();
  const said = [{ role: "assistant", parts: [{ type: "text", content: answer }], finish_reason: "stop" }];
  const last = tracer.startSpan("chat gpt-4o", {
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.input.messages": JSON.stringify([message("user", question)]),
      "gen_ai.output.messages": JSON.stringify(said),
    },
  }, context);
  last.end();
  agent.setAttribute("gen_ai.output.messages", JSON.stringify(said));
  agent.end();
}

async function main() {
  const n = Number(process.argv[2]);
  const provider = new NodeTracerProvider({
    resource: detectResources({ detectors: [envDetector] }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  const tracer = provider.getTracer("casebook.tests");
  for (let i = 0; i < n; i++) {
    invocation(tracer, i);
  }
  await provider.shutdown();
  console.log("done");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
