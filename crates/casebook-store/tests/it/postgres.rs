//! The conformance suite on the shared PostgreSQL store, and what is particular to it: many
//! writers, connection errors, the same ids as the embedded store.
//!
//! The server is the one `scripts/test.sh` starts (`CASEBOOK_TEST_POSTGRES`, a superuser's
//! URL); each test makes a database of its own, so tests run in parallel. Without the variable
//! every test fails: PostgreSQL is never skipped.

use std::sync::atomic::{AtomicU32, Ordering};

use casebook_store::{AnyStore, CommitMode, CommitOutcome, PostgresStore, Select, SqliteStore, Store, StoreError};
use sqlx::Connection;

use crate::conformance::{self, batches, case, created, request};

/// The server's URL, with database `db`.
fn url_of(db: &str) -> String {
    let base = std::env::var("CASEBOOK_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!("CASEBOOK_TEST_POSTGRES is not set: run the tests with `scripts/test.sh`, which starts PostgreSQL")
    });
    let (server, _) = base.rsplit_once('/').expect("a URL with a database");
    format!("{server}/{db}")
}

/// A new, empty database on the test server; its URL.
pub async fn fresh_database() -> String {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "t_{}_{}_{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
    );
    let mut admin = sqlx::PgConnection::connect(&url_of("postgres")).await.expect("the test server answers");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await.unwrap();
    admin.close().await.unwrap();
    url_of(&name)
}

async fn fresh() -> PostgresStore {
    PostgresStore::create(&fresh_database().await).await.unwrap()
}

// The whole conformance suite, on a fresh database each.
crate::suite!(fresh_suite);

async fn fresh_suite() -> ((), PostgresStore) {
    ((), fresh().await)
}

/// The same commits make the same versions, with the same content ids, in both stores.
#[tokio::test]
async fn versions_have_the_same_ids_as_in_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::create(&dir.path().join("store.db")).await.unwrap();
    let pg = fresh().await;
    // Ids whose byte order is not their order in other collations (upper case, accents, NUL).
    let ids = ["b", "B", "a", "é", "e\u{301}", "z\0z", "Z", "10", "9", "_x"];
    let first: Vec<_> = ids.iter().enumerate().map(|(i, id)| case(id, &format!("q{i}"))).collect();
    let mut reordered = first.clone();
    reordered.reverse();
    reordered[3] = case(ids[6], "changed");
    reordered.push(case("new", "n"));
    let steps: Vec<(CommitMode, Vec<_>)> = vec![
        (CommitMode::Replace, first),
        (CommitMode::Upsert, vec![case("a", "edited"), case("c", "added")]),
        (CommitMode::Remove(vec!["b".into(), "z\0z".into(), "missing".into()]), Vec::new()),
        (CommitMode::Replace, reordered),
    ];
    for (mode, cases) in steps {
        let a = sqlite.commit(request(mode.clone(), "m"), batches(cases.clone())).await.unwrap();
        let b = pg.commit(request(mode, "m"), batches(cases)).await.unwrap();
        assert_eq!(a, b);
    }
    for v in 1..=4 {
        assert_eq!(conformance::ids(&sqlite, v).await, conformance::ids(&pg, v).await, "v{v}");
    }
    assert_eq!(sqlite.diff("support", 1, 4).await.unwrap(), pg.diff("support", 1, 4).await.unwrap());
    assert_eq!(sqlite.history("support", "a").await.unwrap(), pg.history("support", "a").await.unwrap());
    let sound = pg.check().await.unwrap();
    assert!(sound.problems.is_empty(), "{:?}", sound.problems);
    assert_eq!(sound.versions, 4);
}

/// Commits of a few cases or ids (which the store makes in one transaction, without temporary
/// tables) and of more than a chunk (its general path) make the versions the embedded store
/// makes: the same outcomes and version ids, and the same cases in the same order.
#[tokio::test]
async fn small_and_large_commits_make_the_versions_of_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::create(&dir.path().join("store.db")).await.unwrap();
    let pg = fresh().await;
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut pick = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let names = ["a", "B", "é", "e\u{301}", "z\0z", "10", "9", "_x", "ключ", "🙂"];
    let id = |i: usize| format!("{}{}", names[i % names.len()], i / names.len());
    let mut steps: Vec<(CommitMode, Vec<_>)> =
        vec![(CommitMode::Replace, (0..30).step_by(2).map(|i| case(&id(i), "first")).collect())];
    // Cases between their neighbours: places that are not whole numbers, which later additions
    // go after.
    steps.push((CommitMode::Replace, (0..30).map(|i| case(&id(i), "first")).collect()));
    for round in 0..24 {
        let step = match pick(4) {
            0 | 1 => {
                let mut cases: Vec<_> = (0..1 + pick(5)).map(|_| pick(40)).collect();
                cases.sort_unstable();
                cases.dedup();
                let cases = cases.into_iter().map(|i| case(&id(i), if pick(2) == 0 { "first" } else { "later" }));
                (
                    CommitMode::Upsert,
                    cases
                        .map(|mut c| {
                            c.task.input = serde_json::json!(format!("{} {round}", c.task.input));
                            c
                        })
                        .collect(),
                )
            }
            2 => (CommitMode::Remove((0..1 + pick(4)).map(|_| id(pick(45))).collect()), Vec::new()),
            _ => (CommitMode::Upsert, vec![case(&id(pick(30)), "first")]),
        };
        steps.push(step);
    }
    // More than a chunk at once, added and then removed again; then a few again.
    steps.push((CommitMode::Upsert, (0..2500).map(|i| case(&format!("bulk {i}"), "bulk")).collect()));
    steps.push((CommitMode::Remove((0..2100).map(|i| format!("bulk {i}")).collect()), Vec::new()));
    steps.push((CommitMode::Upsert, vec![case(&id(3), "last"), case("after the bulk", "new")]));
    let (mut created_, mut unchanged) = (0, 0);
    for (n, (mode, cases)) in steps.into_iter().enumerate() {
        let a = sqlite.commit(request(mode.clone(), "m"), batches(cases.clone())).await.unwrap();
        let b = pg.commit(request(mode, "m"), batches(cases)).await.unwrap();
        assert_eq!(a, b, "step {n}");
        match a {
            CommitOutcome::Created(v) => {
                created_ += 1;
                assert_eq!(
                    conformance::ids(&sqlite, v.number).await,
                    conformance::ids(&pg, v.number).await,
                    "v{}",
                    v.number
                );
            }
            CommitOutcome::Unchanged(_) => unchanged += 1,
        }
    }
    // The sequence exercised both outcomes, not only one.
    assert!(created_ > 10 && unchanged > 0, "{created_} versions, {unchanged} unchanged");
    let head = pg.resolve("support", &casebook_store::Ref::Latest).await.unwrap().number;
    assert_eq!(sqlite.diff("support", 2, head).await.unwrap(), pg.diff("support", 2, head).await.unwrap());
    let sound = pg.check().await.unwrap();
    assert!(sound.problems.is_empty(), "{:?}", sound.problems);
}

