//! The human rendering of diagnostics (`NO_COLOR`): the file and position, the source line with
//! a caret under the problem, and the hint. The temporary folder's path is shown as `[TMP]`.

use std::path::Path;

use crate::cli::{Folder, casebook, run};

/// `casebook validate FILE` in human form: stdout, trailing blank lines removed.
fn human(dir: &Folder, file: &Path) -> String {
    let r = run(casebook().arg("validate").arg(file));
    r.expect_status(1);
    dir.normalise(r.stdout.trim_end())
}

#[test]
fn jsonl_syntax_error() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "{\"id\": \"a\", \"input\": \"hi\"}\n{\"id\": \"b\", \"input\": \"x\",}\n");
    insta::assert_snapshot!(human(&dir, &file), @r#"
        error[E-json-syntax]: trailing comma before `}`
         --> [TMP]/data.jsonl:2:26
          |
        2 | {"id": "b", "input": "x",}
          |                          ^
          |
        help: fix the JSON syntax on this line
    "#);
}

#[test]
fn duplicate_id() {
    let dir = Folder::new();
    let file = dir.file(
        "data.jsonl",
        "{\"id\": \"a\", \"input\": \"x\"}\n{\"id\": \"b\", \"input\": \"y\"}\n{\"id\": \"a\", \"input\": \"z\"}\n",
    );
    insta::assert_snapshot!(human(&dir, &file), @r#"
        error[E-duplicate-id]: duplicate id `a` (first used on line 1)
         --> [TMP]/data.jsonl:3:8
          |
        3 | {"id": "a", "input": "z"}
          |        ^ at /id
          |
        help: ids must be unique within a dataset
    "#);
}

#[test]
fn unknown_role_in_yaml() {
    let dir = Folder::new();
    let file = dir.file(
        "dataset.yaml",
        "apiVersion: lab/v1\nkind: Dataset\nspec:\n  items:\n  - id: one\n    inputs:\n      user:\n      - role: operator\n        content: stop\n",
    );
    insta::assert_snapshot!(human(&dir, &file), @r#"
        error[E-unknown-role]: unknown turn role `operator`
         --> [TMP]/dataset.yaml:8:15
          |
        8 |       - role: operator
          |               ^ at /spec/items/0/inputs/user/0/role
          |
        help: roles are `user`, `hitl` (an operator stepping in) and `system`
    "#);
}

#[test]
fn csv_cell_count() {
    let dir = Folder::new();
    let file = dir.file("data.csv", "id,input,ground_truth\n1,hello,world,extra\n");
    insta::assert_snapshot!(human(&dir, &file), @r#"
        error[E-csv-syntax]: record has 4 cells but the header has 3 columns
         --> [TMP]/data.csv:2:15
          |
        2 | 1,hello,world,extra
          |               ^
          |
        help: quote cells that contain commas or line breaks
    "#);
}

/// A long line is shown around the problem, but the position is still the one in the file.
#[test]
fn long_line_keeps_the_real_column() {
    let dir = Folder::new();
    // `{"id": "a", "input": "` is 22 characters, then 500 `x`, then `", "tags": [` (12): the `1`
    // that is not a string is column 535.
    let file =
        dir.file("data.jsonl", format!("{{\"id\": \"a\", \"input\": \"{}\", \"tags\": [1]}}\n", "x".repeat(500)));
    let out = human(&dir, &file);
    assert!(out.contains("[TMP]/data.jsonl:1:535\n"), "the position is the one in the file:\n{out}");
    // The caret is under the `1` of the source shown above it.
    let lines: Vec<&str> = out.lines().collect();
    let source = lines.iter().position(|l| l.contains("\"tags\": [1]")).expect("the source line is shown");
    let caret = lines[source + 1].find('^').expect("a caret under the source line");
    assert_eq!(&lines[source][caret..=caret], "1", "{out}");
}

#[test]
fn missing_file() {
    let dir = Folder::new();
    let r = run(casebook().arg("validate").arg(dir.join("nope.jsonl")));
    r.expect_status(2);
    insta::assert_snapshot!(dir.normalise(r.stderr.trim_end()), @r#"
        error: `[TMP]/nope.jsonl` does not exist
    "#);
}
