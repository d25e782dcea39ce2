//! `casebook inspect --format json`: the format, the number of cases and how labels are used.

use serde_json::{Value, json};

use crate::cli::{Folder, casebook, run};

fn inspect_json(file: &std::path::Path) -> (crate::cli::Run, Value) {
    let r = run(casebook().arg("inspect").arg(file).args(["--format", "json"]));
    let report: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{r:?}"));
    (r, report)
}

#[test]
fn inspect_a_letta_file() {
    let dir = Folder::new();
    let file = dir.file(
        "samples.jsonl",
        r#"{"id": 1, "input": "a", "ground_truth": "x", "tags": ["math", "easy"]}
{"id": 2, "input": ["b", "c"], "ground_truth": ["y", "z"], "tags": ["math"]}
{"id": 3, "input": "d"}
"#,
    );
    let (r, report) = inspect_json(&file);
    r.expect_status(0);
    assert_eq!(report["format"], "letta");
    assert_eq!(report["syntax"], "jsonl");
    assert_eq!(report["cases"], 3);
    assert_eq!(report["errors"], 0);
    assert_eq!(report["labels"], json!({"easy": 1, "math": 2}));
    assert_eq!(report["messages"], json!({"1": 2, "2": 1}));
    // For people, in words.
    let human = run(casebook().arg("inspect").arg(&file));
    assert!(human.stdout.contains("messages  2 cases send 1 message, 1 case sends 2 messages\n"), "{}", human.stdout);
}

#[test]
fn inspect_a_maslab_manifest() {
    let dir = Folder::new();
    let file = dir.file(
        "trips.yaml",
        "apiVersion: lab/v1
kind: Dataset
metadata:
  name: trips
spec:
  items:
  - id: one
    prompt: Cheapest train to Turin?
    category: cold-start
  - id: two
    inputs:
      user:
      - role: user
        content: Book my usual route.
      hitl:
      - role: hitl
        content: Approved.
    category: personalised
    tags: [travel]
",
    );
    let (r, report) = inspect_json(&file);
    r.expect_status(0);
    assert_eq!(report["format"], "maslab");
    assert_eq!(report["syntax"], "yaml");
    assert_eq!(report["name"], "trips");
    assert_eq!(report["cases"], 2);
    assert_eq!(report["labels"], json!({"category:cold-start": 1, "category:personalised": 1, "travel": 1}));
    assert_eq!(report["hitl_turns"], 1);
}

#[test]
fn inspect_counts_the_errors_of_an_invalid_file() {
    let dir = Folder::new();
    let file = dir.file("samples.jsonl", "{\"id\": 1, \"input\": \"a\"}\n{\"id\": 2}\n");
    let (r, report) = inspect_json(&file);
    r.expect_status(1);
    assert_eq!(report["cases"], 1);
    assert_eq!(report["errors"], 1);
}

/// Rows without an id: `inspect` says how many ids it derived and how many of those are
/// positional (rows wholly identical to an earlier one), as `import` does.
#[test]
fn inspect_says_how_many_ids_were_made_and_how_many_by_position() {
    let dir = Folder::new();
    let file = dir.file(
        "gare.jsonl",
        "{\"input\": \"Où est la gare ?\", \"ground_truth\": \"à gauche\"}\n\
         {\"input\": \"Où est la gare ?\", \"ground_truth\": \"左です\"}\n\
         {\"id\": \"k1\", \"input\": \"hi\"}\n\
         {\"input\": \"Où est la gare ?\", \"ground_truth\": \"左です\"}\n\
         {\"input\": \"Où est la gare ?\", \"ground_truth\": \"左です\"}\n",
    );
    let (r, report) = inspect_json(&file);
    r.expect_status(0);
    assert_eq!((&report["derived_ids"], &report["positional_ids"]), (&json!(4), &json!(2)), "{report}");
    let human = run(casebook().arg("inspect").arg(&file));
    assert!(
        human.stdout.contains("cases     5 (4 with derived ids, 2 of them numbered by position)\n"),
        "{}",
        human.stdout
    );
    // Derived but none positional; none derived.
    let one = dir.file("one.jsonl", "{\"input\": \"Et la poste ?\"}\n{\"input\": \"Et la gare ?\"}\n");
    let (_, report) = inspect_json(&one);
    assert_eq!((&report["derived_ids"], &report["positional_ids"]), (&json!(2), &json!(0)), "{report}");
    assert!(run(casebook().arg("inspect").arg(&one)).stdout.contains("cases     2 (2 with derived ids)\n"));
    let named = dir.file("named.jsonl", "{\"id\": \"k\", \"input\": \"hi\"}\n");
    let (_, report) = inspect_json(&named);
    assert_eq!((&report["derived_ids"], &report["positional_ids"]), (&json!(0), &json!(0)), "{report}");
}

