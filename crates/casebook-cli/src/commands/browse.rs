//! Commands that read the store, or with `CASEBOOK_URL` set the server: `datasets`, `log`,
//! `show`, `history`, `diff`, `export` (which hands the version's cases to
//! `casebook_formats::Exporter`).

use std::fmt::Write as _;

use casebook_formats::{CsvColumns, ExportError, ExportSettings, Exporter, Format, SeedFiles};
use casebook_model::{Diagnostic, excerpt};
use casebook_store::Store;
use serde_json::json;

use crate::Outcome;
use crate::args::{DatasetsArgs, DiffArgs, ExportArgs, HistoryArgs, LogArgs, ShowArgs};
use crate::output::Output;
use crate::remote::{Remote, segment};
use crate::report::Reporter;
use crate::settings::Global;
use crate::source::Source;
use crate::stores;

pub fn datasets(settings: &Global, _args: DatasetsArgs) -> anyhow::Result<Outcome> {
    if settings.on_server() {
        return on_server(settings, |runtime, remote| {
            let list: Vec<casebook_server::api::Dataset> = runtime
                .block_on(remote.get_json(&format!("/api/v1/projects/{}/datasets", segment(&remote.project))))?;
            let rows = list.iter().map(|d| (d.name.as_str(), d.head, d.cases, d.header.get("description").cloned()));
            Ok(datasets_text(settings, rows.collect()))
        });
    }
    stores::print(settings, |runtime, store| {
        let list = runtime.block_on(store.datasets())?;
        let rows =
            list.iter().map(|d| (d.name.as_str(), d.head, d.cases, d.header.description.as_ref().map(|t| json!(t))));
        Ok(datasets_text(settings, rows.collect()))
    })
}

/// Runs `read` on the server `CASEBOOK_URL` names and prints what it returns, after saying on
/// stderr which server and project it is.
fn on_server(
    settings: &Global,
    read: impl FnOnce(&tokio::runtime::Runtime, &Remote) -> anyhow::Result<String>,
) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let remote = runtime.block_on(Remote::connect())?;
    let text = read(&runtime, &remote)?;
    crate::write_stdout(&text)?;
    if !settings.quiet && !settings.json {
        stderr!("(on the server at {}, project `{}`)", remote.url, remote.project);
    }
    Ok(Outcome::Ok)
}

/// The datasets as `datasets` prints them: name, head, cases, description.
fn datasets_text(settings: &Global, list: Vec<(&str, u64, u64, Option<serde_json::Value>)>) -> String {
    let mut out = String::new();
    if settings.json {
        for (name, head, cases, description) in &list {
            let _ =
                writeln!(out, "{}", json!({"name": name, "head": head, "cases": cases, "description": description}));
        }
    } else if list.is_empty() {
        out.push_str("no datasets yet: add one with `casebook import FILE`\n");
    } else {
        let width = list.iter().map(|d| d.0.len()).max().unwrap_or(4).max(4);
        let _ = writeln!(out, "{:<width$}  {:>5}  {:>9}", "name", "head", "cases");
        for (name, head, cases, _) in &list {
            let _ = writeln!(out, "{:<width$}  {:>5}  {:>9}", name, format!("v{head}"), cases);
        }
    }
    out
}

pub fn log(settings: &Global, args: LogArgs) -> anyhow::Result<Outcome> {
    if settings.on_server() {
        return on_server(settings, |runtime, remote| {
            let log: casebook_server::api::Log =
                runtime.block_on(remote.get_json(&remote.dataset_path(&args.name, "/versions")))?;
            Ok(if settings.json { format!("{}\n", serde_json::to_string(&log)?) } else { log_text(&log) })
        });
    }
    stores::print(settings, |runtime, store| {
        let versions = runtime.block_on(store.versions(&args.name))?;
        let events = runtime.block_on(store.events(&args.name))?;
        if settings.json {
            return Ok(format!("{}\n", json!({"versions": versions, "events": events})));
        }
        let log = casebook_server::api::Log {
            versions: versions.into_iter().map(Into::into).collect(),
            events: events
                .into_iter()
                .map(|e| casebook_server::api::Event { time: e.time, author: e.author, kind: e.kind, detail: e.detail })
                .collect(),
        };
        Ok(log_text(&log))
    })
}

/// A dataset's log as `log` prints it: the versions, newest first, then the other events.
fn log_text(log: &casebook_server::api::Log) -> String {
    let mut out = String::new();
    for v in log.versions.iter().rev() {
        let parent = v.parent.map_or("-".to_owned(), |p| format!("v{p}"));
        let _ = writeln!(
            out,
            "v{:<4} {}  parent {parent:<5} {}  {}  +{} -{} ~{}  {}  {}",
            v.number,
            &v.id[..12.min(v.id.len())],
            v.author,
            v.time,
            v.added,
            v.removed,
            v.modified,
            crate::plural(v.cases, "case"),
            v.message
        );
    }
    for e in &log.events {
        let detail = if e.kind == "header" { "dataset header edited".to_owned() } else { e.detail.clone() };
        let _ = writeln!(out, "{:<5} {}  {}  {detail}", e.kind, e.author, e.time);
    }
    out
}

