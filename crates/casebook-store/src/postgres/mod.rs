//! The shared store: a PostgreSQL database, with the embedded store's semantics.
//!
//! The schema (`migrations/postgres`) is the embedded store's, and a commit follows the same
//! steps (see `sqlite.rs`): the incoming cases go into a temporary table, SQL compares them with
//! the head, closes the rows that changed and opens new ones. Two things differ, both for many
//! writers at once:
//!
//! - Case bodies are written as the input comes, by two tasks on connections of their own (the
//!   server works on both), in short transactions of `ROWS` bodies in content-id order
//!   ([`Bodies`], `write_bodies`). A body is immutable and content-addressed, so writing it early
//!   changes nothing anyone can see; it keeps a long import from holding locks on the body index
//!   that another import of overlapping content would wait on (or deadlock with). A commit that
//!   fails leaves bodies that no version names (`store gc` removes them; every commit holds its
//!   lock in share mode, see `gc.rs`).
//! - The version itself is one transaction that locks the dataset's row (`FOR UPDATE`):
//!   concurrent commits to one dataset queue on that row, so a commit on a parent that is no
//!   longer the head is a conflict and no update is lost. Readers never wait. A later version
//!   takes the lock once its input is all there; a first version takes it at once and puts each
//!   chunk into `members` as its bodies land, so that the two overlap.
//! - A commit whose whole input is one chunk writes its bodies on its own connection instead,
//!   and one on a dataset that has a head (`put`, `rm`) is a single transaction without
//!   temporary tables ([`commit_small`]).
//! - The first import of more than one chunk into a store that holds no case body yet (a new
//!   team store being filled) takes the tables for itself if no one else uses them, and writes
//!   everything on one connection, in one transaction, with the indexes it would fill at random
//!   places built at its end ([`first_into_empty`]).

mod check;
mod gc;
mod runs;

use casebook_canon::VersionHasher;
use casebook_model::{Case, DatasetHeader};
use futures_util::TryStreamExt;
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Connection, Row};

use crate::{
    CaseBatches, CommitMode, CommitOutcome, CommitRequest, Cursor, DatasetInfo, Diff, Event, ModifiedCase, Page,
    Prepared, Revision, SeedDocuments, Select, StoreError, VersionInfo, field_changes,
};

/// Schema migrations, in order. The store records the last one it applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/postgres/0001_init.sql"),
    include_str!("../../migrations/postgres/0002_projects.sql"),
    include_str!("../../migrations/postgres/0003_run_ids_per_project.sql"),
    include_str!("../../migrations/postgres/0004_page_index_no_row_checks.sql"),
    include_str!("../../migrations/postgres/0005_page_function.sql"),
    include_str!("../../migrations/postgres/0006_page_body_places.sql"),
    include_str!("../../migrations/postgres/0007_pending_spans.sql"),
    include_str!("../../migrations/postgres/0008_pending_records.sql"),
    include_str!("../../migrations/postgres/0009_review_index.sql"),
    include_str!("../../migrations/postgres/0010_purges.sql"),
];

/// Cases a batch statement carries.
const ROWS: usize = 2000;
/// Tasks writing case bodies at once during a commit.
const WRITERS: usize = 2;
/// The cases of one statement of [`first_into_empty`]. Fewer than [`ROWS`]: a 1M-case push into
/// a new durable cluster took 16.7–17.6 s in chunks of 1,000 against 17.2–18.3 s in chunks of
/// 2,000, in alternating runs (500: 17.1–17.6 s; 3,000: 17.6–18.0 s; 8,000: 19.9 s), with less
/// of PostgreSQL's CPU.
const FIRST_ROWS: usize = 1000;

/// The key of the advisory lock that one migration at a time takes.
const MIGRATION_LOCK: i64 = 0x6361_7365_626f_6f6b; // "casebook"

#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// The URL with its password hidden, to name the store in messages.
    url: String,
    /// The project whose datasets and runs this handle sees (see [`crate::DEFAULT_PROJECT`]).
    project: String,
    ids: crate::DatasetIds,
    /// The connection that opened the store, lent to one operation at a time (see
    /// [`PostgresStore::conn`]).
    spare: Spare,
}

/// A connection kept outside the pool, with when it was last handed back; `None` while lent,
/// or once [`PostgresStore::shared`].
type Spare = std::sync::Arc<std::sync::Mutex<Option<(PgConnection, std::time::Instant)>>>;

/// How long the spare may sit unused before it is tested (as the pool tests its connections)
/// when lent again: a store held open for long (a run) outlives a restart of the server.
const SPARE_TESTED_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// A connection for one operation: the store's spare, put back when this is dropped, or one of
/// the pool's.
enum Conn {
    Spare(Option<PgConnection>, Spare),
    Pooled(sqlx::pool::PoolConnection<sqlx::Postgres>),
}

impl Conn {
    /// Closes the connection instead of handing it back: it failed in the middle of something.
    fn discard(&mut self) {
        match self {
            Conn::Spare(conn, _) => drop(conn.take()),
            Conn::Pooled(conn) => conn.close_on_drop(),
        }
    }
}

impl std::ops::Deref for Conn {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self {
            Conn::Spare(conn, _) => conn.as_ref().expect("a lent connection is there until dropped"),
            Conn::Pooled(conn) => conn,
        }
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            Conn::Spare(conn, _) => conn.as_mut().expect("a lent connection is there until dropped"),
            Conn::Pooled(conn) => conn,
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Conn::Spare(conn, slot) = self {
            if let Some(conn) = conn.take() {
                *slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((conn, std::time::Instant::now()));
            }
        }
    }
}

/// A connection holding [`crate::gc::GC_LOCK`] in share mode for a commit. Dropped without
/// [`GcShare::release`] (a failed commit, or its future dropped half-way), the connection is
/// closed, which frees the lock, instead of going back to be reused with it.
struct GcShare(Conn);

impl GcShare {
    /// Frees the lock; the connection, to be used again (`None` if the lock could not be freed:
    /// the connection is closed, which frees it, and the commit has happened all the same).
    async fn release(mut self) -> Option<Conn> {
        let freed =
            sqlx::query("SELECT pg_advisory_unlock_shared($1)").bind(crate::gc::GC_LOCK).execute(&mut *self.0).await;
        freed.is_ok().then(|| self.take())
    }

    fn take(&mut self) -> Conn {
        std::mem::replace(&mut self.0, Conn::Spare(None, Spare::default()))
    }
}

impl Drop for GcShare {
    fn drop(&mut self) {
        self.0.discard();
    }
}

/// The name this process's connections give the server: `casebook PID`, by which another
/// casebook command waiting for one of its locks tells whose they are (`crate::waits`).
pub(crate) fn application_name() -> String {
    format!("casebook {}", std::process::id())
}

impl PostgresStore {
    /// A page of `size` cases from `seek` on (backwards for [`Seek::Before`]), read one case
    /// longer so that a cursor is given only when more cases follow in that direction; the
    /// bodies in the version's order either way.
    async fn page_from(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        seek: Option<Seek<'_>>,
        size: usize,
    ) -> Result<Page, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let select = Select { filter: select.filter.clone(), limit: Some(size as u64 + 1) };
        let mut query = SelectQuery::new(&select, id, version, seek);
        let mut conn = self.conn().await?;
        let mut session = query.plan(&mut conn).await?;
        let mut rows = query.rows(self, &mut session, query.rows_sql());
        let mut found = Vec::new();
        while let Some(row) = rows.next().await? {
            found.push(row);
        }
        drop(rows);
        session.end().await?;
        let more = found.len() > size;
        found.truncate(size);
        if query.backward {
            found.reverse();
        }
        let at = |row: Option<&(String, f64, Vec<u8>)>| -> Result<Option<Cursor>, StoreError> {
            row.map(|(_, ord, case)| Ok(Cursor { ord: *ord, id: case_id(case.clone())? })).transpose()
        };
        // Forwards, a case comes before the page when it starts after one; backwards, one comes
        // after it (the cursor's).
        let (next, previous) = match query.backward {
            false => (at(found.last().filter(|_| more))?, at(found.first().filter(|_| seek.is_some()))?),
            true => (at(found.last())?, at(found.first().filter(|_| more))?),
        };
        Ok(Page { bodies: found.into_iter().map(|(body, _, _)| body).collect(), next, previous })
    }
    /// Connects to the database at `url` and creates the store's schema in it (an empty
    /// database, made first if the server has none of that name) or brings it up to date.
    pub async fn create(url: &str) -> Result<Self, StoreError> {
        Self::connect(url, true).await
    }

    /// Connects to the store at `url`; a database without casebook's schema is
    /// [`StoreError::NotAStore`] (only [`PostgresStore::create`] makes one).
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::connect(url, false).await
    }

    /// The URL, password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The same store, seeing the datasets and runs of `project` (sharing the connections).
    pub fn in_project(&self, project: &str) -> Self {
        Self { project: project.to_owned(), ..self.clone() }
    }

    /// The project this handle sees.
    pub fn project(&self) -> &str {
        &self.project
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub async fn close(self) {
        if let Some(conn) = self.take_spare() {
            // Closing says goodbye to the server; an error then leaves nothing to do.
            let _ = conn.close().await;
        }
        self.pool.close().await;
    }

    /// The store as a server's: every operation takes a connection of the pool, which checks
    /// it before lending it (the spare would not be checked, and it is lent to one operation at
    /// a time anyway).
    pub fn shared(self) -> Self {
        // Closed politely when there is a runtime to do it on, else just dropped.
        if let (Some(conn), Ok(runtime)) = (self.take_spare(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                let _ = conn.close().await;
            });
        }
        self
    }

    fn take_spare(&self) -> Option<PgConnection> {
        self.take_spare_since().map(|(conn, _)| conn)
    }

    fn take_spare_since(&self) -> Option<(PgConnection, std::time::Instant)> {
        self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// A connection for one operation. A command makes one connection in all this way: the one
    /// that opened the store, while no other operation has it. From the pool alone, a command
    /// made two or three (every connection costs a server process and a password exchange,
    /// about 5 ms here): the pool hands a connection back only after testing it, in a task of
    /// its own, so a query just after another found none free and opened one.
    /// The spare is tested first when it has not been used for a while; one that fails the
    /// test is closed, and the pool lends the connections from then on.
    async fn conn(&self) -> Result<Conn, StoreError> {
        if let Some((mut conn, since)) = self.take_spare_since() {
            if since.elapsed() < SPARE_TESTED_AFTER || conn.ping().await.is_ok() {
                return Ok(Conn::Spare(Some(conn), self.spare.clone()));
            }
        }
        Ok(Conn::Pooled(self.pool.acquire().await?))
    }

    async fn connect(url: &str, create: bool) -> Result<Self, StoreError> {
        let shown = redact(url);
        let failed = |e: sqlx::Error| StoreError::Connect { url: shown.clone(), why: why(&e) };
        let options: PgConnectOptions = url.parse().map_err(failed)?;
        let options = options.application_name(&application_name());
        // One connection first, for the server's own answer (a pool retries until it times out,
        // and then says only that).
        let mut first = match PgConnection::connect_with(&options).await {
            // `init` on a database that is not there yet makes it, as `createdb` would.
            Err(sqlx::Error::Database(e)) if create && e.code().as_deref() == Some("3D000") => {
                let name = options.get_database().unwrap_or_default().to_owned();
                let mut admin =
                    PgConnection::connect_with(&options.clone().database("postgres")).await.map_err(failed)?;
                let quoted = format!("\"{}\"", name.replace('"', "\"\""));
                sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {quoted} ENCODING 'UTF8' TEMPLATE template0")))
                    .execute(&mut admin)
                    .await
                    .map_err(failed)?;
                admin.close().await.map_err(failed)?;
                PgConnection::connect_with(&options).await.map_err(failed)?
            }
            other => other.map_err(failed)?,
        };
        // The checks of the database run on that connection too, and it is kept for the
        // command's work (see `conn`).
        let encoding: String = sqlx::query_scalar("SHOW server_encoding").fetch_one(&mut first).await?;
        if encoding != "UTF8" {
            return Err(StoreError::NotAStore(
                shown.clone().into(),
                format!(
                    "its encoding is {encoding}; casebook needs a UTF8 database (`CREATE DATABASE … ENCODING 'UTF8'`)"
                ),
            ));
        }
        // An upgrade waits for another's, and for the locks of work on the tables it alters.
        let probe =
            crate::waits::Probe::Postgres { options: std::sync::Arc::new(options.clone()), url: &shown, dataset: None };
        crate::waits::watched(probe, Self::migrate(&mut first, &shown, create)).await?;
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(std::time::Duration::from_secs(30))
            .connect_lazy_with(options);
        Ok(Self {
            pool,
            url: shown,
            project: crate::DEFAULT_PROJECT.to_owned(),
            ids: crate::DatasetIds::default(),
            spare: std::sync::Arc::new(std::sync::Mutex::new(Some((first, std::time::Instant::now())))),
        })
    }

    async fn migrate(conn: &mut PgConnection, url: &str, create: bool) -> Result<(), StoreError> {
        let current = Self::schema_version(conn, url).await?;
        if current == Some(MIGRATIONS.len() as i64) {
            return Ok(());
        }
        if current.is_none() && !create {
            let tables: Vec<String> = sqlx::query_scalar(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema()
                 ORDER BY 1 LIMIT 5",
            )
            .fetch_all(&mut *conn)
            .await?;
            let why = if tables.is_empty() {
                "the database holds no tables".to_owned()
            } else {
                format!("the database has no casebook schema, but other tables: {}", tables.join(", "))
            };
            return Err(StoreError::NotAStore(url.into(), why));
        }
        let mut tx = conn.begin().await?;
        // One migration at a time, whoever else opens the store meanwhile.
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(MIGRATION_LOCK).execute(&mut *tx).await?;
        sqlx::query("CREATE TABLE IF NOT EXISTS casebook_schema (version integer NOT NULL)").execute(&mut *tx).await?;
        let current: Option<i32> =
            sqlx::query_scalar("SELECT max(version) FROM casebook_schema").fetch_one(&mut *tx).await?;
        let current = i64::from(current.unwrap_or(0));
        if current > MIGRATIONS.len() as i64 {
            return Err(StoreError::Newer(url.into(), current));
        }
        if current < MIGRATIONS.len() as i64 {
            crate::upgrading(url, current, MIGRATIONS.len() as i64);
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            sqlx::raw_sql(sqlx::AssertSqlSafe(*sql)).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO casebook_schema (version) VALUES ($1)")
                .bind(i as i32 + 1)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The schema version, `None` when the database has no casebook schema.
    async fn schema_version(conn: &mut PgConnection, url: &str) -> Result<Option<i64>, StoreError> {
        let exists: bool =
            sqlx::query_scalar("SELECT to_regclass('casebook_schema') IS NOT NULL").fetch_one(&mut *conn).await?;
        if !exists {
            return Ok(None);
        }
        let v: Option<i32> =
            sqlx::query_scalar("SELECT max(version) FROM casebook_schema").fetch_one(&mut *conn).await?;
        let v = i64::from(v.unwrap_or(0));
        if v > MIGRATIONS.len() as i64 {
            return Err(StoreError::Newer(url.into(), v));
        }
        Ok(Some(v))
    }

    async fn no_dataset(&self, name: &str) -> StoreError {
        let Ok(mut conn) = self.conn().await else { return crate::no_dataset(name, &[]) };
        let known: Vec<String> = sqlx::query_scalar("SELECT name FROM datasets WHERE project = $1 ORDER BY name")
            .bind(&self.project)
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_default();
        crate::no_dataset(name, &known)
    }

    /// A dataset's row id (remembered: see [`crate::DatasetIds`]).
    pub(crate) async fn dataset_id(&self, name: &str) -> Result<i64, StoreError> {
        match self.stored(name).await? {
            Some((id, _)) => Ok(id),
            None => Err(self.no_dataset(name).await),
        }
    }

    /// The row id and stored name of the dataset `name` names: the same text, else the same
    /// in NFC (see [`crate::names`]).
    async fn stored(&self, name: &str) -> Result<Option<(i64, String)>, StoreError> {
        if let Some(id) = self.ids.get(&self.project, name) {
            return Ok(Some((id, name.to_owned())));
        }
        // PostgreSQL's text cannot hold NUL (binding one is an error): no dataset has it.
        if name.contains('\0') {
            return Ok(None);
        }
        let mut conn = self.conn().await?;
        let id: Option<i64> = sqlx::query_scalar("SELECT id FROM datasets WHERE project = $1 AND name = $2")
            .bind(&self.project)
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
        let found = match id {
            Some(id) => Some((id, name.to_owned())),
            None => {
                let all: Vec<(i64, String)> = sqlx::query_as("SELECT id, name FROM datasets WHERE project = $1")
                    .bind(&self.project)
                    .fetch_all(&mut *conn)
                    .await?;
                crate::names::find(all.iter().map(|(_, n)| n.as_str()), name)
                    .and_then(|stored| all.iter().find(|(_, n)| n == stored).cloned())
            }
        };
        if let Some((id, _)) = &found {
            self.ids.keep(&self.project, name, *id);
        }
        Ok(found)
    }

    async fn version_row(
        conn: &mut PgConnection,
        dataset: &str,
        id: i64,
        number: u64,
    ) -> Result<Option<VersionInfo>, StoreError> {
        let row = sqlx::query(
            "SELECT number, cid, parent, author, time, message, added, removed, modified, cases
             FROM versions WHERE dataset = $1 AND number = $2",
        )
        .bind(id)
        .bind(number as i64)
        .fetch_optional(&mut *conn)
        .await?;
        Ok(row.map(|r| version_info(dataset, &r)))
    }
}

impl PostgresStore {
    /// Gives `bodies` as read from `blobs` back whole (see [`SeedDocuments`]), fetching the seed
    /// documents they refer to that `documents` does not hold yet.
    pub(crate) async fn expand_bodies(
        &self,
        documents: &mut SeedDocuments,
        bodies: &mut [String],
    ) -> Result<(), StoreError> {
        let missing = documents.missing(bodies)?;
        if !missing.is_empty() {
            let ids: Vec<Vec<u8>> = missing.iter().map(|id| id.to_vec()).collect();
            let rows: Vec<(Vec<u8>, String)> =
                sqlx::query_as("SELECT cid, document FROM seed_documents WHERE cid = ANY($1)")
                    .bind(ids)
                    .fetch_all(&mut *self.conn().await?)
                    .await?;
            for (cid, document) in rows {
                if let Ok(cid) = <[u8; 32]>::try_from(cid.as_slice()) {
                    documents.insert(cid, document);
                }
            }
        }
        // One that is missing is reported by `expand_all`.
        documents.expand_all(bodies)
    }
}

/// [`store_bodies`] in a transaction of its own, on a connection of the pool. Committed
/// without waiting for the disk: the version that names these bodies commits after them and
/// waits for the log up to its own record, so theirs is flushed first.
async fn write_bodies(pool: PgPool, cases: Vec<Prepared>) -> Result<Chunk, StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *tx).await?;
    let chunk = store_bodies(&mut tx, cases).await?;
    tx.commit().await?;
    Ok(chunk)
}

