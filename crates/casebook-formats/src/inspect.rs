//! Inspect AI samples (`inspect_ai.dataset.Sample`, as `json_dataset` and `csv_dataset` read
//! them without a field spec): a JSON array, JSON Lines, or CSV with one sample a record.
//!
//! - `input`: a prompt, or a list of chat messages (`{role: system|user|assistant|tool,
//!   content, …}`), kept as it is: all of it is what the model is sent.
//! - `target`: one answer (`expected.output`), or a list of them (`expected.acceptable`: Inspect's
//!   scorers — `match`, `includes`, `exact`, `pattern` — accept an output that matches any one).
//! - `choices`: the answers of a multiple-choice question. The model is shown them, so they are
//!   part of the task: a context item `{type: custom, source: choices, content: [..]}`, which the
//!   runner sends with the input, lettered `A) …` (never metadata, which agents do not see).
//! - A sample without an `id` is named by its 1-based place in the file, as Inspect's eval names
//!   it (its logs use those ids); the reader's id check does it (`read.rs`), in file order.
//! - `sandbox` (a type, or `[type, config file]`), `files` (name → path or content) and `setup`
//!   (a script) prepare the environment the sample runs in: they are per-case agent settings,
//!   `agent_args.sandbox`, `agent_args.files` and `agent_args.setup`, sent to the agent.
//! - `id` (a string or an integer, written back as it was), `metadata` (an object, `null`, or a
//!   string holding a JSON object, as Inspect reads it), `description`.
//!
//! Other keys are kept in `metadata` and written back at the top level. In CSV every cell is text,
//! as Inspect reads it: `choices` is split on commas (on whitespace when there is no comma),
//! `metadata` and `files` hold JSON objects, and `sandbox` a JSON list when it starts with `[`.
//! An empty cell is a missing value.

use casebook_model::{Case, Code, ContextItem, Expectations, Map, Task};
use serde_json::{Value, json};

use crate::csvtext::Field;
use crate::layout::{self, Lost, Part};
use crate::node::{Entry, Node, NodeValue};
use crate::pointer::Ptr;
use crate::source::{Cx, Fields};
use crate::{parts, tabular};

pub const NAME: &str = "inspect";

const KNOWN: &[&str] = &["id", "input", "target", "choices", "metadata", "sandbox", "files", "setup", "description"];
/// The sample keys that are agent settings (see the module docs), in the order they are written.
const AGENT_ARGS: &[&str] = &["sandbox", "files", "setup"];
/// The roles of Inspect's chat messages.
const ROLES: &[&str] = &["system", "user", "assistant", "tool"];
/// Where the choices are among a case's context items ([`casebook_model::choices`]).
pub use casebook_model::choices::{CHOICES_KIND, CHOICES_SOURCE};

