//! Reading any dataset file as a stream of case batches. Line-based files (JSONL, CSV) are cut
//! into chunks at record boundaries and parsed on several threads; the batches come back to the
//! caller in file order, so results never depend on the thread count. Whole-document files
//! (JSON, YAML) are parsed in one piece. Duplicate ids are checked here, in file order, keeping
//! 16 bytes a case (a 64-bit hash of the id and the line it was first seen on), and ids made for
//! rows without one are made unique (16 bytes more for each such row: a hash of its content).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use casebook_model::{Case, Code, DatasetHeader, Diagnostic, excerpt};

use crate::format::{Format, Syntax, sniff_csv_header, sniff_document, sniff_jsonl_row, sniff_list_item, sniff_syntax};
use crate::ids::IdTable;
use crate::pointer::Ptr;
use crate::source::{Cx, FileCache, Source};
use crate::tabular::{self, ColumnMap};
use crate::{csvtext, documents, inspect, json, letta, native, openai_evals, promptfoo, yaml};

/// Size of the chunks line-based files are cut into: small enough that the batches in flight
/// stay well inside the memory bound, big enough that per-chunk costs vanish.
const CHUNK: usize = 3 << 16;
/// Cases per batch for whole-document files.
const DOC_BATCH: usize = 4096;

/// A dataset file, or standard input.
#[derive(Debug, Clone)]
pub struct Input {
    pub path: Option<PathBuf>,
    /// The name diagnostics use for it (the path, unless the caller shows it as another name);
    /// a dataset that names itself nowhere takes its stem as its name.
    pub display: String,
}

impl Input {
    pub fn path(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Self { display: path.display().to_string(), path: Some(path) }
    }

    pub fn stdin() -> Self {
        Self { path: None, display: "<stdin>".into() }
    }

    /// The name of a dataset whose file names none: the stem of the name the file is shown by
    /// (so a temporary copy shown as the original is named as the original).
    fn stem(&self) -> String {
        self.path
            .as_ref()
            .and_then(|_| Path::new(&self.display).file_stem())
            .map_or_else(|| "stdin".into(), |s| s.to_string_lossy().into_owned())
    }
}

#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// The format, when not detected.
    pub format: Option<Format>,
    /// The syntax, when the file name does not say it.
    pub syntax: Option<Syntax>,
    /// Worker threads for line-based files; 0 means one per core.
    pub threads: usize,
    /// Column map for the generic `csv` format.
    pub column_map: Option<ColumnMap>,
    /// Size from which JSON and YAML documents are read as they are parsed (default 16 MiB).
    pub stream_from: Option<usize>,
}

/// What is known once reading has started.
#[derive(Debug, Clone)]
pub struct Start {
    pub format: Format,
    pub syntax: Syntax,
    pub header: DatasetHeader,
}

/// Where something is in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Loc {
    pub line: u64,
    pub column: u64,
    pub line_offset: u64,
}

/// Consecutive cases of a file, with the problems found in that stretch of it.
#[derive(Debug, Default)]
pub struct Batch {
    pub cases: Vec<Case>,
    /// Where each case's id is (or the case, when it has none).
    pub locs: Vec<Loc>,
    pub diagnostics: Vec<Diagnostic>,
    /// Bytes of the file read up to the end of this batch (0 for whole-document files).
    pub end_offset: u64,
    /// Hashes of the case ids, computed on the worker.
    keys: Vec<u64>,
    /// For the cases whose ids were made up, a hash of the rest of the case
    /// ([`crate::layout::rest_key`]), computed on the worker.
    rests: Vec<Option<u64>>,
    /// A header record met after the first line (native JSONL).
    header: Option<DatasetHeader>,
    /// The file the cases come from, when it is not the input (a mas-lab manifest's items file).
    pub file: Option<String>,
}

impl Batch {
    fn hash_ids(&mut self) {
        self.keys = self.cases.iter().map(|c| id_key(&c.id)).collect();
        let mut buf = Vec::new();
        self.rests = self.cases.iter().map(|c| id_made(c).then(|| crate::layout::rest_key(c, &mut buf))).collect();
    }
}

/// Whether to go on reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// The receiving end of [`read`].
pub trait Consumer<W> {
    fn start(&mut self, start: &Start) -> Flow;
    /// Called in file order with each batch and what `work` made of it on a worker thread.
    /// Both are dropped on a worker thread afterwards, off the ordered path.
    fn batch(&mut self, batch: &mut Batch, work: &mut W) -> Flow;
    /// The dataset header as the end of the file left it, when the file had more header after
    /// its cases than before them (YAML documents are read as they go).
    fn header(&mut self, _header: &DatasetHeader) {}
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub cases: u64,
    pub errors: u64,
    pub warnings: u64,
    pub bytes: u64,
    /// Reading stopped early because the consumer asked.
    pub stopped: bool,
    /// Cases whose rows had no id, named from their content.
    pub derived_ids: u64,
    /// Of those, the ones named by their place: rows wholly identical to an earlier one, told
    /// apart by their place only (`-2`, `-3`, …), and Inspect samples without an id (`1`, `2`, …,
    /// as Inspect numbers them).
    pub positional_ids: u64,
}

impl Summary {
    /// What to tell the user about the ids made for rows that had none: `1204 cases had no id:
    /// ids derived from their content; 6 of them are identical to another row and numbered by
    /// position` (`None` when every row had one).
    pub fn derived_ids_note(&self) -> Option<String> {
        // Every one numbered by position: Inspect's ids (1, 2, … by place in the file).
        if self.derived_ids > 0 && self.positional_ids == self.derived_ids {
            return Some(match self.derived_ids {
                1 => "1 case had no id: it is named by its place in the file".to_owned(),
                n => format!("{n} cases had no id: each is named by its place in the file"),
            });
        }
        let mut note = match self.derived_ids {
            0 => return None,
            1 => "1 case had no id: its id is derived from its content".to_owned(),
            n => format!("{n} cases had no id: ids derived from their content"),
        };
        match self.positional_ids {
            0 => {}
            1 => note.push_str("; 1 of them is identical to another row and numbered by position"),
            n => note.push_str(&format!("; {n} of them are identical to another row and numbered by position")),
        }
        Some(note)
    }
}

/// Problems with the environment rather than with the file's content.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Usage(String),
}

/// Reads `input`, calling `work` on worker threads and `consumer` in file order.
pub fn read<W: Send>(
    input: &Input,
    opts: &ReadOptions,
    work: &(dyn Fn(&Batch) -> W + Sync),
    consumer: &mut dyn Consumer<W>,
) -> Result<Summary, ReadError> {
    read_with(input, opts, work, consumer, Vec::new())
}

