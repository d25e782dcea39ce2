//! Importing files through `ingest`: a file with an error commits nothing and says where the
//! error is; a good one makes a version; a stale parent is a conflict callers can tell apart.

use std::path::Path;
use std::sync::{Arc, Mutex};

use casebook_formats::{Input, ReadOptions};
use casebook_model::Code;
use casebook_store::{
    AnyStore, CommitMode, CommitOutcome, IngestError, IngestEvent, IngestRequest, Parent, Ref, SqliteStore, Store,
    StoreError, ingest,
};

const GOOD: &str = concat!(
    r#"{"id": "a", "input": "one", "ground_truth": "1"}"#,
    "\n",
    r#"{"id": "b", "input": "two", "ground_truth": "2"}"#,
    "\n",
    r#"{"id": "c", "input": "three", "ground_truth": "3"}"#,
    "\n",
);

/// The third line's `input` is a number: column 22 is where it starts.
const BAD: &str = concat!(
    r#"{"id": "a", "input": "one", "ground_truth": "1"}"#,
    "\n",
    r#"{"id": "b", "input": "two", "ground_truth": "2"}"#,
    "\n",
    r#"{"id": "c", "input": 3, "ground_truth": "3"}"#,
    "\n",
);

async fn fresh(dir: &tempfile::TempDir) -> AnyStore {
    AnyStore::from(SqliteStore::create(&dir.path().join(".casebook/store.db")).await.unwrap())
}

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    fs_err::write(&path, text).unwrap();
    path
}

fn request(path: &Path, dataset: Option<&str>, parent: Parent) -> IngestRequest {
    IngestRequest {
        input: Input::path(path),
        options: ReadOptions { threads: 2, ..ReadOptions::default() },
        dataset: dataset.map(str::to_owned),
        mode: CommitMode::Replace,
        parent,
        author: "tester".into(),
        time: "2026-01-02T03:04:05Z".into(),
        message: "import".into(),
    }
}

/// Events kept for the test to look at, and the callback that keeps them.
type Kept = Arc<Mutex<Vec<IngestEvent>>>;
type Sink = Box<dyn FnMut(IngestEvent) + Send>;

fn recorder() -> (Kept, Sink) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&events);
    (events, Box::new(move |e| kept.lock().unwrap().push(e)))
}

fn created(outcome: Option<CommitOutcome>) -> casebook_store::VersionInfo {
    match outcome {
        Some(CommitOutcome::Created(v)) => v,
        other => panic!("expected a new version, got {other:?}"),
    }
}

#[tokio::test]
async fn a_good_file_makes_a_version_named_after_the_file_with_progress_on_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh(&dir).await;
    let path = file(&dir, "support.jsonl", GOOD);
    let (events, sink) = recorder();
    let ingested = ingest(&store, request(&path, None, Parent::Head), sink).await.unwrap();
    assert_eq!((ingested.errors, ingested.warnings, ingested.dataset.as_str()), (0, 0, "support"));
    let v = created(ingested.outcome);
    assert_eq!((v.dataset.as_str(), v.number, v.cases, v.added, v.author.as_str()), ("support", 1, 3, 3, "tester"));
    let progress: Vec<u64> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| match e {
            IngestEvent::Progress { cases } => *cases,
            IngestEvent::Diagnostic(d) => panic!("unexpected diagnostic {d:?}"),
        })
        .collect();
    assert_eq!(progress.last(), Some(&3), "{progress:?}");
    let mut ids = Vec::new();
    store
        .cases("support", 1, &casebook_store::Select::all(), 100, &mut |cases| {
            ids.extend(cases.into_iter().map(|c| c.id));
            true
        })
        .await
        .unwrap();
    assert_eq!(ids, ["a", "b", "c"]);
    // The same content again makes no version.
    let again = ingest(&store, request(&path, None, Parent::Head), Box::new(|_| {})).await.unwrap();
    assert!(matches!(again.outcome, Some(CommitOutcome::Unchanged(_))), "{again:?}");
}

