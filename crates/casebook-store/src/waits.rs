//! Telling that an operation waits for a lock another process holds: a `put` behind a long
//! import of the embedded store waits in SQLite's busy handler, a PostgreSQL import behind
//! another's row or table locks waits in the server, and both look like a hung command unless
//! someone says so. [`watched`] runs an operation and, once it has taken [`PATIENCE`], asks
//! the database (or the kernel's table of file locks) whether the operation is in fact waiting
//! for another process, and tells the [`on_wait`] notice, once, what it waits for and who holds
//! it. It never guesses: an operation that is only slow (a large import doing its work) is not
//! reported.
//!
//! Watched: opening a store (the embedded store's schema upgrade, and PostgreSQL's, which waits
//! for another process's upgrade or for the locks of its work on the tables it alters), every
//! commit (so `import`, `put`, `review`, `capture`, `freeze`), tags, run results, and API key
//! writes. Who holds an embedded store's lock is read from Linux's `/proc/locks`; elsewhere an
//! embedded store's wait is not told (PostgreSQL's is, from the server, on any system).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long an operation runs before [`watched`] looks whether it waits for a lock, and how
/// often it looks again until it finds it does.
pub const PATIENCE: Duration = Duration::from_secs(1);

/// What an operation waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The store, as messages name it (a folder, or a URL without its password).
    pub store: String,
    /// The lock, when the database says (`the row of dataset `support``, `table `blobs``); for
    /// the embedded store, always the store's write lock, so `None`.
    pub lock: Option<String>,
    /// Who holds it, when known.
    pub holder: Option<Holder>,
}

/// The process that holds a lock another waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its process id (on the machine that runs it: for PostgreSQL, the client's own process
    /// when it is a casebook command, which says its pid in its connection's name).
    pub pid: Option<u32>,
    /// Whether it is a casebook command (or server).
    pub casebook: bool,
    /// The program's name, when it is not casebook and the system says.
    pub program: Option<String>,
}

type WaitNotice = Box<dyn Fn(&Wait) + Send + Sync>;

static WAIT_NOTICE: std::sync::OnceLock<WaitNotice> = std::sync::OnceLock::new();

/// Sets, once for the process, what an operation tells when it waits for another process's
/// lock (see the module's documentation). Later calls change nothing.
pub fn on_wait(notice: impl Fn(&Wait) + Send + Sync + 'static) {
    let _ = WAIT_NOTICE.set(Box::new(notice));
}

/// How to find out whether an operation of a store waits for a lock.
pub(crate) enum Probe<'a> {
    /// The embedded store whose database file this is.
    File(&'a Path),
    /// The PostgreSQL store whose connections these options make (`url` as messages name it,
    /// password hidden; the store may not be open yet, its schema being upgraded); `dataset` is
    /// the dataset the operation locks, if any, to name a row lock by.
    Postgres { options: std::sync::Arc<sqlx::postgres::PgConnectOptions>, url: &'a str, dataset: Option<&'a str> },
}

/// Runs `operation`, telling the [`on_wait`] notice (once) if it waits for another process's
/// lock for longer than [`PATIENCE`].
pub(crate) async fn watched<F: Future>(probe: Probe<'_>, operation: F) -> F::Output {
    if WAIT_NOTICE.get().is_none() {
        return operation.await;
    }
    let watch = async {
        loop {
            tokio::time::sleep(PATIENCE).await;
            if let Some(wait) = probe.look().await {
                if let Some(notice) = WAIT_NOTICE.get() {
                    notice(&wait);
                }
                break;
            }
        }
        std::future::pending::<()>().await;
    };
    tokio::select! {
        out = operation => out,
        () = watch => unreachable!("the watch never ends"),
    }
}

impl Probe<'_> {
    async fn look(&self) -> Option<Wait> {
        match self {
            Probe::File(path) => {
                let store = path.parent().unwrap_or(path).display().to_string();
                let pid = sqlite_writer(path)?;
                Some(Wait { store, lock: None, holder: Some(Holder::local(pid)) })
            }
            Probe::Postgres { options, url, dataset } => postgres_wait(options, url, *dataset).await,
        }
    }
}

