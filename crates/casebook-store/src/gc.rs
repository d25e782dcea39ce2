//! `casebook store gc`: removing what nothing refers to, across every project of a store.
//!
//! Three kinds of rows are kept by reference and can outlive what referred to them:
//!
//! - case bodies (`blobs`, with their `blob_cids`, `blob_facets` and `case_labels` rows), named by
//!   `members` rows: a PostgreSQL commit that fails after writing its bodies leaves them (see
//!   `postgres/mod.rs`), and a purge removes the members that named them;
//! - seed documents (`seed_documents`), named by the bodies that hold a reference to them
//!   (`seeds.rs`);
//! - run outputs (`run_outputs`), named by the run hash (`"hash"`) of a result of a run of their
//!   project; an output whose result is gone (a purge) but which a later run reused stays.
//!
//! Pending capture spans name no body, document or output (`captured_traces` keeps content ids
//! to compare with the head, not to read bodies), so they keep nothing alive.
//!
//! Safety while others write. On SQLite a commit is one `BEGIN IMMEDIATE` transaction that
//! writes its bodies and the version naming them, and `gc` is one such transaction too: the two
//! never overlap. On PostgreSQL a commit writes its bodies in short transactions of their own
//! before the version that names them, and may reuse a body nothing names yet (one a failed commit
//! left): each commit holds [`GC_LOCK`] in share mode from before its first body to after its
//! version (or its failure), and `gc` deletes only while holding it exclusively, so no commit is
//! in flight while it deletes (`postgres/gc.rs`).

use serde::Serialize;
use sqlx::{Connection, Row};

use crate::seeds::{may_refer, seed_references};
use crate::{SqliteStore, StoreError};

/// The key of the PostgreSQL advisory lock that commits take in share mode and `gc` in exclusive
/// mode ("casebook gc").
pub(crate) const GC_LOCK: i64 = 0x6361_7365_6267_6363;

/// What nothing refers to: how many rows of each kind, and the bytes of their text.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Unreferenced {
    /// Case bodies no version names.
    pub bodies: u64,
    /// Their text, in bytes.
    pub body_bytes: u64,
    /// Seed documents no stored body refers to (bodies that are unreferenced themselves do not
    /// count).
    pub seed_documents: u64,
    /// Their text, in bytes.
    pub seed_bytes: u64,
    /// Run outputs no result of a run of their project names by run hash.
    pub outputs: u64,
    /// Their text, in bytes.
    pub output_bytes: u64,
}

impl Unreferenced {
    /// Whether there is nothing to collect.
    pub fn is_empty(&self) -> bool {
        self.bodies == 0 && self.seed_documents == 0 && self.outputs == 0
    }

    /// The bytes of text of everything counted.
    pub fn bytes(&self) -> u64 {
        self.body_bytes + self.seed_bytes + self.output_bytes
    }
}

/// What `gc` should do besides deleting.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GcOptions {
    /// Count only; delete nothing.
    pub dry_run: bool,
    /// SQLite: rewrite the store file afterwards (`VACUUM`) so that the freed pages go back to
    /// the file system; PostgreSQL: `VACUUM` the tables at once instead of leaving them to
    /// autovacuum.
    pub vacuum: bool,
}

/// What `gc` did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// What was removed (with `dry_run`: what would be).
    pub removed: Unreferenced,
    pub dry_run: bool,
    /// SQLite: the bytes of free pages inside the store file after `gc` (later commits fill them
    /// before the file grows); 0 after a `VACUUM`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
    /// SQLite: the size of the store file before and after (`vacuum` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_bytes: Option<(u64, u64)>,
    /// Whether the tables were vacuumed (PostgreSQL) or the file rewritten (SQLite).
    pub vacuumed: bool,
}

/// Rows deleted by one statement of `gc` (bounded: a statement's list of keys is held in memory).
pub(crate) const DELETE_ROWS: usize = 10_000;

/// The seed documents referred to by `bodies` (each a stored body), added to `into`.
pub(crate) fn add_references(body: &str, into: &mut std::collections::HashSet<[u8; 32]>) -> Result<(), StoreError> {
    if !may_refer(body.as_bytes()) {
        return Ok(());
    }
    let ids = seed_references(body).map_err(|err| {
        StoreError::Corrupt(format!(
            "a case body cannot be read for the seed documents it refers to ({err}); nothing was removed: \
             `casebook store check` lists what is damaged"
        ))
    })?;
    into.extend(ids);
    Ok(())
}

