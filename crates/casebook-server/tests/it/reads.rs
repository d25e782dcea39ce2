//! Reading through the API: pages over a fixed version, filters with located errors, one case,
//! history, diff, tags, runs, and the request id in every error.

use casebook_store::CommitMode;

use crate::harness::{Backend, Server, case, commit};

const A: &str = "/api/v1/projects/team-a/datasets/support";

/// Walks a version page by page from `start` (a path with query); the case ids of each page.
async fn walk(server: &Server, start: &str) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("{start}&cursor={c}"),
            None => start.to_owned(),
        };
        let (status, page) = server.get(&server.keys.a_read, &path).await;
        assert_eq!(status, 200, "{path}: {page}");
        pages.push(page["cases"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return pages,
        }
    }
}

async fn pages_stay_on_their_version_while_others_are_committed(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    let many: Vec<_> = (0..25).map(|i| case(&format!("m{i:02}"), &format!("question {i}"))).collect();
    let v4 = commit(&a, "support", CommitMode::Upsert, many).await;
    let all = walk(&server, &format!("{A}/versions/v{}/cases?limit=7", v4.number)).await;
    assert_eq!(all.iter().map(Vec::len).collect::<Vec<_>>(), [7, 7, 7, 7, 1]);
    assert_eq!(all.concat().len(), 29);
    // Start a walk on `latest`, commit a new head halfway, and go on: the walk stays on v4.
    let (_, first) = server.get(&server.keys.a_read, &format!("{A}/versions/latest/cases?limit=10")).await;
    assert_eq!(first["version"], v4.number);
    commit(&a, "support", CommitMode::Replace, vec![case("only", "one left")]).await;
    let next = first["next_cursor"].as_str().unwrap();
    let (_, second) =
        server.get(&server.keys.a_read, &format!("{A}/versions/latest/cases?limit=10&cursor={next}")).await;
    assert_eq!(second["version"], v4.number);
    let ids: Vec<&str> = second["cases"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, all.concat()[10..20].iter().map(String::as_str).collect::<Vec<_>>());
    // A cursor cannot move a walk onto another version, and a made-up one is refused.
    let (status, body) = server.get(&server.keys.a_read, &format!("{A}/versions/v1/cases?cursor={next}")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad-request")), "{body}");
    let (status, _) = server.get(&server.keys.a_read, &format!("{A}/versions/v4/cases?cursor=garbage")).await;
    assert_eq!(status, 400);
    let (status, _) = server.get(&server.keys.a_read, &format!("{A}/versions/v4/cases?limit=0")).await;
    assert_eq!(status, 400);
    // The bodies are the cases as stored.
    let (_, one) = server.get(&server.keys.a_read, &format!("{A}/versions/v1/cases?limit=1")).await;
    assert_eq!(one["cases"][0], serde_json::to_value(case("c1", "one")).unwrap());
    server.stop().await;
}

async fn filters_select_and_their_errors_are_located(backend: Backend) {
    let server = Server::start(backend).await;
    let filter = "input == \"two, again\" or id == \"c4\"";
    let encoded: String = filter.bytes().map(|b| format!("%{b:02X}")).collect();
    let pages = walk(&server, &format!("{A}/versions/v3/cases?limit=1&where={encoded}")).await;
    assert_eq!(pages.concat(), ["c2", "c4"]);
    let (_, count) = server.get(&server.keys.a_read, &format!("{A}/versions/v3/count?where={encoded}")).await;
    assert_eq!(count, serde_json::json!({"version": 3, "count": 2}));
    let (status, body) =
        server.get(&server.keys.a_read, &format!("{A}/versions/v3/cases?where=id%20%3D%20%22c1%22")).await;
    assert_eq!(status, 400, "{body}");
    let error = &body["error"];
    assert_eq!(error["code"], "invalid-filter");
    assert_eq!(
        (error["diagnostics"][0]["line"].as_u64(), error["diagnostics"][0]["column"].as_u64()),
        (Some(1), Some(4))
    );
    assert_eq!(error["diagnostics"][0]["hint"], "did you mean `==`?");
    assert!(!error["request_id"].as_str().unwrap().is_empty());
    server.stop().await;
}

async fn versions_cases_history_diff_tags_and_runs(backend: Backend) {
    let server = Server::start(backend).await;
    let read = &server.keys.a_read;
    let (_, log) = server.get(read, &format!("{A}/versions")).await;
    let numbers: Vec<u64> = log["versions"].as_array().unwrap().iter().map(|v| v["number"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [1, 2, 3]);
    let (_, prod) = server.get(read, &format!("{A}/versions/prod")).await;
    assert_eq!(prod["number"], 2);
    let prefix = &log["versions"][0]["id"].as_str().unwrap()[..10];
    let (_, by_id) = server.get(read, &format!("{A}/versions/{prefix}")).await;
    assert_eq!(by_id["number"], 1);
    let (status, missing) = server.get(read, &format!("{A}/versions/v9")).await;
    assert_eq!(status, 404);
    assert_eq!(missing["error"]["message"], "dataset `support` has no version `v9`; its versions are v1 to v3");
    let (_, c2) = server.get(read, &format!("{A}/versions/v1/cases/c2")).await;
    assert_eq!(c2["input"], "two");
    let (status, _) = server.get(read, &format!("{A}/versions/v1/cases/c4")).await;
    assert_eq!(status, 404);
    let (_, history) = server.get(read, &format!("{A}/cases/c2/history")).await;
    let spans: Vec<(u64, Option<u64>)> = history["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["from_version"].as_u64().unwrap(), r["to_version"].as_u64()))
        .collect();
    assert_eq!(spans, [(1, Some(2)), (2, None)]);
    let (_, diff) = server.get(read, &format!("{A}/diff?from=v1&to=v3")).await;
    assert_eq!(diff["added"], serde_json::json!(["c4"]));
    assert_eq!(diff["modified"][0]["id"], "c2");
    let pointers: Vec<&str> =
        diff["modified"][0]["changes"].as_array().unwrap().iter().map(|c| c["pointer"].as_str().unwrap()).collect();
    assert_eq!(pointers, ["/input", "/expected/output"]);
    assert_eq!(diff["modified"][0]["changes"][0]["new"], "two, again");
    // Tags: moved with a write key, and the move is in the log.
    let response = server
        .client
        .put(format!("{}{A}/tags/prod", server.url))
        .bearer_auth(&server.keys.a_write)
        .json(&serde_json::json!({"version": "v3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (_, tags) = server.get(read, &format!("{A}/tags")).await;
    assert_eq!(tags, serde_json::json!([{"name": "prod", "version": 3}]));
    let (_, log) = server.get(read, &format!("{A}/versions")).await;
    assert_eq!(log["events"].as_array().unwrap().last().unwrap()["kind"], "tag");
    // Deleted with a write key only; the deletion is in the log too.
    let delete = |key: &str| server.client.delete(format!("{}{A}/tags/prod", server.url)).bearer_auth(key).send();
    assert_eq!(delete(read).await.unwrap().status().as_u16(), 403);
    let response = delete(&server.keys.a_write).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.json::<serde_json::Value>().await.unwrap(), serde_json::json!({"name": "prod", "version": 3}));
    let (_, tags) = server.get(read, &format!("{A}/tags")).await;
    assert_eq!(tags, serde_json::json!([]));
    let (_, log) = server.get(read, &format!("{A}/versions")).await;
    assert_eq!(log["events"].as_array().unwrap().last().unwrap()["detail"], "prod: v3 → deleted");
    let response = delete(&server.keys.a_write).await.unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["message"], "dataset `support` has no version `prod` (it has no tags)");
    // Runs.
    let (_, run) = server.get(read, "/api/v1/projects/team-a/runs/latest").await;
    assert_eq!((run["id"].as_str(), run["summary"]["pass_rate"].as_f64()), (Some("r-a-1"), Some(1.0)));
    let (_, results) = server.get(read, "/api/v1/projects/team-a/runs/r-a/results").await;
    assert_eq!(results, serde_json::json!([{"case_id": "c1"}]));
    server.stop().await;
}

async fn errors_carry_the_request_id_and_the_log_id(backend: Backend) {
    let server = Server::start(backend).await;
    let response = server
        .client
        .get(format!("{}{A}/versions/v9", server.url))
        .bearer_auth(&server.keys.a_read)
        .header("x-request-id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "trace-42");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["request_id"], "trace-42");
    let response = server.client.get(format!("{}/healthz", server.url)).send().await.unwrap();
    assert!(!response.headers()["x-request-id"].is_empty());
    server.stop().await;
}

crate::on_both!(
    pages_stay_on_their_version_while_others_are_committed,
    filters_select_and_their_errors_are_located,
    versions_cases_history_diff_tags_and_runs,
    errors_carry_the_request_id_and_the_log_id
);