/// A filter that requires a label and tests the cases' JSON selects what it selects in memory,
/// counted, listed and paged, whether the label is on few cases (which the store walks through
/// the indexes) or on many (PostgreSQL's own plan), with the statistics of an analysed store.
#[tokio::test]
async fn a_rare_or_common_label_with_a_json_test_selects_as_in_memory() {
    let url = fresh_database().await;
    let pg = PostgresStore::create(&url).await.unwrap();
    let cases: Vec<_> = (0..600)
        .map(|i| {
            // Some inputs hold a NUL, which PostgreSQL's JSON functions cannot read.
            let input = if i % 50 == 25 { format!("q{i}\u{0}") } else { format!("q{i}") };
            let mut c = case(&format!("c{i:03}"), &input);
            let mut labels = Vec::new();
            if i % 25 == 0 {
                labels.push("rare".to_owned());
            }
            if i % 5 != 0 {
                labels.push("common".to_owned());
            }
            c.labels = Some(labels);
            let difficulty = ["easy", "hard", "medium"][i % 3];
            c.metadata = Some(serde_json::from_value(serde_json::json!({"difficulty": difficulty})).unwrap());
            c
        })
        .collect();
    created(&pg, CommitMode::Replace, cases.clone()).await;
    // A second version: some labelled cases changed (their old bodies keep the label but are
    // not in it), some removed.
    let mut second = cases.clone();
    for c in second.iter_mut().filter(|c| c.id.ends_with("00") || c.id.ends_with("50")) {
        c.task.input = serde_json::json!(format!("changed {}", c.id));
        c.metadata = Some(serde_json::from_value(serde_json::json!({"difficulty": "hard"})).unwrap());
    }
    second.retain(|c| !c.id.ends_with("75"));
    created(&pg, CommitMode::Replace, second.clone()).await;
    // The statistics a large import leaves (the store analyses after 10,000 changes).
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("ANALYZE").execute(&mut admin).await.unwrap();
    for (version, cases) in [(1, &cases), (2, &second)] {
        for source in [
            r#"labels contains "rare" and metadata.difficulty == "hard""#,
            r#"labels contains "common" and metadata.difficulty == "hard""#,
            r#"labels contains "rare" and labels contains "common" and not metadata.difficulty == "easy""#,
            r#"labels contains "nowhere" and metadata.difficulty == "hard""#,
            r#"labels contains "rare" and input contains "5""#,
            r#"labels contains "rare" and (input contains "\u0000" or metadata.difficulty == "easy")"#,
        ] {
            let filter = casebook_filter::Filter::parse(source).unwrap();
            let want: Vec<String> = cases.iter().filter(|c| filter.matches(c)).map(|c| c.id.clone()).collect();
            // (No case has both labels, none "nowhere".)
            assert_eq!(
                want.is_empty(),
                source.contains("nowhere") || source.contains("\"common\" and not"),
                "{source}"
            );
            for limit in [None, Some(3)] {
                let select = Select { filter: Some(filter.clone()), limit };
                let want = &want[..want.len().min(limit.unwrap_or(u64::MAX) as usize)];
                let (got, n) = (conformance::selected(&pg, version, &select, 7).await.unwrap(), want.len() as u64);
                assert_eq!(got, want, "v{version} {source} {limit:?}");
                assert_eq!(pg.count("support", version, &select).await.unwrap(), n, "v{version} {source} {limit:?}");
            }
        }
    }
    for source in [
        r#"labels contains "rare" and metadata.difficulty == "hard""#,
        r#"labels contains "common" and metadata.difficulty == "hard""#,
    ] {
        let filter = casebook_filter::Filter::parse(source).unwrap();
        let want: Vec<String> = cases.iter().filter(|c| filter.matches(c)).map(|c| c.id.clone()).collect();
        let select = Select { filter: Some(filter), limit: None };
        let first = pg.page("support", 1, &select, None, 5).await.unwrap();
        let ids: Vec<String> = first
            .bodies
            .iter()
            .map(|b| serde_json::from_str::<serde_json::Value>(b).unwrap()["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids, want[..want.len().min(5)], "{source}");
    }
}

/// What a command does, one operation after another (reads, a filtered count, a small commit),
/// takes one connection in all: each costs a server process and a password exchange, a few
/// milliseconds of a one-case `put`. A server's store takes its connections from the pool.
#[tokio::test]
async fn a_command_makes_one_connection() {
    let url = fresh_database().await;
    PostgresStore::create(&url).await.unwrap().close().await;
    let store = PostgresStore::open(&url).await.unwrap();
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2")]).await;
    store.datasets().await.unwrap();
    let head = store.resolve("support", &casebook_store::Ref::Latest).await.unwrap();
    let select = Select {
        filter: Some(casebook_filter::Filter::parse(r#"labels contains "x" and input == "1""#).unwrap()),
        limit: None,
    };
    store.count("support", head.number, &select).await.unwrap();
    created(&store, CommitMode::Upsert, vec![case("c", "3")]).await;
    store.diff("support", 1, 2).await.unwrap();
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let count = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'casebook %'";
    let open: i64 = sqlx::query_scalar(count).fetch_one(&mut admin).await.unwrap();
    assert_eq!(open, 1, "connections the store holds");
    // A server's: none outside the pool once shared.
    let shared = store.shared();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let open: i64 = sqlx::query_scalar(count).fetch_one(&mut admin).await.unwrap();
    assert_eq!(open, 0, "a shared store keeps no spare connection");
    shared.datasets().await.unwrap();
    shared.close().await;
}

/// A store held open for long outlives its connection: one the server closed (a restart, an
/// idle timeout) is tested before it is used again and replaced, not handed out broken.
#[tokio::test]
async fn a_store_held_open_outlives_a_closed_connection() {
    let url = fresh_database().await;
    let store = PostgresStore::create(&url).await.unwrap();
    created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name LIKE 'casebook %'",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(ended, [true]);
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(store.datasets().await.unwrap().len(), 1);
    created(&store, CommitMode::Upsert, vec![case("b", "2")]).await;
    assert_eq!(conformance::ids(&store, 2).await, ["a", "b"]);
}

/// Eight writers on eight connections commit to one dataset at once, each on the head it read,
/// retrying on a conflict: every update is in the end, none is lost, and the versions follow
/// one another.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_committers_lose_no_update() {
    let url = fresh_database().await;
    let first = PostgresStore::create(&url).await.unwrap();
    created(&first, CommitMode::Replace, vec![case("seed", "0")]).await;
    let mut writers = Vec::new();
    for w in 0..8 {
        let url = url.clone();
        writers.push(tokio::spawn(async move {
            let store = PostgresStore::open(&url).await.unwrap();
            let mut conflicts = 0;
            loop {
                let head = store.resolve("support", &casebook_store::Ref::Latest).await.unwrap().number;
                let mut req = request(CommitMode::Upsert, &format!("writer {w}"));
                req.parent = Some(head);
                let cases = vec![case(&format!("w{w}"), &format!("from writer {w}")), case("shared", &format!("{w}"))];
                match store.commit(req, batches(cases)).await {
                    Ok(CommitOutcome::Created(v)) => return (v.number, conflicts),
                    Err(StoreError::Conflict { .. }) => conflicts += 1,
                    other => panic!("writer {w}: {other:?}"),
                }
            }
        }));
    }
    let mut numbers = Vec::new();
    for writer in writers {
        numbers.push(writer.await.unwrap().0);
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (2..=9).collect::<Vec<_>>());
    let head = first.resolve("support", &casebook_store::Ref::Latest).await.unwrap();
    assert_eq!(head.number, 9);
    let mut ids = conformance::ids(&first, 9).await;
    ids.sort();
    let mut want: Vec<String> = (0..8).map(|w| format!("w{w}")).collect();
    want.extend(["seed".into(), "shared".into()]);
    want.sort();
    assert_eq!(ids, want);
    for v in first.versions("support").await.unwrap().windows(2) {
        assert_eq!(v[1].parent, Some(v[0].number));
    }
}

/// A long commit to one dataset does not keep readers of it, or writers of another, waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_in_progress_blocks_no_reader_and_no_other_dataset() {
    let url = fresh_database().await;
    let store = PostgresStore::create(&url).await.unwrap();
    created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    // A commit whose input has not all arrived: its bodies are written, its version is not.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let pending = {
        let url = url.clone();
        tokio::spawn(async move {
            let writer = PostgresStore::open(&url).await.unwrap();
            writer.commit(request(CommitMode::Upsert, "slow"), rx).await
        })
    };
    tx.send(Ok(vec![casebook_store::prepare(&case("b", "2")).unwrap()])).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let quick = std::time::Duration::from_secs(5);
    let read = tokio::time::timeout(quick, conformance::ids(&store, 1)).await.expect("a reader waited");
    assert_eq!(read, ["a"]);
    let mut other = request(CommitMode::Replace, "other");
    other.dataset = "other".into();
    let done = tokio::time::timeout(quick, store.commit(other, batches(vec![case("x", "1")])))
        .await
        .expect("a writer of another dataset waited");
    assert!(matches!(done.unwrap(), CommitOutcome::Created(_)));
    drop(tx);
    let slow = pending.await.unwrap().unwrap();
    assert!(matches!(slow, CommitOutcome::Created(v) if v.number == 2));
}

#[tokio::test]
async fn a_wrong_password_or_an_unreachable_server_is_a_one_line_error_without_the_password() {
    let url = fresh_database().await;
    let wrong = url.replacen(":test-", ":wrong-", 1);
    assert_ne!(wrong, url, "the test server's password starts with `test-`");
    let err = PostgresStore::open(&wrong).await.err().expect("a wrong password is refused");
    let text = err.to_string();
    assert!(matches!(err, StoreError::Connect { .. }), "{err:?}");
    assert!(text.contains("password authentication failed") && text.contains(":***@"), "{text}");
    assert!(!text.contains("wrong-") && !text.contains('\n'), "{text}");

    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let err = PostgresStore::open(&format!("postgres://u:secret@127.0.0.1:{port}/db")).await.err().unwrap();
    let text = err.to_string();
    assert!(text.starts_with(&format!("cannot connect to the store `postgres://u:***@127.0.0.1:{port}/db`")), "{text}");
    assert!(!text.contains("secret"), "{text}");
}

#[tokio::test]
async fn a_database_without_the_schema_or_of_a_newer_casebook_is_refused() {
    let url = fresh_database().await;
    let err = PostgresStore::open(&url).await.err().unwrap();
    assert!(matches!(err, StoreError::NotAStore(..)), "{err:?}");
    assert!(err.to_string().contains("holds no tables"), "{err}");

    let store = PostgresStore::create(&url).await.unwrap();
    store.close().await;
    let mut raw = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("INSERT INTO casebook_schema (version) VALUES (99)").execute(&mut raw).await.unwrap();
    let err = PostgresStore::open(&url).await.err().unwrap();
    assert!(matches!(err, StoreError::Newer(_, 99)), "{err:?}");
}

#[tokio::test]
async fn a_commit_cut_off_with_its_connection_writes_no_version() {
    let url = fresh_database().await;
    let store = PostgresStore::create(&url).await.unwrap();
    created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let writer = PostgresStore::open(&url).await.unwrap();
    let pending = tokio::spawn(async move { writer.commit(request(CommitMode::Upsert, "cut"), rx).await });
    tx.send(Ok(vec![casebook_store::prepare(&case("b", "2")).unwrap()])).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // The server ends every other session, as a restart or a network failure would.
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database()")
        .execute(&mut admin)
        .await
        .unwrap();
    drop(tx);
    let outcome = pending.await.unwrap();
    assert!(matches!(outcome, Err(StoreError::Database(_))), "{outcome:?}");
    let store = PostgresStore::open(&url).await.unwrap();
    assert_eq!(store.resolve("support", &casebook_store::Ref::Latest).await.unwrap().number, 1);
    assert_eq!(store.count("support", 1, &Select::all()).await.unwrap(), 1);
}

/// Everything a store holds, as its reading calls give it back.
async fn everything(store: &AnyStore) -> Vec<String> {
    let mut out = Vec::new();
    for dataset in store.datasets().await.unwrap() {
        let name = &dataset.name;
        out.push(format!("{dataset:?}"));
        out.push(format!("{:?}", store.events(name).await.unwrap()));
        out.push(format!("{:?}", store.tags(name).await.unwrap()));
        for version in store.versions(name).await.unwrap() {
            out.push(format!("{version:?}"));
            store
                .bodies(name, version.number, &Select::all(), 100, &mut |bodies| {
                    out.extend(bodies);
                    true
                })
                .await
                .unwrap();
        }
    }
    for run in store.runs().await.unwrap() {
        out.push(format!("{run:?}"));
        out.push(format!("{:?}", store.run_rows(&run.id).await.unwrap()));
    }
    out
}

async fn with_history(store: &AnyStore) {
    let mut first: Vec<_> = (0..30).map(|i| case(&format!("c{i}"), &format!("q{i}"))).collect();
    // Cases sharing a seed file, whose document each store keeps once.
    let bob = conformance::seed_document("night trains");
    first.extend((0..3).map(|i| conformance::seeded(&format!("s{i}"), "./seeds/bob.yaml", bob.clone())));
    let mut reordered = first.clone();
    reordered.swap(0, 29);
    reordered.insert(10, case("between", "b"));
    let mut header = request(CommitMode::Upsert, "with a header");
    header.header = Some(serde_json::from_value(serde_json::json!({"name": "support", "description": "d"})).unwrap());
    store.commit(request(CommitMode::Replace, "first"), batches(first)).await.unwrap();
    store.commit(header, batches(vec![case("c3", "edited"), case("new", "n")])).await.unwrap();
    store.commit(request(CommitMode::Remove(vec!["c4".into()]), "rm"), batches(vec![])).await.unwrap();
    store.commit(request(CommitMode::Replace, "reordered"), batches(reordered)).await.unwrap();
    store.tag("support", 2, "prod", "tester", "2026-11-23T01:00:00Z").await.unwrap();
    store.tag("support", 4, "prod", "tester", "2026-11-23T02:00:00Z").await.unwrap();
    let mut other = request(CommitMode::Replace, "other");
    other.dataset = "other".into();
    store.commit(other, batches(vec![case("c3", "edited"), case("x", "y")])).await.unwrap();
    store.begin_run("r-1", "smoke", "2026-11-23T10:00:00Z", "{}").await.unwrap();
    let rows = [
        casebook_store::ResultRow {
            seq: 0,
            result: "{\"a\":1}".into(),
            output: Some((conformance::H1.into(), "\"o\"".into())),
        },
        casebook_store::ResultRow { seq: 1, result: "{\"b\":1}".into(), output: None },
    ];
    store.save_results("r-1", &rows).await.unwrap();
    store.finish_run("r-1", "2026-11-23T10:01:00Z", "{\"n\":2}").await.unwrap();
    store.begin_run("r-2", "smoke", "2026-11-23T11:00:00Z", "{}").await.unwrap();
}

/// `store copy` carries datasets with their whole history, log and tags, and runs with their
/// results and outputs, from SQLite to PostgreSQL and back, ids unchanged; copying again copies
/// nothing, a later version alone is copied alone, and diverged datasets are left alone.
#[tokio::test]
async fn a_copy_between_backends_holds_everything_and_copies_only_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = AnyStore::Sqlite(SqliteStore::create(&dir.path().join("a.db")).await.unwrap());
    with_history(&sqlite).await;
    let pg = AnyStore::Postgres(fresh().await);
    let mut seen = Vec::new();
    let report = casebook_store::copy(&sqlite, &pg, &mut |name, v, _| seen.push(format!("{name}@v{v}"))).await.unwrap();
    assert_eq!(report.versions, 5);
    assert_eq!(report.runs, 2);
    assert_eq!(seen, ["other@v1", "support@v1", "support@v2", "support@v3", "support@v4"]);
    assert_eq!(everything(&sqlite).await, everything(&pg).await);

    let again = casebook_store::copy(&sqlite, &pg, &mut |_, _, _| {}).await.unwrap();
    assert_eq!((again.versions, again.runs, again.runs_present), (0, 0, 2));
    assert_eq!(again.up_to_date, ["other", "support"]);
    assert_eq!(everything(&sqlite).await, everything(&pg).await);

    sqlite.commit(request(CommitMode::Upsert, "later"), batches(vec![case("late", "l")])).await.unwrap();
    let later = casebook_store::copy(&sqlite, &pg, &mut |_, _, _| {}).await.unwrap();
    assert_eq!(later.versions, 1);
    assert_eq!(everything(&sqlite).await, everything(&pg).await);

    // And back, into a new embedded store.
    let back = AnyStore::Sqlite(SqliteStore::create(&dir.path().join("b.db")).await.unwrap());
    casebook_store::copy(&pg, &back, &mut |_, _, _| {}).await.unwrap();
    assert_eq!(everything(&pg).await, everything(&back).await);

    // A dataset whose versions differ in the target is reported and left as it is.
    let mut elsewhere = request(CommitMode::Replace, "elsewhere");
    elsewhere.dataset = "third".into();
    back.commit(elsewhere.clone(), batches(vec![case("a", "1")])).await.unwrap();
    pg.commit(elsewhere, batches(vec![case("a", "2")])).await.unwrap();
    let before = everything(&back).await;
    let diverged = casebook_store::copy(&pg, &back, &mut |_, _, _| {}).await.unwrap();
    assert_eq!(diverged.diverged, ["third"]);
    assert_eq!(everything(&back).await, before);
}

