//! `run`, `results` and `compare` through a team server: with `CASEBOOK_URL` and a key, in a
//! folder without any store, a run reads `NAME@REF` from the server, keeps its results there,
//! and reuses the outputs a colleague's run kept (the agent is not called again); a key of
//! another project sees none of it.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::Value;

use crate::cli::{Backend, Folder, run};
use crate::remote::{PROJECT, Server, ok, one_error, push};
use crate::run::{Behaviour, DATASET, serve, summary};

on_both!(a_team_runs_through_the_server_and_reuses_what_it_ran);

/// The run `GET …/runs/{reference}` answers, with `token`.
fn server_run(server: &Server, token: &str, reference: &str) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let response = reqwest::Client::new()
            .get(format!("{}/api/v1/projects/{PROJECT}/runs/{reference}", server.url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.json().await.unwrap()
    })
}

fn a_team_runs_through_the_server_and_reuses_what_it_ran(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let alice_key = Server::key(b, &dir, PROJECT, "write");
    let bob_key = Server::key(b, &dir, PROJECT, "write");
    let reader_key = Server::key(b, &dir, PROJECT, "read");
    let other_key = Server::key(b, &dir, "elsewhere", "write");
    let pushed = push(&server, &dir, &alice_key, "support", &dir.file("support.jsonl", DATASET));
    let version_id = pushed["version"]["id"].as_str().unwrap().to_owned();
    let (agent, bodies) = serve(Behaviour::Shout);
    let calls = || bodies.lock().unwrap().len();
    let args = ["run", "--dataset", "support@latest", "--target", &agent, "--grader", "exact_match"];

    // Alice, in a folder without a store: the dataset comes from the server, the results go
    // there. a and b pass, c fails: below the threshold of 1.0, so exit 1.
    let alice = Folder::new();
    let out = run(server.client(&alice, &alice_key).args(args));
    out.expect_status(1);
    assert!(out.stdout.contains("· dataset support@v1 ·"), "{out:?}");
    assert!(out.stdout.contains("pass rate 66.7 % of 3 results (2 passed, 1 failed, 0 errors, 0 ungraded)"), "{out:?}");
    let kept_on = format!("results are kept on the server at {} (project `{PROJECT}`)", server.url);
    assert!(out.stderr.contains(&kept_on), "{out:?}");
    assert!(!alice.join(".casebook").exists());
    // a: 1 turn, b: 3 turns, c: 1 turn.
    assert_eq!(calls(), 5);
    let shown = run(server.client(&alice, &alice_key).args(["results", "--format", "json"]));
    shown.expect_status(0);
    let first = summary(&shown.stdout);
    assert_eq!(first["meta"]["dataset"], "support@v1");
    assert_eq!(first["meta"]["dataset_version_id"], version_id.as_str());
    let alice_run = first["meta"]["run_id"].as_str().unwrap().to_owned();
    // The server names the version the run used, and has its summary.
    let latest = server_run(&server, &reader_key, "latest");
    assert_eq!(latest["id"], alice_run.as_str());
    assert_eq!(latest["meta"]["dataset"], "support@v1");
    assert_eq!(latest["meta"]["dataset_version_id"], version_id.as_str());
    assert_eq!(latest["summary"]["totals"]["passed"], 2);
    // The outputs were kept too: a report shows what the failing case's agent answered.
    let md = ok(server.client(&alice, &reader_key).args(["results", "--format", "markdown"]));
    assert!(md.contains("the agent answered: WRONG ANSWER PLEASE"), "{md}");

    // Bob, with a key of his own and another home: the same run finds every output on the
    // server by run hash; the agent is not called.
    let bob = Folder::new();
    let out = run(server.client(&bob, &bob_key).args(args));
    out.expect_status(1);
    assert!(out.stdout.contains("pass rate 66.7 % of 3 results (2 passed, 1 failed, 0 errors, 0 ungraded)"), "{out:?}");
    assert!(out.stderr.contains("3 runs in ") && out.stderr.contains(", 3 from stored outputs"), "{out:?}");
    assert_eq!(calls(), 5);
    let bob_run = server_run(&server, &bob_key, "latest");
    assert_ne!(bob_run["id"], alice_run.as_str());
    assert_eq!(bob_run["meta"]["dataset_version_id"], version_id.as_str());
    let listed = ok(server.client(&bob, &reader_key).args(["results", "--list"]));
    assert_eq!(listed.lines().count(), 3, "a header and two runs: {listed}");

    // A filter is applied on the server: the cases it picks, every output already there.
    let out =
        run(server.client(&bob, &bob_key).args(args).args(["--where", "labels contains \"greeting\" and id != \"x\""]));
    assert!(out.stdout.contains("pass rate 50.0 % of 2 results (1 passed, 1 failed, 0 errors, 0 ungraded)"), "{out:?}");
    assert!(out.stderr.contains(", 2 from stored outputs"), "{out:?}");
    assert_eq!(calls(), 5);

    // Either compares the two runs through the server.
    let compared =
        ok(server.client(&alice, &reader_key).args(["compare", &alice_run, bob_run["id"].as_str().unwrap()]));
    assert!(compared.starts_with("3 pairs · mean difference B − A +0.000"), "{compared}");
    assert!(compared.contains("pass → fail 0 · fail → pass 0 · only in A 0 · only in B 0 · errors 0"), "{compared}");

    // A key of another project sees no run, not even by its id.
    let carol = Folder::new();
    let out = run(server.client(&carol, &other_key).arg("results"));
    assert_eq!(one_error(&out, 2), "error: no run yet: `casebook run` keeps its results in the store");
    let out = run(server.client(&carol, &other_key).args(["results", &alice_run]));
    assert_eq!(one_error(&out, 2), format!("error: no run `{alice_run}`: `casebook results --list` lists them"));
    let out = run(server.client(&carol, &other_key).args(["results", "--list"]));
    out.expect_status(0);
    assert!(out.stderr.contains("no run yet"), "{out:?}");
    // Nor its dataset.
    let out = run(server.client(&carol, &other_key).args(args));
    assert!(one_error(&out, 2).starts_with("error: no dataset named `support`"), "{out:?}");

    // A read key runs nothing: the run cannot be kept, and no agent is called.
    let out = run(server.client(&carol, &reader_key).args(args));
    let id = reader_key.split('_').nth(1).unwrap();
    assert_eq!(
        one_error(&out, 2),
        format!("error: the API key `{id}` may only read: writing needs a key made with `--scope write`")
    );
    assert_eq!(calls(), 5);
}

