//! Production traces become cases (`casebook capture`): OTLP JSON traces in the OpenTelemetry
//! GenAI or OpenInference conventions are read into spans ([`otlp`]), each span's messages in
//! one shape ([`conventions`]), and every agent invocation becomes one case.
//!
//! An invocation is an `invoke_agent` span (OpenInference: an `AGENT` span) that no other
//! invocation encloses; a trace without one is one invocation from its root, when it holds model
//! calls. An app without a span of its own makes a trace per model call: consecutive such calls
//! whose input extends the previous call's conversation with its tool calls' results (same
//! system and first user message) are one invocation, so a question makes one case however many
//! model calls its tools took ([`join_key`] names the calls that may be joined). Of the
//! invocation and the spans under it:
//! - the conversation comes from the invocation's own input messages (pydantic-ai: its
//!   `pydantic_ai.all_messages`), else from the first model call's: the first user message is the
//!   input, later ones are turns, system messages and system instructions are context items
//!   (`source: system_instructions`); tool results sent back to the model are no user turn;
//! - invocations of one conversation (`gen_ai.conversation.id`, OpenInference `session.id`)
//!   whose input holds only the new message are joined to the earlier ones captured with them,
//!   so each case replays the conversation up to its invocation;
//! - tool definitions become `tools`, retrieved documents `context` items (`type: document`);
//! - each tool execution with a recorded result (`gen_ai.tool.call.result`, OpenInference
//!   `output.value`) becomes a recorded answer of its tool (`when: {arguments}` and `result`),
//!   so the case serves the production answers when it is run; so does each tool result sent
//!   back to a model, matched to the call it answers (apps without tool spans);
//! - what the agent did is recorded as **draft** expectations (`review: draft`): the final
//!   answer as `expected.output`, the answers of earlier turns as `expected.per_turn`, the tools
//!   it executed (else the calls its model asked for) as `expected.tool_calls`; a model call
//!   that only asked for tools has no answer (its raw response is no expected output);
//! - `metadata.status` is `error` when the invocation's span, or an agent or model call span
//!   under it, ended in error (with that span's status message as `metadata.error`);
//! - the id is `trace-{trace id}-{span id}`, so capturing a trace again finds the same case;
//!   provenance keeps trace id, span id, service, start time and the convention read.
//!
//! Content the trace did not record (content capture is opt-in in every instrumentation) is a
//! warning located at the span, its hint saying how the span's instrumentation records it, and an
//! invocation without any user message makes no case. Instrumentations that write the messages
//! as GenAI events in OpenTelemetry logs instead: the log files are read beside the trace files
//! ([`logs`]) and their events attached to their spans.

mod conventions;
mod document;
pub mod logs;
mod otlp;
mod proto;
pub mod stream;

use std::collections::{HashMap, HashSet};

/// Hash maps and sets keyed by what a capture reads (ids, keys): foldhash, seeded per map
/// (SipHash, std's default, was a twelfth of a capture's instructions).
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
pub(super) type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

use casebook_model::snapshot::{Response, When};
use casebook_model::{
    Case, Code, ContextItem, Diagnostic, Expectations, Map, Provenance, Responses, Review, Role, Task, Tool, Turn,
};
use serde_json::{Value, json};

use conventions::{Call, Message, ToolResult, View};
use logs::Record;
pub use otlp::{At, Event, Span};
pub use proto::Read;

pub const FORMAT: &str = "otlp";

/// What a capture found.
#[derive(Debug, Default)]
pub struct Captured {
    /// One case per agent invocation with recorded messages, in the order the invocations started.
    pub cases: Vec<Case>,
    /// Errors (the traces cannot be read as OTLP JSON) and warnings (content not recorded): the
    /// first [`stream::KEPT_PER_CODE`] of each code.
    pub diagnostics: Vec<Diagnostic>,
    /// How many more diagnostics of each code were found than kept.
    pub diagnostics_left_out: Vec<(Code, u64)>,
    pub spans: u64,
    pub invocations: u64,
}

