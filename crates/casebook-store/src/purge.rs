//! `casebook purge`: cases erased from every version of a dataset, every version id still
//! verifiable.
//!
//! A version's id covers its cases' content ids, not their text (`casebook-canon`), so the text
//! can go while the ids stay. A purge moves the membership rows of its cases from `members` to
//! `purged_members` (migrations sqlite 0015 / postgres 0010), which keep each row's content id —
//! the tombstone — and its place in the order, so `store check` recomputes every version id as
//! before. Then it deletes what held the cases' content: their bodies (with their facets, labels
//! and content-id index rows) unless another dataset holds the same content, the seed documents
//! only those bodies used, the results of runs of the dataset on that content and their stored
//! outputs, and the pending capture spans of the traces the cases came from. One row of `purges`
//! and one `purge` event in the log say when, who and why (never the content).
//!
//! Readers see a purged case nowhere (its rows are not in `members`): `show`, `export`, `pull` and
//! `run` of an old version leave it out, and callers say so with [`AnyStore::purged_in`]. A
//! commit after the purge that adds the same case id again keeps its content: the purge covers
//! only what was stored when it ran (both backends serialise a purge with commits to the dataset).
//!
//! Deleted is not yet gone from the files: SQLite deletes with `secure_delete` (freed space is
//! zeroed) and the write-ahead log is checkpointed and truncated after; PostgreSQL's rows are
//! deleted and the touched tables vacuumed (`VACUUM FULL` when asked, which rewrites them:
//! plain `VACUUM` leaves dead tuples' bytes in the pages until they are reused).

use serde::Serialize;

use crate::{AnyStore, PostgresStore, SqliteStore, StoreError};

/// What to purge, who asks and why.
#[derive(Debug, Clone)]
pub struct PurgeRequest {
    pub dataset: String,
    /// Case ids; each must be held by some version of the dataset (and not purged already).
    pub cases: Vec<String>,
    pub author: String,
    /// RFC 3339.
    pub time: String,
    pub reason: String,
    /// PostgreSQL: rewrite the touched tables (`VACUUM FULL`, which locks them while it runs)
    /// so the deleted bytes leave the data files; SQLite ignores it (its deletes zero the space).
    pub full: bool,
}

/// A purge as logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PurgeInfo {
    /// The purge's number in the store.
    pub id: u64,
    /// RFC 3339.
    pub time: String,
    pub author: String,
    pub reason: String,
    /// The dataset's head when it ran: later versions never held its cases.
    pub head: u64,
    /// The purged case ids, by id.
    pub cases: Vec<String>,
    /// How many versions held one of them.
    pub versions: u64,
    /// How many results of runs were deleted with them.
    pub results: u64,
}

impl PurgeInfo {
    /// The purge `request` made as purge `id` at `head`, as both backends log it.
    fn of(request: &PurgeRequest, id: i64, head: i64, ids: &[String], versions: u64, results: u64) -> Self {
        PurgeInfo {
            id: id as u64,
            time: request.time.clone(),
            author: request.author.clone(),
            reason: request.reason.clone(),
            head: head as u64,
            cases: ids.to_vec(),
            versions,
            results,
        }
    }
}

/// What [`AnyStore::purge`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PurgeOutcome {
    pub purge: PurgeInfo,
    /// Case bodies deleted (a case changed over the versions has several).
    pub bodies: u64,
    /// Seed documents deleted (used by the purged bodies only).
    pub seed_documents: u64,
    /// Pending capture spans and records deleted.
    pub pending_spans: u64,
    /// Cases whose content another dataset holds too: that body stays (purge it there as well).
    pub kept_shared: Vec<String>,
    /// Whether the freed space is known to be overwritten in the files (SQLite: the log was
    /// checkpointed and truncated; PostgreSQL: the tables were rewritten by `VACUUM FULL`).
    pub erased: bool,
}

/// A case a version held that was purged, and by which purge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PurgedCase {
    pub id: String,
    pub purge: PurgeInfo,
}

/// A membership row of a purged case: `(case id, from, to, body row, content id)`.
type Row_ = (String, i64, Option<i64>, i64, Vec<u8>);
/// [`Row_`] as PostgreSQL gives it (case ids are bytes there).
type PgRow_ = (Vec<u8>, i64, Option<i64>, i64, Vec<u8>);

