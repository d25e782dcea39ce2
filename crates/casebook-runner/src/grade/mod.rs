//! Graders (SPEC §8): what an experiment file says about each ([`GraderSpec`]), checked once
//! ([`GraderSpec::build`]) into a [`Grader`] that scores one run of one case.
//!
//! A grader's verdict is a [`Grade`] (score 0..1, pass, rationale). A grader that cannot give
//! one — an expectation it needs is missing, the judge is down, the custom program crashed —
//! returns a [`Failure`], never a score of 0: reports count errors apart from failed cases.
//!
//! The kinds, by file:
//! - [`answer`]: `exact_match`, `contains`, `regex_match`, `numeric`, `one_of`, `similarity`,
//!   and (with [`json`]) `json_match`: the output against `expected.output`;
//! - [`trajectory`]: `tool_called`, `tool_call_count`, `max_tool_calls`, `tool_order`: the
//!   run's tool calls against the options or `expected.tool_calls`; `tool_called_with`,
//!   `call_order` (calls by their arguments, matched as the snapshot matches them) and
//!   `max_outside_calls` (calls the snapshot did not answer);
//! - [`choice`]: `choice`, the answer to a multiple-choice question against the right choices,
//!   read as Inspect reads it;
//! - [`per_turn`]: one answer grader applied to every turn against `expected.per_turn`
//!   (answer graders do this by themselves on a case that only has `expected.per_turn`);
//! - [`judge`]: `llm_judge`, a rubric prompt sent to a chat-completions endpoint;
//! - [`command`]: a custom program speaking JSON on stdin/stdout;
//! - [`asserts`]: the checks a case carries itself (promptfoo asserts), mapped onto the above.

mod answer;
pub mod asserts;
mod choice;
pub use choice::several_right;
mod command;
mod json;
mod judge;
mod per_turn;
mod spec;
mod trajectory;

use casebook_model::{Case, Map};
use serde_json::Value;

pub use judge::DEFAULT_JUDGE_TEMPLATE;
pub use spec::{
    ApiKey, Before, CallOrderOptions, CallSpec, ChoiceOptions, CommandOptions, ContainsOptions, GraderOptions,
    GraderSpec, JsonMatchOptions, JsonMode, LlmJudgeOptions, MaxOutsideCallsOptions, MaxToolCallsOptions,
    NumericOptions, PerTurnOptions, RegexMatchOptions, SimilarityOptions, TextMatchOptions, ToolCallCountOptions,
    ToolCalledOptions, ToolCalledWithOptions, ToolOrderOptions,
};

use crate::record::{Failure, Grade, RunOutput};

/// A grader ready to score runs: its options checked, its regex compiled, its judge template
/// parsed. Built by [`GraderSpec::build`].
#[derive(Debug)]
pub struct Grader {
    name: String,
    kind: &'static str,
    weight: f64,
    check: Check,
}

#[derive(Debug)]
enum Check {
    Answer(answer::AnswerGrader),
    Trajectory(trajectory::TrajectoryGrader),
    PerTurn(answer::AnswerGrader),
    Choice,
    Judge(Box<judge::Judge>),
    Command(command::CommandGrader),
}

impl Grader {
    /// The grader's name in the experiment: its kind unless named.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The grader's kind (`exact_match`, `llm_judge`, …).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// How much the grade counts in the run's weighted mean (≥ 0).
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// Whether grading is work on this machine's CPU only: no judge to ask, no command to start.
    pub fn is_local(&self) -> bool {
        !matches!(self.check, Check::Judge(_) | Check::Command(_))
    }

    /// Grades one run of `case`. `Err` when no verdict could be had (see the module docs).
    pub async fn grade(&self, case: &Case, run: &RunOutput) -> Result<Grade, Failure> {
        let name = self.name.as_str();
        match &self.check {
            // A case with one expectation per turn and none for the whole (letta's list
            // `ground_truth`) is graded turn by turn, as letta does.
            Check::Answer(grader)
                if case.expected.output.is_none()
                    && case.expected.acceptable.is_none()
                    && case.expected.per_turn.is_some() =>
            {
                per_turn::grade(grader, name, case, run)
            }
            Check::Answer(grader) => grader.grade(&answer::Answer {
                grader: name,
                case_id: &case.id,
                expected: case.expected.output.as_ref(),
                acceptable: case.expected.acceptable.as_deref().unwrap_or_default(),
                output: &run.output,
            }),
            Check::Trajectory(grader) => grader.grade(name, case, run),
            Check::PerTurn(grader) => per_turn::grade(grader, name, case, run),
            Check::Choice => choice::grade(name, case, &run.output),
            Check::Judge(judge) => judge.grade(case, run).await,
            Check::Command(command) => command.grade(case, run).await,
        }
    }
}

/// The error for a case that lacks an expectation the grader needs.
fn missing(case_id: &str, grader: &str, field: &str) -> Failure {
    Failure::new("config", format!("case `{case_id}`: grader `{grader}` needs `{field}`, which the case does not have"))
}

