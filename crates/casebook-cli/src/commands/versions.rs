//! Commands that write to the store: `init`, `import`, `commit`, `put`, `rm`, `review`, `tag`.
//! `import`, `commit` and `put` go through `casebook_store::ingest` (read on its own threads,
//! committed in one transaction, cancelled if the input has any error); `review` reads cases
//! from a version and commits them changed on top of it; this file reports what they say.

use std::path::Path;

use anyhow::Context;
use casebook_formats::{ReadOptions, Summary};
use casebook_store::{
    AnyStore, CommitMode, CommitOutcome, CommitRequest, FileSharing, IngestError, IngestEvent, IngestRequest, Location,
    Parent, Store, StoreError, VersionInfo, ingest,
};
use serde_json::json;

use crate::Outcome;
use crate::args::{CommitArgs, ImportArgs, InitArgs, PutArgs, ReviewArgs, ReviewState, RmArgs, TagArgs};
use crate::report::Reporter;
use crate::settings::Global;
use crate::stores;

pub fn init(settings: &Global, args: InitArgs) -> anyhow::Result<Outcome> {
    let location = stores::new_location(settings)?;
    let sharing = if args.shared_group { FileSharing::Group } else { FileSharing::Owner };
    if args.shared_group && matches!(location, Location::Postgres(_)) {
        anyhow::bail!("`--shared-group` is for a store file: a PostgreSQL store's access is granted in PostgreSQL");
    }
    let shown = stores::shown(&location);
    let runtime = stores::runtime()?;
    // Making or upgrading a PostgreSQL store waits for another command's upgrade: it says so.
    stores::tell_waits(settings);
    // An existing store is opened as it is (and brought up to date), never made again.
    let existed = match &location {
        Location::File(file) => file.is_file(),
        Location::Postgres(_) => {
            runtime.block_on(AnyStore::open(&location)).map(|s| runtime.block_on(s.close())).is_ok()
        }
    };
    let store = runtime
        .block_on(AnyStore::create_with(&location, sharing))
        .with_context(|| format!("cannot create a store in `{shown}`"))?;
    runtime.block_on(store.close());
    let what = if existed { "store already there" } else { "created an empty store" };
    if settings.json {
        crate::write_stdout(&format!("{}\n", json!({"store": shown, "created": !existed})))?;
    } else if !settings.quiet {
        crate::write_stdout(&format!("{what} in {shown}\n"))?;
    }
    // As `git init` inside a repository: the nested store is made, and the user told that it
    // now hides the parent's from here down.
    if let (false, None, Location::File(file)) = (existed, &settings.store, &location) {
        if let Some(parent) = stores::enclosing_store(file) {
            eprintln!(
                "note: this store is nested in the one at {}: commands run in this folder and below now use the \
new one; `--store {}` reaches the parent's",
                parent.display(),
                parent.display()
            );
        }
    }
    Ok(Outcome::Ok)
}

pub fn import(settings: &Global, args: ImportArgs) -> anyhow::Result<Outcome> {
    let message = args.message.unwrap_or_else(|| format!("import {}", args.file.display()));
    commit_file(
        settings,
        &args.file,
        &super::read_options(&args.read),
        Dataset::Import(args.dataset),
        CommitMode::Replace,
        message,
        Parent::Head,
    )
}

pub fn commit(settings: &Global, args: CommitArgs) -> anyhow::Result<Outcome> {
    if args.dry_run {
        // What the commit would change: the diff from the version it would build on.
        let base = format!("{}@{}", args.name, args.parent.as_deref().unwrap_or("latest"));
        let file = args.file.display().to_string();
        return super::browse::diff_with_files(settings, &base, &file, &super::read_options(&args.read), true);
    }
    let message = args.message.unwrap_or_else(|| format!("commit {}", args.file.display()));
    let parent = match &args.parent {
        Some(text) => Parent::Given(text.parse().map_err(|e: String| anyhow::anyhow!(e))?),
        None => Parent::Head,
    };
    commit_file(
        settings,
        &args.file,
        &super::read_options(&args.read),
        Dataset::AddTo(args.name),
        CommitMode::Replace,
        message,
        parent,
    )
}

pub fn put(settings: &Global, args: PutArgs) -> anyhow::Result<Outcome> {
    let message = args.message.unwrap_or_else(|| format!("put {}", args.file.display()));
    commit_file(
        settings,
        &args.file,
        &super::read_options(&args.read),
        Dataset::AddTo(args.name),
        CommitMode::Upsert,
        message,
        Parent::Any,
    )
}

