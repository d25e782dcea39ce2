//! Importing a dataset file into a store: the file is read on a thread of its own (its cases
//! prepared on the reader's workers) and the prepared batches are streamed over a channel to
//! [`Store::commit`], which makes one version in one transaction. The first error in the input
//! cancels the commit, so a file with errors writes nothing. The command line (`import`,
//! `commit`, `put`) and the server call [`ingest`] alike.

use casebook_formats::{Batch, Consumer, Flow, Input, ReadError, ReadOptions, Start, read};
use casebook_model::{DatasetHeader, Diagnostic};
use tokio::sync::{mpsc, oneshot};

use crate::merge::{Changes, Exceptions, Merged};
use crate::{AnyStore, CommitMode, CommitOutcome, CommitRequest, Prepared, Ref, Store, StoreError, prepare};

/// Which version a commit builds on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parent {
    /// The head as it is when the ingest starts (a commit made meanwhile is a
    /// [`StoreError::Conflict`]); the first version when the dataset has none.
    Head,
    /// The version this reference names (a conflict if it is not the head at commit time).
    Given(Ref),
    /// Whatever the head is when the commit lands (`put`: it only adds and replaces).
    Any,
    /// The head as it is when the ingest starts, keeping what changed there since the version
    /// this reference names (the input was made from it): the three-way rule of
    /// [`crate::Changes`]. Cases changed on both sides make [`IngestError::Conflicts`], and
    /// nothing is written. (With [`CommitMode::Upsert`], cases the input lacks are untouched.)
    /// The [`Exceptions`] are cases the input was made with other content than that version's.
    Merge(Ref, Exceptions),
}

/// What to read and how to commit it.
#[derive(Debug, Clone)]
pub struct IngestRequest {
    /// The file to read. Diagnostics name it by `input.display`, so a caller that reads a
    /// temporary copy can show the original's name there; the syntax comes from the path's
    /// extension unless `options.syntax` says it.
    pub input: Input,
    pub options: ReadOptions,
    /// The dataset to commit to; `None` takes the name the file's header gives (for a file
    /// without one, the stem of `input.display`).
    pub dataset: Option<String>,
    pub mode: CommitMode,
    pub parent: Parent,
    pub author: String,
    /// RFC 3339.
    pub time: String,
    pub message: String,
}

/// What [`ingest`] reports while it reads, from the reader's thread.
#[derive(Debug, Clone, PartialEq)]
pub enum IngestEvent {
    /// A problem in the input, in file order. Reading stops after the first batch with an error.
    Diagnostic(Diagnostic),
    /// Cases read so far, after each batch.
    Progress { cases: u64 },
}

/// What an ingest did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingested {
    /// What the commit did; `None` when the input had errors, and nothing was committed.
    pub outcome: Option<CommitOutcome>,
    /// Errors and warnings in the input (those reported before reading stopped).
    pub errors: u64,
    pub warnings: u64,
    /// The dataset committed to (given, or named by the file).
    pub dataset: String,
    /// Cases whose rows had no id, named from their content, and how many of those are wholly
    /// identical to an earlier row and numbered by their place ([`casebook_formats::Summary`]).
    pub derived_ids: u64,
    pub positional_ids: u64,
    /// With [`Parent::Merge`], the cases changed only on the head since the base that were
    /// kept as the head has them, where the input has other content ([`Merged::kept`]).
    pub kept: Exceptions,
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The input could not be read: it is missing, unreadable, or of a format that cannot be
    /// told; or reading failed part way (the commit was then cancelled).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// No dataset name was given and the input's header names none. (The reader names a
    /// dataset after its input when nothing else does, so this is a guard.)
    #[error("the dataset has no name: the input names none, and none was given")]
    NoName,
    /// A case read without errors cannot be stored (a seed file named by a path that was not
    /// read, say). Nothing was committed.
    #[error("a case cannot be stored: {0}")]
    Unstorable(StoreError),
    /// The store failed or refused, [`StoreError::Conflict`] included (the parent is no longer
    /// the head). Nothing was committed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The reader's thread ended without saying why (it panicked).
    #[error("the reader thread failed")]
    Reader,
    /// With [`Parent::Merge`]: cases changed both in the input and on the head since the base,
    /// to different content (their ids, in the order found). Nothing was committed.
    #[error(
        "{} changed both in the input and in `{dataset}` since v{base} (its head is v{head}): {}; nothing was written",
        if ids.len() == 1 { "a case was" } else { "cases were" },
        crate::merge::listed(ids)
    )]
    Conflicts { dataset: String, base: u64, head: u64, ids: Vec<String> },
}

