//! OTLP logs carrying GenAI events: log records whose event name (the record's `event_name`, or
//! its `event.name` attribute in SDKs older than that field) is one of [`EVENTS`], read from an
//! `ExportLogsServiceRequest` in OTLP JSON (a document or JSON lines, read by [`super::otlp`]
//! beside trace files) or in protobuf ([`decode_protobuf`], what an exporter sends to
//! `/v1/logs`).
//!
//! Each becomes a [`Record`]: the [`Event`] its span would have carried had the instrumentation
//! recorded it on the span (its name; the record's attributes of the conventions read, then the
//! entries of its body, an `AnyValue` map), with the trace and span it belongs to. `Capture`
//! attaches it to that span, so the conventions read it exactly as a span event. Other log
//! records (the application's own logs) are skipped without a word.

use casebook_model::{Code, Diagnostic, Map};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use prost::Message;
use serde_json::Value;

use super::otlp::{self, At, Event};
use super::proto;
use crate::node::Node;
use crate::pointer::Ptr;
use crate::source::Cx;

/// The GenAI events read from log records: the per-message events of the older
/// instrumentations (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`), and the one
/// event per call of the newer ones (`event_only`, `span_and_event`).
pub const EVENTS: &[&str] = &[
    "gen_ai.system.message",
    "gen_ai.user.message",
    "gen_ai.assistant.message",
    "gen_ai.tool.message",
    "gen_ai.choice",
    "gen_ai.client.inference.operation.details",
];

/// A GenAI event carried by a log record, with the span it belongs to and the record's place
/// (serialisable, so a receiver can keep it until its trace becomes cases).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    /// The record's time (else its observed time), Unix nanoseconds; 0 when it has neither.
    pub time: u64,
    pub event: Event,
    /// Where the record is: its file (or request), line and column (0 in protobuf) and pointer.
    pub at: At,
}

impl Record {
    /// What tells this record from another of its span whatever request or file it came in: a
    /// digest (16 hex digits) of its time and event, so a receiver keeps a record sent twice once.
    pub fn key(&self) -> String {
        let text = serde_json::to_string(&(self.time, &self.event)).unwrap_or_default();
        blake3::hash(text.as_bytes()).to_hex()[..16].to_owned()
    }
}

/// The GenAI events of one `/v1/logs` request body, as the server's OTLP receiver reads it.
#[derive(Debug, Default)]
pub struct Decoded {
    pub records: Vec<Record>,
    /// The problems found: errors of records left out, warnings of GenAI records without a
    /// span, the error of an undecodable body.
    pub diagnostics: Vec<Diagnostic>,
    /// GenAI records left out (errors in them, or no span to join); other records (the
    /// application's own logs) are taken and not kept, so they are not counted.
    pub rejected: u64,
    /// The body holds no log record but is the request of another signal
    /// ([`super::Signal::Traces`]: an `ExportTraceServiceRequest` with spans), sent to the wrong
    /// route.
    pub other_signal: Option<super::Signal>,
}

impl Decoded {
    /// Whether the body could not be read at all (it is not an OTLP logs request in the encoding
    /// it claims), rather than some of its records.
    pub fn undecodable(&self) -> bool {
        self.records.is_empty()
            && self.diagnostics.iter().any(|d| d.is_error() && d.pointer.as_deref().and_then(record_of).is_none())
    }
}

/// Reads one request body: an `ExportLogsServiceRequest` in protobuf, or else in OTLP JSON.
/// `file` names the body in diagnostics.
pub fn decode(file: &str, bytes: &[u8], protobuf: bool) -> Decoded {
    let (records, diagnostics) = if protobuf {
        match decode_protobuf(file, bytes) {
            Ok(read) => read,
            Err(e) => {
                let traces = ExportTraceServiceRequest::decode(bytes)
                    .is_ok_and(|r| r.resource_spans.iter().flat_map(|r| &r.scope_spans).any(|s| !s.spans.is_empty()));
                let other_signal = traces.then_some(super::Signal::Traces);
                return Decoded { diagnostics: vec![*e], other_signal, ..Decoded::default() };
            }
        }
    } else {
        let (mut spans, mut records, mut diags) = (Vec::new(), Vec::new(), Vec::new());
        // Reading from memory cannot fail.
        let _ = otlp::read(file, bytes, &mut spans, &mut records, &mut diags);
        if records.is_empty() && !spans.is_empty() {
            return Decoded { other_signal: Some(super::Signal::Traces), ..Decoded::default() };
        }
        (records, diags)
    };
    let mut left_out: Vec<&str> = diagnostics
        .iter()
        .filter(|d| d.is_error() || d.code == Code::Dropped)
        .filter_map(|d| d.pointer.as_deref().and_then(record_of))
        .collect();
    left_out.sort_unstable();
    left_out.dedup();
    let rejected = left_out.len() as u64;
    Decoded { records, diagnostics, rejected, other_signal: None }
}

