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

/// Where a store reads the value at a path in its SQL (a sort by a field, a count by the path):
/// the facets or the body, and the path within that JSON.
impl FieldPath {
    /// Whether the path names a case's id (`id`), which stores read from their own column.
    pub fn is_id(&self) -> bool {
        self.path.root == Root::Id && self.path.segs.is_empty()
    }

    /// Whether the path reads labels (`labels`, `label.KEY`): stores keep them apart from the
    /// JSON, so no single value is found at the path.
    pub fn reads_labels(&self) -> bool {
        matches!(self.path.root, Root::Labels | Root::Label(_))
    }

    /// The key of a `label.KEY` path: its values are those of the case's `KEY:value` labels.
    pub fn label_key(&self) -> Option<&str> {
        match &self.path.root {
            Root::Label(key) => Some(key),
            _ => None,
        }
    }

    /// Whether the value is in the case's facets ([`crate::facets_json`]) rather than only in
    /// its body.
    pub fn in_facets(&self) -> bool {
        crate::facets::in_facets(&self.path.root)
    }

    /// Whether a store's body holds the path's value as the case's JSON form does: not for a
    /// label path, nor in `memory_seeds` and `tools`, whose files' documents stores keep apart.
    pub fn in_stored_body(&self) -> bool {
        !matches!(self.path.root, Root::Label(_) | Root::MemorySeeds | Root::Tools)
    }

    /// The SQLite JSON path of the value, keys quoted (`$."metadata"."difficulty"`).
    pub fn sqlite_json_path(&self) -> String {
        crate::sql::json_path(&self.path)
    }

    /// The steps of the path as PostgreSQL's `#>` takes them (a `text[]`: keys, and indexes as
    /// their digits).
    pub fn pg_steps(&self) -> Vec<String> {
        let mut steps = vec![self.path.root.json_key().to_owned()];
        steps.extend(self.path.segs.iter().map(|seg| match seg {
            Seg::Key(key) => key.clone(),
            Seg::Index(i) => i.to_string(),
        }));
        steps
    }
}

/// Cases counted per value of a path (`casebook cases --group-by`, the console's counts): a
/// case with several values counts in each, a case without the field in the missing group.
#[derive(Debug)]
pub struct Groups {
    path: FieldPath,
    /// Keyed by the value's JSON text; `None` for the cases without the field.
    counts: std::collections::HashMap<Option<String>, u64>,
    cases: u64,
}

impl Groups {
    pub fn new(path: FieldPath) -> Self {
        Self { path, counts: Default::default(), cases: 0 }
    }

    pub fn path(&self) -> &FieldPath {
        &self.path
    }

    /// Cases counted.
    pub fn cases(&self) -> u64 {
        self.cases
    }

    pub fn add(&mut self, case: &Case) {
        self.cases += 1;
        let values = self.path.values(case);
        if values.is_empty() {
            *self.counts.entry(None).or_default() += 1;
        }
        for value in values {
            *self.counts.entry(Some(value.to_string())).or_default() += 1;
        }
    }

    /// Counts `n` cases with `value` at the path (`None`: without the field), as a store
    /// counted them in SQL; values are told apart as [`Groups::add`] tells them.
    pub fn add_counted(&mut self, value: Option<Value>, n: u64) {
        self.cases += n;
        *self.counts.entry(value.map(|v| v.to_string())).or_default() += n;
    }

    /// The groups, most frequent first (ties by value), the cases without the field last.
    pub fn sorted(self) -> Vec<(Option<Value>, u64)> {
        let mut groups: Vec<(Option<String>, u64)> = self.counts.into_iter().collect();
        groups.sort_by(|a, b| {
            (a.0.is_none(), std::cmp::Reverse(a.1), &a.0).cmp(&(b.0.is_none(), std::cmp::Reverse(b.1), &b.0))
        });
        groups
            .into_iter()
            .map(|(key, n)| (key.map(|k| serde_json::from_str(&k).unwrap_or(Value::String(k))), n))
            .collect()
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

    #[test]
    fn groups_count_every_value_and_the_missing_last() {
        let mut groups = Groups::new(FieldPath::parse("label.category").unwrap());
        groups.add(&case());
        groups.add(&serde_json::from_value(json!({"id": "b", "input": "x", "labels": ["category:RCA"]})).unwrap());
        groups.add(&serde_json::from_value(json!({"id": "c", "input": "y"})).unwrap());
        assert_eq!(groups.cases(), 3);
        assert_eq!(groups.sorted(), vec![(Some(json!("RCA")), 2), (Some(json!("infra")), 1), (None, 1)]);
    }
}
