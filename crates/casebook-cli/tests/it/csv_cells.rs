//! CSV cells keep their text exactly (`007` is not 7, `NA` and `null` are not missing), and
//! only the cells letta decodes as JSON are decoded.

use serde_json::json;

use crate::cli::{Folder, at, casebook, ids, jsonl, run, to_native, validate};

#[test]
fn letta_csv_cells_keep_their_text() {
    let dir = Folder::new();
    let file = dir.file(
        "data.csv",
        "id,input,ground_truth
1,q1,007
2,q2,0.30
3,q3,NA
4,q4,null
5,q5,{4}
6,q6,\"007\"
7,q7,true
",
    );
    let (_, cases) = to_native(&file);
    assert_eq!(ids(&cases), ["1", "2", "3", "4", "5", "6", "7"]);
    let outputs: Vec<&serde_json::Value> = cases.iter().map(|c| &c["expected"]["output"]).collect();
    assert_eq!(
        outputs,
        [&json!("007"), &json!("0.30"), &json!("NA"), &json!("null"), &json!("{4}"), &json!("007"), &json!("true")]
    );
}

#[test]
fn letta_csv_list_cells_are_turns() {
    let dir = Folder::new();
    let file = dir.file(
        "data.csv",
        "id,input,ground_truth
1,\"[\"\"first\"\", \"\"second\"\"]\",\"[\"\"a1\"\", \"\"a2\"\"]\"
2,\"[\"\"Hello\"\", \"\"What's your name?\"\"]\",Alice
3,[not a list,plain
4,not a list],plain
",
    );
    let (_, cases) = to_native(&file);
    assert_eq!(ids(&cases), ["1", "2", "3", "4"]);
    assert_eq!(cases[0]["input"], "first");
    assert_eq!(cases[0]["turns"], json!([{"role": "user", "content": "second"}]));
    assert_eq!(cases[0]["expected"]["per_turn"], json!(["a1", "a2"]));
    assert_eq!(cases[1]["input"], "Hello");
    assert_eq!(cases[1]["turns"], json!([{"role": "user", "content": "What's your name?"}]));
    assert_eq!(cases[1]["expected"]["output"], "Alice");
    // Only a cell that starts with `[` and ends with `]` is a list.
    assert_eq!(cases[2]["input"], "[not a list");
    assert_eq!(cases[2].get("turns"), None);
    assert_eq!(cases[3]["input"], "not a list]");
}

#[test]
fn invalid_json_in_a_cell_is_reported_where_it_is_in_the_file() {
    let dir = Folder::new();
    // The cell holds `["a",]`; in the file its quotes are doubled: `"[""a"",]"`.
    let file = dir.file("data.csv", "id,input\n1,\"[\"\"a\"\",]\"\n");
    let run = validate(&file);
    run.expect_status(1);
    // The `]` after the trailing comma is column 11 of line 2.
    let first = run.locations().into_iter().next();
    assert_eq!(first, Some(at("E-json-syntax", 2, 11, "/input")), "{run:?}");
}

#[test]
fn csv_id_with_leading_zeros_stays_the_same_id_in_letta_jsonl() {
    let dir = Folder::new();
    let file = dir.file("data.csv", "id,input,ground_truth\n007,q,a\n");
    let (_, cases) = to_native(&file);
    assert_eq!(ids(&cases), ["007"]);

    let out = dir.join("out.jsonl");
    run(casebook().arg("convert").arg(&file).args(["--to", "letta", "-q", "-o"]).arg(&out)).expect_status(0);
    let rows = jsonl(&fs_err::read_to_string(&out).unwrap());
    // `7` would be another sample id.
    assert_eq!(rows, [json!({"id": "007", "input": "q", "ground_truth": "a"})]);
}

#[test]
fn generic_csv_with_a_column_map() {
    let dir = Folder::new();
    let file =
        dir.file("questions.csv", "qid,question,answer,topic\nq-1,\"Name the largest ocean, in one word.\",007,geo\n");
    let run = run(casebook().arg("convert").arg(&file).args([
        "--from",
        "csv",
        "--map",
        "id=qid,input=question,expected.output=answer",
        "--to",
        "casebook",
    ]));
    run.expect_status(0);
    let cases = jsonl(&run.stdout);
    assert_eq!(ids(&cases), ["q-1"]);
    assert_eq!(cases[0]["input"], "Name the largest ocean, in one word.");
    assert_eq!(cases[0]["expected"]["output"], "007");
    assert_eq!(cases[0]["metadata"], json!({"topic": "geo"}));
}

#[test]
fn a_tag_written_as_text_gets_the_list_it_should_be() {
    let dir = Folder::new();
    let file = dir.file("data.csv", "input,tags\nq1,\"[\"\"ok\"\"]\"\nq2,spy\n");
    let out = validate(&file);
    out.expect_status(1);
    assert_eq!(out.locations(), [at("E-wrong-type", 3, 4, "/tags")]);
    assert_eq!(out.diagnostics()[0]["hint"], "write it as a list: `[\"spy\"]` (in a CSV cell too)");
}
