//! `casebook capture` reading OTLP logs beside traces: GenAI events as log records join their
//! spans. The files under `tests/data/capture/` were made by `scripts/gen-traces/openai_v2_logs.py`
//! with the real `opentelemetry-instrumentation-openai-v2` (2.1b0: per-message events with the
//! Events API; 2.4b0 with opentelemetry-util-genai 1.1b0: one
//! `gen_ai.client.inference.operation.details` event per call) and the OpenAI client against a
//! fake model: one question, a tool call, then the answer, under an application span.

use std::path::Path;

use casebook_formats::capture::{Capture, Captured, logs};
use casebook_model::Case;
use serde_json::{Value, json};

fn data(name: &str) -> Vec<u8> {
    fs_err::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/capture").join(name)).unwrap()
}

/// Captures the named files (from `tests/data/capture`, or `(name, text)` given inline).
fn capture(files: &[(&str, &[u8])]) -> Captured {
    let mut capture = Capture::new();
    for (name, bytes) in files {
        capture.read(name, *bytes).unwrap();
    }
    capture.finish()
}

/// `(code, line, column, pointer)` of each diagnostic.
fn places(captured: &Captured) -> Vec<(String, u64, u64, String)> {
    captured
        .diagnostics
        .iter()
        .map(|d| (d.code.as_str().to_owned(), d.line, d.column, d.pointer.clone().unwrap_or_default()))
        .collect()
}

fn json_of(case: &Case) -> Value {
    serde_json::to_value(case).unwrap()
}

