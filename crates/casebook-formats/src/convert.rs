//! Conversion from any format to any format, streaming: read in batches, encode on the worker
//! threads, write in file order. Diagnostics (the reader's, and cases the target cannot hold)
//! go to a callback; the caller decides what to do with output that had errors.

use std::io::Write;
use std::sync::OnceLock;

use casebook_model::{Code, DatasetHeader, Diagnostic};

use crate::read::{Batch, Consumer, Flow, Input, ReadError, ReadOptions, Start, read};
use crate::tabular::ColumnMap;
use crate::write::{Beside, Drafts, Encoded, Encoder, SeedFiles, Writer, empty_refusal, refusal};
use crate::{Format, Syntax};

/// What to convert to.
#[derive(Debug, Clone)]
pub struct Target {
    pub format: Format,
    pub syntax: Syntax,
    /// Drop fields the target cannot hold (with a warning) instead of refusing the case.
    pub lossy: bool,
    /// Column map for the generic `csv` format.
    pub column_map: Option<ColumnMap>,
    /// What becomes of the seed files cases carry.
    pub seed_files: SeedFiles,
    /// Write draft expectations even where the target has no place for `review` (they read
    /// as confirmed there); else such cases are refused, lossy or not.
    pub confirm_drafts: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConvertSummary {
    /// The input had header keys after its cases that the output could not hold, because it
    /// writes its header first (only long YAML documents are read that way).
    pub late_header_dropped: bool,
    pub cases: u64,
    pub written: u64,
    pub errors: u64,
    pub warnings: u64,
}

struct Converter<'a, 'w> {
    encoder: &'a OnceLock<Encoder>,
    target: &'a Target,
    columns: Vec<String>,
    out: Option<Box<dyn Write + Send + 'w>>,
    beside: Option<Box<dyn Beside + Send + 'w>>,
    /// The input's folder, when it is a file.
    input_dir: Option<std::path::PathBuf>,
    writer: Option<Writer<'w>>,
    on_batch: &'a mut dyn FnMut(&[Diagnostic], &Progress),
    file: String,
    summary: ConvertSummary,
    io_error: Option<std::io::Error>,
    /// The header as the end of the input left it, when it grew after the start.
    final_header: Option<DatasetHeader>,
    /// Draft cases refused, and where the first one is.
    drafts: Drafts,
    first_draft: Option<(String, crate::read::Loc)>,
    /// The references to other files whose content was written inline, told once each.
    inlined: std::collections::HashSet<String>,
}

impl Consumer<Encoded> for Converter<'_, '_> {
    fn start(&mut self, start: &Start) -> Flow {
        let t = self.target;
        let beside = self.beside.is_some();
        let encoder = self.encoder.get_or_init(|| {
            Encoder::new(
                t.format,
                t.syntax,
                &start.header,
                std::mem::take(&mut self.columns),
                t.column_map.clone(),
                t.lossy,
            )
            .with_files(&start.header, t.seed_files.clone(), beside)
            .confirming_drafts(t.confirm_drafts)
        });
        let Some(out) = self.out.take() else { return Flow::Stop };
        let mut writer = match Writer::new(out, encoder, &start.header) {
            Ok(writer) => writer,
            Err(e) => {
                self.io_error = Some(e);
                return Flow::Stop;
            }
        };
        if let Some(beside) = self.beside.take() {
            // Writing the input's own items file would lose it if the conversion changed anything.
            let own = self
                .input_dir
                .as_deref()
                .zip(encoder.items_file())
                .filter(|(dir, path)| beside.is(path, &dir.join(path)));
            if let Some((_, path)) = own {
                self.io_error = Some(std::io::Error::other(format!(
                    "the items file `{path}` would be written over the input's own: write the output to another folder"
                )));
                return Flow::Stop;
            }
            writer = writer.with_beside(beside);
        }
        if let Err(err) = writer.begin() {
            self.io_error = Some(err);
            return Flow::Stop;
        }
        self.writer = Some(writer);
        Flow::Continue
    }

    fn header(&mut self, header: &DatasetHeader) {
        self.final_header = Some(header.clone());
    }