/// [`read`], with problems already found (`pending`) reported before the file's own.
fn read_with<W: Send>(
    input: &Input,
    opts: &ReadOptions,
    work: &(dyn Fn(&Batch) -> W + Sync),
    consumer: &mut dyn Consumer<W>,
    pending: Vec<Diagnostic>,
) -> Result<Summary, ReadError> {
    let mut reader: Box<dyn Read + Send> = match &input.path {
        Some(path) => Box::new(fs_err::File::open(path)?),
        None => Box::new(std::io::stdin()),
    };
    let mut head = Vec::with_capacity(64 * 1024);
    (&mut reader).take(64 * 1024).read_to_end(&mut head)?;
    let bom = head.starts_with(b"\xEF\xBB\xBF");
    let syntax = opts
        .syntax
        .or_else(|| input.path.as_deref().and_then(Syntax::from_path))
        .unwrap_or_else(|| if head.starts_with(crate::parquet::MAGIC) { Syntax::Parquet } else { sniff_syntax(&head) });
    if syntax == Syntax::Parquet {
        return read_parquet(input, opts, reader, head, work, consumer);
    }
    let mut state = State::new(input, consumer, work);
    state.pending = pending;
    if bom {
        head.drain(..3);
        let src = Source::new(&input.display, "", 1, 0);
        let mut d = src.diagnostic(Code::Bom, 0, String::new(), "file starts with a UTF-8 byte order mark".into());
        d.hint = Some(
            "casebook skips it; letta-evals and `json.loads` fail on it: save the file as UTF-8 without BOM".into(),
        );
        state.pending.push(d);
    }
    let base = if bom { 3 } else { 0 };
    match syntax {
        Syntax::Jsonl => {
            let format = match opts.format {
                Some(
                    f @ (Format::Letta | Format::Casebook | Format::OpenaiEvals | Format::Inspect | Format::Promptfoo),
                ) => f,
                Some(other) => return Err(incompatible(other, syntax)),
                None => first_row_format(&head),
            };
            let mut header = line_header(input, format);
            let mut header_line = None;
            if format == Format::Casebook {
                if let Some((line, h)) = native_jsonl_header(&mut state, input, &head, base) {
                    header = h;
                    header_line = Some(line);
                }
            }
            if state.start(Start { format, syntax, header }) == Flow::Stop {
                return Ok(state.finish());
            }
            let base_dir = input.path.as_deref().and_then(Path::parent);
            // Rows that name one seed or snapshot file share its document.
            let files = FileCache::default();
            let beside = Beside { base_dir, files: &files };
            let worker = |chunk: &Chunk| jsonl_chunk(chunk, &input.display, format, beside, header_line);
            stream(&mut state, reader, head, base, 1, opts.threads, &split_lines, &worker)?;
        }
        Syntax::Csv => {
            let format = match (opts.format, &opts.column_map) {
                (Some(f @ (Format::Letta | Format::Inspect | Format::Promptfoo)), _) => Some(f),
                (Some(Format::Csv), Some(_)) | (None, Some(_)) => Some(Format::Csv),
                (Some(Format::Csv), None) => {
                    return Err(ReadError::Usage(
                        "the `csv` format needs a column map: `--map input=COLUMN,...`".into(),
                    ));
                }
                (Some(other), _) => return Err(incompatible(other, syntax)),
                // Told from the header, once it is read.
                (None, None) => None,
            };
            // The header record, which may be longer than the head we have.
            let valid = |head: &[u8]| match utf8(head) {
                Ok(t) => t.len(),
                Err(e) => e.valid_up_to(),
            };
            let mut header_len = csvtext::first_record_end(utf8(&head[..valid(&head)]).unwrap_or(""));
            while header_len.is_none() {
                let before = head.len();
                (&mut reader).take(CHUNK as u64).read_to_end(&mut head)?;
                let text = utf8(&head[..valid(&head)]).unwrap_or("");
                header_len = csvtext::first_record_end(text);
                if head.len() == before {
                    header_len = Some(head.len());
                }
            }
            let header_len = header_len.unwrap_or(head.len());
            let header_text = match utf8(&head[..header_len]) {
                Ok(t) => t.to_owned(),
                Err(e) => {
                    let src = Source::new(&input.display, "", 1, base as u64);
                    let d = src.diagnostic(
                        Code::InvalidUtf8,
                        0,
                        String::new(),
                        format!("invalid UTF-8 in the CSV header at byte {}", e.valid_up_to()),
                    );
                    state.pending.push(d);
                    String::new()
                }
            };
            let columns: Vec<String> = match csvtext::records(&header_text).next() {
                Some(Ok((_, fields))) => fields.iter().map(|f| f.value(&header_text).trim().to_owned()).collect(),
                _ => Vec::new(),
            };
            let format = format.unwrap_or_else(|| sniff_csv_header(&columns));
            let needs_input = match format {
                Format::Letta => !columns.iter().any(|c| c == "input" || c == "prompt"),
                Format::Inspect => !columns.iter().any(|c| c == "input"),
                _ => false,
            };
            if needs_input && !columns.is_empty() {
                let src = Source::new(&input.display, &header_text, 1, base as u64);
                let mut d =
                    src.diagnostic(Code::MissingField, 0, String::new(), "the CSV header has no `input` column".into());
                // A few columns, each cut short: the header is the user's, of any size.
                const SHOWN: usize = 6;
                let mut shown: Vec<String> = columns.iter().take(SHOWN).map(|c| excerpt(c).into_owned()).collect();
                if columns.len() > SHOWN {
                    shown.push(format!("… ({} columns)", columns.len()));
                }
                d.hint = Some(format!(
                    "{} CSV needs an `input` column; for other spreadsheets use `--from csv --map input=COLUMN` (columns: {})",
                    format.name(),
                    shown.join(", ")
                ));
                state.pending.push(d);
                let _ = state.start(Start { format, syntax, header: line_header(input, format) });
                return Ok(state.finish());
            }
            let mut header = line_header(input, format);
            if let Some(p) = header.provenance.as_mut() {
                p.layout.insert("columns".into(), serde_json::json!(columns));
            }
            if state.start(Start { format, syntax, header }) == Flow::Stop {
                return Ok(state.finish());
            }
            let first_line = 1 + memchr::memchr_iter(b'\n', &head[..header_len]).count() as u64;
            let rest = head.split_off(header_len);
            let map = opts.column_map.clone();
            let worker = |chunk: &Chunk| csv_chunk(chunk, &input.display, format, &columns, map.as_ref());
            stream(
                &mut state,
                reader,
                rest,
                base + header_len,
                first_line,
                opts.threads,
                &|bytes: &[u8]| csvtext::complete_prefix_lines(bytes).map(|(end, lines)| (end, Some(lines))),
                &worker,
            )?;
        }
        // Parquet went to `read_parquet` above.
        Syntax::Parquet => unreachable!("a Parquet table is read by read_parquet"),
        Syntax::Json | Syntax::Yaml => {
            // Sized once: growing a 50 MB buffer by doubling would hold two copies at the peak.
            let size = input.path.as_deref().and_then(|p| fs_err::metadata(p).ok()).map_or(0, |m| m.len() as usize);
            let mut bytes = Vec::with_capacity(size + 1);
            bytes.extend_from_slice(&head);
            drop(head);
            reader.read_to_end(&mut bytes)?;
            document(&mut state, input, opts, syntax, &bytes, base)?;
        }
    }
    Ok(state.finish())
}

/// A Parquet table of cases, read as the native JSONL it is turned into (in a temporary
/// file): line N of it is row N of the table, so the native reader's diagnostics name the row.
fn read_parquet<W: Send>(
    input: &Input,
    opts: &ReadOptions,
    mut reader: Box<dyn Read + Send>,
    head: Vec<u8>,
    work: &(dyn Fn(&Batch) -> W + Sync),
    consumer: &mut dyn Consumer<W>,
) -> Result<Summary, ReadError> {
    if let Some(format) = opts.format.filter(|f| *f != Format::Casebook) {
        return Err(incompatible(format, Syntax::Parquet));
    }
    // Parquet is read from its end: standard input is kept in a temporary file first.
    let table = match &input.path {
        Some(path) => fs_err::File::open(path)?.into_parts().0,
        None => {
            let mut spool = tempfile::tempfile()?;
            std::io::Write::write_all(&mut spool, &head)?;
            std::io::copy(&mut reader, &mut spool)?;
            spool
        }
    };
    let mut jsonl = tempfile::NamedTempFile::new()?;
    let mut out = std::io::BufWriter::new(jsonl.as_file_mut());
    let (pending, shift) = match crate::parquet::to_jsonl(table, &input.display, opts.column_map.as_ref(), &mut out) {
        Ok(converted) => (converted.diagnostics, converted.header_lines),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            let mut d =
                Source::new(&input.display, "", 0, 0).diagnostic(Code::InvalidValue, 0, String::new(), e.to_string());
            (d.line, d.column, d.line_offset) = (0, 0, None);
            d.hint = Some(
                "casebook reads the Parquet files it writes (`--to parquet`): one row per case, a column per field"
                    .into(),
            );
            (vec![d], 0)
        }
        Err(e) => return Err(e.into()),
    };
    std::io::Write::flush(&mut out)?;
    drop(out);
    let rows = Input { path: Some(jsonl.path().to_owned()), display: input.display.clone() };
    let opts = ReadOptions { format: Some(Format::Casebook), syntax: Some(Syntax::Jsonl), ..opts.clone() };
    read_with(&rows, &opts, work, &mut Rows { inner: consumer, shift }, pending)
}

