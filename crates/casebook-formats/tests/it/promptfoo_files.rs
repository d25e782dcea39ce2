//! promptfoo configurations whose tests and variables are in other files, read as promptfoo's
//! `readTests`, `loadTestsFromGlob` and `readTestFiles` read them. The files are of our own, in
//! the shape of promptfoo's "Import tests from separate files" configuration (its
//! `configuration/test-cases` guide: `tests: [file://tests/tests2.yaml, file://tests/*, {vars}]`)
//! and of a third-party suite whose tests take their variables from `vars: ../vars/vars_*.yaml`.

use casebook_formats::{Format, Input, ReadOptions, SeedFiles, Syntax, Target, convert};
use casebook_model::Diagnostic;
use serde_json::{Value, json};

use crate::harness::{cases_of, convert_with, errors, temp_file, value_of};

/// Converts `path` (read as promptfoo) to `format`/`syntax`, lossy or not: the output, the
/// diagnostics, and how many cases were written.
fn convert_lossy(
    path: &std::path::Path,
    format: Format,
    syntax: Syntax,
    lossy: bool,
) -> (Vec<u8>, Vec<Diagnostic>, u64) {
    let input = Input::path(path);
    let opts = ReadOptions { format: Some(Format::Promptfoo), threads: 2, ..ReadOptions::default() };
    let target = Target { format, syntax, lossy, column_map: None, seed_files: SeedFiles::Keep, confirm_drafts: false };
    let mut out = Vec::new();
    let mut diags = Vec::new();
    let summary = {
        let mut on_batch = |d: &[Diagnostic], _: &casebook_formats::Progress| diags.extend_from_slice(d);
        convert(&input, &opts, &target, Vec::new(), Box::new(&mut out), None, &mut on_batch).expect("convert")
    };
    (out, diags, summary.written)
}

/// The suite: a configuration naming one test file, a pattern of four files of every syntax,
/// and an inline test whose variables come from two files.
fn suite(dir: &tempfile::TempDir) -> std::path::PathBuf {
    for sub in ["tests", "more", "vars"] {
        fs_err::create_dir_all(dir.path().join(sub)).unwrap();
    }
    temp_file(
        dir,
        "tests/tests2.yaml",
        b"- description: Pix first\n  vars:\n    question: Como pago?\n  assert:\n    - type: icontains\n      value: pix\n\
- vars: ../vars/vars_*.yaml\n  assert:\n    - type: icontains-all\n      value: [pix, boleto, cart\xc3\xa3o]\n",
    );
    temp_file(dir, "vars/vars_1.yaml", "question: Quais formas de pagamento?\nlang: pt\n".as_bytes());
    temp_file(dir, "vars/vars_2.yaml", b"lang: pt-BR\nchannel: app\n");
    // Sorted as read: a.json, b.yaml, c.csv, d.jsonl.
    temp_file(dir, "more/b.yaml", b"vars: {question: Aceita PIX?}\n");
    temp_file(dir, "more/a.json", br#"[{"vars": {"question": "Tem boleto?"}}]"#);
    temp_file(dir, "more/c.csv", "question,__expected\nParcela no cartão?,icontains: sim\n".as_bytes());
    temp_file(dir, "more/d.jsonl", b"{\"vars\": {\"question\": \"E o troco?\"}}\n");
    temp_file(
        dir,
        "promptfooconfig.yaml",
        concat!(
            "description: pagamentos\nprompts: [file://prompt.txt]\ndefaultTest:\n  vars:\n    tone: calm\n",
            "tests:\n  - file://tests/tests2.yaml\n  - file://more/*\n  - vars: [vars/vars_2.yaml, vars/vars_1.yaml]\n",
        )
        .as_bytes(),
    )
}

#[test]
fn tests_and_variables_in_other_files_are_read_as_promptfoo_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = suite(&dir);
    for stream_from in [None, Some(0)] {
        let ((out, diags), _) =
            convert_with(&config, Some(Format::Promptfoo), Format::Casebook, Syntax::Jsonl, None, stream_from);
        assert!(diags.is_empty(), "{diags:?}");
        let cases = cases_of(&out);
        let cases = cases.as_array().unwrap();
        let read: Vec<(Value, Value)> = cases.iter().map(|c| (c["input"].clone(), c["description"].clone())).collect();
        // promptfoo: the tests of each file in turn, `defaultTest` applied to all; the CSV file
        // is a standalone tests file (`Row #1`); variables files merged in order, a later
        // file's variable replacing an earlier one's where it was.
        assert_eq!(
            read,
            [
                (json!({"tone": "calm", "question": "Como pago?"}), json!("Pix first")),
                (
                    json!({"tone": "calm", "question": "Quais formas de pagamento?", "lang": "pt-BR", "channel": "app"}),
                    Value::Null
                ),
                (json!({"tone": "calm", "question": "Tem boleto?"}), Value::Null),
                (json!({"tone": "calm", "question": "Aceita PIX?"}), Value::Null),
                (json!({"tone": "calm", "question": "Parcela no cartão?"}), json!("Row #1")),
                (json!({"tone": "calm", "question": "E o troco?"}), Value::Null),
                (
                    json!({"tone": "calm", "lang": "pt", "channel": "app", "question": "Quais formas de pagamento?"}),
                    Value::Null
                ),
            ],
            "stream_from {stream_from:?}"
        );
        assert_eq!(cases[4]["expected"]["assert"], json!([{"type": "icontains", "value": "sim"}]));
        assert_eq!(cases[1]["provenance"]["layout"]["from"], "file://tests/tests2.yaml");
        assert_eq!(cases[1]["provenance"]["layout"]["vars_from"], "../vars/vars_*.yaml");
    }
    // A referenced file that changes changes the cases read.
    temp_file(&dir, "more/b.yaml", b"vars: {question: Aceita Pix?}\n");
    let ((out, _), _) = convert_with(&config, None, Format::Casebook, Syntax::Jsonl, None, None);
    assert_eq!(cases_of(&out)[3]["input"]["question"], "Aceita Pix?");
}

