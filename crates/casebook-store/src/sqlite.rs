//! The embedded store: one SQLite file in WAL mode, foreign keys on.
//!
//! Membership is kept as intervals (see `migrations/sqlite/0001_init.sql`). A commit loads the
//! incoming cases into a temporary table, compares it with the head in SQL, closes the rows that
//! changed and opens new ones, all in one `BEGIN IMMEDIATE` transaction; its cost is the size of
//! the input for a whole-dataset commit and the size of the change for `put` and `rm`.
//!
//! Order: each row has a real-valued `ord`. Cases that stay keep theirs; a new case takes the
//! midpoint between its neighbours (or the end, for `put`); a commit that changes the relative
//! order of the cases it keeps renumbers them all.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use casebook_canon::VersionHasher;
use casebook_filter::{LabelIndex, SqlContext, SqlParam};
use casebook_model::{Case, DatasetHeader};
use serde_json::{Value, json};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, Connection, Row, Sqlite, Transaction};

use crate::sqlite_bodies::NewBodies;
use crate::{
    CaseBatches, CommitMode, CommitOutcome, CommitRequest, Cursor, DatasetInfo, Diff, Event, ModifiedCase, Page,
    Prepared, Revision, SeedDocuments, Select, StoreError, VersionInfo, field_changes,
};

/// Schema migrations, in order. The store records the last one it applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/sqlite/0001_init.sql"),
    include_str!("../migrations/sqlite/0002_partial_indexes.sql"),
    include_str!("../migrations/sqlite/0003_labels.sql"),
    include_str!("../migrations/sqlite/0004_filter_indexes.sql"),
    include_str!("../migrations/sqlite/0005_runs.sql"),
    include_str!("../migrations/sqlite/0006_run_rows.sql"),
    include_str!("../migrations/sqlite/0007_blobs_cid_index.sql"),
    include_str!("../migrations/sqlite/0008_seed_documents.sql"),
    include_str!("../migrations/sqlite/0009_projects.sql"),
    include_str!("../migrations/sqlite/0010_run_ids_per_project.sql"),
    include_str!("../migrations/sqlite/0011_blob_cids.sql"),
    include_str!("../migrations/sqlite/0012_pending_spans.sql"),
    include_str!("../migrations/sqlite/0013_pending_records.sql"),
    include_str!("../migrations/sqlite/0014_review_index.sql"),
    include_str!("../migrations/sqlite/0015_purges.sql"),
];
/// The members after a cursor's case in the version's order (its `ord`, twice, then its id).
const AFTER_CURSOR: &str = " AND m.ord >= ? AND (m.ord > ? OR m.case_id > ?)";
/// Rows a multi-row `INSERT` carries.
pub(crate) const ROWS: usize = 1000;
/// The most bodies in the review states a filter requires for the store to find its cases
/// through the review index ([`SqliteStore::review_plan`]); PostgreSQL's store uses it too.
pub(crate) const REVIEW_INDEX_ROWS: i64 = 20_000;

#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    path: PathBuf,
    /// Opened read-only because it cannot be written.
    read_only: bool,
    /// The project whose datasets and runs this handle sees (see [`crate::DEFAULT_PROJECT`]).
    project: String,
    ids: crate::DatasetIds,
    /// Whether the first commit into an empty store may take the file for itself when no other
    /// connection has it open (see [`Journal`]): true unless [`SqliteStore::shared`].
    alone: bool,
}

/// Who may read and write the files of a store that [`SqliteStore::create_with`] makes (the
/// database, and its write-ahead log and index, which SQLite makes with the database's mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FileSharing {
    /// Its owner only (mode 0600): the store holds datasets and API key hashes.
    #[default]
    Owner,
    /// Its owner and its group (mode 0660), for a team sharing a store through a group.
    Group,
}

impl FileSharing {
    /// The file mode it gives.
    pub fn mode(self) -> u32 {
        match self {
            FileSharing::Owner => 0o600,
            FileSharing::Group => 0o660,
        }
    }
}

/// Makes the store's file, empty, with the mode `sharing` gives, unless it exists: SQLite then
/// opens it as a new database and gives its write-ahead log and index the same mode. (SQLite
/// alone would make it 0644, less the umask: readable by every user.)
fn make_file(path: &Path, sharing: FileSharing) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use fs_err::os::unix::fs::OpenOptionsExt;
        use std::os::unix::fs::PermissionsExt;
        match fs_err::OpenOptions::new().write(true).create_new(true).mode(sharing.mode()).open(path) {
            // The umask may have taken the group's bits: the mode is set whole.
            Ok(_) => fs_err::set_permissions(path, std::fs::Permissions::from_mode(sharing.mode()))?,
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
    }
    #[cfg(not(unix))]
    let _ = (path, sharing);
    Ok(())
}

impl SqliteStore {
    /// Creates the store file if it does not exist, readable by its owner only, and brings its
    /// schema up to date.
    pub async fn create(path: &Path) -> Result<Self, StoreError> {
        Self::create_with(path, FileSharing::Owner).await
    }

    /// Creates the store file if it does not exist, readable as `sharing` says (an existing
    /// file keeps its mode), and brings its schema up to date.
    pub async fn create_with(path: &Path, sharing: FileSharing) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs_err::create_dir_all(dir)?;
        }
        make_file(path, sharing)?;
        Self::connect(path, Access::Create).await
    }

    /// Opens an existing store. One that cannot be written (a read-only mount, files of another
    /// user) is opened read-only, as it is: reads work, and a write fails with
    /// [`StoreError::ReadOnly`]. Only [`SqliteStore::create`] makes a store: an empty or foreign
    /// file is [`StoreError::NotAStore`].
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let not_a_store = |why: &str| StoreError::NotAStore(path.to_owned(), why.to_owned());
        if path.is_dir() {
            return Err(not_a_store("it is a folder"));
        }
        let Ok(meta) = fs_err::metadata(path) else { return Err(StoreError::Missing(path.to_owned())) };
        if meta.len() == 0 {
            return Err(not_a_store("the file is empty"));
        }
        match Self::connect(path, Access::Open).await {
            Err(StoreError::ReadOnly(_)) => Self::connect(path, Access::ReadOnly).await,
            other => other,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The same store, seeing the datasets and runs of `project` (sharing the connections).
    pub fn in_project(&self, project: &str) -> Self {
        Self { project: project.to_owned(), ..self.clone() }
    }

    /// The project this handle sees.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The same store for a server: its commits always go through the write-ahead log, so that
    /// requests reading the store never wait for an import to finish (see [`Journal`]).
    pub fn shared(self) -> Self {
        Self { alone: false, ..self }
    }

    /// Whether the store was opened read-only (see [`SqliteStore::open`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// After a large commit, moves the write-ahead log into the database and empties it, so
    /// that the next process to open the store does not have to read a log as big as the data.
    /// Small commits leave that to SQLite's automatic checkpoints (no extra sync on each `put`).
    async fn after_commit(&self, changed: u64) -> Result<(), StoreError> {
        if changed >= 10_000 {
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&self.pool).await?;
        }
        Ok(())
    }

    /// Sets the page cache of each of the store's connections to `kib` KiB (instead of the
    /// 8 MiB they open with): for a long process whose work is appended, as a run's results are,
    /// a small cache holds the pages it touches again, and a large one only grows with what it
    /// wrote. Connections opened later (after an idle one is closed) get the default again.
    pub async fn set_page_cache(&self, kib: u32) -> Result<(), StoreError> {
        // Each connection is held while the next is taken, so that each is a different one.
        let mut held = Vec::new();
        for _ in 0..self.pool.options().get_max_connections() {
            held.push(self.pool.acquire().await?);
        }
        for conn in &mut held {
            sqlx::query(AssertSqlSafe(format!("PRAGMA cache_size = -{kib}"))).execute(&mut **conn).await?;
        }
        Ok(())
    }

    /// Closes the connections; the last one to close checkpoints the write-ahead log into the
    /// database and removes it.
    pub async fn close(self) {
        self.pool.close().await;
    }

    async fn connect(path: &Path, access: Access) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str("sqlite://")?.filename(path);
        let options = match access {
            Access::Create => options.create_if_missing(true).journal_mode(SqliteJournalMode::Wal),
            Access::Open => options.journal_mode(SqliteJournalMode::Wal),
            // Without write access there is no write-ahead log index to share: read the file as
            // it is, as one that nobody writes.
            Access::ReadOnly => options.read_only(true).immutable(true),
        };
        let options = options
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            // `matches` in filters.
            .with_regexp()
            .busy_timeout(Duration::from_secs(30))
            // Rows a query may run ahead of its reader by: with sqlx's 50, a read of thousands of
            // rows (stored outputs, bodies) stopped the SQLite thread every 50 rows until the
            // reader caught up, and took twice as long.
            .row_buffer_size(1024)
            // A small page cache (8 MiB a connection; a commit takes more, see `commit`), and
            // temporary tables and sorts that outgrow their cache in files, which stay in the
            // operating system's cache: in memory, a commit replacing a million cases held
            // 155 MiB more (its `incoming` and `changes` tables), for no gain in time.
            .pragma("cache_size", "-8192")
            .pragma("temp_store", "file");
        let pool = SqlitePoolOptions::new().max_connections(2).connect_with(options).await.map_err(|e| on(path, e))?;
        let store = Self {
            pool,
            path: path.to_owned(),
            read_only: access == Access::ReadOnly,
            project: crate::DEFAULT_PROJECT.to_owned(),
            ids: crate::DatasetIds::default(),
            alone: true,
        };
        store.migrate(access).await.map_err(|e| match e {
            StoreError::Database(e) => on(path, e),
            // The first read of a file that is not a database at all.
            StoreError::Damaged(detail) if detail == crate::NOT_A_DATABASE => {
                StoreError::NotAStore(path.to_owned(), "it is not an SQLite database".into())
            }
            other => other,
        })?;
        Ok(store)
    }

    async fn migrate(&self, access: Access) -> Result<(), StoreError> {
        // Most opens find the schema current: check without taking the write lock.
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'schema_version')")
                .fetch_one(&self.pool)
                .await?;
        if exists {
            let current: Option<i64> =
                sqlx::query_scalar("SELECT max(version) FROM schema_version").fetch_one(&self.pool).await?;
            if current == Some(MIGRATIONS.len() as i64) {
                return Ok(());
            }
            if access == Access::ReadOnly {
                let current = current.unwrap_or(0);
                return Err(if current > MIGRATIONS.len() as i64 {
                    StoreError::Newer(self.path.clone(), current)
                } else {
                    StoreError::ReadOnly(self.path.clone())
                });
            }
        } else if access != Access::Create {
            let tables: Vec<String> =
                sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name LIMIT 5")
                    .fetch_all(&self.pool)
                    .await?;
            let why = if tables.is_empty() {
                "it holds no tables".to_owned()
            } else {
                format!("it has no casebook schema, but other tables: {}", tables.join(", "))
            };
            return Err(StoreError::NotAStore(self.path.clone(), why));
        }
        // Foreign keys are off while migrating (a migration may rebuild a table others refer
        // to; SQLite's way of changing a table), and checked before the migrations commit.
        let mut conn = self.pool.acquire().await?;
        sqlx::query("PRAGMA foreign_keys = OFF").execute(&mut *conn).await?;
        let migrated = Self::migrate_on(&mut conn, &self.path).await;
        sqlx::query("PRAGMA foreign_keys = ON").execute(&mut *conn).await?;
        migrated?;
        crate::sqlite_seeds::reclaim(&mut conn).await
    }

    async fn migrate_on(conn: &mut SqliteConnection, path: &Path) -> Result<(), StoreError> {
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)").execute(&mut *tx).await?;
        let current: Option<i64> =
            sqlx::query_scalar("SELECT max(version) FROM schema_version").fetch_one(&mut *tx).await?;
        let current = current.unwrap_or(0);
        let known = MIGRATIONS.len() as i64;
        if current > known {
            return Err(StoreError::Newer(path.to_owned(), current));
        }
        if current < known {
            crate::upgrading(&path.display().to_string(), current, known);
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            sqlx::raw_sql(*sql).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO schema_version (version) VALUES (?)").bind(i as i64 + 1).execute(&mut *tx).await?;
            // 0008 made the table of seed documents; moving them out of the bodies needs their
            // content ids, which SQL cannot compute.
            if i + 1 == 8 {
                crate::sqlite_seeds::compact_stored(&mut tx).await?;
            }
        }
        let broken: Vec<sqlx::sqlite::SqliteRow> = sqlx::query("PRAGMA foreign_key_check").fetch_all(&mut *tx).await?;
        if !broken.is_empty() {
            return Err(StoreError::Corrupt(format!(
                "migrating the store left {} rows pointing at nothing; nothing was changed",
                broken.len()
            )));
        }
        tx.commit().await?;
        Ok(())
    }

    /// The error for a dataset name the store does not have, with the names it has.
    async fn no_dataset(&self, name: &str) -> StoreError {
        let known: Vec<String> = sqlx::query_scalar("SELECT name FROM datasets WHERE project = ? ORDER BY name")
            .bind(&self.project)
            .fetch_all(&self.pool)
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
        let id: Option<i64> = sqlx::query_scalar("SELECT id FROM datasets WHERE project = ? AND name = ?")
            .bind(&self.project)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        let found = match id {
            Some(id) => Some((id, name.to_owned())),
            None => {
                let all: Vec<(i64, String)> = sqlx::query_as("SELECT id, name FROM datasets WHERE project = ?")
                    .bind(&self.project)
                    .fetch_all(&self.pool)
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

    async fn version_row(&self, dataset: &str, id: i64, number: u64) -> Result<Option<VersionInfo>, StoreError> {
        let row = sqlx::query(
            "SELECT number, cid, parent, author, time, message, added, removed, modified, cases
             FROM versions WHERE dataset = ? AND number = ?",
        )
        .bind(id)
        .bind(number as i64)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| version_info(dataset, &r)))
    }
}

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Made if missing, schema created.
    Create,
    /// Must exist, with a casebook schema; brought up to date.
    Open,
    /// Must exist and be current; nothing is written.
    ReadOnly,
}

