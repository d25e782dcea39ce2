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
        let purged = source.warn_purged(settings, runtime, &name, version.number)?;
        let text = match &args.case {
            Some(id) if purged.iter().any(|p| &p.id == id) => {
                let p = &purged.iter().find(|p| &p.id == id).expect("found above").purge;
                anyhow::bail!(
                    "`{name}` v{}'s case `{id}` was purged on {} by {} ({}): its content is gone",
                    version.number,
                    p.time,
                    p.author,
                    p.reason
                )
            }
            Some(id) => match source.case(runtime, &name, version.number, id)? {
                // People read the case indented; programs get it on one line.
                Some(case) if settings.json => serde_json::to_string(&case)? + "\n",
                Some(case) => serde_json::to_string_pretty(&case)? + "\n",
                None => anyhow::bail!("`{name}` v{} has no case `{id}`", version.number),
            },
            None if settings.json && !purged.is_empty() => {
                let mut shown = json!(version);
                shown["purged"] = json!(purged);
                format!("{shown}\n")
            }
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
    if is_file(&args.old) || is_file(&args.new) {
        return diff_with_files(settings, &args.old, &args.new, &super::read_options(&args.read), false);
    }
    print(settings, |runtime, source| {
        let (name_a, ref_a) = stores::target(&args.old)?;
        let (name_b, ref_b) = stores::target(&args.new)?;
        if name_a != name_b {
            anyhow::bail!("`diff` compares two versions of one dataset, not `{name_a}` with `{name_b}`");
        }
        let a = source.resolve(runtime, &name_a, &ref_a)?;
        let b = source.resolve(runtime, &name_b, &ref_b)?;
        let diff = source.diff(runtime, &name_a, a.number, b.number)?;
        // Purged cases are in neither side's rows: said as purged, not as removed or changed.
        let mut purged = source.purged_in(runtime, &name_a, a.number)?;
        for p in source.purged_in(runtime, &name_a, b.number)? {
            if !purged.iter().any(|q| q.id == p.id) {
                purged.push(p);
            }
        }
        let mut out = if settings.json {
            diff_json(json!(name_a), json!(a.number), json!(b.number), &diff)
        } else {
            diff_text(&format!("{name_a} v{} → v{}", a.number, b.number), &diff)
        };
        for p in &purged {
            let (q, id) = (&p.purge, &p.id);
            let _ = if settings.json {
                writeln!(out, "{}", json!({"change": "purged", "id": id, "purge": q}))
            } else {
                writeln!(out, "! {id} (purged on {} by {}: {})", q.time, q.author, q.reason)
            };
        }
        Ok(out)
    })
}

