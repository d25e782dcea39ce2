//! What a span says in each convention casebook reads, in one shape: its input and output
//! messages, system instructions, tool definitions, tool execution and retrieved documents.
//!
//! - OpenTelemetry GenAI, current: `gen_ai.input.messages`, `gen_ai.output.messages` (messages
//!   of typed `parts`), `gen_ai.system_instructions`, `gen_ai.tool.definitions`, on the span or
//!   on its `gen_ai.client.inference.operation.details` event; `execute_tool` spans with
//!   `gen_ai.tool.name` and `gen_ai.tool.call.arguments`; `retrieval` spans with
//!   `gen_ai.retrieval.documents`.
//! - Its deprecated forms: flattened `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` attributes
//!   (with `llm.request.functions.N.*` for tools), the `gen_ai.content.prompt` /
//!   `gen_ai.content.completion` events, and the per-message events (`gen_ai.user.message`,
//!   `gen_ai.choice`, …).
//! - OpenInference: `openinference.span.kind`, `input.value` / `output.value`,
//!   `llm.input_messages.N.message.*`, `llm.output_messages.N.message.tool_calls.M.tool_call.*`,
//!   `llm.tools.N.tool.*`, `retrieval.documents.N.document.*`, `session.id`; `TOOL` spans'
//!   `tool.name`, `tool.description` and `tool.parameters` (the tool's definition, as
//!   openai-agents records it).
//! - pydantic-ai's own attributes: `pydantic_ai.all_messages` on the agent's span (the whole
//!   run's messages, the only record of the question when the first model call failed), and on
//!   its deprecated format 2 the tool's `tool_arguments` and `tool_response`.
//!
//! Tool results sent back to the model are read in every shape (a `tool` message with its
//! `tool_call_id`, a message of `tool_call_response` parts — pydantic-ai sends them as a `user`
//! message, which is no user turn —, OpenInference's `message.tool_call_id`) as [`Message::results`].

use std::collections::BTreeMap;

use casebook_model::Map;
use serde_json::Value;

use super::otlp::Span;

/// A chat message in any convention's shape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    pub role: String,
    /// The text parts, in order.
    pub texts: Vec<String>,
    /// The message's parts as recorded, when it has parts other than text (an image, say).
    pub parts: Option<Vec<Value>>,
    pub calls: Vec<Call>,
    /// The tool results the message carries back to the model.
    pub results: Vec<ToolResult>,
}

impl Message {
    pub fn text(&self) -> String {
        self.texts.join("\n")
    }
}

/// A tool call: requested by a model or executed by the application.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    pub arguments: Option<Value>,
    /// The id the model gave the call, which its result refers to.
    pub id: Option<String>,
}

/// A tool's result sent back to the model: the call it answers (by id, or by tool name).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub id: Option<String>,
    pub name: Option<String>,
    pub result: Value,
}

/// Which convention (and form) a span's messages were read from.
pub const GENAI: &str = "gen_ai";
pub const GENAI_EVENTS: &str = "gen_ai-events";
pub const GENAI_FLAT: &str = "gen_ai-flattened";
pub const OPENINFERENCE: &str = "openinference";

/// Something a span recorded that casebook could not read, for a warning.
pub type Unreadable = (String, String);

/// Reads one span.
pub struct View<'s> {
    pub span: &'s Span,
    pub unreadable: Vec<Unreadable>,
}

impl<'s> View<'s> {
    pub fn new(span: &'s Span) -> Self {
        Self { span, unreadable: Vec::new() }
    }

