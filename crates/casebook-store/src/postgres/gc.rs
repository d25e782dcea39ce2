//! `casebook store gc` on the shared store (see `src/gc.rs` for what is collected).
//!
//! Commits write their bodies before the version that names them, in transactions of their own,
//! and reuse bodies that nothing names yet; so while one is in flight, a body no member names may
//! be about to be named. Every commit holds the advisory lock [`GC_LOCK`] in share mode for its
//! whole course (`PostgresStore::commit`, on the connection that makes the version; the lock
//! goes with the connection if the commit is cut off). `gc` first lists the bodies no member names
//! without any lock (the long part: one pass over the bodies and the members), then takes the lock
//! exclusively and, in one transaction, deletes those of them that still have no member, and the
//! seed documents and run outputs nothing refers to. While it holds the lock no commit is in
//! flight: every commit that looked a listed body up has finished, and its members are seen by
//! the re-check; commits that begin meanwhile wait for it (seconds at a million bodies). It
//! asks for the lock without queueing for 5 s (commits keep coming, each in share mode), then
//! queues: a waiting `gc` holds back commits that begin after it, not those in flight.
//!
//! PostgreSQL keeps deleted rows' space until a vacuum marks it free for new rows; `gc` leaves
//! that to autovacuum unless asked to `VACUUM` the tables itself (the files shrink only by the
//! empty pages at their ends; `VACUUM FULL` would give everything back but locks the tables).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Row};

use super::PostgresStore;
use crate::StoreError;
use crate::gc::{DELETE_ROWS, GC_LOCK, GcOptions, GcReport, Unreferenced, add_references, may_refer_sql};

/// How long `gc` asks for its lock without queueing before it queues.
const POLL_FOR: Duration = Duration::from_secs(5);

/// Bodies no member names.
const UNREFERENCED_BODIES: &str = "FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM members m WHERE m.blob = b.id)";

/// The run hash a result names (`"hash"`), or NULL: JSON functions refuse text holding `\u0000`,
/// where the hash is found by its pattern instead (casebook writes it with no space).
const RESULT_HASH: &str = r#"CASE WHEN strpos(r.result, '\u0000') = 0 THEN r.result::json->>'hash'
    ELSE substring(r.result from '"hash":"([0-9a-f]{64})"') END"#;

impl PostgresStore {
    /// Removes the case bodies, seed documents and run outputs that nothing refers to, in every
    /// project (or, with `dry_run`, counts them without locking anything).
    pub async fn gc(&self, options: GcOptions) -> Result<GcReport, StoreError> {
        let mut conn = self.conn().await?;
        let outcome = gc_on(&mut conn, options).await;
        // A connection that failed half-way may still hold the lock: it is closed, which frees it.
        if outcome.is_err() {
            conn.discard();
        }
        outcome
    }

    /// What `gc` would remove (for `store check`). Bodies that a commit in flight has written
    /// and not yet named are counted too.
    pub async fn unreferenced(&self) -> Result<Unreferenced, StoreError> {
        let mut conn = self.conn().await?;
        count(&mut conn).await
    }
}

async fn gc_on(conn: &mut PgConnection, options: GcOptions) -> Result<GcReport, StoreError> {
    let mut report = GcReport { dry_run: options.dry_run, ..GcReport::default() };
    if options.dry_run {
        report.removed = count(conn).await?;
        return Ok(report);
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP TABLE IF EXISTS pg_temp.gc_bodies;
         CREATE TEMP TABLE gc_bodies AS SELECT b.id {UNREFERENCED_BODIES};
         ANALYZE gc_bodies;"
    )))
    .execute(&mut *conn)
    .await?;
    take_lock(conn).await?;
    let mut tx = conn.begin().await?;
    let (bodies, bytes): (i64, i64) = sqlx::query_as(
        "WITH gone AS (DELETE FROM blobs b USING gc_bodies g
                       WHERE b.id = g.id AND NOT EXISTS (SELECT 1 FROM members m WHERE m.blob = b.id)
                       RETURNING b.id, octet_length(b.body) AS bytes),
              facets AS (DELETE FROM blob_facets f USING gone WHERE f.blob = gone.id),
              labels AS (DELETE FROM case_labels l USING gone WHERE l.blob = gone.id)
         SELECT count(*), coalesce(sum(bytes), 0)::bigint FROM gone",
    )
    .fetch_one(&mut *tx)
    .await?;
    (report.removed.bodies, report.removed.body_bytes) = (bodies as u64, bytes as u64);

    let seeds = unreferenced_seeds(&mut tx, false).await?;
    report.removed.seed_documents = seeds.len() as u64;
    report.removed.seed_bytes = seeds.iter().map(|s| s.1).sum();
    for chunk in seeds.chunks(DELETE_ROWS) {
        let ids: Vec<i64> = chunk.iter().map(|s| s.0).collect();
        sqlx::query("DELETE FROM seed_documents WHERE id = ANY($1)").bind(ids).execute(&mut *tx).await?;
    }

    let outputs = unreferenced_outputs(&mut tx).await?;
    report.removed.outputs = outputs.len() as u64;
    report.removed.output_bytes = outputs.iter().map(|o| o.1).sum();
    for chunk in outputs.chunks(DELETE_ROWS) {
        let keys: Vec<i64> = chunk.iter().map(|o| o.0).collect();
        sqlx::query("DELETE FROM run_outputs WHERE key = ANY($1)").bind(keys).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    sqlx::query("SELECT pg_advisory_unlock($1)").bind(GC_LOCK).execute(&mut *conn).await?;
    sqlx::query("DROP TABLE IF EXISTS pg_temp.gc_bodies").execute(&mut *conn).await?;
    if options.vacuum {
        sqlx::query("VACUUM (ANALYZE) blobs, blob_facets, case_labels, seed_documents, run_outputs")
            .execute(&mut *conn)
            .await?;
        report.vacuumed = true;
    }
    Ok(report)
}

