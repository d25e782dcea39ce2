//! The `openai` target: casebook's request turned into a chat-completions call, and the
//! completion's message turned back into a reply.
//!
//! The runner sends the whole conversation every turn, so the history the endpoint sees is the
//! request's `messages`; the task's context and memory seeds go first, as a system message.
//! A multiple-choice question's choices are not context there: as Inspect's `multiple_choice`
//! solver does, the first user message becomes the question with its lettered choices after it,
//! under a line that asks for the answer as `ANSWER: X` (what the `choice` grader reads), or as
//! `ANSWER: $LETTERS` when more than one choice is right ([`AgentRequest::several_answers`]).
//! The model's tool calls come back as [`AgentReply::tool_calls`]; the tool loop
//! ([`crate::environment::tool_loop`]) answers them, and the answers reach the model as `tool`
//! messages after the assistant message that asked for them.

use reqwest::{Client, Url};
use serde_json::{Value, json};

use super::http::{excerpt, post_json};
use super::policy::AttemptError;
use crate::protocol::{AgentReply, AgentRequest, Message, Speaker, ToolCall};

/// What an operator's (`hitl`) message is prefixed with: chat completions have no such role.
pub const OPERATOR_PREFIX: &str = "[operator] ";

#[derive(Debug)]
pub(crate) struct OpenAiAgent {
    pub client: Client,
    /// `{base}/chat/completions`.
    pub endpoint: Url,
    pub model: String,
    pub shown: String,
}

impl OpenAiAgent {
    pub async fn call(&self, request: &AgentRequest) -> Result<AgentReply, AttemptError> {
        let body = chat_request(&self.model, request);
        let answer = post_json(&self.client, &self.endpoint, &self.shown, &body).await?;
        reply_from(&answer).map_err(|why| {
            AttemptError::fatal(
                "protocol",
                format!(
                    "{} did not answer with a chat completion ({why}); expected \
                     `{{\"choices\": [{{\"message\": {{\"content\": …, \"tool_calls\": […]}}}}]}}`, got: {}",
                    self.shown,
                    excerpt(&answer)
                ),
            )
        })
    }
}

/// The chat-completions body for one turn.
pub(crate) fn chat_request(model: &str, request: &AgentRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(preamble) = preamble(request) {
        messages.push(json!({ "role": "system", "content": preamble }));
    }
    let question = choices_of(request);
    for (i, message) in request.messages.iter().enumerate() {
        let mut message = chat_message(message);
        if let (0, Some(choices)) = (i, &question) {
            if let Some(Value::String(text)) = message.get_mut("content") {
                *text = multiple_choice_prompt(text, choices, request.several_answers);
            }
        }
        messages.push(message);
    }
    let mut body = json!({ "model": model, "messages": messages });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                let mut function = json!({ "name": tool.name });
                if let Some(description) = &tool.description {
                    function["description"] = json!(description);
                }
                function["parameters"] =
                    tool.parameters.clone().unwrap_or_else(|| json!({ "type": "object", "properties": {} }));
                json!({ "type": "function", "function": function })
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    body
}

/// One message of the conversation as chat completions have it.
fn chat_message(message: &Message) -> Value {
    let text = as_text(&message.content);
    match message.role {
        Speaker::User => json!({ "role": "user", "content": text }),
        Speaker::Hitl => json!({ "role": "user", "content": format!("{OPERATOR_PREFIX}{text}") }),
        Speaker::System => json!({ "role": "system", "content": text }),
        Speaker::Assistant if message.tool_calls.is_empty() => json!({ "role": "assistant", "content": text }),
        Speaker::Assistant => {
            let calls: Vec<Value> = message
                .tool_calls
                .iter()
                .map(|call| {
                    // Arguments travel as JSON text; ones the model wrote as broken JSON go back as written.
                    let arguments = match &call.arguments {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}})
                })
                .collect();
            let content = if text.is_empty() { Value::Null } else { Value::String(text) };
            json!({ "role": "assistant", "content": content, "tool_calls": calls })
        }
        // Chat completions have no error flag on a tool's answer: the model reads it in the text.
        Speaker::Tool if message.is_error => json!({
            "role": "tool", "tool_call_id": message.tool_call_id, "content": format!("error: {text}")
        }),
        Speaker::Tool => json!({ "role": "tool", "tool_call_id": message.tool_call_id, "content": text }),
    }
}

