//! What every store must do, whatever keeps the data. Each function takes a fresh, empty store.

use casebook_canon::{Kind, content_id, id_bytes};
use casebook_model::{Case, Expectations, MemorySeeds, Responses, Task, Tool};
use casebook_store::{
    AnyStore, CaseBatches, CommitMode, CommitOutcome, CommitRequest, FieldChange, Ref, Select, Store, StoreError,
    VersionInfo,
};
use serde_json::json;

/// The whole suite as `#[tokio::test]`s, each on the store `$fresh().await` makes: a
/// `(guard, store)` pair, the guard keeping what the store needs (its folder) until the end.
#[macro_export]
macro_rules! suite {
    ($fresh:path) => {
        $crate::suite!(@each $fresh; |store| store; versions_are_immutable_and_numbered,
            put_and_rm_touch_only_their_cases,
            new_cases_go_between_their_neighbours,
            diff_names_changed_fields,
            changed_gives_each_case_at_both_versions,
            history_lists_distinct_contents,
            references_resolve,
            a_moved_head_is_a_conflict_and_writes_nothing,
            cancelled_input_writes_nothing,
            an_id_listed_twice_is_refused_by_name,
            filters_select_what_they_select_in_memory,
            seed_files_are_given_back_whole,
            long_filters_and_extreme_numbers_select_what_they_select_in_memory,
            pages_walk_a_fixed_version,
            many_insertions_at_one_spot_keep_the_order,
            text_with_nul_is_filtered_as_in_memory,
            json_pages_are_the_pages_joined,
            a_commit_of_stored_and_new_bodies_filters_as_in_memory,
            holding_names_the_ids_a_version_has,
            new_names_and_tags_follow_the_rules,
            names_in_other_normal_forms_are_the_same_name,
            references_are_numbers_and_ids_before_tags,
            a_deleted_tag_names_nothing_and_is_logged,
            sorted_pages_walk_by_value_both_ways_with_missing_last,
            review_filters_select_what_they_select_in_memory,
            group_counts_count_what_memory_counts);
        $crate::suite!(@each $fresh; |store| casebook_store::AnyStore::from(store);
            runs_keep_their_results_and_outputs_by_hash, outputs_are_found_by_their_whole_run_hash,
            a_run_is_read_a_page_at_a_time,
            snapshot_files_are_kept_once,
            a_merge_takes_exceptions_for_what_the_input_started_from,
            projects_keep_datasets_and_runs_apart, api_keys_open_one_project_until_revoked,
            a_purge_erases_a_case_and_every_version_still_verifies, purging_needs_an_admin_key,
            a_purge_racing_a_commit_of_the_case_takes_it_or_leaves_the_new_content);
    };
    (@each $fresh:path; |$store:ident| $wrap:expr; $($name:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $name() {
            let (_guard, $store) = $fresh().await;
            $crate::conformance::$name($wrap).await;
        }
    )*};
}

pub fn case(id: &str, input: &str) -> Case {
    Case {
        id: id.into(),
        name: None,
        description: None,
        labels: None,
        task: Task::new(json!(input)),
        expected: Expectations { output: Some(json!(format!("answer to {input}"))), ..Expectations::default() },
        metadata: None,
        confidence: None,
        review: None,
        provenance: None,
    }
}

/// A case that carries a seed file, as `casebook-formats` reads one.
pub fn seeded(id: &str, file: &str, content: serde_json::Value) -> Case {
    let mut c = case(id, &format!("plan {id}"));
    c.task.memory_seeds = Some(MemorySeeds::File { file: file.into(), content });
    c
}

/// The seed document of [`seeded`] cases: `content` is Bob's preference.
pub fn seed_document(content: &str) -> serde_json::Value {
    json!({"apiVersion": "memory-seed/v1", "entries": [{"key": "preference", "content": content}], "n": 1.5e300})
}

pub fn batches(cases: Vec<Case>) -> CaseBatches {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        for chunk in cases.chunks(2) {
            let prepared = chunk.iter().map(|c| casebook_store::prepare(c).unwrap()).collect();
            if tx.send(Ok(prepared)).await.is_err() {
                return;
            }
        }
    });
    rx
}

pub fn request(mode: CommitMode, message: &str) -> CommitRequest {
    CommitRequest {
        dataset: "support".into(),
        header: None,
        mode,
        parent: None,
        author: "tester".into(),
        time: "2026-11-23T00:00:00Z".into(),
        message: message.into(),
    }
}

pub async fn commit(store: &impl Store, mode: CommitMode, cases: Vec<Case>) -> Result<CommitOutcome, StoreError> {
    store.commit(request(mode, "m"), batches(cases)).await
}

pub async fn created(store: &impl Store, mode: CommitMode, cases: Vec<Case>) -> VersionInfo {
    match commit(store, mode, cases).await.unwrap() {
        CommitOutcome::Created(v) => v,
        other => panic!("expected a new version, got {other:?}"),
    }
}

pub async fn ids(store: &impl Store, version: u64) -> Vec<String> {
    selected(store, version, &Select::all(), 2).await.unwrap()
}

/// The ids of the cases of `support` at `version` that `select` selects, read in pages of `page`.
pub async fn selected(
    store: &impl Store,
    version: u64,
    select: &Select,
    page: usize,
) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    store
        .cases("support", version, select, page, &mut |batch| {
            out.extend(batch.into_iter().map(|c| c.id));
            true
        })
        .await?;
    Ok(out)
}

pub async fn versions_are_immutable_and_numbered(store: impl Store) {
    let v1 = created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2"), case("c", "3")]).await;
    assert_eq!((v1.number, v1.added, v1.cases, v1.parent), (1, 3, 3, None));
    assert_eq!(v1.id.len(), 64);
    // Identical content: no version.
    match commit(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2"), case("c", "3")]).await.unwrap() {
        CommitOutcome::Unchanged(Some(head)) => assert_eq!(head.number, 1),
        other => panic!("{other:?}"),
    }
    let v2 = created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2 changed"), case("d", "4")]).await;
    assert_eq!((v2.number, v2.added, v2.removed, v2.modified, v2.cases, v2.parent), (2, 1, 1, 1, 3, Some(1)));
    // v1 is as it was; v2 is in file order.
    assert_eq!(ids(&store, 1).await, ["a", "b", "c"]);
    assert_eq!(ids(&store, 2).await, ["a", "b", "d"]);
    assert_eq!(store.case("support", 1, "b").await.unwrap().unwrap().task.input, json!("2"));
    assert_eq!(store.case("support", 2, "b").await.unwrap().unwrap().task.input, json!("2 changed"));
    assert_eq!(store.case("support", 2, "c").await.unwrap(), None);
    let datasets = store.datasets().await.unwrap();
    assert_eq!((datasets.len(), datasets[0].head, datasets[0].cases), (1, 2, 3));
    let log = store.versions("support").await.unwrap();
    assert_eq!(log.iter().map(|v| v.number).collect::<Vec<_>>(), [1, 2]);
}

pub async fn put_and_rm_touch_only_their_cases(store: impl Store) {
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2"), case("c", "3")]).await;
    let v2 = created(&store, CommitMode::Upsert, vec![case("z", "26"), case("b", "two")]).await;
    assert_eq!((v2.added, v2.modified, v2.removed, v2.cases), (1, 1, 0, 4));
    // A modified case keeps its place; a new one goes at the end.
    assert_eq!(ids(&store, 2).await, ["a", "b", "c", "z"]);
    let v3 = created(&store, CommitMode::Remove(vec!["a".into(), "nope".into()]), Vec::new()).await;
    assert_eq!((v3.removed, v3.cases), (1, 3));
    assert_eq!(ids(&store, 3).await, ["b", "c", "z"]);
    // Removing what is not there changes nothing.
    assert!(matches!(
        commit(&store, CommitMode::Remove(vec!["a".into()]), Vec::new()).await.unwrap(),
        CommitOutcome::Unchanged(_)
    ));
}

pub async fn new_cases_go_between_their_neighbours(store: impl Store) {
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("c", "3"), case("e", "5")]).await;
    created(
        &store,
        CommitMode::Replace,
        vec![
            case("x", "0"),
            case("a", "1"),
            case("b", "2"),
            case("b2", "2.5"),
            case("c", "3"),
            case("e", "5"),
            case("f", "6"),
        ],
    )
    .await;
    assert_eq!(ids(&store, 2).await, ["x", "a", "b", "b2", "c", "e", "f"]);
    // Re-ordering is a version of its own: the content is the same, the cases moved.
    let v3 = created(
        &store,
        CommitMode::Replace,
        vec![
            case("f", "6"),
            case("e", "5"),
            case("c", "3"),
            case("b2", "2.5"),
            case("b", "2"),
            case("a", "1"),
            case("x", "0"),
        ],
    )
    .await;
    assert_eq!((v3.added, v3.removed, v3.modified), (0, 0, 0));
    assert_eq!(ids(&store, 3).await, ["f", "e", "c", "b2", "b", "a", "x"]);
    let diff = store.diff("support", 2, 3).await.unwrap();
    assert!(diff.added.is_empty() && diff.modified.is_empty() && diff.removed.is_empty());
    assert_eq!(diff.moved.len(), 7);
}

pub async fn diff_names_changed_fields(store: impl Store) {
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2"), case("c", "3")]).await;
    let mut b = case("b", "2");
    b.expected.output = Some(json!("new answer"));
    b.labels = Some(vec!["math".into()]);
    created(&store, CommitMode::Replace, vec![case("a", "1"), b, case("d", "4")]).await;
    let diff = store.diff("support", 1, 2).await.unwrap();
    assert_eq!(diff.added, ["d"]);
    assert_eq!(diff.removed, ["c"]);
    assert_eq!(diff.modified.len(), 1);
    let changes = &diff.modified[0].changes;
    let pointers: Vec<&str> = changes.iter().map(|c| c.pointer.as_str()).collect();
    // Fields the old version had come first, in its order; then the new ones.
    assert_eq!(pointers, ["/expected/output", "/labels"]);
    assert_eq!(changes[0].old, Some(json!("answer to 2")));
    assert_eq!(changes[0].new, Some(json!("new answer")));
    assert_eq!((changes[1].old.clone(), changes[1].new.clone()), (None, Some(json!(["math"]))));
}

/// What a three-way merge reads: each case that differs between two versions, with its
/// content id at the first and its case, whole (seed documents in place), at the second; not
/// the cases that only moved, nor one changed and changed back.
pub async fn changed_gives_each_case_at_both_versions(store: impl Store) {
    /// Id, content id at the first version, case at the second.
    type Seen<'a> = (&'a str, Option<[u8; 32]>, Option<&'a Case>);
    let cid = |c: &Case| id_bytes(&content_id(Kind::Case, c).unwrap()).unwrap();
    let d1 = seeded("d", "./seeds/bob.yaml", seed_document("night trains"));
    let d2 = seeded("d", "./seeds/bob.yaml", seed_document("day trains"));
    let v1 = [case("a", "1"), case("b", "2"), case("c", "3"), d1.clone(), case("e", "5")];
    created(&store, CommitMode::Replace, v1.to_vec()).await;
    // a changed, b removed, c moved, d's seed document changed, f added.
    let v2 = [case("c", "3"), case("a", "1b"), d2.clone(), case("e", "5"), case("f", "6")];
    created(&store, CommitMode::Replace, v2.to_vec()).await;
    // a changed back, e changed.
    let v3 = [case("c", "3"), case("a", "1"), d2.clone(), case("e", "5b"), case("f", "6")];
    created(&store, CommitMode::Replace, v3.to_vec()).await;

    let changed = store.changed("support", 1, 3).await.unwrap();
    let got: Vec<Seen<'_>> = changed.iter().map(|c| (c.id.as_str(), c.before, c.after.as_ref())).collect();
    let want: Vec<Seen<'_>> = vec![
        ("b", Some(cid(&v1[1])), None),
        ("d", Some(cid(&d1)), Some(&d2)),
        ("e", Some(cid(&v1[4])), Some(&v3[3])),
        ("f", None, Some(&v3[4])),
    ];
    assert_eq!(got, want);
    // Either way round.
    let back = store.changed("support", 3, 1).await.unwrap();
    let got: Vec<Seen<'_>> = back.iter().map(|c| (c.id.as_str(), c.before, c.after.as_ref())).collect();
    let want: Vec<Seen<'_>> = vec![
        ("b", None, Some(&v1[1])),
        ("d", Some(cid(&d2)), Some(&d1)),
        ("e", Some(cid(&v3[3])), Some(&v1[4])),
        ("f", Some(cid(&v3[4])), None),
    ];
    assert_eq!(got, want);
    // The same as the diff says, and nothing between a version and itself.
    let diff = store.diff("support", 1, 2).await.unwrap();
    let mut listed: Vec<String> =
        diff.added.into_iter().chain(diff.removed).chain(diff.modified.into_iter().map(|m| m.id)).collect();
    listed.sort();
    let ids: Vec<String> = store.changed("support", 1, 2).await.unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, listed);
    assert!(store.changed("support", 2, 2).await.unwrap().is_empty());
    assert!(matches!(store.changed("support", 0, 2).await, Err(StoreError::NoVersion { .. })));
}

