//! The case (SPEC §2). Its fields are split into two types on purpose: [`Task`] is everything an
//! agent may see, [`Expectations`] everything it must never see. Code that builds agent requests
//! takes a `&Task` and so has no path to the ground truth.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Map;
use crate::snapshot::{Fallback, Responses};

/// The top-level fields of a case, in the order SPEC §2 gives them: what readers of casebook's
/// own format accept, what the console's search treats as a field path, and (with `input_json`)
/// the columns of a Parquet table.
pub const CASE_FIELDS: [&str; 16] = [
    "id",
    "name",
    "description",
    "labels",
    "input",
    "turns",
    "context",
    "tools",
    "memory_seeds",
    "session_id",
    "agent_args",
    "expected",
    "metadata",
    "confidence",
    "review",
    "provenance",
];

/// One evaluation scenario.
///
/// Optional collections are `Option` so that "absent" and "empty" stay distinct: a source file
/// with `"tags": []` converts back with `"tags": []`, one without tags converts back without.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Case {
    /// Unique within the dataset and stable across versions.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Plain tags (`math`) or `key:value` labels (`category:RCA`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// What the agent may see.
    #[serde(flatten)]
    pub task: Task,
    /// What the agent must never see.
    #[serde(default, skip_serializing_if = "Expectations::is_empty")]
    pub expected: Expectations,
    /// Anything else; kept, filterable, never sent to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map>,
    /// How much the label itself is trusted, 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Review>,
    /// Where the case came from, and what a writer of that format needs to give it back as it was.
    #[serde(default, skip_serializing_if = "Provenance::is_absent")]
    pub provenance: Option<Provenance>,
}

/// A case as read: every field at the top level. Serde reads a `#[serde(flatten)]` field by
/// buffering the whole object first, which made reading a case three times slower; this type
/// has the same fields without it, and becomes a [`Case`] by moving them.
#[derive(Deserialize)]
struct CaseFields {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    labels: Option<Vec<String>>,
    input: Value,
    #[serde(default)]
    turns: Option<Vec<Turn>>,
    #[serde(default)]
    context: Option<Vec<ContextItem>>,
    #[serde(default)]
    tools: Option<Vec<Tool>>,
    #[serde(default)]
    memory_seeds: Option<MemorySeeds>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    agent_args: Option<Map>,
    #[serde(default)]
    expected: Expectations,
    #[serde(default)]
    metadata: Option<Map>,
    #[serde(default)]
    confidence: Option<f64>,
    #[serde(default)]
    review: Option<Review>,
    #[serde(default)]
    provenance: Option<Provenance>,
}

impl<'de> Deserialize<'de> for Case {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let f = CaseFields::deserialize(deserializer)?;
        Ok(Case {
            id: f.id,
            name: f.name,
            description: f.description,
            labels: f.labels,
            task: Task {
                input: f.input,
                turns: f.turns,
                context: f.context,
                tools: f.tools,
                memory_seeds: f.memory_seeds,
                session_id: f.session_id,
                agent_args: f.agent_args,
            },
            expected: f.expected,
            metadata: f.metadata,
            confidence: f.confidence,
            review: f.review,
            provenance: f.provenance,
        })
    }
}

/// The half of a case that an agent may see (the "world snapshot").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    /// The first thing sent to the agent: a string, any JSON value, or a list of messages.
    pub input: Value,
    /// Later turns, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<Vec<Turn>>,
    /// Logs, metrics, documents and queries the agent is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<ContextItem>>,
    /// Tools the agent may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// Memory loaded before turn 0: a list of seeds or a path to a seed file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_seeds: Option<MemorySeeds>,
    /// Fixed conversation id; absent means a fresh session per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Per-case agent configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_args: Option<Map>,
}

