//! The store commands on a real SQLite file: versions, diffs, exports, and what must survive a
//! crash or a race.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli::{Backend, Folder, casebook, cb, jsonl, log_versions, run};

/// The binary as a plain child process (to kill it, or to run several at once), with the same
/// environment as [`cb`]: a `CASEBOOK_STORE` in the test's environment must not leak in.
fn child(dir: &Folder) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("casebook"));
    cmd.current_dir(dir.join("")).env("NO_COLOR", "1").env("CASEBOOK_AUTHOR", "tester").env_remove("CASEBOOK_STORE");
    cmd
}

on_both!(
    versions_diffs_and_exports,
    bad_input_commits_nothing,
    opening_a_store_of_an_older_schema_says_it_upgrades_it,
    a_killed_import_leaves_the_previous_head_intact,
    racing_commits_land_or_conflict,
    rm_of_a_case_that_is_not_there_names_it_and_writes_nothing,
    an_export_does_not_confirm_draft_expectations,
);

/// [`child`] on the store `b` names.
fn child_on(b: &Backend, dir: &Folder) -> std::process::Command {
    let mut cmd = child(dir);
    if let Backend::Postgres(url) = b {
        cmd.env("CASEBOOK_STORE", url);
    }
    cmd
}

fn ok(cmd: &mut assert_cmd::Command) -> String {
    let out = run(cmd);
    assert_eq!(out.status, Some(0), "{out:?}");
    out.stdout
}

const V1: &str = "{\"id\": \"a\", \"input\": \"What is 2+2?\", \"ground_truth\": \"4\"}\n{\"id\": \"b\", \"input\": \"Capital of France?\", \"ground_truth\": \"Paris\"}\n";

fn versions_diffs_and_exports(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let v1 = dir.file("qa.jsonl", V1);
    assert!(ok(b.cb(&dir).args(["import", "--dataset", "qa", "-m", "first"]).arg(&v1)).starts_with("created qa v1 "));
    // The same content again: no version.
    assert!(ok(b.cb(&dir).args(["import", "--dataset", "qa"]).arg(&v1)).starts_with("no change: qa v1 "));
    let v2 = dir.file(
        "qa2.jsonl",
        V1.replace("Paris", "Paris, France") + "{\"id\": \"c\", \"input\": \"2*3?\", \"ground_truth\": \"6\"}\n",
    );
    let created = ok(b.cb(&dir).args(["commit", "qa"]).arg(&v2).args(["-m", "more"]));
    assert!(created.contains("v2") && created.contains(": 3 cases, +1 -0 ~1"), "{created}");
    let one = dir.file("one.jsonl", "{\"id\": \"z\", \"input\": \"alone\"}\n");
    let alone = ok(b.cb(&dir).args(["import", "--dataset", "single"]).arg(&one));
    assert!(alone.starts_with("created single v1 (") && alone.contains("): 1 case, +1 -0 ~0"), "{alone}");
    let log = ok(b.cb(&dir).args(["log", "single"]));
    assert!(log.contains("  +1 -0 ~0  1 case  import "), "{log}");

    let diff = ok(b.cb(&dir).args(["diff", "qa@v1", "qa@latest"]));
    assert_eq!(diff, "qa v1 → v2\n+ c\n~ b\n    /expected/output: \"Paris\" → \"Paris, France\"\n");
    let lines = jsonl(&ok(b.cb(&dir).args(["diff", "qa@v1", "qa@v2", "--format", "json"])));
    assert_eq!(lines[0], serde_json::json!({"change": "added", "id": "c"}));
    assert_eq!((lines[1]["change"].as_str(), lines[1]["id"].as_str()), (Some("modified"), Some("b")));
    assert_eq!(
        lines[2],
        serde_json::json!({"summary": {"dataset": "qa", "from": 1, "to": 2, "added": 1, "removed": 0, "modified": 1, "moved": 0}})
    );

    // An old version exports as it was, in the letta shape it came in.
    ok(b.cb(&dir).args(["tag", "qa@v1", "prod"]));
    let exported = ok(b.cb(&dir).args(["export", "qa@prod", "--to", "letta", "-q"]));
    let rows: Vec<Value> = exported.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let original: Vec<Value> = V1.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows, original);

    let log = ok(b.cb(&dir).args(["log", "qa"]));
    assert!(log.contains("v2 ") && log.contains("more") && log.contains("prod: v1"), "{log}");
    // Each content of the case as a block: where it was, who made it and why, what changed.
    let history = ok(b.cb(&dir).args(["history", "qa", "b"]));
    let blocks: Vec<&str> = history.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
    assert_eq!(blocks.len(), 2, "{history}");
    assert!(blocks[0].contains("in v1–v1\n  v1 by tester at 2026-11-23T10:00:00Z: first\n  (added)"), "{history}");
    assert!(blocks[1].contains("in v2–head\n  v2 by tester at 2026-11-23T10:00:00Z: more\n"), "{history}");
    assert!(blocks[1].contains("  /expected/output: \"Paris\" → \"Paris, France\""), "{history}");
    let json: Vec<Value> = ok(b.cb(&dir).args(["history", "qa", "b", "--format", "json"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json[1]["changes"][0]["new"], "Paris, France");
    assert_eq!(json[1]["case"]["expected"]["output"], "Paris, France");
    assert_eq!(json[0]["message"], "first");
    let datasets = ok(b.cb(&dir).args(["datasets", "--format", "json"]));
    let first: Value = serde_json::from_str(datasets.lines().next().unwrap()).unwrap();
    assert_eq!(
        (first["name"].as_str(), first["head"].as_u64(), first["cases"].as_u64()),
        (Some("qa"), Some(2), Some(3))
    );

    // rm and put touch only their cases.
    ok(b.cb(&dir).args(["rm", "qa", "a"]));
    let put = dir.file("put.jsonl", "{\"id\": \"d\", \"input\": \"new\"}\n");
    ok(b.cb(&dir).args(["put", "qa"]).arg(&put));
    let ids: Vec<String> = ok(b.cb(&dir).args(["export", "qa", "--to", "casebook", "-q"]))
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["b", "c", "d"]);
    let case: Value = serde_json::from_str(&ok(b.cb(&dir).args(["show", "qa@v1", "b"]))).unwrap();
    assert_eq!(case["expected"]["output"], "Paris");
}