pub async fn history_lists_distinct_contents(store: impl Store) {
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2")]).await;
    created(&store, CommitMode::Upsert, vec![case("b", "2b")]).await;
    created(&store, CommitMode::Upsert, vec![case("a", "1a")]).await;
    created(&store, CommitMode::Upsert, vec![case("b", "2c")]).await;
    let history = store.history("support", "b").await.unwrap();
    let spans: Vec<(u64, Option<u64>)> = history.iter().map(|r| (r.from_version, r.to_version)).collect();
    assert_eq!(spans, [(1, Some(2)), (2, Some(4)), (4, None)]);
    // A case that did not change keeps its content id.
    let a = store.history("support", "a").await.unwrap();
    assert_eq!(a.len(), 2);
}

pub async fn references_resolve(store: impl Store) {
    let v1 = created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    let v2 = created(&store, CommitMode::Upsert, vec![case("b", "2")]).await;
    assert_eq!(store.resolve("support", &Ref::Latest).await.unwrap().number, 2);
    assert_eq!(store.resolve("support", &"v1".parse().unwrap()).await.unwrap(), v1);
    assert_eq!(store.resolve("support", &v2.id[..10].parse().unwrap()).await.unwrap().number, 2);
    use casebook_store::Tagged;
    assert_eq!(store.tag("support", 1, "prod", "tester", "2026-11-23T01:00:00Z").await.unwrap(), Tagged::Set);
    assert_eq!(store.resolve("support", &Ref::Name("prod".into())).await.unwrap().number, 1);
    assert_eq!(
        store.tag("support", 2, "prod", "tester", "2026-11-23T02:00:00Z").await.unwrap(),
        Tagged::Moved { from: 1 }
    );
    assert_eq!(store.resolve("support", &Ref::Name("prod".into())).await.unwrap().number, 2);
    // Tagging the version the tag names already changes nothing and logs nothing.
    assert_eq!(store.tag("support", 2, "prod", "tester", "2026-11-23T03:00:00Z").await.unwrap(), Tagged::Already);
    // Moving a tag is in the log.
    let events = store.events("support").await.unwrap();
    assert_eq!(events.iter().map(|e| e.detail.as_str()).collect::<Vec<_>>(), ["prod: v1", "prod: v1 → v2"]);
    assert!(matches!(store.resolve("support", &Ref::Number(9)).await, Err(StoreError::NoVersion { .. })));
    assert!(matches!(store.resolve("nope", &Ref::Latest).await, Err(StoreError::NoDataset(..))));
    assert!(matches!(store.tag("support", 7, "x", "t", "now").await, Err(StoreError::NoVersion { .. })));
}

pub async fn a_moved_head_is_a_conflict_and_writes_nothing(store: impl Store) {
    created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    created(&store, CommitMode::Upsert, vec![case("b", "2")]).await;
    let mut stale = request(CommitMode::Upsert, "on v1");
    stale.parent = Some(1);
    match store.commit(stale, batches(vec![case("c", "3")])).await {
        Err(StoreError::Conflict { parent: 1, head: 2, .. }) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(store.versions("support").await.unwrap().len(), 2);
    assert_eq!(store.case("support", 2, "c").await.unwrap(), None);
}

pub async fn cancelled_input_writes_nothing(store: impl Store) {
    created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(Ok(vec![casebook_store::prepare(&case("b", "2")).unwrap()])).await.unwrap();
    tx.send(Err(())).await.unwrap();
    drop(tx);
    assert!(matches!(store.commit(request(CommitMode::Upsert, "bad"), rx).await, Err(StoreError::Cancelled)));
    assert_eq!(store.versions("support").await.unwrap().len(), 1);
    assert_eq!(ids(&store, 1).await, ["a"]);
}

/// A commit whose input names a case twice (a library caller's: readers of files report it with
/// its place first) is refused with the id, whatever the path it takes, and writes nothing.
pub async fn an_id_listed_twice_is_refused_by_name(store: impl Store) {
    let many = |twice: &str| -> Vec<Case> {
        let mut cases: Vec<Case> = (0..3_000).map(|i| case(&format!("m{i:04}"), &format!("q{i}"))).collect();
        cases.push(case(twice, "again"));
        cases
    };
    let refused = |outcome: Result<CommitOutcome, StoreError>, id: &str| match outcome {
        Err(StoreError::DuplicateId(twice)) => assert_eq!(twice, id),
        other => panic!("expected `{id}` named twice, got {other:?}"),
    };
    // A first version, small and large, into an empty store.
    refused(commit(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "x"), case("a", "2")]).await, "a");
    refused(commit(&store, CommitMode::Replace, many("m0007")).await, "m0007");
    assert!(store.datasets().await.unwrap().is_empty());
    let v1 = created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    // Later versions, small and large, upserted and whole; and a first one beside another.
    for (mode, cases, id) in [
        (CommitMode::Upsert, vec![case("b", "1"), case("a", "2"), case("b", "1")], "b"),
        (CommitMode::Replace, vec![case("b", "1"), case("b", "2")], "b"),
        (CommitMode::Upsert, many("m2999"), "m2999"),
        (CommitMode::Replace, many("m0000"), "m0000"),
    ] {
        refused(commit(&store, mode, cases).await, id);
    }
    let mut other = request(CommitMode::Replace, "m");
    other.dataset = "other".into();
    refused(store.commit(other, batches(many("m1500"))).await, "m1500");
    assert_eq!(store.versions("support").await.unwrap(), [v1]);
    assert_eq!(store.datasets().await.unwrap().len(), 1);
}

/// Cases that share a seed file are given back whole by every read, with the content ids they
/// have in memory (a backend keeps the document once: that is not to change any id); a changed
/// seed file makes a new version whose diff names the change in the document.
pub async fn seed_files_are_given_back_whole(store: impl Store) {
    let trains = seed_document("Bob likes night trains");
    let mut cases: Vec<Case> = (0..5).map(|i| seeded(&format!("s{i}"), "./seeds/bob.yaml", trains.clone())).collect();
    cases.push(case("plain", "no seeds"));
    let mut inline = case("inline", "seeds inline");
    inline.task.memory_seeds = Some(serde_json::from_value(json!([{"source": "s", "content": "c"}])).unwrap());
    cases.push(inline);
    cases.push(seeded(
        "other",
        "./seeds/ann.yaml",
        json!(["a list", {"memory_seeds": {"file": "x", "content_id": "y"}}]),
    ));
    let v1 = created(&store, CommitMode::Replace, cases.clone()).await;
    let whole: Vec<String> = cases.iter().map(|c| serde_json::to_string(c).unwrap()).collect();
    let mut bodies = Vec::new();
    store
        .bodies("support", 1, &Select::all(), 3, &mut |batch| {
            bodies.extend(batch);
            true
        })
        .await
        .unwrap();
    assert_eq!(bodies, whole);
    let mut read = Vec::new();
    store
        .cases("support", 1, &Select::all(), 2, &mut |batch| {
            read.extend(batch);
            true
        })
        .await
        .unwrap();
    assert_eq!(read, cases);
    assert_eq!(store.case("support", 1, "s3").await.unwrap().as_ref(), Some(&cases[3]));
    // Content ids and the version id are those of the cases as they are.
    let mut pairs = Vec::new();
    for c in &cases {
        let cid = content_id(Kind::Case, c).unwrap();
        assert_eq!(store.history("support", &c.id).await.unwrap()[0].content_id, cid, "{}", c.id);
        pairs.push((c.id.clone(), id_bytes(&cid).unwrap()));
    }
    pairs.sort();
    let expected = casebook_canon::first_version_id("support", pairs.iter().map(|(id, cid)| (id.as_str(), cid)));
    assert_eq!(v1.id, expected.unwrap());

    // The seed file changes: every case that carries it changes, and the diff says how.
    let flights = seed_document("Bob likes early flights");
    let mut changed = cases.clone();
    for c in changed.iter_mut().take(5) {
        c.task.memory_seeds = Some(MemorySeeds::File { file: "./seeds/bob.yaml".into(), content: flights.clone() });
    }
    let v2 = created(&store, CommitMode::Replace, changed.clone()).await;
    assert_eq!((v2.added, v2.removed, v2.modified), (0, 0, 5));
    let diff = store.diff("support", 1, 2).await.unwrap();
    assert_eq!(diff.modified.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["s0", "s1", "s2", "s3", "s4"]);
    for modified in &diff.modified {
        assert_eq!(
            modified.changes,
            [FieldChange {
                pointer: "/memory_seeds/content/entries/0/content".into(),
                old: Some(json!("Bob likes night trains")),
                new: Some(json!("Bob likes early flights")),
            }]
        );
    }
    // Both versions read back as they were committed; the same content again makes no version.
    let mut read = Vec::new();
    store
        .cases("support", 2, &Select::all(), 100, &mut |batch| {
            read.extend(batch);
            true
        })
        .await
        .unwrap();
    assert_eq!(read, changed);
    assert_eq!(store.case("support", 1, "s0").await.unwrap().as_ref(), Some(&cases[0]));
    assert!(matches!(commit(&store, CommitMode::Replace, changed).await.unwrap(), CommitOutcome::Unchanged(_)));
}

/// A case whose two tools answer from the snapshot file `content` (one document, named twice)
/// and a third from responses inline, as `casebook-formats` reads them.
pub fn snapshotted(id: &str, content: serde_json::Value) -> Case {
    let mut c = case(id, &format!("why is {id} slow?"));
    let tool = |name: &str, responses: Responses| Tool {
        name: name.into(),
        description: None,
        parameters: None,
        responses: Some(responses),
        default: None,
        extra: Default::default(),
    };
    let file = || Responses::File { file: "snapshots/incident-42.json".into(), content: content.clone() };
    let inline = serde_json::from_value(json!([{"result": {"file": "not a reference", "content": 1}}])).unwrap();
    c.task.tools = Some(vec![tool("logs", file()), tool("metrics", Responses::Inline(inline)), tool("traces", file())]);
    c
}

