//! `casebook serve` as an OTLP receiver, end to end: an invocation's spans sent in two requests
//! (the model call and tool first, the agent span later) to a real server process that is
//! killed between them and started again on the same store make one whole case;
//! `casebook capture --pending` lists the trace kept meanwhile, from the server
//! (`CASEBOOK_URL`) and from the store. The spans are the repository's
//! `examples/traces/genai-agent.json` (OpenTelemetry GenAI conventions) cut in two. GenAI log
//! records whose trace never comes are dropped after `--capture-max-wait`, and
//! `casebook capture --pending` shows the warning, with the trace it concerns (the records are
//! `scripts/gen-traces/openai_v2_logs.py`'s, made by the real `opentelemetry-instrumentation-openai-v2`).
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use crate::cli::{Backend, Folder, jsonl};
use crate::remote::{PROJECT, Server, example, ok};

/// The example's request with only the spans `keep` wants.
fn part(keep: impl Fn(&Value) -> bool) -> String {
    let mut document: Value =
        serde_json::from_str(&fs_err::read_to_string(example("traces/genai-agent.json")).unwrap()).unwrap();
    let spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array_mut().unwrap();
    spans.retain(|s| keep(s));
    document.to_string()
}

fn post(url: &str, token: &str, body: String) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        reqwest::Client::new()
            .post(format!("{url}/v1/traces"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    })
}

fn is_root(span: &Value) -> bool {
    span["parentSpanId"] == ""
}

fn a_killed_server_carries_on_with_the_kept_spans(b: &Backend) {
    let dir = Folder::new();
    let mut server = Server::start(b, &dir, &["--capture-quiet", "1"]);
    let token = Server::key(b, &dir, PROJECT, "write");
    assert_eq!(post(&server.url, &token, part(|s| !is_root(s))), 200);

    let listed = jsonl(&ok(server.client(&dir, &token).args(["capture", "--pending", "--format", "json"])));
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (&listed[0]["trace_id"], &listed[0]["spans"], &listed[0]["root"], &listed[0]["dataset"]),
        (&json!("4bf92f3577b34da6a3ce929d0e0e4736"), &json!(3), &json!(false), &json!("weather-service"))
    );

    server.stop_now();
    // The store lists it too, with the server gone.
    let listed = jsonl(&ok(b.cb(&dir).args(["--project", PROJECT, "capture", "--pending", "--format", "json"])));
    assert_eq!(listed.len(), 1, "{listed:?}");
    let server = Server::serve(b, &dir, &["--capture-quiet", "1"]);
    assert_eq!(post(&server.url, &token, part(is_root)), 200);

    let mut cases = Vec::new();
    for _ in 0..100 {
        let out =
            b.cb(&dir).args(["--project", PROJECT, "cases", "weather-service", "--format", "json"]).output().unwrap();
        if out.status.success() {
            cases = jsonl(&String::from_utf8_lossy(&out.stdout));
            cases.retain(|c| c.get("$dataset").is_none());
            if !cases.is_empty() {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(cases.len(), 1, "{cases:?}");
    assert_eq!(cases[0]["id"], "trace-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7");
    assert_eq!(cases[0]["expected"]["output"], "It is rainy in Paris, 57°F.");
    assert_eq!(
        cases[0]["expected"]["tool_calls"],
        json!([{"name": "get_weather", "arguments": {"location": "Paris"}}])
    );
    let listed = jsonl(&ok(server.client(&dir, &token).args(["capture", "--pending", "--format", "json"])));
    assert!(listed[0]["captured"].is_string(), "{listed:?}");
}

fn records_without_their_trace_are_dropped_with_a_warning_capture_pending_shows(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &["--capture-quiet", "1", "--capture-max-wait", "1"]);
    let token = Server::key(b, &dir, PROJECT, "write");
    let logs = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../casebook-formats/tests/data/capture/openai-v2-old-logs.json");
    let body = fs_err::read_to_string(logs).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let status = runtime.block_on(async {
        reqwest::Client::new()
            .post(format!("{}/v1/logs", server.url))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert_eq!(status, 200);
    let mut listed = Vec::new();
    for _ in 0..100 {
        listed = jsonl(&ok(server.client(&dir, &token).args(["capture", "--pending", "--format", "json"])));
        if listed.iter().any(|l| l.get("warning").is_some()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(listed.len(), 1, "the records are forgotten, their warning kept: {listed:?}");
    assert_eq!(
        (&listed[0]["trace_id"], &listed[0]["dataset"]),
        (&json!("b695922b96500b11b765ace95dc09cd8"), &json!("traces"))
    );
    assert!(
        listed[0]["warning"].as_str().unwrap().starts_with(
            "8 GenAI log record(s) of trace b695922b96500b11b765ace95dc09cd8 were dropped: no span of the trace came"
        ),
        "{listed:?}"
    );
    // As text, from the store.
    let text = ok(b.cb(&dir).args(["--project", PROJECT, "capture", "--pending"]));
    assert!(text.contains("warnings of the receiver's captures"), "{text}");
    assert!(text.contains("traces  trace b695922b96500b11b765ace95dc09cd8  8 GenAI log record(s)"), "{text}");
}

on_both!(
    a_killed_server_carries_on_with_the_kept_spans,
    records_without_their_trace_are_dropped_with_a_warning_capture_pending_shows
);
