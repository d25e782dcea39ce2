//! Writing cases in any format. An [`Encoder`] turns a batch of cases into bytes and is shared by
//! worker threads; a [`Writer`] puts the document around them (a JSON array, a YAML manifest, a
//! CSV header) on one thread. A case whose fields the target format cannot hold is not written
//! unless the conversion is lossy; the encoder says which fields were in the way.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use casebook_model::{Case, DatasetHeader, Map, MemorySeeds, Review};
use serde_json::{Value, json};

use crate::format::{Format, Syntax};
use crate::layout::{self, Lost};
use crate::parquet::ParquetSink;
use crate::tabular::ColumnMap;
use crate::{agenthealth, csvtext, inspect, letta, maslab, openai_evals, promptfoo, voltagent, yaml_out};

/// Marks where the list of cases goes in a document skeleton.
const ITEMS_MARK: &str = "__casebook_items__";

/// What becomes of the seed files cases carry ([`MemorySeeds::File`]) in a format that names
/// them by path (mas-lab). Formats that hold the content (casebook) always keep it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SeedFiles {
    /// Named by the path each case gives; nothing written (the output lands beside the input).
    #[default]
    Keep,
    /// Named by their paths and written beside the output through [`Beside`] (`export`).
    Write,
    /// Put inline in each case.
    Inline,
    /// The output goes to another folder than the input (`convert`): a seed file that lies in
    /// the output's folder tree is named by its path from there, one outside it is put inline.
    Relink { from: PathBuf, to: PathBuf },
}

/// Files written next to the output, at paths relative to its folder: the items file of a
/// mas-lab manifest that keeps its items apart (`spec.path`) and the seed files cases carry.
/// The caller makes them appear only when the whole output succeeded.
pub trait Beside {
    /// The text of the file already at `path`, if there is one.
    fn existing(&mut self, path: &str) -> io::Result<Option<String>>;
    /// A new file at `path`.
    fn create(&mut self, path: &str) -> io::Result<Box<dyn Write + Send>>;
    /// Whether `path` beside the output is the file `other`.
    fn is(&self, path: &str, other: &Path) -> bool;
}

/// A batch of cases, encoded.
#[derive(Debug, Default)]
pub struct Encoded {
    pub bytes: Vec<u8>,
    /// Cases (by index in the batch) with fields the target format cannot hold.
    pub lost: Vec<(usize, Vec<std::borrow::Cow<'static, str>>)>,
    /// Cases (by index in the batch) not written because they lack what the target format
    /// requires, whether the conversion is lossy or not (see [`refusal`]).
    pub missing: Vec<(usize, Vec<Required>)>,
    /// Cases (by index in the batch) not written because their expectations are drafts and the
    /// format has no place for `review`: written, they would read as confirmed (see [`Drafts`]).
    pub drafts: Vec<usize>,
    /// Cases written.
    pub written: usize,
    /// Seed files to write beside the output ([`SeedFiles::Write`]): path and document.
    pub seed_files: Vec<(String, Value)>,
    /// Cases (by index in the batch) written inline that their source read from another file,
    /// with the reference that named it (promptfoo tests read from `file://tests/*.yaml`): the
    /// output means the same to the tool, so this is told, not refused.
    pub inlined: Vec<(usize, String)>,
    /// References to files of tests a promptfoo configuration kept unread, written beside the
    /// cases of this batch ([`promptfoo::unwritten_references`] tells the others).
    pub refs: Vec<Value>,
}

/// Something a format requires that a case does not have: the field, and how to give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Required {
    pub field: &'static str,
    pub how: String,
}

/// The message and hint for a case `id` that lacks what `format` requires; `verb` is what the
/// user does (`convert`, `export`).
pub fn refusal(format: Format, id: &str, missing: &[Required], verb: &str) -> (String, String) {
    let fields: Vec<String> = missing.iter().map(|m| format!("`{}`", m.field)).collect();
    let mut how: Vec<&str> = missing.iter().map(|m| m.how.as_str()).collect();
    how.dedup();
    let how = match how.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    };
    (
        format!("case `{}` lacks what `{format}` requires: {}", casebook_model::excerpt(id), fields.join(", ")),
        format!("give the case {how}, or {verb} to another format"),
    )
}

/// The message and hint for an output of `format` that would hold no case: `what` is the
/// dataset (`the dataset`, `qa@v2`), `verb` what the user does (`convert`, `export`).
pub fn empty_refusal(format: Format, what: &str, verb: &str) -> (String, String) {
    (
        format!("{what} has no cases, and a `{format}` file must hold at least one"),
        format!("add a case, or {verb} to `casebook`, which can hold an empty dataset"),
    )
}

/// The draft cases a whole conversion or export refused ([`Encoded::drafts`]): how many, and the
/// ids of the first few, for one error at the end rather than one per case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drafts {
    pub count: u64,
    pub first: Vec<String>,
}

impl Drafts {
    /// Ids an error names.
    const NAMED: usize = 3;

    pub fn add(&mut self, id: &str) {
        self.count += 1;
        if self.first.len() < Self::NAMED {
            self.first.push(casebook_model::excerpt(id).into_owned());
        }
    }

