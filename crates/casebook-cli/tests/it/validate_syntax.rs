//! Syntax-level problems (JSON, JSONL, YAML, CSV, UTF-8, nesting, duplicate keys, truncation):
//! the exact place each is reported, and that every problem of a file is reported, in order.

use crate::cli::{Folder, at, casebook, message, run, validate};

#[test]
fn jsonl_syntax_error_is_reported_on_its_physical_line() {
    let dir = Folder::new();
    let file = dir.file(
        "data.jsonl",
        r#"{"id": "a", "input": "hi"}
{"id": "b", "input": "x",}
"#,
    );
    let run = validate(&file);
    run.expect_status(1);
    // The `}` after the trailing comma is character 26 of line 2.
    assert_eq!(run.locations(), [at("E-json-syntax", 2, 26, "")]);
    assert_eq!(run.diagnostics()[0]["file"], file.display().to_string());
    assert_eq!(run.diagnostics()[0]["severity"], "error");
}

#[test]
fn json_document_syntax_error_points_at_the_character() {
    let dir = Folder::new();
    let file = dir.file(
        "dataset.json",
        r#"{
  "name": "x",
  "cases": [
    {"id": "a", "input": "hi"}
    {"id": "b", "input": "ho"}
  ]
}
"#,
    );
    let run = validate(&file);
    run.expect_status(1);
    // A `,` was expected where the second case's `{` is: line 5, column 5.
    assert_eq!(run.locations(), [at("E-json-syntax", 5, 5, "")]);
}

#[test]
fn yaml_syntax_error_points_at_the_character() {
    let dir = Folder::new();
    let file = dir.file(
        "dataset.yaml",
        "name: x
cases:
  - id: a
    input: hi: there
",
    );
    let run = validate(&file);
    run.expect_status(1);
    // The second `:` on line 4 (`    input: hi: there`) is column 14.
    assert_eq!(run.locations(), [at("E-yaml-syntax", 4, 14, "")]);
}

#[test]
fn csv_unclosed_quote_is_reported_where_the_quote_opens() {
    let dir = Folder::new();
    let file = dir.file("data.csv", "id,input,ground_truth\n1,\"hello,world\n2,x,y\n");
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-csv-syntax", 2, 3, "")]);
}

#[test]
fn csv_records_with_the_wrong_number_of_cells() {
    let dir = Folder::new();
    let file = dir.file("data.csv", "id,input,ground_truth\n1,hello,world,extra\n2,x\n3,ok,fine\n");
    let run = validate(&file);
    run.expect_status(1);
    // Too many: at the first extra cell (`extra`, column 15). Too few: at the record.
    assert_eq!(run.locations(), [at("E-csv-syntax", 2, 15, ""), at("E-csv-syntax", 3, 1, "")]);
    // The messages give both counts.
    let diagnostics = run.diagnostics();
    let (first, second) = (message(&diagnostics[0]), message(&diagnostics[1]));
    assert!(first.contains('4') && first.contains('3'), "{run:?}");
    assert!(second.contains('2') && second.contains('3'), "{run:?}");
}

#[test]
fn invalid_utf8_in_a_jsonl_row_is_reported_at_the_byte_and_other_rows_are_read() {
    let dir = Folder::new();
    let file = dir.file(
        "data.jsonl",
        b"{\"id\": \"a\", \"input\": \"ok\"}\n{\"id\": \"b\", \"input\": \"caf\xe9 x\"}\n{\"id\": \"c\", \"input\": 3}\n",
    );
    let run = validate(&file);
    run.expect_status(1);
    // `{"id": "b", "input": "caf` is 25 characters: the bad byte is column 26.
    assert_eq!(run.locations(), [at("E-invalid-utf8", 2, 26, ""), at("E-wrong-type", 3, 22, "/input")]);
}

#[test]
fn invalid_utf8_in_yaml_is_reported_at_the_byte() {
    let dir = Folder::new();
    let file = dir.file("dataset.yaml", b"name: x\ncases:\n  - id: a\n    input: \"caf\xe9\"\n");
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-invalid-utf8", 4, 16, "")]);
}

#[test]
fn invalid_utf8_in_csv_does_not_hide_the_problems_after_it() {
    let dir = Folder::new();
    let file = dir.file("data.csv", b"id,input\n1,ok\n2,caf\xe9\n3,ok\n4,a,b\n");
    let run = validate(&file);
    run.expect_status(1);
    // Line 5 has a third cell (column 5) the header has no column for.
    assert_eq!(run.locations(), [at("E-invalid-utf8", 3, 6, ""), at("E-csv-syntax", 5, 5, "")]);
}

