//! `casebook store check`: whether the embedded store is what it says it is. SQLite's own
//! integrity check and foreign keys, then every seed document and every case body (with the
//! seed document it refers to in place) against its content id, and every version's id
//! recomputed from its parent and the rows that open and close at it, so damage that SQLite
//! cannot see (a body or a membership row changed behind casebook's back) is found.

use casebook_canon::{Kind, VersionHasher, content_id_bytes_of_json, id_hex};
use futures_util::TryStreamExt;
use serde::Serialize;
use serde_json::json;
use sqlx::Row;

use crate::seeds::{seed_content_id, seed_references};
use crate::sqlite::SqliteStore;
use crate::{SeedDocuments, StoreError};

/// Problems reported beyond this many of one kind are counted, not listed.
const LISTED: usize = 50;

/// What a check found.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Case bodies whose content id was recomputed.
    pub bodies: u64,
    /// Seed documents whose content id was recomputed.
    pub seed_documents: u64,
    /// Versions whose id was recomputed.
    pub versions: u64,
    /// What is wrong, one line each (empty when the store is sound).
    pub problems: Vec<String>,
    /// Problems found beyond those listed.
    pub more: u64,
    /// Case rows whose body is no longer at the place they name (PostgreSQL: `members.blob_at`,
    /// after the table of bodies was rewritten). Not a problem: pages read those bodies by id,
    /// more slowly.
    #[serde(skip_serializing_if = "is_zero")]
    pub moved: u64,
    /// Case bodies, seed documents and run outputs that nothing refers to, which
    /// `casebook store gc` removes. Not a problem: a failed commit or a purge leaves them.
    pub unreferenced: crate::Unreferenced,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CheckReport {
    pub(crate) fn problem(&mut self, text: String) {
        if self.problems.len() < LISTED * 4 {
            self.problems.push(text);
        } else {
            self.more += 1;
        }
    }
}