impl Task {
    /// A task with only an input.
    pub fn new(input: Value) -> Self {
        Self { input, turns: None, context: None, tools: None, memory_seeds: None, session_id: None, agent_args: None }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    /// An operator stepping in (human in the loop).
    Hitl,
    System,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::User, Role::Hitl, Role::System];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Hitl => "hitl",
            Role::System => "system",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Self::ALL.into_iter().find(|role| role.as_str() == text)
    }
}

/// One item of context. All fields but `content` are optional because the systems casebook reads
/// do not agree on them (Agent Health ships `{description, value}` and documents
/// `{type, source, content, metadata}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextItem {
    /// `log`, `metric`, `trace`, `document`, `query` or `custom`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub content: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// The world snapshot: recorded answers to calls of this tool, the first that matches
    /// answering (see [`crate::snapshot`]). Never sent to the agent as such.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responses: Option<Responses>,
    /// What a call no response matches gets; absent, an error saying nothing was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Fallback>,
    /// Other keys of the source's tool definition.
    #[serde(flatten)]
    pub extra: Map,
}

impl Tool {
    /// Whether the tool carries recorded answers (or a default) for the run to serve.
    pub fn is_recorded(&self) -> bool {
        self.responses.is_some() || self.default.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum MemorySeeds {
    /// Seeds given inline.
    Inline(Vec<Seed>),
    /// A seed file as it was when the dataset was read: its path as the dataset names it
    /// (relative to the dataset file) and its document as JSON. A stored version carries its
    /// seeds this way, so it never depends on files outside the store, and a changed seed file
    /// changes the case.
    File { file: String, content: Value },
    /// A seed file that was not read (a dataset read from standard input, or stored before
    /// seed files were kept).
    Path(String),
}

impl MemorySeeds {
    /// The seeds, read the way mas-lab reads them: a list, or a mapping with the list under
    /// `seeds`, `items`, `memory_seeds` or `entries`; an entry without `source` takes its `key`
    /// (or `id`), and one without `content` its `text`. `Err` says what is wrong; a bare path
    /// has no seeds to give.
    pub fn seeds(&self) -> Result<Vec<Seed>, String> {
        match self {
            MemorySeeds::Inline(seeds) => Ok(seeds.clone()),
            MemorySeeds::Path(file) => Err(format!("the seed file `{file}` was not read with the dataset")),
            MemorySeeds::File { file, content } => {
                seeds_of_document(content).map_err(|e| format!("seed file `{file}`: {e}"))
            }
        }
    }

    /// The path of the seed file, when the seeds come from one.
    pub fn file(&self) -> Option<&str> {
        match self {
            MemorySeeds::Inline(_) => None,
            MemorySeeds::File { file, .. } | MemorySeeds::Path(file) => Some(file),
        }
    }
}

/// The list of seeds a seed file's document holds (see [`MemorySeeds::seeds`]).
pub fn seed_list(content: &Value) -> Option<(&'static str, &Vec<Value>)> {
    match content {
        Value::Array(list) => Some(("", list)),
        Value::Object(map) => SEED_LIST_KEYS.iter().find_map(|k| match map.get(*k) {
            Some(Value::Array(list)) => Some((*k, list)),
            _ => None,
        }),
        _ => None,
    }
}

/// Keys under which a seed file's mapping may hold its list, in the order they are looked for.
pub const SEED_LIST_KEYS: &[&str] = &["seeds", "items", "memory_seeds", "entries"];

fn seeds_of_document(content: &Value) -> Result<Vec<Seed>, String> {
    let (_, list) = seed_list(content).ok_or_else(|| {
        "holds neither a list nor a mapping with `seeds`, `items`, `memory_seeds` or `entries`".to_owned()
    })?;
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let mut item = item.clone();
            if let Value::Object(map) = &mut item {
                if !map.contains_key("source") {
                    if let Some(key) = map.get("key").or_else(|| map.get("id")).cloned() {
                        map.insert("source".into(), key);
                    }
                }
                if !map.contains_key("content") {
                    if let Some(text) = map.get("text").cloned() {
                        map.insert("content".into(), text);
                    }
                }
            }
            serde_json::from_value(item).map_err(|e| format!("entry {i}: {e}"))
        })
        .collect()
}