/// The columns of a chunk's bodies as the statements that write them take them: each body once,
/// in content-id order, its labels beside it.
struct BodyColumns {
    cids: Vec<Vec<u8>>,
    bodies: Vec<String>,
    facets: Vec<String>,
    label_cids: Vec<Vec<u8>>,
    labels: Vec<Vec<u8>>,
}

impl BodyColumns {
    /// Takes the bodies, facets and labels out of `cases` (their ids and content ids stay).
    fn take(cases: &mut [Prepared]) -> Self {
        let mut order: Vec<usize> = (0..cases.len()).collect();
        // In content-id order, so that two writers of overlapping bodies wait on each other in
        // one order and never deadlock.
        order.sort_unstable_by(|&a, &b| cases[a].content_id.cmp(&cases[b].content_id));
        order.dedup_by(|a, b| cases[*a].content_id == cases[*b].content_id);
        let mut columns = Self {
            cids: Vec::with_capacity(order.len()),
            bodies: Vec::with_capacity(order.len()),
            facets: Vec::with_capacity(order.len()),
            label_cids: Vec::new(),
            labels: Vec::new(),
        };
        for &i in &order {
            let case = &mut cases[i];
            columns.cids.push(case.content_id.to_vec());
            columns.bodies.push(std::mem::take(&mut case.body));
            columns.facets.push(std::mem::take(&mut case.facets));
            for label in std::mem::take(&mut case.labels) {
                columns.label_cids.push(case.content_id.to_vec());
                columns.labels.push(label.into_bytes());
            }
        }
        columns
    }
}

/// Writes the seed documents that `cases` refer to and are not stored yet, in content-id order.
async fn store_seeds(conn: &mut PgConnection, cases: &mut [Prepared]) -> Result<(), StoreError> {
    let mut seeds = std::collections::BTreeMap::new();
    for case in cases.iter_mut() {
        for seed in std::mem::take(&mut case.seeds) {
            seeds.entry(seed.content_id.to_vec()).or_insert(seed.document);
        }
    }
    if seeds.is_empty() {
        return Ok(());
    }
    let (seed_ids, seed_documents): (Vec<Vec<u8>>, Vec<String>) = seeds.into_iter().unzip();
    sqlx::query(
        "INSERT INTO seed_documents (cid, document) SELECT * FROM unnest($1::bytea[], $2::text[])
         ON CONFLICT (cid) DO NOTHING",
    )
    .bind(seed_ids)
    .bind(seed_documents)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Writes the bodies of `cases` that are not stored yet, with their facets and labels (and
/// the seed documents they refer to), on `conn`; returns the cases' ids and content ids, in
/// order.
async fn store_bodies(conn: &mut PgConnection, mut cases: Vec<Prepared>) -> Result<Chunk, StoreError> {
    store_seeds(conn, &mut cases).await?;
    let BodyColumns { cids, bodies, facets, label_cids, labels } = BodyColumns::take(&mut cases);
    // The row id of each body: those this statement stored, and those stored before it began
    // (which its snapshot shows); one stored meanwhile by another writer is looked up after.
    // Labels go only with the bodies this statement stored, which no one else writes, and a
    // case's labels are distinct (`prepare`): they need no conflict check.
    let rows: Vec<(Vec<u8>, i64, String)> = sqlx::query_as(
        "WITH input AS (SELECT * FROM unnest($1::bytea[], $2::text[], $3::text[]) AS t (cid, body, facets)),
              new AS (INSERT INTO blobs (cid, body) SELECT cid, body FROM input
                      ON CONFLICT (cid) DO NOTHING RETURNING id, cid, ctid),
              facets AS (INSERT INTO blob_facets (blob, facets, nul)
                         SELECT new.id, input.facets::json, strpos(input.body, '\\u0000') > 0
                         FROM new JOIN input USING (cid)),
              labels AS (INSERT INTO case_labels (label, blob)
                         SELECT l.label, new.id FROM new JOIN unnest($4::bytea[], $5::bytea[]) AS l (cid, label) USING (cid))
         SELECT cid, id, ctid::text FROM new
         UNION ALL
         SELECT b.cid, b.id, b.ctid::text FROM input i LEFT JOIN new n ON n.cid = i.cid JOIN blobs b ON b.cid = i.cid
         WHERE n.cid IS NULL",
    )
    .bind(&cids)
    .bind(bodies)
    .bind(facets)
    .bind(label_cids)
    .bind(labels)
    .fetch_all(&mut *conn)
    .await?;
    let by_cid = |rows: Vec<(Vec<u8>, i64, String)>| rows.into_iter().map(|(cid, id, at)| (cid, (id, at)));
    let mut found: std::collections::HashMap<Vec<u8>, (i64, String)> = by_cid(rows).collect();
    let missing: Vec<&Vec<u8>> = cids.iter().filter(|cid| !found.contains_key(*cid)).collect();
    if !missing.is_empty() {
        // A statement of its own, which sees what others committed meanwhile.
        let rows = sqlx::query_as("SELECT cid, id, ctid::text FROM blobs WHERE cid = ANY($1)")
            .bind(missing)
            .fetch_all(&mut *conn)
            .await?;
        found.extend(by_cid(rows));
    }
    let mut chunk = Chunk {
        ids: Vec::with_capacity(cases.len()),
        blobs: Vec::with_capacity(cases.len()),
        places: Vec::with_capacity(cases.len()),
        cids: Vec::new(),
    };
    for case in &mut cases {
        let Some((blob, at)) = found.get(case.content_id.as_slice()) else {
            return Err(StoreError::Corrupt("a case body was not found after it was written".into()));
        };
        chunk.ids.push(std::mem::take(&mut case.id));
        chunk.blobs.push(*blob);
        chunk.places.push(at.clone());
        chunk.cids.push(case.content_id);
    }
    Ok(chunk)
}

/// `url` with its secrets replaced by `***`: the password of its user information, and the value
/// of each query parameter whose name says it holds one (libpq reads `?password=` too).
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let path = match path.split_once('?') {
        Some((path, query)) => {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if is_secret_name(name) => format!("{name}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", pairs.join("&"))
        }
        None => path.to_owned(),
    };
    format!("{scheme}://{authority}{path}")
}

/// Whether a query parameter's name suggests a secret value.
fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["password", "secret", "token", "key", "auth"].iter().any(|word| name.contains(word))
}

#[cfg(test)]
mod redact_tests {
    use super::redact;

    #[test]
    fn passwords_are_hidden_wherever_the_url_holds_them() {
        assert_eq!(redact("postgres://u:s3cr%C3%A9t@db:5432/cb"), "postgres://u:***@db:5432/cb");
        assert_eq!(
            redact("postgres://u@db/cb?sslmode=require&password=s3cret"),
            "postgres://u@db/cb?sslmode=require&password=***"
        );
        assert_eq!(redact("http://ci:tok@host:8080?api_key=abc"), "http://ci:***@host:8080?api_key=***");
        assert_eq!(redact("postgres://db/cb"), "postgres://db/cb");
        assert_eq!(redact("./store"), "./store");
    }
}

/// Why a connection failed, in one line: the server's message, or the client's.
fn why(err: &sqlx::Error) -> String {
    let text = match err {
        sqlx::Error::Database(e) => e.message().to_owned(),
        sqlx::Error::Io(e) => e.to_string(),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().to_owned()
}

fn version_info(dataset: &str, r: &PgRow) -> VersionInfo {
    VersionInfo {
        dataset: dataset.to_owned(),
        number: r.get::<i64, _>("number") as u64,
        id: r.get("cid"),
        parent: r.get::<Option<i64>, _>("parent").map(|p| p as u64),
        author: r.get("author"),
        time: r.get("time"),
        message: r.get("message"),
        added: r.get::<i64, _>("added") as u64,
        removed: r.get::<i64, _>("removed") as u64,
        modified: r.get::<i64, _>("modified") as u64,
        cases: r.get::<i64, _>("cases") as u64,
    }
}

/// A `text` value's bytes as the server sends them, not checked again as UTF-8: the store's
/// database is a UTF8 one (`connect` checks), which holds nothing else. A page's joined bodies
/// come this way; checking their 100 KB again was a tenth of the team server's time on a page.
struct TextBytes(Vec<u8>);

impl sqlx::Type<sqlx::Postgres> for TextBytes {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <String as sqlx::Type<sqlx::Postgres>>::type_info()
    }

    fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
        <String as sqlx::Type<sqlx::Postgres>>::compatible(ty)
    }
}

impl sqlx::Decode<'_, sqlx::Postgres> for TextBytes {
    fn decode(value: sqlx::postgres::PgValueRef<'_>) -> Result<Self, sqlx::error::BoxDynError> {
        Ok(Self(value.as_bytes()?.to_vec()))
    }
}

/// A case id as stored (ids are bytes in this store, see the schema).
fn case_id(bytes: Vec<u8>) -> Result<String, StoreError> {
    String::from_utf8(bytes).map_err(|_| StoreError::Corrupt("a stored case id is not UTF-8".into()))
}

