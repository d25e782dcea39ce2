//! `per_turn`: an answer grader applied to each turn's output against the same turn of
//! `expected.per_turn`. The score is the mean of the turns' scores; the case passes when every
//! turn does.

use casebook_model::Case;

use super::answer::{Answer, AnswerGrader};
use super::missing;
use crate::record::{Failure, Grade, RunOutput};

pub(super) fn grade(inner: &AnswerGrader, grader: &str, case: &Case, run: &RunOutput) -> Result<Grade, Failure> {
    let expected = case.expected.per_turn.as_deref().ok_or_else(|| missing(&case.id, grader, "expected.per_turn"))?;
    if expected.len() != run.per_turn.len() {
        return Err(Failure::new(
            "config",
            format!(
                "case `{}`: grader `{grader}`: the run has {} turn outputs but `expected.per_turn` has {} items",
                case.id,
                run.per_turn.len(),
                expected.len()
            ),
        ));
    }
    if expected.is_empty() {
        return Err(Failure::new(
            "config",
            format!("case `{}`: grader `{grader}`: `expected.per_turn` is empty", case.id),
        ));
    }
    let total = expected.len();
    let mut sum = 0.0;
    let mut failed = Vec::new();
    for (index, (output, want)) in run.per_turn.iter().zip(expected).enumerate() {
        let turn = index + 1;
        // Null is how a source marks a turn without an expectation: the inner grader reports it.
        let answer = Answer {
            grader,
            case_id: &case.id,
            expected: Some(want).filter(|v| !v.is_null()),
            acceptable: &[],
            output,
        };
        let grade = inner
            .grade(&answer)
            .map_err(|f| Failure::new(&f.kind, format!("turn {turn} of {total}: {}", f.message)))?;
        sum += grade.score;
        if !grade.pass {
            failed.push(format!("turn {turn}: {}", grade.rationale));
        }
    }
    let passed = total - failed.len();
    let mut rationale = format!("{passed} of {total} turns pass");
    if !failed.is_empty() {
        rationale.push_str("; ");
        rationale.push_str(&failed.join("; "));
    }
    Ok(Grade { score: sum / total as f64, pass: failed.is_empty(), rationale })
}

#[cfg(test)]
mod tests {
    use casebook_model::{Expectations, Task};
    use serde_json::{Value, json};

    use super::*;
    use crate::grade::answer::TextMatch;

    fn case(per_turn: Option<Vec<Value>>) -> Case {
        Case {
            id: "multi".into(),
            name: None,
            description: None,
            labels: None,
            task: Task::new(json!("hi")),
            expected: Expectations { per_turn, output: Some(json!("ignored")), ..Expectations::default() },
            metadata: None,
            confidence: None,
            review: None,
            provenance: None,
        }
    }

    fn run(turns: &[&str]) -> RunOutput {
        let per_turn: Vec<Value> = turns.iter().map(|t| json!(t)).collect();
        RunOutput { output: per_turn.last().cloned().unwrap_or_default(), per_turn, ..RunOutput::default() }
    }

    const EXACT: AnswerGrader = AnswerGrader::ExactMatch(TextMatch { ignore_case: true, trim: true });

    #[test]
    fn every_turn_is_graded_against_its_own_expectation() {
        let grade = grade(&EXACT, "pt", &case(Some(vec![json!("Hello"), json!("4")])), &run(&["hello", "4"])).unwrap();
        assert_eq!(grade, Grade { score: 1.0, pass: true, rationale: "2 of 2 turns pass".into() });
    }

    #[test]
    fn score_is_the_mean_and_pass_needs_all_turns() {
        let expected = vec![json!("a"), json!("b"), json!("c"), json!("d")];
        let grade = grade(&EXACT, "pt", &case(Some(expected)), &run(&["a", "x", "c", "d"])).unwrap();
        assert_eq!((grade.score, grade.pass), (0.75, false));
        assert_eq!(grade.rationale, "3 of 4 turns pass; turn 2: expected `b`, got `x`");
    }

    #[test]
    fn a_length_mismatch_is_a_config_error() {
        let err = grade(&EXACT, "pt", &case(Some(vec![json!("a"), json!("b")])), &run(&["a"])).unwrap_err();
        assert_eq!(err.kind, "config");
        assert_eq!(
            err.message,
            "case `multi`: grader `pt`: the run has 1 turn outputs but `expected.per_turn` has 2 items"
        );
    }

    #[test]
    fn missing_expectations_are_config_errors() {
        let err = grade(&EXACT, "pt", &case(None), &run(&["a"])).unwrap_err();
        assert_eq!(err.message, "case `multi`: grader `pt` needs `expected.per_turn`, which the case does not have");
        let err = grade(&EXACT, "pt", &case(Some(vec![json!("a"), Value::Null])), &run(&["a", "b"])).unwrap_err();
        assert_eq!(err.kind, "config");
        assert!(err.message.starts_with("turn 2 of 2: case `multi`: grader `pt` needs"), "{}", err.message);
    }
}
