//! What one run produced and how it was graded: the records the runner stores, reports and
//! re-grades.

use casebook_model::Review;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::noise::NoiseAdded;
use crate::protocol::Step;

/// The outcome of running one case once: the agent's output for each turn, the whole
/// trajectory (the messages sent, with operator turns marked, and the agent's steps), or the
/// error that stopped it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunOutput {
    /// The last turn's output: what single-answer graders look at.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub output: Value,
    /// Every turn's output, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_turn: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trajectory: Vec<Step>,
    /// Wall time of the run, milliseconds.
    pub millis: u64,
    /// Tool calls casebook answered from the case's world snapshot.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub served_calls: u32,
    /// Of those, the calls asked outside the snapshot (no recorded answer and no default, or a
    /// tool the case does not have).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unmatched_calls: u32,
    /// Why the run stopped before the agent answered (`max-steps`: it was still calling tools
    /// when the turn's steps ran out). Such a run is an error, not a pass; its trajectory shows
    /// what the agent was doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished: Option<Failure>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RunOutput {
    /// Counts the calls of the trajectory that casebook served ([`RunOutput::served_calls`],
    /// [`RunOutput::unmatched_calls`]).
    pub fn count_served_calls(&mut self) {
        let (mut served, mut outside) = (0, 0);
        for step in &self.trajectory {
            if let Step::ToolCall { served: Some(how), .. } = step {
                served += 1;
                outside += u32::from(how.how.is_outside());
            }
        }
        (self.served_calls, self.unmatched_calls) = (served, outside);
    }

    /// The tool calls of the trajectory, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.trajectory.iter().filter_map(|step| match step {
            Step::ToolCall { name, arguments, .. } => Some((name.as_str(), arguments)),
            _ => None,
        })
    }
}

/// A grader's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grade {
    /// 0..1.
    pub score: f64,
    pub pass: bool,
    pub rationale: String,
}

/// Why a grade or a run could not be had. Never a score of 0: reports count these apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct Failure {
    /// `timeout`, `http`, `protocol`, `process`, `config`, `judge`…: what reports group by.
    pub kind: String,
    pub message: String,
}

impl Failure {
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        Self { kind: kind.to_owned(), message: message.into() }
    }
}

/// One grader's part in a result. As JSON: `{"grader", "weight", "score", "pass", "rationale"}`,
/// or `{"grader", "weight", "error": {"kind", "message"}}` when there is no verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct GraderResult {
    /// The grader's name in the experiment (its kind unless named).
    pub grader: String,
    pub weight: f64,
    /// The verdict, or why there is none.
    pub outcome: Result<Grade, Failure>,
}

/// One run of one case in one scenario: what reports, caches and comparisons work from.
///
/// As JSON (the JSONL report, and the store): the agent's side is `"output"` or `"error"`;
/// empty labels and grades, and an absent review, confidence, score or verdict, are left out
/// (so results stored before `review` and `confidence` were kept read back as they were).
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub case_id: String,
    /// The case's 0-based row in the dataset file (see `Provenance::row`), to join results
    /// with those of the system the file comes from.
    pub row: Option<u64>,
    /// Content id of the case as run.
    pub case_content_id: String,
    pub labels: Vec<String>,
    /// The case's review state, if it has one (results stored before it was kept have none).
    pub review: Option<Review>,
    /// How much the case's label is trusted, 0..1, if it says.
    pub confidence: Option<f64>,
    pub scenario: String,
    /// 0-based, below the experiment's `n_runs`.
    pub run: u32,
    /// The run hash (SPEC §8): what the cache is keyed by.
    pub hash: String,
    /// The agent's side, or why it failed (then there are no grades).
    pub output: Result<RunOutput, Failure>,
    pub grades: Vec<GraderResult>,
    /// Weighted mean of the grades; `None` when the run or a grader failed.
    pub score: Option<f64>,
    /// `score >= threshold`; `None` when there is no score.
    pub pass: Option<bool>,
    /// The noise items the run's task was widened with (see [`crate::noise`]); empty without
    /// noise, and then left out of the JSON (results stored before noise existed read as such).
    pub noise: Vec<NoiseAdded>,
}

impl RunResult {
    /// The first failure of the run or of its graders: a result with one is an error, not a
    /// failed case.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.output {
            Err(failure) => Some(failure),
            Ok(RunOutput { unfinished: Some(failure), .. }) => Some(failure),
            Ok(_) => self.grades.iter().find_map(|g| g.outcome.as_ref().err()),
        }
    }
}

impl RunResult {
    /// Takes the agent's output out of the result, leaving what reports need (its timing, its
    /// counts of served calls, why it did not finish): the output is kept once, by run hash, and
    /// a result stays small in memory and in the store.
    pub fn take_output(&mut self) -> Option<RunOutput> {
        let Ok(output) = &mut self.output else { return None };
        let kept = RunOutput {
            millis: output.millis,
            served_calls: output.served_calls,
            unmatched_calls: output.unmatched_calls,
            unfinished: output.unfinished.clone(),
            ..RunOutput::default()
        };
        Some(std::mem::replace(output, kept))
    }
}

