//! What casebook sends an agent and what it gets back: the `http` protocol's bodies, which the
//! other targets (`openai`, `command`, the built-in agents) are adapted to.
//!
//! A request is built from a case's [`Task`] only (plus the experiment's seeds and settings), so
//! nothing here can carry the case's expectations.

use casebook_model::snapshot::{Served, ToolAnswer};
use casebook_model::{ContextItem, Map, Seed, Task, Tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    User,
    /// An operator stepping in (a `hitl` turn).
    Hitl,
    System,
    /// The agent's own earlier replies.
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    pub role: Speaker,
    /// A string, or any JSON value when the case's input is one.
    pub content: Value,
}

/// One turn's request: the conversation so far (ending with the new user, operator or system
/// message), and the task's world.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct AgentRequest {
    /// Which case and run this is (for the agent's logs; not part of the task).
    pub case_id: String,
    pub run: u32,
    /// 0-based turn number.
    pub turn: usize,
    pub messages: Vec<Message>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub context: Vec<ContextItem>,
    /// The task's tools as definitions: their recorded answers are served call by call, never
    /// sent whole.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// The effective seeds: the experiment's, then the case's; each to its `target_agent` or
    /// to all agents. Sent on every turn; agents load them before turn 0.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub memory_seeds: Vec<Seed>,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_args: Option<Map>,
    /// The address of this session's MCP server (streamable HTTP on `127.0.0.1`), which serves
    /// `tools` with the case's recorded answers for as long as the run goes on. Only when the case
    /// has recorded answers and the target takes MCP (`http` and `command` agents, unless the
    /// scenario says `mcp: false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<String>,
}

impl AgentRequest {
    /// The first turn of a run of `task`. `seeds` are the effective seeds.
    pub fn first(case_id: &str, run: u32, task: &Task, seeds: Vec<Seed>, session_id: String) -> Self {
        Self {
            case_id: case_id.to_owned(),
            run,
            turn: 0,
            messages: vec![Message { role: Speaker::User, content: task.input.clone() }],
            context: task.context.clone().unwrap_or_default(),
            tools: task.tools.iter().flatten().map(ToolDefinition::of).collect(),
            memory_seeds: seeds,
            session_id,
            agent_args: task.agent_args.clone(),
            mcp: None,
        }
    }
}

/// A tool as the agent is told about it: the case's tool without its recorded answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolDefinition {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Other keys of the source's tool definition.
    #[serde(flatten)]
    pub extra: Map,
}

impl ToolDefinition {
    pub fn of(tool: &Tool) -> Self {
        ToolDefinition {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: tool.parameters.clone(),
            extra: tool.extra.clone(),
        }
    }
}

/// An agent's reply to one turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentReply {
    /// The answer: usually a string.
    pub output: Value,
    /// What the agent did to get there, if it says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trajectory: Vec<Step>,
}

/// How casebook answered a tool call from the case's snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Serving {
    pub how: Served,
    /// The index of the recorded response that answered, in the tool's `responses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<usize>,
    /// Whether the agent got an error rather than a result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub error: bool,
}

impl Serving {
    pub fn of(answer: &ToolAnswer) -> Self {
        Serving { how: answer.served, entry: answer.entry, error: answer.is_error }
    }
}

/// One step of a trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Step {
    /// A message in the conversation (the runner records the user and operator turns it sent,
    /// `hitl` ones as `operator`).
    Message {
        role: Speaker,
        content: Value,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        operator: bool,
    },
    /// A call of one of the task's tools.
    ToolCall {
        name: String,
        #[serde(default)]
        arguments: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// How casebook answered the call from the case's snapshot; absent for calls an agent
        /// reports having made with its own tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        served: Option<Serving>,
    },
    /// Anything else the agent reports (reasoning, a handoff between agents…).
    Other {
        #[serde(flatten)]
        detail: Map,
    },
}
