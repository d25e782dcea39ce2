//! casebook's stores: immutable, content-addressed dataset versions.
//!
//! A [`Store`] keeps datasets as numbered versions (v1, v2, …), each named also by a content id
//! (`casebook-canon`). A version never changes once written; a commit that names a parent fails
//! with [`StoreError::Conflict`] if the head moved, and writes nothing. Every backend passes the
//! conformance suite in `tests/it/conformance.rs`. The embedded backend is [`SqliteStore`], the
//! shared one [`PostgresStore`]; [`AnyStore`] is either, chosen by [`Location`].

#[macro_use]
mod any;
mod capture;
mod check;
mod copy;
mod diff;
mod gc;
mod ingest;
mod keys;
mod merge;
pub mod names;
mod pending;
mod postgres;
mod purge;
mod review;
mod runs;
pub mod seeds;
mod sort;
mod sqlite;
mod sqlite_bodies;
mod sqlite_seeds;
mod waits;

use std::path::{Path, PathBuf};

use casebook_filter::Filter;
use casebook_model::{Case, DatasetHeader, Responses};
use serde::Serialize;

pub use any::{AnyStore, Location};
pub use capture::{
    CaptureOutcome, CaptureRequest, Recaptured, add_captured, add_captured_batches, add_captured_prepared, recapture,
};
pub use check::CheckReport;
pub use copy::{CopyReport, OldName, copy};
pub use diff::{DiffFrom, DiffList, DiffPage, DiffTotals, FieldChange, field_changes};
pub use gc::{GcOptions, GcReport, Unreferenced};
pub use ingest::{IngestError, IngestEvent, IngestRequest, Ingested, Parent, ingest};
pub use keys::{Access, ApiKey, KeyMaterial, NewKey, Scope, check_project};
pub use merge::{Changes, Choice, Exceptions, Merged, WholeMerge};
pub use names::{NameError, Ref};
pub use pending::{CAPTURE_WARNINGS_KEPT, CaptureWarning, PendingSpan, PendingTrace};
pub use postgres::{PostgresStore, redact};
pub use purge::{PurgeInfo, PurgeOutcome, PurgeRequest, PurgedCase, purge_choice, purged_warning};
pub use review::{ReviewRequest, Reviewed, no_such_cases, review};
pub use runs::{ResultRow, RunRow};
pub use seeds::{SeedDocument, SeedDocuments};
pub use sort::{Sort, SortBy, SortKey, SortSeek, SortedPage};
pub use sqlite::{FileSharing, SqliteStore};
pub use waits::{Holder, PATIENCE, Wait, on_wait};

/// The folder a store lives in, found by walking up from the working directory.
pub const STORE_DIR: &str = ".casebook";
/// The database file in it.
pub const STORE_FILE: &str = "store.db";

/// The project a store handle sees unless told otherwise: everything the command line stores
/// without `--project`, and everything stored before there were projects.
pub const DEFAULT_PROJECT: &str = "default";

/// How messages that span projects name a dataset: `project/name`, or `name` in the default
/// project.
pub fn qualified(project: &str, name: &str) -> String {
    if project == DEFAULT_PROJECT { name.to_owned() } else { format!("{project}/{name}") }
}

/// What is told when opening a store upgrades its schema: the store's name, the schema version
/// it has and the one it is upgraded to.
type UpgradeNotice = Box<dyn Fn(&str, i64, i64) + Send + Sync>;

static UPGRADE_NOTICE: std::sync::OnceLock<UpgradeNotice> = std::sync::OnceLock::new();

/// Sets, once for the process, what opening a store tells before it upgrades the store's schema
/// (a migration may take a while on a large store: PostgreSQL's schema 6 rewrites every case
/// row). A new, empty store's schema is made without it. Later calls change nothing.
pub fn on_upgrade(notice: impl Fn(&str, i64, i64) + Send + Sync + 'static) {
    let _ = UPGRADE_NOTICE.set(Box::new(notice));
}

/// Tells the [`on_upgrade`] notice that `store` goes from schema `from` to `to` (not for a new
/// store, `from` = 0).
pub(crate) fn upgrading(store: &str, from: i64, to: i64) {
    if let (true, Some(notice)) = (from > 0, UPGRADE_NOTICE.get()) {
        notice(store, from, to);
    }
}

/// The nearest `.casebook/` folder at or above `start`.
pub fn find_store(start: &Path) -> Option<PathBuf> {
    // Anything named `store.db` counts, so that opening it says what is wrong with it.
    start.ancestors().map(|dir| dir.join(STORE_DIR)).find(|dir| dir.join(STORE_FILE).exists())
}

/// A dataset and its head.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetInfo {
    pub name: String,
    /// The head version number; 0 before the first commit.
    pub head: u64,
    pub cases: u64,
    pub header: DatasetHeader,
}

/// One version of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionInfo {
    pub dataset: String,
    pub number: u64,
    /// Content id of the version.
    pub id: String,
    pub parent: Option<u64>,
    pub author: String,
    /// RFC 3339.
    pub time: String,
    pub message: String,
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    pub cases: u64,
}

/// How a commit's cases relate to the head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitMode {
    /// The cases are the whole new version.
    Replace,
    /// The cases are added or replace those with their id; all others stay.
    Upsert,
    /// These ids are removed; all others stay.
    Remove(Vec<String>),
}

