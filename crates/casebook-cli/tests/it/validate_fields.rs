//! Problems in well-formed files (SPEC §4): missing and mistyped fields, duplicate ids, turn
//! roles, per-turn expectations, memory-seed paths, rubrics, integer range, empty datasets.

use crate::cli::{Folder, at, casebook, message, run, validate};

/// A mas-lab manifest around `items` (the YAML of the list, indented under `spec:`).
fn manifest(items: &str) -> String {
    format!("apiVersion: lab/v1\nkind: Dataset\nmetadata:\n  name: t\nspec:\n  items:\n{items}")
}

#[test]
fn missing_required_field_in_a_letta_row() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "{\"id\": \"a\", \"input\": \"ok\"}\n{\"id\": \"b\", \"ground_truth\": \"x\"}\n");
    let run = validate(&file);
    run.expect_status(1);
    // The row that lacks `input`, at its opening brace.
    assert_eq!(run.locations(), [at("E-missing-field", 2, 1, "")]);
    assert!(message(&run.diagnostics()[0]).contains("`input`"), "{run:?}");
}

#[test]
fn missing_required_field_in_a_native_yaml_case() {
    let dir = Folder::new();
    let file = dir.file(
        "dataset.yaml",
        "name: x
cases:
  - id: a
    input: hi
  - id: b
    expected: {output: x}
",
    );
    let run = validate(&file);
    run.expect_status(1);
    // The second case's mapping starts at `id` on line 5, column 5.
    assert_eq!(run.locations(), [at("E-missing-field", 5, 5, "/cases/1")]);
    assert!(message(&run.diagnostics()[0]).contains("`input`"), "{run:?}");
}

#[test]
fn wrong_type_in_a_letta_row() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "{\"id\": \"a\", \"input\": 42, \"ground_truth\": \"x\"}\n");
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-wrong-type", 1, 22, "/input")]);
}

#[test]
fn columns_count_characters_not_bytes() {
    let dir = Folder::new();
    // `😀` is 4 bytes and `é` 2, one character each.
    let jsonl = dir.file("data.jsonl", "{\"id\": \"😀é\", \"input\": 5}\n");
    let run = validate(&jsonl);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-wrong-type", 1, 23, "/input")]);

    let yaml = dir.file("dataset.yaml", "name: x\ncases:\n  - {id: \"😀é\", input: hi, turns: 5}\n");
    let run = validate(&yaml);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-wrong-type", 3, 34, "/cases/0/turns")]);
}

#[test]
fn duplicate_id_in_jsonl_names_the_first_line() {
    let dir = Folder::new();
    let file = dir.file(
        "data.jsonl",
        r#"{"id": "a", "input": "x"}
{"id": "b", "input": "y"}
{"id": "a", "input": "z"}
"#,
    );
    let run = validate(&file);
    run.expect_status(1);
    // Reported on the second occurrence, at its id.
    assert_eq!(run.locations(), [at("E-duplicate-id", 3, 8, "/id")]);
    assert!(message(&run.diagnostics()[0]).contains("line 1"), "{run:?}");
}

#[test]
fn letta_integer_and_string_ids_are_the_same_id() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "{\"id\": 1, \"input\": \"x\"}\n{\"id\": \"1\", \"input\": \"y\"}\n");
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-duplicate-id", 2, 8, "/id")]);
}

#[test]
fn duplicate_id_in_yaml_names_the_first_line() {
    let dir = Folder::new();
    let file = dir.file(
        "dataset.yaml",
        "name: x
cases:
  - id: a
    input: hi
  - id: b
    input: ho
  - id: a
    input: again
",
    );
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-duplicate-id", 7, 9, "/id")]);
    assert!(message(&run.diagnostics()[0]).contains("line 3"), "{run:?}");
}

#[test]
fn duplicate_id_in_csv_counts_lines_of_multiline_cells() {
    let dir = Folder::new();
    // The first record spans lines 2 and 3.
    let file = dir.file("data.csv", "id,input\n1,\"two\nlines\"\n2,b\n1,c\n");
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-duplicate-id", 5, 1, "/id")]);
    assert!(message(&run.diagnostics()[0]).contains("line 2"), "{run:?}");
}

