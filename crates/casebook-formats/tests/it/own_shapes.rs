//! What `corpus.rs` checks on the real-file corpus, checked on small files written here in the
//! same shapes, so a clone without the corpus tests it too: JSON held in strings stays text,
//! whole-number ids come back as numbers, letta CSV braces are text, letta rows of several turns
//! become turns with per-turn expectations, and ids made for rows without one do not depend on
//! the order of the rows.

use casebook_formats::{Format, Syntax};

use crate::harness::{cases_of, convert_file, errors, temp_file, value_of};

#[test]
fn strings_holding_json_stay_strings_and_integers_stay_integers() {
    let dir = tempfile::tempdir().unwrap();
    let letta = temp_file(
        &dir,
        "graded.jsonl",
        br#"{"input": "Classe ce ticket", "ground_truth": "{\"category\": \"facturation\", \"urgent\": true}"}
"#,
    );
    let (out, diags) = convert_file(&letta, None, Format::Casebook, Syntax::Jsonl, None);
    assert!(errors(&diags).is_empty(), "{diags:?}");
    let output = &cases_of(&out)[0]["expected"]["output"];
    assert_eq!(output.as_str(), Some(r#"{"category": "facturation", "urgent": true}"#), "{output}");

    let manifest = temp_file(
        &dir,
        "smoke.yaml",
        "apiVersion: lab/v1\nkind: Dataset\nmetadata:\n  name: smoke\nspec:\n  items:\n  - id: 1\n    inputs:\n      \
         user:\n      - role: user\n        content: Combien font 2 + 2 ?\n    expected:\n      answer: '4'\n"
            .as_bytes(),
    );
    let (out, diags) = convert_file(&manifest, None, Format::Casebook, Syntax::Jsonl, None);
    assert!(errors(&diags).is_empty(), "{diags:?}");
    assert_eq!(cases_of(&out)[0]["id"], "1");
    let (out, _) = convert_file(&manifest, None, Format::Maslab, Syntax::Yaml, None);
    assert_eq!(value_of(&out, Syntax::Yaml)["spec"]["items"][0]["id"], 1);
}

#[test]
fn letta_csv_braces_are_text_not_json() {
    let dir = tempfile::tempdir().unwrap();
    let csv = temp_file(
        &dir,
        "braces.csv",
        "input,ground_truth\n\"How many legs has a spider? Answer in braces, e.g. {3}.\",{8}\n\
         \"Which editor? Answer in braces.\",{Notepad}\n\"Größte Stadt?\",{São Paulo}\n"
            .as_bytes(),
    );
    let (out, diags) = convert_file(&csv, None, Format::Casebook, Syntax::Jsonl, None);
    assert!(errors(&diags).is_empty(), "{diags:?}");
    let truths: Vec<String> = cases_of(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["expected"]["output"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(truths, ["{8}", "{Notepad}", "{São Paulo}"]);
}

#[test]
fn multi_turn_letta_rows_become_turns_with_per_turn_expectations() {
    let dir = tempfile::tempdir().unwrap();
    let rows = temp_file(
        &dir,
        "turns.jsonl",
        r#"{"input": ["Only the capital: Spain", "Only the capital: Portugal", "Only the capital: Österreich"], "ground_truth": ["Madrid", "Lisbon", "Wien"]}
"#
        .as_bytes(),
    );
    let (out, _) = convert_file(&rows, None, Format::Casebook, Syntax::Jsonl, None);
    let rows = cases_of(&out);
    assert_eq!(rows[0]["input"], "Only the capital: Spain");
    assert_eq!(rows[0]["turns"][1]["content"], "Only the capital: Österreich");
    assert_eq!(rows[0]["turns"][1]["role"], "user");
    assert_eq!(rows[0]["expected"]["per_turn"], serde_json::json!(["Madrid", "Lisbon", "Wien"]));
}

#[test]
fn derived_ids_do_not_depend_on_row_order() {
    let dir = tempfile::tempdir().unwrap();
    // viteval's cached shape; two rows differ only by ' and ’.
    let data = vec![
        serde_json::json!({"input": "In which year did the Rhine bridge open?", "expected": "1904"}),
        serde_json::json!({"input": "Which gas do plants take in?", "expected": "CO₂"}),
        serde_json::json!({"input": "What's the boiling point of water?", "expected": "100 °C"}),
        serde_json::json!({"input": "What’s the boiling point of water?", "expected": "100 °C"}),
    ];
    let ids = |data: &[serde_json::Value], name: &str| -> Vec<String> {
        let doc = serde_json::json!({"timestamp": "2026-01-02T03:04:05.678Z", "data": data});
        let path = temp_file(&dir, name, serde_json::to_string(&doc).unwrap().as_bytes());
        let (out, _) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
        let mut ids: Vec<String> =
            cases_of(&out).as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
        ids.sort();
        ids
    };
    let forward = ids(&data, "forward.json");
    let reversed: Vec<serde_json::Value> = data.iter().rev().cloned().collect();
    assert_eq!(forward, ids(&reversed, "reversed.json"));
    assert_eq!(forward.len(), 4, "near-duplicates are different cases: {forward:?}");
    assert_eq!(forward.iter().collect::<std::collections::BTreeSet<_>>().len(), 4, "{forward:?}");
}

/// Inspect's `samples-md.jsonl` shape: `metadata` as a string holding a JSON object, which
/// Inspect parses (`json.loads`), and `metadata: null`, which it takes as none. Both read as
/// Inspect reads them, filter as objects, and go back to Inspect as they were written.
#[test]
fn inspect_metadata_as_json_text_or_null_reads_as_inspect_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"{"id": "q1", "input": "Quelle est la capitale ?", "target": "Paris", "metadata": "{\"pays\": \"France\", \"niveau\": 2}"}
{"id": "q2", "input": "And of Peru?", "target": "Lima", "metadata": null}
{"id": "q3", "input": "Of Chile?", "target": "Santiago", "metadata": {"pays": "Chile"}}
"#;
    let file = temp_file(&dir, "samples-md.jsonl", text.as_bytes());
    let (out, diags) = convert_file(&file, Some(Format::Inspect), Format::Casebook, Syntax::Jsonl, None);
    assert!(errors(&diags).is_empty(), "{diags:?}");
    let cases = cases_of(&out);
    assert_eq!(cases[0]["metadata"], serde_json::json!({"pays": "France", "niveau": 2}));
    assert!(cases[1].get("metadata").is_none(), "{}", cases[1]);
    // Back to Inspect: every line as it was.
    let native = temp_file(&dir, "native.jsonl", &out);
    let (back, diags) = convert_file(&native, None, Format::Inspect, Syntax::Jsonl, None);
    assert!(errors(&diags).is_empty(), "{diags:?}");
    let rows: Vec<serde_json::Value> =
        String::from_utf8(back).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let source: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows, source);
}

/// A metadata string that does not hold a JSON object is an error at the string, as Inspect
/// refuses it.
#[test]
fn inspect_metadata_text_that_is_not_an_object_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let file = temp_file(
        &dir,
        "bad.jsonl",
        "{\"input\": \"a\", \"target\": \"b\", \"metadata\": \"[1, 2]\"}\n{\"input\": \"c\", \"target\": \"d\", \"metadata\": \"{oops\"}\n"
            .as_bytes(),
    );
    let (_, diags) = convert_file(&file, Some(Format::Inspect), Format::Casebook, Syntax::Jsonl, None);
    let got: Vec<(u64, u64, &str)> = diags.iter().map(|d| (d.line, d.column, d.message.as_str())).collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], (1, 43, "`metadata` is a string holding JSON that is not an object"));
    assert_eq!((got[1].0, got[1].1), (2, 43));
    assert!(got[1].2.starts_with("`metadata` is a string that is not a JSON object: "), "{got:?}");
}

