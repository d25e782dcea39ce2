//! A mistyped dataset name gets the same answer from every command that names a dataset: no
//! dataset of that name, and the stored one it is a typo of (issue 40). `commit` and `put`, which
//! add to a dataset, refuse a typo rather than make a new dataset of it, and say how to make one
//! on purpose; a name close to none is still a new dataset for them. (The dataset is letta JSONL
//! rows, the shape of `examples/letta/support.jsonl`.)
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use crate::cli::{Backend, Folder, run};
use crate::remote::one_error;

on_both!(every_command_naming_a_mistyped_dataset_says_which_was_meant);

const ROWS: &str = "{\"id\": \"a\", \"input\": \"Where is my invoice?\", \"ground_truth\": \"Billing\"}\n";

fn every_command_naming_a_mistyped_dataset_says_which_was_meant(b: &Backend) {
    let dir = Folder::new();
    run(b.cb(&dir).arg("init")).expect_status(0);
    dir.file("support.jsonl", ROWS);
    run(b.cb(&dir).args(["import", "support.jsonl", "--dataset", "support", "-q"])).expect_status(0);
    let typo = "error: no dataset named `suport`; did you mean `support`?";
    let commands: &[&[&str]] = &[
        &["log", "suport"],
        &["show", "suport"],
        &["show", "suport", "a"],
        &["history", "suport", "a"],
        &["cases", "suport"],
        &["cases", "suport@v1"],
        &["export", "suport", "--to", "letta"],
        &["diff", "suport@v1", "suport@latest"],
        &["diff", "suport@v1", "support.jsonl"],
        &["lint", "suport@v1"],
        &["rm", "suport", "a"],
        &["review", "suport", "a", "--state", "reviewed"],
        &["freeze", "suport", "--dry-run"],
        &["tag", "suport@v1", "prod"],
        &["tag", "--delete", "suport", "prod"],
        &["run", "--dataset", "suport@v1", "--target", "builtin:echo", "--grader", "contains"],
    ];
    for args in commands {
        let out = run(b.cb(&dir).args(*args));
        assert_eq!(one_error(&out, 2), typo, "casebook {}", args.join(" "));
    }
    let adding = format!("{typo} (to make a new dataset of that name: `casebook import FILE --dataset suport`)");
    for args in [
        &["put", "suport", "support.jsonl"][..],
        &["commit", "suport", "support.jsonl"],
        &["commit", "suport", "support.jsonl", "--dry-run"],
    ] {
        let out = run(b.cb(&dir).args(args));
        assert_eq!(one_error(&out, 2), adding, "casebook {}", args.join(" "));
    }
    let datasets = run(b.cb(&dir).args(["datasets", "--format", "json"]));
    assert_eq!(datasets.stdout.lines().count(), 1, "no dataset was made of the typo: {datasets:?}");
    // A name close to no stored one is a new dataset, as before.
    let out = run(b.cb(&dir).args(["put", "billing", "support.jsonl", "-q"]));
    assert_eq!((out.status, out.stderr.as_str()), (Some(0), ""), "{out:?}");
}
