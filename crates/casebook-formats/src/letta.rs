//! letta-evals samples (JSONL rows and CSV records), following `letta_evals/datasets/loader.py`:
//! `input` (string or list of turns; `prompt` as fallback), `ground_truth` (string, or one per
//! turn), `id`/`sample_id`, `tags`, `metadata`, `agent_args`, `rubric_vars`, `extra_vars`, and
//! `rubric`/`rubric_path` (exclusive).

use casebook_model::{Case, Code, Expectations, Map, Role, Task, Turn};
use serde_json::{Value, json};

use crate::layout::{self, Lost, Part};
use crate::node::{Node, NodeValue, is_integer};
use crate::pointer::Ptr;
use crate::source::{Cx, Fields, did_you_mean};

pub const NAME: &str = "letta";

const KNOWN: &[&str] = &[
    "id",
    "sample_id",
    "input",
    "prompt",
    "ground_truth",
    "tags",
    "metadata",
    "agent_args",
    "rubric_vars",
    "extra_vars",
    "rubric",
    "rubric_path",
];

/// Where casebook keeps letta's `extra_vars` (expectations side: graders read them, agents don't).
const EXTRA_VARS: &str = "extra_vars";

/// Maps one sample onto a case. `None` when it has errors (they are in `cx`).
pub fn read_row(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Case> {
    let entries = cx.object(node, ptr)?;
    let errors_before = cx.diags.len();
    let mut f = Fields::new(cx, entries, ptr);
    let mut layout = Map::new();

    let id_node = match (f.take("sample_id"), f.has("id")) {
        (Some(n), _) => {
            layout.insert("id_key".into(), json!("sample_id"));
            Some(n)
        }
        (None, true) => f.take("id"),
        (None, false) => None,
    };
    let id = id_node.and_then(|n| {
        read_id(cx, n, &ptr.key(if layout.contains_key("id_key") { "sample_id" } else { "id" }), &mut layout)
    });

    let (input_node, input_key) = match f.take("input") {
        Some(n) => (Some(n), "input"),
        None => (f.take("prompt"), "prompt"),
    };
    if input_key == "prompt" && input_node.is_some() {
        layout.insert("input_key".into(), json!("prompt"));
    }
    let mut task = None;
    let mut turn_count = 1;
    match input_node {
        None => {
            let hint = f.rest().find_map(|e| did_you_mean(&e.key, &["input"])).map(|_| "did you mean `input`?".into());
            cx.missing(node, ptr, "input", hint.or(Some("every sample needs an `input` (or `prompt`)".into())));
        }
        Some(n) => {
            let p = ptr.key(input_key);
            match &n.value {
                NodeValue::String(s) => task = Some(Task::new(Value::String(s.to_string()))),
                NodeValue::Array(items) if items.is_empty() => {
                    cx.report(Code::InvalidValue, n.offset, &p, "`input` is an empty list").hint =
                        Some("give at least one message".into());
                }
                NodeValue::Array(_) => {
                    if let Some(messages) = cx.strings(n, &p) {
                        turn_count = messages.len();
                        layout.insert("input_list".into(), Value::Bool(true));
                        let mut messages = messages.into_iter();
                        let first = messages.next().unwrap_or_default();
                        let mut t = Task::new(Value::String(first));
                        let turns: Vec<Turn> = messages.map(|content| Turn { role: Role::User, content }).collect();
                        if !turns.is_empty() {
                            t.turns = Some(turns);
                        }
                        task = Some(t);
                    }
                }
                _ => cx.wrong_type(n, &p, "a string or a list of strings"),
            }
        }
    }

    let mut expected = Expectations::default();
    if let Some(n) = f.take("ground_truth") {
        let p = ptr.key("ground_truth");
        match &n.value {
            NodeValue::String(s) => expected.output = Some(Value::String(s.to_string())),
            NodeValue::Null => expected.output = Some(Value::Null),
            NodeValue::Array(items) => {
                if let Some(values) = cx.strings(n, &p) {
                    if layout.contains_key("input_list") && values.len() == turn_count {
                        expected.per_turn = Some(values.into_iter().map(Value::String).collect());
                    } else {
                        let d = cx.report(
                            Code::PerTurnLength,
                            n.offset,
                            &p,
                            format!(
                                "`ground_truth` has {} items but `{input_key}` has {turn_count} message{}",
                                items.len(),
                                if turn_count == 1 { "" } else { "s" }
                            ),
                        );
                        d.hint =
                            Some("give one expected value per message, or a single string for the last one".into());
                    }
                }
            }
            _ => cx.wrong_type(n, &p, "a string or a list of strings"),
        }
    }
    let labels = f.take("tags").and_then(|n| match &n.value {
        // One tag written as text (a CSV cell `spy`): show the list it should be.
        NodeValue::String(tag) => {
            let list = serde_json::to_string(&[tag.as_ref()]).unwrap_or_default();
            cx.report(Code::WrongType, n.offset, &ptr.key("tags"), "`tags` is a list of strings, found a string")
                .hint = Some(format!("write it as a list: `{}` (in a CSV cell too)", casebook_model::excerpt(&list)));
            None
        }
        _ => cx.strings(n, &ptr.key("tags")),
    });
    let mut metadata = f.take("metadata").and_then(|n| cx.map(n, &ptr.key("metadata")));
    if let Some(n) = f.take("agent_args") {
        let args = cx.map(n, &ptr.key("agent_args"));
        if let Some(t) = task.as_mut() {
            t.agent_args = args;
        }
    }
    expected.rubric_vars = f.take("rubric_vars").and_then(|n| cx.map(n, &ptr.key("rubric_vars")));
    if let Some(n) = f.take(EXTRA_VARS) {
        if let Some(vars) = cx.map(n, &ptr.key(EXTRA_VARS)) {
            expected.extra.insert(EXTRA_VARS.into(), Value::Object(vars));
        }
    }
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
        expected.rubric = rubric.and_then(|n| cx.string(n, &ptr.key("rubric")));
        expected.rubric_path = rubric_path.and_then(|n| cx.string(n, &ptr.key("rubric_path")));
    }
    layout::lift_unknown(cx, &f, ptr, &mut metadata, &mut layout, KNOWN);

    if cx.diags[errors_before..].iter().any(|d| d.is_error()) {
        return None;
    }
    let task = task?;
    let (id, derived) = layout::id_or_derived(id, &task)?;
    Some(Case {
        id,
        name: None,
        description: None,
        labels,
        task,
        expected,
        metadata,
        confidence: None,
        review: None,
        provenance: layout::provenance(NAME, derived, layout),
    })
}

