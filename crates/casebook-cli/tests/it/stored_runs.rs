//! `results` and `compare` of runs longer than a page of results (1,000), read back a page at a
//! time from the store here and through a server: the reports `results` writes are the ones the
//! run wrote, and `compare` says what the comparison of the two runs' whole result lists says.
//! (Runs made by `casebook run` with the built-in echo agent, on native JSONL rows of the shape
//! `examples/` uses: id, input, expected output; ids out of order.)
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use casebook_runner::record::RunResult;
use casebook_runner::report;
use casebook_runner::report::terminal::human_comparison;
use casebook_runner::summary::{Summary, compare};

use crate::cli::{Backend, Folder, run};
use crate::remote::{PROJECT, Server, ok};
use crate::run::summary;

on_both!(long_runs_read_back_page_by_page_say_what_the_run_said);

/// Cases read in another order than their ids; those whose `i % fail == 0` fail (the echo
/// answers the input, the expected output is something else).
fn cases(n: usize, fail: usize) -> String {
    (0..n)
        .map(|i| {
            let id = (i * 37) % n;
            let expected = if id.is_multiple_of(fail) { "nope".to_owned() } else { format!("say {id}") };
            format!(
                "{{\"id\": \"c-{id:04}\", \"input\": \"say {id}\", \"expected\": {{\"output\": \"{expected}\"}}}}\n"
            )
        })
        .collect()
}

const FORMATS: [(&str, &str); 4] = [("markdown", "md"), ("html", "html"), ("junit", "xml"), ("jsonl", "jsonl")];

/// Runs `dataset` with `cmd` (a `casebook` command on a store or server), writing every report
/// under `name.*`; returns the run id.
fn run_reported(mut cmd: assert_cmd::Command, time: &str, dir: &Folder, dataset: &str, name: &str) -> String {
    cmd.env("CASEBOOK_TIME", time).args([
        "run",
        "--dataset",
        dataset,
        "--target",
        "builtin:echo",
        "--grader",
        "contains",
        "--format",
        "json",
    ]);
    for (format, ext) in FORMATS {
        cmd.arg("--report").arg(format!("{format}={}", dir.join(&format!("{name}.{ext}")).display()));
    }
    let out = run(&mut cmd);
    assert!(matches!(out.status, Some(0 | 1)), "{out:?}");
    summary(&out.stdout)["meta"]["run_id"].as_str().unwrap().to_owned()
}

fn results_of(jsonl: &str) -> Vec<RunResult> {
    jsonl.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// `results` of run `id` in each format is what the reports make of the run's whole list of
/// results (its JSONL report) and its summary, as `results` made them when it read the run whole;
/// `compare` of `a` and `b` is the comparison of their whole lists of results.
fn check(cmd: &dyn Fn() -> assert_cmd::Command, dir: &Folder, (a, b): (&str, &str)) {
    for (id, name) in [(a, "a"), (b, "b")] {
        let jsonl = fs_err::read_to_string(dir.join(&format!("{name}.jsonl"))).unwrap();
        let results = results_of(&jsonl);
        let summary: Summary = serde_json::from_str(&ok(cmd().args(["results", id, "--format", "json"]))).unwrap();
        // The run's JSONL report is in the order results finished; `results` gives the run's order.
        let shown = ok(cmd().args(["results", id, "--format", "jsonl"]));
        let sorted = |text: &str| {
            let mut lines: Vec<&str> = text.lines().collect();
            lines.sort_unstable();
            lines.join("\n")
        };
        assert!(sorted(&shown) == sorted(&jsonl), "`results {id} --format jsonl` is not the run's results");
        let in_order = results_of(&shown);
        let expected = [
            ("markdown", report::markdown::render(&summary, &results)),
            ("html", report::html::render(&summary, &results)),
            ("junit", report::junit::render(&summary, &results)),
            (
                "human",
                report::human(&summary) + &report::terminal::failing(&in_order, summary.totals.failed as u64, Some(id)),
            ),
        ];
        for (format, expected) in expected {
            let shown = ok(cmd().args(["results", id, "--format", format]));
            assert!(shown == expected, "`results {id} --format {format}` is not what the whole list makes");
        }
        // The Markdown report the run wrote as it went is the same.
        let written = fs_err::read_to_string(dir.join(&format!("{name}.md"))).unwrap();
        assert!(written == report::markdown::render(&summary, &results));
    }
    let a_results = results_of(&fs_err::read_to_string(dir.join("a.jsonl")).unwrap());
    let b_results = results_of(&fs_err::read_to_string(dir.join("b.jsonl")).unwrap());
    assert_eq!(a_results.len(), 2500);
    let expected = compare(&a_results, &b_results);
    assert!(expected.pass_to_fail.len() > 100 && expected.fail_to_pass.len() > 100, "{}", expected.pass_to_fail.len());
    let json = ok(cmd().args(["compare", a, b, "--format", "json"]));
    assert!(json == format!("{}\n", serde_json::to_string(&expected).unwrap()), "compare's JSON differs");
    assert_eq!(ok(cmd().args(["compare", a, b])), human_comparison(&expected));
}

fn long_runs_read_back_page_by_page_say_what_the_run_said(b: &Backend) {
    // In the store here.
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    dir.file("one.jsonl", cases(2500, 3));
    dir.file("two.jsonl", cases(2500, 5));
    let one = run_reported(b.cb(&dir), "2026-11-23T10:00:00Z", &dir, "one.jsonl", "a");
    let two = run_reported(b.cb(&dir), "2026-11-23T11:00:00Z", &dir, "two.jsonl", "b");
    check(&|| b.cb(&dir), &dir, (&one, &two));
    // The summary kept is the one the run printed, and JSON needs no result read.
    let kept = ok(b.cb(&dir).args(["results", &one, "--format", "json"]));
    assert_eq!(summary(&kept)["totals"]["results"], 2500);

    // Through a server: results kept there are read back a page at a time.
    let served = Folder::new();
    let server = Server::start(b, &served, &[]);
    let key = Server::key(b, &served, PROJECT, "write");
    let alice = Folder::new();
    alice.file("one.jsonl", cases(2500, 3));
    alice.file("two.jsonl", cases(2500, 5));
    let client = || server.client(&alice, &key);
    let one = run_reported(client(), "2026-11-23T10:00:00Z", &alice, "one.jsonl", "a");
    let two = run_reported(client(), "2026-11-23T11:00:00Z", &alice, "two.jsonl", "b");
    check(&client, &alice, (&one, &two));
}