/// What the one case of the question must hold, whichever form its messages came in.
fn assert_weather_case(captured: &Captured) {
    assert!(captured.diagnostics.is_empty(), "{:#?}", captured.diagnostics);
    assert_eq!(captured.cases.len(), 1, "{:#?}", captured.cases);
    let case = json_of(&captured.cases[0]);
    assert_eq!(case["input"], "What is the weather in Paris?");
    assert_eq!(
        case["context"],
        json!([{"type": "custom", "source": "system_instructions", "content": "You answer questions about the weather."}])
    );
    assert_eq!(
        case["expected"],
        json!({"output": "It is rainy in Paris, 57°F.",
            "tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]})
    );
    assert_eq!(case["review"], "draft");
    assert_eq!(case["metadata"]["service"], "weather-bot");
    assert_eq!(case["provenance"]["convention"], "gen_ai-events");
}

#[test]
fn per_message_log_events_give_spans_without_content_their_conversation() {
    let traces = data("openai-v2-old-traces.json");
    let logs = data("openai-v2-old-logs.json");
    // The spans alone recorded no content: no case, and the hint says to capture the logs.
    let alone = capture(&[("traces.json", &traces)]);
    assert!(alone.cases.is_empty());
    assert_eq!(places(&alone), [("W-no-content".into(), 179, 7, "/resourceSpans/0/scopeSpans/1/spans/0".into())]);
    let hint = alone.diagnostics[0].hint.as_deref().unwrap();
    assert!(hint.contains("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only"), "{hint}");
    assert!(hint.contains("OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental"), "{hint}");
    assert!(hint.contains("casebook capture traces.json logs.json"), "{hint}");

    // With the logs, in either order, as a document or as JSON lines.
    assert_weather_case(&capture(&[("traces.json", &traces), ("logs.json", &logs)]));
    assert_weather_case(&capture(&[("logs.json", &logs), ("traces.json", &traces)]));
    let lines = data("openai-v2-old-logs.jsonl");
    let captured = capture(&[("traces.json", &traces), ("logs.jsonl", &lines)]);
    assert_weather_case(&captured);
    // A log file given twice adds nothing twice.
    let twice = capture(&[("traces.json", &traces), ("logs.json", &logs), ("logs.jsonl", &lines)]);
    assert_eq!(twice.cases, captured.cases);
    // Logs count no spans.
    assert_eq!((captured.spans, captured.invocations), (3, 1));
}

#[test]
fn operation_details_log_events_give_spans_without_content_their_conversation() {
    let traces = data("openai-v2-new-traces.json");
    let captured = capture(&[("traces.json", &traces), ("logs.json", &data("openai-v2-new-logs.json"))]);
    assert_weather_case(&captured);
}

#[test]
fn protobuf_logs_make_the_same_case_as_their_json() {
    for which in ["old", "new"] {
        let traces = data(&format!("openai-v2-{which}-traces.json"));
        let from_json =
            capture(&[("traces.json", &traces), ("logs.json", &data(&format!("openai-v2-{which}-logs.json")))]);
        let (records, diags) = logs::decode_protobuf("logs.pb", &data(&format!("openai-v2-{which}-logs.pb"))).unwrap();
        assert!(diags.is_empty(), "{diags:#?}");
        assert_eq!(records.len(), if which == "old" { 8 } else { 2 });
        let mut capture = Capture::new();
        for record in records {
            capture.push_record(record);
        }
        capture.read("traces.json", traces.as_slice()).unwrap();
        let from_protobuf = capture.finish();
        assert_weather_case(&from_protobuf);
        assert_eq!(from_protobuf.cases, from_json.cases, "{which}");
    }
    // The contract's `push_event`: the event alone, without a place.
    let (records, _) = logs::decode_protobuf("logs.pb", &data("openai-v2-new-logs.pb")).unwrap();
    let mut capture = Capture::new();
    for record in records {
        capture.push_event(record.trace_id, record.span_id, record.event);
    }
    capture.read("traces.json", data("openai-v2-new-traces.json").as_slice()).unwrap();
    assert_weather_case(&capture.finish());
}

#[test]
fn json_logs_decode_to_the_same_records_as_protobuf() {
    let (from_json, diags) = logs::decode_json("logs.json", data("openai-v2-old-logs.json").as_slice()).unwrap();
    assert!(diags.is_empty(), "{diags:#?}");
    let (from_protobuf, _) = logs::decode_protobuf("logs.pb", &data("openai-v2-old-logs.pb")).unwrap();
    let names = |records: &[logs::Record]| records.iter().map(|r| r.event.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&from_json),
        [
            "gen_ai.system.message",
            "gen_ai.user.message",
            "gen_ai.choice",
            "gen_ai.system.message",
            "gen_ai.user.message",
            "gen_ai.assistant.message",
            "gen_ai.tool.message",
            "gen_ai.choice"
        ]
    );
    for (j, p) in from_json.iter().zip(&from_protobuf) {
        assert_eq!(
            (&j.trace_id, &j.span_id, j.time, &j.event.attrs),
            (&p.trace_id, &p.span_id, p.time, &p.event.attrs)
        );
    }
    assert_eq!(
        from_json[6].event.attrs,
        json!({"gen_ai.system": "openai", "content": "rainy, 57°F", "id": "call_w1"}).as_object().unwrap().clone()
    );
    assert_eq!((from_json[3].at.line, from_json[3].at.column), (209, 7));
    assert_eq!(from_protobuf[3].at.pointer, "/resourceLogs/0/scopeLogs/0/logRecords/3");
}

#[test]
fn log_records_whose_span_never_comes_are_one_warning_per_span_at_its_first_record() {
    let captured = capture(&[("logs.json", &data("openai-v2-old-logs.json"))]);
    assert!(captured.cases.is_empty());
    assert_eq!(
        places(&captured),
        [
            ("W-dropped".into(), 38, 7, "/resourceLogs/0/scopeLogs/0/logRecords/0".into()),
            ("W-dropped".into(), 209, 7, "/resourceLogs/0/scopeLogs/0/logRecords/3".into()),
        ]
    );
    let d = &captured.diagnostics[0];
    assert_eq!(d.file, "logs.json");
    assert!(d.message.starts_with("log record `gen_ai.system.message` (and 2 more of its records) belongs to span 130162349f09b006 of trace b695922b96500b11b765ace95dc09cd8, which is not in the traces read"), "{}", d.message);
    assert!(d.hint.as_deref().unwrap().contains("casebook capture traces.json logs.json"));
    // In protobuf: located by pointer.
    let (records, _) = logs::decode_protobuf("logs.pb", &data("openai-v2-new-logs.pb")).unwrap();
    let mut capture = Capture::new();
    records.into_iter().for_each(|r| capture.push_record(r));
    let captured = capture.finish();
    assert_eq!(
        places(&captured),
        [
            ("W-dropped".into(), 0, 0, "/resourceLogs/0/scopeLogs/0/logRecords/0".into()),
            ("W-dropped".into(), 0, 0, "/resourceLogs/0/scopeLogs/0/logRecords/1".into()),
        ]
    );
}

/// A log record in the collector's OTLP JSON shape (the 2.1b0 records above), on one line.
fn record(trace_id: &str, span_id: &str, name: &str, body: &str) -> String {
    format!(
        r#"{{"timeUnixNano":"1","attributes":[{{"key":"event.name","value":{{"stringValue":"{name}"}}}}],"traceId":"{trace_id}","spanId":"{span_id}","body":{body}}}"#
    )
}

fn logs_doc(records: &[String]) -> String {
    format!(r#"{{"resourceLogs":[{{"scopeLogs":[{{"logRecords":[{}]}}]}}]}}"#, records.join(","))
}

#[test]
fn bad_log_records_are_located_and_other_logs_are_skipped() {
    const T: &str = "0123456789abcdef0123456789abcdef";
    // The application's own logs, whatever their attributes, are none of the capture's business.
    let app = r#"{"timeUnixNano":"1","body":{"stringValue":"cache miss"},"attributes":[{"key":"content","value":{"weird":1}}]}"#;
    let captured = capture(&[("app.json", logs_doc(&[app.to_owned()]).as_bytes())]);
    assert!(captured.diagnostics.is_empty(), "{:#?}", captured.diagnostics);

    // A GenAI record with an id that is not hex: an error at the id, nothing captured.
    let bad = record("xyz", "0011223344556677", "gen_ai.user.message", r#"{"kvlistValue":{"values":[]}}"#);
    let doc = logs_doc(&[app.to_owned(), bad]);
    let captured = capture(&[("bad.json", doc.as_bytes())]);
    assert!(captured.has_errors());
    let col = doc.find(r#""xyz""#).unwrap() as u64 + 1;
    assert_eq!(
        places(&captured),
        [("E-invalid-value".into(), 1, col, "/resourceLogs/0/scopeLogs/0/logRecords/1/traceId".into())]
    );

    // A GenAI record outside any span: a warning at it.
    let loose = record("", "", "gen_ai.user.message", r#"{"kvlistValue":{"values":[]}}"#);
    let captured = capture(&[("loose.json", logs_doc(&[loose]).as_bytes())]);
    assert_eq!(places(&captured), [("W-dropped".into(), 1, 47, "/resourceLogs/0/scopeLogs/0/logRecords/0".into())]);
    assert!(captured.diagnostics[0].message.contains("names no span"), "{:#?}", captured.diagnostics);

    // A GenAI record whose body is not an OTLP value: an error at the body.
    let odd = record(T, "0011223344556677", "gen_ai.user.message", r#"{"textValue":"hi"}"#);
    let captured = capture(&[("odd.json", logs_doc(&[odd]).as_bytes())]);
    assert_eq!(captured.diagnostics[0].pointer.as_deref(), Some("/resourceLogs/0/scopeLogs/0/logRecords/0/body"));
    assert!(captured.has_errors());

    // A body that is not protobuf.
    let err = logs::decode_protobuf("body", b"\xff\xff\xff not protobuf").unwrap_err();
    assert_eq!((err.code.as_str(), err.file.as_str(), err.line), ("E-invalid-value", "body", 0));
    assert!(err.message.contains("not an OTLP protobuf `ExportLogsServiceRequest`"), "{}", err.message);
}

/// A span in the OTLP JSON shape of the traces above, with `attributes` and `events` as given.
fn span_doc(attributes: &str, events: &str) -> String {
    format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"0123456789abcdef0123456789abcdef","spanId":"0011223344556677","name":"chat gpt-4o-mini","attributes":[{attributes}],"events":[{events}]}}]}}]}}]}}"#
    )
}

