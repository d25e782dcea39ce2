//! One way to name an author: versions made from the console (case page review, queue, bulk),
//! through the API, and kept by older servers as `key:ID` are all shown as `key ID` (or
//! `NAME (key ID)`) on the case page's history, the dataset's log, the API's log and the run
//! page of a run of that version.
#![allow(clippy::unwrap_used)]

use casebook_runner::summary::RunMeta;
use casebook_store::{CommitMode, CommitOutcome, CommitRequest, Ref, Store};

use crate::console::cookie;
use crate::harness::{Backend, Server, case};

crate::on_both!(an_author_reads_the_same_on_the_case_page_the_log_and_the_run_page);

async fn an_author_reads_the_same_on_the_case_page_the_log_and_the_run_page(backend: Backend) {
    let server = Server::start(backend).await;
    let store = server.store.in_project("team-a");
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let writer = cookie(&server, &server.keys.a_write).await;
    let get = async |path: &str| {
        let response = client.get(format!("{}{path}", server.url)).header("cookie", &writer).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.text().await.unwrap()
    };
    let post = async |path: &str, fields: &[(&str, &str)]| {
        let response =
            client.post(format!("{}{path}", server.url)).header("cookie", &writer).form(fields).send().await.unwrap();
        assert_eq!(response.status(), 303, "{path}: {}", response.text().await.unwrap());
    };
    let dataset = "/projects/team-a/datasets/support";
    let page = get(&format!("{dataset}/versions/v3/cases/c2")).await;
    let csrf = page.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();

    // v4 from the case page's review form, v5 from the queue, v6 from a bulk action.
    post(&format!("{dataset}/versions/v3/cases/c2/review"), &[("csrf", &csrf), ("state", "reviewed")]).await;
    post(&format!("{dataset}/queue"), &[("csrf", &csrf), ("case", "c1"), ("base", "v4"), ("state", "rejected")]).await;
    post(
        &format!("{dataset}/versions/v5/bulk"),
        &[("csrf", &csrf), ("base", "5"), ("action", "label"), ("label", "billing"), ("id", "c3")],
    )
    .await;
    let mut authors = Vec::new();
    for n in 4..=6 {
        authors.push(store.resolve("support", &Ref::Number(n)).await.unwrap().author);
    }
    let author = authors[0].clone();
    assert!(author.starts_with("key ") && !author.contains(':'), "{author}");
    assert_eq!(authors, vec![author.clone(); 3], "each way of writing from the console names the author alike");

    // A version an older server kept with `key:ID`.
    let legacy = author.replacen("key ", "key:", 1);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(Ok(vec![casebook_store::prepare(&case("c5", "five")).unwrap()])).await.unwrap();
    drop(tx);
    let request = CommitRequest {
        dataset: "support".into(),
        header: None,
        mode: CommitMode::Upsert,
        parent: Some(6),
        author: legacy,
        time: "2026-11-24T10:00:00Z".into(),
        message: "kept by an older server".into(),
    };
    let CommitOutcome::Created(v7) = store.commit(request, rx).await.unwrap() else { panic!("no version made") };
    assert_eq!(v7.number, 7);

    // The case page's history names each version's author in the one form.
    let shown = format!("by <span class=\"author\">{author}</span>");
    let page = get(&format!("{dataset}/versions/v7/cases/c2")).await;
    assert!(page.contains(&shown), "{page}");
    let page = get(&format!("{dataset}/versions/v7/cases/c5")).await;
    assert!(page.contains(&shown), "the version kept as `key:ID` too: {page}");
    assert!(!page.contains("key:"), "{page}");

    // The dataset's log, in the console and the API.
    let page = get(dataset).await;
    assert_eq!(page.matches(&format!("<td>{author}</td>")).count(), 4, "{page}");
    assert!(!page.contains("key:"), "{page}");
    let log: serde_json::Value = client
        .get(format!("{}/api/v1/projects/team-a/datasets/support/versions", server.url))
        .bearer_auth(&server.keys.a_read)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let logged: Vec<&str> = log["versions"].as_array().unwrap().iter().map(|v| v["author"].as_str().unwrap()).collect();
    assert_eq!(logged[3..], [author.as_str(); 4], "{log}");

    // The run page of a run of v7, kept as `casebook run` keeps it (`support@v7`).
    let meta = RunMeta {
        run_id: "r-authors".into(),
        experiment: "support-bot".into(),
        dataset: "support@v7".into(),
        dataset_version_id: v7.id.clone(),
        started: "2026-11-24T11:00:00Z".into(),
        n_runs: 1,
        scenarios: vec!["default".into()],
        ..RunMeta::default()
    };
    store.begin_run("r-authors", "support-bot", &meta.started, &serde_json::to_string(&meta).unwrap()).await.unwrap();
    let page = get("/projects/team-a/runs/r-authors").await;
    assert!(page.contains(&format!("<span class=\"author\" id=\"dataset-author\">{author}</span>")), "{page}");
    server.stop().await;
}