/// A database error while opening the store at `path`, said in the store's terms.
fn on(path: &Path, err: sqlx::Error) -> StoreError {
    let code = match &err {
        sqlx::Error::Database(e) => e.code().and_then(|c| c.parse::<i32>().ok()),
        _ => None,
    };
    // SQLite's primary result codes are the low byte of the extended ones.
    match code.map(|c| c & 0xff) {
        Some(8) => StoreError::ReadOnly(path.to_owned()),
        Some(26) => StoreError::NotAStore(path.to_owned(), "it is not an SQLite database".into()),
        _ => StoreError::from(err),
    }
}

fn version_info(dataset: &str, r: &sqlx::sqlite::SqliteRow) -> VersionInfo {
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

fn damaged_header(err: serde_json::Error) -> StoreError {
    StoreError::Damaged(format!("a dataset header cannot be read back: {err}"))
}

/// How a commit is journaled.
///
/// Normally in the write-ahead log, where readers go on reading while a commit is written; but
/// every page of a large commit is then written twice, to the log and, at the checkpoint, into
/// the database. The first commit into a store that holds no case yet (the first import of a
/// large dataset, typically) is written with a rollback journal instead: new pages go straight
/// into the database file, and only the few pages that existed are copied to the journal first.
/// It is as safe (a crash rolls back from the journal when the store is next opened, and the
/// journal is synced before the database is written), but other connections can neither read nor
/// write meanwhile (another process opening the store is told it is locked), so it is used only
/// when there is nothing to read yet, when no other connection has the store open (SQLite
/// refuses the switch otherwise, and the log is kept), and never by a server's store
/// ([`SqliteStore::shared`]), whose pool would be closed for it and whose requests (the API key
/// checks, to begin with) would wait for the import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Journal {
    Wal,
    Rollback,
}

impl Journal {
    async fn choose(
        pool: &SqlitePool,
        conn: &mut SqliteConnection,
        request: &CommitRequest,
    ) -> Result<Self, StoreError> {
        if matches!(request.mode, CommitMode::Remove(_)) {
            return Ok(Journal::Wal);
        }
        // This read also matters for the switch below: a connection that has not read since it
        // was opened does not know yet what the log holds, and leaving the log then dropped the
        // log's last commits instead of moving them into the database (seen while trying the
        // rollback journal for every import; see BENCHMARKS.md).
        let empty: bool = sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM blobs)").fetch_one(&mut *conn).await?;
        if !empty {
            return Ok(Journal::Wal);
        }
        // "database is locked" at once when another connection has the store open.
        // This process's other connections are idle (a commit is the only work of the commands
        // that make one): close them. One just used may still be on its way back to the pool (a
        // task returns it), hence a short wait for it.
        for _ in 0..100 {
            while let Some(other) = pool.try_acquire() {
                let _ = other.close().await;
            }
            if pool.size() <= 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mode: Option<String> = sqlx::query_scalar("PRAGMA journal_mode = DELETE").fetch_one(&mut *conn).await.ok();
        if mode.as_deref() != Some("delete") {
            return Ok(Journal::Wal);
        }
        // With a rollback journal, NORMAL leaves a power failure at the wrong moment able to
        // corrupt the store; FULL does not.
        sqlx::query("PRAGMA synchronous = FULL").execute(&mut *conn).await?;
        Ok(Journal::Rollback)
    }

    /// Back to the write-ahead log. (Should this fail, the next connection to open the store
    /// switches back: every connection asks for the log.)
    async fn restore(self, conn: &mut SqliteConnection) -> Result<(), StoreError> {
        if self == Journal::Rollback {
            sqlx::query("PRAGMA synchronous = NORMAL").execute(&mut *conn).await?;
            sqlx::query_scalar::<_, String>("PRAGMA journal_mode = WAL").fetch_one(&mut *conn).await?;
        }
        Ok(())
    }
}

/// Writes what a commit has written so far to disk in the background, so that the sync that ends
/// it (at the commit, or at the checkpoint after it) has little left to wait for. The operating
/// system otherwise keeps a large import's hundreds of megabytes in memory until that sync:
/// writing them took 1.5 s after a million-case import had done everything else, and a second
/// import's log and checkpoint 3.3 s. (RocksDB's `bytes_per_sync` does the same.) Stops when
/// dropped, without waiting for a sync under way.
struct Flusher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::Thread>,
}

/// How often [`Flusher`] syncs.
const FLUSH_EVERY: Duration = Duration::from_millis(250);

impl Flusher {
    fn start(db: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let db = db.to_owned();
        let thread = std::thread::Builder::new()
            .name("casebook-flush".into())
            .spawn(move || {
                let mut log: Option<fs_err::File> = None;
                loop {
                    std::thread::park_timeout(FLUSH_EVERY);
                    if stopped.load(Ordering::Acquire) {
                        return;
                    }
                    // Errors are the commit's to meet and report: this only starts early.
                    if let Some(file) = store_file(&db) {
                        let _ = file.sync_data();
                    }
                    if log.is_none() {
                        let mut path = db.clone().into_os_string();
                        path.push("-wal");
                        log = fs_err::File::open(path).ok();
                    }
                    if let Some(file) = &log {
                        let _ = file.sync_data();
                    }
                }
            })
            .ok()
            .map(|handle| handle.thread().clone());
        Flusher { stop, thread }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = &self.thread {
            thread.unpark();
        }
    }
}