const VERSION_COLUMNS: &str = "number, cid, parent, author, time, message, added, removed, modified, cases";

impl crate::Store for PostgresStore {
    crate::pending::pending_methods!("BEGIN");

    /// A number or `latest` in one query; tags and content-id prefixes (and misses, for their
    /// message) from the list of versions.
    async fn resolve(&self, dataset: &str, reference: &crate::Ref) -> Result<VersionInfo, StoreError> {
        let number = match reference {
            crate::Ref::Number(n) => Some(*n as i64),
            crate::Ref::Latest => None,
            crate::Ref::Id(_) | crate::Ref::Name(_) => {
                return crate::resolve_by_listing(self, dataset, reference).await;
            }
        };
        let id = self.dataset_id(dataset).await?;
        let row = sqlx::query(
            "SELECT number, cid, parent, author, time, message, added, removed, modified, cases FROM versions
             WHERE dataset = $1 AND number = coalesce($2::bigint, (SELECT head FROM datasets WHERE id = $1))",
        )
        .bind(id)
        .bind(number)
        .fetch_optional(&mut *self.conn().await?)
        .await?;
        match row {
            Some(row) => Ok(version_info(dataset, &row)),
            None => crate::resolve_by_listing(self, dataset, reference).await,
        }
    }

    async fn datasets(&self) -> Result<Vec<DatasetInfo>, StoreError> {
        let rows = sqlx::query("SELECT name, head, cases, header FROM datasets WHERE project = $1 ORDER BY name")
            .bind(&self.project)
            .fetch_all(&mut *self.conn().await?)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(DatasetInfo {
                    name: r.get("name"),
                    head: r.get::<i64, _>("head") as u64,
                    cases: r.get::<i64, _>("cases") as u64,
                    header: serde_json::from_str(r.get("header")).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                })
            })
            .collect()
    }

    async fn commit(&self, mut request: CommitRequest, cases: CaseBatches) -> Result<CommitOutcome, StoreError> {
        let stored = self.stored(&request.dataset).await?.map(|(_, name)| name);
        request.dataset = crate::commit_name(stored, &request)?;
        let mut conn = self.conn().await?;
        // Held in share mode from before the first body is written or looked up to after the
        // version names them, so that `gc` never deletes a body this commit is about to use
        // (see `gc.rs`).
        sqlx::query("SELECT pg_advisory_lock_shared($1)").bind(crate::gc::GC_LOCK).execute(&mut *conn).await?;
        let mut conn = GcShare(conn);
        let outcome = self.commit_on(&mut conn.0, request, cases).await;
        // A connection that failed in the middle of a commit is not reused (closing it frees
        // the lock).
        let conn = match outcome {
            Ok(_) => conn.release().await,
            Err(_) => None,
        };
        // After a large commit, fresh statistics for the planner at once (autovacuum's come
        // later): with a million new rows counted as a few hundred, a label filter walked the
        // whole version through the label index, 12 times slower than the hash join it takes.
        // The tables that filters and pages read through index-only scans are vacuumed too, so
        // that the scans skip the table's pages (until autovacuum has marked them, every row
        // found in the index was looked up in the table: a label count over a million cases
        // took 0.19 s instead of 0.16 s). Not the bodies: they are read from the table anyway,
        // and they are most of the bytes.
        if let (Ok(CommitOutcome::Created(v)), Some(mut conn)) = (&outcome, conn) {
            if v.added + v.removed + v.modified >= 10_000 {
                sqlx::query("VACUUM (ANALYZE) members, blob_facets, case_labels").execute(&mut *conn).await?;
                sqlx::query("ANALYZE blobs").execute(&mut *conn).await?;
            }
        }
        outcome
    }

    async fn versions(&self, dataset: &str) -> Result<Vec<VersionInfo>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {VERSION_COLUMNS} FROM versions WHERE dataset = $1 ORDER BY number"
        )))
        .bind(id)
        .fetch_all(&mut *self.conn().await?)
        .await?;
        Ok(rows.iter().map(|r| version_info(dataset, r)).collect())
    }

    async fn events(&self, dataset: &str) -> Result<Vec<Event>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let rows = sqlx::query("SELECT time, author, kind, detail FROM events WHERE dataset = $1 ORDER BY id")
            .bind(id)
            .fetch_all(&mut *self.conn().await?)
            .await?;
        Ok(rows.iter().map(|r| Event { time: r.get(0), author: r.get(1), kind: r.get(2), detail: r.get(3) }).collect())
    }

    async fn header(&self, dataset: &str) -> Result<DatasetHeader, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let header: String = sqlx::query_scalar("SELECT header FROM datasets WHERE id = $1")
            .bind(id)
            .fetch_one(&mut *self.conn().await?)
            .await?;
        serde_json::from_str(&header).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    async fn holding(
        &self,
        dataset: &str,
        version: u64,
        ids: &[String],
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let mut conn = self.conn().await?;
        let mut held = std::collections::HashSet::new();
        for chunk in ids.chunks(ROWS) {
            let rows: Vec<Vec<u8>> = sqlx::query_scalar(
                "SELECT case_id FROM members
                 WHERE dataset = $1 AND case_id = ANY($2) AND from_v <= $3 AND (to_v IS NULL OR to_v > $3)",
            )
            .bind(id)
            .bind(as_bytes(chunk))
            .bind(i64::try_from(version).unwrap_or(i64::MAX))
            .fetch_all(&mut *conn)
            .await?;
            for row in rows {
                held.insert(case_id(row)?);
            }
        }
        Ok(held)
    }

    async fn place(&self, dataset: &str, version: u64, case_id: &str) -> Result<Option<Cursor>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let ord: Option<f64> = sqlx::query_scalar(
            "SELECT ord FROM members WHERE dataset = $1 AND case_id = $2 AND from_v <= $3 AND (to_v IS NULL OR to_v > $3)",
        )
        .bind(id)
        .bind(case_id.as_bytes())
        .bind(version as i64)
        .fetch_optional(&mut *self.conn().await?)
        .await?;
        Ok(ord.map(|ord| Cursor { ord, id: case_id.to_owned() }))
    }

    async fn case(&self, dataset: &str, version: u64, case_id: &str) -> Result<Option<Case>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let body: Option<String> = sqlx::query_scalar(
            "SELECT b.body FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = $1 AND m.case_id = $2 AND m.from_v <= $3 AND (m.to_v IS NULL OR m.to_v > $3)",
        )
        .bind(id)
        .bind(case_id.as_bytes())
        .bind(version as i64)
        .fetch_optional(&mut *self.conn().await?)
        .await?;
        let mut bodies: Vec<String> = body.into_iter().collect();
        self.expand_bodies(&mut SeedDocuments::new(), &mut bodies).await?;
        bodies.first().map(|b| crate::parse_body(b)).transpose()
    }

    async fn bodies(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        batch: usize,
        each: &mut dyn FnMut(Vec<String>) -> bool,
    ) -> Result<u64, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let mut query = SelectQuery::new(select, id, version, None);
        let mut conn = self.conn().await?;
        let mut session = query.plan(&mut conn).await?;
        let mut rows = query.rows(self, &mut session, query.rows_sql());
        let mut out = Vec::with_capacity(batch);
        let mut total = 0;
        while let Some((body, _, _)) = rows.next().await? {
            out.push(body);
            total += 1;
            if out.len() == batch && !each(std::mem::take(&mut out)) {
                return Ok(total);
            }
        }
        if !out.is_empty() {
            each(out);
        }
        drop(rows);
        session.end().await?;
        Ok(total)
    }

    async fn count(&self, dataset: &str, version: u64, select: &Select) -> Result<u64, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let mut query = SelectQuery::new(select, id, version, None);
        let mut conn = self.conn().await?;
        let mut session = query.plan(&mut conn).await?;
        let count = query.count(self, &mut session).await?;
        session.end().await?;
        Ok(count)
    }

    async fn page(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        after: Option<&Cursor>,
        size: usize,
    ) -> Result<Page, StoreError> {
        self.page_from(dataset, version, select, after.map(Seek::After), size).await
    }

    async fn page_before(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        before: &Cursor,
        size: usize,
    ) -> Result<Page, StoreError> {
        self.page_from(dataset, version, select, Some(Seek::Before(before)), size).await
    }

    /// One row when the filter is all SQL (or there is none: `casebook_page`): PostgreSQL joins the
    /// bodies. Otherwise (and for
    /// bodies that refer to a seed document) as `page` reads them.
    async fn page_json(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        after: Option<&Cursor>,
        size: usize,
    ) -> Result<crate::JsonPage, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let query = SelectQuery::new(
            &Select { filter: select.filter.clone(), limit: None },
            id,
            version,
            after.map(Seek::After),
        );
        if query.check != Check::Sql {
            return Ok(self.page(dataset, version, select, after, size).await?.into());
        }
        let limit = i64::try_from(size).unwrap_or(i64::MAX);
        let (TextBytes(json), count, ord, last): (TextBytes, i64, Option<f64>, Option<Vec<u8>>) = match &query.plain {
            // Unfiltered: `casebook_page` (migrations 0005 and 0006), whose plan is made once per
            // connection.
            None => {
                sqlx::query_as("SELECT bodies, n, last_ord, last_id FROM casebook_page($1, $2, $3, $4, $5)")
                    .bind(id)
                    .bind(i64::try_from(version).unwrap_or(i64::MAX))
                    .bind(after.map(|a| a.ord))
                    .bind(after.map(|a| a.id.as_bytes()))
                    .bind(limit)
                    .fetch_one(&mut *self.conn().await?)
                    .await?
            }
            // One pass over the page's rows, in the subquery's order (which PostgreSQL keeps for a
            // subquery with a `LIMIT`; as in the embedded store, the aggregates do not sort the
            // bodies again, and the conformance suite compares every page with `page`): the bodies
            // joined, and the last row's place.
            // (`from` holds the filter: it reads no JSON.)
            Some(_) => {
                let from = &query.from;
                let sql = format!(
                    "SELECT coalesce(string_agg(body, ','), ''), count(*), max(ord), (array_agg(case_id))[count(*)]
                     FROM (SELECT b.body, m.ord, m.case_id {from} ORDER BY m.ord, m.case_id LIMIT {limit})
                     AS page"
                );
                query.bind(&sql, sqlx::query_as(AssertSqlSafe(sql.clone()))).fetch_one(&mut *self.conn().await?).await?
            }
        };
        if crate::seeds::may_refer(&json) {
            return Ok(self.page(dataset, version, select, after, size).await?.into());
        }
        let count = count as usize;
        let next = match (ord, last) {
            (Some(ord), Some(last)) if count == size => Some(Cursor { ord, id: case_id(last)? }),
            _ => None,
        };
        let next = crate::if_more(self, dataset, version, select, next).await?;
        Ok(crate::JsonPage { json, count, next })
    }

    async fn history(&self, dataset: &str, case_id: &str) -> Result<Vec<Revision>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let rows: Vec<(i64, Option<i64>, String)> = sqlx::query_as(
            "SELECT m.from_v, m.to_v, encode(b.cid, 'hex') FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = $1 AND m.case_id = $2 ORDER BY m.from_v",
        )
        .bind(id)
        .bind(case_id.as_bytes())
        .fetch_all(&mut *self.conn().await?)
        .await?;
        Ok(crate::revisions(rows))
    }

    async fn diff(&self, dataset: &str, from: u64, to: u64) -> Result<Diff, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let (lo, hi) = crate::span(dataset, from, to)?;
        let rows = sqlx::query(
            "SELECT case_id, from_v, to_v, m.blob, b.body FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = $1 AND m.from_v > 1 AND m.from_v > $2 AND m.from_v <= $3
             UNION ALL
             SELECT case_id, from_v, to_v, m.blob, b.body FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = $1 AND m.to_v > $2 AND m.to_v <= $3 AND NOT (m.from_v > $2 AND m.from_v <= $3)
             ORDER BY 1, 2",
        )
        .bind(id)
        .bind(lo)
        .bind(hi)
        .fetch_all(&mut *self.conn().await?)
        .await?;
        let alive = |v: i64, f: i64, t: Option<i64>| f <= v && t.is_none_or(|t| t > v);
        let mut diff = Diff::default();
        let mut documents = SeedDocuments::new();
        let mut i = 0;
        while i < rows.len() {
            let id_bytes: Vec<u8> = rows[i].get(0);
            let mut at_from: Option<(i64, String)> = None;
            let mut at_to: Option<(i64, String)> = None;
            while i < rows.len() && rows[i].get::<&[u8], _>(0) == id_bytes.as_slice() {
                let r = &rows[i];
                let (f, t, blob, body): (i64, Option<i64>, i64, String) = (r.get(1), r.get(2), r.get(3), r.get(4));
                if alive(from as i64, f, t) {
                    at_from = Some((blob, body.clone()));
                }
                if alive(to as i64, f, t) {
                    at_to = Some((blob, body));
                }
                i += 1;
            }
            let case_id = case_id(id_bytes)?;
            match (at_from, at_to) {
                (None, Some(_)) => diff.added.push(case_id),
                (Some(_), None) => diff.removed.push(case_id),
                (Some((a, _)), Some((b, _))) if a == b => diff.moved.push(case_id),
                (Some((_, old)), Some((_, new))) => {
                    let mut pair = [old, new];
                    self.expand_bodies(&mut documents, &mut pair).await?;
                    let [old, new] = pair;
                    let old: Value = serde_json::from_str(&old).map_err(crate::damaged_body)?;
                    let new: Value = serde_json::from_str(&new).map_err(crate::damaged_body)?;
                    diff.modified.push(ModifiedCase { id: case_id, changes: field_changes(&old, &new) });
                }
                (None, None) => {}
            }
        }
        Ok(diff)
    }

    async fn diff_totals(&self, dataset: &str, from: u64, to: u64) -> Result<crate::DiffTotals, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let (lo, hi) = crate::span(dataset, from, to)?;
        let (added, removed, modified, moved): (i64, i64, i64, i64) =
            sqlx::query_as(AssertSqlSafe(crate::diff::totals_sql()))
                .bind(id)
                .bind(lo)
                .bind(hi)
                .bind(from as i64)
                .bind(to as i64)
                .fetch_one(&mut *self.conn().await?)
                .await?;
        Ok(crate::DiffTotals {
            added: added as u64,
            removed: removed as u64,
            modified: modified as u64,
            moved: moved as u64,
        })
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
        let id = self.dataset_id(dataset).await?;
        let (lo, hi) = crate::span(dataset, from, to)?;
        let sql = crate::diff::page_sql(list, start);
        let mut query = sqlx::query_as(AssertSqlSafe(sql)).bind(id).bind(lo).bind(hi).bind(from as i64).bind(to as i64);
        if let crate::DiffFrom::After(at) | crate::DiffFrom::Before(at) = start {
            query = query.bind(at.as_bytes().to_vec());
        }
        let mut conn = self.conn().await?;
        let rows: Vec<(Vec<u8>, Option<i64>, Option<i64>)> =
            query.bind(size.saturating_add(1) as i64).fetch_all(&mut *conn).await?;
        let rows =
            rows.into_iter().map(|(case, a, b)| Ok((case_id(case)?, a, b))).collect::<Result<Vec<_>, StoreError>>()?;
        let (rows, more) = crate::diff::cut(rows, size, start, |r| r.0.clone());
        let mut bodies = std::collections::HashMap::new();
        let wanted: Vec<i64> = match list {
            crate::DiffList::Modified => rows.iter().flat_map(|r| [r.1, r.2]).flatten().collect(),
            _ => Vec::new(),
        };
        if !wanted.is_empty() {
            let found: Vec<(i64, String)> = sqlx::query_as("SELECT id, body FROM blobs WHERE id = ANY($1)")
                .bind(wanted)
                .fetch_all(&mut *conn)
                .await?;
            drop(conn);
            let (keys, mut texts): (Vec<i64>, Vec<String>) = found.into_iter().unzip();
            self.expand_bodies(&mut SeedDocuments::new(), &mut texts).await?;
            bodies.extend(keys.into_iter().zip(texts));
        }
        let cases = crate::diff::entries(rows, &bodies)?;
        Ok(crate::DiffPage { cases, more })
    }

    async fn changed(&self, dataset: &str, from: u64, to: u64) -> Result<Vec<crate::ChangedCase>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let (lo, hi) = crate::span(dataset, from, to)?;
        // The rows `diff` reads; a body only where the row is in version `to`.
        let rows = sqlx::query(
            "SELECT case_id, from_v, to_v, b.cid,
                    CASE WHEN m.from_v <= $4 AND (m.to_v IS NULL OR m.to_v > $4) THEN b.body END
             FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = $1 AND m.from_v > 1 AND m.from_v > $2 AND m.from_v <= $3
             UNION ALL
             SELECT case_id, from_v, to_v, b.cid,
                    CASE WHEN m.from_v <= $4 AND (m.to_v IS NULL OR m.to_v > $4) THEN b.body END
             FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = $1 AND m.to_v > $2 AND m.to_v <= $3 AND NOT (m.from_v > $2 AND m.from_v <= $3)
             ORDER BY 1, 2",
        )
        .bind(id)
        .bind(lo)
        .bind(hi)
        .bind(to as i64)
        .fetch_all(&mut *self.conn().await?)
        .await?;
        let rows = rows
            .iter()
            .map(|r| {
                let cid = crate::stored_cid(r.get::<&[u8], _>(3))?;
                Ok((case_id(r.get(0))?, r.get(1), r.get(2), cid, r.get(4)))
            })
            .collect::<Result<Vec<crate::ChangeRow>, StoreError>>()?;
        let mut changed = crate::ChangedRows::new(rows, from, to);
        self.expand_bodies(&mut SeedDocuments::new(), &mut changed.bodies).await?;
        changed.cases()
    }

    async fn tag(
        &self,
        dataset: &str,
        version: u64,
        tag: &str,
        author: &str,
        time: &str,
    ) -> Result<crate::Tagged, StoreError> {
        let tag = crate::names::tag_name(tag)?;
        let id = self.dataset_id(dataset).await?;
        let mut conn = self.conn().await?;
        let mut tx = conn.begin().await?;
        if Self::version_row(&mut tx, dataset, id, version).await?.is_none() {
            return Err(StoreError::NoVersion {
                dataset: dataset.to_owned(),
                reference: format!("v{version}"),
                hint: String::new(),
            });
        }
        // The dataset's row orders the tag changes of one dataset, as it orders its commits.
        sqlx::query("SELECT 1 FROM datasets WHERE id = $1 FOR UPDATE").bind(id).execute(&mut *tx).await?;
        // The tag as it is stored, maybe in another normal form by an older casebook: moved,
        // and from now on in NFC.
        let tags: Vec<(String, i64)> =
            sqlx::query_as("SELECT name, version FROM tags WHERE dataset = $1").bind(id).fetch_all(&mut *tx).await?;
        let stored: Vec<&(String, i64)> =
            tags.iter().filter(|(name, _)| crate::names::nfc(name) == tag.as_str()).collect();
        // Already there, as it is: nothing to change, nothing to log.
        if let [(name, v)] = stored.as_slice() {
            if *name == tag && *v as u64 == version {
                return Ok(crate::Tagged::Already);
            }
        }
        let mut before = None;
        for (name, v) in stored {
            before = Some(*v);
            sqlx::query("DELETE FROM tags WHERE dataset = $1 AND name = $2")
                .bind(id)
                .bind(name)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "INSERT INTO tags (dataset, name, version) VALUES ($1, $2, $3)
             ON CONFLICT (dataset, name) DO UPDATE SET version = excluded.version",
        )
        .bind(id)
        .bind(&tag)
        .bind(version as i64)
        .execute(&mut *tx)
        .await?;
        // (A tag kept in another normal form that names this version is only rewritten in NFC.)
        if before != Some(version as i64) {
            let detail = match before {
                Some(v) => format!("{tag}: v{v} → v{version}"),
                None => format!("{tag}: v{version}"),
            };
            sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES ($1, $2, $3, 'tag', $4)")
                .bind(id)
                .bind(time)
                .bind(author)
                .bind(detail)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(match before {
            Some(from) if from as u64 == version => crate::Tagged::Already,
            Some(from) => crate::Tagged::Moved { from: from as u64 },
            None => crate::Tagged::Set,
        })
    }

    async fn group_counts(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        path: &casebook_filter::FieldPath,
    ) -> Result<Option<Vec<(Option<Value>, u64)>>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let mut query = SelectQuery::new(&Select { filter: select.filter.clone(), limit: None }, id, version, None);
        let mut conn = self.conn().await?;
        let mut session = query.plan(&mut conn).await?;
        let groups = query.groups(self, &mut session, path).await?;
        session.end().await?;
        Ok(groups.map(casebook_filter::Groups::sorted))
    }

    async fn untag(&self, dataset: &str, tag: &str, author: &str, time: &str) -> Result<u64, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let mut conn = self.conn().await?;
        let mut tx = conn.begin().await?;
        sqlx::query("SELECT 1 FROM datasets WHERE id = $1 FOR UPDATE").bind(id).execute(&mut *tx).await?;
        let tags: Vec<(String, i64)> =
            sqlx::query_as("SELECT name, version FROM tags WHERE dataset = $1").bind(id).fetch_all(&mut *tx).await?;
        let found = crate::named_tags(dataset, tag, &tags)?;
        for (name, _) in &found {
            sqlx::query("DELETE FROM tags WHERE dataset = $1 AND name = $2")
                .bind(id)
                .bind(name)
                .execute(&mut *tx)
                .await?;
        }
        let version = found[0].1 as u64;
        sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES ($1, $2, $3, 'tag', $4)")
            .bind(id)
            .bind(time)
            .bind(author)
            .bind(format!("{}: v{version} → deleted", crate::names::nfc(tag)))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(version)
    }

    async fn tags(&self, dataset: &str) -> Result<Vec<(String, u64)>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT name, version FROM tags WHERE dataset = $1 ORDER BY name")
                .bind(id)
                .fetch_all(&mut *self.conn().await?)
                .await?;
        Ok(rows.into_iter().map(|(name, v)| (name, v as u64)).collect())
    }

    /// The selection's members keyed in SQL and cut to the page there (a top-N), then the
    /// page's bodies; a filter part tested in memory (`matches`, or a case with a `\u0000`)
    /// makes the rows stream in order until the page is full instead.
    async fn page_sorted(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        sort: &crate::Sort,
        seek: Option<&crate::SortSeek>,
        size: usize,
    ) -> Result<crate::SortedPage, StoreError> {
        use casebook_filter::SqlParam;
        let id = self.dataset_id(dataset).await?;
        let backward = seek.is_some_and(|s| s.backward);
        let ascending = sort.ascending(backward);
        let query = SelectQuery::new(&Select { filter: select.filter.clone(), limit: None }, id, version, None);
        // The parameters: the selection's, the path's (a field), the seek's.
        let mut n = query.params.len() + 1;
        let steps = match &sort.by {
            crate::SortBy::Field(path) => Some(path.pg_steps()),
            crate::SortBy::Id => None,
        };
        let key = crate::sort::pg_key(sort, n);
        if steps.is_some() {
            n += 1;
        }
        let (flag, guard) = match (query.check, &query.json) {
            (Check::Memory, _) => ("true", String::new()),
            (Check::Guarded, Some(json)) => ("f.nul", format!(" AND CASE WHEN f.nul THEN true ELSE ({json}) END")),
            _ => ("false", String::new()),
        };
        let from = &query.from;
        let mut inner = format!(
            "SELECT * FROM (SELECT m.blob AS blob, m.case_id AS case_id, {key}, {flag} AS mem {from}{guard}) AS s"
        );
        if seek.is_some() {
            let op = if ascending { ">" } else { "<" };
            inner.push_str(&format!(
                " WHERE (k_rank, k_num, k_text, case_id) {op} (${n}::int8, ${}::float8, ${}::bytea, ${}::bytea)",
                n + 1,
                n + 2,
                n + 3
            ));
        }
        let order = crate::sort::order_by("case_id", ascending);
        // All in SQL: one case more than the page, to know whether more follow.
        let limit = match query.check {
            Check::Sql => format!(" LIMIT {}", i64::try_from(size).unwrap_or(i64::MAX).saturating_add(1)),
            _ => String::new(),
        };
        let sql = format!(
            "SELECT b.body, p.case_id, p.k_rank, p.k_num, p.k_text, p.mem FROM ({inner} {order}{limit}) AS p
             JOIN blobs b ON b.id = p.blob {order}"
        );
        let mut statement = sqlx::query_as::<_, (String, Vec<u8>, i64, f64, Vec<u8>, bool)>(AssertSqlSafe(sql));
        for param in &query.params {
            statement = match param {
                SqlParam::Integer(n) => statement.bind(*n),
                SqlParam::Real(x) => statement.bind(*x),
                SqlParam::Text(text) => statement.bind(text.clone()),
                SqlParam::Bytes(bytes) => statement.bind(bytes.clone()),
            };
        }
        if let Some(steps) = steps {
            statement = statement.bind(steps);
        }
        if let Some(seek) = seek {
            statement = statement
                .bind(seek.key.rank)
                .bind(seek.key.num)
                .bind(seek.key.text.clone().into_bytes())
                .bind(seek.key.id.clone().into_bytes());
        }
        let mut conn = self.conn().await?;
        let mut stream = statement.fetch(&mut *conn);
        let mut documents = SeedDocuments::new();
        let mut rows = Vec::new();
        while let Some((body, case, rank, num, text, in_memory)) = stream.try_next().await? {
            let mut body = [body];
            self.expand_bodies(&mut documents, &mut body).await?;
            let [body] = body;
            if in_memory {
                let value: Value = serde_json::from_str(&body).map_err(crate::damaged_body)?;
                if !query.filter.as_ref().is_none_or(|f| f.matches_json(&value)) {
                    continue;
                }
            }
            let text = String::from_utf8(text).map_err(|_| StoreError::Corrupt("a sort key is not UTF-8".into()))?;
            rows.push((body, crate::SortKey { rank, num, text, id: case_id(case)? }));
            if rows.len() > size {
                break;
            }
        }
        drop(stream);
        let more = rows.len() > size;
        rows.truncate(size);
        if backward {
            rows.reverse();
        }
        let key = |row: Option<&(String, crate::SortKey)>| row.map(|(_, key)| key.clone());
        let (next, previous) = match backward {
            false => (key(rows.last().filter(|_| more)), key(rows.first().filter(|_| seek.is_some()))),
            true => (key(rows.last()), key(rows.first().filter(|_| more))),
        };
        Ok(crate::SortedPage { bodies: rows.into_iter().map(|(body, _)| body).collect(), next, previous })
    }

    async fn sort_key(
        &self,
        dataset: &str,
        version: u64,
        sort: &crate::Sort,
        case: &str,
    ) -> Result<Option<crate::SortKey>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let query = SelectQuery::new(&Select::all(), id, version, None);
        let key = crate::sort::pg_key(sort, 4);
        let from = &query.from;
        let sql = format!("SELECT m.case_id, {key} {from} AND m.case_id = $3");
        let mut statement = sqlx::query_as::<_, (Vec<u8>, i64, f64, Vec<u8>)>(AssertSqlSafe(sql))
            .bind(id)
            .bind(i64::try_from(version).unwrap_or(i64::MAX))
            .bind(case.as_bytes().to_vec());
        if let crate::SortBy::Field(path) = &sort.by {
            statement = statement.bind(path.pg_steps());
        }
        let Some((case, rank, num, text)) = statement.fetch_optional(&mut *self.conn().await?).await? else {
            return Ok(None);
        };
        let text = String::from_utf8(text).map_err(|_| StoreError::Corrupt("a sort key is not UTF-8".into()))?;
        Ok(Some(crate::SortKey { rank, num, text, id: case_id(case)? }))
    }
}