/// The lettered choices of the request (`A) Paris`), when its first message is the question
/// they answer: a user message in text.
fn choices_of(request: &AgentRequest) -> Option<Vec<&str>> {
    let first = request.messages.first()?;
    if first.role != Speaker::User || !first.content.is_string() {
        return None;
    }
    let item = request.context.iter().find(|item| casebook_model::choices::is_choices(item))?;
    Some(item.content.as_array()?.iter().filter_map(Value::as_str).collect())
}

/// A question with its lettered choices, laid out as Inspect's multiple-choice templates lay it
/// out: what to answer, the question, the choices. `several`: more than one choice is right
/// (Inspect's `multiple_correct`), and the answer is asked for as all their letters.
pub(crate) fn multiple_choice_prompt(question: &str, lettered: &[&str], several: bool) -> String {
    let letters = casebook_model::choices::letters(lettered.len());
    let ask = if several {
        format!(
            "Answer the following multiple choice question, where more than one choice may be right, with a \
             last line of the form 'ANSWER: $LETTERS', where LETTERS is the letters of all the choices you \
             pick, separated by commas ({letters})."
        )
    } else {
        format!(
            "Answer the following multiple choice question with a last line of the form 'ANSWER: X', \
             where X is the letter of your choice ({letters})."
        )
    };
    format!("{ask}\n\n{question}\n\n{}", lettered.join("\n"))
}

/// The system message that lists the task's context items and memory seeds, if it has any
/// (choices go with the question instead, when there is one: [`choices_of`]).
fn preamble(request: &AgentRequest) -> Option<String> {
    let with_question = choices_of(request).is_some();
    let context: Vec<_> =
        request.context.iter().filter(|item| !(with_question && casebook_model::choices::is_choices(item))).collect();
    if context.is_empty() && request.memory_seeds.is_empty() {
        return None;
    }
    let mut text = String::new();
    if !context.is_empty() {
        text.push_str("Context you are given:\n");
        for item in context {
            let label = match (&item.kind, &item.source) {
                (Some(kind), Some(source)) => format!("{kind} from {source}"),
                (Some(kind), None) => kind.clone(),
                (None, Some(source)) => source.clone(),
                (None, None) => "context".to_owned(),
            };
            text.push_str(&format!("- [{label}] {}\n", as_text(&item.content)));
        }
    }
    if !request.memory_seeds.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str("What you remember:\n");
        for seed in &request.memory_seeds {
            match &seed.target_agent {
                Some(agent) => text.push_str(&format!("- [{} for {agent}] {}\n", seed.source, seed.content)),
                None => text.push_str(&format!("- [{}] {}\n", seed.source, seed.content)),
            }
        }
    }
    Some(text.trim_end().to_owned())
}

