//! What a run's pass threshold is compared with, end to end through `casebook run` against fake
//! agents on 127.0.0.1:0: the pass rate printed is the one the verdict follows; it is over every
//! result, errors and ungraded results counting as not passed, unless `--exclude-ungraded` (or
//! `exclude_ungraded: true`) leaves the ungraded out; and a run that graded nothing never passes.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::cli::{Backend, Folder, cb, run};
use crate::run::{Behaviour, serve, summary};

/// Four cases the shouting agent answers right, one it answers wrong, and one without an
/// expected answer, which `exact_match` cannot grade: an error, not a failure.
const MIXED: &str = r#"{"id": "é-1", "input": "grüß dich", "expected": {"output": "GRÜSS DICH"}}
{"id": "2", "input": "hello", "expected": {"output": "HELLO"}}
{"id": "3", "input": "hello", "expected": {"output": "HELLO"}, "labels": ["repeated"]}
{"input": "añejo", "expected": {"output": "AÑEJO"}}
{"id": "5", "input": "wrong please", "expected": {"output": "RIGHT"}}
{"id": "6", "input": "no expectation here"}
"#;

/// A promptfoo suite of five tests: one with an assert casebook checks, four with only asserts
/// it cannot (`javascript`, `latency`), which leave them ungraded.
const PROMPTFOO: &str = "\
- description: checked
  vars: {question: grüß die wörld}
  assert:
    - {type: icontains, value: wörld}
- description: javascript only
  vars: {question: one}
  assert:
    - {type: javascript, value: output.length > 0}
- description: latency only
  vars: {question: two}
  assert:
    - {type: latency, threshold: 5000}
- description: both
  vars: {question: three}
  assert:
    - {type: javascript, value: \"output.includes('THREE')\"}
    - {type: latency, threshold: 100}
- description: javascript again
  vars: {question: one}
  assert:
    - {type: javascript, value: output.length > 1}
";

/// The line of the human summary that says the pass rate and the verdict, joined again where
/// it was wrapped at 100 columns.
fn verdict_line(stdout: &str) -> String {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("pass rate ") || l.starts_with("pass rate 95 %"));
    let mut line = lines.next().unwrap_or_default().to_owned();
    for more in lines.map_while(|l| l.strip_prefix("    ")) {
        line.push(' ');
        line.push_str(more);
    }
    line
}

/// `(passed, failed, errors, ungraded, pass_rate_of)` of a JSON summary's totals.
fn counts(s: &Value) -> (u64, u64, u64, u64, u64) {
    let t = &s["totals"];
    let n = |key: &str| t[key].as_u64().unwrap_or_else(|| panic!("no `{key}` in {t}"));
    (n("passed"), n("failed"), n("errors"), n("ungraded"), n("pass_rate_of"))
}

fn close(value: &Value, expected: f64) -> bool {
    value.as_f64().is_some_and(|v| (v - expected).abs() < 1e-9)
}

