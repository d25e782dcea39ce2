//! `casebook lint`: the hygiene warnings of `casebook_lint` over dataset files or stored
//! versions, with the errors that keep a file from being read. Exit 0 with warnings, 1 with
//! errors, or with warnings under `--deny warnings`.
//!
//! Files are read by `casebook_formats::read`, the cases' facts (fingerprints, leaks) made on
//! its worker threads; a stored version is read in batches of bodies. `--against` is read first,
//! into fingerprints only.

use std::collections::BTreeMap;
use std::path::Path;

use casebook_formats::{Batch, Consumer, Flow, Format, ReadOptions, Start, read};
use casebook_lint::{Against, Facts, Linter, Options, Place};
use casebook_model::{Case, Diagnostic};
use casebook_store::{AnyStore, Select, Store};

use crate::Outcome;
use crate::args::{Deny, LintArgs};
use crate::progress::Progress;
use crate::report::Reporter;
use crate::settings::Global;
use crate::stores;

pub fn run(settings: &Global, args: LintArgs) -> anyhow::Result<Outcome> {
    let options = Options { min_confidence: args.min_confidence };
    let read_options = super::read_options(&args.read);
    let mut store = LazyStore::default();
    let mut reporter = Reporter::new(settings, false);
    let mut tally = Tally::default();
    let against = match &args.against {
        None => None,
        Some(source) => {
            let mut other = Against::new(source.clone());
            let errors = visit(settings, source, &read_options, &mut store, &mut |event| match event {
                Event::Case(case, facts, _) => other.add(case, &facts),
                Event::Diagnostic(d) if d.is_error() => reporter.emit(&d),
                Event::Source(name) => other = Against::new(name),
                Event::Diagnostic(_) | Event::File(_) | Event::Format(_) => {}
            })?;
            if errors > 0 {
                if !settings.quiet {
                    stderr!("nothing was linted: `--against {source}` has {errors} error{}", plural(errors));
                }
                return Ok(Outcome::Invalid);
            }
            Some(other)
        }
    };
    for source in &args.sources {
        let mut linter = Linter::new(source.clone(), options.clone(), against.as_ref());
        let mut found = Vec::new();
        let mut emit = |d: &Diagnostic, tally: &mut Tally| {
            if !args.allow.contains(&d.code) {
                tally.count(d);
                reporter.emit(d);
            }
        };
        let cases = visit(settings, source, &read_options, &mut store, &mut |event| match event {
            Event::Source(name) | Event::File(name) => linter.set_file(name),
            // A file's diagnostics point into its records too, as its format names their fields.
            Event::Format(format) => linter.set_source(Some(Box::new(move |case: &Case, path: &str| {
                casebook_formats::source_pointer(format, case, path)
            }))),
            Event::Case(case, facts, place) => {
                tally.cases += 1;
                linter.add(case, facts, place, &mut found);
                found.drain(..).for_each(|d| emit(&d, &mut tally));
            }
            Event::Diagnostic(d) => emit(&d, &mut tally),
        });
        if let Err(err) = cases {
            store.close();
            return Err(err);
        }
        let skipped = linter.finish(&mut found);
        found.iter().for_each(|d| emit(d, &mut tally));
        if !settings.quiet {
            skipped.iter().for_each(|note| stderr!("note: {note}"));
        }
    }
    store.close();
    if !settings.quiet && !settings.json {
        stderr!("{}", tally.summary(args.sources.len()));
    }
    let denied = args.deny == Some(Deny::Warnings) && tally.warnings > 0;
    Ok(if tally.errors > 0 || denied { Outcome::Invalid } else { Outcome::Ok })
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// What was reported.
#[derive(Default)]
struct Tally {
    cases: u64,
    errors: u64,
    warnings: u64,
    by_code: BTreeMap<&'static str, u64>,
}

impl Tally {
    fn count(&mut self, d: &Diagnostic) {
        if d.is_error() {
            self.errors += 1;
        } else {
            self.warnings += 1;
        }
        *self.by_code.entry(d.code.as_str()).or_default() += 1;
    }

    /// `linted 2 datasets: 1000 cases, 0 errors, 3 warnings (W-duplicate-input 2, …)`.
    fn summary(&self, sources: usize) -> String {
        let codes: Vec<String> = self.by_code.iter().map(|(code, n)| format!("{code} {n}")).collect();
        let codes = if codes.is_empty() { String::new() } else { format!(" ({})", codes.join(", ")) };
        format!(
            "linted {sources} dataset{}: {} case{}, {} error{}, {} warning{}{codes}",
            if sources == 1 { "" } else { "s" },
            self.cases,
            plural(self.cases),
            self.errors,
            plural(self.errors),
            self.warnings,
            plural(self.warnings),
        )
    }
}

/// The store, opened the first time a source is not a file.
#[derive(Default)]
struct LazyStore(Option<(tokio::runtime::Runtime, AnyStore)>);

impl LazyStore {
    fn get(&mut self, settings: &Global, source: &str) -> anyhow::Result<&(tokio::runtime::Runtime, AnyStore)> {
        if self.0.is_none() {
            let runtime = stores::runtime()?;
            let store = stores::open(settings, &runtime)
                .map_err(|err| err.context(format!("`{source}` is neither a file nor a dataset in a store")))?;
            self.0 = Some((runtime, store));
        }
        self.0.as_ref().ok_or_else(|| anyhow::anyhow!("the store is not open"))
    }

    fn close(&mut self) {
        if let Some((runtime, store)) = self.0.take() {
            runtime.block_on(store.close());
        }
    }
}

/// What reading a source hands over, in order.
enum Event<'a> {
    /// How the source is named (a stored version: `NAME@v3`).
    Source(&'a str),
    /// The file the next cases come from, when it is not the source itself (a mas-lab items file).
    File(&'a str),
    /// The format of a file source, once it is known (a stored version has none).
    Format(Format),
    Case(&'a Case, Facts, Place),
    /// A problem reading the source.
    Diagnostic(Diagnostic),
}

/// Reads `source` (a file, `-`, or `NAME@REF`), handing over its cases with their facts.
/// Returns the number of errors read.
fn visit(
    settings: &Global,
    source: &str,
    options: &ReadOptions,
    store: &mut LazyStore,
    on: &mut dyn FnMut(Event<'_>),
) -> anyhow::Result<u64> {
    let path = Path::new(source);
    if source == "-" || path.is_file() {
        let input = super::input(path);
        let progress = Progress::for_file(settings, input.path.as_deref());
        let work = |batch: &Batch| -> Vec<Facts> { batch.cases.iter().map(Facts::of).collect() };
        let mut reader = FileReader { on, progress: &progress, display: input.display.clone(), cases: 0, errors: 0 };
        reader.on_source();
        read(&input, options, &work, &mut reader)?;
        progress.finish();
        return Ok(reader.errors);
    }
    if path.extension().is_some() && !source.contains('@') {
        // A missing file, most likely, rather than a dataset named like one.
        super::check_exists(path)?;
    }
    let (name, reference) = stores::target(source)?;
    let (runtime, store) = store.get(settings, source)?;
    let version = runtime.block_on(store.resolve(&name, &reference))?;
    on(Event::Source(&format!("{name}@v{}", version.number)));
    let progress = Progress::counting(settings, version.cases, false, "linting");
    runtime.block_on(store.cases(&name, version.number, &Select::all(), 1024, &mut |cases| {
        progress.add(cases.len() as u64);
        for case in &cases {
            on(Event::Case(case, Facts::of(case), Place::default()));
        }
        true
    }))?;
    progress.finish();
    Ok(0)
}

struct FileReader<'a> {
    on: &'a mut dyn FnMut(Event<'_>),
    progress: &'a Progress,
    display: String,
    cases: u64,
    errors: u64,
}

impl FileReader<'_> {
    fn on_source(&mut self) {
        (self.on)(Event::Source(&self.display));
    }
}

impl Consumer<Vec<Facts>> for FileReader<'_> {
    fn start(&mut self, start: &Start) -> Flow {
        (self.on)(Event::Format(start.format));
        Flow::Continue
    }

    fn batch(&mut self, batch: &mut Batch, facts: &mut Vec<Facts>) -> Flow {
        self.cases += batch.cases.len() as u64;
        self.progress.set(batch.end_offset, self.cases);
        (self.on)(Event::File(batch.file.as_deref().unwrap_or(&self.display)));
        // In file order: the problems reading found above a case, then the case's warnings.
        let mut problems = batch.diagnostics.drain(..).peekable();
        for ((case, loc), facts) in batch.cases.iter().zip(&batch.locs).zip(facts.drain(..)) {
            while let Some(d) = problems.next_if(|d| d.line < loc.line) {
                self.errors += u64::from(d.is_error());
                (self.on)(Event::Diagnostic(d));
            }
            let place = Place { line: loc.line, column: loc.column, line_offset: Some(loc.line_offset) };
            (self.on)(Event::Case(case, facts, place));
        }
        for d in problems {
            self.errors += u64::from(d.is_error());
            (self.on)(Event::Diagnostic(d));
        }
        Flow::Continue
    }
}
