//! Previewing a file against a stored version (issue 40): `diff NAME@REF FILE` (either side a
//! file) and `commit NAME FILE --dry-run`, which say what a commit would change and write
//! nothing. The dataset files are native JSONL, one case a line, in the shape of the README's
//! `data.jsonl` and `edited.jsonl`.

use serde_json::{Value, json};

use crate::cli::{Folder, cb, run};

const DATA: &str = "{\"id\":\"1\",\"input\":\"hi\",\"expected\":{\"output\":\"hello\"}}\n\
{\"id\":\"2\",\"input\":\"bye\",\"expected\":{\"output\":\"goodbye\"}}\n";
const EDITED: &str = "{\"id\":\"1\",\"input\":\"hi\",\"expected\":{\"output\":\"hello there\"}}\n\
{\"id\":\"3\",\"input\":\"thanks\"}\n";

#[test]
fn diff_of_a_version_and_a_file_and_commit_dry_run_say_what_would_change() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    dir.file("data.jsonl", DATA);
    dir.file("edited.jsonl", EDITED);
    run(cb(&dir).args(["import", "data.jsonl", "--dataset", "support", "-q"])).expect_status(0);
    run(cb(&dir).args(["tag", "support@v1", "prod"])).expect_status(0);

    let expected = "support v1 → `edited.jsonl`
+ 3
- 2
~ 1
    /expected/output: \"hello\" → \"hello there\"
";
    let out = run(cb(&dir).args(["diff", "support@prod", "edited.jsonl"]));
    out.expect_status(0);
    assert_eq!(out.stdout, expected);
    // Either side may be the file.
    let out = run(cb(&dir).args(["diff", "edited.jsonl", "support@v1", "--format", "json"]));
    out.expect_status(0);
    let said: Vec<Value> = out.stdout.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(
        said,
        [
            json!({"change": "added", "id": "2"}),
            json!({"change": "removed", "id": "3"}),
            json!({"change": "modified", "id": "1", "changes": [
                {"pointer": "/expected/output", "old": "hello there", "new": "hello"}]}),
            json!({"summary": {"dataset": "support", "from": "edited.jsonl", "to": 1,
                "added": 1, "removed": 1, "modified": 1, "moved": 0}}),
        ]
    );
    let out = run(cb(&dir).args(["diff", "support@v1", "data.jsonl"]));
    assert_eq!(out.stdout, "support v1 → `data.jsonl`\nno difference\n");

    // The dry run prints the same and commits nothing.
    let out = run(cb(&dir).args(["commit", "support", "edited.jsonl", "--dry-run"]));
    out.expect_status(0);
    assert_eq!(out.stdout, expected);
    let out = run(cb(&dir).args(["commit", "support", "edited.jsonl", "--dry-run", "--format", "json"]));
    out.expect_status(0);
    assert_eq!(
        out.stdout.lines().next().map(serde_json::from_str::<Value>).unwrap().unwrap(),
        json!({"change": "added", "id": "3"})
    );
    let log = run(cb(&dir).args(["log", "support", "--format", "json"]));
    assert_eq!(log.stdout.matches("\"number\"").count(), 1, "still one version: {log:?}");

    // A file with errors: they are reported, located, and nothing is compared.
    dir.file("broken.jsonl", "{\"id\":\"1\",\"input\":\n");
    let out = run(cb(&dir).args(["diff", "support@v1", "broken.jsonl"]));
    out.expect_status(1);
    assert!(out.stderr.contains(" --> broken.jsonl:1:"), "{out:?}");
    assert!(
        out.stderr.ends_with("`broken.jsonl` has 1 error: `casebook validate broken.jsonl` lists them\n"),
        "{out:?}"
    );
}

/// `commit --dry-run` of a dataset the store does not have says what the commit would create
/// (every case added, and their count), and creates nothing.
#[test]
fn commit_dry_run_of_a_new_dataset_says_what_would_be_created() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    dir.file("data.jsonl", DATA);
    let out = run(cb(&dir).args(["commit", "support", "data.jsonl", "--dry-run"]));
    out.expect_status(0);
    assert_eq!(out.stdout, "support (not stored yet) → `data.jsonl`\n+ 1\n+ 2\nwould create support v1: 2 cases\n");
    assert_eq!(out.stderr, "note: no dataset named `support` yet: the commit would create it\n");
    let out = run(cb(&dir).args(["commit", "support", "data.jsonl", "--dry-run", "--format", "json"]));
    out.expect_status(0);
    let said: Vec<Value> = out.stdout.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(
        said.last().unwrap(),
        &json!({"summary": {"dataset": "support", "from": null, "to": "data.jsonl",
            "added": 2, "removed": 0, "modified": 0, "moved": 0}})
    );
    let datasets = run(cb(&dir).args(["datasets", "--format", "json"]));
    assert_eq!(datasets.stdout, "", "nothing was created: {datasets:?}");
}

/// `diff NAME@REF FILE` reads the file as `validate` and `import` do: `--from csv --map` for a
/// spreadsheet export (the shape of the README's `--map id=qid,…` example), and a file whose
/// cases are the stored ones in another order shows them moved.
#[test]
fn diff_with_a_file_reads_it_with_from_and_map_and_sees_moves() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    dir.file("data.jsonl", DATA);
    run(cb(&dir).args(["import", "data.jsonl", "--dataset", "support", "-q"])).expect_status(0);
    dir.file("sheet.csv", "qid,question,answer\n1,hi,hello there\n2,bye,goodbye\n");
    let map = ["--from", "csv", "--map", "id=qid,input=question,expected.output=answer"];
    let out = run(cb(&dir).args(["diff", "support@v1", "sheet.csv"]).args(map));
    out.expect_status(0);
    // The spreadsheet's cases also record where they come from, which the JSONL rows did not.
    assert_eq!(
        out.stdout,
        "support v1 → `sheet.csv`\n~ 1\n    /expected/output: \"hello\" → \"hello there\"\n    \
         /provenance: (absent) → {\"format\":\"csv\"}\n~ 2\n    /provenance: (absent) → {\"format\":\"csv\"}\n"
    );
    // The same through `commit --dry-run`, which takes them too.
    let dry = run(cb(&dir).args(["commit", "support", "sheet.csv", "--dry-run"]).args(map));
    assert_eq!(dry.stdout, out.stdout, "{dry:?}");

    let lines: Vec<&str> = DATA.lines().collect();
    dir.file("reordered.jsonl", format!("{}\n{}\n", lines[1], lines[0]));
    let out = run(cb(&dir).args(["diff", "support@v1", "reordered.jsonl"]));
    out.expect_status(0);
    assert_eq!(out.stdout, "support v1 → `reordered.jsonl`\n↕ 1\n↕ 2\n");
}
