//! The checks a case carries itself: promptfoo's asserts, which casebook keeps under
//! `expected.assert` (and the test's pass `threshold` under `expected.threshold`). A run whose
//! experiment lists no graders grades each case by them ([`CaseAsserts`]).
//!
//! An assert that maps onto a casebook grader is graded by that grader, with the assert's
//! `value` as the expected answer and its `weight` (default 1) as the grader's; its result is
//! named `assert:TYPE`, or `assert:METRIC` when the assert names a `metric`:
//!
//! | assert | graded by |
//! |---|---|
//! | `equals` | `exact_match` with case and whitespace significant (`json_match` for a JSON value) |
//! | `contains`, `icontains` | `contains` (`ignore_case` for `icontains`) |
//! | `contains-any`, `contains-all`, `icontains-any`, `icontains-all` | `contains` of each value |
//! | `starts-with` | `regex_match` with the text at the start |
//! | `regex` | `regex_match` |
//! | `is-json` without a schema | the output is JSON |
//! | `llm-rubric` | `llm_judge` with the value as the rubric, through the experiment's `judge` settings; its `threshold` is the score it needs |
//!
//! `not-` before any of these inverts it. A test `threshold` makes the case pass when the
//! weighted score reaches it (instead of every assert passing), as in promptfoo.
//!
//! The others (`javascript`, `python`, `similar`, `cost`, `latency`, model-graded kinds…), an
//! assert whose value is a template (`{{…}}`, which promptfoo fills from the variables), one
//! that transforms the output first (its own `transform`, or the test's `options.transform`),
//! and `llm-rubric` without a judge, cannot be checked here.
//! They stay in the case, are left out of its grading and counted ([`Tally`]) so that a run
//! says so; a case with nothing else to check is ungraded, never a pass.
//!
//! A case without asserts that offers choices (a multiple-choice question, as Inspect's samples
//! with `choices`) is graded by `choice`, the grader Inspect's `multiple_choice` solver goes with.

use std::collections::BTreeMap;

use casebook_formats::promptfoo::{ASSERT, THRESHOLD};
use casebook_model::{Case, Expectations};
use serde_json::Value;

use super::spec::{ContainsOptions, GraderOptions, GraderSpec, JsonMatchOptions, RegexMatchOptions, TextMatchOptions};
use super::{Grader, text_of, verdict};
use crate::record::{Failure, Grade, GraderResult, RunOutput};

/// Grades cases by their own asserts.
#[derive(Debug)]
pub struct CaseAsserts {
    /// The `llm_judge` grader `llm-rubric` asserts go through, if the experiment set one.
    judge: Option<Grader>,
}

/// A case's grades by its asserts, and the weighted score it needs to pass, if it says.
#[derive(Debug, Default)]
pub struct CaseGrades {
    pub grades: Vec<GraderResult>,
    pub threshold: Option<f64>,
}

/// How one assert is checked.
enum Check {
    /// By a casebook grader, on the case with the assert's value as its expected output.
    Grader(Box<GraderSpec>, Value),
    /// The output text contains any (or all) of the values.
    ContainsSome { values: Vec<String>, all: bool, ignore_case: bool },
    /// The output is JSON.
    IsJson,
    /// By the judge, with the assert's value as the rubric and its threshold, if any.
    Rubric { rubric: String, threshold: Option<f64> },
}

/// What an assert is, read from the case.
struct Assert {
    name: String,
    weight: f64,
    negated: bool,
    /// Its `weight` is negative: it cannot be graded.
    weight_problem: bool,
    check: Result<Check, Unchecked>,
}

/// Why an assert cannot be checked here: its type, or what else stops it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unchecked {
    /// casebook has no grader for this type.
    Type(String),
    /// Its value is a template promptfoo fills from the test's variables.
    Template(String),
    /// It transforms the output before checking it (a JavaScript expression).
    Transform(String),
    /// An `llm-rubric` assert, and the experiment sets no `judge`.
    NoJudge,
}