#[test]
fn a_span_that_recorded_its_events_itself_keeps_them_alone() {
    // `span_and_event`: the span carries the user message as a span event, and the log the same.
    let chat = r#"{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}"#;
    let event = r#"{"name":"gen_ai.user.message","attributes":[{"key":"content","value":{"stringValue":"Hi?"}}]}"#;
    let choice = r#"{"name":"gen_ai.choice","attributes":[{"key":"message","value":{"stringValue":"{\"role\":\"assistant\",\"content\":\"Hello.\"}"}}]}"#;
    let trace = span_doc(chat, &format!("{event},{choice}"));
    let log = logs_doc(&[record(
        "0123456789abcdef0123456789abcdef",
        "0011223344556677",
        "gen_ai.user.message",
        r#"{"kvlistValue":{"values":[{"key":"content","value":{"stringValue":"Hi?"}}]}}"#,
    )]);
    let captured = capture(&[("t.json", trace.as_bytes()), ("l.json", log.as_bytes())]);
    assert!(captured.diagnostics.is_empty(), "{:#?}", captured.diagnostics);
    let case = json_of(&captured.cases[0]);
    assert_eq!((case["input"].as_str(), case.get("turns")), (Some("Hi?"), None));
    assert_eq!(case["expected"]["output"], "Hello.");
}