/// Maps one sample (a JSON object, or a CSV record made into one) onto a case. `None` when it
/// has errors (they are in `cx`).
pub fn read_sample(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Case> {
    let entries = cx.object(node, ptr)?;
    let errors_before = cx.diags.len();
    let mut f = Fields::new(cx, entries, ptr);
    let mut layout = Map::new();

    let id = f.take("id").and_then(|n| parts::sample_id(cx, n, &ptr.key("id"), &mut layout));
    let input = match f.take("input") {
        Some(n) => read_input(cx, n, &ptr.key("input")),
        None => {
            cx.missing(node, ptr, "input", Some("a sample's `input` is a prompt or a list of chat messages".into()));
            None
        }
    };
    let mut expected = Expectations::default();
    if let Some(n) = f.take("target") {
        let p = ptr.key("target");
        match &n.value {
            NodeValue::String(_) | NodeValue::Number(_) => expected.output = cx.value(n, &p),
            NodeValue::Null => {
                layout.insert("target_null".into(), Value::Bool(true));
            }
            NodeValue::Array(items) => {
                let mut ok = true;
                for (i, item) in items.iter().enumerate() {
                    if !matches!(item.value, NodeValue::String(_) | NodeValue::Number(_)) {
                        cx.wrong_type(item, &p.index(i), "a string");
                        ok = false;
                    }
                }
                if ok {
                    expected.acceptable = cx.value(n, &p).and_then(|v| match v {
                        Value::Array(answers) => Some(answers),
                        _ => None,
                    });
                }
            }
            _ => cx.wrong_type(n, &p, "a string or a list of strings"),
        }
    }
    let choices = f.take("choices").and_then(|n| read_choices(cx, n, &ptr.key("choices"), &mut layout));
    let mut metadata = f.take("metadata").and_then(|n| read_metadata(cx, n, &ptr.key("metadata"), &mut layout));
    let description = f.take("description").and_then(|n| cx.opt_string(n, &ptr.key("description")));
    let mut agent_args = Map::new();
    for key in AGENT_ARGS {
        let Some(n) = f.take(key) else { continue };
        let p = ptr.key(key);
        let value = match (*key, &n.value) {
            ("setup", NodeValue::String(_)) => cx.value(n, &p),
            ("setup", _) => {
                cx.wrong_type(n, &p, "a string (a setup script)");
                None
            }
            ("files", NodeValue::Object(entries)) => {
                let mut ok = true;
                for entry in entries {
                    if !matches!(entry.value.value, NodeValue::String(_)) {
                        cx.wrong_type(&entry.value, &p.key(&entry.key), "a string (a path or the file's content)");
                        ok = false;
                    }
                }
                if ok { cx.map(n, &p).map(Value::Object) } else { None }
            }
            ("files", _) => {
                cx.wrong_type(n, &p, "an object of file names and paths or contents");
                None
            }
            (_, NodeValue::String(_)) => cx.value(n, &p),
            (_, NodeValue::Array(items))
                if items.len() == 2 && items.iter().all(|i| matches!(i.value, NodeValue::String(_))) =>
            {
                cx.value(n, &p)
            }
            _ => {
                cx.wrong_type(n, &p, "a sandbox type, or a list of a type and a configuration file");
                None
            }
        };
        if let Some(value) = value {
            agent_args.insert((*key).to_owned(), value);
        }
    }
    layout::lift_unknown(cx, &f, ptr, &mut metadata, &mut layout, KNOWN);
    if cx.diags[errors_before..].iter().any(|d| d.is_error()) {
        return None;
    }
    let mut task = Task::new(input?);
    if let Some(choices) = choices {
        task.context = Some(vec![ContextItem {
            kind: Some(CHOICES_KIND.into()),
            source: Some(CHOICES_SOURCE.into()),
            content: Value::Array(choices.into_iter().map(Value::String).collect()),
            metadata: None,
        }]);
    }
    if !agent_args.is_empty() {
        task.agent_args = Some(agent_args);
    }
    let (id, derived) = layout::id_or_derived(id, &task)?;
    Some(Case {
        id,
        name: None,
        description,
        labels: None,
        task,
        expected,
        metadata,
        confidence: None,
        review: None,
        provenance: layout::provenance(NAME, derived, layout),
    })
}

/// `metadata`: an object; `null`, which Inspect takes as no metadata; or a string holding a JSON
/// object, which Inspect parses (its own fixtures rely on it). The string is kept so that it
/// goes back as it was while its values are unchanged.
fn read_metadata(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, layout: &mut Map) -> Option<Map> {
    match &node.value {
        NodeValue::Null => {
            layout.insert("metadata_null".into(), Value::Bool(true));
            None
        }
        NodeValue::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => {
                layout.insert("metadata_text".into(), Value::String(text.to_string()));
                Some(map)
            }
            Ok(_) => {
                cx.report(
                    Code::WrongType,
                    node.offset,
                    ptr,
                    "`metadata` is a string holding JSON that is not an object",
                )
                .hint = Some("Inspect reads a metadata string as a JSON object: write `{\"key\": \"value\"}`".into());
                None
            }
            Err(e) => {
                cx.report(
                    Code::WrongType,
                    node.offset,
                    ptr,
                    format!("`metadata` is a string that is not a JSON object: {e}"),
                )
                .hint = Some("give an object, or a string holding one as JSON (Inspect parses it)".into());
                None
            }
        },
        _ => cx.map(node, ptr),
    }
}