/// An error is not a pass: 4 of 6 is 66.7 %, which is what is printed and what the threshold
/// compares, so 50 % is met (exit 0) and 70 % is missed (exit 1). Before, the rate printed left
/// the error out (80 %) and any error missed the threshold whatever the rate.
#[test]
fn errors_count_as_not_passed_in_the_rate_the_threshold_compares() {
    let dir = Folder::new();
    let (url, _) = serve(Behaviour::Shout);
    dir.file("cases.jsonl", MIXED);
    let exp = |threshold: f64| {
        dir.file(
            &format!("exp-{threshold}.yaml"),
            format!("name: mixed\ndataset: cases.jsonl\ntarget: '{url}'\nthreshold: {threshold}\ngraders: [{{kind: exact_match}}]\n"),
        )
    };
    let out = run(cb(&dir).arg("run").arg(exp(0.5)).args(["--report", "junit=out.xml", "--report", "markdown=out.md"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert_eq!(
        verdict_line(&out.stdout),
        "pass rate 66.7 % of 6 results (4 passed, 1 failed, 1 error, 0 ungraded) · threshold 50.0 %: met",
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("over the 5 graded\n"), "{}", out.stdout);
    let markdown = fs_err::read_to_string(dir.join("out.md")).unwrap();
    assert!(
        markdown.contains(
            "**Threshold met**: pass rate 66.7 % of 6 results (4 passed, 1 failed, 1 error, 0 ungraded) against \
             50.0 % required."
        ),
        "{markdown}"
    );
    assert!(markdown.contains("Pass rate = passed / (passed + failed + errors + ungraded)"), "{markdown}");
    let junit = fs_err::read_to_string(dir.join("out.xml")).unwrap();
    assert!(junit.contains(r#"<testsuites name="mixed" tests="6" failures="1" errors="1" skipped="0""#), "{junit}");

    let out = run(cb(&dir).arg("run").arg(exp(0.7)));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert_eq!(
        verdict_line(&out.stdout),
        "pass rate 66.7 % of 6 results (4 passed, 1 failed, 1 error, 0 ungraded) · threshold 70.0 %: missed",
        "{}",
        out.stdout
    );
    let json = run(cb(&dir).arg("run").arg(exp(0.5)).args(["--format", "json"]));
    assert_eq!(json.status, Some(0), "{json:?}");
    let s = summary(&json.stdout);
    assert_eq!(counts(&s), (4, 1, 1, 0, 6), "{s}");
    assert!(close(&s["totals"]["pass_rate"], 4.0 / 6.0), "{s}");
    assert_eq!((s["threshold_met"].as_bool(), s["exclude_ungraded"].as_bool()), (Some(true), Some(false)), "{s}");
    // The scenario's rate follows the same rule.
    assert!(close(&s["scenarios"][0]["pass_rate"], 4.0 / 6.0), "{s}");
}

/// The issue's case: a promptfoo suite where 4 of 5 tests have only asserts casebook cannot
/// check passed with "1 passed, 0 failed, 4 ungraded · pass rate 100.0 %". Now the four count as
/// not passed (20 %, exit 1), and the JUnit report fails them; `--exclude-ungraded`, or the
/// experiment's `exclude_ungraded: true`, leaves them out, and says so.
#[test]
fn ungraded_promptfoo_tests_count_against_the_threshold_unless_excluded() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Shout);
    dir.file("tests.yaml", PROMPTFOO);
    let exp = dir.file("exp.yaml", format!("name: pf\ndataset: tests.yaml\ntarget: '{url}'\nthreshold: 0.8\n"));
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--report", "junit=out.xml"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert_eq!(
        verdict_line(&out.stdout),
        "pass rate 20.0 % of 5 results (1 passed, 0 failed, 0 errors, 4 ungraded) · threshold 80.0 %: missed",
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains(
            "warning: 4 cases with nothing else to check will be ungraded: they count as not passed \
             (`--exclude-ungraded` leaves them out of the pass rate)"
        ),
        "{}",
        out.stderr
    );
    let junit = fs_err::read_to_string(dir.join("out.xml")).unwrap();
    assert!(junit.contains(r#"<testsuites name="pf" tests="5" failures="4" errors="0" skipped="0""#), "{junit}");
    assert_eq!(junit.matches(r#"type="ungraded"/>"#).count(), 4, "{junit}");
    assert!(!junit.contains("<skipped"), "{junit}");
    assert_eq!(bodies.lock().unwrap().len(), 5);

    let json = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    assert_eq!(json.status, Some(1), "{json:?}");
    let s = summary(&json.stdout);
    assert_eq!(counts(&s), (1, 0, 0, 4, 5), "{s}");
    assert!(close(&s["totals"]["pass_rate"], 0.2), "{s}");
    assert_eq!((s["threshold_met"].as_bool(), s["exclude_ungraded"].as_bool()), (Some(false), Some(false)), "{s}");

    // Asked for by the flag: the rate is over the one graded test, and the line says what was
    // left out.
    let out =
        run(cb(&dir).arg("run").arg(&exp).args(["--exclude-ungraded", "--report", "junit=out.xml", "--overwrite"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert_eq!(
        verdict_line(&out.stdout),
        "pass rate 100.0 % of 1 result (1 passed, 0 failed, 0 errors; 4 ungraded left out) · threshold 80.0 %: met",
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("will be ungraded: they are left out of the pass rate, as `exclude_ungraded` asks"),
        "{}",
        out.stderr
    );
    let junit = fs_err::read_to_string(dir.join("out.xml")).unwrap();
    assert!(junit.contains(r#"<testsuites name="pf" tests="5" failures="0" errors="0" skipped="4""#), "{junit}");
    // Or by the experiment file, with the same JSON.
    let keyed = dir.file(
        "keyed.yaml",
        format!("name: pf\ndataset: tests.yaml\ntarget: '{url}'\nthreshold: 0.8\nexclude_ungraded: true\n"),
    );
    let json = run(cb(&dir).arg("run").arg(&keyed).args(["--format", "json"]));
    assert_eq!(json.status, Some(0), "{json:?}");
    let s = summary(&json.stdout);
    assert_eq!(counts(&s), (1, 0, 0, 4, 1), "{s}");
    assert!(close(&s["totals"]["pass_rate"], 1.0), "{s}");
    assert_eq!((s["threshold_met"].as_bool(), s["exclude_ungraded"].as_bool()), (Some(true), Some(true)), "{s}");
}

/// Nothing graded is never a pass, whatever the threshold: every agent call failing, or the one
/// checkable test failing with the rest ungraded and excluded.
#[test]
fn a_run_that_graded_nothing_never_passes() {
    let dir = Folder::new();
    let (down, _) = serve(Behaviour::Crash);
    dir.file("cases.jsonl", MIXED);
    let exp = dir.file(
        "exp.yaml",
        format!("dataset: cases.jsonl\ntarget: {{url: '{down}', retries: 0}}\nthreshold: 0\ngraders: [{{kind: exact_match}}]\n"),
    );
    let out = run(cb(&dir).arg("run").arg(&exp));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert_eq!(
        verdict_line(&out.stdout),
        "pass rate – of 6 results (0 passed, 0 failed, 6 errors, 0 ungraded) · threshold 0.0 %: missed (nothing graded)",
        "{}",
        out.stdout
    );
    let json = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    let s = summary(&json.stdout);
    assert_eq!((json.status, counts(&s)), (Some(1), (0, 0, 6, 0, 6)), "{s}");
    assert_eq!((s["totals"]["pass_rate"].is_null(), s["threshold_met"].as_bool()), (true, Some(false)), "{s}");

    dir.file("tests.yaml", PROMPTFOO);
    let pf = dir.file("pf.yaml", format!("dataset: tests.yaml\ntarget: {{url: '{down}', retries: 0}}\nthreshold: 0\n"));
    let out = run(cb(&dir).arg("run").arg(&pf).args(["--exclude-ungraded", "--format", "json"]));
    let s = summary(&out.stdout);
    assert_eq!((out.status, counts(&s)), (Some(1), (0, 0, 5, 0, 5)), "{s}");
    assert_eq!(s["threshold_met"], false, "{s}");
}

on_both!(results_and_regrade_follow_the_same_rule);

/// With a store, `results` shows the verdict line the run printed, and `--regrade` (no agent
/// called) takes `--exclude-ungraded` like a run.
fn results_and_regrade_follow_the_same_rule(b: &Backend) {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Shout);
    dir.file("tests.yaml", PROMPTFOO);
    let exp = dir.file("exp.yaml", format!("name: pf\ndataset: tests.yaml\ntarget: '{url}'\nthreshold: 0.8\n"));
    assert_eq!(run(b.cb(&dir).arg("init")).status, Some(0));
    let out = run(b.cb(&dir).arg("run").arg(&exp));
    assert_eq!(out.status, Some(1), "{out:?}");
    let missed = "pass rate 20.0 % of 5 results (1 passed, 0 failed, 0 errors, 4 ungraded) · threshold 80.0 %: missed";
    assert_eq!(verdict_line(&out.stdout), missed, "{}", out.stdout);
    let shown = run(b.cb(&dir).arg("results"));
    assert_eq!(verdict_line(&shown.stdout), missed, "{}", shown.stdout);
    let junit = run(b.cb(&dir).args(["results", "--format", "junit"]));
    assert!(junit.stdout.contains(r#"failures="4" errors="0" skipped="0""#), "{}", junit.stdout);

    let regraded = run(b.cb(&dir).arg("run").arg(&exp).args(["--regrade", "--exclude-ungraded"]));
    assert_eq!(regraded.status, Some(0), "{regraded:?}");
    let met =
        "pass rate 100.0 % of 1 result (1 passed, 0 failed, 0 errors; 4 ungraded left out) · threshold 80.0 %: met";
    assert_eq!(verdict_line(&regraded.stdout), met, "{}", regraded.stdout);
    assert_eq!(bodies.lock().unwrap().len(), 5, "the regrade called no agent");
    let shown = run(b.cb(&dir).args(["results", "--format", "json"]));
    let s = summary(&shown.stdout);
    assert_eq!((counts(&s), s["exclude_ungraded"].as_bool()), ((1, 0, 0, 4, 1), Some(true)), "{s}");
}