/// Bodies whose text may refer to a seed document (SQLite: `instr`, PostgreSQL: `strpos`, both
/// with `$1`/`?` free): the two markers of `seeds.rs`, as a condition on `b.body`.
pub(crate) fn may_refer_sql(find: &str) -> String {
    format!(r#"({find}(b.body, '"memory_seeds":{{"file":') > 0 OR {find}(b.body, '"responses":{{"file":') > 0)"#)
}

impl SqliteStore {
    /// Removes the case bodies, seed documents and run outputs that nothing refers to, in every
    /// project (or, with `dry_run`, counts them), in one write transaction: commits wait for it,
    /// readers do not.
    pub async fn gc(&self, options: GcOptions) -> Result<GcReport, StoreError> {
        if self.is_read_only() && !options.dry_run {
            return Err(StoreError::ReadOnly(self.path().to_owned()));
        }
        let mut conn = self.pool().acquire().await?;
        // Enough cache for the bodies' index and the members' index they are looked up in.
        sqlx::query("PRAGMA cache_size = -65536").execute(&mut *conn).await?;
        let removed = if options.dry_run {
            let mut tx = conn.begin().await?;
            let counted = sqlite_count(&mut tx).await;
            tx.rollback().await?;
            counted?
        } else {
            let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
            let removed = sqlite_collect(&mut tx).await?;
            tx.commit().await?;
            removed
        };
        sqlx::query("PRAGMA cache_size = -2000").execute(&mut *conn).await?;
        let mut report = GcReport { removed, dry_run: options.dry_run, ..GcReport::default() };
        if options.vacuum && !options.dry_run {
            let before = file_size(self.path());
            sqlx::query("VACUUM").execute(&mut *conn).await?;
            // The rewrite went through the log: move it into the file and empty the log.
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut *conn).await?;
            report.file_bytes = Some((before, file_size(self.path())));
            report.vacuumed = true;
        }
        let free: (i64, i64) =
            sqlx::query_as("SELECT * FROM pragma_freelist_count, pragma_page_size").fetch_one(&mut *conn).await?;
        report.free_bytes = Some((free.0 * free.1) as u64);
        Ok(report)
    }

    /// What `gc` would remove (for `store check`).
    pub async fn unreferenced(&self) -> Result<Unreferenced, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let mut tx = conn.begin().await?;
        let counted = sqlite_count(&mut tx).await;
        tx.rollback().await?;
        counted
    }
}

fn file_size(path: &std::path::Path) -> u64 {
    fs_err::metadata(path).map(|m| m.len()).unwrap_or(0)
}

type SqliteTx<'c> = sqlx::Transaction<'c, sqlx::Sqlite>;

/// Bodies no member names: walks `blob_cids` (one small row a body) and looks each body up in
/// `members_blob`.
const SQLITE_UNREFERENCED_BODIES: &str =
    "FROM blob_cids c JOIN blobs b ON b.id = c.blob WHERE NOT EXISTS (SELECT 1 FROM members m WHERE m.blob = c.blob)";

/// Run outputs no result names: not the one that kept it (same key), nor any result of a run of
/// its project with its run hash. The results are read only when some output lost its own.
const SQLITE_UNREFERENCED_OUTPUTS: &str = "
    WITH used AS MATERIALIZED (
        SELECT DISTINCT u.project, unhex(json_extract(r.result, '$.hash')) AS hash
        FROM run_results r JOIN runs u ON u.seq = r.key >> 32
        WHERE json_valid(r.result) AND json_type(r.result, '$.hash') = 'text')
    SELECT o.key, octet_length(o.output) FROM run_outputs o
    WHERE NOT EXISTS (SELECT 1 FROM run_results r WHERE r.key = o.key)
      AND NOT EXISTS (SELECT 1 FROM used WHERE used.project = o.project AND used.hash = o.hash)";

/// Counts what `sqlite_collect` would remove, writing nothing.
async fn sqlite_count(tx: &mut SqliteTx<'_>) -> Result<Unreferenced, StoreError> {
    let mut found = Unreferenced::default();
    let (bodies, bytes): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT count(*), coalesce(sum(octet_length(b.body)), 0) {SQLITE_UNREFERENCED_BODIES}"
    )))
    .fetch_one(&mut **tx)
    .await?;
    (found.bodies, found.body_bytes) = (bodies as u64, bytes as u64);
    let seeds = sqlite_unreferenced_seeds(tx, true).await?;
    found.seed_documents = seeds.len() as u64;
    found.seed_bytes = seeds.iter().map(|s| s.1).sum();
    let outputs: Vec<(i64, i64)> = sqlx::query_as(SQLITE_UNREFERENCED_OUTPUTS).fetch_all(&mut **tx).await?;
    found.outputs = outputs.len() as u64;
    found.output_bytes = outputs.iter().map(|o| o.1 as u64).sum();
    Ok(found)
}