impl SqliteStore {
    /// Checks the whole store; a store too damaged to be read is an error.
    pub async fn check(&self) -> Result<CheckReport, StoreError> {
        let mut report = CheckReport::default();
        let pool = self.pool();
        // Each step reports what it could not read as a problem and the check goes on.
        match sqlx::query_scalar::<_, String>("PRAGMA integrity_check(50)").fetch_all(pool).await {
            Ok(rows) if rows == ["ok"] => {}
            Ok(rows) => rows.into_iter().for_each(|row| report.problem(format!("SQLite: {row}"))),
            Err(err) => report.problem(format!("SQLite: {err}")),
        }
        let broken = match sqlx::query("PRAGMA foreign_key_check").fetch_all(pool).await {
            Ok(rows) => rows,
            Err(err) => {
                report.problem(format!("SQLite: references cannot be checked: {err}"));
                Vec::new()
            }
        };
        for row in broken.iter().take(LISTED) {
            let table: String = row.get(0);
            let parent: String = row.get(2);
            report.problem(format!("a row of `{table}` points at a missing row of `{parent}`"));
        }
        report.more += broken.len().saturating_sub(LISTED) as u64;

        let mut wrong = Vec::new();
        let mut documents = sqlx::query("SELECT id, cid, document FROM seed_documents ORDER BY id").fetch(pool);
        loop {
            let row = match documents.try_next().await {
                Ok(Some(row)) => row,
                Ok(None) => break,
                Err(err) => {
                    wrong.push(format!("seed documents after the {}th cannot be read: {err}", report.seed_documents));
                    break;
                }
            };
            report.seed_documents += 1;
            let (id, cid, document): (i64, Vec<u8>, String) = (row.get(0), row.get(1), row.get(2));
            if let Some(problem) = seed_problem(id, &cid, &document) {
                wrong.push(problem);
            }
        }
        drop(documents);

        let mut seeds = SeedDocuments::new();
        let mut bodies = sqlx::query("SELECT id, cid, body FROM blobs ORDER BY id").fetch(pool);
        loop {
            // A damaged page stops the scan: say where, and go on with the versions.
            let row = match bodies.try_next().await {
                Ok(Some(row)) => row,
                Ok(None) => break,
                Err(err) => {
                    wrong.push(format!("case bodies after the {}th cannot be read: {err}", report.bodies));
                    break;
                }
            };
            report.bodies += 1;
            let (id, cid, body): (i64, Vec<u8>, String) = (row.get(0), row.get(1), row.get(2));
            // A body that refers to a seed document is checked with the document in place.
            let mut body = [body];
            match seed_references(&body[0]).map(|ids| ids.first().copied()) {
                Ok(None) => {}
                Ok(Some(seed)) => {
                    if let Err(err) = self.expand_bodies(&mut seeds, &mut body).await {
                        wrong.push(match err {
                            StoreError::Corrupt(_) => format!(
                                "case body #{id} refers to the seed document {}, which is not in the store",
                                &id_hex(&seed)[..12]
                            ),
                            err => format!("case body #{id} cannot be read whole: {err}"),
                        });
                        continue;
                    }
                }
                Err(err) => {
                    wrong.push(format!("case body #{id} is not a case: {err}"));
                    continue;
                }
            }
            let [body] = body;
            if let Some(problem) = body_problem(id, &cid, &body) {
                wrong.push(problem);
            }
        }
        drop(bodies);
        // Commits find bodies by content id through `blob_cids`: one row a body, naming it.
        let found = sqlx::query_as::<_, (i64, i64, i64)>(
            "SELECT (SELECT count(*) FROM blobs), (SELECT count(*) FROM blob_cids),
                    (SELECT count(*) FROM blob_cids c JOIN blobs b ON b.id = c.blob AND b.cid = c.cid)",
        )
        .fetch_one(pool)
        .await;
        match found {
            Ok((bodies, cids, matched)) => {
                if bodies > matched {
                    wrong.push(format!(
                        "case bodies that cannot be found by their content id (a later commit would store them again): {}",
                        bodies - matched
                    ));
                }
                if cids > matched {
                    wrong.push(format!("content ids that lead to no case body or to another one: {}", cids - matched));
                }
            }
            Err(err) => wrong.push(format!("the content ids of the case bodies cannot be read: {err}")),
        }
        for text in wrong {
            report.problem(text);
        }

        let datasets: Vec<(i64, String, String, i64)> =
            match sqlx::query_as("SELECT id, project, name, head FROM datasets ORDER BY project, name")
                .fetch_all(pool)
                .await
            {
                Ok(datasets) => datasets,
                Err(err) => {
                    report.problem(format!("the datasets cannot be read: {err}"));
                    Vec::new()
                }
            };
        for (dataset, project, name, head) in datasets {
            let shown = crate::qualified(&project, &name);
            let mut parent: Option<String> = None;
            for number in 1..=head {
                report.versions += 1;
                let stored =
                    sqlx::query_scalar::<_, String>("SELECT cid FROM versions WHERE dataset = ? AND number = ?")
                        .bind(dataset)
                        .bind(number)
                        .fetch_optional(pool)
                        .await;
                let stored = match stored {
                    Ok(stored) => stored,
                    Err(err) => {
                        report.problem(format!("`{shown}` v{number} cannot be read: {err}"));
                        break;
                    }
                };
                let Some(stored) = stored else {
                    report.problem(format!("`{shown}` has no v{number}, but its head is v{head}"));
                    break;
                };
                let actual = match self.version_id(dataset, &name, number, parent.as_deref()).await {
                    Ok(actual) => actual,
                    // What the damage is, without the advice to run this check.
                    Err(StoreError::Damaged(detail)) => {
                        report.problem(format!("`{shown}` v{number} cannot be read: {detail}"));
                        break;
                    }
                    Err(err) => {
                        report.problem(format!("`{shown}` v{number} cannot be read: {err}"));
                        break;
                    }
                };
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
        match self.unreferenced().await {
            Ok(found) => report.unreferenced = found,
            Err(err) => report.problem(format!("what nothing refers to cannot be counted: {err}")),
        }
        Ok(report)
    }

    /// The ids version `number` can have: from its changes alone, and with its order (a commit
    /// that re-orders the cases names the new order; when every case changed too, the rows
    /// cannot tell whether it did).
    async fn version_id(
        &self,
        dataset: i64,
        name: &str,
        number: i64,
        parent: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let pool = self.pool();
        // Rows that open at the version and rows that close there, by case; a purged case's rows
        // keep its content id (its tombstone: see `purge.rs`).
        let rows = sqlx::query(
            "SELECT m.case_id, lower(hex(b.cid)), m.from_v = ?2 FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = ?1 AND (m.from_v = ?2 OR m.to_v = ?2)
             UNION ALL
             SELECT case_id, lower(hex(cid)), from_v = ?2 FROM purged_members
             WHERE dataset = ?1 AND (from_v = ?2 OR to_v = ?2) ORDER BY 1",
        )
        .bind(dataset)
        .bind(number)
        .fetch_all(pool)
        .await?;
        let rows: Vec<VersionRow> =
            rows.iter().map(|r| VersionRow { case_id: r.get(0), content_id: r.get(1), opens: r.get(2) }).collect();
        let mut order = order_hasher(name)?;
        let mut ids = sqlx::query_scalar::<_, String>(
            "SELECT case_id, ord FROM members WHERE dataset = ?1 AND from_v <= ?2 AND (to_v IS NULL OR to_v > ?2)
             UNION ALL
             SELECT p.case_id, p.ord FROM purged_members p JOIN purges u ON u.id = p.purge
             WHERE p.dataset = ?1 AND p.from_v <= ?2 AND coalesce(p.to_v, u.head + 1) > ?2 ORDER BY 2",
        )
        .bind(dataset)
        .bind(number)
        .fetch(pool);
        while let Some(case_id) = ids.try_next().await? {
            order.change(&case_id, None)?;
        }
        version_ids(name, parent, &rows, &order.finish())
    }
}

/// What is wrong with a stored seed document, if anything: its content id recomputed.
pub(crate) fn seed_problem(id: i64, cid: &[u8], document: &str) -> Option<String> {
    let stored = <[u8; 32]>::try_from(cid).ok();
    match seed_content_id(document) {
        Ok(actual) if Some(actual) == stored => None,
        Ok(actual) => Some(format!(
            "seed document #{id} is stored as {} but its content is {}",
            stored.map_or_else(|| "a malformed id".to_owned(), |s| id_hex(&s)[..12].to_owned()),
            &id_hex(&actual)[..12]
        )),
        Err(err) => Some(format!("seed document #{id} is not JSON: {err}")),
    }
}

/// What is wrong with a stored case body, if anything: its content id recomputed.
pub(crate) fn body_problem(id: i64, cid: &[u8], body: &str) -> Option<String> {
    let stored = <[u8; 32]>::try_from(cid).ok();
    match content_id_bytes_of_json(Kind::Case, body) {
        Ok(actual) if Some(actual) == stored => None,
        Ok(actual) => Some(format!(
            "case body #{id} is stored as {} but its content is {}",
            stored.map_or_else(|| "a malformed id".to_owned(), |s| id_hex(&s)[..12].to_owned()),
            &id_hex(&actual)[..12]
        )),
        Err(err) => Some(format!("case body #{id} is not a case: {err}")),
    }
}

/// A membership row that opens (`opens`) or closes at a version.
pub(crate) struct VersionRow {
    pub case_id: String,
    /// Hexadecimal.
    pub content_id: String,
    pub opens: bool,
}

/// The hash of a version's order (`order` in a version id's head): its case ids in order are
/// given to it one by one.
pub(crate) fn order_hasher(name: &str) -> Result<VersionHasher, StoreError> {
    Ok(VersionHasher::new(&json!({"order": name}))?)
}

/// The ids a version can have, from the rows that open and close at it (in case-id order) and
/// the hash of its order (see [`order_hasher`]): from its changes alone, and with its order (a commit that re-orders the
/// cases names the new order; when every case changed too, the rows cannot tell whether it did).
pub(crate) fn version_ids(
    name: &str,
    parent: Option<&str>,
    rows: &[VersionRow],
    order: &str,
) -> Result<Vec<String>, StoreError> {
    let mut changes: Vec<(&str, String)> = Vec::new();
    let mut reopened = false;
    for group in rows.chunk_by(|a, b| a.case_id == b.case_id) {
        let (mut before, mut after) = (None, None);
        for row in group {
            if row.opens {
                after = Some(row.content_id.as_str());
            } else {
                before = Some(row.content_id.as_str());
            }
        }
        if before.is_some() && before == after {
            reopened = true;
        } else {
            // A removed case is hashed with an empty content id: commits read it as
            // `lower(hex(NULL))`, which SQLite gives as '' (the ids of existing versions
            // depend on it).
            changes.push((&group[0].case_id, after.unwrap_or_default().to_owned()));
        }
    }
    let mut ids = Vec::new();
    let orders = if reopened { vec![true] } else { vec![false, true] };
    for with_order in orders {
        let order = with_order.then_some(order);
        let mut hasher = VersionHasher::new(&json!({"dataset": name, "parent": parent, "order": order}))?;
        for (case_id, cid) in &changes {
            hasher.change(case_id, Some(cid))?;
        }
        ids.push(hasher.finish());
    }
    Ok(ids)
}
