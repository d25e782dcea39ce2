//! `store gc` and the counts of `store check`, on both backends: what nothing refers to is
//! removed and nothing else, also while commits run.
//!
//! Orphans are made as casebook makes them: a PostgreSQL commit cut off after writing its bodies,
//! and (until `casebook purge` lands in this crate's tests) a purge's leftovers made by deleting a
//! dataset's rows with SQL, as a purge of all its cases would leave its bodies.

use std::collections::BTreeMap;

use casebook_store::{
    AnyStore, CommitMode, CommitOutcome, GcOptions, PostgresStore, ResultRow, Select, SqliteStore, Store, StoreError,
    Unreferenced,
};
use sqlx::Connection;

use crate::conformance::{batches, case, request, seed_document, seeded};
use crate::postgres::fresh_database;

/// A fresh store of each backend, with what raw SQL needs to reach it.
struct Fresh {
    store: AnyStore,
    raw: Raw,
    _dir: Option<tempfile::TempDir>,
}

enum Raw {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

async fn fresh_stores() -> Vec<Fresh> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let sqlite = SqliteStore::create(&path).await.unwrap();
    let url = fresh_database().await;
    let pg = PostgresStore::create(&url).await.unwrap();
    vec![
        Fresh { store: sqlite.into(), raw: Raw::Sqlite(path), _dir: Some(dir) },
        Fresh { store: pg.into(), raw: Raw::Postgres(url), _dir: None },
    ]
}

impl Raw {
    async fn execute(&self, sql: &str) {
        match self {
            Raw::Sqlite(path) => {
                let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
                conn.close().await.unwrap();
            }
            Raw::Postgres(url) => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut conn).await.unwrap();
                conn.close().await.unwrap();
            }
        }
    }

    /// What a purge of every case of `dataset` (and of its results) leaves behind: its rows gone,
    /// its bodies, seed documents and outputs still there.
    async fn forget_dataset(&self, dataset: &str) {
        let of = format!("(SELECT id FROM datasets WHERE name = '{dataset}')");
        self.execute(&format!(
            "DELETE FROM members WHERE dataset = {of}; DELETE FROM versions WHERE dataset = {of};
             DELETE FROM events WHERE dataset = {of}; DELETE FROM tags WHERE dataset = {of};
             DELETE FROM datasets WHERE name = '{dataset}';"
        ))
        .await;
    }

    /// What a purge of a run's results leaves: its outputs.
    async fn forget_results(&self, run: &str) {
        self.execute(&format!(
            "DELETE FROM run_results WHERE key >= (SELECT seq FROM runs WHERE id = '{run}') * 4294967296
                 AND key < ((SELECT seq FROM runs WHERE id = '{run}') + 1) * 4294967296"
        ))
        .await;
    }
}

/// A case whose content depends on its id alone, so that two datasets holding it share its body.
fn plain(id: &str) -> casebook_model::Case {
    case(id, &format!("text of {id}"))
}

fn plains(ids: impl IntoIterator<Item = String>) -> Vec<casebook_model::Case> {
    ids.into_iter().map(|id| plain(&id)).collect()
}

async fn commit_to(store: &AnyStore, dataset: &str, cases: Vec<casebook_model::Case>) -> u64 {
    let mut req = request(CommitMode::Replace, "m");
    req.dataset = dataset.into();
    match store.commit(req, batches(cases)).await.unwrap() {
        CommitOutcome::Created(v) => v.number,
        other => panic!("expected a new version, got {other:?}"),
    }
}

/// The ids and inputs of a version's cases, read back whole.
async fn contents(store: &AnyStore, dataset: &str, version: u64) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    store
        .cases(dataset, version, &Select::all(), 500, &mut |batch| {
            out.extend(batch.into_iter().map(|c| (c.id.clone(), serde_json::to_value(&c.task).unwrap())));
            true
        })
        .await
        .unwrap();
    out
}

const H1: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const H2: &str = "2222222222222222222222222222222222222222222222222222222222222222";

