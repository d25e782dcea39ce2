//! `compare` of runs whose scenarios are named differently: they pair by the target each run
//! recorded, then when each run has one scenario, or as `--scenario A=B` says; otherwise
//! nothing pairs, and the command says why, naming both sides' scenarios and targets. (Runs
//! made by `casebook run` with the built-in echo agent and a fake HTTP agent on 127.0.0.1, on
//! native JSONL rows.)
#![allow(clippy::unwrap_used)]

use crate::cli::{Folder, cb, run};
use crate::run::{Behaviour, serve, summary};

const CASES: &str = "{\"id\": \"a\", \"input\": \"hello\", \"expected\": {\"output\": \"hello\"}}\n\
                     {\"id\": \"b\", \"input\": \"bye\", \"expected\": {\"output\": \"ciao\"}}\n";

/// Runs the experiment file `name` holding `scenarios`, at `time`, and returns its run id.
fn run_with(dir: &Folder, name: &str, scenarios: &str, time: &str) -> String {
    let exp = dir.file(name, format!("dataset: cases.jsonl\ngraders: [{{kind: contains}}]\nscenarios:\n{scenarios}"));
    let out = run(cb(dir).env("CASEBOOK_TIME", time).arg("run").arg(&exp).args(["--format", "json"]));
    assert!(matches!(out.status, Some(0 | 1)), "{out:?}");
    summary(&out.stdout)["meta"]["run_id"].as_str().unwrap().to_owned()
}

/// The first 12 characters of the dataset version id the run `id` recorded.
fn version(dir: &Folder, id: &str) -> String {
    let out = run(cb(dir).args(["results", "--format", "json", id]));
    summary(&out.stdout)["meta"]["dataset_version_id"].as_str().unwrap()[..12].to_owned()
}

/// A terminal's text with its wrapped lines joined again (a continuation is indented 4 spaces).
fn unwrapped(stdout: &str) -> String {
    stdout.replace("\n    ", " ")
}

/// The second and third lines of a human comparison: the counts and the first pairing note.
fn counts_and_note(stdout: &str) -> Vec<String> {
    unwrapped(stdout).lines().skip(1).take(2).map(str::to_owned).collect()
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
    assert_eq!(
        counts_and_note(&paired.stdout),
        [
            "pass → fail 0 · fail → pass 0 · only in A 0 · only in B 0 · errors 0",
            "scenario `echo-again` of B paired with scenario `echo` of A (the same target, builtin:echo; the lists name A's)",
        ],
        "{paired:?}"
    );
    assert_eq!(paired.stderr, "");
    // The run recorded its target, without secrets: what the pairing read.
    let results = run(cb(&dir).args(["results", "--format", "json", &a]));
    assert_eq!(summary(&results.stdout)["meta"]["targets"], serde_json::json!([{"kind": "echo"}]));

    // Two scenarios against one, none of the same name, all of one target: nothing pairs, and
    // the reason is given with each side's scenarios and targets, and how to choose.
    let two = "  - {name: left, target: 'builtin:echo'}\n  - {name: right, target: 'builtin:echo'}\n";
    let c = run_with(&dir, "c.yaml", two, "2026-11-23T12:00:00Z");
    let unpaired = run(cb(&dir).args(["compare", &a, &c]));
    unpaired.expect_status(0);
    assert!(unpaired.stdout.starts_with("0 pairs "), "{unpaired:?}");
    assert_eq!(
        unpaired.stderr,
        format!(
            "note: nothing paired: results pair by case id, scenario and run number, and run {a} ran scenario \
             `echo` (builtin:echo) on dataset cases (version {}); run {c} ran scenarios `left` (builtin:echo), \
             `right` (builtin:echo) on dataset cases (version {}). Scenarios pair by name, else by the same target \
             when each run has one scenario with it, else when each run has one scenario. Compare runs of the same \
             dataset, and choose which scenario of B stands for which of A with `--scenario A=B` (`--scenario \
             echo=left`)\n",
            version(&dir, &a),
            version(&dir, &c)
        )
    );

    // Chosen, they pair, and the note says so.
    let chosen = run(cb(&dir).args(["compare", &a, &c, "--scenario", "echo=right"]));
    chosen.expect_status(0);
    assert_eq!(
        counts_and_note(&chosen.stdout),
        [
            "pass → fail 0 · fail → pass 0 · only in A 0 · only in B 2 · errors 0",
            "scenario `right` of B paired with scenario `echo` of A (as `--scenario echo=right` asks; the lists name A's)",
        ],
        "{chosen:?}"
    );
    assert!(chosen.stdout.starts_with("2 pairs · "), "{chosen:?}");
    // A choice naming what a run does not have is refused, with what it has.
    let wrong = run(cb(&dir).args(["compare", &a, &c, "--scenario", "echo=middle"]));
    wrong.expect_status(2);
    assert_eq!(
        wrong.stderr,
        format!(
            "error: `--scenario echo=middle`: run B has no results of a scenario `middle` (it has `left`, `right`); \
             see each run's scenarios with `casebook results {a}` and `casebook results {c}`\n"
        )
    );
    let malformed = run(cb(&dir).args(["compare", &a, &c, "--scenario", "echo"]));
    malformed.expect_status(2);
    assert!(
        malformed.stderr.contains("`echo`: write A's scenario, `=`, then B's, e.g. `--scenario baseline=tuned`"),
        "{malformed:?}"
    );
}

/// Two scenarios each, renamed between runs: each pairs with the one of the same target (a fake
/// HTTP agent that shouts, and the echo agent), so the agent that fails shows as flips of the
/// scenario it ran in.
#[test]
fn renamed_scenarios_pair_by_their_targets() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    dir.file("cases.jsonl", CASES);
    let (url, _) = serve(Behaviour::Shout);
    let a = run_with(
        &dir,
        "a.yaml",
        &format!("  - {{name: shouting, target: '{url}'}}\n  - {{name: echoing, target: 'builtin:echo'}}\n"),
        "2026-11-23T10:00:00Z",
    );
    let b = run_with(
        &dir,
        "b.yaml",
        &format!("  - {{name: echo-v2, target: 'builtin:echo'}}\n  - {{name: shout-v2, target: '{url}'}}\n"),
        "2026-11-23T11:00:00Z",
    );
    let compared = run(cb(&dir).args(["compare", &a, &b]));
    compared.expect_status(0);
    let text = unwrapped(&compared.stdout);
    let lines: Vec<&str> = text.lines().take(4).collect();
    assert_eq!(
        lines,
        [
            "4 pairs · mean difference B − A +0.000 (95 % CI +0.000 to +0.000)",
            "pass → fail 0 · fail → pass 0 · only in A 0 · only in B 0 · errors 0",
            "scenario `echo-v2` of B paired with scenario `echoing` of A (the same target, builtin:echo; the lists \
             name A's)",
            &format!(
                "scenario `shout-v2` of B paired with scenario `shouting` of A (the same target, {url}; the lists name A's)"
            ),
        ],
        "{compared:?}"
    );
    let json = run(cb(&dir).args(["compare", &a, &b, "--format", "json"]));
    let comparison: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        comparison["paired_scenarios"],
        serde_json::json!([
            {"a": "echoing", "b": "echo-v2", "by": "target", "target": "builtin:echo"},
            {"a": "shouting", "b": "shout-v2", "by": "target", "target": url},
        ])
    );
}
