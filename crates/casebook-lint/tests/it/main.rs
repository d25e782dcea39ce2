//! The linter over whole datasets: which warnings come out, about which cases, where.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use casebook_lint::{Against, Facts, Linter, Options, Place};
use casebook_model::{Case, Diagnostic};
use serde_json::{Value, json};

fn case(value: Value) -> Case {
    serde_json::from_value(value).unwrap()
}

/// Lints `cases` (case `i` on line `i + 1`), returning `(code, case, line, casebook path)` per
/// warning (no source is set: the pointer is left out).
fn lint(cases: &[Value], against: Option<&Against>, options: Options) -> (Vec<Diagnostic>, Vec<String>) {
    let mut linter = Linter::new("data.jsonl", options, against);
    let mut out = Vec::new();
    for (i, value) in cases.iter().enumerate() {
        let case = case(value.clone());
        let place = Place { line: i as u64 + 1, column: 1, line_offset: Some(0) };
        linter.add(&case, Facts::of(&case), place, &mut out);
    }
    let skipped = linter.finish(&mut out);
    (out, skipped)
}

fn codes(diagnostics: &[Diagnostic]) -> Vec<(String, String, u64, String)> {
    diagnostics
        .iter()
        .map(|d| {
            (d.code.as_str().to_owned(), d.case.clone().unwrap_or_default(), d.line, d.path.clone().unwrap_or_default())
        })
        .collect()
}

fn w(code: &str, case: &str, line: u64, pointer: &str) -> (String, String, u64, String) {
    (code.to_owned(), case.to_owned(), line, pointer.to_owned())
}

#[test]
fn duplicates_near_duplicates_and_conflicts_name_both_cases() {
    let (found, _) = lint(
        &[
            json!({"id": "a", "input": "What is the capital of France?", "expected": {"output": "Paris"}}),
            json!({"id": "b", "input": "What is the capital of France?", "expected": {"output": "Paris"}}),
            json!({"id": "c", "input": "what is the  capital of france?\n", "expected": {"output": "Paris"}}),
            json!({"id": "d", "input": "What is the capital of France?", "expected": {"output": "Lyon"}}),
            // The same question in another world snapshot is another task.
            json!({"id": "e", "input": "What is the capital of France?", "context": [{"content": "1789"}], "expected": {"output": "Paris"}}),
        ],
        None,
        Options::default(),
    );
    assert_eq!(
        codes(&found),
        [
            w("W-duplicate-input", "b", 2, "/input"),
            w("W-near-duplicate-input", "c", 3, "/input"),
            w("W-conflicting-expectations", "d", 4, "/input"),
        ]
    );
    assert_eq!(found[0].message, "case `b` asks the agent exactly the same as case `a` (line 1)");
    assert_eq!(
        found[1].message,
        "case `c` asks the agent the same as case `a` (line 1) (ignoring letter case and spacing)"
    );
    assert_eq!(found[2].message, "case `d` asks the agent the same as case `a` (line 1) but expects something else");
}