/// This process's own handle on the store file at `path`, opened once and never closed: closing
/// any handle on a file drops every POSIX lock the process holds on it, SQLite's included, so a
/// handle of our own must outlive SQLite's. (The log needs no such care: SQLite's locks are on
/// the store file and its shared-memory index.)
fn store_file(path: &Path) -> Option<Arc<fs_err::File>> {
    static FILES: std::sync::OnceLock<std::sync::Mutex<HashMap<PathBuf, Arc<fs_err::File>>>> =
        std::sync::OnceLock::new();
    let mut files = FILES.get_or_init(Default::default).lock().ok()?;
    if let Some(file) = files.get(path) {
        return Some(Arc::clone(file));
    }
    let file = Arc::new(fs_err::File::open(path).ok()?);
    files.insert(path.to_owned(), Arc::clone(&file));
    Some(file)
}

/// About how many case bodies the store holds: the largest row id (only `store gc` deletes
/// bodies, those no version names).
async fn stored_bodies(tx: &mut Transaction<'_, Sqlite>) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM blobs").fetch_one(&mut **tx).await?)
}

/// Where [`load`] lists cases.
enum ListIn {
    /// The `incoming` table, to be compared with the head.
    Incoming,
    /// The members of the first version of dataset `.0`.
    FirstVersion(i64),
}

