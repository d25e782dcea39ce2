//! Experiment runs in the embedded store: what `casebook run` records as it goes, and what
//! `results`, `compare` and a resumed run read back. The store keeps the runner's JSON as it is
//! given; it does not look inside.

use sqlx::{AssertSqlSafe, Row};

use crate::{SqliteStore, StoreError};

/// A run as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    pub id: String,
    pub experiment: String,
    pub started: String,
    /// `None` while running, or when the run was stopped.
    pub finished: Option<String>,
    pub meta: String,
    pub summary: Option<String>,
}

/// One finished result: its place in the run, the result's JSON, and the agent's output to keep
/// under the run hash (absent when the agent failed: a failure is retried next time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultRow {
    pub seq: u64,
    pub result: String,
    pub output: Option<(String, String)>,
}

/// Rows an `INSERT` carries.
const ROWS: usize = 400;

/// `items` in chunks of [`ROWS`], the rest in chunks of powers of two: whatever the batches a
/// caller saves, statements come in a few sizes (the texts a connection's statement cache
/// keeps prepared; one for each number of rows grew a long run's memory by megabytes).
fn statement_chunks<T>(items: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = if rest.len() >= ROWS { ROWS } else { 1 << rest.len().ilog2() };
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        Some(chunk)
    })
}

impl SqliteStore {
    pub async fn begin_run(&self, id: &str, experiment: &str, started: &str, meta: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO runs (project, id, experiment, started, meta) VALUES (?, ?, ?, ?, ?)")
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

    /// Records finished results, and their outputs by run hash, in one transaction.
    pub async fn save_results(&self, run: &str, rows: &[ResultRow]) -> Result<(), StoreError> {
        let mut tx = self.pool().begin_with("BEGIN IMMEDIATE").await?;
        let base = run_key(&mut tx, self.project(), run).await?;
        // Results of cases purged while the run went are not kept (see `purge.rs`).
        let kept = crate::purge::unpurged_sqlite(&mut tx, rows).await?;
        let rows = kept.as_deref().unwrap_or(rows);
        for chunk in statement_chunks(rows) {
            let values = vec!["(?, ?)"; chunk.len()].join(", ");
            let mut query =
                sqlx::query(AssertSqlSafe(format!("INSERT OR REPLACE INTO run_results (key, result) VALUES {values}")));
            for row in chunk {
                query = query.bind(base + row.seq as i64).bind(&row.result);
            }
            query.execute(&mut *tx).await?;
        }
        let outputs: Vec<(i64, &str, &str)> = rows
            .iter()
            .filter_map(|row| row.output.as_ref().map(|(hash, output)| (base + row.seq as i64, &**hash, &**output)))
            .collect();
        for chunk in statement_chunks(&outputs) {
            let values = vec!["(?, ?, ?, ?)"; chunk.len()].join(", ");
            let mut query = sqlx::query(AssertSqlSafe(format!(
                "INSERT OR REPLACE INTO run_outputs (key, project, hash, output) VALUES {values}"
            )));
            for &(key, hash, output) in chunk {
                query = query.bind(key).bind(self.project()).bind(hash_bytes(hash)?.to_vec()).bind(output);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn finish_run(&self, id: &str, finished: &str, summary: &str) -> Result<(), StoreError> {
        let done = sqlx::query("UPDATE runs SET finished = ?, summary = ? WHERE project = ? AND id = ?")
            .bind(finished)
            .bind(summary)
            .bind(self.project())
            .bind(id)
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(no_run(id));
        }
        Ok(())
    }

    /// The stored output of each of `hashes`, in the same order; `None` where there is none.
    pub async fn outputs(&self, hashes: &[String]) -> Result<Vec<Option<String>>, StoreError> {
        let mut found = vec![None; hashes.len()];
        for (c, chunk) in hashes.chunks(ROWS).enumerate() {
            let marks = vec!["?"; chunk.len()].join(", ");
            let mut query = sqlx::query(AssertSqlSafe(format!(
                "SELECT hash, output FROM run_outputs WHERE project = ? AND hash IN ({marks})"
            )))
            .bind(self.project());
            let mut wanted = Vec::with_capacity(chunk.len());
            for (i, hash) in chunk.iter().enumerate() {
                let bytes = hash_bytes(hash)?;
                query = query.bind(bytes.to_vec());
                wanted.push((bytes, c * ROWS + i));
            }
            wanted.sort_unstable();
            for row in query.fetch_all(self.pool()).await? {
                let bytes: &[u8] = row.get(0);
                // (A hash asked for twice gets its output twice.)
                let first = wanted.partition_point(|(w, _)| w.as_slice() < bytes);
                for (_, at) in wanted[first..].iter().take_while(|(w, _)| w.as_slice() == bytes) {
                    found[*at] = Some(row.get(1));
                }
            }
        }
        Ok(found)
    }

    /// Every run, oldest first.
    pub async fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, experiment, started, finished, meta, summary FROM runs WHERE project = ? ORDER BY seq",
        )
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
                let rows = sqlx::query(
                    "SELECT id, experiment, started, finished, meta, summary FROM runs WHERE project = ?
                     ORDER BY seq DESC LIMIT 1 OFFSET ?",
                )
                .bind(self.project())
                .bind(back)
                .fetch_all(self.pool())
                .await?;
                if rows.is_empty() {
                    return Err(no_run_back(back));
                }
                rows
            }
            Some(prefix) => {
                sqlx::query(
                    "SELECT id, experiment, started, finished, meta, summary FROM runs
                     WHERE project = ?2 AND substr(id, 1, length(?1)) = ?1 ORDER BY id = ?1 DESC, seq LIMIT 5",
                )
                .bind(prefix)
                .bind(self.project())
                .fetch_all(self.pool())
                .await?
            }
        };
        one_run(reference, rows.iter().map(run_row).collect())
    }

    /// The results of a run, in order.
    pub async fn run_results(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let base = run_key(&mut conn, self.project(), id).await?;
        let rows = sqlx::query_scalar("SELECT result FROM run_results WHERE key >= ? AND key < ? ORDER BY key")
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
            "SELECT key - ?1, result FROM run_results WHERE key >= ?2 AND key < ?3 ORDER BY key LIMIT ?4",
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

impl SqliteStore {
    /// See [`crate::AnyStore::run_rows`].
    pub async fn run_rows(&self, id: &str) -> Result<Vec<ResultRow>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let base = run_key(&mut conn, self.project(), id).await?;
        let rows: Vec<(i64, String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT r.key - ?1, r.result, lower(hex(o.hash)), o.output FROM run_results r
             LEFT JOIN run_outputs o ON o.key = r.key WHERE r.key >= ?1 AND r.key < ?2 ORDER BY r.key",
        )
        .bind(base)
        .bind(base + RUN_SPAN)
        .fetch_all(&mut *conn)
        .await?;
        Ok(rows.into_iter().map(result_row).collect())
    }
}