/// Whether `bytes` are a protobuf `ExportLogsServiceRequest` holding log records (of any kind).
pub(super) fn holds_records(bytes: &[u8]) -> bool {
    ExportLogsServiceRequest::decode(bytes)
        .is_ok_and(|r| r.resource_logs.iter().flat_map(|r| &r.scope_logs).any(|s| !s.log_records.is_empty()))
}

/// The pointer of the log record a pointer is in (`/resourceLogs/0/scopeLogs/1/logRecords/2`).
fn record_of(pointer: &str) -> Option<&str> {
    let at = pointer.find("/logRecords/")? + "/logRecords/".len();
    let end = pointer[at..].find('/').map_or(pointer.len(), |e| at + e);
    Some(&pointer[..end])
}

/// The GenAI events of a protobuf `ExportLogsServiceRequest` (the body of an OTLP/HTTP
/// `/v1/logs` request; `name` is how diagnostics name it), or the error that keeps it from being
/// read. Records of GenAI events without a span are warnings in the list; the records are located
/// by pointer (`/resourceLogs/0/scopeLogs/0/logRecords/3`), line 0.
pub fn decode_protobuf(name: &str, bytes: &[u8]) -> Result<(Vec<Record>, Vec<Diagnostic>), Box<Diagnostic>> {
    let place = |pointer: String| At { file: name.to_owned(), line: 0, column: 0, line_offset: 0, pointer };
    let request = ExportLogsServiceRequest::decode(bytes).map_err(|e| {
        Box::new(place(String::new()).diagnostic(
            Code::InvalidValue,
            format!("the body is not an OTLP protobuf `ExportLogsServiceRequest` ({e})"),
            Some("send OTLP logs as an exporter does: protobuf (`application/x-protobuf`) or OTLP JSON".into()),
        ))
    })?;
    let mut records = Vec::new();
    let mut diags = Vec::new();
    for (i, resource) in request.resource_logs.iter().enumerate() {
        for (j, scope) in resource.scope_logs.iter().enumerate() {
            for (k, record) in scope.log_records.iter().enumerate() {
                let at = place(format!("/resourceLogs/{i}/scopeLogs/{j}/logRecords/{k}"));
                records.extend(protobuf_record(record, at, &mut diags));
            }
        }
    }
    Ok((records, diags))
}

/// The GenAI events of OTLP JSON logs (a document or JSON lines), with the problems found:
/// what [`super::Capture::read`] does with a log file, for callers that want the records only.
pub fn decode_json(name: &str, reader: impl std::io::BufRead) -> std::io::Result<(Vec<Record>, Vec<Diagnostic>)> {
    let mut spans = Vec::new();
    let mut records = Vec::new();
    let mut diags = Vec::new();
    otlp::read(name, reader, &mut spans, &mut records, &mut diags)?;
    Ok((records, diags))
}

/// The GenAI event of a protobuf log record; `None` for other records, and for one without a
/// span (with a warning).
fn protobuf_record(record: &LogRecord, at: At, diags: &mut Vec<Diagnostic>) -> Option<Record> {
    let attrs = proto::attributes(&record.attributes, |k| k == "event.name" || otlp::kept(k));
    let name = match record.event_name.as_str() {
        "" => attrs.get("event.name").and_then(Value::as_str).unwrap_or_default(),
        name => name,
    };
    if !EVENTS.contains(&name) {
        return None;
    }
    let name = name.to_owned();
    if record.trace_id.len() != 16 || record.span_id.len() != 8 {
        diags.push(no_span(&name, &at));
        return None;
    }
    let mut kept: Map = attrs.into_iter().filter(|(k, _)| otlp::kept(k)).collect();
    body_into(record.body.as_ref().map(|b| proto::any_value(Some(b))), &mut kept);
    Some(Record {
        trace_id: proto::hex(&record.trace_id),
        span_id: proto::hex(&record.span_id),
        time: if record.time_unix_nano > 0 { record.time_unix_nano } else { record.observed_time_unix_nano },
        event: Event { name, attrs: kept },
        at,
    })
}

