//! The conformance suite on the embedded SQLite store, and what is particular to it.

use casebook_store::{CommitMode, Select, SqliteStore, Store, StoreError};
use sqlx::{AssertSqlSafe, Row};

use crate::conformance::{self, case, created};

/// A connection of its own to the store in `dir`, to look at what the store wrote.
async fn raw(dir: &tempfile::TempDir) -> sqlx::SqlitePool {
    raw_at(&dir.path().join(".casebook/store.db")).await
}

async fn raw_at(path: &std::path::Path) -> sqlx::SqlitePool {
    sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap()
}

async fn fresh() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::create(&dir.path().join(".casebook/store.db")).await.unwrap();
    (dir, store)
}

// The whole conformance suite, on a fresh store in a temporary folder each.
crate::suite!(fresh);

#[tokio::test]
async fn a_case_is_stored_once_across_versions_and_datasets() {
    let (dir, store) = fresh().await;
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2")]).await;
    created(&store, CommitMode::Upsert, vec![case("c", "3")]).await;
    let mut other = conformance::request(CommitMode::Replace, "copy");
    other.dataset = "copy".into();
    store.commit(other, conformance::batches(vec![case("a", "1")])).await.unwrap();
    let pool = raw(&dir).await;
    let blobs: i64 = sqlx::query("SELECT count(*) FROM blobs").fetch_one(&pool).await.unwrap().get(0);
    assert_eq!(blobs, 3);
}

/// The size of the store's write-ahead log (0 when there is none).
fn log_size(dir: &tempfile::TempDir) -> u64 {
    fs_err::metadata(dir.path().join(".casebook/store.db-wal")).map_or(0, |m| m.len())
}

async fn journal_mode(dir: &tempfile::TempDir) -> String {
    let pool = raw(dir).await;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(&pool).await.unwrap();
    pool.close().await;
    mode
}

#[tokio::test]
async fn the_first_commit_into_an_empty_store_writes_the_database_not_the_log() {
    let (dir, store) = fresh().await;
    let many: Vec<_> = (0..200).map(|i| case(&format!("c{i}"), &format!("question {i}"))).collect();
    created(&store, CommitMode::Replace, many).await;
    // Written with a rollback journal: nothing went through the log, which is back in use.
    assert_eq!(log_size(&dir), 0);
    assert_eq!(conformance::ids(&store, 1).await.len(), 200);
    // The next commit, into a store that holds cases, goes through the log as always.
    created(&store, CommitMode::Upsert, vec![case("c0", "changed")]).await;
    assert!(log_size(&dir) > 0);
    store.close().await;
    assert_eq!(journal_mode(&dir).await, "wal");
}

#[tokio::test]
async fn an_import_into_a_store_with_cases_goes_through_the_log_and_loses_nothing() {
    let (dir, store) = fresh().await;
    created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    created(&store, CommitMode::Upsert, vec![case("b", "2")]).await;
    // The import of another dataset: readers of the store must not wait for it, so it is
    // written through the log like any commit into a store that holds cases, and the commit
    // before it, still in the log, is kept.
    let mut other = conformance::request(CommitMode::Replace, "second import");
    other.dataset = "other".into();
    let many: Vec<_> = (0..300).map(|i| case(&format!("c{i}"), &format!("question {i}"))).collect();
    store.commit(other, conformance::batches(many)).await.unwrap();
    assert!(log_size(&dir) > 0);
    let version = store.resolve("other", &casebook_store::Ref::Latest).await.unwrap();
    assert_eq!(version.cases, 300);
    assert_eq!(conformance::ids(&store, 2).await, ["a", "b"]);
    store.close().await;
    assert_eq!(journal_mode(&dir).await, "wal");
}

#[tokio::test]
async fn a_servers_store_writes_every_commit_through_the_log() {
    let (dir, store) = fresh().await;
    let store = store.shared();
    // Even the first commit into an empty store: a server's readers must not wait for it.
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2")]).await;
    assert!(log_size(&dir) > 0);
    assert_eq!(conformance::ids(&store, 1).await, ["a", "b"]);
}

#[tokio::test]
async fn a_cancelled_first_commit_leaves_nothing_and_a_body_is_stored_once() {
    let (dir, store) = fresh().await;
    // The first commit into an empty store enters its bodies' content ids after the load; a
    // commit that is cancelled half way leaves neither bodies nor content ids.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(Ok(vec![casebook_store::prepare(&case("a", "1")).unwrap()])).await.unwrap();
    tx.send(Err(())).await.unwrap();
    drop(tx);
    let request = conformance::request(CommitMode::Replace, "cancelled");
    assert!(matches!(store.commit(request, rx).await, Err(StoreError::Cancelled)));
    let pool = raw(&dir).await;
    assert_eq!(scalar(&pool, "SELECT (SELECT count(*) FROM blobs) + (SELECT count(*) FROM blob_cids)").await, 0);
    // The same case twice, in two datasets (the second one found through `blob_cids`): stored
    // once.
    created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    let mut other = conformance::request(CommitMode::Replace, "copy");
    other.dataset = "copy".into();
    store.commit(other, conformance::batches(vec![case("a", "1")])).await.unwrap();
    store.close().await;
    assert_eq!(scalar(&pool, "SELECT count(*) FROM blobs").await, 1);
    assert_eq!(
        scalar(&pool, "SELECT count(*) FROM blobs b JOIN blob_cids c ON c.blob = b.id AND c.cid = b.cid").await,
        1
    );
}

