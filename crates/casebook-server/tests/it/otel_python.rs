//! The OpenTelemetry Python SDK's OTLP/HTTP exporter against a real server on `127.0.0.1:0`,
//! configured only by the environment variables a user sets (`tests/otel_exporter.py`): its
//! batches of several agent invocations, through a restart of the server in the middle, make one
//! whole case per invocation; a bad key and another project's route fail the export; a request
//! the SDK's own encoder wrote as JSON is read; spans without content and the GenAI event log
//! records of their messages, sent by the SDK's `OTLPSpanExporter` and `OTLPLogExporter` in
//! batches however they fall, make one case with the messages. Not run (said on stderr) without a Python that
//! has the SDK and exporter: `scripts/test.sh` makes one in `target/py-otel`, or set
//! `CASEBOOK_TEST_OTEL_PYTHON`. The Go SDK's and the Collector's `otlphttp` exporters are not
//! tested: Debian's `golang-opentelemetry-otel-dev` (1.1.0) ships no OTLP exporter, and neither
//! the Go module proxy nor GitHub's releases can be reached from the machines these tests run on.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Backend, Server};

fn python() -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = std::env::var_os("CASEBOOK_TEST_OTEL_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace.join("target/py-otel/bin/python")]);
    for candidate in candidates {
        let has = Command::new(&candidate)
            .args(["-c", "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if has {
            return Some(candidate);
        }
    }
    eprintln!(
        "not run: no Python with `opentelemetry-sdk` and `opentelemetry-exporter-otlp-proto-http`: `scripts/test.sh` installs them into target/py-otel, or set CASEBOOK_TEST_OTEL_PYTHON"
    );
    None
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otel_exporter.py")
}

fn limits() -> casebook_server::Limits {
    casebook_server::Limits { capture_quiet: Duration::from_millis(400), ..Default::default() }
}

/// The exporter's command with the user's three variables (and gzip when asked).
fn exporter(python: &Path, endpoint: &str, key: &str, gzip: bool) -> Command {
    let mut command = Command::new(python);
    command
        .arg(script())
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_HEADERS", format!("Authorization=Bearer%20{key}"))
        .env("OTEL_SERVICE_NAME", "weather-agent");
    if gzip {
        command.env("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip");
    }
    command
}

async fn head_cases(server: &Server, dataset: &str) -> Vec<Value> {
    let path = format!("/api/v1/projects/team-a/datasets/{dataset}/versions/latest/cases");
    let (status, page) = server.get(&server.keys.a_read, &path).await;
    if status == 404 { Vec::new() } else { page["cases"].as_array().unwrap().clone() }
}

async fn sdk_batches_through_a_restart(backend: Backend, gzip: bool) {
    let Some(python) = python() else { return };
    let mut server = Server::start_with(backend, limits()).await;
    let n = 3;
    let mut child = exporter(&python, &server.url, &server.keys.a_write, gzip)
        .args(["send", &n.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::task::block_in_place(|| lines.next()).unwrap().unwrap();
    assert_eq!(line, "flushed");
    // The first halves are kept, none made into cases (no root yet).
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(head_cases(&server, "weather-agent").await.is_empty());
    server.restart(limits()).await;
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let line = tokio::task::block_in_place(|| lines.next()).unwrap().unwrap();
    assert_eq!(line, "done");
    assert!(tokio::task::block_in_place(|| child.wait()).unwrap().success());
    let mut cases = Vec::new();
    for _ in 0..100 {
        cases = head_cases(&server, "weather-agent").await;
        if cases.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cases.len(), n, "{cases:#?}");
    let mut inputs: Vec<String> = cases.iter().map(|c| c["input"].as_str().unwrap().to_owned()).collect();
    inputs.sort();
    assert_eq!(inputs, (0..n).map(|i| format!("What is the weather in city {i}?")).collect::<Vec<_>>());
    for case in &cases {
        let i: usize =
            case["input"].as_str().unwrap().trim_end_matches('?').rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(case["expected"]["output"], format!("It is rainy in city {i}."), "{case:#}");
        assert_eq!(
            case["expected"]["tool_calls"],
            serde_json::json!([{"name": "get_weather", "arguments": {"city": i}}])
        );
        assert_eq!(
            case["tools"][0]["responses"],
            serde_json::json!([{"when": {"arguments": {"city": i}}, "result": format!("rainy in city {i}")}])
        );
        assert_eq!(case["metadata"]["service"], "weather-agent");
    }
    server.stop().await;
}

async fn the_python_exporter_sends_batches_that_make_one_case_per_invocation(backend: Backend) {
    sdk_batches_through_a_restart(backend, false).await;
}

async fn the_python_exporter_with_gzip_does_the_same(backend: Backend) {
    sdk_batches_through_a_restart(backend, true).await;
}

async fn a_bad_key_or_another_projects_route_fails_the_export(backend: Backend) {
    let Some(python) = python() else { return };
    let server = Server::start_with(backend, limits()).await;
    let probe = |endpoint: String, key: String| {
        let python = python.clone();
        async move {
            let out =
                tokio::task::spawn_blocking(move || exporter(&python, &endpoint, &key, false).arg("probe").output())
                    .await
                    .unwrap()
                    .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        }
    };
    assert_eq!(probe(server.url.clone(), server.keys.a_write.clone()).await, "SUCCESS");
    assert_eq!(probe(format!("{}/api/v1/projects/team-a", server.url), server.keys.a_write.clone()).await, "SUCCESS");
    assert_eq!(probe(server.url.clone(), "cb_000000000000_nonsense".into()).await, "FAILURE");
    assert_eq!(probe(format!("{}/api/v1/projects/team-b", server.url), server.keys.a_write.clone()).await, "FAILURE");
    server.stop().await;
}

/// A request in JSON as the SDK's encoder writes it (protobuf's JSON mapping: ids in base64).
async fn json_the_sdk_encoded_is_read(backend: Backend) {
    let Some(python) = python() else { return };
    let server = Server::start_with(backend, limits()).await;
    let out = exporter(&python, &server.url, &server.keys.a_write, false).arg("json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let response = server
        .client
        .post(format!("{}/v1/traces", server.url))
        .bearer_auth(&server.keys.a_write)
        .header("content-type", "application/json")
        .body(out.stdout)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut cases = Vec::new();
    for _ in 0..100 {
        cases = head_cases(&server, "weather-agent").await;
        if !cases.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0]["input"], "What is the weather in city 7?");
    assert_eq!(cases[0]["expected"]["output"], "It is rainy in city 7.");
    server.stop().await;
}

/// Spans without content and their messages as GenAI event log records, each sent by the SDK's
/// own exporter: one case with the conversation the records carry.
async fn the_python_log_exporter_sends_the_messages_of_spans_without_content(backend: Backend) {
    let Some(python) = python() else { return };
    let server = Server::start_with(backend, limits()).await;
    let mut command = exporter(&python, &server.url, &server.keys.a_write, false);
    let out = tokio::task::spawn_blocking(move || command.arg("logs").output()).await.unwrap().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done");
    let mut cases = Vec::new();
    for _ in 0..100 {
        cases = head_cases(&server, "weather-agent").await;
        if !cases.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cases.len(), 1, "{cases:#?}");
    let case = &cases[0];
    assert_eq!(case["input"], "What is the weather in Paris?");
    assert_eq!(
        case["expected"],
        serde_json::json!({"output": "It is rainy in Paris, 57°F.",
            "tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]})
    );
    assert_eq!(case["provenance"]["convention"], "gen_ai-events");
    server.stop().await;
}

crate::on_both!(
    the_python_log_exporter_sends_the_messages_of_spans_without_content,
    the_python_exporter_sends_batches_that_make_one_case_per_invocation,
    the_python_exporter_with_gzip_does_the_same,
    a_bad_key_or_another_projects_route_fails_the_export,
    json_the_sdk_encoded_is_read
);