#[test]
fn unknown_turn_role_in_a_maslab_manifest() {
    let dir = Folder::new();
    let file = dir.file(
        "dataset.yaml",
        manifest(
            "  - id: one
    inputs:
      user:
      - role: user
        content: hi
      - role: operator
        content: stop
",
        ),
    );
    let run = validate(&file);
    run.expect_status(1);
    // `      - role: operator` is line 12; `operator` starts at column 15.
    assert_eq!(run.locations(), [at("E-unknown-role", 12, 15, "/spec/items/0/inputs/user/1/role")]);
    assert!(message(&run.diagnostics()[0]).contains("operator"), "{run:?}");
}

#[test]
fn per_turn_length_mismatch_in_a_letta_row() {
    let dir = Folder::new();
    let file =
        dir.file("data.jsonl", "{\"id\": 1, \"input\": [\"a\", \"b\"], \"ground_truth\": [\"x\", \"y\", \"z\"]}\n");
    let run = validate(&file);
    run.expect_status(1);
    // At the `[` of `ground_truth`.
    assert_eq!(run.locations(), [at("E-per-turn-length", 1, 48, "/ground_truth")]);
}

#[test]
fn per_turn_length_mismatch_in_a_letta_csv_record() {
    let dir = Folder::new();
    let file = dir.file(
        "data.csv",
        "id,input,ground_truth\n1,\"[\"\"a\"\", \"\"b\"\"]\",\"[\"\"x\"\", \"\"y\"\", \"\"z\"\"]\"\n",
    );
    let run = validate(&file);
    run.expect_status(1);
    // The `ground_truth` cell's quote is column 20; its content starts at column 21.
    assert_eq!(run.locations(), [at("E-per-turn-length", 2, 21, "/ground_truth")]);
}

#[test]
fn per_turn_length_mismatch_in_a_native_case() {
    let dir = Folder::new();
    let file = dir.file(
        "dataset.yaml",
        "name: x
cases:
  - id: a
    input: first
    turns:
      - {role: user, content: second}
    expected:
      per_turn: [one, two, three]
",
    );
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-per-turn-length", 8, 17, "/cases/0/expected/per_turn")]);
}

#[test]
fn memory_seed_paths_missing_or_outside_the_dataset_folder() {
    let dir = Folder::new();
    dir.file("ds/seeds/ok.yaml", "- source: notes\n  content: Alice likes trains\n");
    dir.file("outside.yaml", "- source: notes\n  content: secret\n");
    let file = dir.file(
        "ds/dataset.yaml",
        manifest(
            "  - id: one
    inputs:
      user:
      - role: user
        content: hi
      memory_seeds: seeds/nope.yaml
  - id: two
    inputs:
      user:
      - role: user
        content: hi
      memory_seeds: ../outside.yaml
  - id: three
    inputs:
      user:
      - role: user
        content: hi
      memory_seeds: seeds/ok.yaml
",
        ),
    );
    let run = validate(&file);
    run.expect_status(1);
    // `      memory_seeds: ` is 20 characters: the path starts at column 21.
    assert_eq!(
        run.locations(),
        [
            at("E-seed-path-missing", 12, 21, "/spec/items/0/inputs/memory_seeds"),
            at("E-seed-path-escapes", 18, 21, "/spec/items/1/inputs/memory_seeds"),
        ]
    );
    let diagnostics = run.diagnostics();
    assert!(message(&diagnostics[0]).contains("seeds/nope.yaml"), "{run:?}");
    assert!(message(&diagnostics[1]).contains("../outside.yaml"), "{run:?}");
}

