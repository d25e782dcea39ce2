//! JSON comparison for `json_match` and the text graders: equality that compares numbers by
//! value and objects by keys, subset matching, and reading JSON out of model text (code fences).

use serde_json::{Number, Value};

use super::{show, verdict};
use crate::record::{Failure, Grade};

/// `json_match`: the output (parsed when it is text) against the expected value (parsed when it
/// is text holding JSON). An output that is not JSON fails the case; it is not an error.
pub(super) fn grade(expected: &Value, output: &Value, subset: bool) -> Result<Grade, Failure> {
    let parsed_expected;
    let expected = match expected {
        Value::String(text) => match parse_text(text) {
            Ok(value) => {
                parsed_expected = value;
                &parsed_expected
            }
            Err(_) => expected,
        },
        other => other,
    };
    let parsed_output;
    let output = match output {
        Value::String(text) => match parse_text(text) {
            Ok(value) => {
                parsed_output = value;
                &parsed_output
            }
            Err(e) => return Ok(verdict(false, format!("the output is not JSON ({e}): {}", show(output)))),
        },
        other => other,
    };
    let mut path = String::new();
    Ok(match mismatch(output, expected, subset, &mut path) {
        None if subset => verdict(true, "the output contains the expected JSON"),
        None => verdict(true, "the output equals the expected JSON"),
        Some(why) => verdict(false, why),
    })
}

/// JSON in text: the whole text, or the inside of its first ``` fence (```json or bare).
pub(super) fn parse_text(text: &str) -> Result<Value, serde_json::Error> {
    match serde_json::from_str(text) {
        Ok(value) => Ok(value),
        Err(e) => match fenced(text) {
            Some(inside) => serde_json::from_str(inside),
            None => Err(e),
        },
    }
}

/// The inside of the first fenced code block of `text`, without the fence's info string.
pub(super) fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    let body_start = after.find('\n')? + 1;
    let body = &after[body_start..];
    let end = body.find("```")?;
    Some(&body[..end])
}

/// Equal JSON values: numbers by value (`1 == 1.0`), objects whatever their key order.
pub(super) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(key, a)| y.get(key).is_some_and(|b| json_equal(a, b)))
        }
        _ => a == b,
    }
}

fn numbers_equal(x: &Number, y: &Number) -> bool {
    if let (Some(a), Some(b)) = (x.as_i64(), y.as_i64()) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (x.as_u64(), y.as_u64()) {
        return a == b;
    }
    matches!((x.as_f64(), y.as_f64()), (Some(a), Some(b)) if a == b)
}

