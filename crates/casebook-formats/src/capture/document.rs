//! One OTLP JSON document read as a stream: the `ExportTraceServiceRequest` around the spans is
//! walked byte by byte, and each span (and each resource) is cut out and parsed alone, so a
//! document of any size costs the memory of its largest span, and time linear in its length.
//! A cut-out piece is parsed by [`crate::json`] with a [`Source`] that starts where the piece
//! does, so what is wrong in it is located in the file as if the document had been parsed whole.
//!
//! The first value of a file also decides between a document and JSON lines (see [`read`]).

use std::io::{self, BufRead};

use casebook_model::{Code, Diagnostic};

use super::logs::{self, Record};
use super::otlp::{self, Span};
use crate::json;
use crate::node::Node;
use crate::pointer::Ptr;
use crate::source::{Cx, Source};

/// A piece cut out of a document larger than this is refused: a span this large is a document
/// whose brackets or quotes do not match, not a span.
const MAX_PIECE: usize = 256 << 20;
/// Spans of a resource whose `resource` comes after them are held until it comes; beyond this
/// many they wait in a temporary file.
const HELD_IN_MEMORY: usize = 4096;

/// A place in the file: where the next byte is.
#[derive(Debug, Clone, Copy)]
struct Place {
    offset: u64,
    line: u64,
    column: u64,
    line_offset: u64,
}

/// Why walking the document stopped early (the problem is already reported).
struct Stop;

type Walk<T> = io::Result<Result<T, Stop>>;

/// What the spans and diagnostics go to.
pub(super) struct Out<'o, S, D> {
    pub file: &'o str,
    pub spans: &'o mut S,
    /// The GenAI events of a log file's records.
    pub records: &'o mut Vec<Record>,
    pub diags: &'o mut D,
}

/// Reads an OTLP JSON file: a document, or JSON lines of them (the first line is a whole value
/// with more lines after it), `skipped` bytes (a byte-order mark) already read.
pub(super) fn read<S: Extend<Span>, D: Extend<Diagnostic>>(
    reader: impl BufRead,
    skipped: u64,
    out: &mut Out<'_, S, D>,
) -> io::Result<()> {
    let mut input = Input { reader, at: Place { offset: skipped, line: 1, column: 1, line_offset: 0 } };
    let first = input.at;
    if input.value_or_document(out)?.is_err() {
        return Ok(());
    }
    let on_first_line = input.at.line == first.line;
    input.skip(|b| b == b' ' || b == b'\t' || b == b'\r')?;
    match input.peek()? {
        None => return Ok(()),
        Some(b'\n') if on_first_line => {
            input.take(1)?;
            if input.peek()?.is_some() {
                let Input { reader, at } = input;
                return otlp::lines(out.file, reader, at.line, at.offset, out.spans, out.records, out.diags);
            }
            return Ok(());
        }
        Some(_) => {}
    }
    input.skip(|b| b.is_ascii_whitespace())?;
    if input.peek()?.is_some() {
        input.syntax(out, "unexpected text after the JSON value");
    }
    Ok(())
}

struct Input<R> {
    reader: R,
    at: Place,
}

impl<R: BufRead> Input<R> {
    fn peek(&mut self) -> io::Result<Option<u8>> {
        Ok(self.reader.fill_buf()?.first().copied())
    }

    /// Consumes `n` buffered bytes, counting lines and columns.
    fn take(&mut self, n: usize) -> io::Result<()> {
        let buffer = self.reader.fill_buf()?;
        advance(&mut self.at, &buffer[..n]);
        self.reader.consume(n);
        Ok(())
    }

