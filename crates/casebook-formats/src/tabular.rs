//! CSV records as cases: letta's CSV form (JSON in the cells letta decodes) and generic CSV with
//! a column map (`--map input=question,expected.output=answer`). A record is turned into a
//! [`Node`] whose offsets point at its cells, then read by the JSON mapper of its format.

use std::str::FromStr;

use casebook_model::{Case, Code, Map};
use serde_json::Value;

use crate::csvtext::Field;
use crate::letta::{self, CsvJson};
use crate::node::{Entry, Node, NodeValue};
use crate::pointer::Ptr;
use crate::source::Cx;
use crate::{json, native};

/// Where each CSV column goes in a case (generic `csv` format).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ColumnMap {
    /// `(case path, column)`, e.g. `("expected.output", "answer")`.
    pub entries: Vec<(String, String)>,
}

/// Case paths a column can be mapped to.
pub const TARGETS: &[&str] = &[
    "id",
    "name",
    "description",
    "input",
    "labels",
    "session_id",
    "agent_args",
    "confidence",
    "review",
    "expected.output",
    "expected.acceptable",
    "expected.rubric",
    "expected.rubric_vars",
    "expected.outcomes",
    "metadata.<key>",
];

/// A column map as given to `--map`.
///
/// ```
/// use casebook_formats::ColumnMap;
///
/// let map: ColumnMap = "input=question, expected.output=answer, metadata.topic=topic".parse().unwrap();
/// assert_eq!(map.target_of("answer"), Some("expected.output"));
/// assert!("expected.output=answer".parse::<ColumnMap>().unwrap_err().contains("`input`"));
/// ```
impl FromStr for ColumnMap {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut entries = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (target, column) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not `FIELD=COLUMN` (e.g. `input=question`)"))?;
            let target = target.trim();
            let known = TARGETS.contains(&target) || target.strip_prefix("metadata.").is_some_and(|k| !k.is_empty());
            if !known {
                return Err(format!(
                    "cannot map a column to `{target}`; fields: {}",
                    TARGETS.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
                ));
            }
            entries.push((target.to_owned(), column.trim().to_owned()));
        }
        if !entries.iter().any(|(t, _)| t == "input") {
            return Err("the column map must name the `input` column, e.g. `input=question`".into());
        }
        Ok(ColumnMap { entries })
    }
}

impl ColumnMap {
    pub fn target_of(&self, column: &str) -> Option<&str> {
        self.entries.iter().find(|(_, c)| c == column).map(|(t, _)| t.as_str())
    }
}

pub(crate) fn string_node<'t>(cx_text: &'t str, field: &Field) -> Node<'t> {
    Node { offset: field.content_offset(), value: NodeValue::String(field.value(cx_text)) }
}

/// Moves the offsets of a node parsed from a cell's value to where they are in the file.
fn relocate(node: &mut Node<'_>, at: &dyn Fn(usize) -> usize) {
    node.offset = at(node.offset);
    match &mut node.value {
        NodeValue::Array(items) => items.iter_mut().for_each(|n| relocate(n, at)),
        NodeValue::Object(entries) => entries.iter_mut().for_each(|e| {
            e.key_offset = at(e.key_offset);
            relocate(&mut e.value, at);
        }),
        _ => {}
    }
}

/// Decodes a cell holding JSON, reporting syntax errors at their place in the cell.
pub(crate) fn json_cell(cx: &mut Cx<'_>, field: &Field, column: &str) -> Option<Node<'static>> {
    let text = field.value(cx.src.text);
    let offsets = field.offsets(cx.src.text);
    let at = |offset: usize| offsets.raw(offset);
    match json::parse(&text) {
        Ok(node) => {
            let mut node = node.into_owned();
            relocate(&mut node, &at);
            Some(node)
        }
        Err(err) => {
            let offset = at(err.offset);
            let d = cx.report(
                Code::JsonSyntax,
                offset,
                &Ptr::ROOT.key(column),
                format!("the `{}` cell holds invalid JSON: {}", casebook_model::excerpt(column), err.message),
            );
            d.hint = Some("inside a CSV cell, JSON quotes are doubled: `{\"\"key\"\": \"\"value\"\"}`".into());
            None
        }
    }
}

/// Checks that a record has as many cells as the header.
pub(crate) fn check_width(cx: &mut Cx<'_>, fields: &[Field], columns: &[String], record_start: usize) -> bool {
    if fields.len() == columns.len() {
        return true;
    }
    let offset = fields.get(columns.len()).map_or(record_start, |f| f.start);
    let d = cx.report(
        Code::CsvSyntax,
        offset,
        &Ptr::ROOT,
        format!("record has {} cells but the header has {} columns", fields.len(), columns.len()),
    );
    d.hint = Some("quote cells that contain commas or line breaks".into());
    false
}

/// Digits without a leading zero: an id letta reads as an integer. `007` stays text.
fn is_canonical_integer(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || !text.starts_with('0'))
}

