//! Filters written the way other tools and flags write them (SPEC §6): `--tag a --tag b`, letta's
//! `sample_tags`, mas-lab's `dataset.filter: {k: v}`. Each builds the same [`Filter`] the
//! language would, so it prints, evaluates and translates to SQL like a parsed one.

use serde_json::Value;

use crate::Filter;
use crate::ast::{Atom, CmpOp, Expr, Lit, Num, Path, Root, Seg, Subject, Test};
use crate::error::ShorthandError;

/// mas-lab item fields that casebook keeps as `key:value` labels (the mas-lab reader's
/// `LABEL_FIELDS`).
const MASLAB_LABEL_FIELDS: &[&str] = &["category", "group", "type"];

fn atom(root: Root, segs: Vec<Seg>, test: Test) -> Expr {
    Expr::Atom(Atom { subject: Subject::Path(Path { root, segs }), test })
}

fn all(mut items: Vec<Expr>) -> Filter {
    Filter {
        expr: match items.len() {
            0 => Expr::Const(true),
            1 => items.pop().unwrap_or(Expr::Const(true)),
            _ => Expr::And(items),
        },
    }
}

fn has_tag(tag: &str) -> Expr {
    atom(Root::Labels, Vec::new(), Test::Contains(Lit::Str(tag.to_owned())))
}

impl Filter {
    /// Cases that have every one of these labels (`--tag a --tag b`):
    /// `labels contains "a" and labels contains "b"`. No tags select every case.
    pub fn tags<S: AsRef<str>>(tags: &[S]) -> Filter {
        all(tags.iter().map(|t| has_tag(t.as_ref())).collect())
    }

    /// letta's `sample_tags: [a, b]`: samples with all of these tags, as [`Filter::tags`].
    pub fn letta_sample_tags<S: AsRef<str>>(tags: &[S]) -> Filter {
        Filter::tags(tags)
    }

    /// mas-lab's `dataset.filter: {k: v, ...}`; every entry must hold. For each key:
    ///
    /// - `category`, `group`, `type` (which the mas-lab reader turns into `key:value` labels):
    ///   `label.<k> == v`;
    /// - `id`: `id == v` (a number is compared as its text, as ids are strings);
    /// - `tags`: `labels contains` each of the tags given;
    /// - anything else: `metadata.<k> == v`.
    ///
    /// A list value means "one of": `label.category in ["a", "b"]`. An empty map selects every
    /// case.
    pub fn maslab(filter: &serde_json::Map<String, Value>) -> Result<Filter, ShorthandError> {
        let mut items = Vec::new();
        for (key, value) in filter {
            let wrong = |what: &str| ShorthandError { message: format!("mas-lab filter `{key}` must be {what}") };
            let strings = |lits: Vec<Lit>, numbers_as_text: bool| -> Option<Vec<Lit>> {
                lits.into_iter()
                    .map(|lit| match lit {
                        Lit::Str(s) => Some(Lit::Str(s)),
                        Lit::Num(n) if numbers_as_text => Some(Lit::Str(n.to_string())),
                        _ => None,
                    })
                    .collect()
            };
            let (lits, is_list) = match value {
                Value::Array(values) => (values.iter().map(scalar).collect::<Option<Vec<_>>>(), true),
                single => (scalar(single).map(|lit| vec![lit]), false),
            };
            let lits = lits.ok_or_else(|| wrong("a value or a list of values"))?;
            let equal_or_in = |root: Root, segs: Vec<Seg>, mut lits: Vec<Lit>| {
                if is_list {
                    atom(root, segs, Test::In(lits))
                } else {
                    atom(root, segs, Test::Cmp(CmpOp::Eq, lits.pop().unwrap_or(Lit::Null)))
                }
            };
            match key.as_str() {
                field if MASLAB_LABEL_FIELDS.contains(&field) => {
                    let lits = strings(lits, false).ok_or_else(|| wrong("a string or a list of strings"))?;
                    items.push(equal_or_in(Root::Label(field.to_owned()), Vec::new(), lits));
                }
                "id" => {
                    let lits = strings(lits, true).ok_or_else(|| wrong("a string or a list of strings"))?;
                    items.push(equal_or_in(Root::Id, Vec::new(), lits));
                }
                "tags" => {
                    let lits = strings(lits, false).ok_or_else(|| wrong("a string or a list of strings"))?;
                    items.extend(lits.iter().filter_map(|l| if let Lit::Str(s) = l { Some(has_tag(s)) } else { None }));
                }
                other => {
                    if other.contains('\0') {
                        return Err(wrong("named without U+0000"));
                    }
                    items.push(equal_or_in(Root::Metadata, vec![Seg::Key(other.to_owned())], lits));
                }
            }
        }
        Ok(all(items))
    }
}

fn scalar(value: &Value) -> Option<Lit> {
    match value {
        Value::Null => Some(Lit::Null),
        Value::Bool(b) => Some(Lit::Bool(*b)),
        Value::Number(n) => Some(Lit::Num(Num::of_json(n))),
        Value::String(s) => Some(Lit::Str(s.clone())),
        Value::Array(_) | Value::Object(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn maslab(value: Value) -> Result<String, ShorthandError> {
        let Value::Object(map) = value else { panic!("not an object") };
        Filter::maslab(&map).map(|f| f.to_string())
    }

    #[test]
    fn tags_require_every_tag() {
        assert_eq!(Filter::tags(&["a", "b c"]).to_string(), r#"labels contains "a" and labels contains "b c""#);
        assert_eq!(Filter::tags(&[String::from("x")]).to_string(), r#"labels contains "x""#);
        assert_eq!(Filter::tags::<&str>(&[]).to_string(), "true");
        assert_eq!(Filter::letta_sample_tags(&["a", "b"]), Filter::tags(&["a", "b"]));
    }

    #[test]
    fn maslab_filters_map_each_key() {
        assert_eq!(
            maslab(json!({"category": "RCA", "group": ["g1", "g2"], "id": 7, "tags": ["x", "y"], "difficulty": 3}))
                .unwrap(),
            r#"label.category == "RCA" and label.group in ["g1", "g2"] and id == "7" and labels contains "x" and labels contains "y" and metadata.difficulty == 3"#
        );
        assert_eq!(maslab(json!({"odd key": [true, null]})).unwrap(), r#"metadata."odd key" in [true, null]"#);
        assert_eq!(maslab(json!({})).unwrap(), "true");
    }

    #[test]
    fn maslab_values_that_cannot_match_are_errors() {
        assert_eq!(
            maslab(json!({"category": 3})).unwrap_err().to_string(),
            "mas-lab filter `category` must be a string or a list of strings"
        );
        assert_eq!(
            maslab(json!({"x": {"a": 1}})).unwrap_err().to_string(),
            "mas-lab filter `x` must be a value or a list of values"
        );
        assert_eq!(
            maslab(json!({"tags": [1]})).unwrap_err().to_string(),
            "mas-lab filter `tags` must be a string or a list of strings"
        );
    }
}
