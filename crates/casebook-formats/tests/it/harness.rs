//! Helpers: convert a file in memory, and read any output back as one JSON value.

use std::path::{Path, PathBuf};

use casebook_formats::{ColumnMap, Format, Input, ReadOptions, SeedFiles, Syntax, Target, convert, csv_columns, yaml};
use casebook_model::Diagnostic;
use serde_json::Value;

/// The real-file corpus: the folder `CASEBOOK_CORPUS` names (`../shared/corpus` beside the
/// workspace by default; see `scripts/corpus_cfg.rs`). Tests that read it are built only with
/// `cfg(corpus)`, set when it is there, and are ignored with the reason otherwise.
pub fn corpus() -> PathBuf {
    PathBuf::from(env!("CASEBOOK_CORPUS_DIR"))
}

/// Converts `path` to `format`/`syntax`; returns the output and every diagnostic.
pub fn convert_file(
    path: &Path,
    from: Option<Format>,
    format: Format,
    syntax: Syntax,
    map: Option<ColumnMap>,
) -> (Vec<u8>, Vec<Diagnostic>) {
    convert_with(path, from, format, syntax, map, None).0
}

/// Like [`convert_file`], reading YAML documents as they are parsed from `stream_from`
/// bytes; also says whether header keys after the cases were dropped.
pub fn convert_with(
    path: &Path,
    from: Option<Format>,
    format: Format,
    syntax: Syntax,
    map: Option<ColumnMap>,
    stream_from: Option<usize>,
) -> ((Vec<u8>, Vec<Diagnostic>), bool) {
    let input = Input::path(path);
    let opts = ReadOptions { format: from, column_map: map.clone(), threads: 2, stream_from, ..ReadOptions::default() };
    let target =
        Target { format, syntax, lossy: false, column_map: map, seed_files: SeedFiles::Keep, confirm_drafts: false };
    let columns =
        if syntax == Syntax::Csv { csv_columns(&input, &opts, &target).expect("first pass") } else { Vec::new() };
    let mut out = Vec::new();
    let mut diags = Vec::new();
    let summary = {
        let mut on_batch = |d: &[Diagnostic], _: &casebook_formats::Progress| diags.extend_from_slice(d);
        convert(&input, &opts, &target, columns, Box::new(&mut out), None, &mut on_batch).expect("convert")
    };
    ((out, diags), summary.late_header_dropped)
}

pub fn errors(diags: &[Diagnostic]) -> Vec<String> {
    diags.iter().filter(|d| d.is_error()).map(ToString::to_string).collect()
}

/// Columns of letta's CSV form whose cells hold JSON.
fn letta_cell(column: &str, cell: &str) -> Value {
    let json_list = matches!(column, "input" | "ground_truth" | "tags") && cell.starts_with('[') && cell.ends_with(']');
    let json_object = matches!(column, "agent_args" | "rubric_vars" | "extra_vars" | "metadata");
    if json_list || json_object {
        serde_json::from_str(cell).unwrap_or_else(|e| panic!("cell of `{column}` is not JSON: {e}: {cell}"))
    } else {
        Value::String(cell.to_owned())
    }
}

/// The JSON value a file holds: a document, the rows of a JSONL file, or the records of a CSV
/// file as objects (empty cells absent, letta's JSON cells decoded).
pub fn value_of(bytes: &[u8], syntax: Syntax) -> Value {
    assert!(syntax != Syntax::Parquet, "a Parquet table is not text: read it back with `read`");
    let text = std::str::from_utf8(bytes).expect("UTF-8");
    let text = text.trim_start_matches('\u{feff}');
    match syntax {
        Syntax::Parquet => unreachable!(),
        Syntax::Json => serde_json::from_str(text).expect("valid JSON"),
        Syntax::Yaml => {
            yaml::parse(text).expect("valid YAML").to_value(&casebook_formats::pointer::Ptr::ROOT).expect("JSON value")
        }
        Syntax::Jsonl => Value::Array(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).expect("JSONL row"))
                .collect(),
        ),
        Syntax::Csv => {
            let mut reader = csv_records(text);
            let header = reader.remove(0);
            Value::Array(
                reader
                    .into_iter()
                    .map(|row| {
                        let mut obj = serde_json::Map::new();
                        for (col, (cell, quoted)) in header.iter().zip(row) {
                            if cell.is_empty() && !quoted {
                                continue;
                            }
                            obj.insert(col.0.clone(), letta_cell(&col.0, &cell));
                        }
                        Value::Object(obj)
                    })
                    .collect(),
            )
        }
    }
}

/// A tiny independent CSV reader for the tests (RFC 4180): cells and whether they were quoted.
fn csv_records(text: &str) -> Vec<Vec<(String, bool)>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut in_quotes = false;
    let mut chars = text.chars().peekable();
    let mut at_cell_start = true;
    while let Some(c) = chars.next() {
        if in_quotes {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cell.push('"');
                } else {
                    in_quotes = false;
                }
            } else {
                cell.push(c);
            }
            continue;
        }
        match c {
            '"' if at_cell_start => {
                in_quotes = true;
                quoted = true;
                at_cell_start = false;
            }
            ',' => {
                record.push((std::mem::take(&mut cell), quoted));
                quoted = false;
                at_cell_start = true;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                record.push((std::mem::take(&mut cell), quoted));
                quoted = false;
                at_cell_start = true;
                records.push(std::mem::take(&mut record));
            }
            c => {
                cell.push(c);
                at_cell_start = false;
            }
        }
    }
    if !cell.is_empty() || !record.is_empty() || quoted {
        record.push((cell, quoted));
        records.push(record);
    }
    records
}

/// Writes bytes to a file in a temp dir and returns its path.
pub fn temp_file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    fs_err::write(&path, bytes).expect("write temp file");
    path
}

/// The cases of a native JSONL output, without its `$dataset` header record.
pub fn cases_of(bytes: &[u8]) -> Value {
    let mut rows = value_of(bytes, Syntax::Jsonl);
    if let Value::Array(items) = &mut rows {
        items.retain(|row| row.get("$dataset").is_none());
    }
    rows
}