impl PostgresStore {
    /// See [`crate::AnyStore::restore_log`].
    pub async fn restore_log(
        &self,
        dataset: &str,
        header: &DatasetHeader,
        events: &[Event],
        tags: &[(String, u64)],
    ) -> Result<(), StoreError> {
        let id = self.dataset_id(dataset).await?;
        let mut conn = self.conn().await?;
        let mut tx = conn.begin().await?;
        sqlx::query("SELECT 1 FROM datasets WHERE id = $1 FOR UPDATE").bind(id).execute(&mut *tx).await?;
        let header = serde_json::to_string(header).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        sqlx::query("UPDATE datasets SET header = $1 WHERE id = $2").bind(header).bind(id).execute(&mut *tx).await?;
        for e in events {
            sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES ($1, $2, $3, $4, $5)")
                .bind(id)
                .bind(&e.time)
                .bind(&e.author)
                .bind(&e.kind)
                .bind(&e.detail)
                .execute(&mut *tx)
                .await?;
        }
        for (name, version) in tags {
            sqlx::query(
                "INSERT INTO tags (dataset, name, version) VALUES ($1, $2, $3)
                 ON CONFLICT (dataset, name) DO UPDATE SET version = excluded.version",
            )
            .bind(id)
            .bind(name)
            .bind(*version as i64)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// [`crate::Store::commit`] on one connection: a first version as its bodies come
    /// ([`first_version`]), a small change in one transaction ([`commit_small`]), anything else
    /// through temporary tables ([`PostgresStore::commit_by_tables`]).
    async fn commit_on(
        &self,
        conn: &mut PgConnection,
        request: CommitRequest,
        cases: CaseBatches,
    ) -> Result<CommitOutcome, StoreError> {
        let removing = matches!(request.mode, CommitMode::Remove(_));
        let mut bodies = Bodies::new(self.pool.clone(), cases);
        let small = match &request.mode {
            CommitMode::Remove(ids) => ids.len() <= ROWS,
            _ => bodies.read_small().await?,
        };
        // A dataset without a head gets its first version straight into `members`, as the bodies
        // are written (other writers of the dataset wait for it; readers do not).
        let head_before: Option<i64> = sqlx::query_scalar("SELECT head FROM datasets WHERE project = $1 AND name = $2")
            .bind(&self.project)
            .bind(&request.dataset)
            .fetch_optional(&mut *conn)
            .await?;
        if head_before.unwrap_or(0) == 0 && !removing {
            let mut tx = conn.begin().await?;
            let (id, head) = lock_dataset(&mut tx, &self.project, &request).await?;
            if head == 0 {
                if !small && take_empty_store(&mut tx).await? {
                    return first_into_empty(tx, request, id, bodies).await;
                }
                return first_version(tx, request, id, bodies).await;
            }
            // Another writer made the first version meanwhile: this commit builds on it.
            tx.rollback().await?;
        }
        if small && request.mode != CommitMode::Replace {
            return commit_small(conn, &self.project, request, std::mem::take(&mut bodies.pending)).await;
        }
        let outcome = self.commit_by_tables(conn, request, bodies).await?;
        sqlx::query("DROP TABLE IF EXISTS pg_temp.incoming, pg_temp.changes, pg_temp.opening, pg_temp.kept")
            .execute(&mut *conn)
            .await?;
        Ok(outcome)
    }

    /// The general path of a commit: the input into a temporary table, then the version in one
    /// transaction, worked out in SQL (the temporary tables are left for the caller to drop).
    async fn commit_by_tables(
        &self,
        conn: &mut PgConnection,
        request: CommitRequest,
        mut bodies: Bodies,
    ) -> Result<CommitOutcome, StoreError> {
        let removing = matches!(request.mode, CommitMode::Remove(_));
        sqlx::raw_sql(
            "DROP TABLE IF EXISTS pg_temp.incoming;
             CREATE TEMP TABLE incoming (pos bigint PRIMARY KEY, case_id bytea NOT NULL, blob bigint NOT NULL, blob_at tid);",
        )
        .execute(&mut *conn)
        .await?;
        let mut pos = 0i64;
        match &request.mode {
            CommitMode::Remove(ids) => {
                let mut unique: Vec<&String> = ids.iter().collect();
                unique.sort();
                unique.dedup();
                for chunk in unique.chunks(ROWS) {
                    let ids: Vec<&[u8]> = chunk.iter().map(|id| id.as_bytes()).collect();
                    let positions: Vec<i64> = (pos..pos + chunk.len() as i64).collect();
                    pos += chunk.len() as i64;
                    sqlx::query("INSERT INTO incoming (pos, case_id, blob) SELECT p, id, 0 FROM unnest($1::bigint[], $2::bytea[]) AS t (p, id)")
                        .bind(positions)
                        .bind(ids)
                        .execute(&mut *conn)
                        .await?;
                }
            }
            _ => {
                while let Some(chunk) = bodies.next(conn).await? {
                    let positions: Vec<i64> = (pos..pos + chunk.ids.len() as i64).collect();
                    pos += chunk.ids.len() as i64;
                    sqlx::query(
                        "INSERT INTO incoming (pos, case_id, blob, blob_at) SELECT t.p, t.id, t.blob, t.at::tid
                         FROM unnest($1::bigint[], $2::bytea[], $3::bigint[], $4::text[]) AS t (p, id, blob, at)",
                    )
                    .bind(positions)
                    .bind(as_bytes(&chunk.ids))
                    .bind(&chunk.blobs)
                    .bind(&chunk.places)
                    .execute(&mut *conn)
                    .await?;
                }
            }
        }
        if let Err(err) =
            sqlx::query("CREATE UNIQUE INDEX incoming_case ON incoming (case_id)").execute(&mut *conn).await
        {
            let twice: Option<Vec<u8>> =
                sqlx::query_scalar("SELECT case_id FROM incoming GROUP BY case_id HAVING count(*) > 1 LIMIT 1")
                    .fetch_optional(&mut *conn)
                    .await?;
            return Err(
                twice.map_or(err.into(), |id| StoreError::DuplicateId(String::from_utf8_lossy(&id).into_owned()))
            );
        }
        sqlx::query("ANALYZE incoming").execute(&mut *conn).await?;

        let mut tx = conn.begin().await?;
        let (id, head) = lock_dataset(&mut tx, &self.project, &request).await?;
        if head == 0 && !removing {
            // The head was there when the commit began and is gone: it cannot be.
            return Err(StoreError::Corrupt(format!("dataset `{}` lost its versions", request.dataset)));
        }

        let live = "dataset = $1 AND to_v IS NULL";
        sqlx::query(
            "CREATE TEMP TABLE changes (case_id bytea PRIMARY KEY, kind integer NOT NULL, blob bigint, blob_at tid)",
        )
        .execute(&mut *tx)
        .await?;
        if removing {
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO changes SELECT m.case_id, 2, NULL, NULL FROM incoming i JOIN members m ON m.case_id = i.case_id AND m.{live}"
            )))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        } else {
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO changes SELECT i.case_id, CASE WHEN m.blob IS NULL THEN 1 ELSE 3 END, i.blob, i.blob_at
                 FROM incoming i LEFT JOIN (SELECT case_id, blob FROM members WHERE {live}) m ON m.case_id = i.case_id
                 WHERE m.blob IS NULL OR m.blob <> i.blob"
            )))
            .bind(id)
            .execute(&mut *tx)
            .await?;
            if request.mode == CommitMode::Replace {
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO changes SELECT m.case_id, 2, NULL, NULL FROM members m
                     WHERE m.{live} AND NOT EXISTS (SELECT 1 FROM incoming i WHERE i.case_id = m.case_id)"
                )))
                .bind(id)
                .execute(&mut *tx)
                .await?;
            }
        }
        let reordered = request.mode == CommitMode::Replace && {
            let n: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
                "SELECT count(*) FROM (SELECT m.ord AS ord, lag(m.ord) OVER (ORDER BY i.pos) AS prev
                 FROM incoming i JOIN members m ON m.case_id = i.case_id AND m.{live}) AS kept WHERE ord < prev"
            )))
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
            n > 0 || {
                let crowded = crate::crowded_sql("$1", "JOIN");
                sqlx::query_scalar::<_, bool>(AssertSqlSafe(crowded)).bind(id).fetch_one(&mut *tx).await?
            }
        };
        let counts = sqlx::query(
            "SELECT count(*) FILTER (WHERE kind = 1), count(*) FILTER (WHERE kind = 2), count(*) FILTER (WHERE kind = 3)
             FROM changes",
        )
        .fetch_one(&mut *tx)
        .await?;
        let (added, removed, modified): (i64, i64, i64) = (counts.get(0), counts.get(1), counts.get(2));
        let head_info = if head > 0 { Self::version_row(&mut tx, &request.dataset, id, head).await? } else { None };
        if added + removed + modified == 0 && !reordered && head > 0 {
            tx.rollback().await?;
            return Ok(CommitOutcome::Unchanged(head_info));
        }
        let number = head + 1;

        let order = if reordered {
            let mut hasher = VersionHasher::new(&json!({"order": request.dataset}))?;
            let mut ids = sqlx::query_scalar::<_, Vec<u8>>("SELECT case_id FROM incoming ORDER BY pos").fetch(&mut *tx);
            while let Some(case_id) = ids.try_next().await? {
                hasher.change(&self::case_id(case_id)?, None)?;
            }
            Some(hasher.finish())
        } else {
            None
        };
        let mut hasher = VersionHasher::new(&json!({
            "dataset": request.dataset,
            "parent": head_info.as_ref().map(|h| h.id.clone()),
            "order": order,
        }))?;
        {
            // A removed case has the empty content id (see `VersionHasher`).
            let mut rows = sqlx::query(
                "SELECT c.case_id, coalesce(encode(b.cid, 'hex'), '') FROM changes c LEFT JOIN blobs b ON b.id = c.blob
                 ORDER BY c.case_id",
            )
            .fetch(&mut *tx);
            while let Some(r) = rows.try_next().await? {
                hasher.change(&case_id(r.get(0))?, Some(r.get::<&str, _>(1)))?;
            }
        }
        let cid = hasher.finish();

        // The rows that close, found through the primary key (dataset, case id).
        sqlx::query("ANALYZE changes").execute(&mut *tx).await?;
        let close = if reordered {
            "UPDATE members m SET to_v = $2 FROM (SELECT case_id FROM incoming UNION SELECT case_id FROM changes) c
             WHERE m.dataset = $1 AND m.case_id = c.case_id AND m.to_v IS NULL"
        } else {
            "UPDATE members m SET to_v = $2 FROM changes c WHERE m.dataset = $1 AND m.case_id = c.case_id AND m.to_v IS NULL"
        };
        sqlx::query(
            "CREATE TEMP TABLE opening (case_id bytea PRIMARY KEY, blob bigint NOT NULL, ord double precision NOT NULL,
                                       blob_at tid)",
        )
        .execute(&mut *tx)
        .await?;
        if reordered {
            sqlx::query("INSERT INTO opening SELECT case_id, blob, pos, blob_at FROM incoming")
                .execute(&mut *tx)
                .await?;
        } else {
            let max_ord: Option<f64> = sqlx::query_scalar(AssertSqlSafe(format!(
                "SELECT ord FROM members WHERE {live} ORDER BY ord DESC LIMIT 1"
            )))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            let end = max_ord.unwrap_or(-1.0);
            if request.mode == CommitMode::Replace {
                sqlx::query("CREATE TEMP TABLE kept (pos bigint PRIMARY KEY, ord double precision NOT NULL)")
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO kept SELECT i.pos, m.ord FROM incoming i JOIN members m ON m.case_id = i.case_id AND m.{live}"
                )))
                .bind(id)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO opening
                     WITH added AS (SELECT c.case_id, c.blob, c.blob_at, i.pos,
                            (SELECT k.ord FROM kept k WHERE k.pos < i.pos ORDER BY k.pos DESC LIMIT 1) AS lo,
                            (SELECT k.ord FROM kept k WHERE k.pos > i.pos ORDER BY k.pos LIMIT 1) AS hi
                            FROM changes c JOIN incoming i ON i.case_id = c.case_id WHERE c.kind = 1),
                         ranked AS (SELECT *, row_number() OVER (PARTITION BY lo, hi ORDER BY pos) AS k,
                            count(*) OVER (PARTITION BY lo, hi) AS n FROM added)
                     SELECT case_id, blob, CASE
                        WHEN lo IS NULL AND hi IS NULL THEN pos
                        WHEN lo IS NULL THEN hi - (n + 1 - k)
                        WHEN hi IS NULL THEN lo + k
                        ELSE lo + (hi - lo) * k / (n + 1) END, blob_at FROM ranked",
                )
                .execute(&mut *tx)
                .await?;
            } else {
                sqlx::query(
                    "INSERT INTO opening
                     SELECT c.case_id, c.blob, $1 + row_number() OVER (ORDER BY i.pos), c.blob_at
                     FROM changes c JOIN incoming i ON i.case_id = c.case_id WHERE c.kind = 1",
                )
                .bind(end)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO opening SELECT c.case_id, c.blob, m.ord, c.blob_at FROM changes c JOIN members m ON m.case_id = c.case_id AND m.{live} WHERE c.kind = 3"
            )))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(close).bind(id).bind(number as i64).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO members (dataset, case_id, from_v, to_v, blob, ord, blob_at)
             SELECT $1, case_id, $2, NULL, blob, ord, blob_at FROM opening ORDER BY case_id",
        )
        .bind(id)
        .bind(number as i64)
        .execute(&mut *tx)
        .await?;
        let count = head_info.as_ref().map_or(0, |h| h.cases as i64) + added - removed;
        let version = new_version(request, head, cid, [added, removed, modified], count);
        insert_version(&mut tx, id, &version).await?;
        tx.commit().await?;
        Ok(CommitOutcome::Created(version))
    }
}

