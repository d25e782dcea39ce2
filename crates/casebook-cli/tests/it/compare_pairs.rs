//! `compare` of runs whose scenarios are named differently: one scenario each pairs by case and
//! run; otherwise nothing pairs, and the command says why. (Runs made by `casebook run` with the
//! built-in echo agent, on native JSONL rows.)
#![allow(clippy::unwrap_used)]

use crate::cli::{Folder, cb, run};
use crate::run::summary;

const CASES: &str = "{\"id\": \"a\", \"input\": \"hello\", \"expected\": {\"output\": \"hello\"}}\n\
                     {\"id\": \"b\", \"input\": \"bye\", \"expected\": {\"output\": \"ciao\"}}\n";

/// Runs the experiment file `name` holding `scenarios`, at `time`, and returns its run id.
fn run_with(dir: &Folder, name: &str, scenarios: &str, time: &str) -> String {
    let exp = dir.file(name, format!("dataset: cases.jsonl\ngraders: [{{kind: contains}}]\nscenarios:\n{scenarios}"));
    let out = run(cb(dir).env("CASEBOOK_TIME", time).arg("run").arg(&exp).args(["--format", "json"]));
    assert!(matches!(out.status, Some(0 | 1)), "{out:?}");
    summary(&out.stdout)["meta"]["run_id"].as_str().unwrap().to_owned()
}

#[test]
fn runs_of_one_scenario_each_pair_and_unpairable_runs_say_why() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    dir.file("cases.jsonl", CASES);
    let a = run_with(&dir, "a.yaml", "  - {name: echo, target: 'builtin:echo'}\n", "2026-11-23T10:00:00Z");
    let b = run_with(&dir, "b.yaml", "  - {name: echo-again, target: 'builtin:echo'}\n", "2026-11-23T11:00:00Z");
    let paired = run(cb(&dir).args(["compare", &a, &b]));
    paired.expect_status(0);
    assert!(paired.stdout.starts_with("2 pairs · "), "{paired:?}");
    let first: Vec<&str> = paired.stdout.lines().skip(1).take(2).collect();
    assert_eq!(
        first,
        [
            "pass → fail 0 · fail → pass 0 · only in A 0 · only in B 0 · errors 0",
            "scenario `echo-again` of B paired with scenario `echo` of A (each run has one; the lists name A's)",
        ],
        "{paired:?}"
    );
    assert_eq!(paired.stderr, "");
    // Two scenarios against one, none of the same name: nothing pairs, and the reason is given.
    let two = "  - {name: left, target: 'builtin:echo'}\n  - {name: right, target: 'builtin:echo'}\n";
    let c = run_with(&dir, "c.yaml", two, "2026-11-23T12:00:00Z");
    let unpaired = run(cb(&dir).args(["compare", &a, &c]));
    unpaired.expect_status(0);
    assert!(unpaired.stdout.starts_with("0 pairs "), "{unpaired:?}");
    let version = |id: &str| {
        let out = run(cb(&dir).args(["results", "--format", "json", id]));
        summary(&out.stdout)["meta"]["dataset_version_id"].as_str().unwrap()[..12].to_owned()
    };
    assert_eq!(
        unpaired.stderr,
        format!(
            "note: nothing paired: results pair by case id, scenario and run number, and run {a} ran scenario \
             `echo` on dataset cases (version {}); run {c} ran scenarios `left`, `right` on dataset \
             cases (version {}). Compare runs of the same dataset, with a scenario of the same name (or \
             one scenario each)\n",
            version(&a),
            version(&c)
        )
    );
}