pub fn rm(settings: &Global, args: RmArgs) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let place = stores::described(&store);
    // As `review`: an id the head lacks is an error that names it, and nothing is written
    // (removing it would change nothing, and a typo should not pass for a removal).
    if let Err(err) = runtime.block_on(check_cases_exist(&store, &args.name, &args.ids)) {
        runtime.block_on(store.close());
        return Err(err);
    }
    let message = args.message.unwrap_or_else(|| format!("rm {}", args.ids.join(" ")));
    let request = CommitRequest {
        dataset: args.name,
        header: None,
        mode: CommitMode::Remove(args.ids),
        parent: None,
        author: settings.author.clone(),
        time: settings.time.clone(),
        message,
    };
    let (_tx, rx) = tokio::sync::mpsc::channel(1);
    let outcome = runtime.block_on(store.commit(request, rx));
    runtime.block_on(store.close());
    report_commit(settings, outcome, None, &place)
}

/// Cases a commit of `review` hands the store at a time.
const REVIEW_BATCH: usize = 4096;

pub fn review(settings: &Global, args: ReviewArgs) -> anyhow::Result<Outcome> {
    let select = crate::settings::selection(&args.select)?;
    let reference = match &args.parent {
        Some(text) => text.parse().map_err(|e: String| anyhow::anyhow!(e))?,
        None => casebook_store::Ref::Latest,
    };
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let place = stores::described(&store);
    let changed = runtime.block_on(reviewed_cases(&store, &args, &select, &reference));
    let (base, cases) = match changed {
        Ok(found) => found,
        Err(err) => {
            runtime.block_on(store.close());
            return Err(err);
        }
    };
    let review = args.state.map(|state| match state {
        ReviewState::Draft => casebook_model::Review::Draft,
        ReviewState::Reviewed => casebook_model::Review::Reviewed,
        ReviewState::Rejected => casebook_model::Review::Rejected,
    });
    let count = cases.len();
    let prepared: Result<Vec<_>, StoreError> = cases
        .into_iter()
        .map(|mut case| {
            if review.is_some() {
                case.review = review;
            }
            if args.confidence.is_some() {
                case.confidence = args.confidence;
            }
            casebook_store::prepare(&case)
        })
        .collect();
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(err) => {
            runtime.block_on(store.close());
            return Err(err.into());
        }
    };
    let message = args.message.clone().unwrap_or_else(|| review_message(count, args.state, args.confidence));
    let request = CommitRequest {
        dataset: args.name.clone(),
        header: None,
        mode: CommitMode::Upsert,
        // On the version the cases were read from: a commit made meanwhile is a conflict, not
        // an update lost.
        parent: Some(base),
        author: settings.author.clone(),
        time: settings.time.clone(),
        message,
    };
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let outcome = runtime.block_on(async {
        let send = async move {
            let mut prepared = prepared.into_iter().peekable();
            while prepared.peek().is_some() {
                let batch: Vec<_> = prepared.by_ref().take(REVIEW_BATCH).collect();
                if tx.send(Ok(batch)).await.is_err() {
                    break;
                }
            }
        };
        tokio::join!(store.commit(request, rx), send).0
    });
    runtime.block_on(store.close());
    report_commit(settings, outcome, None, &place)
}

/// The version `review` builds on, and the cases it changes: those `args.ids` name and those
/// `select` selects (`--where`, `--tag`, at most `--limit` of them), in the version's order,
/// each once. An id the version lacks is an error that
/// names it (with the id it may be a typo of).
async fn reviewed_cases(
    store: &AnyStore,
    args: &ReviewArgs,
    select: &casebook_store::Select,
    reference: &casebook_store::Ref,
) -> anyhow::Result<(u64, Vec<casebook_model::Case>)> {
    let version = store.resolve(&args.name, reference).await?;
    let mut cases = Vec::new();
    let mut seen = std::collections::HashSet::new();
    if select.filter.is_some() {
        store
            .cases(&args.name, version.number, select, REVIEW_BATCH, &mut |batch| {
                for case in batch {
                    if seen.insert(case.id.clone()) {
                        cases.push(case);
                    }
                }
                true
            })
            .await?;
    }
    let mut missing = Vec::new();
    for id in &args.ids {
        if seen.contains(id) {
            continue;
        }
        match store.case(&args.name, version.number, id).await? {
            Some(case) => {
                seen.insert(id.clone());
                cases.push(case);
            }
            None => missing.push(id.as_str()),
        }
    }
    if !missing.is_empty() {
        return Err(no_such_cases(store, &args.name, version.number, &missing).await);
    }
    if cases.is_empty() {
        anyhow::bail!("`--where` selects no case of {} v{}: nothing was written", args.name, version.number);
    }
    Ok((version.number, cases))
}

