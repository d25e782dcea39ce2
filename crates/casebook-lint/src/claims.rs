//! What two cases' expectations say of one answer, as far as it can be told without an answer:
//! whether they can both hold. Two cases asking the same conflict only when they cannot: both
//! name an exact answer (`expected.output`, or a promptfoo `equals` assert) and the answers
//! differ, or one requires a text (`contains`, `icontains`, `contains-all`, …) the other
//! forbids (`not-contains`, `not-icontains`, `not-contains-any`, …). Checks that can be met
//! together (`icontains: pix` and `icontains-all: [pix, boleto]`), rubrics and outcomes, which
//! a judge weighs, never conflict.
//!
//! Only hashes are kept (tagged: a text required letter for letter, or with letter case folded),
//! so the linter's memory per distinct task stays small.

use std::hash::{BuildHasher, Hasher as _};

use casebook_model::Expectations;
use serde_json::Value;

/// What one case's expectations say of the answer, as hashes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Claims {
    /// The exact answer.
    exact: Option<u64>,
    /// Texts the answer must contain (each exact text also as its folded form).
    must: Box<[u64]>,
    /// Texts it must not contain.
    must_not: Box<[u64]>,
}

/// How a text is compared.
#[derive(Clone, Copy)]
enum Fold {
    /// Letter for letter.
    Exact = 1,
    /// Letter case folded.
    Case = 2,
}

fn hash(fold: Fold, text: &str) -> u64 {
    let mut h = foldhash::quality::FixedState::with_seed(0x636c_6169_6d73).build_hasher();
    h.write_u8(fold as u8);
    match fold {
        Fold::Exact => h.write(text.as_bytes()),
        Fold::Case => h.write(text.to_lowercase().as_bytes()),
    }
    h.finish()
}

/// The texts an assert value names: a string, or a list of strings.
fn texts(value: Option<&Value>) -> Vec<&str> {
    match value {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

impl Claims {
    pub(crate) fn of(expected: &Expectations) -> Claims {
        let mut exact = expected.output.as_ref().map(|output| match output {
            Value::String(s) => hash(Fold::Exact, s),
            other => hash(Fold::Exact, &other.to_string()),
        });
        let (mut must, mut must_not) = (Vec::new(), Vec::new());
        let asserts = expected.extra.get("assert").and_then(Value::as_array).into_iter().flatten();
        for assert in asserts {
            let Some(kind) = assert.get("type").and_then(Value::as_str) else { continue };
            let values = texts(assert.get("value"));
            let (negated, kind) = match kind.strip_prefix("not-") {
                Some(kind) => (true, kind),
                None => (false, kind),
            };
            match (negated, kind) {
                (false, "equals") => {
                    if let [value] = values[..] {
                        exact.get_or_insert(hash(Fold::Exact, value));
                    }
                }
                (false, "contains" | "contains-all") => {
                    for v in values {
                        must.extend([hash(Fold::Exact, v), hash(Fold::Case, v)]);
                    }
                }
                (false, "contains-any") if values.len() == 1 => {
                    must.extend([hash(Fold::Exact, values[0]), hash(Fold::Case, values[0])]);
                }
                (false, "icontains" | "icontains-all") => must.extend(values.iter().map(|v| hash(Fold::Case, v))),
                (false, "icontains-any") if values.len() == 1 => must.push(hash(Fold::Case, values[0])),
                (true, "contains" | "contains-any") => must_not.extend(values.iter().map(|v| hash(Fold::Exact, v))),
                (true, "icontains" | "icontains-any") => must_not.extend(values.iter().map(|v| hash(Fold::Case, v))),
                (true, "contains-all") if values.len() == 1 => must_not.push(hash(Fold::Exact, values[0])),
                (true, "icontains-all") if values.len() == 1 => must_not.push(hash(Fold::Case, values[0])),
                _ => {}
            }
        }
        must.sort_unstable();
        must.dedup();
        must_not.sort_unstable();
        must_not.dedup();
        Claims { exact, must: must.into(), must_not: must_not.into() }
    }

    /// Whether no answer can meet both.
    pub(crate) fn conflict(&self, other: &Claims) -> bool {
        let forbids = |a: &Claims, b: &Claims| a.must_not.iter().any(|h| b.must.binary_search(h).is_ok());
        matches!((self.exact, other.exact), (Some(a), Some(b)) if a != b)
            || forbids(self, other)
            || forbids(other, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(expected: Value) -> Claims {
        Claims::of(&serde_json::from_value(expected).unwrap())
    }

    #[test]
    fn only_expectations_no_answer_meets_together_conflict() {
        let pix = claims(json!({"assert": [{"type": "icontains", "value": "pix"}]}));
        let all = claims(json!({"assert": [{"type": "icontains-all", "value": ["pix", "boleto", "cartão"]}]}));
        let no_pix = claims(json!({"assert": [{"type": "not-icontains", "value": "PIX"}]}));
        let no_exact = claims(json!({"assert": [{"type": "not-contains", "value": "Pix"}]}));
        assert!(!pix.conflict(&all));
        assert!(pix.conflict(&no_pix) && no_pix.conflict(&all));
        // `icontains: pix` is met by "PIX", which `not-contains: Pix` allows.
        assert!(!pix.conflict(&no_exact));
        let contains = claims(json!({"assert": [{"type": "contains", "value": "Pix"}]}));
        assert!(contains.conflict(&no_exact) && contains.conflict(&no_pix));
        let paris = claims(json!({"output": "Paris"}));
        let lyon = claims(json!({"assert": [{"type": "equals", "value": "Lyon"}]}));
        assert!(paris.conflict(&lyon));
        assert!(!paris.conflict(&claims(json!({"output": "Paris", "rubric": "polite"}))));
        assert!(!claims(json!({"rubric": "a"})).conflict(&claims(json!({"rubric": "b"}))));
    }
}
