//! casebook's own format: a dataset document `{name, description, labels, metadata, cases: [...]}`
//! in YAML or JSON, or JSONL with one case a line. Field names are those of SPEC §2; unknown
//! fields are errors here (with a suggestion), since `metadata` is the place for extra data.

use casebook_model::{CASE_FIELDS, Case, Code, DatasetHeader, Expectations, Provenance, Review, Task, excerpt};
use serde_json::Value;

use crate::node::{Node, NodeValue};
use crate::parts;
use crate::pointer::Ptr;
use crate::source::{Cx, Fields, did_you_mean};

const EXPECTED_FIELDS: &[&str] = &[
    "output",
    "per_turn",
    "outcomes",
    "acceptable",
    "rubric",
    "rubric_path",
    "rubric_vars",
    "trajectory",
    "tool_calls",
    "governance",
];
/// The key of the header record a native JSONL file may start with.
pub const HEADER_KEY: &str = "$dataset";
/// The header in a `{"$dataset": {...}}` record, if `node` is one.
pub fn header_record<'n, 's>(node: &'n Node<'s>) -> Option<&'n Node<'s>> {
    match &node.value {
        NodeValue::Object(entries) if entries.len() == 1 && entries[0].key == HEADER_KEY => Some(&entries[0].value),
        _ => None,
    }
}

pub const HEADER_FIELDS: &[&str] = &["name", "description", "labels", "metadata", "provenance", "cases"];

pub fn read_case(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Case> {
    let entries = cx.object(node, ptr)?;
    let errors_before = cx.diags.len();
    let mut f = Fields::new(cx, entries, ptr);
    let id = f.take("id").and_then(|n| match &n.value {
        NodeValue::String(s) if !s.is_empty() => Some(s.to_string()),
        NodeValue::String(_) => {
            cx.report(Code::InvalidValue, n.offset, &ptr.key("id"), "the case id is empty");
            None
        }
        _ => {
            let d = cx.report(
                Code::WrongType,
                n.offset,
                &ptr.key("id"),
                format!("expected a string, found {}", n.value.kind()),
            );
            d.hint = Some("case ids are strings: quote it".into());
            None
        }
    });
    let name = f.take("name").and_then(|n| cx.string(n, &ptr.key("name")));
    let description = f.take("description").and_then(|n| cx.string(n, &ptr.key("description")));
    let labels = f.take("labels").and_then(|n| cx.strings(n, &ptr.key("labels")));
    let input = match f.take("input") {
        Some(n) => cx.json(n, &ptr.key("input")),
        None => {
            cx.missing(node, ptr, "input", Some("`input` is the first thing sent to the agent".into()));
            None
        }
    };
    let turns = f.take("turns").and_then(|n| parts::turns(cx, n, &ptr.key("turns"), None));
    let context = f.take("context").and_then(|n| parts::list(cx, n, &ptr.key("context"), parts::context_item));
    let tools = f.take("tools").and_then(|n| parts::list(cx, n, &ptr.key("tools"), parts::tool));
    let memory_seeds = f.take("memory_seeds").and_then(|n| parts::memory_seeds(cx, n, &ptr.key("memory_seeds")));
    let session_id = f.take("session_id").and_then(|n| cx.string(n, &ptr.key("session_id")));
    let agent_args = f.take("agent_args").and_then(|n| cx.map(n, &ptr.key("agent_args")));
    let expected = f
        .take("expected")
        .and_then(|n| expectations(cx, n, &ptr.key("expected"), turns.as_deref().map_or(1, |t| t.len() + 1)));
    let metadata = f.take("metadata").and_then(|n| cx.map(n, &ptr.key("metadata")));
    let confidence = f.take("confidence").and_then(|n| confidence(cx, n, &ptr.key("confidence")));
    let review = f.take("review").and_then(|n| review(cx, n, &ptr.key("review")));
    let provenance = f.take("provenance").and_then(|n| provenance(cx, n, &ptr.key("provenance")));
    parts::unknown_fields(cx, &f, ptr, &CASE_FIELDS);

    if cx.diags[errors_before..].iter().any(|d| d.is_error()) {
        return None;
    }
    let task = Task { input: input?, turns, context, tools, memory_seeds, session_id, agent_args };
    let mut provenance = provenance;
    let id = match id {
        Some(id) => id,
        None => {
            let p = provenance.get_or_insert_with(Provenance::default);
            p.id_derived = true;
            p.id_made = true;
            crate::layout::derived_id(&task)?
        }
    };
    Some(Case {
        id,
        name,
        description,
        labels,
        task,
        expected: expected.unwrap_or_default(),
        metadata,
        confidence,
        review,
        provenance,
    })
}

fn expectations(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, messages: usize) -> Option<Expectations> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let mut e = Expectations {
        output: f.take("output").and_then(|n| cx.json(n, &ptr.key("output"))),
        ..Expectations::default()
    };
    if let Some(n) = f.take("per_turn") {
        let p = ptr.key("per_turn");
        if let Some(items) = cx.array(n, &p) {
            if items.len() != messages {
                let d = cx.report(
                    Code::PerTurnLength,
                    n.offset,
                    &p,
                    format!(
                        "`per_turn` has {} items but the case sends {messages} message{}",
                        items.len(),
                        if messages == 1 { "" } else { "s" }
                    ),
                );
                d.hint = Some("give one expected value for the input and one for each turn".into());
            } else {
                e.per_turn = cx.json(n, &p).and_then(|v| match v {
                    Value::Array(items) => Some(items),
                    _ => None,
                });
            }
        }
    }
    e.outcomes = f.take("outcomes").and_then(|n| parts::list(cx, n, &ptr.key("outcomes"), parts::outcome));
    e.acceptable = f.take("acceptable").and_then(|n| {
        cx.array(n, &ptr.key("acceptable"))?;
        match cx.json(n, &ptr.key("acceptable"))? {
            Value::Array(items) => Some(items),
            _ => None,
        }
    });
    let rubric = f.take("rubric");
    let rubric_path = f.take("rubric_path");
    if let (Some(_), Some(path)) = (rubric, rubric_path) {
        let d = cx.report(
            Code::RubricConflict,
            path.offset,
            &ptr.key("rubric_path"),
            "`rubric` and `rubric_path` are both set",
        );
        d.hint = Some("keep one: `rubric` inline or `rubric_path` to a file".into());
    } else {
        e.rubric = rubric.and_then(|n| cx.string(n, &ptr.key("rubric")));
        e.rubric_path = rubric_path.and_then(|n| cx.string(n, &ptr.key("rubric_path")));
    }
    e.rubric_vars = f.take("rubric_vars").and_then(|n| cx.map(n, &ptr.key("rubric_vars")));
    e.trajectory = f.take("trajectory").and_then(|n| cx.json(n, &ptr.key("trajectory")));
    e.tool_calls = f.take("tool_calls").and_then(|n| cx.json(n, &ptr.key("tool_calls")));
    e.governance = f.take("governance").and_then(|n| cx.json(n, &ptr.key("governance")));
    // Other expectation keys are kept: they are ground truth whatever their name. A key that
    // looks like a misspelt known one gets a warning.
    for entry in f.rest() {
        if let Some(known) = did_you_mean(&entry.key, EXPECTED_FIELDS) {
            cx.report(
                Code::SuspiciousField,
                entry.key_offset,
                &ptr.key(&entry.key),
                format!("unknown expectation `{}` is kept as is", excerpt(&entry.key)),
            )
            .hint = Some(format!("did you mean `{known}`?"));
        }
        if let Some(v) = cx.json(&entry.value, &ptr.key(&entry.key)) {
            e.extra.insert(entry.key.to_string(), v);
        }
    }
    Some(e)
}