/// Hands what the native reader makes of a Parquet table's rows on, located by row (a
/// diagnostic's `line` is the row, and its message says so): a column within the JSON made of a
/// row would mean nothing to the user.
struct Rows<'c, W> {
    inner: &'c mut dyn Consumer<W>,
    /// Lines of the JSONL before its first row (its header record).
    shift: u64,
}

impl<W> Consumer<W> for Rows<'_, W> {
    fn start(&mut self, start: &Start) -> Flow {
        self.inner.start(&Start { syntax: Syntax::Parquet, ..start.clone() })
    }

    fn batch(&mut self, batch: &mut Batch, work: &mut W) -> Flow {
        let row = |line: u64| line.saturating_sub(self.shift);
        for d in &mut batch.diagnostics {
            (d.line, d.column, d.line_offset) = (row(d.line), 0, None);
            if d.line > 0 {
                d.message = format!("row {}: {}", d.line, d.message);
            }
        }
        for loc in &mut batch.locs {
            (loc.line, loc.column, loc.line_offset) = (row(loc.line), 0, 0);
        }
        self.inner.batch(batch, work)
    }

    fn header(&mut self, header: &DatasetHeader) {
        self.inner.header(header);
    }
}

fn incompatible(format: Format, syntax: Syntax) -> ReadError {
    let list = format.syntaxes().iter().map(|s| s.name()).collect::<Vec<_>>().join(", ");
    ReadError::Usage(format!("the `{format}` format is not written in {}; it uses: {list}", syntax.name()))
}

fn first_row_format(head: &[u8]) -> Format {
    let text = String::from_utf8_lossy(head);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    match json::parse(first) {
        Ok(node) => sniff_jsonl_row(&node),
        Err(_) => Format::Letta,
    }
}

fn line_header(input: &Input, format: Format) -> DatasetHeader {
    let mut layout = casebook_model::Map::new();
    layout.insert("name_derived".into(), serde_json::Value::Bool(true));
    DatasetHeader {
        name: Some(input.stem()),
        provenance: crate::layout::provenance(format.name(), false, layout),
        ..DatasetHeader::default()
    }
}

/// Ordered delivery, duplicate ids and counting, on the calling thread.
struct State<'c, W> {
    file: String,
    consumer: &'c mut dyn Consumer<W>,
    work: &'c (dyn Fn(&Batch) -> W + Sync),
    /// Diagnostics found before the first batch.
    pending: Vec<Diagnostic>,
    ids: IdTable,
    /// Cases checked so far: the next case's 0-based row.
    rows: u64,
    /// The contents (task and variant) of the cases whose ids were made up, by a 64-bit hash,
    /// with the line each was first seen on.
    contents: IdTable,
    /// For contents met more than once: the number the last copy was given.
    copies: HashMap<u64, u64>,
    summary: Summary,
    stopped: bool,
    needs_cases: bool,
    /// Rows without an id are named by their 1-based place, as Inspect names them (its eval
    /// numbers samples without an id 1..n in dataset order, and its logs use those ids).
    positional: bool,
    /// The input's size in bytes, when it is a file: with the first batch's bytes per case, it
    /// says how many ids to make room for at once.
    size: Option<u64>,
}

/// The most ids room is made for ahead (32 MiB of table); more grow the table as they come.
const IDS_RESERVED: usize = 1 << 21;

impl<'c, W> State<'c, W> {
    fn new(input: &Input, consumer: &'c mut dyn Consumer<W>, work: &'c (dyn Fn(&Batch) -> W + Sync)) -> Self {
        Self {
            file: input.display.clone(),
            consumer,
            work,
            pending: Vec::new(),
            ids: IdTable::default(),
            rows: 0,
            contents: IdTable::default(),
            copies: HashMap::new(),
            summary: Summary::default(),
            stopped: false,
            needs_cases: true,
            positional: false,
            size: input.path.as_deref().and_then(|p| fs_err::metadata(p).ok()).map(|m| m.len()),
        }
    }

    fn start(&mut self, start: Start) -> Flow {
        // Agent Health and casebook datasets may be empty (a warning); the others need cases.
        self.needs_cases = !matches!(start.format, Format::AgentHealth | Format::Casebook);
        self.positional = start.format == Format::Inspect;
        let flow = self.consumer.start(&start);
        if flow == Flow::Stop {
            self.stopped = true;
        }
        flow
    }

    /// Checks a batch, works on it here and hands it to the consumer (whole-document files,
    /// whose batches are made on this thread).
    fn deliver(&mut self, mut batch: Batch) -> Flow {
        if self.stopped {
            return Flow::Stop;
        }
        self.check(&mut batch);
        let mut work = (self.work)(&batch);
        self.hand(&mut batch, &mut work)
    }

    /// Checks ids in file order: ids made for rows without one are made unique, cases with a
    /// duplicate id are reported and dropped. Whatever `work` makes of the batch is made after
    /// this, so it sees the final ids.
    fn check(&mut self, batch: &mut Batch) {
        if self.rows == 0 && batch.end_offset > 0 {
            if let Some(size) = self.size {
                // The cases to come if the rows go on as they began.
                let expected = u128::from(size) * batch.cases.len() as u128 / u128::from(batch.end_offset);
                self.ids.reserve(usize::try_from(expected).unwrap_or(usize::MAX).min(IDS_RESERVED));
            }
        }
        let mut keep = vec![true; batch.cases.len()];
        for (i, case) in batch.cases.iter_mut().enumerate() {
            case.provenance.get_or_insert_with(Default::default).row = Some(self.rows);
            self.rows += 1;
            let loc = batch.locs[i];
            let line = u32::try_from(loc.line).unwrap_or(u32::MAX);
            let made = id_made(case);
            let mut key = batch.keys.get(i).copied().unwrap_or_else(|| id_key(&case.id));
            if made && self.positional {
                // Its place among the samples, counted from 1 (a sample with its own id counts
                // too, as in Inspect). An explicit id may already be that number: Inspect
                // refuses such a dataset, and so does the duplicate check below.
                self.summary.derived_ids += 1;
                self.summary.positional_ids += 1;
                case.id = self.rows.to_string();
                key = id_key(&case.id);
            }
            if made && !self.positional {
                let rest = batch
                    .rests
                    .get(i)
                    .copied()
                    .flatten()
                    .unwrap_or_else(|| crate::layout::rest_key(case, &mut Vec::new()));
                if let Some((id, id_key)) = self.made_id(case, key, rest, line) {
                    case.id = id;
                    key = id_key;
                }
            } else if let Some(first_line) = self.ids.get(key) {
                let (message, hint) = if made {
                    (
                        format!(
                            "this sample has no id, and Inspect names it by its place, `{}`: the id of the sample \
                             on line {first_line}",
                            case.id
                        ),
                        "Inspect refuses the duplicate too: give this sample an id of its own",
                    )
                } else {
                    (
                        format!("duplicate id `{}` (first used on line {first_line})", excerpt(&case.id)),
                        "ids must be unique within a dataset",
                    )
                };
                let mut d = Diagnostic {
                    severity: Code::DuplicateId.severity(),
                    code: Code::DuplicateId,
                    message,
                    file: batch.file.clone().unwrap_or_else(|| self.file.clone()),
                    line: loc.line,
                    column: loc.column,
                    pointer: Some(String::new()),
                    path: None,
                    hint: Some(hint.into()),
                    case: None,
                    line_offset: Some(loc.line_offset),
                };
                if !made {
                    d.pointer = Some("/id".into());
                }
                batch.diagnostics.push(d);
                keep[i] = false;
                continue;
            }
            self.ids.insert(key, line);
        }
        if keep.iter().any(|k| !k) {
            let mut it = keep.iter();
            batch.cases.retain(|_| *it.next().unwrap_or(&true));
            let mut it = keep.iter();
            batch.locs.retain(|_| *it.next().unwrap_or(&true));
            batch.diagnostics.sort_by_key(|d| (d.line, d.column));
        }
        batch.keys.clear();
        batch.rests.clear();
        if !self.pending.is_empty() {
            let mut pending = std::mem::take(&mut self.pending);
            pending.append(&mut batch.diagnostics);
            batch.diagnostics = pending;
        }
        self.count(batch);
    }