/// Cases whose tools share a snapshot file: the store keeps its document once however many
/// cases and tools carry it, every read gives the cases back whole with their content ids, and
/// a changed snapshot is a modification at its path.
/// A file pushed onto v2 kept the server's change to a and b's removal, and still holds its
/// own a (as at v1) and b: pushed again on v2 with those exceptions, they are what it started
/// from, so they stay as the head has them (no conflict with its own earlier push), and an edit
/// of a in the file is a conflict with the server's change it never had. c, pushed in v2 with
/// the file's content, is the file's to change while the head keeps it.
pub async fn a_merge_takes_exceptions_for_what_the_input_started_from(store: AnyStore) {
    use casebook_store::{Changes, Choice, Exceptions};
    let cid = |c: &Case| id_bytes(&content_id(Kind::Case, c).unwrap()).unwrap();
    created(&store, CommitMode::Replace, vec![case("a", "1"), case("b", "2"), case("c", "3")]).await;
    created(&store, CommitMode::Replace, vec![case("a", "1 on the server"), case("c", "3b")]).await;
    let except =
        Exceptions::from([("a".to_owned(), Some(cid(&case("a", "1")))), ("b".to_owned(), Some(cid(&case("b", "2"))))]);
    let changes = Changes::between(&store, "support", 2, 2, &except).await.unwrap();
    let head_a = casebook_store::prepare(&case("a", "1 on the server")).unwrap();
    assert_eq!(changes.choose("a", Some(&cid(&case("a", "1")))), Choice::Head(Some(Box::new(head_a))));
    assert_eq!(changes.choose("b", Some(&cid(&case("b", "2")))), Choice::Head(None));
    assert_eq!(changes.choose("a", Some(&cid(&case("a", "1 in the file")))), Choice::Conflict);
    assert_eq!(changes.choose("a", Some(&cid(&case("a", "1 on the server")))), Choice::Incoming);
    assert_eq!(changes.choose("c", Some(&cid(&case("c", "3c")))), Choice::Incoming);

    // The head changed a again after v2: still the head's where the file kept its old a.
    created(&store, CommitMode::Upsert, vec![case("a", "1 again"), case("c", "3d")]).await;
    let changes = Changes::between(&store, "support", 2, 3, &except).await.unwrap();
    assert_eq!(changes.choose("a", Some(&cid(&case("a", "1 in the file")))), Choice::Conflict);
    let head_a = casebook_store::prepare(&case("a", "1 again")).unwrap();
    assert_eq!(changes.choose("a", Some(&cid(&case("a", "1")))), Choice::Head(Some(Box::new(head_a))));
    assert_eq!(changes.choose("b", Some(&cid(&case("b", "2")))), Choice::Head(None));
    // c changed on both sides since v2.
    assert_eq!(changes.choose("c", Some(&cid(&case("c", "3c")))), Choice::Conflict);
}

pub async fn snapshot_files_are_kept_once(store: AnyStore) {
    let incident = json!([{"when": {"includes": {"service": "checkout"}}, "result": ["pool exhausted — 東京"]}]);
    let mut cases: Vec<Case> = (0..30).map(|i| snapshotted(&format!("c{i}"), incident.clone())).collect();
    // A seed file beside a snapshot file: two documents for one body.
    let mut both = snapshotted("both", incident.clone());
    both.task.memory_seeds =
        Some(MemorySeeds::File { file: "seeds/bob.yaml".into(), content: seed_document("trains") });
    cases.push(both);
    cases.push(case("plain", "no tools"));
    created(&store, CommitMode::Replace, cases.clone()).await;
    let mut bodies = Vec::new();
    store
        .bodies("support", 1, &Select::all(), 7, &mut |batch| {
            bodies.extend(batch);
            true
        })
        .await
        .unwrap();
    let whole: Vec<String> = cases.iter().map(|c| serde_json::to_string(c).unwrap()).collect();
    assert_eq!(bodies, whole);
    assert_eq!(store.case("support", 1, "both").await.unwrap().as_ref(), Some(&cases[30]));
    for c in &cases {
        let cid = content_id(Kind::Case, c).unwrap();
        assert_eq!(store.history("support", &c.id).await.unwrap()[0].content_id, cid, "{}", c.id);
    }
    // The snapshot and the seed file, once each.
    let report = store.check().await.unwrap();
    assert_eq!((report.problems.clone(), report.bodies, report.seed_documents), (Vec::<String>::new(), 32, 2));

    // The snapshot changes: every case that carries it changes, at the result that changed.
    let changed_incident = json!([{"when": {"includes": {"service": "checkout"}}, "result": ["pool fine"]}]);
    let changed: Vec<Case> = cases
        .iter()
        .take(30)
        .map(|c| snapshotted(&c.id, changed_incident.clone()))
        .chain(cases[30..].iter().cloned())
        .collect();
    let v2 = created(&store, CommitMode::Replace, changed.clone()).await;
    assert_eq!((v2.added, v2.removed, v2.modified), (0, 0, 30));
    let diff = store.diff("support", 1, 2).await.unwrap();
    let change = |tool: usize| FieldChange {
        pointer: format!("/tools/{tool}/responses/content/0/result/0"),
        old: Some(json!("pool exhausted — 東京")),
        new: Some(json!("pool fine")),
    };
    assert_eq!(diff.modified[0].changes, [change(0), change(2)]);
    assert_eq!(store.case("support", 2, "c7").await.unwrap().as_ref(), Some(&changed[7]));
    assert_eq!(store.check().await.unwrap().seed_documents, 3);
}

/// Cases with something for every kind of filter: plain and `key:value` labels, metadata of
/// every JSON type, turns, confidence, non-ASCII text, seed files and inline seeds, and tools
/// answering from snapshot files (kept apart by the store) and inline.
fn varied_cases() -> Vec<Case> {
    let specs = [
        (
            "m1",
            json!({"labels": ["math", "category:RCA"], "metadata": {"difficulty": "hard", "n": 3}, "confidence": 0.9}),
        ),
        ("m2", json!({"labels": ["math", "easy"], "metadata": {"difficulty": "medium", "n": 3.0}})),
        (
            "r1",
            json!({"labels": ["category:RCA", "category:infra"], "metadata": {"difficulty": "easy", "flaky": true}}),
        ),
        ("r2", json!({"labels": ["recall"], "metadata": {"difficulty": null, "tags": ["a", "b"]}, "confidence": 0.5})),
        ("t1", json!({"turns": [{"role": "user", "content": "again"}, {"role": "hitl", "content": "stop"}]})),
        ("t2", json!({"turns": [{"role": "user", "content": "café →"}], "metadata": {"nested": {"k": "v"}}})),
        ("x1", json!({"metadata": {"difficulty": "HARD", "n": "3"}})),
        ("x2", json!({"labels": [], "metadata": {}})),
    ];
    specs
        .into_iter()
        .map(|(id, extra)| {
            let mut value = serde_json::to_value(case(id, &format!("question {id}: refund? naïve"))).unwrap();
            for (k, v) in extra.as_object().unwrap() {
                value[k] = v.clone();
            }
            serde_json::from_value(value).unwrap()
        })
        .chain([
            seeded("s1", "./seeds/bob.yaml", seed_document("Bob likes night trains")),
            seeded("s2", "./seeds/bob.yaml", seed_document("Bob likes night trains")),
            seeded(
                "s3",
                "seeds/ann.yaml",
                json!({"seeds": [{"source": "a", "content": "Ann", "n": 2}], "content_id": 7}),
            ),
            seeded("s4", "seeds/empty.yaml", json!([])),
            {
                let mut c = case("s5", "inline");
                c.task.memory_seeds = Some(serde_json::from_value(json!([{"source": "s", "content": "c"}])).unwrap());
                c
            },
            snapshotted(
                "k1",
                json!([{"when": {"includes": {"service": "checkout"}}, "result": ["pool exhausted — 東京"]}]),
            ),
            snapshotted("k2", json!([{"result": {"p99_ms": 1200}}, {"result": ["fine"], "content_id": 3}])),
        ])
        .collect()
}

/// A filter selects the same cases, in the same order, in the store as in memory, for the
/// head and for an older version (and `count` agrees).
pub async fn filters_select_what_they_select_in_memory(store: impl Store) {
    let cases = varied_cases();
    created(&store, CommitMode::Replace, cases.clone()).await;
    // v2: the whole dataset again, one case with new labels and metadata (its body is stored
    // in a batch whose other body was stored before); v3: one case goes.
    let mut changed = cases[0].clone();
    changed.labels = Some(vec!["easy".into()]);
    changed.metadata = Some(json!({"difficulty": "medium", "n": 4}).as_object().unwrap().clone());
    let mut v2 = cases.clone();
    v2[0] = changed;
    created(&store, CommitMode::Replace, v2.clone()).await;
    created(&store, CommitMode::Remove(vec!["r2".into()]), vec![]).await;
    let v3: Vec<Case> = v2.iter().filter(|c| c.id != "r2").cloned().collect();
    let expressions = [
        r#"labels contains "math""#,
        r#"labels contains "math" and metadata.difficulty in ["hard", "medium"]"#,
        r#"label.category == "RCA""#,
        r#"label.category != "RCA""#,
        r#"label.category matches "^inf""#,
        r#"not (labels contains "math")"#,
        r#"metadata.n == 3"#,
        r#"metadata.n >= 3 or metadata.flaky == true"#,
        r#"metadata.difficulty == null"#,
        r#"metadata.difficulty != "hard""#,
        r#"metadata.difficulty matches "(?i)^hard$""#,
        r#"metadata.tags contains "b""#,
        r#"metadata.nested.k == "v""#,
        r#"exists(metadata.flaky) or exists(confidence)"#,
        r#"confidence >= 0.8"#,
        r#"len(turns) >= 2"#,
        r#"len(labels) == 0"#,
        r#"turns[1].role == "hitl""#,
        r#"input contains "naïve" and id > "r""#,
        r#"input matches "refund\\?""#,
        r#"exists(memory_seeds)"#,
        r#"exists(memory_seeds.content)"#,
        r#"exists(memory_seeds.content_id)"#,
        r#"exists(memory_seeds.content.content_id)"#,
        r#"memory_seeds.file == "./seeds/bob.yaml""#,
        r#"memory_seeds.file matches "ann""#,
        r#"memory_seeds.content.entries[0].content matches "night""#,
        r#"memory_seeds.content.n > 1e300"#,
        r#"memory_seeds.content.seeds[0].n == 2"#,
        r#"len(memory_seeds.content) == 0"#,
        r#"len(memory_seeds.content.entries) >= 1"#,
        r#"memory_seeds[0].source == "s""#,
        r#"not (memory_seeds.content.entries[0].content matches "night")"#,
        r#"memory_seeds.content.entries[0].content matches "night" and labels contains "math""#,
        // Snapshot files: their recorded answers, never the store's reference.
        r#"tools[0].responses.content[0].result[0] == "pool exhausted — 東京""#,
        r#"tools[2].responses.content[0].when.includes.service == "checkout""#,
        r#"tools[0].responses.content[0].result.p99_ms > 1000"#,
        r#"tools[0].responses.content[1].content_id == 3"#,
        r#"exists(tools[0].responses.content_id)"#,
        r#"exists(tools[0].responses.content)"#,
        r#"tools[0].responses.file == "snapshots/incident-42.json""#,
        r#"len(tools[2].responses.content) == 2"#,
        r#"tools[1].responses[0].result.file == "not a reference""#,
        r#"not (tools[0].responses.content[0].result[0] == "pool exhausted — 東京")"#,
        r#"tools[0].responses.content[0].result[0] == "pool exhausted — 東京" or labels contains "math""#,
        r#"len(tools) == 3 and tools[0].name == "logs""#,
    ];
    for (version, expected_cases) in [(1, &cases), (2, &v2), (3, &v3)] {
        for text in expressions {
            let filter = casebook_filter::Filter::parse(text).unwrap();
            let expected: Vec<String> =
                expected_cases.iter().filter(|c| filter.matches(c)).map(|c| c.id.clone()).collect();
            let select = Select { filter: Some(filter), limit: None };
            let got = selected(&store, version, &select, 3).await.unwrap();
            assert_eq!(got, expected, "v{version}: {text}");
            assert_eq!(store.count("support", version, &select).await.unwrap(), expected.len() as u64, "{text}");
            let first = Select { limit: Some(1), ..select };
            assert_eq!(store.count("support", version, &first).await.unwrap(), expected.len().min(1) as u64);
        }
    }
}

