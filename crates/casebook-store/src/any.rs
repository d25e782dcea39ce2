//! One store of either backend, chosen from where it is: a `postgres://` (or `postgresql://`)
//! URL is the shared PostgreSQL store, anything else the path of an embedded SQLite store
//! (as atuin picks its backend from the URL's scheme).

use std::path::PathBuf;

use casebook_model::{Case, DatasetHeader};

use crate::waits::{Probe, watched};
use crate::{
    CaseBatches, CheckReport, CommitOutcome, CommitRequest, Cursor, DatasetInfo, Diff, Event, Page, PostgresStore,
    ResultRow, Revision, RunRow, Select, SqliteStore, Store, StoreError, VersionInfo,
};

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The embedded store's database file.
    File(PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

impl Location {
    /// Whether `text` names a PostgreSQL database rather than a path.
    pub fn is_url(text: &str) -> bool {
        let lower = text.get(..13).unwrap_or(text).to_ascii_lowercase();
        lower.starts_with("postgres://") || lower.starts_with("postgresql://")
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => f.write_str(&crate::postgres::redact(url)),
        }
    }
}

/// A store of either backend; every operation goes to the backend's own. A clone shares the
/// connections.
#[derive(Clone)]
pub enum AnyStore {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl From<SqliteStore> for AnyStore {
    fn from(store: SqliteStore) -> Self {
        AnyStore::Sqlite(store)
    }
}

impl From<PostgresStore> for AnyStore {
    fn from(store: PostgresStore) -> Self {
        AnyStore::Postgres(store)
    }
}

macro_rules! each {
    ($self:expr, $store:ident => $body:expr) => {
        match $self {
            AnyStore::Sqlite($store) => $body,
            AnyStore::Postgres($store) => $body,
        }
    };
}

impl AnyStore {
    /// Opens an existing store (see [`SqliteStore::open`], [`PostgresStore::open`]).
    pub async fn open(location: &Location) -> Result<Self, StoreError> {
        Ok(match location {
            Location::File(path) => AnyStore::Sqlite(watched(Probe::File(path), SqliteStore::open(path)).await?),
            Location::Postgres(url) => AnyStore::Postgres(PostgresStore::open(url).await?),
        })
    }

    /// Makes a store, or brings an existing one up to date.
    pub async fn create(location: &Location) -> Result<Self, StoreError> {
        Self::create_with(location, crate::FileSharing::Owner).await
    }

    /// As [`AnyStore::create`], a store file readable as `sharing` says (PostgreSQL's access is
    /// its own).
    pub async fn create_with(location: &Location, sharing: crate::FileSharing) -> Result<Self, StoreError> {
        Ok(match location {
            Location::File(path) => {
                AnyStore::Sqlite(watched(Probe::File(path), SqliteStore::create_with(path, sharing)).await?)
            }
            Location::Postgres(url) => AnyStore::Postgres(PostgresStore::create(url).await?),
        })
    }

    /// How [`watched`] finds out whether an operation on this store (of `dataset`) waits for
    /// another process's lock.
    pub(crate) fn probe<'a>(&'a self, dataset: Option<&'a str>) -> Probe<'a> {
        match self {
            AnyStore::Sqlite(s) => Probe::File(s.path()),
            AnyStore::Postgres(store) => {
                Probe::Postgres { options: store.pool().connect_options(), url: store.url(), dataset }
            }
        }
    }

    /// Where the store is, as messages name it (a URL without its password).
    pub fn name(&self) -> String {
        match self {
            AnyStore::Sqlite(s) => s.path().display().to_string(),
            AnyStore::Postgres(s) => s.url().to_owned(),
        }
    }

    /// The same store, seeing the datasets and runs of `project` (sharing the connections).
    pub fn in_project(&self, project: &str) -> Self {
        match self {
            AnyStore::Sqlite(s) => AnyStore::Sqlite(s.in_project(project)),
            AnyStore::Postgres(s) => AnyStore::Postgres(s.in_project(project)),
        }
    }

    /// The same store for a server, whose requests must never wait for a commit to finish (see
    /// [`SqliteStore::shared`]), and take their connections from the pool
    /// ([`PostgresStore::shared`]).
    pub fn shared(self) -> Self {
        match self {
            AnyStore::Sqlite(s) => AnyStore::Sqlite(s.shared()),
            AnyStore::Postgres(s) => AnyStore::Postgres(s.shared()),
        }
    }

    /// The project this handle sees.
    pub fn project(&self) -> &str {
        each!(self, s => s.project())
    }

    /// Every project that has a dataset, a run or a key, by name.
    pub async fn projects(&self) -> Result<Vec<String>, StoreError> {
        let sql =
            "SELECT project FROM datasets UNION SELECT project FROM runs UNION SELECT project FROM api_keys ORDER BY 1";
        Ok(match self {
            AnyStore::Sqlite(s) => sqlx::query_scalar(sql).fetch_all(s.pool()).await?,
            AnyStore::Postgres(s) => sqlx::query_scalar(sql).fetch_all(s.pool()).await?,
        })
    }