fn result(case: &str, hash: &str) -> String {
    format!(r#"{{"case_id":"{case}","scenario":"s","run":0,"hash":"{hash}","pass":true}}"#)
}

/// Bodies, seed documents and outputs that nothing refers to are counted by `check`, removed by
/// `gc` (a dry run removes nothing), and everything still referred to stays readable: a body
/// two datasets share, a seed document a live body names, an output a later run reused.
#[tokio::test]
async fn gc_removes_what_nothing_refers_to_and_nothing_else() {
    for Fresh { store, raw, .. } in fresh_stores().await {
        let doc = |text: &str| seed_document(text);
        let mut support = vec![seeded("a", "seeds/a.json", doc("only a")), seeded("b", "seeds/s.json", doc("shared"))];
        support.push(plain("c"));
        let mut labelled = plain("kept");
        labelled.labels = Some(vec!["live".into()]);
        support.push(labelled);
        commit_to(&store, "support", support).await;
        let mut scratch = vec![seeded("x", "seeds/s.json", doc("shared")), seeded("y", "seeds/y.json", doc("only y"))];
        let mut z = plain("z");
        z.labels = Some(vec!["gone".into()]);
        scratch.extend([z, plain("c")]);
        commit_to(&store, "scratch", scratch).await;

        // r1 kept an output that r2 reused (its result names it by hash only); r3 kept its own.
        store.begin_run("r1", "e", "2026-11-23T10:00:00Z", "{}").await.unwrap();
        let row = ResultRow { seq: 0, result: result("a", H1), output: Some((H1.into(), "\"out one\"".into())) };
        store.save_results("r1", &[row]).await.unwrap();
        store.begin_run("r2", "e", "2026-11-23T10:01:00Z", "{}").await.unwrap();
        store.save_results("r2", &[ResultRow { seq: 0, result: result("a", H1), output: None }]).await.unwrap();
        store.begin_run("r3", "e", "2026-11-23T10:02:00Z", "{}").await.unwrap();
        let row = ResultRow { seq: 0, result: result("b", H2), output: Some((H2.into(), "\"out two!\"".into())) };
        store.save_results("r3", &[row]).await.unwrap();

        let before = store.check().await.unwrap();
        assert_eq!(before.unreferenced, Unreferenced::default(), "{}", store.name());
        raw.forget_dataset("scratch").await;
        raw.forget_results("r1").await;
        raw.forget_results("r3").await;

        let check = store.check().await.unwrap();
        assert!(check.problems.is_empty(), "{:?}", check.problems);
        let found = check.unreferenced;
        // x, y and z; `c` is support's too. The document of y; the shared one stays. r3's output.
        assert_eq!((found.bodies, found.seed_documents, found.outputs), (3, 1, 1), "{}", store.name());
        assert_eq!(found.seed_bytes, serde_json::to_string(&doc("only y")).unwrap().len() as u64);
        assert_eq!(found.output_bytes, "\"out two!\"".len() as u64);
        assert!(found.body_bytes > 100, "{found:?}");

        let dry = store.gc(GcOptions { dry_run: true, vacuum: false }).await.unwrap();
        assert_eq!(dry.removed, found);
        assert_eq!(store.check().await.unwrap().unreferenced, found, "a dry run removes nothing");

        let done = store.gc(GcOptions::default()).await.unwrap();
        assert_eq!(done.removed, found);
        let again = store.gc(GcOptions::default()).await.unwrap();
        assert!(again.removed.is_empty(), "{:?}", again.removed);
        let check = store.check().await.unwrap();
        assert!(check.problems.is_empty(), "{:?}", check.problems);
        assert_eq!(check.unreferenced, Unreferenced::default());
        assert_eq!((check.bodies, check.seed_documents), (4, 2));

        let cases = contents(&store, "support", 1).await;
        assert_eq!(cases.keys().collect::<Vec<_>>(), ["a", "b", "c", "kept"]);
        let b = store.case("support", 1, "b").await.unwrap().unwrap();
        assert_eq!(b, seeded("b", "seeds/s.json", doc("shared")));
        assert_eq!(store.outputs(&[H1.into(), H2.into()]).await.unwrap(), [Some("\"out one\"".into()), None]);

        // New bodies may take the row ids of removed ones: no label of a removed body follows.
        commit_to(&store, "support", plains((0..5).map(|i| format!("new{i}")))).await;
        for (label, want) in [("gone", 0), ("live", 0)] {
            let filter = casebook_filter::Filter::parse(&format!("labels contains \"{label}\"")).unwrap();
            let select = Select { filter: Some(filter), limit: None };
            assert_eq!(store.count("support", 2, &select).await.unwrap(), want, "{label} on {}", store.name());
        }
        // The removed content can come back.
        let number = commit_to(&store, "scratch", vec![seeded("y", "seeds/y.json", doc("only y")), plain("z")]).await;
        assert_eq!(store.case("scratch", number, "y").await.unwrap(), Some(seeded("y", "seeds/y.json", doc("only y"))));
        let check = store.check().await.unwrap();
        assert!(check.problems.is_empty(), "{:?}", check.problems);
        store.close().await;
    }
}

/// A commit in flight that is about to name bodies nothing names yet (the content of a purged
/// dataset, here stored again) keeps `gc` waiting until it is over, and keeps its bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gc_waits_for_a_commit_in_flight_and_leaves_it_its_bodies() {
    for Fresh { store, raw, .. } in fresh_stores().await {
        // More cases than PostgreSQL's commit takes in one chunk: its bodies are written (here,
        // found) before the version, by tasks of their own.
        let cases = plains((0..2500).map(|i| format!("o{i}")));
        commit_to(&store, "scratch", cases.clone()).await;
        raw.forget_dataset("scratch").await;
        assert_eq!(store.check().await.unwrap().unreferenced.bodies, 2500);

        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let writer = store.clone();
        let mut req = request(CommitMode::Replace, "back");
        req.dataset = "again".into();
        let commit = tokio::spawn(async move { writer.commit(req, rx).await });
        let prepared: Vec<_> = cases.iter().map(|c| casebook_store::prepare(c).unwrap()).collect();
        tx.send(Ok(prepared)).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;

        let collector = store.clone();
        let gc = tokio::spawn(async move { collector.gc(GcOptions::default()).await });
        tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
        assert!(!gc.is_finished(), "{}: gc ran while a commit was in flight", store.name());
        drop(tx);
        assert!(matches!(commit.await.unwrap(), Ok(CommitOutcome::Created(_))));
        let removed = gc.await.unwrap().unwrap().removed;
        assert_eq!(removed, Unreferenced::default(), "{}", store.name());
        assert_eq!(contents(&store, "again", 1).await.len(), 2500);
        let check = store.check().await.unwrap();
        assert!(check.problems.is_empty(), "{:?}", check.problems);
        store.close().await;
    }
}

