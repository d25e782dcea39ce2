//! `casebook capture traces.json logs.json`: log files beside trace files, told apart by their
//! content. The files are the ones `scripts/gen-traces/openai_v2_logs.py` made with the real
//! `opentelemetry-instrumentation-openai-v2` 2.1b0 (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`:
//! spans without content, the messages as GenAI events in OpenTelemetry logs).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cli::{Folder, Loc, at, cb, run};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../casebook-formats/tests/data/capture").join(name)
}

fn diagnostics(stderr: &str) -> Vec<Value> {
    stderr.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn places(stderr: &str) -> Vec<Loc> {
    diagnostics(stderr).iter().map(Loc::of).collect()
}

#[test]
fn spans_without_content_and_their_log_file_make_the_case_with_its_messages() {
    let dir = Folder::new();
    let store = dir.join("store");
    let traces = data("openai-v2-old-traces.json");
    let logs = data("openai-v2-old-logs.json");
    run(cb(&dir).arg("--store").arg(&store).arg("init")).expect_status(0);

    // The traces alone: no content, so no case; the hint names the instrumentation's settings
    // and the log file.
    let alone = run(cb(&dir)
        .arg("--store")
        .arg(&store)
        .args(["--format", "json", "capture", "--dataset", "prod"])
        .arg(&traces));
    alone.expect_status(1);
    assert_eq!(places(&alone.stderr), [at("W-no-content", 179, 7, "/resourceSpans/0/scopeSpans/1/spans/0")]);
    let hint = diagnostics(&alone.stderr)[0]["hint"].as_str().unwrap().to_owned();
    assert!(hint.contains("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only"), "{hint}");
    assert!(hint.contains("`casebook capture traces.json logs.json`"), "{hint}");

    // The log file alone: its records' spans are not there, a warning per span at its first record.
    let orphans =
        run(cb(&dir).arg("--store").arg(&store).args(["--format", "json", "capture", "--dataset", "prod"]).arg(&logs));
    orphans.expect_status(1);
    assert_eq!(
        places(&orphans.stderr),
        [
            at("W-dropped", 38, 7, "/resourceLogs/0/scopeLogs/0/logRecords/0"),
            at("W-dropped", 209, 7, "/resourceLogs/0/scopeLogs/0/logRecords/3")
        ]
    );
    assert!(orphans.stderr.contains("nothing was captured: 0 spans hold no agent invocation"), "{orphans:?}");

    // Both: one case, with the conversation the logs carried, added to the dataset.
    let both = run(cb(&dir)
        .arg("--store")
        .arg(&store)
        .args(["--format", "json", "capture", "--dataset", "prod"])
        .arg(&traces)
        .arg(&logs));
    both.expect_status(0);
    assert_eq!(diagnostics(&both.stderr), Vec::<Value>::new(), "{both:?}");
    let report: Value = serde_json::from_str(&both.stdout).unwrap();
    let id = report["added"][0].as_str().unwrap().to_owned();
    assert_eq!((report["added"].as_array().unwrap().len(), report["spans"].as_u64()), (1, Some(3)), "{report}");
    let shown = run(cb(&dir).arg("--store").arg(&store).args(["show", "prod", &id, "--format", "json"]));
    shown.expect_status(0);
    let case: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(case["input"], "What is the weather in Paris?");
    assert_eq!(
        case["expected"],
        json!({"output": "It is rainy in Paris, 57°F.",
            "tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]})
    );
    assert_eq!(case["provenance"]["convention"], "gen_ai-events");

    // The same logs as JSON lines, given first: the same case, already there.
    let again = run(cb(&dir)
        .arg("--store")
        .arg(&store)
        .args(["--format", "json", "capture", "--dataset", "prod"])
        .arg(data("openai-v2-old-logs.jsonl"))
        .arg(&traces));
    again.expect_status(0);
    let report: Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(report["present"], json!([id]), "{report}");
}