/// Who, when, why, and on top of what.
#[derive(Debug, Clone)]
pub struct CommitRequest {
    pub dataset: String,
    /// The dataset header (name, description, labels, metadata); edits are logged, not versioned.
    pub header: Option<DatasetHeader>,
    pub mode: CommitMode,
    /// The version the commit builds on; `None` means the head as it is at commit time.
    pub parent: Option<u64>,
    pub author: String,
    /// RFC 3339.
    pub time: String,
    pub message: String,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    Created(VersionInfo),
    /// The content is the head's: no version was made.
    Unchanged(Option<VersionInfo>),
}

/// A case as it was in one stretch of versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Revision {
    pub from_version: u64,
    /// The first version without this content; `None` while it is in the head.
    pub to_version: Option<u64>,
    pub content_id: String,
}

/// What changed between two versions.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub modified: Vec<ModifiedCase>,
    /// Cases whose content is the same but whose place in the order changed.
    pub moved: Vec<String>,
}

/// A case that differs between two versions ([`Store::changed`]): added, removed or modified.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangedCase {
    pub id: String,
    /// Its content id at the first version; `None` when that version does not hold it.
    pub before: Option<[u8; 32]>,
    /// The case at the second version, whole; `None` when that version does not hold it.
    pub after: Option<Case>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModifiedCase {
    pub id: String,
    pub changes: Vec<FieldChange>,
}

/// What [`Store::tag`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tagged {
    /// The tag is new.
    Set,
    /// The tag named this other version before.
    Moved { from: u64 },
    /// The tag already named the version: nothing changed, nothing was logged.
    Already,
}

/// A tag change, a header edit: what the log shows beside versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    pub time: String,
    pub author: String,
    pub kind: String,
    pub detail: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A dataset name that is not in the store, and what is (a suggestion or the names).
    #[error("no dataset named `{0}`{1}")]
    NoDataset(String, String),
    #[error("dataset `{dataset}` has no version `{reference}`{hint}")]
    NoVersion { dataset: String, reference: String, hint: String },
    #[error("`{reference}` names several versions of `{dataset}`: {candidates}; give more digits of the id")]
    Ambiguous { dataset: String, reference: String, candidates: String },
    #[error("dataset `{dataset}` moved on: its head is v{head}, the commit was made on v{parent}")]
    Conflict { dataset: String, parent: u64, head: u64 },
    #[error("the store at `{0}` was written by a newer casebook (schema version {1})")]
    Newer(PathBuf, i64),
    #[error("no store at `{0}`")]
    Missing(PathBuf),
    #[error("`{0}` is not a casebook store: {1}; `casebook init` makes a new store, `--store PATH` names another")]
    NotAStore(PathBuf, String),
    #[error(
        "the store `{0}` cannot be written (a read-only folder, or files of another user): reading works, writing needs write access to the store's folder"
    )]
    ReadOnly(PathBuf),
    #[error(
        "case `{0}…` has an id or a label longer than 2,000 bytes, which the shared store cannot index: \
         shorten it (nothing was written)"
    )]
    TooLong(String),
    #[error("cannot connect to the store `{url}`: {why}")]
    Connect { url: String, why: String },
    #[error("a stored case cannot be read back: {0}")]
    Corrupt(String),
    /// No run matches: the message says what was looked for.
    #[error("{0}")]
    NoRun(String),
    #[error("`{0}` is not a run hash (64 hexadecimal digits)")]
    BadHash(String),
    #[error("`{0}` names several runs: {1}")]
    AmbiguousRun(String, String),
    /// A commit whose input names one case id twice (readers of files report it with its place
    /// first; this is for the store's other callers).
    #[error("the commit holds the case `{0}` more than once (a version holds each id once): nothing was written")]
    DuplicateId(String),
    /// `begin_run` with an id that is taken (run ids are unique in the whole store).
    #[error("a run `{0}` exists already: a new run needs a new id")]
    RunExists(String),
    #[error(
        "`{0}` is not a project name: use 1 to 64 lowercase letters, digits, `-`, `_` or `.`, starting with a letter or digit"
    )]
    BadProject(String),
    /// A new dataset's name or a tag that [`names`] refuses.
    #[error(transparent)]
    BadName(#[from] NameError),
    #[error("no API key `{0}`: `casebook keys list` lists them")]
    NoKey(String),
    #[error("the commit was cancelled: its input had errors")]
    Cancelled,
    /// Cases named by id that a version lacks (`cases` lists them quoted), with a suggestion.
    #[error("{dataset} v{number} has no case {cases}{hint}: nothing was written")]
    NoCase { dataset: String, number: u64, cases: String, hint: String },
    /// A selection (`--where`, `--tag`) that chose no case of the version.
    #[error("the selection chooses no case of {dataset} v{number}: nothing was written")]
    NoneSelected { dataset: String, number: u64 },
    #[error(
        "case `{case}` names the seed file `{file}`, which was not read: a stored version must hold its seeds; \
         read the dataset from its file (not standard input) so the seed file is found beside it"
    )]
    UnreadSeedFile { case: String, file: String },
    #[error(transparent)]
    Canon(#[from] casebook_canon::CanonError),
    /// SQLite found a damaged page (`SQLITE_CORRUPT`, `SQLITE_NOTADB`), or a commit found that
    /// what it would build on is not what was stored. The transaction was rolled back.
    #[error("the store is damaged ({0}): nothing was written; run `casebook store check` to see what is wrong")]
    Damaged(String),
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error("cannot prepare the store: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// [`StoreError::RunExists`] for a unique violation of `begin_run`'s insert, else the error.
pub(crate) fn run_insert_error(id: &str, err: sqlx::Error) -> StoreError {
    match &err {
        sqlx::Error::Database(e) if e.is_unique_violation() => StoreError::RunExists(id.to_owned()),
        _ => err.into(),
    }
}

/// What [`StoreError::Damaged`] says of a file SQLite does not take for a database.
pub(crate) const NOT_A_DATABASE: &str = "SQLite: file is not a database";

impl From<sqlx::Error> for StoreError {
    /// Damage the database reports is said as such, from whichever query met it.
    fn from(err: sqlx::Error) -> Self {
        if let sqlx::Error::Database(e) = &err {
            if e.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                // SQLite's primary result codes are the low byte of the extended ones.
                let code = e.code().and_then(|c| c.parse::<i32>().ok()).map(|c| c & 0xff);
                match code {
                    Some(11) => return StoreError::Damaged(format!("SQLite: {}", e.message())),
                    Some(26) => return StoreError::Damaged(NOT_A_DATABASE.into()),
                    _ => {}
                }
            } else if matches!(e.code().as_deref(), Some("XX001" | "XX002")) {
                // PostgreSQL's `data_corrupted` and `index_corrupted`.
                return StoreError::Damaged(format!("PostgreSQL: {}", e.message()));
            }
        }
        StoreError::Database(err)
    }
}

/// A case ready to be stored: its id, content id and body. Preparing is the costly part of a
/// commit (serialising and hashing), so callers do it on as many threads as they have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub id: String,
    /// The content id, as bytes: of the whole case, whether or not `body` is compact.
    pub content_id: [u8; 32],
    /// The body to store: the case's JSON, compact when it has a seed file or a tool's
    /// snapshot file (see [`seeds`]).
    pub body: String,
    /// The documents a compact `body` refers to, which the store keeps once each.
    pub seeds: Vec<SeedDocument>,
    /// The case's distinct labels (the stores index them).
    pub labels: Vec<String>,
    /// The case's facets (`casebook_filter::facets_json`), which filters read.
    pub facets: String,
}

