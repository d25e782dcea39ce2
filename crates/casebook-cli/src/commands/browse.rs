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
            Ok(if settings.json { log_lines(&log) } else { log_text(&log) })
        });
    }
    stores::print(settings, |runtime, store| {
        let versions = runtime.block_on(store.versions(&args.name))?;
        let events = runtime.block_on(store.events(&args.name))?;
        let log = casebook_server::api::Log {
            versions: versions.into_iter().map(Into::into).collect(),
            events: events
                .into_iter()
                .map(|e| casebook_server::api::Event { time: e.time, author: e.author, kind: e.kind, detail: e.detail })
                .collect(),
        };
        Ok(if settings.json { log_lines(&log) } else { log_text(&log) })
    })
}

/// A dataset's log as `log --format json` prints it: one object a line, each with its `kind`:
/// the versions oldest first (`version`, with the version's fields), then the other events
/// (`tag`, `header`), as the server's log lists them.
fn log_lines(log: &casebook_server::api::Log) -> String {
    let mut out = String::new();
    for v in &log.versions {
        let mut line = json!({"kind": "version"});
        if let (Some(line), serde_json::Value::Object(fields)) = (line.as_object_mut(), json!(v)) {
            line.extend(fields);
        }
        let _ = writeln!(out, "{line}");
    }
    for e in &log.events {
        let _ = writeln!(out, "{}", json!(e));
    }
    out
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
                // People read the case indented; programs get it on one line.
                Some(case) if settings.json => serde_json::to_string(&case)? + "\n",
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
    // An existing file wins over a dataset of the same name, as in `cases`.
    let is_file = |side: &str| std::path::Path::new(side).is_file();
    if is_file(&args.from) || is_file(&args.to) {
        return diff_with_files(settings, &args.from, &args.to, &casebook_formats::ReadOptions::default());
    }
    print(settings, |runtime, source| {
        let (name_a, ref_a) = stores::target(&args.from)?;
        let (name_b, ref_b) = stores::target(&args.to)?;
        if name_a != name_b {
            anyhow::bail!("`diff` compares two versions of one dataset, not `{name_a}` with `{name_b}`");
        }
        let a = source.resolve(runtime, &name_a, &ref_a)?;
        let b = source.resolve(runtime, &name_b, &ref_b)?;
        let diff = source.diff(runtime, &name_a, a.number, b.number)?;
        Ok(if settings.json {
            diff_json(json!(name_a), json!(a.number), json!(b.number), &diff)
        } else {
            diff_text(&format!("{name_a} v{} → v{}", a.number, b.number), &diff)
        })
    })
}

/// `diff` where a side is a dataset file (`diff support@prod edited.jsonl`), and `commit
/// --dry-run`: both sides are read whole (files with `options`) and compared by case id, as the
/// store compares two versions.
pub fn diff_with_files(
    settings: &Global,
    from: &str,
    to: &str,
    options: &casebook_formats::ReadOptions,
) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let mut source = None;
    let mut dataset = serde_json::Value::Null;
    let mut side = |text: &str| -> anyhow::Result<Option<(serde_json::Value, String, Vec<casebook_model::Case>)>> {
        let path = std::path::Path::new(text);
        if path.is_file() {
            return Ok(match super::read_whole(settings, &super::input(path), options)? {
                Ok((cases, _)) => Some((json!(text), format!("`{text}`"), cases)),
                Err(errors) => {
                    stderr!("`{text}` has {}: `casebook validate {text}` lists them", crate::plural(errors, "error"));
                    None
                }
            });
        }
        let (name, reference) = stores::target(text)?;
        if source.is_none() {
            source = Some(Source::open(settings, &runtime)?);
        }
        let Some(source) = source.as_ref() else { unreachable!("opened above") };
        let version = source.resolve(&runtime, &name, &reference)?;
        dataset = json!(name);
        let mut cases = Vec::new();
        source.cases(&runtime, &name, version.number, &casebook_store::Select::default(), 1000, &mut |mut batch| {
            cases.append(&mut batch);
            true
        })?;
        Ok(Some((json!(version.number), format!("{name} v{}", version.number), cases)))
    };
    let (Some(a), Some(b)) = (side(from)?, side(to)?) else { return Ok(Outcome::Invalid) };
    let diff = cases_diff(&a.2, &b.2)?;
    crate::write_stdout(&if settings.json {
        diff_json(dataset, a.0, b.0, &diff)
    } else {
        diff_text(&format!("{} → {}", a.1, b.1), &diff)
    })?;
    if let Some(source) = source {
        source.tell(settings);
        source.close(&runtime);
    }
    Ok(Outcome::Ok)
}

