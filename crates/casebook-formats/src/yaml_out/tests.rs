//! Tests of the YAML emitter: every value reads back unchanged with casebook's reader, and every
//! string keeps its meaning for the other readers the output meets: YAML 1.1 (its type
//! repository and PyYAML's resolver, checked here with reference patterns written from those
//! texts, not with the emitter's own check), YAML 1.2 core, ruamel.yaml and yaml.v3 (`yq`),
//! and PyYAML itself.

use std::process::Command;
use std::sync::LazyLock;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use regex::Regex;
use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Value, json};

use super::*;

/// The implicit types each reader gives a plain scalar, as the patterns of its own text: the
/// YAML 1.1 type repository (yaml.org/type), PyYAML's `resolver.py`, the YAML 1.2 core schema
/// (spec 10.3.2), and two common readers with their own rules, ruamel.yaml and yaml.v3 (with
/// [`YAML_V3_NUMBERS`]). A plain scalar that matches none of them is a string everywhere.
static RESOLVERS: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    [
        ("YAML 1.1 bool", r"y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"),
        ("YAML 1.1 null", r"~|null|Null|NULL|"),
        (
            "YAML 1.1 int",
            r"[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+",
        ),
        (
            "YAML 1.1 float",
            r"[-+]?([0-9][0-9_]*)?\.[0-9.]*([eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
        ),
        (
            "YAML 1.1 timestamp",
            r"[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]*)?(([ \t]*)Z|[-+][0-9]{1,2}(:[0-9]{2})?)?",
        ),
        ("YAML 1.1 merge", r"<<"),
        ("YAML 1.1 value", r"="),
        ("PyYAML bool", r"yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"),
        (
            "PyYAML float",
            r"[-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)?|\.[0-9][0-9_]*([eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
        ),
        (
            "PyYAML int",
            r"[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+",
        ),
        ("PyYAML merge", r"<<"),
        ("PyYAML null", r"~|null|Null|NULL|"),
        (
            "PyYAML timestamp",
            r"[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]*)?([ \t]*(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?",
        ),
        ("PyYAML value", r"="),
        ("YAML 1.2 core null", r"null|Null|NULL|~|"),
        ("YAML 1.2 core bool", r"true|True|TRUE|false|False|FALSE"),
        ("YAML 1.2 core int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+"),
        (
            "YAML 1.2 core float",
            r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
        ),
        // ruamel.yaml's YAML 1.2 set (its `resolver.py`), which keeps `_` and reads `1e3` and
        // `+_`; its int pattern is tried only on text starting with a sign or digit.
        (
            "ruamel.yaml 1.2 float",
            r"[-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+|[-+]?\.[0-9_]+([eE][-+][0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
        ),
        ("ruamel.yaml 1.2 int", r"[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+][0-9_]+|[0-9][0-9_]*|[-+]?0x[0-9a-fA-F_]+"),
        // yaml.v3 (`yq`), `resolve.go`: its map of words, and Go's `time.Parse` with its layouts.
        ("yaml.v3 word", r"true|True|TRUE|false|False|FALSE|~|null|Null|NULL|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)|<<"),
        (
            "yaml.v3 timestamp",
            r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(([Tt])[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?(Z|[-+][0-9]{2}:[0-9]{2})| [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?)?",
        ),
    ]
    .into_iter()
    .map(|(name, pattern)| (name, Regex::new(&format!("^(?:{pattern})$")).unwrap()))
    .collect()
});

/// yaml.v3's numbers: text starting with a sign or digit is read with every `_` deleted, by Go's
/// `ParseInt` with base 0 (prefixes in either case, a leading 0 for octal) and its float
/// pattern; text starting with `.` by Go's `ParseFloat`, which allows `_` between digits.
static YAML_V3_NUMBERS: LazyLock<[Regex; 2]> = LazyLock::new(|| {
    [
        r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$",
        r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$",
    ]
    .map(|pattern| Regex::new(pattern).unwrap())
});

/// The types other than string that some reader gives the plain scalar `text`.
fn non_string_types(text: &str) -> Vec<&'static str> {
    let mut types: Vec<&str> = RESOLVERS.iter().filter(|(_, re)| re.is_match(text)).map(|(name, _)| *name).collect();
    if text.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)) {
        let without_underscores = text.replace('_', "");
        if YAML_V3_NUMBERS.iter().any(|re| re.is_match(&without_underscores)) {
            types.push("yaml.v3 number");
        }
    }
    types
}

