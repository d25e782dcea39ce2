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

pub fn review(settings: &Global, args: ReviewArgs) -> anyhow::Result<Outcome> {
    let select = crate::settings::selection(&args.select)?;
    let base = args.parent.as_deref().unwrap_or("latest");
    let state = args.state.map(|state| match state {
        ReviewState::Draft => casebook_model::Review::Draft,
        ReviewState::Reviewed => casebook_model::Review::Reviewed,
        ReviewState::Rejected => casebook_model::Review::Rejected,
    });
    if settings.on_server() {
        return review_on_server(settings, &args, &select, base, state);
    }
    let request = casebook_store::ReviewRequest {
        dataset: args.name.clone(),
        base: base.parse().map_err(|e: String| anyhow::anyhow!(e))?,
        ids: args.ids.clone(),
        select: select.filter.is_some().then_some(select),
        review: state,
        confidence: args.confidence,
        labels: None,
        author: settings.author.clone(),
        time: settings.time.clone(),
        message: args.message.clone(),
    };
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let place = stores::described(&store);
    let outcome = runtime.block_on(casebook_store::review(&store, request)).map(|reviewed| reviewed.outcome);
    runtime.block_on(store.close());
    report_commit(settings, outcome, None, &place)
}

/// `review` with `CASEBOOK_URL` set: the server's review route does the same on its store.
fn review_on_server(
    settings: &Global,
    args: &ReviewArgs,
    select: &casebook_store::Select,
    base: &str,
    state: Option<casebook_model::Review>,
) -> anyhow::Result<Outcome> {
    use crate::remote::Remote;
    let runtime = stores::runtime()?;
    let remote = runtime.block_on(Remote::connect())?;
    let body = casebook_server::api::ReviewBody {
        ids: args.ids.clone(),
        filter: select.filter.as_ref().map(ToString::to_string),
        limit: select.limit,
        state,
        confidence: args.confidence,
        labels: None,
        base: Some(base.to_owned()),
        message: args.message.clone(),
    };
    let request = remote
        .request(reqwest::Method::POST, &remote.dataset_path(&args.name, "/review"))
        .header("x-casebook-author", &settings.author)
        .json(&body);
    let reviewed: casebook_server::api::ReviewReport = runtime.block_on(remote.json(request))?;
    let version = reviewed.version.into_info(&args.name);
    let outcome =
        if reviewed.created { CommitOutcome::Created(version) } else { CommitOutcome::Unchanged(Some(version)) };
    let place = format!("the server at {}, project `{}`", remote.url, remote.project);
    report_commit(settings, Ok(outcome), None, &place)
}

/// Checks that the head of `dataset` has every case `ids` names.
async fn check_cases_exist(store: &AnyStore, dataset: &str, ids: &[String]) -> anyhow::Result<()> {
    let version = store.resolve(dataset, &casebook_store::Ref::Latest).await?;
    let mut missing = Vec::new();
    for id in ids {
        if store.case(dataset, version.number, id).await?.is_none() && !missing.contains(id) {
            missing.push(id.clone());
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(casebook_store::no_such_cases(store, dataset, version.number, &missing).await.into())
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
    let tagged = runtime.block_on(store.tag(&name, version.number, &args.tag, &settings.author, &settings.time))?;
    let place = stores::described(&store);
    runtime.block_on(store.close());
    let unchanged = tagged == casebook_store::Tagged::Already;
    say_tagged(settings, &name, &args.tag, version.number, &version.id, unchanged)?;
    if !unchanged {
        stores::say_wrote(settings, &format!("tag {name}@{}", args.tag), &place);
    }
    Ok(Outcome::Ok)
}

/// What `casebook tag` prints: the version the tag names, and whether it named it already.
fn say_tagged(settings: &Global, name: &str, tag: &str, number: u64, id: &str, unchanged: bool) -> anyhow::Result<()> {
    let short = &id[..12.min(id.len())];
    crate::write_stdout(&if settings.json {
        format!("{}\n", json!({"dataset": name, "tag": tag, "version": number, "id": id, "unchanged": unchanged}))
    } else if unchanged {
        format!("{name}@{tag} is already v{number} ({short}): nothing changed\n")
    } else {
        format!("{name}@{tag} is v{number} ({short})\n")
    })?;
    Ok(())
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
            .request(reqwest::Method::DELETE, &remote.dataset_path(&name, &format!("/tags/{}", segment(&args.tag))))
            .header("x-casebook-author", &settings.author);
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
        .header("x-casebook-author", &settings.author)
        .json(&json!({"version": reference}));
    let tag: casebook_server::api::Tag = runtime.block_on(remote.json(request))?;
    let version: casebook_server::api::Version =
        runtime.block_on(remote.get_json(&remote.dataset_path(&name, &format!("/versions/v{}", tag.version))))?;
    say_tagged(settings, &name, &args.tag, version.number, &version.id, tag.unchanged)?;
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
