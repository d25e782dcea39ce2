//! The built-in agents, for demos and tests: `echo` repeats the last message, `scripted` answers
//! from replies written in the target spec (never from the case's expectations).
//!
//! A scripted reply may investigate first: `{"tool_calls": [step, …], "output": …}` asks for
//! its steps' calls one step at a time (a step is a call `{name, arguments}`, or a list of calls
//! made together), each after casebook answered the one before, then answers `output`.

use serde_json::Value;

use super::policy::AttemptError;
use super::spec::Script;
use crate::protocol::{AgentReply, AgentRequest, Message, Speaker, ToolCall};

/// The content of the last message, as it is.
pub(crate) fn echo(request: &AgentRequest) -> AgentReply {
    AgentReply::answer(request.messages.last().map(|message| message.content.clone()).unwrap_or(Value::Null))
}

/// Turn `i` gets `replies[i % len]`; or the reply to the text of the turn's message.
pub(crate) fn scripted(script: &Script, request: &AgentRequest) -> Result<AgentReply, AttemptError> {
    let turn = turn_start(request);
    let reply = match script {
        Script::InTurn(replies) if replies.is_empty() => {
            return Err(AttemptError::fatal("config", "`builtin:scripted` has no replies"));
        }
        Script::InTurn(replies) => &replies[request.turn % replies.len()],
        Script::ByInput(replies) => {
            let input = match request.messages.get(turn).map(|message| &message.content) {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            match replies.get(&input) {
                Some(reply) => reply,
                None => {
                    return Err(AttemptError::fatal(
                        "config",
                        format!("`builtin:scripted` has no reply for the input `{input}`"),
                    ));
                }
            }
        }
    };
    let Some(steps) = reply.get("tool_calls").and_then(Value::as_array) else {
        return Ok(AgentReply::answer(reply.clone()));
    };
    // The steps already taken this turn: the agent's messages that asked for calls.
    let taken = request.messages[turn..].iter().filter(|m| !m.tool_calls.is_empty()).count();
    let Some(step) = steps.get(taken) else {
        return Ok(AgentReply::answer(reply.get("output").cloned().unwrap_or(Value::Null)));
    };
    let calls = match step {
        Value::Array(calls) => calls.iter().map(call).collect::<Result<Vec<_>, _>>()?,
        one => vec![call(one)?],
    };
    Ok(AgentReply { tool_calls: calls, ..AgentReply::default() })
}

/// Where the current turn starts in the conversation: its user, operator or system message.
fn turn_start(request: &AgentRequest) -> usize {
    request
        .messages
        .iter()
        .rposition(|m: &Message| matches!(m.role, Speaker::User | Speaker::Hitl | Speaker::System))
        .unwrap_or(0)
}

/// One scripted call.
fn call(value: &Value) -> Result<ToolCall, AttemptError> {
    serde_json::from_value(value.clone()).map_err(|error| {
        AttemptError::fatal(
            "config",
            format!("`builtin:scripted` has a tool call that is not `{{name, arguments}}` ({error}): {value}"),
        )
    })
}