/// A verdict that is all or nothing.
fn verdict(pass: bool, rationale: impl Into<String>) -> Grade {
    Grade { score: if pass { 1.0 } else { 0.0 }, pass, rationale: rationale.into() }
}

/// A value as text: a string as itself, `null` as nothing, anything else as compact JSON.
fn text_of(value: &Value) -> std::borrow::Cow<'_, str> {
    match value {
        Value::String(text) => text.into(),
        Value::Null => "".into(),
        other => other.to_string().into(),
    }
}

/// How much of a value a rationale quotes: short enough that a rationale quoting two values
/// ("expected `…`, got `…`") stays whole in the reports, which show 160 characters of it.
const QUOTE: usize = 60;

/// A value for a rationale or an error message: in backticks, cut to a readable length.
fn show(value: &Value) -> String {
    format!("`{}`", clip(&text_of(value), QUOTE))
}

/// The first `max` characters of `text`, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Reads a verdict object `{"score": 0..1, "pass": bool?, "rationale": "…"?}` as given by a
/// judge or a custom program. Without `score`, `pass` alone gives 1 or 0; without `pass`, the
/// score passes at `pass_score`. `Err` says what is wrong with the object.
fn read_verdict(object: &Map, pass_score: f64) -> Result<Grade, String> {
    let score = match object.get("score") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(other) => return Err(format!("`score` must be a number, not {}", show(other))),
    };
    let pass = match object.get("pass") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(pass)) => Some(*pass),
        Some(other) => return Err(format!("`pass` must be true or false, not {}", show(other))),
    };
    let score = match (score, pass) {
        (Some(score), _) => score,
        (None, Some(pass)) => f64::from(u8::from(pass)),
        (None, None) => return Err("the verdict has no `score`".to_owned()),
    };
    if !(0.0..=1.0).contains(&score) {
        return Err(format!("score {score} is outside 0..1"));
    }
    let rationale = match object.get("rationale") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    };
    Ok(Grade { score, pass: pass.unwrap_or(score >= pass_score), rationale })
}

/// An error and its sources, one after the other (reqwest and io errors hide the cause there).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map {
        match value {
            Value::Object(map) => map,
            _ => unreachable!("tests pass objects"),
        }
    }

    #[test]
    fn an_answer_grader_grades_per_turn_a_case_with_only_per_turn_expectations() {
        let grader: Grader =
            serde_json::from_value::<GraderSpec>(json!({"kind": "contains"})).unwrap().build().unwrap();
        let case: Case = serde_json::from_value(json!({
            "id": "m", "input": "q1", "turns": [{"role": "user", "content": "q2"}],
            "expected": {"per_turn": ["Paris", "Berlin"]}
        }))
        .unwrap();
        let run = |turns: [&str; 2]| RunOutput {
            output: json!(turns[1]),
            per_turn: turns.iter().map(|t| json!(t)).collect(),
            ..RunOutput::default()
        };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let grade = runtime.block_on(grader.grade(&case, &run(["Paris!", "Rome"]))).unwrap();
        assert_eq!((grade.score, grade.pass), (0.5, false));
        assert!(grade.rationale.starts_with("1 of 2 turns pass"), "{}", grade.rationale);
        let grade = runtime.block_on(grader.grade(&case, &run(["in Paris", "Berlin"]))).unwrap();
        assert_eq!((grade.score, grade.pass), (1.0, true));
    }

    #[test]
    fn verdict_reads_score_pass_and_rationale() {
        let grade = read_verdict(&object(json!({"score": 0.7, "rationale": "mostly"})), 0.5).unwrap();
        assert_eq!(grade, Grade { score: 0.7, pass: true, rationale: "mostly".into() });
        let grade = read_verdict(&object(json!({"score": 0.7})), 0.8).unwrap();
        assert!(!grade.pass, "below pass_score");
        let grade = read_verdict(&object(json!({"score": 0.9, "pass": false})), 0.5).unwrap();
        assert!(!grade.pass, "an explicit pass wins over the threshold");
        let grade = read_verdict(&object(json!({"pass": true})), 0.5).unwrap();
        assert_eq!((grade.score, grade.pass), (1.0, true));
    }

    #[test]
    fn verdict_without_a_usable_score_is_an_error() {
        assert_eq!(read_verdict(&object(json!({"rationale": "?"})), 0.5).unwrap_err(), "the verdict has no `score`");
        assert_eq!(read_verdict(&object(json!({"score": 7})), 0.5).unwrap_err(), "score 7 is outside 0..1");
        assert!(read_verdict(&object(json!({"score": "high"})), 0.5).unwrap_err().contains("must be a number"));
    }

    #[test]
    fn clip_cuts_on_characters() {
        assert_eq!(clip("héllo wörld", 4), "héll…");
        assert_eq!(clip("short", 10), "short");
    }

    #[test]
    fn graders_can_be_shared_between_tasks() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Grader>();
    }
}