impl Captured {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Reads trace files into cases: [`Capture::read`] each file, then [`Capture::finish`] (or
/// [`Capture::stream`]). Spans of one trace may be spread over several files; a span met twice
/// is read once. Memory is bounded whatever the number of spans: spans are kept by trace in
/// temporary files beyond a budget ([`stream`] says how).
#[derive(Default)]
pub struct Capture {
    spans: stream::Spans,
    /// GenAI events of log records, attached to their spans when the cases are made.
    records: Vec<Record>,
    diagnostics: stream::Kept,
}

impl Capture {
    pub fn new() -> Self {
        Self::default()
    }

    /// A capture that holds about `bytes` of spans, and as much of cases, in memory before it
    /// uses temporary files (the default is [`stream::SPANS_IN_MEMORY`]).
    pub fn with_memory(bytes: usize) -> Self {
        Self { spans: stream::Spans::with_memory(bytes), records: Vec::new(), diagnostics: stream::Kept::default() }
    }

    /// The same capture, its partitions of spans worked on by `threads` threads at a time (by
    /// default the cores there are, at most 4); what it makes is the same whatever the number.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.spans.workers = threads.max(1);
        self
    }

    /// Reads one file, `file` being its name as diagnostics show it: OTLP JSON (a document or
    /// JSON lines, told by its first byte after any byte-order mark and white space: `{` or `[`)
    /// of traces or of logs (told apart by their content: the GenAI events of log records join
    /// their spans), or else the bytes of a protobuf `ExportTraceServiceRequest`, as the
    /// server's receiver reads them. Only the spans' attributes of the conventions read are kept; the file itself
    /// is not (a protobuf file is held whole while it is decoded, as protobuf needs).
    pub fn read(&mut self, file: &str, mut reader: impl std::io::BufRead) -> std::io::Result<()> {
        let head = reader.fill_buf()?;
        let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
        let first = text.iter().find(|b| !b.is_ascii_whitespace());
        if head.is_empty() || matches!(first, None | Some(b'{' | b'[')) {
            return otlp::read(file, reader, &mut self.spans, &mut self.records, &mut self.diagnostics);
        }
        let mut bytes = Vec::new();
        reader.read_to_end(&mut bytes)?;
        self.read_protobuf(file, &bytes);
        Ok(())
    }

    /// Reads the bytes of a protobuf `ExportTraceServiceRequest`.
    pub fn read_protobuf(&mut self, file: &str, bytes: &[u8]) -> Read {
        let (mut spans, mut diags) = (Vec::new(), Vec::new());
        let read = proto::read(file, bytes, &mut spans, &mut diags);
        self.spans.extend(spans);
        self.diagnostics.extend(diags);
        read
    }

    /// Adds one span, whatever it was read from (the one way spans enter a capture).
    pub fn push(&mut self, span: Span) {
        self.spans.extend([span]);
    }

    /// A GenAI event of a log record that belongs to span `span_id` of trace `trace_id` (ids in
    /// lowercase hex), without a place of its own: [`Capture::push_record`] keeps the record's.
    pub fn push_event(&mut self, trace_id: String, span_id: String, event: Event) {
        let at = At { file: "<log record>".into(), line: 0, column: 0, line_offset: 0, pointer: String::new() };
        self.push_record(Record { trace_id, span_id, time: 0, event, at });
    }

    /// A GenAI event of a log record ([`logs::decode_protobuf`] decodes them from protobuf):
    /// the cases are made with it attached to its span, read earlier or later; a record whose span
    /// never comes is a warning at the record, and makes no case.
    pub fn push_record(&mut self, record: Record) {
        self.records.push(record);
    }

    /// The cases of the invocations read, or the errors that kept the files from being read:
    /// [`Capture::stream`] collected. A temporary file that fails is an error diagnostic.
    pub fn finish(self) -> Captured {
        let mut stream = match self.stream() {
            Ok(stream) => stream,
            Err(e) => return Captured { diagnostics: vec![stream::failure(&e)], ..Captured::default() },
        };
        let mut cases = Vec::new();
        for case in &mut stream {
            match case {
                Ok(case) => cases.push(case),
                Err(e) => {
                    return Captured { diagnostics: vec![stream::failure(&e)], ..Captured::default() };
                }
            }
        }
        Captured {
            cases,
            diagnostics: stream.diagnostics,
            diagnostics_left_out: stream.diagnostics_left_out,
            spans: stream.spans,
            invocations: stream.invocations,
        }
    }

    /// The cases of the invocations read, one at a time, in the order the invocations started
    /// (then by trace and span id); every diagnostic and count is known before the first case.
    /// With errors in the traces, no case comes.
    pub fn stream(self) -> std::io::Result<stream::Cases> {
        self.stream_encoded(&stream::json)
    }

    /// [`Capture::stream`] with each case kept for the sort as `encode` makes it, on the threads
    /// that make the cases (a store prepares its rows there): read them with
    /// [`stream::Cases::next_encoded`]. The order and the diagnostics are those of
    /// [`Capture::stream`].
    pub fn stream_encoded(self, encode: stream::Encode) -> std::io::Result<stream::Cases> {
        stream::cases(self.spans, self.records, self.diagnostics, encode)
    }
}

/// The GenAI events of log records onto their spans, after the span's own events and in the
/// order the records were made, so the conventions read them as span events. A span that
/// recorded GenAI events itself keeps only its own (the same messages, sent both ways with
/// `span_and_event`); a record met twice (a log file given twice) is attached once. Records of
/// a span not read make one warning per span, at its first record.
pub(super) fn attach_records(spans: &mut [Span], records: Vec<Record>, diags: &mut Vec<Diagnostic>) {
    if records.is_empty() {
        return;
    }
    let mut attached: Vec<(usize, Record)> = Vec::new();
    // Per span not read: its first record and how many it has, in the order they were read.
    let mut orphans: Vec<(Record, usize)> = Vec::new();
    {
        let by_id: FastMap<(&str, &str), usize> =
            spans.iter().enumerate().map(|(i, s)| ((s.trace_id.as_str(), s.span_id.as_str()), i)).collect();
        let mut orphan_at: FastMap<(String, String), usize> = FastMap::default();
        for record in records {
            if let Some(&i) = by_id.get(&(record.trace_id.as_str(), record.span_id.as_str())) {
                attached.push((i, record));
                continue;
            }
            let key = (record.trace_id.clone(), record.span_id.clone());
            match orphan_at.get(&key) {
                Some(&k) => orphans[k].1 += 1,
                None => {
                    orphan_at.insert(key, orphans.len());
                    orphans.push((record, 1));
                }
            }
        }
    }
    attached.sort_by_key(|(_, r)| r.time);
    let own: FastSet<usize> = attached
        .iter()
        .map(|(i, _)| *i)
        .filter(|&i| spans[i].events.iter().any(|e| logs::EVENTS.contains(&e.name.as_str())))
        .collect();
    let mut seen = FastSet::default();
    for (i, record) in attached {
        if own.contains(&i) {
            continue;
        }
        let key = (i, record.time, record.event.name.clone(), Value::Object(record.event.attrs.clone()).to_string());
        if seen.insert(key) {
            spans[i].events.push(record.event);
        }
    }
    for (record, count) in orphans {
        let others = match count {
            1 => String::new(),
            n => format!(" (and {} more of its records)", n - 1),
        };
        diags.push(record.at.diagnostic(
            Code::Dropped,
            format!(
                "log record `{}`{others} belongs to span {} of trace {}, which is not in the traces read: it was left out",
                record.event.name, record.span_id, record.trace_id
            ),
            Some("give the trace file beside the log file: `casebook capture traces.json logs.json`".into()),
        ));
    }
}

/// The spans of one request body, as the server's OTLP receiver reads it.
#[derive(Debug, Default)]
pub struct Decoded {
    pub spans: Vec<Span>,
    /// The problems found (errors of spans left out; the error of an undecodable body).
    pub diagnostics: Vec<Diagnostic>,
    /// Spans left out for errors in them.
    pub rejected: u64,
    /// The body holds no span but is the request of another signal ([`Signal::Logs`]: an
    /// `ExportLogsServiceRequest` with records), sent to the wrong route.
    pub other_signal: Option<Signal>,
}

/// What an OTLP request carries, for a body sent to the other signal's route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Traces,
    Logs,
}