impl Prepared {
    /// The case as bytes that [`Prepared::from_bytes`] reads back: for a caller that keeps
    /// prepared cases a while (a capture sorts them) without preparing them again.
    pub fn to_bytes(&self) -> Vec<u8> {
        let texts = 3 + self.labels.len() + self.seeds.len();
        let mut out = Vec::with_capacity(self.body.len() + self.facets.len() + self.id.len() + 32 + 8 * texts);
        let text = |out: &mut Vec<u8>, s: &str| {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        };
        text(&mut out, &self.id);
        out.extend_from_slice(&self.content_id);
        text(&mut out, &self.body);
        text(&mut out, &self.facets);
        out.extend_from_slice(&(self.labels.len() as u64).to_le_bytes());
        for label in &self.labels {
            text(&mut out, label);
        }
        out.extend_from_slice(&(self.seeds.len() as u64).to_le_bytes());
        for seed in &self.seeds {
            out.extend_from_slice(&seed.content_id);
            text(&mut out, &seed.document);
        }
        out
    }

    /// Reads back what [`Prepared::to_bytes`] wrote; anything else is [`StoreError::Corrupt`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Prepared, StoreError> {
        struct Reader<'a>(&'a [u8]);
        impl Reader<'_> {
            fn take(&mut self, n: usize) -> Result<&[u8], StoreError> {
                if self.0.len() < n {
                    return Err(StoreError::Corrupt("a prepared case is cut short".into()));
                }
                let (head, rest) = self.0.split_at(n);
                self.0 = rest;
                Ok(head)
            }
            fn count(&mut self) -> Result<usize, StoreError> {
                let n = u64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default());
                usize::try_from(n).map_err(|_| StoreError::Corrupt("a prepared case is cut short".into()))
            }
            fn id(&mut self) -> Result<[u8; 32], StoreError> {
                Ok(self.take(32)?.try_into().unwrap_or([0; 32]))
            }
            fn text(&mut self) -> Result<String, StoreError> {
                let n = self.count()?;
                String::from_utf8(self.take(n)?.to_vec())
                    .map_err(|_| StoreError::Corrupt("a prepared case holds text that is not UTF-8".into()))
            }
        }
        let mut r = Reader(bytes);
        let id = r.text()?;
        let content_id = r.id()?;
        let body = r.text()?;
        let facets = r.text()?;
        let labels = (0..r.count()?).map(|_| r.text()).collect::<Result<Vec<_>, _>>()?;
        let seeds = (0..r.count()?)
            .map(|_| Ok(SeedDocument { content_id: r.id()?, document: r.text()? }))
            .collect::<Result<Vec<_>, StoreError>>()?;
        if !r.0.is_empty() {
            return Err(StoreError::Corrupt("a prepared case is followed by more bytes".into()));
        }
        Ok(Prepared { id, content_id, body, seeds, labels, facets })
    }
}

