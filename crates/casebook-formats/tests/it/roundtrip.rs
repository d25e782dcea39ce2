//! Generated cases written in every format and read back unchanged (property test).

use casebook_formats::{Format, Syntax};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};

use crate::harness::{cases_of, convert_file, errors, temp_file};

fn text() -> impl Strategy<Value = String> {
    // Printable text with the characters that trip writers up.
    proptest::string::string_regex("[a-zA-Z0-9 é—→\"'#:,\\-\\[\\]{}\\n\\\\]{1,24}").unwrap()
}

fn case_strategy() -> impl Strategy<Value = Value> {
    (
        "[a-z]{1,6}-[0-9]{1,4}",
        text(),
        proptest::option::of(text()),
        proptest::collection::vec(text(), 0..3),
        proptest::option::of(proptest::collection::vec("[a-z]{1,8}", 0..3)),
        proptest::option::of(-1000i64..1000),
    )
        .prop_map(|(id, input, output, turns, labels, number)| {
            let mut case = json!({"id": id, "input": input});
            if !turns.is_empty() {
                case["turns"] = Value::Array(turns.iter().map(|t| json!({"role": "user", "content": t})).collect());
            }
            if let Some(output) = output {
                case["expected"] = json!({"output": output});
            }
            if let Some(labels) = labels {
                case["labels"] = json!(labels);
            }
            if let Some(n) = number {
                case["metadata"] = json!({"n": n, "f": (n as f64) / 8.0, "s": format!("{n:03}")});
            }
            case
        })
}

/// Formats that can hold what the strategy makes, with the syntaxes to try.
const TARGETS: &[(Format, Syntax)] = &[
    (Format::Casebook, Syntax::Jsonl),
    (Format::Casebook, Syntax::Yaml),
    (Format::Casebook, Syntax::Json),
    (Format::Casebook, Syntax::Parquet),
    (Format::Letta, Syntax::Jsonl),
    (Format::Letta, Syntax::Csv),
    (Format::Maslab, Syntax::Yaml),
    (Format::Maslab, Syntax::Json),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn cases_survive_every_format(cases in proptest::collection::vec(case_strategy(), 1..6)) {
        // Unique ids.
        let mut cases = cases;
        for (i, case) in cases.iter_mut().enumerate() {
            case["id"] = json!(format!("{}-{i}", case["id"].as_str().unwrap()));
        }
        let dir = tempfile::tempdir().unwrap();
        let jsonl: String = cases.iter().map(|c| format!("{c}\n")).collect();
        let source = temp_file(&dir, "source.jsonl", jsonl.as_bytes());
        // letta reads a CSV cell that starts with `[` and ends with `]` as JSON, and strips the
        // whitespace around `input` and `ground_truth`: a string of either shape cannot go
        // through letta CSV, and the writer refuses it, naming the field.
        let list_shaped = |v: &Value| v.as_str().is_some_and(|s| {
            let s = s.trim();
            s.starts_with('[') && s.ends_with(']')
        });
        let padded = |v: &Value| v.as_str().is_some_and(|s| s.trim() != s);
        let single = |c: &Value| c.get("turns").is_none();
        let not_csv = cases.iter().any(|c| {
            (single(c) && (list_shaped(&c["input"]) || padded(&c["input"])))
                || list_shaped(&c["expected"]["output"])
                || padded(&c["expected"]["output"])
        });
        for (format, syntax) in TARGETS {
            let (out, diags) = convert_file(&source, Some(Format::Casebook), *format, *syntax, None);
            if not_csv && (*format, *syntax) == (Format::Letta, Syntax::Csv) {
                prop_assert!(errors(&diags).iter().any(|e| e.contains("E-unrepresentable")), "{:?}", errors(&diags));
                continue;
            }
            prop_assert!(errors(&diags).is_empty(), "to {format} {syntax:?}: {:?}", errors(&diags));
            let written = temp_file(&dir, &format!("out.{}", syntax.name()), &out);
            let (back, diags) = convert_file(&written, Some(*format), Format::Casebook, Syntax::Jsonl, None);
            prop_assert!(errors(&diags).is_empty(), "from {format} {syntax:?}: {:?}\n{}", errors(&diags), String::from_utf8_lossy(&out));
            let mut back = cases_of(&back);
            // The trip adds where the cases were (provenance); the cases are otherwise the same.
            for row in back.as_array_mut().unwrap() {
                row.as_object_mut().unwrap().remove("provenance");
            }
            prop_assert_eq!(&back, &Value::Array(cases.clone()), "via {} {:?}:\n{}", format, syntax, String::from_utf8_lossy(&out));
        }
    }
}