/// Numbers at the edges of the double range, and filters of thousands of tests, select the same
/// cases in the store as in memory (issue 12: `metadata.v == 1.5e308` found the case only in
/// memory, and 1,000 `or` terms failed in SQLite with "Expression tree is too large").
pub async fn long_filters_and_extreme_numbers_select_what_they_select_in_memory(store: impl Store) {
    let values = [
        json!(1.5e308),
        json!(-1.5e308),
        json!(1e-300),
        json!(5e-324),
        json!(-0.0),
        json!(0),
        json!(1.5e308f64.next_down()),
        json!(f64::MAX),
        json!(1e20),
        json!(9_007_199_254_740_993i64),
        json!(9_223_372_036_854_775_808u64),
        json!(1e-200),
        json!(7),
    ];
    let cases: Vec<Case> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut c = case(&format!("c{i:02}"), "q");
            c.metadata = Some(json!({"v": v, "list": [v]}).as_object().unwrap().clone());
            c
        })
        .collect();
    created(&store, CommitMode::Replace, cases.clone()).await;
    let numbers = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>();
    let mut expressions: Vec<String> = [
        "metadata.v == 1.5e308",
        "metadata.v < 1.5e308",
        "metadata.v >= 1.4999999999999998e308",
        "metadata.v == -1.5e308",
        "metadata.v > -1.5e308",
        "metadata.v == 1e-300",
        "metadata.v < 1e-300",
        "metadata.v == 5e-324",
        "metadata.v == -0.0",
        "metadata.v == 1e-400",
        "metadata.v == 1.7976931348623157e308",
        "metadata.v == 100000000000000000000",
        "metadata.v == 9007199254740993",
        "metadata.v > 9007199254740992",
        "metadata.v == 9223372036854775808",
        "metadata.v in [1.5e308, 1e-300, 1e-200]",
        "metadata.list contains 1.5e308",
        "metadata.list contains 1e-200",
    ]
    .map(str::to_owned)
    .to_vec();
    // 1,500 tests joined by `or`, and by `and`; and the most a filter may hold: 2,000 ordering
    // tests (those bind the most values in SQL), and a list of 2,000 numbers.
    let mut or: Vec<String> = numbers(1499).iter().map(|n| format!("metadata.v == {n}")).collect();
    or.push("metadata.v == 1.5e308".into());
    expressions.push(or.join(" or "));
    expressions.push(numbers(1500).iter().map(|n| format!("metadata.v != {n}")).collect::<Vec<_>>().join(" and "));
    expressions.push(numbers(2000).iter().map(|n| format!("metadata.v > {n}.5")).collect::<Vec<_>>().join(" or "));
    expressions.push(format!("metadata.v in [{}, 1e-300]", numbers(1999).join(", ")));
    for text in &expressions {
        let filter = casebook_filter::Filter::parse(text).unwrap();
        let expected: Vec<String> = cases.iter().filter(|c| filter.matches(c)).map(|c| c.id.clone()).collect();
        let select = Select { filter: Some(filter), limit: None };
        let got =
            selected(&store, 1, &select, 100).await.unwrap_or_else(|e| panic!("{e}: {}", &text[..text.len().min(80)]));
        assert_eq!(got, expected, "{}", &text[..text.len().min(80)]);
        assert!(!got.is_empty() && got.len() < cases.len(), "selects something, not everything: {text:.80}");
    }
}

/// A commit whose chunks mix bodies the store holds (from another dataset) with new ones: the new
/// ones' labels and facets are indexed, the stored ones are reused, and the filters of the new
/// dataset select what they select in memory.
pub async fn a_commit_of_stored_and_new_bodies_filters_as_in_memory(store: impl Store) {
    let labelled = |i: usize| {
        let mut c = case(&format!("c{i}"), &format!("question {i} ü"));
        c.labels = Some(vec![format!("topic:{}", i % 3), "shared".into()]);
        c.metadata = Some(serde_json::Map::from_iter([("n".to_owned(), json!(i))]));
        c
    };
    // Over two chunks of a thousand rows and a remainder.
    let first: Vec<Case> = (0..2500).map(labelled).collect();
    let mut other = request(CommitMode::Replace, "first");
    other.dataset = "other".into();
    store.commit(other, batches(first)).await.unwrap();
    // Every third case is one of `other`'s, as it is; the rest are new, some under the same id.
    let cases: Vec<Case> = (0..2600)
        .map(|i| {
            if i % 3 == 0 {
                labelled(i)
            } else {
                let mut c = labelled(i + 10_000);
                c.labels = Some(vec![format!("topic:{}", i % 5), format!("new:{i}")]);
                c
            }
        })
        .collect();
    created(&store, CommitMode::Replace, cases.clone()).await;
    assert_eq!(ids(&store, 1).await, cases.iter().map(|c| c.id.clone()).collect::<Vec<_>>());
    for text in [
        r#"labels contains "shared""#,
        r#"label.topic == "4""#,
        r#"label.topic == "1" and metadata.n >= 10000"#,
        r#"labels contains "new:2599""#,
        "metadata.n < 100",
        r#"input contains "ü" and metadata.n > 2000"#,
    ] {
        let filter = casebook_filter::Filter::parse(text).unwrap();
        let expected: Vec<String> = cases.iter().filter(|c| filter.matches(c)).map(|c| c.id.clone()).collect();
        assert!(!expected.is_empty(), "{text}");
        let select = Select { filter: Some(filter), limit: None };
        let got = selected(&store, 1, &select, 500).await.unwrap();
        assert_eq!(got, expected, "{text}");
    }
}

pub const H1: &str = "9d251713791785edcf8a054cd03ea048c14e203890eb05a458ea5eda21a03a43";
pub const H2: &str = "0d0fa5000000000000000000000000000000000000000000000000000000000a";

pub async fn runs_keep_their_results_and_outputs_by_hash(store: AnyStore) {
    store.begin_run("r-20261123-a1", "smoke", "2026-11-23T10:00:00Z", "{}").await.unwrap();
    let rows = [
        casebook_store::ResultRow { seq: 1, result: "{\"b\":1}".into(), output: None },
        casebook_store::ResultRow { seq: 0, result: "{\"a\":1}".into(), output: Some((H1.into(), "\"out\"".into())) },
    ];
    store.save_results("r-20261123-a1", &rows).await.unwrap();
    assert_eq!(store.run_results("r-20261123-a1").await.unwrap(), ["{\"a\":1}", "{\"b\":1}"]);
    let outputs = store.outputs(&[H2.into(), H1.into(), H1.into()]).await.unwrap();
    assert_eq!(outputs, [None, Some("\"out\"".into()), Some("\"out\"".into())]);
    // A run is named by a prefix of its id, the latest by none; unfinished until finished.
    assert_eq!(store.run(Some("r-2026")).await.unwrap().finished, None);
    store.finish_run("r-20261123-a1", "2026-11-23T10:01:00Z", "{}").await.unwrap();
    assert_eq!(store.run(None).await.unwrap().finished.as_deref(), Some("2026-11-23T10:01:00Z"));
    assert!(matches!(store.run(Some("x")).await, Err(StoreError::NoRun(_))));
    // Two runs begun in the same second: the latest is the one begun last, whatever its id.
    store.begin_run("r-20261123-00", "smoke", "2026-11-23T10:00:00Z", "{}").await.unwrap();
    assert_eq!(store.run(None).await.unwrap().id, "r-20261123-00");
    let ids: Vec<String> = store.runs().await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["r-20261123-a1", "r-20261123-00"]);
    // Each run's results are its own.
    store
        .save_results("r-20261123-00", &[casebook_store::ResultRow { seq: 0, result: "{}".into(), output: None }])
        .await
        .unwrap();
    assert_eq!(store.run_results("r-20261123-00").await.unwrap(), ["{}"]);
    assert_eq!(store.run_results("r-20261123-a1").await.unwrap().len(), 2);
    assert!(matches!(store.save_results("r-nope", &rows).await, Err(StoreError::NoRun(_))));
    let bad = [casebook_store::ResultRow { seq: 2, result: "{}".into(), output: Some(("h1".into(), "1".into())) }];
    assert!(matches!(store.save_results("r-20261123-00", &bad).await, Err(StoreError::BadHash(_))));
    // Nothing of a refused batch was kept.
    assert_eq!(store.run_results("r-20261123-00").await.unwrap(), ["{}"]);
}

/// Pages of a run's results, each from the place after the last one read, are its results in
/// order with their places, gaps kept; another run's results never show.
pub async fn a_run_is_read_a_page_at_a_time(store: AnyStore) {
    store.begin_run("r-a", "smoke", "2026-11-23T10:00:00Z", "{}").await.unwrap();
    store.begin_run("r-b", "smoke", "2026-11-23T10:00:01Z", "{}").await.unwrap();
    let rows = |seqs: &[u64], tag: &str| -> Vec<casebook_store::ResultRow> {
        seqs.iter()
            .map(|&seq| casebook_store::ResultRow { seq, result: format!("{{\"{tag}\":{seq}}}"), output: None })
            .collect()
    };
    // Saved out of order, with a gap (a stopped run's unfinished job 3).
    store.save_results("r-a", &rows(&[4, 0, 2, 1, 5, 6], "a")).await.unwrap();
    store.save_results("r-b", &rows(&[0, 1, 2, 3], "b")).await.unwrap();
    let mut read = Vec::new();
    let mut from = 0;
    loop {
        let page = store.run_results_from("r-a", from, 2).await.unwrap();
        assert!(page.len() <= 2);
        let Some((last, _)) = page.last() else { break };
        from = last + 1;
        read.extend(page);
    }
    let seqs: Vec<u64> = read.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, [0, 1, 2, 4, 5, 6]);
    assert_eq!(read[3].1, "{\"a\":4}");
    let whole: Vec<String> = read.into_iter().map(|(_, r)| r).collect();
    assert_eq!(whole, store.run_results("r-a").await.unwrap());
    assert!(store.run_results_from("r-a", 7, 10).await.unwrap().is_empty());
    assert!(store.run_results_from("r-a", u64::MAX, 10).await.unwrap().is_empty());
    assert!(matches!(store.run_results_from("r-c", 0, 10).await, Err(StoreError::NoRun(_))));
}

pub async fn outputs_are_found_by_their_whole_run_hash(store: AnyStore) {
    store.begin_run("r-1", "smoke", "2026-11-23T10:00:00Z", "{}").await.unwrap();
    // Two hashes that share all but their last bits.
    let twin = format!("{}{}", &H1[..63], "0");
    let row = |seq, hash: &str, output: &str| casebook_store::ResultRow {
        seq,
        result: "{}".into(),
        output: Some((hash.into(), output.into())),
    };
    store.save_results("r-1", &[row(0, H1, "\"first\"")]).await.unwrap();
    assert_eq!(store.outputs(std::slice::from_ref(&twin)).await.unwrap(), [None]);
    store.save_results("r-1", &[row(1, &twin, "\"second\"")]).await.unwrap();
    let found = store.outputs(&[twin.clone(), H1.into()]).await.unwrap();
    assert_eq!(found, [Some("\"second\"".into()), Some("\"first\"".into())]);
}

/// Cursor paging walks a version in order, with or without a filter, and a cursor gives the
/// same pages after later commits (a version never changes).
pub async fn pages_walk_a_fixed_version(store: impl Store) {
    let many: Vec<Case> = (0..23).map(|i| case(&format!("c{i:02}"), &format!("question {i}"))).collect();
    created(&store, CommitMode::Replace, many.clone()).await;
    let walk = |select: Select, size: usize| {
        let store = &store;
        async move {
            let mut pages = Vec::new();
            let mut after = None;
            loop {
                let page = store.page("support", 1, &select, after.as_ref(), size).await.unwrap();
                let ids: Vec<String> =
                    page.bodies.iter().map(|b| serde_json::from_str::<Case>(b).unwrap().id).collect();
                assert!(ids.len() <= size);
                pages.push(ids);
                match page.next {
                    Some(next) => after = Some(next),
                    None => return pages,
                }
            }
        }
    };
    let pages = walk(Select::all(), 5).await;
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [5, 5, 5, 5, 3]);
    assert_eq!(pages.concat(), ids(&store, 1).await);
    // A page that ends exactly at the end is the last: no cursor to an empty page.
    assert_eq!(walk(Select::all(), 23).await.iter().map(Vec::len).collect::<Vec<_>>(), [23]);
    assert_eq!(walk(Select::all(), 1).await.len(), 23);
    let odd = casebook_filter::Filter::parse(r#"input contains "1" or input matches "7$""#).unwrap();
    let want: Vec<String> = many.iter().filter(|c| odd.matches(c)).map(|c| c.id.clone()).collect();
    let filtered = Select { filter: Some(odd), limit: None };
    assert_eq!(walk(filtered.clone(), 2).await.concat(), want);
    // Backwards from the last page, by `previous`: the same pages as forwards, none empty.
    let back = |select: Select, size: usize| {
        let store = &store;
        async move {
            let mut page = store.page("support", 1, &select, None, size).await.unwrap();
            assert_eq!(page.previous, None, "nothing before the first page");
            while let Some(next) = page.next.clone() {
                page = store.page("support", 1, &select, Some(&next), size).await.unwrap();
                assert!(page.previous.is_some());
            }
            let mut pages = Vec::new();
            loop {
                let ids: Vec<String> =
                    page.bodies.iter().map(|b| serde_json::from_str::<Case>(b).unwrap().id).collect();
                assert!(!ids.is_empty() && ids.len() <= size);
                pages.insert(0, ids);
                match page.previous.clone() {
                    Some(previous) => {
                        page = store.page_before("support", 1, &select, &previous, size).await.unwrap();
                        assert!(page.next.is_some(), "a page read backwards has cases after it");
                    }
                    None => return pages,
                }
            }
        }
    };
    let pages = back(Select::all(), 5).await;
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [5, 5, 5, 5, 3]);
    assert_eq!(pages.concat(), ids(&store, 1).await);
    assert_eq!(back(filtered.clone(), 3).await, walk(filtered.clone(), 3).await);
    // Forwards again from a page read backwards (c05–c08, before c09): its `next` leads on.
    let third = store.page("support", 1, &Select::all(), None, 10).await.unwrap().next.unwrap();
    let back_from = store.page_before("support", 1, &Select::all(), &third, 4).await.unwrap();
    let on = store.page("support", 1, &Select::all(), back_from.next.as_ref(), 4).await.unwrap();
    let on_ids: Vec<String> = on.bodies.iter().map(|b| serde_json::from_str::<Case>(b).unwrap().id).collect();
    assert_eq!(on_ids, ["c09", "c10", "c11", "c12"]);
    // The head moves on: v1's pages are what they were.
    let second = store.page("support", 1, &Select::all(), None, 5).await.unwrap().next.unwrap();
    let before = store.page("support", 1, &Select::all(), Some(&second), 5).await.unwrap();
    created(&store, CommitMode::Upsert, vec![case("c00x", "between"), case("c05", "edited")]).await;
    created(&store, CommitMode::Remove(vec!["c06".into(), "c07".into()]), vec![]).await;
    let after = store.page("support", 1, &Select::all(), Some(&second), 5).await.unwrap();
    assert_eq!(before, after);
    assert_eq!(walk(Select::all(), 5).await.concat(), ids(&store, 1).await);
}