impl std::fmt::Display for Unchecked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unchecked::Type(t) => write!(f, "`{t}`"),
            Unchecked::Template(t) => write!(f, "`{t}` with a `{{{{…}}}}` template value"),
            Unchecked::Transform(t) => write!(f, "`{t}` with a `transform`"),
            Unchecked::NoJudge => write!(f, "`llm-rubric` (the experiment sets no `judge`)"),
        }
    }
}

/// The asserts of a run's cases: how many can be checked, and those that cannot, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Cases with at least one assert that can be checked.
    pub graded_cases: u64,
    /// Cases with asserts, none of which can be checked: they are ungraded.
    pub ungraded_cases: u64,
    /// Cases without asserts: ungraded too.
    pub bare_cases: u64,
    /// Asserts that cannot be checked, by reason.
    pub unchecked: BTreeMap<Unchecked, u64>,
}

impl Tally {
    /// Counts `case`'s asserts; `judge` says whether `llm-rubric` asserts can be checked.
    pub fn add(&mut self, case: &Case, judge: bool) {
        let Some(asserts) = asserts_of(case) else {
            if casebook_model::choices::of(&case.task).is_some() {
                self.graded_cases += 1;
                return;
            }
            self.bare_cases += 1;
            return;
        };
        let mut checked = 0;
        for assert in asserts.iter().map(|a| read(a, judge, transforms_output(case))) {
            match assert.check {
                Ok(_) => checked += 1,
                Err(why) => *self.unchecked.entry(why).or_default() += 1,
            }
        }
        if checked > 0 {
            self.graded_cases += 1;
        } else {
            self.ungraded_cases += 1;
        }
    }
}

/// The case's asserts, if it has any.
pub fn asserts_of(case: &Case) -> Option<&Vec<Value>> {
    case.expected.extra.get(ASSERT).and_then(Value::as_array).filter(|a| !a.is_empty())
}

/// The types casebook checks, without `not-`.
const CHECKED: &[&str] = &[
    "equals",
    "contains",
    "icontains",
    "contains-any",
    "contains-all",
    "icontains-any",
    "icontains-all",
    "starts-with",
    "regex",
    "is-json",
    "llm-rubric",
];

/// Whether the test transforms the output before its asserts see it (promptfoo's
/// `options.transform`, or its older name `options.postprocess`, kept in the case's metadata).
fn transforms_output(case: &Case) -> bool {
    let options = case.metadata.as_ref().and_then(|m| m.get("options"));
    options.is_some_and(|o| o.get("transform").is_some() || o.get("postprocess").is_some())
}

/// Reads one assert (see the module docs); `judge` says whether `llm-rubric` can be checked,
/// `transformed` whether the test transforms the output first.
fn read(assert: &Value, judge: bool, transformed: bool) -> Assert {
    let object = assert.as_object();
    let field = |key: &str| object.and_then(|o| o.get(key));
    let full = field("type").and_then(Value::as_str).unwrap_or("$ref").to_owned();
    let (negated, kind) = match full.strip_prefix("not-") {
        Some(kind) => (true, kind.to_owned()),
        None => (false, full.clone()),
    };
    let name = match field("metric").and_then(Value::as_str).filter(|m| !m.is_empty()) {
        Some(metric) => format!("assert:{metric}"),
        None => format!("assert:{full}"),
    };
    let weight = field("weight").and_then(Value::as_f64).unwrap_or(1.0);
    // A weight the mean cannot use is the dataset's mistake: an error, not a guess.
    let weight_problem = !(weight.is_finite() && weight >= 0.0);
    let value = field("value");
    let check = if !CHECKED.contains(&kind.as_str()) {
        Err(Unchecked::Type(full.clone()))
    } else if transformed || field("transform").is_some() {
        Err(Unchecked::Transform(full.clone()))
    } else if value.is_some_and(has_template) {
        Err(Unchecked::Template(full.clone()))
    } else {
        check_of(&kind, value, field("threshold").and_then(Value::as_f64), judge, &full)
    };
    Assert { name, weight: if weight_problem { 0.0 } else { weight }, negated, weight_problem, check }
}

