//! Recording runs through the API, as `casebook run` does with a server: begin, results in
//! batches, finish, read back byte for byte; stored outputs found by run hash, by the project
//! that kept them only.

use serde_json::json;

use crate::harness::{Backend, Server, answer};

const RUNS: &str = "/api/v1/projects/team-a/runs";

/// A run hash made of one repeated hexadecimal digit.
fn hash(digit: char) -> String {
    std::iter::repeat_n(digit, 64).collect()
}

/// Sends `body` (JSON text) with `method` to `path` with `key`.
async fn send(server: &Server, method: reqwest::Method, key: &str, path: &str, body: &str) -> (u16, String) {
    let response = server
        .client
        .request(method, format!("{}{path}", server.url))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn post(server: &Server, key: &str, path: &str, body: &str) -> (u16, String) {
    send(server, reqwest::Method::POST, key, path, body).await
}

fn error_code(text: &str) -> String {
    let body: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    body["error"]["code"].as_str().unwrap_or_default().to_owned()
}

async fn a_run_is_recorded_in_batches_and_read_back_as_sent(backend: Backend) {
    let server = Server::start(backend).await;
    let key = &server.keys.a_write;
    let meta = r#"{"dataset": "support@v3", "dataset_version_id": "0a1b", "n_runs": 1}"#;
    let begin =
        format!(r#"{{"id": "r-new", "experiment": "smoke", "started": "2026-11-24T08:10:00Z", "meta": {meta}}}"#);
    let (status, text) = post(&server, key, RUNS, &begin).await;
    assert_eq!(status, 201, "{text}");
    let (status, text) = post(&server, key, RUNS, &begin).await;
    assert_eq!((status, error_code(&text)), (409, "conflict".to_owned()), "{text}");

    // Results as the runner writes them, spaces and number texts kept; two batches.
    let results = [
        r#"{"case_id": "c1", "score": 1.50}"#,
        r#"{"case_id":"c2","pass":false}"#,
        r#"{"case_id": "c3", "error": {"kind": "http"}}"#,
        r#"{"case_id":"c4","note":"é\u00e9"}"#,
    ];
    let outputs = [r#"{"output": "ONE", "steps": []}"#, r#"{"output":"TWO"}"#, "", r#"{"output": 4.0}"#];
    let row = |seq: usize, digit: char| {
        let output = if outputs[seq].is_empty() {
            "null".to_owned()
        } else {
            json!({"hash": hash(digit), "output": 0}).to_string()
        };
        let output = output.replace(":0}", &format!(":{}}}", outputs[seq]));
        format!(r#"{{"seq": {seq}, "result": {}, "output": {output}}}"#, results[seq])
    };
    let first = format!("[{}, {}]", row(0, 'a'), row(1, 'b'));
    let second = format!("[{}, {}]", row(2, 'c'), row(3, 'd'));
    for batch in [&first, &second] {
        let (status, text) = post(&server, key, &format!("{RUNS}/r-new/results"), batch).await;
        assert_eq!(status, 204, "{text}");
    }
    let finish = r#"{"finished": "2026-11-24T08:11:00Z", "summary": {"pass_rate": 0.5}}"#;
    let (status, text) = send(&server, reqwest::Method::PUT, key, &format!("{RUNS}/r-new/finish"), finish).await;
    assert_eq!(status, 204, "{text}");

    let (status, run) = server.get(&server.keys.a_read, &format!("{RUNS}/latest")).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["id"], "r-new");
    assert_eq!(run["meta"], serde_json::from_str::<serde_json::Value>(meta).unwrap());
    assert_eq!(run["summary"], json!({"pass_rate": 0.5}));
    assert_eq!(run["finished"], "2026-11-24T08:11:00Z");
    let response =
        server.client.get(format!("{}{RUNS}/r-new/results", server.url)).bearer_auth(&server.keys.a_read).send();
    let text = response.await.unwrap().text().await.unwrap();
    assert_eq!(text, format!("[{}]", results.join(",")));

    // Outputs by run hash, in the order asked, null where none is kept (a result without one).
    let ask = json!({"hashes": [hash('d'), hash('c'), hash('a'), hash('e'), hash('a')]}).to_string();
    let (status, text) = post(&server, &server.keys.a_read, "/api/v1/projects/team-a/outputs", &ask).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(text, format!("[{},null,{},null,{}]", outputs[3], outputs[0], outputs[0]));
    server.stop().await;
}

async fn another_project_can_neither_read_nor_write_a_run(backend: Backend) {
    let server = Server::start(backend).await;
    let begin = r#"{"id": "r-a-2", "experiment": "smoke", "started": "2026-11-24T08:10:00Z", "meta": {}}"#;
    assert_eq!(post(&server, &server.keys.a_write, RUNS, begin).await.0, 201);
    let rows = format!(
        r#"[{{"seq": 0, "result": {{"case_id": "c1"}}, "output": {{"hash": "{}", "output": {{"output": "A-SECRET"}}}}}}]"#,
        hash('a')
    );
    assert_eq!(post(&server, &server.keys.a_write, &format!("{RUNS}/r-a-2/results"), &rows).await.0, 204);
    let b = &server.keys.b_write;
    // Through A's project: 404 before anything else.
    for (method, path) in [
        (reqwest::Method::POST, format!("{RUNS}/r-a-2/results")),
        (reqwest::Method::PUT, format!("{RUNS}/r-a-2/finish")),
        (reqwest::Method::POST, "/api/v1/projects/team-a/outputs".to_owned()),
    ] {
        let (status, text) = send(&server, method.clone(), b, &path, &rows).await;
        assert_eq!((status, error_code(&text)), (404, "not-found".to_owned()), "{method} {path}: {text}");
    }
    // Through its own: A's run is not there, and A's outputs are not found.
    let own = "/api/v1/projects/team-b/runs/r-a-2";
    let (status, text) = post(&server, b, &format!("{own}/results"), &rows).await;
    assert_eq!(status, 404, "{text}");
    let finish = r#"{"finished": "2026-11-24T08:11:00Z", "summary": {}}"#;
    let (status, text) = send(&server, reqwest::Method::PUT, b, &format!("{own}/finish"), finish).await;
    assert_eq!(status, 404, "{text}");
    let (status, _) = server.get(b, own).await;
    assert_eq!(status, 404);
    let ask = json!({"hashes": [hash('a')]}).to_string();
    let (status, text) = post(&server, b, "/api/v1/projects/team-b/outputs", &ask).await;
    assert_eq!((status, text.as_str()), (200, "[null]"));
    // A's run is untouched, its output still A's.
    let (_, results) = server.get(&server.keys.a_read, &format!("{RUNS}/r-a-2/results")).await;
    assert_eq!(results, json!([{"case_id": "c1"}]));
    let (_, text) = post(&server, &server.keys.a_read, "/api/v1/projects/team-a/outputs", &ask).await;
    assert_eq!(text, r#"[{"output": "A-SECRET"}]"#);
    server.stop().await;
}

async fn writes_need_a_write_key_and_a_well_formed_body(backend: Backend) {
    let server = Server::start(backend).await;
    let begin = r#"{"id": "r-a-3", "experiment": "smoke", "started": "2026-11-24T08:10:00Z", "meta": {}}"#;
    let finish = r#"{"finished": "2026-11-24T08:11:00Z", "summary": {}}"#;
    let read = &server.keys.a_read;
    assert_eq!(error_code(&post(&server, read, RUNS, begin).await.1), "forbidden");
    assert_eq!(post(&server, &server.keys.a_write, RUNS, begin).await.0, 201);
    assert_eq!(error_code(&post(&server, read, &format!("{RUNS}/r-a-3/results"), "[]").await.1), "forbidden");
    let (_, text) = send(&server, reqwest::Method::PUT, read, &format!("{RUNS}/r-a-3/finish"), finish).await;
    assert_eq!(error_code(&text), "forbidden");

    let write = &server.keys.a_write;
    let results = format!("{RUNS}/r-a-3/results");
    // A hash that is not one, in a result or a lookup; nothing of the batch is kept.
    let bad = r#"[{"seq": 0, "result": {}, "output": null}, {"seq": 1, "result": {}, "output": {"hash": "abc", "output": 1}}]"#;
    let (status, text) = post(&server, write, &results, bad).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("`abc` is not a run hash"), "{text}");
    let (_, kept) = server.get(read, &results).await;
    assert_eq!(kept, json!([]));
    let (status, text) = post(&server, read, "/api/v1/projects/team-a/outputs", r#"{"hashes": ["xyz"]}"#).await;
    assert_eq!(status, 400, "{text}");
    // More than 10,000 rows or hashes in one request.
    let many = format!("[{}]", vec![r#"{"seq": 0, "result": {}, "output": null}"#; 10_001].join(","));
    let (status, text) = post(&server, write, &results, &many).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("more than 10000 items in one request"), "{text}");
    let hashes = json!({"hashes": vec![hash('a'); 10_001]}).to_string();
    let (status, text) = post(&server, read, "/api/v1/projects/team-a/outputs", &hashes).await;
    assert_eq!(status, 400, "{text}");
    let hashes = json!({"hashes": vec![hash('a'); 10_000]}).to_string();
    let (status, text) = post(&server, read, "/api/v1/projects/team-a/outputs", &hashes).await;
    assert_eq!(status, 200, "{text}");
    // Not JSON, or not the shape: 400 with the reason; a result or meta that is not an object.
    for (path, body) in [
        (RUNS.to_owned(), "{"),
        (RUNS.to_owned(), r#"{"id": "r-x", "experiment": "e", "started": "t", "meta": [1]}"#),
        (results.clone(), r#"{"seq": 0}"#),
        (results.clone(), r#"[{"seq": 0, "result": 3, "output": null}]"#),
        // A place past a run's range, which would be the next run's.
        (results.clone(), r#"[{"seq": 4294967296, "result": {}, "output": null}]"#),
        (results.clone(), r#"[{"seq": 18446744073709551615, "result": {}, "output": null}]"#),
    ] {
        let (status, text) = post(&server, write, &path, body).await;
        assert_eq!((status, error_code(&text)), (400, "bad-request".to_owned()), "{body}: {text}");
    }
    // A run that is not there.
    let (status, text) = post(&server, write, &format!("{RUNS}/r-nowhere/results"), "[]").await;
    assert_eq!(status, 404, "{text}");
    let (status, _) = send(&server, reqwest::Method::PUT, write, &format!("{RUNS}/r-nowhere/finish"), finish).await;
    assert_eq!(status, 404);
    let (status, body) =
        answer(server.client.get(format!("{}{RUNS}/r-a-3", server.url)).bearer_auth(read).send().await.unwrap()).await;
    assert_eq!((status, body["finished"].clone()), (200, serde_json::Value::Null));
    server.stop().await;
}

/// A run logged from a client's own loop (the TypeScript and Python clients) ends without a
/// summary: the server counts it from the results kept, as `casebook results` would.
async fn a_run_finished_without_a_summary_is_counted_from_its_results(backend: Backend) {
    let server = Server::start(backend).await;
    let key = &server.keys.a_write;
    let meta = json!({"run_id": "r-loop", "experiment": "nightly", "dataset": "support",
        "dataset_version_id": "0a1b", "started": "2026-11-24T08:10:00Z", "finished": "",
        "n_runs": 1, "scenarios": ["client"]});
    let begin = json!({"id": "r-loop", "experiment": "nightly", "started": "2026-11-24T08:10:00Z", "meta": meta});
    assert_eq!(post(&server, key, RUNS, &begin.to_string()).await.0, 201);
    let result = |case: &str, score: f64| {
        json!({"case_id": case, "case_content_id": "c0", "scenario": "client", "run": 0, "hash": hash('b'),
            "output": {"millis": 3}, "grades": [{"grader": "exact", "weight": 1.0, "score": score,
            "pass": score >= 0.5, "rationale": ""}], "score": score, "pass": score >= 0.5})
    };
    let error = json!({"case_id": "c3", "case_content_id": "c0", "scenario": "client", "run": 0,
        "hash": hash('c'), "error": {"kind": "client", "message": "timed out"}});
    let rows = json!([{"seq": 0, "result": result("c1", 1.0)}, {"seq": 1, "result": result("c2", 0.0)},
        {"seq": 2, "result": error}]);
    assert_eq!(post(&server, key, &format!("{RUNS}/r-loop/results"), &rows.to_string()).await.0, 204);

    let finish = r#"{"finished": "2026-11-24T08:11:00Z", "threshold": 2}"#;
    let (status, text) = send(&server, reqwest::Method::PUT, key, &format!("{RUNS}/r-loop/finish"), finish).await;
    assert_eq!((status, error_code(&text)), (400, "bad-request".to_owned()), "{text}");
    assert!(text.contains("`threshold` must be from 0 to 1, not 2"), "{text}");

    let finish = r#"{"finished": "2026-11-24T08:11:00Z", "threshold": 0.3}"#;
    let (status, text) = send(&server, reqwest::Method::PUT, key, &format!("{RUNS}/r-loop/finish"), finish).await;
    assert_eq!(status, 204, "{text}");
    let (status, run) = server.get(&server.keys.a_read, &format!("{RUNS}/r-loop")).await;
    assert_eq!(status, 200);
    let summary = &run["summary"];
    assert_eq!(
        (
            &summary["totals"]["results"],
            &summary["totals"]["passed"],
            &summary["totals"]["failed"],
            &summary["totals"]["errors"]
        ),
        (&json!(3), &json!(1), &json!(1), &json!(1)),
        "{summary}"
    );
    assert_eq!((&summary["threshold"], &summary["threshold_met"]), (&json!(0.3), &json!(true)));
    assert_eq!(summary["meta"]["finished"], "2026-11-24T08:11:00Z");
    assert_eq!(summary["meta"]["dataset"], "support");

    // A result that is not the runner's cannot be counted: the answer names it.
    let begin = json!({"id": "r-odd", "experiment": "nightly", "started": "2026-11-24T08:10:00Z", "meta": meta});
    assert_eq!(post(&server, key, RUNS, &begin.to_string()).await.0, 201);
    let rows = json!([{"seq": 0, "result": result("c1", 1.0)}, {"seq": 1, "result": {"case_id": "c2"}}]);
    assert_eq!(post(&server, key, &format!("{RUNS}/r-odd/results"), &rows.to_string()).await.0, 204);
    let finish = r#"{"finished": "2026-11-24T08:11:00Z"}"#;
    let (status, text) = send(&server, reqwest::Method::PUT, key, &format!("{RUNS}/r-odd/finish"), finish).await;
    assert_eq!((status, error_code(&text)), (400, "bad-request".to_owned()), "{text}");
    assert!(text.contains("the run's result 1 is not a casebook result"), "{text}");
    let (_, run) = server.get(&server.keys.a_read, &format!("{RUNS}/r-odd")).await;
    assert_eq!(run["finished"], serde_json::Value::Null, "nothing is written");
    server.stop().await;
}

crate::on_both!(
    a_run_finished_without_a_summary_is_counted_from_its_results,
    a_run_is_recorded_in_batches_and_read_back_as_sent,
    another_project_can_neither_read_nor_write_a_run,
    writes_need_a_write_key_and_a_well_formed_body,
);