#[tokio::test]
async fn a_file_with_a_bad_line_commits_nothing_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh(&dir).await;
    let good = file(&dir, "good.jsonl", GOOD);
    created(ingest(&store, request(&good, Some("qa"), Parent::Head), Box::new(|_| {})).await.unwrap().outcome);
    let bad = file(&dir, "bad.jsonl", BAD);
    let (events, sink) = recorder();
    let ingested = ingest(&store, request(&bad, Some("qa"), Parent::Head), sink).await.unwrap();
    assert_eq!((ingested.outcome, ingested.errors), (None, 1));
    let diagnostics: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            IngestEvent::Diagnostic(d) => Some(d.clone()),
            IngestEvent::Progress { .. } => None,
        })
        .collect();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let d = &diagnostics[0];
    assert_eq!(
        (d.code, d.line, d.column, d.pointer.as_deref().unwrap_or_default()),
        (Code::WrongType, 3, 22, "/input")
    );
    assert_eq!(d.file, bad.display().to_string());
    let versions = store.versions("qa").await.unwrap();
    assert_eq!(versions.len(), 1, "no version was made: {versions:?}");
}

#[tokio::test]
async fn diagnostics_and_the_dataset_name_come_from_the_name_the_caller_shows() {
    // A server reads an upload from a temporary file, and names it as the user sent it.
    let dir = tempfile::tempdir().unwrap();
    let store = fresh(&dir).await;
    let temp = file(&dir, ".upload-1234.jsonl", BAD);
    let mut upload = request(&temp, Some("qa"), Parent::Head);
    upload.input.display = "support.jsonl".into();
    let (events, sink) = recorder();
    let ingested = ingest(&store, upload, sink).await.unwrap();
    assert_eq!(ingested.errors, 1);
    let files: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            IngestEvent::Diagnostic(d) => Some(d.file.clone()),
            IngestEvent::Progress { .. } => None,
        })
        .collect();
    assert_eq!(files, ["support.jsonl"]);
    // A dataset that names itself nowhere is named after the name shown, not the temporary file.
    let temp = file(&dir, ".upload-5678.jsonl", GOOD);
    let mut upload = request(&temp, None, Parent::Head);
    upload.input.display = "uploads/support.jsonl".into();
    let ingested = ingest(&store, upload, Box::new(|_| {})).await.unwrap();
    assert_eq!(ingested.dataset, "support");
    assert_eq!(created(ingested.outcome).dataset, "support");
}

#[tokio::test]
async fn a_parent_that_is_no_longer_the_head_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh(&dir).await;
    let v1 = file(&dir, "v1.jsonl", GOOD);
    created(ingest(&store, request(&v1, Some("qa"), Parent::Head), Box::new(|_| {})).await.unwrap().outcome);
    let v2 = file(&dir, "v2.jsonl", &GOOD.replace("three", "THREE"));
    created(ingest(&store, request(&v2, Some("qa"), Parent::Head), Box::new(|_| {})).await.unwrap().outcome);
    let v3 = file(&dir, "v3.jsonl", &GOOD.replace("one", "ONE").replace("three", "THREE"));
    let err =
        ingest(&store, request(&v3, Some("qa"), Parent::Given(Ref::Number(1))), Box::new(|_| {})).await.unwrap_err();
    match err {
        IngestError::Store(StoreError::Conflict { dataset, parent, head }) => {
            assert_eq!((dataset.as_str(), parent, head), ("qa", 1, 2));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(store.versions("qa").await.unwrap().len(), 2);
    // `Any` builds on whatever the head is.
    let mut put = request(&v3, Some("qa"), Parent::Any);
    put.mode = CommitMode::Upsert;
    let v = created(ingest(&store, put, Box::new(|_| {})).await.unwrap().outcome);
    assert_eq!((v.number, v.parent, v.modified), (3, Some(2), 1));
}

#[tokio::test]
async fn a_file_that_cannot_be_read_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh(&dir).await;
    let missing = dir.path().join("missing.jsonl");
    let err = ingest(&store, request(&missing, Some("qa"), Parent::Head), Box::new(|_| {})).await.unwrap_err();
    assert!(matches!(err, IngestError::Read(_)), "{err:?}");
    assert!(err.to_string().contains("missing.jsonl"), "{err}");
    assert!(store.datasets().await.unwrap().is_empty());
}

#[test]
fn ingest_runs_on_a_multi_threaded_runtime_as_a_spawned_task() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(fresh(&dir).await);
        // Many cases, so the reader gets ahead of the store and waits on the channel.
        let text: String = (0..5000).map(|i| format!("{{\"id\": \"c{i}\", \"input\": \"question {i}\"}}\n")).collect();
        let path = file(&dir, "many.jsonl", &text);
        let task = {
            let store = Arc::clone(&store);
            tokio::spawn(
                async move { ingest(&store, request(&path, Some("many"), Parent::Head), Box::new(|_| {})).await },
            )
        };
        let v = created(task.await.unwrap().unwrap().outcome);
        assert_eq!(v.cases, 5000);
    });
}
