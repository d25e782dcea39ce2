//! What one run produced and how it was graded: the records the runner stores, reports and
//! re-grades.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
}

impl RunOutput {
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

/// One grader's part in a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraderResult {
    /// The grader's name in the experiment (its kind unless named).
    pub grader: String,
    pub weight: f64,
    /// The verdict, or why there is none.
    pub outcome: Result<Grade, Failure>,
}

/// One run of one case in one scenario: what reports, caches and comparisons work from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub case_id: String,
    /// Content id of the case as run.
    pub case_content_id: String,
    pub labels: Vec<String>,
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
}

impl RunResult {
    /// The first failure of the run or of its graders: a result with one is an error, not a
    /// failed case.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.output {
            Err(failure) => Some(failure),
            Ok(_) => self.grades.iter().find_map(|g| g.outcome.as_ref().err()),
        }
    }
}

impl RunResult {
    /// Takes the agent's output out of the result, leaving what reports need (its timing): the
    /// output is kept once, by run hash, and a result stays small in memory and in the store.
    pub fn take_output(&mut self) -> Option<RunOutput> {
        let Ok(output) = &mut self.output else { return None };
        let millis = output.millis;
        Some(std::mem::replace(output, RunOutput { millis, ..RunOutput::default() }))
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