    /// The id of a case whose row had none, when it is not `base`, the id derived from its task
    /// (with its key). The first row of a task keeps `base`; a later one takes a suffix made from
    /// the rest of the case ([`casebook_canon::Variant`]); only a row wholly identical to an
    /// earlier one is numbered by its place (`-2`, `-3`, …).
    ///
    /// Why the first row keeps the plain id: a reader that streams cannot know whether a task
    /// comes again later, and most tasks do not, so most rows keep the id they always had and
    /// an edit of a row's answer leaves its id alone. Suffixing every row would rename a row
    /// whose expected answer changed (a removal and an addition instead of a change); suffixing
    /// every row of a repeated task needs the whole file first, and renames the first row when a
    /// second one is added. With this rule an edit moves at most two ids, never a run of them:
    /// adding a row of a known task adds one id (two when it goes before the task's first row,
    /// which then gives up the plain id); removing the first row of a task hands its plain id to
    /// the next row of that task (a change and a removal); changing the answer of a later row
    /// renames that row alone (its id is its content).
    fn made_id(&mut self, case: &Case, base_key: u64, rest: u64, line: u32) -> Option<(String, u64)> {
        self.summary.derived_ids += 1;
        // The task (by its id's key) and the rest make the content; the two are independent
        // hashes, so their exclusive or is a hash of the pair.
        let content = (base_key ^ rest).max(1);
        let first_of_content = self.contents.get(content).is_none();
        if first_of_content {
            self.contents.insert(content, line);
            // The first row of its task keeps the plain id, unless an explicit id has it. Only
            // later rows need the variant, so only they pay for its canonical form.
            self.ids.get(base_key)?;
        }
        let variant = crate::layout::derived_variant(case);
        let base = case.id.as_str();
        if first_of_content {
            let id = variant.id(base, 1);
            let key = id_key(&id);
            if self.ids.get(key).is_none() {
                return Some((id, key));
            }
            // Taken by an explicit id (or by another variant with the same 8 hex digits): this
            // row goes on as the copies do, so its id still never takes another's.
        }
        self.summary.positional_ids += 1;
        // Every number up to the last one given to this content is taken for good (ids are
        // never removed), so the search goes on from there instead of from 2.
        let mut n = self.copies.get(&content).copied().unwrap_or(1);
        loop {
            n += 1;
            let id = variant.id(base, n);
            let key = id_key(&id);
            if self.ids.get(key).is_none() {
                self.copies.insert(content, n);
                return Some((id, key));
            }
        }
    }

    /// Hands a checked batch and what `work` made of it to the consumer.
    fn hand(&mut self, batch: &mut Batch, work: &mut W) -> Flow {
        if self.stopped {
            return Flow::Stop;
        }
        if let Some(header) = batch.header.take() {
            self.consumer.header(&header);
        }
        let flow = self.consumer.batch(batch, work);
        if flow == Flow::Stop {
            self.stopped = true;
        }
        flow
    }

    fn count(&mut self, batch: &Batch) {
        self.summary.cases += batch.cases.len() as u64;
        for d in &batch.diagnostics {
            if d.is_error() {
                self.summary.errors += 1;
            } else {
                self.summary.warnings += 1;
            }
        }
    }

    fn finish(mut self) -> Summary {
        if !self.stopped {
            let mut tail = Batch { diagnostics: std::mem::take(&mut self.pending), ..Batch::default() };
            if self.summary.cases == 0
                && self.summary.errors == 0
                && self.needs_cases
                && tail.diagnostics.iter().all(|d| !d.is_error())
            {
                let src = Source::new(&self.file, "", 1, 0);
                let mut d = src.diagnostic(Code::EmptyDataset, 0, String::new(), "the file holds no cases".into());
                d.hint = Some("a dataset needs at least one case".into());
                tail.diagnostics.push(d);
            }
            if !tail.diagnostics.is_empty() {
                self.count(&tail);
                let mut work = (self.work)(&tail);
                self.consumer.batch(&mut tail, &mut work);
            }
        }
        self.summary.stopped = self.stopped;
        self.summary
    }
}

fn id_key(id: &str) -> u64 {
    IdTable::key(id)
}

/// Whether the reader made the case's id up (its row had none).
fn id_made(case: &Case) -> bool {
    case.provenance.as_ref().is_some_and(|p| p.id_made)
}

/// A stretch of a line-based file that ends on a record boundary.
struct Chunk {
    seq: u64,
    bytes: Vec<u8>,
    first_line: u64,
    file_offset: u64,
    last: bool,
}

/// Where a buffer may be cut: the end of its last whole record, and the line breaks before it
/// when the search counted them.
type Splitter = dyn Fn(&[u8]) -> Option<(usize, Option<u64>)> + Sync;

/// The end of the last whole line (line breaks are counted later).
fn split_lines(bytes: &[u8]) -> Option<(usize, Option<u64>)> {
    memchr::memrchr(b'\n', bytes).map(|i| (i + 1, None))
}

/// What a worker thread is asked to do: parse a chunk into a batch, or run the consumer's
/// `work` on a batch whose ids have been checked.
enum Job {
    Parse(Chunk),
    Work(u64, Box<Batch>),
}

/// What comes back to the ordering thread.
enum Done<W> {
    Parsed(u64, Batch),
    Worked(u64, Batch, W),
    /// The reader has sent this many chunks and will send no more.
    End(u64),
}

