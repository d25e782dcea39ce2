//! OTLP JSON trace files: an `ExportTraceServiceRequest` document, or JSON lines of them as the
//! collector's file exporter writes, read into [`Span`]s; log files the same way
//! (`ExportLogsServiceRequest`, told apart by their `resourceLogs`), their GenAI events read by
//! [`super::logs`]. Field names are read in the
//! lowerCamelCase of the OTLP JSON encoding and in the protobuf names (`resource_spans`); trace
//! and span ids in hex (the OTLP JSON rule) or base64 (protobuf's JSON mapping). Only the
//! attributes the conventions casebook reads are kept, so memory follows the conversations, not
//! the spans' other attributes.

use std::io::{self, BufRead};

use casebook_model::{Code, Diagnostic, Map};
use serde_json::{Number, Value};

use crate::json;
use crate::node::{Node, NodeValue};
use crate::pointer::Ptr;
use crate::source::{Cx, Source};

use super::logs::{self, Record};

/// One span, with the attributes casebook reads.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Span {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    pub parent_id: Option<String>,
    pub name: String,
    /// Unix nanoseconds (0 when the file does not say).
    pub start: u64,
    pub end: u64,
    /// The resource's `service.name`.
    pub service: Option<String>,
    /// The status message of a span whose status is an error (`""` when it has none).
    pub error: Option<String>,
    pub attrs: Map,
    pub events: Vec<Event>,
    /// Where the span is, for warnings about it.
    pub at: At,
}

/// A span event (GenAI events on spans), with the attributes casebook reads.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Event {
    pub name: String,
    pub attrs: Map,
}

/// A span's place in its file (line 0 for a protobuf body, which has no lines).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct At {
    pub file: String,
    pub line: u64,
    pub column: u64,
    pub line_offset: u64,
    pub pointer: String,
}

impl At {
    pub fn diagnostic(&self, code: Code, message: String, hint: Option<String>) -> Diagnostic {
        Diagnostic {
            severity: code.severity(),
            code,
            message,
            file: self.file.clone(),
            line: self.line,
            column: self.column,
            pointer: Some(self.pointer.clone()),
            path: None,
            hint,
            case: None,
            line_offset: (self.line > 0).then_some(self.line_offset),
        }
    }
}

/// Attribute namespaces of the conventions casebook reads (OpenTelemetry GenAI, its deprecated
/// forms, OpenInference, pydantic-ai's own).
const KEPT: &[&str] = &[
    "gen_ai.",
    "llm.",
    "input.",
    "output.",
    "openinference.",
    "tool.",
    "retrieval.",
    "session.",
    "content",
    "message",
    "pydantic_ai.",
];

pub(crate) fn kept(key: &str) -> bool {
    KEPT.iter().any(|p| key.starts_with(p))
        || matches!(
            key,
            "tool_calls"
                | "role"
                | "index"
                | "finish_reason"
                | "id"
                | "tool_call_id"
                | "tool_arguments"
                | "tool_response"
                | "agent.name"
        )
}

/// Reads one trace file, adding its spans and the problems found in it. A document is walked
/// span by span ([`super::document`]): memory holds one span at a time, whatever the file's
/// size. JSON lines (the first line is a whole JSON value with more after it) are read a line
/// at a time.
pub fn read(
    file: &str,
    mut reader: impl BufRead,
    spans: &mut impl Extend<Span>,
    records: &mut Vec<Record>,
    diags: &mut impl Extend<Diagnostic>,
) -> io::Result<()> {
    let bom = reader.fill_buf()?.starts_with(b"\xef\xbb\xbf");
    if bom {
        reader.consume(3);
    }
    let mut out = super::document::Out { file, spans, records, diags };
    super::document::read(reader, if bom { 3 } else { 0 }, &mut out)
}

/// The lines of a JSON-lines file from line `number`, at byte `offset`.
pub(super) fn lines(
    file: &str,
    mut reader: impl BufRead,
    mut number: u64,
    mut offset: u64,
    spans: &mut impl Extend<Span>,
    records: &mut Vec<Record>,
    diags: &mut impl Extend<Diagnostic>,
) -> io::Result<()> {
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        if reader.read_until(b'\n', &mut buffer)? == 0 {
            return Ok(());
        }
        line(file, &buffer, number, offset, spans, records, diags);
        offset += buffer.len() as u64;
        number += 1;
    }
}