/// Stores the bodies of the cases in `pending` that are not stored yet, with their facets and
/// labels, and lists the cases from position `pos`. Only whole chunks of [`ROWS`] are taken (the
/// rest waits for the next batch) unless `flush`: every statement but the last is then the same,
/// prepared once, where a batch's remainder of any size made SQLite parse and plan a new
/// statement of hundreds of rows for every batch.
async fn load(
    tx: &mut Transaction<'_, Sqlite>,
    pending: &mut Vec<Prepared>,
    pos: &mut i64,
    list: &ListIn,
    new: &mut NewBodies,
    flush: bool,
) -> Result<(), StoreError> {
    // `OR FAIL` (here and in the commit's other multi-row writes): a statement that fails stops
    // where it is, and the commit's transaction is rolled back as a whole anyway. Plain `INSERT`
    // (`OR ABORT`) must undo a failed statement alone, so SQLite kept a statement journal, a
    // copy of every page the statement changed, for each one.
    let insert = match list {
        ListIn::Incoming => "INSERT OR FAIL INTO incoming (case_id, blob, pos, cid)".to_owned(),
        ListIn::FirstVersion(_) => "INSERT OR FAIL INTO members (dataset, case_id, from_v, to_v, blob, ord)".to_owned(),
    };
    let row = match list {
        ListIn::Incoming => "(?, ?, ?, ?)".to_owned(),
        ListIn::FirstVersion(dataset) => format!("({dataset}, ?, 1, NULL, ?, ?)"),
    };
    while pending.len() >= ROWS || (flush && !pending.is_empty()) {
        let mut chunk: Vec<Prepared> = pending.drain(..ROWS.min(pending.len())).collect();
        // The length each body must have if it is stored already. (A body stored before seed
        // documents were kept apart holds its document whole: its length is not the compact
        // body's.)
        let lengths: Vec<Option<i64>> =
            chunk.iter().map(|c| c.seeds.is_empty().then_some(c.body.len() as i64)).collect();
        crate::sqlite_seeds::keep_documents(tx, &mut chunk).await?;
        let (blobs, stored) = new.store(tx, &mut chunk, &lengths, *pos).await?;

        // Facets and labels of the bodies stored now, once each.
        if !stored.is_empty() {
            let values = vec!["(?, ?)"; stored.len()].join(", ");
            let mut query =
                sqlx::query(AssertSqlSafe(format!("INSERT OR FAIL INTO blob_facets (blob, facets) VALUES {values}")));
            for &i in &stored {
                query = query.bind(blobs[i]).bind(std::mem::take(&mut chunk[i].facets));
            }
            query.execute(&mut **tx).await?;
        }
        let labels: Vec<(String, i64)> = stored
            .iter()
            .flat_map(|&i| {
                let blob = blobs[i];
                std::mem::take(&mut chunk[i].labels).into_iter().map(move |label| (label, blob))
            })
            .collect();
        let mut labels = labels.into_iter().peekable();
        while labels.peek().is_some() {
            let part: Vec<(String, i64)> = labels.by_ref().take(ROWS).collect();
            let values = vec!["(?, ?)"; part.len()].join(", ");
            let sql = format!("INSERT OR IGNORE INTO case_labels (label, blob) VALUES {values}");
            let mut query = sqlx::query(AssertSqlSafe(sql));
            for (label, blob) in part {
                query = query.bind(label).bind(blob);
            }
            query.execute(&mut **tx).await?;
        }

        let values = vec![row.as_str(); chunk.len()].join(", ");
        let mut query = sqlx::query(AssertSqlSafe(format!("{insert} VALUES {values}")));
        for (case, blob) in chunk.iter_mut().zip(blobs) {
            query = query.bind(std::mem::take(&mut case.id)).bind(blob).bind(*pos);
            if let ListIn::Incoming = list {
                query = query.bind(&case.content_id[..]);
            }
            *pos += 1;
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

impl crate::Store for SqliteStore {
    crate::pending::pending_methods!("BEGIN IMMEDIATE");

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
             WHERE dataset = ?1 AND number = coalesce(?2, (SELECT head FROM datasets WHERE id = ?1))",
        )
        .bind(id)
        .bind(number)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => Ok(version_info(dataset, &row)),
            None => crate::resolve_by_listing(self, dataset, reference).await,
        }
    }

    async fn datasets(&self) -> Result<Vec<DatasetInfo>, StoreError> {
        let rows = sqlx::query("SELECT name, head, cases, header FROM datasets WHERE project = ? ORDER BY name")
            .bind(&self.project)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(DatasetInfo {
                    name: r.get("name"),
                    head: r.get::<i64, _>("head") as u64,
                    cases: r.get::<i64, _>("cases") as u64,
                    header: serde_json::from_str(r.get("header")).map_err(damaged_header)?,
                })
            })
            .collect()
    }

    async fn commit(&self, mut request: CommitRequest, cases: CaseBatches) -> Result<CommitOutcome, StoreError> {
        let stored = self.stored(&request.dataset).await?.map(|(_, name)| name);
        request.dataset = crate::commit_name(stored, &request)?;
        let mut conn = self.pool.acquire().await?;
        let journal = match self.alone {
            true => Journal::choose(&self.pool, &mut conn, &request).await?,
            false => Journal::Wal,
        };
        let _flusher = Flusher::start(&self.path);
        // Without foreign-key checks while committing: every row a commit writes points at a
        // body it has just stored or looked up by content id, in the same transaction. With
        // them, each multi-row insert looked up its rows' parents and, as a check could fail
        // half-way through a statement, kept a statement journal: a copy of every page the
        // statement changed (a seventh of the SQLite thread's time on a large import).
        let outcome = match sqlx::query("PRAGMA foreign_keys = OFF").execute(&mut *conn).await {
            Ok(_) => self.commit_on(&mut conn, request, cases, journal).await,
            Err(err) => Err(err.into()),
        };
        let restored = async {
            sqlx::query("PRAGMA foreign_keys = ON").execute(&mut *conn).await?;
            journal.restore(&mut conn).await
        }
        .await;
        if let Err(err) = restored {
            // Not back in the pool as it is: the next connection opens as it should.
            let _ = conn.close().await;
            return Err(err);
        }
        drop(conn);
        let outcome = outcome?;
        if let CommitOutcome::Created(v) = &outcome {
            self.after_commit(v.added + v.removed + v.modified).await?;
        }
        Ok(outcome)
    }
    async fn versions(&self, dataset: &str) -> Result<Vec<VersionInfo>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let rows = sqlx::query(
            "SELECT number, cid, parent, author, time, message, added, removed, modified, cases
             FROM versions WHERE dataset = ? ORDER BY number",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|r| version_info(dataset, r)).collect())
    }

    async fn events(&self, dataset: &str) -> Result<Vec<Event>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let rows = sqlx::query("SELECT time, author, kind, detail FROM events WHERE dataset = ? ORDER BY id")
            .bind(id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| Event { time: r.get(0), author: r.get(1), kind: r.get(2), detail: r.get(3) }).collect())
    }

    async fn header(&self, dataset: &str) -> Result<DatasetHeader, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let header: String =
            sqlx::query_scalar("SELECT header FROM datasets WHERE id = ?").bind(id).fetch_one(&self.pool).await?;
        serde_json::from_str(&header).map_err(damaged_header)
    }

    async fn holding(
        &self,
        dataset: &str,
        version: u64,
        ids: &[String],
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let mut held = std::collections::HashSet::new();
        for chunk in ids.chunks(ROWS) {
            // (Unnumbered parameters only: sqlx gives them its arguments in order, counting
            // from the first whatever `?N` the statement also has.)
            let sql = format!(
                "SELECT case_id FROM members WHERE dataset = ? AND from_v <= ? AND (to_v IS NULL OR to_v > ?)
                 AND case_id IN ({})",
                vec!["?"; chunk.len()].join(", ")
            );
            let version = version as i64;
            let mut query = sqlx::query_scalar::<_, String>(AssertSqlSafe(sql)).bind(id).bind(version).bind(version);
            for case in chunk {
                query = query.bind(case);
            }
            held.extend(query.fetch_all(&self.pool).await?);
        }
        Ok(held)
    }

    async fn place(&self, dataset: &str, version: u64, case_id: &str) -> Result<Option<Cursor>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let ord: Option<f64> = sqlx::query_scalar(
            "SELECT ord FROM members WHERE dataset = ? AND case_id = ? AND from_v <= ?3 AND (to_v IS NULL OR to_v > ?3)",
        )
        .bind(id)
        .bind(case_id)
        .bind(version as i64)
        .fetch_optional(&self.pool)
        .await?;
        Ok(ord.map(|ord| Cursor { ord, id: case_id.to_owned() }))
    }

    async fn case(&self, dataset: &str, version: u64, case_id: &str) -> Result<Option<Case>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let body: Option<String> = sqlx::query_scalar(
            "SELECT b.body FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = ? AND m.case_id = ? AND m.from_v <= ?3 AND (m.to_v IS NULL OR m.to_v > ?3)",
        )
        .bind(id)
        .bind(case_id)
        .bind(version as i64)
        .fetch_optional(&self.pool)
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
        use futures_util::TryStreamExt;
        let id = self.dataset_id(dataset).await?;
        let review = self.review_plan(select).await?;
        let (sql, params) = select_sql("b.body", select, true, id, version, review.as_deref());
        let query = bind_select(sqlx::query(AssertSqlSafe(sql)), params);
        let mut rows = query.fetch(&self.pool);
        let mut out = Vec::with_capacity(batch);
        let mut total = 0;
        let mut documents = SeedDocuments::new();
        while let Some(row) = rows.try_next().await? {
            out.push(row.get(0));
            total += 1;
            if out.len() == batch {
                self.expand_bodies(&mut documents, &mut out).await?;
                if !each(std::mem::take(&mut out)) {
                    return Ok(total);
                }
            }
        }
        if !out.is_empty() {
            self.expand_bodies(&mut documents, &mut out).await?;
            each(out);
        }
        Ok(total)
    }

    async fn count(&self, dataset: &str, version: u64, select: &Select) -> Result<u64, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let review = self.review_plan(select).await?;
        let (sql, params) = select_sql("1", select, false, id, version, review.as_deref());
        let sql = format!("SELECT count(*) FROM ({sql})");
        let query = bind_select(sqlx::query(AssertSqlSafe(sql)), params);
        let n: i64 = query.fetch_one(&self.pool).await?.get(0);
        Ok(n as u64)
    }

    async fn history(&self, dataset: &str, case_id: &str) -> Result<Vec<Revision>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let rows: Vec<(i64, Option<i64>, String)> = sqlx::query_as(
            "SELECT m.from_v, m.to_v, lower(hex(b.cid)) FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = ? AND m.case_id = ? ORDER BY m.from_v",
        )
        .bind(id)
        .bind(case_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(crate::revisions(rows))
    }

    async fn diff(&self, dataset: &str, from: u64, to: u64) -> Result<Diff, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let (lo, hi) = crate::span(dataset, from, to)?;
        // Only rows that begin or end between the two versions can differ.
        let rows = sqlx::query(
            // Two index ranges: rows that begin after `lo`, and rows that end after it. (`lo` is
            // at least 1; `from_v > 1` says so to the planner, which then uses the partial index.)
            "SELECT case_id, from_v, to_v, m.blob, b.body FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = ?1 AND m.from_v > 1 AND m.from_v > ?2 AND m.from_v <= ?3
             UNION ALL
             SELECT case_id, from_v, to_v, m.blob, b.body FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = ?1 AND m.to_v > ?2 AND m.to_v <= ?3 AND NOT (m.from_v > ?2 AND m.from_v <= ?3)
             ORDER BY 1, 2",
        )
        .bind(id)
        .bind(lo)
        .bind(hi)
        .fetch_all(&self.pool)
        .await?;
        let alive = |v: i64, f: i64, t: Option<i64>| f <= v && t.is_none_or(|t| t > v);
        let mut diff = Diff::default();
        let mut documents = SeedDocuments::new();
        let mut i = 0;
        while i < rows.len() {
            let case_id: String = rows[i].get(0);
            let mut at_from: Option<(i64, String)> = None;
            let mut at_to: Option<(i64, String)> = None;
            while i < rows.len() && rows[i].get::<String, _>(0) == case_id {
                let r = &rows[i];
                let (f, t, cid, body): (i64, Option<i64>, i64, String) = (r.get(1), r.get(2), r.get(3), r.get(4));
                if alive(from as i64, f, t) {
                    at_from = Some((cid, body.clone()));
                }
                if alive(to as i64, f, t) {
                    at_to = Some((cid, body));
                }
                i += 1;
            }
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
        // SQLite numbers `?NNN` parameters as written; `$1` would be a name.
        let (added, removed, modified, moved): (i64, i64, i64, i64) =
            sqlx::query_as(AssertSqlSafe(crate::diff::totals_sql().replace('$', "?")))
                .bind(id)
                .bind(lo)
                .bind(hi)
                .bind(from as i64)
                .bind(to as i64)
                .fetch_one(&self.pool)
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
        let sql = crate::diff::page_sql(list, start).replace('$', "?");
        let mut query = sqlx::query_as(AssertSqlSafe(sql)).bind(id).bind(lo).bind(hi).bind(from as i64).bind(to as i64);
        if let crate::DiffFrom::After(at) | crate::DiffFrom::Before(at) = start {
            query = query.bind(at.to_owned());
        }
        let rows: Vec<(String, Option<i64>, Option<i64>)> =
            query.bind(size.saturating_add(1) as i64).fetch_all(&self.pool).await?;
        let (rows, more) = crate::diff::cut(rows, size, start, |r| r.0.clone());
        let mut bodies = HashMap::new();
        let wanted: Vec<i64> = match list {
            crate::DiffList::Modified => rows.iter().flat_map(|r| [r.1, r.2]).flatten().collect(),
            _ => Vec::new(),
        };
        if !wanted.is_empty() {
            let ids = wanted.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            let found: Vec<(i64, String)> =
                sqlx::query_as(AssertSqlSafe(format!("SELECT id, body FROM blobs WHERE id IN ({ids})")))
                    .fetch_all(&self.pool)
                    .await?;
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
        // The rows `diff` reads; a body only where the row is in version `to` (SQLite reads a
        // column's overflow pages only when it is asked for).
        let rows = sqlx::query(
            "SELECT case_id, from_v, to_v, b.cid,
                    CASE WHEN m.from_v <= ?4 AND (m.to_v IS NULL OR m.to_v > ?4) THEN b.body END
             FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = ?1 AND m.from_v > 1 AND m.from_v > ?2 AND m.from_v <= ?3
             UNION ALL
             SELECT case_id, from_v, to_v, b.cid,
                    CASE WHEN m.from_v <= ?4 AND (m.to_v IS NULL OR m.to_v > ?4) THEN b.body END
             FROM members m JOIN blobs b ON b.id = m.blob
             WHERE m.dataset = ?1 AND m.to_v > ?2 AND m.to_v <= ?3 AND NOT (m.from_v > ?2 AND m.from_v <= ?3)
             ORDER BY 1, 2",
        )
        .bind(id)
        .bind(lo)
        .bind(hi)
        .bind(to as i64)
        .fetch_all(&self.pool)
        .await?;
        let rows = rows
            .iter()
            .map(|r| Ok((r.get(0), r.get(1), r.get(2), crate::stored_cid(r.get::<&[u8], _>(3))?, r.get(4))))
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
        if self.version_row(dataset, id, version).await?.is_none() {
            return Err(StoreError::NoVersion {
                dataset: dataset.to_owned(),
                reference: format!("v{version}"),
                hint: String::new(),
            });
        }
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        // The tag as it is stored, maybe in another normal form by an older casebook: moved,
        // and from now on in NFC.
        let tags: Vec<(String, i64)> =
            sqlx::query_as("SELECT name, version FROM tags WHERE dataset = ?").bind(id).fetch_all(&mut *tx).await?;
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
            sqlx::query("DELETE FROM tags WHERE dataset = ? AND name = ?")
                .bind(id)
                .bind(name)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("INSERT INTO tags (dataset, name, version) VALUES (?, ?, ?)")
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
            sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES (?, ?, ?, 'tag', ?)")
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

    async fn page(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        after: Option<&Cursor>,
        size: usize,
    ) -> Result<Page, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let unlimited = Select { filter: select.filter.clone(), limit: None };
        let review = self.review_plan(select).await?;
        let (mut sql, mut params) =
            select_sql("b.body, m.ord, m.case_id", &unlimited, false, id, version, review.as_deref());
        if let Some(after) = after {
            sql.push_str(AFTER_CURSOR);
            params.extend([SqlParam::Real(after.ord), SqlParam::Real(after.ord), SqlParam::Text(after.id.clone())]);
        }
        // One case more than the page: the next cursor only when there is a next page.
        sql.push_str(" ORDER BY m.ord, m.case_id LIMIT ?");
        params.push(SqlParam::Integer(i64::try_from(size).unwrap_or(i64::MAX).saturating_add(1)));
        let mut rows = bind_select(sqlx::query(AssertSqlSafe(sql)), params).fetch_all(&self.pool).await?;
        let more = rows.len() > size;
        rows.truncate(size);
        let at = |r: &sqlx::sqlite::SqliteRow| Cursor { ord: r.get(1), id: r.get(2) };
        let next = rows.last().filter(|_| more).map(at);
        let previous = rows.first().filter(|_| after.is_some()).map(at);
        let mut bodies: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        self.expand_bodies(&mut SeedDocuments::new(), &mut bodies).await?;
        Ok(Page { bodies, next, previous })
    }

    async fn page_before(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        before: &Cursor,
        size: usize,
    ) -> Result<Page, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let unlimited = Select { filter: select.filter.clone(), limit: None };
        let review = self.review_plan(select).await?;
        let (mut sql, mut params) =
            select_sql("b.body, m.ord, m.case_id", &unlimited, false, id, version, review.as_deref());
        // The order index walked backwards from the cursor, one case more than the page.
        sql.push_str(" AND m.ord <= ? AND (m.ord < ? OR m.case_id < ?) ORDER BY m.ord DESC, m.case_id DESC LIMIT ?");
        params.extend([
            SqlParam::Real(before.ord),
            SqlParam::Real(before.ord),
            SqlParam::Text(before.id.clone()),
            SqlParam::Integer(i64::try_from(size).unwrap_or(i64::MAX).saturating_add(1)),
        ]);
        let mut rows = bind_select(sqlx::query(AssertSqlSafe(sql)), params).fetch_all(&self.pool).await?;
        let more = rows.len() > size;
        rows.truncate(size);
        rows.reverse();
        let at = |r: &sqlx::sqlite::SqliteRow| Cursor { ord: r.get(1), id: r.get(2) };
        let previous = rows.first().filter(|_| more).map(at);
        let next = rows.last().map(at);
        let mut bodies: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        self.expand_bodies(&mut SeedDocuments::new(), &mut bodies).await?;
        Ok(Page { bodies, next, previous })
    }

    /// One row: SQLite joins the bodies (a page row by row costs a message between threads and a
    /// string each). Bodies that refer to a seed document are expanded by `page`.
    async fn page_json(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        after: Option<&Cursor>,
        size: usize,
    ) -> Result<crate::JsonPage, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let unlimited = Select { filter: select.filter.clone(), limit: None };
        let review = self.review_plan(select).await?;
        let (inner, mut params) =
            select_sql("b.body, m.ord, m.case_id", &unlimited, false, id, version, review.as_deref());
        // One pass over the page's rows, in the subquery's order: SQLite cannot flatten a
        // subquery with a `LIMIT` into an aggregate, so it hands the rows over as it makes them,
        // and the aggregates see them in that order (an `ORDER BY` inside them would sort the
        // bodies again, a third of the time here; the conformance suite compares every page with
        // `page`). The bodies joined, and the last row's place for the cursor (its id the last of
        // the ids, so that rows sharing an `ord` are told apart as the order tells them).
        let mut sql = format!(
            "SELECT CAST(coalesce(group_concat(body, ','), '') AS BLOB), count(*),
                    max(ord), json_group_array(case_id) ->> '$[#-1]' FROM ({inner}"
        );
        if let Some(after) = after {
            sql.push_str(AFTER_CURSOR);
            params.extend([SqlParam::Real(after.ord), SqlParam::Real(after.ord), SqlParam::Text(after.id.clone())]);
        }
        sql.push_str(" ORDER BY m.ord, m.case_id LIMIT ?)");
        params.push(SqlParam::Integer(i64::try_from(size).unwrap_or(i64::MAX)));
        let row = bind_select(sqlx::query(AssertSqlSafe(sql)), params).fetch_one(&self.pool).await?;
        // Bytes: SQLite's text is the UTF-8 the bodies were written as, and is sent on as it is.
        let json: Vec<u8> = row.get(0);
        if crate::seeds::may_refer(&json) {
            return Ok(self.page(dataset, version, select, after, size).await?.into());
        }
        let count = row.get::<i64, _>(1) as usize;
        let next = match (row.get::<Option<f64>, _>(2), row.get::<Option<String>, _>(3)) {
            (Some(ord), Some(id)) if count == size => Some(Cursor { ord, id }),
            _ => None,
        };
        let next = crate::if_more(self, dataset, version, select, next).await?;
        Ok(crate::JsonPage { json, count, next })
    }

    /// `GROUP BY` the JSON text at the path (in the facets when the path is there), or the
    /// values of the `KEY:` labels in `case_labels`; the texts are read as JSON and merged as
    /// [`casebook_filter::Groups`] tells values apart.
    async fn group_counts(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        path: &casebook_filter::FieldPath,
    ) -> Result<Option<Vec<(Option<serde_json::Value>, u64)>>, StoreError> {
        let label_key = path.label_key();
        // A key with a colon names no label (a label's key ends at its first colon).
        if label_key.is_some_and(|key| key.contains(':')) || (label_key.is_none() && !path.in_stored_body()) {
            return Ok(None);
        }
        let id = self.dataset_id(dataset).await?;
        let review = self.review_plan(select).await?;
        let unlimited = Select { filter: select.filter.clone(), limit: None };
        let mut groups = casebook_filter::Groups::new(path.clone());
        if let Some(key) = label_key {
            // The labels from `KEY:` up to (not including) `KEY;`: those whose text starts with
            // `KEY:`; the value is what follows (`substr` counts characters, as the key is).
            let (low, high) = (format!("{key}:"), format!("{key};"));
            let (inner, inner_params) = select_sql("m.blob", &unlimited, false, id, version, review.as_deref());
            let mut params = vec![SqlParam::Integer(key.chars().count() as i64 + 2)];
            params.extend(inner_params.iter().cloned());
            params.extend([SqlParam::Text(low.clone()), SqlParam::Text(high.clone())]);
            let sql = format!(
                "SELECT substr(l.label, ?), count(*) FROM ({inner}) AS s JOIN case_labels l ON l.blob = s.blob
                 WHERE l.label >= ? AND l.label < ? GROUP BY 1"
            );
            for row in bind_select(sqlx::query(AssertSqlSafe(sql)), params).fetch_all(&self.pool).await? {
                groups.add_counted(Some(serde_json::Value::String(row.get(0))), row.get::<i64, _>(1) as u64);
            }
            let mut params = inner_params;
            params.extend([SqlParam::Text(low), SqlParam::Text(high)]);
            let sql = format!(
                "SELECT count(*) FROM ({inner}) AS s
                 WHERE NOT EXISTS (SELECT 1 FROM case_labels l WHERE l.blob = s.blob AND l.label >= ? AND l.label < ?)"
            );
            let missing: i64 = bind_select(sqlx::query(AssertSqlSafe(sql)), params).fetch_one(&self.pool).await?.get(0);
            if missing > 0 {
                groups.add_counted(None, missing as u64);
            }
        } else {
            let source = if path.in_facets() { "f.facets" } else { "b.body" };
            let (inner, inner_params) =
                select_sql(&format!("{source} -> ? AS v"), &unlimited, false, id, version, review.as_deref());
            let mut params = vec![SqlParam::Text(path.sqlite_json_path())];
            params.extend(inner_params);
            let sql = format!("SELECT v, count(*) FROM ({inner}) GROUP BY v");
            for row in bind_select(sqlx::query(AssertSqlSafe(sql)), params).fetch_all(&self.pool).await? {
                groups.add_counted(crate::group_value(row.get(0)), row.get::<i64, _>(1) as u64);
            }
        }
        Ok(Some(groups.sorted()))
    }

    async fn untag(&self, dataset: &str, tag: &str, author: &str, time: &str) -> Result<u64, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let tags: Vec<(String, i64)> =
            sqlx::query_as("SELECT name, version FROM tags WHERE dataset = ?").bind(id).fetch_all(&mut *tx).await?;
        let found = crate::named_tags(dataset, tag, &tags)?;
        for (name, _) in &found {
            sqlx::query("DELETE FROM tags WHERE dataset = ? AND name = ?")
                .bind(id)
                .bind(name)
                .execute(&mut *tx)
                .await?;
        }
        let version = found[0].1 as u64;
        sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES (?, ?, ?, 'tag', ?)")
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
        let rows: Vec<(String, i64)> = sqlx::query_as("SELECT name, version FROM tags WHERE dataset = ? ORDER BY name")
            .bind(id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|(name, v)| (name, v as u64)).collect())
    }

    /// Two steps: the page's ids in the sort's order (a top-N over the selection's members,
    /// reading the facets, or the bodies for a field only they hold), then their bodies.
    async fn page_sorted(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        sort: &crate::Sort,
        seek: Option<&crate::SortSeek>,
        size: usize,
    ) -> Result<crate::SortedPage, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let backward = seek.is_some_and(|s| s.backward);
        let ascending = sort.ascending(backward);
        let key = crate::sort::sqlite_key(sort);
        let unlimited = Select { filter: select.filter.clone(), limit: None };
        let columns = format!("m.case_id AS case_id, m.blob AS blob, {}", key.columns);
        let review = self.review_plan(select).await?;
        let (inner, selected) = select_sql(&columns, &unlimited, false, id, version, review.as_deref());
        let mut params = key.params;
        params.extend(selected);
        let mut sql = format!("SELECT case_id, blob, k_rank, k_num, k_text FROM ({inner}) AS s");
        if let Some(seek) = seek {
            let op = if ascending { ">" } else { "<" };
            sql.push_str(&format!(" WHERE (k_rank, k_num, k_text, case_id) {op} (?, ?, ?, ?)"));
            params.extend([
                SqlParam::Integer(seek.key.rank),
                SqlParam::Real(seek.key.num),
                SqlParam::Text(seek.key.text.clone()),
                SqlParam::Text(seek.key.id.clone()),
            ]);
        }
        // One case more than the page: the cursor onwards only when there is more.
        let order = crate::sort::order_by("case_id", ascending);
        let sql = format!(
            "SELECT b.body, p.case_id, p.k_rank, p.k_num, p.k_text FROM ({sql} {order} LIMIT ?) AS p
             JOIN blobs b ON b.id = p.blob {order}"
        );
        params.push(SqlParam::Integer(i64::try_from(size).unwrap_or(i64::MAX).saturating_add(1)));
        let mut rows = bind_select(sqlx::query(AssertSqlSafe(sql)), params).fetch_all(&self.pool).await?;
        let more = rows.len() > size;
        rows.truncate(size);
        if backward {
            rows.reverse();
        }
        let at = |r: &sqlx::sqlite::SqliteRow| crate::SortKey {
            rank: r.get(2),
            num: r.get(3),
            text: r.get(4),
            id: r.get(1),
        };
        let (next, previous) = match backward {
            false => (rows.last().filter(|_| more).map(at), rows.first().filter(|_| seek.is_some()).map(at)),
            true => (rows.last().map(at), rows.first().filter(|_| more).map(at)),
        };
        let mut bodies: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        self.expand_bodies(&mut SeedDocuments::new(), &mut bodies).await?;
        Ok(crate::SortedPage { bodies, next, previous })
    }

    async fn sort_key(
        &self,
        dataset: &str,
        version: u64,
        sort: &crate::Sort,
        case_id: &str,
    ) -> Result<Option<crate::SortKey>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let key = crate::sort::sqlite_key(sort);
        let columns = format!("m.case_id AS case_id, {}", key.columns);
        let (mut sql, selected) = select_sql(&columns, &Select::all(), false, id, version, None);
        let mut params = key.params;
        params.extend(selected);
        sql.push_str(" AND m.case_id = ?");
        params.push(SqlParam::Text(case_id.to_owned()));
        let row = bind_select(sqlx::query(AssertSqlSafe(sql)), params).fetch_optional(&self.pool).await?;
        Ok(row.map(|r| crate::SortKey { rank: r.get(1), num: r.get(2), text: r.get(3), id: r.get(0) }))
    }
}

