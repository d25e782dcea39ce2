//! Spans the OTLP receiver keeps (`pending_spans`, `captured_traces`) on both backends: kept per
//! project and trace, a span sent twice kept once, GenAI log records kept beside them (a trace of
//! records alone listed too, its dataset the spans' once they come), listed with counts, times
//! and root, recorded as captured, forgotten; capture warnings kept per dataset, the most recent
//! only; and `recapture`, which replaces a case only while it is as captured.

use std::collections::HashMap;

use casebook_store::{AnyStore, CaptureRequest, PendingSpan, PostgresStore, SqliteStore, Store};

fn span(trace: &str, id: &str, root: bool) -> PendingSpan {
    PendingSpan {
        trace_id: trace.into(),
        span_id: id.into(),
        root,
        record: false,
        json: format!("{{\"span\":\"{id}\"}}"),
    }
}

fn record(trace: &str, id: &str) -> PendingSpan {
    PendingSpan {
        trace_id: trace.into(),
        span_id: id.into(),
        root: false,
        record: true,
        json: format!("{{\"record\":\"{id}\"}}"),
    }
}

async fn pending_spans_are_kept_by_project_and_trace(store: AnyStore) {
    let a = store.in_project("team-a");
    let b = store.in_project("team-b");
    a.pending_add("weather", 1_000, &[span("t1", "s1", false), span("t1", "s2", false)]).await.unwrap();
    a.pending_add("weather", 2_000, &[span("t1", "s2", false), span("t1", "s3", true)]).await.unwrap();
    b.pending_add("other", 1_500, &[span("t9", "s1", true)]).await.unwrap();

    let listed = a.pending_traces(false).await.unwrap();
    assert_eq!(listed.len(), 1);
    let t = &listed[0];
    assert_eq!(
        (
            t.project.as_str(),
            t.trace_id.as_str(),
            t.dataset.as_str(),
            t.spans,
            t.first_received,
            t.last_received,
            t.root
        ),
        ("team-a", "t1", "weather", 3, 1_000, 2_000, true)
    );
    assert_eq!((t.captured, t.cases.as_deref()), (None, None));
    let texts = |rows: Vec<PendingSpan>| rows.into_iter().map(|r| (r.record, r.json)).collect::<Vec<_>>();
    assert_eq!(
        texts(a.pending_spans("t1").await.unwrap()),
        [(false, "{\"span\":\"s1\"}".into()), (false, "{\"span\":\"s2\"}".into()), (false, "{\"span\":\"s3\"}".into())]
    );
    // Another project's handle sees its own only; the receiver's task sees all.
    assert!(b.pending_spans("t1").await.unwrap().is_empty());
    assert_eq!(b.pending_traces(false).await.unwrap().len(), 1);
    let all = store.pending_traces(true).await.unwrap();
    assert_eq!(
        all.iter().map(|t| (t.project.as_str(), t.trace_id.as_str())).collect::<Vec<_>>(),
        [("team-a", "t1"), ("team-b", "t9")]
    );
    assert_eq!(store.pending_count().await.unwrap(), 4);

    // Log records: kept beside the spans (one sent twice kept once), counted apart; a trace of
    // records alone is listed, in the records' dataset until a span names its own.
    a.pending_add("traces", 2_200, &[record("t1", "s1/aa"), record("t1", "s1/bb")]).await.unwrap();
    a.pending_add("traces", 2_300, &[record("t1", "s1/aa"), record("t2", "s7/cc")]).await.unwrap();
    let listed = a.pending_traces(false).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|t| (t.trace_id.as_str(), t.dataset.as_str(), t.spans, t.records, t.root, t.last_received))
            .collect::<Vec<_>>(),
        [("t1", "weather", 3, 2, true, 2_300), ("t2", "traces", 0, 1, false, 2_300)]
    );
    let rows = a.pending_spans("t1").await.unwrap();
    assert_eq!(rows.iter().filter(|r| r.record).map(|r| r.span_id.as_str()).collect::<Vec<_>>(), ["s1/bb", "s1/aa"]);
    assert_eq!(store.pending_count().await.unwrap(), 7);
    a.forget_trace("t2").await.unwrap();

    a.trace_captured("t1", 2_500, "{\"trace-t1-s3\":\"abc\"}").await.unwrap();
    let t = a.pending_traces(false).await.unwrap().remove(0);
    assert_eq!((t.captured, t.cases.as_deref()), (Some(2_500), Some("{\"trace-t1-s3\":\"abc\"}")));
    a.forget_trace("t1").await.unwrap();
    assert!(a.pending_traces(false).await.unwrap().is_empty());
    assert_eq!(store.pending_count().await.unwrap(), 1);
}

