//! `casebook store …`: looking after stores themselves: `check` one, `copy` one into another,
//! `gc` what nothing refers to.

use std::fmt::Write as _;

use anyhow::Context;
use casebook_store::AnyStore;

use crate::Outcome;
use crate::args::{CopyArgs, GcArgs};
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
        let waste = &report.unreferenced;
        if !waste.is_empty() {
            stderr!(
                "note: {} that nothing refers to ({}); `casebook store gc` removes them",
                unreferenced_list(waste),
                bytes(waste.bytes())
            );
        }
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

/// `casebook store gc`.
pub fn gc(settings: &Global, args: GcArgs) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    // Every project: what is shared (bodies, seed documents) may be named from any of them.
    let store =
        if args.dry_run { stores::open_all(settings, &runtime)? } else { stores::open_write(settings, &runtime)? };
    let progress = Progress::spinner(settings);
    progress.message(
        if args.dry_run { "counting what nothing refers to" } else { "removing what nothing refers to" }.to_owned(),
    );
    let report = runtime.block_on(store.gc(casebook_store::GcOptions { dry_run: args.dry_run, vacuum: args.vacuum }));
    progress.finish();
    runtime.block_on(store.close());
    let report = report?;
    let mut out = String::new();
    if settings.json {
        let _ = writeln!(out, "{}", serde_json::to_string(&report)?);
    } else {
        let removed = &report.removed;
        let what = if removed.is_empty() { "nothing".to_owned() } else { unreferenced_list(removed) };
        let verb = if report.dry_run { "would remove" } else { "removed" };
        let _ = writeln!(out, "{verb} {what} ({})", bytes(removed.bytes()));
        if let Some((before, after)) = report.file_bytes {
            let _ = writeln!(out, "store file: {} before, {} after", bytes(before), bytes(after));
        } else if let Some(free) = report.free_bytes.filter(|&free| free > 0 && !report.dry_run) {
            let _ = writeln!(
                out,
                "{} free inside the store file for later commits (`--vacuum` gives them back to the file system)",
                bytes(free)
            );
        }
    }
    crate::write_stdout(&out)?;
    Ok(Outcome::Ok)
}

/// `3 case bodies, 1 seed document and 2 run outputs` (kinds with none left out).
fn unreferenced_list(found: &casebook_store::Unreferenced) -> String {
    let parts: Vec<String> = [
        (found.bodies, "case body", "case bodies"),
        (found.seed_documents, "seed document", "seed documents"),
        (found.outputs, "run output", "run outputs"),
    ]
    .into_iter()
    .filter(|(n, ..)| *n > 0)
    .map(|(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
    .collect();
    match parts.as_slice() {
        [] => "nothing".to_owned(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A size as people read it: `512 bytes`, `3.2 KiB`, `41.0 MiB`, `1.2 GiB`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if n < 1024 {
        return crate::plural(n, "byte");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