/// Whether a value holds a promptfoo (Nunjucks) template.
fn has_template(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains("{{") || text.contains("{%"),
        Value::Array(items) => items.iter().any(has_template),
        Value::Object(map) => map.values().any(has_template),
        _ => false,
    }
}

fn check_of(
    kind: &str,
    value: Option<&Value>,
    threshold: Option<f64>,
    judge: bool,
    full: &str,
) -> Result<Check, Unchecked> {
    let value_or_null = value.cloned().unwrap_or(Value::Null);
    let graded = |options: GraderOptions| Ok(Check::Grader(Box::new(GraderSpec::new(options)), value_or_null.clone()));
    match kind {
        "equals" if value.is_some_and(|v| !v.is_string()) => {
            graded(GraderOptions::JsonMatch(JsonMatchOptions::default()))
        }
        "equals" => graded(GraderOptions::ExactMatch(TextMatchOptions { ignore_case: false, trim: false })),
        "contains" => graded(GraderOptions::Contains(ContainsOptions { ignore_case: false })),
        "icontains" => graded(GraderOptions::Contains(ContainsOptions { ignore_case: true })),
        "regex" => graded(GraderOptions::RegexMatch(RegexMatchOptions::default())),
        "starts-with" => match value {
            Some(Value::String(text)) => graded(GraderOptions::RegexMatch(RegexMatchOptions {
                pattern: Some(format!("^{}", regex::escape(text))),
            })),
            _ => Err(Unchecked::Type(full.to_owned())),
        },
        "contains-any" | "contains-all" | "icontains-any" | "icontains-all" => {
            let values = match value {
                Some(Value::Array(items)) => items.iter().map(|v| text_of(v).into_owned()).collect(),
                Some(Value::String(text)) => text.split(',').map(|s| s.trim().to_owned()).collect(),
                _ => Vec::new(),
            };
            Ok(Check::ContainsSome { values, all: kind.ends_with("all"), ignore_case: kind.starts_with('i') })
        }
        // A schema to validate against is more than casebook checks.
        "is-json" if value.is_some_and(|v| !v.is_null()) => Err(Unchecked::Type(format!("{full} with a schema"))),
        "is-json" => Ok(Check::IsJson),
        "llm-rubric" if !judge => Err(Unchecked::NoJudge),
        "llm-rubric" => Ok(Check::Rubric { rubric: text_of(&value_or_null).into_owned(), threshold }),
        _ => Err(Unchecked::Type(full.to_owned())),
    }
}

impl CaseAsserts {
    /// `judge`: the experiment's `judge` settings (an `llm_judge` grader), for `llm-rubric`.
    pub fn new(judge: Option<&GraderSpec>) -> Result<Self, Failure> {
        let judge = judge.map(GraderSpec::build).transpose()?;
        if let Some(grader) = &judge {
            if grader.kind() != "llm_judge" {
                return Err(Failure::new("config", "`judge` names a chat-completions endpoint and model"));
            }
        }
        Ok(Self { judge })
    }

    /// Whether `llm-rubric` asserts can be checked.
    pub fn has_judge(&self) -> bool {
        self.judge.is_some()
    }

