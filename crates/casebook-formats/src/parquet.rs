//! casebook's cases as a Parquet table: one row per case, a column per field.
//!
//! Text fields (`id`, `name`, `description`, `session_id`, `review`) are `STRING` columns,
//! `labels` a list of strings and `confidence` a `DOUBLE`. An input that is text goes in
//! `input`; any other input (a list of messages, an object) goes in `input_json` as JSON text,
//! so a plain prompt reads as a plain string in pandas and nothing is ambiguous on the way back.
//! The nested fields (`turns`, `context`, `tools`, `memory_seeds`, `agent_args`, `expected`,
//! `metadata`, `provenance`) are JSON text rather than Arrow structs: their shapes differ from
//! case to case (a `metadata` key that is a number in one case and a list in the next), and one
//! struct type for a whole column would have to refuse such a dataset or drop what does not fit.
//! The dataset header goes in the file's key-value metadata under `casebook.dataset`.
//!
//! Writing is a [`ParquetSink`] fed the native JSONL encoding of the cases, a row group at a
//! time (memory bounded by the row group); reading turns the table back into native JSONL, one
//! line per row, which the native reader then checks (see `read.rs`).

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::Arc;

use casebook_model::{Code, Diagnostic};
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::record::Field;
use parquet::schema::parser::parse_message_type;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::tabular::ColumnMap;

/// The first (and last) bytes of every Parquet file.
pub const MAGIC: &[u8] = b"PAR1";
/// The key of the dataset header in the file's key-value metadata.
const HEADER_KEY: &str = "casebook.dataset";
/// Rows buffered before they are written as a row group.
const GROUP_ROWS: usize = 64 * 1024;
/// Bytes of text buffered before a row group is written, whatever the number of rows.
const GROUP_BYTES: usize = 64 << 20;

/// The table's columns, in order.
const SCHEMA: &str = "
message casebook_case {
  required binary id (STRING);
  optional binary name (STRING);
  optional binary description (STRING);
  optional group labels (LIST) {
    repeated group list {
      required binary element (STRING);
    }
  }
  optional binary input (STRING);
  optional binary input_json (STRING);
  optional binary turns (STRING);
  optional binary context (STRING);
  optional binary tools (STRING);
  optional binary memory_seeds (STRING);
  optional binary session_id (STRING);
  optional binary agent_args (STRING);
  optional binary expected (STRING);
  optional binary metadata (STRING);
  optional double confidence;
  optional binary review (STRING);
  optional binary provenance (STRING);
}
";

/// Every column's name, in schema order.
/// The place of `confidence`, the one number column, among the schema's columns.
const CONFIDENCE: usize = 14;

/// One native JSONL line: a case, or the dataset header record.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    #[serde(rename = "$dataset", borrow, default)]
    dataset: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    description: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    labels: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    turns: Option<&'a RawValue>,
    #[serde(borrow, default)]
    context: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tools: Option<&'a RawValue>,
    #[serde(borrow, default)]
    memory_seeds: Option<&'a RawValue>,
    #[serde(borrow, default)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    agent_args: Option<&'a RawValue>,
    #[serde(borrow, default)]
    expected: Option<&'a RawValue>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
    #[serde(default)]
    confidence: Option<f64>,
    #[serde(borrow, default)]
    review: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    provenance: Option<&'a RawValue>,
}

/// The rows of the row group being gathered, column by column.
#[derive(Default)]
struct Columns {
    rows: usize,
    bytes: usize,
    id: Vec<ByteArray>,
    name: Vec<Option<ByteArray>>,
    description: Vec<Option<ByteArray>>,
    /// Label values, with their definition and repetition levels.
    labels: (Vec<ByteArray>, Vec<i16>, Vec<i16>),
    input: Vec<Option<ByteArray>>,
    input_json: Vec<Option<ByteArray>>,
    /// The columns from `turns` to `provenance`, in order; `confidence`'s place is unused (it
    /// is a number, kept apart).
    fields: [Vec<Option<ByteArray>>; 11],
    confidence: Vec<Option<f64>>,
}

impl Columns {
    fn bytes(&mut self, text: &[u8]) -> ByteArray {
        self.bytes += text.len();
        ByteArray::from(text.to_vec())
    }

    fn text(&mut self, text: Option<&str>) -> Option<ByteArray> {
        text.map(|t| self.bytes(t.as_bytes()))
    }

    fn json(&mut self, raw: Option<&RawValue>) -> Option<ByteArray> {
        raw.filter(|r| r.get() != "null").map(|r| self.bytes(r.get().as_bytes()))
    }

