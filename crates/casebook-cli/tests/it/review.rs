//! `casebook review` on a stored dataset, and what `casebook run` does with review states and
//! label confidence: a review is a new version with its author and time in the log; a mistake
//! or a race writes nothing; a run leaves out rejected and low-confidence cases and says how many,
//! and breaks its pass rates down by review state and confidence band.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::cli::{Backend, Folder, run};

on_both!(
    a_review_is_a_version_the_log_names,
    a_review_that_cannot_be_made_writes_nothing,
    a_stored_run_leaves_out_rejected_and_low_confidence_cases,
);

/// Four cases; the echo agent answers each with its input, so `a` and `c` pass `exact_match`.
const CASES: &str = r#"{"id": "tc-001", "input": "a", "expected": {"output": "a"}, "labels": ["x"]}
{"id": "tc-002", "input": "b", "expected": {"output": "B"}}
{"id": "tc-003", "input": "c", "expected": {"output": "c"}, "labels": ["x"]}
{"id": "tc-004", "input": "d", "expected": {"output": "d"}}
"#;

fn ok(cmd: &mut assert_cmd::Command) -> String {
    let out = run(cmd);
    assert_eq!(out.status, Some(0), "{out:?}");
    out.stdout
}

fn stored(b: &Backend) -> Folder {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file("cases.jsonl", CASES);
    ok(b.cb(&dir).arg("import").arg(&file).args(["--dataset", "qa", "-m", "first"]));
    dir
}

fn case(b: &Backend, dir: &Folder, reference: &str, id: &str) -> Value {
    serde_json::from_str(&ok(b.cb(dir).args(["show", reference, id]))).unwrap()
}

fn versions(b: &Backend, dir: &Folder) -> Vec<Value> {
    crate::cli::log_versions(&ok(b.cb(dir).args(["log", "qa", "--format", "json"])))
}

fn a_review_is_a_version_the_log_names(b: &Backend) {
    let dir = stored(b);
    let out = ok(b.cb(&dir).args(["review", "qa", "tc-001", "tc-002", "--state", "reviewed", "--confidence", "0.9"]));
    assert!(out.starts_with("created qa v2 ") && out.contains(": 4 cases, +0 -0 ~2"), "{out}");
    let first = case(b, &dir, "qa@v2", "tc-001");
    assert_eq!((first["review"].as_str(), first["confidence"].as_f64()), (Some("reviewed"), Some(0.9)));
    assert_eq!(first["expected"]["output"], "a", "the rest of the case is as it was");
    let untouched = case(b, &dir, "qa@v2", "tc-003");
    assert!(untouched.get("review").is_none() && untouched.get("confidence").is_none(), "{untouched}");
    // The version before is as it was.
    assert!(case(b, &dir, "qa@v1", "tc-001").get("review").is_none());

    // By filter, with a message; only the confidence of a reviewed case changes.
    let out = ok(b.cb(&dir).args(["review", "qa", "--where", "labels contains \"x\"", "--confidence", "0.4"]).args([
        "-m",
        "labels checked by Ana",
        "--format",
        "json",
    ]));
    let made: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((made["created"].as_bool(), made["version"]["number"].as_u64()), (Some(true), Some(3)), "{made}");
    assert_eq!(made["version"]["modified"], 2);
    let first = case(b, &dir, "qa", "tc-001");
    assert_eq!((first["review"].as_str(), first["confidence"].as_f64()), (Some("reviewed"), Some(0.4)));
    assert_eq!(case(b, &dir, "qa", "tc-003")["confidence"], 0.4);

    // Ids and a filter together: each case once.
    ok(b.cb(&dir).args(["review", "qa", "tc-004", "tc-001", "--where", "id == \"tc-004\"", "--state", "rejected"]));
    assert_eq!(case(b, &dir, "qa", "tc-004")["review"], "rejected");

    // The same state again: no version.
    let out = ok(b.cb(&dir).args(["review", "qa", "tc-004", "--state", "rejected"]));
    assert!(out.starts_with("no change: qa v4 "), "{out}");

    let log = versions(b, &dir);
    assert_eq!(log.len(), 4, "{log:?}");
    let messages: Vec<&str> = log.iter().map(|v| v["message"].as_str().unwrap()).collect();
    assert_eq!(
        messages,
        ["first", "review: 2 cases reviewed (confidence 0.9)", "labels checked by Ana", "review: 2 cases rejected"]
    );
    for v in &log {
        assert_eq!((v["author"].as_str(), v["time"].as_str()), (Some("tester"), Some("2026-11-23T10:00:00Z")), "{v}");
    }
    let human = ok(b.cb(&dir).args(["log", "qa"]));
    assert!(human.contains("tester  2026-11-23T10:00:00Z  +0 -0 ~2  4 cases  labels checked by Ana"), "{human}");
}

