//! `casebook store gc` and what `store check` says of what nothing refers to, end to end on
//! both stores: a purge's leftovers (a dataset's rows and a run's results deleted with SQL, as
//! a purge of all their cases leaves them) are counted, removed, and nothing else is.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use sqlx::Connection;

use crate::cli::{Backend, Folder, run};

on_both!(gc_removes_what_a_purge_leaves_and_check_counts_it);

/// Raw SQL on the store `b` names, in `dir`.
fn execute(b: &Backend, dir: &Folder, sql: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        match b {
            Backend::Embedded => {
                let url = format!("sqlite://{}", dir.join(".casebook/store.db").display());
                let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
            }
            Backend::Postgres(url) => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
            }
        }
    });
}

fn json(b: &Backend, dir: &Folder, args: &[&str]) -> Value {
    let out = run(b.cb(dir).arg("--format").arg("json").args(args));
    assert_eq!(out.status, Some(0), "{out:?}");
    serde_json::from_str(out.stdout.trim()).unwrap()
}

fn gc_removes_what_a_purge_leaves_and_check_counts_it(b: &Backend) {
    let dir = Folder::new();
    assert_eq!(run(b.cb(&dir).arg("init")).status, Some(0));
    // Rows in letta's shape (`input`, `ground_truth`); `b` is in both datasets.
    let row = |id: &str| format!("{{\"id\": \"{id}\", \"input\": \"say {id}\", \"ground_truth\": \"{id}\"}}\n");
    let kept: String = ["a", "b", "c"].iter().map(|id| row(id)).collect();
    let gone: String = ["b", "x", "y"].iter().map(|id| row(id)).collect();
    for (name, rows) in [("kept", kept), ("gone", gone)] {
        let file = dir.file(&format!("{name}.jsonl"), rows);
        let out = run(b.cb(&dir).args(["import", "--dataset", name]).arg(file));
        assert_eq!(out.status, Some(0), "{out:?}");
    }
    // A run on each: the agent's outputs are kept by run hash.
    for name in ["kept", "gone"] {
        let out = run(b.cb(&dir).args(["run", "--dataset", name, "--target", "builtin:echo", "--grader", "contains"]));
        assert_eq!(out.status, Some(0), "{out:?}");
    }
    let out = run(b.cb(&dir).args(["store", "check"]));
    assert!(!out.stderr.contains("nothing refers to"), "{}", out.stderr);

    let of = "(SELECT id FROM datasets WHERE name = 'gone')";
    let run_of = "(SELECT seq FROM runs ORDER BY seq DESC LIMIT 1)";
    execute(
        b,
        &dir,
        &format!(
            "DELETE FROM members WHERE dataset = {of}; DELETE FROM versions WHERE dataset = {of};
             DELETE FROM events WHERE dataset = {of}; DELETE FROM datasets WHERE name = 'gone';
             DELETE FROM run_results WHERE key >= {run_of} * 4294967296 AND key < ({run_of} + 1) * 4294967296;"
        ),
    );

    let out = run(b.cb(&dir).args(["store", "check"]));
    assert_eq!(out.status, Some(0), "not damage: {out:?}");
    assert!(out.stderr.contains("sound: 5 case bodies"), "{}", out.stderr);
    // `b`'s output is the first run's too (same run hash, reused by the second run): it stays.
    assert!(out.stderr.contains("note: 2 case bodies and 2 run outputs that nothing refers to ("), "{}", out.stderr);
    assert!(out.stderr.contains("; `casebook store gc` removes them"), "{}", out.stderr);
    let check = json(b, &dir, &["store", "check"]);
    assert_eq!(
        (&check["unreferenced"]["bodies"], &check["unreferenced"]["outputs"]),
        (&2.into(), &2.into()),
        "{check}"
    );
    let bytes = check["unreferenced"]["body_bytes"].as_u64().unwrap();
    assert!(bytes > 50, "{check}");

    let out = run(b.cb(&dir).args(["store", "gc", "--dry-run"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(out.stdout.starts_with("would remove 2 case bodies and 2 run outputs ("), "{}", out.stdout);
    let gc = json(b, &dir, &["store", "gc"]);
    assert_eq!(gc["removed"], check["unreferenced"], "{gc}");
    assert_eq!(gc["dry_run"], false);
    let out = run(b.cb(&dir).args(["store", "gc"]));
    assert!(out.stdout.starts_with("removed nothing (0 bytes)"), "{}", out.stdout);

    let out = run(b.cb(&dir).args(["store", "check"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(out.stderr.contains("sound: 3 case bodies"), "{}", out.stderr);
    assert!(!out.stderr.contains("nothing refers to"), "{}", out.stderr);
    // What is still named reads as before: the dataset, and the run's outputs (`--regrade`
    // grades them again without calling the agent).
    let out = run(b.cb(&dir).args(["export", "kept@v1", "--to", "casebook"]));
    assert_eq!(out.stdout.lines().count(), 3, "{out:?}");
    let out = run(b.cb(&dir).args([
        "run",
        "--dataset",
        "kept",
        "--target",
        "builtin:echo",
        "--grader",
        "contains",
        "--regrade",
    ]));
    assert_eq!(out.status, Some(0), "{out:?}");
}