    /// The message and hint of the error, when any draft was refused.
    pub fn refusal(&self, format: Format) -> Option<(String, String)> {
        if self.count == 0 {
            return None;
        }
        let mut ids: Vec<String> = self.first.iter().map(|id| format!("`{id}`")).collect();
        let more = self.count - self.first.len() as u64;
        if more > 0 {
            ids.push(format!("{more} more"));
        }
        let cases = if self.count == 1 { "1 case".to_owned() } else { format!("{} cases", self.count) };
        Some((
            format!(
                "{cases} with draft expectations (`review: draft`) would be written as confirmed, `{format}` having \
                 no place for `review`: {}",
                ids.join(", ")
            ),
            "have them confirmed first (`casebook review NAME ID --state reviewed`, or `review: reviewed` in the file), \
             or pass `--confirm-drafts` to write them as confirmed"
                .into(),
        ))
    }
}

/// What a lossy conversion says it dropped of a case whose expectations were rejected.
const REJECTED_LEFT_OUT: &str =
    "the whole case (its expectations were rejected, `review: rejected`, and would read as ground truth)";

/// Whether a field [`Lost`] names is `review` (a CSV map's says why: `review (no column …)`).
fn is_review(field: &str) -> bool {
    field == "review" || field.starts_with("review ")
}

pub struct Encoder {
    format: Format,
    syntax: Syntax,
    lossy: bool,
    /// Write draft expectations to a format without `review` (where they read as confirmed).
    confirm_drafts: bool,
    columns: Vec<String>,
    map: Option<ColumnMap>,
    /// Indentation of list items in a document.
    indent: usize,
    /// Document text before and after the list of cases.
    prologue: String,
    epilogue: String,
    seed_files: SeedFiles,
    /// Paths of seed files under [`SeedFiles::Relink`] (`None`: put inline), found once each.
    relinked: Mutex<HashMap<String, Option<String>>>,
    /// A mas-lab manifest whose items go to another file: the manifest's text, the items
    /// file's path, and the syntax the items are written in.
    apart: Option<(String, String, Syntax)>,
    /// The `defaultTest` of a promptfoo configuration written around the tests, which each
    /// test then leaves out ([`promptfoo::strip_defaults`]).
    defaults: Option<Map>,
    /// The output is a promptfoo configuration around its list of tests.
    configuration: bool,
}

impl Encoder {
    /// `columns` are the CSV columns to write (ignored for other syntaxes).
    pub fn new(
        format: Format,
        syntax: Syntax,
        header: &DatasetHeader,
        columns: Vec<String>,
        map: Option<ColumnMap>,
        lossy: bool,
    ) -> Self {
        let mut encoder = Self {
            format,
            syntax,
            lossy,
            confirm_drafts: false,
            columns,
            map,
            indent: 0,
            prologue: String::new(),
            epilogue: String::new(),
            seed_files: SeedFiles::Keep,
            relinked: Mutex::new(HashMap::new()),
            apart: None,
            defaults: None,
            configuration: false,
        };
        encoder.skeleton(header, false);
        encoder
    }

    /// Writes draft expectations even to a format that has no place for `review`, where they
    /// read as confirmed ones; by default such cases are refused ([`Encoded::drafts`]), lossy
    /// or not.
    pub fn confirming_drafts(mut self, confirm: bool) -> Self {
        self.confirm_drafts = confirm;
        self
    }

    /// The path of the items file a manifest is written apart from, if it is.
    pub fn items_file(&self) -> Option<&str> {
        self.apart.as_ref().map(|(_, path, _)| path.as_str())
    }

    /// Sets what becomes of seed files, and whether files can be written beside the output
    /// (when they can, a mas-lab manifest read with its items in another file is written so).
    pub fn with_files(mut self, header: &DatasetHeader, seed_files: SeedFiles, beside: bool) -> Self {
        self.seed_files = seed_files;
        if beside {
            self.skeleton(header, true);
        }
        self
    }