/// `input`: a non-empty prompt, or a list of chat messages Inspect can read.
fn read_input(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Value> {
    match &node.value {
        NodeValue::String(s) if s.is_empty() => {
            cx.report(Code::InvalidValue, node.offset, ptr, "`input` is empty").hint =
                Some("Inspect refuses a sample without input".into());
            None
        }
        NodeValue::String(_) => cx.value(node, ptr),
        NodeValue::Array(messages) if messages.is_empty() => {
            cx.report(Code::InvalidValue, node.offset, ptr, "`input` is an empty list of messages").hint =
                Some("give at least one message".into());
            None
        }
        NodeValue::Array(messages) => {
            let mut ok = true;
            for (i, message) in messages.iter().enumerate() {
                ok &= check_message(cx, message, &ptr.index(i));
            }
            if ok { cx.json(node, ptr) } else { None }
        }
        _ => {
            cx.wrong_type(node, ptr, "a string or a list of chat messages");
            None
        }
    }
}

/// Whether a chat message has what Inspect's reader needs: a known `role` and a `content`.
fn check_message(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> bool {
    if cx.object(node, ptr).is_none() {
        return false;
    }
    let mut ok = true;
    match node.get("role") {
        None => {
            cx.missing(
                node,
                ptr,
                "role",
                Some("a chat message's `role` is `system`, `user`, `assistant` or `tool`".into()),
            );
            ok = false;
        }
        Some(role) => match role.as_str() {
            Some(text) if ROLES.contains(&text) => {}
            Some(text) => {
                let d = cx.report(
                    Code::UnknownRole,
                    role.offset,
                    &ptr.key("role"),
                    format!("unknown chat message role `{}`", casebook_model::excerpt(text)),
                );
                d.hint = Some("Inspect's roles are `system`, `user`, `assistant` and `tool`".into());
                ok = false;
            }
            None => {
                cx.wrong_type(role, &ptr.key("role"), "a string");
                ok = false;
            }
        },
    }
    match node.get("content") {
        None | Some(Node { value: NodeValue::Null, .. }) => {
            cx.missing(node, ptr, "content", None);
            ok = false;
        }
        Some(content) if !matches!(content.value, NodeValue::String(_) | NodeValue::Array(_)) => {
            cx.wrong_type(content, &ptr.key("content"), "a string or a list of content parts");
            ok = false;
        }
        Some(_) => {}
    }
    ok
}

/// `choices`: a list of strings, or (as in CSV) one string Inspect splits into them; the text is
/// remembered to be written back as it was.
fn read_choices(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, layout: &mut Map) -> Option<Vec<String>> {
    match &node.value {
        NodeValue::String(text) => {
            layout.insert("choices_text".into(), Value::String(text.to_string()));
            Some(split_choices(text))
        }
        NodeValue::Array(_) => cx.strings(node, ptr),
        _ => {
            cx.wrong_type(node, ptr, "a list of strings");
            None
        }
    }
}

/// The choices Inspect reads from one string: split on commas, or on whitespace when there is
/// no comma, each trimmed, empty ones left out.
fn split_choices(text: &str) -> Vec<String> {
    let parts: Vec<&str> =
        if text.contains(',') { text.split(',').collect() } else { text.split_whitespace().collect() };
    parts.into_iter().map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect()
}

/// The choices of a case (its one `choices` context item), if its context is only that.
fn choices_of(case: &Case) -> Result<Option<Vec<String>>, ()> {
    let Some(context) = &case.task.context else { return Ok(None) };
    match context.as_slice() {
        [item]
            if item.kind.as_deref() == Some(CHOICES_KIND)
                && item.source.as_deref() == Some(CHOICES_SOURCE)
                && item.metadata.is_none() =>
        {
            match &item.content {
                Value::Array(list) => {
                    list.iter().map(|c| c.as_str().map(str::to_owned).ok_or(())).collect::<Result<_, _>>().map(Some)
                }
                _ => Err(()),
            }
        }
        _ => Err(()),
    }
}

/// The sample for a case (its JSON form), and what a sample cannot hold.
pub fn write_sample(case: &Case) -> (Map, Lost) {
    let layout = layout::layout_for(case, NAME);
    let mut out = Map::new();
    let mut lost = Lost::default();
    let derived = case.provenance.as_ref().is_some_and(|p| p.id_derived);
    if !derived {
        out.insert("id".into(), parts::sample_id_value(case, layout));
    }
    let input = &case.task.input;
    let readable = match input {
        Value::String(s) => !s.is_empty(),
        Value::Array(messages) => {
            !messages.is_empty()
                && messages.iter().all(|m| {
                    m.get("role").and_then(Value::as_str).is_some_and(|r| ROLES.contains(&r))
                        && m.get("content").is_some_and(|c| c.is_string() || c.is_array())
                })
        }
        _ => false,
    };
    if !readable {
        lost.push("input (Inspect inputs are a prompt or chat messages)");
    }
    out.insert("input".into(), input.clone());
    let e = &case.expected;
    match (&e.output, &e.acceptable) {
        (Some(answer @ (Value::String(_) | Value::Number(_))), _) => {
            out.insert("target".into(), answer.clone());
            // One answer or a list of them: not both.
            lost.parts(case, &[Part::Acceptable]);
        }
        (Some(_), _) => {
            lost.push("expected.output (Inspect targets are text)");
            lost.parts(case, &[Part::Acceptable]);
        }
        (None, Some(answers)) => {
            if answers.iter().all(|a| a.is_string() || a.is_number()) {
                out.insert("target".into(), Value::Array(answers.clone()));
            } else {
                lost.push("expected.acceptable (Inspect targets are text)");
            }
        }
        (None, None) if layout::flag(layout, "target_null") => {
            out.insert("target".into(), Value::Null);
        }
        (None, None) => {}
    }
    match choices_of(case) {
        Ok(Some(choices)) => {
            let text = layout::text(layout, "choices_text").filter(|t| split_choices(t) == choices);
            out.insert("choices".into(), text.map_or_else(|| json!(choices), |t| json!(t)));
        }
        Ok(None) => {}
        Err(()) => lost.push("context (Inspect shows a sample's `choices`, and no other context)"),
    }
    if let Some(description) = &case.description {
        out.insert("description".into(), json!(description));
    }
    if let Some(args) = &case.task.agent_args {
        for (key, value) in args {
            if AGENT_ARGS.contains(&key.as_str()) {
                out.insert(key.clone(), value.clone());
            } else {
                lost.push(format!("agent_args.{key}"));
            }
        }
    }
    let (top, rest) = layout::unlift(case.metadata.as_ref(), layout);
    match rest {
        Some(rest) => {
            // Written as the JSON text it was read from, while it still says the same.
            let text = layout::text(layout, "metadata_text")
                .filter(|t| serde_json::from_str::<Value>(t).is_ok_and(|v| v == Value::Object(rest.clone())));
            out.insert("metadata".into(), text.map_or(Value::Object(rest), |t| Value::String(t.to_owned())));
        }
        None if layout::flag(layout, "metadata_null") => {
            out.insert("metadata".into(), Value::Null);
        }
        None => {}
    }
    layout::put_back(&mut out, top, KNOWN, &mut lost);
    lost.check("labels", &case.labels);
    lost.parts(
        case,
        &[
            Part::Name,
            Part::Turns,
            Part::Tools,
            Part::MemorySeeds,
            Part::SessionId,
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

/// Columns whose CSV cells hold a JSON object.
const CSV_OBJECTS: &[&str] = &["metadata", "files"];

/// A CSV record as Inspect's `csv_dataset` reads it (see the module docs), and the offset of its
/// id (or of the record).
pub fn csv_record(cx: &mut Cx<'_>, columns: &[String], fields: &[Field], record_start: usize) -> Option<(Case, usize)> {
    // Inspect leaves out a record whose cells are all blank.
    if fields.iter().all(|f| f.value(cx.src.text).trim().is_empty()) {
        return None;
    }
    if !tabular::check_width(cx, fields, columns, record_start) {
        return None;
    }
    let mut entries = Vec::with_capacity(fields.len());
    let mut ok = true;
    for (column, field) in columns.iter().zip(fields) {
        if field.start == field.end {
            continue; // an empty cell is a missing value
        }
        let text = field.value(cx.src.text);
        let json =
            CSV_OBJECTS.contains(&column.as_str()) || (column == "sandbox" && text.trim_start().starts_with('['));
        let value = if json {
            match tabular::json_cell(cx, field, column) {
                Some(node) => node,
                None => {
                    ok = false;
                    continue;
                }
            }
        } else {
            tabular::string_node(cx.src.text, field)
        };
        entries.push(Entry { key: column.as_str().into(), key_offset: field.start, value });
    }
    let node = Node { offset: record_start, value: NodeValue::Object(entries) };
    let case = read_sample(cx, &node, &Ptr::ROOT);
    let id_offset = node.get("id").map_or(record_start, |n| n.offset);
    if !ok {
        return None;
    }
    case.map(|c| (c, id_offset))
}

/// Makes a sample's JSON form ready for a CSV record: every value as the text Inspect reads back
/// the same. What would read back as something else is taken out and named in `lost`.
pub fn csv_row(row: &mut Map, lost: &mut Lost) {
    let mut unreadable = Vec::new();
    for (column, value) in row.iter_mut() {
        let text = match (column.as_str(), &*value) {
            ("id", Value::Number(n)) => Some(n.to_string()),
            ("choices", Value::Array(list)) => {
                let choices: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
                let text = choices.join(", ");
                (choices.len() == list.len() && split_choices(&text) == choices).then_some(text)
            }
            ("choices", Value::String(text)) => Some(text.clone()),
            ("sandbox", Value::String(text)) if text.trim_start().starts_with('[') => None,
            ("sandbox", list @ Value::Array(_)) => Some(list.to_string()),
            (c, object @ Value::Object(_)) if CSV_OBJECTS.contains(&c) => Some(object.to_string()),
            (_, Value::String(text)) => Some(text.clone()),
            _ => None,
        };
        match text {
            Some(text) => *value = Value::String(text),
            None => unreadable.push(column.clone()),
        }
    }
    for column in unreadable {
        row.shift_remove(&column);
        lost.push(match column.as_str() {
            "input" => "input (an Inspect CSV input is text)".to_owned(),
            "target" => "expected (an Inspect CSV target is one text)".to_owned(),
            "choices" => "context (these choices cannot be written as one CSV cell)".to_owned(),
            "sandbox" | "files" | "setup" => format!("agent_args.{column} (it reads back from CSV as something else)"),
            other => format!("metadata.{other} (a CSV cell reads back as text)"),
        });
    }
}