/// What changed from the cases `old` to the cases `new`, by id, as [`Store::diff`] says it of two
/// versions: added, removed, modified (field by field, in the cases' native JSON) and moved (the
/// same content at another place among the cases both hold).
pub fn cases_diff(old: &[casebook_model::Case], new: &[casebook_model::Case]) -> anyhow::Result<casebook_store::Diff> {
    use std::collections::BTreeMap;
    let index = |cases: &[casebook_model::Case]| -> anyhow::Result<BTreeMap<String, serde_json::Value>> {
        cases.iter().map(|c| Ok((c.id.clone(), serde_json::to_value(c)?))).collect()
    };
    let (before, after) = (index(old)?, index(new)?);
    let mut diff = casebook_store::Diff {
        added: after.keys().filter(|id| !before.contains_key(*id)).cloned().collect(),
        removed: before.keys().filter(|id| !after.contains_key(*id)).cloned().collect(),
        ..casebook_store::Diff::default()
    };
    // Places among the cases both sides hold.
    let order =
        |cases: &[casebook_model::Case], other: &BTreeMap<String, serde_json::Value>| -> BTreeMap<String, usize> {
            cases.iter().filter(|c| other.contains_key(&c.id)).enumerate().map(|(i, c)| (c.id.clone(), i)).collect()
        };
    let (place_a, place_b) = (order(old, &after), order(new, &before));
    for (id, a) in &before {
        let Some(b) = after.get(id) else { continue };
        if a != b {
            let changes = casebook_store::field_changes(a, b);
            diff.modified.push(casebook_store::ModifiedCase { id: id.clone(), changes });
        } else if place_a.get(id) != place_b.get(id) {
            diff.moved.push(id.clone());
        }
    }
    Ok(diff)
}

/// The JSON form of a diff: one line a changed case, then a `summary` line with the dataset
/// (null when both sides are files), the sides compared (version numbers, or file names) and
/// the counts.
fn diff_json(
    dataset: serde_json::Value,
    from: serde_json::Value,
    to: serde_json::Value,
    diff: &casebook_store::Diff,
) -> String {
    let mut out = String::new();
    for id in &diff.added {
        let _ = writeln!(out, "{}", json!({"change": "added", "id": id}));
    }
    for id in &diff.removed {
        let _ = writeln!(out, "{}", json!({"change": "removed", "id": id}));
    }
    for m in &diff.modified {
        let _ = writeln!(out, "{}", json!({"change": "modified", "id": m.id, "changes": m.changes}));
    }
    for id in &diff.moved {
        let _ = writeln!(out, "{}", json!({"change": "moved", "id": id}));
    }
    let summary = json!({
        "dataset": dataset,
        "from": from,
        "to": to,
        "added": diff.added.len(),
        "removed": diff.removed.len(),
        "modified": diff.modified.len(),
        "moved": diff.moved.len(),
    });
    let _ = writeln!(out, "{}", json!({ "summary": summary }));
    out
}

/// The human form of a diff, under its title.
fn diff_text(title: &str, diff: &casebook_store::Diff) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{title}");
    for id in &diff.added {
        let _ = writeln!(out, "+ {id}");
    }
    for id in &diff.removed {
        let _ = writeln!(out, "- {id}");
    }
    for m in &diff.modified {
        let _ = writeln!(out, "~ {}", m.id);
        for c in &m.changes {
            let show = |v: &Option<serde_json::Value>| v.as_ref().map_or("(absent)".to_owned(), |v| v.to_string());
            let _ = writeln!(out, "    {}: {} → {}", c.pointer, show(&c.old), show(&c.new));
        }
    }
    for id in &diff.moved {
        let _ = writeln!(out, "↕ {id}");
    }
    if diff.added.is_empty() && diff.removed.is_empty() && diff.modified.is_empty() && diff.moved.is_empty() {
        out.push_str("no difference\n");
    }
    out
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