/// Reads chunks on one thread and parses them on `threads` others; the calling thread checks
/// the ids of each batch in file order (which renames cases whose derived ids repeat), sends it
/// back to the workers for the consumer's `work`, and hands the batches to the consumer in file
/// order. Work is done once, after the ids are final, so a renamed case costs no more than
/// another and the output does not depend on the thread count.
#[allow(clippy::too_many_arguments)]
fn stream<W: Send>(
    state: &mut State<'_, W>,
    mut reader: Box<dyn Read + Send>,
    initial: Vec<u8>,
    first_offset: usize,
    first_line: u64,
    threads: usize,
    split: &Splitter,
    worker: &(dyn Fn(&Chunk) -> Batch + Sync),
) -> Result<(), ReadError> {
    let threads = if threads == 0 { std::thread::available_parallelism().map_or(2, |n| n.get()) } else { threads };
    // Four chunks a worker: a chunk holds its token from its read to its delivery, through a
    // parse, the wait for the chunks before it, the check here and the consumer's work (queued
    // behind the parses). With two a worker, a worker that finished its chunks ahead of a slower
    // one found every token taken and waited.
    let in_flight = threads * 4;
    // Tokens bound the chunks alive at once, wherever they are, so no channel below ever holds
    // more than `in_flight` items and no send on them waits for long.
    let (job_tx, job_rx) = sync_channel::<Job>(in_flight);
    let job_rx = Mutex::new(job_rx);
    let (done_tx, done_rx) = sync_channel::<Done<W>>(in_flight + 1);
    // Delivered batches go back to the workers to be freed there, in parallel.
    let (spent_tx, spent_rx) = sync_channel::<(Batch, W)>(in_flight);
    let spent_rx = Mutex::new(spent_rx);
    let (token_tx, token_rx) = sync_channel::<()>(in_flight);
    for _ in 0..in_flight {
        let _ = token_tx.send(());
    }
    let stop = AtomicBool::new(false);
    let work = state.work;
    std::thread::scope(|scope| -> Result<(), ReadError> {
        let stop = &stop;
        let producer = {
            let job_tx = job_tx.clone();
            let done_tx = done_tx.clone();
            scope.spawn(move || {
                let (sent, result) =
                    produce(&mut reader, initial, first_offset, first_line, split, &job_tx, &token_rx, stop);
                let _ = done_tx.send(Done::End(sent));
                result
            })
        };
        for _ in 0..threads {
            let job_rx = &job_rx;
            let spent_rx = &spent_rx;
            let done_tx = done_tx.clone();
            scope.spawn(move || {
                loop {
                    if let Ok(spent) = spent_rx.lock() {
                        while let Ok(spent) = spent.try_recv() {
                            drop(spent);
                        }
                    }
                    let job = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let done = match job {
                        Err(_) => return,
                        Ok(Job::Parse(chunk)) => {
                            let mut batch = worker(&chunk);
                            let seq = chunk.seq;
                            drop(chunk);
                            batch.hash_ids();
                            Done::Parsed(seq, batch)
                        }
                        Ok(Job::Work(seq, batch)) => {
                            let out = work(&batch);
                            Done::Worked(seq, *batch, out)
                        }
                    };
                    if done_tx.send(done).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        // The workers stop when every sender of jobs is gone: the reader's at its end, this
        // one once every batch has been sent back for its work.
        let mut job_tx = Some(job_tx);
        let mut chunks = None;
        let (mut next_check, mut next_hand) = (0u64, 0u64);
        let mut parsed: BTreeMap<u64, Batch> = BTreeMap::new();
        let mut worked: BTreeMap<u64, (Batch, W)> = BTreeMap::new();
        'outer: for done in done_rx.iter() {
            match done {
                Done::End(sent) => chunks = Some(sent),
                Done::Parsed(seq, batch) => {
                    parsed.insert(seq, batch);
                    while let Some(mut batch) = parsed.remove(&next_check) {
                        state.check(&mut batch);
                        let Some(tx) = &job_tx else { break 'outer };
                        if tx.send(Job::Work(next_check, Box::new(batch))).is_err() {
                            break 'outer;
                        }
                        next_check += 1;
                    }
                }
                Done::Worked(seq, batch, out) => {
                    worked.insert(seq, (batch, out));
                    while let Some((mut batch, mut out)) = worked.remove(&next_hand) {
                        next_hand += 1;
                        let _ = token_tx.send(());
                        let flow = state.hand(&mut batch, &mut out);
                        if let Err(std::sync::mpsc::TrySendError::Full(spent)) = spent_tx.try_send((batch, out)) {
                            drop(spent);
                        }
                        if flow == Flow::Stop {
                            stop.store(true, Ordering::Relaxed);
                            break 'outer;
                        }
                    }
                }
            }
            if chunks == Some(next_check) {
                job_tx = None;
            }
        }
        drop(job_tx);
        drop(done_rx);
        drop(token_tx);
        drop(spent_tx);
        match producer.join() {
            Ok(result) => result,
            Err(_) => Err(ReadError::Usage("the reader thread failed".into())),
        }
    })
}

/// Cuts the input into chunks and sends them to the workers; returns how many it sent.
#[allow(clippy::too_many_arguments)]
fn produce(
    reader: &mut Box<dyn Read + Send>,
    mut buf: Vec<u8>,
    mut offset: usize,
    mut line: u64,
    split: &Splitter,
    tx: &SyncSender<Job>,
    tokens: &Receiver<()>,
    stop: &AtomicBool,
) -> (u64, Result<(), ReadError>) {
    let mut seq = 0;
    let mut eof = false;
    // How much more to read when one record is longer than what the buffer holds. It doubles
    // each time, so a record of n bytes is scanned for its end O(log n) times, not n / CHUNK.
    let mut more = CHUNK;
    let mut fill = |buf: &mut Vec<u8>, want: u64| -> Result<bool, ReadError> {
        let before = buf.len();
        reader.take(want).read_to_end(buf)?;
        Ok(buf.len() == before)
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            return (seq, Ok(()));
        }
        while !eof && buf.len() < CHUNK {
            let want = (CHUNK - buf.len().min(CHUNK)).max(64 * 1024) as u64;
            match fill(&mut buf, want) {
                Ok(end) => eof = end,
                Err(err) => return (seq, Err(err)),
            }
        }
        let cut = if eof { Some((buf.len(), None)) } else { split(&buf) };
        let Some((cut, counted)) = cut else {
            // One record longer than a chunk: read on.
            match fill(&mut buf, more as u64) {
                Ok(end) => eof = end,
                Err(err) => return (seq, Err(err)),
            }
            more = more.saturating_mul(2);
            continue;
        };
        more = CHUNK;
        if cut == 0 && eof {
            return (seq, Ok(()));
        }
        // The next chunk's buffer, sized once: grown from the tail by doubling, each chunk was
        // copied several times over as it was read.
        let mut rest = Vec::with_capacity(CHUNK.max(buf.len() - cut) + 64 * 1024);
        rest.extend_from_slice(&buf[cut..]);
        buf.truncate(cut);
        let chunk_lines = counted.unwrap_or_else(|| memchr::memchr_iter(b'\n', &buf).count() as u64);
        if tokens.recv().is_err() {
            return (seq, Ok(()));
        }
        let chunk = Chunk {
            seq,
            bytes: std::mem::replace(&mut buf, rest),
            first_line: line,
            file_offset: offset as u64,
            last: eof,
        };
        line += chunk_lines;
        offset += cut;
        if tx.send(Job::Parse(chunk)).is_err() {
            return (seq, Ok(()));
        }
        seq += 1;
        if eof {
            return (seq, Ok(()));
        }
    }
}

fn utf8_error(file: &str, bytes: &[u8], line: u64, offset: u64, err: std::str::Utf8Error) -> Diagnostic {
    let valid = utf8(&bytes[..err.valid_up_to()]).unwrap_or("");
    let src = Source::new(file, valid, line, offset);
    let mut d = src.diagnostic(
        Code::InvalidUtf8,
        valid.len(),
        String::new(),
        format!("invalid UTF-8 (byte 0x{:02X})", bytes[err.valid_up_to()]),
    );
    d.hint = Some("save the file as UTF-8".into());
    d
}

/// The header record `{"$dataset": {...}}` a native JSONL file may start with, and its line.
fn native_jsonl_header<W>(
    state: &mut State<'_, W>,
    input: &Input,
    head: &[u8],
    base: usize,
) -> Option<(u64, DatasetHeader)> {
    let mut offset = 0;
    let mut line = 1;
    for raw in head.split(|b| *b == b'\n') {
        if !raw.iter().all(u8::is_ascii_whitespace) {
            break;
        }
        offset += raw.len() + 1;
        line += 1;
    }
    let end = memchr::memchr(b'\n', &head[offset.min(head.len())..]).map_or(head.len(), |i| offset + i);
    let text = utf8(head.get(offset..end)?).ok()?;
    let node = json::parse(text).ok()?;
    let inner = native::header_record(&node)?;
    let src = Source::new(&input.display, text, line, (base + offset) as u64);
    let mut cx = Cx::new(&src, None);
    let mut header = native::read_header(&mut cx, inner);
    state.pending.append(&mut cx.diags);
    if header.name.is_none() {
        header.name = Some(input.stem());
    }
    Some((line, header))
}

/// Where the rows of a JSONL file find the files they name, and the files read so far.
#[derive(Clone, Copy)]
struct Beside<'a> {
    base_dir: Option<&'a Path>,
    files: &'a FileCache,
}

fn jsonl_chunk(chunk: &Chunk, file: &str, format: Format, beside: Beside<'_>, skip_line: Option<u64>) -> Batch {
    let mut batch = Batch::default();
    // One case a line, mostly: size the vectors once rather than doubling them (cases are big).
    let rows = memchr::memchr_iter(b'\n', &chunk.bytes).count() + 1;
    batch.cases.reserve_exact(rows);
    batch.locs.reserve_exact(rows);
    let mut line = chunk.first_line;
    let mut start = 0;
    let bytes = &chunk.bytes;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        let mut row = &bytes[start..end];
        if row.last() == Some(&b'\r') {
            row = &row[..row.len() - 1];
        }
        let row_offset = chunk.file_offset + start as u64;
        let is_last = chunk.last && end >= bytes.len();
        if !row.iter().all(u8::is_ascii_whitespace) && skip_line != Some(line) {
            match utf8(row) {
                Err(err) => batch.diagnostics.push(utf8_error(file, row, line, row_offset, err)),
                Ok(text) => jsonl_row(&mut batch, file, text, line, row_offset, format, beside, is_last),
            }
        }
        start = end + 1;
        line += 1;
    }
    batch.end_offset = chunk.file_offset + bytes.len() as u64;
    batch
}

#[allow(clippy::too_many_arguments)]
fn jsonl_row(
    batch: &mut Batch,
    file: &str,
    text: &str,
    line: u64,
    offset: u64,
    format: Format,
    beside: Beside<'_>,
    last: bool,
) {
    let src = Source::new(file, text, line, offset);
    let mut cx = Cx::new(&src, beside.base_dir);
    cx.files = Some(beside.files);
    match json::parse(text) {
        Err(err) => {
            let code = if err.too_deep { Code::TooDeep } else { Code::JsonSyntax };
            let at_end = err.offset >= text.trim_end().len();
            let d = cx.report(code, err.offset, &Ptr::ROOT, err.message);
            d.hint = Some(if at_end && last {
                "the file ends inside this value: it may be truncated".into()
            } else if at_end {
                "each line must hold one whole JSON object".into()
            } else {
                "fix the JSON syntax on this line".into()
            });
        }
        Ok(node) => {
            if format == Format::Casebook {
                if let Some(inner) = native::header_record(&node) {
                    let mut header = native::read_header(&mut cx, inner);
                    header.name = header.name.or_else(|| batch.header.take().and_then(|h| h.name));
                    batch.header = Some(header);
                    batch.diagnostics.append(&mut cx.diags);
                    return;
                }
            }
            let case = match format {
                Format::Casebook => native::read_case(&mut cx, &node, &Ptr::ROOT),
                Format::OpenaiEvals => openai_evals::read_row(&mut cx, &node, &Ptr::ROOT),
                Format::Inspect => inspect::read_sample(&mut cx, &node, &Ptr::ROOT),
                Format::Promptfoo => promptfoo::read_test(&mut cx, &node, &Ptr::ROOT),
                _ => letta::read_row(&mut cx, &node, &Ptr::ROOT),
            };
            if let Some(case) = case {
                let at = node.get("id").or_else(|| node.get("sample_id")).map_or(node.offset, |n| n.offset);
                batch.locs.push(loc(&src, at));
                batch.cases.push(case);
            }
        }
    }
    batch.diagnostics.append(&mut cx.diags);
}

fn loc(src: &Source<'_>, offset: usize) -> Loc {
    let (line, column, line_offset) = src.locate(offset);
    Loc { line, column, line_offset }
}

fn csv_chunk(chunk: &Chunk, file: &str, format: Format, columns: &[String], map: Option<&ColumnMap>) -> Batch {
    let mut batch = Batch::default();
    // Lines with invalid UTF-8 are reported and skipped; the text around them is read.
    let bytes = &chunk.bytes[..];
    let (mut pos, mut line) = (0, chunk.first_line);
    while pos < bytes.len() {
        let (valid, bad) = match utf8(&bytes[pos..]) {
            Ok(text) => (text, None),
            Err(err) => {
                let upto = pos + err.valid_up_to();
                let line_start = memchr::memrchr(b'\n', &bytes[pos..upto]).map_or(pos, |i| pos + i + 1);
                let line_end = memchr::memchr(b'\n', &bytes[upto..]).map_or(bytes.len(), |i| upto + i + 1);
                (utf8(&bytes[pos..line_start]).unwrap_or(""), Some((line_start, line_end)))
            }
        };
        let offset = chunk.file_offset + pos as u64;
        csv_text(&mut batch, file, valid, line, offset, format, columns, map);
        line += memchr::memchr_iter(b'\n', valid.as_bytes()).count() as u64;
        let Some((line_start, line_end)) = bad else { break };
        let bad_line = &bytes[line_start..line_end];
        if let Err(err) = utf8(bad_line) {
            batch.diagnostics.push(utf8_error(file, bad_line, line, chunk.file_offset + line_start as u64, err));
        }
        line += 1;
        pos = line_end;
    }
    batch.end_offset = chunk.file_offset + chunk.bytes.len() as u64;
    batch
}

#[allow(clippy::too_many_arguments)]
fn csv_text(
    batch: &mut Batch,
    file: &str,
    text: &str,
    first_line: u64,
    offset: u64,
    format: Format,
    columns: &[String],
    map: Option<&ColumnMap>,
) {
    let src = Source::new(file, text, first_line, offset);
    let mut cx = Cx::new(&src, None);
    let rows = memchr::memchr_iter(b'\n', text.as_bytes()).count() + 1;
    batch.cases.reserve(rows);
    batch.locs.reserve(rows);
    for record in csvtext::records(text) {
        match record {
            Err(err) => {
                cx.report(Code::CsvSyntax, err.offset, &Ptr::ROOT, err.message).hint =
                    Some("a quoted cell ends with `\"`; a quote inside it is written `\"\"`".into());
            }
            Ok((start, fields)) => {
                let read = match (format, map) {
                    (Format::Csv, Some(map)) => tabular::mapped_record(&mut cx, columns, &fields, start, map),
                    (Format::Inspect, _) => inspect::csv_record(&mut cx, columns, &fields, start),
                    (Format::Promptfoo, _) => promptfoo::csv_record(&mut cx, columns, &fields, start),
                    _ => tabular::letta_record(&mut cx, columns, &fields, start),
                };
                if let Some((case, at)) = read {
                    batch.locs.push(loc(&src, at));
                    batch.cases.push(case);
                }
            }
        }
    }
    batch.diagnostics.append(&mut cx.diags);
}

fn document<W>(
    state: &mut State<'_, W>,
    input: &Input,
    opts: &ReadOptions,
    syntax: Syntax,
    bytes: &[u8],
    base: usize,
) -> Result<(), ReadError> {
    let file = &input.display;
    let text = match utf8(bytes) {
        Ok(text) => text,
        Err(err) => {
            let line = 1 + memchr::memchr_iter(b'\n', &bytes[..err.valid_up_to()]).count() as u64;
            let line_start = memchr::memrchr(b'\n', &bytes[..err.valid_up_to()]).map_or(0, |i| i + 1);
            let tail = &bytes[line_start..];
            let e = utf8(tail).err().unwrap_or(err);
            let d = utf8_error(file, tail, line, (base + line_start) as u64, e);
            state.pending.push(d);
            let format = opts.format.unwrap_or(Format::Casebook);
            let _ = state.start(Start { format, syntax, header: line_header(input, format) });
            state.needs_cases = false;
            return Ok(());
        }
    };
    let src = Source::new(file, text, 1, base as u64);
    let base_dir = input.path.as_deref().and_then(Path::parent);
    // The files the document names beside it, counted for the whole read.
    let files = FileCache::default();
    let mut cx = Cx::new(&src, base_dir);
    cx.files = Some(&files);
    let parsed = match streamed_document(state, input, opts, syntax, &src, base_dir, &files)? {
        Streaming::Done => return Ok(()),
        Streaming::Parsed(result) => result,
    };
    let root = match parsed {
        Ok(root) => root,
        Err((offset, message, too_deep, code)) => {
            let code = if too_deep { Code::TooDeep } else { code };
            let empty = text.trim().is_empty();
            let d = cx.report(
                if empty { Code::EmptyDataset } else { code },
                offset,
                &Ptr::ROOT,
                if empty { "the file is empty".into() } else { message },
            );
            d.hint = Some(if empty {
                "a dataset needs at least one case".into()
            } else if offset >= text.trim_end().len() {
                "the file ends too early: it may be truncated".into()
            } else {
                format!("fix the {} syntax here", syntax.name().to_uppercase())
            });
            state.pending.append(&mut cx.diags);
            let format = opts.format.unwrap_or(Format::Casebook);
            let _ = state.start(Start { format, syntax, header: line_header(input, format) });
            state.needs_cases = false;
            return Ok(());
        }
    };
    if root.is_null() {
        cx.report(Code::EmptyDataset, 0, &Ptr::ROOT, "the file is empty").hint =
            Some("a dataset needs at least one case".into());
        state.pending.append(&mut cx.diags);
        let format = opts.format.unwrap_or(Format::Casebook);
        let _ = state.start(Start { format, syntax, header: line_header(input, format) });
        state.needs_cases = false;
        return Ok(());
    }
    let format = match opts.format {
        Some(f @ (Format::Letta | Format::OpenaiEvals | Format::Csv)) => return Err(incompatible(f, syntax)),
        Some(Format::Inspect) if syntax == Syntax::Yaml => return Err(incompatible(Format::Inspect, syntax)),
        Some(f) => f,
        None => match sniff_document(&root).filter(|_| !crate::format::is_seed_file(&root)) {
            Some(f) => f,
            None => {
                // Located, so that `validate` reports it beside the other files' problems.
                let (message, hint) = if crate::format::is_seed_file(&root) {
                    (
                        format!("`{file}` looks like a mas-lab seed file (memory seeds), not a dataset"),
                        "validate the dataset that names it (`memory_seeds: FILE`): the seeds are read and checked there".to_owned(),
                    )
                } else {
                    (
                        format!("cannot tell the format of `{file}`"),
                        "name it with `--from` (casebook, agenthealth, maslab, voltagent, inspect, promptfoo)"
                            .to_owned(),
                    )
                };
                cx.report(Code::UnknownFormat, root.offset, &Ptr::ROOT, message).hint = Some(hint);
                state.pending.append(&mut cx.diags);
                let _ = state.start(Start {
                    format: Format::Casebook,
                    syntax,
                    header: line_header(input, Format::Casebook),
                });
                state.needs_cases = false;
                return Ok(());
            }
        },
    };
    let (mut header, cases) = documents::read(&mut cx, &root, format, &input.stem(), None);
    let spec_offset = |key: &str| root.get("spec").and_then(|s| s.get(key)).map_or(0, |n| n.offset);
    let (path_offset, format_offset) = (spec_offset("path"), spec_offset("format"));
    drop(root);
    let mut located: Vec<(Case, Loc)> = cases.into_iter().map(|(case, offset)| (case, loc(&src, offset))).collect();
    let mut items_diags = Vec::new();
    let mut items_display = None;
    if format == Format::Maslab {
        if let Some((path, hint)) = documents::items_file(&header).map(|(p, h)| (p.to_owned(), h.map(str::to_owned))) {
            match items_file(base_dir, &path, hint.as_deref(), &mut header) {
                Ok(read) => {
                    located = read.cases;
                    items_diags = read.diagnostics;
                    items_display = Some(read.file);
                }
                Err(p) => {
                    let offset = if p.key == "format" { format_offset } else { path_offset };
                    let ptr = Ptr::ROOT.key("spec");
                    cx.report(p.code, offset, &ptr.key(p.key), p.message).hint = Some(p.hint);
                }
            }
        }
    }
    state.needs_cases = false; // the document reader reports empty lists itself
    state.pending.append(&mut cx.diags);
    // Document diagnostics come in source order, before the cases they concern; those of an
    // items file after those of its manifest.
    state.pending.sort_by_key(|d| (d.line, d.column));
    state.pending.append(&mut items_diags);
    if state.start(Start { format, syntax, header }) == Flow::Stop {
        return Ok(());
    }
    let new_batch = || Batch { file: items_display.clone(), ..Batch::default() };
    let mut batch = new_batch();
    for (case, loc) in located {
        batch.locs.push(loc);
        batch.cases.push(case);
        if batch.cases.len() == DOC_BATCH {
            let full = std::mem::replace(&mut batch, new_batch());
            if state.deliver(full) == Flow::Stop {
                return Ok(());
            }
        }
    }
    if !batch.cases.is_empty() {
        state.deliver(batch);
    }
    Ok(())
}

/// The cases of a manifest's items file: the file's name as diagnostics give it, the cases with
/// where they are in it, and the problems found in it.
struct ItemsRead {
    file: String,
    cases: Vec<(Case, Loc)>,
    diagnostics: Vec<Diagnostic>,
}

/// What is wrong with a manifest's `spec.path` (or `spec.format`): reported on the manifest.
struct ItemsFileProblem {
    code: Code,
    /// The key of `spec` it is about.
    key: &'static str,
    message: String,
    hint: String,
}

/// Reads the file a mas-lab manifest keeps its items in (`spec.path`, relative to the manifest
/// and inside its folder tree; JSON or YAML). Problems inside the file are reported at their
/// place in it; problems with the path or format come back to be reported on the manifest.
fn items_file(
    base_dir: Option<&Path>,
    path: &str,
    format: Option<&str>,
    header: &mut DatasetHeader,
) -> Result<ItemsRead, ItemsFileProblem> {
    let problem = |code, key, message: String, hint: String| ItemsFileProblem { code, key, message, hint };
    let shown = excerpt(path);
    let Some(base) = base_dir else {
        return Err(problem(
            Code::ItemsPathMissing,
            "path",
            format!("cannot read the items file `{shown}` from standard input"),
            "give the manifest's path, so that `spec.path` can be found beside it".into(),
        ));
    };
    let Some(resolved) = crate::parts::inside(base, path) else {
        return Err(problem(
            Code::ItemsPathEscapes,
            "path",
            format!("items path `{shown}` leaves the manifest's folder"),
            "keep the items file in the manifest's folder or below it".into(),
        ));
    };
    let json = match format.map(str::to_ascii_lowercase).as_deref() {
        Some("json") => true,
        Some("yaml" | "yml") => false,
        Some(other) => {
            return Err(problem(
                Code::InvalidValue,
                "format",
                format!("casebook cannot read items files in `{}`", excerpt(other)),
                "items files are JSON or YAML: `format: json` or `format: yaml`".into(),
            ));
        }
        None => resolved.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")),
    };
    let text = match fs_err::read(&resolved).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => {
            let message = format!("the items file `{shown}` is not UTF-8 text");
            return Err(problem(Code::InvalidUtf8, "path", message, "save it as UTF-8".into()));
        }
        Err(err) => {
            return Err(problem(
                Code::ItemsPathMissing,
                "path",
                format!("the items file `{shown}` cannot be read: {}", err.kind()),
                format!(
                    "looked for {}; `spec.path` is relative to the manifest",
                    excerpt(&resolved.display().to_string())
                ),
            ));
        }
    };
    let display: PathBuf =
        base.components().chain(Path::new(path).components()).filter(|c| *c != std::path::Component::CurDir).collect();
    let display = display.display().to_string();
    let src = Source::new(&display, &text, 1, 0);
    let mut items_cx = Cx::new(&src, Some(base));
    let parsed = if json {
        json::parse(&text).map_err(|e| (e.offset, e.message, Code::JsonSyntax))
    } else {
        yaml::parse(&text).map_err(|e| (e.offset, e.message, Code::YamlSyntax))
    };
    let cases = match parsed {
        Ok(root) => documents::read_items_document(&mut items_cx, &root, header),
        Err((offset, message, code)) => {
            items_cx.report(code, offset, &Ptr::ROOT, message);
            Vec::new()
        }
    };
    let located = cases.into_iter().map(|(case, offset)| (case, loc(&src, offset))).collect();
    let diags = items_cx.diags;
    Ok(ItemsRead { file: display.clone(), cases: located, diagnostics: diags })
}