/// Any JSON value a dataset might hold as an input or an expected answer.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1_000_000i64..1_000_000).prop_map(Value::from),
        (-1000.0f64..1000.0).prop_map(|f| json!((f * 100.0).round() / 100.0)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Converts `cases` (native JSONL) to `format`/`syntax` and back to native; the cases read back.
fn through(cases: &[Value], format: Format, syntax: Syntax, map: Option<&str>) -> Result<Value, TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let jsonl: String = cases.iter().map(|c| format!("{c}\n")).collect();
    let source = temp_file(&dir, "source.jsonl", jsonl.as_bytes());
    let map = map.map(|m| m.parse().unwrap());
    let (out, diags) = convert_file(&source, Some(Format::Casebook), format, syntax, map.clone());
    prop_assert!(errors(&diags).is_empty(), "to {format}: {:?}", errors(&diags));
    let written = temp_file(&dir, &format!("out.{}", syntax.name()), &out);
    let (back, diags) = convert_file(&written, Some(format), Format::Casebook, Syntax::Jsonl, map);
    prop_assert!(errors(&diags).is_empty(), "from {format}: {:?}\n{}", errors(&diags), String::from_utf8_lossy(&out));
    let mut back = cases_of(&back);
    for row in back.as_array_mut().unwrap() {
        row.as_object_mut().unwrap().remove("provenance");
    }
    Ok(back)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Agent Health: named cases with a category, a difficulty and expected outcomes.
    #[test]
    fn agent_health_cases_survive(
        rows in proptest::collection::vec(
            (text(), text(), proptest::collection::vec("[a-z]{1,6}", 0..3), "[A-Z]{2,5}",
             prop_oneof![Just("Easy"), Just("Medium"), Just("Hard")], proptest::collection::vec(text(), 1..3)),
            1..5),
    ) {
        let cases: Vec<Value> = rows.iter().enumerate().map(|(i, (name, input, tags, category, difficulty, outcomes))| {
            let mut labels: Vec<String> = tags.clone();
            labels.push(format!("category:{category}"));
            labels.push(format!("difficulty:{difficulty}"));
            json!({"id": format!("tc-{i}"), "name": name, "labels": labels, "input": input,
                   "expected": {"outcomes": outcomes}})
        }).collect();
        let back = through(&cases, Format::AgentHealth, Syntax::Json, None)?;
        prop_assert_eq!(back, Value::Array(cases));
    }

    /// VoltAgent: any JSON input and expected answer, extra metadata, acceptable answers.
    #[test]
    fn voltagent_items_survive(
        rows in proptest::collection::vec(
            (text(), json_value(), proptest::option::of(json_value()),
             proptest::option::of(proptest::collection::vec(text(), 1..3)), proptest::option::of(text())),
            1..5),
    ) {
        let cases: Vec<Value> = rows.iter().enumerate().map(|(i, (name, input, output, acceptable, note))| {
            let mut case = json!({"id": format!("item-{i}"), "name": name, "input": input});
            let mut expected = serde_json::Map::new();
            if let Some(o) = output { expected.insert("output".into(), o.clone()); }
            if let Some(a) = acceptable { expected.insert("acceptable".into(), json!(a)); }
            if !expected.is_empty() { case["expected"] = Value::Object(expected); }
            if let Some(n) = note { case["metadata"] = json!({"note": n}); }
            case
        }).collect();
        let back = through(&cases, Format::Voltagent, Syntax::Json, None)?;
        // VoltAgent items have no id: casebook derives one from the task when reading them back.
        let strip = |v: &Value| -> Vec<Value> {
            v.as_array().unwrap().iter().map(|c| { let mut c = c.clone(); c.as_object_mut().unwrap().remove("id"); c }).collect()
        };
        prop_assert_eq!(strip(&back), strip(&Value::Array(cases)));
    }

    /// Generic CSV with a column map: every cell is text, kept exactly.
    #[test]
    fn mapped_csv_rows_survive(
        rows in proptest::collection::vec((text(), proptest::option::of(text()), proptest::option::of(text())), 1..6),
    ) {
        let cases: Vec<Value> = rows.iter().enumerate().map(|(i, (question, answer, topic))| {
            let mut case = json!({"id": format!("q-{i:03}"), "input": question});
            if let Some(a) = answer { case["expected"] = json!({"output": a}); }
            if let Some(t) = topic { case["metadata"] = json!({"topic": t}); }
            case
        }).collect();
        let back = through(&cases, Format::Csv, Syntax::Csv, Some("id=qid,input=question,expected.output=answer"))?;
        prop_assert_eq!(back, Value::Array(cases));
    }

    /// A Parquet table: any JSON as input (text in `input`, anything else in `input_json`, even
    /// text that looks like JSON), expected answers, labels (none, empty, several), metadata of
    /// any shape, confidence and review: all read back as they were.
    #[test]
    fn any_case_survives_a_parquet_table(
        rows in proptest::collection::vec((
            json_value(),
            proptest::option::of(json_value()),
            proptest::option::of(proptest::collection::vec(text(), 0..3)),
            proptest::option::of(proptest::collection::btree_map("[a-z]{1,6}", json_value(), 0..4)),
            proptest::option::of(0.0f64..1.0),
            proptest::option::of(prop_oneof![Just("draft"), Just("reviewed"), Just("rejected")]),
        ), 1..8),
    ) {
        let cases: Vec<Value> = rows.into_iter().enumerate().filter(|(_, (input, ..))| !input.is_null()).map(
            |(i, (input, output, labels, metadata, confidence, review))| {
                let mut case = json!({"id": format!("c-{i}"), "input": input});
                if let Some(o) = output.filter(|o| !o.is_null()) { case["expected"] = json!({"output": o}); }
                if let Some(l) = labels { case["labels"] = json!(l); }
                if let Some(m) = metadata { case["metadata"] = Value::Object(m.into_iter().collect()); }
                if let Some(c) = confidence { case["confidence"] = json!(c); }
                if let Some(r) = review { case["review"] = json!(r); }
                case
            },
        ).collect();
        prop_assume!(!cases.is_empty());
        let back = through(&cases, Format::Casebook, Syntax::Parquet, None)?;
        prop_assert_eq!(back, Value::Array(cases));
    }
}
