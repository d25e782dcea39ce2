//! Writing cases in any format. An [`Encoder`] turns a batch of cases into bytes and is shared by
//! worker threads; a [`Writer`] puts the document around them (a JSON array, a YAML manifest, a
//! CSV header) on one thread. A case whose fields the target format cannot hold is not written
//! unless the conversion is lossy; the encoder says which fields were in the way.

use std::io::{self, Write};

use casebook_model::{Case, DatasetHeader, Map};
use serde_json::{Value, json};

use crate::format::{Format, Syntax};
use crate::layout::{self, Lost};
use crate::tabular::ColumnMap;
use crate::{agenthealth, csvtext, letta, maslab, voltagent, yaml_out};

/// Marks where the list of cases goes in a document skeleton.
const ITEMS_MARK: &str = "__casebook_items__";

/// A batch of cases, encoded.
#[derive(Debug, Default)]
pub struct Encoded {
    pub bytes: Vec<u8>,
    /// Cases (by index in the batch) with fields the target format cannot hold.
    pub lost: Vec<(usize, Vec<&'static str>)>,
    /// Cases written.
    pub written: usize,
}

pub struct Encoder {
    format: Format,
    syntax: Syntax,
    lossy: bool,
    columns: Vec<String>,
    map: Option<ColumnMap>,
    /// Indentation of list items in a document.
    indent: usize,
    /// Document text before and after the list of cases.
    prologue: String,
    epilogue: String,
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
        let mut encoder =
            Self { format, syntax, lossy, columns, map, indent: 0, prologue: String::new(), epilogue: String::new() };
        encoder.skeleton(header);
        encoder
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
                _ => letta::write_row(case).0.keys().cloned().collect(),
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
            let lost = match (self.format, self.syntax) {
                (Format::Casebook, Syntax::Jsonl) => {
                    if serde_json::to_writer(&mut out.bytes, case).is_ok() {
                        out.bytes.push(b'\n');
                    }
                    out.written += 1;
                    continue;
                }
                (Format::Letta, Syntax::Jsonl) => {
                    let (row, lost) = letta::write_row(case);
                    if self.keep(&lost) {
                        let _ = serde_json::to_writer(&mut out.bytes, &row);
                        out.bytes.push(b'\n');
                        out.written += 1;
                    }
                    lost
                }
                (Format::Letta, _) => {
                    let (mut row, mut lost) = letta::write_row(case);
                    // letta reads a cell that starts with `[` and ends with `]` as JSON: such a
                    // string would come back as a list. It cannot be written.
                    for (column, field) in [("input", "input"), ("ground_truth", "expected.output")] {
                        if row
                            .get(column)
                            .and_then(Value::as_str)
                            .is_some_and(|s| s.starts_with('[') && s.ends_with(']'))
                        {
                            row.remove(column);
                            lost.0.push(field);
                        }
                    }
                    if self.keep(&lost) {
                        self.csv_row(&mut out.bytes, |col| row.get(col).cloned());
                        out.written += 1;
                    }
                    lost
                }
                (Format::Csv, _) => {
                    let (row, lost) = self.mapped_row(case);
                    if self.keep(&lost) {
                        self.csv_row(&mut out.bytes, |col| row.iter().find(|(k, _)| k == col).map(|(_, v)| v.clone()));
                        out.written += 1;
                    }
                    lost
                }
                _ => {
                    let (item, lost) = match self.format {
                        Format::AgentHealth => agenthealth::write_case(case),
                        Format::Voltagent => voltagent::write_item(case),
                        Format::Maslab => maslab::write_item(case),
                        _ => (native_value(case), Lost::default()),
                    };
                    if self.keep(&lost) {
                        text.clear();
                        self.document_item(&mut text, &Value::Object(item));
                        out.bytes.extend_from_slice(text.as_bytes());
                        out.written += 1;
                    }
                    lost
                }
            };
            if !lost.0.is_empty() {
                let mut fields = lost.0;
                fields.dedup();
                out.lost.push((i, fields));
            }
        }
        out
    }

    fn keep(&self, lost: &Lost) -> bool {
        self.lossy || lost.0.is_empty()
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
        (row, Lost::default())
    }

    /// One list item of a document, with what separates it from the previous one.
    fn document_item(&self, out: &mut String, item: &Value) {
        match self.syntax {
            Syntax::Yaml => yaml_out::sequence(out, std::slice::from_ref(item), self.indent),
            _ => {
                out.push_str(",\n");
                let pretty = serde_json::to_string_pretty(item).unwrap_or_default();
                for (i, line) in pretty.lines().enumerate() {
                    if i > 0 {
                        out.push('\n');
                    }
                    out.extend(std::iter::repeat_n(' ', self.indent));
                    out.push_str(line);
                }
            }
        }
    }

    /// Builds the text around the list of cases from the dataset header.
    fn skeleton(&mut self, header: &DatasetHeader) {
        let doc_layout =
            header.provenance.as_ref().filter(|p| p.format.as_deref() == Some(self.format.name())).map(|p| &p.layout);
        let name_derived = layout::flag(doc_layout, "name_derived");
        let kept = doc_layout.and_then(|l| l.get("document")).and_then(Value::as_object).cloned().unwrap_or_default();
        let mark = json!(ITEMS_MARK);
        let doc: Option<Value> = match self.format {
            Format::Casebook if self.syntax == Syntax::Jsonl => {
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
            Format::Maslab => Some(maslab_document(header, doc_layout, kept, name_derived, mark)),
            Format::Letta | Format::Csv => None,
        };
        match (self.format, doc) {
            (Format::AgentHealth, _) => {
                self.indent = 2;
                self.prologue = "[".into();
                self.epilogue = "\n]\n".into();
            }
            (_, Some(doc)) => {
                let text = match self.syntax {
                    Syntax::Yaml => {
                        let mut s = String::new();
                        if let Value::Object(map) = &doc {
                            yaml_out::mapping(&mut s, map, 0);
                        }
                        s
                    }
                    _ => serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
                };
                let quoted =
                    if self.syntax == Syntax::Yaml { ITEMS_MARK.to_owned() } else { format!("\"{ITEMS_MARK}\"") };
                let at = text.find(&quoted).unwrap_or(text.len());
                let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let key_indent = text[line_start..].len() - text[line_start..].trim_start().len();
                if self.syntax == Syntax::Yaml {
                    self.indent = key_indent;
                    self.prologue = text[..at].trim_end().to_owned();
                    self.epilogue = text[(at + quoted.len()).min(text.len())..].trim_start_matches('\n').to_owned();
                } else {
                    self.indent = key_indent + 2;
                    self.prologue = text[..at].to_owned() + "[";
                    self.epilogue =
                        format!("\n{}]", " ".repeat(key_indent)) + &text[(at + quoted.len()).min(text.len())..];
                }
            }
            (_, None) => {}
        }
    }
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

fn maslab_document(
    header: &DatasetHeader,
    doc_layout: Option<&Map>,
    kept: Map,
    name_derived: bool,
    mark: Value,
) -> Value {
    let flat = layout::text(doc_layout, "shape") == Some("flat");
    let write_name = !(name_derived && doc_layout.is_some());
    let mut d = Map::new();
    if flat {
        if write_name {
            if let Some(n) = &header.name {
                d.insert("name".into(), json!(n));
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
        d.insert("items".into(), mark);
        return Value::Object(d);
    }
    let mut kept = kept;
    d.insert("apiVersion".into(), kept.remove("apiVersion").unwrap_or(json!("lab/v1")));
    d.insert("kind".into(), kept.remove("kind").unwrap_or(json!("Dataset")));
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
    kept.remove("metadata");
    d.insert("metadata".into(), Value::Object(meta));
    let mut spec = match kept.remove("spec") {
        Some(Value::Object(spec)) => spec,
        _ => Map::new(),
    };
    spec.insert("items".into(), mark);
    d.insert("spec".into(), Value::Object(spec));
    for (k, v) in kept {
        d.insert(k, v);
    }
    Value::Object(d)
}

/// Puts encoded batches into one file, in order.
pub struct Writer<'w> {
    out: Box<dyn Write + 'w>,
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
}

impl<'w> Writer<'w> {
    pub fn new(out: Box<dyn Write + 'w>, encoder: &Encoder, header: &DatasetHeader) -> Self {
        let single_object = header.provenance.as_ref().is_some_and(|p| {
            p.format.as_deref() == Some(Format::AgentHealth.name()) && layout::flag(Some(&p.layout), "single_object")
        });
        Self {
            out,
            header: header.clone(),
            format: encoder.format,
            syntax: encoder.syntax,
            columns: encoder.columns.clone(),
            prologue: encoder.prologue.clone(),
            epilogue: encoder.epilogue.clone(),
            single: (single_object && encoder.format == Format::AgentHealth).then(Vec::new),
            written: 0,
        }
    }

    pub fn begin(&mut self) -> io::Result<()> {
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
            self.out.write_all(self.prologue.as_bytes())?;
        }
        Ok(())
    }

    pub fn write(&mut self, encoded: &Encoded) -> io::Result<()> {
        let mut bytes = &encoded.bytes[..];
        if encoded.written > 0 && self.written == 0 && bytes.first() == Some(&b',') {
            bytes = &bytes[1..];
        }
        if encoded.written > 0 && self.written == 0 && self.syntax == Syntax::Yaml {
            self.out.write_all(b"\n")?;
        }
        self.written += encoded.written as u64;
        match &mut self.single {
            Some(buf) => {
                buf.extend_from_slice(bytes);
                Ok(())
            }
            None => self.out.write_all(bytes),
        }
    }

    /// Ends the file. `header` is the dataset header as it was at the end of the input, when it
    /// had more to say than at the start (keys after the list of cases in a long document).
    /// Returns `false` when that could not be written: the header went before the cases.
    pub fn finish(mut self, header: Option<&DatasetHeader>) -> io::Result<bool> {
        let mut kept = true;
        let native_jsonl = self.format == Format::Casebook && self.syntax == Syntax::Jsonl;
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
            if self.written == 0 && self.syntax == Syntax::Yaml && !self.prologue.is_empty() {
                // `items:` with nothing under it would read as null.
                self.out.write_all(b" []\n")?;
            }
            self.out.write_all(self.epilogue.as_bytes())?;
        }
        self.out.flush()?;
        Ok(kept)
    }
}
