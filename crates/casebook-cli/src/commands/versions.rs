//! Commands that write to the store: `init`, `import`, `commit`, `put`, `rm`, `tag`. Reading the
//! input runs on its own threads (and prepares cases there); the commit consumes the prepared
//! batches in one transaction, and is cancelled if the input has any error.

use std::path::Path;

use anyhow::Context;
use casebook_formats::{Batch, Consumer, Flow, ReadOptions, Start, read};
use casebook_model::DatasetHeader;
use casebook_store::{
    AnyStore, CommitMode, CommitOutcome, CommitRequest, Location, Prepared, Store, StoreError, VersionInfo, prepare,
};
use serde_json::json;

use crate::Outcome;
use crate::args::{CommitArgs, ImportArgs, InitArgs, PutArgs, RmArgs, TagArgs};
use crate::report::Reporter;
use crate::settings::Global;
use crate::stores;

pub fn init(settings: &Global, _args: InitArgs) -> anyhow::Result<Outcome> {
    let location = stores::new_location(settings)?;
    let shown = stores::shown(&location);
    let runtime = stores::runtime()?;
    // An existing store is opened as it is (and brought up to date), never made again.
    let existed = match &location {
        Location::File(file) => file.is_file(),
        Location::Postgres(_) => {
            runtime.block_on(AnyStore::open(&location)).map(|s| runtime.block_on(s.close())).is_ok()
        }
    };
    let store =
        runtime.block_on(AnyStore::create(&location)).with_context(|| format!("cannot create a store in `{shown}`"))?;
    runtime.block_on(store.close());
    let what = if existed { "store already there" } else { "created an empty store" };
    crate::write_stdout(&if settings.json {
        format!("{}\n", json!({"store": shown, "created": !existed}))
    } else {
        format!("{what} in {shown}\n")
    })?;
    Ok(Outcome::Ok)
}

pub fn import(settings: &Global, args: ImportArgs) -> anyhow::Result<Outcome> {
    let message = args.message.unwrap_or_else(|| format!("import {}", args.file.display()));
    commit_file(
        settings,
        &args.file,
        &super::read_options(&args.read),
        args.dataset,
        CommitMode::Replace,
        message,
        Parent::Head,
    )
}

pub fn commit(settings: &Global, args: CommitArgs) -> anyhow::Result<Outcome> {
    let message = args.message.unwrap_or_else(|| format!("commit {}", args.file.display()));
    let parent = match &args.parent {
        Some(text) => Parent::Given(text.clone()),
        None => Parent::Head,
    };
    commit_file(
        settings,
        &args.file,
        &super::read_options(&args.read),
        Some(args.name),
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
        Some(args.name),
        CommitMode::Upsert,
        message,
        Parent::Any,
    )
}

pub fn rm(settings: &Global, args: RmArgs) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
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
    report_commit(settings, outcome)
}

pub fn tag(settings: &Global, args: TagArgs) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let (name, reference) = stores::target(&args.target)?;
    let version = runtime.block_on(store.resolve(&name, &reference))?;
    runtime.block_on(store.tag(&name, version.number, &args.tag, &settings.author, &settings.time))?;
    runtime.block_on(store.close());
    crate::write_stdout(&if settings.json {
        format!("{}\n", json!({"dataset": name, "tag": args.tag, "version": version.number, "id": version.id}))
    } else {
        format!("{name}@{} is v{} ({})\n", args.tag, version.number, &version.id[..12])
    })?;
    Ok(Outcome::Ok)
}

/// Which version a commit builds on.
enum Parent {
    /// The head as it is when the command starts (a commit made meanwhile is a conflict).
    Head,
    /// The one the user named.
    Given(String),
    /// Whatever the head is when the commit lands (`put`: it only adds and replaces).
    Any,
}

/// Batches of prepared cases (a reader's chunk each, a few hundred cases) the reader may be
/// ahead of the store by. Reading and storing take about as long as each other on a large
/// import, and with 4 each kept stopping to wait for the other: 32 took a million-case import
/// from 10.7 s to 9.4 s, for about 10 MB more memory.
const BATCHES_AHEAD: usize = 32;

/// Feeds the cases of a file to a commit, reporting the file's problems as it goes.
struct Feed {
    header: std::sync::mpsc::Sender<DatasetHeader>,
    batches: tokio::sync::mpsc::Sender<Result<Vec<Prepared>, ()>>,
    reporter: Reporter,
    errors: u64,
}

impl Consumer<Result<Vec<Prepared>, String>> for Feed {
    fn start(&mut self, start: &Start) -> Flow {
        let _ = self.header.send(start.header.clone());
        Flow::Continue
    }

