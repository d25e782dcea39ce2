//! VoltAgent datasets: `{name, description, tags, metadata, checksum, data: [{name, input,
//! expected, extra}]}`, and viteval's cached form `{timestamp, data: [{input, expected, ...}]}`
//! whose items carry extra keys at the top level.

use casebook_model::{Case, Expectations, Map, Task};
use serde_json::{Value, json};

use crate::layout::{self, Lost, Part};
use crate::node::Node;
use crate::pointer::Ptr;
use crate::source::{Cx, Fields};

pub const NAME: &str = "voltagent";
const KNOWN: &[&str] = &["id", "name", "input", "expected", "extra"];
const ACCEPTABLE: &str = "acceptableAnswers";
/// Where an item's layout notes the place of `acceptableAnswers` among `extra`'s keys, when it
/// was not the first.
const ACCEPTABLE_AT: &str = "acceptable_at";

pub fn read_item(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Case> {
    let entries = cx.object(node, ptr)?;
    let errors_before = cx.diags.len();
    let mut f = Fields::new(cx, entries, ptr);
    let mut layout = Map::new();
    let id = f.take("id").and_then(|n| cx.string(n, &ptr.key("id")));
    if id.is_some() {
        layout.insert("id".into(), Value::Bool(true));
    }
    let name = f.take("name").and_then(|n| cx.opt_string(n, &ptr.key("name")));
    let input = match f.take("input") {
        Some(n) => cx.json(n, &ptr.key("input")),
        None => {
            cx.missing(node, ptr, "input", Some("`input` may be any JSON value".into()));
            None
        }
    };
    let mut expected = Expectations {
        output: f.take("expected").and_then(|n| cx.json(n, &ptr.key("expected"))),
        ..Expectations::default()
    };
    let mut extra = f.take("extra").and_then(|n| cx.map(n, &ptr.key("extra")));
    // Its place among `extra`'s keys, for the writer (first, where it goes by default, is not noted).
    let place = extra.as_ref().and_then(|e| e.keys().position(|k| k == ACCEPTABLE)).filter(|&i| i > 0);
    if let Some(answers) = extra.as_mut().and_then(|e| e.shift_remove(ACCEPTABLE)) {
        if let Some(place) = place {
            layout.insert(ACCEPTABLE_AT.into(), json!(place));
        }
        match answers {
            Value::Array(items) => expected.acceptable = Some(items),
            _ => {
                let n = node.get("extra").and_then(|e| e.get(ACCEPTABLE)).unwrap_or(node);
                cx.wrong_type(n, &ptr.key("extra").key(ACCEPTABLE), "an array");
            }
        }
        // `extra` held only the answers: they are in `expected` now, and the writer puts them back.
        if extra.as_ref().is_some_and(|e| e.is_empty()) {
            extra = None;
        }
    }
    layout::lift_unknown(cx, &f, ptr, &mut extra, &mut layout, KNOWN);
    if cx.diags[errors_before..].iter().any(|d| d.is_error()) {
        return None;
    }
    let task = Task::new(input?);
    let (id, derived) = layout::id_or_derived(id, &task)?;
    Some(Case {
        id,
        name,
        description: None,
        labels: None,
        task,
        expected,
        metadata: extra,
        confidence: None,
        review: None,
        provenance: layout::provenance(NAME, derived, layout),
    })
}

pub fn write_item(case: &Case) -> (Map, Lost) {
    let layout = layout::layout_for(case, NAME);
    let mut out = Map::new();
    let mut lost = Lost::default();
    let derived = case.provenance.as_ref().is_some_and(|p| p.id_derived);
    if layout::flag(layout, "id") {
        out.insert("id".into(), json!(case.id));
    }
    match &case.name {
        Some(name) => {
            out.insert("name".into(), json!(name));
        }
        // Items are identified by name in VoltAgent.
        None if !derived && layout.is_none() => {
            out.insert("name".into(), json!(case.id));
        }
        None => {}
    }
    out.insert("input".into(), case.task.input.clone());
    if let Some(output) = &case.expected.output {
        out.insert("expected".into(), output.clone());
    }
    let (top, mut extra) = layout::unlift(case.metadata.as_ref(), layout);
    if let Some(acceptable) = &case.expected.acceptable {
        // Where the item had it among `extra`'s keys; first (where VoltAgent's documentation
        // writes it) for an item that had it first or came from another format.
        let mut map: Map = extra.take().into_iter().flatten().filter(|(k, _)| k != ACCEPTABLE).collect();
        let place = layout.and_then(|l| l.get(ACCEPTABLE_AT)).and_then(Value::as_u64);
        let place = place.and_then(|p| usize::try_from(p).ok()).unwrap_or(0).min(map.len());
        map.shift_insert(place, ACCEPTABLE.into(), Value::Array(acceptable.clone()));
        extra = Some(map);
    }
    if let Some(labels) = &case.labels {
        // VoltAgent keeps item tags in `extra` by convention.
        extra.get_or_insert_with(Map::new).insert("tags".into(), json!(labels));
    }
    if let Some(extra) = extra {
        out.insert("extra".into(), Value::Object(extra));
    }
    for (key, value) in top {
        out.insert(key, value);
    }
    lost.parts(
        case,
        &[
            Part::Description,
            Part::Turns,
            Part::Context,
            Part::Tools,
            Part::MemorySeeds,
            Part::SessionId,
            Part::AgentArgs,
            Part::PerTurn,
            Part::Outcomes,
            Part::Rubric,
            Part::RubricPath,
            Part::RubricVars,
            Part::Trajectory,
            Part::ToolCalls,
            Part::Governance,
            Part::ExpectedExtra,
            Part::Confidence,
            Part::Review,
        ],
    );
    (out, lost)
}
