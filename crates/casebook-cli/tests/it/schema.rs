//! `casebook schema`: the JSON Schema editors use must describe what the native reader accepts.

use serde_json::Value;

use crate::cli::{casebook, run};

#[test]
fn schema_describes_every_field_the_examples_use() {
    let out = run(casebook().arg("schema"));
    assert_eq!(out.status, Some(0), "{out:?}");
    let schema: Value = serde_json::from_str(&out.stdout).expect("the schema is JSON");
    assert!(schema["$schema"].as_str().is_some_and(|s| s.contains("json-schema.org")));
    let case = &schema["$defs"]["Case"];
    assert_eq!(case["required"], serde_json::json!(["id", "input"]));
    let case_fields = case["properties"].as_object().expect("Case has properties");
    let expected_fields = schema["$defs"]["Expectations"]["properties"].as_object().expect("Expectations");

    // Every field of the bundled native example, once read, is one the schema knows.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/casebook/incidents.yaml");
    let converted = run(casebook().args(["convert", example, "--to", "casebook", "-q"]));
    assert_eq!(converted.status, Some(0), "{converted:?}");
    let mut seen = 0;
    for line in converted.stdout.lines() {
        let row: Value = serde_json::from_str(line).expect("JSONL");
        if row.get("$dataset").is_some() {
            continue;
        }
        for (key, value) in row.as_object().expect("a case") {
            assert!(case_fields.contains_key(key), "`{key}` is missing from the schema");
            if key == "expected" {
                for inner in value.as_object().expect("expected is an object").keys() {
                    assert!(expected_fields.contains_key(inner), "`expected.{inner}` is missing from the schema");
                }
            }
            seen += 1;
        }
    }
    assert!(seen > 10, "the example has a fair number of fields");

    // A tool's world snapshot: recorded responses (inline or a snapshot file) and a default.
    let tool = schema["$defs"]["Tool"]["properties"].as_object().expect("Tool has properties");
    assert!(tool.contains_key("responses") && tool.contains_key("default"), "{tool:?}");
    let response = schema["$defs"]["Response"]["properties"].as_object().expect("Response has properties");
    let keys: Vec<&str> = response.keys().map(String::as_str).collect();
    assert_eq!(keys, ["when", "result", "error", "query"]);
}
