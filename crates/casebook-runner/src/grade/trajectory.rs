//! The trajectory graders: the run's tool calls (in the order the agent made them) against the
//! grader's options (`tool`, `min`, `max`, `names`), or, when they are absent, against the case's
//! `expected.tool_calls`.
//!
//! The shapes of `expected.tool_calls` each grader reads:
//! - a tool name, `"search"`: `tool_called` (it was called), `tool_order` (trivially);
//! - a list of tool names or of objects with a `name` (`["search", {"name": "fetch", …}]`):
//!   `tool_called` (every one was called; the score is the share that was), `tool_order` (they
//!   were called in this order, other calls allowed between);
//! - an object, whose keys each grader reads (other keys are ignored):
//!   `called` (a name or list, for `tool_called`), `order` (a list, for `tool_order`),
//!   `name`/`min`/`max` (for `tool_call_count`: calls of `name`, or of all tools without it),
//!   `max_calls`, or `max` when there is no `name` (for `max_tool_calls`).
//!
//! Any other shape is a `config` error naming the case and `expected.tool_calls`.

use casebook_model::Case;
use serde_json::Value;

use super::{missing, verdict};
use crate::record::{Failure, Grade, RunOutput};

#[derive(Debug)]
pub(super) enum TrajectoryGrader {
    /// `tool_called`: the tool of the options, or those of the case.
    Called(Option<String>),
    /// `tool_call_count`: the bounds of the options, or those of the case.
    Count(Option<CountBounds>),
    /// `max_tool_calls`.
    Max(Option<u64>),
    /// `tool_order`.
    Order(Option<Vec<String>>),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct CountBounds {
    pub name: Option<String>,
    pub min: Option<u64>,
    pub max: Option<u64>,
}

const FIELD: &str = "expected.tool_calls";

impl TrajectoryGrader {
    pub(super) fn grade(&self, grader: &str, case: &Case, run: &RunOutput) -> Result<Grade, Failure> {
        let calls: Vec<&str> = run.tool_calls().map(|(name, _)| name).collect();
        let expected = || case.expected.tool_calls.as_ref().ok_or_else(|| missing(&case.id, grader, FIELD));
        let unreadable = |wanted: &str| {
            Failure::new(
                "config",
                format!("case `{}`: grader `{grader}` cannot read `{FIELD}`: it needs {wanted}", case.id),
            )
        };
        match self {
            TrajectoryGrader::Called(name) => {
                let names = match name {
                    Some(name) => vec![name.clone()],
                    None => {
                        let value = expected()?;
                        let listed = match value {
                            Value::Object(object) => object.get("called").and_then(names),
                            other => names(other),
                        };
                        listed.filter(|n| !n.is_empty()).ok_or_else(|| {
                            unreadable("a tool name, a non-empty list of tool names, or an object with `called`")
                        })?
                    }
                };
                Ok(called(&names, &calls))
            }
            TrajectoryGrader::Count(bounds) => {
                let bounds = match bounds {
                    Some(bounds) => bounds.clone(),
                    None => expected_bounds(expected()?)
                        .ok_or_else(|| unreadable("an object with `min` or `max` (and `name` for one tool)"))?,
                };
                Ok(count(&bounds, &calls))
            }
            TrajectoryGrader::Max(max) => {
                let max = match max {
                    Some(max) => *max,
                    None => expected_max(expected()?)
                        .ok_or_else(|| unreadable("an object with `max_calls` (or `max` without `name`)"))?,
                };
                let n = calls.len();
                Ok(if n as u64 <= max {
                    verdict(true, format!("{n} tool calls, at most {max} allowed"))
                } else {
                    verdict(false, format!("{n} tool calls, more than the {max} allowed"))
                })
            }
            TrajectoryGrader::Order(order) => {
                let names = match order {
                    Some(names) => names.clone(),
                    None => {
                        let value = expected()?;
                        let listed = match value {
                            Value::Object(object) => object.get("order").and_then(names),
                            other => names(other),
                        };
                        listed.filter(|n| !n.is_empty()).ok_or_else(|| {
                            unreadable("a tool name, a non-empty list of tool names, or an object with `order`")
                        })?
                    }
                };
                Ok(in_order(&names, &calls))
            }
        }
    }
}

/// Tool names from a name, or a list of names or of objects with a `name`.
fn names(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::String(name) => Some(vec![name.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(name) => Some(name.clone()),
                Value::Object(object) => object.get("name").and_then(Value::as_str).map(str::to_owned),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn expected_bounds(value: &Value) -> Option<CountBounds> {
    let object = value.as_object()?;
    let bound = |key: &str| object.get(key).and_then(Value::as_u64);
    let name = match object.get("name") {
        None => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(_) => return None,
    };
    let bounds = CountBounds { name, min: bound("min"), max: bound("max") };
    (bounds.min.is_some() || bounds.max.is_some()).then_some(bounds)
}

fn expected_max(value: &Value) -> Option<u64> {
    let object = value.as_object()?;
    object.get("max_calls").and_then(Value::as_u64).or_else(|| match object.get("name") {
        None => object.get("max").and_then(Value::as_u64),
        Some(_) => None,
    })
}

fn called(names: &[String], calls: &[&str]) -> Grade {
    let absent: Vec<&String> = names.iter().filter(|name| !calls.contains(&name.as_str())).collect();
    let score = 1.0 - absent.len() as f64 / names.len() as f64;
    let rationale = if absent.is_empty() {
        format!("called {}", quoted(names))
    } else {
        format!("never called {}; the calls were {}", quoted(&absent), quoted(calls))
    };
    Grade { score, pass: absent.is_empty(), rationale }
}

fn count(bounds: &CountBounds, calls: &[&str]) -> Grade {
    let n = match &bounds.name {
        Some(name) => calls.iter().filter(|call| **call == name.as_str()).count(),
        None => calls.len(),
    } as u64;
    let what = match &bounds.name {
        Some(name) => format!("calls of `{name}`"),
        None => "tool calls".to_owned(),
    };
    let wanted = match (bounds.min, bounds.max) {
        (Some(min), Some(max)) => format!("between {min} and {max}"),
        (Some(min), None) => format!("at least {min}"),
        (None, Some(max)) => format!("at most {max}"),
        (None, None) => "any number".to_owned(),
    };
    let pass = bounds.min.is_none_or(|min| n >= min) && bounds.max.is_none_or(|max| n <= max);
    verdict(pass, format!("{n} {what}, expected {wanted}"))
}

/// Whether `names` is a subsequence of `calls`; the score is the share of `names` (from the
/// start) found in order.
fn in_order(names: &[String], calls: &[&str]) -> Grade {
    let mut rest = calls.iter();
    let found = names.iter().take_while(|name| rest.any(|call| *call == name.as_str())).count();
    let score = found as f64 / names.len() as f64;
    let rationale = match names.get(found) {
        None => format!("called {} in order", quoted(names)),
        Some(next) if found == 0 => format!("`{next}` was never called; the calls were {}", quoted(calls)),
        Some(next) => format!("`{next}` was not called after `{}`; the calls were {}", names[found - 1], quoted(calls)),
    };
    Grade { score, pass: found == names.len(), rationale }
}

/// Names in backticks, comma-separated; "none" for none; cut after 20.
fn quoted(names: &[impl AsRef<str>]) -> String {
    if names.is_empty() {
        return "none".to_owned();
    }
    let mut text = names.iter().take(20).map(|name| format!("`{}`", name.as_ref())).collect::<Vec<_>>().join(", ");
    if names.len() > 20 {
        text.push_str(&format!(" and {} more", names.len() - 20));
    }
    text
}

#[cfg(test)]
mod tests {
    use casebook_model::{Expectations, Task};
    use serde_json::json;

    use super::*;
    use crate::protocol::{Speaker, Step};

    fn case(tool_calls: Option<Value>) -> Case {
        Case {
            id: "c1".into(),
            name: None,
            description: None,
            labels: None,
            task: Task::new(json!("go")),
            expected: Expectations { tool_calls, ..Expectations::default() },
            metadata: None,
            confidence: None,
            review: None,
            provenance: None,
        }
    }

    fn run(tools: &[&str]) -> RunOutput {
        let mut trajectory = vec![Step::Message { role: Speaker::User, content: json!("go"), operator: false }];
        trajectory.extend(tools.iter().map(|name| Step::ToolCall {
            name: (*name).to_owned(),
            arguments: json!({}),
            result: None,
            served: None,
        }));
        RunOutput { output: json!("done"), trajectory, ..RunOutput::default() }
    }

    fn grade(grader: &TrajectoryGrader, expected: Option<Value>, tools: &[&str]) -> Result<Grade, Failure> {
        grader.grade("t", &case(expected), &run(tools))
    }

    #[test]
    fn tool_called_by_option() {
        let grader = TrajectoryGrader::Called(Some("search".into()));
        assert!(grade(&grader, None, &["fetch", "search"]).unwrap().pass);
        let miss = grade(&grader, None, &["fetch"]).unwrap();
        assert_eq!((miss.pass, miss.score), (false, 0.0));
        assert_eq!(miss.rationale, "never called `search`; the calls were `fetch`");
    }

    #[test]
    fn tool_called_from_expectations() {
        let grader = TrajectoryGrader::Called(None);
        assert!(grade(&grader, Some(json!("search")), &["search"]).unwrap().pass);
        let partial = grade(&grader, Some(json!(["search", {"name": "fetch", "arguments": {}}])), &["search"]).unwrap();
        assert_eq!((partial.pass, partial.score), (false, 0.5));
        assert!(grade(&grader, Some(json!({"called": ["a", "b"], "max": 4})), &["b", "a"]).unwrap().pass);
    }

    #[test]
    fn missing_or_unreadable_expectations_are_config_errors() {
        let grader = TrajectoryGrader::Called(None);
        let err = grade(&grader, None, &["search"]).unwrap_err();
        assert_eq!(err.kind, "config");
        assert_eq!(err.message, "case `c1`: grader `t` needs `expected.tool_calls`, which the case does not have");
        let err = grade(&grader, Some(json!({"order": ["a"]})), &["a"]).unwrap_err();
        assert!(err.message.contains("cannot read `expected.tool_calls`"), "{}", err.message);
        let err = grade(&TrajectoryGrader::Count(None), Some(json!(["a"])), &["a"]).unwrap_err();
        assert!(err.message.contains("`min` or `max`"), "{}", err.message);
        let err = grade(&TrajectoryGrader::Max(None), Some(json!({"name": "a", "max": 1})), &[]).unwrap_err();
        assert!(err.message.contains("`max_calls`"), "a per-tool bound is not a total: {}", err.message);
    }

    #[test]
    fn tool_call_count_counts_one_tool_or_all() {
        let bounds = |name: Option<&str>, min, max| {
            TrajectoryGrader::Count(Some(CountBounds { name: name.map(str::to_owned), min, max }))
        };
        let tools = ["search", "fetch", "search"];
        assert!(grade(&bounds(Some("search"), Some(2), Some(2)), None, &tools).unwrap().pass);
        let over = grade(&bounds(Some("search"), None, Some(1)), None, &tools).unwrap();
        assert_eq!((over.pass, over.rationale.as_str()), (false, "2 calls of `search`, expected at most 1"));
        assert!(!grade(&bounds(None, Some(4), None), None, &tools).unwrap().pass);
        let from_case = TrajectoryGrader::Count(None);
        assert!(grade(&from_case, Some(json!({"name": "fetch", "min": 1})), &tools).unwrap().pass);
        assert!(!grade(&from_case, Some(json!({"max": 2})), &tools).unwrap().pass);
    }

    #[test]
    fn max_tool_calls_bounds_all_calls() {
        let grader = TrajectoryGrader::Max(Some(2));
        assert!(grade(&grader, None, &["a", "b"]).unwrap().pass);
        assert!(grade(&grader, None, &[]).unwrap().pass);
        let over = grade(&grader, None, &["a", "b", "a"]).unwrap();
        assert_eq!((over.pass, over.rationale.as_str()), (false, "3 tool calls, more than the 2 allowed"));
        assert!(grade(&TrajectoryGrader::Max(None), Some(json!({"max_calls": 5})), &["a"]).unwrap().pass);
        assert!(!grade(&TrajectoryGrader::Max(None), Some(json!({"max": 0})), &["a"]).unwrap().pass);
    }

    #[test]
    fn tool_order_is_a_subsequence() {
        let grader = TrajectoryGrader::Order(Some(vec!["metrics".into(), "logs".into(), "restart".into()]));
        assert!(grade(&grader, None, &["metrics", "other", "logs", "metrics", "restart"]).unwrap().pass);
        let wrong = grade(&grader, None, &["logs", "metrics", "restart"]).unwrap();
        assert!(!wrong.pass);
        assert!((wrong.score - 1.0 / 3.0).abs() < 1e-12, "only `metrics` came in order: {wrong:?}");
        assert_eq!(
            wrong.rationale,
            "`logs` was not called after `metrics`; the calls were `logs`, `metrics`, `restart`"
        );
        let none = grade(&grader, None, &[]).unwrap();
        assert_eq!((none.score, none.rationale.as_str()), (0.0, "`metrics` was never called; the calls were none"));
        let from_case = TrajectoryGrader::Order(None);
        assert!(grade(&from_case, Some(json!({"order": ["a", "b"]})), &["a", "x", "b"]).unwrap().pass);
        assert!(!grade(&from_case, Some(json!([{"name": "b"}, {"name": "a"}])), &["a", "b"]).unwrap().pass);
    }
}
