//! The repository's example files of the formats the corpus has no files of (Inspect AI,
//! promptfoo), written from their systems' documentation: detected, converted to their own
//! format as the same JSON value, and unchanged by a trip through casebook's native format.

use casebook_formats::{Format, Syntax};

use crate::harness::{convert_file, convert_with, errors, temp_file, value_of};

/// `(path under examples/, format, syntax)`.
pub const EXAMPLES: &[(&str, Format, Syntax)] = &[
    ("inspect/samples.jsonl", Format::Inspect, Syntax::Jsonl),
    ("inspect/samples.json", Format::Inspect, Syntax::Json),
    ("inspect/security.csv", Format::Inspect, Syntax::Csv),
    ("promptfoo/tests.yaml", Format::Promptfoo, Syntax::Yaml),
    ("promptfoo/promptfooconfig.yaml", Format::Promptfoo, Syntax::Yaml),
    ("promptfoo/tests.json", Format::Promptfoo, Syntax::Json),
    ("promptfoo/tests.jsonl", Format::Promptfoo, Syntax::Jsonl),
    ("promptfoo/tests.csv", Format::Promptfoo, Syntax::Csv),
];

pub fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn examples_are_detected_and_give_the_same_values_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (rel, format, syntax) in EXAMPLES {
        let path = examples().join(rel);
        let original = value_of(&fs_err::read(&path).unwrap(), *syntax);
        let (out, diags) = convert_file(&path, None, *format, *syntax, None);
        if !errors(&diags).is_empty() || !diags.is_empty() {
            failures.push(format!("{rel}: {diags:?}"));
            continue;
        }
        if value_of(&out, *syntax) != original {
            failures.push(format!("{rel} → itself differs:\n{}", String::from_utf8_lossy(&out)));
        }
        for native in [Syntax::Jsonl, Syntax::Yaml, Syntax::Json] {
            let (middle, diags) = convert_file(&path, Some(*format), Format::Casebook, native, None);
            assert!(errors(&diags).is_empty(), "{rel}: {diags:?}");
            let middle_path = temp_file(&dir, &format!("{}.{}", rel.replace('/', "_"), native.name()), &middle);
            let (back, diags) = convert_file(&middle_path, None, *format, *syntax, None);
            if !errors(&diags).is_empty() {
                failures.push(format!("{rel} via casebook {native:?}: {:?}", errors(&diags)));
            } else if value_of(&back, *syntax) != original {
                failures.push(format!("{rel} via casebook {native:?} differs:\n{}", String::from_utf8_lossy(&back)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Documents read as they are parsed (as files of 16 MiB and more are) are told apart by their
/// first case, and give the same values back.
#[test]
fn streamed_examples_convert_like_parsed_ones() {
    for (rel, format, syntax) in EXAMPLES.iter().filter(|(_, _, s)| matches!(s, Syntax::Json | Syntax::Yaml)) {
        let path = examples().join(rel);
        let original = value_of(&fs_err::read(&path).unwrap(), *syntax);
        let ((out, diags), _) = convert_with(&path, None, *format, *syntax, None, Some(0));
        assert!(diags.is_empty(), "{rel}: {diags:?}");
        assert_eq!(value_of(&out, *syntax), original, "{rel}");
    }
}

/// A promptfoo configuration's `defaultTest` is applied to its tests whether the file is parsed
/// whole or read as it is parsed; one that cannot be applied says so where it is.
#[test]
fn a_default_test_is_applied_or_said_not_to_be() {
    let dir = tempfile::tempdir().unwrap();
    let tests = "tests:\n  - vars: {input: hi}\n  - vars: {input: bye, tone: curt}\n";
    let defaults = "defaultTest:\n  vars: {tone: kind}\n  assert:\n    - {type: icontains, value: hello}\n";
    let inputs = |out: &[u8]| -> Vec<serde_json::Value> {
        let cases = crate::harness::cases_of(out);
        cases.as_array().unwrap().iter().map(|c| c["input"].clone()).collect()
    };
    let kind = serde_json::json!([{"tone": "kind", "input": "hi"}, {"tone": "curt", "input": "bye"}]);
    // Before the tests: applied, parsed whole or streamed.
    let before = temp_file(&dir, "before.yaml", format!("{defaults}{tests}").as_bytes());
    for stream_from in [None, Some(0)] {
        let ((out, diags), _) =
            convert_with(&before, Some(Format::Promptfoo), Format::Casebook, Syntax::Jsonl, None, stream_from);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(serde_json::Value::Array(inputs(&out)), kind, "stream_from {stream_from:?}");
    }
    // After them: applied when the file is parsed whole; read as it is parsed, the tests are
    // read without it, and a warning at `defaultTest` says so.
    let after = temp_file(&dir, "after.yaml", format!("{tests}{defaults}").as_bytes());
    let (out, diags) = convert_file(&after, Some(Format::Promptfoo), Format::Casebook, Syntax::Jsonl, None);
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(serde_json::Value::Array(inputs(&out)), kind);
    let ((out, diags), _) =
        convert_with(&after, Some(Format::Promptfoo), Format::Casebook, Syntax::Jsonl, None, Some(0));
    assert_eq!(inputs(&out), [serde_json::json!("hi"), serde_json::json!({"input": "bye", "tone": "curt"})]);
    let said: Vec<String> = diags.iter().map(ToString::to_string).collect();
    assert_eq!(diags.len(), 1, "{said:?}");
    assert!(
        said[0].contains(":4:1:") && said[0].contains("W-dropped") && said[0].contains("comes after them"),
        "{said:?}"
    );
    // In another file: not read, and said so.
    let elsewhere = temp_file(&dir, "elsewhere.yaml", format!("defaultTest: file://defaults.yaml\n{tests}").as_bytes());
    let (out, diags) = convert_file(&elsewhere, Some(Format::Promptfoo), Format::Casebook, Syntax::Jsonl, None);
    assert_eq!(inputs(&out)[0], serde_json::json!("hi"));
    let said: Vec<String> = diags.iter().map(ToString::to_string).collect();
    assert!(said.len() == 1 && said[0].contains("1:14") && said[0].contains("in another file"), "{said:?}");
    // A default assert without a type: an error where it is, once, and no test gets it.
    let broken =
        temp_file(&dir, "broken.yaml", format!("defaultTest:\n  assert:\n    - {{value: x}}\n{tests}").as_bytes());
    let (_, diags) = convert_file(&broken, Some(Format::Promptfoo), Format::Casebook, Syntax::Jsonl, None);
    let said = errors(&diags);
    assert!(said.len() == 1 && said[0].contains(":3:7: E-missing-field"), "{said:?}");
    assert_eq!(diags[0].pointer.as_deref(), Some("/defaultTest/assert/0"));
}