impl Holder {
    /// Process `pid` of this machine, named as the system names it.
    fn local(pid: u32) -> Self {
        let program = fs_err::read_to_string(format!("/proc/{pid}/comm")).ok().map(|s| s.trim().to_owned());
        let casebook = program.as_deref() == Some("casebook");
        Holder { pid: Some(pid), casebook, program: program.filter(|_| !casebook) }
    }
}

/// The process, other than this one, that holds the write lock of the SQLite database at
/// `db`, from the kernel's table of POSIX locks (Linux's `/proc/locks`; elsewhere nothing is
/// known, and nothing is said). SQLite's default VFS locks byte 120 of the `-shm` file to write
/// in write-ahead-log mode, and the bytes from 2^30 of the database file itself (pending,
/// reserved, then the shared range) with a rollback journal.
#[cfg(unix)]
fn sqlite_writer(db: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let inode = |path: &Path| fs_err::metadata(path).ok().map(|m| m.ino());
    let mut shm = PathBuf::from(db).into_os_string();
    shm.push("-shm");
    let (db_inode, shm_inode) = (inode(db), inode(Path::new(&shm)));
    let table = fs_err::read_to_string("/proc/locks").ok()?;
    let own = std::process::id();
    table.lines().find_map(|line| {
        // `1: POSIX  ADVISORY  WRITE 4242 08:01:1234 120 120` (a waiter's lines have `->`).
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, "POSIX", _, "WRITE", pid, file, start, _] = fields.as_slice() else { return None };
        let pid: u32 = pid.parse().ok()?;
        let ino: u64 = file.rsplit(':').next()?.parse().ok()?;
        let start: u64 = start.parse().ok()?;
        const PENDING: u64 = 0x4000_0000;
        let writes = (Some(ino) == shm_inode && start == 120)
            || (Some(ino) == db_inode && (PENDING..PENDING + 512).contains(&start));
        (writes && pid != own).then_some(pid)
    })
}

#[cfg(not(unix))]
fn sqlite_writer(_: &Path) -> Option<u32> {
    None
}

/// Whether a connection of this process to the store at `url` waits for a lock, and on what,
/// from `pg_locks` (asked on a connection of its own: the store's may all be busy).
async fn postgres_wait(options: &sqlx::postgres::PgConnectOptions, url: &str, dataset: Option<&str>) -> Option<Wait> {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::PgConnection::connect_with(options).await.ok()?;
    let row = sqlx::query(
        "SELECT l.locktype, l.relation::regclass::text AS relation, b.application_name AS holder, b.pid AS backend
         FROM pg_stat_activity w
         JOIN pg_locks l ON l.pid = w.pid AND NOT l.granted
         LEFT JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS h(pid) ON true
         LEFT JOIN pg_stat_activity b ON b.pid = h.pid
         WHERE w.application_name = $1
         ORDER BY b.pid IS NULL LIMIT 1",
    )
    .bind(crate::postgres::application_name())
    .fetch_optional(&mut conn)
    .await
    .ok()??;
    let _ = conn.close().await;
    let kind: String = row.get("locktype");
    let relation: Option<String> = row.get("relation");
    let lock = match (kind.as_str(), relation, dataset) {
        ("relation", Some(table), _) => format!("table `{table}`"),
        ("transactionid" | "tuple", _, Some(dataset)) => format!("dataset `{dataset}`"),
        // The only advisory lock casebook takes.
        ("advisory", ..) => "the schema upgrade".to_owned(),
        (other, ..) => format!("a {other} lock"),
    };
    let holder = row.get::<Option<String>, _>("holder").map(|name| {
        let pid = name.strip_prefix("casebook ").and_then(|pid| pid.parse().ok());
        let casebook = name == "casebook" || pid.is_some();
        Holder { pid, casebook, program: (!casebook && !name.is_empty()).then_some(name) }
    });
    Some(Wait { store: url.to_owned(), lock: Some(lock), holder })
}