/// Makes the dataset a commit names if it is new (not for a removal), locks its row until the
/// transaction ends, checks the commit's parent, and records a header edit. Returns the
/// dataset's row id and head.
async fn lock_dataset(tx: &mut PgConnection, project: &str, request: &CommitRequest) -> Result<(i64, u64), StoreError> {
    let header_json = |h: &DatasetHeader| serde_json::to_string(h).unwrap_or_else(|_| "{}".into());
    if !matches!(request.mode, CommitMode::Remove(_)) {
        let header = request.header.clone().unwrap_or_default();
        sqlx::query(
            "INSERT INTO datasets (project, name, header) VALUES ($1, $2, $3) ON CONFLICT (project, name) DO NOTHING",
        )
        .bind(project)
        .bind(&request.dataset)
        .bind(header_json(&header))
        .execute(&mut *tx)
        .await?;
    }
    // From here to the end of the transaction, the dataset is this commit's alone.
    let row = sqlx::query("SELECT id, head, header FROM datasets WHERE project = $1 AND name = $2 FOR UPDATE")
        .bind(project)
        .bind(&request.dataset)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = row else { return Err(StoreError::NoDataset(request.dataset.clone(), String::new())) };
    let (id, head): (i64, u64) = (row.get("id"), row.get::<i64, _>("head") as u64);
    if let Some(parent) = request.parent {
        if parent != head {
            return Err(StoreError::Conflict { dataset: request.dataset.clone(), parent, head });
        }
    }
    // Header edits are logged, not versioned.
    if let Some(header) = &request.header {
        let old: String = row.get("header");
        let new = header_json(header);
        if old != new {
            sqlx::query("UPDATE datasets SET header = $1 WHERE id = $2").bind(&new).bind(id).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES ($1, $2, $3, 'header', $4)")
                .bind(id)
                .bind(&request.time)
                .bind(&request.author)
                .bind(&new)
                .execute(&mut *tx)
                .await?;
        }
    }
    Ok((id, head))
}