fn a_review_that_cannot_be_made_writes_nothing(b: &Backend) {
    let dir = stored(b);
    // An id the head lacks is named, with the one it is a typo of.
    let out = run(b.cb(&dir).args(["review", "qa", "tc-001", "tc-0002", "--state", "reviewed"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert_eq!(
        out.stderr.trim_end(),
        "error: qa v1 has no case `tc-0002`; did you mean `tc-002`?: nothing was written",
        "{out:?}"
    );
    assert_eq!(versions(b, &dir).len(), 1);
    assert!(case(b, &dir, "qa", "tc-001").get("review").is_none(), "tc-001 was not written either");

    // A confidence outside 0..1, or not a number, is a usage error.
    for bad in ["1.5", "-0.1", "high", "NaN"] {
        let out = run(b.cb(&dir).args(["review", "qa", "tc-001", "--confidence", bad]));
        assert_eq!(out.status, Some(2), "{bad}: {out:?}");
        assert!(out.stderr.contains("a confidence is from 0 to 1"), "{bad}: {out:?}");
    }
    // Something to set, and cases to set it on, are needed.
    assert_eq!(run(b.cb(&dir).args(["review", "qa", "tc-001"])).status, Some(2));
    assert_eq!(run(b.cb(&dir).args(["review", "qa", "--state", "draft"])).status, Some(2));
    let out = run(b.cb(&dir).args(["review", "qa", "--where", "id == \"none\"", "--state", "draft"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("the selection chooses no case of qa v1: nothing was written"), "{out:?}");
    assert_eq!(versions(b, &dir).len(), 1);

    // The head moved after the version this review builds on: a conflict, not a lost update.
    ok(b.cb(&dir).args(["review", "qa", "tc-002", "--state", "draft"]));
    let out = run(b.cb(&dir).args(["review", "qa", "tc-001", "--state", "rejected", "--parent", "v1"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(
        out.stderr.contains(
            "dataset `qa` moved on while this commit was prepared: its head is v2, the commit was made on v1"
        ),
        "{out:?}"
    );
    assert_eq!(versions(b, &dir).len(), 2);
    assert!(case(b, &dir, "qa", "tc-001").get("review").is_none());
    assert_eq!(case(b, &dir, "qa", "tc-002")["review"], "draft", "the change that landed is kept");
    // On the head, it lands.
    ok(b.cb(&dir).args(["review", "qa", "tc-001", "--state", "rejected", "--parent", "v2"]));
    assert_eq!(case(b, &dir, "qa", "tc-001")["review"], "rejected");
}

/// The cases of [`CASES`] with review states and confidences: tc-001 reviewed 0.9 (passes),
/// tc-002 draft 0.6 (fails), tc-003 rejected 0.95 (would pass), tc-004 unreviewed 0.3 (passes).
const RATED: &str = r#"{"id": "tc-001", "input": "a", "expected": {"output": "a"}, "labels": ["x"], "review": "reviewed", "confidence": 0.9}
{"id": "tc-002", "input": "b", "expected": {"output": "B"}, "review": "draft", "confidence": 0.6}
{"id": "tc-003", "input": "c", "expected": {"output": "c"}, "labels": ["x"], "review": "rejected", "confidence": 0.95}
{"id": "tc-004", "input": "d", "expected": {"output": "d"}, "confidence": 0.3}
{"id": "tc-005", "input": "e", "expected": {"output": "e"}}
"#;

fn summary(out: &crate::cli::Run) -> Value {
    serde_json::from_str(out.stdout.lines().last().expect("a summary")).expect("JSON")
}

fn selection(s: &Value) -> (u64, u64, [u64; 4]) {
    let sel = &s["meta"]["selection"];
    let left = &sel["left_out"];
    let n = |v: &Value| v.as_u64().unwrap();
    (
        n(&sel["cases"]),
        n(&sel["run"]),
        [n(&left["filter"]), n(&left["rejected"]), n(&left["min_confidence"]), n(&left["limit"])],
    )
}

/// `(name, results, passed, failed, errors)` of each group of a breakdown.
fn groups(s: &Value, part: &str, key: &str) -> Vec<(String, u64, u64, u64, u64)> {
    s[part]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let n = |k: &str| g[k].as_u64().unwrap();
            (g[key].as_str().unwrap().to_owned(), n("results"), n("passed"), n("failed"), n("errors"))
        })
        .collect()
}

/// What a run of [`RATED`] (a file or a stored version) reports, with and without the options.
fn check_runs(b: &Backend, dir: &Folder, dataset: &str) {
    let base = ["run", "--dataset", dataset, "--target", "builtin:echo", "--grader", "exact_match", "--format", "json"];
    // By default only the rejected case is left out.
    let s = summary(&run(b.cb(dir).args(base)));
    assert_eq!(selection(&s), (5, 4, [0, 1, 0, 0]), "{s}");
    assert_eq!(s["totals"]["results"], 4);
    assert_eq!(
        groups(&s, "review", "review"),
        [("reviewed".into(), 1, 1, 0, 0), ("draft".into(), 1, 0, 1, 0), ("unreviewed".into(), 2, 2, 0, 0)],
        "{s}"
    );
    assert_eq!(
        groups(&s, "confidence", "band"),
        [
            ("< 0.5".into(), 1, 1, 0, 0),
            ("0.5–0.8".into(), 1, 0, 1, 0),
            ("≥ 0.8".into(), 1, 1, 0, 0),
            ("unrated".into(), 1, 1, 0, 0)
        ],
        "{s}"
    );
    assert_eq!(s["review"][1]["pass_rate"], 0.0);

    // Below 0.5 goes; without a confidence stays.
    let s = summary(&run(b.cb(dir).args(base).args(["--min-confidence", "0.5"])));
    assert_eq!(selection(&s), (5, 3, [0, 1, 1, 0]), "{s}");
    let ids: Vec<&str> = s["confidence"].as_array().unwrap().iter().map(|g| g["band"].as_str().unwrap()).collect();
    assert_eq!(ids, ["0.5–0.8", "≥ 0.8", "unrated"]);
    assert_eq!(s["meta"]["selection"]["min_confidence"], 0.5);

    // Rejected cases asked for, a filter and a limit: each counted once, in that order.
    let s = summary(&run(b.cb(dir).args(base).args([
        "--include-rejected",
        "--min-confidence",
        "0.5",
        "--where",
        "id != \"tc-002\"",
    ])));
    assert_eq!(selection(&s), (5, 3, [1, 0, 1, 0]), "{s}");
    assert_eq!(groups(&s, "review", "review")[1], ("rejected".into(), 1, 1, 0, 0), "{s}");

    let exp = dir.file(
        "exp.yaml",
        format!(
            "dataset: {dataset}\ntarget: 'builtin:echo'\ngraders: [{{kind: exact_match}}]\nlimit: 1\nmin_confidence: 0.95\n"
        ),
    );
    let s = summary(&run(b.cb(dir).args(["run", "--format", "json"]).arg(&exp)));
    // tc-001 (0.9), tc-002 (0.6) and tc-004 (0.3) are below 0.95 and tc-003 is rejected: tc-005
    // (unrated) is the one left, within the limit.
    assert_eq!(selection(&s), (5, 1, [0, 1, 3, 0]), "{s}");
    // The flag replaces the file's value; the limit then leaves one out.
    let s = summary(&run(b.cb(dir).args(["run", "--format", "json", "--min-confidence", "0.9"]).arg(&exp)));
    assert_eq!(selection(&s), (5, 1, [0, 1, 2, 1]), "{s}");

    // The human summary says it too.
    let out = run(b.cb(dir).args(["run", "--dataset", dataset, "--target", "builtin:echo", "--grader", "exact_match"]));
    assert!(out.stdout.contains("5 cases, 4 run; left out: 1 rejected\n"), "{out:?}");
    assert!(out.stdout.contains("review draft                           1     0.0 %   0.000      0\n"), "{out:?}");
}

#[test]
fn a_file_run_leaves_out_rejected_and_low_confidence_cases() {
    let dir = Folder::new();
    dir.file("rated.jsonl", RATED);
    check_runs(&Backend::Embedded, &dir, "rated.jsonl");
}

fn a_stored_run_leaves_out_rejected_and_low_confidence_cases(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file("rated.jsonl", RATED);
    ok(b.cb(&dir).arg("import").arg(&file).args(["--dataset", "rated"]));
    check_runs(b, &dir, "rated@latest");
    // A review changes what the next run leaves out; stored results keep the state they ran with.
    ok(b.cb(&dir).args(["review", "rated", "tc-003", "--state", "reviewed"]));
    let s = summary(&run(b.cb(&dir).args([
        "run",
        "--dataset",
        "rated",
        "--target",
        "builtin:echo",
        "--grader",
        "exact_match",
        "--format",
        "json",
    ])));
    assert_eq!(selection(&s), (5, 5, [0, 0, 0, 0]), "{s}");
    assert_eq!(groups(&s, "review", "review")[0], ("reviewed".into(), 2, 2, 0, 0), "{s}");
    let again: Value = serde_json::from_str(&ok(b.cb(&dir).args(["results", "--format", "json"]))).unwrap();
    assert_eq!(again["review"], s["review"]);
    assert_eq!(again["meta"]["selection"], s["meta"]["selection"]);
}
