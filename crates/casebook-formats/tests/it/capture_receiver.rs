//! OTLP protobuf traces (`capture/proto.rs`): the bytes an OpenTelemetry exporter sends
//! (`application/x-protobuf`) make the same cases as the same trace in OTLP JSON, and a body that
//! is neither is one clear error. The protobuf requests are made here from the repository's own
//! example traces (`examples/traces`, OTLP JSON as the collector's file exporter writes it) with
//! the `opentelemetry-proto` types an exporter encodes with.

use std::path::Path;

use casebook_formats::capture::Capture;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, KeyValueList, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status, span};
use prost::Message;
use serde_json::{Value, json};

fn example(name: &str) -> String {
    fs_err::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces").join(name)).unwrap()
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn any(value: &Value) -> AnyValue {
    let (kind, inner) = value.as_object().unwrap().iter().next().unwrap();
    let value = match kind.as_str() {
        "stringValue" => any_value::Value::StringValue(inner.as_str().unwrap().to_owned()),
        "boolValue" => any_value::Value::BoolValue(inner.as_bool().unwrap()),
        "intValue" => any_value::Value::IntValue(match inner {
            Value::String(s) => s.parse().unwrap(),
            n => n.as_i64().unwrap(),
        }),
        "doubleValue" => any_value::Value::DoubleValue(inner.as_f64().unwrap()),
        "arrayValue" => any_value::Value::ArrayValue(ArrayValue {
            values: inner["values"].as_array().into_iter().flatten().map(any).collect(),
        }),
        "kvlistValue" => any_value::Value::KvlistValue(KeyValueList { values: attributes(&inner["values"]) }),
        other => panic!("no {other} in the examples"),
    };
    AnyValue { value: Some(value) }
}

fn attributes(list: &Value) -> Vec<KeyValue> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|kv| KeyValue {
            key: kv["key"].as_str().unwrap().to_owned(),
            value: Some(any(&kv["value"])),
            ..Default::default()
        })
        .collect()
}

fn nanos(value: &Value) -> u64 {
    value.as_str().map_or_else(|| value.as_u64().unwrap_or(0), |s| s.parse().unwrap())
}