/// The first version of dataset `id`, in `tx` (which holds its row): every case is new, so each
/// chunk goes into `members` as soon as its bodies are written. The version id hashes the cases
/// in id order; they are listed as they go by, as the embedded store does.
async fn first_version(
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    request: CommitRequest,
    id: i64,
    mut bodies: Bodies,
) -> Result<CommitOutcome, StoreError> {
    let mut listed = crate::sqlite::Listing::default();
    while let Some(chunk) = bodies.next(&mut tx).await? {
        let first = listed.len() as i64;
        for (case, cid) in chunk.ids.iter().zip(&chunk.cids) {
            listed.push(case, *cid)?;
        }
        let positions: Vec<i64> = (first..listed.len() as i64).collect();
        sqlx::query(
            "INSERT INTO members (dataset, case_id, from_v, to_v, blob, ord, blob_at)
             SELECT $1, t.id, 1, NULL, t.blob, t.p, t.at::tid
             FROM unnest($2::bigint[], $3::bytea[], $4::bigint[], $5::text[]) AS t (p, id, blob, at)",
        )
        .bind(id)
        .bind(positions)
        .bind(as_bytes(&chunk.ids))
        .bind(&chunk.blobs)
        .bind(&chunk.places)
        .execute(&mut *tx)
        .await
        // (A case whose id was listed before fails here: say which.)
        .map_err(|err| listed.explain(err.into()))?;
    }
    let cid = listed.first_version_id(&request.dataset)?;
    end_first_version(tx, request, id, listed.len() as i64, cid).await
}

/// Records the first version of dataset `id`, of `cases` cases and content id `cid`, and
/// commits `tx`.
async fn end_first_version(
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    request: CommitRequest,
    id: i64,
    cases: i64,
    cid: String,
) -> Result<CommitOutcome, StoreError> {
    let version = new_version(request, 0, cid, [cases, 0, 0], cases);
    insert_version(&mut tx, id, &version).await?;
    tx.commit().await?;
    Ok(CommitOutcome::Created(version))
}

/// Takes the tables of case bodies and members for `tx` alone if the store holds no case body
/// and no version yet (a new team store being filled), for [`first_into_empty`]; true if it
/// did. It never waits for the locks: when another transaction is using one of those tables, a
/// reader included, it leaves them alone and says false, and the commit takes the general path.
/// (Queueing for them could deadlock unseen: another import's body writers, on connections of
/// their own, would queue behind this one while it waited for that import to end.)
async fn take_empty_store(tx: &mut PgConnection) -> Result<bool, StoreError> {
    async fn empty(conn: &mut PgConnection) -> Result<bool, StoreError> {
        // No version either, not even of no cases: there is nothing anyone could be reading.
        let sql = "SELECT NOT EXISTS (SELECT 1 FROM blobs) AND NOT EXISTS (SELECT 1 FROM versions)";
        Ok(sqlx::query_scalar(sql).fetch_one(conn).await?)
    }
    if !empty(tx).await? {
        return Ok(false);
    }
    let mut savepoint = tx.begin().await?;
    let locked = sqlx::query(
        "LOCK TABLE blobs, seed_documents, blob_facets, case_labels, members IN ACCESS EXCLUSIVE MODE NOWAIT",
    )
    .execute(&mut *savepoint)
    .await;
    match locked {
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55P03") => {
            savepoint.rollback().await?;
            return Ok(false);
        }
        other => other?,
    };
    // Another import may have stored bodies between the look and the lock.
    if !empty(&mut savepoint).await? {
        savepoint.rollback().await?;
        return Ok(false);
    }
    savepoint.commit().await?;
    Ok(true)
}

/// Indexes whose entries land all over the index as a first import adds its rows (content ids
/// and case ids are in no order), which [`first_into_empty`] builds once at the end instead. The
/// other indexes of those tables grow at their ends (row ids, positions) and are kept.
const SCATTERED_INDEXES: [&str; 2] = ["blobs_cid", "members_pkey"];

/// The first version of dataset `id` into a store that holds no case body, in `tx`, which holds
/// the tables of bodies and members alone ([`take_empty_store`]): the way [`first_version`]
/// writes it, less what an empty store does not need. One connection writes each chunk's
/// bodies, facets, labels and members in one statement, with no conflict check (every body is
/// new: a case's body holds its id); the [`SCATTERED_INDEXES`] are dropped for the import and
/// built at its end from their definitions in the catalogue, as `pg_restore` does, which takes
/// a fraction of the time a million inserts at random places take. It is all one transaction:
/// an import that fails or is killed leaves the tables and their indexes as they were. Other
/// commits, and readers of the dataset it makes, wait for it.
async fn first_into_empty(
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    request: CommitRequest,
    id: i64,
    mut bodies: Bodies,
) -> Result<CommitOutcome, StoreError> {
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT CASE WHEN c.oid IS NULL THEN 'DROP INDEX ' || quote_ident(i.relname)
                     ELSE 'ALTER TABLE ' || quote_ident(t.relname) || ' DROP CONSTRAINT ' || quote_ident(c.conname) END,
                CASE WHEN c.oid IS NULL THEN pg_get_indexdef(i.oid)
                     ELSE 'ALTER TABLE ' || quote_ident(t.relname) || ' ADD CONSTRAINT ' || quote_ident(c.conname)
                          || ' ' || pg_get_constraintdef(c.oid) END
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
         LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid AND c.conrelid = x.indrelid AND c.contype IN ('p', 'u')
         WHERE x.indexrelid IN (SELECT to_regclass(name) FROM unnest($1::text[]) AS name)",
    )
    .bind(SCATTERED_INDEXES)
    .fetch_all(&mut *tx)
    .await?;
    for (drop, _) in &indexes {
        sqlx::query(AssertSqlSafe(drop.clone())).execute(&mut *tx).await?;
    }
    let mut listed = crate::sqlite::Listing::default();
    while let Some(mut cases) = bodies.take(FIRST_ROWS).await? {
        store_seeds(&mut tx, &mut cases).await?;
        let columns = BodyColumns::take(&mut cases);
        let first = listed.len() as i64;
        for case in &cases {
            listed.push(&case.id, case.content_id)?;
        }
        let positions: Vec<i64> = (first..listed.len() as i64).collect();
        let ids: Vec<&[u8]> = cases.iter().map(|c| c.id.as_bytes()).collect();
        let cids: Vec<&[u8]> = cases.iter().map(|c| c.content_id.as_slice()).collect();
        let written = sqlx::query(
            "WITH input AS (SELECT * FROM unnest($1::bytea[], $2::text[], $3::text[]) AS t (cid, body, facets)),
                  new AS (INSERT INTO blobs (cid, body) SELECT cid, body FROM input RETURNING id, cid, ctid),
                  facets AS (INSERT INTO blob_facets (blob, facets, nul)
                             SELECT new.id, input.facets::json, strpos(input.body, '\\u0000') > 0
                             FROM new JOIN input USING (cid)),
                  labels AS (INSERT INTO case_labels (label, blob)
                             SELECT l.label, new.id FROM new JOIN unnest($4::bytea[], $5::bytea[]) AS l (cid, label) USING (cid))
             INSERT INTO members (dataset, case_id, from_v, to_v, blob, ord, blob_at)
             SELECT $6, m.id, 1, NULL, new.id, m.p, new.ctid
             FROM unnest($7::bigint[], $8::bytea[], $9::bytea[]) AS m (p, id, cid) JOIN new USING (cid)",
        )
        .bind(columns.cids)
        .bind(columns.bodies)
        .bind(columns.facets)
        .bind(columns.label_cids)
        .bind(columns.labels)
        .bind(id)
        .bind(positions)
        .bind(ids)
        .bind(cids)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if written != cases.len() as u64 {
            return Err(StoreError::Corrupt(format!("{written} member rows written for {} cases", cases.len())));
        }
    }
    // Before the indexes: an id listed twice is said as such, not as an index that cannot be made.
    let cid = listed.first_version_id(&request.dataset)?;
    for (_, build) in indexes {
        sqlx::query(AssertSqlSafe(build)).execute(&mut *tx).await?;
    }
    end_first_version(tx, request, id, listed.len() as i64, cid).await
}

/// A commit of at most [`ROWS`] cases or ids on a dataset that has a head (`put`, `rm`, an
/// edit in the console): one transaction on the commit's connection, bodies included, and no
/// temporary table. The general path's temporary tables were most of a one-case `put`'s time
/// (PostgreSQL takes 2.5 ms to create a session's first one, then about 1 ms each, and as long
/// to drop them), and the bodies' writer another connection. The changes are worked out here
/// as the general path's SQL works them out, and a test checks both against the embedded
/// store (`small_and_large_commits_make_the_versions_of_the_embedded_store`).
async fn commit_small(
    conn: &mut PgConnection,
    project: &str,
    request: CommitRequest,
    cases: Vec<Prepared>,
) -> Result<CommitOutcome, StoreError> {
    // A change's kind: its place in `[added, removed, modified]`, as `new_version` counts them.
    const ADDED: usize = 0;
    const REMOVED: usize = 1;
    const MODIFIED: usize = 2;
    let mut tx = conn.begin().await?;
    let (id, head) = lock_dataset(&mut tx, project, &request).await?;
    // Each incoming case with its body's row id, content id and place; an id to remove without.
    type Body = (i64, [u8; 32], String);
    let incoming: Vec<(String, Option<Body>)> = match &request.mode {
        CommitMode::Remove(ids) => {
            let mut ids = ids.clone();
            ids.sort_unstable();
            ids.dedup();
            ids.into_iter().map(|id| (id, None)).collect()
        }
        _ if head == 0 => {
            // The head was there when the commit began and is gone: it cannot be.
            return Err(StoreError::Corrupt(format!("dataset `{}` lost its versions", request.dataset)));
        }
        _ => {
            let chunk = store_bodies(&mut tx, cases).await?;
            let bodies = chunk.blobs.into_iter().zip(chunk.cids).zip(chunk.places);
            let bodies = bodies.map(|((blob, cid), at)| Some((blob, cid, at)));
            chunk.ids.into_iter().zip(bodies).collect()
        }
    };
    let ids = incoming.iter().map(|(case, _)| case.as_bytes()).collect::<Vec<_>>();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    if let Some(twice) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(StoreError::DuplicateId(String::from_utf8_lossy(twice[0]).into_owned()));
    }
    let live: std::collections::HashMap<Vec<u8>, (i64, f64)> = sqlx::query_as::<_, (Vec<u8>, i64, f64)>(
        "SELECT case_id, blob, ord FROM members WHERE dataset = $1 AND case_id = ANY($2) AND to_v IS NULL",
    )
    .bind(id)
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|(case, blob, ord)| (case, (blob, ord)))
    .collect();
    // New cases go after the last one, in input order.
    let (mut end, mut added) = (None, 0.0);
    let mut changes = Vec::new();
    let mut counts = [0i64; 3];
    for (case, body) in &incoming {
        let now = live.get(case.as_bytes());
        let (kind, ord) = match (body, now) {
            (None, None) => continue,
            (None, Some(_)) => (REMOVED, 0.0),
            (Some((blob, ..)), Some((old, _))) if blob == old => continue,
            (Some(_), Some((_, ord))) => (MODIFIED, *ord),
            (Some(_), None) => {
                let last = match end {
                    Some(last) => last,
                    None => sqlx::query_scalar::<_, f64>(
                        "SELECT ord FROM members WHERE dataset = $1 AND to_v IS NULL ORDER BY ord DESC LIMIT 1",
                    )
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .unwrap_or(-1.0),
                };
                end = Some(last);
                added += 1.0;
                (ADDED, last + added)
            }
        };
        counts[kind] += 1;
        changes.push((case, kind, body, ord));
    }
    let head_info = PostgresStore::version_row(&mut tx, &request.dataset, id, head).await?;
    if changes.is_empty() {
        tx.rollback().await?;
        return Ok(CommitOutcome::Unchanged(head_info));
    }
    changes.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut hasher = VersionHasher::new(&json!({
        "dataset": request.dataset,
        "parent": head_info.as_ref().map(|h| h.id.clone()),
        "order": None::<String>,
    }))?;
    for (case, _, body, _) in &changes {
        // A removed case has the empty content id (see `VersionHasher`).
        let content = body.as_ref().map(|(_, cid, _)| casebook_canon::id_hex(cid)).unwrap_or_default();
        hasher.change(case, Some(&content))?;
    }
    let number = head + 1;
    let closing: Vec<&[u8]> =
        changes.iter().filter(|(_, kind, ..)| *kind != ADDED).map(|(c, ..)| c.as_bytes()).collect();
    sqlx::query("UPDATE members SET to_v = $2 WHERE dataset = $1 AND case_id = ANY($3) AND to_v IS NULL")
        .bind(id)
        .bind(number as i64)
        .bind(closing)
        .execute(&mut *tx)
        .await?;
    let opening: Vec<_> = changes
        .iter()
        .filter_map(|(c, _, body, ord)| body.as_ref().map(|(blob, _, at)| (c.as_bytes(), *blob, *ord, at.as_str())))
        .collect();
    sqlx::query(
        "INSERT INTO members (dataset, case_id, from_v, to_v, blob, ord, blob_at)
         SELECT $1, t.id, $2, NULL, t.blob, t.ord, t.at::tid
         FROM unnest($3::bytea[], $4::bigint[], $5::float8[], $6::text[]) AS t (id, blob, ord, at)",
    )
    .bind(id)
    .bind(number as i64)
    .bind(opening.iter().map(|o| o.0).collect::<Vec<_>>())
    .bind(opening.iter().map(|o| o.1).collect::<Vec<_>>())
    .bind(opening.iter().map(|o| o.2).collect::<Vec<_>>())
    .bind(opening.iter().map(|o| o.3).collect::<Vec<_>>())
    .execute(&mut *tx)
    .await?;
    let cases = head_info.as_ref().map_or(0, |h| h.cases as i64) + counts[ADDED] - counts[REMOVED];
    let version = new_version(request, head, hasher.finish(), counts, cases);
    insert_version(&mut tx, id, &version).await?;
    tx.commit().await?;
    Ok(CommitOutcome::Created(version))
}

