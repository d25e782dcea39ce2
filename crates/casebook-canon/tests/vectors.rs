//! Golden vectors: canonical JSON and content ids that must never change.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use casebook_canon::{Kind, VersionHasher, canonical_json, content_id, derived_case_id};
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
            other => panic!("unknown kind {other}"),
        };
        assert_eq!(content_id(kind, &input).unwrap(), v["id"].as_str().unwrap(), "{name}: content id");
        if kind == Kind::Task {
            assert_eq!(derived_case_id(&input).unwrap(), format!("t-{}", &v["id"].as_str().unwrap()[..16]));
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