#[test]
fn writing_back_keeps_variable_files_and_says_test_files_are_inlined() {
    let dir = tempfile::tempdir().unwrap();
    let config = suite(&dir);
    // Tests read from other files are written inline (casebook writes one file): promptfoo
    // reads the same tests, so nothing is refused; each reference is told once, at its first
    // test written.
    let (out, diags, written) = convert_lossy(&config, Format::Promptfoo, Syntax::Yaml, false);
    assert_eq!(written, 7, "{diags:?}");
    let told: Vec<(u64, &str, &str)> = diags.iter().map(|d| (d.line, d.code.as_str(), d.message.as_str())).collect();
    assert_eq!(
        told,
        [
            (
                7,
                "W-inlined",
                "the tests read from `file://tests/tests2.yaml` are written inline: `promptfoo` reads the same tests from the one file written"
            ),
            (
                8,
                "W-inlined",
                "the tests read from `file://more/*` are written inline: `promptfoo` reads the same tests from the one file written"
            ),
        ]
    );
    let back = value_of(&out, Syntax::Yaml);
    let tests = back["tests"].as_array().unwrap();
    // Written inline, the defaults left out again; the variables of the last test still as
    // the files they come from.
    assert_eq!(
        tests[0],
        json!({"description": "Pix first", "vars": {"question": "Como pago?"}, "assert": [{"type": "icontains", "value": "pix"}]})
    );
    assert_eq!(tests[1]["vars"], "../vars/vars_*.yaml", "unchanged variables keep their reference");
    assert_eq!(tests[6], json!({"vars": ["vars/vars_2.yaml", "vars/vars_1.yaml"]}));
    assert_eq!(back["defaultTest"], json!({"vars": {"tone": "calm"}}));
}

