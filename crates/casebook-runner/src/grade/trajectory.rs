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
//!
//! The graders of an investigation look at calls by their arguments too, matched as the case's
//! snapshot matches them ([`CallMatcher`], one definition for both):
//! - `tool_called_with`: a call of the tool whose arguments match, anywhere, before the final
//!   answer, or before the first call that matches another pattern;
//! - `call_order`: calls matching a list of patterns, in that order (others allowed between),
//!   from the options or from `expected.tool_calls` (names or `{name, arguments?, includes?,
//!   matches?}`, or an object with `order`);
//! - `max_outside_calls`: calls casebook served from outside the snapshot (`unmatched`, or of a
//!   tool the case does not have). It needs served calls: on a case whose tools have no recorded
//!   answers, or a run whose calls casebook did not serve, it is a `config` error, never a pass.
//!
//! Calls are named in rationales by their place among the run's calls (`call 2`), tool and
//! arguments.

use casebook_model::snapshot::CallMatcher;
use casebook_model::{Case, Tool};
use serde_json::Value;

use super::spec::CallSpec;
use super::{QUOTE, clip, missing, verdict};
use crate::protocol::{Serving, Speaker, Step};
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
    /// `tool_called_with`.
    CalledWith { call: Box<CallPattern>, before: Option<Until> },
    /// `max_outside_calls`.
    Outside(u64),
    /// `call_order`: the patterns of the options, or those of the case.
    CallOrder(Option<Vec<CallPattern>>),
}

/// What a `tool_called_with` call must come before.
#[derive(Debug)]
pub(super) enum Until {
    /// The run's final answer: its last assistant message.
    Answer,
    /// The first call that matches.
    Call(Box<CallPattern>),
}

/// A call to look for: a tool and a compiled `when`.
#[derive(Debug)]
pub(crate) struct CallPattern {
    tool: String,
    matcher: CallMatcher,
    /// How rationales name it.
    text: String,
}

impl CallPattern {
    /// Compiles `spec`; `Err` says what is wrong, with the place inside the call
    /// (`/matches/service`).
    pub(crate) fn build(spec: &CallSpec) -> Result<CallPattern, String> {
        if spec.tool.trim().is_empty() {
            return Err("`tool` is empty".to_owned());
        }
        let when = spec.when();
        let matcher = CallMatcher::compile(when).map_err(|errors| {
            errors.iter().map(|e| format!("{}: {}", e.pointer, e.message)).collect::<Vec<_>>().join("; ")
        })?;
        let mut text = format!("`{}`", spec.tool);
        let mut conditions = Vec::new();
        if let Some(arguments) = &spec.arguments {
            conditions.push(format!("arguments `{}`", clip(&arguments.to_string(), QUOTE)));
        }
        if let Some(includes) = &spec.includes {
            let object = Value::Object(includes.clone());
            conditions.push(format!("arguments including `{}`", clip(&object.to_string(), QUOTE)));
        }
        for (key, pattern) in spec.matches.iter().flatten() {
            conditions.push(format!("`{key}` matching `{}`", clip(pattern, QUOTE)));
        }
        if !conditions.is_empty() {
            text.push_str(" with ");
            text.push_str(&conditions.join(", "));
        }
        Ok(CallPattern { tool: spec.tool.clone(), matcher, text })
    }

    fn holds(&self, call: &Call<'_>) -> bool {
        call.name == self.tool && self.matcher.holds(call.arguments)
    }
}

/// A tool call of the run.
struct Call<'a> {
    /// 1-based among the run's calls.
    number: usize,
    /// Its place in the trajectory.
    step: usize,
    name: &'a str,
    arguments: &'a Value,
    served: Option<&'a Serving>,
}

impl Call<'_> {
    /// `call 2 `metrics_query {"metric":"cpu"}``.
    fn named(&self) -> String {
        format!("call {} `{} {}`", self.number, self.name, clip(&compact(self.arguments), QUOTE))
    }
}

fn compact(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn calls_of(run: &RunOutput) -> Vec<Call<'_>> {
    run.trajectory
        .iter()
        .enumerate()
        .filter_map(|(step, s)| match s {
            Step::ToolCall { name, arguments, served, .. } => Some((step, name, arguments, served.as_ref())),
            _ => None,
        })
        .enumerate()
        .map(|(i, (step, name, arguments, served))| Call { number: i + 1, step, name, arguments, served })
        .collect()
}