#[tokio::test]
async fn a_first_version_that_lists_an_id_twice_is_refused_by_name_and_writes_nothing() {
    // The same case twice (one body), or two cases under one id; into an empty store (a rollback
    // journal, nothing looked up) and into one that holds bodies.
    for again in ["1", "2"] {
        for populated in [false, true] {
            let (dir, store) = fresh().await;
            let mut request = conformance::request(CommitMode::Replace, "m");
            if populated {
                created(&store, CommitMode::Replace, vec![case("kept", "0")]).await;
                request.dataset = "other".into();
            }
            let cases = vec![case("a", "1"), case("b", "x"), case("a", again)];
            match store.commit(request, conformance::batches(cases)).await {
                Err(StoreError::DuplicateId(id)) => assert_eq!(id, "a"),
                other => panic!("{again} {populated}: {other:?}"),
            }
            let pool = raw(&dir).await;
            let written = scalar(&pool, "SELECT (SELECT count(*) FROM blobs) + (SELECT count(*) FROM blob_cids)").await;
            assert_eq!(written, if populated { 2 } else { 0 }, "{again} {populated}");
            assert!(store.check().await.unwrap().problems.is_empty());
        }
    }
}

#[tokio::test]
async fn large_commits_reuse_stored_bodies_before_and_after_they_filter_their_lookups() {
    // Past 10,000 cases a commit stops looking up every content id and asks a filter of the
    // stored ones first: bodies stored before must be reused on both sides of that point, by a
    // first version and by a later one.
    let (dir, store) = fresh().await;
    let old: Vec<_> = (0..3_000).map(|i| case(&format!("c{i:05}"), &format!("q{i}"))).collect();
    created(&store, CommitMode::Replace, old.clone()).await;
    // Every 7th case of a new dataset is one of the old ones, unchanged; the rest are new, some
    // with ids and inputs that are not ASCII.
    let first: Vec<_> = (0..20_000)
        .map(|i| match i % 7 {
            0 => old[i / 7].clone(),
            3 => case(&format!("é{i}"), &format!("вопрос {i}")),
            _ => case(&format!("n{i:05}"), &format!("new {i}")),
        })
        .collect();
    let mut request = conformance::request(CommitMode::Replace, "m");
    request.dataset = "other".into();
    store.commit(request, conformance::batches(first.clone())).await.unwrap();
    let pool = raw(&dir).await;
    assert_eq!(scalar(&pool, "SELECT count(*) FROM blobs").await, 3_000 + 20_000 - 2_858);
    // A later version of the first dataset: its old cases unchanged on both sides of 9,000 new.
    let mut later = old[..1_500].to_vec();
    later.extend((0..9_000).map(|i| case(&format!("m{i:05}"), &format!("more {i}"))));
    later.extend_from_slice(&old[1_500..]);
    let v2 = created(&store, CommitMode::Upsert, later.clone()).await;
    assert_eq!((v2.added, v2.modified, v2.cases), (9_000, 0, 12_000));
    let bodies = scalar(&pool, "SELECT count(*) FROM blobs").await;
    assert_eq!(bodies, 3_000 + 20_000 - 2_858 + 9_000);
    let report = store.check().await.unwrap();
    assert_eq!((report.problems, report.bodies as i64), (Vec::<String>::new(), bodies));
    // And every case reads back as it was given.
    for (dataset, version, mut given) in [("other", 1, first), ("support", 2, later)] {
        let mut stored = Vec::new();
        store
            .cases(dataset, version, &Select::all(), 1_000, &mut |batch| {
                stored.extend(batch);
                true
            })
            .await
            .unwrap();
        if dataset == "support" {
            // (An upsert keeps the old cases' places and puts the new ones between them.)
            stored.sort_by(|a, b| a.id.cmp(&b.id));
            given.sort_by(|a, b| a.id.cmp(&b.id));
        }
        assert!(stored == given, "{dataset} v{version} does not read back as given");
    }
}

#[tokio::test]
async fn the_first_commit_keeps_the_log_while_another_connection_reads() {
    let (dir, store) = fresh().await;
    let path = dir.path().join(".casebook/store.db");
    let reader = raw_at(&path).await;
    let before: i64 = sqlx::query_scalar("SELECT count(*) FROM blobs").fetch_one(&reader).await.unwrap();
    assert_eq!(before, 0);
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2")]).await;
    // The reader kept the store open: the commit went through the log, and the reader sees it.
    assert!(log_size(&dir) > 0);
    let after: i64 = sqlx::query_scalar("SELECT count(*) FROM blobs").fetch_one(&reader).await.unwrap();
    assert_eq!(after, 2);
    reader.close().await;
    store.close().await;
    assert_eq!(journal_mode(&dir).await, "wal");
}

#[tokio::test]
async fn a_store_from_a_newer_casebook_is_refused() {
    let (dir, store) = fresh().await;
    drop(store);
    let path = dir.path().join(".casebook/store.db");
    let pool = raw_at(&path).await;
    sqlx::query("INSERT INTO schema_version (version) VALUES (99)").execute(&pool).await.unwrap();
    pool.close().await;
    match SqliteStore::open(&path).await {
        Err(StoreError::Newer(_, 99)) => {}
        other => panic!("expected a newer-store error, got {:?}", other.err()),
    }
    assert!(matches!(SqliteStore::open(&dir.path().join("nothing.db")).await, Err(StoreError::Missing(_))));
}