/// The body's entries after the record's attributes: the message an event carries (`content`,
/// `tool_calls`, `message`, …) is in its body; a body that is text is its `content`.
fn body_into(body: Option<Value>, attrs: &mut Map) {
    match body {
        Some(Value::Object(entries)) => attrs.extend(entries),
        Some(Value::String(text)) => {
            attrs.insert("content".into(), Value::String(text));
        }
        _ => {}
    }
}

/// The warning for a GenAI record that names no span: it cannot join its model call.
fn no_span(name: &str, at: &At) -> Diagnostic {
    at.diagnostic(
        Code::Dropped,
        format!("log record `{name}` names no span (its trace or span id is empty): it was left out"),
        Some(
            "emit the GenAI events inside the model call's span (the instrumentation does when it makes the span)"
                .into(),
        ),
    )
}

/// The `resourceLogs` item of an OTLP JSON `ExportLogsServiceRequest` at `ptr`: its GenAI
/// events into `records`; problems into `cx`.
pub(super) fn resource_logs(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, records: &mut Vec<Record>) {
    if cx.object(node, ptr).is_none() {
        return;
    }
    let Some((key, scopes)) = otlp::field(node, &["scopeLogs", "scope_logs", "instrumentationLibraryLogs"]) else {
        return;
    };
    let scopes_ptr = ptr.key(key);
    let Some(scopes) = cx.array(scopes, &scopes_ptr) else { return };
    for (i, scope) in scopes.iter().enumerate() {
        let scope_ptr = scopes_ptr.index(i);
        if cx.object(scope, &scope_ptr).is_none() {
            continue;
        }
        let Some((key, list)) = otlp::field(scope, &["logRecords", "log_records"]) else { continue };
        let list_ptr = scope_ptr.key(key);
        let Some(list) = cx.array(list, &list_ptr) else { continue };
        for (j, node) in list.iter().enumerate() {
            if let Some(record) = json_record(cx, node, &list_ptr.index(j)) {
                records.push(record);
            }
        }
    }
}

fn json_record(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Record> {
    cx.object(node, ptr)?;
    let errors = cx.diags.len();
    let attrs = match node.get("attributes") {
        Some(a) => {
            otlp::attributes(cx, a, &ptr.key("attributes"), |k| k == "event.name" || otlp::kept(k)).unwrap_or_default()
        }
        None => Map::new(),
    };
    let named = otlp::field(node, &["eventName", "event_name"]).and_then(|(_, n)| n.as_str()).filter(|n| !n.is_empty());
    let name = named.or_else(|| attrs.get("event.name").and_then(Value::as_str)).unwrap_or_default();
    if !EVENTS.contains(&name) {
        // Not a GenAI event: its attributes' problems are not the capture's.
        cx.diags.truncate(errors);
        return None;
    }
    let name = name.to_owned();
    let (line, column, line_offset) = cx.src.locate(node.offset);
    let at = At { file: cx.src.file.to_owned(), line, column, line_offset, pointer: ptr.to_string() };
    let empty = |keys: &[&'static str]| {
        otlp::field(node, keys).is_none_or(|(_, n)| n.is_null() || n.as_str().is_some_and(str::is_empty))
    };
    if empty(&["traceId", "trace_id"]) || empty(&["spanId", "span_id"]) {
        cx.diags.push(no_span(&name, &at));
        return None;
    }
    let trace_id = otlp::id(cx, node, ptr, &["traceId", "trace_id"], 16);
    let span_id = otlp::id(cx, node, ptr, &["spanId", "span_id"], 8);
    let time = otlp::time(cx, node, ptr, &["timeUnixNano", "time_unix_nano"])
        .filter(|t| *t > 0)
        .or_else(|| otlp::time(cx, node, ptr, &["observedTimeUnixNano", "observed_time_unix_nano"]))
        .unwrap_or(0);
    let mut attrs: Map = attrs.into_iter().filter(|(k, _)| k != "event.name").collect();
    if let Some(body) = node.get("body") {
        body_into(otlp::any_value(cx, body, &ptr.key("body")), &mut attrs);
    }
    if cx.diags[errors..].iter().any(Diagnostic::is_error) {
        return None;
    }
    Some(Record { trace_id: trace_id?, span_id: span_id?, time, event: Event { name, attrs }, at })
}
