//! `choice`: a multiple-choice answer graded as Inspect's `choice()` scorer grades what its
//! `multiple_choice` solver read from the model (inspect_ai `solver/_multiple_choice.py`,
//! `parse_answers`; `scorer/_choice.py`).
//!
//! - The options are the case's choices ([`casebook_model::choices`]), lettered `A`, `B`, … .
//! - The right options come from `expected.output`: a letter (`"A"`), letters (`"AC"`, as
//!   Inspect reads a target character by character), a list of letters (`["A", "C"]`, also from
//!   `expected.acceptable`, where a list target is kept), or the text of a choice, which names
//!   its letter. Anything else is a `config` error for the case, as is a case without choices.
//! - The answer is read from the output as Inspect reads it: the first line that starts with
//!   `ANSWER:` (letter case of the word free, spaces around the colon free), else the first
//!   `ANSWER:` anywhere; what follows, up to the end of its run of letters, digits, spaces and
//!   commas, and without a final full stop, is the answer. With one right option it must be
//!   exactly one option's capital letter (`ANSWER: B.` names B; `ANSWER: b`, `ANSWER: B is
//!   right` and `ANSWER: A, B` name none). With several it may list letters run together, or
//!   separated by commas, spaces or ` and ` (`ANSWER: A, C`, `ANSWER: AC`, `ANSWER: A and C`).
//! - It passes when the options named are exactly the right ones. Prose that merely contains a
//!   letter names nothing, and an answer not in the `ANSWER:` form fails.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use casebook_model::{Case, choices};
use regex::Regex;
use serde_json::Value;

use super::{missing, text_of, verdict};
use crate::record::{Failure, Grade};

/// The grader's kind, and its name where it grades a case by default.
pub(super) const KIND: &str = "choice";

/// A line that is only the answer (Inspect's first, strict, pattern).
static LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?im)^ANSWER\s*:\s*([A-Za-z\d ,]+)\s*(?:$|\n|\.)").expect("a valid pattern"));
/// The answer anywhere (Inspect's fallback pattern).
static ANYWHERE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)ANSWER\s*:\s*([A-Za-z\d ,]+)(?:[^\w]|\n|$|\.)").expect("a valid pattern"));