    /// Where a carried seed file goes.
    fn seed_place(&self, file: &str) -> SeedPlace {
        match &self.seed_files {
            SeedFiles::Keep => SeedPlace::Path(None),
            SeedFiles::Write => SeedPlace::Write,
            SeedFiles::Inline => SeedPlace::Inline,
            SeedFiles::Relink { from, to } => {
                let mut cache = self.relinked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let found = cache.entry(file.to_owned()).or_insert_with(|| relink(from, to, file));
                match found {
                    Some(path) if path == file => SeedPlace::Path(None),
                    Some(path) => SeedPlace::Path(Some(path.clone())),
                    None => SeedPlace::Inline,
                }
            }
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn syntax(&self) -> Syntax {
        self.syntax
    }

    /// The columns a CSV file needs for `cases`, in a stable order (for a first pass).
    pub fn csv_columns(&self, cases: &[Case], columns: &mut Vec<String>) {
        for case in cases {
            let keys: Vec<String> = match self.format {
                Format::Csv => self.mapped_row(case).0.into_iter().map(|(k, _)| k).collect(),
                Format::Inspect => inspect_csv_row(case).0.keys().cloned().collect(),
                Format::Promptfoo => promptfoo::csv_cells(case, &[]).0.keys().cloned().collect(),
                _ => {
                    let (mut row, mut lost) = letta::write_row(case);
                    letta::csv_row(&mut row, layout::layout_for(case, letta::NAME), &mut lost);
                    row.keys().cloned().collect()
                }
            };
            for key in keys {
                if !columns.contains(&key) {
                    columns.push(key);
                }
            }
        }
    }

    pub fn encode(&self, cases: &[Case]) -> Encoded {
        let mut out = Encoded::default();
        let mut text = String::new();
        for (i, case) in cases.iter().enumerate() {
            let written_before = out.written;
            let lost = match (self.format, self.syntax) {
                (Format::Casebook, Syntax::Jsonl | Syntax::Parquet) => {
                    if serde_json::to_writer(&mut out.bytes, case).is_ok() {
                        out.bytes.push(b'\n');
                    }
                    out.written += 1;
                    continue;
                }
                (Format::Letta, Syntax::Jsonl) => {
                    let (row, lost) = letta::write_row(case);
                    if self.keep(case, &lost) {
                        let _ = serde_json::to_writer(&mut out.bytes, &row);
                        out.bytes.push(b'\n');
                        out.written += 1;
                    }
                    lost
                }
                (Format::Inspect | Format::Promptfoo, Syntax::Jsonl) => {
                    let (row, lost) = if self.format == Format::Inspect {
                        inspect::write_sample(case)
                    } else {
                        let (row, mut lost) = promptfoo::write_test(case);
                        promptfoo::no_place_for_references(case, &mut lost);
                        (row, lost)
                    };
                    if self.keep(case, &lost) {
                        let _ = serde_json::to_writer(&mut out.bytes, &row);
                        out.bytes.push(b'\n');
                        out.written += 1;
                    }
                    lost
                }
                (Format::Inspect, Syntax::Csv) => {
                    let (row, lost) = inspect_csv_row(case);
                    if self.keep(case, &lost) {
                        self.csv_row(&mut out.bytes, |col| row.get(col).cloned());
                        out.written += 1;
                    }
                    lost
                }
                (Format::Promptfoo, Syntax::Csv) => {
                    let (row, mut lost) = promptfoo::csv_cells(case, &self.columns);
                    promptfoo::no_place_for_references(case, &mut lost);
                    if self.keep(case, &lost) {
                        self.csv_row(&mut out.bytes, |col| row.get(col).cloned());
                        out.written += 1;
                    }
                    lost
                }
                (Format::OpenaiEvals, _) => {
                    let (row, lost) = openai_evals::write_row(case);
                    if self.keep(case, &lost) {
                        let _ = serde_json::to_writer(&mut out.bytes, &row);
                        out.bytes.push(b'\n');
                        out.written += 1;
                    }
                    lost
                }
                (Format::Letta, _) => {
                    let (mut row, mut lost) = letta::write_row(case);
                    letta::csv_row(&mut row, layout::layout_for(case, letta::NAME), &mut lost);
                    if self.keep(case, &lost) {
                        self.csv_row(&mut out.bytes, |col| row.get(col).cloned());
                        out.written += 1;
                    }
                    lost
                }
                (Format::Csv, _) => {
                    let (row, lost) = self.mapped_row(case);
                    if self.keep(case, &lost) {
                        self.csv_row(&mut out.bytes, |col| row.iter().find(|(k, _)| k == col).map(|(_, v)| v.clone()));
                        out.written += 1;
                    }
                    lost
                }
                _ => {
                    let mut missing = Vec::new();
                    let (item, lost) = match self.format {
                        Format::AgentHealth => {
                            let (item, lost) = agenthealth::write_case(case);
                            missing = agenthealth::required(&item);
                            (item, lost)
                        }
                        Format::Voltagent => voltagent::write_item(case),
                        Format::Inspect => inspect::write_sample(case),
                        Format::Promptfoo => {
                            let (mut test, lost) = promptfoo::write_test(case);
                            if let Some(defaults) = &self.defaults {
                                promptfoo::strip_defaults(&mut test, case, defaults);
                            }
                            (test, lost)
                        }
                        Format::Maslab => {
                            let (mut item, lost) = maslab::write_item(case);
                            if let Some(seeds @ MemorySeeds::File { file, content }) = &case.task.memory_seeds {
                                match self.seed_place(file) {
                                    SeedPlace::Path(None) => {}
                                    SeedPlace::Path(Some(path)) => maslab::replace_seeds(&mut item, json!(path)),
                                    SeedPlace::Write => out.seed_files.push((file.clone(), content.clone())),
                                    // A seed file's content was checked when it was read.
                                    SeedPlace::Inline => {
                                        if let Ok(list) = seeds.seeds() {
                                            let list = serde_json::to_value(list).unwrap_or_default();
                                            maslab::replace_seeds(&mut item, list);
                                        }
                                    }
                                }
                            }
                            (item, lost)
                        }
                        _ => (native_value(case), Lost::default()),
                    };
                    if missing.is_empty() && self.keep(case, &lost) {
                        text.clear();
                        // References to test files a promptfoo configuration had beside this
                        // test, which casebook kept unread.
                        let kept = |before| match self.format {
                            Format::Promptfoo => promptfoo::kept_references(case, before),
                            _ => Vec::new(),
                        };
                        for reference in kept(true) {
                            self.document_item(&mut text, &reference);
                            out.refs.push(reference);
                        }
                        self.document_item(&mut text, &Value::Object(item));
                        for reference in kept(false) {
                            self.document_item(&mut text, &reference);
                            out.refs.push(reference);
                        }
                        out.bytes.extend_from_slice(text.as_bytes());
                        out.written += 1;
                    }
                    if !missing.is_empty() {
                        out.missing.push((i, missing));
                    }
                    lost
                }
            };
            if out.written > written_before && self.format == Format::Promptfoo {
                out.inlined.extend(promptfoo::read_from(case).map(|reference| (i, reference)));
            }
            // A draft refused is told once for all of them ([`Drafts`]); what else the format
            // cannot hold is told as usual unless the conversion is lossy (nothing was dropped
            // from a case not written).
            let draft = self.unconfirms(case, &lost);
            if draft {
                out.drafts.push(i);
            }
            let rejected = self.rejected_left_out(case, &lost);
            let mut fields: Vec<_> = lost
                .0
                .into_iter()
                .filter(|field| !((draft || self.confirms(case)) && is_review(field)))
                .map(|field| if rejected && is_review(&field) { REJECTED_LEFT_OUT.into() } else { field })
                .collect();
            let told = !(draft && self.lossy);
            if told && !fields.is_empty() {
                fields.dedup();
                out.lost.push((i, fields));
            }
        }
        out
    }

    fn keep(&self, case: &Case, lost: &Lost) -> bool {
        let held = lost.0.iter().all(|field| self.confirms(case) && is_review(field));
        (self.lossy || held) && !self.unconfirms(case, lost) && !self.rejected_left_out(case, lost)
    }

    /// Whether `case`'s draft expectations are written as confirmed ([`Self::confirming_drafts`]):
    /// its `review` left out is then what was asked, not a field lost.
    fn confirms(&self, case: &Case) -> bool {
        self.confirm_drafts && case.review == Some(Review::Draft)
    }

    /// Whether `case` is left out of a lossy conversion because its expectations were rejected
    /// and the format has no place for `review`: written, a label a reviewer turned down would
    /// read as ground truth.
    fn rejected_left_out(&self, case: &Case, lost: &Lost) -> bool {
        self.lossy
            && case.review == Some(Review::Rejected)
            && !case.expected.is_empty()
            && lost.0.iter().any(|field| is_review(field))
    }

    /// Whether writing `case` without what the format cannot hold (`lost`) would make draft
    /// expectations read as confirmed ones.
    fn unconfirms(&self, case: &Case, lost: &Lost) -> bool {
        !self.confirm_drafts
            && case.review == Some(Review::Draft)
            && !case.expected.is_empty()
            && lost.0.iter().any(|field| is_review(field))
    }

    fn csv_row(&self, out: &mut Vec<u8>, get: impl Fn(&str) -> Option<Value>) {
        for (i, column) in self.columns.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match get(column) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if s.is_empty() => out.extend_from_slice(b"\"\""),
                Some(Value::String(s)) => csvtext::write_cell(out, &s),
                Some(other) => csvtext::write_cell(out, &other.to_string()),
            }
        }
        out.push(b'\n');
    }