/// Cases inserted again and again at one spot keep the input's order: the places between two
/// neighbours halve each time, and once they are too close to hold another, the commit
/// renumbers the cases instead of giving two the same place.
pub async fn many_insertions_at_one_spot_keep_the_order(store: impl Store) {
    // `a` at place 10 (near 0, doubles are dense enough for a thousand halvings).
    let mut list: Vec<Case> = (0..10).map(|i| case(&format!("p{i}"), "before")).collect();
    list.extend([case("a", "first"), case("z", "last")]);
    created(&store, CommitMode::Replace, list.clone()).await;
    for k in 0..70 {
        // Each new case right after `a`, before the one added last.
        list.insert(11, case(&format!("x{k:02}"), &format!("inserted {k}")));
        let v = created(&store, CommitMode::Replace, list.clone()).await;
        let want: Vec<String> = list.iter().map(|c| c.id.clone()).collect();
        assert_eq!(ids(&store, v.number).await, want, "after insertion {k}");
    }
}

/// Cases holding U+0000 in their text (which PostgreSQL's JSON functions refuse) are selected
/// by filters on that text as in memory, counted as in memory, and paged as in memory.
pub async fn text_with_nul_is_filtered_as_in_memory(store: impl Store) {
    let mut cases = Vec::new();
    for (i, (input, meta)) in
        [("a\u{0}b", "x\u{0}"), ("ab", "x"), ("\u{0}", "y"), ("plain", "x\u{0}y"), ("b\u{0}a", "")].iter().enumerate()
    {
        let mut c = case(&format!("n{i}"), input);
        c.metadata = Some(json!({"k": meta, "n": i}).as_object().unwrap().clone());
        c.labels = Some(vec![format!("l{}", i % 2)]);
        cases.push(c);
    }
    created(&store, CommitMode::Replace, cases.clone()).await;
    let expressions = [
        r#"input contains "a""#,
        r#"input contains "\u0000""#,
        r#"metadata.k == "x\u0000""#,
        r#"metadata.k < "x\u0000z""#,
        r#"metadata.n >= 2 and labels contains "l0""#,
        // Labels go outside PostgreSQL's guard of the JSON test (and statements with them alone,
        // for the cases counted in memory, bind their parameters only).
        r#"labels contains "l0" and metadata.n >= 2"#,
        r#"labels contains "l0" and metadata.n >= 2 and labels contains "l1""#,
        r#"labels contains "l0" and input contains "a" and metadata.n >= 0"#,
        r#"len(input) == 1"#,
        r#"not (input == "ab")"#,
        r#"labels contains "l1" or metadata.k == """#,
    ];
    for text in expressions {
        let filter = casebook_filter::Filter::parse(text).unwrap();
        let expected: Vec<String> = cases.iter().filter(|c| filter.matches(c)).map(|c| c.id.clone()).collect();
        let select = Select { filter: Some(filter), limit: None };
        let got = selected(&store, 1, &select, 2).await.unwrap();
        assert_eq!(got, expected, "{text}");
        assert_eq!(store.count("support", 1, &select).await.unwrap(), expected.len() as u64, "{text}");
        let first = Select { limit: Some(1), ..select.clone() };
        assert_eq!(store.count("support", 1, &first).await.unwrap(), expected.len().min(1) as u64, "{text}");
        let page = store.page("support", 1, &select, None, 2).await.unwrap();
        let paged: Vec<String> = page.bodies.iter().map(|b| serde_json::from_str::<Case>(b).unwrap().id).collect();
        assert_eq!(paged, expected.iter().take(2).cloned().collect::<Vec<_>>(), "{text}");
    }
}

/// Two projects may hold datasets of the same name; neither sees the other's datasets, runs or
/// stored outputs, and a version's id does not depend on its project.
pub async fn projects_keep_datasets_and_runs_apart(store: AnyStore) {
    let team = store.in_project("team-a");
    let mine = created(&store, CommitMode::Replace, vec![case("c1", "one")]).await;
    let theirs = created(&team, CommitMode::Replace, vec![case("c1", "one")]).await;
    assert_eq!(theirs.id, mine.id);
    assert_eq!((theirs.number, mine.number), (1, 1));
    created(&team, CommitMode::Upsert, vec![case("c2", "two")]).await;
    assert_eq!(ids(&store, 1).await, ["c1"]);
    assert_eq!(ids(&team, 2).await, ["c1", "c2"]);
    assert_eq!(store.versions("support").await.unwrap().len(), 1);
    let only = team.in_project("team-b");
    assert!(only.datasets().await.unwrap().is_empty());
    // A miss names no dataset of another project.
    match only.versions("support").await {
        Err(StoreError::NoDataset(name, hint)) => {
            assert_eq!(name, "support");
            assert!(!hint.contains("support"), "{hint}");
        }
        other => panic!("{:?}", other.map(|v| v.len())),
    }
    // Runs and their outputs.
    team.begin_run("r-team", "smoke", "2026-11-23T10:00:00Z", "{}").await.unwrap();
    let row = casebook_store::ResultRow { seq: 0, result: "{}".into(), output: Some((H1.into(), "\"out\"".into())) };
    team.save_results("r-team", std::slice::from_ref(&row)).await.unwrap();
    assert_eq!(team.outputs(&[H1.into()]).await.unwrap(), [Some("\"out\"".into())]);
    assert_eq!(store.outputs(&[H1.into()]).await.unwrap(), [None]);
    assert!(store.runs().await.unwrap().is_empty());
    assert!(matches!(store.run(Some("r-team")).await, Err(StoreError::NoRun(_))));
    assert!(matches!(store.run_results("r-team").await, Err(StoreError::NoRun(_))));
    assert!(matches!(store.save_results("r-team", &[row]).await, Err(StoreError::NoRun(_))));
    assert!(matches!(store.finish_run("r-team", "2026-11-23T10:01:00Z", "{}").await, Err(StoreError::NoRun(_))));
    assert_eq!(team.run(None).await.unwrap().finished, None);
    assert_eq!(store.projects().await.unwrap(), ["default", "team-a"]);
    // A run id is a project's own: another project may use it (and learns nothing by doing so),
    // and its results are its own; the same id again in one project is refused.
    store.begin_run("r-team", "other", "2026-11-23T11:00:00Z", "{}").await.unwrap();
    store
        .save_results("r-team", &[casebook_store::ResultRow { seq: 0, result: "{\"mine\":1}".into(), output: None }])
        .await
        .unwrap();
    assert_eq!(store.run_results("r-team").await.unwrap(), ["{\"mine\":1}"]);
    assert_eq!(team.run_results("r-team").await.unwrap(), ["{}"]);
    assert!(matches!(
        team.begin_run("r-team", "again", "2026-11-23T12:00:00Z", "{}").await,
        Err(StoreError::RunExists(_))
    ));
}

pub async fn api_keys_open_one_project_until_revoked(store: AnyStore) {
    use casebook_store::{KeyMaterial, Scope};
    let material = |n: u8| KeyMaterial { id: [n; 6], secret: [n; 32], store_secret: [7; 32] };
    let time = "2026-11-24T08:00:00Z";
    let read = store.create_key("team-a", Scope::Read, "ci", "ana", time, &material(1)).await.unwrap();
    let write = store.create_key("team-b", Scope::Write, "laptop", "bo", time, &material(2)).await.unwrap();
    assert_eq!(read.token, format!("cb_{}_{}", "01".repeat(6), "01".repeat(32)));
    let access = store.authenticate(&read.token).await.unwrap().unwrap();
    assert_eq!((access.project.as_str(), access.scope), ("team-a", Scope::Read));
    assert_eq!(store.authenticate(&write.token).await.unwrap().unwrap().scope, Scope::Write);
    // One changed digit of the secret, another key's id, garbage: no access.
    let mut forged = read.token.clone();
    forged.replace_range(forged.len() - 1.., "2");
    assert_eq!(store.authenticate(&forged).await.unwrap(), None);
    let swapped = format!("cb_{}_{}", "02".repeat(6), "01".repeat(32));
    assert_eq!(store.authenticate(&swapped).await.unwrap(), None);
    assert_eq!(store.authenticate("Bearer nonsense").await.unwrap(), None);
    // The token is stored nowhere; listing shows ids.
    let listed = store.keys(Some("team-a")).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, "01".repeat(6));
    assert_eq!(store.keys(None).await.unwrap().len(), 2);
    let revoked = store.revoke_key(&read.key.id, "2026-11-24T09:00:00Z").await.unwrap();
    assert_eq!(revoked.revoked.as_deref(), Some("2026-11-24T09:00:00Z"));
    assert_eq!(store.authenticate(&read.token).await.unwrap(), None);
    assert!(store.authenticate(&write.token).await.unwrap().is_some());
    assert!(matches!(store.revoke_key("ffffffffffff", time).await, Err(StoreError::NoKey(_))));
    assert!(matches!(
        store.create_key("Team A", Scope::Read, "", "ana", time, &material(3)).await,
        Err(StoreError::BadProject(_))
    ));
}