/// The plain scalars of a YAML text, keys and values, as a YAML parser sees them.
fn plain_scalars(yaml: &str) -> Vec<String> {
    let mut parser = Parser::new_from_str(yaml);
    let mut plain = Vec::new();
    while let Some(event) = parser.next_event() {
        let (event, _) = event.unwrap_or_else(|e| panic!("{e:?} in\n{yaml}"));
        if let Event::Scalar(text, ScalarStyle::Plain, ..) = event {
            plain.push(text.into_owned());
        }
    }
    plain
}

fn emit(map: &Map<String, Value>) -> String {
    let mut out = String::new();
    mapping(&mut out, map, 0);
    out
}

/// The mapping as the item of a list, its first key after `- ` (how dataset items are written).
fn emit_as_item(map: &Map<String, Value>) -> String {
    let mut out = String::new();
    sequence(&mut out, &[Value::Object(map.clone())], 0);
    out
}

fn read_back(yaml: &str) -> Value {
    let node = crate::yaml::parse(yaml).unwrap_or_else(|e| panic!("{e:?} in\n{yaml}"));
    node.to_value(&crate::pointer::Ptr::ROOT).unwrap()
}

fn round_trip(value: Value) {
    let Value::Object(map) = &value else { panic!("test with objects") };
    let out = emit(map);
    assert_eq!(read_back(&out), value, "YAML was:\n{out}");
}

#[test]
fn strings_read_back_unchanged() {
    round_trip(json!({
        "plain": "hello world",
        "number_like": "007",
        "bool_like": "true",
        "yes": "yes",
        "colon": "a: b",
        "hash": "a #b",
        "multi": "line one\nline two\n",
        "multi_keep": "a\n\n",
        "multi_strip": "a\nb",
        "indented": "  lead\nx",
        "blank_line": "a\n  \nb",
        "quote": "\"q\" and 'q'",
        "unicode": "— é ✓ \u{2028} \u{7f}",
        "empty": "",
        "dash": "- item",
        "nested": {"a": [1, 2.5, {"b": null, "c": [true]}], "e": {}, "f": []},
        "list_of_lists": [[1, 2], ["x"]],
        "key with: colon": 1,
        "...": "... x",
        "... x": "...",
        "...and more": "....",
    }));
}

/// The strings of issue 11 that PyYAML read back as other values, and their relatives.
const ISSUE_EXAMPLES: [&str; 16] = [
    "12:45",
    "007",
    "yes",
    "on",
    "2026-01-02",
    "0755",
    "1_000",
    "Off",
    "y",
    "N",
    "<<",
    "1:30:00.5",
    ".Inf",
    "-.inf",
    "0b1010",
    "2026-01-02T10:20:30.5Z",
];

#[test]
fn issue_examples_are_quoted_as_keys_and_values() {
    for s in ISSUE_EXAMPLES {
        let map: Map<String, Value> = [(s.to_owned(), json!(s))].into_iter().collect();
        let out = emit(&map);
        assert_eq!(out, format!("\"{s}\": \"{s}\"\n"));
        assert_eq!(read_back(&out), Value::Object(map));
    }
}

#[test]
fn ordinary_text_stays_plain() {
    for s in [
        "hello world",
        "yesterday",
        "no way",
        "one",
        "offset",
        "nullable",
        "1.2.3-beta",
        "v1.0",
        "12:45 pm",
        "2026-01-02 meeting notes",
        "x=1",
        "a<<b",
        "a:b",
        "a#b",
        "...and more",
        "naïve café",
        "日本語",
    ] {
        let map: Map<String, Value> = [(s.to_owned(), json!(s))].into_iter().collect();
        assert_eq!(emit(&map), format!("{s}: {s}\n"));
    }
}