/// The seed documents (row id, bytes) that no body refers to; with `live_only`, bodies no member
/// names do not count (they are about to go).
async fn sqlite_unreferenced_seeds(tx: &mut SqliteTx<'_>, live_only: bool) -> Result<Vec<(i64, u64)>, StoreError> {
    use futures_util::TryStreamExt;
    let any: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM seed_documents)").fetch_one(&mut **tx).await?;
    if !any {
        return Ok(Vec::new());
    }
    let live = if live_only { " AND EXISTS (SELECT 1 FROM members m WHERE m.blob = b.id)" } else { "" };
    let sql = format!("SELECT b.body FROM blobs b WHERE {}{live}", may_refer_sql("instr"));
    let mut used = std::collections::HashSet::new();
    {
        let mut rows = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql)).fetch(&mut **tx);
        while let Some(body) = rows.try_next().await? {
            add_references(&body, &mut used)?;
        }
    }
    let mut unused = Vec::new();
    let mut rows = sqlx::query("SELECT id, cid, octet_length(document) FROM seed_documents").fetch(&mut **tx);
    while let Some(row) = rows.try_next().await? {
        let cid: Vec<u8> = row.get(1);
        if <[u8; 32]>::try_from(cid.as_slice()).is_ok_and(|cid| !used.contains(&cid)) {
            unused.push((row.get(0), row.get::<i64, _>(2) as u64));
        }
    }
    Ok(unused)
}

/// Removes what nothing refers to; what was removed.
async fn sqlite_collect(tx: &mut SqliteTx<'_>) -> Result<Unreferenced, StoreError> {
    let mut removed = Unreferenced::default();
    sqlx::raw_sql("DROP TABLE IF EXISTS temp.gc_bodies; CREATE TEMP TABLE gc_bodies (id INTEGER PRIMARY KEY, cid BLOB NOT NULL, bytes INTEGER NOT NULL)")
        .execute(&mut **tx)
        .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO temp.gc_bodies (id, cid, bytes) SELECT c.blob, c.cid, octet_length(b.body) {SQLITE_UNREFERENCED_BODIES}"
    )))
    .execute(&mut **tx)
    .await?;
    let (bodies, bytes): (i64, i64) =
        sqlx::query_as("SELECT count(*), coalesce(sum(bytes), 0) FROM temp.gc_bodies").fetch_one(&mut **tx).await?;
    (removed.bodies, removed.body_bytes) = (bodies as u64, bytes as u64);
    if bodies > 0 {
        // `case_labels` has no index by body: one pass over it.
        sqlx::raw_sql(
            "DELETE FROM case_labels WHERE blob IN (SELECT id FROM temp.gc_bodies);
             DELETE FROM blob_facets WHERE blob IN (SELECT id FROM temp.gc_bodies);
             DELETE FROM blob_cids WHERE cid IN (SELECT cid FROM temp.gc_bodies);
             DELETE FROM blobs WHERE id IN (SELECT id FROM temp.gc_bodies);",
        )
        .execute(&mut **tx)
        .await?;
    }
    sqlx::query("DROP TABLE temp.gc_bodies").execute(&mut **tx).await?;

    let seeds = sqlite_unreferenced_seeds(tx, false).await?;
    removed.seed_documents = seeds.len() as u64;
    removed.seed_bytes = seeds.iter().map(|s| s.1).sum();
    for chunk in seeds.chunks(DELETE_ROWS) {
        let ids: Vec<String> = chunk.iter().map(|s| s.0.to_string()).collect();
        sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM seed_documents WHERE id IN ({})", ids.join(","))))
            .execute(&mut **tx)
            .await?;
    }

    let outputs: Vec<(i64, i64)> = sqlx::query_as(SQLITE_UNREFERENCED_OUTPUTS).fetch_all(&mut **tx).await?;
    removed.outputs = outputs.len() as u64;
    removed.output_bytes = outputs.iter().map(|o| o.1 as u64).sum();
    for chunk in outputs.chunks(DELETE_ROWS) {
        let keys: Vec<String> = chunk.iter().map(|o| o.0.to_string()).collect();
        sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM run_outputs WHERE key IN ({})", keys.join(","))))
            .execute(&mut **tx)
            .await?;
    }
    Ok(removed)
}