#[test]
fn memory_seed_path_may_not_be_absolute() {
    let dir = Folder::new();
    let outside = dir.file("outside.yaml", "- source: notes\n  content: secret\n");
    let file = dir.file(
        "ds/dataset.yaml",
        format!(
            "apiVersion: lab/v1\nkind: Dataset\nspec:\n  items:\n  - id: one\n    prompt: hi\n    memory_seeds: {}\n",
            outside.display()
        ),
    );
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-seed-path-escapes", 7, 19, "/spec/items/0/memory_seeds")]);
}

/// A seed path inside the folder that is a link to a file outside it escapes too, however the
/// dataset file was named on the command line.
#[cfg(unix)]
#[test]
fn memory_seed_link_out_of_the_dataset_folder_escapes() {
    let dir = Folder::new();
    dir.file("outside.yaml", "- source: notes\n  content: secret\n");
    let file = dir.file(
        "ds/dataset.yaml",
        "apiVersion: lab/v1\nkind: Dataset\nspec:\n  items:\n  - id: one\n    prompt: hi\n    memory_seeds: link.yaml\n",
    );
    std::os::unix::fs::symlink("../outside.yaml", dir.join("ds/link.yaml")).unwrap();
    let expected = [at("E-seed-path-escapes", 7, 19, "/spec/items/0/memory_seeds")];

    let by_full_path = validate(&file);
    by_full_path.expect_status(1);
    assert_eq!(by_full_path.locations(), expected);

    let by_bare_name =
        run(casebook().current_dir(dir.join("ds")).args(["validate", "--format", "json", "dataset.yaml"]));
    by_bare_name.expect_status(1);
    assert_eq!(by_bare_name.locations(), expected);
}

#[test]
fn rubric_and_rubric_path_together() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "{\"id\": 1, \"input\": \"a\", \"rubric\": \"r\", \"rubric_path\": \"p.txt\"}\n");
    let run = validate(&file);
    run.expect_status(1);
    // At the value of `rubric_path`.
    assert_eq!(run.locations(), [at("E-rubric-conflict", 1, 55, "/rubric_path")]);
}

#[test]
fn integers_beyond_2_to_the_53() {
    let dir = Folder::new();
    let file = dir.file(
        "data.jsonl",
        r#"{"id": 9007199254740993, "input": "a"}
{"id": "b", "input": "a", "metadata": {"n": -9007199254740993}}
{"id": "c", "input": "a", "metadata": {"max": 9007199254740992, "min": -9007199254740992}}
{"id": "d", "input": "a", "metadata": {"n": 12345678901234567890123}}
"#,
    );
    let run = validate(&file);
    run.expect_status(1);
    // ±2^53 itself is fine (line 3).
    assert_eq!(
        run.locations(),
        [
            at("E-integer-range", 1, 8, "/id"),
            at("E-integer-range", 2, 45, "/metadata/n"),
            at("E-integer-range", 4, 45, "/metadata/n"),
        ]
    );
}

#[test]
fn integer_beyond_2_to_the_53_in_yaml() {
    let dir = Folder::new();
    let file = dir.file(
        "dataset.yaml",
        "name: x\ncases:\n  - id: a\n    input: hi\n    metadata:\n      n: 18446744073709551616\n",
    );
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-integer-range", 6, 10, "/cases/0/metadata/n")]);
}

#[test]
fn empty_jsonl_file() {
    let dir = Folder::new();
    for (name, text) in [("empty.jsonl", ""), ("blank.jsonl", "\n  \n\n")] {
        let file = dir.file(name, text);
        let run = validate(&file);
        run.expect_status(1);
        assert_eq!(run.locations(), [at("E-empty-dataset", 1, 1, "")], "{name}");
    }
}

#[test]
fn maslab_manifest_with_no_items() {
    let dir = Folder::new();
    let file =
        dir.file("dataset.yaml", "apiVersion: lab/v1\nkind: Dataset\nmetadata:\n  name: t\nspec:\n  items: []\n");
    let run = validate(&file);
    run.expect_status(1);
    // At the empty list: `  items: []`, line 6, column 10.
    assert_eq!(run.locations(), [at("E-empty-dataset", 6, 10, "/spec/items")]);
}