fn read_id(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, layout: &mut Map) -> Option<String> {
    match &node.value {
        NodeValue::String(s) if !s.is_empty() => Some(s.to_string()),
        NodeValue::Number(text) if is_integer(text) => {
            // Out-of-range integers are reported by `value`.
            cx.value(node, ptr)?;
            layout.insert("id_int".into(), Value::Bool(true));
            Some(text.to_string())
        }
        NodeValue::String(_) => {
            cx.report(Code::InvalidValue, node.offset, ptr, "the sample id is empty");
            None
        }
        _ => {
            cx.wrong_type(node, ptr, "an integer or a string");
            None
        }
    }
}

/// The letta sample for a case, and what letta cannot hold.
pub fn write_row(case: &Case) -> (Map, Lost) {
    let layout = layout::layout_for(case, NAME);
    let mut row = Map::new();
    let mut lost = Lost::default();
    let derived = case.provenance.as_ref().is_some_and(|p| p.id_derived);
    if !derived {
        let key = layout::text(layout, "id_key").unwrap_or("id");
        let id = if layout::flag(layout, "id_int") {
            case.id.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::String(case.id.clone()))
        } else {
            Value::String(case.id.clone())
        };
        row.insert(key.into(), id);
    }
    let input_key = layout::text(layout, "input_key").unwrap_or("input");
    let turns = case.task.turns.as_deref().unwrap_or_default();
    if turns.is_empty() && !layout::flag(layout, "input_list") {
        row.insert(input_key.into(), case.task.input.clone());
    } else {
        let mut list = vec![case.task.input.clone()];
        for turn in turns {
            if turn.role != Role::User {
                lost.push("turns (letta has only user turns)");
            }
            list.push(Value::String(turn.content.clone()));
        }
        row.insert(input_key.into(), Value::Array(list));
    }
    if !case.task.input.is_string() {
        lost.push("input (letta inputs are strings)");
    }
    let e = &case.expected;
    if let Some(per_turn) = &e.per_turn {
        row.insert("ground_truth".into(), Value::Array(per_turn.clone()));
        lost.check("expected.output", &e.output);
    } else if let Some(output) = &e.output {
        if !(output.is_string() || output.is_null()) {
            lost.push("expected.output (letta ground truth is a string)");
        }
        row.insert("ground_truth".into(), output.clone());
    }
    if let Some(labels) = &case.labels {
        row.insert("tags".into(), json!(labels));
    }
    let (top, metadata) = layout::unlift(case.metadata.as_ref(), layout);
    if let Some(metadata) = metadata {
        row.insert("metadata".into(), Value::Object(metadata));
    }
    if let Some(args) = &case.task.agent_args {
        row.insert("agent_args".into(), Value::Object(args.clone()));
    }
    if let Some(vars) = &e.rubric_vars {
        row.insert("rubric_vars".into(), Value::Object(vars.clone()));
    }
    for (key, value) in &e.extra {
        if key == EXTRA_VARS {
            row.insert(EXTRA_VARS.into(), value.clone());
        } else {
            lost.push(format!("expected.{key}"));
        }
    }
    if let Some(rubric) = &e.rubric {
        row.insert("rubric".into(), Value::String(rubric.clone()));
    }
    if let Some(path) = &e.rubric_path {
        row.insert("rubric_path".into(), Value::String(path.clone()));
    }
    for (key, value) in top {
        row.insert(key, value);
    }
    lost.parts(
        case,
        &[
            Part::Name,
            Part::Description,
            Part::Context,
            Part::Tools,
            Part::MemorySeeds,
            Part::SessionId,
            Part::Outcomes,
            Part::Acceptable,
            Part::Trajectory,
            Part::ToolCalls,
            Part::Governance,
            Part::Confidence,
            Part::Review,
        ],
    );
    (row, lost)
}

