//! Golden vectors: canonical JSON and content ids that must never change.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use casebook_canon::{
    Kind, Variant, VersionHasher, canonical_json, canonical_json_text, content_id, content_id_of_json, derived_case_id,
    derived_case_id_of_input,
};
use proptest::prelude::*;
use serde_json::Value;

#[test]
fn golden_vectors_hold() {
    let file: Value = serde_json::from_str(include_str!("vectors.json")).expect("vectors.json");
    let vectors = file["vectors"].as_array().expect("a list of vectors");
    assert!(vectors.len() >= 6);
    for v in vectors {
        let name = v["name"].as_str().unwrap();
        let input: Value = serde_json::from_str(v["input"].as_str().unwrap()).expect("input is JSON");
        assert_eq!(canonical_json(&input).unwrap(), v["canonical"].as_str().unwrap(), "{name}: canonical form");
        let kind = match v["kind"].as_str().unwrap() {
            "case" => Kind::Case,
            "task" => Kind::Task,
            "version" => Kind::Version,
            "manifest" => Kind::Manifest,
            "run" => Kind::Run,
            "seed" => Kind::Seed,
            "variant" => Kind::Variant,
            other => panic!("unknown kind {other}"),
        };
        assert_eq!(content_id(kind, &input).unwrap(), v["id"].as_str().unwrap(), "{name}: content id");
        // The text path gives the same, from the vector's own spelling of the input.
        let text = v["input"].as_str().unwrap();
        assert_eq!(canonical_json_text(text).unwrap(), v["canonical"].as_str().unwrap(), "{name}: from text");
        assert_eq!(content_id_of_json(kind, text).unwrap(), v["id"].as_str().unwrap(), "{name}: id from text");
        if kind == Kind::Task {
            assert_eq!(derived_case_id(&input).unwrap(), format!("t-{}", &v["id"].as_str().unwrap()[..16]));
        }
        if kind == Kind::Variant {
            // The suffix of a repeated task's derived id, and the number of a wholly identical row.
            let variant = Variant::of(&input).unwrap();
            let (base, derived) = (v["base"].as_str().unwrap(), v["derived_id"].as_str().unwrap());
            assert_eq!(variant.id(base, 1), derived, "{name}: derived id");
            assert_eq!(variant.id(base, 3), format!("{derived}-3"), "{name}: third identical row");
            assert_eq!(variant.key(), u64::from_str_radix(&v["id"].as_str().unwrap()[..16], 16).unwrap());
        }
    }
}

#[test]
fn golden_version_ids_hold() {
    let file: Value = serde_json::from_str(include_str!("vectors.json")).expect("vectors.json");
    for v in file["versions"].as_array().expect("version vectors") {
        let head: Value = serde_json::from_str(v["head"].as_str().unwrap()).unwrap();
        assert_eq!(canonical_json(&head).unwrap(), v["canonical_head"].as_str().unwrap());
        let mut hasher = VersionHasher::new(&head).unwrap();
        for change in v["changes"].as_array().unwrap() {
            hasher.change(change[0].as_str().unwrap(), change[1].as_str()).unwrap();
        }
        assert_eq!(hasher.finish(), v["id"].as_str().unwrap(), "{}", v["name"]);
    }
}

/// Any JSON value: strings with escapes, control characters and characters beyond U+FFFF,
/// integers and doubles of every size, nesting.
fn json_value() -> impl Strategy<Value = Value> {
    let string = prop_oneof![
        "[a-zA-Z0-9 ]{0,8}",
        "[\\u{0}-\\u{7f}]{0,8}",
        any::<String>(),
        Just("\u{1F600}\u{FB01}\u{E000}\u{FFFF}".to_owned()),
    ];
    let number = prop_oneof![
        any::<i64>().prop_map(Value::from),
        (-10i64.pow(16)..10i64.pow(16)).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        (-1000i64..1000, 0u32..6).prop_map(|(m, e)| Value::from(m as f64 / 10f64.powi(e as i32))),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number,
        string.clone().prop_map(Value::from)
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::vec((string.clone(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn text_path_equals_serde_path(value in json_value()) {
        let expected = canonical_json(&value).unwrap();
        prop_assert_eq!(canonical_json_text(&serde_json::to_string(&value).unwrap()).unwrap(), expected.clone());
        prop_assert_eq!(canonical_json_text(&serde_json::to_string_pretty(&value).unwrap()).unwrap(), expected);
    }

    /// The shortcut for a task that is only a string input gives the general path's id, for
    /// control characters, quotes, backslashes and characters beyond U+FFFF alike.
    #[test]
    fn derived_id_of_an_input_equals_the_tasks(input in prop_oneof![
        any::<String>(),
        "[\\u{0}-\\u{7f}]{0,24}",
        "[\"\\\\\\u{0}-\\u{1f}\\u{7f}\\u{2028}\\u{2029}\\u{fffd}\\u{1F600}é中a]{0,24}",
    ]) {
        let task = serde_json::json!({"input": input});
        prop_assert_eq!(derived_case_id_of_input(&input), derived_case_id(&task).unwrap());
    }
}
