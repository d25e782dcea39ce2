//! A command behind another's lock says that it waits, on what and for whom, then goes on once
//! the lock is released; `-q` keeps it quiet. The lock is held by the test itself, from a
//! connection of its own, as another casebook command's commit would hold it. (Files: native
//! JSONL rows, the shape of the README's `support` examples.)
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::cli::{Backend, Folder, run};

on_both!(a_put_behind_another_writer_says_it_waits_and_then_writes);

/// How long the test holds its lock: past the second after which a command looks why it waits.
const HELD: Duration = Duration::from_millis(2500);

fn a_put_behind_another_writer_says_it_waits_and_then_writes(backend: &Backend) {
    let dir = Folder::new();
    run(backend.cb(&dir).arg("init")).expect_status(0);
    let first = dir.file("support.jsonl", "{\"id\": \"s1\", \"input\": \"Where is my invoice?\"}\n");
    run(backend.cb(&dir).args(["import", "--dataset", "support"]).arg(&first)).expect_status(0);
    let more = dir.file("more.jsonl", "{\"id\": \"s2\", \"input\": \"Cancel my plan\"}\n");
    let other = dir.file("other.jsonl", "{\"id\": \"s3\", \"input\": \"Change my address\"}\n");
    let spawn = |quiet: bool| -> Child {
        let mut cmd = command(backend, &dir);
        cmd.args(["put", "support"]).arg(if quiet { &other } else { &more });
        if quiet {
            cmd.arg("-q");
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let me = std::process::id();
    let mut other = 0;
    let (said, quiet) = runtime.block_on(async {
        let held = Lock::take(backend, &dir).await;
        let (loud, quiet) = (spawn(false), spawn(true));
        other = quiet.id();
        tokio::time::sleep(HELD).await;
        // Neither has written while the lock was held.
        let count = run(backend.cb(&dir).args(["cases", "support", "--format", "json"]));
        assert_eq!(count.stdout.lines().count(), 1, "{count:?}");
        held.release().await;
        (loud.wait_with_output().unwrap(), quiet.wait_with_output().unwrap())
    });
    let stderr = String::from_utf8(said.stderr).unwrap();
    assert_eq!(said.status.code(), Some(0), "{stderr}");
    let expected = match backend {
        // The holder of an SQLite lock is found in the kernel's table of locks: this test's
        // process, whose name is the test binary's.
        Backend::Embedded => format!(
            "writing to the store {}; this command goes on as soon as that one is done…",
            dir.join(".casebook").display()
        ),
        // The holder of a PostgreSQL lock is found from the server, and its pid from the name
        // casebook gives its connections (which the test's connection borrows).
        // PostgreSQL names every process ahead in the lock's queue as blocking: the test's, or
        // the other `put` when it queued first.
        Backend::Postgres(url) => format!(
            "holding the lock on dataset `support` in the store {}; this command goes on as soon as that one is done…",
            casebook_store::redact(url)
        ),
    };
    let waiting: Vec<&str> = stderr.lines().filter(|l| l.starts_with("waiting for ")).collect();
    assert_eq!(waiting.len(), 1, "said once: {stderr}");
    assert!(waiting[0].ends_with(&expected), "{stderr}");
    let holder = |pid: u32| waiting[0].contains(&format!("pid {pid})"));
    assert!(holder(me) || (matches!(backend, Backend::Postgres(_)) && holder(other)), "{stderr}");
    assert!(stderr.contains("wrote support@v"), "{stderr}");
    // Both wrote once the lock was released; the quiet one said nothing.
    assert_eq!(quiet.status.code(), Some(0));
    assert_eq!(String::from_utf8(quiet.stderr).unwrap(), "");
    let log = run(backend.cb(&dir).args(["log", "support"]));
    assert!(log.stdout.starts_with("v3 "), "{log:?}");
}

/// [`Backend::cb`] as a process to start and watch (`assert_cmd` only runs one to its end).
pub fn command(backend: &Backend, dir: &Folder) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("casebook"));
    cmd.current_dir(dir.join("")).env("NO_COLOR", "1").env("CASEBOOK_AUTHOR", "tester");
    cmd.env("CASEBOOK_TIME", "2026-11-23T10:00:00Z").env_remove("CASEBOOK_URL").env_remove("CASEBOOK_TOKEN");
    match backend {
        Backend::Embedded => cmd.env_remove("CASEBOOK_STORE"),
        Backend::Postgres(url) => cmd.env("CASEBOOK_STORE", url),
    };
    cmd
}

