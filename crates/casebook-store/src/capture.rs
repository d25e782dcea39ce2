//! Adding captured cases (`casebook capture`, the server's capture route) to a dataset: the
//! cases whose id the head already has are left as they are (a trace captured again, or a
//! captured case since reviewed and edited, is never overwritten), the others are committed on
//! the head that was read, so a commit made meanwhile is a conflict and nothing is lost.

use casebook_model::{Case, DatasetHeader};

use crate::{AnyStore, CommitMode, CommitOutcome, CommitRequest, Ref, Store, StoreError, prepare};

/// Who adds the cases, when, and why.
#[derive(Debug, Clone)]
pub struct CaptureRequest {
    pub dataset: String,
    pub author: String,
    /// RFC 3339.
    pub time: String,
    pub message: String,
}

impl CaptureRequest {
    /// The commit of captured cases on `head` (a dataset that does not exist yet is made).
    fn commit_on(self, head: Option<u64>) -> CommitRequest {
        let header =
            head.is_none().then(|| DatasetHeader { name: Some(self.dataset.clone()), ..DatasetHeader::default() });
        CommitRequest {
            dataset: self.dataset,
            header,
            mode: CommitMode::Upsert,
            parent: Some(head.unwrap_or(0)),
            author: self.author,
            time: self.time,
            message: self.message,
        }
    }
}

/// What was added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureOutcome {
    /// `None` when every case was there already (nothing was committed).
    pub commit: Option<CommitOutcome>,
    /// Ids of the cases added, in order.
    pub added: Vec<String>,
    /// Ids of the cases the head had already.
    pub present: Vec<String>,
}

/// Adds the cases the dataset's head does not have; a dataset that does not exist is made.
pub async fn add_captured(
    store: &AnyStore,
    request: CaptureRequest,
    cases: Vec<Case>,
) -> Result<CaptureOutcome, StoreError> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    // The channel holds the one batch: sending cannot wait.
    let _ = tx.try_send(cases);
    drop(tx);
    add_captured_batches(store, request, rx).await
}

/// [`add_captured`] for cases that come in batches (a capture of any size): each batch is
/// checked against the head and its new cases are committed as they come, in one version.
pub async fn add_captured_batches(
    store: &AnyStore,
    request: CaptureRequest,
    mut batches: tokio::sync::mpsc::Receiver<Vec<Case>>,
) -> Result<CaptureOutcome, StoreError> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let convert = async move {
        while let Some(batch) = batches.recv().await {
            if tx.send(batch.iter().map(prepare).collect()).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(add_captured_prepared(store, request, rx), convert).0
}

/// [`add_captured_batches`] for cases prepared already ([`prepare`], on the threads that made
/// them): an `Err` batch (the producer failed) abandons the commit, and nothing is written.
pub async fn add_captured_prepared(
    store: &AnyStore,
    request: CaptureRequest,
    mut batches: tokio::sync::mpsc::Receiver<Result<Vec<crate::Prepared>, StoreError>>,
) -> Result<CaptureOutcome, StoreError> {
    let head = match store.resolve(&request.dataset, &Ref::Latest).await {
        Ok(head) => Some(head.number),
        Err(StoreError::NoDataset(..) | StoreError::NoVersion { .. }) => None,
        Err(err) => return Err(err),
    };
    let mut outcome = CaptureOutcome { commit: None, added: Vec::new(), present: Vec::new() };
    // Until a batch has a new case, nothing is committed.
    let first = loop {
        let Some(batch) = batches.recv().await else { return Ok(outcome) };
        let prepared = sort_out(store, &request.dataset, head, batch?, &mut outcome).await?;
        if !prepared.is_empty() {
            break prepared;
        }
    };
    let dataset = request.dataset.clone();
    let commit = request.commit_on(head);
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let feed = async {
        let stopped = || StoreError::Corrupt("the commit stopped before its cases were sent".into());
        tx.send(Ok(first)).await.map_err(|_| stopped())?;
        while let Some(batch) = batches.recv().await {
            let sorted = match batch {
                Ok(batch) => sort_out(store, &dataset, head, batch, &mut outcome).await,
                Err(err) => Err(err),
            };
            match sorted {
                Ok(prepared) if prepared.is_empty() => {}
                Ok(prepared) => tx.send(Ok(prepared)).await.map_err(|_| stopped())?,
                Err(err) => {
                    // The commit is abandoned: nothing is written.
                    let _ = tx.send(Err(())).await;
                    return Err(err);
                }
            }
        }
        drop(tx);
        Ok::<_, StoreError>(())
    };
    let (committed, fed) = tokio::join!(store.commit(commit, rx), feed);
    fed?;
    let committed = committed?;
    outcome.commit = Some(committed);
    Ok(outcome)
}

/// The cases of `batch` the head does not have, ready for the commit; the ids go to `added` or
/// `present`.
async fn sort_out(
    store: &AnyStore,
    dataset: &str,
    head: Option<u64>,
    batch: Vec<crate::Prepared>,
    outcome: &mut CaptureOutcome,
) -> Result<Vec<crate::Prepared>, StoreError> {
    let held = match head {
        Some(head) => {
            let ids: Vec<String> = batch.iter().map(|c| c.id.clone()).collect();
            store.holding(dataset, head, &ids).await?
        }
        None => Default::default(),
    };
    let mut prepared = Vec::with_capacity(batch.len());
    for case in batch {
        if held.contains(&case.id) {
            outcome.present.push(case.id);
        } else {
            outcome.added.push(case.id.clone());
            prepared.push(case);
        }
    }
    Ok(prepared)
}

/// What [`recapture`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recaptured {
    /// `None` when nothing was committed.
    pub commit: Option<CommitOutcome>,
    /// Ids of the cases added.
    pub added: Vec<String>,
    /// Ids of the cases replaced: the head had them exactly as captured before.
    pub replaced: Vec<String>,
    /// Ids of the cases the head had already, the same or changed since they were captured
    /// (reviewed, edited): left as they are.
    pub kept: Vec<String>,
    /// The content id of each case given, as it is now made (case id -> content id), to record
    /// for the next recapture.
    pub content_ids: Vec<(String, String)>,
}