/// A PostgreSQL commit cut off after writing its bodies leaves them; once nothing is in flight,
/// `gc` removes them (and a commit of the same content later stores them again).
#[tokio::test]
async fn a_failed_commits_bodies_are_collected_once_nothing_is_in_flight() {
    for Fresh { store, .. } in fresh_stores().await {
        commit_to(&store, "support", vec![plain("a")]).await;
        let cases = plains((0..2100).map(|i| format!("f{i}")));
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(Ok(cases.iter().map(|c| casebook_store::prepare(c).unwrap()).collect())).await.unwrap();
        tx.send(Err(())).await.unwrap();
        drop(tx);
        let mut req = request(CommitMode::Replace, "cut");
        req.dataset = "support".into();
        assert!(matches!(store.commit(req, rx).await, Err(StoreError::Cancelled)));
        let left = store.check().await.unwrap().unreferenced.bodies;
        // SQLite's commit is one transaction: nothing is left. PostgreSQL wrote the bodies of
        // its first chunk (2,000 cases) before the input failed.
        match store {
            AnyStore::Sqlite(_) => assert_eq!(left, 0),
            AnyStore::Postgres(_) => assert_eq!(left, 2000),
        }
        assert_eq!(store.gc(GcOptions::default()).await.unwrap().removed.bodies, left);
        let check = store.check().await.unwrap();
        assert!(check.problems.is_empty() && check.unreferenced.is_empty(), "{check:?}");
        let number = commit_to(&store, "support", cases).await;
        assert_eq!(contents(&store, "support", number).await.len(), 2100);
        store.close().await;
    }
}