    /// Whether the store was opened read-only (an embedded store that cannot be written).
    pub fn is_read_only(&self) -> bool {
        match self {
            AnyStore::Sqlite(s) => s.is_read_only(),
            AnyStore::Postgres(_) => false,
        }
    }

    pub async fn close(self) {
        each!(self, s => s.close().await)
    }

    pub async fn check(&self) -> Result<CheckReport, StoreError> {
        each!(self, s => s.check().await)
    }

    /// Removes what nothing refers to (see `gc.rs`), or counts it with `dry_run`.
    pub async fn gc(&self, options: crate::GcOptions) -> Result<crate::GcReport, StoreError> {
        each!(self, s => s.gc(options).await)
    }

    pub async fn begin_run(&self, id: &str, experiment: &str, started: &str, meta: &str) -> Result<(), StoreError> {
        watched(self.probe(None), async { each!(self, s => s.begin_run(id, experiment, started, meta).await) }).await
    }

    pub async fn save_results(&self, run: &str, rows: &[ResultRow]) -> Result<(), StoreError> {
        watched(self.probe(None), async { each!(self, s => s.save_results(run, rows).await) }).await
    }

    pub async fn finish_run(&self, id: &str, finished: &str, summary: &str) -> Result<(), StoreError> {
        watched(self.probe(None), async { each!(self, s => s.finish_run(id, finished, summary).await) }).await
    }

    pub async fn outputs(&self, hashes: &[String]) -> Result<Vec<Option<String>>, StoreError> {
        each!(self, s => s.outputs(hashes).await)
    }

    pub async fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        each!(self, s => s.runs().await)
    }

    pub async fn run(&self, reference: Option<&str>) -> Result<RunRow, StoreError> {
        each!(self, s => s.run(reference).await)
    }

    pub async fn run_results(&self, id: &str) -> Result<Vec<String>, StoreError> {
        each!(self, s => s.run_results(id).await)
    }

    /// Sets an SQLite store's page cache to `kib` KiB a connection (see
    /// [`crate::SqliteStore::set_page_cache`]); PostgreSQL's is the server's.
    pub async fn set_page_cache(&self, kib: u32) -> Result<(), StoreError> {
        match self {
            AnyStore::Sqlite(store) => store.set_page_cache(kib).await,
            AnyStore::Postgres(_) => Ok(()),
        }
    }

    /// At most `limit` of a run's results from its `from`-th place on, in order, each with its
    /// place (`ResultRow::seq`): a run read a page at a time, the next page from the last
    /// place + 1. Places may have gaps (a stopped run's unfinished jobs).
    pub async fn run_results_from(&self, id: &str, from: u64, limit: usize) -> Result<Vec<(u64, String)>, StoreError> {
        each!(self, s => s.run_results_from(id, from, limit).await)
    }

    /// A run's results with the outputs it was the first to keep, as `save_results` takes them.
    pub async fn run_rows(&self, id: &str) -> Result<Vec<ResultRow>, StoreError> {
        each!(self, s => s.run_rows(id).await)
    }

    /// Sets a dataset's header, appends `events` to its log and sets `tags`, in one transaction,
    /// logging nothing of its own (what `copy` uses to carry a log over).
    pub async fn restore_log(
        &self,
        dataset: &str,
        header: &DatasetHeader,
        events: &[Event],
        tags: &[(String, u64)],
    ) -> Result<(), StoreError> {
        let restore = async { each!(self, s => s.restore_log(dataset, header, events, tags).await) };
        watched(self.probe(Some(dataset)), restore).await
    }
}

