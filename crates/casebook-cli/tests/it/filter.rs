//! Choosing cases with the filter language: `cases` on files and stored versions, `--where` on
//! `validate` and `export`, the shorthands, grouping, and what a malformed expression reports.

use serde_json::Value;

use crate::cli::{Folder, casebook, cb, run};

/// Six letta rows: tags, a `category:` label, metadata, one multi-turn input.
const ROWS: &str = r#"{"id": 1, "input": "What is 2+2?", "ground_truth": "4", "tags": ["math", "easy"], "metadata": {"difficulty": "easy"}}
{"id": 2, "input": "Integrate x^2", "ground_truth": "x^3/3", "tags": ["math", "category:calculus"], "metadata": {"difficulty": "hard"}}
{"id": 3, "input": "Capital of France?", "ground_truth": "Paris", "tags": ["geo"], "metadata": {"difficulty": "medium"}}
{"id": 4, "input": ["Hi", "What did I say?"], "ground_truth": ["hello", "Hi"], "tags": ["memory", "recall"], "metadata": {"difficulty": "hard"}}
{"id": 5, "input": "Refund my order", "ground_truth": "refund issued", "tags": ["category:support", "math"], "metadata": {"difficulty": "medium"}}
{"id": 6, "input": "Solve 3x = 9", "ground_truth": "3", "tags": ["math", "category:algebra"]}
"#;

fn ok(cmd: &mut assert_cmd::Command) -> String {
    let out = run(cmd);
    assert_eq!(out.status, Some(0), "{out:?}");
    out.stdout
}