/// A document pre-loaded into agent memory before the first turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Seed {
    /// A provenance label such as `user_history`; not a path.
    pub source: String,
    pub content: String,
    /// The agent that receives it; absent means every agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map>,
    /// Other keys of the seed (for example a seed file's `key`).
    #[serde(flatten)]
    pub extra: Map,
}

/// The half of a case the agent must never see (the ground truth).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Expectations {
    /// The expected answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// One expected value per turn; its length equals the number of messages sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_turn: Option<Vec<Value>>,
    /// Behaviour the agent should show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<Vec<Outcome>>,
    /// Other accepted answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptable: Option<Vec<Value>>,
    /// A per-case judge rubric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<String>,
    /// A rubric file, relative to the suite that runs the dataset (letta `rubric_path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric_vars: Option<Map>,
    /// Expected steps and tool use (Agent Health `expectedTrajectory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    /// Governance and human-in-the-loop expectations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governance: Option<Value>,
    /// Other expectation keys of the source (mas-lab `metrics`, `recovery`, ...).
    #[serde(flatten)]
    pub extra: Map,
}

impl Expectations {
    pub fn is_empty(&self) -> bool {
        self == &Expectations::default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Outcome {
    Text(String),
    Detailed { outcome: String, role: OutcomeRole },
}

impl Outcome {
    pub fn text(&self) -> &str {
        match self {
            Outcome::Text(text) | Outcome::Detailed { outcome: text, .. } => text,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeRole {
    /// Must hold for the case to pass.
    Gate,
    /// Reported, not required.
    Observe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Review {
    Draft,
    Reviewed,
    Rejected,
}

/// Where a case came from. `format` names the source format; `id_derived` marks an id that
/// casebook made up because the source had none (it is never written back to such a format);
/// `layout` holds what that format's writer needs to reproduce the source shape exactly (which
/// keys were at the top level, which spelling a field used). Other writers ignore `layout`.
/// Other keys (a captured case's `trace_id`, say) are kept in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Provenance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub id_derived: bool,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub layout: Map,
    /// Anything else a producer recorded (a source trace id, say).
    #[serde(flatten)]
    pub extra: Map,
    /// The case's 0-based place among the cases of the file it was read from, which is how
    /// letta names the results of a row without an id. It is not part of the case's content
    /// (moving a row does not change the case): readers set it, and a stored version's order
    /// gives it back.
    #[serde(skip)]
    pub row: Option<u64>,
    /// Whether the reader made the id up as it read the case (its row had none), where
    /// `id_derived` may also come from a file that holds the id (a native file written from such
    /// a case). Only such ids are made unique by the reader. Not part of the content either.
    #[serde(skip)]
    pub id_made: bool,
}

impl Provenance {
    /// Whether a case's provenance has nothing to write (none, or only a row number).
    pub fn is_absent(provenance: &Option<Provenance>) -> bool {
        provenance
            .as_ref()
            .is_none_or(|p| p.format.is_none() && !p.id_derived && p.layout.is_empty() && p.extra.is_empty())
    }
}

#[cfg(test)]
mod fields_tests {
    use super::{CASE_FIELDS, Case};

    /// A field added to `Case` (or its flattened `Task`) and not to the list would be refused by
    /// casebook's own reader: the schema the JSON Schema export describes must list the same.
    #[test]
    fn case_fields_are_the_schema_properties() {
        let schema = serde_json::to_value(schemars::schema_for!(Case)).unwrap();
        let mut properties: Vec<&str> = schema["properties"].as_object().unwrap().keys().map(String::as_str).collect();
        properties.sort_unstable();
        let mut listed = CASE_FIELDS.to_vec();
        listed.sort_unstable();
        assert_eq!(properties, listed);
    }
}