/// The nesting limit the message states, e.g. 128 in "nesting deeper than 128 levels".
fn stated_limit(message: &str) -> u64 {
    message.split_whitespace().find_map(|w| w.parse().ok()).unwrap_or_else(|| panic!("no limit in {message:?}"))
}

#[test]
fn deeply_nested_json_document_is_an_error_not_a_crash() {
    let dir = Folder::new();
    let file = dir.file("deep.json", "[".repeat(100_000));
    let run = validate(&file);
    run.expect_status(1);
    let diagnostics = run.diagnostics();
    assert_eq!(diagnostics.len(), 1, "{run:?}");
    // Reported at the first bracket beyond the limit.
    let limit = stated_limit(message(&diagnostics[0]));
    assert_eq!(run.locations(), [at("E-too-deep", 1, limit + 1, "")]);
}

#[test]
fn deeply_nested_jsonl_row_is_an_error_and_the_next_rows_are_read() {
    let dir = Folder::new();
    let text = format!("{}\n{{\"id\": \"b\", \"input\": 1}}\n", "[".repeat(100_000));
    let file = dir.file("deep.jsonl", text);
    let run = validate(&file);
    run.expect_status(1);
    let limit = stated_limit(message(&run.diagnostics()[0]));
    assert_eq!(run.locations(), [at("E-too-deep", 1, limit + 1, ""), at("E-wrong-type", 2, 22, "/input")]);
}

#[test]
fn deeply_nested_yaml_is_a_nesting_error() {
    let dir = Folder::new();
    let file = dir.file("deep.yaml", format!("name: x\ncases: {}\n", "[".repeat(100_000)));
    let run = validate(&file);
    run.expect_status(1);
    let diagnostics = run.diagnostics();
    assert_eq!(diagnostics.len(), 1, "{run:?}");
    assert_eq!(run.locations()[0].code, "E-too-deep", "{run:?}");
    assert_eq!(run.locations()[0].line, 2, "{run:?}");
}

#[test]
fn duplicate_key_in_a_jsonl_row() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", r#"{"id": "a", "input": "x", "id": "b"}"#.to_owned() + "\n");
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-duplicate-key", 1, 27, "/id")]);
    assert!(message(&run.diagnostics()[0]).contains("line 1, column 2"), "{run:?}");
}

#[test]
fn duplicate_key_nested_in_metadata() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", r#"{"id": "a", "input": "x", "metadata": {"k": 1, "k": 2}}"#.to_owned() + "\n");
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-duplicate-key", 1, 48, "/metadata/k")]);
    assert!(message(&run.diagnostics()[0]).contains("line 1, column 40"), "{run:?}");
}

#[test]
fn duplicate_key_in_yaml() {
    let dir = Folder::new();
    let file = dir.file(
        "dataset.yaml",
        "name: x
cases:
  - id: a
    input: hi
    input: ho
",
    );
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-duplicate-key", 5, 5, "/cases/0/input")]);
    assert!(message(&run.diagnostics()[0]).contains("line 4, column 5"), "{run:?}");
}