/// `init` on a database the server does not have makes it (as `createdb` would); opening one
/// does not.
#[tokio::test]
async fn creating_a_store_makes_its_database_opening_one_does_not() {
    let name = fresh_database().await.rsplit_once('/').unwrap().1.to_owned();
    let url = url_of(&format!("{name}_new"));
    let err = PostgresStore::open(&url).await.err().unwrap();
    assert!(err.to_string().contains("does not exist"), "{err}");
    let store = PostgresStore::create(&url).await.unwrap();
    created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    assert_eq!(PostgresStore::open(&url).await.unwrap().datasets().await.unwrap().len(), 1);
}

/// An id or a label too long for PostgreSQL's indexes is refused by name before anything is
/// written, not met as an index error half-way.
#[tokio::test]
async fn an_id_or_label_too_long_to_index_is_refused_and_nothing_is_written() {
    let store = fresh().await;
    let long = "x".repeat(3000);
    let err =
        conformance::commit(&store, CommitMode::Replace, vec![case("a", "1"), case(&long, "2")]).await.unwrap_err();
    assert!(matches!(err, StoreError::TooLong(_)), "{err:?}");
    assert!(err.to_string().contains("longer than 2,000 bytes"), "{err}");
    let mut labelled = case("b", "3");
    labelled.labels = Some(vec![long]);
    let err = conformance::commit(&store, CommitMode::Replace, vec![labelled]).await.unwrap_err();
    assert!(matches!(err, StoreError::TooLong(_)), "{err:?}");
    assert!(store.datasets().await.unwrap().is_empty());
}