/// How many versions up to `head` the rows cover (a row open at the purge covers up to it).
fn versions_held(rows: &[Row_], head: i64) -> u64 {
    let mut held = vec![false; head.max(0) as usize + 1];
    for (_, from, to, _, _) in rows {
        let end = to.map_or(head, |t| t - 1).min(head);
        for v in (*from).max(1)..=end {
            held[v as usize] = true;
        }
    }
    held.iter().filter(|h| **h).count() as u64
}

/// The error for case ids no row of the dataset holds.
fn never_held(dataset: &str, head: i64, missing: &[&String], purged: bool) -> StoreError {
    let cases: Vec<String> = missing.iter().map(|c| format!("`{c}`")).collect();
    let hint = if purged {
        "; it was purged already (`casebook log` shows the purge)".to_owned()
    } else {
        " in any version".to_owned()
    };
    StoreError::NoCase { dataset: dataset.to_owned(), number: head as u64, cases: cases.join(", "), hint }
}

/// The log's detail of a purge: the case ids and counts, and the reason (never the content).
fn event_detail(cases: &[String], versions: u64, results: u64, reason: &str) -> String {
    let shown: Vec<String> = cases.iter().take(20).map(|c| format!("`{c}`")).collect();
    let more = if cases.len() > 20 { format!(" and {} more", cases.len() - 20) } else { String::new() };
    format!(
        "{} purged from {} ({} of runs deleted): {}{more}; reason: {reason}",
        plural_cases(cases.len() as u64),
        if versions == 1 { "1 version".to_owned() } else { format!("{versions} versions") },
        if results == 1 { "1 result".to_owned() } else { format!("{results} results") },
        shown.join(", "),
    )
}

/// `1 case`, `2 cases`.
fn plural_cases(n: u64) -> String {
    if n == 1 { "1 case".to_owned() } else { format!("{n} cases") }
}

/// The lowercase hex of a content id.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Case ids of a request, each once, in id order; an empty list is refused.
fn wanted(request: &PurgeRequest) -> Result<Vec<String>, StoreError> {
    let mut ids = request.cases.clone();
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        return Err(StoreError::NoCase {
            dataset: request.dataset.clone(),
            number: 0,
            cases: "to purge".into(),
            hint: " (name case ids, or choose them with --where)".into(),
        });
    }
    Ok(ids)
}

impl AnyStore {
    /// Purges cases from every version of a dataset (see the module's documentation). Cannot be
    /// undone. Every id must be held by some version; nothing is written otherwise.
    pub async fn purge(&self, request: &PurgeRequest) -> Result<PurgeOutcome, StoreError> {
        let write = async {
            match self {
                AnyStore::Sqlite(s) => s.purge(request).await,
                AnyStore::Postgres(s) => s.purge(request).await,
            }
        };
        crate::waits::watched(self.probe(Some(&request.dataset)), write).await
    }

    /// The purges of a dataset, oldest first.
    pub async fn purges(&self, dataset: &str) -> Result<Vec<PurgeInfo>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.purges(dataset).await,
            AnyStore::Postgres(s) => s.purges(dataset).await,
        }
    }

    /// The purged cases version `version` held, by id: what readers of that version leave out.
    pub async fn purged_in(&self, dataset: &str, version: u64) -> Result<Vec<PurgedCase>, StoreError> {
        let purges = self.purges(dataset).await?;
        if purges.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, i64)> = match self {
            AnyStore::Sqlite(s) => s.purged_rows(dataset, version).await?,
            AnyStore::Postgres(s) => s.purged_rows(dataset, version).await?,
        };
        let mut found: Vec<PurgedCase> = rows
            .into_iter()
            .filter_map(|(id, purge)| {
                purges.iter().find(|p| p.id as i64 == purge).map(|p| PurgedCase { id, purge: p.clone() })
            })
            .collect();
        found.sort_by(|a, b| a.id.as_bytes().cmp(b.id.as_bytes()));
        found.dedup_by(|a, b| a.id == b.id);
        Ok(found)
    }

    /// The purge that erased case `id` of a dataset last, if one did.
    pub async fn purge_of(&self, dataset: &str, id: &str) -> Result<Option<PurgeInfo>, StoreError> {
        let purges = self.purges(dataset).await?;
        Ok(purges.into_iter().rev().find(|p| p.cases.iter().any(|c| c == id)))
    }
}