/// SQL that takes a store of schema 13 back to schema 8: no purges, no pending spans, the content-id index,
/// no projects, no API keys.
macro_rules! undo_projects {
    () => {
        "PRAGMA foreign_keys = OFF; DROP TABLE purged_members; DROP TABLE purges; DROP INDEX blob_facets_review; DROP TABLE capture_warnings; DROP TABLE pending_spans; DROP TABLE captured_traces; DROP TABLE blob_cids; CREATE UNIQUE INDEX blobs_cid ON blobs (cid);
         DROP TABLE api_keys; DROP TABLE secrets;
         CREATE TABLE runs_old (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, experiment TEXT NOT NULL,
                                started TEXT NOT NULL, finished TEXT, meta TEXT NOT NULL, summary TEXT);
         INSERT INTO runs_old SELECT seq, id, experiment, started, finished, meta, summary FROM runs;
         DROP TABLE runs; ALTER TABLE runs_old RENAME TO runs;
         DROP INDEX run_outputs_hash; ALTER TABLE run_outputs DROP COLUMN project;
         CREATE UNIQUE INDEX run_outputs_hash ON run_outputs (hash);
         CREATE TABLE datasets_old (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, header TEXT NOT NULL,
                                    head INTEGER NOT NULL DEFAULT 0, cases INTEGER NOT NULL DEFAULT 0);
         INSERT INTO datasets_old SELECT id, name, header, head, cases FROM datasets;
         DROP TABLE datasets; ALTER TABLE datasets_old RENAME TO datasets;
         DELETE FROM schema_version WHERE version > 8;"
    };
}

#[tokio::test]
async fn a_store_of_schema_8_is_migrated_into_the_default_project() {
    let (dir, store) = fresh().await;
    let v1 = created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    store.begin_run("r-1", "smoke", "2026-11-23T10:00:00Z", "{}").await.unwrap();
    let row = casebook_store::ResultRow { seq: 0, result: "{}".into(), output: Some((H1.into(), "1".into())) };
    store.save_results("r-1", &[row]).await.unwrap();
    store.close().await;
    let path = dir.path().join(".casebook/store.db");
    let pool = raw_at(&path).await;
    sqlx::raw_sql(undo_projects!()).execute(&pool).await.unwrap();
    pool.close().await;

    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.project(), "default");
    assert_eq!(store.versions("support").await.unwrap(), [v1]);
    assert_eq!(store.run(None).await.unwrap().id, "r-1");
    assert_eq!(store.outputs(&[H1.into()]).await.unwrap(), [Some("1".into())]);
    // The new project starts empty, and may take the same name.
    let team = store.in_project("team");
    assert!(team.datasets().await.unwrap().is_empty());
    created(&team, CommitMode::Replace, vec![case("b", "2")]).await;
    assert_eq!(conformance::ids(&store, 1).await, ["a"]);
    assert!(store.check().await.unwrap().problems.is_empty());
}

#[tokio::test]
async fn a_store_of_the_first_schema_is_migrated_with_its_data() {
    let (dir, store) = fresh().await;
    let mut a = case("a", "1");
    a.labels = Some(vec!["math".into(), "category:RCA".into()]);
    created(&store, CommitMode::Replace, vec![a, case("b", "2")]).await;
    created(&store, CommitMode::Upsert, vec![case("b", "3")]).await;
    store.close().await;
    // Put the store back as schema 1 left it: full indexes for diffs.
    let path = dir.path().join(".casebook/store.db");
    let pool = raw_at(&path).await;
    sqlx::raw_sql(concat!(
        undo_projects!(),
        "DROP INDEX members_from; CREATE INDEX members_from ON members (dataset, from_v);
         DROP INDEX members_to; CREATE INDEX members_to ON members (dataset, to_v);
         DROP TABLE case_labels; DROP INDEX members_blob; DROP TABLE blob_facets;
         DROP TABLE run_results; DROP TABLE runs; DROP TABLE run_outputs; DROP TABLE seed_documents;
         DELETE FROM schema_version WHERE version > 1;",
    ))
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = SqliteStore::open(&path).await.unwrap();
    let diff = store.diff("support", 1, 2).await.unwrap();
    assert_eq!(diff.modified.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["b"]);
    store.close().await;
    let pool = raw_at(&path).await;
    let version: i64 = sqlx::query_scalar("SELECT max(version) FROM schema_version").fetch_one(&pool).await.unwrap();
    assert_eq!(version, 15);
    let partial: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE name IN ('members_from', 'members_to') AND sql LIKE '%WHERE%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(partial, 2);
    // Every body is found by its content id, in a table of its own, and every member still has
    // its body.
    let found: i64 =
        sqlx::query_scalar("SELECT count(*) FROM blobs b JOIN blob_cids c ON c.cid = b.cid AND c.blob = b.id")
            .fetch_one(&pool)
            .await
            .unwrap();
    let blobs: i64 = sqlx::query_scalar("SELECT count(*) FROM blobs").fetch_one(&pool).await.unwrap();
    assert_eq!((found, blobs), (3, 3));
    let index: i64 = sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE name = 'blobs_cid'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(index, 0);
    let orphans: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM members m WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = m.blob)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(orphans, 0);
    // The labels of the cases stored before are indexed.
    let labels: i64 = sqlx::query_scalar("SELECT count(*) FROM case_labels").fetch_one(&pool).await.unwrap();
    assert_eq!(labels, 2);
    // And filters on metadata read the facets made from the stored bodies.
    let facets: String =
        sqlx::query_scalar("SELECT facets FROM blob_facets ORDER BY blob LIMIT 1").fetch_one(&pool).await.unwrap();
    assert_eq!(facets, r#"{"id":"a"}"#);
}

