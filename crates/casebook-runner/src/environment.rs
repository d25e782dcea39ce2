//! A run's investigation environment (SPEC §8): the case's world snapshot answering the agent's
//! tool calls, whichever way they arrive (the chat-completions tool loop, tool calls in the agent
//! protocol, the MCP server of the session), and the log of every call and its answer.
//!
//! What matches is defined once, in [`casebook_model::snapshot`]; this adds what a run needs on
//! top: one environment per run, shared by the paths that serve it, and the calls in the order
//! they were served, for the trajectory.
//!
//! [`tool_loop`] plays one turn of a run: the agent's tool calls answered from the environment
//! until it answers or runs out of steps.

pub(crate) mod tool_loop;

use std::sync::Mutex;

use casebook_model::Tool;
use casebook_model::snapshot::{Snapshot, ToolAnswer};
use serde_json::Value;

use crate::protocol::{Serving, Step};
use crate::record::Failure;

/// The most calls of an agent in one turn unless the experiment or scenario says (`max_steps`).
pub const DEFAULT_MAX_STEPS: u32 = 10;

/// One run's environment. Cheap to share behind an `Arc`; calls may come from several tasks.
#[derive(Debug)]
pub struct Environment {
    snapshot: Snapshot,
    calls: Mutex<Vec<Step>>,
}

impl Environment {
    /// The environment of a case's tools, or `None` when none of them has recorded answers (the
    /// agent brings its own tools). A snapshot that does not compile is a `config` failure naming
    /// the place in the case.
    pub fn of(tools: Option<&[Tool]>) -> Result<Option<Environment>, Failure> {
        let Some(tools) = tools.filter(|t| t.iter().any(Tool::is_recorded)) else { return Ok(None) };
        let snapshot = Snapshot::compile(tools).map_err(|errors| {
            let list: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.pointer, e.message)).collect();
            Failure::new("config", format!("the case's tool snapshot is invalid: {}", list.join("; ")))
        })?;
        Ok(Some(Environment { snapshot, calls: Mutex::new(Vec::new()) }))
    }

    /// Answers a call and logs it. `arguments` are the call's JSON arguments (a string when the
    /// agent sent arguments that are not JSON).
    pub fn serve(&self, name: &str, arguments: &Value) -> ToolAnswer {
        let answer = self.snapshot.serve(name, arguments);
        let step = Step::ToolCall {
            name: name.to_owned(),
            arguments: arguments.clone(),
            result: Some(answer.content.clone()),
            served: Some(Serving::of(&answer)),
        };
        self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(step);
        answer
    }

    /// The calls served since the last time, in order, for the trajectory.
    pub fn drain(&self) -> Vec<Step> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn calls_are_logged_in_order_with_how_they_were_served() {
        let tools: Vec<Tool> = serde_json::from_value(json!([
            {"name": "logs", "responses": [{"when": {"includes": {"svc": "db"}}, "result": ["timeout"]}]},
            {"name": "plain"}
        ]))
        .unwrap();
        assert!(Environment::of(Some(&tools[1..])).unwrap().is_none(), "no recorded answers: no environment");
        let env = Environment::of(Some(&tools)).unwrap().expect("recorded");
        env.serve("logs", &json!({"svc": "db"}));
        env.serve("logs", &json!({"svc": "web"}));
        let steps = env.drain();
        let served: Vec<_> = steps
            .iter()
            .map(|s| match s {
                Step::ToolCall { served: Some(s), .. } => (s.how, s.entry, s.error),
                other => panic!("{other:?}"),
            })
            .collect();
        use casebook_model::snapshot::Served;
        assert_eq!(served, [(Served::Matched, Some(0), false), (Served::Unmatched, None, true)]);
        assert!(env.drain().is_empty());
    }

    #[test]
    fn a_bad_snapshot_is_a_config_failure_naming_the_place() {
        let tools: Vec<Tool> = serde_json::from_value(
            json!([{"name": "q", "responses": [{"when": {"matches": {"a": "("}}, "result": 1}]}]),
        )
        .unwrap();
        let failure = Environment::of(Some(&tools)).unwrap_err();
        assert_eq!(failure.kind, "config");
        assert!(
            failure.message.contains("/tools/0/responses/0/when/matches/a: `(` is not a valid pattern"),
            "{}",
            failure.message
        );
    }
}