    /// A case as generic CSV cells, following the column map.
    fn mapped_row(&self, case: &Case) -> (Vec<(String, Value)>, Lost) {
        let value = native_value(case);
        let mut row = Vec::new();
        let mut used_metadata = Vec::new();
        if let Some(map) = &self.map {
            for (target, column) in &map.entries {
                let v = match target.split_once('.') {
                    Some(("expected", key)) => value.get("expected").and_then(|e| e.get(key)).cloned(),
                    Some(("metadata", key)) => {
                        used_metadata.push(key.to_owned());
                        value.get("metadata").and_then(|m| m.get(key)).cloned()
                    }
                    _ if target == "labels" => case.labels.as_ref().map(|l| Value::String(l.join(","))),
                    _ => value.get(target.as_str()).cloned(),
                };
                if let Some(v) = v {
                    row.push((column.clone(), v));
                }
            }
        }
        if let Some(metadata) = &case.metadata {
            for (k, v) in metadata {
                if !used_metadata.contains(k) {
                    row.push((k.clone(), v.clone()));
                }
            }
        }
        let mut lost = Lost::default();
        // Fields of the case no column holds.
        let mapped = |field: &str| self.map.as_ref().is_some_and(|m| m.entries.iter().any(|(t, _)| t == field));
        for (key, v) in &value {
            let fields: Vec<String> = match (key.as_str(), v) {
                ("metadata" | "provenance", _) => Vec::new(),
                ("id", _) if case.provenance.as_ref().is_some_and(|p| p.id_derived) => Vec::new(),
                ("expected", Value::Object(e)) => e.keys().map(|k| format!("expected.{k}")).collect(),
                (other, _) => vec![other.to_owned()],
            };
            for field in fields.into_iter().filter(|f| !mapped(f)) {
                lost.push(format!("{field} (no column of the map holds it)"));
            }
        }
        // Values the reader would give back as something else.
        let target_of = |column: &str| self.map.as_ref().and_then(|m| m.target_of(column)).map(str::to_owned);
        let mut unreadable = Vec::new();
        for (column, v) in &row {
            let target = target_of(column).unwrap_or_else(|| format!("metadata.{column}"));
            let json = matches!(
                target.as_str(),
                "agent_args" | "expected.rubric_vars" | "expected.acceptable" | "expected.outcomes"
            );
            let readable = match (target.as_str(), v) {
                (_, Value::Null) => false,
                (_, Value::String(_)) if json => false,
                (_, _) if json => true,
                ("labels", _) => case
                    .labels
                    .iter()
                    .flatten()
                    .all(|l| !l.is_empty() && l.trim() == l && !l.contains([',', ';']) && !l.starts_with('[')),
                ("confidence", Value::Number(_)) => true,
                (_, Value::String(_)) => true,
                _ => false,
            };
            if !readable {
                lost.push(format!(
                    "{target} (the `{}` column would read back as something else)",
                    casebook_model::excerpt(column)
                ));
                unreadable.push(column.clone());
            }
        }
        row.retain(|(column, _)| !unreadable.contains(column));
        (row, lost)
    }

