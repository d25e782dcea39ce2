//! Agent Health test cases: a JSON array of cases or one case. Two shapes are read: the shipped
//! one (`category`, `difficulty`, `context: [{description, value}]`, `labels: ["k:v"]`) that the
//! app's importer validates, and the documented one (`context: [{type, source, content,
//! metadata}]`, `labels: [{key, value}]`, `version`, `createdAt`). Legacy `expectedTrajectory`
//! cases (without `expectedOutcomes`) are read too.

use casebook_model::{Case, Code, ContextItem, Expectations, Map, Responses, Task, excerpt};
use serde_json::{Value, json};

use crate::layout::{self, Lost, Part};
use crate::node::{Node, NodeValue};
use crate::parts;
use crate::pointer::Ptr;
use crate::source::{Cx, Fields};

pub const NAME: &str = "agenthealth";

const KNOWN: &[&str] = &[
    "id",
    "name",
    "description",
    "category",
    "difficulty",
    "initialPrompt",
    "context",
    "tools",
    "expectedOutcomes",
    "expectedTrajectory",
    "labels",
];
const DIFFICULTIES: &[&str] = &["Easy", "Medium", "Hard"];
/// Fields whose value becomes a `key:value` label.
const LABEL_FIELDS: &[&str] = &["category", "difficulty"];