/// Runs `read` on the store here or the server `CASEBOOK_URL` names (see [`Source`]), prints
/// what it returns, and says on stderr which server it read.
fn print(
    settings: &Global,
    read: impl FnOnce(&tokio::runtime::Runtime, &Source) -> anyhow::Result<String>,
) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let source = Source::open(settings, &runtime)?;
    let text = read(&runtime, &source)?;
    crate::write_stdout(&text)?;
    source.tell(settings);
    source.close(&runtime);
    Ok(Outcome::Ok)
}

pub fn show(settings: &Global, args: ShowArgs) -> anyhow::Result<Outcome> {
    let (name, reference) = stores::target(&args.target)?;
    print(settings, |runtime, source| {
        let version = source.resolve(runtime, &name, &reference)?;
        let text = match &args.case {
            Some(id) => match source.case(runtime, &name, version.number, id)? {
                Some(case) => serde_json::to_string_pretty(&case)? + "\n",
                None => anyhow::bail!("`{name}` v{} has no case `{id}`", version.number),
            },
            None if settings.json => format!("{}\n", json!(version)),
            None => format!(
                "{name} v{}\nid       {}\nparent   {}\nauthor   {}\ntime     {}\ncases    {} (+{} -{} ~{})\nmessage  {}\n",
                version.number,
                version.id,
                version.parent.map_or("-".to_owned(), |p| format!("v{p}")),
                version.author,
                version.time,
                version.cases,
                version.added,
                version.removed,
                version.modified,
                version.message
            ),
        };
        Ok(text)
    })
}

/// `casebook history NAME CASE`: each content the case has had, as `git log -p` shows a file's:
/// the versions it was in, who made it, when and why, and its fields that changed from the
/// content before (JSON Pointer, old → new).
pub fn history(settings: &Global, args: HistoryArgs) -> anyhow::Result<Outcome> {
    print(settings, |runtime, source| {
        let revisions = source.history(runtime, &args.name, &args.case)?;
        if revisions.is_empty() {
            anyhow::bail!("`{}` never had a case `{}`", args.name, args.case);
        }
        let mut out = String::new();
        let mut previous: Option<serde_json::Value> = None;
        let mut last_to = None;
        for r in &revisions {
            // The case may have been removed, and added again later.
            if let Some(to) = last_to.filter(|to| *to != r.from_version) {
                let _ = writeln!(out, "removed in v{to}\n");
                previous = None;
            }
            let made = source.resolve(runtime, &args.name, &casebook_store::Ref::Number(r.from_version))?;
            let case = source.case(runtime, &args.name, r.from_version, &args.case)?;
            let body = serde_json::to_value(&case)?;
            let changes = previous.as_ref().map(|before| casebook_store::field_changes(before, &body));
            let until = r.to_version.map_or_else(|| "head".to_owned(), |t| format!("v{}", t - 1));
            if settings.json {
                let entry = json!({
                    "from_version": r.from_version,
                    "to_version": r.to_version,
                    "content_id": r.content_id,
                    "author": made.author,
                    "time": made.time,
                    "message": made.message,
                    "changes": changes,
                    "case": body,
                });
                let _ = writeln!(out, "{entry}");
            } else {
                let _ = writeln!(out, "content {}  in v{}–{until}", &r.content_id[..12], r.from_version);
                let _ = writeln!(out, "  v{} by {} at {}: {}", r.from_version, made.author, made.time, made.message);
                match &changes {
                    None => {
                        let _ = writeln!(out, "  (added)");
                    }
                    Some(changes) => {
                        for c in changes {
                            let show = |v: &Option<serde_json::Value>| {
                                v.as_ref()
                                    .map_or_else(|| "(absent)".to_owned(), |v| excerpt(&v.to_string()).into_owned())
                            };
                            let _ = writeln!(out, "  {}: {} → {}", c.pointer, show(&c.old), show(&c.new));
                        }
                    }
                }
                out.push('\n');
            }
            previous = Some(body);
            last_to = r.to_version;
        }
        if let (Some(to), false) = (last_to, settings.json) {
            let _ = writeln!(out, "removed in v{to}");
        }
        Ok(out)
    })
}

