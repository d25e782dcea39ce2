//! Field-level differences between two versions of a case, as JSON Pointers with old and new
//! values.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    pub pointer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

/// The leaves where `old` and `new` differ. Objects are compared key by key; arrays of the same
/// length item by item; anything else that differs is one change.
pub fn field_changes(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk(&mut String::new(), Some(old), Some(new), &mut out);
    out
}

fn walk(pointer: &mut String, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<FieldChange>) {
    match (old, new) {
        (Some(a), Some(b)) if a == b => {}
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for key in keys.cloned().collect::<Vec<_>>() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                walk(pointer, a.get(&key), b.get(&key), out);
                pointer.truncate(len);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                walk(pointer, Some(x), Some(y), out);
                pointer.truncate(len);
            }
        }
        (old, new) => out.push(FieldChange { pointer: pointer.clone(), old: old.cloned(), new: new.cloned() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_to_what_changed() {
        let old = json!({"id": "a", "input": "q", "expected": {"output": "4"}, "labels": ["x", "y"], "gone": 1});
        let new = json!({"id": "a", "input": "q?", "expected": {"output": "4"}, "labels": ["x", "z"], "new/key": 2});
        let changes = field_changes(&old, &new);
        let pointers: Vec<&str> = changes.iter().map(|c| c.pointer.as_str()).collect();
        assert_eq!(pointers, ["/input", "/labels/1", "/gone", "/new~1key"]);
        assert_eq!(changes[0].old, Some(json!("q")));
        assert_eq!(changes[3].old, None);
        assert_eq!(changes[3].new, Some(json!(2)));
    }
}