#[test]
fn numbers_read_as_the_same_numbers_everywhere() {
    let floats = [1e300, 1e-7, -1.5e-7, 1e16, 1.2345678901234568e20, 0.1, -0.0, 2.5, 5e-324, f64::MAX];
    // casebook keeps integers within ±(2^53 - 1), the range every JSON reader holds exactly.
    let ints = [json!(0), json!(-1), json!(9_007_199_254_740_991_i64), json!(-9_007_199_254_740_991_i64)];
    let cases = floats.iter().map(|f| (json!(f), "float")).chain(ints.into_iter().map(|i| (i, "int")));
    for (value, kind) in cases {
        let map: Map<String, Value> = [("x".to_owned(), value.clone())].into_iter().collect();
        let out = emit(&map);
        let text = out.trim_end().strip_prefix("x: ").unwrap_or_else(|| panic!("{out}"));
        let types = non_string_types(text);
        for reader in ["PyYAML", "YAML 1.2 core"] {
            assert!(
                types.contains(&format!("{reader} {kind}").as_str()),
                "{value} written `{text}`: {reader} reads {types:?}"
            );
        }
        assert_eq!(read_back(&out), Value::Object(map));
    }
}

/// Every string of up to four characters from the ones numbers are made of (digits, signs,
/// `_`, `.`, `:`, `,`, exponents, base prefixes, a space): none is written plain unless every
/// reader takes it for a string, and casebook's reader gives each back.
#[test]
fn short_strings_of_number_parts_exhaustively() {
    let alphabet: Vec<char> = "019_.:+-eExob, ".chars().collect();
    let mut strings = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..4 {
        last = last.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
        strings.extend(last.iter().cloned());
    }
    let mut plain = 0;
    for s in &strings {
        let mut out = String::new();
        string(&mut out, s);
        if out.starts_with('"') {
            continue;
        }
        plain += 1;
        let types = non_string_types(s);
        assert!(types.is_empty(), "`{s}` written plain reads as {types:?}");
        let yaml = format!("k: {out}\n");
        assert_eq!(read_back(&yaml), json!({"k": s}), "YAML was:\n{yaml}");
    }
    // Most of them are ordinary text and stay plain.
    assert!(plain > strings.len() / 2, "{plain} of {} written plain", strings.len());
}

/// Words some reader takes for a boolean or null, in random case, and near misses.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        "(?i:y|n|yes|no|on|off|true|false|null)",
        "[-+]?(?i:\\.inf|\\.nan|inf|nan)",
        "~|<<|=|<|<<<|==",
        "(?i:ye|of|nul|tru|fals|yess|nope|onn)",
    ]
}

/// Ints and floats of every base, with signs, underscores, base-60 parts, dots and exponents.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        "[-+]?0[bBoOxX][-+]?[0-9a-fA-F_]{0,6}",
        "[-+]?[0-9_]{1,6}(:[0-9]{1,3}){0,3}(\\.[0-9._]{0,4})?([eE][-+]?[0-9]{0,3})?",
        "[-+]?\\.[0-9._]{0,4}([eE][-+]?[0-9]{0,3})?",
        "[-+]?[0-9_,.:eExXoObB+-]{1,8}",
    ]
}

/// Dates, with times, fractions and zones.
fn timestamp() -> impl Strategy<Value = String> {
    "[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(([Tt]| {1,2})[0-9]{1,2}:[0-9]{1,2}(:[0-9]{2}(\\.[0-9]{0,4})?)?( ?(Z|z|[-+][0-9]{1,2}(:[0-9]{2})?))?)?"
}

/// Indicators, blanks, quotes and escapes that decide whether a scalar can be plain at all.
fn syntax() -> impl Strategy<Value = String> {
    "[-?:,\\[\\]{}#&*!|>'\"%@`~<=. a-z0-9_\\t\\n\\\\é\u{85}\u{a0}\u{2028}\u{feff}]{0,8}"
}

/// Document markers, directives and indicators followed by a space, which start lines.
fn marker() -> impl Strategy<Value = String> {
    "(\\.\\.\\.|---|%YAML|%TAG|- |\\? |: |# )[ a-z.:]{0,3}"
}

/// Any of those shapes, joined with separators, or any text at all.
fn tricky() -> impl Strategy<Value = String> {
    let shape = prop_oneof![word(), number(), timestamp(), syntax(), marker()];
    prop_oneof![
        4 => vec((shape, "[ :._,#-]?"), 1..4).prop_map(|parts| {
            let mut s = String::new();
            for (i, (part, separator)) in parts.iter().enumerate() {
                if i > 0 {
                    s.push_str(separator);
                }
                s.push_str(part);
            }
            s
        }),
        1 => any::<String>(),
    ]
}

