//! Small things a newcomer following the README met (issue 40, "Small ones a newcomer hit"):
//! the exact message and exit status each now gets. The dataset files are native JSONL, one
//! case a line, in the shape of the README's `data.jsonl`.

use crate::cli::{Folder, cb, run};

const DATA: &str = "{\"id\":\"1\",\"input\":\"hi\",\"expected\":{\"output\":\"hello\"}}\n";

#[test]
fn cases_of_a_missing_file_says_the_file_is_missing() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    dir.file("data.jsonl", DATA);
    run(cb(&dir).args(["import", "data.jsonl", "--dataset", "support"])).expect_status(0);
    let out = run(cb(&dir).args(["cases", "nosuch.jsonl"]));
    out.expect_status(2);
    assert_eq!(
        out.stderr.trim_end(),
        "error: no file `nosuch.jsonl` (and no dataset of that name): check the path, or name a stored \
version as `NAME@REF`"
    );
    // A bare name is still a dataset name, with its did-you-mean.
    let out = run(cb(&dir).args(["cases", "suport"]));
    out.expect_status(2);
    assert_eq!(out.stderr.trim_end(), "error: no dataset named `suport`; did you mean `support`?");
}

#[test]
fn rm_of_a_misspelt_dataset_suggests_the_name() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    dir.file("data.jsonl", DATA);
    run(cb(&dir).args(["import", "data.jsonl", "--dataset", "support"])).expect_status(0);
    let out = run(cb(&dir).args(["rm", "suport", "1"]));
    out.expect_status(2);
    assert_eq!(out.stderr.trim_end(), "error: no dataset named `suport`; did you mean `support`?");
}

#[test]
fn message_options_have_help_text() {
    let dir = Folder::new();
    for command in ["commit", "put", "rm"] {
        let out = run(cb(&dir).args([command, "--help"]));
        out.expect_status(0);
        let line = out.stdout.lines().find(|l| l.contains("--message <MESSAGE>")).expect("a --message line");
        assert!(line.ends_with("What this version is about (shown by `casebook log`)"), "{command}: {line}");
    }
}

#[test]
fn init_in_a_subfolder_says_it_hides_the_parents_store_and_q_quiets_it() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    dir.file("sub/keep", "");
    let out = run(cb(&dir).current_dir(dir.join("sub")).args(["init", "-q"]));
    out.expect_status(0);
    // `-q` leaves out the summary, not the warning.
    assert_eq!(out.stdout, "");
    let parent = dir.join("").display().to_string();
    let parent = parent.trim_end_matches('/');
    assert_eq!(
        out.stderr.trim_end(),
        format!(
            "note: this store is nested in the one at {parent}: commands run in this folder and below now use \
the new one; `--store {parent}` reaches the parent's"
        )
    );
    assert!(dir.join("sub/.casebook").is_dir(), "the nested store is made");
    // Made again, it is already there: no note.
    let out = run(cb(&dir).current_dir(dir.join("sub")).arg("init"));
    out.expect_status(0);
    assert_eq!(out.stderr, "");
    assert!(out.stdout.starts_with("store already there in "), "{out:?}");
}

#[test]
fn validate_of_a_folder_says_how_to_name_its_files() {
    let dir = Folder::new();
    dir.file("examples/data.jsonl", DATA);
    let out = run(cb(&dir).args(["validate", "examples/"]));
    out.expect_status(2);
    assert_eq!(
        out.stderr.trim_end(),
        "error: `examples/` is a folder: name its dataset files, e.g. `casebook validate examples/*.jsonl`"
    );
}