/// Batches of prepared cases (a reader's chunk each, a few hundred cases) the reader may be
/// ahead of the store by. Reading and storing take about as long as each other on a large
/// import, and with 4 each kept stopping to wait for the other: 32 took a million-case import
/// from 10.7 s to 9.4 s, for about 10 MB more memory.
const BATCHES_AHEAD: usize = 32;

/// Reads `request.input` and commits its cases to `store` as one version; `events` gets the
/// input's diagnostics and the reading's progress, on the reader's thread, and is not called
/// once this returns (unless the future is dropped before it completes).
///
/// An input with errors commits nothing: the result is then `Ok` with `outcome: None` and the
/// count of errors. Works on any tokio runtime: the reader is a thread of its own that hands
/// batches over with `blocking_send`, and this future only awaits.
pub async fn ingest(
    store: &AnyStore,
    request: IngestRequest,
    events: Box<dyn FnMut(IngestEvent) + Send>,
) -> Result<Ingested, IngestError> {
    let IngestRequest { input, options, dataset, mode, parent, author, time, message } = request;
    let (header_tx, header_rx) = oneshot::channel();
    let (batch_tx, batch_rx) = mpsc::channel(BATCHES_AHEAD);
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::spawn(move || {
        let mut feed = Feed {
            header: Some(header_tx),
            batches: batch_tx,
            events,
            cases: 0,
            errors: 0,
            warnings: 0,
            unstorable: None,
        };
        let work = |batch: &Batch| batch.cases.iter().map(prepare).collect::<Result<Vec<_>, _>>();
        let read = read(&input, &options, &work, &mut feed);
        if read.is_err() {
            // Reading failed part way: what was sent is not the whole input.
            let _ = feed.batches.blocking_send(Err(()));
        }
        let _ = done_tx.send(Finished {
            read: read.map(|summary| (summary.derived_ids, summary.positional_ids)),
            errors: feed.errors,
            warnings: feed.warnings,
            unstorable: feed.unstorable,
        });
    });
    // The reader sends the header when it starts; it ends without one when the input cannot be
    // read, and says why.
    let header = match header_rx.await {
        Ok(header) => header,
        Err(_) => {
            return Err(match done_rx.await {
                Ok(Finished { read: Err(err), .. }) => IngestError::Read(err),
                _ => IngestError::Reader,
            });
        }
    };
    let upsert = mode == CommitMode::Upsert;
    let prepared = prepare_commit(store, header, dataset, parent).await;
    let (request, name, changes) = match prepared {
        Ok((header, name, parent, changes)) => (
            CommitRequest { dataset: name.clone(), header: Some(header), mode, parent, author, time, message },
            name,
            changes,
        ),
        Err(err) => {
            // Dropping the receiver stops the reader at its next batch; its events end with it.
            drop(batch_rx);
            let _ = done_rx.await;
            return Err(err);
        }
    };
    let (outcome, merged) = match &changes {
        Some(changes) if !changes.is_empty() => {
            let (merged_tx, merged_rx) = mpsc::channel(1);
            let (outcome, merged) =
                tokio::join!(store.commit(request, merged_rx), merge_batches(changes, upsert, batch_rx, merged_tx));
            (outcome, merged)
        }
        _ => (store.commit(request, batch_rx).await, Merged::default()),
    };
    let finished = done_rx.await.map_err(|_| IngestError::Reader)?;
    let (derived_ids, positional_ids) = finished.read?;
    let ingested = Ingested {
        outcome: None,
        errors: finished.errors,
        warnings: finished.warnings,
        dataset: name,
        derived_ids,
        positional_ids,
        kept: Exceptions::new(),
    };
    if finished.errors > 0 {
        return Ok(ingested);
    }
    if let Some(err) = finished.unstorable {
        return Err(IngestError::Unstorable(err));
    }
    if let (false, Some(changes)) = (merged.conflicts.is_empty(), &changes) {
        return Err(IngestError::Conflicts {
            dataset: ingested.dataset,
            base: changes.base,
            head: changes.head,
            ids: merged.conflicts,
        });
    }
    Ok(Ingested { outcome: Some(outcome?), kept: merged.kept, ..ingested })
}