#[tokio::test]
async fn a_label_and_metadata_filter_reads_only_the_labelled_rows() {
    let (_dir, store) = fresh().await;
    let mut a = case("a", "1");
    a.labels = Some(vec!["math".into()]);
    created(&store, CommitMode::Replace, vec![a, case("b", "2")]).await;
    let filter = casebook_filter::Filter::parse(r#"labels contains "math" and metadata.difficulty == "hard""#).unwrap();
    let plan = store.query_plan("support", 1, &Select { filter: Some(filter), limit: None }, None).await.unwrap();
    let plan = plan.join("\n");
    // The bodies with the label, by the label table's key; their rows in the version, by body;
    // metadata from the facets. No walk over the version's rows.
    assert!(plan.contains("SEARCH case_labels USING PRIMARY KEY (label=?)"), "{plan}");
    assert!(plan.contains("INDEX members_blob (blob=? AND dataset=? AND from_v<?)"), "{plan}");
    assert!(plan.contains("SEARCH f USING INTEGER PRIMARY KEY (rowid=?)"), "{plan}");
    assert!(!plan.contains("SCAN"), "{plan}");
}

use crate::conformance::{H1, H2};

/// Results as schema 5 kept them: Rust's `Result` written by serde.
const OLD_OK: &str = r#"{"case_id":"x","output":{"Ok":{"millis":4}},"grades":[{"grader":"g","weight":1.0,"outcome":{"Ok":{"score":0.5,"pass":false,"rationale":"half"}}},{"grader":"j","weight":1.0,"outcome":{"Err":{"kind":"judge","message":"down"}}}],"score":null}"#;
const OLD_ERR: &str = r#"{"case_id":"y","output":{"Err":{"kind":"http","message":"500"}},"grades":[]}"#;

#[tokio::test]
async fn runs_of_schema_5_are_migrated_with_their_results_and_outputs() {
    let (dir, store) = fresh().await;
    store.close().await;
    let path = dir.path().join(".casebook/store.db");
    let pool = raw_at(&path).await;
    let sql = format!(
        "{undo} DROP TABLE run_results; DROP TABLE run_outputs; DROP TABLE seed_documents;
         CREATE TABLE run_results (run TEXT NOT NULL REFERENCES runs (id), seq INTEGER NOT NULL, result TEXT NOT NULL,
                                   PRIMARY KEY (run, seq)) WITHOUT ROWID;
         CREATE TABLE run_outputs (hash TEXT PRIMARY KEY, output TEXT NOT NULL) WITHOUT ROWID;
         INSERT INTO runs (id, experiment, started, meta) VALUES ('r-a', 'x', 't', '{{}}'), ('r-b', 'x', 't', '{{}}'), ('r-c', 'x', 't', '{{}}');
         INSERT INTO run_results VALUES ('r-b', 1, 'b1'), ('r-a', 0, 'a0'), ('r-b', 0, 'b0'), ('r-c', 0, '{OLD_OK}'),
             ('r-c', 1, '{OLD_ERR}');
         INSERT INTO run_outputs VALUES ('{H1}', 'one'), ('{H2}', 'two');
         DELETE FROM schema_version WHERE version > 5;",
        undo = undo_projects!()
    );
    sqlx::raw_sql(AssertSqlSafe(sql)).execute(&pool).await.unwrap();
    pool.close().await;

    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.run_results("r-a").await.unwrap(), ["a0"]);
    assert_eq!(store.run_results("r-b").await.unwrap(), ["b0", "b1"]);
    // Results written as Rust's `Result` now say `output` or `error`.
    let converted: Vec<serde_json::Value> =
        store.run_results("r-c").await.unwrap().iter().map(|r| serde_json::from_str(r).unwrap()).collect();
    assert_eq!(
        converted,
        [
            serde_json::json!({"case_id": "x", "output": {"millis": 4}, "score": null, "grades": [
                {"grader": "g", "weight": 1.0, "score": 0.5, "pass": false, "rationale": "half"},
                {"grader": "j", "weight": 1.0, "error": {"kind": "judge", "message": "down"}}]}),
            serde_json::json!({"case_id": "y", "error": {"kind": "http", "message": "500"}, "grades": []}),
        ]
    );
    let outputs = store.outputs(&[H1.into(), H2.into()]).await.unwrap();
    assert_eq!(outputs, [Some("one".into()), Some("two".into())]);
}

#[test]
fn the_store_is_found_from_a_subfolder() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(SqliteStore::create(&dir.path().join(".casebook/store.db"))).unwrap();
    let deep = dir.path().join("a/b/c");
    fs_err::create_dir_all(&deep).unwrap();
    assert_eq!(casebook_store::find_store(&deep), Some(dir.path().join(".casebook")));
    assert_eq!(casebook_store::find_store(std::path::Path::new("/")), None);
}

