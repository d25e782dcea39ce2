//! Writing a stored dataset version in any format, from cases (or native bodies) handed over
//! batch by batch from wherever they come: a store (`casebook export`, the server's export
//! route) or pages over HTTP (`casebook pull`). [`CsvColumns`] is the first pass CSV needs (its
//! columns before the first row); [`Exporter`] writes, reports what a format cannot hold and
//! refuses an empty dataset in a format that needs cases. Native JSONL is written from the
//! bodies as they are, without reading them into cases.

use std::io::{self, Write};

use casebook_model::{Case, Code, DatasetHeader, Diagnostic, excerpt};

use crate::tabular::ColumnMap;
use crate::write::{Beside, Drafts, Encoded, Encoder, SeedFiles, Writer, empty_refusal, refusal};
use crate::{Format, Syntax};

/// What to write, and how diagnostics name what is written.
#[derive(Debug, Clone)]
pub struct ExportSettings {
    pub format: Format,
    /// One of `format.syntaxes()`.
    pub syntax: Syntax,
    /// Column map for the generic `csv` format (which needs one).
    pub column_map: Option<ColumnMap>,
    /// Drop fields the format cannot hold (a warning) instead of refusing the case (an error).
    pub lossy: bool,
    /// What becomes of the seed files cases carry; [`SeedFiles::Write`] without a [`Beside`]
    /// puts them inline.
    pub seed_files: SeedFiles,
    /// What diagnostics say is exported, and name as their file: `support@v3`.
    pub place: String,
    /// Write draft expectations even where the format has no place for `review` (they read as
    /// confirmed there); else such cases are refused, lossy or not.
    pub confirm_drafts: bool,
}

impl ExportSettings {
    /// Whether the CSV columns must be found first ([`CsvColumns`]).
    pub fn needs_columns(&self) -> bool {
        self.syntax == Syntax::Csv
    }

    /// Whether the output is native JSONL, written from stored bodies as they are
    /// ([`Exporter::bodies`]) rather than from cases.
    pub fn takes_bodies(&self) -> bool {
        self.format == Format::Casebook && self.syntax == Syntax::Jsonl
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("writing the `csv` format needs a column map: `input=COLUMN,expected.output=COLUMN`")]
    NoColumnMap,
    #[error("`{format}` cannot be written as {}: it uses {}", .syntax.name(), syntax_list(.format))]
    Syntax { format: Format, syntax: Syntax },
    /// A body handed to [`Exporter::bodies`] is not a case's native JSON.
    #[error("a case cannot be read back from its native JSON: {0}")]
    Body(serde_json::Error),
    /// Writing the output (or a file beside it) failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

fn syntax_list(format: &Format) -> String {
    format.syntaxes().iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
}

/// The first pass of a CSV export: the columns the cases need, found batch by batch.
pub struct CsvColumns {
    probe: Encoder,
    found: Vec<String>,
}

impl CsvColumns {
    pub fn new(settings: &ExportSettings) -> Self {
        let probe = Encoder::new(
            settings.format,
            Syntax::Csv,
            &DatasetHeader::default(),
            Vec::new(),
            settings.column_map.clone(),
            true,
        );
        Self { probe, found: Vec::new() }
    }

    pub fn add(&mut self, cases: &[Case]) {
        self.probe.csv_columns(cases, &mut self.found);
    }

