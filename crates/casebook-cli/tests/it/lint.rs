//! `casebook lint`: hygiene warnings with their case ids and, for files, lines and columns; on
//! stored versions of both backends; `--against`, `--allow`, `--deny warnings` and exit codes.

use std::path::Path;

use serde_json::Value;

use crate::cli::{Folder, Loc, at, casebook, cb, message, postgres_database, run};

/// `casebook lint --format json ARGS…` in `dir`.
fn lint(dir: &Folder, args: &[&str]) -> crate::cli::Run {
    run(cb(dir).args(["lint", "--format", "json"]).args(args))
}

/// Code, case id, line, column and pointer of each diagnostic.
fn found(run: &crate::cli::Run) -> Vec<(Loc, String)> {
    run.diagnostics().iter().map(|d| (Loc::of(d), d["case"].as_str().unwrap_or_default().to_owned())).collect()
}

fn w(code: &str, line: u64, column: u64, pointer: &str, case: &str) -> (Loc, String) {
    (at(code, line, column, pointer), case.to_owned())
}

const LETTA: &str = r#"{"id": "q1", "input": "What is the capital of France?", "ground_truth": "Paris", "tags": ["geography"]}
{"id": "q2", "input": "What is the capital of France?", "ground_truth": "Paris", "tags": ["geography"]}
{"id": "q3", "input": "what is the capital of  FRANCE?", "ground_truth": "Lyon", "tags": ["geograpy"]}
{"id": "q4", "input": "Name the capital of Peru. Hint: Lima.", "ground_truth": "Lima", "tags": ["geography"]}
{"id": "q5", "input": "Tell me a joke", "tags": ["geography"]}
{"id": "q6", "input": "How many apples are there in 40 boxes of 4.5?", "ground_truth": "4", "tags": ["math"]}
"#;

#[test]
fn every_warning_names_its_case_line_and_column() {
    let dir = Folder::new();
    dir.file("data.jsonl", LETTA);
    let run = lint(&dir, &["data.jsonl"]);
    run.expect_status(0);
    assert_eq!(
        found(&run),
        [
            w("W-duplicate-input", 2, 8, "/input", "q2"),
            w("W-conflicting-expectations", 3, 8, "/input", "q3"),
            w("W-leaked-ground-truth", 4, 8, "/input", "q4"),
            // The record itself: a letta row has no field for what it lacks.
            w("W-no-expectations", 5, 8, "", "q5"),
            w("W-label-typo", 3, 8, "/tags/0", "q3"),
        ]
    );
    let diagnostics = run.diagnostics();
    // Beside the pointer into the row, the casebook path.
    let paths: Vec<&str> = diagnostics.iter().map(|d| d["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/input", "/input", "/input", "/expected", "/labels/0"]);
    assert_eq!(message(&diagnostics[0]), "case `q2` asks the agent exactly the same as case `q1` (line 1)");
    assert_eq!(
        message(&diagnostics[1]),
        "case `q3` asks the agent the same as case `q1` (line 1) (ignoring letter case and spacing) but expects something else"
    );
    assert_eq!(
        message(&diagnostics[2]),
        "the expectation at /ground_truth (`Lima`) is in what the agent sees, at /input"
    );
    assert_eq!(message(&diagnostics[4]), "label `geograpy` (1 case) looks like a misspelling of `geography` (4 cases)");
    assert!(diagnostics.iter().all(|d| d["file"] == "data.jsonl" && d["severity"] == "warning"));
    // `4` is not in `40` nor in `4.5`: q6 is clean.
    assert!(!run.stdout.contains("q6"), "{run:?}");
}

#[test]
fn deny_warnings_fails_and_allow_leaves_codes_out() {
    let dir = Folder::new();
    dir.file("data.jsonl", LETTA);
    lint(&dir, &["data.jsonl", "--deny", "warnings"]).expect_status(1);
    let run = lint(
        &dir,
        &[
            "data.jsonl",
            "--deny",
            "warnings",
            "--allow",
            "W-duplicate-input",
            "--allow",
            "W-conflicting-expectations",
            "--allow",
            "W-leaked-ground-truth",
            "--allow",
            "w-no-expectations",
            "--allow",
            "W-label-typo",
        ],
    );
    run.expect_status(0);
    assert_eq!(run.stdout, "");
    // A clean file passes `--deny warnings`.
    dir.file("clean.jsonl", "{\"id\": \"a\", \"input\": \"2+2?\", \"ground_truth\": \"4\"}\n");
    lint(&dir, &["clean.jsonl", "--deny", "warnings"]).expect_status(0);
}