/// Checks that the head of `dataset` has every case `ids` names.
async fn check_cases_exist(store: &AnyStore, dataset: &str, ids: &[String]) -> anyhow::Result<()> {
    let version = store.resolve(dataset, &casebook_store::Ref::Latest).await?;
    let mut missing = Vec::new();
    for id in ids {
        if store.case(dataset, version.number, id).await?.is_none() && !missing.contains(&id.as_str()) {
            missing.push(id.as_str());
        }
    }
    if missing.is_empty() { Ok(()) } else { Err(no_such_cases(store, dataset, version.number, &missing).await) }
}

/// The error for ids version `number` of `dataset` lacks: each named, with the id the first may
/// be a typo of.
async fn no_such_cases(store: &AnyStore, dataset: &str, number: u64, missing: &[&str]) -> anyhow::Error {
    // The ids there are, read only to say which one was meant.
    let mut known = Vec::new();
    let listed = store
        .bodies(dataset, number, &casebook_store::Select::all(), REVIEW_BATCH, &mut |bodies| {
            known.extend(bodies.iter().filter_map(|b| {
                serde_json::from_str::<serde_json::Value>(b).ok()?.get("id")?.as_str().map(str::to_owned)
            }));
            true
        })
        .await;
    if let Err(err) = listed {
        return err.into();
    }
    let refs: Vec<&str> = known.iter().map(String::as_str).collect();
    let hint = missing
        .first()
        .and_then(|first| casebook_model::did_you_mean(first, &refs))
        .map_or_else(String::new, |near| format!("; did you mean `{near}`?"));
    let named: Vec<String> = missing.iter().map(|id| format!("`{id}`")).collect();
    anyhow::anyhow!("{dataset} v{number} has no case {}{hint}: nothing was written", named.join(", "))
}

/// `review: 3 cases reviewed (confidence 0.9)`.
fn review_message(count: usize, state: Option<ReviewState>, confidence: Option<f64>) -> String {
    let cases = crate::plural(count as u64, "case");
    let state = state.map(|s| match s {
        ReviewState::Draft => "draft",
        ReviewState::Reviewed => "reviewed",
        ReviewState::Rejected => "rejected",
    });
    match (state, confidence) {
        (Some(state), Some(c)) => format!("review: {cases} {state} (confidence {c})"),
        (Some(state), None) => format!("review: {cases} {state}"),
        (None, Some(c)) => format!("review: confidence {c} on {cases}"),
        (None, None) => format!("review: {cases}"),
    }
}

pub fn tag(settings: &Global, args: TagArgs) -> anyhow::Result<Outcome> {
    if args.delete {
        return untag(settings, args);
    }
    if settings.on_server() {
        return tag_on_server(settings, args);
    }
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let (name, reference) = stores::target(&args.target)?;
    let version = runtime.block_on(store.resolve(&name, &reference))?;
    runtime.block_on(store.tag(&name, version.number, &args.tag, &settings.author, &settings.time))?;
    let place = stores::described(&store);
    runtime.block_on(store.close());
    crate::write_stdout(&if settings.json {
        format!("{}\n", json!({"dataset": name, "tag": args.tag, "version": version.number, "id": version.id}))
    } else {
        format!("{name}@{} is v{} ({})\n", args.tag, version.number, &version.id[..12])
    })?;
    stores::say_wrote(settings, &format!("tag {name}@{}", args.tag), &place);
    Ok(Outcome::Ok)
}