    /// Grades one run of `case` by its asserts (none when it has none), or, when it has none and
    /// offers choices, by `choice`.
    pub async fn grade(&self, case: &Case, run: &RunOutput) -> CaseGrades {
        let Some(asserts) = asserts_of(case) else {
            if casebook_model::choices::of(&case.task).is_none() {
                return CaseGrades::default();
            }
            let outcome = super::choice::grade(super::choice::KIND, case, &run.output);
            return CaseGrades {
                grades: vec![GraderResult { grader: super::choice::KIND.into(), weight: 1.0, outcome }],
                threshold: None,
            };
        };
        let threshold = case.expected.extra.get(THRESHOLD).and_then(Value::as_f64);
        let mut grades: Vec<GraderResult> = Vec::with_capacity(asserts.len());
        for assert in asserts.iter().map(|a| read(a, self.judge.is_some(), transforms_output(case))) {
            let Ok(check) = assert.check else { continue };
            let outcome = if assert.weight_problem {
                Err(Failure::new("config", format!("case `{}`: an assert's `weight` must be a number ≥ 0", case.id)))
            } else {
                self.outcome(case, run, &check).await
            };
            let outcome = outcome.map(|grade| match assert.negated {
                false => grade,
                true => Grade {
                    score: 1.0 - grade.score,
                    pass: !grade.pass,
                    rationale: format!("not: {}", grade.rationale),
                },
            });
            // Two asserts of one name are told apart: `assert:contains`, `assert:contains#2`.
            let taken = grades
                .iter()
                .filter(|g| g.grader == assert.name || g.grader.starts_with(&format!("{}#", assert.name)))
                .count();
            let name = if taken == 0 { assert.name } else { format!("{}#{}", assert.name, taken + 1) };
            grades.push(GraderResult { grader: name, weight: assert.weight, outcome });
        }
        CaseGrades { grades, threshold }
    }

    async fn outcome(&self, case: &Case, run: &RunOutput, check: &Check) -> Result<Grade, Failure> {
        match check {
            Check::Grader(spec, value) => {
                let grader = spec.build()?;
                let expected = Expectations { output: Some(value.clone()), ..Expectations::default() };
                grader.grade(&with_expectations(case, expected), run).await
            }
            Check::ContainsSome { values, all, ignore_case } => {
                if values.is_empty() {
                    return Err(Failure::new(
                        "config",
                        format!("case `{}`: a `contains-any`/`-all` assert has no values", case.id),
                    ));
                }
                let fold = |text: &str| if *ignore_case { text.to_lowercase() } else { text.to_owned() };
                let output = fold(&text_of(&run.output));
                let found: Vec<&String> = values.iter().filter(|v| output.contains(&fold(v))).collect();
                let pass = if *all { found.len() == values.len() } else { !found.is_empty() };
                Ok(match (pass, *all) {
                    (true, true) => verdict(true, "the output contains every value"),
                    (true, false) => {
                        verdict(true, format!("the output contains `{}`", super::clip(found[0], super::QUOTE)))
                    }
                    (false, true) => verdict(
                        false,
                        format!("the output lacks {} of the {} values", values.len() - found.len(), values.len()),
                    ),
                    (false, false) => {
                        verdict(false, format!("the output contains none of the {} values", values.len()))
                    }
                })
            }
            Check::IsJson => {
                let json = match &run.output {
                    Value::String(text) => serde_json::from_str::<Value>(text).is_ok(),
                    Value::Null => false,
                    _ => true,
                };
                Ok(if json { verdict(true, "the output is JSON") } else { verdict(false, "the output is not JSON") })
            }
            Check::Rubric { rubric, threshold } => {
                let Some(judge) = &self.judge else {
                    return Err(Failure::new("config", "an `llm-rubric` assert needs the experiment's `judge`"));
                };
                let expected = Expectations { rubric: Some(rubric.clone()), ..Expectations::default() };
                let mut grade = judge.grade(&with_expectations(case, expected), run).await?;
                if let Some(threshold) = threshold {
                    grade.pass &= grade.score >= *threshold;
                }
                Ok(grade)
            }
        }
    }
}