#[test]
fn usage_errors_exit_2() {
    let dir = Folder::new();
    dir.file("data.jsonl", LETTA);
    let run = lint(&dir, &["data.jsonl", "--allow", "W-nonsense"]);
    run.expect_status(2);
    assert!(run.stderr.contains("W-leaked-ground-truth"), "{run:?}");
    let run = lint(&dir, &["data.jsonl", "--min-confidence", "1.5"]);
    run.expect_status(2);
    assert!(run.stderr.contains("`1.5` is outside 0..1: a confidence is from 0 to 1"), "{run:?}");
    lint(&dir, &["data.jsonl", "--deny", "everything"]).expect_status(2);
    let run = lint(&dir, &["missing.jsonl"]);
    run.expect_status(2);
    assert!(run.stderr.contains("missing.jsonl"), "{run:?}");
}

#[test]
fn a_file_with_errors_is_reported_and_fails() {
    let dir = Folder::new();
    dir.file(
        "data.jsonl",
        "{\"id\": \"a\", \"input\": \"x\", \"ground_truth\": \"y\"}\n{\"id\": \"b\", \"input\": 42}\n",
    );
    let run = lint(&dir, &["data.jsonl"]);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-wrong-type", 2, 22, "/input")]);
}

#[test]
fn review_state_and_confidence_warnings_in_a_native_yaml_file() {
    let dir = Folder::new();
    dir.file(
        "set.yaml",
        "name: set
cases:
  - id: sure
    input: 2+2?
    expected: {output: '4'}
    confidence: 0.95
  - id: shaky
    input: 3+3?
    expected: {output: '6'}
    confidence: 0.3
  - id: wrong
    input: 4+4?
    expected: {output: '9'}
    review: rejected
",
    );
    let run = lint(&dir, &["set.yaml"]);
    run.expect_status(0);
    assert_eq!(
        found(&run),
        [w("W-low-confidence", 7, 9, "/confidence", "shaky"), w("W-rejected-case", 11, 9, "/review", "wrong")]
    );
    // The threshold is a flag.
    let run = lint(&dir, &["set.yaml", "--min-confidence", "0.2"]);
    assert_eq!(found(&run), [w("W-rejected-case", 11, 9, "/review", "wrong")]);
    let run = lint(&dir, &["set.yaml", "--min-confidence", "0.99"]);
    assert_eq!(run.diagnostics().len(), 3, "{run:?}");
}

#[test]
fn rows_without_ids_are_named_by_their_derived_ids_and_csv_lines() {
    let dir = Folder::new();
    // Repeated prompts in a letta CSV without ids, one record over two lines, non-ASCII text.
    dir.file(
        "data.csv",
        "input,ground_truth\n\"Quelle est la capitale\nde la France ?\",Paris\nÉCOLE,école\n\"quelle est la capitale de la france ?\",Paris\n",
    );
    let run = lint(&dir, &["data.csv"]);
    run.expect_status(0);
    let diagnostics = run.diagnostics();
    let codes: Vec<(String, u64)> =
        diagnostics.iter().map(|d| (d["code"].as_str().unwrap().to_owned(), d["line"].as_u64().unwrap())).collect();
    assert_eq!(codes, [("W-leaked-ground-truth".to_owned(), 4), ("W-near-duplicate-input".to_owned(), 5)]);
    // Named by their derived ids, which `casebook cases` shows too.
    let listed = run_ok(cb(&dir).args(["cases", "data.csv", "--format", "json"]));
    let ids: Vec<String> =
        listed.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(diagnostics[0]["case"], ids[1].as_str());
    assert_eq!(diagnostics[1]["case"], ids[2].as_str());
    assert!(message(&diagnostics[1]).contains(&format!("case `{}` (line 2)", ids[0])), "{run:?}");
}

fn run_ok(cmd: &mut assert_cmd::Command) -> String {
    let done = run(cmd);
    done.expect_status(0);
    done.stdout
}

