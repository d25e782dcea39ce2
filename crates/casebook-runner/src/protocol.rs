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
    /// The agent's own earlier replies (and its requests for tool calls).
    Assistant,
    /// The answer casebook served to one of the agent's tool calls.
    Tool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    pub role: Speaker,
    /// A string, or any JSON value when the case's input is one; a tool message's content is the
    /// tool's result (or the error text, with `is_error`).
    pub content: Value,
    /// An `assistant` message that asked casebook to answer tool calls: the calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// A `tool` message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A `tool` message: the tool that was called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A `tool` message whose content is an error the tool gave.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

impl Message {
    /// A message of `role` saying `content`.
    pub fn new(role: Speaker, content: Value) -> Self {
        Message { role, content, tool_calls: Vec::new(), tool_call_id: None, name: None, is_error: false }
    }

    /// The agent's message that asked for `calls` (with what it said beside them, if anything).
    pub fn asking(content: Value, calls: Vec<ToolCall>) -> Self {
        Message { tool_calls: calls, ..Message::new(Speaker::Assistant, content) }
    }

    /// The answer to one call.
    pub fn answer(result: &ToolResult) -> Self {
        Message {
            tool_call_id: Some(result.id.clone()),
            name: Some(result.name.clone()),
            is_error: result.is_error,
            ..Message::new(Speaker::Tool, result.content.clone())
        }
    }
}

/// A call of one of the task's tools that an agent asks casebook to answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// The agent's id of the call, echoed in its result; casebook numbers calls that have none
    /// (`call-1`, `call-2`… in the run).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    pub name: String,
    /// Usually an object; what the case's recorded answers are matched against.
    #[serde(default)]
    pub arguments: Value,
}

/// casebook's answer to a [`ToolCall`], from the case's world snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    /// The call's id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The recorded result, or the error text when `is_error`.
    pub content: Value,
    /// Whether the tool failed: the content is the error the agent gets.
    pub is_error: bool,
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
    /// The task's context items. A multiple-choice question's choices (the item
    /// `{type: custom, source: choices}`) come lettered as Inspect shows them: `["A) Paris",
    /// "B) Berlin"]`; the `choice` grader reads the answer as `ANSWER: A`.
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
    /// casebook's answers to the tool calls of the agent's last reply, in the order of the calls
    /// (also the last `tool` messages of `messages`). Left out when the reply had none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tool_results: Vec<ToolResult>,
    /// Whether the task's multiple-choice question has more than one right choice (Inspect's
    /// `multiple_correct`), so that a chat prompt asks for all of them (`ANSWER: $LETTERS`), as
    /// Inspect's template does. The one bit of the expectations a request carries; the runner
    /// sets it ([`crate::grade::several_right`]). Not sent to `http` and `command` agents, which
    /// get the lettered choices and word their own prompt.
    #[serde(skip)]
    #[schemars(skip)]
    pub several_answers: bool,
}

impl AgentRequest {
    /// The first turn of a run of `task`. `seeds` are the effective seeds.
    pub fn first(case_id: &str, run: u32, task: &Task, seeds: Vec<Seed>, session_id: String) -> Self {
        Self {
            case_id: case_id.to_owned(),
            run,
            turn: 0,
            messages: vec![Message::new(Speaker::User, task.input.clone())],
            context: task.context.iter().flatten().map(sent).collect(),
            tools: task.tools.iter().flatten().map(ToolDefinition::of).collect(),
            memory_seeds: seeds,
            session_id,
            agent_args: task.agent_args.clone(),
            mcp: None,
            tool_results: Vec::new(),
            several_answers: false,
        }
    }
}

/// A context item as the agent is sent it: choices lettered (`A) Paris`), the others as they are.
fn sent(item: &ContextItem) -> ContextItem {
    if !casebook_model::choices::is_choices(item) {
        return item.clone();
    }
    let options = item.content.as_array().into_iter().flatten().filter_map(Value::as_str);
    let content = options.enumerate().map(|(i, c)| Value::String(casebook_model::choices::lettered(i, c))).collect();
    ContextItem { content: Value::Array(content), ..item.clone() }
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

/// An agent's reply to one turn (or to the results of its tool calls): an `output`, or
/// `tool_calls` for casebook to answer from the case's world snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("anyOf" = [{"required": ["output"]}, {"required": ["tool_calls"]}]))]
pub struct AgentReply {
    /// The answer: usually a string. May be left out when the reply has `tool_calls`.
    #[serde(default)]
    pub output: Value,
    /// What the agent did to get there, if it says (not the calls casebook answered: those are
    /// recorded already).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trajectory: Vec<Step>,
    /// Calls of the task's tools for casebook to answer; the next request, on the same session
    /// and turn, carries their `tool_results`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

impl AgentReply {
    /// An answer without steps or calls.
    pub fn answer(output: Value) -> Self {
        AgentReply { output, ..AgentReply::default() }
    }

    /// Reads a reply as an agent wrote it: JSON with an `output`, or `tool_calls`, or both.
    pub fn parse(text: &[u8]) -> Result<AgentReply, String> {
        let value: Value = serde_json::from_slice(text).map_err(|error| error.to_string())?;
        let has_output = value.get("output").is_some();
        let reply: AgentReply = serde_json::from_value(value).map_err(|error| error.to_string())?;
        if !has_output && reply.tool_calls.is_empty() {
            return Err("it has neither `output` nor `tool_calls`".to_owned());
        }
        Ok(reply)
    }
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

/// One step of a trajectory. A step whose `type` is neither `message` nor `tool_call` is kept
/// whole, its `type` included (`reasoning`, `handoff`…).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self", tag = "type", rename_all = "snake_case")]
#[schemars(transform = other_step_any_type)]
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
    /// Anything else the agent reports (reasoning, a handoff between agents…): the whole step,
    /// its `type` included (`other` when casebook records an event of its own without one).
    Other {
        #[serde(flatten)]
        detail: Map,
    },
}

impl Serialize for Step {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            // The detail carries the agent's own `type`; writing the tag too would give the
            // object two `type` keys.
            Step::Other { detail } if detail.contains_key("type") => detail.serialize(serializer),
            _ => Step::serialize(self, serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let detail = Map::deserialize(deserializer)?;
        match detail.get("type") {
            Some(Value::String(kind)) if kind == "message" || kind == "tool_call" => {
                Step::deserialize(Value::Object(detail)).map_err(D::Error::custom)
            }
            Some(Value::String(_)) => Ok(Step::Other { detail }),
            _ => Err(D::Error::custom("a trajectory step needs a `type` string (`message`, `tool_call` or any other)")),
        }
    }
}

/// The schema of [`Step`]: the third form takes any `type` but the two others'.
fn other_step_any_type(schema: &mut schemars::Schema) {
    let Some(Value::Array(forms)) = schema.get_mut("oneOf") else { return };
    for form in forms {
        let Some(kind) = form.pointer_mut("/properties/type") else { continue };
        if kind.get("const") == Some(&Value::from("other")) {
            *kind = serde_json::json!({"type": "string", "not": {"enum": ["message", "tool_call"]}});
        }
    }
}