pub fn diff(settings: &Global, args: DiffArgs) -> anyhow::Result<Outcome> {
    print(settings, |runtime, source| {
        let (name_a, ref_a) = stores::target(&args.from)?;
        let (name_b, ref_b) = stores::target(&args.to)?;
        if name_a != name_b {
            anyhow::bail!("`diff` compares two versions of one dataset, not `{name_a}` with `{name_b}`");
        }
        let a = source.resolve(runtime, &name_a, &ref_a)?;
        let b = source.resolve(runtime, &name_b, &ref_b)?;
        let diff = source.diff(runtime, &name_a, a.number, b.number)?;
        let mut out = String::new();
        if settings.json {
            let _ = writeln!(out, "{}", json!({"from": a.number, "to": b.number, "diff": diff}));
        } else {
            let _ = writeln!(out, "{name_a} v{} → v{}", a.number, b.number);
            for id in &diff.added {
                let _ = writeln!(out, "+ {id}");
            }
            for id in &diff.removed {
                let _ = writeln!(out, "- {id}");
            }
            for m in &diff.modified {
                let _ = writeln!(out, "~ {}", m.id);
                for c in &m.changes {
                    let show =
                        |v: &Option<serde_json::Value>| v.as_ref().map_or("(absent)".to_owned(), |v| v.to_string());
                    let _ = writeln!(out, "    {}: {} → {}", c.pointer, show(&c.old), show(&c.new));
                }
            }
            for id in &diff.moved {
                let _ = writeln!(out, "↕ {id}");
            }
            if diff.added.is_empty() && diff.removed.is_empty() && diff.modified.is_empty() && diff.moved.is_empty() {
                out.push_str("no difference\n");
            }
        }
        Ok(out)
    })
}

pub fn export(settings: &Global, args: ExportArgs) -> anyhow::Result<Outcome> {
    let (name, reference) = stores::target(&args.target)?;
    let runtime = stores::runtime()?;
    let source = Source::open(settings, &runtime)?;
    let version = source.resolve(&runtime, &name, &reference)?;
    let header = source.header(&runtime, &name)?;
    let syntax = args.write.syntax().map_err(anyhow::Error::msg)?;
    let select = crate::settings::selection(&args.select)?;
    if let Some(out) = &args.write.output {
        crate::output::may_write(settings, out, &[], args.write.overwrite.overwrite)?;
    }
    if args.write.to == Format::Csv && args.map.is_none() {
        anyhow::bail!("writing the `csv` format needs a column map: `--map input=COLUMN,expected.output=COLUMN`");
    }
    let place = format!("{name}@v{}", version.number);
    let export = ExportSettings {
        format: args.write.to,
        syntax,
        column_map: args.map.clone(),
        lossy: args.write.lossy,
        // A stored version carries its seed files: they are written beside an output file.
        seed_files: if args.write.inline_seeds { SeedFiles::Inline } else { SeedFiles::Write },
        place: place.clone(),
        confirm_drafts: args.write.confirm_drafts,
    };
    // CSV needs its columns before the first row: a first pass over the version finds them.
    let mut columns = Vec::new();
    if export.needs_columns() {
        let mut scan = CsvColumns::new(&export);
        source.cases(&runtime, &name, version.number, &select, 4096, &mut |cases| {
            scan.add(&cases);
            true
        })?;
        columns = scan.ordered(&header);
    }
    crate::output::remove_on_signals();
    let (output, out) = Output::create(args.write.output.as_deref())?;
    let mut exporter = Exporter::new(export, &header, columns, out, output.beside())?;
    exporter.begin()?;
    let mut reporter = Reporter::new(settings, true);
    let mut io_error = None;
    // Prints a batch's diagnostics; a failed write stops the reading.
    let mut report = |diagnostics: std::io::Result<Vec<Diagnostic>>| match diagnostics {
        Ok(diagnostics) => {
            for d in &diagnostics {
                reporter.emit(d);
            }
            true
        }
        Err(err) => {
            io_error = Some(err);
            false
        }
    };
    let total = if exporter.takes_bodies() || matches!(source, Source::Server(_)) {
        // The stored body is the native JSON line: no need to read it into a case and back
        // (the exporter reads it into a case when its format needs one).
        source.bodies(&runtime, &name, version.number, &select, 4096, &mut |bodies| {
            report(exporter.bodies(&bodies).map_err(|err| match err {
                ExportError::Io(err) => err,
                other => std::io::Error::other(other),
            }))
        })?
    } else {
        source.cases(&runtime, &name, version.number, &select, 4096, &mut |cases| report(exporter.cases(&cases)))?
    };
    if let Some(err) = io_error {
        return Err(anyhow::Error::new(err).context("cannot write the output"));
    }
    let exported = exporter.finish()?;
    source.tell(settings);
    source.close(&runtime);
    for d in &exported.diagnostics {
        reporter.emit(d);
    }
    if exported.errors > 0 {
        return Ok(Outcome::Invalid);
    }
    output.keep()?;
    if !settings.quiet && !settings.json {
        stderr!("exported {} of {place} as {} ({})", crate::plural(total as u64, "case"), args.write.to, syntax.name());
    }
    Ok(Outcome::Ok)
}