    /// One list item of a document, with what separates it from the previous one.
    fn document_item(&self, out: &mut String, item: &Value) {
        list_item(out, item, self.apart.as_ref().map_or(self.syntax, |(_, _, syntax)| *syntax), self.indent);
    }

    /// Builds the text around the list of cases from the dataset header.
    fn skeleton(&mut self, header: &DatasetHeader, beside: bool) {
        let doc_layout =
            header.provenance.as_ref().filter(|p| p.format.as_deref() == Some(self.format.name())).map(|p| &p.layout);
        let name_derived = layout::flag(doc_layout, "name_derived");
        let mut kept =
            doc_layout.and_then(|l| l.get("document")).and_then(Value::as_object).cloned().unwrap_or_default();
        let mark = json!(ITEMS_MARK);
        let items_file = (self.format == Format::Maslab)
            .then(|| crate::documents::items_file(header))
            .flatten()
            .map(|(path, format)| (path.to_owned(), format.map(str::to_owned)));
        self.apart = None;
        if let Some((path, format)) = items_file {
            if beside {
                // The manifest as it was, and the items in their own file.
                let manifest = maslab_document(header, doc_layout, kept, name_derived, None);
                let manifest = match self.syntax {
                    Syntax::Yaml => {
                        let mut s = String::new();
                        if let Value::Object(map) = &manifest {
                            yaml_out::mapping(&mut s, map, 0);
                        }
                        s
                    }
                    _ => serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n",
                };
                let json = format.as_deref().map_or_else(
                    || Path::new(&path).extension().is_some_and(|e| e.eq_ignore_ascii_case("json")),
                    |f| f.eq_ignore_ascii_case("json"),
                );
                let items_syntax = if json { Syntax::Json } else { Syntax::Yaml };
                self.apart = Some((manifest, path, items_syntax));
                let items_doc = doc_layout.and_then(|l| l.get("items_document")).cloned();
                self.place_list(items_doc, &["spec", "items"], items_syntax);
                return;
            }
            // Everything in one file: the items go into the manifest.
            if let Some(Value::Object(spec)) = kept.get_mut("spec") {
                spec.shift_remove("path");
                spec.shift_remove("format");
            }
        }
        let doc: Option<Value> = match self.format {
            Format::Casebook if matches!(self.syntax, Syntax::Jsonl | Syntax::Parquet) => {
                if !trivial(header) {
                    let record = json!({ crate::native::HEADER_KEY: header });
                    self.prologue = format!("{record}\n");
                }
                None
            }
            Format::Casebook => {
                let mut d = match serde_json::to_value(header) {
                    Ok(Value::Object(map)) => map,
                    _ => Map::new(),
                };
                d.insert("cases".into(), mark);
                Some(Value::Object(d))
            }
            Format::AgentHealth => None,
            Format::Voltagent => {
                let mut d = Map::new();
                if !name_derived || doc_layout.is_none() {
                    if let Some(name) = &header.name {
                        d.insert("name".into(), json!(name));
                    }
                }
                if let Some(v) = &header.description {
                    d.insert("description".into(), json!(v));
                }
                if let Some(v) = &header.labels {
                    d.insert("tags".into(), json!(v));
                }
                if let Some(v) = &header.metadata {
                    d.insert("metadata".into(), Value::Object(v.clone()));
                }
                for (k, v) in kept {
                    d.insert(k, v);
                }
                d.insert("data".into(), mark);
                Some(Value::Object(d))
            }
            Format::Maslab => Some(maslab_document(header, doc_layout, kept, name_derived, Some(mark))),
            // A configuration with its tests inline, as it was; a list of tests otherwise.
            Format::Promptfoo => match doc_layout.and_then(|l| l.get("document")) {
                Some(Value::Object(document)) if matches!(self.syntax, Syntax::Yaml | Syntax::Json) => {
                    self.defaults = document.get("defaultTest").and_then(Value::as_object).cloned();
                    self.configuration = true;
                    let mut d = Map::new();
                    if let Some(v) = &header.description {
                        d.insert("description".into(), json!(v));
                    }
                    for (k, v) in document {
                        d.insert(k.clone(), v.clone());
                    }
                    d.insert("tests".into(), mark);
                    Some(Value::Object(d))
                }
                _ => None,
            },
            Format::Inspect | Format::Letta | Format::OpenaiEvals | Format::Csv => None,
        };
        match (self.format, doc) {
            (Format::Promptfoo, None) if matches!(self.syntax, Syntax::Yaml | Syntax::Json) => {
                self.place_list(None, &[], self.syntax);
            }
            (Format::Inspect, None) if self.syntax != Syntax::Json => {}
            (Format::AgentHealth, _) | (Format::Inspect, None) => {
                self.indent = 2;
                self.prologue = "[".into();
                self.epilogue = "\n]\n".into();
            }
            (_, Some(doc)) => self.place_list(Some(doc), &[], self.syntax),
            (_, None) => {}
        }
    }