#[tokio::test]
async fn a_database_without_the_casebook_schema_is_not_taken_for_a_store() {
    let (dir, store) = fresh().await;
    store.close().await;
    let pool = raw(&dir).await;
    sqlx::query("DROP TABLE schema_version").execute(&pool).await.unwrap();
    pool.close().await;
    let path = dir.path().join(".casebook/store.db");
    match SqliteStore::open(&path).await {
        Err(StoreError::NotAStore(p, why)) => {
            assert_eq!(p, path);
            assert!(why.starts_with("it has no casebook schema, but other tables: "), "{why}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("opened"),
    }
    // Opening it did not add a schema either.
    let pool = raw(&dir).await;
    let tables: i64 = sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE name = 'schema_version'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(tables, 0);
}

/// A store with every kind of version: first, replace with changes, put, re-order, remove.
async fn with_history() -> (tempfile::TempDir, SqliteStore) {
    let (dir, store) = fresh().await;
    let cases = |ids: &[&str], suffix: &str| ids.iter().map(|id| case(id, &format!("{id}{suffix}"))).collect();
    created(&store, CommitMode::Replace, cases(&["a", "b", "c", "d"], "")).await;
    created(&store, CommitMode::Replace, cases(&["a", "b", "c", "e"], "2")).await;
    created(&store, CommitMode::Upsert, cases(&["f"], "")).await;
    created(&store, CommitMode::Replace, cases(&["f", "e", "c", "b", "a"], "2")).await;
    // Every case changed and re-ordered at once.
    created(&store, CommitMode::Replace, cases(&["a", "b", "c", "e", "f"], "3")).await;
    created(&store, CommitMode::Remove(vec!["c".into()]), Vec::new()).await;
    (dir, store)
}

#[tokio::test]
async fn check_finds_a_sound_store_sound() {
    let (_dir, store) = with_history().await;
    let report = store.check().await.unwrap();
    assert_eq!(report.problems, Vec::<String>::new());
    assert_eq!(report.versions, 6);
    assert!(report.bodies >= 12, "{report:?}");
}

#[tokio::test]
async fn check_finds_bodies_and_versions_changed_behind_its_back() {
    let (dir, store) = with_history().await;
    let pool = raw(&dir).await;
    // A body edited in place, and a membership row pointing at another body.
    sqlx::query("UPDATE blobs SET body = replace(body, 'answer to', 'answer TO') WHERE id = 2")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE members SET blob = 1 WHERE case_id = 'd'").execute(&pool).await.unwrap();
    pool.close().await;
    let report = store.check().await.unwrap();
    assert!(report.problems.iter().any(|p| p.starts_with("case body #2 is stored as ")), "{report:?}");
    // `d` is in v1 only: v1's id no longer matches, and later versions build on the stored ids.
    assert!(report.problems.iter().any(|p| p.starts_with("`support` v1 is stored as ")), "{report:?}");
    assert!(!report.problems.iter().any(|p| p.contains("v3")), "{report:?}");
}

#[tokio::test]
async fn check_finds_content_ids_that_lead_nowhere() {
    let (dir, store) = with_history().await;
    let pool = raw(&dir).await;
    // Body 3 cannot be found any more, and body 4's content id leads to body 1.
    sqlx::raw_sql("DELETE FROM blob_cids WHERE blob = 3; UPDATE blob_cids SET blob = 1 WHERE blob = 4;")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let report = store.check().await.unwrap();
    assert_eq!(
        report.problems,
        [
            "case bodies that cannot be found by their content id (a later commit would store them again): 2",
            "content ids that lead to no case body or to another one: 1"
        ],
        "{report:?}"
    );
}

#[tokio::test]
async fn a_commit_does_not_build_on_a_reused_body_that_was_changed() {
    // Damage SQLite cannot see: a body rewritten behind the store's back (as a stray write into
    // an overflow page would), which the content-id index still finds. A commit that would reuse
    // it writes nothing.
    for garbage in ["'{not json' || substr(body, 10)", "substr(body, 2) || '}'", "'{}'"] {
        let (dir, store) = fresh().await;
        created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2")]).await;
        let pool = raw(&dir).await;
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE blobs SET body = {garbage} WHERE id = (SELECT blob FROM members WHERE case_id = 'b')"
        )))
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
        // `b` again, unchanged (its body is reused), with a new case beside it.
        let outcome = conformance::commit(&store, CommitMode::Upsert, vec![case("b", "2"), case("c", "3")]).await;
        match outcome {
            Err(err @ StoreError::Damaged(_)) => assert_eq!(
                err.to_string(),
                "the store is damaged (1 of the case bodies this commit reuses are missing or not what was stored): \
                 nothing was written; run `casebook store check` to see what is wrong",
                "{garbage}"
            ),
            other => panic!("{garbage}: {other:?}"),
        }
        assert_eq!(store.versions("support").await.unwrap().len(), 1, "{garbage}");
    }
    // Nor on the body of another case, which `b`'s content id was made to lead to.
    let (dir, store) = fresh().await;
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2")]).await;
    let pool = raw(&dir).await;
    sqlx::query(
        "UPDATE blob_cids SET blob = (SELECT blob FROM members WHERE case_id = 'a')
         WHERE blob = (SELECT blob FROM members WHERE case_id = 'b')",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let outcome = conformance::commit(&store, CommitMode::Upsert, vec![case("b", "2"), case("c", "3")]).await;
    assert!(matches!(outcome, Err(StoreError::Damaged(_))), "{outcome:?}");
    assert_eq!(store.versions("support").await.unwrap().len(), 1);
}