    fn batch(&mut self, batch: &mut Batch, encoded: &mut Encoded) -> Flow {
        self.summary.cases += batch.cases.len() as u64;
        self.summary.written += encoded.written as u64;
        for (i, fields) in &encoded.lost {
            let loc = batch.locs[*i];
            let lossy = self.target.lossy;
            let code = if lossy { Code::Dropped } else { Code::Unrepresentable };
            let (id, format, list) =
                (casebook_model::excerpt(&batch.cases[*i].id), self.target.format, fields.join(", "));
            batch.diagnostics.push(Diagnostic {
                severity: code.severity(),
                code,
                message: if lossy {
                    format!("case `{id}`: dropped what `{format}` cannot hold: {list}")
                } else {
                    format!("case `{id}` has what `{format}` cannot hold: {list}")
                },
                file: batch.file.clone().unwrap_or_else(|| self.file.clone()),
                line: loc.line,
                column: loc.column,
                pointer: Some(String::new()),
                path: None,
                hint: (!lossy)
                    .then(|| "convert to a format that holds these fields, or pass `--lossy` to drop them".into()),
                case: None,
                line_offset: Some(loc.line_offset),
            });
        }
        for (i, reference) in &encoded.inlined {
            if !self.inlined.insert(reference.clone()) {
                continue;
            }
            let loc = batch.locs[*i];
            let shown = casebook_model::excerpt(reference);
            batch.diagnostics.push(Diagnostic {
                severity: Code::Inlined.severity(),
                code: Code::Inlined,
                message: format!(
                    "the tests read from `{shown}` are written inline: `{}` reads the same tests from the one file written",
                    self.target.format
                ),
                file: batch.file.clone().unwrap_or_else(|| self.file.clone()),
                line: loc.line,
                column: loc.column,
                pointer: None,
                path: None,
                hint: Some(format!("to keep them apart, name `{shown}` in the written configuration's `tests` again")),
                case: None,
                line_offset: Some(loc.line_offset),
            });
        }
        for i in &encoded.drafts {
            self.drafts.add(&batch.cases[*i].id);
            if self.first_draft.is_none() {
                self.first_draft = Some((batch.file.clone().unwrap_or_else(|| self.file.clone()), batch.locs[*i]));
            }
        }
        for (i, missing) in &encoded.missing {
            let loc = batch.locs[*i];
            let (message, hint) = refusal(self.target.format, &batch.cases[*i].id, missing, "convert");
            batch.diagnostics.push(Diagnostic {
                severity: Code::MissingField.severity(),
                code: Code::MissingField,
                message,
                file: batch.file.clone().unwrap_or_else(|| self.file.clone()),
                line: loc.line,
                column: loc.column,
                pointer: Some(String::new()),
                path: None,
                hint: Some(hint),
                case: None,
                line_offset: Some(loc.line_offset),
            });
        }
        for d in &batch.diagnostics {
            if d.is_error() {
                self.summary.errors += 1;
            } else {
                self.summary.warnings += 1;
            }
        }
        (self.on_batch)(&batch.diagnostics, &Progress { bytes: batch.end_offset, cases: self.summary.cases });
        if let Some(writer) = &mut self.writer {
            if let Err(err) = writer.write(encoded) {
                self.io_error = Some(err);
                return Flow::Stop;
            }
        }
        Flow::Continue
    }
}

/// How far a conversion is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the input read (0 for whole-document files).
    pub bytes: u64,
    pub cases: u64,
}