#[test]
fn every_case_check_fires_where_it_should_and_nowhere_else() {
    let (found, _) = lint(
        &[
            json!({"id": "ok", "input": "2+2?", "expected": {"output": "4"}, "confidence": 0.9, "review": "reviewed"}),
            json!({"id": "bare", "input": "Tell me a joke"}),
            json!({"id": "shaky", "input": "3+3?", "expected": {"output": "6"}, "confidence": 0.2}),
            json!({"id": "no", "input": "4+4?", "expected": {"output": "8"}, "review": "rejected"}),
            json!({"id": "leak", "input": "Capital of Peru? (It is Lima.)", "expected": {"output": "Lima"}}),
        ],
        None,
        Options::default(),
    );
    assert_eq!(
        codes(&found),
        [
            w("W-no-expectations", "bare", 2, "/expected"),
            w("W-low-confidence", "shaky", 3, "/confidence"),
            w("W-rejected-case", "no", 4, "/review"),
            w("W-leaked-ground-truth", "leak", 5, "/input"),
        ]
    );
    assert_eq!(found[3].message, "the expectation at /expected/output (`Lima`) is in what the agent sees, at /input");
    // The threshold is the option's.
    let (found, _) = lint(
        &[json!({"id": "shaky", "input": "3+3?", "expected": {"output": "6"}, "confidence": 0.2})],
        None,
        Options { min_confidence: 0.1 },
    );
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn label_typos_point_at_the_first_case_with_the_rare_label() {
    let mut cases: Vec<Value> = (0..5)
        .map(|i| json!({"id": format!("r{i}"), "input": format!("q{i}"), "expected": {"output": "x"}, "labels": ["regression", "Math"]}))
        .collect();
    cases.push(json!({"id": "t", "input": "q", "expected": {"output": "x"}, "labels": ["math", "regresion"]}));
    let (found, _) = lint(&cases, None, Options::default());
    assert_eq!(codes(&found), [w("W-label-typo", "t", 6, "/labels/0"), w("W-label-typo", "t", 6, "/labels/1")]);
    assert_eq!(found[0].message, "label `math` (1 case) differs only in letter case from `Math` (5 cases)");
    assert_eq!(found[1].message, "label `regresion` (1 case) looks like a misspelling of `regression` (5 cases)");
}

#[test]
fn inputs_of_another_dataset_are_found_exactly_or_normalised() {
    let mut train = Against::new("train.jsonl");
    for value in [
        json!({"id": "t1", "input": "Translate 'cat' to French", "expected": {"output": "chat"}}),
        json!({"id": "t2", "input": "Summarise the refund policy", "expected": {"output": "…"}}),
    ] {
        let case = case(value);
        train.add(&case, &Facts::of(&case));
    }
    assert_eq!(train.len(), 2);
    let (found, _) = lint(
        &[
            json!({"id": "e1", "input": "translate 'cat' to  french", "expected": {"output": "chat"}}),
            json!({"id": "e2", "input": "Translate 'dog' to French", "expected": {"output": "chien"}}),
            // A world snapshot around it does not hide the question.
            json!({"id": "e3", "input": "Summarise the refund policy", "context": [{"content": "policy v2"}], "expected": {"output": "…"}}),
        ],
        Some(&train),
        Options::default(),
    );
    assert_eq!(
        codes(&found),
        [w("W-overlapping-input", "e1", 1, "/input"), w("W-overlapping-input", "e3", 3, "/input")]
    );
    assert_eq!(found[0].message, "the input of case `e1` is also in `train.jsonl` (case `t1`)");
}

/// Two promptfoo tests on one question (the shape of a third-party payments suite: `icontains:
/// pix` beside `icontains-all: [pix, boleto, cartão]`) check two things one answer can both
/// meet: the same question twice, not a conflict. Asserts no answer can meet together are.
#[test]
fn only_expectations_no_answer_can_meet_together_conflict() {
    let asks = |id: &str, asserts: Value| json!({"id": id, "input": {"question": "Quais formas de pagamento?"}, "expected": {"assert": asserts}});
    let (found, _) = lint(
        &[
            asks("pix", json!([{"type": "icontains", "value": "pix"}])),
            asks("all", json!([{"type": "icontains-all", "value": ["pix", "boleto", "cartão"]}])),
            asks("no-pix", json!([{"type": "not-icontains", "value": "PIX"}])),
            json!({"id": "paris", "input": "Capital of France?", "expected": {"output": "Paris"}}),
            json!({"id": "lyon", "input": "Capital of France?", "expected": {"assert": [{"type": "equals", "value": "Lyon"}]}}),
        ],
        None,
        Options::default(),
    );
    assert_eq!(
        codes(&found),
        [
            w("W-duplicate-input", "all", 2, "/input"),
            w("W-conflicting-expectations", "no-pix", 3, "/input"),
            w("W-conflicting-expectations", "lyon", 5, "/input"),
        ]
    );
    assert_eq!(
        found[0].hint.as_deref(),
        Some(
            "the two check different things of the same answer: put their expectations in one case, or make the tasks differ"
        )
    );
}
