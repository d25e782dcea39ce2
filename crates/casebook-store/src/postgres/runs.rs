//! Experiment runs in the shared store: the embedded store's run tables and calls
//! (`src/runs.rs`), in PostgreSQL.

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PostgresStore;
use crate::runs::{RUN_SPAN, hash_bytes};
use crate::{ResultRow, RunRow, StoreError};

const RUN_COLUMNS: &str = "id, experiment, started, finished, meta, summary";

impl PostgresStore {
    pub async fn begin_run(&self, id: &str, experiment: &str, started: &str, meta: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO runs (project, id, experiment, started, meta) VALUES ($1, $2, $3, $4, $5)")
            .bind(self.project())
            .bind(id)
            .bind(experiment)
            .bind(started)
            .bind(meta)
            .execute(self.pool())
            .await
            .map_err(|e| crate::run_insert_error(id, e))?;
        Ok(())
    }

    /// Records finished results, and their outputs by run hash, in one transaction. A result
    /// saved again replaces the first; an output replaces any kept under its hash or its key.
    pub async fn save_results(&self, run: &str, rows: &[ResultRow]) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        let base = run_key(&mut tx, self.project(), run).await?;
        // A purge holds the run's row while it deletes results; after it, results of cases it
        // purged are not kept (see `purge.rs`).
        sqlx::query("SELECT 1 FROM runs WHERE seq = $1 FOR SHARE").bind(base >> 32).execute(&mut *tx).await?;
        let kept = crate::purge::unpurged_postgres(&mut tx, rows).await?;
        let rows = kept.as_deref().unwrap_or(rows);
        let keys: Vec<i64> = rows.iter().map(|r| base + r.seq as i64).collect();
        let results: Vec<&str> = rows.iter().map(|r| r.result.as_str()).collect();
        sqlx::query(
            "INSERT INTO run_results (key, result) SELECT * FROM unnest($1::bigint[], $2::text[])
             ON CONFLICT (key) DO UPDATE SET result = excluded.result",
        )
        .bind(&keys)
        .bind(results)
        .execute(&mut *tx)
        .await?;
        let mut out_keys = Vec::new();
        let mut hashes = Vec::new();
        let mut outputs = Vec::new();
        for (row, key) in rows.iter().zip(&keys) {
            if let Some((hash, output)) = &row.output {
                out_keys.push(*key);
                hashes.push(hash_bytes(hash)?.to_vec());
                outputs.push(output.as_str());
            }
        }
        if !out_keys.is_empty() {
            sqlx::query("DELETE FROM run_outputs WHERE key = ANY($1) OR (project = $3 AND hash = ANY($2))")
                .bind(&out_keys)
                .bind(&hashes)
                .bind(self.project())
                .execute(&mut *tx)
                .await?;
            // A hash given twice in one call keeps its last output.
            sqlx::query(
                "INSERT INTO run_outputs (key, project, hash, output)
                 SELECT DISTINCT ON (hash) key, $4, hash, output FROM unnest($1::bigint[], $2::bytea[], $3::text[])
                 WITH ORDINALITY AS t (key, hash, output, n) ORDER BY hash, n DESC",
            )
            .bind(&out_keys)
            .bind(&hashes)
            .bind(outputs)
            .bind(self.project())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn finish_run(&self, id: &str, finished: &str, summary: &str) -> Result<(), StoreError> {
        let done = sqlx::query("UPDATE runs SET finished = $1, summary = $2 WHERE project = $3 AND id = $4")
            .bind(finished)
            .bind(summary)
            .bind(self.project())
            .bind(id)
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(crate::runs::no_run(id));
        }
        Ok(())
    }

    /// The stored output of each of `hashes`, in the same order; `None` where there is none.
    pub async fn outputs(&self, hashes: &[String]) -> Result<Vec<Option<String>>, StoreError> {
        let bytes: Vec<Vec<u8>> = hashes.iter().map(|h| hash_bytes(h).map(|b| b.to_vec())).collect::<Result<_, _>>()?;
        let rows = sqlx::query(
            "SELECT t.n, o.output FROM unnest($1::bytea[]) WITH ORDINALITY AS t (hash, n)
             JOIN run_outputs o ON o.project = $2 AND o.hash = t.hash",
        )
        .bind(bytes)
        .bind(self.project())
        .fetch_all(self.pool())
        .await?;
        let mut found = vec![None; hashes.len()];
        for row in rows {
            let n: i64 = row.get(0);
            if let Some(slot) = usize::try_from(n - 1).ok().and_then(|i| found.get_mut(i)) {
                *slot = Some(row.get(1));
            }
        }
        Ok(found)
    }