/// Commits `prepared` as `request` says, handed to the store in batches of 4,096: the path of
/// writes that have their cases in hand (review, freeze, recapture).
pub async fn commit_prepared(
    store: &AnyStore,
    request: CommitRequest,
    prepared: Vec<Prepared>,
) -> Result<CommitOutcome, StoreError> {
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let send = async move {
        let mut prepared = prepared.into_iter().peekable();
        while prepared.peek().is_some() {
            let batch: Vec<_> = prepared.by_ref().take(4096).collect();
            if tx.send(Ok(batch)).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(store.commit(request, rx), send).0
}

/// Prepares a case for [`Store::commit`].
pub fn prepare(case: &Case) -> Result<Prepared, StoreError> {
    if let Some(casebook_model::MemorySeeds::Path(file)) = &case.task.memory_seeds {
        return Err(StoreError::UnreadSeedFile { case: case.id.clone(), file: file.clone() });
    }
    let body = serde_json::to_string(case).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    // The content id from the body's text: the same id as from the case, for a sixth of the cost.
    let content_id = casebook_canon::content_id_bytes_of_json(casebook_canon::Kind::Case, &body)?;
    // Only a case with a seed or snapshot file has documents to keep apart: the others cost a
    // `match` and a look at their tools.
    let snapshot_file = case.task.tools.iter().flatten().any(|t| matches!(t.responses, Some(Responses::File { .. })));
    let (body, seeds) = match (&case.task.memory_seeds, snapshot_file) {
        (Some(casebook_model::MemorySeeds::File { .. }), _) | (_, true) => match seeds::compact(&body)? {
            Some((compact, seeds)) => (compact, seeds),
            None => (body, Vec::new()),
        },
        _ => (body, Vec::new()),
    };
    let mut labels = case.labels.clone().unwrap_or_default();
    labels.sort_unstable();
    labels.dedup();
    Ok(Prepared { id: case.id.clone(), content_id, body, seeds, labels, facets: casebook_filter::facets_json(case) })
}

/// A query (for either backend: `?1` and `$1` are both written `{dataset}`) that is true when a
/// whole-dataset commit adds cases between two kept ones whose places are too close to hold
/// them: the new places, `lo + (hi - lo) · k / (n + 1)`, would not all fall apart and strictly
/// between (about 50 insertions at one spot halve the gap down to adjacent doubles). Such a
/// commit renumbers every case, as a change of order does, so the order stays the input's.
pub(crate) fn crowded_sql(dataset: &str, kept_join: &str) -> String {
    format!(
        "SELECT EXISTS (SELECT 1 FROM (
            SELECT lo, hi, count(*) AS n FROM (
                SELECT (SELECT m.ord FROM incoming k {kept_join} members m ON m.case_id = k.case_id AND m.dataset = {dataset} AND m.to_v IS NULL
                        WHERE k.pos < i.pos ORDER BY k.pos DESC LIMIT 1) AS lo,
                       (SELECT m.ord FROM incoming k {kept_join} members m ON m.case_id = k.case_id AND m.dataset = {dataset} AND m.to_v IS NULL
                        WHERE k.pos > i.pos ORDER BY k.pos LIMIT 1) AS hi
                FROM changes c JOIN incoming i ON i.case_id = c.case_id WHERE c.kind = 1) AS gaps
            WHERE lo IS NOT NULL AND hi IS NOT NULL GROUP BY lo, hi) AS g
         WHERE (hi - lo) / (n + 1) <= (abs(lo) + abs(hi)) * 1e-15)"
    )
}

/// A case from its stored body; one that does not read back is damage.
pub(crate) fn parse_body(body: &str) -> Result<Case, StoreError> {
    serde_json::from_str(body).map_err(damaged_body)
}

pub(crate) fn damaged_body(err: serde_json::Error) -> StoreError {
    StoreError::Damaged(format!("a stored case cannot be read back: {err}"))
}

/// A membership row as [`Store::changed`] reads it: the case id, `from_v`, `to_v`, the content
/// id, and the body when the row is in the second version.
pub(crate) type ChangeRow = (String, i64, Option<i64>, [u8; 32], Option<String>);

/// The cases that differ between two versions, read from their membership rows ([`ChangeRow`]),
/// with their bodies at the second version still to be expanded ([`SeedDocuments`]) and read.
#[derive(Debug, Default)]
pub(crate) struct ChangedRows {
    /// Id, content id at the first version, and whether the second holds it (its body is then
    /// the next one of `bodies`).
    cases: Vec<(String, Option<[u8; 32]>, bool)>,
    pub(crate) bodies: Vec<String>,
}

impl ChangedRows {
    /// From the rows of the cases that begin or end between versions `from` and `to`, sorted by
    /// case id: the cases whose content differs at the two versions.
    pub(crate) fn new(rows: impl IntoIterator<Item = ChangeRow>, from: u64, to: u64) -> Self {
        let alive = |v: u64, f: i64, t: Option<i64>| f <= v as i64 && t.is_none_or(|t| t > v as i64);
        let mut out = Self::default();
        let mut each = rows.into_iter().peekable();
        while let Some((id, f, t, cid, body)) = each.next() {
            let mut before = alive(from, f, t).then_some(cid);
            let mut after = alive(to, f, t).then_some(cid).zip(body);
            while let Some((_, f, t, cid, body)) = each.next_if(|row| row.0 == id) {
                if alive(from, f, t) {
                    before = Some(cid);
                }
                if alive(to, f, t) {
                    after = Some(cid).zip(body);
                }
            }
            if before != after.as_ref().map(|(cid, _)| *cid) {
                out.cases.push((id, before, after.is_some()));
                out.bodies.extend(after.map(|(_, body)| body));
            }
        }
        out
    }

    /// The cases, their bodies read (once expanded).
    pub(crate) fn cases(self) -> Result<Vec<ChangedCase>, StoreError> {
        let mut bodies = self.bodies.into_iter();
        self.cases
            .into_iter()
            .map(|(id, before, held)| {
                let after = if held { bodies.next().map(|body| parse_body(&body)).transpose()? } else { None };
                Ok(ChangedCase { id, before, after })
            })
            .collect()
    }
}