    /// Consumes the bytes `skip` says yes to.
    fn skip(&mut self, skip: impl Fn(u8) -> bool) -> io::Result<()> {
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok(());
            }
            let n = buffer.iter().position(|&b| !skip(b)).unwrap_or(buffer.len());
            let whole = n == buffer.len();
            self.take(n)?;
            if !whole {
                return Ok(());
            }
        }
    }

    fn ws(&mut self) -> io::Result<()> {
        self.skip(|b| b.is_ascii_whitespace())
    }

    fn syntax<S, D: Extend<Diagnostic>>(&self, out: &mut Out<'_, S, D>, message: &str) -> Stop {
        out.diags.extend([diagnostic(self.at, out.file, Code::JsonSyntax, message)]);
        Stop
    }

    /// Cuts out the next value (of any kind), from its first byte to its last, and parses it;
    /// `then` maps it with a context that locates its offsets in the file.
    fn piece<S, D: Extend<Diagnostic>>(
        &mut self,
        out: &mut Out<'_, S, D>,
        then: impl FnOnce(&mut Cx<'_>, &Node<'_>, &mut S, &mut Vec<Record>),
    ) -> Walk<()> {
        let start = self.at;
        let mut bytes = Vec::new();
        if let Err(message) = self.cut(&mut bytes)? {
            return Ok(Err(self.syntax(out, message)));
        }
        let text = match std::str::from_utf8(&bytes) {
            Ok(text) => text,
            Err(e) => {
                let valid = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
                let src = source(out.file, valid, start);
                let mut d =
                    src.diagnostic(Code::InvalidUtf8, valid.len(), String::new(), "the file is not UTF-8 text".into());
                d.hint = Some("OTLP JSON is UTF-8: export the traces again, or convert the file".into());
                out.diags.extend([d]);
                return Ok(Err(Stop));
            }
        };
        let src = source(out.file, text, start);
        let mut cx = Cx::new(&src, None);
        match json::parse(text) {
            Ok(node) => then(&mut cx, &node, out.spans, out.records),
            Err(e) => otlp::syntax(&mut cx, e),
        }
        out.diags.extend(cx.diags);
        Ok(Ok(()))
    }

    /// Moves the bytes of the next value into `bytes`: up to the bracket that closes it, the
    /// quote that ends it, or the byte after a number or literal. Its grammar is left to the
    /// parser; only where it ends is found here.
    fn cut(&mut self, bytes: &mut Vec<u8>) -> io::Result<Result<(), &'static str>> {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        let Some(first) = self.peek()? else { return Ok(Err("unexpected end of input, expected a value")) };
        let scalar = !matches!(first, b'{' | b'[' | b'"');
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok(if scalar { Ok(()) } else { Err("unexpected end of input inside a value") });
            }
            let mut end = None;
            let mut i = 0;
            while i < buffer.len() {
                if in_string {
                    if escaped {
                        escaped = false;
                        i += 1;
                        continue;
                    }
                    // Strings are most of a trace: skipped to their next quote or backslash.
                    let Some(k) = memchr::memchr2(b'"', b'\\', &buffer[i..]) else { break };
                    i += k;
                    if buffer[i] == b'\\' {
                        escaped = true;
                    } else {
                        in_string = false;
                        if depth == 0 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    i += 1;
                    continue;
                }
                let b = buffer[i];
                if scalar {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                        end = Some(i);
                        break;
                    }
                    i += 1;
                    continue;
                }
                i += 1;
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            end = Some(i);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let n = end.unwrap_or(buffer.len());
            bytes.extend_from_slice(&buffer[..n]);
            self.take(n)?;
            if end.is_some() {
                return Ok(Ok(()));
            }
            if bytes.len() > MAX_PIECE {
                return Ok(Err(
                    "a value of more than 256 MiB in a trace document: its brackets or quotes do not match",
                ));
            }
        }
    }

    /// The key of an object member and the `:` after it, or the end of the object.
    fn key<S, D: Extend<Diagnostic>>(&mut self, out: &mut Out<'_, S, D>) -> Walk<Option<String>> {
        self.ws()?;
        match self.peek()? {
            Some(b'}') => {
                self.take(1)?;
                return Ok(Ok(None));
            }
            Some(b'"') => {}
            None => return Ok(Err(self.syntax(out, "unexpected end of input inside an object"))),
            Some(_) => return Ok(Err(self.syntax(out, "expected a string key in double quotes"))),
        }
        let mut key = None;
        if self.piece(out, |_, node, _, _| key = node.as_str().map(str::to_owned))?.is_err() {
            return Ok(Err(Stop));
        }
        let Some(key) = key else { return Ok(Err(Stop)) };
        self.ws()?;
        if self.peek()? != Some(b':') {
            return Ok(Err(self.syntax(out, "expected `:` after the object key")));
        }
        self.take(1)?;
        self.ws()?;
        Ok(Ok(Some(key)))
    }

    /// After a member or an item: `,` (and then not the closing bracket) or the end, which it
    /// consumes; `true` when the container goes on.
    fn next<S, D: Extend<Diagnostic>>(&mut self, out: &mut Out<'_, S, D>, close: u8) -> Walk<bool> {
        self.ws()?;
        match self.peek()? {
            Some(b',') => {
                self.take(1)?;
                self.ws()?;
                if self.peek()? == Some(close) {
                    let message = if close == b'}' { "trailing comma before `}`" } else { "trailing comma before `]`" };
                    return Ok(Err(self.syntax(out, message)));
                }
                Ok(Ok(true))
            }
            Some(b) if b == close => {
                self.take(1)?;
                Ok(Ok(false))
            }
            None => Ok(Err(self.syntax(out, "unexpected end of input, expected `,` or a closing bracket"))),
            Some(_) => {
                let message =
                    if close == b'}' { "expected `,` or `}` after the member" } else { "expected `,` or `]`" };
                Ok(Err(self.syntax(out, message)))
            }
        }
    }

    /// Walks the items of an array, `item` reading each; an array that is not one is parsed
    /// whole and `whole` reports it.
    fn array<S, D: Extend<Diagnostic>>(
        &mut self,
        out: &mut Out<'_, S, D>,
        whole: impl FnOnce(&mut Cx<'_>, &Node<'_>, &mut S, &mut Vec<Record>),
        mut item: impl FnMut(&mut Self, &mut Out<'_, S, D>, usize) -> Walk<()>,
    ) -> Walk<()> {
        if self.peek()? != Some(b'[') {
            return self.piece(out, whole);
        }
        self.take(1)?;
        self.ws()?;
        if self.peek()? == Some(b']') {
            self.take(1)?;
            return Ok(Ok(()));
        }
        let mut index = 0;
        loop {
            if item(self, out, index)?.is_err() {
                return Ok(Err(Stop));
            }
            index += 1;
            match self.next(out, b']')? {
                Ok(true) => {}
                Ok(false) => return Ok(Ok(())),
                Err(stop) => return Ok(Err(stop)),
            }
        }
    }

    /// The first value of the file: a document walked span by span when it is an object,
    /// else parsed whole (it is not a trace document, and the mapper says so).
    fn value_or_document<S: Extend<Span>, D: Extend<Diagnostic>>(&mut self, out: &mut Out<'_, S, D>) -> Walk<()> {
        self.ws()?;
        if self.peek()? != Some(b'{') {
            return self.piece(out, |cx, node, spans, records| {
                let mut found = Vec::new();
                otlp::request(cx, node, &Ptr::ROOT, &mut found, records);
                spans.extend(found);
            });
        }
        let start = self.at;
        self.take(1)?;
        let mut listed = false;
        loop {
            let key = match self.key(out)? {
                Ok(Some(key)) => key,
                Ok(None) => break,
                Err(stop) => return Ok(Err(stop)),
            };
            let walked = if !listed && (key == "resourceSpans" || key == "resource_spans") {
                listed = true;
                let list = Ptr::ROOT.key(&key).to_string();
                self.array(
                    out,
                    |cx, node, _, _| {
                        cx.array(node, &Ptr::ROOT.key(&key));
                    },
                    |input, out, i| input.resource_spans(out, &list, i),
                )?
            } else if !listed && (key == "resourceLogs" || key == "resource_logs") {
                // A log file: each `resourceLogs` item is parsed alone (log files hold events, not
                // the bulk of a capture), its GenAI events read by `logs`.
                listed = true;
                let list = Ptr::ROOT.key(&key).to_string();
                self.array(
                    out,
                    |cx, node, _, _| {
                        cx.array(node, &Ptr::ROOT.key(&key));
                    },
                    |input, out, i| {
                        let at = format!("{list}/{i}");
                        input.piece(out, |cx, node, _, records| {
                            let before = records.len();
                            logs::resource_logs(cx, node, &Ptr::ROOT, records);
                            relocate(cx, &at);
                            for record in &mut records[before..] {
                                record.at.pointer.insert_str(0, &at);
                            }
                        })
                    },
                )?
            } else {
                self.piece(out, |_, _, _, _| {})?
            };
            if walked.is_err() {
                return Ok(Err(Stop));
            }
            match self.next(out, b'}')? {
                Ok(true) => {}
                Ok(false) => break,
                Err(stop) => return Ok(Err(stop)),
            }
        }
        if !listed {
            let message = "missing `resourceSpans` (or `resourceLogs`): this is not an OTLP trace or log document";
            let mut d = diagnostic(start, out.file, Code::MissingField, message);
            d.hint = Some(otlp::NOT_TRACES_HINT.into());
            out.diags.extend([d]);
        }
        Ok(Ok(()))
    }

    /// Item `index` of `resourceSpans`: its resource's service, then its spans.
    fn resource_spans<S: Extend<Span>, D: Extend<Diagnostic>>(
        &mut self,
        out: &mut Out<'_, S, D>,
        list: &str,
        index: usize,
    ) -> Walk<()> {
        let at = format!("{list}/{index}");
        if self.peek()? != Some(b'{') {
            return self.piece(out, |cx, node, _, _| {
                cx.object(node, &Ptr::ROOT);
                relocate(cx, &at);
            });
        }
        self.take(1)?;
        let mut service: Option<Option<String>> = None;
        let mut held = Held::default();
        loop {
            let key = match self.key(out)? {
                Ok(Some(key)) => key,
                Ok(None) => break,
                Err(stop) => return Ok(Err(stop)),
            };
            let walked = match key.as_str() {
                "resource" if service.is_none() => {
                    let mut found = None;
                    let walked = self.piece(out, |cx, node, _, _| {
                        found = otlp::service(cx, node, &Ptr::ROOT);
                        relocate(cx, &format!("{at}/resource"));
                    })?;
                    held.release(&found, out.spans)?;
                    service = Some(found);
                    walked
                }
                "scopeSpans" | "scope_spans" | "instrumentationLibrarySpans" => {
                    let scopes = format!("{at}/{key}");
                    let mut sink = Sink { service: &service, held: &mut held, spans: &mut *out.spans };
                    let mut scope_out =
                        Out { file: out.file, spans: &mut sink, records: &mut *out.records, diags: &mut *out.diags };
                    self.array(
                        &mut scope_out,
                        |cx, node, _, _| {
                            cx.array(node, &Ptr::ROOT);
                            relocate(cx, &scopes);
                        },
                        |input, out, j| input.scope(out, &format!("{scopes}/{j}")),
                    )?
                }
                _ => self.piece(out, |_, _, _, _| {})?,
            };
            if walked.is_err() {
                return Ok(Err(Stop));
            }
            match self.next(out, b'}')? {
                Ok(true) => {}
                Ok(false) => break,
                Err(stop) => return Ok(Err(stop)),
            }
        }
        held.release(&None, out.spans)?;
        Ok(Ok(()))
    }

    /// One item of `scopeSpans`: its spans.
    fn scope<S: Extend<Span>, D: Extend<Diagnostic>>(
        &mut self,
        out: &mut Out<'_, Sink<'_, S>, D>,
        at: &str,
    ) -> Walk<()> {
        if self.peek()? != Some(b'{') {
            return self.piece(out, |cx, node, _, _| {
                cx.object(node, &Ptr::ROOT);
                relocate(cx, at);
            });
        }
        self.take(1)?;
        loop {
            let key = match self.key(out)? {
                Ok(Some(key)) => key,
                Ok(None) => return Ok(Ok(())),
                Err(stop) => return Ok(Err(stop)),
            };
            let walked = if key == "spans" {
                let list = format!("{at}/spans");
                self.array(
                    out,
                    |cx, node, _, _| {
                        cx.array(node, &Ptr::ROOT);
                        relocate(cx, &list);
                    },
                    |input, out, k| {
                        let at = format!("{list}/{k}");
                        input.piece(out, |cx, node, sink, _| {
                            let service = sink.service.clone().flatten();
                            let span = otlp::span(cx, node, &Ptr::ROOT, service.as_deref());
                            relocate(cx, &at);
                            if let Some(mut span) = span {
                                span.at.pointer = format!("{at}{}", span.at.pointer);
                                sink.push(span);
                            }
                        })
                    },
                )?
            } else {
                self.piece(out, |_, _, _, _| {})?
            };
            if walked.is_err() {
                return Ok(Err(Stop));
            }
            match self.next(out, b'}')? {
                Ok(true) => {}
                Ok(false) => return Ok(Ok(())),
                Err(stop) => return Ok(Err(stop)),
            }
        }
    }
}

