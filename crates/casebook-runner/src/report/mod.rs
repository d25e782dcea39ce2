//! Renderers of a run's [`Summary`](crate::summary::Summary) and results: JUnit XML for CI
//! ([`junit`]), Markdown ([`markdown`]), one self-contained HTML page ([`html`]), JSON lines
//! ([`write_jsonl`]) and the short plain-text summary a terminal shows ([`human`]).
//!
//! Renderers only format: every number comes from the summary, so all reports agree. A run
//! hands its results to a [`listing::Listing`] as they finish, which keeps what the per-result
//! reports list (in temporary files, or only Markdown's failing cases) and gives it back in
//! report order to their `write_listed`; `render` and `write` take a list. This file
//! holds what they share: the order results are listed in, how a result is explained, and the
//! number formats.

mod escape;
pub mod html;
pub mod jsonl;
pub mod junit;
pub mod listing;
pub mod markdown;
pub mod terminal;

pub use jsonl::write_jsonl;
pub use terminal::{human, human_comparison};

use casebook_model::snapshot::Served;
use serde_json::Value;

use crate::protocol::{Serving, Step};
use crate::record::RunResult;
use crate::summary::{Interval, Summary};

/// Characters of a tool call's arguments or answer that reports keep.
const CALL_CHARS: usize = 200;
/// Tool calls of one result that reports keep.
const CALLS_KEPT: usize = 50;

/// What a renderer's `write` writes, as a string.
fn to_string(write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The results in report order: by scenario (the summary's order), then case id, then run.
fn ordered<'a>(summary: &Summary, results: &'a [RunResult]) -> Vec<&'a RunResult> {
    let position = |scenario: &str| summary.scenarios.iter().position(|s| s.scenario == scenario).unwrap_or(usize::MAX);
    let mut ordered: Vec<&RunResult> = results.iter().collect();
    ordered.sort_by(|a, b| {
        position(&a.scenario)
            .cmp(&position(&b.scenario))
            .then_with(|| a.scenario.cmp(&b.scenario))
            .then_with(|| a.case_id.cmp(&b.case_id))
            .then_with(|| a.run.cmp(&b.run))
    });
    ordered
}

/// Why a result came out as it did, one line per grader: `grader 0.400 fail: rationale`, or
/// the failure that made it an error. With `only_failing`, the graders that passed are left out
/// (unless none failed, as when only the weighted score fell short).
fn explanation(result: &RunResult, only_failing: bool) -> Vec<String> {
    if let Err(failure) | Ok(crate::record::RunOutput { unfinished: Some(failure), .. }) = &result.output {
        return vec![format!("{}: {}", failure.kind, failure.message)];
    }
    let failed_graders: Vec<String> = result
        .grades
        .iter()
        .filter_map(|g| g.outcome.as_ref().err().map(|f| format!("{}: {}: {}", g.grader, f.kind, f.message)))
        .collect();
    if !failed_graders.is_empty() {
        return failed_graders;
    }
    let any_failing = result.grades.iter().any(|g| g.outcome.as_ref().is_ok_and(|grade| !grade.pass));
    result
        .grades
        .iter()
        .filter_map(|g| g.outcome.as_ref().ok().map(|grade| (g, grade)))
        .filter(|(_, grade)| !(only_failing && any_failing && grade.pass))
        .map(|(g, grade)| {
            let verdict = if grade.pass { "pass" } else { "fail" };
            format!("{} {:.3} {verdict}: {}", g.grader, grade.score, grade.rationale)
        })
        .collect()
}

/// What a run left out of its dataset's cases, in words: `8 cases, 5 run; left out: 1 by the
/// filter, 1 rejected, 1 below confidence 0.7`; `None` when the selection is not known or every
/// case ran.
fn selection_text(summary: &Summary) -> Option<String> {
    let selection = summary.meta.selection.as_ref()?;
    let left = &selection.left_out;
    if left.total() == 0 {
        return None;
    }
    let mut reasons = Vec::new();
    if left.filter > 0 {
        reasons.push(format!("{} by the filter", left.filter));
    }
    if left.rejected > 0 {
        reasons.push(format!("{} rejected", left.rejected));
    }
    if left.min_confidence > 0 {
        let below = selection.min_confidence.map_or_else(String::new, |c| format!(" {c}"));
        reasons.push(format!("{} below confidence{below}", left.min_confidence));
    }
    if left.limit > 0 {
        reasons.push(format!("{} past the limit", left.limit));
    }
    Some(format!(
        "{} case{}, {} run; left out: {}",
        selection.cases,
        if selection.cases == 1 { "" } else { "s" },
        selection.run,
        reasons.join(", ")
    ))
}

