//! Where `run`, `results` and `compare` keep and read runs: the store here, or the team server
//! when `CASEBOOK_URL` is set ([`RunStore`]). Either way the same calls: read a dataset version
//! (resolved once, then read by its number, so a run stays on the version it started with),
//! begin a run, keep results in batches with the agents' outputs by run hash, look outputs up,
//! finish, and read runs back.

use casebook_server::api::{CasePage, Count, FinishRun, NewRun, OutputIn, ResultIn, ResultPage, Run, Version};
use casebook_store::{AnyStore, Ref, ResultRow, RunRow, Select, Store};
use serde_json::value::RawValue;

use crate::remote::{Remote, segment};
use crate::settings::Global;

/// Cases a page of a remote dataset holds, and results a page of a run (within a server's
/// default `--max-page`).
const PAGE: usize = 1000;
/// SQLite's page cache a connection of a run's store, in KiB: with 2 MiB, a commit of results
/// spilled its dirty pages before the end and pages of the run hashes' index were read back from
/// the write-ahead log again and again (a million runs 10 % slower than with 8 MiB and larger
/// batches); 16 MiB holds a batch's pages, and the cache stays within the run's memory target.
const RUN_PAGE_CACHE_KIB: u32 = 16 << 10;
/// Run hashes one lookup of outputs asks the server for (its limit is 10,000).
const HASHES: usize = 5000;
/// JSON a request of results carries at most, roughly: a server takes 8 MiB by default
/// (`casebook serve --max-json`), and agents' outputs can be long.
const RESULTS_BYTES: usize = 2 << 20;

/// `rows` cut into runs of consecutive rows of at most [`RESULTS_BYTES`] of JSON each (a row
/// longer than that alone); one empty run for no rows.
fn by_size(rows: &[ResultRow]) -> Vec<&[ResultRow]> {
    let mut parts = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, row) in rows.iter().enumerate() {
        let len = 64 + row.result.len() + row.output.as_ref().map_or(0, |(hash, output)| hash.len() + output.len());
        if i > start && size + len > RESULTS_BYTES {
            parts.push(&rows[start..i]);
            (start, size) = (i, 0);
        }
        size += len;
    }
    parts.push(&rows[start..]);
    parts
}

/// Runs kept in a store, or on a server on behalf of one key's project.
pub enum RunStore {
    Local(AnyStore),
    Remote(Remote),
}

/// A dataset version as a run names it.
pub struct Pinned {
    pub number: u64,
    /// The version's content id.
    pub id: String,
    /// How many cases it has.
    pub cases: u64,
}

impl RunStore {
    /// The server when `CASEBOOK_URL` is set, else the store here, to read runs.
    pub fn open(settings: &Global, runtime: &tokio::runtime::Runtime) -> anyhow::Result<Self> {
        if settings.server {
            return Ok(RunStore::Remote(runtime.block_on(Remote::connect())?));
        }
        Ok(RunStore::Local(crate::stores::open(settings, runtime)?))
    }

    /// The server when `CASEBOOK_URL` is set, else the store here to write runs into, if there
    /// is one.
    pub fn open_for_run(settings: &Global, runtime: &tokio::runtime::Runtime) -> anyhow::Result<Option<Self>> {
        if settings.server {
            return Ok(Some(RunStore::Remote(runtime.block_on(Remote::connect())?)));
        }
        if crate::stores::location(settings).is_err() {
            return Ok(None);
        }
        let store = crate::stores::open_write(settings, runtime)?;
        // A run appends its results in batches and looks up outputs by hash: its connections'
        // caches are sized for a batch's pages ([`RUN_PAGE_CACHE_KIB`]).
        runtime.block_on(store.set_page_cache(RUN_PAGE_CACHE_KIB))?;
        Ok(Some(RunStore::Local(store)))
    }

    /// How messages name where runs are kept.
    pub fn shown(&self) -> String {
        match self {
            RunStore::Local(_) => "the store".to_owned(),
            RunStore::Remote(remote) => format!("the server at {} (project `{}`)", remote.url, remote.project),
        }
    }

    fn runs_path(remote: &Remote, rest: &str) -> String {
        format!("/api/v1/projects/{}/runs{rest}", segment(&remote.project))
    }

    /// The version `reference` names now, of dataset `name`.
    pub async fn resolve(&self, name: &str, reference: &Ref) -> anyhow::Result<Pinned> {
        Ok(match self {
            RunStore::Local(store) => {
                let v = store.resolve(name, reference).await?;
                Pinned { number: v.number, id: v.id, cases: v.cases }
            }
            RunStore::Remote(remote) => {
                let path = remote.dataset_path(name, &format!("/versions/{}", segment(&reference.to_string())));
                let v: Version = remote.get_json(&path).await?;
                Pinned { number: v.number, id: v.id, cases: v.cases }
            }
        })
    }

