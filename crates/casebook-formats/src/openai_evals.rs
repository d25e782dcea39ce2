//! OpenAI evals samples, one JSON object a line: `{"input": …, "ideal": …}`. `input` is a prompt
//! (a string) or chat messages (`[{role, content}, …]`, kept as they are: system and few-shot
//! messages are part of what the agent is sent); `messages` is read as another spelling of it.
//! `ideal` is the answer: one value, or a list of answers any of which is right
//! (`expected.acceptable`). A number is kept, with a `W-number-ideal` warning: evals' `Match`
//! compares text and refuses it. Samples have no ids (evals names them by their place in the file):
//! an `id` key is read when there is one, and other keys (a match eval's `choices`, say) are kept
//! in `metadata` and written back at the top level.

use casebook_model::{Case, Code, Expectations, Map, Task};
use serde_json::{Value, json};

use crate::layout::{self, Lost, Part};
use crate::node::{Node, NodeValue};
use crate::pointer::Ptr;
use crate::source::{Cx, Fields};

pub const NAME: &str = "openai-evals";
const KNOWN: &[&str] = &["id", "input", "messages", "ideal"];

pub fn read_row(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Case> {
    let entries = cx.object(node, ptr)?;
    let errors_before = cx.diags.len();
    let mut f = Fields::new(cx, entries, ptr);
    let mut layout = Map::new();
    let id = f.take("id").and_then(|n| cx.string(n, &ptr.key("id")));
    let input = match (f.take("input"), f.take("messages")) {
        (Some(input), None) => cx.json(input, &ptr.key("input")),
        (None, Some(messages)) => {
            layout.insert("messages".into(), Value::Bool(true));
            cx.json(messages, &ptr.key("messages"))
        }
        (Some(_), Some(messages)) => {
            let d = cx.report(
                Code::FieldConflict,
                messages.offset,
                &ptr.key("messages"),
                "a sample has both `input` and `messages`",
            );
            d.hint = Some("`messages` is another name for `input`: keep one of them".into());
            None
        }
        (None, None) => {
            cx.missing(node, ptr, "input", Some("a sample's `input` is a prompt or a list of chat messages".into()));
            None
        }
    };
    let mut expected = Expectations::default();
    let ideal = f.take("ideal");
    if let Some(node) = ideal {
        warn_of_numbers(cx, node, &ptr.key("ideal"));
    }
    if let Some(ideal) = ideal.and_then(|n| cx.json(n, &ptr.key("ideal"))) {
        match ideal {
            Value::Array(answers) => expected.acceptable = Some(answers),
            answer => expected.output = Some(answer),
        }
    }
    let mut metadata = None;
    layout::lift_unknown(cx, &f, ptr, &mut metadata, &mut layout, KNOWN);
    if cx.diags[errors_before..].iter().any(|d| d.is_error()) {
        return None;
    }
    let task = Task::new(input?);
    if id.is_some() {
        layout.insert("id".into(), Value::Bool(true));
    }
    let (id, derived) = layout::id_or_derived(id, &task)?;
    Some(Case {
        id,
        name: None,
        description: None,
        labels: None,
        task,
        expected,
        metadata,
        confidence: None,
        review: None,
        provenance: layout::provenance(NAME, derived, layout),
    })
}

/// Warns of an `ideal` that is a number, or a list holding numbers: evals' `Match` compares
/// text and refuses them. casebook keeps the value as it is.
fn warn_of_numbers(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) {
    let warn = |cx: &mut Cx<'_>, n: &Node, p: &Ptr<'_>| {
        let NodeValue::Number(text) = &n.value else { return };
        let d = cx.report(Code::NumberIdeal, n.offset, p, format!("`ideal` {text} is a number"));
        d.hint = Some(format!("evals' `Match` compares text and refuses a number: write it as \"{text}\""));
    };
    match &node.value {
        NodeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                warn(cx, item, &ptr.index(i));
            }
        }
        _ => warn(cx, node, ptr),
    }
}

pub fn write_row(case: &Case) -> (Map, Lost) {
    let layout = layout::layout_for(case, NAME);
    let mut out = Map::new();
    let mut lost = Lost::default();
    let derived = case.provenance.as_ref().is_some_and(|p| p.id_derived);
    if !derived {
        out.insert("id".into(), json!(case.id));
    }
    let key = if layout::flag(layout, "messages") { "messages" } else { "input" };
    out.insert(key.into(), case.task.input.clone());
    match (&case.expected.output, &case.expected.acceptable) {
        (Some(answer), _) if !answer.is_array() => {
            out.insert("ideal".into(), answer.clone());
            // One answer, or a list of them: not both.
            lost.parts(case, &[Part::Acceptable]);
        }
        // A list is read back as answers any of which is right, not as one answer.
        (Some(_), _) => lost.parts(case, &[Part::Output, Part::Acceptable]),
        (None, Some(answers)) => {
            out.insert("ideal".into(), Value::Array(answers.clone()));
        }
        (None, None) => {}
    }
    // Metadata goes back to the top level, where unknown keys came from.
    let (top, rest) = layout::unlift(case.metadata.as_ref(), layout);
    layout::put_back(&mut out, top.into_iter().chain(rest.into_iter().flatten()), KNOWN, &mut lost);
    lost.check("labels", &case.labels);
    lost.parts(
        case,
        &[
            Part::Name,
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
