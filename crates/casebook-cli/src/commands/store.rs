//! `casebook store …`: looking after stores themselves: `check` one, `copy` one into another.

use std::fmt::Write as _;

use anyhow::Context;
use casebook_store::AnyStore;

use crate::Outcome;
use crate::args::CopyArgs;
use crate::progress::Progress;
use crate::settings::Global;
use crate::stores;

/// `casebook store check`.
pub fn check(settings: &Global) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let store = stores::open(settings, &runtime)?;
    let report = runtime.block_on(store.check())?;
    runtime.block_on(store.close());
    let text = if settings.json {
        format!("{}\n", serde_json::to_string(&report)?)
    } else {
        let mut out = String::new();
        for problem in &report.problems {
            let _ = writeln!(out, "{problem}");
        }
        if report.more > 0 {
            let _ = writeln!(out, "… and {} more", report.more);
        }
        out
    };
    crate::write_stdout(&text)?;
    if !settings.quiet && !settings.json {
        let found = report.problems.len() as u64 + report.more;
        let seeds = match report.seed_documents {
            0 => String::new(),
            1 => ", 1 seed document".to_owned(),
            n => format!(", {n} seed documents"),
        };
        stderr!(
            "{}: {} case bodies{seeds} and {} versions checked, {found} problem{}",
            if found == 0 { "sound" } else { "damaged" },
            report.bodies,
            report.versions,
            if found == 1 { "" } else { "s" }
        );
        if report.moved > 0 {
            stderr!(
                "note: {} name an old place of their body (the table of bodies was rewritten): \
                 pages read those bodies by id, more slowly; the README says how to give them their new places",
                crate::plural(report.moved, "case row")
            );
        }
    }
    Ok(if report.problems.is_empty() { Outcome::Ok } else { Outcome::Invalid })
}

/// `casebook store copy FROM TO`.
pub fn copy(settings: &Global, args: CopyArgs) -> anyhow::Result<Outcome> {
    let (from, to) = (stores::named(&args.from), stores::named(&args.to));
    if from == to {
        anyhow::bail!("`{}` and `{}` are the same store: name two stores", stores::shown(&from), stores::shown(&to));
    }
    let runtime = stores::runtime()?;
    let source = runtime
        .block_on(AnyStore::open(&from))
        .with_context(|| format!("cannot open the store to copy from, `{}`", stores::shown(&from)))?;
    // The target is made if it is not there yet, as `init` makes one.
    let target = runtime
        .block_on(AnyStore::create(&to))
        .with_context(|| format!("cannot open or make the store to copy into, `{}`", stores::shown(&to)))?;
    if target.is_read_only() {
        return Err(casebook_store::StoreError::ReadOnly(target.name().into()).into());
    }
    // On a terminal, which version is being copied; the summary says what was.
    let progress = Progress::spinner(settings);
    let report = runtime.block_on(casebook_store::copy(&source, &target, &mut |name, number, head| {
        progress.message(format!("copied {name}@v{number} of v{head}"));
    }));
    progress.finish();
    runtime.block_on(source.close());
    runtime.block_on(target.close());
    let report = report.with_context(|| format!("the copy into `{}` stopped", stores::shown(&to)))?;
    let mut out = String::new();
    if settings.json {
        let _ = writeln!(out, "{}", serde_json::to_string(&report)?);
    } else {
        let plural = |n: u64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
        let _ = writeln!(
            out,
            "copied {} ({}) and {} into {}",
            plural(report.versions, "version"),
            plural(report.cases, "case"),
            plural(report.runs, "run"),
            stores::shown(&to)
        );
        if !report.up_to_date.is_empty() {
            let _ = writeln!(out, "already there: {}", report.up_to_date.join(", "));
        }
        if report.runs_present > 0 {
            let _ = writeln!(out, "runs already there: {}", report.runs_present);
        }
    }
    crate::write_stdout(&out)?;
    for tag in &report.old_tags {
        if !settings.quiet {
            stderr!(
                "warning: tag `{}` was copied under its old name, which a new tag may not have now: {}; \
                 `casebook tag` can give its version a name the rules allow",
                casebook_store::qualified(&tag.project, &tag.name),
                tag.why
            );
        }
    }
    for dataset in &report.refused {
        let project = match dataset.project.as_str() {
            casebook_store::DEFAULT_PROJECT => String::new(),
            project => format!(" --project {project}"),
        };
        stderr!(
            "error: dataset `{}` was not copied: a new dataset may not have its name now ({}); it is still in `{}`: \
             `casebook export '{}@latest' --store {}{project} --to casebook -o FILE` then \
             `casebook import FILE --dataset NEW_NAME --store {}{project}` copies its head under an allowed name",
            casebook_store::qualified(&dataset.project, &dataset.name),
            dataset.why,
            stores::shown(&from),
            dataset.name,
            stores::shown(&from),
            stores::shown(&to)
        );
    }
    if !report.diverged.is_empty() {
        stderr!(
            "error: left alone, their versions in `{}` differ from the source's: {} \
             (copy them into another store, or remove them there first)",
            stores::shown(&to),
            report.diverged.join(", ")
        );
        return Ok(Outcome::Invalid);
    }
    if !report.refused.is_empty() {
        return Ok(Outcome::Invalid);
    }
    Ok(Outcome::Ok)
}