/// A message's content as chat text: strings as they are, other JSON compactly.
fn as_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `choices[0].message`: its content is the output, its tool calls the calls to answer.
fn reply_from(answer: &[u8]) -> Result<AgentReply, String> {
    let answer: Value = serde_json::from_slice(answer).map_err(|error| format!("not JSON: {error}"))?;
    let message = answer.pointer("/choices/0/message").ok_or("no `choices[0].message`")?;
    let output = match message.get("content") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(text)) => Value::String(text.clone()),
        Some(_) => return Err("`content` is neither a string nor null".to_owned()),
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").filter(|calls| !calls.is_null()) {
        let calls = calls.as_array().ok_or("`tool_calls` is not a list")?;
        for call in calls {
            let name = call.pointer("/function/name").and_then(Value::as_str).ok_or("a tool call has no name")?;
            // Arguments come as a JSON string; a model may write broken JSON, which is kept as text.
            let arguments = match call.pointer("/function/arguments") {
                Some(Value::String(text)) => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone())),
                Some(other) => other.clone(),
                None => Value::Null,
            };
            let id = call.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
            tool_calls.push(ToolCall { id, name: name.to_owned(), arguments });
        }
    }
    Ok(AgentReply { output, tool_calls, ..AgentReply::default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use casebook_model::{ContextItem, Seed, Task};

    #[test]
    fn context_and_seeds_go_first_as_a_system_message() {
        let mut task = Task::new(json!({"question": "why?"}));
        task.context = Some(vec![ContextItem {
            kind: Some("log".into()),
            source: Some("app.log".into()),
            content: json!("ERROR pool exhausted"),
            metadata: None,
        }]);
        let seed = Seed {
            source: "user_history".into(),
            content: "prefers short answers".into(),
            target_agent: None,
            metadata: None,
            extra: Default::default(),
        };
        let mut request = AgentRequest::first("c1", 0, &task, vec![seed], "s".into());
        request.messages.push(Message::new(Speaker::Assistant, Value::Null));
        request.messages.push(Message::new(Speaker::Hitl, json!("stop")));
        let body = chat_request("m", &request);
        assert_eq!(
            body,
            json!({"model": "m", "messages": [
                {"role": "system", "content": "Context you are given:\n- [log from app.log] ERROR pool exhausted\n\n\
                                               What you remember:\n- [user_history] prefers short answers"},
                {"role": "user", "content": "{\"question\":\"why?\"}"},
                {"role": "assistant", "content": ""},
                {"role": "user", "content": "[operator] stop"},
            ]})
        );
    }

    /// Inspect's sample shape (`choices` as a context item): the protocol sends them lettered,
    /// and chat completions get them under the question, with the answer form asked for.
    #[test]
    fn choices_go_lettered_under_the_question() {
        let mut task = Task::new(json!("Capital of France?"));
        let choices = ContextItem {
            kind: Some("custom".into()),
            source: Some("choices".into()),
            content: json!(["Paris", "Berlin"]),
            metadata: None,
        };
        let log = ContextItem { kind: Some("log".into()), source: None, content: json!("x"), metadata: None };
        task.context = Some(vec![choices, log]);
        let request = AgentRequest::first("c1", 0, &task, Vec::new(), "s".into());
        assert_eq!(request.context[0].content, json!(["A) Paris", "B) Berlin"]));
        assert_eq!(request.context[1].content, json!("x"));
        let body = chat_request("m", &request);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "Context you are given:\n- [log] x"},
                {"role": "user", "content": "Answer the following multiple choice question with a last line of the form \
                    'ANSWER: X', where X is the letter of your choice (A,B).\n\nCapital of France?\n\nA) Paris\nB) Berlin"},
            ])
        );
        // A question in chat messages: the choices stay context, lettered.
        task.input = json!([{"role": "user", "content": "Capital of France?"}]);
        task.context.as_mut().unwrap().truncate(1);
        let body = chat_request("m", &AgentRequest::first("c1", 0, &task, Vec::new(), "s".into()));
        assert_eq!(
            body["messages"][0]["content"],
            "Context you are given:\n- [custom from choices] [\"A) Paris\",\"B) Berlin\"]"
        );
    }

    #[test]
    fn replies_without_a_message_are_protocol_errors() {
        assert_eq!(reply_from(b"{\"choices\": []}").unwrap_err(), "no `choices[0].message`");
        assert!(reply_from(b"<html>").unwrap_err().starts_with("not JSON"));
        let reply = reply_from(
            br#"{"choices":[{"message":{"content":null,"tool_calls":[
            {"function":{"name":"f","arguments":"{oops"}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(reply.output, Value::Null);
        assert_eq!(reply.tool_calls, vec![ToolCall { id: String::new(), name: "f".into(), arguments: json!("{oops") }]);
    }

    #[test]
    fn tool_calls_and_their_answers_go_back_as_chat_messages() {
        let mut request = AgentRequest::first("c1", 0, &Task::new(json!("why?")), Vec::new(), "s".into());
        let calls = vec![
            ToolCall { id: "call_1".into(), name: "logs".into(), arguments: json!({"svc": "db"}) },
            ToolCall { id: "call_2".into(), name: "metrics".into(), arguments: json!("{oops") },
        ];
        request.messages.push(Message::asking(Value::Null, calls));
        let answers = [
            crate::protocol::ToolResult {
                id: "call_1".into(),
                name: "logs".into(),
                content: json!(["timeout"]),
                is_error: false,
            },
            crate::protocol::ToolResult {
                id: "call_2".into(),
                name: "metrics".into(),
                content: json!("no such series"),
                is_error: true,
            },
        ];
        request.messages.extend(answers.iter().map(Message::answer));
        let body = chat_request("m", &request);
        assert_eq!(
            body["messages"].as_array().unwrap()[1..],
            [
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "logs", "arguments": "{\"svc\":\"db\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "metrics", "arguments": "{oops"}},
                ]}),
                json!({"role": "tool", "tool_call_id": "call_1", "content": "[\"timeout\"]"}),
                json!({"role": "tool", "tool_call_id": "call_2", "content": "error: no such series"}),
            ]
        );
    }
}