/// Where `output` first differs from `expected`, as a sentence naming the JSON Pointer; `None`
/// when they match. In `subset` mode the output may have more keys and more array elements:
/// every expected element must match a distinct output element, in any order.
fn mismatch(output: &Value, expected: &Value, subset: bool, path: &mut String) -> Option<String> {
    match (output, expected) {
        (Value::Object(out), Value::Object(exp)) => {
            for (key, want) in exp {
                let len = path.len();
                push_key(path, key);
                let found = match out.get(key) {
                    None => Some(format!("missing `{path}`")),
                    Some(got) => mismatch(got, want, subset, path),
                };
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            if !subset {
                if let Some(extra) = out.keys().find(|key| !exp.contains_key(*key)) {
                    push_key(path, extra);
                    return Some(format!("unexpected `{path}`"));
                }
            }
            None
        }
        (Value::Array(out), Value::Array(exp)) if subset => {
            let unmatched = unmatched_elements(out, exp)?;
            Some(format!("{} has no element matching {}", at(path), show(&exp[unmatched])))
        }
        (Value::Array(out), Value::Array(exp)) => {
            if out.len() != exp.len() {
                return Some(format!("{} has {} elements, expected {}", at(path), out.len(), exp.len()));
            }
            for (index, (got, want)) in out.iter().zip(exp).enumerate() {
                let len = path.len();
                path.push_str(&format!("/{index}"));
                let found = mismatch(got, want, subset, path);
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        _ if json_equal(output, expected) => None,
        _ => Some(format!("{}: expected {}, got {}", at(path), show(expected), show(output))),
    }
}

/// The first expected element left without a distinct matching output element in a maximum
/// matching (augmenting paths: greedy matching would miss `[{a:1}, {a:1,b:2}]` in
/// `[{a:1,b:2}, {a:1}]`). `None` when every expected element is matched.
fn unmatched_elements(out: &[Value], exp: &[Value]) -> Option<usize> {
    let fits: Vec<Vec<usize>> = exp
        .iter()
        .map(|want| (0..out.len()).filter(|&j| mismatch(&out[j], want, true, &mut String::new()).is_none()).collect())
        .collect();
    let mut owner: Vec<Option<usize>> = vec![None; out.len()];
    fn augment(i: usize, fits: &[Vec<usize>], owner: &mut [Option<usize>], seen: &mut [bool]) -> bool {
        for &j in &fits[i] {
            if !seen[j] {
                seen[j] = true;
                if owner[j].is_none_or(|other| augment(other, fits, owner, seen)) {
                    owner[j] = Some(i);
                    return true;
                }
            }
        }
        false
    }
    (0..exp.len()).find(|&i| !augment(i, &fits, &mut owner, &mut vec![false; out.len()]))
}

fn push_key(path: &mut String, key: &str) {
    path.push('/');
    path.push_str(&key.replace('~', "~0").replace('/', "~1"));
}

fn at(path: &str) -> String {
    if path.is_empty() { "the top level".to_owned() } else { format!("`{path}`") }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(expected: Value, output: Value, subset: bool) -> Grade {
        grade(&expected, &output, subset).unwrap()
    }

    #[test]
    fn exact_mode_needs_the_same_value() {
        assert!(check(json!({"a": 1, "b": [1, 2]}), json!({"b": [1.0, 2], "a": 1}), false).pass);
        let extra = check(json!({"a": 1}), json!({"a": 1, "b": 2}), false);
        assert_eq!((extra.pass, extra.rationale.as_str()), (false, "unexpected `/b`"));
        let order = check(json!([1, 2]), json!([2, 1]), false);
        assert_eq!(order.rationale, "`/0`: expected `1`, got `2`");
    }

    #[test]
    fn subset_mode_allows_more_keys_and_elements() {
        let expected = json!({"user": {"name": "Ada"}, "tags": ["x"]});
        let output = json!({"user": {"name": "Ada", "age": 36}, "tags": ["y", "x"], "id": 7});
        assert!(check(expected.clone(), output, true).pass);
        let wrong = check(expected.clone(), json!({"user": {"name": "Bob"}, "tags": ["x"]}), true);
        assert_eq!(wrong.rationale, "`/user/name`: expected `Ada`, got `Bob`");
        let missing = check(expected, json!({"user": {}, "tags": ["x"]}), true);
        assert_eq!(missing.rationale, "missing `/user/name`");
    }

    #[test]
    fn subset_arrays_match_distinct_elements_in_any_order() {
        let expected = json!([{"a": 1}, {"a": 1, "b": 2}]);
        assert!(check(expected.clone(), json!([{"a": 1, "b": 2}, {"a": 1}]), true).pass, "not greedy");
        let short = check(expected, json!([{"a": 1, "b": 2}]), true);
        assert_eq!(short.rationale, "the top level has no element matching `{\"a\":1,\"b\":2}`");
        assert!(!check(json!([1, 1]), json!([1]), true).pass, "each element once");
    }

    #[test]
    fn output_text_is_parsed_with_or_without_fences() {
        assert!(check(json!({"ok": true}), json!("{\"ok\": true}"), false).pass);
        assert!(check(json!({"ok": true}), json!("Here:\n```json\n{\"ok\": true}\n```\n"), false).pass);
        assert!(check(json!("{\"ok\": true}"), json!({"ok": true}), false).pass, "expected text holding JSON");
        let prose = check(json!({"ok": true}), json!("ok!"), false);
        assert!(!prose.pass && prose.rationale.starts_with("the output is not JSON"), "{prose:?}");
    }

    #[test]
    fn pointer_escapes_special_keys() {
        let grade = check(json!({"a/b": {"c~d": 1}}), json!({"a/b": {"c~d": 2}}), true);
        assert_eq!(grade.rationale, "`/a~1b/c~0d`: expected `1`, got `2`");
    }

    #[test]
    fn big_integers_compare_exactly() {
        assert!(!json_equal(&json!(9007199254740993u64), &json!(9007199254740992u64)));
        assert!(json_equal(&json!(-1), &json!(-1.0)));
    }
}