/// Columns of letta's CSV form that hold JSON.
pub fn csv_json_column(column: &str) -> CsvJson {
    match column {
        "input" | "ground_truth" => CsvJson::IfList,
        "agent_args" | "rubric_vars" | "extra_vars" | "metadata" => CsvJson::Object,
        "tags" => CsvJson::IfList,
        _ => CsvJson::Never,
    }
}

/// CSV columns whose cells letta strips of surrounding whitespace before using them.
pub const CSV_STRIPPED: &[&str] = &["input", "ground_truth"];

/// A cell as letta uses it: without the whitespace Python's `str.strip()` removes.
pub fn csv_strip(cell: &str) -> &str {
    cell.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// Makes a row ready for a letta CSV file. Cells the case came with from a letta CSV file get
/// back the whitespace letta stripped (kept as `csv_raw` in its layout); every other value that
/// letta would read back as something else is taken out of the row and named in `lost`.
pub fn csv_row(row: &mut Map, layout: Option<&Map>, lost: &mut Lost) {
    let raw = layout.and_then(|l| l.get("csv_raw")).and_then(Value::as_object);
    let mut unreadable = Vec::new();
    for (column, value) in row.iter_mut() {
        if let (Some(Value::String(raw)), Value::String(s)) = (raw.and_then(|r| r.get(column)), &*value) {
            if csv_strip(raw) == s {
                *value = Value::String(raw.clone());
                continue;
            }
        }
        let kind = csv_json_column(column);
        let why = match &*value {
            Value::Null => Some("an empty cell reads back as missing, not null"),
            Value::Object(_) if kind == CsvJson::Object => None,
            Value::Array(_) if kind == CsvJson::IfList => None,
            Value::Number(n) if (column == "id" || column == "sample_id") && n.is_u64() => None,
            Value::String(s) => {
                let used = if CSV_STRIPPED.contains(&column.as_str()) { csv_strip(s) } else { s.as_str() };
                if kind == CsvJson::IfList && used.starts_with('[') && used.ends_with(']') {
                    Some("letta reads a cell between `[` and `]` as a list")
                } else if kind == CsvJson::Object {
                    Some("letta reads this column as a JSON object")
                } else if used.len() != s.len() {
                    // What letta will use: kept under `--lossy` rather than dropping an input.
                    let field = if column == "input" { "input" } else { "expected.output" };
                    lost.push(format!("{field} (letta strips the whitespace around it)"));
                    *value = Value::String(used.to_owned());
                    None
                } else {
                    None
                }
            }
            _ => Some("letta reads this column back as text"),
        };
        if let Some(why) = why {
            unreadable.push(column.clone());
            let field = match column.as_str() {
                "input" | "prompt" => "input".to_owned(),
                "ground_truth" => "expected.output".to_owned(),
                other => other.to_owned(),
            };
            lost.push(format!("{field} ({why})"));
        }
    }
    for column in unreadable {
        row.shift_remove(&column);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsvJson {
    /// Decoded only when the cell starts with `[` and ends with `]` (letta's rule).
    IfList,
    /// Must hold a JSON object.
    Object,
    Never,
}