impl Store for AnyStore {
    async fn datasets(&self) -> Result<Vec<DatasetInfo>, StoreError> {
        each!(self, s => s.datasets().await)
    }
    async fn commit(&self, request: CommitRequest, cases: CaseBatches) -> Result<CommitOutcome, StoreError> {
        let dataset = request.dataset.clone();
        watched(self.probe(Some(&dataset)), async { each!(self, s => s.commit(request, cases).await) }).await
    }
    async fn versions(&self, dataset: &str) -> Result<Vec<VersionInfo>, StoreError> {
        each!(self, s => s.versions(dataset).await)
    }
    async fn events(&self, dataset: &str) -> Result<Vec<Event>, StoreError> {
        each!(self, s => s.events(dataset).await)
    }
    async fn header(&self, dataset: &str) -> Result<DatasetHeader, StoreError> {
        each!(self, s => s.header(dataset).await)
    }
    async fn case(&self, dataset: &str, version: u64, id: &str) -> Result<Option<Case>, StoreError> {
        each!(self, s => s.case(dataset, version, id).await)
    }
    async fn place(&self, dataset: &str, version: u64, id: &str) -> Result<Option<Cursor>, StoreError> {
        each!(self, s => s.place(dataset, version, id).await)
    }
    async fn holding(
        &self,
        dataset: &str,
        version: u64,
        ids: &[String],
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        each!(self, s => s.holding(dataset, version, ids).await)
    }
    async fn bodies(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        batch: usize,
        each: &mut dyn FnMut(Vec<String>) -> bool,
    ) -> Result<u64, StoreError> {
        each!(self, s => s.bodies(dataset, version, select, batch, each).await)
    }
    async fn count(&self, dataset: &str, version: u64, select: &Select) -> Result<u64, StoreError> {
        each!(self, s => s.count(dataset, version, select).await)
    }
    async fn history(&self, dataset: &str, id: &str) -> Result<Vec<Revision>, StoreError> {
        each!(self, s => s.history(dataset, id).await)
    }
    async fn diff(&self, dataset: &str, from: u64, to: u64) -> Result<Diff, StoreError> {
        each!(self, s => s.diff(dataset, from, to).await)
    }
    async fn changed(&self, dataset: &str, from: u64, to: u64) -> Result<Vec<crate::ChangedCase>, StoreError> {
        each!(self, s => s.changed(dataset, from, to).await)
    }
    async fn diff_totals(&self, dataset: &str, from: u64, to: u64) -> Result<crate::DiffTotals, StoreError> {
        each!(self, s => s.diff_totals(dataset, from, to).await)
    }
    async fn diff_page(
        &self,
        dataset: &str,
        from: u64,
        to: u64,
        list: crate::DiffList,
        start: crate::DiffFrom<'_>,
        size: usize,
    ) -> Result<crate::DiffPage, StoreError> {
        each!(self, s => s.diff_page(dataset, from, to, list, start, size).await)
    }
    async fn tag(
        &self,
        dataset: &str,
        version: u64,
        tag: &str,
        author: &str,
        time: &str,
    ) -> Result<crate::Tagged, StoreError> {
        watched(self.probe(Some(dataset)), async { each!(self, s => s.tag(dataset, version, tag, author, time).await) })
            .await
    }
    async fn page(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        after: Option<&Cursor>,
        size: usize,
    ) -> Result<Page, StoreError> {
        each!(self, s => s.page(dataset, version, select, after, size).await)
    }
    async fn page_before(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        before: &Cursor,
        size: usize,
    ) -> Result<Page, StoreError> {
        each!(self, s => s.page_before(dataset, version, select, before, size).await)
    }
    async fn untag(&self, dataset: &str, tag: &str, author: &str, time: &str) -> Result<u64, StoreError> {
        watched(self.probe(Some(dataset)), async { each!(self, s => s.untag(dataset, tag, author, time).await) }).await
    }
    async fn tags(&self, dataset: &str) -> Result<Vec<(String, u64)>, StoreError> {
        each!(self, s => s.tags(dataset).await)
    }
    async fn page_json(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        after: Option<&Cursor>,
        size: usize,
    ) -> Result<crate::JsonPage, StoreError> {
        each!(self, s => s.page_json(dataset, version, select, after, size).await)
    }
    async fn pending_add(&self, dataset: &str, received: i64, spans: &[crate::PendingSpan]) -> Result<(), StoreError> {
        each!(self, s => s.pending_add(dataset, received, spans).await)
    }
    async fn pending_traces(&self, every_project: bool) -> Result<Vec<crate::PendingTrace>, StoreError> {
        each!(self, s => s.pending_traces(every_project).await)
    }
    async fn pending_spans(&self, trace_id: &str) -> Result<Vec<crate::PendingSpan>, StoreError> {
        each!(self, s => s.pending_spans(trace_id).await)
    }
    async fn pending_count(&self) -> Result<u64, StoreError> {
        each!(self, s => s.pending_count().await)
    }
    async fn trace_captured(&self, trace_id: &str, captured: i64, cases: &str) -> Result<(), StoreError> {
        each!(self, s => s.trace_captured(trace_id, captured, cases).await)
    }
    async fn forget_trace(&self, trace_id: &str) -> Result<(), StoreError> {
        each!(self, s => s.forget_trace(trace_id).await)
    }
    async fn capture_warn(&self, dataset: &str, trace_id: &str, at: i64, message: &str) -> Result<(), StoreError> {
        each!(self, s => s.capture_warn(dataset, trace_id, at, message).await)
    }
    async fn capture_warnings(&self) -> Result<Vec<crate::CaptureWarning>, StoreError> {
        each!(self, s => s.capture_warnings().await)
    }

    async fn page_sorted(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        sort: &crate::Sort,
        seek: Option<&crate::SortSeek>,
        size: usize,
    ) -> Result<crate::SortedPage, StoreError> {
        each!(self, s => s.page_sorted(dataset, version, select, sort, seek, size).await)
    }

    async fn sort_key(
        &self,
        dataset: &str,
        version: u64,
        sort: &crate::Sort,
        id: &str,
    ) -> Result<Option<crate::SortKey>, StoreError> {
        each!(self, s => s.sort_key(dataset, version, sort, id).await)
    }

    async fn capture_warnings_clear(&self, trace_id: &str) -> Result<(), StoreError> {
        each!(self, s => s.capture_warnings_clear(trace_id).await)
    }

    async fn group_counts(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        path: &casebook_filter::FieldPath,
    ) -> Result<Option<Vec<(Option<serde_json::Value>, u64)>>, StoreError> {
        each!(self, s => s.group_counts(dataset, version, select, path).await)
    }
}