/// A content id read from a store's row; another length is damage.
pub(crate) fn stored_cid(bytes: &[u8]) -> Result<[u8; 32], StoreError> {
    <[u8; 32]>::try_from(bytes)
        .map_err(|_| StoreError::Damaged(format!("a stored content id has {} bytes, not 32", bytes.len())))
}

/// The versions between which `diff` and `changed` compare, lower first, as the backends bind
/// them; `v0` (before the first version) names none.
/// The tags `tags` holds under the name `tag` (in any normal form, as an older casebook may have
/// stored it), or the error of a tag the dataset does not have, listing those it has.
pub(crate) fn named_tags<'a>(
    dataset: &str,
    tag: &str,
    tags: &'a [(String, i64)],
) -> Result<Vec<&'a (String, i64)>, StoreError> {
    let found: Vec<_> = tags.iter().filter(|(name, _)| names::nfc(name) == names::nfc(tag)).collect();
    if found.is_empty() {
        let mut have: Vec<&str> = tags.iter().map(|(name, _)| name.as_str()).collect();
        have.sort_unstable();
        let hint =
            if have.is_empty() { " (it has no tags)".to_owned() } else { format!(" (its tags: {})", have.join(", ")) };
        return Err(StoreError::NoVersion { dataset: dataset.to_owned(), reference: tag.to_owned(), hint });
    }
    Ok(found)
}

pub(crate) fn span(dataset: &str, from: u64, to: u64) -> Result<(i64, i64), StoreError> {
    let (lo, hi) = (from.min(to) as i64, from.max(to) as i64);
    if lo == 0 {
        return Err(StoreError::NoVersion { dataset: dataset.to_owned(), reference: "v0".into(), hint: String::new() });
    }
    Ok((lo, hi))
}

/// A case's revisions from its membership rows `(from, to, content id)` in version order: rows
/// that only moved keep their content, and are merged into one revision.
pub(crate) fn revisions(rows: impl IntoIterator<Item = (i64, Option<i64>, String)>) -> Vec<Revision> {
    let mut out: Vec<Revision> = Vec::new();
    for (from, to, cid) in rows {
        match out.last_mut() {
            Some(last) if last.content_id == cid && last.to_version == Some(from as u64) => {
                last.to_version = to.map(|t| t as u64);
            }
            _ => out.push(Revision { from_version: from as u64, to_version: to.map(|t| t as u64), content_id: cid }),
        }
    }
    out
}

/// Which cases of a version a read returns, in the version's order.
#[derive(Debug, Clone, Default)]
pub struct Select {
    /// Only the cases it matches; `None` for all of them.
    pub filter: Option<Filter>,
    /// At most this many: the first ones that match.
    pub limit: Option<u64>,
}

impl Select {
    pub fn all() -> Self {
        Self::default()
    }
}

/// Where a page of a version's cases ends: the last case's place in the order and its id.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Cursor {
    pub ord: f64,
    pub id: String,
}

/// A page of cases (their bodies, the native JSON as stored) and the cursor of the next page,
/// `None` after the last: a page is read one case longer than asked, so a cursor always leads
/// to a page with cases in it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    pub bodies: Vec<String>,
    pub next: Option<Cursor>,
    /// The cursor of the page before, for [`Store::page_before`] (the page's first case), `None`
    /// when no selected case comes before the page.
    pub previous: Option<Cursor>,
}

/// Batches of prepared cases for a commit; `Err(())` cancels it (its input had errors).
pub type CaseBatches = tokio::sync::mpsc::Receiver<Result<Vec<Prepared>, ()>>;