/// The version a commit on `head` makes (`head` 0: the first): `[added, removed, modified]`
/// cases of its parent's, `cases` in all.
fn new_version(request: CommitRequest, head: u64, id: String, changes: [i64; 3], cases: i64) -> VersionInfo {
    VersionInfo {
        dataset: request.dataset,
        number: head + 1,
        id,
        parent: (head > 0).then_some(head),
        author: request.author,
        time: request.time,
        message: request.message,
        added: changes[0] as u64,
        removed: changes[1] as u64,
        modified: changes[2] as u64,
        cases: cases as u64,
    }
}

/// A commit's input, its case bodies written as it comes by up to [`WRITERS`] tasks at once,
/// each on a connection of its own (the server works on them in parallel), in chunks of
/// [`ROWS`]; [`Bodies::next`] gives each chunk's case ids and content ids, in input order, once
/// its bodies are stored.
struct Bodies {
    pool: PgPool,
    cases: CaseBatches,
    writing: std::collections::VecDeque<tokio::task::JoinHandle<Result<Chunk, StoreError>>>,
    pending: Vec<Prepared>,
    /// The input has ended.
    done: bool,
    /// The whole input is in `pending` ([`Bodies::read_small`]).
    small: bool,
}

/// A chunk of a commit: its cases' ids, their bodies' row ids, places (`ctid`, as text: the
/// hint `members.blob_at` of migration 0006) and content ids.
struct Chunk {
    ids: Vec<String>,
    blobs: Vec<i64>,
    places: Vec<String>,
    cids: Vec<[u8; 32]>,
}

impl Bodies {
    fn new(pool: PgPool, cases: CaseBatches) -> Self {
        Self { pool, cases, writing: Default::default(), pending: Vec::new(), done: false, small: false }
    }

    /// Reads the input up to one case past [`ROWS`]: true when that was all of it. A small input
    /// is then written by [`Bodies::next`] on the commit's own connection, in one chunk.
    async fn read_small(&mut self) -> Result<bool, StoreError> {
        while !self.done && self.pending.len() <= ROWS {
            self.receive().await?;
        }
        self.small = self.done && self.pending.len() <= ROWS;
        Ok(self.small)
    }

    async fn receive(&mut self) -> Result<(), StoreError> {
        match self.cases.recv().await {
            Some(Ok(batch)) => {
                if let Some(case) = batch.iter().find(|c| too_long(c)) {
                    return Err(StoreError::TooLong(case.id.chars().take(40).collect()));
                }
                self.pending.extend(batch);
            }
            Some(Err(())) => return Err(StoreError::Cancelled),
            None => self.done = true,
        }
        Ok(())
    }

    /// The next `rows` cases of the input (fewer at its end), as they are.
    async fn take(&mut self, rows: usize) -> Result<Option<Vec<Prepared>>, StoreError> {
        while !self.done && self.pending.len() < rows {
            self.receive().await?;
        }
        if self.pending.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.pending.drain(..self.pending.len().min(rows)).collect()))
    }

    /// The next chunk, its bodies stored: on `conn` for a small input, else by the writers.
    async fn next(&mut self, conn: &mut PgConnection) -> Result<Option<Chunk>, StoreError> {
        if self.small {
            if self.pending.is_empty() {
                return Ok(None);
            }
            return Ok(Some(store_bodies(conn, std::mem::take(&mut self.pending)).await?));
        }
        while !self.done && self.writing.len() < WRITERS {
            let Some(chunk) = self.take(ROWS).await? else { break };
            self.writing.push_back(tokio::spawn(write_bodies(self.pool.clone(), chunk)));
        }
        match self.writing.pop_front() {
            Some(writer) => Ok(Some(writer.await.map_err(|e| StoreError::Corrupt(e.to_string()))??)),
            None => Ok(None),
        }
    }
}

/// PostgreSQL's B-tree entries hold at most about 2,700 bytes: a case id or a label longer than
/// [`MAX_KEY`] cannot be indexed, so the commit is refused before anything is written.
const MAX_KEY: usize = 2000;

fn too_long(case: &Prepared) -> bool {
    case.id.len() > MAX_KEY || case.labels.iter().any(|l| l.len() > MAX_KEY)
}

fn as_bytes<T: AsRef<[u8]>>(items: &[T]) -> Vec<&[u8]> {
    items.iter().map(AsRef::as_ref).collect()
}

/// Records a new version and makes it the head.
async fn insert_version(conn: &mut PgConnection, dataset: i64, v: &VersionInfo) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO versions (dataset, number, cid, parent, author, time, message, added, removed, modified, cases)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(dataset)
    .bind(v.number as i64)
    .bind(&v.id)
    .bind(v.parent.map(|p| p as i64))
    .bind(&v.author)
    .bind(&v.time)
    .bind(&v.message)
    .bind(v.added as i64)
    .bind(v.removed as i64)
    .bind(v.modified as i64)
    .bind(v.cases as i64)
    .execute(&mut *conn)
    .await?;
    sqlx::query("UPDATE datasets SET head = $1, cases = $2 WHERE id = $3")
        .bind(v.number as i64)
        .bind(v.cases as i64)
        .bind(dataset)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// The query behind [`crate::Store::bodies`] and [`crate::Store::count`]: the members of a
/// version that a selection picks, in order. A filter's test is made in SQL where PostgreSQL can
/// make it exactly as memory does, and on the case as it is read where it cannot: for a filter
/// with `matches` (PostgreSQL's regular expressions are not Rust's), every case; for a filter
/// that reads the JSON, the cases holding a `\u0000`, which PostgreSQL's JSON functions refuse
/// (`blob_facets.nul`).
/// Where a page starts: just after a cursor, or (read backwards) just before one.
#[derive(Clone, Copy)]
enum Seek<'a> {
    After(&'a Cursor),
    Before(&'a Cursor),
}

struct SelectQuery {
    /// Rows in the version's order, or (a page read backwards) in the reverse.
    backward: bool,
    /// `FROM … WHERE …` for the version, without the filter.
    from: String,
    /// The filter's conjuncts that read no JSON, in SQL (see [`casebook_filter::PgParts`]).
    plain: Option<String>,
    /// The filter's conjuncts that read the cases' JSON, in SQL.
    json: Option<String>,
    /// How many of the filter's parameters are `plain`'s (they come first).
    plain_params: usize,
    params: Vec<casebook_filter::SqlParam>,
    /// How many of `params` are the version's and the cursor's (the filter's follow).
    base: usize,
    /// The filter and what it is tested on in memory.
    filter: Option<casebook_filter::Filter>,
    check: Check,
    limit: Option<u64>,
    /// The labels every selected case has (see [`SelectQuery::plan`]).
    labels: Vec<String>,
    /// The join that walks a label's cases for a count, when [`SelectQuery::plan`] chose to.
    walk: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// All in SQL.
    Sql,
    /// Every case in memory.
    Memory,
    /// In SQL, but the cases with a `\u0000` in memory.
    Guarded,
}

/// Where a selection's statements run ([`SelectQuery::plan`]): the connection as it is, or a
/// transaction that set how PostgreSQL plans them.
enum Session<'c> {
    Plain(&'c mut PgConnection),
    Planned(sqlx::Transaction<'c, sqlx::Postgres>),
}

impl Session<'_> {
    async fn end(self) -> Result<(), StoreError> {
        if let Session::Planned(tx) = self {
            tx.commit().await?;
        }
        Ok(())
    }
}

impl std::ops::Deref for Session<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self {
            Session::Plain(conn) => conn,
            Session::Planned(tx) => tx,
        }
    }
}

impl std::ops::DerefMut for Session<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            Session::Plain(conn) => conn,
            Session::Planned(tx) => tx,
        }
    }
}

impl SelectQuery {
    fn new(select: &Select, dataset: i64, version: u64, seek: Option<Seek<'_>>) -> Self {
        use casebook_filter::{PgContext, SqlParam};
        let version = i64::try_from(version).unwrap_or(i64::MAX);
        let mut params = vec![SqlParam::Integer(dataset), SqlParam::Integer(version)];
        // Left joins, which PostgreSQL drops when nothing reads them (every member has both).
        let mut from =
            format!("{MEMBERS_FROM} WHERE m.dataset = $1 AND m.from_v <= $2 AND (m.to_v IS NULL OR m.to_v > $2)");
        match seek {
            Some(Seek::After(_)) => from.push_str(" AND m.ord >= $3 AND (m.ord > $3 OR m.case_id > $4)"),
            Some(Seek::Before(_)) => from.push_str(" AND m.ord <= $3 AND (m.ord < $3 OR m.case_id < $4)"),
            None => {}
        }
        if let Some(Seek::After(at) | Seek::Before(at)) = seek {
            params.extend([SqlParam::Real(at.ord), SqlParam::Bytes(at.id.clone().into_bytes())]);
        }
        let base = params.len();
        let context = PgContext { body: "b.body", blob: "m.blob", facets: "f.facets" };
        let parts = select.filter.as_ref().map(|f| f.to_postgres_parts(&context, params.len() + 1));
        let (check, plain, json, plain_params, labels) = match parts {
            None => (Check::Sql, None, None, 0, Vec::new()),
            Some(None) => (Check::Memory, None, None, 0, Vec::new()),
            Some(Some(parts)) => {
                params.extend(parts.params);
                let check = if parts.json.is_some() { Check::Guarded } else { Check::Sql };
                (check, parts.plain, parts.json, parts.plain_params, parts.labels)
            }
        };
        // The conjuncts that read no JSON go into the `FROM … WHERE`: outside the guard of the
        // others, where PostgreSQL can use them to find the rows (a label and a metadata test
        // took 0.63 s over a million cases with the label inside the guard, 0.2 s outside).
        if let Some(plain) = &plain {
            from.push_str(&format!(" AND {plain}"));
        }
        Self {
            backward: matches!(seek, Some(Seek::Before(_))),
            from,
            plain,
            json,
            plain_params,
            params,
            base,
            filter: select.filter.clone(),
            check,
            limit: select.limit,
            labels,
            walk: None,
        }
    }