/// Takes [`GC_LOCK`] exclusively: without queueing for [`POLL_FOR`], then queueing.
async fn take_lock(conn: &mut PgConnection) -> Result<(), StoreError> {
    let began = Instant::now();
    while began.elapsed() < POLL_FOR {
        let taken: bool =
            sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(GC_LOCK).fetch_one(&mut *conn).await?;
        if taken {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sqlx::query("SELECT pg_advisory_lock($1)").bind(GC_LOCK).execute(&mut *conn).await?;
    Ok(())
}

/// Counts what `gc` would remove, in one snapshot, writing nothing.
async fn count(conn: &mut PgConnection) -> Result<Unreferenced, StoreError> {
    let mut found = Unreferenced::default();
    let mut tx = conn.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?;
    let (bodies, bytes): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT count(*), coalesce(sum(octet_length(b.body)), 0)::bigint {UNREFERENCED_BODIES}"
    )))
    .fetch_one(&mut *tx)
    .await?;
    (found.bodies, found.body_bytes) = (bodies as u64, bytes as u64);
    let seeds = unreferenced_seeds(&mut tx, true).await?;
    found.seed_documents = seeds.len() as u64;
    found.seed_bytes = seeds.iter().map(|s| s.1).sum();
    let outputs = unreferenced_outputs(&mut tx).await?;
    found.outputs = outputs.len() as u64;
    found.output_bytes = outputs.iter().map(|o| o.1).sum();
    tx.rollback().await?;
    Ok(found)
}

/// The seed documents (row id, bytes) no body refers to; with `live_only`, bodies no member
/// names do not count.
async fn unreferenced_seeds(conn: &mut PgConnection, live_only: bool) -> Result<Vec<(i64, u64)>, StoreError> {
    let any: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM seed_documents)").fetch_one(&mut *conn).await?;
    if !any {
        return Ok(Vec::new());
    }
    let live = if live_only { " AND EXISTS (SELECT 1 FROM members m WHERE m.blob = b.id)" } else { "" };
    let sql = format!("SELECT b.body FROM blobs b WHERE {}{live}", may_refer_sql("strpos"));
    let mut used = HashSet::new();
    {
        let mut rows = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql)).fetch(&mut *conn);
        while let Some(body) = rows.try_next().await? {
            add_references(&body, &mut used)?;
        }
    }
    let mut unused = Vec::new();
    let mut rows = sqlx::query("SELECT id, cid, octet_length(document) FROM seed_documents").fetch(&mut *conn);
    while let Some(row) = rows.try_next().await? {
        let cid: Vec<u8> = row.get(1);
        if <[u8; 32]>::try_from(cid.as_slice()).is_ok_and(|cid| !used.contains(&cid)) {
            unused.push((row.get(0), row.get::<i32, _>(2) as u64));
        }
    }
    Ok(unused)
}

/// The run outputs (key, bytes) that no result names: neither the one that kept it (same key)
/// nor any result of a run of its project with its run hash. The results' hashes are read only
/// when some output lost the result that kept it.
async fn unreferenced_outputs(conn: &mut PgConnection) -> Result<Vec<(i64, u64)>, StoreError> {
    let candidates: Vec<(i64, String, Vec<u8>, i32)> = sqlx::query_as(
        "SELECT o.key, o.project, o.hash, octet_length(o.output) FROM run_outputs o
         WHERE NOT EXISTS (SELECT 1 FROM run_results r WHERE r.key = o.key)",
    )
    .fetch_all(&mut *conn)
    .await?;
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let used: Vec<(String, Vec<u8>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT DISTINCT u.project::text, decode(h.hash, 'hex')
         FROM (SELECT r.key / 4294967296 AS seq, {RESULT_HASH} AS hash FROM run_results r) h
         JOIN runs u ON u.seq = h.seq
         WHERE h.hash ~ '^[0-9a-f]{{64}}$' AND (u.project::text, decode(h.hash, 'hex')) IN
               (SELECT o.project::text, o.hash FROM run_outputs o
                WHERE NOT EXISTS (SELECT 1 FROM run_results r WHERE r.key = o.key))"
    )))
    .fetch_all(&mut *conn)
    .await?;
    let used: HashSet<(String, Vec<u8>)> = used.into_iter().collect();
    Ok(candidates
        .into_iter()
        .filter(|(_, project, hash, _)| !used.contains(&(project.clone(), hash.clone())))
        .map(|(key, _, _, bytes)| (key, bytes as u64))
        .collect())
}