/// Many commits of new content, some cut off and some reusing what others left, while `gc` runs
/// in a loop: every version keeps all its cases, readable, and the store checks sound; once
/// nothing is in flight a last `gc` leaves nothing unreferenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gc_in_a_loop_beside_many_commits_loses_no_case() {
    for Fresh { store, raw, .. } in fresh_stores().await {
        commit_to(&store, "scratch", plains((0..300).map(|i| format!("o{i}")))).await;
        raw.forget_dataset("scratch").await;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let collector = store.clone();
        let stop = done.clone();
        let gcs = tokio::spawn(async move {
            let mut rounds = 0;
            while !stop.load(std::sync::atomic::Ordering::Acquire) || rounds < 2 {
                collector.gc(GcOptions::default()).await.unwrap();
                rounds += 1;
            }
            rounds
        });
        let mut writers = Vec::new();
        for w in 0..3 {
            let store = store.clone();
            writers.push(tokio::spawn(async move {
                let mut made = Vec::new();
                for j in 0..6 {
                    // Orphans of the purge and of this writer's cut-off commits come back.
                    let mut ids: Vec<String> = (j * 50..j * 50 + 50).map(|i| format!("o{i}")).collect();
                    ids.extend((0..40).map(|n| format!("w{w}-{j}-{n}")));
                    if j > 0 {
                        ids.extend((0..40).map(|n| format!("cut{w}-{}-{n}", j - 1)));
                    }
                    // A large commit now and then (PostgreSQL writes its bodies apart).
                    if j % 3 == 2 {
                        ids.extend((0..2100).map(|n| format!("big{w}-{j}-{n}")));
                    }
                    let dataset = format!("w{w}");
                    let number = commit_to(&store, &dataset, plains(ids.clone())).await;
                    made.push((dataset, number, ids));
                    // Then one cut off, leaving (on PostgreSQL) its bodies.
                    let cut: Vec<_> = (0..2100)
                        .map(|n| plain(&format!("cut{w}-{j}-{n}")))
                        .map(|c| casebook_store::prepare(&c).unwrap())
                        .collect();
                    let (tx, rx) = tokio::sync::mpsc::channel(4);
                    tx.send(Ok(cut)).await.unwrap();
                    tx.send(Err(())).await.unwrap();
                    drop(tx);
                    let mut req = request(CommitMode::Replace, "cut");
                    req.dataset = format!("w{w}");
                    assert!(matches!(store.commit(req, rx).await, Err(StoreError::Cancelled)));
                }
                made
            }));
        }
        let mut made = Vec::new();
        for writer in writers {
            made.extend(writer.await.unwrap());
        }
        done.store(true, std::sync::atomic::Ordering::Release);
        assert!(gcs.await.unwrap() >= 2);
        for (dataset, number, ids) in made {
            let cases = contents(&store, &dataset, number).await;
            let mut want = ids.clone();
            want.sort();
            assert_eq!(cases.keys().cloned().collect::<Vec<_>>(), want, "{dataset} v{number} on {}", store.name());
            for (id, task) in cases {
                assert_eq!(task, serde_json::to_value(&plain(&id).task).unwrap());
            }
        }
        store.gc(GcOptions::default()).await.unwrap();
        let check = store.check().await.unwrap();
        assert!(check.problems.is_empty(), "{}: {:?}", store.name(), check.problems);
        assert!(check.unreferenced.is_empty(), "{:?}", check.unreferenced);
        store.close().await;
    }
}