    /// The native JSON bodies of the cases `select` picks from version `number`, in order,
    /// handed to `each` a page at a time.
    pub async fn bodies(
        &self,
        name: &str,
        number: u64,
        select: &Select,
        each: &mut dyn FnMut(Vec<String>),
    ) -> anyhow::Result<()> {
        match self {
            RunStore::Local(store) => {
                store
                    .bodies(name, number, select, 4096, &mut |batch| {
                        each(batch);
                        true
                    })
                    .await?;
            }
            RunStore::Remote(remote) => {
                let filter = select.filter.as_ref().map(ToString::to_string);
                let mut left = select.limit.unwrap_or(u64::MAX);
                let mut cursor: Option<String> = None;
                while left > 0 {
                    let limit = left.min(PAGE as u64).to_string();
                    let mut query = vec![("limit", limit)];
                    query.extend(filter.clone().map(|f| ("where", f)));
                    query.extend(cursor.take().map(|c| ("cursor", c)));
                    let path = remote.dataset_path(name, &format!("/versions/v{number}/cases"));
                    let request = remote.request(reqwest::Method::GET, &path).query(&query);
                    let page: CasePage = remote.json(request).await?;
                    left = left.saturating_sub(page.cases.len() as u64);
                    each(page.cases.into_iter().map(|c| Box::<str>::from(c).into_string()).collect());
                    match page.next_cursor {
                        Some(next) => cursor = Some(next),
                        None => break,
                    }
                }
            }
        }
        Ok(())
    }

    /// How many cases of version `number` the filter of `select` picks (its limit aside).
    pub async fn count(&self, name: &str, number: u64, select: &Select) -> anyhow::Result<u64> {
        let select = Select { filter: select.filter.clone(), limit: None };
        Ok(match self {
            RunStore::Local(store) => store.count(name, number, &select).await?,
            RunStore::Remote(remote) => {
                let query: Vec<(&str, String)> = select.filter.iter().map(|f| ("where", f.to_string())).collect();
                let path = remote.dataset_path(name, &format!("/versions/v{number}/count"));
                let count: Count = remote.json(remote.request(reqwest::Method::GET, &path).query(&query)).await?;
                count.count
            }
        })
    }

    pub async fn begin_run(&self, id: &str, experiment: &str, started: &str, meta: &str) -> anyhow::Result<()> {
        match self {
            RunStore::Local(store) => store.begin_run(id, experiment, started, meta).await?,
            RunStore::Remote(remote) => {
                let body = NewRun {
                    id: id.to_owned(),
                    experiment: experiment.to_owned(),
                    started: started.to_owned(),
                    meta: RawValue::from_string(meta.to_owned())?,
                };
                let request = remote.request(reqwest::Method::POST, &Self::runs_path(remote, "")).json(&body);
                remote.send(request).await?;
            }
        }
        Ok(())
    }

    /// Keeps a batch of finished results (at most 10,000 for a server).
    pub async fn save_results(&self, run: &str, rows: &[ResultRow]) -> anyhow::Result<()> {
        match self {
            RunStore::Local(store) => store.save_results(run, rows).await?,
            RunStore::Remote(remote) => {
                for part in by_size(rows) {
                    Self::send_results(remote, run, part).await?;
                }
            }
        }
        Ok(())
    }

    /// One request of results.
    async fn send_results(remote: &Remote, run: &str, rows: &[ResultRow]) -> anyhow::Result<()> {
        let body = rows
            .iter()
            .map(|row| {
                Ok(ResultIn {
                    seq: row.seq,
                    result: RawValue::from_string(row.result.clone())?,
                    output: match &row.output {
                        Some((hash, output)) => {
                            Some(OutputIn { hash: hash.clone(), output: RawValue::from_string(output.clone())? })
                        }
                        None => None,
                    },
                })
            })
            .collect::<Result<Vec<_>, serde_json::Error>>()?;
        let path = Self::runs_path(remote, &format!("/{}/results", segment(run)));
        remote.send(remote.request(reqwest::Method::POST, &path).json(&body)).await?;
        Ok(())
    }

    pub async fn finish_run(&self, id: &str, finished: &str, summary: &str) -> anyhow::Result<()> {
        match self {
            RunStore::Local(store) => store.finish_run(id, finished, summary).await?,
            RunStore::Remote(remote) => {
                let body = FinishRun {
                    finished: finished.to_owned(),
                    summary: Some(RawValue::from_string(summary.to_owned())?),
                    threshold: None,
                };
                let path = Self::runs_path(remote, &format!("/{}/finish", segment(id)));
                remote.send(remote.request(reqwest::Method::PUT, &path).json(&body)).await?;
            }
        }
        Ok(())
    }

