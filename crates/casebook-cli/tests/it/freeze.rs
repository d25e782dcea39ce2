//! `casebook freeze` against a real HTTP server on 127.0.0.1:0 standing in for a metrics API:
//! queries filled from the arguments `when` fixes reach it percent-encoded, JSON, text and
//! command answers are recorded in a new version that then serves them, failures and timeouts
//! are listed with what happened and commit nothing unless `--keep-going`.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use casebook_model::snapshot::{Served, Snapshot};
use serde_json::{Value, json};

use crate::cli::{Backend, Folder, cb, run};

on_both!(queries_are_run_once_and_their_answers_served, freeze_on_a_server_merges_onto_what_the_server_got_meanwhile);

/// Requests a server is answering now, and the most it answered at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    peak: AtomicUsize,
}

/// A metrics API: the path and query of every request it got, as they were sent.
fn metrics_api() -> (String, Arc<Mutex<Vec<String>>>) {
    let (url, seen, _) = metrics_api_counting();
    (url, seen)
}

fn metrics_api_counting() -> (String, Arc<Mutex<Vec<String>>>, Arc<InFlight>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let flight = Arc::new(InFlight::default());
    let counting = flight.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
                let (log, counting) = (log.clone(), counting.clone());
                async move {
                    let now = counting.now.fetch_add(1, Ordering::SeqCst) + 1;
                    counting.peak.fetch_max(now, Ordering::SeqCst);
                    let answer = answer(&log, &uri, &headers).await;
                    counting.now.fetch_sub(1, Ordering::SeqCst);
                    answer
                }
            });
            axum::serve(listener, app).await.unwrap();
        });
    });
    (format!("http://{}", rx.recv().unwrap()), seen, flight)
}

async fn answer(log: &Mutex<Vec<String>>, uri: &Uri, headers: &HeaderMap) -> Response {
    let raw = uri.path_and_query().map_or_else(String::new, ToString::to_string);
    log.lock().unwrap().push(raw.clone());
    match uri.path() {
        "/api/metrics" => Json(json!({"series": [{"max": 100, "unit": "connections"}], "asked": raw})).into_response(),
        "/api/text" => {
            if headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer s3cret-tok") {
                "p99 wait 2.1 s".into_response()
            } else {
                (StatusCode::UNAUTHORIZED, "no token").into_response()
            }
        }
        "/api/slow" => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            "slow but there".into_response()
        }
        "/api/boom" => (StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded").into_response(),
        "/api/hang" => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            "too late".into_response()
        }
        _ => (StatusCode::NOT_FOUND, "no such route").into_response(),
    }
}

/// Two incidents asking the same pool query (run once), a text query with a secret header, a
/// command, an answer recorded by hand, and a case without tools.
fn incidents(api: &str) -> String {
    let pool = json!({"when": {"includes": {"metric": "db.pool.active", "service": "café / checkout"}},
        "query": {"url": format!("{api}/api/metrics?metric={{metric}}&service={{service}}")}});
    let first = json!({"id": "inc-1", "input": "Why is checkout slow?", "tools": [
        {"name": "metrics_query", "responses": [
            pool,
            {"when": {"arguments": {"metric": "db.pool.wait"}},
             "query": {"url": format!("{api}/api/text?m={{metric}}"), "headers": {"Authorization": "Bearer ${METRICS_TOKEN}"}}},
            {"when": {"includes": {"metric": "cpu"}}, "result": "12 %"}
        ], "default": {"result": []}},
        {"name": "log_fetcher", "responses": [
            {"when": {"arguments": {"service": "checkout"}}, "query": {"command": ["printf", "%s", "{service}: pool exhausted"]}}
        ]}
    ], "expected": {"output": "the connection pool"}});
    let second = json!({"id": "inc-2", "input": "Checkout errors again", "tools": [
        {"name": "metrics_query", "responses": [pool]}
    ]});
    let plain = json!({"id": "plain", "input": "2+2?", "expected": {"output": "4"}});
    format!("{first}\n{second}\n{plain}\n")
}

fn ok(cmd: &mut assert_cmd::Command) -> String {
    let out = run(cmd);
    assert_eq!(out.status, Some(0), "{out:?}");
    out.stdout
}

fn tools_of(b: &Backend, dir: &Folder, reference: &str, id: &str) -> Value {
    let case: Value = serde_json::from_str(&ok(b.cb(dir).args(["show", reference, id]))).unwrap();
    case["tools"].clone()
}