    /// Sets the prologue, epilogue and indentation for the list of cases in `doc` (marked with
    /// [`ITEMS_MARK`], or `null` at `null_at` as a reader left it); no document is a bare list.
    fn place_list(&mut self, doc: Option<Value>, null_at: &[&str], syntax: Syntax) {
        let Some(mut doc) = doc else {
            (self.indent, self.prologue, self.epilogue) = match syntax {
                Syntax::Yaml => (0, String::new(), String::new()),
                _ => (2, "[".into(), "\n]\n".into()),
            };
            return;
        };
        let mut slot = Some(&mut doc);
        for key in null_at {
            slot = slot.and_then(|v| v.get_mut(*key));
        }
        if let Some(slot) = slot.filter(|v| v.is_null()) {
            *slot = json!(ITEMS_MARK);
        } else if let Some(slot) = doc.get_mut("items").filter(|v| v.is_null()) {
            *slot = json!(ITEMS_MARK);
        }
        let text = match syntax {
            Syntax::Yaml => {
                let mut s = String::new();
                if let Value::Object(map) = &doc {
                    yaml_out::mapping(&mut s, map, 0);
                }
                s
            }
            _ => serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
        };
        let quoted = if syntax == Syntax::Yaml { ITEMS_MARK.to_owned() } else { format!("\"{ITEMS_MARK}\"") };
        let at = text.find(&quoted).unwrap_or(text.len());
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let key_indent = text[line_start..].len() - text[line_start..].trim_start().len();
        if syntax == Syntax::Yaml {
            self.indent = key_indent;
            self.prologue = text[..at].trim_end().to_owned();
            self.epilogue = text[(at + quoted.len()).min(text.len())..].trim_start_matches('\n').to_owned();
        } else {
            self.indent = key_indent + 2;
            self.prologue = text[..at].to_owned() + "[";
            self.epilogue = format!("\n{}]", " ".repeat(key_indent)) + &text[(at + quoted.len()).min(text.len())..];
        }
    }
}

/// One item of the list of cases in a document of `syntax`, indented by `indent`, with what
/// separates it from the previous one.
fn list_item(out: &mut String, item: &Value, syntax: Syntax, indent: usize) {
    match syntax {
        Syntax::Yaml => yaml_out::sequence(out, std::slice::from_ref(item), indent),
        _ => {
            out.push_str(",\n");
            let pretty = serde_json::to_string_pretty(item).unwrap_or_default();
            for (i, line) in pretty.lines().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.extend(std::iter::repeat_n(' ', indent));
                out.push_str(line);
            }
        }
    }
}

/// An Inspect sample as CSV cells, and what CSV cannot hold of it.
fn inspect_csv_row(case: &Case) -> (Map, Lost) {
    let (mut row, mut lost) = inspect::write_sample(case);
    inspect::csv_row(&mut row, &mut lost);
    (row, lost)
}

/// Where one case's seed file goes.
enum SeedPlace {
    /// Named by a path: the case's own (`None`) or another.
    Path(Option<String>),
    Write,
    Inline,
}

/// The path, from `to`, of the seed file `file` names from `from`, if it lies in `to`'s tree;
/// the case's own spelling when it names the same file.
fn relink(from: &Path, to: &Path, file: &str) -> Option<String> {
    let source = crate::parts::inside(from, file)?.canonicalize().ok()?;
    let to = if to.as_os_str().is_empty() { Path::new(".") } else { to };
    let relative = source.strip_prefix(to.canonicalize().ok()?).ok()?;
    let relative: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let own: Vec<String> = Path::new(file)
        .components()
        .filter(|c| *c != std::path::Component::CurDir)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(if own == relative { file.to_owned() } else { relative.join("/") })
}

/// The text of a seed file: JSON when its name ends in `.json`, YAML otherwise.
fn seed_file_text(path: &str, content: &Value) -> String {
    if Path::new(path).extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
        return serde_json::to_string_pretty(content).unwrap_or_default() + "\n";
    }
    let mut text = String::new();
    match content {
        Value::Object(map) if !map.is_empty() => yaml_out::mapping(&mut text, map, 0),
        Value::Array(items) if !items.is_empty() => yaml_out::sequence(&mut text, items, 0),
        other => {
            text.push_str(&other.to_string());
            text.push('\n');
        }
    }
    text
}

/// Whether a header holds nothing a JSONL file needs to keep: a name made from the file name and
/// where the data came from.
fn trivial(header: &DatasetHeader) -> bool {
    let layout_trivial = header
        .provenance
        .as_ref()
        .is_none_or(|p| p.extra.is_empty() && p.layout.keys().all(|k| k == "name_derived" || k == "columns"));
    let name_derived = header.provenance.as_ref().is_some_and(|p| layout::flag(Some(&p.layout), "name_derived"));
    header.description.is_none()
        && header.labels.is_none()
        && header.metadata.is_none()
        && layout_trivial
        && (header.name.is_none() || name_derived)
}