fn entry_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        tricky().prop_map(Value::String),
        vec(tricky(), 1..3).prop_map(|items| Value::Array(items.into_iter().map(Value::String).collect())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn strings_mean_the_same_to_every_reader(entries in vec((tricky(), entry_value()), 1..8)) {
        let map: Map<String, Value> = entries.into_iter().collect();
        for (yaml, expected) in [
            (emit(&map), Value::Object(map.clone())),
            (emit_as_item(&map), json!([map.clone()])),
        ] {
            for scalar in plain_scalars(&yaml) {
                let types = non_string_types(&scalar);
                prop_assert!(types.is_empty(), "`{}` written plain reads as {:?} in:\n{}", scalar, types, yaml);
            }
            prop_assert_eq!(read_back(&yaml), expected, "YAML was:\n{}", yaml);
        }
    }
}

/// Keys beyond the 1024 characters YAML allows an implicit key, with values of every kind.
fn long_keys() -> Map<String, Value> {
    let values =
        [json!("on"), json!("two\nlines\n"), json!({"yes": 1}), json!(["007", {"a": 1}]), json!(1e-7), json!({})];
    let mut map = Map::new();
    for (i, value) in values.into_iter().enumerate() {
        map.insert(format!("{i} {}", "long key ".repeat(120)), value.clone());
        map.insert(format!("{i} {}", "clé à rallonge ".repeat(70)), value);
    }
    map.insert("key with: quotes \"\t\" ".repeat(60), json!("x"));
    map
}

#[test]
fn long_keys_read_back() {
    let map = long_keys();
    let yaml = emit(&map);
    assert_eq!(read_back(&yaml), Value::Object(map.clone()), "YAML was:\n{yaml}");
    let yaml = emit_as_item(&map);
    assert_eq!(read_back(&yaml), json!([map]), "YAML was:\n{yaml}");
}

/// Every case spelling of `word`.
fn case_variants(word: &str) -> Vec<String> {
    (0..1u32 << word.len())
        .map(|mask| {
            word.chars()
                .enumerate()
                .map(|(i, c)| if mask & (1 << i) != 0 { c.to_ascii_uppercase() } else { c })
                .collect()
        })
        .collect()
}

/// A document of tricky strings as keys and values: the issue's examples, every case spelling of
/// the words, hand-picked ones, non-ASCII and multi-line text, and a fixed sample of the property
/// test's strings; numbers with exponents too.
fn pyyaml_sample() -> Map<String, Value> {
    let mut strings: Vec<String> = ISSUE_EXAMPLES.iter().map(|s| (*s).to_owned()).collect();
    for word in ["y", "n", "yes", "no", "on", "off", "true", "false", "null"] {
        strings.extend(case_variants(word));
    }
    strings.extend(
        [
            "",
            "~",
            "=",
            ".",
            "..",
            "...",
            "... x",
            "1.2.3",
            "1.",
            ".5",
            "+.5",
            "1e3",
            "1E+3",
            "1.0e-3",
            "+1",
            "-1",
            "0x1F",
            "0X1F",
            "0o17",
            "0b_1",
            "0_7",
            "09",
            "1__0",
            "190:20:30",
            "-1:30",
            "1:60",
            "0:30",
            "1_000.5",
            ".NaN",
            "+.INF",
            "0x_",
            "0o_",
            "0b_",
            "+_",
            "._",
            "1,000",
            "2026-1-2",
            "2026-01-02 10:20:30 +01:00",
            "2026-01-02t10:20:30-5",
            "2026-01-02T10:20",
            "null island",
            "no way",
            "yes!",
            "key: value",
            "a #b",
            "a#b",
            "- item",
            "?",
            "? x",
            ": x",
            "x:",
            "%YAML",
            "@x",
            "`x`",
            "!tag",
            "&a",
            "*a",
            "|",
            ">",
            "'q'",
            "\"q\"",
            "[a, b]",
            "{a: b}",
            "a, b",
            "tab\there",
            "trailing ",
            " leading",
            "naïve café",
            "日本語のテキスト",
            "emoji 😀",
            "\u{a0}nbsp",
            "nbsp\u{a0}",
            "bom\u{feff}",
            "line\u{2028}sep",
            "nel\u{85}x",
            "del\u{7f}",
            "nul\0x",
            "bell\u{7}",
            "one\ntwo",
            "one\ntwo\n",
            "one\n\n",
            "\nlead",
            "  indented\nx",
            "a\n  \nb",
            "cr\r\nlf",
            "é\nà\n",
        ]
        .map(str::to_owned),
    );
    let mut runner = TestRunner::deterministic();
    let strategy = tricky();
    for _ in 0..3000 {
        strings.push(strategy.new_tree(&mut runner).unwrap().current());
    }

    let mut map = Map::new();
    for s in &strings {
        map.insert(s.clone(), json!(s));
    }
    map.insert("casebook sample: every string as a list item".into(), json!(strings));
    map.insert(
        "casebook sample: numbers".into(),
        json!([1e300, 1e-7, -1.5e-7, 1e16, 0.5, 12, -3, 9_007_199_254_740_991_i64, true, null]),
    );
    map.insert("casebook sample: nested".into(), json!({"yes": {"on": ["007", {"12:45": "0755"}]}, "<<": "merge"}));
    map.insert(
        "casebook sample: shapes".into(),
        json!({"lists": [[1, 2], ["x", [], [["yes"]]], [{}]], "empty map": {}, "empty list": [], "none": null}),
    );
    // As list items, the first key of each mapping follows its `- `.
    let items: Vec<Value> = [long_keys(), ISSUE_EXAMPLES.iter().map(|s| ((*s).to_owned(), json!(s))).collect()]
        .into_iter()
        .map(Value::Object)
        .collect();
    map.insert("casebook sample: items".into(), Value::Array(items));
    map.extend(long_keys());
    map
}