fn bad_input_commits_nothing(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let v1 = dir.file("qa.jsonl", V1);
    ok(b.cb(&dir).args(["import", "--dataset", "qa"]).arg(&v1));
    let bad = dir.file("bad.jsonl", format!("{V1}{{\"id\": \"c\", \"input\": 3\n"));
    let out = run(b.cb(&dir).args(["commit", "qa"]).arg(&bad));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert!(out.stderr.contains("nothing was committed"), "{}", out.stderr);
    assert!(ok(b.cb(&dir).args(["log", "qa"])).lines().count() == 1);
}

/// Takes the store `b` names back to its schema before the last migration, as an older casebook
/// left it.
fn back_one_schema(b: &Backend, dir: &Folder) {
    use sqlx::Connection;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        match b {
            // Schema 14: no purges (the `admin` scope left allowed: migrating again allows it).
            Backend::Embedded => {
                let file = dir.join(".casebook/store.db");
                let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display())).await.unwrap();
                sqlx::raw_sql(
                    "DROP TABLE purged_members; DROP TABLE purges; DELETE FROM schema_version WHERE version = 15;",
                )
                .execute(&mut conn)
                .await
                .unwrap();
            }
            // Schema 9: no purges.
            Backend::Postgres(url) => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::raw_sql(
                    "DROP TABLE purged_members; DROP TABLE purges; DELETE FROM casebook_schema WHERE version = 10;",
                )
                .execute(&mut conn)
                .await
                .unwrap();
            }
        }
    });
}

/// A command that opens a store of an older schema says it upgrades it (a migration of a large
/// store takes a while) before it does, on stderr, and not with `--quiet`; the next command finds
/// the store upgraded and says nothing.
fn opening_a_store_of_an_older_schema_says_it_upgrades_it(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let v1 = dir.file("qa.jsonl", V1);
    ok(b.cb(&dir).args(["import", "--dataset", "qa"]).arg(&v1));
    let (from, to) = match b {
        Backend::Embedded => (14, 15),
        Backend::Postgres(_) => (9, 10),
    };
    back_one_schema(b, &dir);
    let quiet = run(b.cb(&dir).args(["datasets", "-q"]));
    assert_eq!((quiet.status, quiet.stderr.as_str()), (Some(0), ""));
    back_one_schema(b, &dir);
    let upgraded = run(b.cb(&dir).args(["datasets", "--format", "json"]));
    assert_eq!(upgraded.status, Some(0), "{upgraded:?}");
    let note = format!("from schema {from} to {to} before the command runs");
    assert!(
        upgraded.stderr.starts_with("note: upgrading the store `") && upgraded.stderr.contains(&note),
        "{upgraded:?}"
    );
    assert!(!upgraded.stderr.contains("test-"), "the password is shown: {}", upgraded.stderr);
    assert_eq!(upgraded.stdout, ok(b.cb(&dir).args(["datasets", "--format", "json"])));
    let again = run(b.cb(&dir).args(["datasets"]));
    assert_eq!((again.status, again.stderr.as_str()), (Some(0), ""));
    let rows = ok(b.cb(&dir).args(["export", "qa", "--to", "letta", "-q"]));
    assert_eq!(rows.lines().count(), 2);
}