impl Signal {
    /// The request message of the signal.
    pub fn request(self) -> &'static str {
        match self {
            Signal::Traces => "ExportTraceServiceRequest",
            Signal::Logs => "ExportLogsServiceRequest",
        }
    }

    /// What the signal's request holds.
    pub fn items(self) -> &'static str {
        match self {
            Signal::Traces => "spans",
            Signal::Logs => "log records",
        }
    }

    /// The path an exporter sends the signal to (appended to `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Logs => "/v1/logs",
        }
    }
}

impl Decoded {
    /// Whether the body could not be read at all (it is not an OTLP trace request in the
    /// encoding it claims), rather than some of its spans.
    pub fn undecodable(&self) -> bool {
        self.spans.is_empty() && self.rejected == 0 && self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Reads one request body: an `ExportTraceServiceRequest` in protobuf, or else in OTLP JSON.
/// `file` names the body in diagnostics. A JSON span with errors is left out and counted in
/// `rejected`, as a protobuf one is.
pub fn decode(file: &str, bytes: &[u8], protobuf: bool) -> Decoded {
    let mut out = Decoded::default();
    if protobuf {
        out.rejected = proto::read(file, bytes, &mut out.spans, &mut out.diagnostics).rejected;
        if out.undecodable() && logs::holds_records(bytes) {
            out.other_signal = Some(Signal::Logs);
        }
        return out;
    }
    // Reading from memory cannot fail; log records have no place in a trace request.
    let mut records = Vec::new();
    let _ = otlp::read(file, bytes, &mut out.spans, &mut records, &mut out.diagnostics);
    if out.spans.is_empty() && !records.is_empty() {
        out.other_signal = Some(Signal::Logs);
    }
    let mut bad: Vec<&str> = out
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .filter_map(|d| d.pointer.as_deref().and_then(span_of))
        .collect();
    bad.sort_unstable();
    bad.dedup();
    out.rejected = bad.len() as u64;
    out
}

/// The pointer of the span a pointer is in (`/resourceSpans/0/scopeSpans/1/spans/2`), if any.
fn span_of(pointer: &str) -> Option<&str> {
    let at = pointer.find("/spans/")? + "/spans/".len();
    let end = pointer[at..].find('/').map_or(pointer.len(), |e| at + e);
    Some(&pointer[..end])
}

/// The invocations of one trace: `(span, the spans under it, itself first)`.
fn trace_invocations(spans: &[Span], members: &[usize]) -> Vec<(usize, Vec<usize>)> {
    let by_id: FastMap<&str, usize> = members.iter().map(|&i| (spans[i].span_id.as_str(), i)).collect();
    let mut children: FastMap<usize, Vec<usize>> = FastMap::default();
    let mut roots = Vec::new();
    for &i in members {
        match spans[i].parent_id.as_deref().and_then(|p| by_id.get(p)) {
            Some(&parent) if parent != i => children.entry(parent).or_default().push(i),
            _ => roots.push(i),
        }
    }
    let under = |top: usize| {
        let mut out = vec![top];
        let mut at = 0;
        while at < out.len() {
            if let Some(kids) = children.get(&out[at]) {
                // Each span has one parent, so no span is reached twice from a root.
                out.extend(kids.iter().copied());
            }
            at += 1;
        }
        out
    };
    // Outermost invocations: walk down from the roots, stopping at the first one on each path.
    let mut found = Vec::new();
    let mut stack = roots.clone();
    while let Some(i) = stack.pop() {
        if View::new(&spans[i]).is_invocation() {
            found.push(i);
        } else if let Some(kids) = children.get(&i) {
            stack.extend(kids);
        }
    }
    if found.is_empty() {
        found = roots.into_iter().filter(|&r| under(r).iter().any(|&i| records_model_call(&spans[i]))).collect();
    }
    found.into_iter().map(|top| (top, under(top))).collect()
}

/// Whether a span is a model call with recorded messages.
fn records_model_call(span: &Span) -> bool {
    let mut view = View::new(span);
    is_model_call(&view) || view.input_messages().is_some() || view.output_messages().is_some()
}

/// Whether a span says it is a model call.
fn is_model_call(view: &View) -> bool {
    matches!(view.operation(), Some("chat" | "text_completion" | "generate_content"))
        || view.kind().as_deref() == Some("LLM")
}

/// What ties an invocation to others, possibly in other traces, whose cases depend on each
/// other: they must be made together, in the order they started.
/// - A model call made without a span of the app around it (an invocation that is itself a
///   model call): `calls` with its service, system messages and first user message — the
///   calls one question took share them (and [`join_model_calls`] joins them);
/// - else the conversation the invocation belongs to (`gen_ai.conversation.id`, OpenInference
///   `session.id`): `conversation` and its id (a later invocation replays the earlier ones).
///
/// `None`: the invocation's case depends on no other.
pub(crate) fn join_key(spans: &[Span], top: usize, members: &[usize]) -> Option<String> {
    if let Some(input) = rootless_call_input(&spans[top]) {
        return Some(calls_key(&spans[top], &input));
    }
    members.iter().find_map(|&i| View::new(&spans[i]).conversation()).map(|id| format!("conversation\u{1f}{id}"))
}

/// The input messages of a model call that is an invocation itself (no span of the app above it).
fn rootless_call_input(root: &Span) -> Option<Vec<Message>> {
    let mut view = View::new(root);
    if view.is_invocation() || !is_model_call(&view) {
        return None;
    }
    view.input_messages().map(|(messages, _)| messages)
}

/// The [`join_key`] of a rootless model call sent `input`.
fn calls_key(root: &Span, input: &[Message]) -> String {
    let system: Vec<String> = input.iter().filter(|m| is_system(m)).map(Message::text).collect();
    let first = input.iter().find(|m| is_user(m)).map(Message::text).unwrap_or_default();
    let service = root.service.as_deref().unwrap_or("");
    format!("{CALLS}{service}\u{1f}{}\u{1f}{first}", system.join("\u{1e}"))
}

/// How the [`join_key`] of a rootless model call starts.
pub(super) const CALLS: &str = "calls\u{1f}";

fn is_system(m: &Message) -> bool {
    m.role == "system" || m.role == "developer"
}

fn is_user(m: &Message) -> bool {
    (m.role == "user" || m.role == "human") && (!m.texts.is_empty() || m.parts.is_some())
}

/// Joins the model calls of one question made without a span of the app around them: among
/// invocations of one `calls` [`join_key`], in the order they started, a call whose input is the
/// previous call's input, then what the previous call answered and the results of the tools it
/// asked for (no new user message), continues that call's invocation. The joined invocation is
/// its first call's (its id, its place in the order); its spans are all the calls'.
pub(super) fn join_model_calls(spans: &[Span], invocations: Vec<(usize, Vec<usize>)>) -> Vec<(usize, Vec<usize>)> {
    // (the invocation's index, its last call's input and output), per key.
    let mut open: FastMap<String, (usize, Vec<Message>, Vec<Message>)> = FastMap::default();
    let mut out: Vec<Option<(usize, Vec<usize>)>> = Vec::with_capacity(invocations.len());
    for (top, members) in invocations {
        let Some(key) = join_key(spans, top, &members).filter(|k| k.starts_with(CALLS)) else {
            out.push(Some((top, members)));
            continue;
        };
        let mut view = View::new(&spans[top]);
        let input = view.input_messages().map(|(m, _)| m).unwrap_or_default();
        let output = view.output_messages().unwrap_or_default();
        if let Some((at, previous_input, previous_output)) = open.get_mut(&key) {
            if continues(previous_input, previous_output, &input) {
                if let Some((_, joined)) = out[*at].as_mut() {
                    joined.extend(members);
                }
                *previous_input = input;
                *previous_output = output;
                continue;
            }
        }
        open.insert(key, (out.len(), input, output));
        out.push(Some((top, members)));
    }
    out.into_iter().flatten().collect()
}

/// Whether `next` (a model call's input) continues the conversation of a call sent `input` that
/// answered `output`: it starts with `input`, and adds only the answer and tool results.
fn continues(input: &[Message], output: &[Message], next: &[Message]) -> bool {
    let same = |a: &Message, b: &Message| {
        a.role == b.role && a.texts == b.texts && a.calls.iter().map(|c| &c.name).eq(b.calls.iter().map(|c| &c.name))
    };
    let asked_for_tools = output.iter().any(|m| !m.calls.is_empty());
    let Some(added) = next.get(input.len()..) else { return false };
    asked_for_tools
        && input.iter().zip(next).all(|(a, b)| same(a, b))
        && added.iter().any(|m| !m.results.is_empty())
        && !added.iter().any(is_user)
}

/// One user message and what the agent answered to it.
#[derive(Debug, Clone)]
struct Exchange {
    user: Message,
    answer: Option<Value>,
}

fn invocation_case(
    spans: &[Span],
    top: usize,
    members: &[usize],
    conversations: &mut FastMap<String, Vec<Exchange>>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Case> {
    let root = &spans[top];
    let mut ordered: Vec<usize> = members.to_vec();
    ordered.sort_by_key(|&i| (spans[i].start, i));
    let mut views: Vec<View> = ordered.iter().map(|&i| View::new(&spans[i])).collect();
    let root_at = ordered.iter().position(|&i| i == top).expect("the invocation is among its spans");
    // A model call's `input.value` / `output.value` are the raw API request and response: not
    // what the user asked, nor what the agent answered.
    let root_is_call = !views[root_at].is_invocation() && is_model_call(&views[root_at]);
    let value_of = |view: &View, which: &str| if root_is_call { None } else { view.value(which) };

    // The conversation sent: the invocation's own messages (pydantic-ai's: all the run's); else
    // its input (OpenInference's `input.value`: what the user asked, where a model call may have
    // been sent a prompt made from it) with the system messages of the first model call; else
    // the first model call's.
    let own =
        views[root_at].input_messages().or_else(|| views[root_at].all_messages().map(|m| (m, conventions::GENAI)));
    let (messages, convention) = match (own, value_of(&views[root_at], "input")) {
        (Some(own), _) => own,
        (None, Some(value)) => {
            let mut messages: Vec<Message> = first_call(&mut views)
                .map(|(m, _)| m.into_iter().filter(|m| m.role == "system" || m.role == "developer").collect())
                .unwrap_or_default();
            messages.push(value_message(value));
            (messages, conventions::OPENINFERENCE)
        }
        (None, None) => first_call(&mut views).unwrap_or((Vec::new(), "")),
    };

    // The final answer: the invocation's own output, else the last model call's that has text.
    let final_answer = {
        let own = views[root_at]
            .output_messages()
            .and_then(|m| answer_of(&m))
            .or_else(|| value_of(&views[root_at], "output"));
        own.or_else(|| {
            let mut by_end: Vec<usize> = (0..views.len()).collect();
            by_end.sort_by_key(|&k| std::cmp::Reverse((spans[ordered[k]].end, k)));
            by_end.into_iter().find_map(|k| views[k].output_messages().and_then(|m| answer_of(&m)))
        })
    };

    // The calls models asked for and the tool results sent back to them, by call id: what the
    // tools answered when no span records their execution (the model calls' messages are read
    // again only then).
    let mut asked: Vec<Call> = Vec::new();
    let mut results: Vec<ToolResult> = Vec::new();
    let mut note = |list: &[Message]| {
        for m in list {
            asked.extend(m.calls.iter().cloned());
            results.extend(m.results.iter().cloned());
        }
    };
    note(&messages);
    if !views.iter().any(View::is_tool) {
        for view in &mut views {
            if let Some((list, _)) = view.input_messages() {
                note(&list);
            }
            if let Some(list) = view.output_messages() {
                note(&list);
            }
        }
    }

    // Failed: the invocation, or an agent or model call under it (the outer span of
    // openai-agents stays OK when its agent fails).
    let failed = std::iter::once(root_at)
        .chain(0..views.len())
        .find(|&k| {
            let span = &spans[ordered[k]];
            span.error.is_some() && (k == root_at || views[k].is_invocation() || is_model_call(&views[k]))
        })
        .map(|k| spans[ordered[k]].error.clone().unwrap_or_default());

    let what = describe(root);
    let mut system: Vec<String> = views[root_at].system_instructions();
    if system.is_empty() {
        system = views.iter_mut().map(View::system_instructions).find(|s| !s.is_empty()).unwrap_or_default();
    }
    let mut exchanges: Vec<Exchange> = Vec::new();
    for message in messages {
        match message.role.as_str() {
            "system" | "developer" => {
                let text = message.text();
                if !text.is_empty() && !system.contains(&text) {
                    system.push(text);
                }
            }
            "user" | "human" => exchanges.push(Exchange { user: message, answer: None }),
            "assistant" | "model" | "ai" => {
                if let (Some(last), false) = (exchanges.last_mut(), message.texts.is_empty()) {
                    last.answer = Some(Value::String(message.text()));
                }
            }
            _ => {}
        }
    }
    if exchanges.is_empty() {
        // A run that failed before its first model call answered may have recorded nothing of
        // the question: that is no sign of content capture being off.
        let (message, hint) = match &failed {
            Some(_) => (format!("{what} failed and recorded no user message: no case was made from it"), None),
            None => (
                format!("{what} recorded no user message: no case was made from it"),
                Some(content_hint(spans, &ordered, convention)),
            ),
        };
        diags.push(root.at.diagnostic(Code::NoContent, message, hint));
        return None;
    }
    if let Some(last) = exchanges.last_mut() {
        last.answer = final_answer;
    }
    if failed.is_none() && exchanges.last().is_some_and(|e| e.answer.is_none()) {
        diags.push(root.at.diagnostic(
            Code::NoContent,
            format!("{what} recorded no answer: its case has no expected output"),
            Some(content_hint(spans, &ordered, convention)),
        ));
    }

    // Invocations of one conversation that send only the new message build on earlier ones.
    let conversation = views.iter().find_map(View::conversation).map(str::to_owned);
    if let Some(id) = &conversation {
        let earlier = conversations.entry(id.clone()).or_default();
        if exchanges.len() == 1 && !earlier.is_empty() {
            let mut joined = earlier.clone();
            joined.append(&mut exchanges);
            exchanges = joined;
        }
        *earlier = exchanges.clone();
    }

    let mut tools: Vec<Tool> = Vec::new();
    for view in &mut views {
        for definition in view.tool_definitions() {
            let tool = tool_of(definition);
            match tools.iter_mut().find(|t| t.name == tool.name) {
                // A definition met again (openai-agents: a TOOL span's) fills what was missing.
                Some(known) => {
                    if known.description.is_none() {
                        known.description = tool.description;
                    }
                    if known.parameters.is_none() {
                        known.parameters = tool.parameters;
                    }
                }
                None => tools.push(tool),
            }
        }
    }

    // What each executed tool answered becomes a recorded answer of that tool, so the case
    // replays the production incident (the first answer to the same arguments is kept: later
    // ones would never be served). A tool executed but not declared is added with its answers.
    // Then the results sent back to the models, for the calls they answer: apps that make no
    // tool spans record their tools' answers only there.
    let from_spans = views.iter().filter(|v| v.is_tool()).filter_map(|v| v.executed_tool().zip(v.tool_result()));
    let from_messages = results.into_iter().filter_map(|r| {
        let call = match r.id.as_deref().and_then(|id| asked.iter().find(|c| c.id.as_deref() == Some(id))) {
            Some(call) => call.clone(),
            None => Call { name: r.name?, arguments: None, id: None },
        };
        Some((call, r.result))
    });
    let recorded: Vec<(Call, Value)> = from_spans.chain(from_messages).collect();
    for (call, result) in recorded {
        let when = call.arguments.map(|arguments| When { arguments: Some(arguments), ..When::default() });
        let at = match tools.iter().position(|t| t.name == call.name) {
            Some(at) => at,
            None => {
                tools.push(tool_of(Map::from_iter([("name".to_owned(), Value::String(call.name))])));
                tools.len() - 1
            }
        };
        if let Responses::Inline(list) = tools[at].responses.get_or_insert_with(|| Responses::Inline(Vec::new())) {
            if !list.iter().any(|r| r.when == when) {
                list.push(Response { when, result: Some(result), error: None, query: None });
            }
        }
    }

    let mut context: Vec<ContextItem> = system
        .into_iter()
        .map(|text| ContextItem {
            kind: Some("custom".into()),
            source: Some("system_instructions".into()),
            content: Value::String(text),
            metadata: None,
        })
        .collect();
    for (k, view) in views.iter_mut().enumerate() {
        if !view.is_retrieval() {
            continue;
        }
        let mut without_content = 0;
        for (id, content, metadata) in view.documents() {
            let Some(content) = content.filter(|c| !c.is_null()) else {
                without_content += 1;
                continue;
            };
            context.push(ContextItem {
                kind: Some("document".into()),
                source: id.or_else(|| Some(spans[ordered[k]].name.clone())),
                content,
                metadata: (!metadata.is_empty()).then_some(metadata),
            });
        }
        if without_content > 0 {
            diags.push(spans[ordered[k]].at.diagnostic(
                Code::NoContent,
                format!(
                    "{} recorded {without_content} retrieved document(s) without their content: left out of the case",
                    describe(&spans[ordered[k]])
                ),
                Some(content_hint(spans, &ordered, convention)),
            ));
        }
    }

    // What the agent did: the tools it executed, else the calls its model asked for.
    let mut calls: Vec<Call> = views.iter().filter(|v| v.is_tool()).filter_map(View::executed_tool).collect();
    if calls.is_empty() {
        for view in &mut views {
            if let Some(outputs) = view.output_messages() {
                calls.extend(outputs.into_iter().flat_map(|m| m.calls));
            }
        }
    }

    for view in &views {
        for (key, problem) in &view.unreadable {
            diags.push(view.span.at.diagnostic(
                Code::TraceAttribute,
                format!("`{key}` of {} {problem}: it was left out", describe(view.span)),
                None,
            ));
        }
    }

    let first = exchanges.remove(0);
    let input = match &first.user.parts {
        Some(parts) => Value::Array(parts.clone()),
        None => Value::String(first.user.text()),
    };
    let mut task = Task::new(input);
    if !exchanges.is_empty() {
        task.turns = Some(exchanges.iter().map(|e| Turn { role: Role::User, content: e.user.text() }).collect());
    }
    task.context = (!context.is_empty()).then_some(context);
    task.tools = (!tools.is_empty()).then_some(tools);

    let answers: Vec<Option<Value>> = std::iter::once(&first).chain(&exchanges).map(|e| e.answer.clone()).collect();
    let mut expected = Expectations { output: answers.last().cloned().flatten(), ..Expectations::default() };
    if answers.len() > 1 && answers.iter().all(Option::is_some) {
        expected.per_turn = Some(answers.into_iter().flatten().collect());
    }
    if !calls.is_empty() {
        expected.tool_calls = Some(Value::Array(
            calls
                .into_iter()
                .map(|c| match c.arguments {
                    Some(arguments) => json!({"name": c.name, "arguments": arguments}),
                    None => json!({"name": c.name}),
                })
                .collect(),
        ));
    }

    let mut metadata = Map::new();
    let root_view = &views[root_at];
    if let Some(service) = &root.service {
        metadata.insert("service".into(), json!(service));
    }
    if let Some(agent) = root_view.agent_name().or_else(|| views.iter().find_map(View::agent_name)) {
        metadata.insert("agent".into(), json!(agent));
    }
    if let Some(model) = root_view.model().or_else(|| views.iter().find_map(View::model)) {
        metadata.insert("model".into(), json!(model));
    }
    if let Some(conversation) = &conversation {
        metadata.insert("conversation_id".into(), json!(conversation));
    }
    metadata.insert("status".into(), json!(if failed.is_some() { "error" } else { "ok" }));
    if let Some(message) = failed.filter(|m| !m.is_empty()) {
        metadata.insert("error".into(), json!(message));
    }

    let mut extra = Map::new();
    extra.insert("trace_id".into(), json!(root.trace_id));
    extra.insert("span_id".into(), json!(root.span_id));
    if let Some(service) = &root.service {
        extra.insert("service".into(), json!(service));
    }
    if root.start > 0 {
        extra.insert("time".into(), json!(rfc3339(root.start)));
    }
    if !convention.is_empty() {
        extra.insert("convention".into(), json!(convention));
    }
    Some(Case {
        id: format!("trace-{}-{}", root.trace_id, root.span_id),
        name: None,
        description: None,
        labels: None,
        task,
        expected,
        metadata: Some(metadata),
        confidence: None,
        review: Some(Review::Draft),
        provenance: Some(Provenance { format: Some(FORMAT.into()), extra, ..Provenance::default() }),
    })
}

/// The input messages of the first span (by start) that has some.
fn first_call(views: &mut [View]) -> Option<(Vec<Message>, &'static str)> {
    views.iter_mut().find_map(View::input_messages)
}

/// How the instrumentation that wrote an invocation's spans is asked to record message content
/// (opt-in everywhere), for the `W-no-content` hint: by the convention its messages were read in
/// (`convention`, empty when none were), else by the attributes its spans carry.
fn content_hint(spans: &[Span], members: &[usize], convention: &str) -> String {
    let has = |prefix: &str| members.iter().any(|&i| spans[i].attrs.keys().any(|k| k.starts_with(prefix)));
    let openinference =
        convention == conventions::OPENINFERENCE || (convention.is_empty() && has("openinference.span.kind"));
    // OpenLLMetry flattens messages into `gen_ai.prompt.N.*` (before 0.4x), and marks its spans
    // with attributes of its own: `llm.*` (`llm.request.type`) before, `gen_ai.is_streaming`,
    // `gen_ai.openai.api_base` or `gen_ai.usage.total_tokens` since.
    let openllmetry = convention == conventions::GENAI_FLAT
        || (convention.is_empty()
            && !openinference
            && ["llm.", "gen_ai.is_streaming", "gen_ai.openai.api_base", "gen_ai.usage.total_tokens"]
                .iter()
                .any(|p| has(p)));
    if openinference {
        "OpenInference records inputs and outputs unless told to hide them: unset OPENINFERENCE_HIDE_INPUTS, \
OPENINFERENCE_HIDE_OUTPUTS, OPENINFERENCE_HIDE_INPUT_MESSAGES and OPENINFERENCE_HIDE_OUTPUT_MESSAGES"
            .into()
    } else if openllmetry {
        "OpenLLMetry records message content unless TRACELOOP_TRACE_CONTENT=false: unset it (or set it to true)".into()
    } else {
        "message content is recorded only when the instrumentation is asked to: for the OpenTelemetry GenAI \
instrumentations (opentelemetry-util-genai 1.0 and later), OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only \
(or span_and_event) with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (`true` is refused there); \
older ones, with `true`, write it to OpenTelemetry logs: capture the log file with the traces \
(`casebook capture traces.json logs.json`)"
            .into()
    }
}

fn describe(span: &Span) -> String {
    let name = if span.name.is_empty() { "a span" } else { &span.name };
    format!("span `{name}` (trace {}, span {})", span.trace_id, span.span_id)
}

/// The answer in a model's output: the text of its last assistant message that has text.
fn answer_of(messages: &[Message]) -> Option<Value> {
    messages
        .iter()
        .rev()
        .filter(|m| m.role != "user" && m.role != "system" && m.role != "tool")
        .find(|m| !m.texts.is_empty())
        .map(|m| Value::String(m.text()))
}

/// OpenInference's `input.value` as the user's message.
fn value_message(value: Value) -> Message {
    match value {
        Value::String(text) => Message { role: "user".into(), texts: vec![text], ..Message::default() },
        other => Message { role: "user".into(), parts: Some(vec![other]), ..Message::default() },
    }
}

fn tool_of(mut definition: Map) -> Tool {
    let name = match definition.shift_remove("name") {
        Some(Value::String(name)) => name,
        _ => String::new(),
    };
    let description = match definition.shift_remove("description") {
        Some(Value::String(d)) => Some(d),
        _ => None,
    };
    let parameters = definition.shift_remove("parameters").filter(|p| !p.is_null());
    Tool { name, description, parameters, responses: None, default: None, extra: definition }
}

/// Unix nanoseconds as an RFC 3339 UTC time.
fn rfc3339(nanos: u64) -> String {
    match jiff::Timestamp::from_nanosecond(i128::from(nanos)) {
        Ok(time) => time.to_string(),
        Err(_) => nanos.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(role: &str, text: &str) -> Message {
        Message { role: role.into(), texts: vec![text.into()], ..Message::default() }
    }

    #[test]
    fn a_model_call_continues_the_previous_one_with_tool_results_but_not_with_a_new_question() {
        let call = Call { name: "get_weather".into(), arguments: None, id: Some("c1".into()) };
        let asked = Message { role: "assistant".into(), calls: vec![call], ..Message::default() };
        let input = vec![message("system", "Be brief."), message("user", "Weather in Paris?")];
        let result = Message {
            role: "tool".into(),
            results: vec![ToolResult { id: Some("c1".into()), name: None, result: json!("rainy") }],
            ..Message::default()
        };
        let next = [input.clone(), vec![asked.clone(), result.clone()]].concat();
        assert!(continues(&input, std::slice::from_ref(&asked), &next));
        // A new question after the answer is a new invocation (a turn of the conversation).
        let answer = message("assistant", "Rainy.");
        let later = [next.clone(), vec![answer.clone(), message("user", "And in Lyon?")]].concat();
        assert!(!continues(&next, std::slice::from_ref(&answer), &later));
        // Another question that starts the same way, without the tool's result, is not joined.
        assert!(!continues(&input, std::slice::from_ref(&asked), &[input.clone(), vec![asked.clone()]].concat()));
        // A call that asked for no tool is not continued.
        assert!(!continues(&input, &[message("assistant", "Rainy.")], &next));
    }

    #[test]
    fn times_are_written_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_544_712_660_000_000_000), "2018-12-13T14:51:00Z");
        assert_eq!(rfc3339(1_709_251_200_500_000_000), "2024-03-01T00:00:00.5Z");
    }
}