/// `diff` where a side is a dataset file (`diff support@prod edited.jsonl`, files read with
/// `options`), and `commit --dry-run`: compared by case id, as the store compares two versions.
/// Neither side is held whole: the first is read once for its ids, content ids and places,
/// the second then streamed against them, keeping only the cases it changed, whose fields are
/// compared on a second read of the first side. With `new_dataset`, a first side naming a
/// dataset the store does not have is taken as empty (what a commit would create).
pub fn diff_with_files(
    settings: &Global,
    from: &str,
    to: &str,
    options: &casebook_formats::ReadOptions,
    new_dataset: bool,
) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let mut source = None;
    let mut dataset = serde_json::Value::Null;
    let mut new_note = None;
    let mut side = |text: &str, first: bool| -> anyhow::Result<DiffSide> {
        let path = std::path::Path::new(text);
        if path.is_file() {
            return Ok(DiffSide::File(text.to_owned()));
        }
        let (name, reference) = stores::target(text)?;
        if source.is_none() {
            source = Some(Source::open(settings, &runtime)?);
        }
        let Some(source) = source.as_ref() else { unreachable!("opened above") };
        dataset = json!(name);
        match source.resolve(&runtime, &name, &reference) {
            Ok(version) => Ok(DiffSide::Stored { name, number: version.number }),
            Err(err) if first && new_dataset => match err.downcast_ref::<casebook_store::StoreError>() {
                // As the commit would: a typo of a stored name is refused, a new name is made.
                Some(missing @ casebook_store::StoreError::NoDataset(..)) => {
                    if let Some(typo) = super::versions::typo_of_a_dataset(missing) {
                        return Err(typo);
                    }
                    new_note = Some(format!("no dataset named `{name}` yet"));
                    Ok(DiffSide::Nothing(name))
                }
                _ => Err(err),
            },
            Err(err) => Err(err),
        }
    };
    let (a, b) = (side(from, true)?, side(to, false)?);
    let each = |side: &DiffSide, f: &mut dyn FnMut(Vec<casebook_model::Case>)| -> anyhow::Result<bool> {
        match side {
            DiffSide::File(text) => super::each_case(settings, &super::input(std::path::Path::new(text)), options, f),
            DiffSide::Stored { name, number } => {
                let Some(source) = source.as_ref() else { unreachable!("opened for a stored side") };
                let select = casebook_store::Select::default();
                source.cases(&runtime, name, *number, &select, 1000, &mut |batch| {
                    f(batch);
                    true
                })?;
                Ok(true)
            }
            DiffSide::Nothing(_) => Ok(true),
        }
    };
    let diff = cases_diff(&mut |f| each(&a, f), &mut |f| each(&b, f));
    let diff = match diff {
        Ok(Some(diff)) => diff,
        Ok(None) => return Ok(Outcome::Invalid),
        Err(err) => return Err(err),
    };
    if let (Some(note), false) = (&new_note, settings.quiet) {
        stderr!("note: {note}: the commit would create it");
    }
    crate::write_stdout(&if settings.json {
        diff_json(dataset, a.json(), b.json(), &diff)
    } else {
        let mut text = diff_text(&format!("{} → {}", a.title(), b.title()), &diff);
        if let DiffSide::Nothing(name) = &a {
            let _ = writeln!(text, "would create {name} v1: {}", crate::plural(diff.added.len() as u64, "case"));
        }
        text
    })?;
    if let Some(source) = source {
        source.tell(settings);
        source.close(&runtime);
    }
    Ok(Outcome::Ok)
}

/// One side of a `diff` with a file.
enum DiffSide {
    File(String),
    Stored {
        name: String,
        number: u64,
    },
    /// A dataset not stored yet (`commit --dry-run` of a new one): no cases.
    Nothing(String),
}

impl DiffSide {
    /// How the side is named in the JSON summary: the file, the version number, or null.
    fn json(&self) -> serde_json::Value {
        match self {
            DiffSide::File(text) => json!(text),
            DiffSide::Stored { number, .. } => json!(number),
            DiffSide::Nothing(_) => serde_json::Value::Null,
        }
    }

    fn title(&self) -> String {
        match self {
            DiffSide::File(text) => format!("`{text}`"),
            DiffSide::Stored { name, number } => format!("{name} v{number}"),
            DiffSide::Nothing(name) => format!("{name} (not stored yet)"),
        }
    }
}

/// Hands a side's cases to the callback it is given, batch by batch; `Ok(false)` when it could
/// not be read whole (a file with errors, which were reported).
type EachCase<'a> = dyn FnMut(&mut dyn FnMut(Vec<casebook_model::Case>)) -> anyhow::Result<bool> + 'a;