    /// Settles how PostgreSQL finds the cases, and where the statements that read them run: on
    /// `conn` as it is, or in a transaction that tells PostgreSQL how to plan them. A filter
    /// that requires a label few cases have (by PostgreSQL's estimate, a quarter of the
    /// version's or fewer) and tests the cases' JSON is answered by walking the label's cases
    /// through the indexes: each one's facets tested, and the survivors looked up in the
    /// version. Left to itself, PostgreSQL costs the JSON test at a fraction of its price and
    /// joins the label's cases with every member of the version by hashing instead (the 9,160
    /// cases of a label and a metadata test among a million: 0.32 s, against 0.18–0.20 s
    /// walking the label). So for the transaction it is told not to hash or merge, and the
    /// facets are an inner join, which lets them come before the version's members. A label on
    /// more cases keeps PostgreSQL's own plan, which is the better one then.
    async fn plan<'c>(&mut self, conn: &'c mut PgConnection) -> Result<Session<'c>, StoreError> {
        if let Some(states) = self.review_states(conn).await? {
            return self.walk_a_review_state(conn, &states).await;
        }
        if !self.walks_a_label(conn).await? {
            return Ok(Session::Plain(conn));
        }
        let mut tx = conn.begin().await?;
        sqlx::raw_sql("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off").execute(&mut *tx).await?;
        self.from = self.from.replacen("LEFT JOIN blob_facets f", "JOIN blob_facets f", 1);
        // To count, the label's cases are tested before they are looked up in the version: in a
        // subquery PostgreSQL may not merge into the rest (`OFFSET 0`), since left to itself it
        // looked up all 91,108 cases of the label in the version first and tested them after
        // (0.15 s against 0.10 s for the 9,160 of a label and a metadata test). The test is made
        // again on the survivors, as it would be without the walk, and cases it cannot read in
        // SQL pass through. Reading the rows, PostgreSQL takes that order by itself, and does
        // all of it in parallel, which the subquery would prevent.
        if let (Some(json), Some(label)) = (&self.json, self.label_param()) {
            let walked = format!(
                " JOIN (SELECT f.blob FROM case_labels l JOIN blob_facets f ON f.blob = l.blob LEFT JOIN blobs b ON b.id = f.blob
                        WHERE l.label = ${label} AND CASE WHEN f.nul THEN true ELSE ({json}) END OFFSET 0) AS walked
                 ON walked.blob = m.blob"
            );
            self.walk = Some(walked);
        }
        Ok(Session::Planned(tx))
    }

    /// The review states to find the cases by (see [`SelectQuery::walk_a_review_state`]): those
    /// the filter requires, when few bodies of the store are in them, at most
    /// [`crate::sqlite::REVIEW_INDEX_ROWS`] (counted in the index, a bounded read). More than
    /// that, and the version's order finds a page's cases sooner than sorting them all would.
    async fn review_states(&self, conn: &mut PgConnection) -> Result<Option<Vec<String>>, StoreError> {
        let Some(states) = self.filter.as_ref().and_then(|f| f.review_states()) else { return Ok(None) };
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT count(*) FROM (SELECT 1 FROM blob_facets WHERE {REVIEW} = ANY($1::text[]) LIMIT $2) AS r"
        )))
        .bind(&states)
        .bind(crate::sqlite::REVIEW_INDEX_ROWS + 1)
        .fetch_one(&mut *conn)
        .await?;
        Ok((n <= crate::sqlite::REVIEW_INDEX_ROWS).then_some(states))
    }

    /// Finds the cases through the index of the review state (migration 0009): the bodies in
    /// `states` (and those with a `\u0000`, which the filter tests in memory) first, in a
    /// subquery PostgreSQL plans on its own (`OFFSET 0`), then their members in the version by
    /// body, without hashing or merging (which would read every member of the version); the
    /// page is sorted from those. Left to itself, PostgreSQL walks the version's order and tests
    /// each case until the page is full, which reads the whole version when the state's cases
    /// are deep in it, as a queue's drafts are. The states are written into the SQL text: a
    /// filter's review states are one of the three names the parser accepts (`[a-z]+`, checked).
    async fn walk_a_review_state<'c>(
        &mut self,
        conn: &'c mut PgConnection,
        states: &[String],
    ) -> Result<Session<'c>, StoreError> {
        if !states.iter().all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase())) {
            return Ok(Session::Plain(conn));
        }
        let list = states.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", ");
        let mut tx = conn.begin().await?;
        sqlx::raw_sql("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off").execute(&mut *tx).await?;
        self.from = self.from.replacen(
            MEMBERS_FROM,
            &format!(
                "FROM (SELECT blob, facets, nul FROM blob_facets WHERE nul OR {REVIEW} IN ({list}) OFFSET 0) AS f
                 JOIN members m ON m.blob = f.blob LEFT JOIN blobs b ON b.id = m.blob"
            ),
            1,
        );
        Ok(Session::Planned(tx))
    }

    /// The number of the statement parameter that holds the first label every selected case has.
    fn label_param(&self) -> Option<usize> {
        let label = self.labels.first()?.as_bytes();
        let plain = &self.params[self.base..self.base + self.plain_params];
        let at = plain.iter().position(|p| matches!(p, casebook_filter::SqlParam::Bytes(b) if b == label))?;
        Some(self.base + at + 1)
    }

    /// Whether to walk a label's cases (see [`SelectQuery::plan`]).
    async fn walks_a_label(&self, conn: &mut PgConnection) -> Result<bool, StoreError> {
        let (Some(_), Some(label)) = (&self.json, self.labels.first()) else { return Ok(false) };
        let (dataset, version) = match self.params[..2] {
            [casebook_filter::SqlParam::Integer(d), casebook_filter::SqlParam::Integer(v)] => (d, v),
            _ => return Ok(false),
        };
        let cases: Option<i64> = sqlx::query_scalar("SELECT cases FROM versions WHERE dataset = $1 AND number = $2")
            .bind(dataset)
            .bind(version)
            .fetch_optional(&mut *conn)
            .await?;
        // PostgreSQL's estimate, from its statistics of the labels (counting them took 12–20 ms
        // for a label of 91,108 cases, a tenth of the query).
        let plan = sqlx::query("EXPLAIN (FORMAT JSON) SELECT 1 FROM case_labels WHERE label = $1")
            .bind(label.as_bytes())
            .fetch_one(&mut *conn)
            .await?;
        let plan: Value = serde_json::from_slice(plan.try_get_raw(0)?.as_bytes().unwrap_or_default())
            .map_err(|e| StoreError::Corrupt(format!("PostgreSQL's plan: {e}")))?;
        let labelled = plan[0]["Plan"]["Plan Rows"].as_f64();
        Ok(matches!((cases, labelled), (Some(cases), Some(labelled)) if labelled <= cases as f64 / 4.0))
    }

    /// The SQL of the rows to read: each case's body and whether to test it in memory.
    fn rows_sql(&self) -> String {
        let (from, cond) = (&self.from, self.json.as_deref().unwrap_or("true"));
        let order = if self.backward { "ORDER BY m.ord DESC, m.case_id DESC" } else { "ORDER BY m.ord, m.case_id" };
        let mut sql = match self.check {
            Check::Sql => format!("SELECT {ROW} false {from} {order}"),
            Check::Memory => format!("SELECT {ROW} true {from} {order}"),
            // `CASE` so that PostgreSQL never reads the JSON of a case it cannot.
            Check::Guarded => {
                format!("SELECT {ROW} f.nul {from} AND CASE WHEN f.nul THEN true ELSE ({cond}) END {order}")
            }
        };
        if let (Check::Sql, Some(limit)) = (self.check, self.limit) {
            sql.push_str(&format!(" LIMIT {}", i64::try_from(limit).unwrap_or(i64::MAX)));
        }
        sql
    }

    /// Binds the parameters `sql` names: the version's, and those of the filter's parts in it
    /// (PostgreSQL refuses a parameter more than the statement names).
    fn bind<'q, O>(
        &self,
        sql: &str,
        mut query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
        use casebook_filter::SqlParam;
        for param in &self.params[..self.named(sql)] {
            query = match param {
                SqlParam::Integer(n) => query.bind(*n),
                SqlParam::Real(x) => query.bind(*x),
                SqlParam::Text(text) => query.bind(text.clone()),
                SqlParam::Bytes(bytes) => query.bind(bytes.clone()),
            };
        }
        query
    }

    /// How many of the parameters `sql` names (see [`SelectQuery::bind`]).
    fn named(&self, sql: &str) -> usize {
        let in_sql = |part: &Option<String>| part.as_deref().is_some_and(|part| sql.contains(part));
        match (in_sql(&self.plain), in_sql(&self.json)) {
            (_, true) => self.params.len(),
            (true, false) => self.base + self.plain_params,
            (false, false) => self.base,
        }
    }

    /// The selection counted per value at `path` (see [`crate::Store::group_counts`]): in SQL,
    /// but the cases with a `\u0000` (which PostgreSQL's JSON functions refuse) read and counted
    /// in memory, as the filter tests them. `None` for a filter tested in memory (`matches`),
    /// and for a path the body does not hold as the case's JSON form does.
    async fn groups(
        &self,
        store: &PostgresStore,
        conn: &mut PgConnection,
        path: &casebook_filter::FieldPath,
    ) -> Result<Option<casebook_filter::Groups>, StoreError> {
        let label_key = path.label_key();
        if self.check == Check::Memory
            || label_key.is_some_and(|key| key.contains(':'))
            || (label_key.is_none() && !path.in_stored_body())
        {
            return Ok(None);
        }
        let mut groups = casebook_filter::Groups::new(path.clone());
        let cond = self.json.as_deref().unwrap_or("true");
        let picked = format!("{} AND NOT f.nul AND CASE WHEN f.nul THEN false ELSE ({cond}) END", self.from);
        let k = self.named(&picked) + 1;
        if let Some(key) = label_key {
            // The labels from `KEY:` up to (not including) `KEY;`, as bytes: those that start
            // with `KEY:`; the value is what follows.
            let (low, high) = (format!("{key}:").into_bytes(), format!("{key};").into_bytes());
            let sql = format!(
                "SELECT substring(l.label from ${k}), count(*) FROM case_labels l JOIN (SELECT m.blob {picked}) AS s
                 ON s.blob = l.blob WHERE l.label >= ${} AND l.label < ${} GROUP BY 1",
                k + 1,
                k + 2
            );
            let rows: Vec<(Vec<u8>, i64)> = self
                .bind(&sql, sqlx::query_as(AssertSqlSafe(sql.clone())))
                .bind(low.len() as i32 + 1)
                .bind(&low)
                .bind(&high)
                .fetch_all(&mut *conn)
                .await?;
            for (value, n) in rows {
                let value = String::from_utf8(value).map_err(|e| StoreError::Corrupt(format!("a label: {e}")))?;
                groups.add_counted(Some(Value::String(value)), n as u64);
            }
            let sql = format!(
                "SELECT count(*) FROM (SELECT m.blob {picked}) AS s
                 WHERE NOT EXISTS (SELECT 1 FROM case_labels l WHERE l.blob = s.blob AND l.label >= ${k} AND l.label < ${})",
                k + 1
            );
            let (missing,): (i64,) = self
                .bind(&sql, sqlx::query_as(AssertSqlSafe(sql.clone())))
                .bind(&low)
                .bind(&high)
                .fetch_one(&mut *conn)
                .await?;
            if missing > 0 {
                groups.add_counted(None, missing as u64);
            }
        } else {
            let source = if path.in_facets() { "f.facets" } else { "b.body::json" };
            let sql = format!("SELECT ({source} #> ${k}::text[])::text, count(*) {picked} GROUP BY 1");
            let rows: Vec<(Option<String>, i64)> = self
                .bind(&sql, sqlx::query_as(AssertSqlSafe(sql.clone())))
                .bind(path.pg_steps())
                .fetch_all(&mut *conn)
                .await?;
            for (value, n) in rows {
                groups.add_counted(crate::group_value(value), n as u64);
            }
        }
        let mut rows = self.rows(store, conn, format!("SELECT {ROW} true {} AND f.nul", self.from));
        while let Some((body, _, _)) = rows.next().await? {
            groups.add(&crate::parse_body(&body)?);
        }
        Ok(Some(groups))
    }

    fn rows<'c>(&'c self, store: &'c PostgresStore, conn: &'c mut PgConnection, sql: String) -> Rows<'c> {
        let query = self.bind(&sql, sqlx::query_as::<_, RowColumns>(AssertSqlSafe(sql.clone())));
        Rows { stream: query.fetch(conn), query: self, store, documents: SeedDocuments::new(), passed: 0 }
    }

    /// How many cases the selection picks.
    async fn count(&self, store: &PostgresStore, conn: &mut PgConnection) -> Result<u64, StoreError> {
        let (from, cond) = (&self.from, self.json.as_deref().unwrap_or("true"));
        let limit = self.limit.map_or(String::new(), |l| format!(" LIMIT {}", i64::try_from(l).unwrap_or(i64::MAX)));
        let (in_sql, in_memory) = match self.check {
            Check::Sql => (Some(format!("SELECT 1 {from}{limit}")), None),
            Check::Memory => (None, Some(format!("SELECT {ROW} true {from}"))),
            Check::Guarded => (
                // `CASE`, not `AND`: PostgreSQL may test the conditions of an `AND` in any order.
                // The cases tested in memory are few and found through their own index, not
                // by walking a label.
                Some(format!(
                    "SELECT 1 {} AND CASE WHEN f.nul THEN false ELSE ({cond}) END{limit}",
                    match &self.walk {
                        Some(walk) => from.replacen("FROM members m", &format!("FROM members m{walk}"), 1),
                        None => from.clone(),
                    }
                )),
                Some(format!("SELECT {ROW} true {from} AND f.nul")),
            ),
        };
        let mut total = 0;
        if let Some(sql) = in_sql {
            let sql = format!("SELECT count(*) FROM ({sql}) AS picked");
            let (n,): (i64,) =
                self.bind(&sql, sqlx::query_as(AssertSqlSafe(sql.clone()))).fetch_one(&mut *conn).await?;
            total += n as u64;
        }
        if let Some(sql) = in_memory {
            let mut rows = self.rows(store, conn, sql);
            while rows.next().await?.is_some() {
                total += 1;
            }
        }
        Ok(self.limit.map_or(total, |limit| total.min(limit)))
    }
}

/// The tables a selection reads: the members, with their bodies and facets.
const MEMBERS_FROM: &str =
    "FROM members m LEFT JOIN blobs b ON b.id = m.blob LEFT JOIN blob_facets f ON f.blob = m.blob";
/// A body's review state, as the index of migration 0009 holds it (NULL for a body with a
/// `\u0000`, which PostgreSQL's JSON functions refuse).
const REVIEW: &str = "(CASE WHEN nul THEN NULL ELSE facets ->> 'review' END)";

/// What [`Rows`] reads of each case: its body, its place, its id; and whether to test it in
/// memory.
const ROW: &str = "b.body, m.ord, m.case_id,";
type RowColumns = (String, f64, Vec<u8>, bool);

/// The rows of a [`SelectQuery`], with its in-memory tests and limit applied: each case's body
/// and its place in the version.
struct Rows<'c> {
    stream: futures_util::stream::BoxStream<'c, Result<RowColumns, sqlx::Error>>,
    query: &'c SelectQuery,
    /// Where seed documents are fetched from, and those fetched.
    store: &'c PostgresStore,
    documents: SeedDocuments,
    passed: u64,
}

impl Rows<'_> {
    async fn next(&mut self) -> Result<Option<(String, f64, Vec<u8>)>, StoreError> {
        if self.query.limit.is_some_and(|limit| self.passed >= limit) {
            return Ok(None);
        }
        while let Some((body, ord, id, in_memory)) = self.stream.try_next().await? {
            let mut body = [body];
            self.store.expand_bodies(&mut self.documents, &mut body).await?;
            let [body] = body;
            if in_memory {
                let value: Value = serde_json::from_str(&body).map_err(crate::damaged_body)?;
                if !self.query.filter.as_ref().is_none_or(|f| f.matches_json(&value)) {
                    continue;
                }
            }
            self.passed += 1;
            return Ok(Some((body, ord, id)));
        }
        Ok(None)
    }
}