    /// Every run, oldest first.
    pub async fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let rows =
            sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {RUN_COLUMNS} FROM runs WHERE project = $1 ORDER BY seq")))
                .bind(self.project())
                .fetch_all(self.pool())
                .await?;
        Ok(rows.iter().map(run_row).collect())
    }

    /// The run whose id is `reference` or starts with it; `latest` (or `None`) and `previous`
    /// are the last run and the one before.
    pub async fn run(&self, reference: Option<&str>) -> Result<RunRow, StoreError> {
        let rows = match reference {
            None | Some("latest" | "previous") => {
                let back: i64 = if reference == Some("previous") { 1 } else { 0 };
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE project = $2 ORDER BY seq DESC LIMIT 1 OFFSET $1"
                )))
                .bind(back)
                .bind(self.project())
                .fetch_all(self.pool())
                .await?;
                if rows.is_empty() {
                    return Err(crate::runs::no_run_back(back));
                }
                rows
            }
            Some(prefix) => sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE project = $2 AND left(id, length($1)) = $1 ORDER BY id = $1 DESC, seq LIMIT 5"
            )))
            .bind(prefix)
            .bind(self.project())
            .fetch_all(self.pool())
            .await?,
        };
        crate::runs::one_run(reference, rows.iter().map(run_row).collect())
    }

    /// See [`crate::AnyStore::run_rows`].
    pub async fn run_rows(&self, id: &str) -> Result<Vec<ResultRow>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let base = run_key(&mut conn, self.project(), id).await?;
        let rows: Vec<(i64, String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT r.key - $1, r.result, encode(o.hash, 'hex'), o.output FROM run_results r
             LEFT JOIN run_outputs o ON o.key = r.key WHERE r.key >= $1 AND r.key < $2 ORDER BY r.key",
        )
        .bind(base)
        .bind(base + RUN_SPAN)
        .fetch_all(&mut *conn)
        .await?;
        Ok(rows.into_iter().map(crate::runs::result_row).collect())
    }

    /// The results of a run, in order.
    pub async fn run_results(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let base = run_key(&mut conn, self.project(), id).await?;
        let rows = sqlx::query_scalar("SELECT result FROM run_results WHERE key >= $1 AND key < $2 ORDER BY key")
            .bind(base)
            .bind(base + RUN_SPAN)
            .fetch_all(&mut *conn)
            .await?;
        Ok(rows)
    }

    /// See [`crate::AnyStore::run_results_from`].
    pub async fn run_results_from(&self, id: &str, from: u64, limit: usize) -> Result<Vec<(u64, String)>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let base = run_key(&mut conn, self.project(), id).await?;
        let start = base.saturating_add(i64::try_from(from).unwrap_or(RUN_SPAN).min(RUN_SPAN));
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT key - $1, result FROM run_results WHERE key >= $2 AND key < $3 ORDER BY key LIMIT $4",
        )
        .bind(base)
        .bind(start)
        .bind(base + RUN_SPAN)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *conn)
        .await?;
        Ok(rows.into_iter().map(|(seq, result)| (seq as u64, result)).collect())
    }
}

async fn run_key(conn: &mut sqlx::PgConnection, project: &str, run: &str) -> Result<i64, StoreError> {
    let seq: Option<i64> = sqlx::query_scalar("SELECT seq FROM runs WHERE project = $1 AND id = $2")
        .bind(project)
        .bind(run)
        .fetch_optional(&mut *conn)
        .await?;
    seq.map(|seq| seq * RUN_SPAN).ok_or_else(|| crate::runs::no_run(run))
}

fn run_row(r: &PgRow) -> RunRow {
    RunRow {
        id: r.get(0),
        experiment: r.get(1),
        started: r.get(2),
        finished: r.get(3),
        meta: r.get(4),
        summary: r.get(5),
    }
}
