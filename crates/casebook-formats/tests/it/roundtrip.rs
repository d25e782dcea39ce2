//! Generated cases written in every format and read back unchanged (property test).

use casebook_formats::{Format, Syntax};
use proptest::prelude::*;
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
        for (format, syntax) in TARGETS {
            let (out, diags) = convert_file(&source, Some(Format::Casebook), *format, *syntax, None);
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
