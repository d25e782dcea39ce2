//! `casebook convert`: any format to any format, streaming. A failed conversion leaves no output
//! file (see `output.rs`).

use std::path::Path;

use anyhow::Context;
use casebook_formats::{Format, SeedFiles, Syntax, Target, convert, csv_columns};

use crate::Outcome;
use crate::args::ConvertArgs;
use crate::output::Output;
use crate::progress::Progress;
use crate::report::Reporter;
use crate::settings::Global;

pub fn run(settings: &Global, args: ConvertArgs) -> anyhow::Result<Outcome> {
    super::check_exists(&args.file)?;
    let input = super::input(&args.file);
    let opts = super::read_options(&args.read);
    let syntax = args.write.syntax().map_err(anyhow::Error::msg)?;
    if let Some(out) = &args.write.output {
        crate::output::may_write(settings, out, &[&args.file], args.write.overwrite.overwrite)?;
    }
    if args.write.to.format == Format::Csv && args.read.map.is_none() {
        anyhow::bail!("writing the `csv` format needs a column map: `--map input=COLUMN,expected.output=COLUMN`");
    }
    let seed_files = if args.write.inline_seeds {
        SeedFiles::Inline
    } else {
        // Seed paths are relative to the dataset file: from the output's folder (the current
        // one for standard output) they name the same files, or the seeds go inline.
        let folder = |p: &Path| p.parent().map(Path::to_owned).unwrap_or_default();
        SeedFiles::Relink { from: folder(&args.file), to: args.write.output.as_deref().map(folder).unwrap_or_default() }
    };
    let target = Target {
        format: args.write.to.format,
        syntax,
        lossy: args.write.lossy,
        column_map: args.read.map.clone(),
        seed_files,
        confirm_drafts: args.write.confirm_drafts,
    };
    let columns = if syntax == Syntax::Csv { csv_columns(&input, &opts, &target)? } else { Vec::new() };

    crate::output::remove_on_signals();
    let (output, out) = Output::create(args.write.output.as_deref())?;
    let beside = output.beside();
    let mut reporter = Reporter::new(settings, true);
    let progress = Progress::for_file(settings, input.path.as_deref());
    let mut on_batch = |diagnostics: &[casebook_model::Diagnostic], at: &casebook_formats::Progress| {
        progress.set(at.bytes, at.cases);
        for d in diagnostics {
            reporter.emit(d);
        }
    };
    let summary = convert(&input, &opts, &target, columns, out, beside, &mut on_batch).context("cannot convert")?;
    progress.finish();
    if summary.late_header_dropped && !settings.quiet {
        stderr!(
            "warning: `{}` has dataset header keys after its cases, which `{}` writes before them: they were not kept; \
             move them above the cases, or convert to casebook JSONL",
            input.display,
            args.write.to.format
        );
    }
    if summary.errors > 0 {
        if !settings.quiet && !settings.json {
            let errors = summary.errors;
            let place = args.write.output.as_ref().map_or_else(
                || "; nothing was written to standard output".to_owned(),
                |p| format!("; `{}` was not written", p.display()),
            );
            stderr!("conversion failed: {errors} error{}{place}", if errors == 1 { "" } else { "s" });
        }
        return Ok(Outcome::Invalid);
    }
    output.keep()?;
    if !settings.quiet && !settings.json {
        let to = args.write.output.as_ref().map_or("standard output".to_owned(), |p| format!("`{}`", p.display()));
        stderr!(
            "converted {} to {} ({}) on {to}",
            crate::plural(summary.written as u64, "case"),
            args.write.to.format,
            syntax.name()
        );
    }
    Ok(Outcome::Ok)
}