    fn batch(&mut self, batch: &mut Batch, prepared: &mut Result<Vec<Prepared>, String>) -> Flow {
        for d in &batch.diagnostics {
            if d.is_error() {
                self.errors += 1;
            }
            self.reporter.emit(d);
        }
        let message = match (self.errors, std::mem::replace(prepared, Ok(Vec::new()))) {
            (0, Ok(cases)) => Ok(cases),
            (_, Err(err)) => {
                eprintln!("error: a case cannot be stored: {err}");
                Err(())
            }
            _ => Err(()),
        };
        let stop = message.is_err();
        if self.batches.blocking_send(message).is_err() || stop { Flow::Stop } else { Flow::Continue }
    }
}

fn commit_file(
    settings: &Global,
    file: &Path,
    opts: &ReadOptions,
    dataset: Option<String>,
    mode: CommitMode,
    message: String,
    parent: Parent,
) -> anyhow::Result<Outcome> {
    super::check_exists(file)?;
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let input = super::input(file);
    let (header_tx, header_rx) = std::sync::mpsc::channel();
    let (batch_tx, batch_rx) = tokio::sync::mpsc::channel(BATCHES_AHEAD);
    let reporter = Reporter::new(settings, true);
    let reader = {
        let input = input.clone();
        let opts = opts.clone();
        std::thread::spawn(move || -> anyhow::Result<u64> {
            let mut feed = Feed { header: header_tx, batches: batch_tx, reporter, errors: 0 };
            let work = |batch: &Batch| {
                batch.cases.iter().map(prepare).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
            };
            read(&input, &opts, &work, &mut feed)?;
            Ok(feed.errors)
        })
    };
    let header = match header_rx.recv() {
        Ok(header) => header,
        Err(_) => {
            // The reader stopped before the file's header: it says why.
            return match reader.join() {
                Ok(Err(err)) => Err(err),
                _ => Err(anyhow::anyhow!("cannot read `{}`", file.display())),
            };
        }
    };
    let name = match dataset.or_else(|| header.name.clone()) {
        Some(name) => name,
        None => anyhow::bail!("name the dataset with `--dataset NAME`"),
    };
    let parent = match parent {
        Parent::Any => None,
        Parent::Head => match runtime.block_on(store.resolve(&name, &casebook_store::Ref::Latest)) {
            Ok(head) => Some(head.number),
            Err(StoreError::NoDataset(..) | StoreError::NoVersion { .. }) => Some(0),
            Err(err) => return Err(err.into()),
        },
        Parent::Given(text) => {
            Some(runtime.block_on(store.resolve(&name, &text.parse().map_err(|e: String| anyhow::anyhow!(e))?))?.number)
        }
    };
    let mut header = header;
    header.name = Some(name.clone());
    let request = CommitRequest {
        dataset: name,
        header: Some(header),
        mode,
        parent,
        author: settings.author.clone(),
        time: settings.time.clone(),
        message,
    };
    let outcome = runtime.block_on(store.commit(request, batch_rx));
    // Closing checkpoints the write-ahead log into the database: the next command need not
    // read it, and the file alone holds the store.
    runtime.block_on(store.close());
    let errors = match reader.join() {
        Ok(result) => result?,
        Err(_) => anyhow::bail!("the reader thread failed"),
    };
    if errors > 0 {
        if !settings.quiet {
            eprintln!(
                "nothing was committed: `{}` has {errors} error{}",
                file.display(),
                if errors == 1 { "" } else { "s" }
            );
        }
        return Ok(Outcome::Invalid);
    }
    report_commit(settings, outcome)
}

fn report_commit(settings: &Global, outcome: Result<CommitOutcome, StoreError>) -> anyhow::Result<Outcome> {
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
    let text = match (&outcome, settings.json) {
        (CommitOutcome::Created(v), true) => format!("{}\n", json!({"created": true, "version": v})),
        (CommitOutcome::Unchanged(v), true) => format!("{}\n", json!({"created": false, "version": v})),
        (CommitOutcome::Created(v), false) => format!("{}\n", created_line(v)),
        (CommitOutcome::Unchanged(Some(v)), false) => {
            format!("no change: {} v{} ({}) already has this content\n", v.dataset, v.number, &v.id[..12])
        }
        (CommitOutcome::Unchanged(None), false) => "no change\n".to_owned(),
    };
    crate::write_stdout(&text)?;
    Ok(Outcome::Ok)
}

fn created_line(v: &VersionInfo) -> String {
    format!(
        "created {} v{} ({}): {} cases, +{} -{} ~{}",
        v.dataset,
        v.number,
        &v.id[..12],
        v.cases,
        v.added,
        v.removed,
        v.modified
    )
}
