//! `\u` escapes in JSONL rows, end to end through the reader: text written all in escapes (as
//! Python's `json.dumps` writes non-ASCII text by default) reads as the characters, and a broken
//! escape inside such a run is reported at its line and column.

use casebook_formats::{Format, Syntax};

use crate::harness::{cases_of, convert_file, temp_file};

/// letta-evals JSONL rows (the shape `letta_evals/datasets/loader.py` reads), their Arabic and
/// emoji `\u`-escaped by `json.dumps`: a good row, a row with a lone high surrogate in the middle
/// of a run, a row with `\u0000` and a surrogate pair between runs.
const ROWS: &str = concat!(
    r#"{"id": "a", "input": "\u0627\u0644\u0639\u0645\u064a\u0644", "ground_truth": "\u0644"}"#,
    "\n",
    r#"{"id": "b", "input": "\u0627\u0644\ud83d x", "ground_truth": "\u0644"}"#,
    "\n",
    r#"{"id": "c", "input": "\u0000\u0627\ud83d\ude42\u0644", "ground_truth": "ok"}"#,
    "\n",
);

#[test]
fn escaped_rows_read_as_their_characters_and_a_broken_one_is_located() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = temp_file(&dir, "escaped.jsonl", ROWS.as_bytes());
    let (out, diags) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    let located: Vec<_> = diags.iter().map(|d| (d.code.as_str(), d.line, d.column, d.message.as_str())).collect();
    // Line 2: `{"id": "b", "input": "` is 22 characters, then two escapes (12), then the lone
    // `\ud83d` (6): the character after it, column 41, is where its pair should have been.
    assert_eq!(located, [("E-json-syntax", 2, 41, "unpaired surrogate in `\\u` escape")]);
    let cases = cases_of(&out);
    let inputs: Vec<_> = cases.as_array().expect("rows").iter().map(|c| c["input"].clone()).collect();
    assert_eq!(inputs, ["العميل", "\u{0}ا🙂ل"]);
}