/// `tag --delete NAME TAG`: removes the tag, here or on the server `CASEBOOK_URL` names
/// (`DELETE …/tags/TAG`), and says which version it named.
fn untag(settings: &Global, args: TagArgs) -> anyhow::Result<Outcome> {
    let (name, reference) = stores::target(&args.target)?;
    if args.target.contains('@') {
        anyhow::bail!(
            "`tag --delete` names a dataset, not a version: `casebook tag --delete {name} {}` (the tag names {reference})",
            args.tag
        );
    }
    let runtime = stores::runtime()?;
    let said = |version: u64| {
        crate::write_stdout(&if settings.json {
            format!("{}\n", json!({"dataset": name, "tag": args.tag, "deleted": true, "version": version}))
        } else {
            format!("deleted tag {name}@{} (it named v{version})\n", args.tag)
        })
    };
    if settings.on_server() {
        use crate::remote::{Remote, segment};
        let remote = runtime.block_on(Remote::connect())?;
        let request = remote
            .request(reqwest::Method::DELETE, &remote.dataset_path(&name, &format!("/tags/{}", segment(&args.tag))));
        let tag: casebook_server::api::Tag = runtime.block_on(remote.json(request))?;
        said(tag.version)?;
        if !settings.quiet && !settings.json {
            stderr!("(on the server at {}, project `{}`)", remote.url, remote.project);
        }
    } else {
        let store = stores::open_write(settings, &runtime)?;
        let version = runtime.block_on(store.untag(&name, &args.tag, &settings.author, &settings.time))?;
        let place = stores::described(&store);
        runtime.block_on(store.close());
        said(version)?;
        stores::say_wrote(settings, &format!("the removal of tag {name}@{}", args.tag), &place);
    }
    Ok(Outcome::Ok)
}

/// `tag` on the server `CASEBOOK_URL` names (`PUT …/tags/TAG`), saying so on stderr.
fn tag_on_server(settings: &Global, args: TagArgs) -> anyhow::Result<Outcome> {
    use crate::remote::{Remote, segment};
    let (name, _) = stores::target(&args.target)?;
    let reference = args.target.rsplit_once('@').map_or("latest", |(_, r)| r);
    let runtime = stores::runtime()?;
    let remote = runtime.block_on(Remote::connect())?;
    let request = remote
        .request(reqwest::Method::PUT, &remote.dataset_path(&name, &format!("/tags/{}", segment(&args.tag))))
        .json(&json!({"version": reference}));
    let tag: casebook_server::api::Tag = runtime.block_on(remote.json(request))?;
    let version: casebook_server::api::Version =
        runtime.block_on(remote.get_json(&remote.dataset_path(&name, &format!("/versions/v{}", tag.version))))?;
    crate::write_stdout(&if settings.json {
        format!("{}\n", json!({"dataset": name, "tag": args.tag, "version": version.number, "id": version.id}))
    } else {
        format!("{name}@{} is v{} ({})\n", args.tag, version.number, &version.id[..12.min(version.id.len())])
    })?;
    if !settings.quiet && !settings.json {
        stderr!("(on the server at {}, project `{}`)", remote.url, remote.project);
    }
    Ok(Outcome::Ok)
}

/// The dataset a file's cases are committed to.
enum Dataset {
    /// `import`'s: the one named (else the file's own name), made when new.
    Import(Option<String>),
    /// `commit`'s and `put`'s, which add to a dataset: a typo of a stored name is refused rather
    /// than made a new dataset.
    AddTo(String),
}