impl RunResult {
    /// The result as summaries and reports need it, smaller: no content id or run hash, no
    /// rationale for a passing grade, others cut to `keep` characters. (The store and the JSONL
    /// report keep the whole result.)
    pub fn slim(&mut self, keep: usize) {
        self.case_content_id = String::new();
        self.hash = String::new();
        for grade in &mut self.grades {
            if let Ok(g) = &mut grade.outcome {
                if g.pass {
                    g.rationale = String::new();
                } else if g.rationale.chars().count() > keep {
                    g.rationale = g.rationale.chars().take(keep).chain(std::iter::once('…')).collect();
                }
            }
        }
    }
}

/// [`GraderResult`] as written.
#[derive(Serialize)]
struct GraderResultOut<'a> {
    grader: &'a str,
    weight: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pass: Option<bool>,
    #[serde(skip_serializing_if = "str::is_empty")]
    rationale: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a Failure>,
}

/// [`GraderResult`] as read.
#[derive(Deserialize)]
struct GraderResultIn {
    grader: String,
    weight: f64,
    #[serde(default)]
    score: Option<f64>,
    #[serde(default)]
    pass: Option<bool>,
    #[serde(default)]
    rationale: String,
    #[serde(default)]
    error: Option<Failure>,
}

impl Serialize for GraderResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (grade, error) = match &self.outcome {
            Ok(grade) => (Some(grade), None),
            Err(failure) => (None, Some(failure)),
        };
        GraderResultOut {
            grader: &self.grader,
            weight: self.weight,
            score: grade.map(|g| g.score),
            pass: grade.map(|g| g.pass),
            rationale: grade.map_or("", |g| g.rationale.as_str()),
            error,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for GraderResult {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let g = GraderResultIn::deserialize(deserializer)?;
        let outcome = match (g.error, g.score, g.pass) {
            (Some(failure), _, _) => Err(failure),
            (None, Some(score), Some(pass)) => Ok(Grade { score, pass, rationale: g.rationale }),
            _ => return Err(serde::de::Error::custom("a grade needs `score` and `pass`, or an `error`")),
        };
        Ok(GraderResult { grader: g.grader, weight: g.weight, outcome })
    }
}

/// [`RunResult`] as written.
#[derive(Serialize)]
struct RunResultOut<'a> {
    case_id: &'a str,
    case_content_id: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    labels: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    review: Option<Review>,
    #[serde(skip_serializing_if = "Option::is_none")]
    confidence: Option<f64>,
    scenario: &'a str,
    run: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    row: Option<u64>,
    hash: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a RunOutput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a Failure>,
    #[serde(skip_serializing_if = "<[GraderResult]>::is_empty")]
    grades: &'a [GraderResult],
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pass: Option<bool>,
    #[serde(skip_serializing_if = "<[NoiseAdded]>::is_empty")]
    noise: &'a [NoiseAdded],
}

/// [`RunResult`] as read.
#[derive(Deserialize)]
struct RunResultIn {
    case_id: String,
    case_content_id: String,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    review: Option<Review>,
    #[serde(default)]
    confidence: Option<f64>,
    scenario: String,
    run: u32,
    #[serde(default)]
    row: Option<u64>,
    hash: String,
    #[serde(default)]
    output: Option<RunOutput>,
    #[serde(default)]
    error: Option<Failure>,
    #[serde(default)]
    grades: Vec<GraderResult>,
    #[serde(default)]
    score: Option<f64>,
    #[serde(default)]
    pass: Option<bool>,
    #[serde(default)]
    noise: Vec<NoiseAdded>,
}

impl Serialize for RunResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RunResultOut {
            case_id: &self.case_id,
            case_content_id: &self.case_content_id,
            labels: &self.labels,
            review: self.review,
            confidence: self.confidence,
            scenario: &self.scenario,
            run: self.run,
            row: self.row,
            hash: &self.hash,
            output: self.output.as_ref().ok(),
            error: self.output.as_ref().err(),
            grades: &self.grades,
            score: self.score,
            pass: self.pass,
            noise: &self.noise,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RunResult {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let r = RunResultIn::deserialize(deserializer)?;
        let output = match (r.error, r.output) {
            (Some(failure), _) => Err(failure),
            (None, Some(output)) => Ok(output),
            (None, None) => return Err(serde::de::Error::custom("a result needs an `output` or an `error`")),
        };
        Ok(RunResult {
            case_id: r.case_id,
            case_content_id: r.case_content_id,
            labels: r.labels,
            review: r.review,
            confidence: r.confidence,
            scenario: r.scenario,
            run: r.run,
            row: r.row,
            hash: r.hash,
            output,
            grades: r.grades,
            score: r.score,
            pass: r.pass,
            noise: r.noise,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_written_when_there_is_some_and_old_results_read_without_it() {
        let old = r#"{"case_id":"a","case_content_id":"c","scenario":"s","run":0,"hash":"h","output":{"output":"x","millis":3}}"#;
        let result: RunResult = serde_json::from_str(old).unwrap();
        assert!(result.noise.is_empty());
        assert_eq!(serde_json::to_string(&result).unwrap(), old);
        let noisy = RunResult {
            noise: vec![
                NoiseAdded { at: 0, from_case: Some("c-7".into()), from_file: None, item: 2, tool: None },
                NoiseAdded { at: 3, from_case: None, from_file: Some("noise.yaml".into()), item: 4, tool: None },
            ],
            ..result
        };
        let text = serde_json::to_string(&noisy).unwrap();
        assert!(
            text.ends_with(
                r#""noise":[{"at":0,"from_case":"c-7","item":2},{"at":3,"from_file":"noise.yaml","item":4}]}"#
            ),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<RunResult>(&text).unwrap(), noisy);
    }
}
