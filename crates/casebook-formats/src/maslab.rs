//! mas-lab datasets: the `apiVersion: lab/v1`, `kind: Dataset` manifest and the flat
//! `{name, items}` shorthand, with items in the envelope form (`inputs`, `expectations`) or the
//! older flat form (`prompt`, `turns`, `expected_answer`, ...). Mixing both in one item is an
//! error, as in mas-lab's own migration script.

use casebook_model::{Case, Code, Expectations, Map, MemorySeeds, Role, Task, Turn};
use serde_json::{Value, json};

use crate::layout::{self, Lost, Part};
use crate::node::{Node, NodeValue, is_integer};
use crate::parts;
use crate::pointer::Ptr;
use crate::source::{Cx, Fields};

pub const NAME: &str = "maslab";

/// Item keys of the flat form; any of them beside `inputs` is an error.
const FLAT_KEYS: &[&str] = &[
    "prompt",
    "turns",
    "memory_seeds",
    "session_id",
    "expected_answer",
    "ground_truth",
    "expected_governance",
    "trigger",
    "expected_cost_range",
    "hitl_responses",
];
const KNOWN: &[&str] = &[
    "id",
    "inputs",
    "expectations",
    "prompt",
    "turns",
    "memory_seeds",
    "session_id",
    "expected_answer",
    "ground_truth",
    "category",
    "group",
    "type",
    "tags",
    "metadata",
];
/// Flat governance keys and their envelope names.
const GOVERNANCE: &[(&str, &str)] = &[
    ("expected_governance", "expected"),
    ("trigger", "trigger"),
    ("expected_cost_range", "expected_cost_range"),
    ("hitl_responses", "hitl_responses"),
];
/// Item fields whose value becomes a `key:value` label.
const LABEL_FIELDS: &[&str] = &["category", "group", "type"];
/// Envelope `inputs` keys without a case field; kept in metadata.
const INPUTS_KEY: &str = "inputs_keys";

