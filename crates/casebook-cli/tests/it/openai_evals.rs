//! OpenAI evals samples (`{"input"|"messages": …, "ideal": …}` JSONL): detection, the native
//! shape, the round trip, located errors, and what the format cannot hold.

use serde_json::Value;

use crate::cli::{Folder, at, casebook, jsonl, run, to_native, validate};

/// Samples in the shapes evals' documentation describes: chat input with a system message, a
/// list of accepted answers, a completion prompt with an extra key, `messages`, non-ASCII.
const SAMPLES: &str = r#"{"input": [{"role": "system", "content": "Answer with one word."}, {"role": "user", "content": "Which planet is called the red planet?"}], "ideal": "Mars"}
{"input": [{"role": "system", "content": "Complete the proverb."}, {"role": "user", "content": "Better late than"}], "ideal": ["never", "never."]}
{"input": "2 + 3 =", "ideal": "5", "difficulty": "easy"}
{"messages": [{"role": "user", "content": "Dis « bonjour » en japonais"}], "ideal": "こんにちは"}
{"input": "2 + 3 =", "ideal": "5", "difficulty": "easy"}
"#;

#[test]
fn samples_are_detected_and_read_into_the_case_model() {
    let dir = Folder::new();
    let file = dir.file("samples.jsonl", SAMPLES);
    validate(&file).expect_status(0);
    let (_, cases) = to_native(&file);
    assert_eq!(cases.len(), 5);
    assert!(cases.iter().all(|c| c["provenance"]["format"] == "openai-evals"), "{cases:?}");
    // Chat messages are the input as they are; one answer is the expected output, a list the
    // accepted answers; other keys are metadata.
    assert_eq!(cases[0]["input"][0]["role"], "system");
    assert_eq!(cases[0]["expected"], serde_json::json!({"output": "Mars"}));
    assert_eq!(cases[1]["expected"], serde_json::json!({"acceptable": ["never", "never."]}));
    assert_eq!(cases[2]["metadata"], serde_json::json!({"difficulty": "easy"}));
    assert_eq!(cases[3]["expected"]["output"], "こんにちは");
    // No ids in the file: derived from the task; the repeated sample, wholly identical to the
    // third, is its second copy (the rest of its case and `-2`).
    let ids: Vec<&str> = cases.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert!(ids.iter().all(|id| id.starts_with("t-")), "{ids:?}");
    let rest = casebook_canon::Variant::of(
        &serde_json::json!({"expected": {"output": "5"}, "metadata": {"difficulty": "easy"}}),
    );
    assert_eq!(ids[4], rest.unwrap().id(ids[2], 2));
}

#[test]
fn samples_to_casebook_and_back_give_the_same_values() {
    let dir = Folder::new();
    let file = dir.file("samples.jsonl", SAMPLES);
    let native = run(casebook().arg("convert").arg(&file).args(["--to", "casebook", "-o"]).arg(dir.join("n.jsonl")));
    native.expect_status(0);
    let back = run(casebook().arg("convert").arg(dir.join("n.jsonl")).args(["--to", "openai-evals"]));
    back.expect_status(0);
    let original: Vec<Value> = jsonl(SAMPLES);
    assert_eq!(jsonl(&back.stdout), original);
    // Straight through, too.
    let same = run(casebook().arg("convert").arg(&file).args(["--to", "openai-evals"]));
    assert_eq!(jsonl(&same.stdout), original);
}

#[test]
fn problems_are_located() {
    let dir = Folder::new();
    let file = dir.file(
        "bad.jsonl",
        "{\"input\": \"a\", \"ideal\": \"x\"}\n{\"ideal\": \"y\"}\n{\"input\": \"b\", \"messages\": [], \"ideal\": \"z\"}\n{\"input\": \"c\", \"ideal\": }\n",
    );
    let checked = validate(&file);
    checked.expect_status(1);
    assert_eq!(
        checked.locations(),
        [at("E-missing-field", 2, 1, ""), at("E-field-conflict", 3, 28, "/messages"), at("E-json-syntax", 4, 25, "")]
    );
}

#[test]
fn what_samples_cannot_hold_is_refused_or_dropped_with_lossy() {
    let dir = Folder::new();
    let file = dir.file(
        "cases.jsonl",
        "{\"id\": \"k1\", \"input\": \"hi\", \"turns\": [{\"role\": \"user\", \"content\": \"more\"}], \"expected\": {\"output\": \"x\"}, \"labels\": [\"a\"]}\n",
    );
    let refused = run(casebook().arg("convert").arg(&file).args(["--to", "openai-evals", "--format", "json"]));
    refused.expect_status(1);
    assert_eq!(refused.stdout, "");
    assert!(refused.stderr.contains("cannot hold: labels, turns"), "{refused:?}");
    let lossy = run(casebook().arg("convert").arg(&file).args(["--to", "openai-evals", "--lossy", "-q"]));
    lossy.expect_status(0);
    // An explicit id is kept (evals ignores keys it does not use).
    assert_eq!(jsonl(&lossy.stdout), [serde_json::json!({"id": "k1", "input": "hi", "ideal": "x"})]);
}
