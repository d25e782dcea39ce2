//! Capture of traces made by the instrumentation libraries themselves (issue 36): each file in
//! `tests/data/capture/` was written by `scripts/gen-traces/gen.py` with the library and version
//! its name gives (a real OpenAI client or agent framework against a fake model, spans encoded by
//! the OTel SDK's OTLP encoder, one JSON line per question). Every app asked three questions:
//! Paris (a tool call, then the answer), Atlantis (a tool call, then the model failed with HTTP
//! 500) and Lemuria (the model failed at once). Each test writes out the cases a user gets.

use std::io::BufReader;
use std::path::{Path, PathBuf};

use casebook_formats::capture::{Capture, Captured};
use casebook_model::Diagnostic;
use serde_json::{Value, json};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/capture").join(name)
}

fn capture_text(name: &str, text: &str) -> Captured {
    let mut capture = Capture::new();
    capture.read(name, BufReader::new(text.as_bytes())).unwrap();
    capture.finish()
}

fn capture(name: &str) -> Captured {
    capture_text(name, &fs_err::read_to_string(data(name)).unwrap())
}

fn cases(captured: &Captured) -> Vec<Value> {
    captured.cases.iter().map(|c| serde_json::to_value(c).unwrap()).collect()
}

/// `(code, line, message)` of each diagnostic.
fn diagnostics(captured: &Captured) -> Vec<(String, u64, String)> {
    captured.diagnostics.iter().map(|d: &Diagnostic| (d.code.to_string(), d.line, d.message.clone())).collect()
}

const SYSTEM: &str = "You are a weather assistant. Answer in one sentence.";
const OVERLOADED: &str = "Error code: 500 - The model is overloaded, try again later";

fn system() -> Value {
    json!([{"type": "custom", "source": "system_instructions", "content": SYSTEM}])
}

fn provenance(trace: &str, span: &str, time: &str, convention: &str) -> Value {
    json!({"format": "otlp", "trace_id": format!("0af7651916cd43{trace}8448eb211c80319c"), "span_id": span,
        "service": "weather-app", "time": time, "convention": convention})
}

fn id(trace: &str, span: &str) -> String {
    format!("trace-0af7651916cd43{trace}8448eb211c80319c-{span}")
}