/// The contract every backend keeps.
///
/// - Versions are immutable: what `cases` returns for a version never changes.
/// - `commit` is one transaction: it either makes one version or writes nothing. With a
///   `parent`, it fails with [`StoreError::Conflict`] if the head is not that version.
/// - Content identical to the head makes no version ([`CommitOutcome::Unchanged`]).
/// - A case's content id depends on its content only; a case stored once is stored once.
/// - A seed file's document is stored once however many cases carry it (`seeds.rs`); reads
///   give every case back whole.
#[allow(async_fn_in_trait)]
pub trait Store {
    async fn datasets(&self) -> Result<Vec<DatasetInfo>, StoreError>;
    async fn commit(&self, request: CommitRequest, cases: CaseBatches) -> Result<CommitOutcome, StoreError>;
    async fn versions(&self, dataset: &str) -> Result<Vec<VersionInfo>, StoreError>;
    async fn events(&self, dataset: &str) -> Result<Vec<Event>, StoreError>;
    /// The version a reference names: a number, `latest`, a content id or a prefix of one, or a
    /// tag, in that order (see [`names`]). A miss says what there is instead.
    async fn resolve(&self, dataset: &str, reference: &Ref) -> Result<VersionInfo, StoreError> {
        resolve_by_listing(self, dataset, reference).await
    }
    async fn header(&self, dataset: &str) -> Result<DatasetHeader, StoreError>;
    async fn case(&self, dataset: &str, version: u64, id: &str) -> Result<Option<Case>, StoreError>;
    /// Which of `ids` the version holds, found without reading their bodies.
    async fn holding(
        &self,
        dataset: &str,
        version: u64,
        ids: &[String],
    ) -> Result<std::collections::HashSet<String>, StoreError>;
    /// The cases of a version that `select` picks, in order, in batches of at most `batch` to
    /// `each` (which returns `false` to stop). Returns how many were passed on.
    async fn cases(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        batch: usize,
        each: &mut dyn FnMut(Vec<Case>) -> bool,
    ) -> Result<u64, StoreError> {
        let mut failed = None;
        let total = self
            .bodies(dataset, version, select, batch, &mut |bodies| match bodies
                .iter()
                .map(|b| parse_body(b))
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(cases) => each(cases),
                Err(err) => {
                    failed = Some(err);
                    false
                }
            })
            .await?;
        match failed {
            Some(err) => Err(err),
            None => Ok(total),
        }
    }
    /// Like [`Store::cases`], the native JSON of each case as committed (`serde_json` of the
    /// case, with its seed file's document in place: see [`SeedDocuments`]).
    async fn bodies(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        batch: usize,
        each: &mut dyn FnMut(Vec<String>) -> bool,
    ) -> Result<u64, StoreError>;
    /// How many cases of a version `select` picks.
    async fn count(&self, dataset: &str, version: u64, select: &Select) -> Result<u64, StoreError>;
    async fn history(&self, dataset: &str, id: &str) -> Result<Vec<Revision>, StoreError>;
    async fn diff(&self, dataset: &str, from: u64, to: u64) -> Result<Diff, StoreError>;
    /// How many cases each list of the diff from `from` to `to` holds, counted in the database
    /// over the rows [`Store::diff`] reads (only those that begin or end between the two).
    async fn diff_totals(&self, dataset: &str, from: u64, to: u64) -> Result<DiffTotals, StoreError>;
    /// A page of one list of the diff from `from` to `to`: at most `size` cases in id order
    /// (bytes) from `start`, a modified case with its field changes. Reads the rows
    /// [`Store::diff_totals`] reads and the bodies of the page's modified cases only.
    async fn diff_page(
        &self,
        dataset: &str,
        from: u64,
        to: u64,
        list: DiffList,
        start: DiffFrom<'_>,
        size: usize,
    ) -> Result<DiffPage, StoreError>;
    /// The cases that differ between versions `from` and `to` (not those that only moved), in
    /// id order, each with its content id at `from` and its case at `to`: what a three-way
    /// merge needs ([`Changes`]), in one read of the rows [`Store::diff`] reads, without
    /// reading a body twice nor comparing fields.
    async fn changed(&self, dataset: &str, from: u64, to: u64) -> Result<Vec<ChangedCase>, StoreError>;
    /// Names `version` by `tag` (NFC), moving the tag if it names another version; the change is
    /// logged as a tag event (`prod: v1 → v2`). A tag that already names `version` is left as it
    /// is and nothing is logged: [`Tagged::Already`].
    async fn tag(&self, dataset: &str, version: u64, tag: &str, author: &str, time: &str)
    -> Result<Tagged, StoreError>;
    /// Removes the tag `tag` of a dataset, logged as a tag event, and gives the version it named.
    /// A tag the dataset does not have is [`StoreError::NoVersion`] naming it, with the
    /// dataset's tags in the hint. Tags are compared in Unicode NFC, as [`Store::tag`] stores them.
    async fn untag(&self, dataset: &str, tag: &str, author: &str, time: &str) -> Result<u64, StoreError>;
    /// A page of the cases of a version that `select` picks (its limit aside): at most `size`,
    /// in order, from just after `after`. A cursor stays valid while versions are committed (a
    /// version never changes), so the pages of a version are the same whenever they are read.
    async fn page(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        after: Option<&Cursor>,
        size: usize,
    ) -> Result<Page, StoreError>;
    /// Where case `id` is in the order of version `version`: the cursor a page just after it
    /// starts from (so the case after it in any selection is a page of one from there); `None`
    /// when the version does not hold it. One indexed read.
    async fn place(&self, dataset: &str, version: u64, id: &str) -> Result<Option<Cursor>, StoreError>;
    /// The page of the cases `select` picks (its limit aside) that ends just before `before`:
    /// at most `size`, in the version's order, read one case longer so that `previous` is given
    /// only when a selected case comes before the page (`next` is its last case's).
    async fn page_before(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        before: &Cursor,
        size: usize,
    ) -> Result<Page, StoreError>;
    /// The tags of a dataset and the versions they name, by name.
    async fn tags(&self, dataset: &str) -> Result<Vec<(String, u64)>, StoreError>;
    /// [`Store::page`] with the bodies joined by commas (the inside of a JSON array), for a
    /// server that sends them on as they are: backends make it in one piece where they can.
    async fn page_json(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        after: Option<&Cursor>,
        size: usize,
    ) -> Result<JsonPage, StoreError> {
        Ok(JsonPage::from(self.page(dataset, version, select, after, size).await?))
    }

    /// Keeps spans (and GenAI log records) the OTLP receiver got at `received` for the
    /// project's `dataset`; one kept already (same trace and span id) is replaced, so a batch sent
    /// twice keeps each span once.
    async fn pending_add(&self, dataset: &str, received: i64, spans: &[PendingSpan]) -> Result<(), StoreError>;
    /// The traces with kept spans or records: the project's, or every project's (the server's
    /// task that makes cases of them), oldest first.
    async fn pending_traces(&self, every_project: bool) -> Result<Vec<PendingTrace>, StoreError>;
    /// A trace's kept spans and records, in the order received.
    async fn pending_spans(&self, trace_id: &str) -> Result<Vec<PendingSpan>, StoreError>;
    /// How many spans and records are kept, in every project.
    async fn pending_count(&self) -> Result<u64, StoreError>;
    /// Records that a trace became cases at `captured` (`cases`: JSON, case id -> content id).
    async fn trace_captured(&self, trace_id: &str, captured: i64, cases: &str) -> Result<(), StoreError>;
    /// Deletes a trace's kept spans and records and its capture record.
    async fn forget_trace(&self, trace_id: &str) -> Result<(), StoreError>;
    /// Keeps a warning of a background capture of `trace_id` into `dataset`, made at `at`; a
    /// dataset keeps its [`CAPTURE_WARNINGS_KEPT`] most recent.
    async fn capture_warn(&self, dataset: &str, trace_id: &str, at: i64, message: &str) -> Result<(), StoreError>;
    /// The project's kept capture warnings, by dataset, the most recent first.
    async fn capture_warnings(&self) -> Result<Vec<CaptureWarning>, StoreError>;
    /// A page of the cases of a version that `select` picks (its limit aside), in the order of
    /// `sort` (see [`sort`] for the order of kinds of values; missing values last): at most
    /// `size`, from just after `seek`'s key, or ending just before it when it reads backwards.
    /// A top-N in the database over the selection, keyed on (value, case id): `next` is given
    /// only when a selected case follows the page, `previous` only when one comes before it.
    async fn page_sorted(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        sort: &Sort,
        seek: Option<&SortSeek>,
        size: usize,
    ) -> Result<SortedPage, StoreError>;
    /// The key of case `id` in `sort` in version `version` (where a walk just after it starts),
    /// or `None` when the version does not hold it. One read.
    async fn sort_key(&self, dataset: &str, version: u64, sort: &Sort, id: &str)
    -> Result<Option<SortKey>, StoreError>;
    /// Deletes the kept warnings of `trace_id`: a capture of the trace made again replaces
    /// them with its own, so a warning a later capture no longer has is not listed as current.
    async fn capture_warnings_clear(&self, trace_id: &str) -> Result<(), StoreError>;
    /// The cases of a version that `select` picks (its limit aside) counted per value at `path`
    /// in the database, as [`casebook_filter::Groups`] counts them ([`Groups::sorted`]'s order);
    /// `None` when the backend cannot for this path or filter, and the caller counts the cases
    /// it reads.
    ///
    /// [`Groups::sorted`]: casebook_filter::Groups::sorted
    async fn group_counts(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        path: &casebook_filter::FieldPath,
    ) -> Result<Option<Vec<(Option<serde_json::Value>, u64)>>, StoreError> {
        let _ = (dataset, version, select, path);
        Ok(None)
    }
}