/// A problem at `at`, in the document itself (pointer `""`).
fn diagnostic(at: Place, file: &str, code: Code, message: &str) -> Diagnostic {
    Diagnostic {
        severity: code.severity(),
        code,
        message: message.to_owned(),
        file: file.to_owned(),
        line: at.line,
        column: at.column,
        pointer: Some(String::new()),
        path: None,
        hint: None,
        case: None,
        line_offset: Some(at.line_offset),
    }
}

/// Counts the lines and columns of `bytes`, consumed from `at`.
fn advance(at: &mut Place, bytes: &[u8]) {
    match memchr::memrchr(b'\n', bytes) {
        Some(last) => {
            at.line += memchr::memchr_iter(b'\n', bytes).count() as u64;
            at.line_offset = at.offset + last as u64 + 1;
            at.column = 1 + chars(&bytes[last + 1..]);
        }
        None => at.column += chars(bytes),
    }
    at.offset += bytes.len() as u64;
}

/// Characters in UTF-8 bytes (those that do not continue a character).
fn chars(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count() as u64
}

fn source<'a>(file: &'a str, text: &'a str, at: Place) -> Source<'a> {
    Source::within_line(file, text, (at.line, at.column), at.offset, at.line_offset)
}

/// Prefixes the pointers of the diagnostics a piece's mapping made (relative to the piece)
/// with the piece's place in the document.
fn relocate(cx: &mut Cx<'_>, at: &str) {
    for d in &mut cx.diags {
        if let Some(pointer) = &mut d.pointer {
            pointer.insert_str(0, at);
        }
    }
}