impl SqliteStore {
    /// See [`crate::AnyStore::restore_log`].
    pub async fn restore_log(
        &self,
        dataset: &str,
        header: &DatasetHeader,
        events: &[Event],
        tags: &[(String, u64)],
    ) -> Result<(), StoreError> {
        let id = self.dataset_id(dataset).await?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let header = serde_json::to_string(header).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        sqlx::query("UPDATE datasets SET header = ? WHERE id = ?").bind(header).bind(id).execute(&mut *tx).await?;
        for e in events {
            sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES (?, ?, ?, ?, ?)")
                .bind(id)
                .bind(&e.time)
                .bind(&e.author)
                .bind(&e.kind)
                .bind(&e.detail)
                .execute(&mut *tx)
                .await?;
        }
        for (name, version) in tags {
            sqlx::query("INSERT OR REPLACE INTO tags (dataset, name, version) VALUES (?, ?, ?)")
                .bind(id)
                .bind(name)
                .bind(*version as i64)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

impl SqliteStore {
    /// The first version of a dataset: every input case is new, so the input goes straight into
    /// `members` (in input order, which appends to the order index), without the `incoming`
    /// table and the comparison with a head.
    async fn first_version(
        &self,
        mut tx: Transaction<'_, Sqlite>,
        request: CommitRequest,
        id: i64,
        mut cases: CaseBatches,
        journal: Journal,
    ) -> Result<CommitOutcome, StoreError> {
        // Into a store that holds no body yet (written with a rollback journal, see [`Journal`]),
        // nothing is looked up, and 32 MiB of cache do.
        let stored = stored_bodies(&mut tx).await?;
        if stored == 0 && journal == Journal::Rollback {
            sqlx::query("PRAGMA cache_size = -32768").execute(&mut *tx).await?;
        }
        let mut new = NewBodies::new(stored, true);
        // The version id hashes the cases in id order; they are listed here as they go by (in
        // 46 bytes a case of 6-byte ids), since reading them back would touch every body's page.
        let mut listed = Listing::default();
        let mut pos = 0i64;
        let mut pending = Vec::new();
        // (A case whose id was listed before fails as it goes into `members`: `explain` says
        // which.)
        while let Some(batch) = cases.recv().await {
            let Ok(batch) = batch else { return Err(StoreError::Cancelled) };
            for case in &batch {
                listed.push(&case.id, case.content_id)?;
            }
            pending.extend(batch);
            load(&mut tx, &mut pending, &mut pos, &ListIn::FirstVersion(id), &mut new, false)
                .await
                .map_err(|err| listed.explain(err))?;
        }
        load(&mut tx, &mut pending, &mut pos, &ListIn::FirstVersion(id), &mut new, true)
            .await
            .map_err(|err| listed.explain(err))?;
        let count = pos;
        // The version id is hashed on another thread while the new bodies are entered.
        let listed = Arc::new(listed);
        let hashing = {
            let (listed, dataset) = (Arc::clone(&listed), request.dataset.clone());
            tokio::task::spawn_blocking(move || listed.first_version_id(&dataset))
        };
        let entered = new.enter(&mut tx, Some(&listed)).await;
        // An id listed twice is named as such, whatever entering its body twice did.
        let version_id = hashing.await.map_err(|err| StoreError::Corrupt(format!("hashing the version: {err}")))??;
        entered?;
        drop(listed);
        let version = VersionInfo {
            dataset: request.dataset,
            number: 1,
            id: version_id,
            parent: None,
            author: request.author,
            time: request.time,
            message: request.message,
            added: count as u64,
            removed: 0,
            modified: 0,
            cases: count as u64,
        };
        insert_version(&mut tx, id, &version).await?;
        tx.commit().await?;
        Ok(CommitOutcome::Created(version))
    }

    /// [`crate::Store::commit`] on one connection, in one transaction.
    async fn commit_on(
        &self,
        conn: &mut SqliteConnection,
        request: CommitRequest,
        mut cases: CaseBatches,
        journal: Journal,
    ) -> Result<CommitOutcome, StoreError> {
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;

        // A large commit's working set: 48 MiB of page cache on the connection that writes it
        // (with 32 MiB, a second million-case dataset took a second more, reading back pages of
        // `blob_cids` and `members` that did not fit; 64 MiB gained nothing more, and took the
        // import's peak to 250 MiB).
        sqlx::query("PRAGMA cache_size = -49152").execute(&mut *tx).await?;
        // The dataset, created on its first commit.
        let existing = sqlx::query("SELECT id, head, header FROM datasets WHERE project = ? AND name = ?")
            .bind(&self.project)
            .bind(&request.dataset)
            .fetch_optional(&mut *tx)
            .await?;
        let header_json = |h: &DatasetHeader| serde_json::to_string(h).unwrap_or_else(|_| "{}".into());
        let (id, head) = match &existing {
            Some(row) => (row.get::<i64, _>("id"), row.get::<i64, _>("head") as u64),
            None => {
                if matches!(request.mode, CommitMode::Remove(_)) {
                    return Err(StoreError::NoDataset(request.dataset.clone(), String::new()));
                }
                let header = request.header.clone().unwrap_or_default();
                let id: i64 =
                    sqlx::query_scalar("INSERT INTO datasets (project, name, header) VALUES (?, ?, ?) RETURNING id")
                        .bind(&self.project)
                        .bind(&request.dataset)
                        .bind(header_json(&header))
                        .fetch_one(&mut *tx)
                        .await?;
                (id, 0)
            }
        };
        if let Some(parent) = request.parent {
            if parent != head {
                return Err(StoreError::Conflict { dataset: request.dataset.clone(), parent, head });
            }
        }
        // Header edits are logged, not versioned.
        if let (Some(row), Some(header)) = (&existing, &request.header) {
            let old: String = row.get("header");
            let new = header_json(header);
            if old != new {
                sqlx::query("UPDATE datasets SET header = ? WHERE id = ?")
                    .bind(&new)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("INSERT INTO events (dataset, time, author, kind, detail) VALUES (?, ?, ?, 'header', ?)")
                    .bind(id)
                    .bind(&request.time)
                    .bind(&request.author)
                    .bind(&new)
                    .execute(&mut *tx)
                    .await?;
            }
        }

        if head == 0 && !matches!(request.mode, CommitMode::Remove(_)) {
            return self.first_version(tx, request, id, cases, journal).await;
        }

        // The input, in input order; its id index is built once it is all there (faster than
        // inserting into it at random).
        sqlx::raw_sql(
            "DROP TABLE IF EXISTS temp.incoming;
             CREATE TEMP TABLE incoming (pos INTEGER PRIMARY KEY, case_id TEXT NOT NULL, blob INTEGER NOT NULL, cid BLOB);",
        )
        .execute(&mut *tx)
        .await?;
        let mut pos = 0i64;
        let mut new = NewBodies::new(stored_bodies(&mut tx).await?, false);
        match &request.mode {
            CommitMode::Remove(ids) => {
                let mut unique: Vec<&String> = ids.iter().collect();
                unique.sort();
                unique.dedup();
                for id_chunk in unique.chunks(ROWS) {
                    let values = vec!["(?, 0)"; id_chunk.len()].join(", ");
                    let sql = format!("INSERT INTO incoming (case_id, blob) VALUES {values}");
                    let mut query = sqlx::query(AssertSqlSafe(sql));
                    for case_id in id_chunk {
                        query = query.bind(*case_id);
                    }
                    query.execute(&mut *tx).await?;
                }
            }
            _ => {
                let mut pending = Vec::new();
                while let Some(batch) = cases.recv().await {
                    let Ok(batch) = batch else { return Err(StoreError::Cancelled) };
                    pending.extend(batch);
                    load(&mut tx, &mut pending, &mut pos, &ListIn::Incoming, &mut new, false).await?;
                }
                load(&mut tx, &mut pending, &mut pos, &ListIn::Incoming, &mut new, true).await?;
            }
        }
        if let Err(err) =
            sqlx::query("CREATE UNIQUE INDEX temp.incoming_case ON incoming (case_id)").execute(&mut *tx).await
        {
            let twice: Option<String> =
                sqlx::query_scalar("SELECT case_id FROM incoming GROUP BY case_id HAVING count(*) > 1 LIMIT 1")
                    .fetch_optional(&mut *tx)
                    .await?;
            return Err(twice.map_or(err.into(), StoreError::DuplicateId));
        }
        new.enter(&mut tx, None).await?;

        let live = "dataset = ?1 AND to_v IS NULL";
        // What changes, by case id: `kind` 1 added, 2 removed, 3 modified; with the new body and
        // its content id (which the version id hashes: reading it from the body's row took a
        // random read of the table of bodies a change).
        sqlx::query(
            "CREATE TEMP TABLE IF NOT EXISTS changes (case_id TEXT PRIMARY KEY, kind INTEGER NOT NULL, blob INTEGER, cid BLOB)",
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM changes").execute(&mut *tx).await?;
        match &request.mode {
            CommitMode::Remove(_) => {
                let sql = format!(
                    "INSERT OR FAIL INTO changes SELECT m.case_id, 2, NULL, NULL FROM incoming i CROSS JOIN members m ON m.case_id = i.case_id AND m.{live}"
                );
                sqlx::query(AssertSqlSafe(sql)).bind(id).execute(&mut *tx).await?;
            }
            mode => {
                let sql = format!(
                    "INSERT OR FAIL INTO changes SELECT i.case_id, CASE WHEN m.blob IS NULL THEN 1 ELSE 3 END, i.blob, i.cid
                     FROM incoming i LEFT JOIN (SELECT case_id, blob FROM members WHERE {live}) m ON m.case_id = i.case_id
                     WHERE m.blob IS NULL OR m.blob != i.blob"
                );
                sqlx::query(AssertSqlSafe(sql)).bind(id).execute(&mut *tx).await?;
                if *mode == CommitMode::Replace {
                    let sql = format!(
                        "INSERT OR FAIL INTO changes SELECT m.case_id, 2, NULL, NULL FROM members m
                         WHERE m.{live} AND NOT EXISTS (SELECT 1 FROM incoming i WHERE i.case_id = m.case_id)"
                    );
                    sqlx::query(AssertSqlSafe(sql)).bind(id).execute(&mut *tx).await?;
                }
            }
        }
        // In a whole-dataset commit, does the order of the cases that stay change?
        let reordered = request.mode == CommitMode::Replace && {
            let sql = format!(
                "SELECT count(*) FROM (SELECT m.ord AS ord, lag(m.ord) OVER (ORDER BY i.pos) AS prev
                 FROM incoming i CROSS JOIN members m ON m.case_id = i.case_id AND m.{live}) WHERE ord < prev"
            );
            let n: i64 = sqlx::query_scalar(AssertSqlSafe(sql)).bind(id).fetch_one(&mut *tx).await?;
            n > 0 || {
                let crowded = crate::crowded_sql("?1", "CROSS JOIN");
                sqlx::query_scalar::<_, bool>(AssertSqlSafe(crowded)).bind(id).fetch_one(&mut *tx).await?
            }
        };
        let counts = sqlx::query(
            "SELECT coalesce(sum(kind = 1), 0), coalesce(sum(kind = 2), 0), coalesce(sum(kind = 3), 0) FROM changes",
        )
        .fetch_one(&mut *tx)
        .await?;
        let (added, removed, modified): (i64, i64, i64) = (counts.get(0), counts.get(1), counts.get(2));
        let head_info = if head > 0 { self.version_row_tx(&mut tx, &request.dataset, id, head).await? } else { None };
        // The new version's id hashes its parent's: a head that cannot be read is not built on.
        if head > 0
            && !head_info.as_ref().is_some_and(|h| h.id.len() == 64 && h.id.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(StoreError::Damaged(format!("the head of `{}`, v{head}, cannot be read", request.dataset)));
        }
        if added + removed + modified == 0 && !reordered && head > 0 {
            tx.rollback().await?;
            return Ok(CommitOutcome::Unchanged(head_info));
        }
        let number = head + 1;

        // The version's content id: its parent, its order if that changed, its changes.
        let order = if reordered {
            use futures_util::TryStreamExt;
            let mut hasher = VersionHasher::new(&json!({"order": request.dataset}))?;
            let mut ids = sqlx::query_scalar::<_, String>("SELECT case_id FROM incoming ORDER BY pos").fetch(&mut *tx);
            while let Some(case_id) = ids.try_next().await? {
                hasher.change(&case_id, None)?;
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
            use futures_util::TryStreamExt;
            let mut rows = sqlx::query("SELECT case_id, lower(hex(cid)) FROM changes ORDER BY case_id").fetch(&mut *tx);
            while let Some(r) = rows.try_next().await? {
                hasher.change(r.get::<&str, _>(0), r.get::<Option<&str>, _>(1))?;
            }
        }
        let cid = hasher.finish();

        // Close the rows that change, then open the new ones.
        let close = if reordered {
            format!(
                "UPDATE OR FAIL members SET to_v = ?2 WHERE {live} AND case_id IN (SELECT case_id FROM incoming UNION SELECT case_id FROM changes)"
            )
        } else {
            format!("UPDATE OR FAIL members SET to_v = ?2 WHERE {live} AND case_id IN (SELECT case_id FROM changes)")
        };
        // The rows to open, with their places: computed before closing (they read the head).
        // Joins with the head are written `CROSS JOIN` so SQLite looks the few changed ids up
        // in it rather than walking all of it.
        sqlx::query(
            "CREATE TEMP TABLE IF NOT EXISTS opening (case_id TEXT PRIMARY KEY, blob INTEGER NOT NULL, ord REAL NOT NULL)",
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM opening").execute(&mut *tx).await?;
        if reordered {
            // A new order: every case takes its input position.
            sqlx::query("INSERT OR FAIL INTO opening SELECT case_id, blob, pos FROM incoming")
                .execute(&mut *tx)
                .await?;
        } else {
            // The last place in the head (from the top of the order index, not a scan).
            let max_ord: Option<f64> = sqlx::query_scalar(AssertSqlSafe(format!(
                "SELECT ord FROM members INDEXED BY members_ord WHERE {live} ORDER BY ord DESC LIMIT 1"
            )))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            let end = max_ord.unwrap_or(-1.0);
            // Modified cases keep their place; added ones go between the neighbours they have in
            // the input (for a whole-dataset commit) or at the end (for `put`).
            if request.mode == CommitMode::Replace {
                // The places of the cases that stay, by input position (their order is unchanged,
                // so the nearest one before a position has the largest place before it).
                sqlx::query("CREATE TEMP TABLE IF NOT EXISTS kept (pos INTEGER PRIMARY KEY, ord REAL NOT NULL)")
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("DELETE FROM kept").execute(&mut *tx).await?;
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT OR FAIL INTO kept SELECT i.pos, m.ord FROM incoming i CROSS JOIN members m ON m.case_id = i.case_id AND m.{live}"
                )))
                .bind(id)
                .execute(&mut *tx)
                .await?;
            }
            let neighbours = if request.mode == CommitMode::Replace {
                "WITH added AS (SELECT c.case_id, c.blob, i.pos,
                        (SELECT k.ord FROM kept k WHERE k.pos < i.pos ORDER BY k.pos DESC LIMIT 1) AS lo,
                        (SELECT k.ord FROM kept k WHERE k.pos > i.pos ORDER BY k.pos LIMIT 1) AS hi
                        FROM changes c JOIN incoming i ON i.case_id = c.case_id WHERE c.kind = 1),
                     ranked AS (SELECT *, row_number() OVER (PARTITION BY lo, hi ORDER BY pos) AS k,
                        count(*) OVER (PARTITION BY lo, hi) AS n FROM added)
                     SELECT case_id, blob, CASE
                        WHEN lo IS NULL AND hi IS NULL THEN pos
                        WHEN lo IS NULL THEN hi - (n + 1 - k)
                        WHEN hi IS NULL THEN lo + k
                        ELSE lo + (hi - lo) * k / (n + 1) END AS ord FROM ranked"
                    .to_owned()
            } else {
                "SELECT c.case_id, c.blob, ?1 + row_number() OVER (ORDER BY i.pos) AS ord
                 FROM changes c JOIN incoming i ON i.case_id = c.case_id WHERE c.kind = 1"
                    .to_owned()
            };
            let insert = sqlx::query(AssertSqlSafe(format!("INSERT OR FAIL INTO opening {neighbours}")));
            let insert = if request.mode == CommitMode::Replace { insert } else { insert.bind(end) };
            insert.execute(&mut *tx).await?;
            sqlx::query(AssertSqlSafe(format!(
                "INSERT OR FAIL INTO opening SELECT c.case_id, c.blob, m.ord FROM changes c CROSS JOIN members m ON m.case_id = c.case_id AND m.{live} WHERE c.kind = 3"
            )))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(AssertSqlSafe(close)).bind(id).bind(number as i64).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT OR FAIL INTO members (dataset, case_id, from_v, to_v, blob, ord)
             SELECT ?1, case_id, ?2, NULL, blob, ord FROM opening ORDER BY case_id",
        )
        .bind(id)
        .bind(number as i64)
        .execute(&mut *tx)
        .await?;
        // Kept up to date by every commit: counting the head would cost a scan of it.
        let count = head_info.as_ref().map_or(0, |h| h.cases as i64) + added - removed;
        let version = VersionInfo {
            dataset: request.dataset,
            number,
            id: cid,
            parent: (head > 0).then_some(head),
            author: request.author,
            time: request.time,
            message: request.message,
            added: added as u64,
            removed: removed as u64,
            modified: modified as u64,
            cases: count as u64,
        };
        insert_version(&mut tx, id, &version).await?;
        tx.commit().await?;
        Ok(CommitOutcome::Created(version))
    }

    /// How SQLite finds the cases `select` picks in a version to count them (`EXPLAIN QUERY
    /// PLAN`), one step a line: what shows that a filter uses the label table and the facets.
    /// With `after`, the plan of a page that starts after a case (the rest of the query
    /// [`Store::page`] makes).
    pub async fn query_plan(
        &self,
        dataset: &str,
        version: u64,
        select: &Select,
        after: Option<&Cursor>,
    ) -> Result<Vec<String>, StoreError> {
        let id = self.dataset_id(dataset).await?;
        let review = self.review_plan(select).await?;
        let (mut sql, mut params) = select_sql("1", select, false, id, version, review.as_deref());
        if let Some(after) = after {
            sql.push_str(AFTER_CURSOR);
            params.extend([SqlParam::Real(after.ord), SqlParam::Real(after.ord), SqlParam::Text(after.id.clone())]);
        }
        let query = bind_select(sqlx::query(AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}"))), params);
        let rows = query.fetch_all(&self.pool).await?;
        Ok(rows.iter().map(|r| r.get::<String, _>("detail")).collect())
    }

    /// The review states to find a selection's cases by (through `blob_facets_review`, see
    /// migration 0014), when its filter requires one and few bodies of the store are in it:
    /// at most [`REVIEW_INDEX_ROWS`], counted in the index (a bounded read). More than that, and
    /// the version's order finds a page's cases sooner than sorting them all would.
    async fn review_plan(&self, select: &Select) -> Result<Option<Vec<String>>, StoreError> {
        let Some(states) = select.filter.as_ref().and_then(|f| f.review_states()) else { return Ok(None) };
        let sql = format!(
            "SELECT count(*) FROM (SELECT 1 FROM blob_facets WHERE facets ->> '$.review' IN ({}) LIMIT ?)",
            vec!["?"; states.len()].join(", ")
        );
        let mut query = sqlx::query_scalar::<_, i64>(AssertSqlSafe(sql));
        for state in &states {
            query = query.bind(state);
        }
        let n = query.bind(REVIEW_INDEX_ROWS + 1).fetch_one(&self.pool).await?;
        Ok((n <= REVIEW_INDEX_ROWS).then_some(states))
    }

    async fn version_row_tx(
        &self,
        tx: &mut Transaction<'_, Sqlite>,
        dataset: &str,
        id: i64,
        number: u64,
    ) -> Result<Option<VersionInfo>, StoreError> {
        let row = sqlx::query(
            "SELECT number, cid, parent, author, time, message, added, removed, modified, cases
             FROM versions WHERE dataset = ? AND number = ?",
        )
        .bind(id)
        .bind(number as i64)
        .fetch_optional(&mut **tx)
        .await?;
        Ok(row.map(|r| version_info(dataset, &r)))
    }
}

/// The query behind [`Store::bodies`] and [`Store::count`]: `columns` of the members of a
/// version that `select` picks. Its parameters are the dataset, the version twice (see
/// [`bind_select`]), then those returned: the filter's values and the limit, bound, never
/// spliced. (All are plain `?`: sqlx numbers those apart from any `?NNN`.)
///
/// With `review` (see [`SqliteStore::review_plan`]), the bodies in those review states are read
/// first, through their index, and their members in the version looked up by body.
fn select_sql(
    columns: &str,
    select: &Select,
    ordered: bool,
    dataset: i64,
    version: u64,
    review: Option<&[String]>,
) -> (String, Vec<SqlParam>) {
    let mut params = Vec::new();
    // Without a filter, the order index lists the version (and holds all the query needs); with
    // one, the planner may rather start from the labels a filter names.
    let hint = if select.filter.is_none() { "INDEXED BY members_ord" } else { "" };
    let context = SqlContext {
        body: "b.body",
        labels: Some(LabelIndex { blob_expr: "m.blob" }),
        facets: Some("f.facets"),
        seeds: Some(crate::sqlite_seeds::FILTER_SEEDS),
        tools: Some(crate::sqlite_seeds::FILTER_TOOLS),
    };
    let fragment = select.filter.as_ref().map(|f| f.to_sqlite(&context));
    // The bodies and the facets only when something reads them (a filter on labels alone does
    // not; one on metadata reads the facets).
    let reads = |column: &str| columns.contains(column) || fragment.as_ref().is_some_and(|f| f.sql.contains(column));
    let mut joins = String::new();
    if reads("b.body") {
        joins.push_str(" JOIN blobs b ON b.id = m.blob");
    }
    let mut sql = match review {
        // `CROSS JOIN`: SQLite keeps the tables in the order written, the review index first;
        // `INDEXED BY`: each body's rows looked up by body, never by a range of the order index
        // (a cursor's `m.ord >= ?` made SQLite walk the rest of the version once per body: 11 s
        // for a page of one after a case of a 1M-case version with 2,922 drafts).
        Some(states) => {
            params.extend(states.iter().map(|s| SqlParam::Text(s.clone())));
            format!(
                "SELECT {columns} FROM blob_facets f CROSS JOIN members m INDEXED BY members_blob ON m.blob = f.blob{joins}
                 WHERE f.facets ->> '$.review' IN ({}) AND m.dataset = ? AND m.from_v <= ? AND (m.to_v IS NULL OR m.to_v > ?)",
                vec!["?"; states.len()].join(", ")
            )
        }
        None => {
            if reads("f.facets") {
                joins.push_str(" JOIN blob_facets f ON f.blob = m.blob");
            }
            format!(
                "SELECT {columns} FROM members m {hint}{joins}
                 WHERE m.dataset = ? AND m.from_v <= ? AND (m.to_v IS NULL OR m.to_v > ?)"
            )
        }
    };
    let version = i64::try_from(version).unwrap_or(i64::MAX);
    params.extend([SqlParam::Integer(dataset), SqlParam::Integer(version), SqlParam::Integer(version)]);
    if let Some(fragment) = fragment {
        sql.push_str(" AND (");
        sql.push_str(&fragment.sql);
        sql.push(')');
        params.extend(fragment.params);
    }
    if ordered {
        sql.push_str(" ORDER BY m.ord");
    }
    if let Some(limit) = select.limit {
        sql.push_str(" LIMIT ?");
        params.push(SqlParam::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
    }
    (sql, params)
}

fn bind_select<'q>(
    mut query: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>,
    params: Vec<SqlParam>,
) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments> {
    for param in params {
        query = match param {
            SqlParam::Integer(n) => query.bind(n),
            SqlParam::Real(x) => query.bind(x),
            SqlParam::Text(text) => query.bind(text),
            SqlParam::Bytes(bytes) => query.bind(bytes),
        };
    }
    query
}

/// Records a new version and makes it the head.
async fn insert_version(tx: &mut Transaction<'_, Sqlite>, dataset: i64, v: &VersionInfo) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO versions (dataset, number, cid, parent, author, time, message, added, removed, modified, cases)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
    .execute(&mut **tx)
    .await?;
    sqlx::query("UPDATE datasets SET head = ?, cases = ? WHERE id = ?")
        .bind(v.number as i64)
        .bind(v.cases as i64)
        .bind(dataset)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Case ids and content ids, compactly: the ids' text end to end.
#[derive(Default)]
pub(crate) struct Listing {
    text: String,
    /// Where each id ends in `text`.
    ends: Vec<u32>,
    cids: Vec<[u8; 32]>,
}

impl Listing {
    pub(crate) fn push(&mut self, id: &str, cid: [u8; 32]) -> Result<(), StoreError> {
        self.text.push_str(id);
        let end = u32::try_from(self.text.len())
            .map_err(|_| StoreError::Corrupt("a first version's case ids add up to more than 4 GiB".into()))?;
        self.ends.push(end);
        self.cids.push(cid);
        Ok(())
    }

    /// The number of cases listed.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn content_id(&self, i: usize) -> &[u8; 32] {
        &self.cids[i]
    }

    fn id(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// The places of the cases in the order of their ids; an id listed twice is an error.
    fn in_id_order(&self) -> Result<Vec<u32>, StoreError> {
        let mut order: Vec<u32> = (0..self.ends.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.id(a as usize).cmp(self.id(b as usize)));
        match order.windows(2).find(|pair| self.id(pair[0] as usize) == self.id(pair[1] as usize)) {
            Some(pair) => Err(StoreError::DuplicateId(self.id(pair[0] as usize).to_owned())),
            None => Ok(order),
        }
    }

    /// `err`, or the id listed twice that caused it.
    pub(crate) fn explain(&self, err: StoreError) -> StoreError {
        match self.in_id_order() {
            Err(twice) => twice,
            Ok(_) => err,
        }
    }

    /// The content id of a first version holding these cases; an id listed twice is an error.
    pub(crate) fn first_version_id(&self, dataset: &str) -> Result<String, StoreError> {
        let order = self.in_id_order()?;
        let cases = order.into_iter().map(|i| (self.id(i as usize), &self.cids[i as usize]));
        Ok(casebook_canon::first_version_id(dataset, cases)?)
    }
}