/// Loads the YAML file with PyYAML's safe loaders (the pure-Python one that `yaml.safe_load`
/// uses, and the libyaml one when present) and prints what each read, as JSON. Values JSON
/// cannot hold (dates, keys that are not strings) are spelled `<type repr>` so they differ.
const PYYAML_SCRIPT: &str = r#"
import json, sys
try:
    import yaml
except ImportError:
    sys.exit(3)

def plain(v):
    if isinstance(v, dict):
        return {(k if type(k) is str else "<%s %r>" % (type(k).__name__, k)): plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if v is None or type(v) in (str, int, float, bool):
        return v
    return "<%s %r>" % (type(v).__name__, v)

with open(sys.argv[1], "rb") as f:
    data = f.read()
read = {"yaml.safe_load": plain(yaml.safe_load(data))}
if hasattr(yaml, "CSafeLoader"):
    read["CSafeLoader"] = plain(yaml.load(data, Loader=yaml.CSafeLoader))
print(json.dumps(read))
"#;

#[test]
fn pyyaml_reads_back_what_was_written() {
    let sample = pyyaml_sample();
    let yaml = emit(&sample);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sample.yaml");
    fs_err::write(&path, &yaml).unwrap();

    let output = Command::new("python3").arg("-c").arg(PYYAML_SCRIPT).arg(&path).output().unwrap_or_else(|e| {
        panic!("this test needs python3 with PyYAML: run scripts/test.sh, which installs PyYAML ({e})")
    });
    assert_ne!(output.status.code(), Some(3), "PyYAML is not installed: run scripts/test.sh, which installs it");
    assert!(
        output.status.success(),
        "PyYAML could not read the written YAML (kept at {}):\n{}",
        dir.keep().join("sample.yaml").display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let read: Map<String, Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert!(read.contains_key("yaml.safe_load"), "{read:?}");

    for (loader, back) in &read {
        let back = back.as_object().unwrap_or_else(|| panic!("{loader} read {back}"));
        let mut wrong: Vec<String> = Vec::new();
        for (key, expected) in &sample {
            match back.get(key) {
                Some(got) if got == expected => {}
                got => wrong.push(format!("{key:?}: wrote {expected}, {loader} read {got:?}")),
            }
        }
        for key in back.keys().filter(|k| !sample.contains_key(*k)) {
            wrong.push(format!("{loader} read a key {key:?} that was not written"));
        }
        assert!(wrong.is_empty(), "{} values differ:\n{}", wrong.len(), wrong[..wrong.len().min(20)].join("\n"));
    }
}