/// Where the spans of a resource go: out when its service is known (its `resource` was read),
/// else held until it is.
struct Sink<'s, S> {
    service: &'s Option<Option<String>>,
    held: &'s mut Held,
    spans: &'s mut S,
}

impl<S: Extend<Span>> Sink<'_, S> {
    fn push(&mut self, span: Span) {
        if self.service.is_some() {
            self.spans.extend([span]);
        } else {
            self.held.hold(span);
        }
    }
}

/// Spans waiting for their resource: in memory, then in `file` beyond [`HELD_IN_MEMORY`].
#[derive(Default)]
struct Held {
    held: Vec<Span>,
    file: Option<io::BufWriter<std::fs::File>>,
    error: Option<io::Error>,
}

impl Held {
    fn hold(&mut self, span: Span) {
        if self.held.len() < HELD_IN_MEMORY && self.file.is_none() {
            self.held.push(span);
            return;
        }
        let written = (|| {
            if self.file.is_none() {
                self.file = Some(io::BufWriter::new(tempfile::tempfile()?));
            }
            let file = self.file.as_mut().expect("just made");
            for span in self.held.drain(..).chain(std::iter::once(span)) {
                serde_json::to_writer(&mut *file, &span)?;
                io::Write::write_all(file, b"\n")?;
            }
            Ok::<_, io::Error>(())
        })();
        if let Err(e) = written {
            self.error.get_or_insert(e);
        }
    }

    /// Sends the held spans out with `service`.
    fn release(&mut self, service: &Option<String>, spans: &mut impl Extend<Span>) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let with = |mut span: Span| {
            span.service = service.clone();
            span
        };
        spans.extend(self.held.drain(..).map(with));
        if let Some(file) = self.file.take() {
            let mut file = file.into_inner().map_err(io::IntoInnerError::into_error)?;
            io::Seek::rewind(&mut file)?;
            for line in io::BufReader::new(file).lines() {
                let span: Span = serde_json::from_str(&line?).map_err(io::Error::other)?;
                spans.extend([with(span)]);
            }
        }
        Ok(())
    }
}