    /// The columns to write: first those of the source file (the header's
    /// `provenance.layout.columns`) that are used, in its order, then the others as found.
    pub fn ordered(self, header: &DatasetHeader) -> Vec<String> {
        let source_order: Vec<String> = header
            .provenance
            .as_ref()
            .and_then(|p| p.layout.get("columns"))
            .and_then(|c| c.as_array())
            .map(|c| c.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let mut ordered: Vec<String> = source_order.into_iter().filter(|c| self.found.contains(c)).collect();
        let rest: Vec<String> = self.found.into_iter().filter(|c| !ordered.contains(c)).collect();
        ordered.extend(rest);
        ordered
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exported {
    /// Cases handed over.
    pub cases: u64,
    /// Cases written (those refused are not).
    pub written: u64,
    /// Errors and warnings over the whole export, those of [`Exported::diagnostics`] included.
    pub errors: u64,
    pub warnings: u64,
    /// What the end found: an empty dataset in a format that needs cases.
    pub diagnostics: Vec<Diagnostic>,
}

/// Writes one dataset version: [`Exporter::begin`], then its cases in order with
/// [`Exporter::cases`] or [`Exporter::bodies`], then [`Exporter::finish`]. An export with
/// errors has written an output that must not be kept (refused cases are missing from it).
pub struct Exporter<'w> {
    settings: ExportSettings,
    encoder: Encoder,
    writer: Writer<'w>,
    summary: Exported,
    drafts: Drafts,
    /// Each field the format could not hold, with the cases that held it.
    lost: std::collections::BTreeMap<String, u64>,
}

/// The distinct fields [`Exporter::lost_fields`] counts at most; others are counted under
/// [`OTHER_FIELDS`].
const LOST_FIELDS: usize = 200;
/// Where [`Exporter::lost_fields`] counts the fields beyond the first [`LOST_FIELDS`].
pub const OTHER_FIELDS: &str = "(other fields)";

impl<'w> Exporter<'w> {
    /// `header` is the dataset's; `columns` the CSV columns ([`CsvColumns::ordered`], ignored
    /// for other syntaxes). Files that go beside the output (a mas-lab manifest's items file,
    /// seed files) go to `beside`; without one, a manifest holds its items and seed files go
    /// inline.
    pub fn new(
        settings: ExportSettings,
        header: &DatasetHeader,
        columns: Vec<String>,
        out: Box<dyn Write + Send + 'w>,
        beside: Option<Box<dyn Beside + Send + 'w>>,
    ) -> Result<Self, ExportError> {
        if settings.format == Format::Csv && settings.column_map.is_none() {
            return Err(ExportError::NoColumnMap);
        }
        if !settings.format.syntaxes().contains(&settings.syntax) {
            return Err(ExportError::Syntax { format: settings.format, syntax: settings.syntax });
        }
        let seed_files = match (&settings.seed_files, &beside) {
            (SeedFiles::Write, None) => SeedFiles::Inline,
            (seed_files, _) => seed_files.clone(),
        };
        let encoder = Encoder::new(
            settings.format,
            settings.syntax,
            header,
            columns,
            settings.column_map.clone(),
            settings.lossy,
        )
        .with_files(header, seed_files, beside.is_some())
        .confirming_drafts(settings.confirm_drafts);
        let mut writer = Writer::new(out, &encoder, header)?;
        if let Some(beside) = beside {
            writer = writer.with_beside(beside);
        }
        Ok(Self {
            settings,
            encoder,
            writer,
            summary: Exported::default(),
            drafts: Drafts::default(),
            lost: Default::default(),
        })
    }

    /// Whether the cases are best handed over as bodies ([`ExportSettings::takes_bodies`]).
    pub fn takes_bodies(&self) -> bool {
        self.settings.takes_bodies()
    }

    /// Writes what goes before the cases (a document's opening, a CSV header).
    pub fn begin(&mut self) -> io::Result<()> {
        self.writer.begin()
    }

    /// Writes cases given as their native JSON (a stored body, a page of a pull), one line each
    /// as `serde_json` writes them. Native JSONL takes them as they are; other formats read
    /// them into cases first.
    pub fn bodies(&mut self, bodies: &[String]) -> Result<Vec<Diagnostic>, ExportError> {
        if !self.settings.takes_bodies() {
            let cases = bodies
                .iter()
                .map(|body| serde_json::from_str::<Case>(body))
                .collect::<Result<Vec<_>, _>>()
                .map_err(ExportError::Body)?;
            return Ok(self.cases(&cases)?);
        }
        let mut bytes = Vec::with_capacity(bodies.iter().map(|b| b.len() + 1).sum());
        for body in bodies {
            bytes.extend_from_slice(body.as_bytes());
            bytes.push(b'\n');
        }
        self.summary.cases += bodies.len() as u64;
        self.summary.written += bodies.len() as u64;
        self.writer.write(&Encoded { bytes, written: bodies.len(), ..Encoded::default() })?;
        Ok(Vec::new())
    }

    /// Writes cases, and says which of them the format cannot hold (an error, or with `lossy`
    /// a warning for what was dropped) or lacked what it requires (an error: not written).
    pub fn cases(&mut self, cases: &[Case]) -> io::Result<Vec<Diagnostic>> {
        let encoded = self.encoder.encode(cases);
        let (format, lossy) = (self.settings.format, self.settings.lossy);
        let mut diagnostics = Vec::with_capacity(encoded.lost.len() + encoded.missing.len());
        for (i, fields) in &encoded.lost {
            for field in fields {
                let known = self.lost.contains_key(field.as_ref()) || self.lost.len() < LOST_FIELDS;
                let name = if known { field.as_ref() } else { OTHER_FIELDS };
                *self.lost.entry(name.to_owned()).or_default() += 1;
            }
            let code = if lossy { Code::Dropped } else { Code::Unrepresentable };
            diagnostics.push(Diagnostic {
                severity: code.severity(),
                code,
                message: format!(
                    "case `{}` has what `{format}` cannot hold: {}",
                    excerpt(&cases[*i].id),
                    fields.join(", ")
                ),
                file: self.settings.place.clone(),
                line: 0,
                column: 0,
                pointer: Some(String::new()),
                path: None,
                hint: (!lossy).then(|| "export to a format that holds these fields, or pass `--lossy`".into()),
                case: None,
                line_offset: None,
            });
        }
        for i in &encoded.drafts {
            self.drafts.add(&cases[*i].id);
        }
        for (i, missing) in &encoded.missing {
            let (message, hint) = refusal(format, &cases[*i].id, missing, "export");
            diagnostics.push(place_diagnostic(&self.settings.place, Code::MissingField, message, hint));
        }
        for d in &diagnostics {
            if d.is_error() {
                self.summary.errors += 1;
            } else {
                self.summary.warnings += 1;
            }
        }
        self.summary.cases += cases.len() as u64;
        self.summary.written += encoded.written as u64;
        self.writer.write(&encoded)?;
        Ok(diagnostics)
    }

    /// The fields written so far that the format cannot hold (dropped with `lossy`, refused
    /// without), each with how many cases held it: at most 200, then [`OTHER_FIELDS`].
    pub fn lost_fields(&self) -> &std::collections::BTreeMap<String, u64> {
        &self.lost
    }

    /// The error for the cases refused so far because their expectations are drafts the
    /// format would write as confirmed ([`ExportSettings::confirm_drafts`]), if there are any:
    /// [`Exporter::finish`] reports it, and a caller that must answer before the whole version
    /// is written (the server, after its first page) may ask sooner.
    pub fn refused_drafts(&self) -> Option<Diagnostic> {
        let (message, hint) = self.drafts.refusal(self.settings.format)?;
        Some(place_diagnostic(&self.settings.place, Code::UnconfirmedDrafts, message, hint))
    }

    /// Ends the output (and writes the files beside it). An export that refused draft cases,
    /// or wrote no case in a format whose files must hold one, ends with an error diagnostic.
    pub fn finish(mut self) -> io::Result<Exported> {
        if let Some(refused) = self.refused_drafts() {
            self.summary.diagnostics.push(refused);
            self.summary.errors += 1;
        }
        self.writer.finish(None)?;
        let format = self.settings.format;
        if self.summary.cases == 0 && self.summary.errors == 0 && format.needs_cases() {
            let (message, hint) = empty_refusal(format, &format!("`{}`", self.settings.place), "export");
            let refused = place_diagnostic(&self.settings.place, Code::EmptyDataset, message, hint);
            self.summary.diagnostics.push(refused);
            self.summary.errors += 1;
        }
        Ok(self.summary)
    }
}

/// A diagnostic about the exported `place` as a whole, with a hint.
fn place_diagnostic(place: &str, code: Code, message: String, hint: String) -> Diagnostic {
    Diagnostic {
        severity: code.severity(),
        code,
        message,
        file: place.to_owned(),
        line: 0,
        column: 0,
        pointer: Some(String::new()),
        path: None,
        hint: Some(hint),
        case: None,
        line_offset: None,
    }
}