/// Grades one output of `case` (see the module docs).
pub(super) fn grade(grader: &str, case: &Case, output: &Value) -> Result<Grade, Failure> {
    let config = |message: String| Failure::new("config", format!("case `{}`: grader `{grader}`: {message}", case.id));
    let Some(options) = choices::of(&case.task) else {
        return Err(config(
            "the case offers no choices (a `choices` context item, as Inspect's `choices` are read)".into(),
        ));
    };
    if options.is_empty() {
        return Err(config("the case's list of choices is empty".into()));
    }
    let expected = right_named(case).ok_or_else(|| missing(&case.id, grader, "expected.output"))?;
    let right = right_options(&expected, &options).map_err(config)?;
    let named = named_options(&text_of(output), options.len(), right.len() > 1);
    let shown = |set: &BTreeSet<usize>| {
        set.iter()
            .map(|&i| format!("{} ({})", choices::letter(i), super::clip(options[i], 30)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(match named {
        None => verdict(
            false,
            format!("the output names no choice in the form `ANSWER: {}`; expected {}", letters(&right), shown(&right)),
        ),
        Some(named) if named == right => verdict(true, format!("the answer names {}", shown(&right))),
        Some(named) => verdict(false, format!("the answer names {}; expected {}", shown(&named), shown(&right))),
    })
}

/// Whether `case` is a multiple-choice question with more than one right choice (Inspect's
/// `multiple_correct`), as this grader reads its right choices; `false` when it has no choices
/// or its expectations name none.
pub fn several_right(case: &Case) -> bool {
    let Some(options) = choices::of(&case.task).filter(|o| !o.is_empty()) else { return false };
    right_named(case).is_some_and(|expected| right_options(&expected, &options).is_ok_and(|right| right.len() > 1))
}

/// What names the right choices: `expected.output`, else the list `expected.acceptable`.
fn right_named(case: &Case) -> Option<Value> {
    match (&case.expected.output, &case.expected.acceptable) {
        (Some(output), _) => Some(output.clone()),
        (None, Some(list)) => Some(Value::Array(list.clone())),
        (None, None) => None,
    }
}

fn letters(set: &BTreeSet<usize>) -> String {
    set.iter().map(|&i| choices::letter(i)).collect::<Vec<_>>().join(", ")
}

/// The right options that `expected` names (see the module docs).
fn right_options(expected: &Value, options: &[&str]) -> Result<BTreeSet<usize>, String> {
    let n = options.len();
    let offered = |i: usize| i < n;
    let hint = || {
        format!(
            "give the letter of the right choice ({}), a list of letters, or the text of a choice",
            choices::letters(n).replace(',', ", ")
        )
    };
    match expected {
        Value::String(text) => {
            let label = text.trim();
            if let Some(i) = choices::index_of(&label.to_uppercase()).filter(|&i| offered(i)) {
                return Ok(BTreeSet::from([i]));
            }
            if let Some(i) = options.iter().position(|o| o.trim() == label) {
                return Ok(BTreeSet::from([i]));
            }
            // Several capital letters in one string, as Inspect reads a target: one option a
            // character.
            let chars: Option<BTreeSet<usize>> =
                label.chars().map(|c| choices::index_of(&c.to_string()).filter(|&i| offered(i))).collect();
            match chars {
                Some(set) if !set.is_empty() => Ok(set),
                _ => Err(format!(
                    "`expected.output` `{}` names none of the {n} choices: {}",
                    super::clip(text, 40),
                    hint()
                )),
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let mut set = BTreeSet::new();
            for item in items {
                let one = right_options(item, options)?;
                if one.len() != 1 {
                    return Err(format!("each item of a list of right choices names one choice: {}", hint()));
                }
                set.extend(one);
            }
            Ok(set)
        }
        other => Err(format!("`expected.output` {} names no choice: {}", super::show(other), hint())),
    }
}

/// The options an output names, read as Inspect's `parse_answers` reads them; `None` when it
/// names none. `several`: whether more than one option may be named (Inspect's
/// `multiple_correct`, which casebook takes from the number of right options).
fn named_options(output: &str, n: usize, several: bool) -> Option<BTreeSet<usize>> {
    let found = LINE.captures(output).or_else(|| ANYWHERE.captures(output))?;
    let answer = found.get(1)?.as_str().trim().trim_end_matches('.');
    let index = |label: &str| choices::index_of(label).filter(|&i| i < n);
    if !several {
        return index(answer).map(|i| BTreeSet::from([i]));
    }
    let joined = answer.replace(" and ", "").replace(' ', "");
    let by_comma: Option<BTreeSet<usize>> = joined.split(',').map(index).collect();
    if let Some(set) = by_comma {
        return Some(set);
    }
    joined.chars().map(|c| index(&c.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(output: &str, n: usize, several: bool) -> Option<Vec<usize>> {
        named_options(output, n, several).map(|set| set.into_iter().collect())
    }

    /// The forms Inspect's `parse_answers` accepts with one right option, and the ones it does not.
    #[test]
    fn one_answer_is_read_as_inspect_reads_it() {
        for (output, want) in [
            ("ANSWER: A", Some(vec![0])),
            ("ANSWER: B", Some(vec![1])),
            ("answer: B", Some(vec![1])),
            ("Answer:C", Some(vec![2])),
            ("ANSWER : B.", Some(vec![1])),
            ("ANSWER: B\n", Some(vec![1])),
            ("Let me think.\nB is wrong, so\nANSWER: A", Some(vec![0])),
            ("I think the FINAL ANSWER: C, because it is", None),
            ("My final ANSWER: C. It fits.", Some(vec![2])),
            ("So the ANSWER: D!", None),
            ("ANSWER: b", None),
            ("ANSWER: A is right", None),
            ("ANSWER: A, B", None),
            ("ANSWER: AB", None),
            ("A", None),
            ("The answer is A", None),
            ("A) Paris", None),
            ("ANSWER: (A)", None),
            ("", None),
        ] {
            assert_eq!(named(output, 3, false), want, "{output:?}");
        }
    }

    #[test]
    fn several_answers_are_read_as_inspect_reads_them() {
        for output in ["ANSWER: A, C", "ANSWER: AC", "ANSWER: A C", "ANSWER: A and C", "ANSWER: C,A", "ANSWER: A,C."] {
            assert_eq!(named(output, 3, true), Some(vec![0, 2]), "{output:?}");
        }
        assert_eq!(named("ANSWER: A", 3, true), Some(vec![0]));
        assert_eq!(named("ANSWER: A, D", 3, true), None, "D is not offered");
        assert_eq!(named("ANSWER: a, c", 3, true), None);
    }

    #[test]
    fn options_past_z_are_numbered() {
        assert_eq!(named("ANSWER: 1", 28, false), Some(vec![26]));
        assert_eq!(named("ANSWER: 3", 28, false), None, "only 28 options");
    }

    fn case(expected: serde_json::Value, choices: Option<&[&str]>) -> Case {
        let mut case = serde_json::json!({"id": "q", "input": "Capital of France?", "expected": expected});
        if let Some(choices) = choices {
            case["context"] = serde_json::json!([{"type": "custom", "source": "choices", "content": choices}]);
        }
        serde_json::from_value(case).unwrap()
    }

    fn pass(case: &Case, output: &str) -> bool {
        grade(KIND, case, &Value::String(output.into())).unwrap().pass
    }

    const CITIES: &[&str] = &["Paris", "Berlin", "Rome"];

    #[test]
    fn the_right_letter_passes_and_a_wrong_one_fails_even_when_it_contains_the_letter() {
        let case = case(serde_json::json!({"output": "A"}), Some(CITIES));
        assert!(pass(&case, "ANSWER: A"));
        assert!(pass(&case, "Paris is the capital.\nANSWER: A"));
        for wrong in ["ANSWER: B", "A", "A) Paris", "Paris", "The answer is A, Paris.", "ANSWER: A, B", "ANSWER: a"] {
            assert!(!pass(&case, wrong), "{wrong:?}");
        }
        let grade = grade(KIND, &case, &Value::String("ANSWER: B".into())).unwrap();
        assert_eq!(grade.rationale, "the answer names B (Berlin); expected A (Paris)");
        let grade = super::grade(KIND, &case, &Value::String("Paris".into())).unwrap();
        assert_eq!(grade.rationale, "the output names no choice in the form `ANSWER: A`; expected A (Paris)");
    }

    #[test]
    fn the_right_choices_come_from_letters_lists_or_a_choice_text() {
        // Inspect's list target (kept as `expected.acceptable`): every letter must be named.
        let both = case(serde_json::json!({"acceptable": ["A", "C"]}), Some(CITIES));
        assert!(pass(&both, "ANSWER: A, C"));
        assert!(pass(&both, "ANSWER: C and A"));
        assert!(!pass(&both, "ANSWER: A"), "one of two");
        assert!(!pass(&both, "ANSWER: A, B, C"), "one too many");
        // Letters run together, as Inspect reads a target string.
        assert!(pass(&case(serde_json::json!({"output": "AC"}), Some(CITIES)), "ANSWER: AC"));
        // The text of a choice names its letter; a lower-case letter is its capital.
        assert!(pass(&case(serde_json::json!({"output": "Rome"}), Some(CITIES)), "ANSWER: C"));
        assert!(pass(&case(serde_json::json!({"output": "b"}), Some(CITIES)), "ANSWER: B"));
    }

    #[test]
    fn a_case_the_grader_cannot_grade_is_a_config_error() {
        let no_choices = case(serde_json::json!({"output": "A"}), None);
        let err = grade(KIND, &no_choices, &Value::String("ANSWER: A".into())).unwrap_err();
        assert_eq!(err.kind, "config");
        assert!(err.message.starts_with("case `q`: grader `choice`: the case offers no choices"), "{}", err.message);
        let unknown = case(serde_json::json!({"output": "Madrid"}), Some(CITIES));
        let err = grade(KIND, &unknown, &Value::String("ANSWER: A".into())).unwrap_err();
        assert_eq!(
            err.message,
            "case `q`: grader `choice`: `expected.output` `Madrid` names none of the 3 choices: give the letter of \
             the right choice (A, B, C), a list of letters, or the text of a choice"
        );
        let out_of_range = case(serde_json::json!({"output": "D"}), Some(CITIES));
        assert!(grade(KIND, &out_of_range, &Value::String("ANSWER: D".into())).is_err());
        let nothing = case(serde_json::json!({}), Some(CITIES));
        assert!(grade(KIND, &nothing, &Value::String("ANSWER: A".into())).is_err());
    }
}