    /// The stored output of each of `hashes`, in the same order.
    pub async fn outputs(&self, hashes: &[String]) -> anyhow::Result<Vec<Option<String>>> {
        match self {
            RunStore::Local(store) => Ok(store.outputs(hashes).await?),
            RunStore::Remote(remote) => {
                let path = format!("/api/v1/projects/{}/outputs", segment(&remote.project));
                let mut found = Vec::with_capacity(hashes.len());
                for chunk in hashes.chunks(HASHES) {
                    let request = remote
                        .request(reqwest::Method::POST, &path)
                        .json(&casebook_server::api::OutputsRequest { hashes: chunk.to_vec() });
                    let outputs: Vec<Option<Box<RawValue>>> = remote.json(request).await?;
                    if outputs.len() != chunk.len() {
                        anyhow::bail!("the server answered {} outputs for {} run hashes", outputs.len(), chunk.len());
                    }
                    found.extend(outputs.into_iter().map(|o| o.map(|o| Box::<str>::from(o).into_string())));
                }
                Ok(found)
            }
        }
    }

    /// Every run, oldest first.
    pub async fn runs(&self) -> anyhow::Result<Vec<RunRow>> {
        match self {
            RunStore::Local(store) => Ok(store.runs().await?),
            RunStore::Remote(remote) => {
                let runs: Vec<Run> = remote.get_json(&Self::runs_path(remote, "")).await?;
                Ok(runs.into_iter().map(run_row).collect())
            }
        }
    }

    /// The run an id, a prefix of one, `latest` (or `None`) or `previous` names.
    pub async fn run(&self, reference: Option<&str>) -> anyhow::Result<RunRow> {
        match self {
            RunStore::Local(store) => Ok(store.run(reference).await?),
            RunStore::Remote(remote) => {
                let path = Self::runs_path(remote, &format!("/{}", segment(reference.unwrap_or("latest"))));
                Ok(run_row(remote.get_json(&path).await?))
            }
        }
    }

    /// The next page of a run's results (at most [`PAGE`], each the runner's JSON, in order);
    /// `None` after the last. A run is read a page at a time, never held whole.
    pub async fn next_results(&self, pages: &mut ResultPages) -> anyhow::Result<Option<Vec<String>>> {
        let Some(at) = pages.next.take() else { return Ok(None) };
        match self {
            RunStore::Local(store) => {
                let from = at.parse::<u64>().unwrap_or(0);
                let page = store.run_results_from(&pages.run, from, PAGE).await?;
                if page.len() == PAGE {
                    pages.next = page.last().map(|(last, _)| (last + 1).to_string());
                }
                Ok(Some(page.into_iter().map(|(_, result)| result).collect()))
            }
            RunStore::Remote(remote) => {
                let path = Self::runs_path(remote, &format!("/{}/results", segment(&pages.run)));
                let mut query = vec![("limit", PAGE.to_string())];
                if !at.is_empty() {
                    query.push(("cursor", at));
                }
                let page: ResultPage = remote.json(remote.request(reqwest::Method::GET, &path).query(&query)).await?;
                pages.next = page.next_cursor;
                Ok(Some(page.results.into_iter().map(|r| Box::<str>::from(r).into_string()).collect()))
            }
        }
    }

    pub async fn close(self) {
        if let RunStore::Local(store) = self {
            store.close().await;
        }
    }
}

/// Where a reading of a run's results is ([`RunStore::next_results`]).
pub struct ResultPages {
    run: String,
    /// Where the next page starts (the store's next place, or the server's cursor; empty at the
    /// start); `None` after the last page.
    next: Option<String>,
}

impl ResultPages {
    /// The pages of run `id` (its whole id), from the first.
    pub fn of(id: &str) -> Self {
        Self { run: id.to_owned(), next: Some(String::new()) }
    }
}

/// A run as the server answers it, as the store lists it.
fn run_row(run: Run) -> RunRow {
    RunRow {
        id: run.id,
        experiment: run.experiment,
        started: run.started,
        finished: run.finished,
        meta: run.meta.to_string(),
        summary: run.summary.map(|s| s.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, output: usize) -> ResultRow {
        let text = format!("\"{}\"", "ü".repeat(output / 2));
        ResultRow { seq, result: "{\"pass\":true}".into(), output: Some(("h".repeat(64), text)) }
    }

    /// A batch of long outputs goes to a server in requests well under its 8 MiB limit; a row
    /// longer than a request alone goes alone; nothing is lost or reordered.
    #[test]
    fn results_are_sent_in_requests_of_a_bounded_size() {
        let rows: Vec<ResultRow> = (0..4096).map(|i| row(i, if i == 100 { 3 << 20 } else { 10_000 })).collect();
        let parts = by_size(&rows);
        let seqs: Vec<u64> = parts.iter().flat_map(|p| p.iter().map(|r| r.seq)).collect();
        assert_eq!(seqs, (0..4096).collect::<Vec<_>>());
        for part in &parts {
            let size: usize = part.iter().map(|r| r.output.as_ref().map_or(0, |o| o.1.len())).sum();
            assert!(size <= RESULTS_BYTES || part.len() == 1, "{} rows, {size} bytes", part.len());
        }
        assert!(parts.iter().any(|p| p.len() == 1 && p[0].seq == 100));
        assert_eq!(by_size(&[]).len(), 1);
    }
}
