//! Facets: the small fields of a case that filters test most (id, metadata, confidence,
//! review…), kept by the stores beside the case's body so that a filter on them reads tens of
//! bytes a case instead of the whole body. The facets of a case are its JSON form without the
//! task and expectation fields and without its labels (the stores index those apart); a path
//! into them means what it means in the body.

use casebook_model::{Case, Map, Review};
use serde::Serialize;

use crate::ast::Root;

/// The top-level keys of a case's JSON form that its facets hold.
pub const FACET_FIELDS: [&str; 7] = ["id", "name", "description", "metadata", "confidence", "review", "session_id"];
/// The other top-level keys: what the facets leave out.
pub const OTHER_FIELDS: [&str; 9] =
    ["labels", "input", "turns", "context", "tools", "memory_seeds", "agent_args", "expected", "provenance"];

#[derive(Serialize)]
struct Facets<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Map>,
    #[serde(skip_serializing_if = "Option::is_none")]
    confidence: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    review: Option<Review>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
}

/// The facets of `case` as JSON text: the keys of [`FACET_FIELDS`] it has, as its JSON form
/// writes them.
pub fn facets_json(case: &Case) -> String {
    let facets = Facets {
        id: &case.id,
        name: case.name.as_deref(),
        description: case.description.as_deref(),
        metadata: case.metadata.as_ref(),
        confidence: case.confidence,
        review: case.review,
        session_id: case.task.session_id.as_deref(),
    };
    // Borrowed strings, a map and numbers: serialising cannot fail.
    serde_json::to_string(&facets).unwrap_or_default()
}

/// Whether a path starting at `root` can be read from the facets.
pub(crate) fn in_facets(root: &Root) -> bool {
    FACET_FIELDS.contains(&root.json_key())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn the_two_lists_split_the_fields_of_a_case() {
        let mut all: Vec<&str> = FACET_FIELDS.iter().chain(&OTHER_FIELDS).copied().collect();
        all.sort_unstable();
        let mut roots: Vec<&str> = Root::FIELDS.iter().map(Root::json_key).collect();
        roots.sort_unstable();
        assert_eq!(all, roots);
    }

    #[test]
    fn facets_are_the_case_without_its_task_expectations_and_labels() {
        let case: Case = serde_json::from_value(json!({
            "id": "a", "name": "n", "labels": ["x", "k:v"], "input": "hi", "session_id": "s",
            "turns": [{"role": "user", "content": "x"}], "expected": {"output": 1},
            "metadata": {"d": [1, 2.5, null]}, "confidence": 0.5, "review": "draft",
            "provenance": {"format": "letta"}
        }))
        .unwrap();
        let mut whole = serde_json::to_value(&case).unwrap();
        for key in OTHER_FIELDS {
            whole.as_object_mut().unwrap().remove(key);
        }
        assert_eq!(serde_json::from_str::<Value>(&facets_json(&case)).unwrap(), whole);
    }
}