    fn push(&mut self, line: Line<'_>) -> io::Result<()> {
        let Some(id) = line.id.as_deref() else {
            return Err(io::Error::other("a case without an id cannot be written to Parquet"));
        };
        let id = self.bytes(id.as_bytes());
        self.id.push(id);
        let name = self.text(line.name.as_deref());
        self.name.push(name);
        let description = self.text(line.description.as_deref());
        self.description.push(description);
        match &line.labels {
            None => {
                self.labels.1.push(0);
                self.labels.2.push(0);
            }
            Some(labels) if labels.is_empty() => {
                self.labels.1.push(1);
                self.labels.2.push(0);
            }
            Some(labels) => {
                for (i, label) in labels.iter().enumerate() {
                    let value = self.bytes(label.as_bytes());
                    self.labels.0.push(value);
                    self.labels.1.push(2);
                    self.labels.2.push(i16::from(i > 0));
                }
            }
        }
        // Text in `input`, anything else as JSON in `input_json`.
        let (text, json) = match line.input {
            Some(raw) if raw.get().starts_with('"') => {
                let text: Cow<'_, str> = serde_json::from_str(raw.get()).map_err(io::Error::other)?;
                (Some(self.bytes(text.as_bytes())), None)
            }
            other => (None, self.json(other)),
        };
        self.input.push(text);
        self.input_json.push(json);
        let values = [
            self.json(line.turns),
            self.json(line.context),
            self.json(line.tools),
            self.json(line.memory_seeds),
            self.text(line.session_id.as_deref()),
            self.json(line.agent_args),
            self.json(line.expected),
            self.json(line.metadata),
            None,
            self.text(line.review.as_deref()),
            self.json(line.provenance),
        ];
        for (column, value) in self.fields.iter_mut().zip(values) {
            column.push(value);
        }
        self.confidence.push(line.confidence);
        self.rows += 1;
        Ok(())
    }
}

/// Definition levels and the values present, for an optional column.
fn optional<T: Clone>(column: &[Option<T>]) -> (Vec<T>, Vec<i16>) {
    let levels = column.iter().map(|v| i16::from(v.is_some())).collect();
    (column.iter().flatten().cloned().collect(), levels)
}

fn parquet_error(e: parquet::errors::ParquetError) -> io::Error {
    io::Error::other(format!("cannot write Parquet: {e}"))
}

/// Takes the native JSONL encoding of a dataset and writes it as a Parquet table to the writer
/// it wraps; [`ParquetSink::close`] writes the footer.
pub struct ParquetSink<'w> {
    writer: SerializedFileWriter<Box<dyn Write + Send + 'w>>,
    /// The end of the text written so far that is not yet a whole line.
    partial: Vec<u8>,
    columns: Columns,
    header: Option<String>,
}

impl<'w> ParquetSink<'w> {
    pub fn new(out: Box<dyn Write + Send + 'w>) -> io::Result<Self> {
        let schema = Arc::new(parse_message_type(SCHEMA).map_err(parquet_error)?);
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("casebook {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = SerializedFileWriter::new(out, schema, Arc::new(props)).map_err(parquet_error)?;
        Ok(Self { writer, partial: Vec::new(), columns: Columns::default(), header: None })
    }

    fn line(&mut self, text: &[u8]) -> io::Result<()> {
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let line: Line<'_> = serde_json::from_slice(text).map_err(io::Error::other)?;
        if let Some(header) = line.dataset {
            self.header = Some(header.get().to_owned());
            return Ok(());
        }
        self.columns.push(line)?;
        if self.columns.rows >= GROUP_ROWS || self.columns.bytes >= GROUP_BYTES {
            self.flush_group()?;
        }
        Ok(())
    }

    fn flush_group(&mut self) -> io::Result<()> {
        let columns = std::mem::take(&mut self.columns);
        if columns.rows == 0 {
            return Ok(());
        }
        let mut group = self.writer.next_row_group().map_err(parquet_error)?;
        let mut texts = vec![(columns.name, 1), (columns.description, 1)].into_iter();
        let mut rest = [columns.input, columns.input_json].into_iter().chain(columns.fields);
        let mut index = 0;
        while let Some(mut column) = group.next_column().map_err(parquet_error)? {
            let written = match index {
                0 => column.typed::<ByteArrayType>().write_batch(&columns.id, None, None),
                1 | 2 => {
                    let (values, _) = texts.next().expect("two text columns");
                    let (present, levels) = optional(&values);
                    column.typed::<ByteArrayType>().write_batch(&present, Some(&levels), None)
                }
                3 => {
                    let (values, defs, reps) = &columns.labels;
                    column.typed::<ByteArrayType>().write_batch(values, Some(defs), Some(reps))
                }
                // `confidence`, the only number column, sits between `metadata` and `review`.
                CONFIDENCE => {
                    let _unused = rest.next();
                    let (present, levels) = optional(&columns.confidence);
                    column.typed::<DoubleType>().write_batch(&present, Some(&levels), None)
                }
                _ => {
                    let values = rest.next().expect("a column for each field");
                    let (present, levels) = optional(&values);
                    column.typed::<ByteArrayType>().write_batch(&present, Some(&levels), None)
                }
            };
            written.map_err(parquet_error)?;
            column.close().map_err(parquet_error)?;
            index += 1;
        }
        group.close().map_err(parquet_error)?;
        Ok(())
    }

    /// Writes what is left, the header and the footer.
    pub fn close(mut self) -> io::Result<()> {
        let partial = std::mem::take(&mut self.partial);
        self.line(&partial)?;
        self.flush_group()?;
        if let Some(header) = self.header.take() {
            self.writer.append_key_value_metadata(KeyValue::new(HEADER_KEY.to_owned(), header));
        }
        let mut out = self.writer.into_inner().map_err(parquet_error)?;
        out.flush()
    }
}

impl Write for ParquetSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            if self.partial.is_empty() {
                self.line(&rest[..end])?;
            } else {
                self.partial.extend_from_slice(&rest[..end]);
                let line = std::mem::take(&mut self.partial);
                self.line(&line)?;
            }
            rest = &rest[end + 1..];
        }
        self.partial.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A Parquet table turned back into native JSONL: the header record first when the table has