/// The case ids a purge takes: `ids`, and those `select` picks in the head (its limit applies),
/// each once. A selection of nothing with no ids is [`StoreError::NoneSelected`].
pub async fn purge_choice(
    store: &AnyStore,
    dataset: &str,
    ids: &[String],
    select: Option<&crate::Select>,
) -> Result<Vec<String>, StoreError> {
    use crate::Store;
    let mut chosen: Vec<String> = ids.to_vec();
    if let Some(select) = select {
        #[derive(serde::Deserialize)]
        struct Id {
            id: String,
        }
        let head = store.resolve(dataset, &crate::Ref::Latest).await?;
        let limit = select.limit.unwrap_or(u64::MAX);
        let all = crate::Select { filter: select.filter.clone(), limit: None };
        let (mut after, mut taken) = (None, 0u64);
        'pages: loop {
            let page = store.page(dataset, head.number, &all, after.as_ref(), 1000).await?;
            for body in &page.bodies {
                if taken >= limit {
                    break 'pages;
                }
                let id: Id = serde_json::from_str(body).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                chosen.push(id.id);
                taken += 1;
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        if taken == 0 && ids.is_empty() {
            return Err(StoreError::NoneSelected { dataset: dataset.to_owned(), number: head.number });
        }
    }
    chosen.sort();
    chosen.dedup();
    Ok(chosen)
}

/// What a warning about purged cases of a version says: how many, which purges (time, author,
/// reason), a few ids.
pub fn purged_warning(dataset: &str, version: u64, purged: &[PurgedCase]) -> Option<String> {
    if purged.is_empty() {
        return None;
    }
    let mut purges: Vec<&PurgeInfo> = Vec::new();
    for case in purged {
        if !purges.iter().any(|p| p.id == case.purge.id) {
            purges.push(&case.purge);
        }
    }
    let ids: Vec<String> = purged.iter().take(10).map(|c| format!("`{}`", c.id)).collect();
    let more = if purged.len() > 10 { format!(" and {} more", purged.len() - 10) } else { String::new() };
    let by: Vec<String> =
        purges.iter().map(|p| format!("purge #{} on {} by {} ({})", p.id, p.time, p.author, p.reason)).collect();
    Some(format!(
        "{dataset} v{version} held {} that {} purged and {} left out: {}{more} ({})",
        plural_cases(purged.len() as u64),
        if purged.len() == 1 { "was" } else { "were" },
        if purged.len() == 1 { "is" } else { "are" },
        ids.join(", "),
        by.join("; ")
    ))
}

/// The purges of a dataset from its `purges` rows and `(purge, case id)` rows.
fn assemble(rows: Vec<(i64, String, String, String, i64, i64, i64)>, cases: Vec<(i64, String)>) -> Vec<PurgeInfo> {
    rows.into_iter()
        .map(|(id, time, author, reason, head, versions, results)| {
            let mut ids: Vec<String> = cases.iter().filter(|(p, _)| *p == id).map(|(_, c)| c.clone()).collect();
            ids.sort();
            ids.dedup();
            PurgeInfo {
                id: id as u64,
                time,
                author,
                reason,
                head: head as u64,
                cases: ids,
                versions: versions as u64,
                results: results as u64,
            }
        })
        .collect()
}

const SPAN: i64 = crate::runs::RUN_SPAN;

/// The content id a run's result names (`case_content_id`), if it is JSON that names one.
fn result_content(result: &str) -> Option<[u8; 32]> {
    #[derive(serde::Deserialize)]
    struct Named {
        case_content_id: Option<String>,
    }
    let named: Named = serde_json::from_str(result).ok()?;
    casebook_canon::id_bytes(&named.case_content_id?.to_ascii_lowercase())
}

/// `rows` without the results of purged content (a run that was going when its cases were
/// purged saves them after the purge): those whose content id a purge took and no body holds
/// again. Costs one read when nothing was ever purged.
pub(crate) async fn unpurged_sqlite(
    tx: &mut sqlx::SqliteConnection,
    rows: &[crate::ResultRow],
) -> Result<Option<Vec<crate::ResultRow>>, StoreError> {
    let any: Option<i64> = sqlx::query_scalar("SELECT 1 FROM purged_members LIMIT 1").fetch_optional(&mut *tx).await?;
    if any.is_none() {
        return Ok(None);
    }
    let mut kept = Vec::with_capacity(rows.len());
    for row in rows {
        if let Some(cid) = result_content(&row.result) {
            let purged: Option<i64> = sqlx::query_scalar(
                "SELECT 1 FROM purged_members WHERE cid = ?1 AND NOT EXISTS (SELECT 1 FROM blob_cids WHERE cid = ?1) LIMIT 1",
            )
            .bind(cid.to_vec())
            .fetch_optional(&mut *tx)
            .await?;
            if purged.is_some() {
                continue;
            }
        }
        kept.push(row.clone());
    }
    Ok(Some(kept))
}

/// [`unpurged_sqlite`] on PostgreSQL.
pub(crate) async fn unpurged_postgres(
    tx: &mut sqlx::PgConnection,
    rows: &[crate::ResultRow],
) -> Result<Option<Vec<crate::ResultRow>>, StoreError> {
    let any: Option<i32> = sqlx::query_scalar("SELECT 1 FROM purged_members LIMIT 1").fetch_optional(&mut *tx).await?;
    if any.is_none() {
        return Ok(None);
    }
    let cids: Vec<Option<[u8; 32]>> = rows.iter().map(|r| result_content(&r.result)).collect();
    let named: Vec<Vec<u8>> = cids.iter().flatten().map(|c| c.to_vec()).collect();
    let purged: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT DISTINCT p.cid FROM purged_members p WHERE p.cid = ANY($1)
         AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.cid = p.cid)",
    )
    .bind(&named)
    .fetch_all(&mut *tx)
    .await?;
    Ok(Some(
        rows.iter()
            .zip(&cids)
            .filter(|(_, cid)| !cid.is_some_and(|c| purged.iter().any(|p| p.as_slice() == c)))
            .map(|(row, _)| row.clone())
            .collect(),
    ))
}

