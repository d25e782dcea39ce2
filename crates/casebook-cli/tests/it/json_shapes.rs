//! `--format json` gives one shape per kind of answer (README, "Conventions"): a single answer
//! is one object on one line, a list is one object a line (`diff` ending with a `{"summary": …}`
//! line), nothing else on stdout. Every command that reports runs here on a small store and its
//! output is parsed by the shape the README documents.

use std::path::PathBuf;

use serde_json::Value;

use crate::cli::{Folder, Run, cb, run};

/// A file of the repository's `examples/`.
fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    /// One object, on one line.
    One,
    /// One object a line, as many as there are things.
    Lines,
}

/// `casebook --format json ARGS…` in `dir`; its stdout parsed by `shape` (exit 0, or 1 where
/// the answer is a failure: a run below its threshold).
#[track_caller]
fn json(dir: &Folder, shape: Shape, args: &[&str]) -> Vec<Value> {
    let out: Run = run(cb(dir).arg("--format").arg("json").args(args));
    assert!(matches!(out.status, Some(0 | 1)), "{args:?}: {out:?}");
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {line}"));
            assert!(value.is_object(), "{args:?}: not an object: {line}");
            value
        })
        .collect();
    assert!(out.stdout.is_empty() || out.stdout.ends_with('\n'), "{args:?}: {out:?}");
    if shape == Shape::One {
        assert_eq!(lines.len(), 1, "{args:?}: not one object on one line:\n{out:?}");
    }
    lines
}

#[test]
fn every_command_answers_one_object_or_one_object_a_line() {
    use Shape::{Lines, One};
    let dir = Folder::new();
    let support = example("letta/support.jsonl");
    let support = support.to_str().unwrap();
    // The example with one answer changed, and one more case (the shape of letta rows).
    let edited = fs_err::read_to_string(support).unwrap().replace("5 business days", "7 business days");
    dir.file("edited.jsonl", edited);
    dir.file("more.jsonl", "{\"id\": 9, \"input\": \"hi\", \"ground_truth\": \"hello\"}\n");
    dir.file("warn.jsonl", "{\"id\": 1, \"input\": \"hi\", \"ground_truth\": \"hi\", \"tgas\": [\"a\"]}\n");

    assert_eq!(json(&dir, One, &["init"])[0]["created"], true);
    let imported = json(&dir, One, &["import", support, "--dataset", "support", "-m", "first"]);
    assert_eq!(imported[0]["version"]["number"], 1);
    assert_eq!(json(&dir, One, &["commit", "support", "edited.jsonl", "-m", "second"])[0]["version"]["number"], 2);
    assert_eq!(json(&dir, One, &["put", "support", "more.jsonl"])[0]["version"]["number"], 3);
    assert_eq!(json(&dir, One, &["rm", "support", "9"])[0]["version"]["number"], 4);
    assert_eq!(json(&dir, One, &["review", "support", "1", "--state", "reviewed"])[0]["version"]["number"], 5);
    assert_eq!(json(&dir, One, &["tag", "support@v2", "prod"])[0]["version"], 2);

    let datasets = json(&dir, Lines, &["datasets"]);
    assert_eq!((datasets.len(), &datasets[0]["name"]), (1, &Value::from("support")));
    // The versions oldest first, then the other events, each with its kind.
    let log = json(&dir, Lines, &["log", "support"]);
    let kinds: Vec<&str> = log.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["version", "version", "version", "version", "version", "tag"]);
    assert_eq!((&log[0]["number"], &log[1]["message"]), (&Value::from(1), &Value::from("second")));
    assert_eq!(json(&dir, One, &["show", "support@prod"])[0]["number"], 2);
    assert_eq!(json(&dir, One, &["show", "support@prod", "1"])[0]["expected"]["output"], "7 business days");
    assert_eq!(json(&dir, Lines, &["history", "support", "1"]).len(), 3);
    // The changed cases, then what was compared.
    let diff = json(&dir, Lines, &["diff", "support@v1", "support@v2"]);
    assert_eq!(diff[0]["change"], "modified");
    assert_eq!(diff[0]["changes"][0]["pointer"], "/expected/output");
    assert_eq!(
        diff[1],
        serde_json::json!({"summary": {"dataset": "support", "from": 1, "to": 2, "added": 0, "removed": 0, "modified": 1, "moved": 0}})
    );
    assert_eq!(json(&dir, Lines, &["cases", "support@v2"]).len(), 4);
    assert_eq!(json(&dir, One, &["cases", "support@v2", "--count"])[0]["count"], 4);
    let groups = json(&dir, Lines, &["cases", "support@v2", "--group-by", "metadata.owner"]);
    assert_eq!(
        groups,
        [serde_json::json!({"value": "support-team", "count": 1}), serde_json::json!({"missing": true, "count": 3})]
    );
    assert_eq!(json(&dir, Lines, &["cases", support, "--where", "id == \"1\""]).len(), 1);
    assert_eq!(json(&dir, One, &["inspect", support])[0]["cases"], 4);
    assert_eq!(json(&dir, One, &["schema"])[0]["$id"], "https://casebook.dev/schema/dataset.json");

    // Diagnostics are the answer of `validate` and `lint`: one a line (none when clean).
    assert!(json(&dir, Lines, &["validate", support]).is_empty());
    let validated = json(&dir, Lines, &["validate", "warn.jsonl", support]);
    assert_eq!((validated.len(), &validated[0]["code"]), (1, &Value::from("W-unknown-field")));
    assert_eq!(json(&dir, Lines, &["lint", "warn.jsonl"])[0]["code"], "W-leaked-ground-truth");
    assert!(json(&dir, Lines, &["lint", "support@v2"]).is_empty());

    // A run's summary is its answer, and so is a comparison's; stored runs are a list.
    let summary =
        json(&dir, One, &["run", "--dataset", "support@v2", "--target", "builtin:echo", "--grader", "contains"]);
    assert_eq!(summary[0]["totals"]["results"], 4);
    json(&dir, One, &["run", "--dataset", "support@v2", "--target", "builtin:echo", "--grader", "contains"]);
    assert_eq!(json(&dir, One, &["results"])[0]["totals"]["results"], 4);
    assert_eq!(json(&dir, Lines, &["results", "--list"]).len(), 2);
    // The case with only a rubric is an error in both runs, so it pairs with nothing.
    assert_eq!(json(&dir, One, &["compare", "previous", "latest"])[0]["pairs"], 3);

    assert_eq!(json(&dir, One, &["store", "check"])[0]["problems"], serde_json::json!([]));
    assert_eq!(json(&dir, One, &["store", "gc", "--dry-run"])[0]["dry_run"], true);
    let traces = example("traces/genai-agent.json");
    let captured = json(&dir, One, &["capture", traces.to_str().unwrap(), "--dataset", "traces"]);
    assert_eq!(captured[0]["invocations"], 1);
    let freeze = example("investigation/incidents.yaml");
    assert_eq!(json(&dir, One, &["freeze", freeze.to_str().unwrap(), "--dry-run"])[0]["queries"], 0);
    assert_eq!(
        json(&dir, One, &["keys", "create", "--project", "default", "--scope", "read"])[0]["key"]["scope"],
        "read"
    );
    json(&dir, One, &["keys", "create", "--project", "default", "--scope", "write"]);
    assert_eq!(json(&dir, Lines, &["keys", "list"]).len(), 2);

    // Data is written as its format says: native JSON lines here.
    assert_eq!(json(&dir, Lines, &["export", "support@v2", "--to", "casebook"]).len(), 4);
    assert_eq!(json(&dir, Lines, &["convert", support, "--to", "casebook"]).len(), 4);
}
