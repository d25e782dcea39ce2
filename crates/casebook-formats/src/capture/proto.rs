//! OTLP protobuf traces: an `ExportTraceServiceRequest` as exporters send it over HTTP
//! (`application/x-protobuf`, the default of the OpenTelemetry SDKs) or as a file of its bytes,
//! decoded with the generated `opentelemetry-proto` types and read into the same [`Span`]s as
//! OTLP JSON ([`super::otlp`]): ids as lowercase hex, only the attributes of the conventions read
//! (the same "kept" rule), an error status with its message, events, the resource's
//! `service.name`. A protobuf message has no lines: problems are located by their JSON Pointer
//! into the request (`/resourceSpans/0/scopeSpans/0/spans/3/traceId`), with line 0.

use casebook_model::{Code, Diagnostic, Map};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use prost::Message;
use serde_json::{Number, Value};

use super::otlp::{At, Event, Span, kept};

/// What a protobuf body held: the spans read (pushed to the caller's list) and how many were
/// left out for errors.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    pub spans: u64,
    pub rejected: u64,
}

/// Decodes `bytes` as an `ExportTraceServiceRequest`, adding its spans to `spans` and its
/// problems to `diags`. A body that is not such a message is one error (`E-unknown-format`) and
/// no span; a span whose ids are not 16 and 8 bytes is left out with an error at its pointer.
pub fn read(file: &str, bytes: &[u8], spans: &mut Vec<Span>, diags: &mut Vec<Diagnostic>) -> Read {
    let request = match ExportTraceServiceRequest::decode(bytes) {
        Ok(request) => request,
        Err(e) => {
            diags.push(neither(file, &e.to_string()));
            return Read::default();
        }
    };
    let mut read = Read::default();
    for (r, resource_spans) in request.resource_spans.into_iter().enumerate() {
        let service = resource_spans.resource.as_ref().and_then(|resource| {
            resource.attributes.iter().find(|kv| kv.key == "service.name").and_then(|kv| {
                match any_value(kv.value.as_ref()) {
                    Value::String(s) => Some(s),
                    _ => None,
                }
            })
        });
        for (s, scope) in resource_spans.scope_spans.into_iter().enumerate() {
            for (i, span) in scope.spans.into_iter().enumerate() {
                let pointer = format!("/resourceSpans/{r}/scopeSpans/{s}/spans/{i}");
                match convert(file, span, pointer, service.as_deref()) {
                    Ok(span) => {
                        spans.push(span);
                        read.spans += 1;
                    }
                    Err(d) => {
                        diags.push(*d);
                        read.rejected += 1;
                    }
                }
            }
        }
    }
    read
}

/// The error for a body that is neither OTLP JSON nor OTLP protobuf.
pub fn neither(file: &str, detail: &str) -> Diagnostic {
    Diagnostic {
        severity: Code::UnknownFormat.severity(),
        code: Code::UnknownFormat,
        message: format!(
            "`{file}` is neither OTLP JSON nor OTLP protobuf traces (as protobuf: {})",
            casebook_model::excerpt(detail)
        ),
        file: file.to_owned(),
        line: 0,
        column: 0,
        pointer: Some(String::new()),
        path: None,
        hint: Some(
            "send an OTLP `ExportTraceServiceRequest`: JSON (`{\"resourceSpans\": [...]}`, or JSON lines of them) or its protobuf bytes, as an OpenTelemetry exporter writes them"
                .into(),
        ),
        case: None,
        line_offset: None,
    }
}

fn convert(
    file: &str,
    span: opentelemetry_proto::tonic::trace::v1::Span,
    pointer: String,
    service: Option<&str>,
) -> Result<Span, Box<Diagnostic>> {
    let at = At { file: file.to_owned(), line: 0, column: 0, line_offset: 0, pointer };
    let id = |bytes: &[u8], len: usize, key: &str| -> Result<String, Box<Diagnostic>> {
        if bytes.len() == len {
            return Ok(hex(bytes));
        }
        let mut d = at.diagnostic(
            Code::InvalidValue,
            format!("`{key}` is {} bytes, not {len}", bytes.len()),
            Some(format!("an OTLP {key} is {len} bytes; the exporter that sent it does not follow OTLP")),
        );
        d.pointer = Some(format!("{}/{key}", at.pointer));
        Err(Box::new(d))
    };
    let trace_id = id(&span.trace_id, 16, "traceId")?;
    let span_id = id(&span.span_id, 8, "spanId")?;
    let parent_id =
        if span.parent_span_id.is_empty() { None } else { Some(id(&span.parent_span_id, 8, "parentSpanId")?) };
    let error = span
        .status
        .as_ref()
        .filter(|status| status.code == StatusCode::Error as i32)
        .map(|status| status.message.clone());
    let events = span
        .events
        .iter()
        .map(|event| Event { name: event.name.clone(), attrs: attributes(&event.attributes, kept) })
        .collect();
    Ok(Span {
        trace_id,
        span_id,
        parent_id,
        attrs: attributes(&span.attributes, kept),
        name: span.name,
        start: span.start_time_unix_nano,
        end: span.end_time_unix_nano,
        service: service.map(str::to_owned),
        error,
        events,
        at,
    })
}

/// Bytes as lowercase hex (trace and span ids).
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A list of OTLP `KeyValue`s as a JSON object, keeping the keys `keep` wants (a key met twice
/// keeps its last value, as in OTLP JSON).
pub(crate) fn attributes(list: &[KeyValue], keep: impl Fn(&str) -> bool) -> Map {
    let mut out = Map::new();
    for kv in list.iter().filter(|kv| keep(&kv.key)) {
        out.insert(kv.key.clone(), any_value(kv.value.as_ref()));
    }
    out
}

/// An OTLP `AnyValue` as JSON, as [`super::otlp`] reads the JSON encoding: strings, booleans
/// and numbers as they are (a double that JSON cannot hold, NaN or infinite, as `null`), arrays
/// and key-value lists as arrays and objects, bytes as their base64 text (protobuf's JSON
/// mapping), an empty value as `null`.
pub(crate) fn any_value(value: Option<&AnyValue>) -> Value {
    let Some(inner) = value.and_then(|v| v.value.as_ref()) else { return Value::Null };
    match inner {
        any_value::Value::StringValue(s) => Value::String(s.clone()),
        any_value::Value::BoolValue(b) => Value::Bool(*b),
        any_value::Value::IntValue(i) => Value::Number(Number::from(*i)),
        any_value::Value::DoubleValue(d) => Number::from_f64(*d).map_or(Value::Null, Value::Number),
        any_value::Value::ArrayValue(array) => Value::Array(array.values.iter().map(|v| any_value(Some(v))).collect()),
        any_value::Value::KvlistValue(list) => Value::Object(attributes(&list.values, |_| true)),
        any_value::Value::BytesValue(bytes) => Value::String(base64(bytes)),
        // Profiling's string-table reference has no meaning in traces: treated as absent.
        any_value::Value::StringValueStrindex(_) => Value::Null,
    }
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(DIGITS[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_written_in_base64() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0, 1, 2, 3, 4, 5, 6, 7]), "AAECAwQFBgc=");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }
}