#[test]
fn against_another_dataset_finds_shared_inputs() {
    let dir = Folder::new();
    dir.file("train.jsonl", "{\"id\": \"t1\", \"input\": \"Translate 'cat' to French\", \"ground_truth\": \"chat\"}\n");
    dir.file(
        "eval.jsonl",
        "{\"id\": \"e1\", \"input\": \"Translate 'dog' to French\", \"ground_truth\": \"chien\"}\n{\"id\": \"e2\", \"input\": \"translate 'cat' to  french\", \"ground_truth\": \"chat\"}\n",
    );
    let run = lint(&dir, &["eval.jsonl", "--against", "train.jsonl"]);
    run.expect_status(0);
    assert_eq!(found(&run), [w("W-overlapping-input", 2, 8, "/input", "e2")]);
    assert_eq!(message(&run.diagnostics()[0]), "the input of case `e2` is also in `train.jsonl` (case `t1`)");
    // An `--against` that cannot be read lints nothing.
    dir.file("broken.jsonl", "{\"id\": \n");
    let run = lint(&dir, &["eval.jsonl", "--against", "broken.jsonl"]);
    run.expect_status(1);
    assert!(run.stderr.contains("--against broken.jsonl"), "{run:?}");
}

/// Imports `file` as dataset `name` into the store `store` (a folder or a URL).
fn import(dir: &Folder, store: &str, file: &str, name: &str) {
    run(cb(dir).args(["--store", store, "import", file, "--dataset", name])).expect_status(0);
}