#[test]
fn the_no_content_hint_follows_the_instrumentation_of_the_span() {
    let hint = |attributes: &str| {
        let captured = capture(&[("t.json", span_doc(attributes, "").as_bytes())]);
        assert_eq!(captured.diagnostics.len(), 1, "{:#?}", captured.diagnostics);
        captured.diagnostics[0].hint.clone().unwrap()
    };
    // OpenInference (`openinference-instrumentation-openai` with inputs hidden: the span kind alone).
    let oi = hint(r#"{"key":"openinference.span.kind","value":{"stringValue":"LLM"}}"#);
    assert!(oi.contains("OPENINFERENCE_HIDE_INPUTS") && oi.contains("OPENINFERENCE_HIDE_OUTPUTS"), "{oi}");
    // OpenLLMetry (`opentelemetry-instrumentation-openai` 0.62.4's attributes, with
    // TRACELOOP_TRACE_CONTENT=false: no `gen_ai.input.messages`).
    let llmetry = hint(
        r#"{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},{"key":"gen_ai.is_streaming","value":{"boolValue":false}},{"key":"gen_ai.openai.api_base","value":{"stringValue":"http://127.0.0.1:1/v1/"}}"#,
    );
    assert!(llmetry.contains("TRACELOOP_TRACE_CONTENT"), "{llmetry}");
    // The OpenTelemetry GenAI instrumentations.
    let genai = hint(r#"{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}"#);
    assert!(genai.contains("span_only") && !genai.contains("=true"), "{genai}");
}

#[test]
fn protobuf_records_outside_a_span_are_warnings_at_their_pointer() {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    use prost::Message;
    let text = |s: &str| Some(AnyValue { value: Some(any_value::Value::StringValue(s.into())) });
    // As an SDK 1.3x+ writes them: the event name in `event_name`, the message in the body.
    let app = LogRecord { body: text("cache miss"), ..LogRecord::default() };
    let loose = LogRecord { event_name: "gen_ai.user.message".into(), body: text("Hi?"), ..LogRecord::default() };
    let inside = LogRecord {
        event_name: "gen_ai.user.message".into(),
        body: text("Hi?"),
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        ..LogRecord::default()
    };
    let request = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            scope_logs: vec![ScopeLogs { log_records: vec![app, loose, inside], ..ScopeLogs::default() }],
            ..ResourceLogs::default()
        }],
    };
    let (records, diags) = logs::decode_protobuf("body", &request.encode_to_vec()).unwrap();
    assert_eq!(
        diags.iter().map(|d| (d.code.as_str(), d.pointer.as_deref())).collect::<Vec<_>>(),
        [("W-dropped", Some("/resourceLogs/0/scopeLogs/0/logRecords/1"))]
    );
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(
        (record.trace_id.as_str(), record.span_id.as_str()),
        ("01".repeat(16).as_str(), "02".repeat(8).as_str())
    );
    // A body that is text is the message's content.
    assert_eq!(Value::Object(record.event.attrs.clone()), json!({"content": "Hi?"}));
}