fn seen(log: &Mutex<Vec<String>>) -> Vec<String> {
    let mut seen = log.lock().unwrap().clone();
    seen.sort();
    seen
}

fn queries_are_run_once_and_their_answers_served(b: &Backend) {
    let (api, log) = metrics_api();
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file("incidents.jsonl", incidents(&api));
    ok(b.cb(&dir).arg("import").arg(&file).args(["--dataset", "incidents"]));

    let dry = ok(b.cb(&dir).args(["freeze", "incidents", "--dry-run"]));
    assert_eq!(
        dry,
        format!(
            "GET {api}/api/metrics?metric=db.pool.active&service=caf%C3%A9%20%2F%20checkout  (case `inc-1`, tool \
             `metrics_query`, response 0, and 1 other response)\n\
             GET {api}/api/text?m=db.pool.wait  (case `inc-1`, tool `metrics_query`, response 1)\n\
             printf %s checkout: pool exhausted  (case `inc-1`, tool `log_fetcher`, response 0)\n\
             would run 3 queries for 4 responses of incidents v1\n"
        )
    );
    assert!(seen(&log).is_empty(), "a dry run runs nothing");

    let out = run(b.cb(&dir).args(["freeze", "incidents"]).env("METRICS_TOKEN", "s3cret-tok"));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(
        out.stdout.starts_with("froze 3 queries (4 responses) of incidents v1\ncreated incidents v2 (")
            && out.stdout.ends_with("): 3 cases, +0 -0 ~2\n"),
        "{out:?}"
    );
    // The pool query once for both cases, its arguments percent-encoded (UTF-8 for `é`).
    assert_eq!(
        seen(&log),
        ["/api/metrics?metric=db.pool.active&service=caf%C3%A9%20%2F%20checkout", "/api/text?m=db.pool.wait"]
    );

    let tools = tools_of(b, &dir, "incidents@v2", "inc-1");
    let pool = &tools[0]["responses"][0];
    assert_eq!(
        pool["result"],
        json!({"series": [{"max": 100, "unit": "connections"}],
               "asked": "/api/metrics?metric=db.pool.active&service=caf%C3%A9%20%2F%20checkout"})
    );
    assert_eq!(pool["query"]["frozen_at"], "2026-11-23T10:00:00Z");
    assert_eq!(pool["query"]["url"], format!("{api}/api/metrics?metric={{metric}}&service={{service}}"), "kept");
    assert_eq!(tools[0]["responses"][1]["result"], "p99 wait 2.1 s");
    assert_eq!(tools[0]["responses"][1]["query"]["headers"]["Authorization"], "Bearer ${METRICS_TOKEN}");
    assert_eq!(tools[0]["responses"][2], json!({"when": {"includes": {"metric": "cpu"}}, "result": "12 %"}));
    assert_eq!(tools[1]["responses"][0]["result"], "checkout: pool exhausted");
    assert_eq!(tools_of(b, &dir, "incidents@v2", "inc-2")[0]["responses"][0]["result"], pool["result"]);
    let log_json = crate::cli::log_versions(&ok(b.cb(&dir).args(["log", "incidents", "--format", "json"])));
    assert_eq!(log_json[1]["message"], "freeze: 3 queries answered");

    // The frozen version serves the recorded answers.
    let snapshot =
        Snapshot::compile(&serde_json::from_value::<Vec<casebook_model::Tool>>(tools.clone()).unwrap()).unwrap();
    let served = snapshot.serve("metrics_query", &json!({"metric": "db.pool.active", "service": "café / checkout"}));
    assert_eq!((served.served, served.entry, &served.content), (Served::Matched, Some(0), &pool["result"]));
    let served = snapshot.serve("log_fetcher", &json!({"service": "checkout"}));
    assert_eq!((served.served, served.content), (Served::Matched, json!("checkout: pool exhausted")));

    // Nothing is left to run: no request, no version.
    assert_eq!(
        ok(b.cb(&dir).args(["freeze", "incidents"])),
        "nothing to freeze: incidents v2 has no query that has not been run\n"
    );
    assert_eq!(seen(&log).len(), 2);

    // `--refresh` runs them all again; the same answers at the same (fixed) time make no version.
    let out = run(b
        .cb(&dir)
        .args(["freeze", "incidents", "--refresh", "--format", "json"])
        .env("METRICS_TOKEN", "s3cret-tok"));
    assert_eq!(out.status, Some(0), "{out:?}");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (&report["queries"], &report["responses"], &report["failed"], &report["created"], &report["version"]["number"]),
        (&json!(3), &json!(4), &json!(0), &json!(false), &json!(2))
    );
    assert_eq!(seen(&log).len(), 4);
}