#[test]
fn references_that_do_not_resolve_are_kept_with_located_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let config = temp_file(
        &dir,
        "promptfooconfig.yaml",
        b"tests:\n  - file://missing/*.yaml\n  - vars: {q: one}\n  - file://gen.py:tests\n  - vars: nowhere/*.yaml\n    assert:\n      - {type: contains, value: x}\n  - file://also-missing.csv\n",
    );
    let ((out, diags), _) = convert_with(&config, None, Format::Casebook, Syntax::Jsonl, None, None);
    let said: Vec<String> = diags.iter().map(ToString::to_string).collect();
    assert!(errors(&diags).is_empty(), "{said:?}");
    let at: Vec<(u64, u64, &str, &str)> =
        diags.iter().map(|d| (d.line, d.column, d.code.as_str(), d.pointer.as_deref().unwrap_or_default())).collect();
    assert_eq!(
        at,
        [
            (2, 5, "W-file-var", "/tests/0"),
            (4, 5, "W-file-var", "/tests/2"),
            (5, 11, "W-file-var", "/tests/3/vars"),
            (8, 5, "W-file-var", "/tests/4"),
        ],
        "{said:?}"
    );
    assert!(said[0].contains("no file matches `file://missing/*.yaml`"), "{said:?}");
    assert!(said[1].contains("running a script"), "{said:?}");
    // The other tests are kept; a test whose variables name no file runs with none.
    let cases = cases_of(&out);
    assert_eq!(cases.as_array().unwrap().len(), 2);
    assert_eq!(cases[1]["input"], json!({}));
    // Written back, every reference is where it was.
    let (out, diags, _) = convert_lossy(&config, Format::Promptfoo, Syntax::Yaml, false);
    assert!(errors(&diags).is_empty(), "{diags:?}");
    assert_eq!(
        value_of(&out, Syntax::Yaml),
        json!({"tests": [
            "file://missing/*.yaml",
            {"vars": {"q": "one"}},
            "file://gen.py:tests",
            {"vars": "nowhere/*.yaml", "assert": [{"type": "contains", "value": "x"}]},
            "file://also-missing.csv",
        ]})
    );
}

#[test]
fn problems_inside_a_referenced_file_are_located_in_it() {
    let dir = tempfile::tempdir().unwrap();
    fs_err::create_dir_all(dir.path().join("tests")).unwrap();
    temp_file(&dir, "tests/bad.yaml", b"- vars: {q: fine}\n- vars: {q: two}\n  assert:\n    - value: no type\n");
    let config = temp_file(&dir, "config.yaml", b"tests:\n  - vars: {q: here}\n  - file://tests/bad.yaml\n");
    let ((out, diags), _) = convert_with(&config, None, Format::Casebook, Syntax::Jsonl, None, None);
    let said = errors(&diags);
    assert_eq!(said.len(), 1, "{said:?}");
    let d = &diags[0];
    assert!(d.file.ends_with("tests/bad.yaml"), "{d:?}");
    assert_eq!(
        (d.line, d.column, d.code.as_str(), d.pointer.as_deref().unwrap_or_default()),
        (4, 7, "E-missing-field", "/1/assert/0")
    );
    assert!(d.hint.as_deref().unwrap().contains("config.yaml:3:5 (/tests/1)"), "{d:?}");
    assert_eq!(cases_of(&out).as_array().map(Vec::len), Some(2), "the well-formed tests are read");

    // A variables file that is not a mapping: located in it, and its test is not read.
    temp_file(&dir, "tests/vars.yaml", b"q: [unclosed\n");
    let config = temp_file(&dir, "config.yaml", b"tests:\n  - vars: {q: here}\n  - vars: tests/vars.yaml\n");
    let ((out, diags), _) = convert_with(&config, None, Format::Casebook, Syntax::Jsonl, None, None);
    let said = errors(&diags);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(diags[0].file.ends_with("tests/vars.yaml") && diags[0].code.as_str() == "E-yaml-syntax", "{said:?}");
    assert!(diags[0].hint.as_deref().unwrap().contains("config.yaml:3:11 (/tests/1/vars)"), "{:?}", diags[0].hint);
    assert_eq!(cases_of(&out).as_array().map(Vec::len), Some(1));
}