fn native_value(case: &Case) -> Map {
    match serde_json::to_value(case) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// A mas-lab document around its items (`mark` where they go; `None` for a manifest whose items
/// are in another file).
fn maslab_document(
    header: &DatasetHeader,
    doc_layout: Option<&Map>,
    kept: Map,
    name_derived: bool,
    mark: Option<Value>,
) -> Value {
    let flat = layout::text(doc_layout, "shape") == Some("flat");
    let write_name = !(name_derived && doc_layout.is_some());
    let mut d = Map::new();
    if flat {
        if write_name {
            if let Some(n) = &header.name {
                d.insert(layout::text(doc_layout, "name_key").unwrap_or("name").into(), json!(n));
            }
        }
        if let Some(v) = &header.description {
            d.insert("description".into(), json!(v));
        }
        if let Some(v) = &header.labels {
            d.insert("tags".into(), json!(v));
        }
        for (k, v) in kept {
            d.insert(k, v);
        }
        for (k, v) in header.metadata.iter().flatten() {
            d.insert(k.clone(), v.clone());
        }
        d.insert("items".into(), mark.unwrap_or_default());
        return Value::Object(d);
    }
    let mut kept = kept;
    d.insert("apiVersion".into(), kept.shift_remove("apiVersion").unwrap_or(json!("lab/v1")));
    d.insert("kind".into(), kept.shift_remove("kind").unwrap_or(json!("Dataset")));
    let mut meta = Map::new();
    if write_name {
        if let Some(n) = &header.name {
            meta.insert("name".into(), json!(n));
        }
    }
    for (k, v) in header.metadata.iter().flatten() {
        meta.insert(k.clone(), v.clone());
    }
    if let Some(v) = &header.description {
        meta.insert("description".into(), json!(v));
    }
    if let Some(v) = &header.labels {
        meta.insert("tags".into(), json!(v));
    }
    kept.shift_remove("metadata");
    d.insert("metadata".into(), Value::Object(meta));
    let mut spec = match kept.shift_remove("spec") {
        Some(Value::Object(spec)) => spec,
        _ => Map::new(),
    };
    if let Some(mark) = mark {
        spec.insert("items".into(), mark);
    }
    d.insert("spec".into(), Value::Object(spec));
    for (k, v) in kept {
        d.insert(k, v);
    }
    Value::Object(d)
}

/// Puts encoded batches into one file, in order (and, through [`Beside`], the files that go
/// next to it).
pub struct Writer<'w> {
    out: Box<dyn Write + Send + 'w>,
    /// The Parquet table the native JSONL encoding goes into, when the syntax is Parquet (it
    /// owns the output then).
    parquet: Option<ParquetSink<'w>>,
    beside: Option<Box<dyn Beside + Send + 'w>>,
    /// The items file of a manifest written apart, once begun.
    items: Option<Box<dyn Write + Send>>,
    /// The manifest's text and the items file's path, for a manifest written apart.
    apart: Option<(String, String)>,
    /// Seed files to write at the end, by path.
    seed_files: BTreeMap<String, Value>,
    /// The syntax of the document the cases are listed in.
    list_syntax: Syntax,
    /// The header the writing started with.
    header: DatasetHeader,
    format: Format,
    syntax: Syntax,
    columns: Vec<String>,
    prologue: String,
    epilogue: String,
    /// Agent Health files that held one object stay one object.
    single: Option<Vec<u8>>,
    written: u64,
    /// A promptfoo configuration's list of tests: its indentation, and the references kept
    /// unread that were written beside cases (the others go at its end, [`Writer::finish`]).
    tests_list: Option<usize>,
    refs_written: Vec<Value>,
}

impl<'w> Writer<'w> {
    pub fn new(out: Box<dyn Write + Send + 'w>, encoder: &Encoder, header: &DatasetHeader) -> io::Result<Self> {
        let single_object = header.provenance.as_ref().is_some_and(|p| {
            p.format.as_deref() == Some(Format::AgentHealth.name()) && layout::flag(Some(&p.layout), "single_object")
        });
        let (out, parquet): (Box<dyn Write + Send + 'w>, _) = match encoder.syntax {
            Syntax::Parquet => (Box::new(io::sink()), Some(ParquetSink::new(out))),
            _ => (out, None),
        };
        Ok(Self {
            out,
            parquet: parquet.transpose()?,
            beside: None,
            items: None,
            apart: encoder.apart.as_ref().map(|(manifest, path, _)| (manifest.clone(), path.clone())),
            list_syntax: encoder.apart.as_ref().map_or(encoder.syntax, |(_, _, syntax)| *syntax),
            seed_files: BTreeMap::new(),
            header: header.clone(),
            format: encoder.format,
            syntax: encoder.syntax,
            columns: encoder.columns.clone(),
            prologue: encoder.prologue.clone(),
            epilogue: encoder.epilogue.clone(),
            single: (single_object && encoder.format == Format::AgentHealth).then(Vec::new),
            written: 0,
            tests_list: (encoder.format == Format::Promptfoo && encoder.configuration).then_some(encoder.indent),
            refs_written: Vec::new(),
        })
    }

    /// Where the files beside the output go (needed for an encoder made `with_files(.., true)`).
    pub fn with_beside(mut self, beside: Box<dyn Beside + Send + 'w>) -> Self {
        self.beside = Some(beside);
        self
    }

    /// Where the list of cases goes: the output, or a manifest's items file.
    fn sink(&mut self) -> &mut dyn Write {
        match (&mut self.items, &mut self.parquet) {
            (Some(items), _) => items.as_mut(),
            (None, Some(parquet)) => parquet,
            (None, None) => self.out.as_mut(),
        }
    }

    pub fn begin(&mut self) -> io::Result<()> {
        if let Some((manifest, path)) = self.apart.take() {
            let beside = self.beside.as_mut().ok_or_else(|| io::Error::other("no place for the items file"))?;
            let items = beside.create(&path)?;
            self.out.write_all(manifest.as_bytes())?;
            self.items = Some(items);
        }
        if self.syntax == Syntax::Csv {
            let mut line = Vec::new();
            for (i, c) in self.columns.iter().enumerate() {
                if i > 0 {
                    line.push(b',');
                }
                csvtext::write_cell(&mut line, c);
            }
            line.push(b'\n');
            self.out.write_all(&line)?;
        }
        if self.single.is_none() {
            let prologue = std::mem::take(&mut self.prologue);
            self.sink().write_all(prologue.as_bytes())?;
            self.prologue = prologue;
        }
        Ok(())
    }

