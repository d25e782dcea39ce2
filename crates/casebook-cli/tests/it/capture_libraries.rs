//! `casebook capture` end to end on a trace a library wrote itself: pydantic-ai 2.68.0's
//! (format 5, `crates/casebook-formats/tests/data/capture/`, written by
//! `scripts/gen-traces/gen.py`) is captured into a stored dataset, whose cases are then listed.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cli::{Folder, cb, run};

fn trace(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../casebook-formats/tests/data/capture").join(name)
}

#[test]
fn a_pydantic_ai_trace_is_captured_into_a_dataset_one_case_per_run() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    let file = trace("pydantic-ai-2.68.0-v5.jsonl");
    let out = run(cb(&dir).args(["capture", "--dataset", "weather"]).arg(&file));
    out.expect_status(0);
    // Three runs, each its own case; the failed ones are no warning about missing content.
    assert!(!out.stderr.contains("warning"), "{out:?}");

    let listed = run(cb(&dir).args(["cases", "weather", "--format", "json"]));
    listed.expect_status(0);
    let cases: Vec<Value> = listed.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let summary: Vec<Value> = cases
        .iter()
        .map(|c| json!([c["input"], c.get("turns"), c["expected"].get("output"), c["metadata"]["status"]]))
        .collect();
    assert_eq!(
        summary,
        [
            json!(["What is the weather in Paris?", null, "It is rainy, 12°C in Paris.", "ok"]),
            json!(["What is the weather in Atlantis?", null, null, "error"]),
            json!(["What is the weather in Lemuria?", null, null, "error"]),
        ],
        "{cases:#?}"
    );
    let paris = &cases[0];
    assert_eq!(paris["id"], "trace-0af7651916cd43de8448eb211c80319c-1000000000000001");
    assert_eq!(paris["review"], "draft");
    assert_eq!(paris["expected"]["tool_calls"], json!([{"name": "get_weather", "arguments": {"city": "Paris"}}]));
    assert_eq!(
        paris["tools"][0]["responses"],
        json!([{"when": {"arguments": {"city": "Paris"}}, "result": "rainy, 12°C"}])
    );
    assert_eq!(paris["tools"][0]["description"], "Current weather of a city.");
    let atlantis = &cases[1];
    assert_eq!(
        atlantis["tools"][0]["responses"],
        json!([{"when": {"arguments": {"city": "Atlantis"}}, "result": "under water, 4°C"}])
    );
    assert!(atlantis["metadata"]["error"].as_str().unwrap().starts_with("ModelServerError: status_code: 500"));

    // Captured again: nothing new.
    let again = run(cb(&dir).args(["capture", "--dataset", "weather"]).arg(&file));
    again.expect_status(0);
    assert!(again.stdout.contains("nothing added"), "{again:?}");
}