/// A copy that cannot read a version of the source (a damaged body) stops there and writes no
/// part of that version into the target.
#[tokio::test]
async fn a_copy_that_meets_a_damaged_body_writes_no_part_of_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let sqlite = AnyStore::Sqlite(SqliteStore::create(&path).await.unwrap());
    let many: Vec<_> = (0..5000).map(|i| case(&format!("c{i:04}"), &format!("q{i}"))).collect();
    created(&sqlite, CommitMode::Replace, many).await;
    created(&sqlite, CommitMode::Upsert, vec![case("c4999", "edited")]).await;
    let raw = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    sqlx::query("UPDATE blobs SET body = '{\"id\": 1}' WHERE id = (SELECT blob FROM members WHERE case_id = 'c4999' AND from_v = 2)")
        .execute(&raw)
        .await
        .unwrap();
    raw.close().await;
    let pg = AnyStore::Postgres(fresh().await);
    let err = casebook_store::copy(&sqlite, &pg, &mut |_, _, _| {}).await.unwrap_err();
    assert!(matches!(err, StoreError::Damaged(_)), "{err:?}");
    // v1 was copied whole; of v2, nothing.
    let versions = pg.versions("support").await.unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(pg.count("support", 1, &Select::all()).await.unwrap(), 5000);
}