/// The ids of the JSON lines `casebook cases --format json` printed.
fn ids(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line")["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// A folder with the rows as `evals.jsonl` and a store holding them as dataset `evals`.
fn stored() -> Folder {
    let dir = Folder::new();
    dir.file("evals.jsonl", ROWS);
    ok(cb(&dir).arg("init"));
    ok(cb(&dir).args(["import", "evals.jsonl", "--dataset", "evals", "-q"]));
    dir
}

#[test]
fn the_same_filter_selects_the_same_cases_in_a_file_and_in_the_store() {
    let dir = stored();
    let filters = [
        (r#"labels contains "math" and metadata.difficulty in ["hard", "medium"]"#, vec!["2", "5"]),
        (r#"len(turns) >= 1"#, vec!["4"]),
        (r#"label.category == "calculus" or label.category == "algebra""#, vec!["2", "6"]),
        (r#"not exists(metadata.difficulty)"#, vec!["6"]),
        (r#"metadata.difficulty != "hard""#, vec!["1", "3", "5"]),
        (r#"input matches "(?i)^refund""#, vec!["5"]),
        (r#"expected.output == "Paris""#, vec!["3"]),
    ];
    for (filter, expected) in filters {
        for source in ["evals.jsonl", "evals", "evals@v1"] {
            let out = ok(cb(&dir).args(["cases", source, "--where", filter, "--format", "json"]));
            assert_eq!(ids(&out), expected, "{source}: {filter}");
        }
    }
}

#[test]
fn tags_limit_count_and_group_by() {
    let dir = stored();
    for source in ["evals.jsonl", "evals"] {
        let out = ok(cb(&dir).args(["cases", source, "--tag", "math", "--tag", "easy", "--format", "json"]));
        assert_eq!(ids(&out), ["1"]);
        let out = ok(cb(&dir).args(["cases", source, "--tag", "math", "--limit", "2", "--format", "json"]));
        assert_eq!(ids(&out), ["1", "2"]);
        assert_eq!(ok(cb(&dir).args(["cases", source, "--tag", "math", "--count"])), "4\n");
        let grouped = ok(cb(&dir).args(["cases", source, "--group-by", "metadata.difficulty"]));
        let expected: String = [("hard", 2), ("medium", 2), ("easy", 1), ("(no metadata.difficulty)", 1)]
            .iter()
            .map(|(value, n)| format!("{value:<24}  {n}\n"))
            .collect();
        assert_eq!(grouped, expected, "{source}");
        let groups = crate::cli::jsonl(&ok(cb(&dir).args([
            "cases",
            source,
            "--group-by",
            "label.category",
            "--format",
            "json",
        ])));
        assert_eq!(groups[0], serde_json::json!({"value": "algebra", "count": 1}));
        assert_eq!(groups[3], serde_json::json!({"missing": true, "count": 3}));
    }
}

#[test]
fn the_human_listing_shows_id_labels_and_input() {
    let dir = stored();
    let out = run(cb(&dir).args(["cases", "evals", "--where", "id == \"3\""]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert_eq!(out.stdout, "3            [geo]                    Capital of France?\n");
    assert_eq!(out.stderr, "1 case of 6 selected\n");
}

#[test]
fn export_and_validate_take_a_filter() {
    let dir = stored();
    let out = ok(cb(&dir).args(["export", "evals", "--where", "len(turns) >= 1", "--to", "letta", "-q"]));
    let rows: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["ground_truth"], serde_json::json!(["hello", "Hi"]));

    // A warning about an unknown field is reported only when its case is selected; errors always.
    let file = dir.file(
        "warn.jsonl",
        "{\"id\": 1, \"input\": \"a\", \"tags\": [\"x\"], \"metdata\": 1}\n{\"id\": 2, \"input\": \"b\", \"tags\": [\"y\"], \"metdata\": 2}\n{\"id\": 3, \"inptu\": \"c\"}\n",
    );
    let out = run(cb(&dir).arg("validate").arg(&file).args(["--where", "labels contains \"y\"", "--format", "json"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let lines: Vec<(String, u64)> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|d| (d["code"].as_str().unwrap().to_owned(), d["line"].as_u64().unwrap()))
        .collect();
    assert!(lines.contains(&("W-unknown-field".to_owned(), 2)), "{lines:?}");
    assert!(lines.iter().all(|(_, line)| *line != 1), "{lines:?}");
    assert!(lines.iter().any(|(code, line)| code.starts_with("E-") && *line == 3), "{lines:?}");
}

#[test]
fn a_malformed_expression_is_a_usage_error_with_a_caret_and_a_hint() {
    let dir = stored();
    let out = run(cb(&dir).args(["cases", "evals", "--where", "labels contains \"math\" and metadata.difficulty = 3"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    let caret_line = out.stderr.lines().find(|l| l.trim() == "^").map(|l| l.find('^').unwrap());
    let expr_line = out.stderr.lines().find(|l| l.contains("metadata.difficulty = 3")).unwrap();
    // The caret is under the `=`.
    assert_eq!(caret_line, Some(expr_line.find(" = ").unwrap() + 1), "{}", out.stderr);
    assert!(out.stderr.contains("at column 48"), "{}", out.stderr);
    assert!(out.stderr.contains("did you mean `==`?"), "{}", out.stderr);

    // Comparing a number field with a string is known to be wrong before reading anything.
    let out = run(cb(&dir).args(["cases", "evals.jsonl", "--where", "confidence == \"high\""]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("at column 15"), "{}", out.stderr);
}

/// A path of 20,000 steps (40 KB) took seconds to read; now the step past the 128th is marked at
/// once, as the server marks it.
#[test]
fn a_path_too_deep_is_refused_at_the_step_past_the_limit() {
    let dir = stored();
    let filter = format!("metadata{} == \"ö\"", ".a".repeat(20_000));
    for source in ["evals", "evals.jsonl"] {
        let out = run(cb(&dir).args(["cases", source, "--where", &filter]));
        assert_eq!(out.status, Some(2), "{out:?}");
        assert!(out.stdout.is_empty());
        assert!(
            out.stderr.contains("invalid `--where`: the path is too long: more than 128 steps at column 265"),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("hint: no case holds a value deeper than 128 levels: shorten the path"),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn help_filter_documents_the_language() {
    let out = ok(casebook().args(["help", "filter"]));
    for needle in ["contains", "matches", "exists(", "len(", "label.", "--tag"] {
        assert!(out.contains(needle), "`casebook help filter` does not mention `{needle}`");
    }
    assert!(ok(casebook().args(["help", "cases"])).contains("--group-by"));
    assert_eq!(run(casebook().args(["help", "nothing"])).status, Some(2));
}
