//! `casebook capture` of generated traces (issue 36's sizes, scaled down): the traces of
//! `casebook generate --kind otlp` (JSON lines of batches, agent spans some batches after their
//! children) and `--kind otlp-document` (the same batches as one document on one line) give the
//! same cases, written as they come out (`--dry-run`) or committed in batches into a store,
//! where a second capture of the same traces adds nothing.
#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::cli::{Folder, cb, jsonl, run};

#[test]
fn a_document_and_json_lines_of_the_same_traces_give_the_same_cases_in_a_dry_run_and_a_store() {
    let dir = Folder::new();
    let lines = dir.join("t.jsonl");
    let document = dir.join("t.json");
    for (kind, path) in [("otlp", &lines), ("otlp-document", &document)] {
        run(cb(&dir).args(["generate", "--kind", kind, "--cases", "3000", "-q", "-o"]).arg(path)).expect_status(0);
    }
    assert_eq!(fs_err::read_to_string(&document).unwrap().lines().count(), 1);
    let from_lines = run(cb(&dir).args(["capture", "--dry-run", "-q"]).arg(&lines));
    from_lines.expect_status(0);
    let from_document = run(cb(&dir).args(["capture", "--dry-run", "-q"]).arg(&document));
    from_document.expect_status(0);
    let cases: Vec<Value> = jsonl(&from_lines.stdout).into_iter().filter(|v| v.get("$dataset").is_none()).collect();
    assert!(cases.len() > 2500, "{}", cases.len());
    assert_eq!(from_document.stdout, from_lines.stdout);
    // In the order the invocations started.
    let times: Vec<&str> = cases.iter().map(|c| c["provenance"]["time"].as_str().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));

    let store = dir.join("store");
    run(cb(&dir).arg("--store").arg(&store).arg("init")).expect_status(0);
    let first = run(cb(&dir)
        .arg("--store")
        .arg(&store)
        .args(["--format", "json", "capture", "--dataset", "prod"])
        .arg(&document));
    first.expect_status(0);
    let report: Value = serde_json::from_str(first.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report["added"].as_array().unwrap().len(), cases.len());
    assert_eq!(report["invocations"], 3000);
    let again =
        run(cb(&dir).arg("--store").arg(&store).args(["--format", "json", "capture", "--dataset", "prod"]).arg(&lines));
    again.expect_status(0);
    let report: Value = serde_json::from_str(again.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        (report["added"].as_array().unwrap().len(), report["present"].as_array().unwrap().len()),
        (0, cases.len())
    );
    let exported = run(cb(&dir).arg("--store").arg(&store).args(["export", "prod", "--to", "casebook"]));
    exported.expect_status(0);
    let stored: Vec<Value> = jsonl(&exported.stdout).into_iter().filter(|v| v.get("$dataset").is_none()).collect();
    assert_eq!(stored.len(), cases.len());
}
