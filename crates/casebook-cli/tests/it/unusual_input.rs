//! Unusual but valid files are read, completely and exactly: byte order marks, CRLF line
//! endings, blank lines, no final newline, and a single 50 MB line.

use serde_json::json;

use crate::cli::{Folder, at, casebook, ids, jsonl, run, to_native, validate};

#[test]
fn byte_order_mark_gives_at_most_a_warning() {
    let dir = Folder::new();
    let files = [
        dir.file("data.jsonl", "\u{feff}{\"id\": \"a\", \"input\": \"x\"}\n{\"id\": \"b\", \"input\": \"y\"}\n"),
        dir.file("data.csv", "\u{feff}id,input,ground_truth\n1,hello,007\n"),
        dir.file("dataset.yaml", "\u{feff}name: x\ncases:\n  - id: a\n    input: hi\n"),
        dir.file("dataset.json", "\u{feff}{\"name\": \"x\", \"cases\": [{\"id\": \"a\", \"input\": \"hi\"}]}"),
    ];
    for file in &files {
        let run = validate(file);
        run.expect_status(0);
        for d in run.diagnostics() {
            assert_eq!(d["code"], "W-bom", "{run:?}");
            assert_eq!(d["severity"], "warning", "{run:?}");
        }
        assert!(run.diagnostics().len() <= 1, "{run:?}");
    }
    // The BOM is not part of the first CSV column's name.
    let (_, cases) = to_native(&files[1]);
    assert_eq!(cases[0]["id"], "1");
    assert_eq!(cases[0]["input"], "hello");
    assert_eq!(cases[0]["expected"]["output"], "007");
    let (_, cases) = to_native(&files[0]);
    assert_eq!(ids(&cases), ["a", "b"]);
}

#[test]
fn byte_order_mark_does_not_shift_columns() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "\u{feff}{\"id\": \"a\", \"input\": 5}\n");
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("W-bom", 1, 1, ""), at("E-wrong-type", 1, 22, "/input")]);
}

#[test]
fn crlf_jsonl_is_valid_and_values_have_no_carriage_return() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "{\"id\": \"a\", \"input\": \"x\"}\r\n{\"id\": \"b\", \"input\": \"y\"}\r\n");
    validate(&file).expect_status(0);
    let (_, cases) = to_native(&file);
    assert_eq!(ids(&cases), ["a", "b"]);
    assert_eq!(cases[1]["input"], "y");
}

#[test]
fn crlf_does_not_shift_lines_or_columns() {
    let dir = Folder::new();
    let file = dir.file(
        "data.jsonl",
        "{\"id\": \"a\", \"input\": \"x\"}\r\n{\"id\": \"b\", \"input\": \"y\"}\r\n{\"id\": \"c\", \"input\": 3}\r\n",
    );
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-wrong-type", 3, 22, "/input")]);
}

#[test]
fn crlf_yaml_and_csv_keep_their_values() {
    let dir = Folder::new();
    let yaml =
        dir.file("dataset.yaml", "name: x\r\ncases:\r\n  - id: a\r\n    input: hi\r\n  - id: b\r\n    input: ho\r\n");
    validate(&yaml).expect_status(0);
    let (_, cases) = to_native(&yaml);
    assert_eq!(ids(&cases), ["a", "b"]);
    assert_eq!(cases[0]["input"], "hi");
    assert_eq!(cases[1]["input"], "ho");

    // A quoted cell keeps its own line break; the record's CRLF is not part of the last cell.
    let csv = dir.file("data.csv", "id,input,ground_truth\r\n1,\"a\r\nb\",x\r\n2,c,\"y\"\r\n");
    validate(&csv).expect_status(0);
    let (_, cases) = to_native(&csv);
    assert_eq!(ids(&cases), ["1", "2"]);
    assert_eq!(cases[0]["input"], "a\r\nb");
    assert_eq!(cases[0]["expected"]["output"], "x");
    assert_eq!(cases[1]["input"], "c");
    assert_eq!(cases[1]["expected"]["output"], "y");
}

#[test]
fn blank_lines_between_jsonl_rows_are_skipped() {
    let dir = Folder::new();
    let file =
        dir.file("data.jsonl", "\n{\"id\": \"a\", \"input\": \"x\"}\n\n   \n\t\n{\"id\": \"b\", \"input\": \"y\"}\n\n");
    let run = validate(&file);
    run.expect_status(0);
    assert_eq!(run.locations(), []);
    let (_, cases) = to_native(&file);
    assert_eq!(ids(&cases), ["a", "b"]);
}

#[test]
fn blank_lines_still_count_as_lines() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "\n{\"id\": \"a\", \"input\": \"x\"}\n\n   \n{\"id\": \"b\", \"input\": 2}\n\n");
    let run = validate(&file);
    run.expect_status(1);
    assert_eq!(run.locations(), [at("E-wrong-type", 5, 22, "/input")]);
}

#[test]
fn no_final_newline() {
    let dir = Folder::new();
    let files = [
        dir.file("data.jsonl", "{\"id\": \"a\", \"input\": \"x\"}\n{\"id\": \"b\", \"input\": \"y\"}"),
        dir.file("data.csv", "id,input\na,x\nb,y"),
        dir.file("dataset.yaml", "name: n\ncases:\n  - id: a\n    input: x\n  - id: b\n    input: y"),
    ];
    for file in &files {
        let run = validate(file);
        run.expect_status(0);
        assert_eq!(run.locations(), [], "{}", file.display());
        let (_, cases) = to_native(file);
        assert_eq!(ids(&cases), ["a", "b"], "{}", file.display());
        assert_eq!(cases[1]["input"], "y", "{}", file.display());
    }
}

#[test]
fn a_single_50_mb_line_is_read() {
    let dir = Folder::new();
    // 50 MiB of text with escapes and non-ASCII characters in it.
    let unit = "ab\\\"c\\n é→ ";
    let decoded_unit = "ab\"c\n é→ ";
    let repeats = (50 << 20) / unit.len();
    let text = format!(
        "{{\"id\": \"big\", \"input\": \"{}\"}}\n{{\"id\": \"small\", \"input\": \"y\"}}\n",
        unit.repeat(repeats)
    );
    assert!(text.len() > 50 << 20);
    let file = dir.file("big.jsonl", &text);
    drop(text);
    let out = dir.join("out.jsonl");
    let run = run(casebook().arg("convert").arg(&file).args(["--to", "casebook", "--format", "json", "-o"]).arg(&out));
    run.expect_status(0);
    assert_eq!(run.stderr_diagnostics(), Vec::<serde_json::Value>::new());
    let cases = jsonl(&fs_err::read_to_string(&out).unwrap());
    assert_eq!(ids(&cases), ["big", "small"]);
    let input = cases[0]["input"].as_str().unwrap();
    assert_eq!(input.len(), decoded_unit.len() * repeats);
    assert!(input.starts_with(decoded_unit) && input.ends_with(decoded_unit));
    assert_eq!(cases[1]["input"], json!("y"));
}