/// One line of a JSON-lines file: an `ExportTraceServiceRequest` (or `ExportLogsServiceRequest`).
fn line(
    file: &str,
    bytes: &[u8],
    number: u64,
    offset: u64,
    spans: &mut impl Extend<Span>,
    records: &mut Vec<Record>,
    diags: &mut impl Extend<Diagnostic>,
) {
    let Some(text) = utf8(file, bytes, number, offset, diags) else { return };
    let body = text.trim_end_matches(['\n', '\r']);
    if body.trim().is_empty() {
        return;
    }
    let src = Source::new(file, body, number, offset);
    let mut cx = Cx::new(&src, None);
    match json::parse(body) {
        Ok(root) => request(&mut cx, &root, &Ptr::ROOT, spans, records),
        Err(e) => syntax(&mut cx, e),
    }
    diags.extend(cx.diags);
}

/// The text of `bytes`, or an error at the first byte that is not UTF-8.
fn utf8<'b>(
    file: &str,
    bytes: &'b [u8],
    line: u64,
    offset: u64,
    diags: &mut impl Extend<Diagnostic>,
) -> Option<&'b str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(e) => {
            let valid = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
            let src = Source::new(file, valid, line, offset);
            let mut d =
                src.diagnostic(Code::InvalidUtf8, valid.len(), String::new(), "the file is not UTF-8 text".into());
            d.hint = Some("OTLP JSON is UTF-8: export the traces again, or convert the file".into());
            diags.extend([d]);
            None
        }
    }
}

/// What a file that is not OTLP traces is told to be.
pub(super) const NOT_TRACES_HINT: &str = "give OTLP JSON traces: an `ExportTraceServiceRequest` (`{\"resourceSpans\": [...]}`), or JSON lines of them; logs carrying GenAI events: an `ExportLogsServiceRequest` (`{\"resourceLogs\": [...]}`)";

pub(super) fn syntax(cx: &mut Cx<'_>, e: json::SyntaxError) {
    let code = if e.too_deep { Code::TooDeep } else { Code::JsonSyntax };
    cx.report(code, e.offset, &Ptr::ROOT, e.message);
}

/// An `ExportTraceServiceRequest`, or an `ExportLogsServiceRequest`.
pub(super) fn request(
    cx: &mut Cx<'_>,
    root: &Node,
    ptr: &Ptr<'_>,
    spans: &mut impl Extend<Span>,
    records: &mut Vec<Record>,
) {
    if cx.object(root, ptr).is_none() {
        return;
    }
    if let Some((key, list)) = field(root, &["resourceLogs", "resource_logs"]) {
        let list_ptr = ptr.key(key);
        let Some(items) = cx.array(list, &list_ptr) else { return };
        for (i, item) in items.iter().enumerate() {
            logs::resource_logs(cx, item, &list_ptr.index(i), records);
        }
        return;
    }
    let Some((key, list)) = field(root, &["resourceSpans", "resource_spans"]) else {
        let d = cx.report(
            Code::MissingField,
            root.offset,
            ptr,
            "missing `resourceSpans` (or `resourceLogs`): this is not an OTLP trace or log document",
        );
        d.hint = Some(NOT_TRACES_HINT.into());
        return;
    };
    let list_ptr = ptr.key(key);
    let Some(items) = cx.array(list, &list_ptr) else { return };
    for (i, item) in items.iter().enumerate() {
        resource_spans(cx, item, &list_ptr.index(i), spans);
    }
}

fn resource_spans(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, spans: &mut impl Extend<Span>) {
    if cx.object(node, ptr).is_none() {
        return;
    }
    let service = node.get("resource").and_then(|r| service(cx, r, &ptr.key("resource")));
    let Some((key, scopes)) = field(node, &["scopeSpans", "scope_spans", "instrumentationLibrarySpans"]) else {
        return;
    };
    let scopes_ptr = ptr.key(key);
    let Some(scopes) = cx.array(scopes, &scopes_ptr) else { return };
    for (i, scope) in scopes.iter().enumerate() {
        let scope_ptr = scopes_ptr.index(i);
        if cx.object(scope, &scope_ptr).is_none() {
            continue;
        }
        let Some(list) = scope.get("spans") else { continue };
        let list_ptr = scope_ptr.key("spans");
        let Some(list) = cx.array(list, &list_ptr) else { continue };
        for (j, node) in list.iter().enumerate() {
            if let Some(span) = span(cx, node, &list_ptr.index(j), service.as_deref()) {
                spans.extend([span]);
            }
        }
    }
}