/// A dataset whose queries fail in each way, and one that works.
fn failing(api: &str) -> String {
    let tool = |url: String, extra: Value| {
        let mut query = json!({"url": url});
        query.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!([{"name": "metrics_query", "responses": [{"query": query}]}])
    };
    let cases = [
        json!({"id": "boom", "input": "a", "tools": tool(format!("{api}/api/boom?api_key=k-123&m=cpu"), json!({}))}),
        json!({"id": "good", "input": "b", "tools": tool(format!("{api}/api/metrics?m=mem"), json!({}))}),
        json!({"id": "hang", "input": "c", "tools": tool(format!("{api}/api/hang"), json!({"timeout_secs": 0.5}))}),
        json!({"id": "secret", "input": "d", "tools": tool(format!("{api}/api/text"), json!({"headers": {"Authorization": "Bearer ${FREEZE_TEST_UNSET}"}}))}),
        json!({"id": "sh", "input": "e", "tools": [{"name": "logs", "responses": [
            {"query": {"command": ["sh", "-c", "echo 'no such index' >&2; exit 3"]}}]}]}),
    ];
    cases.iter().map(|c| format!("{c}\n")).collect()
}

#[test]
fn failed_queries_are_listed_and_commit_nothing_unless_keep_going() {
    let b = Backend::Embedded;
    let (api, log) = metrics_api();
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file("ops.jsonl", failing(&api));
    ok(b.cb(&dir).arg("import").arg(&file).args(["--dataset", "ops"]));

    let started = std::time::Instant::now();
    let out = run(b.cb(&dir).args(["freeze", "ops"]).env_remove("FREEZE_TEST_UNSET"));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(20), "the hanging query timed out");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!(
            "error: case `boom`, tool `metrics_query`, response 0: `GET {api}/api/boom?api_key=redacted&m=cpu` answered \
             500 Internal Server Error: upstream exploded\n\
             error: case `hang`, tool `metrics_query`, response 0: `GET {api}/api/hang` did not answer within 0.5 s\n\
             error: case `secret`, tool `metrics_query`, response 0: `GET {api}/api/text`: the header `Authorization` \
             needs the environment variable `FREEZE_TEST_UNSET`, which is not set\n\
             error: case `sh`, tool `logs`, response 0: `sh -c echo 'no such index' >&2; exit 3` exited with 3: no such index\n\
             nothing was committed: 4 queries of 5 failed; fix them and freeze again, or keep the answers that came \
             with `--keep-going`\n"
        )
    );
    let versions = crate::cli::log_versions(&ok(b.cb(&dir).args(["log", "ops", "--format", "json"])));
    assert_eq!(versions.len(), 1, "nothing committed");

    let out = run(b.cb(&dir).args(["freeze", "ops", "--keep-going"]).env_remove("FREEZE_TEST_UNSET"));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert!(
        out.stdout.starts_with("froze 1 query (1 response) of ops v1\ncreated ops v2 (")
            && out.stdout.ends_with(
                "): 5 cases, +0 -0 ~1\n4 queries failed: 4 responses left unfrozen; run `casebook freeze ops` again to retry\n"
            ),
        "{out:?}"
    );
    let show = |id: &str| -> Value { serde_json::from_str(&ok(b.cb(&dir).args(["show", "ops@v2", id]))).unwrap() };
    assert_eq!(show("good")["tools"][0]["responses"][0]["result"]["asked"], "/api/metrics?m=mem");
    let boom = &show("boom")["tools"][0]["responses"][0];
    assert!(boom.get("result").is_none() && boom["query"].get("frozen_at").is_none(), "{boom}");
    let log_json = crate::cli::log_versions(&ok(b.cb(&dir).args(["log", "ops", "--format", "json"])));
    assert_eq!(log_json[1]["message"], "freeze: 1 query answered, 4 responses left unfrozen");

    // What is left is still to run; as JSON, every error is listed.
    let out = run(b.cb(&dir).args(["freeze", "ops", "--format", "json"]).env_remove("FREEZE_TEST_UNSET"));
    assert_eq!(out.status, Some(1), "{out:?}");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!((&report["queries"], &report["failed"], &report["created"]), (&json!(4), &json!(4), &json!(false)));
    assert_eq!(report["errors"].as_array().unwrap().len(), 4);
    // The good query ran without being recorded, then with `--keep-going`, and not since.
    assert_eq!(log.lock().unwrap().iter().filter(|p| p.starts_with("/api/metrics")).count(), 2);
}

