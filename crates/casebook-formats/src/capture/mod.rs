//! Production traces become cases (`casebook capture`): OTLP JSON traces in the OpenTelemetry
//! GenAI or OpenInference conventions are read into spans ([`otlp`]), each span's messages in
//! one shape ([`conventions`]), and every agent invocation becomes one case.
//!
//! An invocation is an `invoke_agent` span (OpenInference: an `AGENT` span) that no other
//! invocation encloses; a trace without one is one invocation from its root, when it holds model
//! calls. Of the invocation and the spans under it:
//! - the conversation comes from the invocation's own input messages, else from the first model
//!   call's: the first user message is the input, later ones are turns, system messages and
//!   system instructions are context items (`source: system_instructions`);
//! - invocations of one conversation (`gen_ai.conversation.id`, OpenInference `session.id`)
//!   whose input holds only the new message are joined to the earlier ones captured with them,
//!   so each case replays the conversation up to its invocation;
//! - tool definitions become `tools`, retrieved documents `context` items (`type: document`);
//! - each tool execution with a recorded result (`gen_ai.tool.call.result`, OpenInference
//!   `output.value`) becomes a recorded answer of its tool (`when: {arguments}` and `result`),
//!   so the case serves the production answers when it is run;
//! - what the agent did is recorded as **draft** expectations (`review: draft`): the final
//!   answer as `expected.output`, the answers of earlier turns as `expected.per_turn`, the tools
//!   it executed (else the calls its model asked for) as `expected.tool_calls`;
//! - the id is `trace-{trace id}-{span id}`, so capturing a trace again finds the same case;
//!   provenance keeps trace id, span id, service, start time and the convention read.
//!
//! Content the trace did not record (content capture is opt-in in every instrumentation) is a
//! warning located at the span, and an invocation without any user message makes no case.

mod conventions;
mod document;
mod otlp;
pub mod stream;

use std::collections::HashMap;

use casebook_model::snapshot::{Response, When};
use casebook_model::{
    Case, Code, ContextItem, Diagnostic, Expectations, Map, Provenance, Responses, Review, Role, Task, Tool, Turn,
};
use serde_json::{Value, json};

use conventions::{Call, Message, View};
use otlp::Span;

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
    diagnostics: stream::Kept,
}

impl Capture {
    pub fn new() -> Self {
        Self::default()
    }

    /// A capture that holds about `bytes` of spans, and as much of cases, in memory before it
    /// uses temporary files (the default is [`stream::SPANS_IN_MEMORY`]).
    pub fn with_memory(bytes: usize) -> Self {
        Self { spans: stream::Spans::with_memory(bytes), diagnostics: stream::Kept::default() }
    }

    /// Reads one file, `file` being its name as diagnostics show it. Only the spans' attributes
    /// of the conventions read are kept; the file itself is not.
    pub fn read(&mut self, file: &str, reader: impl std::io::BufRead) -> std::io::Result<()> {
        otlp::read(file, reader, &mut self.spans, &mut self.diagnostics)
    }

    /// Adds one span, whatever it was read from (the one way spans enter a capture).
    pub fn push(&mut self, span: Span) {
        self.spans.extend([span]);
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
        stream::cases(self.spans, self.diagnostics)
    }
}

/// What joins invocations of different traces into one conversation: its id
/// (`gen_ai.conversation.id`, OpenInference `session.id`), read on the invocation's spans in the
/// order they started, as [`invocation_case`] reads it.
fn join_key(spans: &[Span], members: &[usize]) -> Option<String> {
    let mut ordered: Vec<usize> = members.to_vec();
    ordered.sort_by_key(|&i| (spans[i].start, i));
    ordered.iter().find_map(|&i| View::new(&spans[i]).conversation().map(str::to_owned))
}

/// The invocations of one trace: `(span, the spans under it, itself first)`.
fn trace_invocations(spans: &[Span], members: &[usize]) -> Vec<(usize, Vec<usize>)> {
    let by_id: HashMap<&str, usize> = members.iter().map(|&i| (spans[i].span_id.as_str(), i)).collect();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
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
    matches!(view.operation(), Some("chat" | "text_completion" | "generate_content"))
        || view.kind().as_deref() == Some("LLM")
        || view.input_messages().is_some()
        || view.output_messages().is_some()
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
    conversations: &mut HashMap<String, Vec<Exchange>>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Case> {
    let root = &spans[top];
    let mut ordered: Vec<usize> = members.to_vec();
    ordered.sort_by_key(|&i| (spans[i].start, i));
    let mut views: Vec<View> = ordered.iter().map(|&i| View::new(&spans[i])).collect();
    let root_at = ordered.iter().position(|&i| i == top).expect("the invocation is among its spans");

    // The conversation sent: the invocation's own messages; else its input (OpenInference's
    // `input.value`: what the user asked, where a model call may have been sent a prompt made
    // from it) with the system messages of the first model call; else the first model call's.
    let own = views[root_at].input_messages();
    let (messages, convention) = match (own, views[root_at].value("input")) {
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
        let own =
            views[root_at].output_messages().and_then(|m| answer_of(&m)).or_else(|| views[root_at].value("output"));
        own.or_else(|| {
            let mut by_end: Vec<usize> = (0..views.len()).collect();
            by_end.sort_by_key(|&k| std::cmp::Reverse((spans[ordered[k]].end, k)));
            by_end.into_iter().find_map(|k| views[k].output_messages().and_then(|m| answer_of(&m)))
        })
    };

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
        diags.push(root.at.diagnostic(
            Code::NoContent,
            format!("{what} recorded no user message: no case was made from it"),
            Some(CONTENT_HINT.into()),
        ));
        return None;
    }
    if let Some(last) = exchanges.last_mut() {
        last.answer = final_answer;
    }
    if exchanges.last().is_some_and(|e| e.answer.is_none()) {
        diags.push(root.at.diagnostic(
            Code::NoContent,
            format!("{what} recorded no answer: its case has no expected output"),
            Some(CONTENT_HINT.into()),
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
            if !tools.iter().any(|t| t.name == tool.name) {
                tools.push(tool);
            }
        }
    }

    // What each executed tool answered becomes a recorded answer of that tool, so the case
    // replays the production incident (the first answer to the same arguments is kept: later
    // ones would never be served). A tool executed but not declared is added with its answers.
    for view in views.iter().filter(|v| v.is_tool()) {
        let (Some(call), Some(result)) = (view.executed_tool(), view.tool_result()) else { continue };
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
                Some(CONTENT_HINT.into()),
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
    if let Some(agent) = root_view.agent_name() {
        metadata.insert("agent".into(), json!(agent));
    }
    if let Some(model) = root_view.model().or_else(|| views.iter().find_map(View::model)) {
        metadata.insert("model".into(), json!(model));
    }
    if let Some(conversation) = &conversation {
        metadata.insert("conversation_id".into(), json!(conversation));
    }
    metadata.insert("status".into(), json!(if root.error.is_some() { "error" } else { "ok" }));
    if let Some(message) = root.error.as_deref().filter(|m| !m.is_empty()) {
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

const CONTENT_HINT: &str = "message content is recorded only when the instrumentation is asked to (for OpenTelemetry GenAI \
instrumentations, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true; for OpenInference, do not hide inputs and outputs)";

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

    #[test]
    fn times_are_written_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_544_712_660_000_000_000), "2018-12-13T14:51:00Z");
        assert_eq!(rfc3339(1_709_251_200_500_000_000), "2024-03-01T00:00:00.5Z");
    }
}