/// A group's value as a store's SQL gives it: the JSON text at the path (`None`: missing), read
/// as JSON (text that is not JSON is kept as a string, as [`casebook_filter::Groups`] keeps it).
pub(crate) fn group_value(text: Option<String>) -> Option<serde_json::Value> {
    text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
}

/// `next` if a selected case follows it (a full page read in one piece, whose last case may be
/// the version's last): a cursor is given only to a page with cases in it.
pub(crate) async fn if_more<S: Store>(
    store: &S,
    dataset: &str,
    version: u64,
    select: &Select,
    next: Option<Cursor>,
) -> Result<Option<Cursor>, StoreError> {
    let Some(next) = next else { return Ok(None) };
    let after = store.page(dataset, version, select, Some(&next), 1).await?;
    Ok(if after.bodies.is_empty() { None } else { Some(next) })
}

/// A page of cases as the inside of a JSON array (see [`Store::page_json`]): UTF-8 bytes, as
/// the store holds them (a page is sent on, not read).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonPage {
    pub json: Vec<u8>,
    pub count: usize,
    pub next: Option<Cursor>,
}

impl From<Page> for JsonPage {
    fn from(page: Page) -> Self {
        JsonPage { json: page.bodies.join(",").into_bytes(), count: page.bodies.len(), next: page.next }
    }
}

/// [`Store::resolve`] from the list of versions and tags (what backends fall back to). A
/// number and `latest` mean that version; a content id or a prefix of one ([`names::MIN_PREFIX`]
/// digits or more) the version whose id starts with it, and only where none does a tag of that
/// text (which an older casebook could make); anything else a tag. A miss says why: a number
/// without its `v`, a prefix too short, a tag there is not.
pub(crate) async fn resolve_by_listing<S: Store + ?Sized>(
    store: &S,
    dataset: &str,
    reference: &Ref,
) -> Result<VersionInfo, StoreError> {
    let mut versions = store.versions(dataset).await?;
    let head = versions.last().map_or(0, |v| v.number);
    let tags = match reference {
        Ref::Name(_) | Ref::Id(_) => store.tags(dataset).await?,
        _ => Vec::new(),
    };
    let no_version =
        |hint: String| StoreError::NoVersion { dataset: dataset.to_owned(), reference: reference.to_string(), hint };
    let number = match reference {
        Ref::Latest => head,
        Ref::Number(n) => *n,
        Ref::Id(prefix) => {
            let found: Vec<&VersionInfo> =
                versions.iter().filter(|v| v.id.starts_with(prefix.as_str())).take(5).collect();
            match found.as_slice() {
                [one] => one.number,
                [] => match tags.iter().find(|(tag, _)| tag.eq_ignore_ascii_case(prefix)) {
                    Some((_, v)) => *v,
                    None => return Err(no_version("; no version's content id starts with it".into())),
                },
                many => {
                    return Err(StoreError::Ambiguous {
                        dataset: dataset.to_owned(),
                        reference: prefix.clone(),
                        candidates: listed(many),
                    });
                }
            }
        }
        Ref::Name(name) => match names::find(tags.iter().map(|(tag, _)| tag.as_str()), name) {
            Some(tag) => tags.iter().find(|(t, _)| t == tag).map_or(0, |(_, v)| *v),
            None => return Err(no_version(misread(name, &versions, &tags))),
        },
    };
    match versions.iter().position(|v| v.number == number) {
        Some(at) => Ok(versions.swap_remove(at)),
        None => Err(no_version(format!("; {}", known_versions(head)))),
    }
}