#[test]
fn truncated_jsonl_file_is_reported_at_its_end() {
    let dir = Folder::new();
    // The last line is cut in the middle of a key, with no final newline.
    let file = dir.file(
        "data.jsonl",
        r#"{"id": "a", "input": "x"}
{"id": "b", "input": "y"}
{"id": "c", "inp"#,
    );
    let run = validate(&file);
    run.expect_status(1);
    // `{"id": "c", "inp` is 16 characters: the input ends before column 17.
    assert_eq!(run.locations(), [at("E-json-syntax", 3, 17, "")]);
    let hint = run.diagnostics()[0]["hint"].as_str().unwrap_or_default().to_owned();
    assert!(hint.contains("truncated"), "the hint should say the file may be truncated: {run:?}");
}

#[test]
fn every_problem_is_reported_in_file_order() {
    let dir = Folder::new();
    let file = dir.file(
        "data.jsonl",
        r#"{"id": "a", "input": 1}
{"id": "b", "input": "fine"}
{"id": "c"}
{"id": "d", "input": "x"
"#,
    );
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(
        run.locations(),
        [at("E-wrong-type", 1, 22, "/input"), at("E-missing-field", 3, 1, ""), at("E-json-syntax", 4, 25, "")]
    );
}

#[test]
fn problems_far_apart_in_a_large_file_keep_their_lines() {
    // Several MiB, so the file is read in chunks on several threads.
    let dir = Folder::new();
    let mut text = String::new();
    for i in 1..=30_000 {
        if i == 20_000 {
            text.push_str("{\"id\": \"broken\", \"input\": 7}\n");
        } else {
            text.push_str(&format!("{{\"id\": \"c{i}\", \"input\": \"{}\"}}\n", "q".repeat(100)));
        }
    }
    text.push_str("{\"id\": \"c5\", \"input\": \"again\"}\n");
    let file = dir.file("data.jsonl", text);
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-wrong-type", 20_000, 27, "/input"), at("E-duplicate-id", 30_001, 8, "/id")]);
    assert!(message(&run.diagnostics()[1]).contains("line 5"), "{run:?}");
}

#[test]
fn every_file_is_validated() {
    let dir = Folder::new();
    let first = dir.file("a.jsonl", "{\"id\": \"a\", \"input\": 1}\n");
    let second = dir.file("b.jsonl", "{\"id\": \"b\"}\n");
    let run = run(casebook().args(["validate", "--format", "json"]).arg(&first).arg(&second));
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-wrong-type", 1, 22, "/input"), at("E-missing-field", 1, 1, "")]);
    let files: Vec<String> = run.diagnostics().iter().map(|d| d["file"].as_str().unwrap().to_owned()).collect();
    assert_eq!(files, [first.display().to_string(), second.display().to_string()]);
}

#[test]
fn max_errors_stops_after_that_many() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "{\"input\": 1}\n{\"input\": 2}\n{\"input\": 3}\n");
    let run = run(casebook().args(["validate", "--format", "json", "--max-errors", "2"]).arg(&file));
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-wrong-type", 1, 11, "/input"), at("E-wrong-type", 2, 11, "/input")]);
}

/// Runs `casebook validate --format json FILE` with at most 2 GB of address space and a minute.
#[cfg(target_os = "linux")]
fn validate_capped(file: &std::path::Path) -> crate::cli::Run {
    let mut cmd = assert_cmd::Command::new("sh");
    cmd.args(["-c", "ulimit -v 2000000 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_casebook")])
        .args(["validate", "--format", "json"])
        .arg(file)
        .env("NO_COLOR", "1")
        .timeout(std::time::Duration::from_secs(60));
    run(&mut cmd)
}

/// A "billion laughs" document: nine levels of nine aliases. Expanding it would take tens of
/// gigabytes; casebook must refuse it with a diagnostic instead of running out of memory.
#[cfg(target_os = "linux")]
#[test]
fn yaml_alias_bomb_is_an_error_not_a_crash() {
    let dir = Folder::new();
    let control = dir.file("control.yaml", "name: x\ncases:\n  - id: a\n    input: hi\n");
    validate_capped(&control).expect_status(0);

    let mut text = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().zip(["b", "c", "d", "e", "f", "g", "h", "i"]) {
        let refs = vec![format!("*{prev}"); 9].join(",");
        text.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    text.push_str("cases:\n  - id: x\n    input: *i\n");
    let file = dir.file("bomb.yaml", text);
    let run = validate_capped(&file);
    run.expect_status(1);
    let diagnostics = run.diagnostics();
    assert!(diagnostics.iter().any(|d| d["severity"] == "error"), "{run:?}");
}

#[test]
fn yaml_control_characters_are_refused_with_their_line_and_column() {
    let dir = Folder::new();
    for (name, text, line, column) in [
        ("bel.yaml", "name: d\nitems:\n  - id: a\n    prompt: \"ring \u{7} the bell\"\n", 4, 19),
        ("esc.yaml", "name: d\nitems:\n  - id: é\n    prompt: x\u{1b}[31m\n", 4, 14),
        ("del.yaml", "name: d\u{7f}\nitems: []\n", 1, 8),
    ] {
        let file = dir.file(name, text);
        let run = validate(&file);
        run.expect_status(1);
        assert_eq!(run.locations(), [at("E-yaml-syntax", line, column, "")], "{name}");
        assert!(message(&run.diagnostics()[0]).contains("control character"), "{name}");
    }
}