/// Converts `input` to `target`, writing to `out` and, when given, the files that go next to it
/// to `beside` (a mas-lab items file, seed files). `columns` are the CSV columns to write (see
/// [`csv_columns`]). `on_batch` gets the problems of each batch, in file order.
pub fn convert<'w>(
    input: &Input,
    opts: &ReadOptions,
    target: &Target,
    columns: Vec<String>,
    out: Box<dyn Write + Send + 'w>,
    beside: Option<Box<dyn Beside + Send + 'w>>,
    on_batch: &mut dyn FnMut(&[Diagnostic], &Progress),
) -> Result<ConvertSummary, ReadError> {
    let encoder = OnceLock::new();
    let work = |batch: &Batch| encoder.get().map(|e: &Encoder| e.encode(&batch.cases)).unwrap_or_default();
    let mut converter = Converter {
        encoder: &encoder,
        target,
        columns,
        out: Some(out),
        beside,
        input_dir: input.path.as_deref().map(|p| p.parent().map(std::path::Path::to_owned).unwrap_or_default()),
        writer: None,
        on_batch,
        file: input.display.clone(),
        summary: ConvertSummary::default(),
        io_error: None,
        final_header: None,
        drafts: Drafts::default(),
        first_draft: None,
        inlined: Default::default(),
    };
    read(input, opts, &work, &mut converter)?;
    if let Some(err) = converter.io_error.take() {
        return Err(ReadError::Io(err));
    }
    if let (Some((message, hint)), Some((file, loc))) =
        (converter.drafts.refusal(target.format), converter.first_draft.take())
    {
        // One error for every draft refused, at the first of them.
        let refused = Diagnostic {
            severity: Code::UnconfirmedDrafts.severity(),
            code: Code::UnconfirmedDrafts,
            message,
            file,
            line: loc.line,
            column: loc.column,
            pointer: Some("/review".into()),
            path: None,
            hint: Some(hint),
            case: None,
            line_offset: Some(loc.line_offset),
        };
        converter.summary.errors += 1;
        let progress = Progress { bytes: 0, cases: converter.summary.cases };
        (converter.on_batch)(std::slice::from_ref(&refused), &progress);
    }
    if converter.summary.written == 0 && converter.summary.errors == 0 && target.format.needs_cases() {
        // The reader took the input (a casebook document or an Agent Health array may be
        // empty), but the output would be a file its own reader refuses.
        let (message, hint) = empty_refusal(target.format, "the dataset", "convert");
        let refused = Diagnostic {
            severity: Code::EmptyDataset.severity(),
            code: Code::EmptyDataset,
            message,
            file: input.display.clone(),
            line: 1,
            column: 1,
            pointer: Some(String::new()),
            path: None,
            hint: Some(hint),
            case: None,
            line_offset: Some(0),
        };
        converter.summary.errors += 1;
        let progress = Progress { bytes: 0, cases: converter.summary.cases };
        (converter.on_batch)(std::slice::from_ref(&refused), &progress);
    }
    if let Some(writer) = converter.writer.take() {
        let kept = writer.finish(converter.final_header.as_ref())?;
        converter.summary.late_header_dropped = !kept;
    }
    Ok(converter.summary)
}

/// The columns a CSV output needs: those of the source file when it was CSV, in its order, then
/// any other a case uses (a first pass over the input).
pub fn csv_columns(input: &Input, opts: &ReadOptions, target: &Target) -> Result<Vec<String>, ReadError> {
    if input.path.is_none() {
        return Err(ReadError::Usage(
            "writing CSV takes two passes over the input: give a file, not standard input".into(),
        ));
    }
    let probe = Encoder::new(
        target.format,
        Syntax::Csv,
        &DatasetHeader::default(),
        Vec::new(),
        target.column_map.clone(),
        true,
    );
    let work = |batch: &Batch| {
        let mut columns = Vec::new();
        probe.csv_columns(&batch.cases, &mut columns);
        columns
    };
    struct Collect(Vec<String>, Option<Vec<String>>);
    impl Consumer<Vec<String>> for Collect {
        fn start(&mut self, start: &Start) -> Flow {
            self.1 = start
                .header
                .provenance
                .as_ref()
                .and_then(|p| p.layout.get("columns"))
                .and_then(|c| c.as_array())
                .map(|c| c.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect());
            Flow::Continue
        }
        fn batch(&mut self, _: &mut Batch, columns: &mut Vec<String>) -> Flow {
            for c in columns.drain(..) {
                if !self.0.contains(&c) {
                    self.0.push(c);
                }
            }
            Flow::Continue
        }
    }
    let mut collect = Collect(Vec::new(), None);
    read(input, opts, &work, &mut collect)?;
    let mut columns = collect.1.unwrap_or_default();
    columns.retain(|c| collect.0.contains(c));
    for c in collect.0 {
        if !columns.contains(&c) {
            columns.push(c);
        }
    }
    Ok(columns)
}