pub fn read_item(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Case> {
    let entries = cx.object(node, ptr)?;
    let errors_before = cx.diags.len();
    let mut f = Fields::new(cx, entries, ptr);
    let mut layout = Map::new();
    let mut metadata = None;

    let id = match f.take("id") {
        Some(n) => match &n.value {
            NodeValue::String(s) if !s.is_empty() => Some(s.to_string()),
            NodeValue::Number(text) if is_integer(text) => {
                cx.value(n, &ptr.key("id"))?;
                layout.insert("id_int".into(), Value::Bool(true));
                Some(text.to_string())
            }
            _ => {
                cx.wrong_type(n, &ptr.key("id"), "a non-empty string");
                None
            }
        },
        None => {
            cx.missing(node, ptr, "id", Some("every mas-lab item needs a unique `id`".into()));
            None
        }
    };

    let envelope = f.has("inputs");
    let flat_keys: Vec<&str> = FLAT_KEYS.iter().copied().filter(|k| f.has(k)).collect();
    let mut task = None;
    let mut expected = Expectations::default();
    if envelope && !flat_keys.is_empty() {
        let key = flat_keys[0];
        let offset = entries.iter().find(|e| e.key == key).map_or(node.offset, |e| e.key_offset);
        let d = cx.report(
            Code::MixedShape,
            offset,
            &ptr.key(key),
            format!("item mixes the envelope form (`inputs`) with the flat field `{key}`"),
        );
        d.hint =
            Some("move it into `inputs` / `expectations` (mas-lab's migrate_dataset_envelope.py does this)".into());
    } else if envelope {
        let inputs = f.take("inputs").expect("has inputs");
        task = read_inputs(cx, inputs, &ptr.key("inputs"), &mut metadata, &mut layout);
        if let Some(n) = f.take("expectations") {
            expected = read_expectations(cx, n, &ptr.key("expectations"))?;
        }
    } else {
        layout.insert("shape".into(), json!("flat"));
        task = read_flat(cx, node, &mut f, ptr, &mut expected, &mut layout);
        if let Some(n) = f.take("expectations") {
            let from_envelope = read_expectations(cx, n, &ptr.key("expectations"))?;
            merge_expectations(&mut expected, from_envelope);
        }
    }

    let mut labels = f.take("tags").and_then(|n| cx.strings(n, &ptr.key("tags")));
    if labels.is_some() {
        layout.insert("tags".into(), Value::Bool(true));
    }
    let mut label_fields = Vec::new();
    for field in LABEL_FIELDS {
        if let Some(n) = f.take(field) {
            if let Some(value) = cx.string(n, &ptr.key(field)) {
                labels.get_or_insert_with(Vec::new).push(format!("{field}:{value}"));
                label_fields.push(json!(field));
            }
        }
    }
    if !label_fields.is_empty() {
        layout.insert("label_fields".into(), Value::Array(label_fields));
    }
    if let Some(n) = f.take("metadata") {
        if let Some(m) = cx.map(n, &ptr.key("metadata")) {
            let target = metadata.get_or_insert_with(Map::new);
            for (k, v) in m {
                target.insert(k, v);
            }
            layout.insert("metadata".into(), Value::Bool(true));
            layout.remove("metadata_absent");
        }
    }
    layout::lift_unknown(cx, &f, ptr, &mut metadata, &mut layout, KNOWN);

    if cx.diags[errors_before..].iter().any(|d| d.is_error()) {
        return None;
    }
    Some(Case {
        id: id?,
        name: None,
        description: None,
        labels,
        task: task?,
        expected,
        metadata,
        confidence: None,
        review: None,
        provenance: layout::provenance(NAME, false, layout),
    })
}

fn read_inputs(
    cx: &mut Cx<'_>,
    node: &Node,
    ptr: &Ptr<'_>,
    metadata: &mut Option<Map>,
    layout: &mut Map,
) -> Option<Task> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let user = match f.take("user") {
        Some(n) => parts::turns(cx, n, &ptr.key("user"), None),
        None => {
            cx.missing(
                node,
                ptr,
                "user",
                Some("`inputs.user` lists the user messages, e.g. `[{role: user, content: ...}]`".into()),
            );
            None
        }
    };
    let hitl = f.take("hitl").and_then(|n| parts::turns(cx, n, &ptr.key("hitl"), None));
    let memory_seeds = f
        .take("memory_seeds")
        .and_then(|n| if n.is_null() { None } else { parts::memory_seeds(cx, n, &ptr.key("memory_seeds")) });
    let session_id = f.take("session_id").and_then(|n| cx.opt_string(n, &ptr.key("session_id")));
    // `tool_fixtures`, `checkpoint` and other inputs have no case field: keep them in metadata.
    let rest: Vec<_> = f.rest().collect();
    layout::lift(cx, rest.into_iter(), ptr, metadata, layout, INPUTS_KEY);
    let user = user?;
    let Some(first) = user.first() else {
        let n = node.get("user").unwrap_or(node);
        cx.report(Code::InvalidValue, n.offset, &ptr.key("user"), "item has no user message").hint =
            Some("give at least one `{role: user, content: ...}`".into());
        return None;
    };
    if first.role != Role::User {
        layout.insert("first_role".into(), json!(first.role.as_str()));
    }
    let mut task = Task::new(Value::String(first.content.clone()));
    let mut turns: Vec<Turn> = user[1..].to_vec();
    if let Some(hitl) = hitl {
        layout.insert("hitl".into(), Value::Bool(true));
        turns.extend(hitl);
    }
    if !turns.is_empty() {
        task.turns = Some(turns);
    }
    task.memory_seeds = memory_seeds;
    task.session_id = session_id;
    Some(task)
}

fn read_expectations(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Expectations> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let mut e = Expectations {
        output: f.take("ground_truth").and_then(|n| cx.json(n, &ptr.key("ground_truth"))),
        governance: f.take("governance").and_then(|n| cx.json(n, &ptr.key("governance"))),
        tool_calls: f.take("tool_calls").and_then(|n| cx.json(n, &ptr.key("tool_calls"))),
        ..Expectations::default()
    };
    for entry in f.rest() {
        if let Some(v) = cx.json(&entry.value, &ptr.key(&entry.key)) {
            e.extra.insert(entry.key.to_string(), v);
        }
    }
    Some(e)
}