#[test]
fn freeze_of_an_old_version_is_refused_and_casebook_url_means_the_server() {
    let b = Backend::Embedded;
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file("qa.jsonl", "{\"id\": \"a\", \"input\": \"x\"}\n");
    ok(b.cb(&dir).arg("import").arg(&file).args(["--dataset", "qa"]));
    let file = dir.file("qa2.jsonl", "{\"id\": \"a\", \"input\": \"y\"}\n");
    ok(b.cb(&dir).args(["commit", "qa"]).arg(&file));

    let out = run(b.cb(&dir).args(["freeze", "qa@v1"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert_eq!(
        out.stderr,
        "error: `qa@v1` is qa v1, but the head is v2: `freeze` commits the next version on the head, so freeze `qa` \
         (or `qa@v2`)\n"
    );
    // With `CASEBOOK_URL`, the version is the server's (none listens there).
    let out = run(cb(&dir).args(["freeze", "qa"]).env("CASEBOOK_URL", "http://127.0.0.1:9").env("CASEBOOK_TOKEN", "t"));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.starts_with("error: cannot reach the server at http://127.0.0.1:9"), "{out:?}");
}

/// A metrics API that, when first asked, runs `meanwhile` (on a blocking thread) before it
/// answers as [`answer`] does: what someone does on the team server while `freeze` waits for
/// its queries.
fn metrics_api_doing(meanwhile: impl FnOnce() + Send + 'static) -> String {
    type Once = Box<dyn FnOnce() + Send>;
    let meanwhile: Arc<Mutex<Option<Once>>> = Arc::new(Mutex::new(Some(Box::new(meanwhile))));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
                let (log, meanwhile) = (log.clone(), meanwhile.clone());
                async move {
                    let first = meanwhile.lock().unwrap().take();
                    if let Some(first) = first {
                        tokio::task::spawn_blocking(first).await.unwrap();
                    }
                    answer(&log, &uri, &headers).await
                }
            });
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

/// `freeze NAME` with `CASEBOOK_URL` set: the version is read from a real `casebook serve`,
/// the queries run against a local metrics API, and the answers go back as a push merged from
/// the version read. A case changed on the server while the queries ran is kept; a change to a
/// case that was frozen is a conflict naming it, and nothing is committed. On a server over either
/// store (issue 34 tested it over the embedded one only).
fn freeze_on_a_server_merges_onto_what_the_server_got_meanwhile(b: &Backend) {
    use crate::remote::{PROJECT, Server, owner, push, versions};
    let dir = Arc::new(Folder::new());
    let server = Arc::new(Server::start(b, &dir, &[]));
    let token = Server::key(b, &dir, PROJECT, "write");
    // Someone else's push of dataset `name`'s file with `from` replaced by `to`.
    let change = |name: &'static str, from: &'static str, to: &'static str| {
        let (server, dir, token) = (server.clone(), dir.clone(), token.clone());
        move || {
            let text = fs_err::read_to_string(dir.join(&format!("{name}.jsonl"))).unwrap();
            assert_eq!(text.matches(from).count(), 1, "{text}");
            let file = dir.file(&format!("{name}-edited.jsonl"), text.replace(from, to));
            let out = server.client(&dir, &token).args(["push", "--dataset", name]).arg(&file).output().unwrap();
            assert!(out.status.success(), "{out:?}");
        }
    };

    // The server's `plain` case changes while `incidents` is being frozen.
    let api = metrics_api_doing(change("incidents", "2+2?", "3+3?"));
    push(&server, &dir, &token, "incidents", &dir.file("incidents.jsonl", incidents(&api)));
    let out = run(server.client(&dir, &token).args(["freeze", "incidents"]).env("METRICS_TOKEN", "s3cret-tok"));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(
        out.stdout.starts_with(&format!(
            "froze 3 queries (4 responses) of incidents v1 on {}\ncreated incidents v3 (",
            server.url
        )) && out.stdout.contains("): 3 cases, +0 -0 ~2\n"),
        "{out:?}"
    );
    assert!(out.stderr.contains(&format!("(on the server at {}, project `{PROJECT}`)", server.url)), "{out:?}");
    // v2 is the other push; v3 has both its change and the answers.
    let log = versions(b, &dir, "incidents");
    assert_eq!(log.len(), 3);
    assert_eq!(log[2]["message"], "freeze: 3 queries answered");
    let cases: Vec<Value> = ok(owner(b, &dir).args(["export", "incidents@v3", "--to", "casebook", "-q"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|c: &Value| c.get("$dataset").is_none())
        .collect();
    let by_id = |id: &str| cases.iter().find(|c| c["id"] == id).unwrap().clone();
    assert_eq!(by_id("plain")["input"], "3+3?");
    assert_eq!(by_id("inc-1")["tools"][0]["responses"][1]["result"], "p99 wait 2.1 s");
    assert_eq!(by_id("inc-1")["tools"][1]["responses"][0]["result"], "checkout: pool exhausted");
    assert_eq!(by_id("inc-2")["tools"][0]["responses"][0]["result"]["series"][0]["max"], 100);

    // A case frozen here and changed there meanwhile: a conflict, nothing committed.
    let api = metrics_api_doing(change("clash", "Checkout errors again", "Checkout errors, third time"));
    push(&server, &dir, &token, "clash", &dir.file("clash.jsonl", incidents(&api)));
    let out = run(server.client(&dir, &token).args(["freeze", "clash"]).env("METRICS_TOKEN", "s3cret-tok"));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(
        out.stderr.contains(
            "error: dataset `clash` moved on while the queries ran: case `inc-2` changed on the server since v1 (its \
             head is v2) and got answers here; nothing was committed: freeze `clash` again"
        ),
        "{out:?}"
    );
    assert_eq!(versions(b, &dir, "clash").len(), 2);
}

#[test]
fn queries_run_at_most_concurrency_at_once() {
    let b = Backend::Embedded;
    let (api, log, flight) = metrics_api_counting();
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let rows: String = (0..5)
        .map(|i| {
            let responses = json!([{"query": {"url": format!("{api}/api/slow?n={i}")}}]);
            format!(
                "{}\n",
                json!({"id": format!("c{i}"), "input": "?", "tools": [{"name": "t", "responses": responses}]})
            )
        })
        .collect();
    let file = dir.file("slow.jsonl", rows);
    ok(b.cb(&dir).arg("import").arg(&file).args(["--dataset", "slow"]));
    let out = ok(b.cb(&dir).args(["freeze", "slow", "--concurrency", "2", "-m", "slow sources"]));
    assert!(out.starts_with("froze 5 queries (5 responses) of slow v1\ncreated slow v2 ("), "{out}");
    assert_eq!((log.lock().unwrap().len(), flight.peak.load(Ordering::SeqCst)), (5, 2));
    let log_json = crate::cli::log_versions(&ok(b.cb(&dir).args(["log", "slow", "--format", "json"])));
    assert_eq!(log_json[1]["message"], "slow sources");
}

#[test]
fn a_dataset_file_is_frozen_into_another_file() {
    let (api, log) = metrics_api();
    let dir = Folder::new();
    let file = dir.file("incidents.jsonl", incidents(&api));
    let out =
        run(cb(&dir).args(["freeze", "incidents.jsonl", "-o", "frozen.jsonl"]).env("METRICS_TOKEN", "s3cret-tok"));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert_eq!(out.stdout, "froze 3 queries (4 responses) of `incidents.jsonl`\nwrote 3 cases to `frozen.jsonl`\n");
    assert_eq!(seen(&log).len(), 2);
    assert_eq!(fs_err::read_to_string(&file).unwrap(), incidents(&api), "the input is left as it was");
    let frozen: Vec<Value> = fs_err::read_to_string(dir.join("frozen.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frozen.len(), 3);
    assert_eq!(frozen[0]["tools"][1]["responses"][0]["result"], "checkout: pool exhausted");
    assert_eq!(frozen[1]["tools"][0]["responses"][0]["query"]["frozen_at"], "2026-11-23T10:00:00Z");
    assert_eq!(frozen[2], json!({"id": "plain", "input": "2+2?", "expected": {"output": "4"}}));
    assert_eq!(
        ok(cb(&dir).args(["freeze", "frozen.jsonl"])),
        "nothing to freeze: `frozen.jsonl` has no query that has not been run\n"
    );
}