    fn attr(&self, key: &str) -> Option<&'s Value> {
        self.span.attrs.get(key).filter(|v| !v.is_null())
    }

    fn str_attr(&self, key: &str) -> Option<&'s str> {
        self.attr(key).and_then(Value::as_str)
    }

    fn event(&self, name: &str) -> Option<&'s Map> {
        self.span.events.iter().find(|e| e.name == name).map(|e| &e.attrs)
    }

    pub fn operation(&self) -> Option<&'s str> {
        self.str_attr("gen_ai.operation.name")
    }

    /// OpenInference's span kind, upper case.
    pub fn kind(&self) -> Option<String> {
        self.str_attr("openinference.span.kind").map(str::to_ascii_uppercase)
    }

    pub fn is_invocation(&self) -> bool {
        self.operation() == Some("invoke_agent")
            || self.span.name.starts_with("invoke_agent")
            || self.kind().as_deref() == Some("AGENT")
    }

    pub fn is_tool(&self) -> bool {
        self.operation() == Some("execute_tool") || self.kind().as_deref() == Some("TOOL")
    }

    pub fn is_retrieval(&self) -> bool {
        self.operation() == Some("retrieval") || self.kind().as_deref() == Some("RETRIEVER")
    }

    /// Notes an attribute that cannot be read, once however often it is looked at.
    fn note(&mut self, key: &str, problem: String) {
        if !self.unreadable.iter().any(|(k, _)| k == key) {
            self.unreadable.push((key.to_owned(), problem));
        }
    }

    /// A JSON attribute, recorded as a JSON string or as a structured value.
    fn json_attr(&mut self, map: &'s Map, key: &str) -> Option<Value> {
        match map.get(key)? {
            Value::Null => None,
            Value::String(text) => match serde_json::from_str::<Value>(text) {
                Ok(value) => Some(value),
                Err(e) => {
                    self.note(key, format!("is not JSON ({e})"));
                    None
                }
            },
            value => Some(value.clone()),
        }
    }

    /// The messages sent to the model, and the convention they were read in.
    pub fn input_messages(&mut self) -> Option<(Vec<Message>, &'static str)> {
        let span = self.span;
        if let Some(list) = self.json_attr(&span.attrs, "gen_ai.input.messages") {
            return Some((self.messages(&list, "gen_ai.input.messages"), GENAI));
        }
        if let Some(details) = self.event("gen_ai.client.inference.operation.details") {
            if let Some(list) = self.json_attr(details, "gen_ai.input.messages") {
                return Some((self.messages(&list, "gen_ai.input.messages"), GENAI_EVENTS));
            }
        }
        let flat = indexed(&span.attrs, "gen_ai.prompt.");
        if !flat.is_empty() {
            return Some((flat.iter().map(flat_message).collect(), GENAI_FLAT));
        }
        if let Some(prompt) = self.event("gen_ai.content.prompt") {
            match prompt.get("gen_ai.prompt") {
                Some(Value::String(text)) if serde_json::from_str::<Value>(text).is_err() => {
                    return Some((vec![user_text(text)], GENAI_EVENTS));
                }
                _ => {
                    if let Some(list) = self.json_attr(prompt, "gen_ai.prompt") {
                        return Some((self.messages(&list, "gen_ai.prompt"), GENAI_EVENTS));
                    }
                }
            }
        }
        let per_message: Vec<Message> = span
            .events
            .iter()
            .filter_map(|e| {
                let role = match e.name.as_str() {
                    "gen_ai.system.message" => "system",
                    "gen_ai.user.message" => "user",
                    "gen_ai.assistant.message" => "assistant",
                    "gen_ai.tool.message" => "tool",
                    _ => return None,
                };
                Some(event_message(&e.attrs, role))
            })
            .collect();
        if !per_message.is_empty() {
            return Some((per_message, GENAI_EVENTS));
        }
        let oi = indexed(&span.attrs, "llm.input_messages.");
        if !oi.is_empty() {
            return Some((oi.iter().map(oi_message).collect(), OPENINFERENCE));
        }
        None
    }

    /// The messages the model answered with.
    pub fn output_messages(&mut self) -> Option<Vec<Message>> {
        let span = self.span;
        if let Some(list) = self.json_attr(&span.attrs, "gen_ai.output.messages") {
            return Some(self.messages(&list, "gen_ai.output.messages"));
        }
        if let Some(details) = self.event("gen_ai.client.inference.operation.details") {
            if let Some(list) = self.json_attr(details, "gen_ai.output.messages") {
                return Some(self.messages(&list, "gen_ai.output.messages"));
            }
        }
        let flat = indexed(&span.attrs, "gen_ai.completion.");
        if !flat.is_empty() {
            return Some(flat.iter().map(flat_message).collect());
        }
        if let Some(completion) = self.event("gen_ai.content.completion") {
            match completion.get("gen_ai.completion") {
                Some(Value::String(text)) if serde_json::from_str::<Value>(text).is_err() => {
                    return Some(vec![Message {
                        role: "assistant".into(),
                        texts: vec![text.clone()],
                        ..Message::default()
                    }]);
                }
                _ => {
                    if let Some(list) = self.json_attr(completion, "gen_ai.completion") {
                        return Some(self.messages(&list, "gen_ai.completion"));
                    }
                }
            }
        }
        let choices: Vec<Message> = span
            .events
            .iter()
            .filter(|e| e.name == "gen_ai.choice")
            .map(|e| match e.attrs.get("message") {
                Some(Value::Object(m)) => event_message(m, "assistant"),
                Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(m)) => event_message(&m, "assistant"),
                    _ => event_message(&e.attrs, "assistant"),
                },
                _ => event_message(&e.attrs, "assistant"),
            })
            .collect();
        if !choices.is_empty() {
            return Some(choices);
        }
        let oi = indexed(&span.attrs, "llm.output_messages.");
        if !oi.is_empty() {
            return Some(oi.iter().map(oi_message).collect());
        }
        None
    }

    /// OpenInference's `input.value` / `output.value`: parsed when its MIME type is JSON.
    pub fn value(&self, which: &str) -> Option<Value> {
        let text = self.str_attr(&format!("{which}.value"))?;
        let json = self.str_attr(&format!("{which}.mime_type")).is_some_and(|m| m.contains("json"));
        Some(match json.then(|| serde_json::from_str(text).ok()).flatten() {
            Some(value) => value,
            None => Value::String(text.to_owned()),
        })
    }

    /// System instructions recorded apart from the messages.
    pub fn system_instructions(&mut self) -> Vec<String> {
        let span = self.span;
        let value = match span.attrs.get("gen_ai.system_instructions") {
            Some(Value::String(text)) if serde_json::from_str::<Value>(text).is_err() => {
                return vec![text.clone()];
            }
            Some(_) => self.json_attr(&span.attrs, "gen_ai.system_instructions"),
            None => self
                .event("gen_ai.client.inference.operation.details")
                .and_then(|d| self.json_attr(d, "gen_ai.system_instructions")),
        };
        match value {
            Some(Value::Array(parts)) => parts.iter().filter_map(part_text).collect(),
            Some(Value::String(text)) => vec![text],
            Some(other) => part_text(&other).into_iter().collect(),
            None => Vec::new(),
        }
    }

    /// Tool definitions offered to the model: `{name, description, parameters, …}` objects.
    pub fn tool_definitions(&mut self) -> Vec<Map> {
        let span = self.span;
        let listed = match self.json_attr(&span.attrs, "gen_ai.tool.definitions") {
            Some(v) => Some(v),
            None => self
                .event("gen_ai.client.inference.operation.details")
                .and_then(|d| self.json_attr(d, "gen_ai.tool.definitions")),
        };
        if let Some(list) = listed {
            return match list {
                Value::Array(items) => items.into_iter().filter_map(tool_definition).collect(),
                _ => {
                    self.note("gen_ai.tool.definitions", "is not a list".into());
                    Vec::new()
                }
            };
        }
        let mut out = Vec::new();
        if self.is_tool() {
            // openai-agents (OpenInference) records the definition of the tool a TOOL span ran.
            if let Some(name) = self.str_attr("tool.name") {
                let mut found = Map::new();
                found.insert("name".into(), Value::String(name.to_owned()));
                if let Some(description) = self.str_attr("tool.description") {
                    found.insert("description".into(), Value::String(description.to_owned()));
                }
                if let Some(parameters) = self.json_attr(&span.attrs, "tool.parameters") {
                    found.insert("parameters".into(), parameters);
                }
                if found.len() > 1 {
                    out.push(found);
                }
            }
        }
        for tool in indexed(&span.attrs, "llm.tools.") {
            let schema = match tool.get("tool.json_schema") {
                Some(Value::String(text)) => serde_json::from_str(text).ok(),
                Some(value) => Some(value.clone()),
                None => None,
            };
            let mut found = schema.and_then(tool_definition).unwrap_or_default();
            for (key, field) in [("tool.name", "name"), ("tool.description", "description")] {
                if let Some(Value::String(v)) = tool.get(key) {
                    found.entry(field).or_insert_with(|| Value::String(v.clone()));
                }
            }
            if found.contains_key("name") {
                out.push(found);
            }
        }
        for function in indexed(&span.attrs, "llm.request.functions.") {
            let mut found = Map::new();
            for (key, value) in function {
                let value = match (key.as_str(), value) {
                    ("parameters", Value::String(text)) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
                    (_, value) => value,
                };
                found.insert(key, value);
            }
            if found.contains_key("name") {
                out.push(found);
            }
        }
        out
    }

    /// The tool this span executed, when it is a tool execution: its arguments from
    /// `gen_ai.tool.call.arguments`, pydantic-ai's format 2 `tool_arguments`, or OpenInference's
    /// `input.value` (`tool.parameters` is the tool's schema, not the call's arguments).
    pub fn executed_tool(&self) -> Option<Call> {
        let name = self.str_attr("gen_ai.tool.name").or_else(|| self.str_attr("tool.name"))?;
        let arguments = match self.attr("gen_ai.tool.call.arguments").or_else(|| self.attr("tool_arguments")) {
            Some(Value::String(text)) => Some(serde_json::from_str(text).unwrap_or(Value::String(text.clone()))),
            Some(value) => Some(value.clone()),
            None => self.value("input"),
        };
        let id = self.str_attr("gen_ai.tool.call.id").or_else(|| self.str_attr("tool_call.id")).map(str::to_owned);
        Some(Call { name: name.to_owned(), arguments, id })
    }

    /// What the tool this span executed returned, as recorded (`gen_ai.tool.call.result`,
    /// pydantic-ai's format 2 `tool_response`, or OpenInference's `output.value`, parsed when its
    /// MIME type is JSON): what the agent got.
    pub fn tool_result(&self) -> Option<Value> {
        match self.attr("gen_ai.tool.call.result").or_else(|| self.attr("tool_response")) {
            Some(value) => Some(value.clone()),
            None => self.value("output"),
        }
    }

    /// pydantic-ai's `pydantic_ai.all_messages` on an agent's span: every message of the run,
    /// the question first and the answer (when there was one) last.
    pub fn all_messages(&mut self) -> Option<Vec<Message>> {
        let span = self.span;
        let list = self.json_attr(&span.attrs, "pydantic_ai.all_messages")?;
        Some(self.messages(&list, "pydantic_ai.all_messages"))
    }

    /// Retrieved documents: `(id, content, metadata)`.
    pub fn documents(&mut self) -> Vec<(Option<String>, Option<Value>, Map)> {
        let span = self.span;
        let mut out = Vec::new();
        if let Some(list) = self.json_attr(&span.attrs, "gen_ai.retrieval.documents") {
            for doc in list.as_array().into_iter().flatten() {
                let Value::Object(doc) = doc else { continue };
                let mut rest = doc.clone();
                let id = rest.shift_remove("id").map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned));
                let content = rest.shift_remove("content").or_else(|| rest.shift_remove("text"));
                out.push((id, content, rest));
            }
        }
        for doc in indexed(&span.attrs, "retrieval.documents.") {
            let mut id = None;
            let mut content = None;
            let mut metadata = Map::new();
            for (key, value) in doc {
                match key.as_str() {
                    "document.id" => id = Some(value.as_str().map_or_else(|| value.to_string(), str::to_owned)),
                    "document.content" => content = Some(value),
                    "document.score" => {
                        metadata.insert("score".into(), value);
                    }
                    "document.metadata" => match value {
                        Value::String(text) => match serde_json::from_str::<Value>(&text) {
                            Ok(Value::Object(m)) => metadata.extend(m),
                            _ => {
                                metadata.insert("metadata".into(), Value::String(text));
                            }
                        },
                        Value::Object(m) => metadata.extend(m),
                        other => {
                            metadata.insert("metadata".into(), other);
                        }
                    },
                    other => {
                        metadata.insert(other.trim_start_matches("document.").to_owned(), value);
                    }
                }
            }
            out.push((id, content, metadata));
        }
        out
    }

    /// The conversation the span belongs to.
    pub fn conversation(&self) -> Option<&'s str> {
        self.str_attr("gen_ai.conversation.id").or_else(|| self.str_attr("session.id"))
    }

    pub fn agent_name(&self) -> Option<&'s str> {
        self.str_attr("gen_ai.agent.name").or_else(|| self.str_attr("agent.name"))
    }

    pub fn model(&self) -> Option<&'s str> {
        self.str_attr("gen_ai.response.model")
            .or_else(|| self.str_attr("gen_ai.request.model"))
            .or_else(|| self.str_attr("llm.model_name"))
    }

    /// Messages in the GenAI shape (`{role, parts}`) or the chat-completions shape
    /// (`{role, content, tool_calls}`), or a bare string (one user message).
    fn messages(&mut self, list: &Value, key: &str) -> Vec<Message> {
        match list {
            Value::Array(items) => items
                .iter()
                .filter_map(|item| match item {
                    Value::Object(m) => Some(json_message(m)),
                    Value::String(text) => Some(user_text(text)),
                    _ => None,
                })
                .collect(),
            Value::Object(m) => vec![json_message(m)],
            Value::String(text) => vec![user_text(text)],
            _ => {
                self.note(key, "is not a list of messages".into());
                Vec::new()
            }
        }
    }
}