fn merge_expectations(into: &mut Expectations, from: Expectations) {
    into.output = into.output.take().or(from.output);
    into.governance = into.governance.take().or(from.governance);
    into.tool_calls = from.tool_calls;
    into.extra.extend(from.extra);
}

fn read_flat(
    cx: &mut Cx<'_>,
    node: &Node,
    f: &mut Fields<'_, '_>,
    ptr: &Ptr<'_>,
    expected: &mut Expectations,
    layout: &mut Map,
) -> Option<Task> {
    let prompt = match f.take("prompt") {
        Some(n) => cx.string(n, &ptr.key("prompt")),
        None => {
            cx.missing(node, ptr, "prompt", Some("give `prompt` (flat form) or `inputs.user` (envelope form)".into()));
            None
        }
    };
    let turns = f.take("turns").and_then(|n| parts::turns(cx, n, &ptr.key("turns"), Some(Role::User)));
    let session_id = f.take("session_id").and_then(|n| cx.opt_string(n, &ptr.key("session_id")));
    let memory_seeds = f
        .take("memory_seeds")
        .and_then(|n| if n.is_null() { None } else { parts::memory_seeds(cx, n, &ptr.key("memory_seeds")) });
    for key in ["ground_truth", "expected_answer"] {
        if let Some(n) = f.take(key) {
            if expected.output.is_none() {
                expected.output = cx.json(n, &ptr.key(key));
                layout.insert("answer_key".into(), json!(key));
            }
        }
    }
    let mut governance = Map::new();
    for (flat, envelope) in GOVERNANCE {
        if let Some(n) = f.take(flat) {
            if let Some(v) = cx.json(n, &ptr.key(flat)) {
                governance.insert((*envelope).into(), v);
            }
        }
    }
    if !governance.is_empty() {
        expected.governance = Some(Value::Object(governance));
    }
    let mut task = Task::new(Value::String(prompt?));
    if turns.is_some() {
        layout.insert("turns".into(), Value::Bool(true));
    }
    task.turns = turns.filter(|t| !t.is_empty());
    task.session_id = session_id;
    task.memory_seeds = memory_seeds;
    Some(task)
}

/// The mas-lab item for a case (envelope form unless the case came from a flat item).
/// `memory_seeds` as an item writes it: a seed file by its path (the writer decides where the
/// file goes, see [`crate::write::SeedFiles`]), inline seeds as a list.
fn seeds_value(seeds: &MemorySeeds) -> Value {
    match seeds {
        MemorySeeds::File { file, .. } | MemorySeeds::Path(file) => json!(file),
        MemorySeeds::Inline(seeds) => serde_json::to_value(seeds).unwrap_or(Value::Null),
    }
}

/// Replaces the `memory_seeds` of an item made by [`write_item`] (flat or envelope).
pub fn replace_seeds(item: &mut Map, value: Value) {
    if let Some(slot) = item.get_mut("memory_seeds") {
        *slot = value;
    } else if let Some(slot) = item.get_mut("inputs").and_then(|i| i.get_mut("memory_seeds")) {
        *slot = value;
    }
}