/// Where lists of cases are in documents, from the root: Agent Health's root array (or another
/// format's, see [`ROOT_LISTS`]), VoltAgent's `data`, casebook's `cases`, mas-lab's `items` and
/// `spec.items`, a promptfoo configuration's `tests`.
const STREAMED: &[(&[&str], Format)] = &[
    (&[], Format::AgentHealth),
    (&["data"], Format::Voltagent),
    (&["cases"], Format::Casebook),
    (&["items"], Format::Maslab),
    (&["spec", "items"], Format::Maslab),
    (&["tests"], Format::Promptfoo),
];

/// Formats whose document may be a bare list of cases (the root path of [`STREAMED`]); which
/// one a file is, its first item tells (see [`sniff_list_item`]).
const ROOT_LISTS: &[Format] = &[Format::AgentHealth, Format::Inspect, Format::Promptfoo];

/// Documents longer than this are read as they are parsed, in bounded memory; shorter ones are
/// parsed whole, which keeps header keys that come after the cases in every output.
const STREAM_FROM: usize = 16 << 20;

/// A syntax error: offset, message, too deep, code.
type DocError = (usize, String, bool, Code);

enum Streaming<'t> {
    /// The document had a streamed list and has been delivered.
    Done,
    /// It had none: here it is, parsed, for the general path.
    Parsed(Result<crate::node::Node<'t>, DocError>),
}