/// Whether the run's cases say anything of review or confidence: reports show those
/// breakdowns only then (every case unreviewed and unrated says nothing).
fn has_review_or_confidence(summary: &Summary) -> bool {
    summary.review.iter().any(|r| r.review != "unreviewed") || summary.confidence.iter().any(|c| c.band != "unrated")
}

/// The rows of the review and confidence breakdown: `review reviewed`, …, `confidence ≥ 0.8`, ….
fn review_groups(summary: &Summary) -> impl Iterator<Item = (String, &crate::summary::Tally)> {
    summary
        .review
        .iter()
        .map(|r| (format!("review {}", r.review), &r.tally))
        .chain(summary.confidence.iter().map(|c| (format!("confidence {}", c.band), &c.tally)))
}

/// `80.0 %`, or `–` when there is no rate.
fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "–".to_owned(), |r| format!("{:.1} %", r * 100.0))
}

/// `-12.5 pts`, `+0.0 pts`, or `–`: a difference of two rates, in percentage points.
fn points(difference: Option<f64>) -> String {
    difference.map_or_else(|| "–".to_owned(), |d| format!("{:+.1} pts", d * 100.0))
}

/// `a #0, b #1`: the first `n` flips of a robustness figure, and how many more there are.
fn flips(flips: &[crate::summary::Flip], n: usize) -> String {
    let mut text = flips.iter().take(n).map(|f| format!("{} #{}", f.case_id, f.run)).collect::<Vec<_>>().join(", ");
    if flips.len() > n {
        text.push_str(&format!(" …and {} more", flips.len() - n));
    }
    text
}

/// `49.0–94.3 %`, or `–`.
fn percent_interval(interval: Option<Interval>) -> String {
    interval.map_or_else(|| "–".to_owned(), |i| format!("{:.1}–{:.1} %", i.low * 100.0, i.high * 100.0))
}

/// `0.712`, or `–`.
fn score(score: Option<f64>) -> String {
    score.map_or_else(|| "–".to_owned(), |s| format!("{s:.3}"))
}

/// `0.48–1.00`, or `–`.
fn score_interval(interval: Option<Interval>) -> String {
    interval.map_or_else(|| "–".to_owned(), |i| format!("{:.3}–{:.3}", i.low, i.high))
}