/// The `service.name` of a resource.
pub(super) fn service(cx: &mut Cx<'_>, resource: &Node, ptr: &Ptr<'_>) -> Option<String> {
    let list = resource.get("attributes")?;
    let mut found = attributes(cx, list, &ptr.key("attributes"), |k| k == "service.name")?;
    match found.remove("service.name") {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

pub(super) fn span(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, service: Option<&str>) -> Option<Span> {
    cx.object(node, ptr)?;
    let errors = cx.diags.len();
    let trace_id = id(cx, node, ptr, &["traceId", "trace_id"], 16);
    let span_id = id(cx, node, ptr, &["spanId", "span_id"], 8);
    let parent_id = match field(node, &["parentSpanId", "parent_span_id"]) {
        Some((_, n)) if n.as_str().is_some_and(str::is_empty) || n.is_null() => None,
        Some((key, _)) => id(cx, node, ptr, &[key], 8),
        None => None,
    };
    let name = match node.get("name") {
        Some(n) => cx.opt_string(n, &ptr.key("name")).unwrap_or_default(),
        None => String::new(),
    };
    let start = time(cx, node, ptr, &["startTimeUnixNano", "start_time_unix_nano"]);
    let end = time(cx, node, ptr, &["endTimeUnixNano", "end_time_unix_nano"]);
    let attrs = match node.get("attributes") {
        Some(a) => attributes(cx, a, &ptr.key("attributes"), kept).unwrap_or_default(),
        None => Map::new(),
    };
    let mut events = Vec::new();
    if let Some(list) = node.get("events") {
        let list_ptr = ptr.key("events");
        if let Some(list) = cx.array(list, &list_ptr) {
            for (i, event) in list.iter().enumerate() {
                let event_ptr = list_ptr.index(i);
                if cx.object(event, &event_ptr).is_none() {
                    continue;
                }
                let name = event.get("name").and_then(Node::as_str).unwrap_or_default().to_owned();
                let attrs = match event.get("attributes") {
                    Some(a) => attributes(cx, a, &event_ptr.key("attributes"), kept).unwrap_or_default(),
                    None => Map::new(),
                };
                events.push(Event { name, attrs });
            }
        }
    }
    let error = node.get("status").and_then(|status| {
        let code = status.get("code")?;
        let is_error = match &code.value {
            NodeValue::Number(n) => n.as_ref() == "2",
            NodeValue::String(s) => s.as_ref() == "STATUS_CODE_ERROR" || s.as_ref() == "2",
            _ => false,
        };
        is_error.then(|| status.get("message").and_then(Node::as_str).unwrap_or_default().to_owned())
    });
    if cx.diags[errors..].iter().any(Diagnostic::is_error) {
        return None;
    }
    let (line, column, line_offset) = cx.src.locate(node.offset);
    Some(Span {
        trace_id: trace_id?,
        span_id: span_id?,
        parent_id,
        name,
        start: start.unwrap_or(0),
        end: end.unwrap_or(0),
        service: service.map(str::to_owned),
        error,
        attrs,
        events,
        at: At { file: cx.src.file.to_owned(), line, column, line_offset, pointer: ptr.to_string() },
    })
}

/// The first of `keys` the object has, with its value.
pub(super) fn field<'n, 's>(node: &'n Node<'s>, keys: &[&'static str]) -> Option<(&'static str, &'n Node<'s>)> {
    keys.iter().find_map(|k| node.get(k).map(|n| (*k, n)))
}

/// A trace or span id of `bytes` bytes, as lowercase hex.
pub(super) fn id(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, keys: &[&'static str], bytes: usize) -> Option<String> {
    let Some((key, value)) = field(node, keys) else {
        cx.missing(node, ptr, keys[0], None);
        return None;
    };
    let text = cx.string(value, &ptr.key(key))?;
    if text.len() == bytes * 2 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Some(text.to_ascii_lowercase());
    }
    if let Some(decoded) = base64(&text).filter(|d| d.len() == bytes) {
        return Some(decoded.iter().map(|b| format!("{b:02x}")).collect());
    }
    let d = cx.report(
        Code::InvalidValue,
        value.offset,
        &ptr.key(key),
        format!("`{key}` is not {bytes} bytes in hex: `{}`", casebook_model::excerpt(&text)),
    );
    d.hint = Some(format!("OTLP JSON writes ids as {} hex digits", bytes * 2));
    None
}

pub(super) fn time(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, keys: &[&'static str]) -> Option<u64> {
    let (key, value) = field(node, keys)?;
    let parsed = match &value.value {
        NodeValue::String(s) => s.parse::<u64>().ok(),
        NodeValue::Number(n) => n.parse::<u64>().ok(),
        _ => None,
    };
    if parsed.is_none() {
        cx.report(Code::InvalidValue, value.offset, &ptr.key(key), format!("`{key}` is not a count of nanoseconds"));
    }
    parsed
}

/// A list of `{key, value}` attributes, keeping those `keep` wants.
pub(super) fn attributes(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, keep: impl Fn(&str) -> bool) -> Option<Map> {
    let items = cx.array(node, ptr)?;
    let mut out = Map::new();
    for (i, item) in items.iter().enumerate() {
        let item_ptr = ptr.index(i);
        let Some(key) = item.get("key") else {
            cx.missing(item, &item_ptr, "key", None);
            continue;
        };
        let Some(key) = cx.string(key, &item_ptr.key("key")) else { continue };
        if !keep(&key) {
            continue;
        }
        let value = match item.get("value") {
            Some(v) => any_value(cx, v, &item_ptr.key("value")),
            None => Some(Value::Null),
        };
        if let Some(value) = value {
            out.insert(key, value);
        }
    }
    Some(out)
}

/// An OTLP `AnyValue` as JSON: strings, booleans and numbers as they are, arrays and key-value
/// lists as arrays and objects, bytes as their base64 text.
pub(super) fn any_value(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Value> {
    let entries = cx.object(node, ptr)?;
    let Some(entry) = entries.first() else { return Some(Value::Null) };
    let inner = &entry.value;
    let inner_ptr = ptr.key(&entry.key);
    Some(match entry.key.as_ref() {
        "stringValue" | "string_value" | "bytesValue" | "bytes_value" => Value::String(cx.string(inner, &inner_ptr)?),
        "boolValue" | "bool_value" => match inner.value {
            NodeValue::Bool(b) => Value::Bool(b),
            _ => {
                cx.wrong_type(inner, &inner_ptr, "a boolean");
                return None;
            }
        },
        "intValue" | "int_value" | "doubleValue" | "double_value" => {
            let text = match &inner.value {
                NodeValue::String(s) | NodeValue::Number(s) => s.as_ref(),
                _ => "",
            };
            match text
                .parse::<i64>()
                .map(Number::from)
                .ok()
                .or_else(|| text.parse::<f64>().ok().and_then(Number::from_f64))
            {
                Some(n) => Value::Number(n),
                None => {
                    cx.wrong_type(inner, &inner_ptr, "a number");
                    return None;
                }
            }
        }
        "arrayValue" | "array_value" => {
            let values = inner.get("values");
            let mut out = Vec::new();
            if let Some(values) = values {
                let values_ptr = inner_ptr.key("values");
                for (i, v) in cx.array(values, &values_ptr)?.iter().enumerate() {
                    out.push(any_value(cx, v, &values_ptr.index(i))?);
                }
            }
            Value::Array(out)
        }
        "kvlistValue" | "kvlist_value" => match inner.get("values") {
            Some(values) => Value::Object(attributes(cx, values, &inner_ptr.key("values"), |_| true)?),
            None => Value::Object(Map::new()),
        },
        other => {
            let d =
                cx.report(Code::InvalidValue, entry.key_offset, ptr, format!("`{other}` is not a kind of OTLP value"));
            d.hint = Some(
                "an attribute value is one of `stringValue`, `boolValue`, `intValue`, `doubleValue`, `arrayValue`, `kvlistValue`, `bytesValue`"
                    .into(),
            );
            return None;
        }
    })
}

/// Standard base64 (padding optional), or `None`.
fn base64(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    };
    let body = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in body.bytes() {
        acc = (acc << 6) | digit(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_ids_become_hex() {
        assert_eq!(base64("AAECAwQFBgc=").unwrap(), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(base64("not base64!"), None);
    }
}
