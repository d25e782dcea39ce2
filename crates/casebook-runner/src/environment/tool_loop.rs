//! One turn of a run as a loop: the agent is called, and while it replies with tool calls the
//! run's [`Environment`] answers them and the agent is called again with the answers, on the same
//! session, until it answers or the turn has used its `max_steps` calls.
//!
//! The same loop serves every target: a chat-completions model's `tool_calls` and an agent
//! protocol reply's `tool_calls` arrive alike in [`AgentReply::tool_calls`], and their answers go
//! back as `tool` messages in the conversation (plus [`AgentRequest::tool_results`]), which the
//! `openai` target turns into chat-completions tool messages.

use serde_json::{Value, json};

use super::Environment;
use crate::protocol::{AgentRequest, Message, Speaker, Step, ToolCall, ToolResult};
use crate::record::Failure;
use crate::target::Target;

/// How a turn ended.
#[derive(Debug)]
pub(crate) enum TurnEnd {
    /// The agent answered.
    Answered(Value),
    /// The agent was still calling tools when the turn's steps ran out (a `max-steps` failure).
    Unfinished(Failure),
}

/// Plays the turn whose message ends `request.messages`: calls `target`, answers its tool calls
/// from `environment`, and records in `trajectory`, in order, what the agent reported, what it
/// said beside its calls, and each call with its answer. At most `max_steps` calls of the agent.
///
/// Without an environment a chat-completions model's calls are recorded unanswered and its
/// content is the answer (tools are declared, not executed); an agent protocol reply with tool
/// calls is a `protocol` failure, since nothing can answer them.
pub(crate) async fn play_turn(
    target: &Target,
    request: &mut AgentRequest,
    environment: Option<&Environment>,
    max_steps: u32,
    trajectory: &mut Vec<Step>,
) -> Result<TurnEnd, Failure> {
    let max_steps = max_steps.max(1);
    let mut step = 0;
    // The served calls of this turn that the agent's own reports may repeat: those from here on.
    let mut unreported = trajectory.len();
    loop {
        step += 1;
        let reply = target.call(request).await?;
        // Calls the environment served while the agent worked (its MCP server) came first.
        if let Some(environment) = environment {
            trajectory.extend(environment.drain());
        }
        merge_reported(trajectory, &mut unreported, reply.trajectory);
        request.tool_results.clear();
        if reply.tool_calls.is_empty() {
            return Ok(TurnEnd::Answered(reply.output));
        }
        let Some(environment) = environment else {
            if target.is_chat_completions() {
                trajectory.extend(reply.tool_calls.into_iter().map(unanswered));
                return Ok(TurnEnd::Answered(reply.output));
            }
            let names: Vec<String> = reply.tool_calls.iter().map(|call| format!("`{}`", call.name)).collect();
            return Err(Failure::new(
                "protocol",
                format!(
                    "{} replied with tool calls ({}), but case `{}` has no recorded tool answers to give: reply with \
                     an `output`, or record the tools' answers in the case (`responses`, `default`)",
                    target.name(),
                    names.join(", "),
                    request.case_id
                ),
            ));
        };
        if !is_silent(&reply.output) {
            trajectory.push(Step::Message { role: Speaker::Assistant, content: reply.output.clone(), operator: false });
        }
        if step >= max_steps {
            let names: Vec<String> = reply.tool_calls.iter().map(|call| format!("`{}`", call.name)).collect();
            trajectory.extend(reply.tool_calls.into_iter().map(unanswered));
            trajectory.push(Step::Other {
                detail: [
                    ("event".to_owned(), json!("max_steps")),
                    ("max_steps".to_owned(), json!(max_steps)),
                    ("turn".to_owned(), json!(request.turn)),
                ]
                .into_iter()
                .collect(),
            });
            return Ok(TurnEnd::Unfinished(Failure::new(
                "max-steps",
                format!(
                    "the agent was still calling tools after {max_steps} step{} of turn {} (`max_steps`); its last \
                     calls were not answered: {}",
                    if max_steps == 1 { "" } else { "s" },
                    request.turn,
                    names.join(", ")
                ),
            )));
        }
        let mut numbered = request.messages.iter().map(|m| m.tool_calls.len()).sum::<usize>();
        let calls: Vec<ToolCall> = reply
            .tool_calls
            .into_iter()
            .map(|mut call| {
                numbered += 1;
                if call.id.is_empty() {
                    call.id = format!("call-{numbered}");
                }
                call
            })
            .collect();
        let results: Vec<ToolResult> = calls
            .iter()
            .map(|call| {
                let answer = environment.serve(&call.name, &call.arguments);
                ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content: answer.content,
                    is_error: answer.is_error,
                }
            })
            .collect();
        trajectory.extend(environment.drain());
        request.messages.push(Message::asking(reply.output, calls));
        request.messages.extend(results.iter().map(Message::answer));
        request.tool_results = results;
    }
}

/// Appends what an agent reports to `trajectory`, except the tool calls the environment already
/// served and recorded: a reported call with the same tool and arguments as a served one at or
/// after `unreported` (in order: each served call stands for one report, and reports match
/// later served calls than the last one matched) is that call, kept once, as served.
/// `unreported` moves past each served call matched.
fn merge_reported(trajectory: &mut Vec<Step>, unreported: &mut usize, reported: Vec<Step>) {
    let served_end = trajectory.len();
    for step in reported {
        if let Step::ToolCall { name, arguments, .. } = &step {
            let found = trajectory[*unreported..served_end].iter().position(|served| match served {
                Step::ToolCall { name: n, arguments: a, served: Some(_), .. } => {
                    n == name && same_arguments(a, arguments)
                }
                _ => false,
            });
            if let Some(at) = found {
                *unreported += at + 1;
                continue;
            }
        }
        trajectory.push(step);
    }
}

/// Whether two calls' arguments are the same, one of them perhaps as its JSON text (as
/// chat-completions agents report them).
fn same_arguments(a: &Value, b: &Value) -> bool {
    fn parsed(v: &Value) -> Option<Value> {
        v.as_str().and_then(|text| serde_json::from_str(text).ok())
    }
    a == b || parsed(a).as_ref() == Some(b) || parsed(b).as_ref() == Some(a)
}

/// A call nobody answered, as a trajectory step.
fn unanswered(call: ToolCall) -> Step {
    Step::ToolCall { name: call.name, arguments: call.arguments, result: None, served: None }
}

/// Whether what an agent said beside its tool calls is nothing (most say nothing).
fn is_silent(output: &Value) -> bool {
    match output {
        Value::Null => true,
        Value::String(text) => text.trim().is_empty(),
        _ => false,
    }
}