/// What changed from the cases `old` hands over to those `new` does, by id, as [`Store::diff`]
/// says it of two versions: added, removed, modified (field by field, in the cases' native
/// JSON) and moved (the same content at another place among the cases both hold). Each list is
/// sorted by id. `old` is read twice (when cases were modified) and `new` once; what is held is
/// each old case's id, content id and place, and the new side's modified cases. `None` when a
/// side could not be read whole.
pub fn cases_diff(old: &mut EachCase<'_>, new: &mut EachCase<'_>) -> anyhow::Result<Option<casebook_store::Diff>> {
    use std::collections::{BTreeMap, HashMap};
    let content = |case: &casebook_model::Case| casebook_canon::content_id(casebook_canon::Kind::Case, case);
    // Old cases by id: content id, place among all old cases, seen on the new side.
    let mut before: HashMap<String, (String, usize, bool)> = HashMap::new();
    let mut failed: Option<anyhow::Error> = None;
    let read = old(&mut |batch| {
        for case in batch {
            match content(&case) {
                Ok(id) => {
                    let place = before.len();
                    before.entry(case.id).or_insert((id, place, false));
                }
                Err(err) => failed = Some(err.into()),
            }
        }
    })?;
    if !read {
        return Ok(None);
    }
    let mut diff = casebook_store::Diff::default();
    let mut added = std::collections::HashSet::new();
    let mut changed: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    // Cases both sides hold with the same content, in the new side's order, with their old places.
    let mut kept: Vec<(String, usize)> = Vec::new();
    let mut common = 0usize;
    let mut places_b: HashMap<String, usize> = HashMap::new();
    let read = new(&mut |batch| {
        for case in batch {
            let Some(entry) = before.get_mut(&case.id) else {
                if added.insert(case.id.clone()) {
                    diff.added.push(case.id);
                }
                continue;
            };
            if entry.2 {
                continue;
            }
            entry.2 = true;
            places_b.insert(case.id.clone(), common);
            common += 1;
            match content(&case) {
                Ok(id) if id == entry.0 => kept.push((case.id, entry.1)),
                Ok(_) => match serde_json::to_value(&case) {
                    Ok(value) => {
                        changed.insert(case.id, value);
                    }
                    Err(err) => failed = Some(anyhow::Error::from(err)),
                },
                Err(err) => failed = Some(err.into()),
            }
        }
    })?;
    if !read {
        return Ok(None);
    }
    if let Some(err) = failed.take() {
        return Err(err);
    }
    diff.removed = before.iter().filter(|(_, (_, _, seen))| !seen).map(|(id, _)| id.clone()).collect();
    // A kept case moved when its place among the common cases differs on the two sides.
    let mut old_places: Vec<usize> = before.values().filter(|(_, _, seen)| *seen).map(|(_, place, _)| *place).collect();
    old_places.sort_unstable();
    for (id, place) in kept {
        let rank = old_places.binary_search(&place).unwrap_or_default();
        if places_b.get(&id) != Some(&rank) {
            diff.moved.push(id);
        }
    }
    if !changed.is_empty() {
        let mut modified = Vec::new();
        let read = old(&mut |batch| {
            for case in batch {
                if let Some(new_value) = changed.remove(&case.id) {
                    match serde_json::to_value(&case) {
                        Ok(old_value) => {
                            let changes = casebook_store::field_changes(&old_value, &new_value);
                            modified.push(casebook_store::ModifiedCase { id: case.id, changes });
                        }
                        Err(err) => failed = Some(anyhow::Error::from(err)),
                    }
                }
            }
        })?;
        if !read {
            return Ok(None);
        }
        if let Some(err) = failed {
            return Err(err);
        }
        modified.sort_by(|a, b| a.id.cmp(&b.id));
        diff.modified = modified;
    }
    diff.added.sort_unstable();
    diff.removed.sort_unstable();
    diff.moved.sort_unstable();
    Ok(Some(diff))
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
    source.warn_purged(settings, &runtime, &name, version.number)?;
    let header = source.header(&runtime, &name)?;
    let syntax = args.write.syntax().map_err(anyhow::Error::msg)?;
    let select = crate::settings::selection(&args.select)?;
    if let Some(out) = &args.write.output {
        crate::output::may_write(settings, out, &[], args.write.overwrite.overwrite)?;
    }
    if args.write.to.format == Format::Csv && args.map.is_none() {
        anyhow::bail!("writing the `csv` format needs a column map: `--map input=COLUMN,expected.output=COLUMN`");
    }
    let place = format!("{name}@v{}", version.number);
    let export = ExportSettings {
        format: args.write.to.format,
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
        stderr!(
            "exported {} of {place} as {} ({})",
            crate::plural(total as u64, "case"),
            args.write.to.format,
            syntax.name()
        );
    }
    Ok(Outcome::Ok)
}