/// Reads a document whose list of cases is at one of the [`STREAMED`] paths one case at a
/// time, so memory holds the text and a batch, never a tree of the whole document.
fn streamed_document<'t, W>(
    state: &mut State<'_, W>,
    input: &Input,
    opts: &ReadOptions,
    syntax: Syntax,
    src: &Source<'t>,
    base_dir: Option<&Path>,
    files: &FileCache,
) -> Result<Streaming<'t>, ReadError> {
    let long = src.text.len() >= opts.stream_from.unwrap_or(STREAM_FROM);
    let paths: Vec<&'static [&'static str]> = STREAMED
        .iter()
        .filter(|(path, format)| {
            let wanted = match opts.format {
                None => true,
                Some(f) if path.is_empty() => ROOT_LISTS.contains(&f),
                Some(f) => f == *format,
            };
            long && wanted && !(path.is_empty() && syntax == Syntax::Yaml)
        })
        .map(|(path, _)| *path)
        .collect();
    let stem = input.stem();
    // The format, the path and the number of items so far, once the list has begun.
    let mut current: Option<(Format, &'static [&'static str], usize)> = None;
    // A root list whose format its first item tells: the document so far, until that item.
    let mut deferred: Option<crate::node::Node<'t>> = None;
    let mut cx = Cx::new(src, base_dir);
    cx.files = Some(files);
    let mut batch = Batch::default();
    let mut stopped = false;
    // A promptfoo configuration's `defaultTest`, when it comes before the tests, and its tests
    // (which may name files of tests).
    let mut defaults: Option<crate::node::Node<'t>> = None;
    let mut tests = promptfoo::TestsList::default();
    // Starts reading the list at `path` as `format`: the header so far (its problems are
    // reported once, from the whole document) goes to the consumer.
    let begin = |state: &mut State<'_, W>, format: Format, root: &crate::node::Node<'t>| {
        let mut scratch = Cx::new(src, base_dir);
        let (header, _) = documents::read(&mut scratch, root, format, &stem, Some(1));
        state.needs_cases = false;
        state.start(Start { format, syntax, header })
    };
    let mut on = |event: crate::node::Streamed<'t>| match event {
        crate::node::Streamed::Begin { path, root, .. } => {
            if let Some((_, current_path, count)) = current.as_mut() {
                // A second list of cases (its key written twice): reading has started, so its
                // items are read on; the duplicate key is reported from the whole document.
                *current_path = path;
                *count = 0;
                return true;
            }
            let format = match (path.is_empty(), opts.format) {
                (true, Some(format)) => format,
                (true, None) => {
                    deferred = Some(root);
                    return true;
                }
                (false, _) => STREAMED.iter().find(|(p, _)| *p == path).map_or(Format::Casebook, |(_, f)| *f),
            };
            current = Some((format, path, 0));
            if format == Format::Promptfoo {
                // Its problems are reported from the whole document.
                defaults = promptfoo::defaults(&mut Cx::new(src, base_dir), &root).cloned();
            }
            stopped = begin(state, format, &root) == Flow::Stop;
            !stopped
        }
        crate::node::Streamed::Item(node) => {
            if let Some(root) = deferred.take() {
                let format = sniff_list_item(&node);
                current = Some((format, &[], 0));
                stopped = begin(state, format, &root) == Flow::Stop;
                if stopped {
                    return false;
                }
            }
            let Some((format, path, count)) = current.as_mut() else { return true };
            let index = *count;
            *count += 1;
            documents::with_ptr(path, |p| {
                let at = node.get("id").map_or(node.offset, |n| n.offset);
                if *format == Format::Promptfoo {
                    for case in tests.item(&mut cx, &node, &p.index(index), defaults.as_ref()) {
                        batch.locs.push(loc(src, at));
                        batch.cases.push(case);
                    }
                } else if let Some(case) = documents::item_reader(*format)(&mut cx, &node, &p.index(index)) {
                    batch.locs.push(loc(src, at));
                    batch.cases.push(case);
                }
            });
            if batch.cases.len() >= DOC_BATCH {
                batch.diagnostics.append(&mut cx.diags);
                if state.deliver(std::mem::take(&mut batch)) == Flow::Stop {
                    stopped = true;
                }
            }
            !stopped
        }
    };
    let result = match syntax {
        Syntax::Json => json::parse_streaming(src.text, &paths, &mut on)
            .map_err(|e| (e.offset, e.message, e.too_deep, Code::JsonSyntax)),
        _ => yaml::parse_streaming(src.text, &paths, &mut on)
            .map_err(|e| (e.offset, e.message, e.too_deep, Code::YamlSyntax)),
    };
    let Some((format, _, count)) = current else {
        return Ok(Streaming::Parsed(result));
    };
    if stopped {
        return Ok(Streaming::Done);
    }
    if format == Format::Promptfoo {
        // References at the end of the list stay with the last case still at hand.
        let at = src.text.len().saturating_sub(1);
        // The header went out first: the references stay with the cases only.
        tests.finish(&mut cx, batch.cases.last_mut(), at, &Ptr::ROOT.key("tests"), false);
    }
    match result {
        Ok(root) => {
            let (header, _) = documents::read(&mut cx, &root, format, &stem, Some(count));
            let late = match &root.value {
                crate::node::NodeValue::Object(entries) => entries.iter().find(|e| e.key == "defaultTest"),
                _ => None,
            };
            if let (Format::Promptfoo, None, Some(late)) = (format, &defaults, late) {
                if matches!(late.value.value, crate::node::NodeValue::Object(_)) {
                    cx.report(
                        Code::Dropped,
                        late.key_offset,
                        &Ptr::ROOT.key("defaultTest"),
                        "the tests are read without their `defaultTest`, which comes after them in a file this large \
                         (it is read as it is parsed)",
                    )
                    .hint = Some("move `defaultTest` before `tests`".into());
                }
            }
            state.consumer.header(&header);
        }
        Err((offset, message, too_deep, code)) => {
            let code = if too_deep { Code::TooDeep } else { code };
            let truncated = offset >= src.text.trim_end().len();
            cx.report(code, offset, &Ptr::ROOT, message).hint = Some(if truncated {
                "the file ends too early: it may be truncated".into()
            } else {
                format!("fix the {} syntax here", syntax.name().to_uppercase())
            });
        }
    }
    batch.diagnostics.append(&mut cx.diags);
    if !batch.cases.is_empty() || !batch.diagnostics.is_empty() {
        state.deliver(batch);
    }
    Ok(Streaming::Done)
}

/// UTF-8 validation: SIMD for the common case, the standard library to locate an error.
fn utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(_) => std::str::from_utf8(bytes),
    }
}