/// The write lock another command's commit holds, taken by the test.
enum Lock {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Lock {
    async fn take(backend: &Backend, dir: &Folder) -> Self {
        use sqlx::Connection;
        match backend {
            Backend::Embedded => {
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(dir.join(".casebook/store.db"));
                let mut conn = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
                sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut conn).await.unwrap();
                Lock::Sqlite(conn)
            }
            Backend::Postgres(url) => {
                let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
                let options = options.application_name(&format!("casebook {}", std::process::id()));
                let mut conn = sqlx::PgConnection::connect_with(&options).await.unwrap();
                sqlx::raw_sql("BEGIN; SELECT id FROM datasets WHERE name = 'support' FOR UPDATE")
                    .execute(&mut conn)
                    .await
                    .unwrap();
                Lock::Postgres(conn)
            }
        }
    }

    async fn release(self) {
        match self {
            Lock::Sqlite(mut conn) => drop(sqlx::raw_sql("ROLLBACK").execute(&mut conn).await.unwrap()),
            Lock::Postgres(mut conn) => drop(sqlx::raw_sql("ROLLBACK").execute(&mut conn).await.unwrap()),
        }
    }
}

/// `init` of a PostgreSQL store while another process holds the schema upgrade's lock (as
/// another casebook making or upgrading the same store would) says that it waits and for what,
/// then makes the store once the lock is released.
#[test]
fn making_a_postgresql_store_behind_another_upgrade_says_it_waits() {
    use sqlx::Connection;
    let url = crate::cli::postgres_database();
    let backend = Backend::Postgres(url.clone());
    let dir = Folder::new();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let out = runtime.block_on(async {
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        let mut held = sqlx::PgConnection::connect_with(&options.application_name("psql")).await.unwrap();
        // casebook's upgrade lock: the advisory lock keyed "casebook".
        sqlx::raw_sql("SELECT pg_advisory_lock(7161131761776160619)").execute(&mut held).await.unwrap();
        let child = command(&backend, &dir).arg("init").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        tokio::time::sleep(HELD).await;
        sqlx::raw_sql("SELECT pg_advisory_unlock_all()").execute(&mut held).await.unwrap();
        child.wait_with_output().unwrap()
    });
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let waiting: Vec<&str> = stderr.lines().filter(|l| l.starts_with("waiting for ")).collect();
    assert_eq!(
        waiting,
        [format!(
            "waiting for another program (`psql`) holding the lock on the schema upgrade in the store {}; \
             this command goes on as soon as that one is done…",
            casebook_store::redact(&url)
        )],
        "{stderr}"
    );
    run(backend.cb(&dir).args(["datasets"])).expect_status(0);
}

/// `keys create` behind another process's write lock on the embedded store says it waits (key
/// writes are watched as commits are), then makes the key.
#[test]
fn a_key_made_behind_another_writer_says_it_waits() {
    let backend = Backend::Embedded;
    let dir = Folder::new();
    run(backend.cb(&dir).arg("init")).expect_status(0);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let out = runtime.block_on(async {
        let held = Lock::take(&backend, &dir).await;
        let child = command(&backend, &dir)
            .args(["keys", "create", "--project", "default", "--scope", "read"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        tokio::time::sleep(HELD).await;
        held.release().await;
        child.wait_with_output().unwrap()
    });
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let waiting: Vec<&str> = stderr.lines().filter(|l| l.starts_with("waiting for ")).collect();
    assert_eq!(waiting.len(), 1, "{stderr}");
    let expected = format!(
        "pid {}) writing to the store {}; this command goes on as soon as that one is done…",
        std::process::id(),
        dir.join(".casebook").display()
    );
    assert!(waiting[0].ends_with(&expected), "{stderr}");
    assert!(String::from_utf8(out.stdout).unwrap().contains("cb_"), "the key was made");
}