/// OpenAI evals' match samples (`{"input": [chat messages], "ideal": …}`, as in its registry's
/// `samples.jsonl`) with a number as `ideal`: evals' `Match` compares text and refuses it;
/// casebook keeps the value and warns where it is.
#[test]
fn an_evals_ideal_that_is_a_number_is_kept_with_a_located_warning() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"{"input": [{"role": "user", "content": "2 + 2 = ?"}], "ideal": 4}
{"input": [{"role": "user", "content": "Half of 9?"}], "ideal": ["4.5", 4.5]}
{"input": [{"role": "user", "content": "3 + 3 = ?"}], "ideal": "6"}
"#;
    let file = temp_file(&dir, "samples.jsonl", text.as_bytes());
    let (out, diags) = convert_file(&file, Some(Format::OpenaiEvals), Format::Casebook, Syntax::Jsonl, None);
    let got: Vec<(&str, u64, u64, &str)> =
        diags.iter().map(|d| (d.code.as_str(), d.line, d.column, d.pointer.as_deref().unwrap_or_default())).collect();
    assert_eq!(got, [("W-number-ideal", 1, 64, "/ideal"), ("W-number-ideal", 2, 73, "/ideal/1")]);
    assert_eq!(diags[0].message, "`ideal` 4 is a number");
    let cases = cases_of(&out);
    assert_eq!(cases[0]["expected"]["output"], 4);
    assert_eq!(cases[1]["expected"]["acceptable"], serde_json::json!(["4.5", 4.5]));
}