/// `n thing` or `n things`.
fn plural(n: usize, thing: &str) -> String {
    if n == 1 { format!("1 {thing}") } else { format!("{n} {thing}s") }
}

/// Calls named one after the other; "none" for none; cut after 10.
fn listed(calls: &[&Call<'_>]) -> String {
    if calls.is_empty() {
        return "none".to_owned();
    }
    let mut text = calls.iter().take(10).map(|c| c.named()).collect::<Vec<_>>().join(", ");
    if calls.len() > 10 {
        text.push_str(&format!(" and {} more", calls.len() - 10));
    }
    text
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
            TrajectoryGrader::CalledWith { call, before } => Ok(called_with(call, before.as_ref(), run)),
            TrajectoryGrader::Outside(max) => outside(*max, grader, case, run),
            TrajectoryGrader::CallOrder(steps) => {
                let built;
                let steps = match steps {
                    Some(steps) => steps,
                    None => {
                        let value = expected()?;
                        let listed = match value {
                            Value::Object(object) => object.get("order").and_then(call_specs),
                            other => call_specs(other),
                        };
                        let specs = listed.filter(|s| !s.is_empty()).ok_or_else(|| {
                            unreadable(
                                "a tool name, a non-empty list of tool names or of `{name, arguments?, includes?, \
                                 matches?}`, or an object with `order`",
                            )
                        })?;
                        built = specs
                            .iter()
                            .enumerate()
                            .map(|(i, spec)| {
                                CallPattern::build(spec).map_err(|e| {
                                    Failure::new(
                                        "config",
                                        format!("case `{}`: grader `{grader}`: `{FIELD}` step {i}: {e}", case.id),
                                    )
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        &built
                    }
                };
                Ok(calls_in_order(steps, run))
            }
        }
    }
}

/// Call patterns from a name, or a list of names or of `{name, arguments?, includes?, matches?}`.
fn call_specs(value: &Value) -> Option<Vec<CallSpec>> {
    let one = |item: &Value| match item {
        Value::String(name) => Some(CallSpec { tool: name.clone(), arguments: None, includes: None, matches: None }),
        // Other keys of an expected call (an `id`, a `result`) are not conditions: left out.
        Value::Object(object) => Some(CallSpec {
            tool: object.get("name")?.as_str()?.to_owned(),
            arguments: object.get("arguments").cloned(),
            includes: match object.get("includes") {
                None => None,
                Some(includes) => Some(includes.as_object()?.clone()),
            },
            matches: match object.get("matches") {
                None => None,
                Some(matches) => Some(serde_json::from_value(matches.clone()).ok()?),
            },
        }),
        _ => None,
    };
    match value {
        Value::Array(items) => items.iter().map(one).collect(),
        other => one(other).map(|spec| vec![spec]),
    }
}

fn called_with(call: &CallPattern, before: Option<&Until>, run: &RunOutput) -> Grade {
    let calls = calls_of(run);
    let all: Vec<&Call<'_>> = calls.iter().collect();
    let Some(first) = calls.iter().find(|c| call.holds(c)) else {
        return verdict(false, format!("no call of {}; the calls were {}", call.text, listed(&all)));
    };
    match before {
        None => verdict(true, format!("{} is a call of {}", first.named(), call.text)),
        Some(Until::Answer) => {
            let answer =
                run.trajectory.iter().rposition(|step| matches!(step, Step::Message { role: Speaker::Assistant, .. }));
            match answer {
                Some(at) if first.step > at => verdict(
                    false,
                    format!("{} is a call of {}, but only after the final answer", first.named(), call.text),
                ),
                _ => verdict(true, format!("{} is a call of {}, before the final answer", first.named(), call.text)),
            }
        }
        Some(Until::Call(other)) => match calls.iter().find(|c| other.holds(c)) {
            None => verdict(
                true,
                format!("{} is a call of {}; no call of {} was made", first.named(), call.text, other.text),
            ),
            Some(limit) if first.number < limit.number => {
                verdict(true, format!("{} is a call of {}, before {}", first.named(), call.text, limit.named()))
            }
            Some(limit) => verdict(
                false,
                format!(
                    "no call of {} before {} (a call of {}); the first was {}",
                    call.text,
                    limit.named(),
                    other.text,
                    first.named()
                ),
            ),
        },
    }
}

fn outside(max: u64, grader: &str, case: &Case, run: &RunOutput) -> Result<Grade, Failure> {
    let recorded = case.task.tools.iter().flatten().any(Tool::is_recorded);
    if !recorded {
        return Err(Failure::new(
            "config",
            format!(
                "case `{}`: grader `{grader}` counts calls answered from the case's tool snapshot, and the \
                 case's tools have no recorded answers",
                case.id
            ),
        ));
    }
    let calls = calls_of(run);
    let served: Vec<&Call<'_>> = calls.iter().filter(|c| c.served.is_some()).collect();
    if served.is_empty() && !calls.is_empty() {
        return Err(Failure::new(
            "config",
            format!(
                "case `{}`: grader `{grader}` counts calls casebook served, and none of the run's {} tool calls \
                 was (the agent used tools of its own, or the output was stored before calls were served)",
                case.id,
                calls.len()
            ),
        ));
    }
    let out: Vec<&Call<'_>> = served.iter().copied().filter(|c| c.served.is_some_and(|s| s.how.is_outside())).collect();
    let n = out.len() as u64;
    let named: Vec<String> = out
        .iter()
        .take(10)
        .map(|c| {
            let how = c.served.and_then(|s| serde_json::to_value(s.how).ok());
            format!("{} ({})", c.named(), how.as_ref().and_then(Value::as_str).unwrap_or("outside"))
        })
        .collect();
    let more = if out.len() > 10 { format!(" and {} more", out.len() - 10) } else { String::new() };
    let unserved = calls.len() - served.len();
    let note = if unserved > 0 {
        format!("; {} the agent made with its own tools not counted", plural(unserved, "call"))
    } else {
        String::new()
    };
    Ok(if n == 0 {
        verdict(true, format!("no call outside the snapshot in {}{note}", plural(served.len(), "served call")))
    } else {
        let within = if n <= max { format!("at most {max} allowed") } else { format!("more than the {max} allowed") };
        let what = plural(out.len(), "call");
        verdict(n <= max, format!("{what} outside the snapshot, {within}: {}{more}{note}", named.join(", ")))
    })
}

/// Whether calls matching `steps` come in this order; the score is the share of `steps` (from
/// the start) found in order.
fn calls_in_order(steps: &[CallPattern], run: &RunOutput) -> Grade {
    let calls = calls_of(run);
    let mut rest = calls.iter();
    let mut found: Vec<&Call<'_>> = Vec::with_capacity(steps.len());
    for step in steps {
        match rest.find(|c| step.holds(c)) {
            Some(call) => found.push(call),
            None => break,
        }
    }
    let score = found.len() as f64 / steps.len() as f64;
    let all: Vec<&Call<'_>> = calls.iter().collect();
    let rationale = match (steps.get(found.len()), found.last()) {
        (None, _) => format!("in order: {}", listed(&found)),
        (Some(next), None) => format!("no call of {}; the calls were {}", next.text, listed(&all)),
        (Some(next), Some(last)) => format!(
            "no call of {} after {} (step {} of {}); the calls were {}",
            next.text,
            last.named(),
            found.len(),
            steps.len(),
            listed(&all)
        ),
    };
    Grade { score, pass: found.len() == steps.len(), rationale }
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

    /// A run whose calls casebook served from `tools`' snapshot, then answered.
    fn served_run(tools: &Value, calls: &[(&str, Value)]) -> RunOutput {
        let tools: Vec<Tool> = serde_json::from_value(tools.clone()).unwrap();
        let environment = crate::environment::Environment::of(Some(&tools)).unwrap().expect("recorded answers");
        for (name, arguments) in calls {
            environment.serve(name, arguments);
        }
        let mut trajectory = vec![Step::Message { role: Speaker::User, content: json!("Pourquoi ?"), operator: false }];
        trajectory.extend(environment.drain());
        trajectory.push(Step::Message { role: Speaker::Assistant, content: json!("le pool"), operator: false });
        RunOutput { output: json!("le pool"), trajectory, ..RunOutput::default() }
    }

    fn incident_tools() -> Value {
        json!([
            {"name": "métriques", "responses": [
                {"when": {"includes": {"service": "caisse-épicerie"}}, "result": {"pool": "100/100"}}
            ], "default": {"result": []}},
            {"name": "journaux", "responses": [{"when": {"matches": {"requête": "^délai"}}, "result": ["délai 東京"]}]},
            {"name": "redémarrer", "responses": [{"result": "ok"}]}
        ])
    }

    fn incident_case() -> Case {
        let mut case = case(None);
        case.task.tools = Some(serde_json::from_value(incident_tools()).unwrap());
        case
    }

    fn spec_grader(value: Value) -> TrajectoryGrader {
        let spec: crate::grade::GraderSpec = serde_json::from_value(value).unwrap();
        match spec.build().unwrap().check {
            super::super::Check::Trajectory(grader) => grader,
            _ => unreachable!("a trajectory grader"),
        }
    }

    fn investigation() -> RunOutput {
        served_run(
            &incident_tools(),
            &[
                ("journaux", json!({"requête": "erreurs"})),
                ("métriques", json!({"service": "caisse-épicerie", "fenêtre": "5 min"})),
                ("journaux", json!({"requête": "délai p99", "hôte": "東京-1"})),
                ("redémarrer", json!({"service": "caisse-épicerie"})),
                ("tas", json!({})),
            ],
        )
    }

    #[test]
    fn tool_called_with_matches_arguments_as_the_snapshot_does() {
        let run = investigation();
        let grader =
            spec_grader(json!({"kind": "tool_called_with", "tool": "journaux", "matches": {"requête": "^délai"}}));
        let grade = grader.grade("t", &incident_case(), &run).unwrap();
        assert!(grade.pass, "{grade:?}");
        assert_eq!(
            grade.rationale,
            "call 3 `journaux {\"requête\":\"délai p99\",\"hôte\":\"東京-1\"}` is a call of `journaux` with `requête` matching `^délai`"
        );
        let subset = spec_grader(json!({"kind": "tool_called_with", "tool": "métriques",
                                        "includes": {"service": "caisse-épicerie"}}));
        assert!(subset.grade("t", &incident_case(), &run).unwrap().pass);
        let exact = spec_grader(json!({"kind": "tool_called_with", "tool": "métriques",
                                       "arguments": {"service": "caisse-épicerie"}}));
        let miss = exact.grade("t", &incident_case(), &run).unwrap();
        assert_eq!((miss.pass, miss.score), (false, 0.0));
        assert!(
            miss.rationale.starts_with(
                "no call of `métriques` with arguments `{\"service\":\"caisse-épicerie\"}`; the calls were call 1 \
                 `journaux {\"requête\":\"erreurs\"}`, call 2 `métriques"
            ),
            "{}",
            miss.rationale
        );
    }

    #[test]
    fn tool_called_with_before_another_call_or_the_answer() {
        let run = investigation();
        let before = |tool: &str, other: Value| {
            spec_grader(json!({"kind": "tool_called_with", "tool": tool, "before": other}))
                .grade("t", &incident_case(), &run)
                .unwrap()
        };
        let good = before("métriques", json!({"tool": "redémarrer"}));
        assert!(good.pass, "{good:?}");
        assert!(
            good.rationale.ends_with("before call 4 `redémarrer {\"service\":\"caisse-épicerie\"}`"),
            "{}",
            good.rationale
        );
        let late = before("journaux", json!({"tool": "métriques"}));
        assert!(late.pass, "call 1 of `journaux` came before: {late:?}");
        let late = spec_grader(json!({"kind": "tool_called_with", "tool": "journaux", "matches": {"requête": "délai"},
                                      "before": {"tool": "métriques", "includes": {"service": "caisse-épicerie"}}}))
        .grade("t", &incident_case(), &run)
        .unwrap();
        assert!(!late.pass);
        assert_eq!(
            late.rationale,
            "no call of `journaux` with `requête` matching `délai` before call 2 `métriques {\"service\":\"caisse-épicerie\",\"fenêtre\":\"5 min\"}` \
             (a call of `métriques` with arguments including `{\"service\":\"caisse-épicerie\"}`); the first was call 3 \
             `journaux {\"requête\":\"délai p99\",\"hôte\":\"東京-1\"}`"
        );
        // A limit that never comes does not fail the call that did.
        let never = before("métriques", json!({"tool": "rollback"}));
        assert!(never.pass && never.rationale.ends_with("no call of `rollback` was made"), "{never:?}");
        // Before the final answer: a call the agent reports after its last message does not count.
        assert!(before("tas", json!("answer")).pass);
        let mut after = run.clone();
        after.trajectory.push(Step::ToolCall {
            name: "plus_tard".into(),
            arguments: json!({}),
            result: None,
            served: None,
        });
        let grade = spec_grader(json!({"kind": "tool_called_with", "tool": "plus_tard", "before": "answer"}))
            .grade("t", &incident_case(), &after)
            .unwrap();
        assert_eq!(
            (grade.pass, grade.rationale.as_str()),
            (false, "call 6 `plus_tard {}` is a call of `plus_tard`, but only after the final answer")
        );
    }

    #[test]
    fn max_outside_calls_counts_what_the_snapshot_did_not_answer() {
        let run = investigation();
        // `tas` is no tool of the case; `journaux` without `délai` has no default: both outside.
        let grade =
            spec_grader(json!({"kind": "max_outside_calls", "max": 1})).grade("t", &incident_case(), &run).unwrap();
        assert_eq!((grade.pass, grade.score), (false, 0.0));
        assert_eq!(
            grade.rationale,
            "2 calls outside the snapshot, more than the 1 allowed: call 1 `journaux {\"requête\":\"erreurs\"}` (unmatched), \
             call 5 `tas {}` (unknown_tool)"
        );
        assert!(
            spec_grader(json!({"kind": "max_outside_calls", "max": 2}))
                .grade("t", &incident_case(), &run)
                .unwrap()
                .pass
        );
        // Calls the agent reports making with its own tools are not casebook's to count.
        let mut mixed = run.clone();
        mixed.trajectory.push(Step::ToolCall {
            name: "propre".into(),
            arguments: json!({}),
            result: None,
            served: None,
        });
        let grade =
            spec_grader(json!({"kind": "max_outside_calls", "max": 2})).grade("t", &incident_case(), &mixed).unwrap();
        assert!(
            grade.pass && grade.rationale.ends_with("; 1 call the agent made with its own tools not counted"),
            "{grade:?}"
        );
        let one = served_run(&incident_tools(), &[("tas", json!({"taille": "1 Go"}))]);
        let grade = spec_grader(json!({"kind": "max_outside_calls"})).grade("t", &incident_case(), &one).unwrap();
        assert_eq!(
            (grade.pass, grade.rationale.as_str()),
            (
                false,
                "1 call outside the snapshot, more than the 0 allowed: call 1 `tas {\"taille\":\"1 Go\"}` (unknown_tool)"
            )
        );
        // A default answer is inside the snapshot.
        let defaulted = served_run(&incident_tools(), &[("métriques", json!({"service": "autre"}))]);
        let grade = spec_grader(json!({"kind": "max_outside_calls"})).grade("t", &incident_case(), &defaulted).unwrap();
        assert_eq!((grade.pass, grade.rationale.as_str()), (true, "no call outside the snapshot in 1 served call"));
    }

    #[test]
    fn max_outside_calls_without_served_calls_is_a_config_error_not_a_pass() {
        let grader = spec_grader(json!({"kind": "max_outside_calls", "name": "dehors"}));
        // The case has no recorded answers: nothing could have been served.
        let err = grader.grade("dehors", &case(None), &run(&[])).unwrap_err();
        assert_eq!(err.kind, "config");
        assert_eq!(
            err.message,
            "case `c1`: grader `dehors` counts calls answered from the case's tool snapshot, and the case's tools have \
             no recorded answers"
        );
        // The case has them, but the run's calls were the agent's own.
        let err = grader.grade("dehors", &incident_case(), &run(&["journaux", "tas"])).unwrap_err();
        assert_eq!(err.kind, "config");
        assert!(err.message.contains("none of the run's 2 tool calls was"), "{}", err.message);
        // No call at all on a case with a snapshot: nothing was asked outside it.
        assert!(grader.grade("dehors", &incident_case(), &run(&[])).unwrap().pass);
    }

    #[test]
    fn call_order_follows_patterns_in_order() {
        let run = investigation();
        let grader = spec_grader(json!({"kind": "call_order", "steps": [
            {"tool": "métriques", "includes": {"service": "caisse-épicerie"}},
            {"tool": "journaux", "matches": {"/hôte": "東京"}},
            {"tool": "redémarrer"}
        ]}));
        let grade = grader.grade("t", &incident_case(), &run).unwrap();
        assert!(grade.pass, "{grade:?}");
        assert!(grade.rationale.starts_with("in order: call 2 `métriques"), "{}", grade.rationale);
        let wrong = spec_grader(json!({"kind": "call_order", "steps": [
            {"tool": "redémarrer"}, {"tool": "métriques"}, {"tool": "journaux"}
        ]}))
        .grade("t", &incident_case(), &run)
        .unwrap();
        assert!(!wrong.pass);
        assert!((wrong.score - 1.0 / 3.0).abs() < 1e-12, "{wrong:?}");
        assert!(
            wrong.rationale.starts_with(
                "no call of `métriques` after call 4 `redémarrer {\"service\":\"caisse-épicerie\"}` (step 1 of 3)"
            ),
            "{}",
            wrong.rationale
        );
        // From the case: names and `{name, includes}` objects.
        let mut case = incident_case();
        case.expected.tool_calls = Some(json!({"order": [
            "journaux", {"name": "métriques", "includes": {"fenêtre": "5 min"}}, {"name": "redémarrer", "id": "call_9"}
        ]}));
        assert!(TrajectoryGrader::CallOrder(None).grade("t", &case, &run).unwrap().pass);
        case.expected.tool_calls = Some(json!([{"name": "journaux", "matches": {"requête": "("}}]));
        let err = TrajectoryGrader::CallOrder(None).grade("t", &case, &run).unwrap_err();
        assert_eq!(err.kind, "config");
        assert!(
            err.message.contains("`expected.tool_calls` step 0: /matches/requête: `(` is not a valid pattern"),
            "{}",
            err.message
        );
    }

    #[test]
    fn bad_call_patterns_are_refused_when_built() {
        let cases = [
            (json!({"kind": "tool_called_with", "tool": ""}), "`tool` is empty"),
            (
                json!({"kind": "tool_called_with", "tool": "a", "matches": {"q": "(x"}}),
                "/matches/q: `(x` is not a valid pattern",
            ),
            (
                json!({"kind": "tool_called_with", "tool": "a", "before": {"tool": "b", "matches": {"q": "["}}}),
                "`before`: /matches/q",
            ),
            (json!({"kind": "call_order", "steps": []}), "`steps` is empty"),
            (
                json!({"kind": "call_order", "steps": [{"tool": "a"}, {"tool": "b", "matches": {"x": "("}}]}),
                "`steps[1]`: /matches/x",
            ),
        ];
        for (value, expected) in cases {
            let spec: crate::grade::GraderSpec = serde_json::from_value(value.clone()).unwrap();
            let err = spec.build().unwrap_err();
            assert_eq!(err.kind, "config", "{value}");
            assert!(err.message.contains(expected), "{value}: {}", err.message);
        }
        let err = serde_json::from_value::<crate::grade::GraderSpec>(
            json!({"kind": "tool_called_with", "tool": "a", "before": "the end"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("`before` is `answer` or a call"), "{err}");
        let err = serde_json::from_value::<crate::grade::GraderSpec>(
            json!({"kind": "tool_called_with", "tool": "a", "before": {"tool": "b", "include": {}}}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown field `include`"), "{err}");
        let spec: crate::grade::GraderSpec = serde_json::from_value(
            json!({"kind": "tool_called_with", "tool": "a", "includes": {"é": 1}, "before": "answer"}),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({"kind": "tool_called_with", "tool": "a", "includes": {"é": 1}, "before": "answer", "weight": 1.0})
        );
    }

    #[test]
    fn max_tool_calls_and_tool_order_count_served_calls() {
        let run = investigation();
        let over = TrajectoryGrader::Max(Some(4)).grade("t", &incident_case(), &run).unwrap();
        assert_eq!((over.pass, over.rationale.as_str()), (false, "5 tool calls, more than the 4 allowed"));
        let order = TrajectoryGrader::Order(Some(vec!["métriques".into(), "redémarrer".into(), "tas".into()]));
        assert!(order.grade("t", &incident_case(), &run).unwrap().pass);
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
