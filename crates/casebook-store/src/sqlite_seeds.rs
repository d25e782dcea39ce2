//! The embedded store's side of seed documents kept once (`seeds.rs` has the rules, shared with
//! other backends): the `seed_documents` table (migration 0008), written with the bodies that
//! refer to it, read to give bodies back whole, and seen by filters on `memory_seeds`.

use sqlx::{Row, Sqlite, SqliteConnection, Transaction};

use crate::seeds::{SeedDocuments, compact};
use crate::{Prepared, SqliteStore, StoreError};

/// For filters ([`casebook_filter::SqlContext::seeds`]): the body itself when it holds its seeds,
/// else an object whose `memory_seeds` is `{"file": …, "content": <the document>}`, as the case
/// has it.
pub(crate) const FILTER_SEEDS: &str = "(CASE WHEN json_type(b.body, '$.memory_seeds.content_id') IS NULL THEN b.body \
     ELSE json_object('memory_seeds', json_object('file', json_extract(b.body, '$.memory_seeds.file'), 'content', \
     json((SELECT s.document FROM seed_documents s WHERE s.cid = unhex(json_extract(b.body, '$.memory_seeds.content_id')))))) END)";

/// For filters ([`casebook_filter::SqlContext::tools`]): the body itself when none of its tools'
/// snapshot files is kept apart (no tools, or no `"responses":{"file":` in its text, which
/// every reference holds), else an object whose `tools` are the body's, in order, each
/// reference replaced by `{"file": …, "content": <the document>}`, as the case has it.
pub(crate) const FILTER_TOOLS: &str = "(CASE WHEN json_type(b.body, '$.tools') IS NOT 'array' \
     OR instr(b.body, '\"responses\":{\"file\":') = 0 THEN b.body \
     ELSE json_object('tools', (SELECT json_group_array(CASE WHEN json_type(t.value, '$.responses.content_id') IS NULL \
     THEN json(t.value) ELSE json_set(json(t.value), '$.responses', json_object('file', \
     json_extract(t.value, '$.responses.file'), 'content', json((SELECT s.document FROM seed_documents s \
     WHERE s.cid = unhex(json_extract(t.value, '$.responses.content_id')))))) END ORDER BY t.key) \
     FROM json_each(b.body, '$.tools') t)) END)";

/// Keeps the seed documents that `cases` refer to and the store does not have yet (each one
/// once: the documents are taken out of the cases).
pub(crate) async fn keep_documents(tx: &mut Transaction<'_, Sqlite>, cases: &mut [Prepared]) -> Result<(), StoreError> {
    let mut kept: Vec<[u8; 32]> = Vec::new();
    for case in cases {
        for seed in std::mem::take(&mut case.seeds) {
            if kept.contains(&seed.content_id) {
                continue;
            }
            kept.push(seed.content_id);
            sqlx::query("INSERT OR IGNORE INTO seed_documents (cid, document) VALUES (?, ?)")
                .bind(&seed.content_id[..])
                .bind(seed.document)
                .execute(&mut **tx)
                .await?;
        }
    }
    Ok(())
}

impl SqliteStore {
    /// Gives `bodies` as read from `blobs` back whole, fetching the seed documents they refer to
    /// that `documents` does not hold yet.
    pub(crate) async fn expand_bodies(
        &self,
        documents: &mut SeedDocuments,
        bodies: &mut [String],
    ) -> Result<(), StoreError> {
        for id in documents.missing(bodies)? {
            let document: Option<String> = sqlx::query_scalar("SELECT document FROM seed_documents WHERE cid = ?")
                .bind(&id[..])
                .fetch_optional(self.pool())
                .await?;
            // One that is missing is reported by `expand_all`.
            if let Some(document) = document {
                documents.insert(id, document);
            }
        }
        documents.expand_all(bodies)
    }
}

/// Moves the seed documents of bodies stored whole (before migration 0008) into
/// `seed_documents`, leaving a reference in each body. A body's content id does not change:
/// it is the id of the case, which the body still gives back whole.
pub(crate) async fn compact_stored(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    let mut after = 0i64;
    loop {
        // A page at a time: the bodies with seed files may be large.
        let rows = sqlx::query(
            r#"SELECT id, body FROM blobs WHERE id > ? AND instr(body, '"memory_seeds":{"file":') > 0 ORDER BY id LIMIT 64"#,
        )
        .bind(after)
        .fetch_all(&mut *conn)
        .await?;
        let Some(last) = rows.last() else { return Ok(()) };
        after = last.get(0);
        for row in rows {
            let (id, body): (i64, String) = (row.get(0), row.get(1));
            let Some((body, seeds)) = compact(&body)? else { continue };
            for seed in seeds {
                sqlx::query("INSERT OR IGNORE INTO seed_documents (cid, document) VALUES (?, ?)")
                    .bind(&seed.content_id[..])
                    .bind(seed.document)
                    .execute(&mut *conn)
                    .await?;
            }
            sqlx::query("UPDATE blobs SET body = ? WHERE id = ?").bind(body).bind(id).execute(&mut *conn).await?;
        }
    }
}

/// After migrating: when the store is mostly free pages (moving seed documents out of bodies
/// stored whole can leave a 200 MB store with 1 MB of data), gives them back to the file
/// system. SQLite would reuse them for later writes, but a user who sees the file keep its
/// size would not know that.
pub(crate) async fn reclaim(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    let free: i64 = sqlx::query_scalar("PRAGMA freelist_count").fetch_one(&mut *conn).await?;
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(&mut *conn).await?;
    // At least 16 MiB (in 4 KiB pages) and half the file.
    if free >= 4096 && free * 2 >= pages {
        sqlx::query("VACUUM").execute(&mut *conn).await?;
        // In WAL mode the file shrinks when the log is written back into it.
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut *conn).await?;
    }
    Ok(())
}