fn user_text(text: &str) -> Message {
    Message { role: "user".into(), texts: vec![text.to_owned()], ..Message::default() }
}

/// A message as JSON: GenAI parts, or chat-completions `content` and `tool_calls`. A message
/// made only of tool results (pydantic-ai sends them as a `user` message) has the role `tool`.
fn json_message(m: &Map) -> Message {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user").to_owned();
    let mut message = Message { role, ..Message::default() };
    let parts = m.get("parts").or_else(|| m.get("content").filter(|c| c.is_array()));
    match parts {
        Some(Value::Array(parts)) => {
            let mut other = false;
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
                match kind {
                    "tool_call" | "tool_use" | "function_call" => {
                        if let Some(call) = json_call(part) {
                            message.calls.push(call);
                        }
                    }
                    "text" | "input_text" | "output_text" => message.texts.extend(part_text(part)),
                    "tool_call_response" | "tool_result" => {
                        let id = ["id", "tool_call_id", "tool_use_id"]
                            .iter()
                            .find_map(|k| part.get(*k).and_then(Value::as_str))
                            .map(str::to_owned);
                        let name = part.get("name").and_then(Value::as_str).map(str::to_owned);
                        let result = ["response", "result", "content"]
                            .iter()
                            .find_map(|k| part.get(*k))
                            .cloned()
                            .unwrap_or(Value::Null);
                        message.results.push(ToolResult { id, name, result });
                    }
                    "reasoning" | "thinking" => {}
                    _ => other = true,
                }
            }
            if other {
                message.parts = Some(parts.clone());
            }
        }
        _ => {
            if let Some(text) = m.get("content").and_then(Value::as_str) {
                message.texts.push(text.to_owned());
            }
        }
    }
    if let Some(Value::Array(calls)) = m.get("tool_calls") {
        message.calls.extend(calls.iter().filter_map(json_call));
    }
    if message.role == "tool" && message.results.is_empty() {
        // Chat completions: `{role: tool, tool_call_id, content}`.
        let id = m.get("tool_call_id").or_else(|| m.get("id")).and_then(Value::as_str).map(str::to_owned);
        let name = m.get("name").and_then(Value::as_str).map(str::to_owned);
        let result = match std::mem::take(&mut message.texts) {
            texts if !texts.is_empty() => Value::String(texts.join("\n")),
            _ => m.get("content").cloned().unwrap_or(Value::Null),
        };
        message.results.push(ToolResult { id, name, result });
    }
    if !message.results.is_empty() && message.texts.is_empty() && message.calls.is_empty() {
        message.role = "tool".into();
        message.parts = None;
    }
    message
}