/// Why `name` names no version (no tag has it): a number is not a version (`v3` is), a few hex
/// digits are too short a prefix, else the tags there are.
fn misread(name: &str, versions: &[VersionInfo], tags: &[(String, u64)]) -> String {
    let head = versions.last().map_or(0, |v| v.number);
    let short = format!("a content-id prefix needs at least {} hexadecimal digits", names::MIN_PREFIX);
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        let number = name.parse::<u64>().map_or_else(|_| name.trim_start_matches('0').to_owned(), |n| n.to_string());
        return match name.parse::<u64>() {
            Ok(n) if (1..=head).contains(&n) => {
                format!("; did you mean `v{number}`? (a number alone is not a version, and {short})")
            }
            _ => format!("; a version is written `v{number}`, and {} ({short})", known_versions(head)),
        };
    }
    if name.bytes().all(|b| b.is_ascii_hexdigit()) {
        let lower = name.to_ascii_lowercase();
        let starting: Vec<&VersionInfo> = versions.iter().filter(|v| v.id.starts_with(&lower)).take(5).collect();
        return match starting.as_slice() {
            [] => format!("; {short}"),
            found => format!("; {short} (versions whose id starts with `{name}`: {})", listed(found)),
        };
    }
    if tags.is_empty() {
        return "; it has no tags (`casebook tag` names a version)".to_owned();
    }
    let known: Vec<String> = tags.iter().map(|(tag, _)| tag.clone()).collect();
    suggestion(name, &known, "tags")
}

/// What versions a dataset whose head is `head` has.
fn known_versions(head: u64) -> String {
    match head {
        0 => "it has no versions yet".into(),
        1 => "its only version is v1".into(),
        _ => format!("its versions are v1 to v{head}"),
    }
}

/// Versions as an ambiguity lists them: `v1 (0a1b2c3d4e5f)`.
fn listed(versions: &[&VersionInfo]) -> String {
    let each: Vec<String> =
        versions.iter().map(|v| format!("v{} ({})", v.number, &v.id[..12.min(v.id.len())])).collect();
    each.join(", ")
}

/// The dataset name a commit is made under: the stored dataset's (`stored`, found from the
/// request's name in any normal form), else a new dataset's name as [`names::dataset_name`]
/// makes it; only new names are checked, so datasets named before the rules keep taking commits.
/// A removal never makes a dataset.
pub(crate) fn commit_name(stored: Option<String>, request: &CommitRequest) -> Result<String, StoreError> {
    match stored {
        Some(name) => Ok(name),
        None if matches!(request.mode, CommitMode::Remove(_)) => {
            Err(StoreError::NoDataset(request.dataset.clone(), String::new()))
        }
        None => Ok(names::dataset_name(&request.dataset)?),
    }
}

/// Whether a commit under `name` may be made: refused with [`names::dataset_name`]'s reason
/// when no dataset has the name and it is not allowed for a new one. For callers that can say
/// so before reading an upload (the commit would refuse it anyway).
pub async fn check_commit_name(store: &impl Store, name: &str) -> Result<(), StoreError> {
    let Err(err) = names::dataset_name(name) else { return Ok(()) };
    match store.header(name).await {
        Err(StoreError::NoDataset(..)) => Err(err.into()),
        Err(other) => Err(other),
        Ok(_) => Ok(()),
    }
}

/// Dataset row ids by project and name. A dataset is never removed and its row id never
/// changes, so a store handle (and its clones) may remember them. Only ids read outside a
/// transaction (committed rows) are kept.
#[derive(Clone, Default)]
pub(crate) struct DatasetIds(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<(String, String), i64>>>);

impl DatasetIds {
    pub(crate) fn get(&self, project: &str, name: &str) -> Option<i64> {
        let ids = self.0.lock().ok()?;
        ids.get(&(project.to_owned(), name.to_owned())).copied()
    }

    pub(crate) fn keep(&self, project: &str, name: &str, id: i64) {
        if let Ok(mut ids) = self.0.lock() {
            ids.insert((project.to_owned(), name.to_owned()), id);
        }
    }
}

/// The error for a dataset `name` that is not among the `known` ones, with what there is.
pub(crate) fn no_dataset(name: &str, known: &[String]) -> StoreError {
    let hint = if known.is_empty() {
        "; the store has no datasets yet (`casebook import FILE --dataset NAME` adds one)".to_owned()
    } else {
        suggestion(name, known, "datasets")
    };
    StoreError::NoDataset(name.to_owned(), hint)
}

/// What to say after "no such name": the known name it is a typo of, else the names there are.
pub(crate) fn suggestion(name: &str, known: &[String], what: &str) -> String {
    let refs: Vec<&str> = known.iter().map(String::as_str).collect();
    if let Some(near) = casebook_model::did_you_mean(name, &refs) {
        return format!("; did you mean `{near}`?");
    }
    match known.len() {
        0 => String::new(),
        n => {
            let shown: Vec<String> = known.iter().take(10).map(|k| format!("`{k}`")).collect();
            let more = if n > 10 { format!(" and {} more", n - 10) } else { String::new() };
            format!("; the {what} are {}{more}", shown.join(", "))
        }
    }
}