fn stored_versions_are_linted(store: &str, dir: &Folder) {
    run(cb(dir).args(["--store", store, "init"])).expect_status(0);
    dir.file("data.jsonl", LETTA);
    dir.file("train.jsonl", "{\"id\": \"t1\", \"input\": \"Tell me a joke\"}\n");
    import(dir, store, "data.jsonl", "geo");
    import(dir, store, "train.jsonl", "train");
    let linted =
        run(cb(dir).args(["--store", store, "lint", "--format", "json", "geo@v1", "--against", "train@latest"]));
    linted.expect_status(0);
    let diagnostics = linted.diagnostics();
    // A stored version has no lines and no source record: no `line`, `column` or `pointer`,
    // the casebook path only.
    let places: Vec<(&str, &str, &str)> = diagnostics
        .iter()
        .map(|d| {
            assert!(d.get("line").is_none() && d.get("column").is_none() && d.get("pointer").is_none(), "{d}");
            (
                d["code"].as_str().unwrap_or_default(),
                d["path"].as_str().unwrap_or_default(),
                d["case"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        places,
        [
            ("W-duplicate-input", "/input", "q2"),
            ("W-conflicting-expectations", "/input", "q3"),
            ("W-leaked-ground-truth", "/input", "q4"),
            ("W-overlapping-input", "/input", "q5"),
            ("W-no-expectations", "/expected", "q5"),
            ("W-label-typo", "/labels/0", "q3"),
        ]
    );
    assert_eq!(
        message(&diagnostics[2]),
        "the expectation at /expected/output (`Lima`) is in what the agent sees, at /input"
    );
    // Nor does the text say `:0:0`: the version, and the path beside.
    let text = run(cb(dir).args(["--store", store, "lint", "geo@v1"]));
    assert!(!text.stdout.contains(":0"), "{text:?}");
    assert!(text.stdout.contains("--> geo@v1\n"), "{text:?}");
    assert!(text.stdout.contains("note: at /labels/0\n"), "{text:?}");
    assert!(diagnostics.iter().all(|d| d["file"] == "geo@v1"), "{linted:?}");
    assert_eq!(message(&diagnostics[0]), "case `q2` asks the agent exactly the same as case `q1`");
    assert_eq!(message(&diagnostics[3]), "the input of case `q5` is also in `train@v1` (case `t1`)");
    // A dataset that is not there is an error naming it.
    let missing = run(cb(dir).args(["--store", store, "lint", "nope@v1"]));
    missing.expect_status(2);
    assert!(missing.stderr.contains("nope"), "{missing:?}");
}

#[test]
fn stored_versions_are_linted_on_sqlite() {
    let dir = Folder::new();
    let store = dir.join("store");
    stored_versions_are_linted(&store.display().to_string(), &dir);
}

#[test]
fn stored_versions_are_linted_on_postgres() {
    let dir = Folder::new();
    stored_versions_are_linted(&postgres_database(), &dir);
}

#[test]
fn human_output_shows_the_line_the_hint_and_a_summary() {
    let dir = Folder::new();
    dir.file("data.jsonl", LETTA);
    let run = run(cb(&dir).args(["lint", "data.jsonl"]));
    run.expect_status(0);
    assert!(run.stdout.contains("warning[W-leaked-ground-truth]"), "{run:?}");
    assert!(run.stdout.contains("4 | {\"id\": \"q4\""), "{run:?}");
    assert!(run.stdout.contains("help: the agent is given the answer"), "{run:?}");
    assert_eq!(
        run.stderr.trim_end(),
        "linted 1 dataset: 6 cases, 0 errors, 5 warnings (W-conflicting-expectations 1, W-duplicate-input 1, \
         W-label-typo 1, W-leaked-ground-truth 1, W-no-expectations 1)"
    );
}

#[test]
fn real_conversations_are_not_leaks_when_an_answer_comes_up_in_another_message() {
    // letta's per-turn example ("2 + 2", then "3 * 4", then "10 - 7", expecting 4, 12, 3: `4`
    // and `3` come up in other messages) and casebook's own support example (a memory test:
    // "My order number is 4411", then "Which order did I mention?").
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/letta/support.jsonl");
    let dir = Folder::new();
    let sums = dir.file(
        "sums.jsonl",
        "{\"input\": [\"Only the result: 2 + 2\", \"Only the result: 3 × 4\", \"Only the result: 10 − 7\"], \
         \"ground_truth\": [\"4\", \"12\", \"3\"]}\n",
    );
    let mut files = vec![sums, example];
    // letta's own per-turn example too, from the real-file corpus when it is there.
    if cfg!(corpus) {
        files.push(Path::new(env!("CASEBOOK_CORPUS_DIR")).join("letta-evals/multiturn-per-turn-grading/dataset.jsonl"));
    }
    for file in files {
        let linted = run(casebook().args(["lint", "--format", "json", "--deny", "warnings"]).arg(&file));
        linted.expect_status(0);
    }
    // The answer in the last message itself is one.
    dir.file(
        "talk.jsonl",
        "{\"id\": \"t\", \"input\": [\"2 + 2?\", \"and 10 - 7? (it is 3)\"], \"ground_truth\": [\"4\", \"3\"]}\n",
    );
    let linted = lint(&dir, &["talk.jsonl"]);
    // The second message of the row's `input`, which casebook holds as the first turn.
    assert_eq!(found(&linted), [w("W-leaked-ground-truth", 1, 8, "/input/1", "t")]);
    assert_eq!(linted.diagnostics()[0]["path"], "/turns/0/content");
}

/// OpenAI evals' multiple-choice samples (the shape its registry's MMLU-style `samples.jsonl`
/// have: a system message, a user message listing `A. …` options and ending `Answer:`, `ideal`
/// a letter): the letter labels an option the agent is meant to see, so the set lints clean
/// under `--deny warnings`; the right option's text said in the question is still a leak.
#[test]
fn evals_multiple_choice_sets_lint_clean_and_real_leaks_stay() {
    let dir = Folder::new();
    let row = |question: &str, options: [&str; 4], ideal: &str| {
        let listed: Vec<String> = ["A", "B", "C", "D"].iter().zip(options).map(|(l, o)| format!("{l}. {o}")).collect();
        serde_json::json!({"input": [
            {"role": "system", "content": "The following are multiple choice questions (with answers) about a subject."},
            {"role": "user", "content": format!("{question}\n{}\nAnswer:", listed.join("\n"))}
        ], "ideal": ideal})
        .to_string()
    };
    let clean = [
        row("Which of these is a prime number?", ["4", "6", "7", "9"], "C"),
        row("Find a generator of the group Z_7.", ["1", "2", "3", "4"], "C"),
        row("What is the capital of Peru?", ["Quito", "Lima", "La Paz", "Bogotá"], "B"),
    ];
    dir.file("mmlu.jsonl", format!("{}\n", clean.join("\n")));
    let linted = lint(&dir, &["--deny", "warnings", "mmlu.jsonl"]);
    linted.expect_status(0);
    assert!(linted.diagnostics().is_empty(), "{linted:?}");

    let leaky = row("Lima is the capital of which country?", ["Peru", "Chile", "Lima", "Bolivia"], "C");
    dir.file("leaky.jsonl", format!("{}\n{leaky}\n", clean[0]));
    let linted = lint(&dir, &["leaky.jsonl"]);
    linted.expect_status(0);
    let diagnostics = linted.diagnostics();
    let got: Vec<(&str, u64, &str)> = diagnostics
        .iter()
        .map(|d| (d["code"].as_str().unwrap(), d["line"].as_u64().unwrap(), d["pointer"].as_str().unwrap()))
        .collect();
    assert_eq!(got, [("W-leaked-ground-truth", 2, "/input/1/content")]);
    assert_eq!(
        message(&diagnostics[0]),
        "the expectation at /ideal (`C (Lima)`) is in what the agent sees, at /input/1/content"
    );
}

/// Agent Health test cases in the shipped shape (`category`, `difficulty`, `context` items of
/// `{description, value}`, `expectedOutcomes`, as its bundled RCA cases): warnings point at the
/// fields as the file names them, the casebook path beside.
#[test]
fn agent_health_warnings_point_at_the_fields_the_file_names() {
    let dir = Folder::new();
    dir.file(
        "rca.json",
        r#"[
  {
    "name": "Payments down",
    "category": "RCA",
    "difficulty": "Easy",
    "initialPrompt": "Why are payments failing?",
    "context": [
      {"description": "Runbook", "value": "When in doubt, restart the payment service."}
    ],
    "expectedOutcomes": ["restart the payment service"]
  },
  {
    "name": "Checkout slow",
    "category": "rca",
    "difficulty": "Hard",
    "initialPrompt": "Why is checkout slow?",
    "expectedOutcomes": ["find the pool size change"]
  },
  {
    "name": "Search slow",
    "category": "RCA",
    "difficulty": "Hard",
    "initialPrompt": "Why is search slow?",
    "expectedOutcomes": ["find the index rebuild"]
  }
]
"#,
    );
    let linted = lint(&dir, &["rca.json"]);
    linted.expect_status(0);
    let diagnostics = linted.diagnostics();
    let places: Vec<(Loc, &str)> = diagnostics.iter().map(|d| (Loc::of(d), d["path"].as_str().unwrap())).collect();
    assert_eq!(
        places,
        [
            (at("W-leaked-ground-truth", 2, 3, "/context/0/value"), "/context/0/content"),
            // `category:rca` is the case's first label, made of its `category` field.
            (at("W-label-typo", 12, 3, "/category"), "/labels/0"),
        ]
    );
    assert_eq!(
        message(&diagnostics[0]),
        "the expectation at /expectedOutcomes/0 (`restart the payment service`) is in what the agent sees, at \
         /context/0/value"
    );
    let text = run(cb(&dir).args(["lint", "rca.json"]));
    assert!(text.stdout.contains("^ at /category (`/labels/0` in casebook)\n"), "{text:?}");
}

/// promptfoo tests (a YAML list, as its examples' `tests.yaml`): the one variable of text is
/// the input, and an `equals` assert's value the answer; both are named as the test names them.
#[test]
fn promptfoo_warnings_point_at_the_variable_and_the_assert() {
    let dir = Folder::new();
    dir.file(
        "tests.yaml",
        r#"- description: sums
  vars:
    question: "What is 2 + 2? (the answer is 4)"
  assert:
    - type: equals
      value: "4"
- vars:
    question: What is the capital of France?
  assert:
    - type: contains
      value: Paris
- vars:
    question: What is the capital of France?
  assert:
    - type: contains
      value: Paris
"#,
    );
    let linted = lint(&dir, &["tests.yaml"]);
    linted.expect_status(0);
    let diagnostics = linted.diagnostics();
    let places: Vec<(Loc, &str)> = diagnostics.iter().map(|d| (Loc::of(d), d["path"].as_str().unwrap())).collect();
    assert_eq!(
        places,
        [
            (at("W-leaked-ground-truth", 1, 3, "/vars/question"), "/input"),
            (at("W-duplicate-input", 12, 3, "/vars/question"), "/input"),
        ]
    );
    assert_eq!(
        message(&diagnostics[0]),
        "the expectation at /assert/0/value (`4`) is in what the agent sees, at /vars/question"
    );
}