/// Every member row, whichever kind of commit wrote it, names the place of its body in `blobs`
/// (`blob_at`, migration 0006), where unfiltered pages read it; and pages stay right when the
/// places are wrong (a table rewritten, a dump restored): a body is taken from its place only if
/// it is the member's.
#[tokio::test]
async fn pages_read_bodies_at_their_places_and_never_trust_a_wrong_place() {
    let url = fresh_database().await;
    let store = PostgresStore::create(&url).await.unwrap();
    let cases = |range: std::ops::Range<usize>, text: &str| -> Vec<_> {
        range.map(|i| case(&format!("c{i:04}"), &format!("{text} {i} é"))).collect()
    };
    // A first version; a small change; a large one (added and modified); a large one in a new
    // order; cases kept with new ones between them; a removal.
    created(&store, CommitMode::Replace, cases(0..2500, "first")).await;
    created(&store, CommitMode::Upsert, cases(3..5, "small")).await;
    created(&store, CommitMode::Upsert, cases(2000..4600, "large")).await;
    let mut reordered = cases(0..4600, "large");
    reordered.reverse();
    created(&store, CommitMode::Replace, reordered).await;
    let kept = (0..4600).filter(|i| i % 7 != 0).map(|i| case(&format!("c{i:04}"), &format!("large {i} é")));
    let between = (0..30).map(|i| case(&format!("n{i:02}"), "between"));
    created(&store, CommitMode::Replace, between.chain(kept).collect()).await;
    let head = created(&store, CommitMode::Remove((10..20).map(|i| format!("c{i:04}")).collect()), Vec::new()).await;

    let sound = store.check().await.unwrap();
    assert!(sound.problems.is_empty(), "{:?}", sound.problems);
    assert_eq!(sound.moved, 0, "member rows without their body's place");

    let pages = |store: PostgresStore| async move {
        let mut all = Vec::new();
        for version in 1..=head.number {
            let mut after = None;
            loop {
                let page = store.page("support", version, &Select::all(), after.as_ref(), 700).await.unwrap();
                let json = store.page_json("support", version, &Select::all(), after.as_ref(), 700).await.unwrap();
                assert_eq!(String::from_utf8(json.json).unwrap(), page.bodies.join(","), "v{version}");
                assert_eq!((json.count, &json.next), (page.bodies.len(), &page.next), "v{version}");
                all.push(page.bodies.join(","));
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        all
    };
    let before = pages(store.clone()).await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    // Wrong places of three kinds: none, another body's, past the end of the table.
    sqlx::query(
        "UPDATE members SET blob_at = CASE abs(hashtext(encode(case_id, 'hex'))) % 3
             WHEN 0 THEN NULL
             WHEN 1 THEN (SELECT b.ctid FROM blobs b WHERE b.id <> members.blob ORDER BY b.id LIMIT 1)
             ELSE '(4000000,1)'::tid END",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let (rows, wrong): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE blob_at IS NOT NULL) FROM members")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(wrong > 1000, "{wrong} rows with a wrong place");
    // `store check` counts them, and finds nothing wrong.
    let moved = store.check().await.unwrap();
    assert!(moved.problems.is_empty(), "{:?}", moved.problems);
    assert_eq!(moved.moved, rows as u64);
    // A new connection: the page function's plan is made per connection.
    let reopened = PostgresStore::open(&url).await.unwrap();
    assert_eq!(pages(reopened).await, before);
}

/// A store made before migration 0006 gets its bodies' places when it is opened.
#[tokio::test]
async fn a_store_of_schema_5_gets_its_bodies_places() {
    let url = fresh_database().await;
    let store = PostgresStore::create(&url).await.unwrap();
    created(&store, CommitMode::Replace, (0..50).map(|i| case(&format!("c{i}"), "q")).collect()).await;
    created(&store, CommitMode::Upsert, vec![case("c7", "changed")]).await;
    store.close().await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    // Back to schema 5: no places, and the page index of migration 0004 (and no pending spans).
    sqlx::raw_sql(
        "DROP TABLE purged_members; DROP TABLE purges; DROP INDEX blob_facets_review; DELETE FROM casebook_schema WHERE version > 8;
         DROP TABLE capture_warnings; DELETE FROM casebook_schema WHERE version = 8;
         DROP TABLE pending_spans; DROP TABLE captured_traces; DELETE FROM casebook_schema WHERE version = 7;
         ALTER TABLE members DROP COLUMN blob_at;
         CREATE INDEX members_page ON members (dataset, ord, case_id) INCLUDE (from_v, to_v, blob);
         DELETE FROM casebook_schema WHERE version = 6;",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let store = PostgresStore::open(&url).await.unwrap();
    let placed: (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(b.id) FROM members m LEFT JOIN blobs b ON b.ctid = m.blob_at AND b.id = m.blob",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(placed, (51, 51));
    let page = store.page_json("support", 2, &Select::all(), None, 100).await.unwrap();
    assert_eq!(page.count, 50);
    assert!(String::from_utf8(page.json).unwrap().contains("answer to changed"));
}

/// 4,500 cases as varied as real ones, for a first import of several chunks: ids with accents,
/// combining marks, NUL and emoji, repeated inputs, labels, metadata, cases sharing a seed file.
fn first_import_cases() -> Vec<casebook_model::Case> {
    let bob = conformance::seed_document("night trains");
    (0..4500)
        .map(|i| {
            let id = match i % 5 {
                0 => format!("c{i}"),
                1 => format!("é{i}"),
                2 => format!("e\u{301}{i}"),
                3 => format!("z\0{i}"),
                _ => format!("🦀 {i}"),
            };
            if i % 500 == 7 {
                return conformance::seeded(&id, "./seeds/bob.yaml", bob.clone());
            }
            let mut c = case(&id, &format!("the same question {}", i % 40));
            if i % 3 == 0 {
                c.labels = Some(vec!["math".into(), format!("l{}", i % 4)]);
            }
            if i % 4 == 0 {
                c.metadata = Some(serde_json::from_value(serde_json::json!({"difficulty": "hard", "n": i})).unwrap());
            }
            c
        })
        .collect()
}

/// The definitions of every index of the store's tables, and the ids (oids) of the two that a
/// first import into an empty store builds at its end: new ids when it built them again.
async fn store_indexes(url: &str) -> (Vec<String>, Vec<u32>) {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let definitions =
        sqlx::query_scalar("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    let ids = sqlx::query_scalar(
        "SELECT oid::int4 FROM pg_class WHERE relname IN ('blobs_cid', 'members_pkey') ORDER BY relname",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let ids: Vec<i32> = ids;
    (definitions, ids.into_iter().map(|id| id as u32).collect())
}

/// The first import into an empty store drops the indexes it would fill at random places and
/// builds them at its end: the store holds what the embedded store holds, the indexes are the
/// migrations' (unique ones refuse duplicates again), every member row has its body's place, and
/// a later import, which goes the general way, leaves them be.
#[tokio::test]
async fn a_first_import_into_an_empty_store_builds_its_scattered_indexes_at_the_end() {
    let url = fresh_database().await;
    let pg = PostgresStore::create(&url).await.unwrap();
    let (definitions, ids) = store_indexes(&url).await;
    assert_eq!(ids.len(), 2);
    let v1 = created(&pg, CommitMode::Replace, first_import_cases()).await;
    let (after, rebuilt) = store_indexes(&url).await;
    assert_eq!(after, definitions);
    assert!(rebuilt.iter().zip(&ids).all(|(new, old)| new != old), "the indexes were not built again: {ids:?}");

    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::create(&dir.path().join("store.db")).await.unwrap();
    assert_eq!(created(&sqlite, CommitMode::Replace, first_import_cases()).await, v1);
    let (pg, sqlite) = (AnyStore::Postgres(pg), AnyStore::Sqlite(sqlite));
    assert_eq!(everything(&pg).await, everything(&sqlite).await);
    for filter in ["labels contains \"math\" and metadata.difficulty == \"hard\"", "labels contains \"l2\""] {
        let select = Select { filter: Some(casebook_filter::Filter::parse(filter).unwrap()), limit: None };
        assert!(pg.count("support", 1, &select).await.unwrap() > 100, "{filter}");
        assert_eq!(pg.count("support", 1, &select).await.unwrap(), sqlite.count("support", 1, &select).await.unwrap());
    }
    let AnyStore::Postgres(pg) = pg else { unreachable!() };
    let report = pg.check().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!((report.bodies, report.moved), (4500, 0));

    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    for duplicate in [
        "INSERT INTO blobs (cid, body) SELECT cid, body FROM blobs LIMIT 1",
        "INSERT INTO members SELECT * FROM members LIMIT 1",
    ] {
        let err = sqlx::query(duplicate).execute(&mut conn).await.unwrap_err();
        assert!(err.to_string().contains("duplicate key"), "{duplicate}: {err}");
    }
    let mut other = request(CommitMode::Replace, "other");
    other.dataset = "other".into();
    let cases: Vec<_> = (0..2500).map(|i| case(&format!("o{i}"), "other")).collect();
    assert!(matches!(pg.commit(other, batches(cases)).await.unwrap(), CommitOutcome::Created(_)));
    assert_eq!(store_indexes(&url).await, (definitions, rebuilt));
}

/// A first import into an empty store that fails, its input cut off or two of its cases under
/// one id, leaves the store empty with its indexes as they were; the next import lands whole.
#[tokio::test]
async fn a_failed_first_import_leaves_the_empty_store_and_its_indexes_as_they_were() {
    let url = fresh_database().await;
    let pg = PostgresStore::create(&url).await.unwrap();
    let before = store_indexes(&url).await;
    let empty = || async {
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        let rows: (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM blobs), (SELECT count(*) FROM members), (SELECT count(*) FROM datasets)",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        rows
    };

    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let sender = tokio::spawn(async move {
        for chunk in first_import_cases()[..3000].chunks(500) {
            tx.send(Ok(chunk.iter().map(|c| casebook_store::prepare(c).unwrap()).collect())).await.unwrap();
        }
        tx.send(Err(())).await.unwrap();
    });
    let cut = pg.commit(request(CommitMode::Replace, "cut off"), rx).await;
    sender.await.unwrap();
    assert!(matches!(cut, Err(StoreError::Cancelled)), "{cut:?}");
    assert_eq!(empty().await, (0, 0, 0));
    assert_eq!(store_indexes(&url).await, before);

    // A failed commit's connection is closed, not handed back, and its server process lets the
    // tables go a moment later; until then a new import would take the general path (whose
    // bodies, written by transactions of their own, stay).
    let released = || async {
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        for _ in 0..200 {
            let held: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_locks WHERE relation = 'blobs'::regclass AND pid <> pg_backend_pid()",
            )
            .fetch_one(&mut conn)
            .await
            .unwrap();
            if held == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("the failed import's session still holds the tables");
    };
    released().await;
    let mut twice = first_import_cases();
    twice[2600].id = twice[10].id.clone();
    let refused = pg.commit(request(CommitMode::Replace, "one id twice"), batches(twice)).await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "the commit holds the case `c10` more than once (a version holds each id once): nothing was written"
    );
    assert_eq!(empty().await, (0, 0, 0));
    assert_eq!(store_indexes(&url).await, before);
    released().await;

    let v1 = created(&pg, CommitMode::Replace, first_import_cases()).await;
    assert_eq!(v1.cases, 4500);
    assert_eq!(empty().await, (4500, 4500, 1));
}

/// A first import into an empty store never waits for the tables (another transaction's body
/// writers could be waiting for it): beside a reader of them it takes the general path, as it
/// does in a store that holds a version of no case; and two at once both land.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_first_import_beside_other_users_of_the_tables_takes_the_general_path() {
    let url = fresh_database().await;
    let pg = PostgresStore::create(&url).await.unwrap();
    let before = store_indexes(&url).await;
    let mut reader = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut reading = reader.begin().await.unwrap();
    sqlx::query("SELECT count(*) FROM members").execute(&mut *reading).await.unwrap();
    let quick = std::time::Duration::from_secs(60);
    let commit = pg.commit(request(CommitMode::Replace, "beside a reader"), batches(first_import_cases()));
    let landed = tokio::time::timeout(quick, commit).await.expect("the import waited for the reader");
    assert!(matches!(landed.unwrap(), CommitOutcome::Created(v) if v.cases == 4500));
    assert_eq!(store_indexes(&url).await, before, "the general path builds no index");
    reading.commit().await.unwrap();

    // A store with a version of no case: someone may be reading it.
    let url = fresh_database().await;
    let pg = PostgresStore::create(&url).await.unwrap();
    let mut empty = request(CommitMode::Replace, "nothing yet");
    empty.dataset = "empty".into();
    assert!(matches!(pg.commit(empty, batches(Vec::new())).await.unwrap(), CommitOutcome::Created(v) if v.cases == 0));
    let before = store_indexes(&url).await;
    created(&pg, CommitMode::Replace, first_import_cases()).await;
    assert_eq!(store_indexes(&url).await, before, "the general path builds no index");

    let url = fresh_database().await;
    let (a, b) = (PostgresStore::create(&url).await.unwrap(), PostgresStore::open(&url).await.unwrap());
    let mut second = request(CommitMode::Replace, "second");
    second.dataset = "second".into();
    let (one, two) = tokio::join!(
        a.commit(request(CommitMode::Replace, "first"), batches(first_import_cases())),
        b.commit(second, batches(first_import_cases())),
    );
    for outcome in [one, two] {
        assert!(matches!(outcome.unwrap(), CommitOutcome::Created(v) if v.cases == 4500));
    }
    let report = a.check().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // The same cases in both: each body is kept once.
    assert_eq!((report.bodies, report.moved), (4500, 0));
    assert_eq!(conformance::ids(&a, 1).await.len(), 4500);
}

/// Names an older casebook allowed, written into the store by SQL, stay usable.
#[tokio::test]
async fn names_made_before_the_rules_stay_usable() {
    let url = fresh_database().await;
    let store = PostgresStore::create(&url).await.unwrap();
    let statements = conformance::legacy_names_setup(&store).await;
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    for sql in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut admin).await.unwrap();
    }
    admin.close().await.unwrap();
    store.close().await;
    conformance::legacy_names_stay_usable(PostgresStore::open(&url).await.unwrap()).await;
}

/// After a purge with `full` (`VACUUM FULL` of the touched tables) and a checkpoint, no byte of
/// the purged case's text is left in the database's data files (`$CASEBOOK_TEST_PGDATA`, the
/// folder of this test's database). Without `full`, plain `VACUUM` leaves the dead rows' bytes
/// in their pages (this test saw them), so the outcome does not say `erased`. The server's
/// write-ahead log is another matter: see the README (what a purge leaves).
#[tokio::test]
async fn a_purged_case_leaves_no_bytes_in_the_data_files() {
    let marker = "PURGE-ME-PG-77d2e0";
    let url = fresh_database().await;
    let store = PostgresStore::create(&url).await.unwrap();
    let [v1, v2] = conformance::marked_cases(marker);
    created(&store, CommitMode::Replace, v1).await;
    created(&store, CommitMode::Upsert, v2).await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let oid: sqlx::postgres::types::Oid =
        sqlx::query_scalar("SELECT oid FROM pg_database WHERE datname = current_database()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let data = std::env::var("CASEBOOK_TEST_PGDATA").expect("scripts/test.sh sets CASEBOOK_TEST_PGDATA");
    let folder = vec![std::path::Path::new(&data).join("cluster/base").join(oid.0.to_string())];
    sqlx::query("CHECKPOINT").execute(&mut conn).await.unwrap();
    assert!(!conformance::files_holding(&folder, marker).is_empty(), "the text is stored before the purge");
    let any = AnyStore::from(store.clone());
    let done = any.purge(&conformance::purge_request(&["p"])).await.unwrap();
    assert!(done.erased, "{done:?}");
    sqlx::query("CHECKPOINT").execute(&mut conn).await.unwrap();
    assert_eq!(conformance::files_holding(&folder, marker), Vec::<std::path::PathBuf>::new());
    let report = store.check().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(conformance::ids(&store, 2).await, ["b"]);
}
