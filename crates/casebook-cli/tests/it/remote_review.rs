//! `casebook review` through a team server (`CASEBOOK_URL` and a key, no store here): the same
//! versions, messages and refusals as on a local store, made by the server's review route.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::cli::{Backend, Folder, run};
use crate::remote::{PROJECT, Server, ok, owner, push};

on_both!(a_remote_review_is_a_version_on_the_server);

const CASES: &str = r#"{"id": "tc-001", "input": "a", "expected": {"output": "a"}, "labels": ["x"], "review": "draft"}
{"id": "tc-002", "input": "b", "expected": {"output": "B"}, "review": "draft"}
{"id": "tc-003", "input": "c", "expected": {"output": "c"}, "labels": ["x"], "review": "draft"}
"#;

fn a_remote_review_is_a_version_on_the_server(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let writer = Server::key(b, &dir, PROJECT, "write");
    let reader = Server::key(b, &dir, PROJECT, "read");
    push(&server, &dir, &writer, "qa", &dir.file("qa.jsonl", CASES));
    let here = Folder::new();
    let review = |key: &str, args: &[&str]| run(server.client(&here, key).arg("review").args(args));

    let out = review(&writer, &["qa", "tc-002", "--state", "reviewed", "--confidence", "0.8"]);
    out.expect_status(0);
    assert!(out.stdout.starts_with("created qa v2 ") && out.stdout.contains(": 3 cases, +0 -0 ~1"), "{out:?}");
    assert!(
        out.stderr.contains(&format!("wrote qa@v2 to the server at {}, project `{PROJECT}`", server.url)),
        "{out:?}"
    );
    assert!(!here.join(".casebook").exists(), "no store was made here");
    let shown: Value = serde_json::from_str(&ok(owner(b, &dir).args(["show", "qa@v2", "tc-002"]))).unwrap();
    assert_eq!((shown["review"].as_str(), shown["confidence"].as_f64()), (Some("reviewed"), Some(0.8)));
    let log = ok(owner(b, &dir).args(["log", "qa"]));
    assert!(log.contains("review: 1 case reviewed (confidence 0.8)"), "{log}");
    assert!(log.contains("tester (key "), "the author is the user, with the key: {log}");

    // By filter, at most one of the two it selects, in JSON.
    let out = review(
        &writer,
        &["qa", "--where", "labels contains \"x\"", "--limit", "1", "--state", "rejected", "--format", "json"],
    );
    out.expect_status(0);
    let made: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!((made["created"].as_bool(), made["version"]["number"].as_u64()), (Some(true), Some(3)), "{made}");
    assert_eq!(made["version"]["modified"], 1);

    // Refusals write nothing: a read key, a typo, an empty selection, a stale base.
    let out = review(&reader, &["qa", "tc-001", "--state", "reviewed"]);
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("write"), "{out:?}");
    let out = review(&writer, &["qa", "tc-0001", "--state", "reviewed"]);
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("qa v3 has no case `tc-0001`; did you mean `tc-001`?: nothing was written"), "{out:?}");
    let out = review(&writer, &["qa", "--where", "id == \"none\"", "--state", "draft"]);
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("the selection chooses no case of qa v3: nothing was written"), "{out:?}");
    let out = review(&writer, &["qa", "tc-001", "--state", "reviewed", "--parent", "v2"]);
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("its head is v3, the commit was made on v2"), "{out:?}");
    let log = crate::cli::log_versions(&ok(owner(b, &dir).args(["log", "qa", "--format", "json"])));
    assert_eq!(log.len(), 3, "{log:?}");
}