pub fn read_case(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Case> {
    let entries = cx.object(node, ptr)?;
    let errors_before = cx.diags.len();
    let mut f = Fields::new(cx, entries, ptr);
    let mut layout = Map::new();
    let documented = is_documented(node);
    if documented {
        layout.insert("shape".into(), json!("documented"));
    }

    let id = f.take("id").and_then(|n| cx.string(n, &ptr.key("id")));
    let name = match f.take("name") {
        Some(n) => cx.string(n, &ptr.key("name")),
        None => {
            cx.missing(node, ptr, "name", None);
            None
        }
    };
    let description = f.take("description").and_then(|n| cx.opt_string(n, &ptr.key("description")));
    let mut labels: Option<Vec<String>> = None;
    if let Some(n) = f.take("labels") {
        let p = ptr.key("labels");
        labels = parts::list(cx, n, &p, |cx, item, p| match &item.value {
            NodeValue::String(s) => Some(s.to_string()),
            NodeValue::Object(_) => {
                let key = item.get("key").and_then(Node::as_str);
                let value = item.get("value").and_then(Node::as_str);
                match (key, value) {
                    (Some(k), Some(v)) => Some(format!("{k}:{v}")),
                    _ => {
                        cx.report(Code::WrongType, item.offset, p, "a label object needs string `key` and `value`");
                        None
                    }
                }
            }
            _ => {
                cx.wrong_type(item, p, "a string or `{key, value}`");
                None
            }
        });
        if labels.as_ref().is_some_and(|l| !l.is_empty())
            && matches!(&n.value, NodeValue::Array(items) if items.iter().any(|i| matches!(i.value, NodeValue::Object(_))))
        {
            layout.insert("label_objects".into(), Value::Bool(true));
        }
        layout.insert("labels".into(), Value::Bool(true));
    }
    let mut label_fields = Vec::new();
    for field in LABEL_FIELDS {
        match f.take(field) {
            Some(n) => {
                let p = ptr.key(field);
                if let Some(value) = cx.string(n, &p) {
                    if *field == "difficulty" && !DIFFICULTIES.contains(&value.as_str()) {
                        let d = cx.report(
                            Code::InvalidValue,
                            n.offset,
                            &p,
                            format!("unknown difficulty `{}`", excerpt(&value)),
                        );
                        d.hint = Some("use `Easy`, `Medium` or `Hard`".into());
                    }
                    labels.get_or_insert_with(Vec::new).push(format!("{field}:{value}"));
                    label_fields.push(json!(field));
                }
            }
            None if !documented => {
                cx.missing(node, ptr, field, Some(format!("the Agent Health importer requires `{field}`")))
            }
            None => {}
        }
    }
    if !label_fields.is_empty() {
        layout.insert("label_fields".into(), Value::Array(label_fields));
    }
    let input = match f.take("initialPrompt") {
        Some(n) => cx.string(n, &ptr.key("initialPrompt")),
        None => {
            cx.missing(
                node,
                ptr,
                "initialPrompt",
                Some("`initialPrompt` is the question or task for the agent".into()),
            );
            None
        }
    };
    let context = f.take("context").and_then(|n| {
        let p = ptr.key("context");
        let shipped = matches!(&n.value, NodeValue::Array(items) if items.iter().any(|i| i.get("value").is_some()));
        if shipped {
            layout.insert("context_shape".into(), json!("shipped"));
            parts::list(cx, n, &p, shipped_context_item)
        } else {
            parts::list(cx, n, &p, parts::context_item)
        }
    });
    let tools = f.take("tools").and_then(|n| parts::list(cx, n, &ptr.key("tools"), parts::tool));
    let mut expected = Expectations::default();
    let trajectory = f.take("expectedTrajectory");
    match f.take("expectedOutcomes") {
        Some(n) => expected.outcomes = parts::list(cx, n, &ptr.key("expectedOutcomes"), parts::outcome),
        None if trajectory.is_none() => {
            cx.missing(node, ptr, "expectedOutcomes", Some("list the behaviour the agent should show".into()))
        }
        None => {
            // A legacy test case: Agent Health's own bundled data, which its importer refuses.
            let offset = entries.iter().find(|e| e.key == "expectedTrajectory").map_or(node.offset, |e| e.key_offset);
            cx.report(
                Code::MissingOutcomes,
                offset,
                ptr,
                "legacy test case: it has `expectedTrajectory` but no `expectedOutcomes`",
            )
            .hint = Some(
                "Agent Health's importer refuses test cases without `expectedOutcomes`; add them before importing it there"
                    .into(),
            );
        }
    }
    expected.trajectory = trajectory.and_then(|n| cx.json(n, &ptr.key("expectedTrajectory")));
    let mut metadata = None;
    layout::lift_unknown(cx, &f, ptr, &mut metadata, &mut layout, KNOWN);

    if cx.diags[errors_before..].iter().any(|d| d.is_error()) {
        return None;
    }
    let mut task = Task::new(Value::String(input?));
    task.context = context;
    task.tools = tools;
    let (id, derived) = layout::id_or_derived(id, &task)?;
    Some(Case {
        id,
        name,
        description,
        labels,
        task,
        expected,
        metadata,
        confidence: None,
        review: None,
        provenance: layout::provenance(NAME, derived, layout),
    })
}

fn is_documented(node: &Node) -> bool {
    let object_labels = matches!(node.get("labels").map(|n| &n.value), Some(NodeValue::Array(items)) if items.iter().any(|i| matches!(i.value, NodeValue::Object(_))));
    let typed_context = matches!(node.get("context").map(|n| &n.value), Some(NodeValue::Array(items)) if items.iter().any(|i| i.get("content").is_some()));
    object_labels || typed_context || node.get("version").is_some() || node.get("createdAt").is_some()
}

fn shipped_context_item(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<ContextItem> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let source = f.take("description").and_then(|n| cx.string(n, &ptr.key("description")));
    let content = match f.take("value") {
        Some(n) => cx.json(n, &ptr.key("value")),
        None => {
            cx.missing(node, ptr, "value", None);
            None
        }
    };
    parts::unknown_fields(cx, &f, ptr, &["description", "value"]);
    Some(ContextItem { kind: None, source, content: content?, metadata: None })
}

/// What the Agent Health importer (and so casebook's reader) requires that a written case
/// `item` lacks: `category` and `difficulty` in the shipped shape, and `expectedOutcomes`
/// unless the case has a legacy `expectedTrajectory`.
pub fn required(item: &Map) -> Vec<crate::write::Required> {
    use crate::write::Required;
    let mut missing = Vec::new();
    let documented = item
        .get("labels")
        .and_then(Value::as_array)
        .is_some_and(|labels| labels.iter().any(Value::is_object))
        || ["version", "createdAt"].iter().any(|k| item.contains_key(*k))
        || item.get("context").and_then(Value::as_array).is_some_and(|c| c.iter().any(|i| i.get("content").is_some()));
    if !documented {
        if !item.contains_key("category") {
            missing.push(Required { field: "category", how: "a `category:…` label (e.g. `category:RCA`)".into() });
        }
        match item.get("difficulty").and_then(Value::as_str) {
            Some(d) if DIFFICULTIES.contains(&d) => {}
            found => missing.push(Required {
                field: "difficulty",
                how: match found {
                    Some(d) => format!("a `difficulty:…` label of `Easy`, `Medium` or `Hard` (not `{}`)", excerpt(d)),
                    None => "a `difficulty:…` label (`Easy`, `Medium` or `Hard`)".into(),
                },
            }),
        }
    }
    if !item.contains_key("expectedOutcomes") && !item.contains_key("expectedTrajectory") {
        missing.push(Required {
            field: "expectedOutcomes",
            how: "expected outcomes (`expected.outcomes`: what the agent should do)".into(),
        });
    }
    missing
}

pub fn write_case(case: &Case) -> (Map, Lost) {
    let layout = layout::layout_for(case, NAME);
    let documented = layout::text(layout, "shape") == Some("documented");
    let mut out = Map::new();
    let mut lost = Lost::default();
    if !case.provenance.as_ref().is_some_and(|p| p.id_derived) {
        out.insert("id".into(), json!(case.id));
    }
    out.insert("name".into(), json!(case.name.clone().unwrap_or_else(|| case.id.clone())));
    if let Some(d) = &case.description {
        out.insert("description".into(), json!(d));
    }
    // Labels that came from (or belong in) `category` and `difficulty` fields.
    let mut labels: Vec<&str> = case.labels.iter().flatten().map(String::as_str).collect();
    let label_fields: Vec<&str> = match layout.and_then(|l| l.get("label_fields")).and_then(Value::as_array) {
        Some(fields) => fields.iter().filter_map(Value::as_str).collect(),
        None if documented => Vec::new(),
        None => LABEL_FIELDS.to_vec(),
    };
    for field in label_fields {
        let prefix = format!("{field}:");
        if let Some(pos) = labels.iter().rposition(|l| l.starts_with(&prefix)) {
            let label = labels.remove(pos);
            out.insert(field.into(), json!(&label[prefix.len()..]));
        }
    }
    match &case.task.input {
        Value::String(s) => out.insert("initialPrompt".into(), json!(s)),
        other => {
            lost.push("input (Agent Health prompts are strings)");
            out.insert("initialPrompt".into(), json!(other.to_string()))
        }
    };
    if let Some(context) = &case.task.context {
        let shipped = layout::text(layout, "context_shape") == Some("shipped");
        let items: Vec<Value> = context
            .iter()
            .map(|c| {
                if shipped {
                    // An item read without `description` is written without it: `null` is not
                    // a string, and the reader refuses it.
                    match &c.source {
                        Some(description) => json!({"description": description, "value": c.content}),
                        None => json!({"value": c.content}),
                    }
                } else {
                    serde_json::to_value(c).unwrap_or(Value::Null)
                }
            })
            .collect();
        out.insert("context".into(), Value::Array(items));
    }
    if let Some(tools) = &case.task.tools {
        let tools = tools
            .iter()
            .map(|tool| {
                let mut value = serde_json::to_value(tool).unwrap_or(Value::Null);
                // Agent Health has no files beside a test case: a snapshot file's responses go
                // inline (casebook reads both forms).
                if let (Some(Responses::File { content, .. }), Value::Object(map)) = (&tool.responses, &mut value) {
                    map.insert("responses".into(), content.clone());
                }
                value
            })
            .collect();
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(outcomes) = &case.expected.outcomes {
        out.insert("expectedOutcomes".into(), serde_json::to_value(outcomes).unwrap_or(Value::Null));
    }
    if let Some(t) = &case.expected.trajectory {
        out.insert("expectedTrajectory".into(), t.clone());
    }
    if !labels.is_empty() || layout::flag(layout, "labels") || (layout.is_none() && case.labels.is_some()) {
        let items: Vec<Value> = if layout::flag(layout, "label_objects") || (documented && layout.is_none()) {
            labels
                .iter()
                .map(|l| match l.split_once(':') {
                    Some((k, v)) => json!({"key": k, "value": v}),
                    None => json!({"key": l, "value": ""}),
                })
                .collect()
        } else {
            labels.iter().map(|l| json!(l)).collect()
        };
        out.insert("labels".into(), Value::Array(items));
    }
    let (top, metadata) = layout::unlift(case.metadata.as_ref(), layout);
    for (key, value) in top {
        out.insert(key, value);
    }
    if metadata.is_some_and(|m| !m.is_empty()) {
        lost.push("metadata");
    }
    lost.parts(
        case,
        &[
            Part::Turns,
            Part::MemorySeeds,
            Part::SessionId,
            Part::AgentArgs,
            Part::Output,
            Part::PerTurn,
            Part::Acceptable,
            Part::Rubric,
            Part::RubricPath,
            Part::RubricVars,
            Part::ToolCalls,
            Part::Governance,
            Part::ExpectedExtra,
            Part::Confidence,
            Part::Review,
        ],
    );
    (out, lost)
}