/// one, then a line a row (a row that could not be read is an empty line, with a diagnostic).
pub struct Converted {
    /// Lines before the first row: 1 with a header record, else 0.
    pub header_lines: u64,
    pub diagnostics: Vec<Diagnostic>,
}

/// A problem in column `column` of the row on line `line` of the JSONL a Parquet file is turned
/// into (the reader says which row that is).
fn row_diagnostic(
    file: &str,
    line: u64,
    column: &str,
    code: Code,
    message: String,
    hint: Option<String>,
) -> Diagnostic {
    Diagnostic {
        severity: code.severity(),
        code,
        message,
        file: file.to_owned(),
        line,
        column: 0,
        pointer: Some(if column.is_empty() { String::new() } else { format!("/{column}") }),
        path: None,
        hint,
        case: None,
        line_offset: None,
    }
}

/// Reads the Parquet file `file` (shown as `display`) into native JSONL on `out`: casebook's own
/// columns, or with `map` (`--map`, as for a CSV file) any table's, each column to the case path
/// the map gives it and the others to `metadata.<column>`.
pub fn to_jsonl(
    file: std::fs::File,
    display: &str,
    map: Option<&ColumnMap>,
    out: &mut dyn Write,
) -> io::Result<Converted> {
    let reader = SerializedFileReader::new(file).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{display}` is not a Parquet file casebook can read: {}",
                e.to_string().trim_start_matches("Parquet error: ")
            ),
        )
    })?;
    let header = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == HEADER_KEY))
        .and_then(|k| k.value.clone());
    let mut converted = Converted { header_lines: u64::from(header.is_some()), diagnostics: Vec::new() };
    if let Some(header) = header {
        writeln!(out, "{{\"{}\":{header}}}", crate::native::HEADER_KEY)?;
    }
    let known = |name: &str| name == "input_json" || casebook_model::CASE_FIELDS.contains(&name);
    let fields = reader.metadata().file_metadata().schema_descr().root_schema().get_fields().to_vec();
    if let Some(map) = map {
        let names: Vec<&str> = fields.iter().map(|f| f.name()).filter(|n| !n.starts_with("__")).collect();
        for (target, column) in &map.entries {
            if !names.contains(&column.as_str()) {
                // A few columns, each cut short: the table is the user's, of any width.
                const SHOWN: usize = 8;
                let mut shown: Vec<String> =
                    names.iter().take(SHOWN).map(|c| format!("`{}`", casebook_model::excerpt(c))).collect();
                if names.len() > SHOWN {
                    shown.push(format!("… ({} columns)", names.len()));
                }
                converted.diagnostics.push(row_diagnostic(
                    display,
                    0,
                    "",
                    Code::MissingField,
                    format!("`--map {target}={column}` names column `{column}`, which the table does not have"),
                    Some(format!("the table's columns: {}", shown.join(", "))),
                ));
            }
        }
        if !converted.diagnostics.is_empty() {
            return Ok(converted);
        }
    }
    for field in fields.iter().filter(|_| map.is_none()) {
        let name = field.name();
        // pandas keeps its index as `__index_level_0__`: not data.
        if !known(name) && !name.starts_with("__") {
            converted.diagnostics.push(row_diagnostic(
                display,
                0,
                name,
                Code::UnknownField,
                format!("column `{name}` is not a field of casebook's cases: it was not read"),
                Some("casebook's Parquet columns are the fields of its cases (`id`, `input`, `input_json`, `expected`, `metadata`, …); put other values in `metadata`".into()),
            ));
        }
    }
    let rows = reader.get_row_iter(None).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let mut line = String::new();
    for (number, row) in (1..).zip(rows) {
        let row = row.map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("`{display}`: row {number} cannot be read: {e}"))
        })?;
        line.clear();
        let made = match map {
            Some(map) => mapped_line(&row, map, &mut line),
            None => row_line(&row, &mut line),
        };
        match made {
            Ok(()) => out.write_all(line.as_bytes())?,
            Err((column, message)) => converted.diagnostics.push(row_diagnostic(
                display,
                number + converted.header_lines,
                &column,
                Code::WrongType,
                message,
                Some("columns `input_json` and the nested fields hold JSON text; the others text, `labels` a list of text and `confidence` a number".into()),
            )),
        }
        out.write_all(b"\n")?;
    }
    Ok(converted)
}

/// The native JSON of one row, or the column that could not be read and why.
fn row_line(row: &parquet::record::Row, line: &mut String) -> Result<(), (String, String)> {
    use std::fmt::Write as _;
    line.push('{');
    let mut first = true;
    let mut key = |line: &mut String, name: &str| {
        if !first {
            line.push(',');
        }
        first = false;
        line.push_str(&serde_json::to_string(name).unwrap_or_default());
        line.push(':');
    };
    for (name, value) in row.get_column_iter() {
        let name = name.as_str();
        if matches!(value, Field::Null) || name.starts_with("__") {
            continue;
        }
        let wrong = |what: &str| (name.to_owned(), format!("column `{name}` holds {what}: {}", describe(value)));
        match name {
            "labels" => {
                let Field::ListInternal(list) = value else { return Err(wrong("a list of text")) };
                let mut labels = Vec::new();
                for element in list.elements() {
                    match element {
                        Field::Str(s) => labels.push(s.as_str()),
                        _ => return Err(wrong("a list of text")),
                    }
                }
                key(line, name);
                line.push_str(&serde_json::to_string(&labels).unwrap_or_default());
            }
            "confidence" => {
                let number = match value {
                    Field::Double(d) => *d,
                    Field::Float(f) => f64::from(*f),
                    Field::Int(i) => f64::from(*i),
                    Field::Long(l) => *l as f64,
                    _ => return Err(wrong("a number")),
                };
                key(line, name);
                let _ = write!(line, "{}", serde_json::Value::from(number));
            }
            "id" | "name" | "description" | "input" | "session_id" | "review" => {
                let text = match value {
                    Field::Str(s) => Cow::Borrowed(s.as_str()),
                    // Ids written by other tools as numbers read as their text.
                    Field::Int(i) if name == "id" => Cow::Owned(i.to_string()),
                    Field::Long(l) if name == "id" => Cow::Owned(l.to_string()),
                    _ => return Err(wrong("text")),
                };
                key(line, name);
                line.push_str(&serde_json::to_string(&text).unwrap_or_default());
            }
            "input_json" | "turns" | "context" | "tools" | "memory_seeds" | "agent_args" | "expected" | "metadata"
            | "provenance" => {
                let Field::Str(text) = value else { return Err(wrong("JSON text")) };
                if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
                    return Err((name.to_owned(), format!("column `{name}` is not JSON: {e}")));
                }
                key(line, if name == "input_json" { "input" } else { name });
                line.push_str(text.trim());
            }
            _ => {}
        }
    }
    line.push('}');
    Ok(())
}

/// The native JSON of one row of a table read with a column map (see `tabular::mapped_record`,
/// its CSV counterpart): text stays text, a list of text in a `labels` column is the labels (a
/// cell of text is split at commas and semicolons), the fields that hold JSON take JSON text,
/// and lists, structs and maps are JSON arrays and objects (a list of `{role, content}` structs
/// is a conversation).
fn mapped_line(row: &parquet::record::Row, map: &ColumnMap, line: &mut String) -> Result<(), (String, String)> {
    use serde_json::{Map, Value};
    let (mut top, mut expected, mut metadata) = (Map::new(), Map::new(), Map::new());
    for (name, value) in row.get_column_iter() {
        let name = name.as_str();
        if matches!(value, Field::Null) || name.starts_with("__") {
            continue;
        }
        let target = map.target_of(name).map_or_else(|| format!("metadata.{name}"), str::to_owned);
        let wrong = |what: &str| {
            (name.to_owned(), format!("column `{name}`, read as `{target}`, holds {what}: {}", describe(value)))
        };
        let json = match target.as_str() {
            "agent_args" | "expected.rubric_vars" | "expected.acceptable" | "expected.outcomes" => match value {
                Field::Str(text) => serde_json::from_str(text)
                    .map_err(|e| (name.to_owned(), format!("column `{name}`, read as `{target}`, is not JSON: {e}")))?,
                other => field_json(other),
            },
            "labels" => match value {
                Field::Str(text) if text.trim_start().starts_with('[') => serde_json::from_str(text)
                    .map_err(|e| (name.to_owned(), format!("column `{name}`, read as `labels`, is not JSON: {e}")))?,
                Field::Str(text) => Value::Array(
                    text.split([',', ';'])
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(|s| Value::String(s.to_owned()))
                        .collect(),
                ),
                Field::ListInternal(_) => field_json(value),
                _ => return Err(wrong("neither text nor a list")),
            },
            "confidence" => match field_json(value) {
                number @ Value::Number(_) => number,
                _ => return Err(wrong("no number")),
            },
            // Ids written by other tools as numbers read as their text.
            "id" => match value {
                Field::Str(text) => Value::String(text.clone()),
                Field::Byte(_) | Field::Short(_) | Field::Int(_) | Field::Long(_) => {
                    Value::String(field_json(value).to_string())
                }
                Field::UByte(_) | Field::UShort(_) | Field::UInt(_) | Field::ULong(_) => {
                    Value::String(field_json(value).to_string())
                }
                _ => return Err(wrong("neither text nor a whole number")),
            },
            _ => field_json(value),
        };
        if let Some(key) = target.strip_prefix("expected.") {
            expected.insert(key.to_owned(), json);
        } else if let Some(key) = target.strip_prefix("metadata.") {
            metadata.insert(key.to_owned(), json);
        } else {
            top.insert(target, json);
        }
    }
    if !expected.is_empty() {
        top.insert("expected".into(), Value::Object(expected));
    }
    if !metadata.is_empty() {
        top.insert("metadata".into(), Value::Object(metadata));
    }
    line.push_str(&Value::Object(top).to_string());
    Ok(())
}

/// A Parquet value as JSON: lists as arrays, structs and maps as objects (a map's keys as their
/// text), binary data as lossy UTF-8 text, times and decimals as the text the crate prints.
fn field_json(value: &Field) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Field::Null => Value::Null,
        Field::Bool(b) => Value::Bool(*b),
        Field::Byte(n) => Value::from(*n),
        Field::Short(n) => Value::from(*n),
        Field::Int(n) => Value::from(*n),
        Field::Long(n) => Value::from(*n),
        Field::UByte(n) => Value::from(*n),
        Field::UShort(n) => Value::from(*n),
        Field::UInt(n) => Value::from(*n),
        Field::ULong(n) => Value::from(*n),
        Field::Float(x) => Value::from(f64::from(*x)),
        Field::Double(x) => Value::from(*x),
        Field::Str(text) => Value::String(text.clone()),
        Field::Bytes(bytes) => Value::String(String::from_utf8_lossy(bytes.data()).into_owned()),
        Field::ListInternal(list) => Value::Array(list.elements().iter().map(field_json).collect()),
        Field::Group(group) => {
            Value::Object(group.get_column_iter().map(|(k, v)| (k.clone(), field_json(v))).collect())
        }
        Field::MapInternal(entries) => Value::Object(
            entries
                .entries()
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Field::Str(text) => text.clone(),
                        other => other.to_string(),
                    };
                    (key, field_json(v))
                })
                .collect(),
        ),
        other => Value::String(other.to_string()),
    }
}

/// What a value of another type is, for a message.
fn describe(value: &Field) -> String {
    let kind = match value {
        Field::Bool(_) => "a boolean",
        Field::Str(_) => "text",
        Field::Bytes(_) => "binary data",
        Field::ListInternal(_) => "a list",
        Field::MapInternal(_) => "a map",
        Field::Group(_) => "a struct",
        Field::Float(_) | Field::Double(_) | Field::Float16(_) | Field::Decimal(_) => "a number",
        _ => "another type",
    };
    format!("this row's value is {kind}")
}