/// Adds cases made from a trace again (it got more spans since it was captured): a case the
/// head does not have is added; one it has is replaced when its content id there is the one in
/// `before` (it is still exactly as captured then), else left as it is (someone reviewed or
/// edited it) and reported in `kept`. Never a duplicate: ids are the cases' own.
pub async fn recapture(
    store: &AnyStore,
    request: CaptureRequest,
    cases: Vec<Case>,
    before: &std::collections::HashMap<String, String>,
) -> Result<Recaptured, StoreError> {
    let head = match store.resolve(&request.dataset, &Ref::Latest).await {
        Ok(head) => Some(head.number),
        Err(StoreError::NoDataset(..) | StoreError::NoVersion { .. }) => None,
        Err(err) => return Err(err),
    };
    let mut out = Recaptured::default();
    let mut prepared = Vec::new();
    for case in cases {
        let made = prepare(&case)?;
        let made_cid = hex(&made.content_id);
        out.content_ids.push((case.id.clone(), made_cid.clone()));
        let there = match head {
            Some(head) => store.case(&request.dataset, head, &case.id).await?,
            None => None,
        };
        match there {
            None => {
                out.added.push(case.id);
                prepared.push(made);
            }
            Some(there) => {
                let there_cid = hex(&prepare(&there)?.content_id);
                if there_cid == made_cid {
                    out.kept.push(case.id);
                } else if before.get(&case.id) == Some(&there_cid) {
                    out.replaced.push(case.id);
                    prepared.push(made);
                } else {
                    out.kept.push(case.id);
                }
            }
        }
    }
    if prepared.is_empty() {
        return Ok(out);
    }
    out.commit = Some(crate::commit_prepared(store, request.commit_on(head), prepared).await?);
    Ok(out)
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use crate::{Prepared, SeedDocument, StoreError};

    /// What a capture keeps through its sort reads back as it was, and a cut one is refused.
    #[test]
    fn prepared_cases_read_back_from_their_bytes() {
        let prepared = Prepared {
            id: "trace-é-1".into(),
            content_id: [7; 32],
            body: r#"{"id":"trace-é-1","input":"hi"}"#.into(),
            seeds: vec![SeedDocument { content_id: [9; 32], document: "{}".into() }],
            labels: vec!["a".into(), "k:v".into()],
            facets: r#"{"id":"trace-é-1"}"#.into(),
        };
        let bytes = prepared.to_bytes();
        assert_eq!(Prepared::from_bytes(&bytes).unwrap(), prepared);
        let plain = Prepared { seeds: Vec::new(), labels: Vec::new(), ..prepared };
        assert_eq!(Prepared::from_bytes(&plain.to_bytes()).unwrap(), plain);
        assert!(matches!(Prepared::from_bytes(&bytes[..bytes.len() - 1]), Err(StoreError::Corrupt(_))));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(Prepared::from_bytes(&longer), Err(StoreError::Corrupt(_))));
    }
}