/// A run through the server stopped with Ctrl-C keeps what finished there; the same command
/// again calls the agent only for the rest. And a server that is not there is one line.
#[test]
fn an_interrupted_run_resumes_from_what_the_server_kept() {
    let dir = Folder::new();
    let b = Backend::Embedded;
    let server = Server::start(&b, &dir, &[]);
    let key = Server::key(&b, &dir, PROJECT, "write");
    let rows: String = (0..12)
        .map(|i| format!("{{\"id\": \"c{i}\", \"input\": \"q{i}\", \"expected\": {{\"output\": \"Q{i}\"}}}}\n"))
        .collect();
    push(&server, &dir, &key, "many", &dir.file("many.jsonl", rows));
    let (agent, bodies) = serve(Behaviour::Slow);
    let here = Folder::new();
    let args = ["run", "--dataset", "many", "--target", &agent, "--grader", "exact_match", "--concurrency", "1"];
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("casebook"))
        .current_dir(here.join(""))
        .env("NO_COLOR", "1")
        .env("HOME", here.join("home"))
        .env("CASEBOOK_URL", &server.url)
        .env("CASEBOOK_TOKEN", &key)
        .env_remove("CASEBOOK_STORE")
        .env_remove("CASEBOOK_PROJECT")
        .env_remove("XDG_CONFIG_HOME")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A few runs finish (200 ms each, one at a time), then Ctrl-C.
    std::thread::sleep(Duration::from_millis(1100));
    let kill = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopping"), "{stderr}");
    let called = bodies.lock().unwrap().len();
    assert!((2..12).contains(&called), "{called} calls before Ctrl-C");
    let listed = ok(server.client(&here, &key).args(["results", "--list"]));
    assert!(listed.contains("(stopped)"), "{listed}");
    let again = run(server.client(&here, &key).args(args).args(["--format", "json"]));
    again.expect_status(0);
    let total = bodies.lock().unwrap().len();
    // Each case once, plus at most the one in flight when Ctrl-C came.
    assert!((12..=13).contains(&total), "{total} calls in all");
    assert_eq!(summary(&again.stdout)["totals"]["passed"].as_u64(), Some(12));
    assert!(!here.join(".casebook").exists());

    let out = run(server.client(&here, &key).env("CASEBOOK_URL", "http://127.0.0.1:1").arg("results"));
    let line = one_error(&out, 2);
    assert!(line.starts_with("error: cannot reach the server at http://127.0.0.1:1: "), "{line}");
}