fn confidence(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<f64> {
    let value = match &node.value {
        NodeValue::Number(text) => text.parse::<f64>().ok(),
        _ => {
            cx.wrong_type(node, ptr, "a number between 0 and 1");
            return None;
        }
    };
    match value {
        Some(v) if (0.0..=1.0).contains(&v) => Some(v),
        _ => {
            cx.report(Code::InvalidValue, node.offset, ptr, "`confidence` must be between 0 and 1");
            None
        }
    }
}

fn review(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Review> {
    match cx.string(node, ptr)?.as_str() {
        "draft" => Some(Review::Draft),
        "reviewed" => Some(Review::Reviewed),
        "rejected" => Some(Review::Rejected),
        other => {
            let d =
                cx.report(Code::InvalidValue, node.offset, ptr, format!("unknown review state `{}`", excerpt(other)));
            d.hint = Some("use `draft`, `reviewed` or `rejected`".into());
            None
        }
    }
}

pub fn provenance(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Provenance> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let mut p =
        Provenance { format: f.take("format").and_then(|n| cx.string(n, &ptr.key("format"))), ..Provenance::default() };
    if let Some(n) = f.take("id_derived") {
        match n.value {
            NodeValue::Bool(b) => p.id_derived = b,
            _ => cx.wrong_type(n, &ptr.key("id_derived"), "a boolean"),
        }
    }
    if let Some(layout) = f.take("layout").and_then(|n| cx.map(n, &ptr.key("layout"))) {
        p.layout = layout;
    }
    for entry in f.rest() {
        if let Some(v) = cx.json(&entry.value, &ptr.key(&entry.key)) {
            p.extra.insert(entry.key.to_string(), v);
        }
    }
    Some(p)
}

/// The header of a native dataset document (everything but `cases`).
pub fn read_header(cx: &mut Cx<'_>, root: &Node) -> DatasetHeader {
    let mut header = DatasetHeader::default();
    let Some(entries) = cx.object(root, &Ptr::ROOT) else { return header };
    let mut f = Fields::new(cx, entries, &Ptr::ROOT);
    let root_ptr = Ptr::ROOT;
    f.take("cases");
    header.name = f.take("name").and_then(|n| cx.string(n, &root_ptr.key("name")));
    header.description = f.take("description").and_then(|n| cx.string(n, &root_ptr.key("description")));
    header.labels = f.take("labels").and_then(|n| cx.strings(n, &root_ptr.key("labels")));
    header.metadata = f.take("metadata").and_then(|n| cx.map(n, &root_ptr.key("metadata")));
    header.provenance = f.take("provenance").and_then(|n| provenance(cx, n, &root_ptr.key("provenance")));
    parts::unknown_fields(cx, &f, &root_ptr, HEADER_FIELDS);
    header
}