/// A result row as `run_rows` reads it: its place in the run, the result, the output it kept.
pub(crate) fn result_row((seq, result, hash, output): (i64, String, Option<String>, Option<String>)) -> ResultRow {
    ResultRow { seq: seq as u64, result, output: hash.zip(output) }
}

/// A run's results are keyed from its `seq` times this (migration 0006).
pub(crate) const RUN_SPAN: i64 = 1 << 32;

/// The error for `latest` (`back` 0) or `previous` (1) when there is no such run.
pub(crate) fn no_run_back(back: i64) -> StoreError {
    StoreError::NoRun(if back == 0 {
        "no run yet: `casebook run` keeps its results in the store".to_owned()
    } else {
        "only one run so far: `previous` names the run before the latest".to_owned()
    })
}

pub(crate) fn no_run(run: &str) -> StoreError {
    StoreError::NoRun(format!("no run `{run}`: `casebook results --list` lists them"))
}

/// The run a reference names, from the (at most 5) runs found for it, the one whose id is the
/// reference exactly first: an id names its run even when it also begins longer ones.
pub(crate) fn one_run(reference: Option<&str>, mut rows: Vec<RunRow>) -> Result<RunRow, StoreError> {
    if rows.first().is_some_and(|r| Some(r.id.as_str()) == reference) {
        return Ok(rows.remove(0));
    }
    match rows.len() {
        1 => Ok(rows.remove(0)),
        0 => Err(no_run(reference.unwrap_or_default())),
        _ => Err(StoreError::AmbiguousRun(
            reference.unwrap_or("").to_owned(),
            rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", "),
        )),
    }
}

/// The first key of a run's results (a run of another project is not there).
async fn run_key(conn: &mut sqlx::SqliteConnection, project: &str, run: &str) -> Result<i64, StoreError> {
    let seq: Option<i64> = sqlx::query_scalar("SELECT seq FROM runs WHERE project = ? AND id = ?")
        .bind(project)
        .bind(run)
        .fetch_optional(&mut *conn)
        .await?;
    seq.map(|seq| seq * RUN_SPAN).ok_or_else(|| no_run(run))
}

/// A run hash as stored.
pub(crate) fn hash_bytes(hash: &str) -> Result<[u8; 32], StoreError> {
    casebook_canon::id_bytes(hash).ok_or_else(|| StoreError::BadHash(hash.to_owned()))
}

fn run_row(r: &sqlx::sqlite::SqliteRow) -> RunRow {
    RunRow {
        id: r.get(0),
        experiment: r.get(1),
        started: r.get(2),
        finished: r.get(3),
        meta: r.get(4),
        summary: r.get(5),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item once, in order, in chunks of a few sizes only.
    #[test]
    fn statements_come_in_a_few_sizes() {
        let mut sizes = std::collections::BTreeSet::new();
        for n in 0..2000 {
            let items: Vec<usize> = (0..n).collect();
            let chunks: Vec<&[usize]> = statement_chunks(&items).collect();
            assert_eq!(chunks.concat(), items);
            sizes.extend(chunks.iter().map(|c| c.len()));
        }
        assert_eq!(sizes.into_iter().collect::<Vec<_>>(), [1, 2, 4, 8, 16, 32, 64, 128, 256, 400]);
    }
}
