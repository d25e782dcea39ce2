//! `casebook record`: a run made by the user's own code (the Python client's `casebook.run`),
//! its results as JSON lines on standard input, kept as `casebook run` keeps runs. A line it
//! cannot take is refused by line and column and the run goes on; standard input closed
//! without `{"finish": true}` leaves the run unfinished with the results it took, and
//! `--resume` goes on with it. (Cases: native JSONL rows of the shape `examples/` uses.)
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::cli::{Backend, Folder, jsonl, run};

on_both!(a_run_from_result_lines_is_kept_refused_lines_named_and_resumed);

const CASES: &str = concat!(
    "{\"id\": \"a\", \"input\": \"one\", \"expected\": {\"output\": \"1\"}, \"labels\": [\"math\"]}\n",
    "{\"id\": \"b\", \"input\": \"two\", \"expected\": {\"output\": \"2\"}}\n",
    "{\"id\": \"c\", \"input\": \"three\", \"expected\": {\"output\": \"3\"}}\n",
);

fn a_run_from_result_lines_is_kept_refused_lines_named_and_resumed(b: &Backend) {
    let dir = Folder::new();
    assert_eq!(run(b.cb(&dir).arg("init")).status, Some(0));
    let file = dir.file("numbers.jsonl", CASES);
    assert_eq!(run(b.cb(&dir).arg("import").arg(&file)).status, Some(0));

    let lines = concat!(
        "{\"case\": \"a\", \"output\": \"1\", \"scores\": {\"exact\": true}}\n",
        "{\"case\": \"b\", \"output\": 2,, }\n",
        "{\"case\": \"zz\", \"output\": \"?\"}\n",
        "{\"case\": \"b\", \"output\": \"x\", \"scores\": {\"exact\": 0.25}}\n",
    );
    let out = run(b.cb(&dir).args(["record", "numbers@v1", "--experiment", "loop"]).write_stdin(lines));
    // No `finish`: the loop died; what it sent is kept, the run is not finished.
    assert_eq!(out.status, Some(130), "{}", out.stderr);
    let said = jsonl(&out.stdout);
    let run_id = said[0]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(said[0]["dataset"], "numbers@v1");
    assert_eq!(said[1], serde_json::json!({"ok": true}));
    assert_eq!(said[2]["error"].as_str().unwrap(), "line 2, column 27: key must be a string");
    assert_eq!(said[3]["error"].as_str().unwrap(), "line 3: no case `zz` in the run's dataset version");
    assert_eq!(said[4], serde_json::json!({"ok": true}));
    assert!(out.stderr.contains(&format!("run {run_id} left unfinished: 2 results kept")), "{}", out.stderr);
    let listed = jsonl(&run(b.cb(&dir).args(["results", "--list", "--format", "json"])).stdout);
    assert_eq!(listed[0]["id"], run_id.as_str());
    assert_eq!(listed[0]["finished"], Value::Null);

    // Resumed: the results it has are said, a case again is refused, the rest finishes it.
    let lines = concat!(
        "{\"case\": \"a\", \"output\": \"1\", \"scores\": {\"exact\": true}}\n",
        "{\"case\": \"c\", \"error\": \"the agent timed out\"}\n",
        "{\"finish\": true}\n",
    );
    let out = run(b.cb(&dir).args(["record", "numbers", "--experiment", "loop", "--resume"]).write_stdin(lines));
    assert_eq!(out.status, Some(0), "{}", out.stderr);
    let said = jsonl(&out.stdout);
    assert_eq!(said[0]["run_id"], run_id.as_str());
    assert_eq!(said[0]["done"], serde_json::json!([["a", 0], ["b", 0]]));
    assert!(said[1]["error"].as_str().unwrap().contains("case `a` has a result in this run already"));
    let summary = &said[3];
    assert_eq!(summary["totals"]["results"], 3);
    assert_eq!(
        (&summary["totals"]["passed"], &summary["totals"]["failed"], &summary["totals"]["errors"]),
        (&1.into(), &1.into(), &1.into())
    );

    // `results` reads it back as a run of the version, one result per case, as `run`'s are.
    let shown: Value =
        serde_json::from_str(&run(b.cb(&dir).args(["results", &run_id, "--format", "json"])).stdout).unwrap();
    assert_eq!(shown["meta"]["experiment"], "loop");
    assert_eq!(shown["meta"]["dataset"], "numbers@v1");
    let version: Value =
        serde_json::from_str(&run(b.cb(&dir).args(["show", "numbers@v1", "--format", "json"])).stdout).unwrap();
    assert_eq!(shown["meta"]["dataset_version_id"], version["id"]);
    let results = jsonl(&run(b.cb(&dir).args(["results", &run_id, "--format", "jsonl"])).stdout);
    let by_case: Vec<(&str, Option<bool>)> =
        results.iter().map(|r| (r["case_id"].as_str().unwrap(), r["pass"].as_bool())).collect();
    assert_eq!(by_case, [("a", Some(true)), ("b", Some(false)), ("c", None)]);
    assert_eq!(results[0]["labels"], serde_json::json!(["math"]));
    assert_eq!(results[0]["output"]["output"], "1");

    // Without a store there is nowhere to keep the run.
    let bare = Folder::new();
    let out = run(crate::cli::cb(&bare).args(["record", "numbers", "--experiment", "x"]).write_stdin(""));
    assert_eq!(out.status, Some(2), "{}", out.stderr);
}