#[test]
fn no_store_is_a_usage_error_that_says_what_to_do() {
    let dir = Folder::new();
    let out = run(cb(&dir).args(["datasets"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("run `casebook init`"), "{}", out.stderr);
}

/// A commit killed at any point leaves the previous head as it was.
fn a_killed_import_leaves_the_previous_head_intact(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let v1 = dir.file("qa.jsonl", V1);
    ok(b.cb(&dir).args(["import", "--dataset", "qa"]).arg(&v1));
    // A file that takes a while to commit.
    let big = big_file(&dir, "question number", " with some text to store");
    for delay in [50u64, 300, 800] {
        let mut child = child_on(b, &dir)
            .args(["commit", "qa"])
            .arg(&big)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let versions = log_versions(&ok(b.cb(&dir).args(["log", "qa", "--format", "json"])));
        // Either the commit had landed whole before the kill, or it left no trace.
        match versions.len() {
            1 => {
                let rows = ok(b.cb(&dir).args(["export", "qa", "--to", "letta", "-q"]));
                assert_eq!(rows.lines().count(), 2);
            }
            2 => assert_eq!(versions[1]["cases"], 150_000),
            n => panic!("{n} versions"),
        }
    }
}

/// `big.jsonl` in `dir`: 150,000 rows, `{"id": "I", "input": "BEFORE I AFTER"}`, long enough to
/// take a while to commit.
fn big_file(dir: &Folder, before: &str, after: &str) -> std::path::PathBuf {
    let rows: String =
        (0..150_000).map(|i| format!("{{\"id\": \"{i}\", \"input\": \"{before} {i}{after}\"}}\n")).collect();
    dir.file("big.jsonl", rows)
}

/// Starts `casebook import --dataset qa BIG` in `dir` and kills it (SIGKILL) after `delay` ms.
fn kill_an_import(dir: &Folder, big: &std::path::Path, delay: u64) {
    let import =
        child(dir).args(["import", "--dataset", "qa"]).arg(big).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    let mut import = import.expect("start the import");
    std::thread::sleep(Duration::from_millis(delay));
    let _ = import.kill(); // SIGKILL
    let _ = import.wait();
}

/// The first import into an empty store is written with a rollback journal, not the log: killed
/// at any point, it leaves the store empty and usable.
#[test]
fn a_killed_first_import_leaves_an_empty_store() {
    let dir = Folder::new();
    let big = big_file(&dir, "question number", " with some text to store");
    for delay in [50u64, 300, 800] {
        let _ = fs_err::remove_dir_all(dir.join(".casebook"));
        ok(cb(&dir).arg("init"));
        kill_an_import(&dir, &big, delay);
        let datasets = ok(cb(&dir).args(["datasets", "--format", "json"]));
        match datasets.lines().count() {
            0 => {}
            1 => assert!(datasets.contains("\"cases\":150000"), "{datasets}"),
            n => panic!("{n} datasets: {datasets}"),
        }
        // The store takes the next import whole.
        let small = dir.file("qa.jsonl", V1);
        ok(cb(&dir).args(["import", "--dataset", "small"]).arg(&small));
        let rows = ok(cb(&dir).args(["export", "small", "--to", "letta", "-q"]));
        assert_eq!(rows.lines().count(), 2);
    }
}

/// The definitions of every index of the PostgreSQL store at `url`, with their ids (oids).
fn postgres_indexes(url: &str) -> Vec<(String, u32)> {
    use sqlx::Connection;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        let rows: Vec<(String, i32)> = sqlx::query_as(
            "SELECT indexdef, c.oid::int4 FROM pg_indexes i JOIN pg_class c ON c.relname = i.indexname
             WHERE i.schemaname = current_schema() ORDER BY 1",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        rows.into_iter().map(|(definition, oid)| (definition, oid as u32)).collect()
    })
}

/// The first import into an empty PostgreSQL store is one transaction that drops two indexes
/// and builds them at its end: killed at any point, it leaves the store empty (or holding the
/// whole import), its indexes as they were, and the next import lands whole.
#[test]
fn a_killed_first_import_into_an_empty_postgres_store_leaves_it_empty() {
    let dir = Folder::new();
    let big = big_file(&dir, "question number", " with some text to store");
    let small = dir.file("qa.jsonl", V1);
    for delay in [150u64, 500, 1200] {
        let b = Backend::postgres();
        let Backend::Postgres(url) = &b else { unreachable!() };
        ok(b.cb(&dir).arg("init"));
        let indexes = postgres_indexes(url);
        let mut import = child_on(&b, &dir);
        import.args(["import", "--dataset", "qa"]).arg(&big).stdout(Stdio::null()).stderr(Stdio::null());
        let mut import = import.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let _ = import.kill(); // SIGKILL
        let _ = import.wait();
        let datasets = ok(b.cb(&dir).args(["datasets", "--format", "json"]));
        let landed = match datasets.lines().count() {
            0 => false,
            1 => {
                assert!(datasets.contains("\"cases\":150000"), "{datasets}");
                true
            }
            n => panic!("{n} datasets: {datasets}"),
        };
        ok(b.cb(&dir).args(["store", "check"]));
        let after = postgres_indexes(url);
        if landed {
            let definitions = |all: &[(String, u32)]| all.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>();
            assert_eq!(definitions(&after), definitions(&indexes));
        } else {
            assert_eq!(after, indexes, "a killed import changed the indexes");
        }
        ok(b.cb(&dir).args(["import", "--dataset", "small"]).arg(&small));
        let rows = ok(b.cb(&dir).args(["export", "small", "--to", "letta", "-q"]));
        assert_eq!(rows.lines().count(), 2);
    }
}

/// An import into a store that already holds datasets (through the log, with the store file
/// flushed behind it): killed at any point, it leaves the store as it was, and the next command
/// finds it whole.
#[test]
fn a_killed_import_into_a_store_with_data_leaves_it_as_it_was() {
    let dir = Folder::new();
    let big = big_file(&dir, "another question", ", stored beside the first");
    let small = dir.file("qa.jsonl", V1);
    for delay in [50u64, 300, 800] {
        let _ = fs_err::remove_dir_all(dir.join(".casebook"));
        ok(cb(&dir).arg("init"));
        ok(cb(&dir).args(["import", "--dataset", "small"]).arg(&small));
        let before = ok(cb(&dir).args(["export", "small", "--to", "casebook", "-q"]));
        kill_an_import(&dir, &big, delay);
        let datasets = ok(cb(&dir).args(["datasets", "--format", "json"]));
        match datasets.lines().count() {
            1 => {}
            2 => assert!(datasets.contains("\"cases\":150000"), "{datasets}"),
            n => panic!("{n} datasets: {datasets}"),
        }
        assert_eq!(ok(cb(&dir).args(["export", "small", "--to", "casebook", "-q"])), before);
        ok(cb(&dir).args(["store", "check"]));
        // The store takes the next import whole.
        ok(cb(&dir).args(["import", "--dataset", "again"]).arg(&small));
        assert_eq!(ok(cb(&dir).args(["export", "again", "--to", "casebook", "-q"])), before);
    }
}

/// Several writers at once: each commit lands or reports a conflict; none is lost.
fn racing_commits_land_or_conflict(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let v1 = dir.file("qa.jsonl", V1);
    ok(b.cb(&dir).args(["import", "--dataset", "qa"]).arg(&v1));
    let files: Vec<_> = (0..4)
        .map(|k| {
            let rows: String =
                (0..2000).map(|i| format!("{{\"id\": \"{k}-{i}\", \"input\": \"writer {k} case {i}\"}}\n")).collect();
            dir.file(&format!("w{k}.jsonl"), rows)
        })
        .collect();
    let start = Instant::now();
    let children: Vec<_> =
        files.iter().map(|f| child_on(b, &dir).args(["commit", "qa"]).arg(f).output_async()).collect();
    let outputs: Vec<_> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let report: Vec<String> = outputs
        .iter()
        .map(|o| {
            format!(
                "{:?}: {}{}",
                o.status.code(),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
        .collect();
    let mut landed = 0;
    for out in &outputs {
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => landed += 1,
            Some(2) => assert!(stderr.contains("moved on while this commit was prepared"), "{report:#?}"),
            _ => panic!("{report:#?}"),
        }
    }
    assert!(landed >= 1, "at least one commit lands: {report:#?}");
    let versions = log_versions(&ok(b.cb(&dir).args(["log", "qa", "--format", "json"])));
    assert_eq!(versions.len(), 1 + landed, "every landed commit is a version: {report:#?}");
    assert!(start.elapsed() < Duration::from_secs(60));
}

trait Spawn {
    fn output_async(&mut self) -> std::process::Child;
}

impl Spawn for std::process::Command {
    fn output_async(&mut self) -> std::process::Child {
        self.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start casebook")
    }
}

/// A letta CSV file goes into the store and comes back out as the same records.
#[test]
fn csv_in_and_out_of_the_store() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let csv =
        dir.file("qa.csv", "id,input,ground_truth,agent_args\n1,\"Hello, there\",007,\"{\"\"k\"\": 1}\"\n2,Bye,,\n");
    ok(cb(&dir).args(["import", "--dataset", "qa"]).arg(&csv));
    let out = dir.join("out.csv");
    ok(cb(&dir).args(["export", "qa", "--to", "letta", "-q", "-o"]).arg(&out));
    let written = fs_err::read_to_string(&out).unwrap();
    assert_eq!(written, "id,input,ground_truth,agent_args\n1,\"Hello, there\",007,\"{\"\"k\"\":1}\"\n2,Bye,,\n");
}

#[test]
fn only_init_makes_a_store_and_other_files_are_named_for_what_they_are() {
    let dir = Folder::new();
    let data = dir.file("qa.jsonl", V1);
    for (what, make, expect) in [
        ("empty", Some(&b""[..]), "is not a casebook store: the file is empty"),
        ("garbage", Some(&[7u8; 8192][..]), "is not a casebook store: it is not an SQLite database"),
        ("folder", None, "is not a casebook store: it is a folder"),
    ] {
        let store = dir.join(".casebook/store.db");
        let _ = fs_err::remove_dir_all(&store);
        let _ = fs_err::remove_file(&store);
        match make {
            Some(bytes) => {
                dir.file(".casebook/store.db", bytes);
            }
            None => fs_err::create_dir_all(&store).expect("a folder"),
        }
        for args in [&["datasets"][..], &["put", "qa"]] {
            let mut cmd = cb(&dir);
            cmd.args(args);
            if args[0] == "put" {
                cmd.arg(&data);
            }
            let out = run(&mut cmd);
            assert_eq!(out.status, Some(2), "{what} {args:?}: {out:?}");
            assert!(out.stderr.contains(expect), "{what}: {}", out.stderr);
        }
        // Nothing was made of it.
        match make {
            Some(bytes) => assert_eq!(fs_err::read(&store).expect("the file"), bytes, "{what}"),
            None => assert!(store.is_dir()),
        }
    }
    // A database error is said once, not once per layer.
    let out = run(cb(&dir).arg("datasets"));
    assert_eq!(out.stderr.matches("not a casebook store").count(), 1, "{}", out.stderr);
}

#[test]
fn a_store_that_cannot_be_written_can_still_be_read() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let data = dir.file("qa.jsonl", V1);
    ok(cb(&dir).args(["import", "--dataset", "qa"]).arg(&data));
    // Files of another user: as root, run as `nobody`; otherwise take away the write bits.
    let uid = std::process::Command::new("id").arg("-u").output().expect("id runs").stdout;
    let root = String::from_utf8_lossy(&uid).trim() == "0";
    let as_reader = |args: &[&str]| -> crate::cli::Run {
        let mut cmd = if root {
            let mut cmd = assert_cmd::Command::new("setpriv");
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(assert_cmd::cargo::cargo_bin("casebook"));
            cmd
        } else {
            casebook()
        };
        cmd.current_dir(dir.join("")).env("NO_COLOR", "1").env_remove("CASEBOOK_STORE").args(args);
        run(&mut cmd)
    };
    if root {
        // `nobody` needs to reach the folder (the temporary folder is the test user's own), and
        // to read the store, which `init` made its owner's alone.
        let status = std::process::Command::new("chmod").arg("o+r").arg(dir.join(".casebook/store.db")).status();
        assert!(status.expect("chmod").success());
        let mut path = dir.join("");
        loop {
            let _ = std::process::Command::new("chmod").arg("o+rx").arg(&path).status();
            if !path.pop() || path.as_os_str().len() <= 1 {
                break;
            }
        }
    } else {
        let status = std::process::Command::new("chmod").args(["-R", "a-w"]).arg(dir.join(".casebook")).status();
        assert!(status.expect("chmod").success());
    }
    for args in [&["datasets"][..], &["log", "qa"], &["export", "qa", "--to", "letta"], &["cases", "qa", "--count"]] {
        let out = as_reader(args);
        assert_eq!(out.status, Some(0), "{args:?}: {out:?}");
    }
    assert!(as_reader(&["export", "qa", "--to", "letta"]).stdout.contains("Capital of France?"));
    let out = as_reader(&["put", "qa", "qa.jsonl"]);
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("cannot be written"), "{}", out.stderr);
    if !root {
        let _ = std::process::Command::new("chmod").args(["-R", "u+w"]).arg(dir.join(".casebook")).status();
    }
}

