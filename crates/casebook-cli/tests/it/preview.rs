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
