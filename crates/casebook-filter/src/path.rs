//! A path on its own, to read values out of cases (`casebook cases --group-by label.category`):
//! the same paths as in filters, with the same meaning.

use std::fmt;

use casebook_model::Case;
use serde_json::Value;

use crate::FilterError;
use crate::ast::{Path, Root, Seg};

/// A parsed path into a case: `metadata.difficulty`, `label.category`, `turns[0].role`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldPath {
    path: Path,
}

impl FieldPath {
    pub fn parse(src: &str) -> Result<FieldPath, FilterError> {
        crate::parser::parse_path(src).map(|path| FieldPath { path })
    }

    /// The values at the path in `case`: none when it is missing, one for a field, and one for
    /// each `KEY:value` label for `label.KEY`.
    pub fn values(&self, case: &Case) -> Vec<Value> {
        if let Root::Label(key) = &self.path.root {
            return case
                .labels
                .iter()
                .flatten()
                .filter_map(|label| label.split_once(':'))
                .filter(|(k, _)| k == key)
                .map(|(_, value)| Value::String(value.to_owned()))
                .collect();
        }
        let Ok(Value::Object(mut object)) = serde_json::to_value(case) else { return Vec::new() };
        let Some(mut value) = object.remove(self.path.root.json_key()) else { return Vec::new() };
        for seg in &self.path.segs {
            let next = match (seg, &mut value) {
                (Seg::Key(key), Value::Object(map)) => map.remove(key),
                (Seg::Index(i), Value::Array(items)) if *i < items.len() => Some(items.swap_remove(*i)),
                _ => None,
            };
            match next {
                Some(next) => value = next,
                None => return Vec::new(),
            }
        }
        vec![value]
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.path.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn case() -> Case {
        serde_json::from_value(json!({
            "id": "a", "input": "hi", "labels": ["category:RCA", "math", "category:infra"],
            "turns": [{"role": "user", "content": "x"}, {"role": "hitl", "content": "y"}],
            "metadata": {"difficulty": "hard", "n": 3}
        }))
        .unwrap()
    }

    #[test]
    fn reads_fields_labels_and_indexes() {
        let values = |p: &str| FieldPath::parse(p).unwrap().values(&case());
        assert_eq!(values("metadata.difficulty"), [json!("hard")]);
        assert_eq!(values("label.category"), [json!("RCA"), json!("infra")]);
        assert_eq!(values("turns[1].role"), [json!("hitl")]);
        assert!(values("metadata.missing").is_empty());
        assert!(values("turns[5].role").is_empty());
        assert_eq!(values("id"), [json!("a")]);
    }

    #[test]
    fn a_bad_path_is_located() {
        let err = FieldPath::parse("metadata.difficulty extra").unwrap_err();
        assert_eq!(err.column, 21);
        assert_eq!(FieldPath::parse("inptu").unwrap_err().hint.as_deref(), Some("did you mean `input`?"));
    }
}