#[test]
fn a_configuration_whose_tests_are_one_file_reads_it_standalone() {
    let dir = tempfile::tempdir().unwrap();
    temp_file(&dir, "tests.csv", "question,__description\nOi?,greeting\nTchau?,\n".as_bytes());
    temp_file(
        &dir,
        "tests.jsonl",
        b"{\"vars\": {\"q\": \"a\"}, \"description\": \"mine\"}\n{\"vars\": {\"q\": \"b\"}}\n",
    );
    let rows = |config: &str| -> Vec<Value> {
        let path = temp_file(&dir, "config.yaml", config.as_bytes());
        let ((out, diags), _) = convert_with(&path, None, Format::Casebook, Syntax::Jsonl, None, None);
        assert!(diags.is_empty(), "{diags:?}");
        cases_of(&out).as_array().unwrap().iter().map(|c| c["description"].clone()).collect()
    };
    // promptfoo's `readStandaloneTestsFile`: `Row #N` where a CSV row has no description, and
    // for every JSON Lines test.
    assert_eq!(rows("tests: file://tests.csv\n"), [json!("greeting"), json!("Row #2")]);
    assert_eq!(rows("tests: tests.jsonl\n"), [json!("Row #1"), json!("Row #2")]);
    // `{path}` in a list of tests is such a file too.
    assert_eq!(
        rows("tests:\n  - path: tests.csv\n  - vars: {q: c}\n"),
        [json!("greeting"), json!("Row #2"), Value::Null]
    );
}

#[test]
fn a_default_scoring_function_goes_to_tests_without_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let config = temp_file(
        &dir,
        "config.yaml",
        b"defaultTest:\n  assertScoringFunction: file://score.py:weighted\ntests:\n  - vars: {q: a}\n  - vars: {q: b}\n    assertScoringFunction: file://score.js\n",
    );
    let ((out, diags), _) = convert_with(&config, None, Format::Casebook, Syntax::Jsonl, None, None);
    assert!(diags.is_empty(), "{diags:?}");
    let cases = cases_of(&out);
    assert_eq!(cases[0]["metadata"]["assertScoringFunction"], "file://score.py:weighted");
    assert_eq!(cases[1]["metadata"]["assertScoringFunction"], "file://score.js", "the test's own wins");
    let (out, _, _) = convert_lossy(&config, Format::Promptfoo, Syntax::Yaml, false);
    let back = value_of(&out, Syntax::Yaml);
    assert_eq!(
        back["tests"],
        json!([{"vars": {"q": "a"}}, {"vars": {"q": "b"}, "assertScoringFunction": "file://score.js"}])
    );
}

/// `vars` naming files, as promptfoo's `readTestFiles` reads them: the path as written, relative
/// to the file the test is in (the configuration, or the tests file that holds it), patterns
/// matched in sorted order, later files' variables over earlier ones'; a `file://` prefix is
/// not taken off there, so `vars: file://x.yaml` names no file and promptfoo runs the test with
/// no variables: the case has none, and the reference is kept with a warning at it.
#[test]
fn vars_files_are_read_as_read_test_files_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["vars", "tests", "tests/vars"] {
        fs_err::create_dir_all(dir.path().join(sub)).unwrap();
    }
    temp_file(&dir, "vars/x.yaml", b"q: from the configuration's folder\n");
    temp_file(&dir, "tests/vars/x.yaml", b"q: from the tests file's folder\n");
    temp_file(&dir, "tests/t.yaml", b"- vars: vars/x.yaml\n");
    let config = temp_file(
        &dir,
        "promptfooconfig.yaml",
        b"tests:\n  - vars: vars/x.yaml\n  - file://tests/t.yaml\n  - vars: file://vars/x.yaml\n",
    );
    let ((out, diags), _) = convert_with(&config, None, Format::Casebook, Syntax::Jsonl, None, None);
    let at: Vec<(u64, u64, &str, &str)> =
        diags.iter().map(|d| (d.line, d.column, d.code.as_str(), d.pointer.as_deref().unwrap_or_default())).collect();
    assert_eq!(at, [(4, 11, "W-file-var", "/tests/2/vars")], "{diags:?}");
    assert!(diags[0].message.contains("`file://vars/x.yaml` names no file"), "{diags:?}");
    let cases = cases_of(&out);
    let inputs: Vec<&Value> = cases.as_array().unwrap().iter().map(|c| &c["input"]).collect();
    assert_eq!(
        inputs,
        [
            // One variable of text: the input is that text.
            &json!("from the configuration's folder"),
            &json!("from the tests file's folder"),
            &json!({}),
        ]
    );
    // Written back, the reference is where it was.
    let (out, _, _) = convert_lossy(&config, Format::Promptfoo, Syntax::Yaml, false);
    assert_eq!(value_of(&out, Syntax::Yaml)["tests"][2], json!({"vars": "file://vars/x.yaml"}));
}
