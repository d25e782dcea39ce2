//! The built-in agents, for demos and tests: `echo` repeats the last message, `scripted` answers
//! from replies written in the target spec (never from the case's expectations).

use serde_json::Value;

use super::policy::AttemptError;
use super::spec::Script;
use crate::protocol::{AgentReply, AgentRequest};

/// The content of the last message, as it is.
pub(crate) fn echo(request: &AgentRequest) -> AgentReply {
    let output = request.messages.last().map(|message| message.content.clone()).unwrap_or(Value::Null);
    AgentReply { output, trajectory: Vec::new() }
}

/// Turn `i` gets `replies[i % len]`; or the reply to the last message's text.
pub(crate) fn scripted(script: &Script, request: &AgentRequest) -> Result<AgentReply, AttemptError> {
    let output = match script {
        Script::InTurn(replies) if replies.is_empty() => {
            return Err(AttemptError::fatal("config", "`builtin:scripted` has no replies"));
        }
        Script::InTurn(replies) => replies[request.turn % replies.len()].clone(),
        Script::ByInput(replies) => {
            let input = match request.messages.last().map(|message| &message.content) {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            match replies.get(&input) {
                Some(reply) => reply.clone(),
                None => {
                    return Err(AttemptError::fatal(
                        "config",
                        format!("`builtin:scripted` has no reply for the input `{input}`"),
                    ));
                }
            }
        }
    };
    Ok(AgentReply { output, trajectory: Vec::new() })
}
