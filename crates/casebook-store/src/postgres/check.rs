//! `casebook store check` on the shared store: every case body against its content id and
//! every version's id recomputed from its rows, as on the embedded store (`src/check.rs`).
//! PostgreSQL checks its own pages and references; bodies that no version names (left by a
//! commit that failed after writing them, see `mod.rs`) are not a problem: they are counted
//! (`CheckReport::unreferenced`) for `casebook store gc`.

use futures_util::TryStreamExt;
use sqlx::Row;

use super::{PostgresStore, case_id};
use crate::check::{VersionRow, body_problem, order_hasher, seed_problem, version_ids};
use crate::{CheckReport, SeedDocuments, StoreError};

impl PostgresStore {
    /// Checks the whole store; a store that cannot be read is an error.
    pub async fn check(&self) -> Result<CheckReport, StoreError> {
        let mut report = CheckReport::default();
        let pool = self.pool();
        let mut problems = Vec::new();
        {
            let mut documents = sqlx::query("SELECT id, cid, document FROM seed_documents ORDER BY id").fetch(pool);
            while let Some(row) = documents.try_next().await? {
                report.seed_documents += 1;
                let (id, cid, document): (i64, Vec<u8>, String) = (row.get(0), row.get(1), row.get(2));
                if let Some(problem) = seed_problem(id, &cid, &document) {
                    problems.push(problem);
                }
            }
        }
        {
            let mut documents = SeedDocuments::new();
            let mut bodies = sqlx::query("SELECT id, cid, body FROM blobs ORDER BY id").fetch(pool);
            while let Some(row) = bodies.try_next().await? {
                report.bodies += 1;
                let (id, cid, body): (i64, Vec<u8>, String) = (row.get(0), row.get(1), row.get(2));
                // A body that refers to a seed document is checked with the document in place.
                let mut body = [body];
                if let Err(err) = self.expand_bodies(&mut documents, &mut body).await {
                    problems.push(format!("case body #{id} cannot be read whole: {err}"));
                    continue;
                }
                if let Some(problem) = body_problem(id, &cid, &body[0]) {
                    problems.push(problem);
                }
            }
        }
        for problem in problems {
            report.problem(problem);
        }
        let datasets: Vec<(i64, String, String, i64)> =
            sqlx::query_as("SELECT id, project, name, head FROM datasets ORDER BY project, name")
                .fetch_all(pool)
                .await?;
        for (dataset, project, name, head) in datasets {
            let shown = crate::qualified(&project, &name);
            let mut parent: Option<String> = None;
            for number in 1..=head {
                report.versions += 1;
                let stored: Option<String> =
                    sqlx::query_scalar("SELECT cid FROM versions WHERE dataset = $1 AND number = $2")
                        .bind(dataset)
                        .bind(number)
                        .fetch_optional(pool)
                        .await?;
                let Some(stored) = stored else {
                    report.problem(format!("`{shown}` has no v{number}, but its head is v{head}"));
                    break;
                };
                let rows = sqlx::query(
                    "SELECT m.case_id, encode(b.cid, 'hex'), m.from_v = $2 FROM members m JOIN blobs b ON b.id = m.blob
                     WHERE m.dataset = $1 AND (m.from_v = $2 OR m.to_v = $2)
                     UNION ALL
                     SELECT case_id, encode(cid, 'hex'), from_v = $2 FROM purged_members
                     WHERE dataset = $1 AND (from_v = $2 OR to_v = $2) ORDER BY 1",
                )
                .bind(dataset)
                .bind(number)
                .fetch_all(pool)
                .await?;
                let rows = rows
                    .into_iter()
                    .map(|r| Ok(VersionRow { case_id: case_id(r.get(0))?, content_id: r.get(1), opens: r.get(2) }))
                    .collect::<Result<Vec<_>, StoreError>>()?;
                let mut order = order_hasher(&name)?;
                {
                    let mut ids = sqlx::query_scalar::<_, Vec<u8>>(
                        "SELECT case_id FROM (
                             SELECT case_id, ord FROM members WHERE dataset = $1 AND from_v <= $2 AND (to_v IS NULL OR to_v > $2)
                             UNION ALL
                             SELECT p.case_id, p.ord FROM purged_members p JOIN purges u ON u.id = p.purge
                             WHERE p.dataset = $1 AND p.from_v <= $2 AND coalesce(p.to_v, u.head + 1) > $2
                         ) AS v ORDER BY ord",
                    )
                    .bind(dataset)
                    .bind(number)
                    .fetch(pool);
                    while let Some(id) = ids.try_next().await? {
                        order.change(&case_id(id)?, None)?;
                    }
                }
                let actual = version_ids(&name, parent.as_deref(), &rows, &order.finish())?;
                if !actual.contains(&stored) {
                    report.problem(format!(
                        "`{shown}` v{number} is stored as {} but its cases make {}",
                        &stored[..stored.len().min(12)],
                        &actual[0][..12]
                    ));
                }
                parent = Some(stored);
            }
        }
        let moved: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM members m LEFT JOIN blobs b ON b.ctid = m.blob_at AND b.id = m.blob WHERE b.id IS NULL",
        )
        .fetch_one(pool)
        .await?;
        report.moved = moved as u64;
        report.unreferenced = self.unreferenced().await?;
        Ok(report)
    }
}