async fn capture_warnings_keep_the_most_recent_per_dataset(store: AnyStore) {
    let a = store.in_project("team-a");
    let b = store.in_project("team-b");
    let kept = casebook_store::CAPTURE_WARNINGS_KEPT;
    for i in 0..kept + 5 {
        a.capture_warn("weather", &format!("t{i}"), 1_000 + i, &format!("warning {i}")).await.unwrap();
    }
    a.capture_warn("other", "t0", 5, "elsewhere").await.unwrap();
    b.capture_warn("weather", "t0", 5, "another project's").await.unwrap();
    let got = a.capture_warnings().await.unwrap();
    assert_eq!(got.len() as i64, kept + 1);
    assert_eq!((got[0].dataset.as_str(), got[0].message.as_str()), ("other", "elsewhere"));
    let newest = &got[1];
    assert_eq!(
        (newest.dataset.as_str(), newest.trace_id.as_str(), newest.at, newest.message.as_str()),
        ("weather", format!("t{}", kept + 4).as_str(), 1_000 + kept + 4, format!("warning {}", kept + 4).as_str())
    );
    assert_eq!(got.last().unwrap().message, "warning 5");
    assert_eq!(b.capture_warnings().await.unwrap().len(), 1);
}

#[tokio::test]
async fn sqlite_capture_warnings_keep_the_most_recent_per_dataset() {
    let dir = tempfile::tempdir().unwrap();
    capture_warnings_keep_the_most_recent_per_dataset(
        SqliteStore::create(&dir.path().join("s.db")).await.unwrap().into(),
    )
    .await;
}

#[tokio::test]
async fn postgres_capture_warnings_keep_the_most_recent_per_dataset() {
    let url = crate::postgres::fresh_database().await;
    capture_warnings_keep_the_most_recent_per_dataset(PostgresStore::create(&url).await.unwrap().into()).await;
}

fn case(id: &str, output: &str) -> casebook_model::Case {
    serde_json::from_value(serde_json::json!({"id": id, "input": "q", "expected": {"output": output}})).unwrap()
}

fn request() -> CaptureRequest {
    CaptureRequest {
        dataset: "weather".into(),
        author: "receiver".into(),
        time: "2026-11-29T10:00:00Z".into(),
        message: "capture".into(),
    }
}

async fn recapture_replaces_only_cases_still_as_captured(store: AnyStore) {
    let store = store.in_project("team-a");
    let first = casebook_store::recapture(&store, request(), vec![case("c1", "one")], &HashMap::new()).await.unwrap();
    assert_eq!(first.added, ["c1"]);
    let before: HashMap<String, String> = first.content_ids.into_iter().collect();
    // Rebuilt with more spans: replaced, as it was still as captured.
    let again = casebook_store::recapture(&store, request(), vec![case("c1", "one, whole")], &before).await.unwrap();
    assert_eq!((again.replaced.as_slice(), again.added.len()), (["c1".to_owned()].as_slice(), 0));
    let head = store.resolve("weather", &casebook_store::Ref::Latest).await.unwrap();
    assert_eq!(head.number, 2);
    let got = store.case("weather", 2, "c1").await.unwrap().unwrap();
    assert_eq!(got.expected.output, Some(serde_json::json!("one, whole")));
    // Against the first record (someone's change since): left as it is, nothing committed.
    let kept = casebook_store::recapture(&store, request(), vec![case("c1", "three")], &before).await.unwrap();
    assert_eq!((kept.kept.as_slice(), kept.commit.is_none()), (["c1".to_owned()].as_slice(), true));
    assert_eq!(store.resolve("weather", &casebook_store::Ref::Latest).await.unwrap().number, 2);
}

#[tokio::test]
async fn sqlite_pending_spans_are_kept_by_project_and_trace() {
    let dir = tempfile::tempdir().unwrap();
    pending_spans_are_kept_by_project_and_trace(SqliteStore::create(&dir.path().join("s.db")).await.unwrap().into())
        .await;
}

#[tokio::test]
async fn postgres_pending_spans_are_kept_by_project_and_trace() {
    let url = crate::postgres::fresh_database().await;
    pending_spans_are_kept_by_project_and_trace(PostgresStore::create(&url).await.unwrap().into()).await;
}

#[tokio::test]
async fn sqlite_recapture_replaces_only_cases_still_as_captured() {
    let dir = tempfile::tempdir().unwrap();
    recapture_replaces_only_cases_still_as_captured(
        SqliteStore::create(&dir.path().join("s.db")).await.unwrap().into(),
    )
    .await;
}

#[tokio::test]
async fn postgres_recapture_replaces_only_cases_still_as_captured() {
    let url = crate::postgres::fresh_database().await;
    recapture_replaces_only_cases_still_as_captured(PostgresStore::create(&url).await.unwrap().into()).await;
}
