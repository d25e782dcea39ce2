//! `casebook validate`: every problem in every file, exit 1 if any error.
//!
//! With `--where` / `--tag` / `--limit`, a subset: warnings are reported for the selected cases
//! only (a warning belongs to the case whose id is nearest above it), errors everywhere (a case
//! that cannot be read cannot be filtered, and a broken file is broken for every subset).

use casebook_formats::{Batch, Consumer, Flow, Start, read};

use crate::Outcome;
use crate::args::ValidateArgs;
use crate::progress::Progress;
use crate::report::Reporter;
use crate::settings::Global;

struct Printer<'a> {
    reporter: &'a mut Reporter,
    progress: &'a Progress,
    max_errors: Option<u64>,
    errors: &'a mut u64,
    cases: u64,
    /// Cases selected so far, when a subset is validated.
    selected: u64,
    /// Warnings reported.
    warnings: u64,
    limit: Option<u64>,
    subset: bool,
}

impl Consumer<Vec<bool>> for Printer<'_> {
    fn start(&mut self, _start: &Start) -> Flow {
        Flow::Continue
    }

    fn batch(&mut self, batch: &mut Batch, keep: &mut Vec<bool>) -> Flow {
        self.cases += batch.cases.len() as u64;
        self.progress.set(batch.end_offset, self.cases);
        // The limit: the cases after the last one wanted are not selected.
        for k in keep.iter_mut().filter(|k| **k) {
            if self.limit.is_some_and(|limit| self.selected >= limit) {
                *k = false;
            } else {
                self.selected += 1;
            }
        }
        let lines: Vec<u64> = batch.locs.iter().map(|l| l.line).collect();
        for d in &batch.diagnostics {
            if self.subset && !d.is_error() {
                // The case this warning is about: the nearest whose id is at or above it.
                let owner = lines.partition_point(|&line| line <= d.line).checked_sub(1);
                if owner.is_some_and(|i| !keep.get(i).copied().unwrap_or(true)) {
                    continue;
                }
            }
            if d.is_error() {
                if self.max_errors.is_some_and(|max| *self.errors >= max) {
                    return Flow::Stop;
                }
                *self.errors += 1;
            } else {
                self.warnings += 1;
            }
            self.reporter.emit(d);
        }
        if self.max_errors.is_some_and(|max| *self.errors >= max) { Flow::Stop } else { Flow::Continue }
    }
}

pub fn run(settings: &Global, args: ValidateArgs) -> anyhow::Result<Outcome> {
    for file in &args.files {
        super::check_exists(file)?;
        if file.is_dir() {
            anyhow::bail!(
                "`{}` is a folder: name its dataset files, e.g. `casebook validate {}/*.jsonl`",
                file.display(),
                file.display().to_string().trim_end_matches('/')
            );
        }
    }
    // Validating writes nothing: what an interruption leaves is an input not checked to its end.
    crate::output::on_interrupt("interrupted: the input was not checked to its end (validate writes nothing)");
    let mut reporter = Reporter::new(settings, false);
    let opts = super::read_options(&args.read);
    let select = crate::settings::selection(&args.select)?;
    let subset = select.filter.is_some() || select.limit.is_some();
    let filter = select.filter.as_ref();
    let work =
        |batch: &Batch| -> Vec<bool> { batch.cases.iter().map(|c| filter.is_none_or(|f| f.matches(c))).collect() };
    let mut selected = 0u64;
    let mut errors = 0u64;
    let mut totals = (0u64, 0u64);
    for file in &args.files {
        let input = super::input(file);
        let progress = Progress::for_file(settings, input.path.as_deref());
        let mut printer = Printer {
            reporter: &mut reporter,
            progress: &progress,
            max_errors: args.max_errors,
            errors: &mut errors,
            cases: 0,
            selected: 0,
            warnings: 0,
            limit: select.limit.map(|l| l.saturating_sub(selected)),
            subset,
        };
        let summary = read(&input, &opts, &work, &mut printer)?;
        selected += printer.selected;
        let _ = &summary;
        progress.finish();
        totals.0 += summary.cases;
        totals.1 += printer.warnings;
        if summary.stopped {
            if !settings.quiet {
                stderr!("stopped after {errors} errors (`--max-errors`)");
            }
            break;
        }
    }
    if !settings.quiet && !settings.json {
        let files = args.files.len();
        let cases =
            if subset { format!("{selected} of {} cases selected", totals.0) } else { crate::plural(totals.0, "case") };
        stderr!(
            "{} {files} file{}: {cases}, {errors} error{}, {} warning{}",
            if errors == 0 { "valid:" } else { "invalid:" },
            if files == 1 { "" } else { "s" },
            if errors == 1 { "" } else { "s" },
            totals.1,
            if totals.1 == 1 { "" } else { "s" },
        );
    }
    Ok(if errors > 0 { Outcome::Invalid } else { Outcome::Ok })
}
