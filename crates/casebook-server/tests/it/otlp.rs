//! The OTLP/HTTP receiver (`/v1/traces`): batches of one agent invocation sent as an exporter
//! sends them (protobuf or JSON, gzip or not, in several requests) make one case once the trace
//! is complete, on both backends, through a restart; late spans rebuild a case still as captured
//! and leave a reviewed one; bad requests get the answers of the OTLP/HTTP specification.
//!
//! `/v1/logs`: GenAI events in log records join their spans, whichever comes first, and a record
//! whose trace never comes is dropped with a warning the pending list shows. Those tests send the
//! files `scripts/gen-traces/openai_v2_logs.py` made with the real
//! `opentelemetry-instrumentation-openai-v2` (2.1b0: a message per record; 2.4b0: a record per
//! call), read from `casebook-formats`' test data as they are.
//!
//! The spans follow the shape the OpenTelemetry GenAI conventions give an agent (an
//! `invoke_agent` span with a `chat` model call asking for a tool, the `execute_tool` span and
//! the final `chat`), as the repository's `examples/traces/genai-agent.json` has them.

use std::io::Write;
use std::time::Duration;

use casebook_store::{CommitMode, Store};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use serde_json::{Value, json};

use crate::harness::{Backend, Server};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn limits() -> casebook_server::Limits {
    casebook_server::Limits {
        capture_quiet: Duration::from_millis(300),
        capture_max_wait: Duration::from_secs(600),
        ..Default::default()
    }
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn span(id: &str, parent: Option<&str>, name: &str, start: u64, attributes: &[(&str, String)]) -> Span {
    Span {
        trace_id: hex(TRACE),
        span_id: hex(id),
        parent_span_id: parent.map(hex).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: 1_714_000_000_000_000_000 + start,
        end_time_unix_nano: 1_714_000_000_000_000_000 + start + 1000,
        attributes: attributes
            .iter()
            .map(|(k, v)| KeyValue {
                key: (*k).into(),
                value: Some(AnyValue { value: Some(any_value::Value::StringValue(v.clone())) }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

const ROOT: &str = "00f067aa0ba902b7";

fn user(text: &str) -> Value {
    json!({"role": "user", "parts": [{"type": "text", "content": text}]})
}

/// The four spans of one invocation, in the order they end (the order exporters send them):
/// the model call asking for the tool, the tool, the final model call, the agent span.
fn invocation(question: &str, answer: &str) -> Vec<Span> {
    let call = json!({"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"location": "Paris"}});
    let said = json!([{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]);
    vec![
        span(
            "1a2b3c4d5e6f7081",
            Some(ROOT),
            "chat gpt-4o",
            10,
            &[
                ("gen_ai.operation.name", "chat".into()),
                ("gen_ai.request.model", "gpt-4o".into()),
                ("gen_ai.input.messages", json!([user(question)]).to_string()),
                ("gen_ai.output.messages", json!([{"role": "assistant", "parts": [call]}]).to_string()),
            ],
        ),
        span(
            "2b3c4d5e6f708192",
            Some(ROOT),
            "execute_tool get_weather",
            20,
            &[
                ("gen_ai.operation.name", "execute_tool".into()),
                ("gen_ai.tool.name", "get_weather".into()),
                ("gen_ai.tool.call.id", "call_1".into()),
                ("gen_ai.tool.call.arguments", "{\"location\":\"Paris\"}".into()),
                ("gen_ai.tool.call.result", "rainy, 57°F".into()),
            ],
        ),
        span(
            "3c4d5e6f708192a3",
            Some(ROOT),
            "chat gpt-4o",
            30,
            &[
                ("gen_ai.operation.name", "chat".into()),
                ("gen_ai.input.messages", json!([user(question)]).to_string()),
                ("gen_ai.output.messages", said.to_string()),
            ],
        ),
        span(
            ROOT,
            None,
            "invoke_agent Weather Agent",
            0,
            &[
                ("gen_ai.operation.name", "invoke_agent".into()),
                ("gen_ai.agent.name", "Weather Agent".into()),
                ("gen_ai.input.messages", json!([user(question)]).to_string()),
                ("gen_ai.output.messages", said.to_string()),
            ],
        ),
    ]
}

fn request(spans: &[Span], service: &str) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue { value: Some(any_value::Value::StringValue(service.into())) }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans { spans: spans.to_vec(), ..Default::default() }],
            ..Default::default()
        }],
    }
}

/// The same request in OTLP JSON (ids in hex, times as decimal strings).
fn json_request(spans: &[Span], service: &str) -> String {
    let to_hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let spans: Vec<Value> = spans
        .iter()
        .map(|s| {
            let attributes: Vec<Value> = s
                .attributes
                .iter()
                .map(|kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::StringValue(text)) => json!({"key": kv.key, "value": {"stringValue": text}}),
                    _ => unreachable!(),
                })
                .collect();
            json!({"traceId": to_hex(&s.trace_id), "spanId": to_hex(&s.span_id), "parentSpanId": to_hex(&s.parent_span_id),
                   "name": s.name, "startTimeUnixNano": s.start_time_unix_nano.to_string(),
                   "endTimeUnixNano": s.end_time_unix_nano.to_string(), "attributes": attributes})
        })
        .collect();
    json!({"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"spans": spans}]}]})
    .to_string()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

async fn post(
    server: &Server,
    path: &str,
    key: &str,
    content_type: &str,
    body: Vec<u8>,
    extra: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = server
        .client
        .post(format!("{}{path}", server.url))
        .bearer_auth(key)
        .header("content-type", content_type)
        .body(body);
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

async fn send_protobuf(server: &Server, spans: &[Span], gzipped: bool) {
    let bytes = request(spans, "weather-service").encode_to_vec();
    let (body, extra): (Vec<u8>, &[(&str, &str)]) =
        if gzipped { (gzip(&bytes), &[("content-encoding", "gzip")]) } else { (bytes, &[]) };
    let response = post(server, "/v1/traces", &server.keys.a_write, "application/x-protobuf", body, extra).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-protobuf");
    let answer = ExportTraceServiceResponse::decode(response.bytes().await.unwrap()).unwrap();
    assert_eq!(answer.partial_success, None);
}

/// The cases of `dataset`'s head in project `team-a` (none when it does not exist).
async fn cases(server: &Server, dataset: &str) -> Vec<Value> {
    let (status, page) = server
        .get(&server.keys.a_read, &format!("/api/v1/projects/team-a/datasets/{dataset}/versions/latest/cases"))
        .await;
    if status == 404 {
        return Vec::new();
    }
    assert_eq!(status, 200, "{page}");
    page["cases"].as_array().unwrap().clone()
}

/// Waits (up to 10 s) for `dataset` to have `n` cases.
async fn wait_for_cases(server: &Server, dataset: &str, n: usize) -> Vec<Value> {
    for _ in 0..100 {
        let found = cases(server, dataset).await;
        if found.len() >= n {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("`{dataset}` never got {n} cases: {:?}", cases(server, dataset).await);
}

async fn pending(server: &Server) -> Vec<Value> {
    let (status, list) = server.get(&server.keys.a_read, "/api/v1/projects/team-a/capture/pending").await;
    assert_eq!(status, 200, "{list}");
    list["traces"].as_array().unwrap().clone()
}

fn assert_whole(case: &Value) {
    assert_eq!(case["id"], format!("trace-{TRACE}-{ROOT}"));
    assert_eq!(case["input"], "What is the weather in Paris?");
    assert_eq!(case["expected"]["output"], "It is rainy in Paris, 57°F.");
    assert_eq!(case["expected"]["tool_calls"], json!([{"name": "get_weather", "arguments": {"location": "Paris"}}]));
    assert_eq!(
        case["tools"][0]["responses"],
        json!([{"when": {"arguments": {"location": "Paris"}}, "result": "rainy, 57°F"}])
    );
}

/// One invocation in three batches (the model call; the tool, gzip; the rest with the root),
/// through a restart of the server between the second and the third: one case, whole.
async fn batches_of_one_invocation_make_one_whole_case(backend: Backend) {
    let mut server = Server::start_with(backend, limits()).await;
    let spans = invocation("What is the weather in Paris?", "It is rainy in Paris, 57°F.");
    send_protobuf(&server, &spans[..1], false).await;
    send_protobuf(&server, &spans[1..2], true).await;
    // No root yet: nothing is made, however long the wait; the trace is pending.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(cases(&server, "weather-service").await.is_empty());
    let listed = pending(&server).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (&listed[0]["trace_id"], &listed[0]["spans"], &listed[0]["root"], &listed[0]["dataset"]),
        (&json!(TRACE), &json!(2), &json!(false), &json!("weather-service"))
    );
    assert!(listed[0]["captured"].is_null());

    server.restart(limits()).await;
    send_protobuf(&server, &spans[2..], false).await;
    let made = wait_for_cases(&server, "weather-service", 1).await;
    assert_eq!(made.len(), 1, "{made:?}");
    assert_whole(&made[0]);
    // The trace is marked captured just after its cases are committed (a separate write): wait
    // for the mark, a bounded while.
    let mut listed = pending(&server).await;
    for _ in 0..50 {
        if listed[0]["captured"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        listed = pending(&server).await;
    }
    assert_eq!((&listed[0]["spans"], &listed[0]["root"]), (&json!(4), &json!(true)));
    assert!(listed[0]["captured"].is_string(), "{listed:?}");
    // The same batches sent again change nothing: never a duplicate, never a new version.
    let (_, before) =
        server.get(&server.keys.a_read, "/api/v1/projects/team-a/datasets/weather-service/versions").await;
    send_protobuf(&server, &spans, false).await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    let (_, after) = server.get(&server.keys.a_read, "/api/v1/projects/team-a/datasets/weather-service/versions").await;
    assert_eq!(before, after);
    assert_eq!(cases(&server, "weather-service").await.len(), 1);
    server.stop().await;
}

/// A span that comes after the trace was captured rebuilds its case while nobody changed it;
/// once someone edited it, later spans leave it as it is.
async fn late_spans_rebuild_a_case_still_as_captured(backend: Backend) {
    let server = Server::start_with(backend, limits()).await;
    let spans = invocation("What is the weather in Paris?", "It is rainy in Paris, 57°F.");
    // Sent as JSON this time, into the dataset the header names.
    let body = json_request(&spans[1..], "weather-service").into_bytes();
    let header = [("x-casebook-dataset", "weather")];
    let response = post(&server, "/v1/traces", &server.keys.a_write, "application/json", body, &header).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.json::<Value>().await.unwrap(), json!({}));
    let made = wait_for_cases(&server, "weather", 1).await;
    // Without the first model call: its calls are the executed tool's, it is whole but for nothing.
    assert_eq!(made[0]["expected"]["output"], "It is rainy in Paris, 57°F.");
    let first = made[0].clone();

    // A late span: a retrieval of documents under the agent, which adds a context item.
    let late = span(
        "4d5e6f708192a3b4",
        Some(ROOT),
        "retrieval",
        5,
        &[
            ("gen_ai.operation.name", "retrieval".into()),
            (
                "gen_ai.retrieval.documents",
                json!([{"id": "doc-1", "content": "Paris is rainy in spring."}]).to_string(),
            ),
        ],
    );
    let body = json_request(&[late], "weather-service").into_bytes();
    let response = post(&server, "/v1/traces", &server.keys.a_write, "application/json", body, &header).await;
    assert_eq!(response.status(), 200);
    let mut rebuilt = first.clone();
    for _ in 0..100 {
        rebuilt = cases(&server, "weather").await.remove(0);
        if rebuilt != first {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_ne!(rebuilt, first, "the late span did not rebuild the case");
    assert_eq!(cases(&server, "weather").await.len(), 1);

    // Someone reviews the case (a new version with it changed): later spans leave it.
    let a = server.store.in_project("team-a");
    let mut reviewed: casebook_model::Case = serde_json::from_value(rebuilt.clone()).unwrap();
    reviewed.expected.output = Some(json!("Rainy, 57°F."));
    crate::harness::commit(&a, "weather", CommitMode::Upsert, vec![reviewed]).await;
    let head = a.versions("weather").await.unwrap().len();
    let body = json_request(&spans[..1], "weather-service").into_bytes();
    let response = post(&server, "/v1/traces", &server.keys.a_write, "application/json", body, &header).await;
    assert_eq!(response.status(), 200);
    // Wait until the trace was looked at again (captured time after the last span).
    for _ in 0..100 {
        let listed = pending(&server).await;
        if listed[0]["captured"].as_str() >= listed[0]["last_received"].as_str() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(a.versions("weather").await.unwrap().len(), head);
    assert_eq!(cases(&server, "weather").await[0]["expected"]["output"], "Rainy, 57°F.");
    server.stop().await;
}

/// The answers of the OTLP/HTTP specification to what is not a good request.
async fn bad_requests_get_the_answers_exporters_expect(backend: Backend) {
    let mut small = limits();
    small.max_otlp = 1 << 20;
    let server = Server::start_with(backend, small).await;
    let good = request(&invocation("Q", "A"), "svc").encode_to_vec();
    let key = server.keys.a_write.clone();

    // 401 for a bad key, 404 for another project's route (as every other route answers, with a
    // `google.rpc.Status` body).
    let response =
        post(&server, "/v1/traces", "cb_000000000000_nonsense", "application/x-protobuf", good.clone(), &[]).await;
    assert_eq!(response.status(), 401);
    let response =
        post(&server, "/api/v1/projects/team-b/v1/traces", &key, "application/x-protobuf", good.clone(), &[]).await;
    assert_eq!(response.status(), 404);
    let status = RpcStatus::decode(response.bytes().await.unwrap()).unwrap();
    assert_eq!((status.code, status.message.as_str()), (5, "no project `team-b`"));
    // The project's own route takes it.
    let response =
        post(&server, "/api/v1/projects/team-a/v1/traces", &key, "application/x-protobuf", good.clone(), &[]).await;
    assert_eq!(response.status(), 200);

    // 400 with a `google.rpc.Status` in the request's encoding for a body that is neither.
    let junk = b"\x07\xff\xfe this is neither protobuf nor JSON".to_vec();
    let response = post(&server, "/v1/traces", &key, "application/x-protobuf", junk.clone(), &[]).await;
    assert_eq!(response.status(), 400);
    let status = RpcStatus::decode(response.bytes().await.unwrap()).unwrap();
    assert_eq!(status.code, 3);
    assert!(
        status.message.starts_with("the body is not an OTLP protobuf `ExportTraceServiceRequest` (its content type says it is): `the request` is neither OTLP JSON nor OTLP protobuf traces"),
        "{}",
        status.message
    );
    let response = post(&server, "/v1/traces", &key, "application/json", junk, &[]).await;
    assert_eq!(response.status(), 400);
    let status: Value = response.json().await.unwrap();
    assert_eq!(status["code"], 3);
    assert!(status["message"].as_str().unwrap().starts_with("the body is not an OTLP JSON"), "{status}");

    // 415 for another content type or encoding.
    let response = post(&server, "/v1/traces", &key, "text/plain", good.clone(), &[]).await;
    assert_eq!(response.status(), 415);
    let response =
        post(&server, "/v1/traces", &key, "application/x-protobuf", good.clone(), &[("content-encoding", "br")]).await;
    assert_eq!(response.status(), 415);

    // 413 for a zip bomb: 64 MiB of zeros in a small gzip body.
    let bomb = gzip(&vec![0u8; 64 << 20]);
    assert!(bomb.len() < 1 << 20);
    let response =
        post(&server, "/v1/traces", &key, "application/x-protobuf", bomb, &[("content-encoding", "gzip")]).await;
    assert_eq!(response.status(), 413);
    let status = RpcStatus::decode(response.bytes().await.unwrap()).unwrap();
    assert!(status.message.starts_with("the decompressed body is larger than this server takes"), "{}", status.message);

    // A partial success: the span with a bad id is counted, the others kept.
    let mut spans = invocation("Q", "A");
    spans[1].span_id = vec![1, 2, 3];
    let response =
        post(&server, "/v1/traces", &key, "application/x-protobuf", request(&spans, "svc").encode_to_vec(), &[]).await;
    assert_eq!(response.status(), 200);
    let answer = ExportTraceServiceResponse::decode(response.bytes().await.unwrap()).unwrap();
    let partial = answer.partial_success.unwrap();
    assert_eq!(partial.rejected_spans, 1);
    assert_eq!(
        partial.error_message,
        "1 span(s) left out: `spanId` is 3 bytes, not 8 (at /resourceSpans/0/scopeSpans/0/spans/1/spanId)"
    );
    // A batch with no agent invocation (a tool span alone) is not an error: it waits.
    let lone = vec![span("5e6f708192a3b4c5", Some("aaaaaaaaaaaaaaaa"), "execute_tool x", 0, &[])];
    let mut lone_request = request(&lone, "svc");
    lone_request.resource_spans[0].scope_spans[0].spans[0].trace_id = hex("0123456789abcdef0123456789abcdef");
    let response = post(&server, "/v1/traces", &key, "application/x-protobuf", lone_request.encode_to_vec(), &[]).await;
    assert_eq!(response.status(), 200);
    assert!(pending(&server).await.iter().any(|t| t["trace_id"] == "0123456789abcdef0123456789abcdef"));
    server.stop().await;
}

/// Too many spans waiting: 503 with `Retry-After`, which exporters honour.
async fn a_full_backlog_asks_exporters_to_retry_later(backend: Backend) {
    let server = Server::start_with(backend, casebook_server::Limits { max_pending_spans: 3, ..limits() }).await;
    let spans = invocation("Q", "A");
    send_protobuf(&server, &spans[..3], false).await;
    let body = request(&spans[3..], "svc").encode_to_vec();
    let response = post(&server, "/v1/traces", &server.keys.a_write, "application/x-protobuf", body, &[]).await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "5");
    server.stop().await;
}

/// A trace whose root never comes (the application's outer span was lost) is captured after the
/// maximum wait, and its spans are forgotten the same time after that.
async fn a_trace_without_its_root_is_captured_after_the_maximum_wait(backend: Backend) {
    let server =
        Server::start_with(backend, casebook_server::Limits { capture_max_wait: Duration::from_secs(1), ..limits() })
            .await;
    // The agent span's parent (an HTTP server span, say) never comes.
    let mut spans = invocation("What is the weather in Paris?", "It is rainy in Paris, 57°F.");
    spans[3].parent_span_id = hex("ffffffffffffffff");
    send_protobuf(&server, &spans, false).await;
    let listed = pending(&server).await;
    assert_eq!(listed[0]["root"], false);
    let made = wait_for_cases(&server, "weather-service", 1).await;
    assert_whole(&made[0]);
    for _ in 0..60 {
        if pending(&server).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(pending(&server).await.is_empty(), "the captured trace's spans were kept past the maximum wait");
    server.stop().await;
}

/// More requests at once than `max_receiving`: 429 with `Retry-After`.
async fn too_many_requests_at_once_are_told_to_retry(backend: Backend) {
    let server = Server::start_with(backend, casebook_server::Limits { max_receiving: 1, ..limits() }).await;
    // A body that takes its time: the first request holds the one place while it is read.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let slow = server
        .client
        .post(format!("{}/v1/traces", server.url))
        .bearer_auth(&server.keys.a_write)
        .header("content-type", "application/x-protobuf")
        .body(reqwest::Body::wrap_stream(tokio_stream(rx)))
        .send();
    let slow = tokio::spawn(slow);
    tx.send(Ok(Vec::new())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let body = request(&invocation("Q", "A"), "svc").encode_to_vec();
    let response = post(&server, "/v1/traces", &server.keys.a_write, "application/x-protobuf", body, &[]).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    drop(tx);
    assert_eq!(slow.await.unwrap().unwrap().status(), 200);
    server.stop().await;
}

fn tokio_stream(
    mut rx: tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A file of `casebook-formats`' capture test data.
fn capture_data(name: &str) -> Vec<u8> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../casebook-formats/tests/data/capture").join(name);
    fs_err::read(path).unwrap()
}

/// The trace id of the `openai-v2-old-*` files.
const OLD_TRACE: &str = "b695922b96500b11b765ace95dc09cd8";

async fn pending_list(server: &Server) -> Value {
    let (status, list) = server.get(&server.keys.a_read, "/api/v1/projects/team-a/capture/pending").await;
    assert_eq!(status, 200, "{list}");
    list
}

fn assert_weather_case(case: &Value) {
    assert_eq!(case["input"], "What is the weather in Paris?");
    assert_eq!(
        case["expected"],
        json!({"output": "It is rainy in Paris, 57°F.",
            "tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]})
    );
}

/// Spans without content first (no case: the warning says where the content is), then their log
/// records as protobuf, gzip: the records rebuild the trace into its case, with the messages they
/// carried, as `casebook capture traces.json logs.json` makes it.
async fn log_records_after_their_spans_make_the_case(backend: Backend) {
    let server = Server::start_with(backend, limits()).await;
    let key = server.keys.a_write.clone();
    let traces = capture_data("openai-v2-old-traces.json");
    let response = post(&server, "/v1/traces", &key, "application/json", traces, &[]).await;
    assert_eq!(response.status(), 200);
    // Captured, with no case: the spans hold no content; the warning is kept for the user.
    let mut list = pending_list(&server).await;
    for _ in 0..100 {
        if list["traces"][0]["captured"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        list = pending_list(&server).await;
    }
    assert!(cases(&server, "weather-bot").await.is_empty());
    let warnings = list["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w["trace_id"] == OLD_TRACE
            && w["dataset"] == "weather-bot"
            && w["message"].as_str().unwrap().starts_with("W-no-content: ")),
        "{list:#}"
    );

    let logs = gzip(&capture_data("openai-v2-old-logs.pb"));
    let response =
        post(&server, "/v1/logs", &key, "application/x-protobuf", logs, &[("content-encoding", "gzip")]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-protobuf");
    let answer = ExportLogsServiceResponse::decode(response.bytes().await.unwrap()).unwrap();
    assert_eq!(answer.partial_success, None);
    let listed = pending(&server).await;
    assert_eq!((&listed[0]["spans"], &listed[0]["records"]), (&json!(3), &json!(8)), "{listed:?}");
    let made = wait_for_cases(&server, "weather-bot", 1).await;
    assert_eq!(made.len(), 1);
    assert_weather_case(&made[0]);
    assert_eq!(made[0]["provenance"]["convention"], "gen_ai-events");
    // The capture with the records has the content: its `W-no-content` is no longer listed.
    let list = pending_list(&server).await;
    let warnings = list["warnings"].as_array().unwrap();
    assert!(
        !warnings.iter().any(|w| w["message"].as_str().unwrap().starts_with("W-no-content: ")),
        "a warning the later capture fixed is still listed: {list:#}"
    );
    server.stop().await;
}

/// Log records first, as JSON on the project's route (one record per model call, 2.4b0), then
/// their spans: one case once the trace is complete.
async fn log_records_before_their_spans_wait_for_them(backend: Backend) {
    let server = Server::start_with(backend, limits()).await;
    let key = server.keys.a_write.clone();
    let logs = capture_data("openai-v2-new-logs.json");
    let response = post(&server, "/api/v1/projects/team-a/v1/logs", &key, "application/json", logs, &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), json!({}));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let listed = pending(&server).await;
    assert_eq!((&listed[0]["spans"], &listed[0]["records"], &listed[0]["root"]), (&json!(0), &json!(2), &json!(false)));
    assert!(listed[0]["captured"].is_null());
    let traces = capture_data("openai-v2-new-traces.json");
    let response = post(&server, "/v1/traces", &key, "application/json", traces, &[]).await;
    assert_eq!(response.status(), 200);
    let made = wait_for_cases(&server, "weather-bot", 1).await;
    assert_eq!(made.len(), 1);
    assert_weather_case(&made[0]);
    server.stop().await;
}

/// Records whose trace never comes are dropped after the maximum wait, with a warning naming the
/// trace; a GenAI record without a span is left out and counted in the partial success.
async fn log_records_without_their_trace_are_dropped_with_a_warning(backend: Backend) {
    let server =
        Server::start_with(backend, casebook_server::Limits { capture_max_wait: Duration::from_secs(1), ..limits() })
            .await;
    let key = server.keys.a_write.clone();
    let response =
        post(&server, "/v1/logs", &key, "application/x-protobuf", capture_data("openai-v2-old-logs.pb"), &[]).await;
    assert_eq!(response.status(), 200);
    let mut list = pending_list(&server).await;
    assert_eq!(list["traces"][0]["records"], 8, "{list:#}");
    for _ in 0..60 {
        if list["traces"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        list = pending_list(&server).await;
    }
    assert_eq!(list["traces"], json!([]), "the records were kept past the maximum wait");
    let warning = &list["warnings"][0];
    assert_eq!((&warning["trace_id"], &warning["dataset"]), (&json!(OLD_TRACE), &json!("traces")), "{list:#}");
    assert!(
        warning["message"].as_str().unwrap().starts_with(&format!(
            "8 GenAI log record(s) of trace {OLD_TRACE} were dropped: no span of the trace came within the maximum wait"
        )),
        "{warning}"
    );

    // A GenAI record without a span: left out, counted.
    let mut request = ExportLogsServiceRequest::decode(capture_data("openai-v2-old-logs.pb").as_slice()).unwrap();
    request.resource_logs[0].scope_logs[0].log_records[1].span_id.clear();
    let response = post(&server, "/v1/logs", &key, "application/x-protobuf", request.encode_to_vec(), &[]).await;
    assert_eq!(response.status(), 200);
    let partial = ExportLogsServiceResponse::decode(response.bytes().await.unwrap()).unwrap().partial_success.unwrap();
    assert_eq!(partial.rejected_log_records, 1);
    assert!(
        partial
            .error_message
            .starts_with("1 GenAI log record(s) left out: log record `gen_ai.user.message` names no span")
            && partial.error_message.ends_with("(at /resourceLogs/0/scopeLogs/0/logRecords/1)"),
        "{}",
        partial.error_message
    );
    server.stop().await;
}

/// Every failure of the OTLP routes is a `google.rpc.Status`, in the request's encoding.
async fn failures_of_the_otlp_routes_are_rpc_statuses(backend: Backend) {
    let server = Server::start_with(backend, limits()).await;
    let logs = capture_data("openai-v2-old-logs.pb");
    let write = server.keys.a_write.clone();
    for path in ["/v1/logs", "/v1/traces"] {
        // 401, protobuf: the request was protobuf.
        let response =
            post(&server, path, "cb_000000000000_nonsense", "application/x-protobuf", logs.clone(), &[]).await;
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()["content-type"], "application/x-protobuf");
        let status = RpcStatus::decode(response.bytes().await.unwrap()).unwrap();
        assert_eq!(status.code, 16);
        assert!(status.message.starts_with("the API key is unknown or revoked"), "{}", status.message);
        // 403 for a read-only key, JSON: the request was JSON.
        let response = post(&server, path, &server.keys.a_read, "application/json", b"{}".to_vec(), &[]).await;
        assert_eq!(response.status(), 403);
        let status: Value = response.json().await.unwrap();
        assert_eq!(status["code"], 7, "{status}");
    }
    // 404 for another project's route, in JSON for a JSON request.
    let response =
        post(&server, "/api/v1/projects/team-b/v1/logs", &write, "application/json", b"{}".to_vec(), &[]).await;
    assert_eq!(response.status(), 404);
    let status: Value = response.json().await.unwrap();
    assert_eq!(status, json!({"code": 5, "message": "no project `team-b`"}));
    // 400 for a body that is not a logs request.
    let junk = b"\x07\xff\xfe this is neither protobuf nor JSON".to_vec();
    let response = post(&server, "/v1/logs", &write, "application/x-protobuf", junk.clone(), &[]).await;
    assert_eq!(response.status(), 400);
    let status = RpcStatus::decode(response.bytes().await.unwrap()).unwrap();
    assert!(
        status
            .message
            .starts_with("the body is not an OTLP protobuf `ExportLogsServiceRequest` (its content type says it is)"),
        "{}",
        status.message
    );
    let response = post(&server, "/v1/logs", &write, "application/json", junk, &[]).await;
    assert_eq!(response.status(), 400);
    let status: Value = response.json().await.unwrap();
    assert_eq!(status["code"], 3);
    // 415 for another content type.
    let response = post(&server, "/v1/logs", &write, "text/plain", logs, &[]).await;
    assert_eq!(response.status(), 415);
    server.stop().await;
}

/// A traces request sent to `/v1/logs` (and a logs request to `/v1/traces`), as an exporter
/// configured with the wrong endpoint sends it: 400, saying what the body is and where it goes,
/// and nothing kept.
async fn a_body_of_the_other_signal_is_refused_with_where_it_goes(backend: Backend) {
    let server = Server::start_with(backend, limits()).await;
    let write = server.keys.a_write.clone();
    let traces_json = capture_data("openai-v2-old-traces.json");
    let response = post(&server, "/v1/logs", &write, "application/json", traces_json, &[]).await;
    assert_eq!(response.status(), 400);
    let status: Value = response.json().await.unwrap();
    assert_eq!(
        status,
        json!({"code": 3, "message": "the body is an OTLP `ExportTraceServiceRequest` (spans), not an `ExportLogsServiceRequest`: send it to `/v1/traces`, not `/v1/logs`"})
    );
    let traces_protobuf = gzip(&request(&invocation("Q", "A"), "svc").encode_to_vec());
    let response = post(
        &server,
        "/api/v1/projects/team-a/v1/logs",
        &write,
        "application/x-protobuf",
        traces_protobuf,
        &[("content-encoding", "gzip")],
    )
    .await;
    assert_eq!(response.status(), 400);
    assert_eq!(response.headers()["content-type"], "application/x-protobuf");
    let status = RpcStatus::decode(response.bytes().await.unwrap()).unwrap();
    assert_eq!(
        (status.code, status.message.as_str()),
        (
            3,
            "the body is an OTLP `ExportTraceServiceRequest` (spans), not an `ExportLogsServiceRequest`: send it to `/v1/traces`, not `/v1/logs`"
        )
    );
    let logs_protobuf = capture_data("openai-v2-old-logs.pb");
    let response = post(&server, "/v1/traces", &write, "application/x-protobuf", logs_protobuf, &[]).await;
    assert_eq!(response.status(), 400);
    let status = RpcStatus::decode(response.bytes().await.unwrap()).unwrap();
    assert_eq!(
        status.message,
        "the body is an OTLP `ExportLogsServiceRequest` (log records), not an `ExportTraceServiceRequest`: send it to `/v1/logs`, not `/v1/traces`"
    );
    let logs_json = capture_data("openai-v2-new-logs.json");
    let response = post(&server, "/v1/traces", &write, "application/json", logs_json, &[]).await;
    assert_eq!(response.status(), 400);
    let status: Value = response.json().await.unwrap();
    assert_eq!(
        status["message"],
        "the body is an OTLP `ExportLogsServiceRequest` (log records), not an `ExportTraceServiceRequest`: send it to `/v1/logs`, not `/v1/traces`"
    );
    assert_eq!(pending(&server).await, Vec::<Value>::new(), "a refused body kept something");
    server.stop().await;
}

/// Log records wait like spans: past `max_pending_spans` kept, a logs request gets the answer a
/// traces request gets (503 with `Retry-After`), and records fill the backlog for spans too.
async fn log_records_count_toward_the_backlog(backend: Backend) {
    let server = Server::start_with(backend, casebook_server::Limits { max_pending_spans: 3, ..limits() }).await;
    let write = server.keys.a_write.clone();
    let logs = capture_data("openai-v2-old-logs.pb");
    let response = post(&server, "/v1/logs", &write, "application/x-protobuf", logs.clone(), &[]).await;
    assert_eq!(response.status(), 200);
    let response = post(&server, "/v1/logs", &write, "application/x-protobuf", logs, &[]).await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "5");
    let status = RpcStatus::decode(response.bytes().await.unwrap()).unwrap();
    assert_eq!(status.code, 14);
    assert!(status.message.starts_with("3 spans and log records wait"), "{}", status.message);
    let body = request(&invocation("Q", "A"), "svc").encode_to_vec();
    let response = post(&server, "/v1/traces", &write, "application/x-protobuf", body, &[]).await;
    assert_eq!(response.status(), 503);
    server.stop().await;
}

/// `google.rpc.Status`, as OTLP/HTTP failures carry it.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

crate::on_both!(
    a_trace_without_its_root_is_captured_after_the_maximum_wait,
    too_many_requests_at_once_are_told_to_retry,
    batches_of_one_invocation_make_one_whole_case,
    late_spans_rebuild_a_case_still_as_captured,
    bad_requests_get_the_answers_exporters_expect,
    a_full_backlog_asks_exporters_to_retry_later,
    log_records_after_their_spans_make_the_case,
    log_records_before_their_spans_wait_for_them,
    log_records_without_their_trace_are_dropped_with_a_warning,
    failures_of_the_otlp_routes_are_rpc_statuses,
    a_body_of_the_other_signal_is_refused_with_where_it_goes,
    log_records_count_toward_the_backlog
);
