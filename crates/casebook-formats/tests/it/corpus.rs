//! The real corpus (`shared/corpus`): every file its own system accepts reads without errors,
//! converts to its own format as the same JSON value, and survives a trip through casebook's
//! native format in each of its syntaxes.

use casebook_formats::{Format, Syntax};
use casebook_model::Code;

use crate::harness::{cases_of, convert_file, convert_with, corpus, errors, temp_file, value_of};

/// `(path under corpus/, format, syntax)` of every dataset its source system accepts.
pub const ACCEPTED: &[(&str, Format, Syntax)] = &[
    ("agent-health/sample-import-test-cases.json", Format::AgentHealth, Syntax::Json),
    ("agent-health/otel-benchmark-test-cases.json", Format::AgentHealth, Syntax::Json),
    ("agent-health/observability-agent-benchmark.json", Format::AgentHealth, Syntax::Json),
    ("agent-health/rca.json", Format::AgentHealth, Syntax::Json),
    ("agent-health/conversational_queries.json", Format::AgentHealth, Syntax::Json),
    ("letta-evals/multiturn-per-turn-grading/dataset.jsonl", Format::Letta, Syntax::Jsonl),
    ("letta-evals/per-sample-rubric/dataset.jsonl", Format::Letta, Syntax::Jsonl),
    ("letta-evals/programmatic-agent-creation/dataset.jsonl", Format::Letta, Syntax::Jsonl),
    ("letta-evals/custom-tool-grader-and-extractor/dataset.jsonl", Format::Letta, Syntax::Jsonl),
    ("letta-evals/letta-code-simple-edit/dataset.jsonl", Format::Letta, Syntax::Jsonl),
    ("letta-evals/multi-model-simple-rubric-grader/dataset.jsonl", Format::Letta, Syntax::Jsonl),
    ("letta-evals/multiturn-memory-block-extractor/dataset.jsonl", Format::Letta, Syntax::Jsonl),
    ("letta-evals/reward-composition/dataset.csv", Format::Letta, Syntax::Csv),
    ("letta-evals/simple-tool-grader/dataset.csv", Format::Letta, Syntax::Csv),
    ("letta-evals/letta-agent-rubric-grader/dataset.csv", Format::Letta, Syntax::Csv),
    ("voltagent/general.json", Format::Voltagent, Syntax::Json),
    ("voltagent/geography.json", Format::Voltagent, Syntax::Json),
    ("voltagent/history.json", Format::Voltagent, Syntax::Json),
    ("voltagent/math.json", Format::Voltagent, Syntax::Json),
    ("voltagent/science.json", Format::Voltagent, Syntax::Json),
    ("voltagent/supervisor.json", Format::Voltagent, Syntax::Json),
    ("mas-lab/tests/fixtures/lab-smoke/dataset.yaml", Format::Maslab, Syntax::Yaml),
    ("mas-lab/labs/extensions.lab/datasets/fact-recall-smoke.yaml", Format::Maslab, Syntax::Yaml),
    ("mas-lab/labs/lifecycle-control.lab/datasets/lifecycle-queries.yaml", Format::Maslab, Syntax::Yaml),
    ("mas-lab/library-samples/datasets/qa-agent-default.yaml", Format::Maslab, Syntax::Yaml),
    ("mas-lab/library-samples/datasets/qa-agent-default.json", Format::Maslab, Syntax::Json),
    (
        "mas-lab/docs/tutorials/01-building-an-agent/experiments/memory-provenance/dataset.yaml",
        Format::Maslab,
        Syntax::Yaml,
    ),
    ("mas-lab/docs/tutorials/03-experiments-and-analysis/dataset.yaml", Format::Maslab, Syntax::Yaml),
    ("mas-lab/tests/fixtures/golden-runs/capture/dataset.yaml", Format::Maslab, Syntax::Yaml),
];

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn every_accepted_file_converts_to_its_own_format_unchanged() {
    let mut failures = Vec::new();
    for (rel, format, syntax) in ACCEPTED {
        let path = corpus().join(rel);
        // Detection alone must find the format.
        let (out, diags) = convert_file(&path, None, *format, *syntax, None);
        let errs = errors(&diags);
        if !errs.is_empty() {
            failures.push(format!("{rel}: errors {errs:?}"));
            continue;
        }
        let original = value_of(&fs_err::read(&path).expect("corpus file"), *syntax);
        let back = value_of(&out, *syntax);
        if original != back {
            failures.push(format!(
                "{rel}: X → X differs\n--- original\n{}\n--- converted\n{}",
                serde_json::to_string_pretty(&original).unwrap(),
                serde_json::to_string_pretty(&back).unwrap()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn every_accepted_file_survives_a_trip_through_casebook() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (rel, format, syntax) in ACCEPTED {
        let path = corpus().join(rel);
        let original = value_of(&fs_err::read(&path).unwrap(), *syntax);
        for native in [Syntax::Jsonl, Syntax::Yaml, Syntax::Json] {
            let (middle, diags) = convert_file(&path, Some(*format), Format::Casebook, native, None);
            if !errors(&diags).is_empty() {
                failures.push(format!("{rel} → casebook {native:?}: {:?}", errors(&diags)));
                continue;
            }
            // Keep the folder so relative paths (seed files) still resolve.
            let name = format!("{}.{}", rel.replace('/', "_"), native.name());
            let middle_path = temp_file(&dir, &name, &middle);
            let (out, diags) = convert_file(&middle_path, Some(Format::Casebook), *format, *syntax, None);
            if !errors(&diags).is_empty() {
                failures.push(format!("{rel} → casebook {native:?} → back: {:?}", errors(&diags)));
                continue;
            }
            let back = value_of(&out, *syntax);
            if original != back {
                failures.push(format!(
                    "{rel} via casebook {native:?} differs\n--- original\n{}\n--- back\n{}\n--- middle\n{}",
                    serde_json::to_string_pretty(&original).unwrap(),
                    serde_json::to_string_pretty(&back).unwrap(),
                    String::from_utf8_lossy(&middle)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn agent_health_invalid_import_gets_one_error_per_missing_field() {
    let path = corpus().join("agent-health/invalid-import-test-cases.json");
    let (_, diags) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    let missing: Vec<(&str, u64, u64, String)> =
        diags.iter().map(|d| (d.code.as_str(), d.line, d.column, d.message.clone())).collect();
    let expected: Vec<(&str, u64, u64, String)> = ["category", "difficulty", "initialPrompt", "expectedOutcomes"]
        .iter()
        .map(|f| (Code::MissingField.as_str(), 2, 3, format!("missing required field `{f}`")))
        .collect();
    assert_eq!(missing, expected);
}

/// The same behaviour on a file of our own (so a clone without the corpus checks it too): an
/// Agent Health case without its required fields gets one error per field, at the case.
#[test]
fn agent_health_case_without_required_fields_gets_one_error_per_field_at_the_case() {
    let dir = tempfile::tempdir().unwrap();
    let path = temp_file(
        &dir,
        "import.json",
        r#"[
  {"id": "ok-1", "name": "Fine", "category": "RCA", "difficulty": "Easy",
   "initialPrompt": "Pourquoi la base est-elle lente ?", "context": [], "expectedOutcomes": ["names the pool"]},
  {"name": "Sans champs",
   "description": "lacks category, difficulty, prompt and outcomes"}
]
"#
        .as_bytes(),
    );
    let (_, diags) = convert_file(&path, Some(Format::AgentHealth), Format::Casebook, Syntax::Jsonl, None);
    let missing: Vec<(&str, u64, u64, String)> =
        diags.iter().map(|d| (d.code.as_str(), d.line, d.column, d.message.clone())).collect();
    let expected: Vec<(&str, u64, u64, String)> = ["category", "difficulty", "initialPrompt", "expectedOutcomes"]
        .iter()
        .map(|f| (Code::MissingField.as_str(), 4, 3, format!("missing required field `{f}`")))
        .collect();
    assert_eq!(missing, expected);
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn strings_holding_json_stay_strings_and_integers_stay_integers() {
    // custom-tool-grader: ground_truth is JSON text in a string.
    let path = corpus().join("letta-evals/custom-tool-grader-and-extractor/dataset.jsonl");
    let (out, _) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    let rows = cases_of(&out);
    let first = &rows[0]["expected"]["output"];
    assert!(first.as_str().is_some_and(|s| s.starts_with("{\"category\"")), "{first}");
    // rca.json: context values are JSON documents stored as strings.
    let path = corpus().join("agent-health/rca.json");
    let (out, _) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    let rows = cases_of(&out);
    assert!(rows[0]["context"][0]["content"].as_str().is_some_and(|s| s.starts_with("{\"appId\"")));
    // lab-smoke: `id: 1` is the case id "1" and goes back as the integer 1.
    let path = corpus().join("mas-lab/tests/fixtures/lab-smoke/dataset.yaml");
    let (out, _) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    assert_eq!(cases_of(&out)[0]["id"], "1");
    let (out, _) = convert_file(&path, None, Format::Maslab, Syntax::Yaml, None);
    assert_eq!(value_of(&out, Syntax::Yaml)["spec"]["items"][0]["id"], 1);
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn simple_tool_grader_braces_are_text_not_json() {
    let path = corpus().join("letta-evals/simple-tool-grader/dataset.csv");
    let (out, diags) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    assert!(errors(&diags).is_empty());
    let rows = cases_of(&out);
    let truths: Vec<&str> =
        rows.as_array().unwrap().iter().map(|r| r["expected"]["output"].as_str().unwrap()).collect();
    assert_eq!(truths, ["{4}", "{Notepad}", "{.html}", "{BODY}", "{US English}"]);
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn multi_turn_letta_rows_become_turns_with_per_turn_expectations() {
    let path = corpus().join("letta-evals/multiturn-per-turn-grading/dataset.jsonl");
    let (out, _) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    let rows = cases_of(&out);
    assert_eq!(rows[0]["input"], "Answer with only the capital: France");
    assert_eq!(rows[0]["turns"][1]["content"], "Answer with only the capital: Italy");
    assert_eq!(rows[0]["turns"][1]["role"], "user");
    assert_eq!(rows[0]["expected"]["per_turn"], serde_json::json!(["Paris", "Berlin", "Rome"]));
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn derived_ids_do_not_depend_on_row_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = corpus().join("voltagent/general.json");
    let (out, _) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    let ids = |v: serde_json::Value| -> Vec<String> {
        let mut ids: Vec<String> = v.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
        ids.sort();
        ids
    };
    let forward = ids(cases_of(&out));
    let mut doc = value_of(&fs_err::read(&path).unwrap(), Syntax::Json);
    doc["data"].as_array_mut().unwrap().reverse();
    let reversed = temp_file(&dir, "general.json", serde_json::to_string(&doc).unwrap().as_bytes());
    let (out, _) = convert_file(&reversed, None, Format::Casebook, Syntax::Jsonl, None);
    assert_eq!(forward, ids(cases_of(&out)));
    // Near-duplicates (' versus ’) are different cases.
    assert_eq!(forward.len(), 10);
}

/// Documents read as they are parsed (as long ones are) give the same results: the same format
/// back exactly, and casebook JSONL keeps header keys that come after the cases.
#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn streamed_documents_convert_like_parsed_ones() {
    let dir = tempfile::tempdir().unwrap();
    for (rel, format, syntax) in ACCEPTED.iter().filter(|(_, _, s)| matches!(s, Syntax::Yaml | Syntax::Json)) {
        let path = corpus().join(rel);
        let original = value_of(&fs_err::read(&path).unwrap(), *syntax);
        let ((out, diags), dropped) = convert_with(&path, None, *format, *syntax, None, Some(0));
        assert!(errors(&diags).is_empty(), "{rel}: {:?}", errors(&diags));
        assert!(!dropped, "{rel}");
        assert_eq!(value_of(&out, *syntax), original, "{rel} streamed → itself");

        let ((middle, _), dropped) = convert_with(&path, None, Format::Casebook, Syntax::Jsonl, None, Some(0));
        assert!(!dropped, "{rel}");
        let middle_path = temp_file(&dir, &format!("{}.jsonl", rel.replace('/', "_")), &middle);
        let (back, diags) = convert_file(&middle_path, None, *format, *syntax, None);
        assert!(errors(&diags).is_empty(), "{rel}: {:?}", errors(&diags));
        assert_eq!(value_of(&back, *syntax), original, "{rel} streamed → casebook JSONL → back");
    }
    // Keys after the cases cannot go into a header written before them: that is said.
    let path = corpus().join("mas-lab/labs/lifecycle-control.lab/datasets/lifecycle-queries.yaml");
    let (_, dropped) = convert_with(&path, None, Format::Casebook, Syntax::Yaml, None, Some(0));
    assert!(dropped, "spec.groups comes after spec.items");
}