/// A tool call as JSON: `{name, arguments}`, `{function: {name, arguments}}` or `{name, input}`.
fn json_call(call: &Value) -> Option<Call> {
    let function = call.get("function").unwrap_or(call);
    let name = function.get("name")?.as_str()?.to_owned();
    let arguments = function.get("arguments").or_else(|| function.get("input")).map(|a| match a {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| a.clone()),
        other => other.clone(),
    });
    let id = call.get("id").or_else(|| call.get("call_id")).and_then(Value::as_str).map(str::to_owned);
    Some(Call { name, arguments, id })
}

/// The text of a part: `{type: text, content}` (GenAI), `{type: text, text}`, or a string.
fn part_text(part: &Value) -> Option<String> {
    match part {
        Value::String(text) => Some(text.clone()),
        Value::Object(m) => m.get("content").or_else(|| m.get("text")).and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// A tool definition: flat (`{type, name, description, parameters}`) or chat-completions
/// (`{type: function, function: {…}}`).
fn tool_definition(value: Value) -> Option<Map> {
    let Value::Object(mut m) = value else { return None };
    if let Some(Value::Object(function)) = m.shift_remove("function") {
        m.shift_remove("type");
        m.extend(function);
    }
    m.get("name").and_then(Value::as_str).is_some().then_some(m)
}

/// A message of a deprecated per-message event: `content` (text or JSON) and `tool_calls`.
fn event_message(attrs: &Map, role: &str) -> Message {
    let role = attrs.get("role").and_then(Value::as_str).unwrap_or(role).to_owned();
    let mut m = Map::new();
    m.insert("role".into(), Value::String(role));
    for key in ["content", "tool_calls", "id", "tool_call_id"] {
        if let Some(value) = attrs.get(key) {
            let value = match value {
                Value::String(text) if text.trim_start().starts_with(['[', '{']) => {
                    serde_json::from_str(text).unwrap_or_else(|_| value.clone())
                }
                other => other.clone(),
            };
            m.insert(key.into(), value);
        }
    }
    json_message(&m)
}

/// A message of flattened `gen_ai.prompt.N.*` attributes.
fn flat_message(m: &Map) -> Message {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user").to_owned();
    let mut message = Message { role, ..Message::default() };
    if let Some(content) = m.get("content") {
        match content {
            Value::String(text) => match serde_json::from_str::<Value>(text) {
                // Some libraries put a list of content parts here as JSON.
                Ok(Value::Array(parts)) => message.texts.extend(parts.iter().filter_map(part_text)),
                _ => message.texts.push(text.clone()),
            },
            other => message.texts.extend(part_text(other)),
        }
    }
    for call in indexed(m, "tool_calls.") {
        if let Some(Value::String(name)) = call.get("name") {
            let arguments = call.get("arguments").map(|a| match a {
                Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| a.clone()),
                other => other.clone(),
            });
            let id = call.get("id").and_then(Value::as_str).map(str::to_owned);
            message.calls.push(Call { name: name.clone(), arguments, id });
        }
    }
    tool_message(&mut message, m.get("tool_call_id"));
    message
}

/// A flattened message of role `tool`: its text is the result of the call `id` names.
fn tool_message(message: &mut Message, id: Option<&Value>) {
    if message.role == "tool" && !message.texts.is_empty() {
        let id = id.and_then(Value::as_str).map(str::to_owned);
        let result = Value::String(std::mem::take(&mut message.texts).join("\n"));
        message.results.push(ToolResult { id, name: None, result });
    }
}

/// A message of OpenInference's flattened `message.*` attributes.
fn oi_message(m: &Map) -> Message {
    let role = m.get("message.role").and_then(Value::as_str).unwrap_or("user").to_owned();
    let mut message = Message { role, ..Message::default() };
    let content = m.get("message.content").and_then(Value::as_str);
    if let Some(text) = content {
        message.texts.push(text.to_owned());
    }
    for content_part in indexed(m, "message.contents.") {
        let kind = content_part.get("message_content.type").and_then(Value::as_str).unwrap_or("text");
        match (kind, content_part.get("message_content.text")) {
            // openai-agents records the text both as `content` and as its one text part.
            ("text", Some(Value::String(text))) if content == Some(text.as_str()) => {}
            ("text", Some(Value::String(text))) => message.texts.push(text.clone()),
            ("reasoning", _) => {}
            _ => {
                let parts = message.parts.get_or_insert_with(Vec::new);
                parts.push(Value::Object(content_part.clone()));
            }
        }
    }
    for call in indexed(m, "message.tool_calls.") {
        if let Some(Value::String(name)) = call.get("tool_call.function.name") {
            let arguments = call.get("tool_call.function.arguments").map(|a| match a {
                Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| a.clone()),
                other => other.clone(),
            });
            let id = call.get("tool_call.id").and_then(Value::as_str).map(str::to_owned);
            message.calls.push(Call { name: name.clone(), arguments, id });
        }
    }
    tool_message(&mut message, m.get("message.tool_call_id"));
    message
}