pub fn write_item(case: &Case) -> (Map, Lost) {
    let layout = layout::layout_for(case, NAME);
    let mut out = Map::new();
    let mut lost = Lost::default();
    let id = if layout::flag(layout, "id_int") {
        case.id.parse::<i64>().map(Value::from).unwrap_or_else(|_| json!(case.id))
    } else {
        json!(case.id)
    };
    out.insert("id".into(), id);
    let (top, inputs_extra, metadata) = layout::unlift_two(case.metadata.as_ref(), layout, INPUTS_KEY);
    let input = match &case.task.input {
        Value::String(s) => s.clone(),
        other => {
            lost.push("input (mas-lab prompts are strings)");
            other.to_string()
        }
    };
    let turns = case.task.turns.as_deref().unwrap_or_default();
    let e = &case.expected;
    if layout::text(layout, "shape") == Some("flat") {
        out.insert("prompt".into(), json!(input));
        if !turns.is_empty() || layout::flag(layout, "turns") {
            out.insert("turns".into(), serde_json::to_value(turns).unwrap_or(Value::Null));
        }
        if let Some(seeds) = &case.task.memory_seeds {
            out.insert("memory_seeds".into(), seeds_value(seeds));
        }
        if let Some(s) = &case.task.session_id {
            out.insert("session_id".into(), json!(s));
        }
        if let Some(output) = &e.output {
            out.insert(layout::text(layout, "answer_key").unwrap_or("expected_answer").into(), output.clone());
        }
        if let Some(Value::Object(governance)) = &e.governance {
            for (flat, envelope) in GOVERNANCE {
                if let Some(v) = governance.get(*envelope) {
                    out.insert((*flat).into(), v.clone());
                }
            }
        }
        let mut rest = Map::new();
        if let Some(t) = &e.tool_calls {
            rest.insert("tool_calls".into(), t.clone());
        }
        for (k, v) in &e.extra {
            rest.insert(k.clone(), v.clone());
        }
        if !rest.is_empty() {
            out.insert("expectations".into(), Value::Object(rest));
        }
    } else {
        let mut inputs = Map::new();
        let first_role = layout::text(layout, "first_role").unwrap_or("user");
        let mut user = vec![json!({"role": first_role, "content": input})];
        let mut hitl = Vec::new();
        for turn in turns {
            let message = json!({"role": turn.role.as_str(), "content": turn.content});
            if turn.role == Role::Hitl { hitl.push(message) } else { user.push(message) }
        }
        inputs.insert("user".into(), Value::Array(user));
        if !hitl.is_empty() || layout::flag(layout, "hitl") {
            inputs.insert("hitl".into(), Value::Array(hitl));
        }
        if let Some(seeds) = &case.task.memory_seeds {
            inputs.insert("memory_seeds".into(), seeds_value(seeds));
        }
        if let Some(s) = &case.task.session_id {
            inputs.insert("session_id".into(), json!(s));
        }
        for (k, v) in inputs_extra {
            inputs.insert(k, v);
        }
        out.insert("inputs".into(), Value::Object(inputs));
        let mut expectations = Map::new();
        if let Some(output) = &e.output {
            expectations.insert("ground_truth".into(), output.clone());
        }
        if let Some(g) = &e.governance {
            expectations.insert("governance".into(), g.clone());
        }
        if let Some(t) = &e.tool_calls {
            expectations.insert("tool_calls".into(), t.clone());
        }
        for (k, v) in &e.extra {
            expectations.insert(k.clone(), v.clone());
        }
        if !expectations.is_empty() {
            out.insert("expectations".into(), Value::Object(expectations));
        }
    }
    // Labels back into `tags` and the `category` / `group` / `type` fields.
    let mut labels: Vec<&str> = case.labels.iter().flatten().map(String::as_str).collect();
    let label_fields: Vec<&str> = match layout.and_then(|l| l.get("label_fields")).and_then(Value::as_array) {
        Some(fields) => fields.iter().filter_map(Value::as_str).collect(),
        None if layout.is_some() => Vec::new(),
        None => vec!["category"],
    };
    let mut fields = Vec::new();
    for field in label_fields {
        let prefix = format!("{field}:");
        if let Some(pos) = labels.iter().rposition(|l| l.starts_with(&prefix)) {
            let label = labels.remove(pos);
            fields.push((field, json!(&label[prefix.len()..])));
        }
    }
    for (field, value) in fields {
        out.insert(field.into(), value);
    }
    // A casebook `labels: []` stays an empty list; one from a mas-lab field does not.
    if !labels.is_empty() || layout::flag(layout, "tags") || (layout.is_none() && case.labels.is_some()) {
        out.insert("tags".into(), json!(labels));
    }
    if let Some(m) = metadata {
        if !m.is_empty() || layout::flag(layout, "metadata") {
            out.insert("metadata".into(), Value::Object(m));
        }
    }
    for (k, v) in top {
        out.insert(k, v);
    }
    lost.parts(
        case,
        &[
            Part::Name,
            Part::Description,
            Part::Context,
            Part::Tools,
            Part::AgentArgs,
            Part::PerTurn,
            Part::Outcomes,
            Part::Acceptable,
            Part::Rubric,
            Part::RubricPath,
            Part::RubricVars,
            Part::Trajectory,
            Part::Confidence,
            Part::Review,
        ],
    );
    (out, lost)
}