/// An OTLP JSON request as the protobuf message an exporter would send.
fn to_proto(document: &Value) -> ExportTraceServiceRequest {
    let resource_spans = document["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rs| ResourceSpans {
            resource: Some(Resource { attributes: attributes(&rs["resource"]["attributes"]), ..Default::default() }),
            scope_spans: rs["scopeSpans"]
                .as_array()
                .unwrap()
                .iter()
                .map(|ss| ScopeSpans {
                    spans: ss["spans"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| Span {
                            trace_id: hex(s["traceId"].as_str().unwrap()),
                            span_id: hex(s["spanId"].as_str().unwrap()),
                            parent_span_id: hex(s["parentSpanId"].as_str().unwrap_or("")),
                            name: s["name"].as_str().unwrap_or("").to_owned(),
                            start_time_unix_nano: nanos(&s["startTimeUnixNano"]),
                            end_time_unix_nano: nanos(&s["endTimeUnixNano"]),
                            attributes: attributes(&s["attributes"]),
                            events: s["events"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|e| span::Event {
                                    name: e["name"].as_str().unwrap_or("").to_owned(),
                                    attributes: attributes(&e["attributes"]),
                                    ..Default::default()
                                })
                                .collect(),
                            status: s.get("status").map(|st| Status {
                                code: st["code"].as_i64().unwrap_or(0) as i32,
                                message: st["message"].as_str().unwrap_or("").to_owned(),
                            }),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest { resource_spans }
}

fn capture_bytes(name: &str, bytes: &[u8]) -> casebook_formats::capture::Captured {
    let mut capture = Capture::new();
    capture.read(name, bytes).unwrap();
    capture.finish()
}

#[test]
fn protobuf_traces_make_the_same_cases_as_the_same_traces_in_json() {
    for name in ["genai-agent.json", "genai-events.json", "genai-flattened.json", "openinference.json"] {
        let text = example(name);
        let from_json = capture_bytes(name, text.as_bytes());
        assert!(!from_json.has_errors(), "{name}: {:#?}", from_json.diagnostics);
        assert!(!from_json.cases.is_empty(), "{name}");
        let bytes = to_proto(&serde_json::from_str(&text).unwrap()).encode_to_vec();
        // Read by content, as `casebook capture FILE` reads a file: not JSON, so protobuf.
        let from_proto = capture_bytes("traces.pb", &bytes);
        assert!(!from_proto.has_errors(), "{name}: {:#?}", from_proto.diagnostics);
        assert_eq!(from_proto.spans, from_json.spans, "{name}");
        assert_eq!(
            serde_json::to_value(&from_proto.cases).unwrap(),
            serde_json::to_value(&from_json.cases).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn an_error_status_and_its_message_mark_the_case_failed() {
    let text = example("genai-agent.json");
    let mut document: Value = serde_json::from_str(&text).unwrap();
    let root = &mut document["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    assert_eq!(root["parentSpanId"], "");
    root["status"] = json!({"code": 2, "message": "tool timed out"});
    let captured = capture_bytes("traces.pb", &to_proto(&document).encode_to_vec());
    let metadata = captured.cases[0].metadata.as_ref().unwrap();
    assert_eq!((&metadata["status"], &metadata["error"]), (&json!("error"), &json!("tool timed out")));
}

#[test]
fn a_body_that_is_neither_json_nor_protobuf_is_one_error() {
    let captured = capture_bytes("junk.bin", b"\x07\xff\xfe not a trace at all");
    let errors: Vec<_> = captured.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].code.as_str(), "E-unknown-format");
    assert!(
        errors[0].message.starts_with("`junk.bin` is neither OTLP JSON nor OTLP protobuf traces"),
        "{}",
        errors[0].message
    );
    assert_eq!((errors[0].file.as_str(), errors[0].line), ("junk.bin", 0));
    assert!(errors[0].hint.as_deref().unwrap().contains("ExportTraceServiceRequest"));
}

#[test]
fn a_protobuf_span_with_a_short_id_is_left_out_with_its_pointer() {
    let mut request = to_proto(&serde_json::from_str(&example("genai-agent.json")).unwrap());
    request.resource_spans[0].scope_spans[0].spans[1].span_id = vec![1, 2, 3];
    let decoded = casebook_formats::capture::decode("the request", &request.encode_to_vec(), true);
    assert_eq!(decoded.rejected, 1);
    assert!(!decoded.undecodable());
    let spans = request.resource_spans[0].scope_spans[0].spans.len();
    assert_eq!(decoded.spans.len(), spans - 1);
    let error = decoded.diagnostics.iter().find(|d| d.is_error()).unwrap();
    assert_eq!(error.pointer.as_deref(), Some("/resourceSpans/0/scopeSpans/0/spans/1/spanId"));
    assert_eq!(error.message, "`spanId` is 3 bytes, not 8");
}

#[test]
fn a_json_body_reports_its_bad_spans_as_rejected_and_keeps_the_others() {
    let mut document: Value = serde_json::from_str(&example("genai-agent.json")).unwrap();
    let spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array_mut().unwrap();
    let total = spans.len();
    spans[2]["traceId"] = json!("not hex");
    let decoded = casebook_formats::capture::decode("the request", document.to_string().as_bytes(), false);
    assert_eq!((decoded.rejected, decoded.spans.len()), (1, total - 1));
    // JSON that is not a trace request at all is undecodable, not a partial success.
    let decoded = casebook_formats::capture::decode("the request", br#"{"version": "v1"}"#, false);
    assert!(decoded.undecodable());
    let decoded = casebook_formats::capture::decode("the request", b"\x0a\x02\x08", true);
    assert!(decoded.undecodable());
}