/// Cases that carry a seed file, and others.
fn seeded_cases(n: usize, document: &serde_json::Value) -> Vec<casebook_model::Case> {
    let mut cases: Vec<_> =
        (0..n).map(|i| conformance::seeded(&format!("s{i:04}"), "./seeds/bob.yaml", document.clone())).collect();
    cases.push(case("plain", "no seeds"));
    cases
}

async fn scalar(pool: &sqlx::SqlitePool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// Every body of `version`, as the store gives them back.
async fn bodies(store: &SqliteStore, version: u64) -> Vec<String> {
    let mut out = Vec::new();
    store
        .bodies("support", version, &Select::all(), 500, &mut |batch| {
            out.extend(batch);
            true
        })
        .await
        .unwrap();
    out
}

#[tokio::test]
async fn a_seed_file_thousands_of_cases_share_is_stored_once() {
    let (dir, store) = fresh().await;
    // A 100 KB seed file, carried by 2,000 cases.
    let entries: Vec<serde_json::Value> = (0..10)
        .map(|i| serde_json::json!({"key": format!("k{i}"), "content": format!("{i}: {}", "Bob likes night trains. ".repeat(420))}))
        .collect();
    let document = serde_json::json!({"kind": "MemorySeed", "entries": entries});
    let size = serde_json::to_string(&document).unwrap().len();
    assert!(size > 100_000, "{size}");
    let cases = seeded_cases(2000, &document);
    created(&store, CommitMode::Replace, cases[..10].to_vec()).await;
    created(&store, CommitMode::Replace, cases.clone()).await;
    let read = bodies(&store, 2).await;
    assert_eq!(read.len(), 2001);
    for i in [0, 1999, 2000] {
        assert_eq!(read[i], serde_json::to_string(&cases[i]).unwrap());
    }
    // Stored once, under its content id; each body holds a reference of about 100 bytes.
    let pool = raw(&dir).await;
    assert_eq!(scalar(&pool, "SELECT count(*) FROM seed_documents").await, 1);
    let cid: Vec<u8> = sqlx::query_scalar("SELECT cid FROM seed_documents").fetch_one(&pool).await.unwrap();
    let expected = casebook_canon::content_id(casebook_canon::Kind::Seed, &document).unwrap();
    assert_eq!(casebook_canon::id_hex(&cid.try_into().unwrap()), expected);
    assert!(scalar(&pool, "SELECT max(length(body)) FROM blobs").await < 400);
    pool.close().await;
    store.close().await;
    // 2,000 copies would be 200 MB; the store is a few hundred kilobytes and one document.
    let file = fs_err::metadata(dir.path().join(".casebook/store.db")).unwrap().len();
    assert!(file < 3 * size as u64 + 2_000_000, "{file} bytes");
    let store = SqliteStore::open(&dir.path().join(".casebook/store.db")).await.unwrap();
    let report = store.check().await.unwrap();
    assert_eq!(report.problems, Vec::<String>::new());
    assert_eq!((report.bodies, report.seed_documents), (2001, 1));
}

/// A store of schema 7 kept a seed file's document inside each body that carries it: migrating
/// moves the documents into `seed_documents` (once each) and leaves every content id, and
/// every read, as it was. A body still holding its document (as schema 7 wrote it) reads the
/// same as a compact one.
#[tokio::test]
async fn bodies_of_schema_7_with_seed_files_are_migrated_and_read_the_same() {
    let (dir, store) = fresh().await;
    let document = conformance::seed_document("Bob likes night trains");
    let cases = seeded_cases(3, &document);
    let v1 = created(&store, CommitMode::Replace, cases.clone()).await;
    let mut other = conformance::seed_document("Bob likes early flights");
    other["n"] = serde_json::json!(2);
    let mut changed = cases.clone();
    changed[0] = conformance::seeded("s0000", "./seeds/bob.yaml", other);
    created(&store, CommitMode::Replace, changed.clone()).await;
    store.close().await;
    let whole = |cases: &[casebook_model::Case]| -> Vec<String> {
        cases.iter().map(|c| serde_json::to_string(c).unwrap()).collect()
    };
    // Back to schema 7: every body whole, no table of seed documents.
    let path = dir.path().join(".casebook/store.db");
    let pool = raw_at(&path).await;
    let cids_before: Vec<Vec<u8>> =
        sqlx::query_scalar("SELECT cid FROM blobs ORDER BY id").fetch_all(&pool).await.unwrap();
    for c in cases.iter().chain(&changed) {
        let body = serde_json::to_string(c).unwrap();
        let cid = casebook_canon::content_id_bytes_of_json(casebook_canon::Kind::Case, &body).unwrap();
        sqlx::query("UPDATE blobs SET body = ? WHERE cid = ?").bind(&body).bind(&cid[..]).execute(&pool).await.unwrap();
    }
    sqlx::raw_sql(concat!(
        undo_projects!(),
        "DROP TABLE seed_documents; DELETE FROM schema_version WHERE version > 7;"
    ))
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(scalar(&pool, "SELECT count(*) FROM blobs WHERE body LIKE '%night trains%'").await, 3);
    pool.close().await;

    let store = SqliteStore::open(&path).await.unwrap();
    let pool = raw_at(&path).await;
    assert_eq!(scalar(&pool, "SELECT max(version) FROM schema_version").await, 15);
    assert_eq!(scalar(&pool, "SELECT count(*) FROM seed_documents").await, 2);
    assert_eq!(scalar(&pool, "SELECT count(*) FROM blobs WHERE body LIKE '%night trains%'").await, 0);
    let cids_after: Vec<Vec<u8>> =
        sqlx::query_scalar("SELECT cid FROM blobs ORDER BY id").fetch_all(&pool).await.unwrap();
    assert_eq!(cids_after, cids_before);
    assert_eq!(bodies(&store, 1).await, whole(&cases));
    assert_eq!(bodies(&store, 2).await, whole(&changed));
    assert_eq!(store.versions("support").await.unwrap()[0].id, v1.id);
    let diff = store.diff("support", 1, 2).await.unwrap();
    assert_eq!(diff.modified.len(), 1);
    assert_eq!(diff.modified[0].changes.len(), 2, "{diff:?}");
    let report = store.check().await.unwrap();
    assert_eq!((report.problems.clone(), report.seed_documents), (Vec::<String>::new(), 2), "{report:?}");

    // A body left whole (as schema 7 wrote it) reads, filters and checks the same.
    let body = serde_json::to_string(&cases[1]).unwrap();
    let cid = casebook_canon::content_id_bytes_of_json(casebook_canon::Kind::Case, &body).unwrap();
    sqlx::query("UPDATE blobs SET body = ? WHERE cid = ?").bind(&body).bind(&cid[..]).execute(&pool).await.unwrap();
    assert_eq!(scalar(&pool, "SELECT count(*) FROM blobs WHERE body LIKE '%night trains%'").await, 1);
    assert_eq!(bodies(&store, 2).await, whole(&changed));
    let filter = casebook_filter::Filter::parse(r#"memory_seeds.content.entries[0].content matches "night""#).unwrap();
    let select = Select { filter: Some(filter), limit: None };
    assert_eq!(store.count("support", 2, &select).await.unwrap(), 2);
    assert_eq!(store.check().await.unwrap().problems, Vec::<String>::new());
    // Committing the same cases again changes nothing.
    let outcome = conformance::commit(&store, CommitMode::Replace, changed).await.unwrap();
    assert!(matches!(outcome, casebook_store::CommitOutcome::Unchanged(_)), "{outcome:?}");
    pool.close().await;
}

/// Bodies of schema 7, each with its own copy of a 100 KB seed document: migrating moves the
/// documents out and gives the space back, so the file shrinks to what it holds.
#[tokio::test]
async fn migrating_gives_back_the_space_of_seed_documents_stored_whole() {
    let (dir, store) = fresh().await;
    let document = conformance::seed_document(&"Bob likes night trains. ".repeat(4200));
    let cases = seeded_cases(200, &document);
    created(&store, CommitMode::Replace, cases.clone()).await;
    store.close().await;
    let path = dir.path().join(".casebook/store.db");
    let pool = raw_at(&path).await;
    let mut whole = Vec::new();
    for c in &cases {
        let body = serde_json::to_string(c).unwrap();
        let cid = casebook_canon::content_id_bytes_of_json(casebook_canon::Kind::Case, &body).unwrap();
        sqlx::query("UPDATE blobs SET body = ? WHERE cid = ?").bind(&body).bind(&cid[..]).execute(&pool).await.unwrap();
        whole.push(body);
    }
    sqlx::raw_sql(concat!(
        undo_projects!(),
        "DROP TABLE seed_documents; DELETE FROM schema_version WHERE version > 7; PRAGMA wal_checkpoint(TRUNCATE);",
    ))
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let size = || fs_err::metadata(&path).unwrap().len();
    assert!(size() > 20_000_000, "{}", size());

    let store = SqliteStore::open(&path).await.unwrap();
    assert!(size() < 2_000_000, "{}", size());
    assert_eq!(bodies(&store, 1).await, whole);
}

#[tokio::test]
async fn check_finds_seed_documents_changed_or_lost() {
    let (dir, store) = fresh().await;
    created(&store, CommitMode::Replace, seeded_cases(2, &conformance::seed_document("trains"))).await;
    let pool = raw(&dir).await;
    sqlx::query("UPDATE seed_documents SET document = replace(document, 'trains', 'planes')")
        .execute(&pool)
        .await
        .unwrap();
    let report = store.check().await.unwrap();
    assert!(report.problems.iter().any(|p| p.starts_with("seed document #1 is stored as ")), "{report:?}");
    // Each body that carries it no longer makes its content id either.
    assert_eq!(report.problems.iter().filter(|p| p.starts_with("case body #")).count(), 2, "{report:?}");
    sqlx::query("DELETE FROM seed_documents").execute(&pool).await.unwrap();
    let report = store.check().await.unwrap();
    let lost: Vec<&String> = report.problems.iter().filter(|p| p.contains("which is not in the store")).collect();
    assert_eq!(lost.len(), 2, "{report:?}");
    assert!(lost[0].starts_with("case body #1 refers to the seed document "), "{report:?}");
    // Reading such a case says what is wrong.
    let err = store.case("support", 1, "s0000").await.unwrap_err();
    assert!(err.to_string().contains("which is not in the store"), "{err}");
    pool.close().await;
}

/// Names an older casebook allowed, written into the store by SQL, stay usable.
#[tokio::test]
async fn names_made_before_the_rules_stay_usable() {
    let (dir, store) = fresh().await;
    let statements = conformance::legacy_names_setup(&store).await;
    let pool = raw(&dir).await;
    for sql in statements {
        sqlx::query(AssertSqlSafe(sql)).execute(&pool).await.unwrap();
    }
    pool.close().await;
    store.close().await;
    let store = SqliteStore::open(&dir.path().join(".casebook/store.db")).await.unwrap();
    conformance::legacy_names_stay_usable(store).await;
}

/// The permission bits of a file.
#[cfg(unix)]
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs_err::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
#[tokio::test]
async fn a_store_and_its_log_are_readable_by_their_owner_only_or_the_group_if_asked() {
    for (sharing, expected) in
        [(casebook_store::FileSharing::Owner, 0o600), (casebook_store::FileSharing::Group, 0o660)]
    {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(".casebook/store.db");
        let store = SqliteStore::create_with(&db, sharing).await.unwrap();
        assert_eq!(mode(&db), expected, "{sharing:?}");
        // The write-ahead log and its index appear with the commits, with the database's mode.
        created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
        created(&store, CommitMode::Upsert, vec![case("b", "ünï")]).await;
        for file in ["store.db", "store.db-wal", "store.db-shm"] {
            assert_eq!(mode(&dir.path().join(".casebook").join(file)), expected, "{file} {sharing:?}");
        }
        store.close().await;
        // Opened again by another process, as a server does: the log it makes is no wider.
        let store = SqliteStore::open(&db).await.unwrap();
        created(&store, CommitMode::Upsert, vec![case("c", "3")]).await;
        assert_eq!(mode(&dir.path().join(".casebook/store.db-wal")), expected, "{sharing:?}");
        store.close().await;
    }
    // An existing file keeps its mode: `create` only brings it up to date.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    SqliteStore::create(&db).await.unwrap().close().await;
    {
        use std::os::unix::fs::PermissionsExt;
        fs_err::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    }
    SqliteStore::create(&db).await.unwrap().close().await;
    assert_eq!(mode(&db), 0o640);
}

/// After a purge, no byte of the purged case's text is left in the store's files: the database,
/// its write-ahead log and the shared-memory file (SQLite's `secure_delete`, then a truncating
/// checkpoint).
#[tokio::test]
async fn a_purged_case_leaves_no_bytes_in_the_files() {
    let marker = "PURGE-ME-5f1c9a";
    let (dir, store) = fresh().await;
    let [v1, v2] = conformance::marked_cases(marker);
    created(&store, CommitMode::Replace, v1).await;
    created(&store, CommitMode::Upsert, v2).await;
    let folder = vec![dir.path().join(".casebook")];
    assert!(!conformance::files_holding(&folder, marker).is_empty(), "the text is stored before the purge");
    let any = casebook_store::AnyStore::from(store.clone());
    let done = any.purge(&conformance::purge_request(&["p"])).await.unwrap();
    assert!(done.erased, "{done:?}");
    assert_eq!(conformance::files_holding(&folder, marker), Vec::<std::path::PathBuf>::new());
    let report = store.check().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(conformance::ids(&store, 2).await, ["b"]);
}

#[tokio::test]
async fn a_filter_on_a_rare_review_state_reads_the_review_index() {
    let (_dir, store) = fresh().await;
    let mut a = case("a", "1");
    a.review = Some(casebook_model::Review::Draft);
    created(&store, CommitMode::Replace, vec![a, case("b", "2"), case("c", "3")]).await;
    let plan_of = |source: &str| {
        let filter = casebook_filter::Filter::parse(source).unwrap();
        let store = &store;
        async move {
            store
                .query_plan("support", 1, &Select { filter: Some(filter), limit: None }, None)
                .await
                .unwrap()
                .join("\n")
        }
    };
    // A page after a case: still each body's rows by body, not a range of the order index per
    // body (which read the rest of a 1M-case version once per draft).
    let filter = casebook_filter::Filter::parse(r#"review == "draft""#).unwrap();
    let after = store.place("support", 1, "a").await.unwrap().unwrap();
    let select = Select { filter: Some(filter), limit: None };
    let plan = store.query_plan("support", 1, &select, Some(&after)).await.unwrap().join("\n");
    assert!(plan.contains("INDEX members_blob (blob=? AND dataset=?"), "{plan}");
    assert!(!plan.contains("members_ord"), "{plan}");
    // The bodies in the state, by the review index; their rows in the version, by body.
    let plan = plan_of(r#"review == "draft" and metadata.difficulty == "hard""#).await;
    assert!(plan.contains("USING INDEX blob_facets_review"), "{plan}");
    assert!(plan.contains("INDEX members_blob (blob=? AND dataset=? AND from_v<?)"), "{plan}");
    assert!(!plan.contains("SCAN m"), "{plan}");
    // A filter that does not require a state reads the version as before.
    let plan = plan_of(r#"review == "draft" or metadata.difficulty == "hard""#).await;
    assert!(!plan.contains("blob_facets_review"), "{plan}");
}
