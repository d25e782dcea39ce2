//! The terminal summary of `run` and `results` names the first failing cases, with the grader
//! that failed each, why, and what the agent answered, then how to see the rest. (A run made by
//! `casebook run` with the built-in echo agent, which answers with the question, on native
//! JSONL rows.)
#![allow(clippy::unwrap_used)]

use crate::cli::{Folder, cb, run};

#[test]
fn the_summary_names_the_first_failing_cases_and_how_to_see_them_all() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    // One case passes (the echo is its answer); seven fail.
    let mut rows = String::from("{\"id\": \"ok\", \"input\": \"same\", \"expected\": {\"output\": \"same\"}}\n");
    for i in 1..=7 {
        rows.push_str(&format!(
            "{{\"id\": \"c{i}\", \"input\": \"question {i}\\nasked over two lines\", \"expected\": {{\"output\": \"answer {i}\"}}}}\n"
        ));
    }
    dir.file("cases.jsonl", rows);
    let out =
        run(cb(&dir).args(["run", "--dataset", "cases.jsonl", "--target", "builtin:echo", "--grader", "exact_match"]));
    out.expect_status(1);
    let listed = out.stdout.split_once("\nfailing:\n").map(|(_, rest)| rest.to_owned()).unwrap_or_default();
    let id = out.stderr.lines().find_map(|l| l.strip_prefix("run ")).and_then(|l| l.split(':').next()).unwrap();
    let expected: String = (1..=5)
        .map(|i| {
            format!(
                "  c{i} (default #0) answered \"question {i} asked over two lines\"\n    \
                 exact_match: expected `answer {i}`, got `question {i} asked over two lines`\n"
            )
        })
        .collect::<String>()
        + &format!("  …and 2 more: `casebook results {id} --format markdown` lists every one\n");
    assert_eq!(listed, expected, "{out:?}");
    // `results` says the same of the stored run.
    let again = run(cb(&dir).args(["results", id]));
    again.expect_status(0);
    assert!(again.stdout.ends_with(&format!("\nfailing:\n{expected}")), "{again:?}");
}