#[test]
fn store_names_a_project_folder_that_holds_one() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let data = dir.file("qa.jsonl", V1);
    ok(cb(&dir).args(["import", "--dataset", "qa"]).arg(&data));
    let elsewhere = Folder::new();
    let out = ok(cb(&elsewhere).arg("--store").arg(dir.join("")).arg("datasets"));
    assert!(out.contains("qa"), "{out}");
}

#[test]
fn store_check_finds_garbage_written_into_the_file() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let rows: String =
        (0..3000).map(|i| format!("{{\"id\": \"c{i}\", \"input\": \"question {i} {}\"}}\n", "é".repeat(40))).collect();
    let data = dir.file("big.jsonl", rows);
    ok(cb(&dir).args(["import", "--dataset", "big"]).arg(&data));
    let out = run(cb(&dir).args(["store", "check"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(out.stderr.contains("sound: 3000 case bodies and 1 versions checked, 0 problems"), "{}", out.stderr);

    // 8 KB of garbage in the middle of the database, as a failing disk or a stray write would.
    let store = dir.join(".casebook/store.db");
    let mut bytes = fs_err::read(&store).expect("the store");
    let middle = bytes.len() / 2 / 4096 * 4096;
    for (i, b) in bytes[middle..middle + 8192].iter_mut().enumerate() {
        *b = (i * 7 + 13) as u8;
    }
    fs_err::write(&store, bytes).expect("damage the store");
    let out = run(cb(&dir).args(["--format", "json", "store", "check"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let report: Value = serde_json::from_str(out.stdout.trim()).expect("a JSON report");
    let problems = report["problems"].as_array().expect("problems");
    assert!(!problems.is_empty(), "{report}");
    assert!(problems.iter().any(|p| p.as_str().is_some_and(|p| p.starts_with("SQLite: "))), "{report}");
}

/// A shared store whose case bodies moved (its table rewritten, as `VACUUM FULL` does) is sound;
/// `store check` counts the case rows that name an old place and says what that costs.
#[test]
fn store_check_counts_case_rows_whose_body_moved() {
    use sqlx::Connection;
    let dir = Folder::new();
    let b = Backend::postgres();
    let Backend::Postgres(url) = &b else { unreachable!("a PostgreSQL backend") };
    ok(b.cb(&dir).arg("init"));
    let rows: String = (0..40).map(|i| format!("{{\"id\": \"c{i}\", \"input\": \"q {i} ü\"}}\n")).collect();
    ok(b.cb(&dir).args(["import", "--dataset", "d"]).arg(dir.file("d.jsonl", rows)));
    let out = run(b.cb(&dir).args(["store", "check"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(!out.stderr.contains("note:"), "{}", out.stderr);

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let mut conn = sqlx::PgConnection::connect(url).await.expect("the store's database");
        sqlx::query("UPDATE members SET blob_at = NULL WHERE case_id IN ('\\x6331', '\\x6332', '\\x6333')")
            .execute(&mut conn)
            .await
            .expect("places forgotten");
    });
    let out = run(b.cb(&dir).args(["store", "check"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(out.stderr.contains("sound: 40 case bodies and 1 versions checked, 0 problems"), "{}", out.stderr);
    assert!(out.stderr.contains("note: 3 case rows name an old place of their body"), "{}", out.stderr);
    let out = run(b.cb(&dir).args(["--format", "json", "store", "check"]));
    let report: Value = serde_json::from_str(out.stdout.trim()).expect("a JSON report");
    assert_eq!(report["moved"], 3, "{report}");
}

#[test]
fn the_author_defaults_to_the_login_name_the_system_gives() {
    let dir = Folder::new();
    let bare = || {
        let mut cmd = casebook();
        cmd.current_dir(dir.join("")).env_remove("CASEBOOK_STORE").env_remove("CASEBOOK_AUTHOR");
        cmd.env_remove("USER").env_remove("LOGNAME");
        cmd
    };
    ok(bare().arg("init"));
    let data = dir.file("qa.jsonl", V1);
    ok(bare().args(["import", "--dataset", "qa"]).arg(&data));
    let name = std::process::Command::new("id").arg("-un").output().expect("id runs").stdout;
    let name = String::from_utf8_lossy(&name).trim().to_owned();
    let log = ok(bare().args(["--format", "json", "log", "qa"]));
    assert!(log.contains(&format!("\"author\":\"{name}\"")), "{name}: {log}");
}

#[test]
fn a_mistyped_dataset_or_tag_gets_a_suggestion_or_the_names_there_are() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let out = run(cb(&dir).args(["log", "support"]));
    assert!(out.stderr.contains("no dataset named `support`; the store has no datasets yet"), "{}", out.stderr);
    let data = dir.file("qa.jsonl", V1);
    ok(cb(&dir).args(["import", "--dataset", "support"]).arg(&data));
    ok(cb(&dir).args(["import", "--dataset", "billing"]).arg(&data));
    ok(cb(&dir).args(["tag", "support@v1", "prod"]));
    for (args, expect) in [
        (&["log", "suport"][..], "no dataset named `suport`; did you mean `support`?"),
        (&["log", "zzz"], "no dataset named `zzz`; the datasets are `billing`, `support`"),
        (&["show", "support@prd"], "dataset `support` has no version `prd`; did you mean `prod`?"),
        (&["show", "support@v7"], "dataset `support` has no version `v7`; its only version is v1"),
    ] {
        let out = run(cb(&dir).args(args));
        assert_eq!(out.status, Some(2), "{args:?}: {out:?}");
        assert!(out.stderr.contains(expect), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn history_says_when_a_case_was_removed_and_added_again() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let v1 = dir.file("qa.jsonl", V1);
    ok(cb(&dir).args(["import", "--dataset", "qa"]).arg(&v1));
    ok(cb(&dir).args(["rm", "qa", "b", "-m", "stale"]));
    ok(cb(&dir).args(["put", "qa"]).arg(&v1).args(["-m", "back"]));
    let history = ok(cb(&dir).args(["history", "qa", "b"]));
    let removed = history.find("removed in v2\n").expect("the removal");
    let back = history.find("in v3–head\n  v3 by tester at 2026-11-23T10:00:00Z: back\n  (added)").expect("back");
    assert!(removed < back, "{history}");
}

#[test]
fn an_export_never_writes_a_file_its_own_reader_refuses() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let data = dir.file("qa.jsonl", V1);
    ok(cb(&dir).args(["import", "--dataset", "qa"]).arg(&data));
    let out = run(cb(&dir).args(["export", "qa", "--to", "agenthealth"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("case `a` lacks what `agenthealth` requires: `category`, `difficulty`, `expectedOutcomes`"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("or export to another format"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    let out = run(cb(&dir).args(["export", "qa", "--to", "letta", "--where", "id == \"none\""]));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert!(out.stderr.contains("`qa@v1` has no cases, and a `letta` file must hold at least one"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

/// Writes 8 KB of garbage over the first page of `store.db` of type `kind` (SQLite's page type
/// byte: 0x0D a table's rows, 0x0A the rows of a table without row ids, such as `members`) that
/// holds `marker`, and the page after it, as a failing disk or a stray write would; returns the
/// damaged file's bytes.
fn damage_the_page_holding(dir: &Folder, marker: &str, kind: u8) -> Vec<u8> {
    let store = dir.join(".casebook/store.db");
    assert!(!dir.join(".casebook/store.db-wal").exists(), "the last command left its log: the file is not the store");
    let mut bytes = fs_err::read(&store).expect("the store");
    // The page size is at offset 16 of the header, big-endian (1 stands for 65536).
    let page = match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65536,
        size => usize::from(size),
    };
    let start = bytes
        .windows(marker.len())
        .enumerate()
        .filter(|(_, w)| *w == marker.as_bytes())
        .map(|(at, _)| at / page * page)
        .find(|&start| start > 0 && bytes[start] == kind)
        .expect("the marker is on a page of that kind");
    assert!(start > 0 && start + 2 * page < bytes.len(), "the marker is in the middle of the file");
    for (i, b) in bytes[start..start + 8192].iter_mut().enumerate() {
        *b = (i * 7 + 13) as u8;
    }
    fs_err::write(&store, &bytes).expect("damage the store");
    bytes
}

#[test]
fn a_write_on_a_damaged_page_fails_cleanly_and_writes_nothing() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let other = dir.file("other.jsonl", V1);
    ok(cb(&dir).args(["import", "--dataset", "other"]).arg(&other));
    let row = |i: usize, answer: &str| {
        format!(
            "{{\"id\": \"c{i}\", \"input\": \"question {i}: marker-{i}-{}\", \"ground_truth\": \"{answer}\"}}\n",
            "x".repeat(300)
        )
    };
    let rows: String = (0..400).map(|i| row(i, "a")).collect();
    let data = dir.file("big.jsonl", &rows);
    ok(cb(&dir).args(["import", "--dataset", "big"]).arg(&data));
    let damaged = damage_the_page_holding(&dir, "marker-200-", 0x0D);

    let said_damaged = |out: &crate::cli::Run, what: &str| {
        assert_eq!(out.status, Some(2), "{what}: {out:?}");
        for words in ["the store is damaged", "nothing was written", "run `casebook store check`"] {
            assert!(out.stderr.contains(words), "{what}: `{words}` not in {}", out.stderr);
        }
        assert_eq!(fs_err::read(dir.join(".casebook/store.db")).expect("the store"), damaged, "{what} wrote");
    };
    // `put` of a case whose body is stored on the damaged page: the commit would reuse it.
    let one = dir.file("one.jsonl", row(200, "a"));
    said_damaged(&run(cb(&dir).args(["put", "big"]).arg(&one)), "put");
    // The same with a new case beside it, and a whole-dataset import that changes one case.
    let two = dir.file("two.jsonl", format!("{}{}", row(200, "a"), row(1000, "new")));
    said_damaged(&run(cb(&dir).args(["put", "big"]).arg(&two)), "put of two");
    let changed: String = (0..400).map(|i| row(i, if i == 3 { "b" } else { "a" })).collect();
    let changed = dir.file("changed.jsonl", changed);
    said_damaged(&run(cb(&dir).args(["import", "--dataset", "big"]).arg(&changed)), "import");
    // Reading what the damage did not reach still works; reading what it did says so.
    let log = ok(cb(&dir).args(["log", "big"]));
    assert!(log.contains("v1") && !log.contains("v2"), "{log}");
    let exported = ok(cb(&dir).args(["export", "other", "--to", "letta", "-q"]));
    assert!(exported.contains("Capital of France?"), "{exported}");
    let out = run(cb(&dir).args(["export", "big", "--to", "letta", "-q"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("the store is damaged"), "{}", out.stderr);
    let out = run(cb(&dir).args(["store", "check"]));
    assert_eq!(out.status, Some(1), "{out:?}");

    // The same with the page of `members` that holds a case's row: `put` of a new content.
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let other = dir.file("other.jsonl", V1);
    ok(cb(&dir).args(["import", "--dataset", "other"]).arg(&other));
    let rows: String = (0..2000).map(|i| format!("{{\"id\": \"member-{i}\", \"input\": \"q\"}}\n")).collect();
    let data = dir.file("big.jsonl", &rows);
    ok(cb(&dir).args(["import", "--dataset", "big"]).arg(&data));
    let damaged = damage_the_page_holding(&dir, "member-1000", 0x0A);
    let one = dir.file("one.jsonl", "{\"id\": \"member-1000\", \"input\": \"changed\"}\n");
    let out = run(cb(&dir).args(["put", "big"]).arg(&one));
    assert_eq!(out.status, Some(2), "put: {out:?}");
    for words in ["the store is damaged", "nothing was written", "run `casebook store check`"] {
        assert!(out.stderr.contains(words), "put: `{words}` not in {}", out.stderr);
    }
    assert_eq!(fs_err::read(dir.join(".casebook/store.db")).expect("the store"), damaged, "put wrote");
    assert!(ok(cb(&dir).args(["log", "big"])).contains("v1"));
    assert!(ok(cb(&dir).args(["export", "other", "--to", "letta", "-q"])).contains("Capital of France?"));
}

/// A shared store that cannot be reached is one line naming the URL without its password, and
/// exit 2; `init` makes a database the server does not have, `store copy` carries a store over.
#[test]
fn a_shared_store_is_named_by_url() {
    let url = crate::cli::postgres_database();
    let dir = Folder::new();
    // The test server's passwords start with `test-`.
    let wrong = url.replacen(":test-", ":wrong-pw-", 1);
    assert_ne!(wrong, url);
    let out = run(cb(&dir).args(["datasets", "--store", &wrong]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("password authentication failed") && out.stderr.contains(":***@"), "{}", out.stderr);
    assert!(!out.stderr.contains("wrong-pw"), "{}", out.stderr);

    let fresh = format!("{url}_made");
    assert_eq!(run(cb(&dir).args(["init", "--store", &fresh])).status, Some(0));
    ok(cb(&dir).arg("init"));
    let v1 = dir.file("qa.jsonl", V1);
    ok(cb(&dir).args(["import", "--dataset", "qa"]).arg(&v1));
    let copied = ok(cb(&dir).args(["store", "copy", "."]).arg(&fresh));
    assert!(copied.starts_with("copied 1 version (2 cases) and 0 runs into postgres://"), "{copied}");
    let local = ok(cb(&dir).args(["log", "qa", "--format", "json"]));
    let shared = ok(cb(&dir).args(["log", "qa", "--format", "json", "--store", &fresh]));
    assert_eq!(local, shared);
    let again = run(cb(&dir).args(["store", "copy", ".", &fresh, "--format", "json"]));
    assert_eq!(again.status, Some(0), "{again:?}");
    assert!(again.stdout.contains("\"up_to_date\":[\"qa\"]"), "{}", again.stdout);

    // The same dataset name with other versions in the target is left alone, and said so.
    let other = dir.file("other.jsonl", "{\"id\": \"x\", \"input\": \"elsewhere\"}\n");
    ok(cb(&dir).args(["import", "--dataset", "mine", "--store", &fresh]).arg(&other));
    ok(cb(&dir).args(["import", "--dataset", "mine"]).arg(&v1));
    let diverged = run(cb(&dir).args(["store", "copy", ".", &fresh]));
    assert_eq!(diverged.status, Some(1), "{diverged:?}");
    assert!(
        diverged.stderr.contains("error: left alone, their versions in `postgres://")
            && diverged
                .stderr
                .contains("differ from the source's: mine (copy them into another store, or remove them there first)"),
        "{}",
        diverged.stderr
    );
    let kept = ok(cb(&dir).args(["export", "mine", "--to", "casebook", "-q", "--store", &fresh]));
    assert!(kept.contains("elsewhere") && !kept.contains("Paris"), "{kept}");
}

/// `rm` of an id the head lacks says so as `review` does (exit 2, every missing id named,
/// the id it may be a typo of suggested) and writes nothing, even beside ids that are there.
fn rm_of_a_case_that_is_not_there_names_it_and_writes_nothing(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file(
        "qa.jsonl",
        "{\"id\": \"tc-001\", \"input\": \"2+2?\"}\n{\"id\": \"café-2\", \"input\": \"2+2?\"}\n{\"id\": \"c\", \"input\": \"x\"}\n",
    );
    ok(b.cb(&dir).args(["import", "--dataset", "qa"]).arg(&file));
    let out = run(b.cb(&dir).args(["rm", "qa", "99"]));
    assert_eq!((out.status, out.stdout.as_str()), (Some(2), ""), "{out:?}");
    assert_eq!(out.stderr, "error: qa v1 has no case `99`: nothing was written\n");
    // Some there, some not: nothing removed, each missing one named, a typo answered.
    let out = run(b.cb(&dir).args(["rm", "qa", "tc-001", "cafe-2", "99", "cafe-2"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert_eq!(out.stderr, "error: qa v1 has no case `cafe-2`, `99`; did you mean `café-2`?: nothing was written\n");
    let versions = log_versions(&ok(b.cb(&dir).args(["log", "qa", "--format", "json"])));
    assert_eq!(versions.len(), 1, "{versions:?}");
    ok(b.cb(&dir).args(["show", "qa", "tc-001"]));
    // A dataset that is not there is named too.
    let out = run(b.cb(&dir).args(["rm", "qq", "c"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("qq"), "{out:?}");
    // The ids that are there go.
    assert!(ok(b.cb(&dir).args(["rm", "qa", "tc-001", "café-2"])).starts_with("created qa v2 "));
}

/// `export` of a version with draft expectations to a format without `review` is refused,
/// `--lossy` or not, naming the cases and `--confirm-drafts`; once reviewed, it exports.
fn an_export_does_not_confirm_draft_expectations(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file(
        "qa.jsonl",
        "{\"id\": \"a\", \"input\": \"2+2?\", \"expected\": {\"output\": \"4\"}, \"review\": \"draft\"}\n\
         {\"id\": \"b\", \"input\": \"3+3?\", \"expected\": {\"output\": \"6\"}}\n",
    );
    ok(b.cb(&dir).args(["import", "--dataset", "qa"]).arg(&file));
    for lossy in [&[][..], &["--lossy"]] {
        let out = run(b.cb(&dir).args(["export", "qa", "--to", "letta", "-o", "out.jsonl"]).args(lossy));
        assert_eq!(out.status, Some(1), "{out:?}");
        assert!(
            out.stderr.contains(
                "error[E-unconfirmed-drafts]: 1 case with draft expectations (`review: draft`) would be written as \
                 confirmed, `letta` having no place for `review`: `a`\n--> qa@v1"
            ),
            "{out:?}"
        );
        assert!(out.stderr.contains("pass `--confirm-drafts`"), "{out:?}");
        assert!(!dir.join("out.jsonl").exists());
    }
    let rows = ok(b.cb(&dir).args(["export", "qa", "--to", "letta", "--confirm-drafts", "--lossy", "-q"]));
    assert_eq!(rows.lines().count(), 2, "{rows}");
    ok(b.cb(&dir).args(["review", "qa", "a", "--state", "reviewed"]));
    let rows = ok(b.cb(&dir).args(["export", "qa", "--to", "letta", "--lossy", "-q"]));
    assert!(rows.starts_with("{\"id\":\"a\",\"input\":\"2+2?\",\"ground_truth\":\"4\"}"), "{rows}");
}

#[cfg(unix)]
#[test]
fn init_makes_a_store_its_owner_alone_can_read_or_its_group_too_if_asked() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &std::path::Path| fs_err::metadata(path).expect("the file").permissions().mode() & 0o777;
    for (flags, expected) in [(&[][..], 0o600), (&["--shared-group"][..], 0o660)] {
        let dir = Folder::new();
        ok(cb(&dir).arg("init").args(flags));
        let store = dir.join(".casebook/store.db");
        assert_eq!(mode(&store), expected, "{flags:?}");
        // A commit leaves it as it was.
        let data = dir.file("qa.jsonl", V1);
        ok(cb(&dir).args(["import", "--dataset", "qa"]).arg(&data));
        assert_eq!(mode(&store), expected, "{flags:?}");
    }
    if let Ok(url) = std::env::var("CASEBOOK_TEST_POSTGRES") {
        let dir = Folder::new();
        let out = run(cb(&dir).env("CASEBOOK_STORE", url).args(["init", "--shared-group"]));
        assert_eq!(out.status, Some(2), "{out:?}");
        assert!(out.stderr.contains("`--shared-group` is for a store file"), "{}", out.stderr);
    }
}