    pub fn write(&mut self, encoded: &Encoded) -> io::Result<()> {
        for (path, content) in &encoded.seed_files {
            match self.seed_files.get(path) {
                Some(kept) if kept != content => {
                    return Err(io::Error::other(format!(
                        "two cases name the seed file `{path}` with different content: \
                         pass `--inline-seeds` to put each case's seeds inline"
                    )));
                }
                Some(_) => {}
                None => {
                    self.seed_files.insert(path.clone(), content.clone());
                }
            }
        }
        self.refs_written.extend(encoded.refs.iter().cloned());
        let mut bytes = &encoded.bytes[..];
        if encoded.written > 0 && self.written == 0 && bytes.first() == Some(&b',') {
            bytes = &bytes[1..];
        }
        if encoded.written > 0 && self.written == 0 && self.list_syntax == Syntax::Yaml && !self.prologue.is_empty() {
            self.sink().write_all(b"\n")?;
        }
        self.written += encoded.written as u64;
        match &mut self.single {
            Some(buf) => {
                buf.extend_from_slice(bytes);
                Ok(())
            }
            None => self.sink().write_all(bytes),
        }
    }

    /// Ends the file. `header` is the dataset header as it was at the end of the input, when it
    /// had more to say than at the start (keys after the list of cases in a long document).
    /// Returns `false` when that could not be written: the header went before the cases.
    pub fn finish(mut self, header: Option<&DatasetHeader>) -> io::Result<bool> {
        let mut kept = true;
        if let Some(indent) = self.tests_list {
            // References kept unread whose neighbouring cases were not written (filtered out,
            // removed): at the end of `tests`, so that the configuration still names them.
            let layout = self.header.provenance.as_ref().map(|p| &p.layout);
            let unwritten = promptfoo::unwritten_references(layout, &self.refs_written);
            if !unwritten.is_empty() {
                let mut text = String::new();
                for reference in &unwritten {
                    list_item(&mut text, reference, self.syntax, indent);
                }
                self.write(&Encoded { bytes: text.into_bytes(), written: unwritten.len(), ..Encoded::default() })?;
            }
        }
        let native_jsonl = self.format == Format::Casebook && matches!(self.syntax, Syntax::Jsonl | Syntax::Parquet);
        if native_jsonl && self.written == 0 && self.prologue.is_empty() {
            // An empty file would read as nothing in particular: say what it is.
            self.epilogue = format!("{}\n", json!({ crate::native::HEADER_KEY: self.header }));
        }
        if let Some(header) = header.filter(|h| **h != self.header) {
            if native_jsonl {
                // A native JSONL file takes a header record at its end too.
                self.epilogue = format!("{}\n", json!({ crate::native::HEADER_KEY: header }));
            } else {
                let late = Encoder::new(self.format, self.syntax, header, Vec::new(), None, true);
                if late.prologue == self.prologue {
                    self.epilogue = late.epilogue;
                } else {
                    kept = false;
                }
            }
        }
        if let Some(buf) = self.single.take() {
            if self.written == 1 {
                let text = String::from_utf8_lossy(&buf);
                let text: String =
                    text.lines().map(|l| l.strip_prefix("  ").unwrap_or(l)).collect::<Vec<_>>().join("\n");
                self.out.write_all(text.trim_start_matches('\n').as_bytes())?;
                self.out.write_all(b"\n")?;
            } else {
                self.out.write_all(self.prologue.as_bytes())?;
                self.out.write_all(&buf)?;
                self.out.write_all(self.epilogue.as_bytes())?;
            }
        } else {
            if self.written == 0 && self.list_syntax == Syntax::Yaml && !self.prologue.is_empty() {
                // `items:` with nothing under it would read as null.
                self.sink().write_all(b" []\n")?;
            }
            let epilogue = std::mem::take(&mut self.epilogue);
            self.sink().write_all(epilogue.as_bytes())?;
        }
        if let Some(mut items) = self.items.take() {
            items.flush()?;
        }
        if let Some(parquet) = self.parquet.take() {
            parquet.close()?;
        }
        self.out.flush()?;
        self.write_seed_files()?;
        Ok(kept)
    }

    /// Writes the seed files the cases carry beside the output. One already there with the same
    /// content is left as it is; one with other content is not overwritten (another dataset
    /// may use it).
    fn write_seed_files(&mut self) -> io::Result<()> {
        let seed_files = std::mem::take(&mut self.seed_files);
        if seed_files.is_empty() {
            return Ok(());
        }
        let beside = self.beside.as_mut().ok_or_else(|| io::Error::other("no place for seed files"))?;
        for (path, content) in seed_files {
            if let Some(text) = beside.existing(&path)? {
                let same = crate::yaml::parse(&text).ok().and_then(|n| n.to_value(&crate::pointer::Ptr::ROOT).ok());
                if same.as_ref() == Some(&content) {
                    continue;
                }
                return Err(io::Error::other(format!(
                    "the seed file `{path}` is already there with other content: write to another folder, \
                     or pass `--inline-seeds` to put the seeds in the cases"
                )));
            }
            let mut file = beside.create(&path)?;
            file.write_all(seed_file_text(&path, &content).as_bytes())?;
            file.flush()?;
        }
        Ok(())
    }
}
