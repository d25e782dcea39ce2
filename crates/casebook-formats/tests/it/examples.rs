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