/// Paris, then Atlantis after the tool, of an app that calls `chat.completions.create` in a tool
/// loop with no span of its own: each model call is a trace of its own.
fn rootless_cases(tool: Value, convention: &str, atlantis_time: &str, lemuria: Value) -> Vec<Value> {
    let with = |responses: Value| {
        let mut tool = tool.clone();
        if !responses.is_null() {
            tool["responses"] = responses;
        }
        tool
    };
    let error =
        if convention == "openinference" { format!("InternalServerError: {OVERLOADED}") } else { OVERLOADED.into() };
    let mut lemuria = lemuria;
    lemuria["metadata"]["error"] = json!(error);
    vec![
        json!({
            "id": id("de", "1000000000000001"),
            "input": "What is the weather in Paris?",
            "context": system(),
            "tools": [with(json!([{"when": {"arguments": {"city": "Paris"}}, "result": "rainy, 12°C"}]))],
            // The answer of the second call, not the first call's tool request (nor its raw response).
            "expected": {"output": "It is rainy, 12°C in Paris.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            "metadata": {"service": "weather-app", "model": "gpt-4o-2024-08-06", "status": "ok"},
            "review": "draft",
            "provenance": provenance("de", "1000000000000001", "2026-01-01T00:00:00Z", convention),
        }),
        json!({
            "id": id("e0", "1000000000000003"),
            "input": "What is the weather in Atlantis?",
            "context": system(),
            "tools": [with(json!([{"when": {"arguments": {"city": "Atlantis"}}, "result": "under water, 4°C"}]))],
            "expected": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Atlantis"}}]},
            // The second call failed: the question failed.
            "metadata": {"service": "weather-app", "model": "gpt-4o-2024-08-06", "status": "error", "error": error},
            "review": "draft",
            "provenance": provenance("e0", "1000000000000003", atlantis_time, convention),
        }),
        lemuria,
    ]
}

#[test]
fn openinference_openai_calls_without_a_parent_span_make_one_case_per_question() {
    let file = "openinference-openai-0.1.66.jsonl";
    let captured = capture(file);
    let tool = json!({"name": "get_weather", "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}});
    let lemuria = json!({
        "id": id("e2", "1000000000000005"),
        "input": "What is the weather in Lemuria?",
        "context": system(),
        "tools": [tool],
        "metadata": {"service": "weather-app", "status": "error"},
        "review": "draft",
        "provenance": provenance("e2", "1000000000000005", "2026-01-01T00:00:00.086300573Z", "openinference"),
    });
    let expected = rootless_cases(tool.clone(), "openinference", "2026-01-01T00:00:00.065172471Z", lemuria);
    assert_eq!(cases(&captured), expected);
    // Five model calls, three questions; failed questions have no answer and that is no warning.
    assert_eq!(captured.invocations, 3);
    assert_eq!(diagnostics(&captured), []);
}

#[test]
fn opentelemetry_openai_v2_calls_without_a_parent_span_make_one_case_per_question() {
    let file = "opentelemetry-openai-v2-2.4b0.jsonl";
    let captured = capture(file);
    // This instrumentation records no tool definitions: the tool is known by its answers.
    let lemuria = json!({
        "id": id("e2", "1000000000000005"),
        "input": "What is the weather in Lemuria?",
        "context": system(),
        "metadata": {"service": "weather-app", "model": "gpt-4o", "status": "error"},
        "review": "draft",
        "provenance": provenance("e2", "1000000000000005", "2026-01-01T00:00:00.057935752Z", "gen_ai"),
    });
    let expected = rootless_cases(json!({"name": "get_weather"}), "gen_ai", "2026-01-01T00:00:00.041139007Z", lemuria);
    assert_eq!(cases(&captured), expected);
    assert_eq!(diagnostics(&captured), []);
}

#[test]
fn openllmetry_openai_calls_without_a_parent_span_make_one_case_per_question() {
    let file = "openllmetry-openai-0.62.4.jsonl";
    let captured = capture(file);
    let tool = json!({"name": "get_weather", "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "type": "function"});
    let lemuria = json!({
        "id": id("e2", "1000000000000005"),
        "input": "What is the weather in Lemuria?",
        "context": system(),
        "tools": [tool],
        "metadata": {"service": "weather-app", "model": "gpt-4o", "status": "error"},
        "review": "draft",
        "provenance": provenance("e2", "1000000000000005", "2026-01-01T00:00:00.061393072Z", "gen_ai"),
    });
    let expected = rootless_cases(tool.clone(), "gen_ai", "2026-01-01T00:00:00.037736087Z", lemuria);
    assert_eq!(cases(&captured), expected);
    assert_eq!(diagnostics(&captured), []);
}

#[test]
fn model_calls_are_joined_whatever_order_their_traces_come_in() {
    let file = "openinference-openai-0.1.66.jsonl";
    let text = fs_err::read_to_string(data(file)).unwrap();
    let reversed: String = text.lines().rev().map(|l| format!("{l}\n")).collect();
    let forward = cases(&capture(file));
    let mut backward = cases(&capture_text(file, &reversed));
    // The same cases, located on other lines only in what is not compared.
    assert_eq!(backward.len(), 3);
    backward.sort_by_key(|c| c["id"].as_str().unwrap().to_owned());
    assert_eq!(backward, forward);
}

fn pydantic_tool(responses: Option<Value>) -> Value {
    let mut tool = json!({"name": "get_weather", "description": "Current weather of a city.",
        "parameters": {"additionalProperties": false, "properties": {"city": {"type": "string"}},
            "required": ["city"], "type": "object"},
        "type": "function"});
    if let Some(responses) = responses {
        tool["responses"] = responses;
    }
    tool
}

fn pydantic_cases(conversations: [&str; 3], times: [&str; 2]) -> Vec<Value> {
    let error = "ModelServerError: status_code: 500, model_name: gpt-4o, body: {'message': 'The model is overloaded, \
                 try again later', 'type': 'server_error'}";
    vec![
        json!({
            "id": id("de", "1000000000000001"),
            "input": "What is the weather in Paris?",
            "context": system(),
            // The tool result went back to the model as a `user` message: no turn of its own.
            "tools": [pydantic_tool(Some(json!([{"when": {"arguments": {"city": "Paris"}}, "result": "rainy, 12°C"}])))],
            "expected": {"output": "It is rainy, 12°C in Paris.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            "metadata": {"service": "weather-app", "agent": "weather_agent", "model": "gpt-4o-2024-08-06",
                "conversation_id": conversations[0], "status": "ok"},
            "review": "draft",
            "provenance": provenance("de", "1000000000000001", "2026-01-01T00:00:00Z", "gen_ai"),
        }),
        json!({
            "id": id("df", "1000000000000005"),
            "input": "What is the weather in Atlantis?",
            "context": system(),
            "tools": [pydantic_tool(Some(json!([{"when": {"arguments": {"city": "Atlantis"}}, "result": "under water, 4°C"}])))],
            "expected": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Atlantis"}}]},
            "metadata": {"service": "weather-app", "agent": "weather_agent", "model": "gpt-4o-2024-08-06",
                "conversation_id": conversations[1], "status": "error", "error": error},
            "review": "draft",
            "provenance": provenance("df", "1000000000000005", times[0], "gen_ai"),
        }),
        // The model failed at the first call: the question is only in `pydantic_ai.all_messages`.
        json!({
            "id": id("e0", "1000000000000009"),
            "input": "What is the weather in Lemuria?",
            "context": system(),
            "tools": [pydantic_tool(None)],
            "metadata": {"service": "weather-app", "agent": "weather_agent", "model": "gpt-4o",
                "conversation_id": conversations[2], "status": "error", "error": error},
            "review": "draft",
            "provenance": provenance("e0", "1000000000000009", times[1], "gen_ai"),
        }),
    ]
}

#[test]
fn pydantic_ai_v5_runs_with_tool_results_as_user_messages_and_failed_runs() {
    let captured = capture("pydantic-ai-2.68.0-v5.jsonl");
    let expected = pydantic_cases(
        [
            "01a2269f-76e5-76b6-8ce1-68a4d0a524f5",
            "01a2269f-776b-726f-9cf4-255378295ce6",
            "01a2269f-7794-72df-99e1-0334e9c5ca2a",
        ],
        ["2026-01-01T00:00:00.123656155Z", "2026-01-01T00:00:00.164063526Z"],
    );
    assert_eq!(cases(&captured), expected);
    assert_eq!(diagnostics(&captured), []);
}

#[test]
fn pydantic_ai_format_2_tool_arguments_come_from_the_tool_span() {
    let captured = capture("pydantic-ai-2.68.0-v2.jsonl");
    let expected = pydantic_cases(
        [
            "01a2269f-7e28-727f-903e-8a74be8bf50b",
            "01a2269f-7e77-71ea-bc8a-e0bd9f55fce4",
            "01a2269f-7e97-74ff-9705-77b014588d4a",
        ],
        ["2026-01-01T00:00:00.069862891Z", "2026-01-01T00:00:00.101850879Z"],
    );
    assert_eq!(cases(&captured), expected);
    assert_eq!(diagnostics(&captured), []);
}

fn agents_cases(parameters: &Value, extra: &Value) -> Vec<Value> {
    let tool = |responses: Value| {
        let mut tool = json!({"name": "get_weather", "description": "Current weather of a city.",
            "parameters": parameters, "responses": responses});
        for (k, v) in extra.as_object().unwrap() {
            tool[k] = v.clone();
        }
        tool
    };
    vec![
        json!({
            "id": id("de", "1000000000000001"),
            "input": "What is the weather in Paris?",
            "context": system(),
            "tools": [tool(json!([{"when": {"arguments": {"city": "Paris"}}, "result": "rainy, 12°C"}]))],
            // Once, though the model's message records its text twice (content and its parts).
            "expected": {"output": "It is rainy, 12°C in Paris.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            "metadata": {"service": "weather-app", "agent": "Weather agent", "model": "gpt-4o-2024-08-06", "status": "ok"},
            "review": "draft",
            "provenance": provenance("de", "1000000000000001", "2026-01-01T00:00:00Z", "openinference"),
        }),
        json!({
            "id": id("df", "1000000000000009"),
            "input": "What is the weather in Atlantis?",
            "context": system(),
            "tools": [tool(json!([{"when": {"arguments": {"city": "Atlantis"}}, "result": "under water, 4°C"}]))],
            "expected": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Atlantis"}}]},
            // The outer `Agent workflow` span is OK; the agent's span under it failed.
            "metadata": {"service": "weather-app", "agent": "Weather agent", "model": "gpt-4o-2024-08-06",
                "status": "error", "error": format!("Error in agent run: {{'error': '{OVERLOADED}'}}")},
            "review": "draft",
            "provenance": provenance("df", "1000000000000009", "2026-01-01T00:00:00.195704469Z", "openinference"),
        }),
    ]
}

#[test]
fn openai_agents_failed_runs_inside_an_ok_workflow_are_failed() {
    let file = "openai-agents-0.24.0-openinference-2.6.0.jsonl";
    let captured = capture(file);
    let parameters = json!({"properties": {"city": {"title": "City", "type": "string"}}, "required": ["city"],
        "title": "get_weather_args", "type": "object", "additionalProperties": false});
    assert_eq!(cases(&captured), agents_cases(&parameters, &json!({"strict": true})));
    // The run that failed at its first model call recorded its question nowhere.
    let diags = diagnostics(&captured);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!((diags[0].0.as_str(), diags[0].1), ("W-no-content", 3));
    // The run failed: no hint to turn content capture on.
    assert_eq!(captured.diagnostics[0].hint, None);
    assert!(diags[0].2.starts_with("span `Agent workflow` (trace 0af7651916cd43e08448eb211c80319c, span 1000000000000011) failed and recorded no user message"), "{}", diags[0].2);
}

#[test]
fn openai_agents_tool_spans_define_the_tools() {
    // The same trace with the model spans' `llm.tools.*` left out (as openai-agents records them
    // when its model is not given the tools as JSON schemas): the TOOL spans' `tool.name`,
    // `tool.description` and `tool.parameters` define the tool.
    let file = "openai-agents-0.24.0-openinference-2.6.0.jsonl";
    let mut text = String::new();
    for line in fs_err::read_to_string(data(file)).unwrap().lines() {
        let mut doc: Value = serde_json::from_str(line).unwrap();
        for rs in doc["resourceSpans"].as_array_mut().unwrap() {
            for ss in rs["scopeSpans"].as_array_mut().unwrap() {
                for span in ss["spans"].as_array_mut().unwrap() {
                    if let Some(Value::Array(attrs)) = span.get_mut("attributes") {
                        attrs.retain(|a| !a["key"].as_str().unwrap().starts_with("llm.tools."));
                    }
                }
            }
        }
        text.push_str(&format!("{doc}\n"));
    }
    assert!(!text.contains("llm.tools."));
    let captured = capture_text(file, &text);
    let parameters = json!({"properties": {"city": {"title": "City", "type": "string"}}, "required": ["city"],
        "title": "get_weather_args", "type": "object", "additionalProperties": false});
    assert_eq!(cases(&captured), agents_cases(&parameters, &json!({})));
}