/// Commits `file`'s cases to `dataset`.
fn commit_file(
    settings: &Global,
    file: &Path,
    opts: &ReadOptions,
    dataset: Dataset,
    mode: CommitMode,
    message: String,
    parent: Parent,
) -> anyhow::Result<Outcome> {
    let (dataset, adds_to) = match dataset {
        Dataset::Import(name) => (name, false),
        Dataset::AddTo(name) => (Some(name), true),
    };
    super::check_exists(file)?;
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let place = stores::described(&store);
    // `commit` and `put` add to a dataset: a new name close to a stored one is a typo of it
    // (`import` is how a dataset is made).
    if let (Some(name), true) = (&dataset, adds_to) {
        if let Err(err) = runtime.block_on(store.header(name)) {
            if let Some(typo) = typo_of_a_dataset(&err) {
                runtime.block_on(store.close());
                return Err(typo);
            }
        }
    }
    let request = IngestRequest {
        input: super::input(file),
        options: opts.clone(),
        dataset,
        mode,
        parent,
        author: settings.author.clone(),
        time: settings.time.clone(),
        message,
    };
    let mut reporter = Reporter::new(settings, true);
    let events = Box::new(move |event: IngestEvent| {
        if let IngestEvent::Diagnostic(d) = event {
            reporter.emit(&d);
        }
    });
    // A commit is one transaction: interrupted, it leaves the store as it was.
    crate::output::on_interrupt("interrupted; nothing was written: the store is as it was");
    let ingested = runtime.block_on(ingest(&store, request, events));
    crate::output::on_interrupt("interrupted");
    // Closing checkpoints the write-ahead log into the database: the next command need not
    // read it, and the file alone holds the store.
    runtime.block_on(store.close());
    let ingested = match ingested {
        Ok(ingested) => ingested,
        Err(IngestError::Read(err)) => return Err(err.into()),
        Err(IngestError::NoName) => anyhow::bail!("name the dataset with `--dataset NAME`"),
        Err(IngestError::Unstorable(err)) => {
            stderr!("error: a case cannot be stored: {err}");
            return report_commit(settings, Err(StoreError::Cancelled), None, &place);
        }
        Err(IngestError::Store(err)) => return report_commit(settings, Err(err), None, &place),
        // (Local imports build on the head or a given version, never merge.)
        Err(err @ (IngestError::Reader | IngestError::Conflicts { .. })) => return Err(err.into()),
    };
    match ingested.outcome {
        Some(outcome) => {
            let ids = Summary {
                derived_ids: ingested.derived_ids,
                positional_ids: ingested.positional_ids,
                ..Summary::default()
            };
            if !settings.quiet
                && let Some(note) = ids.derived_ids_note()
            {
                stderr!("note: {note}");
            }
            report_commit(settings, Ok(outcome), Some(&ids), &place)
        }
        None => {
            if !settings.quiet {
                let errors = ingested.errors;
                stderr!(
                    "nothing was committed: `{}` has {errors} error{}",
                    file.display(),
                    if errors == 1 { "" } else { "s" }
                );
            }
            Ok(Outcome::Invalid)
        }
    }
}

/// The error for a command that adds to a dataset (`commit`, `put`, `commit --dry-run`) and names
/// one the store does not have, when the name is close to one it has (`err` says "did you mean");
/// `None` when the name is just new.
pub(super) fn typo_of_a_dataset(err: &StoreError) -> Option<anyhow::Error> {
    match err {
        StoreError::NoDataset(name, hint) if hint.starts_with("; did you mean") => Some(anyhow::anyhow!(
            "no dataset named `{name}`{hint} (to make a new dataset of that name: `casebook import FILE --dataset {name}`)"
        )),
        _ => None,
    }
}

/// Reports a commit to the store `place` names (`stores::described`); `ids` for a file's
/// (`import`, `commit`, `put`), whose JSON says how many ids were made for rows without one.
fn report_commit(
    settings: &Global,
    outcome: Result<CommitOutcome, StoreError>,
    ids: Option<&Summary>,
    place: &str,
) -> anyhow::Result<Outcome> {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(StoreError::Conflict { dataset, parent, head }) => {
            anyhow::bail!(
                "dataset `{dataset}` moved on while this commit was prepared: its head is v{head}, the commit was made on v{parent}; \
                 see what changed with `casebook diff {dataset}@v{parent} {dataset}@v{head}`, then commit again with `--parent v{head}`"
            )
        }
        Err(err) => return Err(err.into()),
    };
    let with_ids = |mut report: serde_json::Value| {
        if let Some(ids) = ids {
            report["derived_ids"] = json!(ids.derived_ids);
            report["positional_ids"] = json!(ids.positional_ids);
        }
        format!("{report}\n")
    };
    let text = match (&outcome, settings.json) {
        (CommitOutcome::Created(v), true) => with_ids(json!({"created": true, "version": v})),
        (CommitOutcome::Unchanged(v), true) => with_ids(json!({"created": false, "version": v})),
        (CommitOutcome::Created(v), false) => format!("{}\n", created_line(v)),
        (CommitOutcome::Unchanged(Some(v)), false) => {
            format!("no change: {} v{} ({}) already has this content\n", v.dataset, v.number, &v.id[..12])
        }
        (CommitOutcome::Unchanged(None), false) => "no change\n".to_owned(),
    };
    crate::write_stdout(&text)?;
    if let CommitOutcome::Created(v) = &outcome {
        stores::say_wrote(settings, &format!("{}@v{}", v.dataset, v.number), place);
    }
    Ok(Outcome::Ok)
}

pub(super) fn created_line(v: &VersionInfo) -> String {
    format!(
        "created {} v{} ({}): {}, +{} -{} ~{}",
        v.dataset,
        v.number,
        &v.id[..12],
        crate::plural(v.cases, "case"),
        v.added,
        v.removed,
        v.modified
    )
}