/// Flattened list attributes `PREFIX.N.rest`: for each N in order, its `rest` keys.
pub fn indexed(attrs: &Map, prefix: &str) -> Vec<Map> {
    let mut found: BTreeMap<usize, Map> = BTreeMap::new();
    for (key, value) in attrs {
        let Some(rest) = key.strip_prefix(prefix) else { continue };
        let Some((index, field)) = rest.split_once('.') else { continue };
        let Ok(index) = index.parse::<usize>() else { continue };
        found.entry(index).or_default().insert(field.to_owned(), value.clone());
    }
    found.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flattened_lists_are_read_in_index_order_not_key_order() {
        let attrs: Map = json!({
            "gen_ai.prompt.10.role": "user", "gen_ai.prompt.10.content": "ten",
            "gen_ai.prompt.2.role": "user", "gen_ai.prompt.2.content": "two",
        })
        .as_object()
        .unwrap()
        .clone();
        let texts: Vec<_> = indexed(&attrs, "gen_ai.prompt.").iter().map(|m| flat_message(m).text()).collect();
        assert_eq!(texts, ["two", "ten"]);
    }

    #[test]
    fn chat_completion_tool_calls_are_read_with_their_arguments() {
        let m = json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]});
        let message = json_message(m.as_object().unwrap());
        assert_eq!(
            message.calls,
            [Call { name: "get_weather".into(), arguments: Some(json!({"city": "Paris"})), id: Some("c1".into()) }]
        );
        assert!(message.texts.is_empty());
    }
}