impl SqliteStore {
    async fn purge(&self, request: &PurgeRequest) -> Result<PurgeOutcome, StoreError> {
        let ids = wanted(request)?;
        let dataset = self.dataset_id(&request.dataset).await?;
        let mut conn = self.pool().acquire().await?;
        // Freed space is overwritten with zeros (cells, pages, overflow chains).
        sqlx::query("PRAGMA secure_delete = ON").execute(&mut *conn).await?;
        let done = self.purge_on(&mut conn, dataset, request, &ids).await;
        let _ = sqlx::query("PRAGMA secure_delete = OFF").execute(&mut *conn).await;
        drop(conn);
        let mut outcome = done?;
        // The log still holds the pages as they were before: copy the new ones into the store
        // and truncate it. Readers in the middle of a transaction can hold it back: try again.
        for attempt in 0..20 {
            let (busy, _, _): (i64, i64, i64) =
                sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(self.pool()).await?;
            if busy == 0 {
                outcome.erased = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50 * (attempt + 1))).await;
        }
        Ok(outcome)
    }

    async fn purge_on(
        &self,
        conn: &mut sqlx::SqliteConnection,
        dataset: i64,
        request: &PurgeRequest,
        ids: &[String],
    ) -> Result<PurgeOutcome, StoreError> {
        let json_ids = serde_json::to_string(ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
        let head: i64 =
            sqlx::query_scalar("SELECT head FROM datasets WHERE id = ?").bind(dataset).fetch_one(&mut *tx).await?;
        let rows: Vec<Row_> = sqlx::query_as(
            "SELECT m.case_id, m.from_v, m.to_v, m.blob, b.cid FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = ?1 AND m.case_id IN (SELECT value FROM json_each(?2)) ORDER BY m.case_id, m.from_v",
        )
        .bind(dataset)
        .bind(&json_ids)
        .fetch_all(&mut *tx)
        .await?;
        let missing: Vec<&String> = ids.iter().filter(|id| !rows.iter().any(|r| &r.0 == *id)).collect();
        if !missing.is_empty() {
            let purged: Option<i64> = sqlx::query_scalar(
                "SELECT 1 FROM purged_members WHERE dataset = ?1 AND case_id IN (SELECT value FROM json_each(?2)) LIMIT 1",
            )
            .bind(dataset)
            .bind(serde_json::to_string(&missing).unwrap_or_default())
            .fetch_optional(&mut *tx)
            .await?;
            return Err(never_held(&request.dataset, head, &missing, purged.is_some()));
        }
        let versions = versions_held(&rows, head);
        let purge: i64 = sqlx::query_scalar(
            "INSERT INTO purges (dataset, time, author, reason, head, versions, results) VALUES (?, ?, ?, ?, ?, ?, 0)
             RETURNING id",
        )
        .bind(dataset)
        .bind(&request.time)
        .bind(&request.author)
        .bind(&request.reason)
        .bind(head)
        .bind(versions as i64)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO purged_members (dataset, case_id, from_v, to_v, cid, ord, purge)
             SELECT m.dataset, m.case_id, m.from_v, m.to_v, b.cid, m.ord, ?3 FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = ?1 AND m.case_id IN (SELECT value FROM json_each(?2))",
        )
        .bind(dataset)
        .bind(&json_ids)
        .bind(purge)
        .execute(&mut *tx)
        .await?;
        let in_head = rows.iter().filter(|r| r.2.is_none()).count() as i64;
        sqlx::query("DELETE FROM members WHERE dataset = ?1 AND case_id IN (SELECT value FROM json_each(?2))")
            .bind(dataset)
            .bind(&json_ids)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE datasets SET cases = cases - ? WHERE id = ?")
            .bind(in_head)
            .bind(dataset)
            .execute(&mut *tx)
            .await?;

        // The bodies, unless another dataset holds the same content.
        let mut blobs: Vec<(i64, &[u8], &str)> = rows.iter().map(|r| (r.3, r.4.as_slice(), r.0.as_str())).collect();
        blobs.sort();
        blobs.dedup_by_key(|b| b.0);
        let (mut bodies, mut kept_shared, mut seeds) = (0u64, Vec::new(), Vec::new());
        for (blob, cid, case) in &blobs {
            let shared: Option<i64> = sqlx::query_scalar("SELECT 1 FROM members WHERE blob = ? LIMIT 1")
                .bind(blob)
                .fetch_optional(&mut *tx)
                .await?;
            if shared.is_some() {
                kept_shared.push((*case).to_owned());
                continue;
            }
            let body: String =
                sqlx::query_scalar("SELECT body FROM blobs WHERE id = ?").bind(blob).fetch_one(&mut *tx).await?;
            if crate::seeds::may_refer(body.as_bytes()) {
                seeds.extend(crate::seeds::seed_references(&body).unwrap_or_default());
            }
            for label in labels_of(&body) {
                sqlx::query("DELETE FROM case_labels WHERE label = ? AND blob = ?")
                    .bind(label)
                    .bind(blob)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query("DELETE FROM blob_facets WHERE blob = ?").bind(blob).execute(&mut *tx).await?;
            sqlx::query("DELETE FROM blob_cids WHERE cid = ?").bind(cid.to_vec()).execute(&mut *tx).await?;
            sqlx::query("DELETE FROM blobs WHERE id = ?").bind(blob).execute(&mut *tx).await?;
            bodies += 1;
        }
        kept_shared.sort();
        kept_shared.dedup();
        seeds.sort();
        seeds.dedup();
        let mut seed_documents = 0;
        for seed in &seeds {
            let reference = format!("\"content_id\":\"{}\"", hex(seed));
            let used: Option<i64> = sqlx::query_scalar("SELECT 1 FROM blobs WHERE instr(body, ?) > 0 LIMIT 1")
                .bind(&reference)
                .fetch_optional(&mut *tx)
                .await?;
            if used.is_none() {
                seed_documents += sqlx::query("DELETE FROM seed_documents WHERE cid = ?")
                    .bind(seed.to_vec())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
        }

        // Results of the dataset's runs on the purged content, and their outputs.
        let runs: Vec<i64> = sqlx::query_scalar(
            "SELECT seq FROM runs WHERE project = ? AND json_valid(meta) AND json_extract(meta, '$.dataset') = ?",
        )
        .bind(self.project())
        .bind(&request.dataset)
        .fetch_all(&mut *tx)
        .await?;
        let mut results = 0u64;
        for run in runs {
            let base = run * SPAN;
            let gone: Vec<(i64, Option<String>)> = sqlx::query_as(
                "DELETE FROM run_results WHERE key >= ?1 AND key < ?2
                   AND unhex(CASE WHEN json_valid(result) THEN json_extract(result, '$.case_content_id') END)
                       IN (SELECT cid FROM purged_members WHERE purge = ?3)
                 RETURNING key, json_extract(result, '$.hash')",
            )
            .bind(base)
            .bind(base + SPAN)
            .bind(purge)
            .fetch_all(&mut *tx)
            .await?;
            results += gone.len() as u64;
            for (key, hash) in gone {
                sqlx::query("DELETE FROM run_outputs WHERE key = ?").bind(key).execute(&mut *tx).await?;
                if let Some(hash) = hash.and_then(|h| crate::runs::hash_bytes(&h).ok()) {
                    sqlx::query("DELETE FROM run_outputs WHERE project = ? AND hash = ?")
                        .bind(self.project())
                        .bind(hash.to_vec())
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }

        // Spans still kept of the traces the cases were captured from.
        let pending_spans = sqlx::query(
            "DELETE FROM pending_spans WHERE project = ?1 AND trace_id IN (
                SELECT t.trace_id FROM captured_traces t, json_each(t.cases) j
                WHERE t.project = ?1 AND j.key IN (SELECT value FROM json_each(?2)))",
        )
        .bind(self.project())
        .bind(&json_ids)
        .execute(&mut *tx)
        .await?
        .rows_affected();

        sqlx::query("UPDATE purges SET results = ? WHERE id = ?")
            .bind(results as i64)
            .bind(purge)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES (?, ?, ?, 'purge', ?)")
            .bind(dataset)
            .bind(&request.time)
            .bind(&request.author)
            .bind(event_detail(ids, versions, results, &request.reason))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(PurgeOutcome {
            purge: PurgeInfo::of(request, purge, head, ids, versions, results),
            bodies,
            seed_documents,
            pending_spans,
            kept_shared,
            erased: false,
        })
    }

    async fn purges(&self, dataset: &str) -> Result<Vec<PurgeInfo>, StoreError> {
        let dataset = self.dataset_id(dataset).await?;
        let rows = sqlx::query_as(
            "SELECT id, time, author, reason, head, versions, results FROM purges WHERE dataset = ? ORDER BY id",
        )
        .bind(dataset)
        .fetch_all(self.pool())
        .await?;
        if Vec::is_empty(&rows) {
            return Ok(Vec::new());
        }
        let cases = sqlx::query_as("SELECT DISTINCT purge, case_id FROM purged_members WHERE dataset = ?")
            .bind(dataset)
            .fetch_all(self.pool())
            .await?;
        Ok(assemble(rows, cases))
    }

    async fn purged_rows(&self, dataset: &str, version: u64) -> Result<Vec<(String, i64)>, StoreError> {
        let dataset = self.dataset_id(dataset).await?;
        Ok(sqlx::query_as(
            "SELECT p.case_id, p.purge FROM purged_members p JOIN purges u ON u.id = p.purge
             WHERE p.dataset = ?1 AND p.from_v <= ?2 AND coalesce(p.to_v, u.head + 1) > ?2",
        )
        .bind(dataset)
        .bind(version as i64)
        .fetch_all(self.pool())
        .await?)
    }
}

/// The labels of a body (what `case_labels` indexes it under).
fn labels_of(body: &str) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Labels {
        #[serde(default)]
        labels: Vec<serde_json::Value>,
    }
    serde_json::from_str::<Labels>(body)
        .map(|l| l.labels.into_iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

impl PostgresStore {
    async fn purge(&self, request: &PurgeRequest) -> Result<PurgeOutcome, StoreError> {
        let ids = wanted(request)?;
        let dataset = self.dataset_id(&request.dataset).await?;
        let mut conn = self.pool().acquire().await?;
        let mut outcome = self.purge_on(&mut conn, dataset, request, &ids).await?;
        // Dead rows are removed from the pages; only a rewrite is sure to leave no bytes of them.
        let tables =
            "blobs, blob_facets, case_labels, seed_documents, members, run_results, run_outputs, pending_spans";
        let vacuum = if request.full { format!("VACUUM (FULL) {tables}") } else { format!("VACUUM {tables}") };
        sqlx::query(sqlx::AssertSqlSafe(vacuum)).execute(&mut *conn).await?;
        outcome.erased = request.full;
        Ok(outcome)
    }

    async fn purge_on(
        &self,
        conn: &mut sqlx::PgConnection,
        dataset: i64,
        request: &PurgeRequest,
        ids: &[String],
    ) -> Result<PurgeOutcome, StoreError> {
        let id_bytes: Vec<&[u8]> = ids.iter().map(|i| i.as_bytes()).collect();
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        // Commits to the dataset queue on its row: a purge sits between two of them.
        let head: i64 = sqlx::query_scalar("SELECT head FROM datasets WHERE id = $1 FOR UPDATE")
            .bind(dataset)
            .fetch_one(&mut *tx)
            .await?;
        let raw: Vec<PgRow_> = sqlx::query_as(
            "SELECT m.case_id, m.from_v, m.to_v, m.blob, b.cid FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = $1 AND m.case_id = ANY($2) ORDER BY m.case_id, m.from_v",
        )
        .bind(dataset)
        .bind(&id_bytes)
        .fetch_all(&mut *tx)
        .await?;
        let rows: Vec<Row_> =
            raw.into_iter().map(|(c, f, t, b, cid)| (String::from_utf8_lossy(&c).into_owned(), f, t, b, cid)).collect();
        let missing: Vec<&String> = ids.iter().filter(|id| !rows.iter().any(|r| &r.0 == *id)).collect();
        if !missing.is_empty() {
            let missing_bytes: Vec<&[u8]> = missing.iter().map(|m| m.as_bytes()).collect();
            let purged: Option<i32> =
                sqlx::query_scalar("SELECT 1 FROM purged_members WHERE dataset = $1 AND case_id = ANY($2) LIMIT 1")
                    .bind(dataset)
                    .bind(&missing_bytes)
                    .fetch_optional(&mut *tx)
                    .await?;
            return Err(never_held(&request.dataset, head, &missing, purged.is_some()));
        }
        let versions = versions_held(&rows, head);
        let purge: i64 = sqlx::query_scalar(
            "INSERT INTO purges (dataset, time, author, reason, head, versions, results)
             VALUES ($1, $2, $3, $4, $5, $6, 0) RETURNING id",
        )
        .bind(dataset)
        .bind(&request.time)
        .bind(&request.author)
        .bind(&request.reason)
        .bind(head)
        .bind(versions as i64)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO purged_members (dataset, case_id, from_v, to_v, cid, ord, purge)
             SELECT m.dataset, m.case_id, m.from_v, m.to_v, b.cid, m.ord, $3 FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = $1 AND m.case_id = ANY($2)",
        )
        .bind(dataset)
        .bind(&id_bytes)
        .bind(purge)
        .execute(&mut *tx)
        .await?;
        let in_head = rows.iter().filter(|r| r.2.is_none()).count() as i64;
        sqlx::query("DELETE FROM members WHERE dataset = $1 AND case_id = ANY($2)")
            .bind(dataset)
            .bind(&id_bytes)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE datasets SET cases = cases - $1 WHERE id = $2")
            .bind(in_head)
            .bind(dataset)
            .execute(&mut *tx)
            .await?;

        let mut blobs: Vec<(i64, &str)> = rows.iter().map(|r| (r.3, r.0.as_str())).collect();
        blobs.sort();
        blobs.dedup_by_key(|b| b.0);
        let (mut bodies, mut kept_shared, mut seeds) = (0u64, Vec::new(), Vec::new());
        for (blob, case) in &blobs {
            let shared: Option<i32> = sqlx::query_scalar("SELECT 1 FROM members WHERE blob = $1 LIMIT 1")
                .bind(blob)
                .fetch_optional(&mut *tx)
                .await?;
            if shared.is_some() {
                kept_shared.push((*case).to_owned());
                continue;
            }
            let body: String =
                sqlx::query_scalar("SELECT body FROM blobs WHERE id = $1").bind(blob).fetch_one(&mut *tx).await?;
            if crate::seeds::may_refer(body.as_bytes()) {
                seeds.extend(crate::seeds::seed_references(&body).unwrap_or_default());
            }
            let labels: Vec<Vec<u8>> = labels_of(&body).into_iter().map(String::into_bytes).collect();
            sqlx::query("DELETE FROM case_labels WHERE label = ANY($1) AND blob = $2")
                .bind(&labels)
                .bind(blob)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM blob_facets WHERE blob = $1").bind(blob).execute(&mut *tx).await?;
            sqlx::query("DELETE FROM blobs WHERE id = $1").bind(blob).execute(&mut *tx).await?;
            bodies += 1;
        }
        kept_shared.sort();
        kept_shared.dedup();
        seeds.sort();
        seeds.dedup();
        let mut seed_documents = 0;
        for seed in &seeds {
            let reference = format!("\"content_id\":\"{}\"", hex(seed));
            let used: Option<i32> = sqlx::query_scalar("SELECT 1 FROM blobs WHERE strpos(body, $1) > 0 LIMIT 1")
                .bind(&reference)
                .fetch_optional(&mut *tx)
                .await?;
            if used.is_none() {
                seed_documents += sqlx::query("DELETE FROM seed_documents WHERE cid = $1")
                    .bind(seed.to_vec())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
        }

        let runs: Vec<i64> = sqlx::query_scalar(
            "SELECT seq FROM runs WHERE project = $1 AND meta LIKE '{%' AND meta::json ->> 'dataset' = $2 FOR UPDATE",
        )
        .bind(self.project())
        .bind(&request.dataset)
        .fetch_all(&mut *tx)
        .await?;
        let mut results = 0u64;
        for run in runs {
            let base = run * SPAN;
            let gone: Vec<(i64, Option<String>)> = sqlx::query_as(
                "DELETE FROM run_results WHERE key >= $1 AND key < $2
                   AND result LIKE '%case_content_id%'
                   AND decode(result::json ->> 'case_content_id', 'hex') IN (SELECT cid FROM purged_members WHERE purge = $3)
                 RETURNING key, result::json ->> 'hash'",
            )
            .bind(base)
            .bind(base + SPAN)
            .bind(purge)
            .fetch_all(&mut *tx)
            .await?;
            results += gone.len() as u64;
            for (key, hash) in gone {
                sqlx::query("DELETE FROM run_outputs WHERE key = $1").bind(key).execute(&mut *tx).await?;
                if let Some(hash) = hash.and_then(|h| crate::runs::hash_bytes(&h).ok()) {
                    sqlx::query("DELETE FROM run_outputs WHERE project = $1 AND hash = $2")
                        .bind(self.project())
                        .bind(hash.to_vec())
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }

        let pending_spans = sqlx::query(
            "DELETE FROM pending_spans WHERE project = $1 AND trace_id IN (
                SELECT t.trace_id FROM captured_traces t, json_each_text(t.cases::json) j
                WHERE t.project = $1 AND j.key = ANY($2))",
        )
        .bind(self.project())
        .bind(ids)
        .execute(&mut *tx)
        .await?
        .rows_affected();

        sqlx::query("UPDATE purges SET results = $1 WHERE id = $2")
            .bind(results as i64)
            .bind(purge)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES ($1, $2, $3, 'purge', $4)")
            .bind(dataset)
            .bind(&request.time)
            .bind(&request.author)
            .bind(event_detail(ids, versions, results, &request.reason))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(PurgeOutcome {
            purge: PurgeInfo::of(request, purge, head, ids, versions, results),
            bodies,
            seed_documents,
            pending_spans,
            kept_shared,
            erased: false,
        })
    }

    async fn purges(&self, dataset: &str) -> Result<Vec<PurgeInfo>, StoreError> {
        let dataset = self.dataset_id(dataset).await?;
        let rows = sqlx::query_as(
            "SELECT id, time, author, reason, head, versions, results FROM purges WHERE dataset = $1 ORDER BY id",
        )
        .bind(dataset)
        .fetch_all(self.pool())
        .await?;
        if Vec::is_empty(&rows) {
            return Ok(Vec::new());
        }
        let cases: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT DISTINCT purge, case_id FROM purged_members WHERE dataset = $1")
                .bind(dataset)
                .fetch_all(self.pool())
                .await?;
        let cases = cases.into_iter().map(|(p, c)| (p, String::from_utf8_lossy(&c).into_owned())).collect();
        Ok(assemble(rows, cases))
    }

    async fn purged_rows(&self, dataset: &str, version: u64) -> Result<Vec<(String, i64)>, StoreError> {
        let dataset = self.dataset_id(dataset).await?;
        let rows: Vec<(Vec<u8>, i64)> = sqlx::query_as(
            "SELECT p.case_id, p.purge FROM purged_members p JOIN purges u ON u.id = p.purge
             WHERE p.dataset = $1 AND p.from_v <= $2 AND coalesce(p.to_v, u.head + 1) > $2",
        )
        .bind(dataset)
        .bind(version as i64)
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(|(c, p)| (String::from_utf8_lossy(&c).into_owned(), p)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_held_counts_each_version_once() {
        let row = |from, to| ("a".to_owned(), from, to, 1, Vec::new());
        // v1..v2, then v3..head (5), and another case v2..v3.
        let rows = vec![row(1, Some(3)), row(3, None), row(2, Some(4))];
        assert_eq!(versions_held(&rows, 5), 5);
        assert_eq!(versions_held(&[row(2, Some(3))], 5), 1);
    }
}