/// A letta CSV record.
pub fn letta_record(
    cx: &mut Cx<'_>,
    columns: &[String],
    fields: &[Field],
    record_start: usize,
) -> Option<(Case, usize)> {
    if !check_width(cx, fields, columns, record_start) {
        return None;
    }
    let mut entries = Vec::with_capacity(fields.len());
    let mut ok = true;
    // Cells letta strips, as they were, so that writing the case back gives the same file.
    let mut raw = Map::new();
    for (column, field) in columns.iter().zip(fields) {
        if field.start == field.end {
            continue; // an empty cell is a missing value
        }
        let value = field.value(cx.src.text);
        let used = if letta::CSV_STRIPPED.contains(&column.as_str()) { letta::csv_strip(&value) } else { &value };
        let node = match letta::csv_json_column(column) {
            CsvJson::IfList if used.starts_with('[') && used.ends_with(']') => json_cell(cx, field, column),
            CsvJson::Object => json_cell(cx, field, column),
            _ if (column == "id" || column == "sample_id") && is_canonical_integer(&value) => {
                Some(Node { offset: field.content_offset(), value: NodeValue::Number(value.clone()) })
            }
            _ if used.len() != value.len() => {
                raw.insert(column.clone(), Value::String(value.to_string()));
                Some(Node { offset: field.content_offset(), value: NodeValue::String(used.to_owned().into()) })
            }
            _ => Some(string_node(cx.src.text, field)),
        };
        match node {
            Some(value) => entries.push(Entry { key: column.as_str().into(), key_offset: field.start, value }),
            None => {
                // Reported already; keep the text so the field is not also reported missing.
                ok = false;
                entries.push(Entry {
                    key: column.as_str().into(),
                    key_offset: field.start,
                    value: string_node(cx.src.text, field),
                });
            }
        }
    }
    let node = Node { offset: record_start, value: NodeValue::Object(entries) };
    let mut case = letta::read_row(cx, &node, &Ptr::ROOT);
    if let (false, Some(p)) = (raw.is_empty(), case.as_mut().and_then(|c| c.provenance.as_mut())) {
        p.layout.insert("csv_raw".into(), Value::Object(raw));
    }
    let id_offset = node.get("id").or(node.get("sample_id")).map_or(record_start, |n| n.offset);
    if !ok {
        return None;
    }
    case.map(|c| (c, id_offset))
}

/// A generic CSV record, mapped through `map` onto the native case shape.
pub fn mapped_record(
    cx: &mut Cx<'_>,
    columns: &[String],
    fields: &[Field],
    record_start: usize,
    map: &ColumnMap,
) -> Option<(Case, usize)> {
    if !check_width(cx, fields, columns, record_start) {
        return None;
    }
    let mut top: Vec<Entry> = Vec::new();
    let mut expected: Vec<Entry> = Vec::new();
    let mut metadata: Vec<Entry> = Vec::new();
    let mut ok = true;
    for (column, field) in columns.iter().zip(fields) {
        if field.start == field.end {
            continue;
        }
        let target = map.target_of(column).map_or_else(|| format!("metadata.{column}"), str::to_owned);
        let is_json = matches!(
            target.as_str(),
            "agent_args" | "expected.rubric_vars" | "expected.acceptable" | "expected.outcomes"
        );
        let text = field.value(cx.src.text);
        let value = if is_json {
            match json_cell(cx, field, column) {
                Some(n) => n,
                None => {
                    ok = false;
                    continue;
                }
            }
        } else if target == "labels" {
            if text.starts_with('[') {
                match json_cell(cx, field, column) {
                    Some(n) => n,
                    None => {
                        ok = false;
                        continue;
                    }
                }
            } else {
                let items = text
                    .split([',', ';'])
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| Node { offset: field.content_offset(), value: NodeValue::String(s.to_owned().into()) })
                    .collect();
                Node { offset: field.content_offset(), value: NodeValue::Array(items) }
            }
        } else if target == "confidence" {
            match text.trim().parse::<f64>() {
                Ok(_) => {
                    Node { offset: field.content_offset(), value: NodeValue::Number(text.trim().to_owned().into()) }
                }
                Err(_) => {
                    cx.report(
                        Code::WrongType,
                        field.content_offset(),
                        &Ptr::ROOT.key(column),
                        format!(
                            "expected a number in column `{}`, found `{}`",
                            casebook_model::excerpt(column),
                            casebook_model::excerpt(&text)
                        ),
                    );
                    ok = false;
                    continue;
                }
            }
        } else {
            string_node(cx.src.text, field)
        };
        let entry = |key: &str| Entry { key: key.to_owned().into(), key_offset: field.start, value: value.clone() };
        if let Some(key) = target.strip_prefix("expected.") {
            expected.push(entry(key));
        } else if let Some(key) = target.strip_prefix("metadata.") {
            metadata.push(entry(key));
        } else {
            top.push(entry(&target));
        }
    }
    if !expected.is_empty() {
        top.push(Entry {
            key: "expected".into(),
            key_offset: record_start,
            value: Node { offset: record_start, value: NodeValue::Object(expected) },
        });
    }
    if !metadata.is_empty() {
        top.push(Entry {
            key: "metadata".into(),
            key_offset: record_start,
            value: Node { offset: record_start, value: NodeValue::Object(metadata) },
        });
    }
    let node = Node { offset: record_start, value: NodeValue::Object(top) };
    let mut case = native::read_case(cx, &node, &Ptr::ROOT)?;
    if !ok {
        return None;
    }
    let provenance = case.provenance.get_or_insert_with(Default::default);
    provenance.format = Some("csv".into());
    let id_offset = node.get("id").map_or(record_start, |n| n.offset);
    Some((case, id_offset))
}