/// Passes the reader's batches on to the commit through the three-way rule, then the cases
/// the head gained that the input lacks (not for an upsert, which leaves absent cases alone).
/// A conflict cancels the commit; the rest of the input is still read, so that every
/// conflicting id is told.
async fn merge_batches(
    changes: &Changes,
    upsert: bool,
    mut from: mpsc::Receiver<Result<Vec<Prepared>, ()>>,
    to: mpsc::Sender<Result<Vec<Prepared>, ()>>,
) -> Merged {
    let mut merge = changes.whole();
    // Whether the commit still takes batches.
    let mut open = true;
    while let Some(batch) = from.recv().await {
        let Ok(batch) = batch else {
            // The input has errors: the commit is cancelled, and they are told instead.
            let _ = to.send(Err(())).await;
            return Merged::default();
        };
        let out = merge.batch(batch);
        if !open {
            continue;
        }
        if merge.has_conflicts() {
            // Cancels the commit; the rest is read for the other conflicts.
            let _ = to.send(Err(())).await;
            open = false;
        } else if to.send(Ok(out)).await.is_err() {
            // The commit failed: it says why.
            return Merged::default();
        }
    }
    if upsert {
        return merge.upserted();
    }
    let (rest, merged) = merge.finish();
    if open {
        if !merged.conflicts.is_empty() {
            let _ = to.send(Err(())).await;
        } else if !rest.is_empty() {
            let _ = to.send(Ok(rest)).await;
        }
    }
    merged
}

/// The header to commit, the dataset's name and the parent version number.
async fn prepare_commit(
    store: &AnyStore,
    mut header: DatasetHeader,
    dataset: Option<String>,
    parent: Parent,
) -> Result<(DatasetHeader, String, Option<u64>, Option<Changes>), IngestError> {
    let name = dataset.or_else(|| header.name.clone()).ok_or(IngestError::NoName)?;
    let mut changes = None;
    let parent = match parent {
        Parent::Merge(base, except) => {
            let base = store.resolve(&name, &base).await?.number;
            let head = store.resolve(&name, &Ref::Latest).await?.number;
            changes = Some(Changes::between(store, &name, base, head, &except).await?);
            Some(head)
        }
        Parent::Any => None,
        Parent::Head => match store.resolve(&name, &Ref::Latest).await {
            Ok(head) => Some(head.number),
            Err(StoreError::NoDataset(..) | StoreError::NoVersion { .. }) => Some(0),
            Err(err) => return Err(err.into()),
        },
        // `v0` is the empty dataset before its first version (a first push names it).
        Parent::Given(Ref::Number(0)) => match store.resolve(&name, &Ref::Latest).await {
            Ok(head) => return Err(StoreError::Conflict { dataset: name, parent: 0, head: head.number }.into()),
            Err(StoreError::NoDataset(..) | StoreError::NoVersion { .. }) => Some(0),
            Err(err) => return Err(err.into()),
        },
        Parent::Given(reference) => Some(store.resolve(&name, &reference).await?.number),
    };
    header.name = Some(name.clone());
    Ok((header, name, parent, changes))
}

/// What the reader's thread hands back when it ends.
struct Finished {
    /// The read's derived and positional ids ([`Ingested`]).
    read: Result<(u64, u64), ReadError>,
    errors: u64,
    warnings: u64,
    unstorable: Option<StoreError>,
}

/// Feeds the cases of a file to a commit, reporting the file's problems as it goes.
struct Feed {
    header: Option<oneshot::Sender<DatasetHeader>>,
    batches: mpsc::Sender<Result<Vec<Prepared>, ()>>,
    events: Box<dyn FnMut(IngestEvent) + Send>,
    cases: u64,
    errors: u64,
    warnings: u64,
    unstorable: Option<StoreError>,
}

impl Consumer<Result<Vec<Prepared>, StoreError>> for Feed {
    fn start(&mut self, start: &Start) -> Flow {
        if let Some(header) = self.header.take() {
            let _ = header.send(start.header.clone());
        }
        Flow::Continue
    }

    fn batch(&mut self, batch: &mut Batch, prepared: &mut Result<Vec<Prepared>, StoreError>) -> Flow {
        for d in batch.diagnostics.drain(..) {
            if d.is_error() {
                self.errors += 1;
            } else {
                self.warnings += 1;
            }
            (self.events)(IngestEvent::Diagnostic(d));
        }
        self.cases += batch.cases.len() as u64;
        (self.events)(IngestEvent::Progress { cases: self.cases });
        let message = match (self.errors, std::mem::replace(prepared, Ok(Vec::new()))) {
            (0, Ok(cases)) => Ok(cases),
            (_, Err(err)) => {
                self.unstorable = Some(err);
                Err(())
            }
            _ => Err(()),
        };
        let stop = message.is_err();
        // The commit cancelled (or failed) drops its receiver: nothing more to read.
        if self.batches.blocking_send(message).is_err() || stop { Flow::Stop } else { Flow::Continue }
    }
}