/// `page_json` gives the pages `page` gives, joined: with and without a filter, at every
/// cursor, with cases that carry seed files, and past the end.
pub async fn json_pages_are_the_pages_joined(store: impl Store) {
    let document = seed_document("Ana likes trains");
    let mut many: Vec<Case> = (0..17).map(|i| case(&format!("c{i:02}"), &format!("question {i}"))).collect();
    many.insert(5, seeded("s1", "./seeds/ana.yaml", document.clone()));
    many.push(seeded("s2", "./seeds/ana.yaml", document));
    let v = created(&store, CommitMode::Replace, many).await;
    for filter in [None, Some(r#"id != "c03" and not (input matches "1$")"#)] {
        let select = Select { filter: filter.map(|f| casebook_filter::Filter::parse(f).unwrap()), limit: None };
        for size in [1, 4, 19, 50] {
            let mut after = None;
            loop {
                let page = store.page("support", v.number, &select, after.as_ref(), size).await.unwrap();
                let json = store.page_json("support", v.number, &select, after.as_ref(), size).await.unwrap();
                assert_eq!(String::from_utf8(json.json).unwrap(), page.bodies.join(","), "{filter:?} {size}");
                assert_eq!((json.count, &json.next), (page.bodies.len(), &page.next), "{filter:?} {size}");
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
    }
}

/// `holding` finds which ids a version has, in any version, over more ids than one statement
/// carries, with ids of every kind, asked twice or not there at all.
pub async fn holding_names_the_ids_a_version_has(store: impl Store) {
    let odd = ["é", "e\u{301}", "z\0z", "🙂 1", "a'b\"c", ""];
    let mut cases: Vec<Case> = (0..2600).map(|i| case(&format!("c{i}"), &format!("q{i}"))).collect();
    cases.extend(odd.iter().filter(|id| !id.is_empty()).map(|id| case(id, "odd")));
    let v1 = created(&store, CommitMode::Replace, cases).await;
    let removed: Vec<String> = (0..2600).step_by(3).map(|i| format!("c{i}")).chain(["é".to_owned()]).collect();
    let v2 = created(&store, CommitMode::Remove(removed.clone()), Vec::new()).await;
    let mut asked: Vec<String> = (0..2700).map(|i| format!("c{i}")).collect();
    asked.extend(odd.iter().map(|id| (*id).to_owned()));
    asked.push("c5".into());
    for (version, gone) in [(v1.number, &Vec::new()), (v2.number, &removed)] {
        let held = store.holding("support", version, &asked).await.unwrap();
        let expected: std::collections::HashSet<String> = asked
            .iter()
            .filter(|id| {
                let stored = id.strip_prefix('c').and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n < 2600)
                    || (!id.is_empty() && odd.contains(&id.as_str()));
                stored && !gone.contains(id)
            })
            .cloned()
            .collect();
        let missing: Vec<_> = expected.difference(&held).collect();
        let extra: Vec<_> = held.difference(&expected).collect();
        assert!(missing.is_empty() && extra.is_empty(), "v{version}: missing {missing:?}, extra {extra:?}");
    }
    assert!(store.holding("support", v2.number, &[]).await.unwrap().is_empty());
    assert!(matches!(store.holding("nothing", 1, &asked).await, Err(StoreError::NoDataset(..))));
}

/// The message of a refusal.
fn refused<T: std::fmt::Debug>(result: Result<T, StoreError>) -> String {
    match result {
        Err(err) => err.to_string(),
        Ok(ok) => panic!("expected a refusal, got {ok:?}"),
    }
}

pub async fn new_names_and_tags_follow_the_rules(store: impl Store) {
    let named = |name: &str| CommitRequest { dataset: name.into(), ..request(CommitMode::Replace, "m") };
    let long = "n".repeat(3000);
    let cases = [
        ("..", "dataset name `..` is not allowed: `.` and `..` stand for folders in paths and URLs"),
        (".", "dataset name `.` is not allowed: `.` and `..` stand for folders in paths and URLs"),
        ("", "dataset name `` is not allowed: a name needs at least one character"),
        (
            "a/b",
            "dataset name `a/b` is not allowed: it holds `/`, which separates the parts of paths and URLs: use `-` or `_`",
        ),
        (
            "a@b",
            "dataset name `a@b` is not allowed: it holds `@`, which separates a dataset from its version (`NAME@v3`)",
        ),
        ("nul\0here", "dataset name `nul\\u{0000}here` is not allowed: it holds U+0000, a control character"),
        ("tab\there", "dataset name `tab\\u{0009}here` is not allowed: it holds U+0009, a control character"),
        (
            "admin\u{202E}txt.exe",
            "dataset name `admin\\u{202e}txt.exe` is not allowed: it holds U+202E, a bidirectional control, which changes how the text around it is shown",
        ),
        ("sup\u{200B}port", "dataset name `sup\\u{200b}port` is not allowed: it holds U+200B, an invisible character"),
        (" support", "dataset name ` support` is not allowed: it starts or ends with white space"),
    ];
    for (name, message) in cases {
        assert_eq!(refused(store.commit(named(name), batches(vec![case("a", "1")])).await), message, "{name:?}");
    }
    assert_eq!(
        refused(store.commit(named(&long), batches(vec![case("a", "1")])).await),
        format!(
            "dataset name `{}…` is not allowed: it is 3,000 bytes long, and names are at most 128 bytes (UTF-8)",
            "n".repeat(40)
        )
    );
    assert_eq!(store.datasets().await.unwrap(), []);
    // Looking them up finds nothing (PostgreSQL's text cannot even hold NUL).
    for name in ["nul\0here", long.as_str()] {
        assert!(matches!(store.versions(name).await, Err(StoreError::NoDataset(..))), "{name:?}");
        assert!(matches!(store.resolve(name, &Ref::Latest).await, Err(StoreError::NoDataset(..))), "{name:?}");
    }
    // Names that are allowed: any script, spaces inside, dots inside, the longest.
    for name in ["サポート", "support v2.1", "l".repeat(128).as_str()] {
        assert!(store.commit(named(name), batches(vec![case("a", "1")])).await.is_ok(), "{name}");
    }

    let v1 = created(&store, CommitMode::Replace, vec![case("a", "1")]).await;
    let tags = [
        ("v3", "tag `v3` is not allowed: `v3` always means version 3"),
        ("latest", "tag `latest` is not allowed: `latest` always means the newest version"),
        ("9", "tag `9` is not allowed: a number reads as a version: version 9 is written `v9`"),
        (
            "deadbeef",
            "tag `deadbeef` is not allowed: 8 or more hexadecimal digits read as a content id (or the start of one)",
        ),
        ("a@b", "tag `a@b` is not allowed: it holds `@`, which separates a dataset from its version (`NAME@v3`)"),
        ("..", "tag `..` is not allowed: `.` and `..` stand for folders in paths and URLs"),
        ("nul\0", "tag `nul\\u{0000}` is not allowed: it holds U+0000, a control character"),
    ];
    for (tag, message) in tags {
        assert_eq!(refused(store.tag("support", 1, tag, "tester", "now").await), message, "{tag:?}");
    }
    assert_eq!(
        refused(store.tag("support", 1, &v1.id, "tester", "now").await),
        format!(
            "tag `{}…` is not allowed: 8 or more hexadecimal digits read as a content id (or the start of one)",
            &v1.id[..40]
        )
    );
    assert_eq!(store.tags("support").await.unwrap(), []);
    assert_eq!(store.events("support").await.unwrap(), []);
    // Short hexadecimal words are tags: they are too short to be read as a prefix.
    store.tag("support", 1, "cafe", "tester", "now").await.unwrap();
    assert_eq!(store.resolve("support", &"cafe".parse().unwrap()).await.unwrap().number, 1);
}

pub async fn names_in_other_normal_forms_are_the_same_name(store: impl Store) {
    let composed = "caf\u{e9}";
    let decomposed = "cafe\u{301}";
    let named = |name: &str| CommitRequest { dataset: name.into(), ..request(CommitMode::Upsert, "m") };
    store.commit(named(decomposed), batches(vec![case("a", "1")])).await.unwrap();
    // Stored in NFC, found in either form; a commit in the other form is the same dataset's.
    let v2 = match store.commit(named(composed), batches(vec![case("b", "2")])).await.unwrap() {
        CommitOutcome::Created(v) => v,
        other => panic!("{other:?}"),
    };
    assert_eq!(v2.number, 2);
    let names: Vec<String> = store.datasets().await.unwrap().into_iter().map(|d| d.name).collect();
    assert_eq!(names, [composed]);
    assert_eq!(store.versions(decomposed).await.unwrap().len(), 2);
    assert_eq!(store.header(decomposed).await.unwrap(), store.header(composed).await.unwrap());

    store.tag(composed, 1, "pr\u{e9}", "tester", "now").await.unwrap();
    store.tag(decomposed, 2, "pre\u{301}", "tester", "now").await.unwrap();
    assert_eq!(store.tags(composed).await.unwrap(), [("pr\u{e9}".to_owned(), 2)]);
    assert_eq!(store.resolve(composed, &Ref::Name("pre\u{301}".into())).await.unwrap().number, 2);
    let events: Vec<String> = store.events(composed).await.unwrap().into_iter().map(|e| e.detail).collect();
    assert_eq!(events, ["pr\u{e9}: v1", "pr\u{e9}: v1 → v2"]);
}

pub async fn a_deleted_tag_names_nothing_and_is_logged(store: impl Store) {
    for n in 1..=2 {
        created(&store, CommitMode::Upsert, vec![case(&format!("c{n}"), "q")]).await;
    }
    store.tag("support", 1, "prod", "tester", "t1").await.unwrap();
    store.tag("support", 2, "pr\u{e9}", "tester", "t2").await.unwrap();
    // Found in another normal form, as the tag is.
    assert_eq!(store.untag("support", "pre\u{301}", "remover", "t3").await.unwrap(), 2);
    assert_eq!(store.tags("support").await.unwrap(), [("prod".to_owned(), 1)]);
    assert!(store.resolve("support", &Ref::Name("pr\u{e9}".into())).await.is_err());
    let events: Vec<(String, String)> =
        store.events("support").await.unwrap().into_iter().map(|e| (e.author, e.detail)).collect();
    assert_eq!(events.last().unwrap(), &("remover".to_owned(), "pr\u{e9}: v2 → deleted".to_owned()));
    // A tag it does not have (any more) is refused, naming the tags it has; nothing is logged.
    assert_eq!(
        refused(store.untag("support", "pr\u{e9}", "remover", "t4").await),
        "dataset `support` has no version `pr\u{e9}` (its tags: prod)"
    );
    let logged = store.events("support").await.unwrap().len();
    assert_eq!(store.untag("support", "prod", "remover", "t5").await.unwrap(), 1);
    assert_eq!(
        refused(store.untag("support", "prod", "remover", "t6").await),
        "dataset `support` has no version `prod` (it has no tags)"
    );
    assert_eq!(store.events("support").await.unwrap().len(), logged + 1);
    assert!(matches!(store.untag("nosuch", "prod", "remover", "t7").await, Err(StoreError::NoDataset(..))));
}

pub async fn references_are_numbers_and_ids_before_tags(store: impl Store) {
    for n in 1..=3 {
        created(&store, CommitMode::Upsert, vec![case(&format!("c{n}"), "q")]).await;
    }
    let versions = store.versions("support").await.unwrap();
    let resolve = |text: &str| {
        let reference: Ref = text.parse().unwrap();
        let store = &store;
        async move { store.resolve("support", &reference).await }
    };
    // A number alone is not a version, nor a short prefix, even when an id starts with it.
    assert_eq!(
        refused(resolve("3").await),
        "dataset `support` has no version `3`; did you mean `v3`? (a number alone is not a version, and a content-id prefix needs at least 8 hexadecimal digits)"
    );
    assert_eq!(
        refused(resolve("9").await),
        "dataset `support` has no version `9`; a version is written `v9`, and its versions are v1 to v3 (a content-id prefix needs at least 8 hexadecimal digits)"
    );
    let v3 = &versions[2];
    let first = &v3.id[..1];
    let mut starting: Vec<String> = versions
        .iter()
        .filter(|v| v.id.starts_with(first))
        .map(|v| format!("v{} ({})", v.number, &v.id[..12]))
        .collect();
    starting.truncate(5);
    if first.bytes().all(|b| b.is_ascii_digit()) {
        assert!(refused(resolve(first).await).contains("a content-id prefix needs at least 8 hexadecimal digits"));
    } else {
        assert_eq!(
            refused(resolve(first).await),
            format!(
                "dataset `support` has no version `{first}`; a content-id prefix needs at least 8 hexadecimal digits (versions whose id starts with `{first}`: {})",
                starting.join(", ")
            )
        );
    }
    assert_eq!(resolve(&v3.id[..8]).await.unwrap().number, 3);
    assert_eq!(resolve(&v3.id[..8].to_ascii_uppercase()).await.unwrap().number, 3);
    assert_eq!(resolve(&v3.id).await.unwrap().number, 3);
    assert_eq!(
        refused(resolve("0123456789abcdef").await),
        "dataset `support` has no version `0123456789abcdef`; no version's content id starts with it"
    );
    assert_eq!(refused(resolve("v7").await), "dataset `support` has no version `v7`; its versions are v1 to v3");
}

/// Makes what [`legacy_names_stay_usable`] reads; returns the SQL (the same for either backend)
/// that then gives it the names an older casebook allowed: datasets `a/b` and `..`, and on
/// `support` a tag spelled as v1's content id that names v2, a tag `9` and one in NFD.
pub async fn legacy_names_setup(store: &impl Store) -> Vec<String> {
    let v1 = created(store, CommitMode::Replace, vec![case("a", "1")]).await;
    created(store, CommitMode::Upsert, vec![case("b", "2")]).await;
    for name in ["legacy", "dots"] {
        let request = CommitRequest { dataset: name.into(), ..request(CommitMode::Replace, "m") };
        store.commit(request, batches(vec![case("x", name)])).await.unwrap();
    }
    let tag = |name: &str, version: u64| {
        format!(
            "INSERT INTO tags (dataset, name, version) SELECT id, '{name}', {version} FROM datasets WHERE name = 'support'"
        )
    };
    vec![
        "UPDATE datasets SET name = 'a/b' WHERE name = 'legacy'".into(),
        "UPDATE datasets SET name = '..' WHERE name = 'dots'".into(),
        tag(&v1.id, 2),
        tag("9", 1),
        tag("pre\u{301}", 1),
    ]
}

/// A store whose names an older casebook made, now refused for new ones, reads, lists, takes
/// commits and removals as before; a content id means its version even beside a tag of that text.
pub async fn legacy_names_stay_usable(store: impl Store) {
    let names: Vec<String> = store.datasets().await.unwrap().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["..", "a/b", "support"]);
    for name in ["..", "a/b"] {
        assert_eq!(store.resolve(name, &Ref::Latest).await.unwrap().number, 1);
        let upsert = CommitRequest { dataset: name.into(), ..request(CommitMode::Upsert, "m") };
        store.commit(upsert, batches(vec![case("y", "more")])).await.unwrap();
        let remove = CommitRequest { dataset: name.into(), ..request(CommitMode::Remove(vec!["x".into()]), "m") };
        let v3 = match store.commit(remove, batches(Vec::new())).await.unwrap() {
            CommitOutcome::Created(v) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!((v3.number, v3.cases), (3, 1), "{name}");
        let mut ids = Vec::new();
        store
            .cases(name, 3, &Select::all(), 10, &mut |b| {
                ids.extend(b.into_iter().map(|c| c.id));
                true
            })
            .await
            .unwrap();
        assert_eq!(ids, ["y"]);
    }
    let versions = store.versions("support").await.unwrap();
    // The tag spelled as v1's id names v2: the id wins.
    assert_eq!(store.resolve("support", &versions[0].id.parse().unwrap()).await.unwrap().number, 1);
    assert_eq!(store.resolve("support", &versions[0].id[..8].parse().unwrap()).await.unwrap().number, 1);
    // An old tag `9` still names its version.
    assert_eq!(store.resolve("support", &"9".parse().unwrap()).await.unwrap().number, 1);
    // The tag stored in NFD is found in NFC, and moved (not doubled) by a tag in NFC.
    assert_eq!(store.resolve("support", &"pr\u{e9}".parse().unwrap()).await.unwrap().number, 1);
    store.tag("support", 2, "pr\u{e9}", "tester", "now").await.unwrap();
    let tags = store.tags("support").await.unwrap();
    assert!(tags.contains(&("pr\u{e9}".to_owned(), 2)), "{tags:?}");
    assert!(!tags.iter().any(|(t, _)| t == "pre\u{301}"), "{tags:?}");
    assert_eq!(tags.len(), 3, "{tags:?}");
}

/// The content id of a case as a run records it (`case_content_id`: lowercase hex).
fn content_hex(case: &Case) -> String {
    casebook_store::prepare(case).unwrap().content_id.iter().map(|b| format!("{b:02x}")).collect()
}

/// A request to purge `cases` of `support`.
pub fn purge_request(cases: &[&str]) -> casebook_store::PurgeRequest {
    casebook_store::PurgeRequest {
        dataset: "support".into(),
        cases: cases.iter().map(|c| (*c).to_owned()).collect(),
        author: "dpo".into(),
        time: "2026-11-29T12:00:00Z".into(),
        reason: "erasure request #12".into(),
        full: true,
    }
}

/// A case purged from three versions (two contents of it): every version id still verifies,
/// old versions read without it and say which purge took it, its run results and outputs are
/// gone, and later commits (one adding the id again) build on the purged history.
pub async fn a_purge_erases_a_case_and_every_version_still_verifies(store: AnyStore) {
    let (a1, a2) = (case("a", "secret-a-one"), case("a", "secret-a-two"));
    created(&store, CommitMode::Replace, vec![a1.clone(), case("b", "2")]).await;
    created(&store, CommitMode::Upsert, vec![a2.clone(), case("c", "3")]).await;
    created(&store, CommitMode::Upsert, vec![case("d", "4")]).await;
    let before = store.versions("support").await.unwrap();
    // A run of the dataset on a's second content and on b.
    store.begin_run("r-1", "smoke", "2026-11-29T10:00:00Z", r#"{"dataset":"support"}"#).await.unwrap();
    let result =
        |c: &Case| format!(r#"{{"case_id":"{}","case_content_id":"{}","hash":"{}"}}"#, c.id, content_hex(c), H1);
    let rows = [
        casebook_store::ResultRow { seq: 0, result: result(&a2), output: Some((H1.into(), "\"secret-out\"".into())) },
        casebook_store::ResultRow { seq: 1, result: r#"{"case_id":"b","case_content_id":"00"}"#.into(), output: None },
    ];
    store.save_results("r-1", &rows).await.unwrap();

    let done = store.purge(&purge_request(&["a"])).await.unwrap();
    assert_eq!((done.purge.versions, done.purge.results, done.bodies), (3, 1, 2), "{done:?}");
    assert!(done.kept_shared.is_empty());

    let report = store.check().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.versions, 3);
    assert_eq!(store.versions("support").await.unwrap(), before, "version ids and counts never change");
    for (version, want) in [(1, vec!["b"]), (2, vec!["b", "c"]), (3, vec!["b", "c", "d"])] {
        assert_eq!(ids(&store, version).await, want, "v{version}");
        let purged = store.purged_in("support", version).await.unwrap();
        assert_eq!(purged.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["a"]);
        let warning = casebook_store::purged_warning("support", version, &purged).unwrap();
        assert!(warning.contains("purge #1 on 2026-11-29T12:00:00Z by dpo (erasure request #12)"), "{warning}");
    }
    assert_eq!(store.case("support", 2, "a").await.unwrap(), None);
    assert!(store.history("support", "a").await.unwrap().is_empty());
    let event = store.events("support").await.unwrap().pop().unwrap();
    assert_eq!((event.kind.as_str(), event.author.as_str()), ("purge", "dpo"));
    assert!(event.detail.contains("`a`") && event.detail.contains("erasure request #12"), "{}", event.detail);
    assert!(!event.detail.contains("secret"), "{}", event.detail);
    let results = store.run_results("r-1").await.unwrap();
    assert_eq!(results.len(), 1);
    assert!(results[0].contains(r#""case_id":"b""#));
    assert_eq!(store.outputs(&[H1.into()]).await.unwrap(), [None]);
    assert_eq!(store.datasets().await.unwrap()[0].cases, 3);
    // A run that was going when the purge came saves its result of `a` afterwards: not kept.
    let late = casebook_store::ResultRow { seq: 2, result: result(&a2), output: Some((H2.into(), "\"late\"".into())) };
    store.save_results("r-1", &[late]).await.unwrap();
    assert_eq!(store.run_results("r-1").await.unwrap(), results);
    assert_eq!(store.outputs(&[H2.into()]).await.unwrap(), [None]);

    // Later commits build on the purged history; one adds `a` again with new content.
    created(&store, CommitMode::Upsert, vec![case("e", "5")]).await;
    let v5 = created(&store, CommitMode::Upsert, vec![case("a", "a again")]).await;
    assert_eq!(ids(&store, 5).await, ["b", "c", "d", "e", "a"]);
    assert!(store.purged_in("support", 4).await.unwrap().is_empty());
    assert_eq!(store.case("support", 5, "a").await.unwrap().unwrap().task, case("a", "a again").task);
    let report = store.check().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!((report.versions, v5.number), (5, 5));

    // Ids never held are refused by name, and nothing is written.
    let err = store.purge(&purge_request(&["a", "zz"])).await.unwrap_err();
    assert_eq!(err.to_string(), "support v5 has no case `zz` in any version: nothing was written");
    assert_eq!(store.purges("support").await.unwrap().len(), 1);
    // A purge a second time takes the new content; a purged id is said to be purged.
    store.purge(&purge_request(&["a"])).await.unwrap();
    let err = store.purge(&purge_request(&["a"])).await.unwrap_err();
    assert!(err.to_string().contains("it was purged already"), "{err}");
    assert_eq!(store.purges("support").await.unwrap()[1].cases, ["a"]);
    let report = store.check().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Keys of the `admin` scope may purge; read and write keys may not.
pub async fn purging_needs_an_admin_key(store: AnyStore) {
    use casebook_store::{KeyMaterial, Scope};
    let material = |n: u8| KeyMaterial { id: [n; 6], secret: [n; 32], store_secret: [7; 32] };
    let time = "2026-11-29T08:00:00Z";
    for (n, scope) in [(1, Scope::Read), (2, Scope::Write), (3, Scope::Admin)] {
        let key = store.create_key("default", scope, "", "ana", time, &material(n)).await.unwrap();
        let access = store.authenticate(&key.token).await.unwrap().unwrap();
        assert_eq!(access.scope, scope);
        assert_eq!(access.scope.may_purge(), scope == Scope::Admin);
        assert_eq!(access.scope.may_write(), scope != Scope::Read);
    }
    assert_eq!(store.keys(None).await.unwrap()[2].scope.as_str(), "admin");
}

/// Two versions of a case whose every part holds `marker`: its input (short, and long enough
/// for SQLite's overflow pages and PostgreSQL's TOAST, in text that does not compress away), a
/// label (`case_labels`) and its metadata (`blob_facets`); with a case `b` that stays.
pub fn marked_cases(marker: &str) -> [Vec<Case>; 2] {
    let mut noise = 0x9e37_79b9_7f4a_7c15u64;
    let long: String = (0..4000)
        .map(|i| {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            if i % 200 == 0 { format!(" {marker} ") } else { format!("{:x}", noise & 0xf) }
        })
        .collect();
    let marked = |input: &str| {
        let mut c = case("p", input);
        c.labels = Some(vec![format!("label-{marker}")]);
        c.metadata = Some(serde_json::from_value(json!({"note": format!("note {marker}")})).unwrap());
        c
    };
    [vec![marked(&format!("short {marker}")), case("b", "stays")], vec![marked(&long)]]
}

/// The files under `paths` (folders walked) that hold `marker`.
pub fn files_holding(paths: &[std::path::PathBuf], marker: &str) -> Vec<std::path::PathBuf> {
    let finder = marker.as_bytes();
    let mut found = Vec::new();
    let mut todo: Vec<std::path::PathBuf> = paths.to_vec();
    while let Some(path) = todo.pop() {
        if path.is_dir() {
            todo.extend(fs_err::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = fs_err::read(&path) {
            if bytes.windows(finder.len()).any(|w| w == finder) {
                found.push(path);
            }
        }
    }
    found
}

/// A purge of `a` racing a commit that gives `a` new content: the two queue on the dataset,
/// so either the commit lands first and its content is purged too (`a` is not in the head,
/// which held it: the head says it was purged), or it lands after and keeps its new content.
/// Every version verifies either way.
pub async fn a_purge_racing_a_commit_of_the_case_takes_it_or_leaves_the_new_content(store: AnyStore) {
    created(&store, CommitMode::Replace, vec![case("a", "secret"), case("b", "2")]).await;
    let (mut purged_after, mut kept_after) = (0, 0);
    for round in 0..6 {
        if round > 0 {
            // `a` back in the head, so the purge has something to take whichever lands first.
            created(&store, CommitMode::Upsert, vec![case("a", &format!("back {round}"))]).await;
        }
        let fresh = case("a", &format!("new {round}"));
        let purge = purge_request(&["a"]);
        let (committed, purged) =
            tokio::join!(commit(&store, CommitMode::Upsert, vec![fresh.clone()]), store.purge(&purge));
        committed.unwrap();
        purged.unwrap();
        let head = store.versions("support").await.unwrap().pop().unwrap();
        match store.case("support", head.number, "a").await.unwrap() {
            Some(held) => {
                assert_eq!(held.task, fresh.task, "round {round}");
                kept_after += 1;
            }
            None => {
                let purged = store.purged_in("support", head.number).await.unwrap();
                assert!(purged.iter().any(|p| p.id == "a"), "round {round}: {purged:?}");
                purged_after += 1;
            }
        }
        let report = store.check().await.unwrap();
        assert!(report.problems.is_empty(), "round {round}: {:?}", report.problems);
    }
    assert_eq!(purged_after + kept_after, 6);
}

/// A version sorted by a field: numbers, then strings (by bytes), then booleans, then null, then
/// lists and objects, the missing last in both directions; ties by id; walked forwards and
/// backwards by keyset cursors, with a filter, from a case's key, and by id.
pub async fn sorted_pages_walk_by_value_both_ways_with_missing_last(store: impl Store) {
    use casebook_store::{Sort, SortSeek};
    let with = |id: &str, difficulty: Option<serde_json::Value>| {
        let mut case = case(id, &format!("question {id}"));
        case.metadata = difficulty.map(|d| serde_json::from_value(json!({"difficulty": d})).unwrap());
        case
    };
    let cases = vec![
        with("a", Some(json!(3))),
        with("b", Some(json!("hard"))),
        with("c", None),
        with("d", Some(json!(1.5))),
        with("e", Some(json!(true))),
        with("f", Some(json!("easy"))),
        with("g", Some(json!(null))),
        with("h", Some(json!(3))),
        with("i", Some(json!({"level": 2}))),
        with("j", Some(json!(-10))),
        with("k", Some(json!(false))),
        with("l", None),
        with("m", Some(json!("Hard"))),
    ];
    created(&store, CommitMode::Replace, cases).await;
    let page_ids = |bodies: &[String]| -> Vec<String> {
        bodies.iter().map(|b| serde_json::from_str::<Case>(b).unwrap().id).collect()
    };
    // Every page forwards, then every page backwards from the last.
    let walk = |sort: Sort, select: Select, size: usize| {
        let store = &store;
        async move {
            let mut forwards = Vec::new();
            let mut seek: Option<SortSeek> = None;
            let last = loop {
                let page = store.page_sorted("support", 1, &select, &sort, seek.as_ref(), size).await.unwrap();
                assert!(!page.bodies.is_empty() && page.bodies.len() <= size);
                assert_eq!(page.previous.is_some(), seek.is_some(), "a page after another has one before it");
                forwards.extend(page_ids(&page.bodies));
                match page.next.clone() {
                    Some(key) => seek = Some(SortSeek { key, backward: false }),
                    None => break page,
                }
            };
            let mut backwards = page_ids(&last.bodies);
            let mut previous = last.previous;
            while let Some(key) = previous {
                let page = store
                    .page_sorted("support", 1, &select, &sort, Some(&SortSeek { key, backward: true }), size)
                    .await;
                let page = page.unwrap();
                assert!(page.next.is_some(), "a page read backwards has cases after it");
                let mut ids = page_ids(&page.bodies);
                ids.extend(backwards);
                backwards = ids;
                previous = page.previous;
            }
            assert_eq!(forwards, backwards, "{sort:?}");
            forwards
        }
    };
    let by = |text: &str| Sort::parse(text).unwrap().unwrap();
    let up = ["j", "d", "a", "h", "m", "f", "b", "k", "e", "g", "i", "c", "l"];
    assert_eq!(walk(by("metadata.difficulty"), Select::all(), 2).await, up);
    assert_eq!(walk(by("metadata.difficulty"), Select::all(), 13).await, up);
    // Descending: the values' order reversed (ties by id reversed too), the missing still last.
    let down = ["i", "g", "e", "k", "b", "f", "m", "h", "a", "d", "j", "l", "c"];
    assert_eq!(walk(by("-metadata.difficulty"), Select::all(), 3).await, down);
    // With a filter.
    let odd = casebook_filter::Filter::parse(r#"id in ["a", "b", "c", "d", "e", "j"]"#).unwrap();
    let filtered = Select { filter: Some(odd), limit: None };
    assert_eq!(walk(by("metadata.difficulty"), filtered, 2).await, ["j", "d", "a", "b", "e", "c"]);
    // By id, both ways; by a field of the body.
    let mut all: Vec<String> = up.iter().map(|s| (*s).to_owned()).collect();
    all.sort();
    assert_eq!(walk(by("id"), Select::all(), 4).await, all);
    all.reverse();
    assert_eq!(walk(by("-id"), Select::all(), 5).await, all);
    assert_eq!(walk(by("-input"), Select::all(), 6).await, all, "`question m` … `question a`");
    // From one case's key: the cases after it, and the one before it.
    let sort = by("metadata.difficulty");
    let key = store.sort_key("support", 1, &sort, "h").await.unwrap().unwrap();
    let after = SortSeek { key: key.clone(), backward: false };
    let page = store.page_sorted("support", 1, &Select::all(), &sort, Some(&after), 2).await.unwrap();
    assert_eq!(page_ids(&page.bodies), ["m", "f"]);
    let before = SortSeek { key, backward: true };
    let page = store.page_sorted("support", 1, &Select::all(), &sort, Some(&before), 1).await.unwrap();
    assert_eq!(page_ids(&page.bodies), ["a"]);
    assert_eq!(store.sort_key("support", 1, &sort, "zz").await.unwrap(), None);
}

/// Filters that require a review state (the review queue's, "next unreviewed", the API's
/// `where=review == "draft"`), which the stores answer through an index of the review state when
/// few bodies are in it: the same cases, in the same order, pages (both ways, and joined) and
/// counts as in memory. A case's old body keeps its state but is not in the later version; one
/// input holds a NUL (PostgreSQL tests that case in memory); the drafts are few and at the end,
/// as `casebook review --state draft` leaves them on an imported dataset.
pub async fn review_filters_select_what_they_select_in_memory(store: impl Store) {
    use casebook_model::Review;
    let first: Vec<Case> = (0..60)
        .map(|i| {
            let input = if i == 57 { format!("q{i}\u{0}") } else { format!("q{i}") };
            let mut c = case(&format!("c{i:02}"), &input);
            c.review = match i {
                _ if i >= 52 => Some(Review::Draft),
                _ if i % 10 == 3 => Some(Review::Reviewed),
                _ if i % 10 == 4 => Some(Review::Rejected),
                _ => None,
            };
            c.metadata = Some(json!({"difficulty": (["easy", "hard"][i % 2])}).as_object().unwrap().clone());
            c
        })
        .collect();
    created(&store, CommitMode::Replace, first.clone()).await;
    // v2: two drafts reviewed, one removed, one case made a draft.
    let mut second = first.clone();
    second[52].review = Some(Review::Reviewed);
    second[53].review = Some(Review::Reviewed);
    second[10].review = Some(Review::Draft);
    second.retain(|c| c.id != "c55");
    created(&store, CommitMode::Replace, second.clone()).await;
    for (version, cases) in [(1, &first), (2, &second)] {
        for source in [
            r#"review == "draft""#,
            r#"review in ["draft", "rejected"]"#,
            r#"review == "draft" and metadata.difficulty == "hard""#,
            r#"metadata.difficulty == "easy" and review == "reviewed""#,
            r#"review == "draft" and input matches "7""#,
            r#"review == "draft" and input contains "\u0000""#,
            r#"review == "draft" or review == "rejected""#,
            r#"not exists(review)"#,
        ] {
            let filter = casebook_filter::Filter::parse(source).unwrap();
            let want: Vec<String> = cases.iter().filter(|c| filter.matches(c)).map(|c| c.id.clone()).collect();
            let all = Select { filter: Some(filter.clone()), limit: None };
            assert_eq!(selected(&store, version, &all, 3).await.unwrap(), want, "v{version} {source}");
            assert_eq!(store.count("support", version, &all).await.unwrap(), want.len() as u64, "v{version} {source}");
            let limited = Select { filter: Some(filter.clone()), limit: Some(2) };
            assert_eq!(selected(&store, version, &limited, 3).await.unwrap(), want[..want.len().min(2)]);
            assert_eq!(store.count("support", version, &limited).await.unwrap(), want.len().min(2) as u64);
            // Pages of 2 forwards, as bodies and joined, then backwards from the last.
            let (mut pages, mut after) = (Vec::new(), None);
            loop {
                let page = store.page("support", version, &all, after.as_ref(), 2).await.unwrap();
                let json = store.page_json("support", version, &all, after.as_ref(), 2).await.unwrap();
                assert_eq!(json.next, page.next, "v{version} {source}");
                assert_eq!(String::from_utf8(json.json).unwrap(), page.bodies.join(","), "v{version} {source}");
                pages.push(page.bodies.iter().map(|b| serde_json::from_str::<Case>(b).unwrap().id).collect::<Vec<_>>());
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            assert_eq!(pages.concat(), want, "v{version} {source}");
            if let Some(last) = after {
                let before = store.page_before("support", version, &all, &last, 2).await.unwrap();
                let ids: Vec<String> =
                    before.bodies.iter().map(|b| serde_json::from_str::<Case>(b).unwrap().id).collect();
                let at = want.iter().position(|id| *id == last.id).unwrap();
                assert_eq!(ids, want[at.saturating_sub(2)..at], "v{version} {source}");
            }
        }
    }
}

/// A count by a path made in the database (the console's group-by) gives the groups and counts
/// that counting the cases in memory gives: a missing field, `null`, integers and reals (`1`
/// and `1.0` apart, as memory tells them), strings with non-ASCII letters, lists and objects,
/// `label.KEY` with several values in a case and none, an input with a NUL (read in memory by
/// PostgreSQL); under no filter, a label filter, a metadata filter, a review filter, and a
/// `matches` filter (which a backend may leave to the caller: `None`).
pub async fn group_counts_count_what_memory_counts(store: impl Store) {
    use casebook_model::Review;
    let values = [
        json!(null),
        json!(1),
        json!(1.0),
        json!(2.5),
        json!(-12345678901234_i64),
        json!("é"),
        json!("日本"),
        json!("1"),
        json!([1, "a"]),
        json!({"b": 1, "a": [true]}),
        json!(true),
    ];
    let cases: Vec<Case> = (0..40)
        .map(|i| {
            let input = if i == 13 { format!("q{i}\u{0}") } else { format!("q{i}") };
            let mut c = case(&format!("g{i:02}"), &input);
            if i % 12 != 11 {
                c.metadata = Some(json!({"x": values[i % values.len()].clone()}).as_object().unwrap().clone());
            }
            c.labels = Some(match i % 4 {
                0 => vec!["kind:a".into(), "math".into()],
                1 => vec!["kind:b".into(), "kind:é:c".into()],
                2 => vec!["kinder".into(), "kind:".into()],
                _ => vec!["math".into()],
            });
            c.review = (i % 5 == 0).then_some(Review::Draft);
            c
        })
        .collect();
    created(&store, CommitMode::Replace, cases.clone()).await;
    for filter in [
        None,
        Some(r#"labels contains "math""#),
        Some(r#"metadata.x != 1"#),
        Some(r#"review == "draft""#),
        Some(r#"input matches "1""#),
    ] {
        let filter = filter.map(|f| casebook_filter::Filter::parse(f).unwrap());
        for path in ["metadata.x", "label.kind", "review", "input", "expected.output", "metadata", "name"] {
            let path = casebook_filter::FieldPath::parse(path).unwrap();
            let mut groups = casebook_filter::Groups::new(path.clone());
            for c in cases.iter().filter(|c| filter.as_ref().is_none_or(|f| f.matches(c))) {
                groups.add(c);
            }
            let want = groups.sorted();
            let select = Select { filter: filter.clone(), limit: Some(3) };
            match store.group_counts("support", 1, &select, &path).await.unwrap() {
                Some(got) => assert_eq!(got, want, "{path} under {filter:?}"),
                None => assert!(filter.as_ref().is_some_and(|f| f.to_string().contains("matches")), "{path}"),
            }
        }
    }
}
