//! `casebook validate`: every problem in every file, exit 1 if any error.

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
}

impl Consumer<()> for Printer<'_> {
    fn start(&mut self, _start: &Start) -> Flow {
        Flow::Continue
    }

    fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
        self.cases += batch.cases.len() as u64;
        self.progress.set(batch.end_offset, self.cases);
        for d in &batch.diagnostics {
            if d.is_error() {
                if self.max_errors.is_some_and(|max| *self.errors >= max) {
                    return Flow::Stop;
                }
                *self.errors += 1;
            }
            self.reporter.emit(d);
        }
        if self.max_errors.is_some_and(|max| *self.errors >= max) { Flow::Stop } else { Flow::Continue }
    }
}

pub fn run(settings: &Global, args: ValidateArgs) -> anyhow::Result<Outcome> {
    for file in &args.files {
        super::check_exists(file)?;
    }
    let mut reporter = Reporter::new(settings, false);
    let opts = super::read_options(&args.read);
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
        };
        let summary = read(&input, &opts, &|_: &Batch| (), &mut printer)?;
        progress.finish();
        totals.0 += summary.cases;
        totals.1 += summary.warnings;
        if summary.stopped {
            if !settings.quiet {
                eprintln!("stopped after {errors} errors (`--max-errors`)");
            }
            break;
        }
    }
    if !settings.quiet && !settings.json {
        let files = args.files.len();
        eprintln!(
            "{} {files} file{}: {} cases, {errors} error{}, {} warning{}",
            if errors == 0 { "valid:" } else { "invalid:" },
            if files == 1 { "" } else { "s" },
            totals.0,
            if errors == 1 { "" } else { "s" },
            totals.1,
            if totals.1 == 1 { "" } else { "s" },
        );
    }
    Ok(if errors > 0 { Outcome::Invalid } else { Outcome::Ok })
}