/// The case with only these expectations: what a grader of one assert is given.
fn with_expectations(case: &Case, expected: Expectations) -> Case {
    Case {
        id: case.id.clone(),
        name: None,
        description: None,
        labels: None,
        task: case.task.clone(),
        expected,
        metadata: None,
        confidence: None,
        review: None,
        provenance: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn case(asserts: Value) -> Case {
        serde_json::from_value(json!({"id": "t", "input": "q", "expected": {"assert": asserts}})).unwrap()
    }

    fn run(output: &str) -> RunOutput {
        RunOutput { output: json!(output), ..RunOutput::default() }
    }

    fn grade(asserts: Value, output: &str) -> Vec<(String, f64, bool)> {
        let graded = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(CaseAsserts::new(None).unwrap().grade(&case(asserts), &run(output)));
        graded
            .grades
            .into_iter()
            .map(|g| {
                let grade = g.outcome.unwrap();
                (g.grader, g.weight, grade.pass)
            })
            .collect()
    }

    #[test]
    fn asserts_that_map_onto_graders_grade_the_output() {
        let asserts = json!([
            {"type": "equals", "value": "Paris is big"},
            {"type": "contains", "value": "Paris", "weight": 2},
            {"type": "icontains", "value": "PARIS"},
            {"type": "not-contains", "value": "London"},
            {"type": "regex", "value": "^Paris"},
            {"type": "starts-with", "value": "Paris ("},
            {"type": "contains-any", "value": ["Rome", "big"]},
            {"type": "icontains-all", "value": "PARIS, BIG"},
            {"type": "is-json"},
            {"type": "contains", "value": "Paris", "metric": "city"},
            {"type": "contains", "value": "Lyon"},
        ]);
        let named = |n: &str, w: f64, p: bool| (n.to_owned(), w, p);
        assert_eq!(
            grade(asserts, "Paris is big"),
            vec![
                named("assert:equals", 1.0, true),
                named("assert:contains", 2.0, true),
                named("assert:icontains", 1.0, true),
                named("assert:not-contains", 1.0, true),
                named("assert:regex", 1.0, true),
                named("assert:starts-with", 1.0, false),
                named("assert:contains-any", 1.0, true),
                named("assert:icontains-all", 1.0, true),
                named("assert:is-json", 1.0, false),
                named("assert:city", 1.0, true),
                named("assert:contains#2", 1.0, false),
            ]
        );
    }

    #[test]
    fn asserts_casebook_cannot_check_are_counted_not_graded() {
        let c = case(json!([
            {"type": "javascript", "value": "output.length < 10"},
            {"type": "contains", "value": "{{answer}}"},
            {"type": "llm-rubric", "value": "is polite"},
            {"type": "contains", "value": "x", "transform": "output.trim()"},
        ]));
        let mut tally = Tally::default();
        tally.add(&c, false);
        assert_eq!((tally.graded_cases, tally.ungraded_cases), (0, 1));
        let reasons: Vec<String> = tally.unchecked.keys().map(ToString::to_string).collect();
        assert_eq!(
            reasons,
            [
                "`javascript`",
                "`contains` with a `{{…}}` template value",
                "`contains` with a `transform`",
                "`llm-rubric` (the experiment sets no `judge`)"
            ]
        );
        assert!(grade(c.expected.extra[ASSERT].clone(), "x").is_empty(), "nothing graded: no pass");
    }

    /// promptfoo transforms the output by the test's `options.transform` before any assert sees
    /// it: checked on the untransformed output, the asserts could fail what promptfoo passes.
    #[test]
    fn a_test_that_transforms_the_output_has_its_asserts_left_unchecked() {
        let mut c = case(json!([{"type": "equals", "value": "HELLO"}, {"type": "contains", "value": "H"}]));
        c.metadata = Some(serde_json::from_value(json!({"options": {"transform": "output.toUpperCase()"}})).unwrap());
        let mut tally = Tally::default();
        tally.add(&c, false);
        assert_eq!((tally.graded_cases, tally.ungraded_cases), (0, 1));
        let reasons: Vec<String> = tally.unchecked.keys().map(ToString::to_string).collect();
        assert_eq!(reasons, ["`contains` with a `transform`", "`equals` with a `transform`"]);
        let graded = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(CaseAsserts::new(None).unwrap().grade(&c, &run("hello")));
        assert!(graded.grades.is_empty(), "nothing graded: no pass");
        // Other options change nothing.
        c.metadata = Some(serde_json::from_value(json!({"options": {"provider": "x"}})).unwrap());
        let mut tally = Tally::default();
        tally.add(&c, false);
        assert_eq!(tally.graded_cases, 1);
    }
}