#[test]
fn inspect_counts_recorded_tool_answers_and_queries_not_run() {
    let dir = Folder::new();
    dir.file("snapshots/incident.json", r#"[{"result": "pool exhausted — 東京"}, {"when": {"includes": {"m": "cpu"}}, "query": {"url": "http://m/{m}"}}]"#);
    let file = dir.file(
        "incidents.jsonl",
        r#"{"id": "a", "input": "why?", "tools": [{"name": "logs", "responses": "snapshots/incident.json"}, {"name": "ping"}, {"name": "metrics", "default": "empty"}]}
{"id": "b", "input": "why?!", "tools": [{"name": "logs", "responses": [{"when": {"matches": {"q": "^zürich"}}, "result": 1}, {"when": {"includes": {"q": "x"}}, "query": {"command": ["fetch", "{q}"]}}]}]}
"#,
    );
    let (r, report) = inspect_json(&file);
    r.expect_status(0);
    assert_eq!(
        (&report["recorded_tools"], &report["responses"], &report["unfrozen_queries"], &report["warnings"]),
        (&json!(3), &json!(4), &json!(2), &json!(2))
    );
    let human = run(casebook().arg("inspect").arg(&file));
    assert!(
        human.stdout.contains(
            "snapshot  3 tools with recorded answers, 4 responses (2 queries not run yet: `casebook freeze` records them)\n"
        ),
        "{}",
        human.stdout
    );
}

/// Inspect samples without ids (the shape of Inspect's `samples.jsonl` fixtures, one with an id
/// of its own between them): Inspect numbers them 1..n by their place among the samples and
/// its logs use those ids, and `inspect` says so rather than calling them derived.
#[test]
fn inspect_says_inspect_samples_without_ids_are_numbered_as_inspect_numbers_them() {
    let dir = Folder::new();
    let file = dir.file(
        "mc.jsonl",
        "{\"input\": \"Red planet?\", \"choices\": [\"Venus\", \"Mars\"], \"target\": \"B\"}\n\
         {\"id\": \"own\", \"input\": \"Blue planet?\", \"choices\": [\"Earth\", \"Mars\"], \"target\": \"A\"}\n\
         {\"input\": \"Red planet?\", \"choices\": [\"Venus\", \"Mars\"], \"target\": \"B\"}\n",
    );
    let (r, report) = inspect_json(&file);
    r.expect_status(0);
    assert_eq!(report["format"], "inspect", "{report}");
    assert_eq!(report["inspect_numbered"], json!(2), "{report}");
    assert_eq!(report["derived"], json!([{"row": 0, "id": "1"}, {"row": 2, "id": "3"}]), "{report}");
    let human = run(casebook().arg("inspect").arg(&file));
    assert!(
        human.stdout.contains(
            "cases     3 (2 without an id, numbered 1..n by place as Inspect numbers them)\n\
             ids by place, as Inspect's logs name them (row in the file → id)\n"
        ),
        "{}",
        human.stdout
    );
    assert!(!human.stdout.contains("derived"), "{}", human.stdout);
    // Another format's rows without ids are not told as Inspect's.
    let letta = dir.file("letta.jsonl", "{\"input\": \"Et la gare ?\"}\n");
    let (_, report) = inspect_json(&letta);
    assert!(report.get("inspect_numbered").is_none(), "{report}");
}