/// The first `max` characters of `text`, with `…` when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// What the agent answered in a run, as text (a string as it is, anything else as JSON); `None`
/// when the run has no output.
fn output_text(result: &RunResult) -> Option<String> {
    let output = &result.output.as_ref().ok()?.output;
    match output {
        serde_json::Value::Null => None,
        serde_json::Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

/// The tool calls of a trajectory as reports keep them: at most [`CALLS_KEPT`], their arguments
/// and answers cut to [`CALL_CHARS`] characters (as text when cut).
pub fn served_calls(trajectory: &[Step]) -> Vec<Step> {
    let cut = |value: &Value| {
        let text = value.to_string();
        if text.chars().nth(CALL_CHARS).is_some() { Value::String(truncate(&text, CALL_CHARS)) } else { value.clone() }
    };
    trajectory
        .iter()
        .filter_map(|step| match step {
            Step::ToolCall { name, arguments, result, served } => Some(Step::ToolCall {
                name: name.clone(),
                arguments: cut(arguments),
                result: result.as_ref().map(cut),
                served: *served,
            }),
            _ => None,
        })
        .take(CALLS_KEPT)
        .collect()
}

/// A result's tool calls, one line each: `log_fetcher {"service":"db"} → matched entry 0:
/// ["timeout"]`; `served` says how casebook answered it (a call the agent reports making with
/// its own tools has no `served`, and shows what it reports).
/// Whether a result has tool calls to list ([`call_lines`] is not empty).
fn has_tool_calls(result: &RunResult) -> bool {
    result.output.as_ref().is_ok_and(|o| o.trajectory.iter().any(|s| matches!(s, Step::ToolCall { .. })))
}

fn call_lines(result: &RunResult) -> Vec<String> {
    let Ok(output) = &result.output else { return Vec::new() };
    output
        .trajectory
        .iter()
        .filter_map(|step| match step {
            Step::ToolCall { name, arguments, result, served } => {
                let how = served_text(served.as_ref(), result.is_some());
                let arguments = match arguments {
                    Value::Null => String::new(),
                    other => format!(" {}", inline_value(other)),
                };
                let answer = result.as_ref().map(|r| format!(": {}", inline_value(r))).unwrap_or_default();
                Some(format!("{name}{arguments} → {how}{answer}"))
            }
            _ => None,
        })
        .collect()
}

/// What the summary says of served tool calls, in words: `17 tool calls served from the cases'
/// snapshots; 2 outside them, in 1 result: a (s #0)`; `None` when none was served.
fn tool_calls_text(summary: &Summary) -> Option<String> {
    let calls = &summary.tool_calls;
    if calls.is_empty() {
        return None;
    }
    let mut text = format!(
        "{} tool call{} served from the cases' snapshots",
        calls.served,
        if calls.served == 1 { "" } else { "s" }
    );
    if calls.unmatched > 0 {
        let named: Vec<String> =
            calls.unmatched_in.iter().map(|c| format!("{} ({} #{})", c.case_id, c.scenario, c.run)).collect();
        let more = calls.results_with_unmatched.saturating_sub(named.len() as u64);
        text.push_str(&format!(
            "; {} outside them, in {} result{}: {}{}",
            calls.unmatched,
            calls.results_with_unmatched,
            if calls.results_with_unmatched == 1 { "" } else { "s" },
            named.join(", "),
            if more > 0 { format!(" …and {more} more") } else { String::new() }
        ));
    }
    Some(text)
}

/// How a tool call was answered, in words: `matched entry 0`, `default`, `unmatched, error`,
/// `unknown tool, error`; for a call casebook did not serve, `the agent's own` when the agent
/// reports a result, else `not answered`.
pub fn served_text(served: Option<&Serving>, has_result: bool) -> String {
    match served {
        Some(s) => {
            let how = match (s.how, s.entry) {
                (Served::Matched, Some(entry)) => format!("matched entry {entry}"),
                (Served::Matched, None) => "matched".to_owned(),
                (Served::Default, _) => "default".to_owned(),
                (Served::Unmatched, _) => "unmatched".to_owned(),
                (Served::UnknownTool, _) => "unknown tool".to_owned(),
                (Served::Unfrozen, Some(entry)) => format!("entry {entry} not frozen"),
                (Served::Unfrozen, None) => "not frozen".to_owned(),
            };
            if s.error { format!("{how}, error") } else { how }
        }
        None if has_result => "the agent's own".to_owned(),
        None => "not answered".to_owned(),
    }
}

/// A value on one line: a string as it is, anything else as JSON.
fn inline_value(value: &Value) -> String {
    match value {
        Value::String(text) if text.is_empty() => "\"\"".to_owned(),
        Value::String(text) => text.replace(['\n', '\r'], " "),
        other => other.to_string(),
    }
}

/// What the threshold is compared with, in words: `pass rate 66.7 % of 6 results (4 passed,
/// 1 failed, 1 error, 0 ungraded)`, or, with the ungraded excluded, `pass rate 80.0 % of 5
/// results (4 passed, 1 failed, 0 errors; 3 ungraded left out)`. Every report says it so, so
/// the rate a reader sees is always the one the verdict follows.
fn pass_rate_text(summary: &Summary) -> String {
    let t = &summary.totals;
    let errors = format!("{} error{}", t.errors, if t.errors == 1 { "" } else { "s" });
    let ungraded = if summary.exclude_ungraded {
        format!("; {} ungraded left out", t.ungraded)
    } else {
        format!(", {} ungraded", t.ungraded)
    };
    let of = t.pass_rate_of;
    format!(
        "pass rate {} of {} result{} ({} passed, {} failed, {errors}{ungraded})",
        percent(t.pass_rate),
        of,
        if of == 1 { "" } else { "s" },
        t.passed,
        t.failed,
    )
}

/// The rule the pass rates of a report follow, in a sentence (without a closing period).
fn pass_rate_definition(summary: &Summary) -> &'static str {
    if summary.exclude_ungraded {
        "Pass rate = passed / (passed + failed + errors): an error is not a pass; ungraded results \
         are left out, as asked (`exclude_ungraded`)"
    } else {
        "Pass rate = passed / (passed + failed + errors + ungraded): an error or a result no grader \
         could judge is not a pass"
    }
}

/// What a threshold line says: `met`, or `missed` with the reason when it is not the rate.
fn threshold_verdict(summary: &Summary) -> String {
    if summary.threshold_met {
        return "met".to_owned();
    }
    let t = &summary.totals;
    if summary.graders.is_empty() && t.errors == 0 {
        return "not applied (outputs only: no grader)".to_owned();
    }
    if t.pass_rate.is_none() { "missed (nothing graded)".to_owned() } else { "missed".to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Failure;
    use crate::summary::tests::{erroring, graded, meta};

    #[test]
    fn explanation_names_the_failing_graders() {
        let result = graded("a", "s", 0, &[("contains", 1.0, true), ("exact_match", 0.0, false)]);
        assert_eq!(explanation(&result, true), ["exact_match 0.000 fail: exact_match says 0"]);
        assert_eq!(explanation(&result, false).len(), 2);
        let mut judged = result.clone();
        judged.grades[1].outcome = Err(Failure::new("judge", "bad reply"));
        assert_eq!(explanation(&judged, true), ["exact_match: judge: bad reply"]);
        assert_eq!(explanation(&erroring("a", "s", 0, "timeout", "30s"), true), ["timeout: 30s"]);
    }

    #[test]
    fn results_are_ordered_by_scenario_then_case_then_run() {
        let results = vec![graded("b", "two", 0, &[]), graded("b", "one", 1, &[]), graded("a", "one", 2, &[])];
        let summary = Summary::of(&results, 0.5, meta(&["two", "one"], 3));
        let order: Vec<(&str, &str, u32)> =
            ordered(&summary, &results).iter().map(|r| (r.scenario.as_str(), r.case_id.as_str(), r.run)).collect();
        assert_eq!(order, [("two", "b", 0), ("one", "a", 2), ("one", "b", 1)]);
    }

    #[test]
    fn reports_show_each_served_call_with_how_it_was_answered() {
        use crate::protocol::Serving;
        let call = |name: &str, arguments: Value, result: Value, served: Option<Serving>| Step::ToolCall {
            name: name.into(),
            arguments,
            result: Some(result),
            served,
        };
        let mut investigated = graded("inc-é", "s", 0, &[("contains", 1.0, true)]);
        if let Ok(output) = &mut investigated.output {
            output.trajectory = vec![
                call(
                    "log_fetcher",
                    serde_json::json!({"service": "paiements"}),
                    serde_json::json!(["pool épuisé"]),
                    Some(Serving { how: Served::Matched, entry: Some(1), error: false }),
                ),
                call(
                    "metrics_query",
                    Value::Null,
                    serde_json::json!(""),
                    Some(Serving { how: Served::Default, entry: None, error: false }),
                ),
                call(
                    "deploy",
                    serde_json::json!({"to": "<prod>"}),
                    serde_json::json!("there is no tool `deploy`"),
                    Some(Serving { how: Served::UnknownTool, entry: None, error: true }),
                ),
                call("grep", serde_json::json!("x".repeat(300)), serde_json::json!(1), None),
            ];
            output.trajectory = served_calls(&output.trajectory);
            output.served_calls = 3;
            output.unmatched_calls = 1;
        }
        let results = vec![investigated, graded("plain", "s", 0, &[("contains", 1.0, true)])];
        let summary = Summary::of(&results, 0.5, meta(&["s"], 1));
        let expected = [
            r#"log_fetcher {"service":"paiements"} → matched entry 1: ["pool épuisé"]"#.to_owned(),
            r#"metrics_query → default: """#.to_owned(),
            "deploy {\"to\":\"<prod>\"} → unknown tool, error: there is no tool `deploy`".to_owned(),
            format!("grep {}… → the agent's own: 1", "\"".to_owned() + &"x".repeat(198)),
        ];
        assert_eq!(call_lines(&results[0]), expected);
        assert!(call_lines(&results[1]).is_empty());
        let total = "3 tool calls served from the cases' snapshots; 1 outside them, in 1 result: inc-é (s #0)";
        assert_eq!(tool_calls_text(&summary).as_deref(), Some(total));
        assert!(human(&summary).contains("3 tool calls served from the cases' snapshots; 1 outside them"));
        let md = markdown::render(&summary, &results);
        let shown = total.replace('#', "\\#");
        assert!(md.contains(&format!("## Tool calls\n\n{shown}\n\n- **inc-é** (s #0), pass\n")), "{md}");
        assert!(
            md.contains("  - log\\_fetcher {\"service\":\"paiements\"} → matched entry 1: \\[\"pool épuisé\"\\]"),
            "{md}"
        );
        assert!(!md.contains("**plain**"), "a result without calls is not listed: {md}");
        let html = html::render(&summary, &results);
        assert!(html.contains("<summary>4 tool calls, 1 outside the snapshot</summary>"), "{html}");
        assert!(html.contains("deploy {&quot;to&quot;:&quot;&lt;prod&gt;&quot;} → unknown tool, error"), "{html}");
    }

    #[test]
    fn number_formats() {
        assert_eq!(percent(Some(0.8)), "80.0 %");
        assert_eq!(percent(None), "–");
        assert_eq!(percent_interval(Some(Interval { low: 0.49, high: 0.9433 })), "49.0–94.3 %");
        assert_eq!(score(Some(0.71249)), "0.712");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abcd", 4), "abcd");
    }
}
