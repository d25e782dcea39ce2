//! `casebook store copy FROM TO`: every dataset with its whole history, log and tags, and every
//! run with its results and outputs, from one store to another of either backend.
//!
//! A version is copied by committing its cases, in order, on the copy of its parent, with its
//! author, time and message: the commit makes the same version, so its content id must come out
//! the same, and the copy stops if it does not. What the target holds already is kept and not
//! copied again: a dataset whose versions there are the first ones of the source's gets the
//! ones after them; a dataset whose versions differ from the source's is left alone and
//! reported (the stores have diverged; nothing is overwritten). Runs are copied by id.
//!
//! A store made before the name rules (`names.rs`) may hold a dataset whose name a new dataset
//! may not have: it is not copied (a commit cannot make it), and the report names it with the
//! reason, so nothing is left behind without a word; the other datasets are copied. A tag whose
//! name the rules now refuse is copied as it is (its version keeps its name) and reported.

use serde::Serialize;

use crate::{AnyStore, CommitMode, CommitOutcome, CommitRequest, Event, Select, Store, StoreError};

/// Cases a batch of a copied version carries.
const BATCH: usize = 2000;

/// What a copy did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct CopyReport {
    /// Versions copied, over all datasets.
    pub versions: u64,
    /// Cases committed (each version's whole list).
    pub cases: u64,
    /// Datasets the target held already, as far as the source's head.
    pub up_to_date: Vec<String>,
    /// Datasets left alone: their versions in the target differ from the source's.
    pub diverged: Vec<String>,
    pub runs: u64,
    /// Runs the target held already.
    pub runs_present: u64,
    /// Datasets not copied: the name rules refuse their names for a new dataset (they were
    /// named before the rules); the source still holds them.
    pub refused: Vec<OldName>,
    /// Tags copied under names the rules now refuse for a new tag (`dataset@tag`).
    pub old_tags: Vec<OldName>,
}

/// A name written before the rules, and why a new one may not be written so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OldName {
    pub project: String,
    /// The dataset's name (for a tag, `dataset@tag`).
    pub name: String,
    pub why: String,
}

/// Copies what `to` lacks of `from`, project by project; `progress` hears of each version as
/// it is copied (datasets named as [`crate::qualified`] does).
pub async fn copy(
    from: &AnyStore,
    to: &AnyStore,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<CopyReport, StoreError> {
    let mut report = CopyReport::default();
    for project in from.projects().await? {
        copy_project(&from.in_project(&project), &to.in_project(&project), &mut report, progress).await?;
    }
    Ok(report)
}

async fn copy_project(
    from: &AnyStore,
    to: &AnyStore,
    report: &mut CopyReport,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<(), StoreError> {
    let project = from.project();
    for dataset in from.datasets().await? {
        let name = dataset.name.as_str();
        let shown = crate::qualified(project, name);
        let source = from.versions(name).await?;
        let present = match to.versions(name).await {
            Ok(versions) => versions,
            Err(StoreError::NoDataset(..)) => Vec::new(),
            Err(err) => return Err(err),
        };
        if present.is_empty() {
            if let Err(err) = crate::names::dataset_name(name) {
                report.refused.push(OldName { project: project.to_owned(), name: name.to_owned(), why: err.why });
                continue;
            }
        }
        let shared = present.iter().zip(&source).take_while(|(a, b)| a.id == b.id).count();
        if shared < present.len() {
            report.diverged.push(shown);
            continue;
        }
        if shared == source.len() {
            report.up_to_date.push(shown.clone());
        }
        for version in &source[shared..] {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let request = CommitRequest {
                dataset: dataset.name.clone(),
                header: None,
                mode: CommitMode::Replace,
                parent: Some(version.parent.unwrap_or(0)),
                author: version.author.clone(),
                time: version.time.clone(),
                message: version.message.clone(),
            };
            // The version is read a page at a time as it is committed; a read that fails
            // cancels the commit, which then writes nothing.
            let read = async move {
                let mut after = None;
                let mut n = 0u64;
                loop {
                    let page = match read_page(from, name, version.number, after.as_ref()).await {
                        Ok(page) => page,
                        Err(err) => {
                            let _ = tx.send(Err(())).await;
                            return Err(err);
                        }
                    };
                    n += page.1.len() as u64;
                    if !page.1.is_empty() && tx.send(Ok(page.1)).await.is_err() {
                        // The commit stopped; it says why.
                        return Ok(n);
                    }
                    match page.0 {
                        Some(next) => after = Some(next),
                        None => return Ok::<_, StoreError>(n),
                    }
                }
            };
            let (read, written) = tokio::join!(read, to.commit(request, rx));
            // A failed read cancelled the commit: its error is the one to tell.
            let cases = read?;
            let made = match written? {
                CommitOutcome::Created(made) => made,
                CommitOutcome::Unchanged(_) => {
                    return Err(StoreError::Corrupt(format!(
                        "`{shown}` v{} of the source makes no new version when copied",
                        version.number
                    )));
                }
            };
            if made.id != version.id || made.number != version.number {
                return Err(StoreError::Corrupt(format!(
                    "`{shown}` v{} ({}) copies as v{} ({}): the copy stopped there",
                    version.number,
                    &version.id[..12.min(version.id.len())],
                    made.number,
                    &made.id[..12.min(made.id.len())]
                )));
            }
            report.versions += 1;
            report.cases += cases;
            progress(&shown, version.number, source.len() as u64);
        }
        // The log: the header as it is now, the events the target lacks, and the tags.
        let events = from.events(name).await?;
        let have = to.events(name).await?;
        let missing: Vec<Event> = if events.starts_with(&have) { events[have.len()..].to_vec() } else { Vec::new() };
        let tags = from.tags(name).await?;
        for (tag, _) in &tags {
            if let Err(err) = crate::names::tag_name(tag) {
                report.old_tags.push(OldName {
                    project: project.to_owned(),
                    name: format!("{name}@{tag}"),
                    why: err.why,
                });
            }
        }
        if !missing.is_empty() || tags != to.tags(name).await? || dataset.header != to.header(name).await? {
            to.restore_log(name, &dataset.header, &missing, &tags).await?;
        }
    }
    let present: std::collections::HashSet<String> = to.runs().await?.into_iter().map(|r| r.id).collect();
    for run in from.runs().await? {
        if present.contains(&run.id) {
            report.runs_present += 1;
            continue;
        }
        let rows = from.run_rows(&run.id).await?;
        to.begin_run(&run.id, &run.experiment, &run.started, &run.meta).await?;
        for chunk in rows.chunks(BATCH) {
            to.save_results(&run.id, chunk).await?;
        }
        if let (Some(finished), Some(summary)) = (&run.finished, &run.summary) {
            to.finish_run(&run.id, finished, summary).await?;
        }
        report.runs += 1;
    }
    Ok(())
}

/// A page of a version, prepared for a commit, and the cursor of the next.
async fn read_page(
    from: &AnyStore,
    name: &str,
    version: u64,
    after: Option<&crate::Cursor>,
) -> Result<(Option<crate::Cursor>, Vec<crate::Prepared>), StoreError> {
    let page = from.page(name, version, &Select::all(), after, BATCH).await?;
    let batch = page.bodies.iter().map(|body| crate::prepare(&crate::parse_body(body)?)).collect::<Result<_, _>>()?;
    Ok((page.next, batch))
}
