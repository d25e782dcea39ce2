//! One self-contained HTML page of a run: the verdict, the summary tables and every result
//! (case, scenario, run, score, verdict, rationale, and the tool calls casebook answered). Inline CSS only: no script, no external
//! asset, so the file can be attached to a CI job or mailed and opened anywhere.
//!
//! Everything that comes from a case, an agent or a grader is escaped.

use std::io::{self, Write};

use super::escape::{attribute, text};
use super::{
    call_lines, explanation, flips, has_review_or_confidence, ordered, output_text, pass_rate_definition,
    pass_rate_text, percent, percent_interval, points, review_groups, score, score_interval, selection_text,
    threshold_verdict, tool_calls_text,
};
use crate::record::RunResult;
use crate::summary::{Summary, Tally, Verdict};

const STYLE: &str = "\
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:80rem;padding:0 1rem;color:#1b1b1b}
h1{font-size:1.5rem;margin-bottom:.25rem}h2{font-size:1.15rem;margin-top:2rem}
.meta{color:#555}
table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
.verdict{font-weight:600;padding:.5rem .75rem;border-radius:4px;display:inline-block}
.met{background:#e3f4e3;color:#14591a}.missed{background:#fbe3e3;color:#8a1414}
.pass{color:#14591a}.fail{color:#8a1414}.error{color:#8a5a00}.ungraded{color:#555}
td.why{white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,monospace;font-size:12px}
";

/// The HTML page of a run.
pub fn render(summary: &Summary, results: &[RunResult]) -> String {
    super::to_string(|out| write(summary, results, out))
}

/// Writes the HTML page of a run to `out`.
pub fn write(summary: &Summary, results: &[RunResult], out: impl Write) -> io::Result<()> {
    write_listed(summary, results.len(), ordered(summary, results), out)
}

/// Writes the HTML page of a run to `out`, its `count` results coming from `results` in report
/// order (as a [`Listing`](super::listing::Listing) gives them back), so that none need be held.
pub fn write_listed<R: std::borrow::Borrow<RunResult>>(
    summary: &Summary,
    count: usize,
    results: impl IntoIterator<Item = R>,
    mut out: impl Write,
) -> io::Result<()> {
    let meta = &summary.meta;
    let k = meta.n_runs;
    writeln!(out, "<!DOCTYPE html>")?;
    writeln!(out, r#"<html lang="en"><head><meta charset="utf-8">"#)?;
    writeln!(out, r#"<meta name="viewport" content="width=device-width, initial-scale=1">"#)?;
    writeln!(out, "<title>{} · casebook run {}</title>", text(&meta.experiment), text(&meta.run_id))?;
    writeln!(out, "<style>\n{STYLE}</style></head><body>")?;
    writeln!(out, "<h1>{}</h1>", text(&meta.experiment))?;
    writeln!(
        out,
        r#"<p class="meta">Run {} · dataset {} (version <code>{}</code>) · {k} run{} per case · {} → {}</p>"#,
        text(&meta.run_id),
        text(&meta.dataset),
        text(&meta.dataset_version_id),
        if k == 1 { "" } else { "s" },
        text(&meta.started),
        text(&meta.finished),
    )?;
    writeln!(
        out,
        r#"<p class="verdict {}">Threshold {}: {} against {} required</p>"#,
        if summary.threshold_met { "met" } else { "missed" },
        text(&threshold_verdict(summary)),
        text(&pass_rate_text(summary)),
        text(&percent(Some(summary.threshold))),
    )?;

    if let Some(cases) = selection_text(summary) {
        writeln!(out, "<p class=\"meta\">Cases: {}.</p>", text(&cases))?;
    }
    writeln!(out, "<h2>Totals</h2>\n<table>")?;
    writeln!(
        out,
        "<tr><th>scenario</th><th>results</th><th>passed</th><th>failed</th><th>errors</th><th>ungraded</th><th>pass rate</th>\
         <th>95 % CI</th><th>mean score</th><th>95 % CI</th><th>pass@{k}</th><th>pass^{k}</th></tr>"
    )?;
    for scenario in &summary.scenarios {
        writeln!(
            out,
            "<tr><td>{}</td>{}{}{}</tr>",
            text(&scenario.scenario),
            tally_cells(&scenario.tally),
            number(&percent(scenario.pass_at_k.pass_at_k)),
            number(&percent(scenario.pass_at_k.pass_hat_k)),
        )?;
    }
    writeln!(out, "<tr><th>all</th>{}<td></td><td></td></tr>\n</table>", tally_cells(&summary.totals))?;
    writeln!(
        out,
        "<p class=\"meta\">{}, Wilson interval. Mean score with Student's t interval, over the graded \
         results. pass@{k} / pass^{k}: cases with at least one / all of their {k} runs passing, over cases \
         with no error.</p>",
        text(pass_rate_definition(summary)),
    )?;

    if !summary.graders.is_empty() {
        writeln!(out, "<h2>Graders</h2>\n<table>")?;
        writeln!(
            out,
            "<tr><th>grader</th><th>grades</th><th>mean</th><th>min</th><th>max</th><th>pass rate</th><th>errors</th></tr>"
        )?;
        for grader in &summary.graders {
            writeln!(
                out,
                "<tr><td>{}</td>{}{}{}{}{}{}</tr>",
                text(&grader.grader),
                number(&grader.count.to_string()),
                number(&score(grader.mean_score)),
                number(&score(grader.min_score)),
                number(&score(grader.max_score)),
                number(&percent(grader.pass_rate)),
                number(&grader.errors.to_string()),
            )?;
        }
        writeln!(out, "</table>")?;
    }

    if !summary.robustness.is_empty() {
        writeln!(out, "<h2>Robustness to noise</h2>\n<table>")?;
        writeln!(
            out,
            "<tr><th>with noise</th><th>without</th><th>pairs</th><th>pass rate without</th><th>pass rate with</th>\
             <th>difference</th><th>pass → fail</th><th>fail → pass</th><th>errors</th></tr>"
        )?;
        for r in &summary.robustness {
            writeln!(
                out,
                "<tr><td>{}</td><td>{}</td>{}{}{}{}{}{}{}</tr>",
                text(&r.scenario),
                text(&r.without_noise),
                number(&r.pairs.to_string()),
                number(&percent(r.pass_rate_without)),
                number(&percent(r.pass_rate_with)),
                number(&points(r.difference)),
                number(&r.pass_to_fail.len().to_string()),
                number(&r.fail_to_pass.len().to_string()),
                number(&r.errors.to_string()),
            )?;
        }
        writeln!(out, "</table>")?;
        for r in summary.robustness.iter().filter(|r| !r.pass_to_fail.is_empty()) {
            writeln!(
                out,
                "<p>Broken by the noise of {}: {}</p>",
                text(&r.scenario),
                text(&flips(&r.pass_to_fail, 50))
            )?;
        }
    }

    if !summary.labels.is_empty() {
        writeln!(out, "<h2>Labels</h2>\n<table>")?;
        writeln!(
            out,
            "<tr><th>label</th><th>results</th><th>passed</th><th>failed</th><th>errors</th><th>ungraded</th><th>pass rate</th>\
             <th>95 % CI</th><th>mean score</th><th>95 % CI</th></tr>"
        )?;
        for label in &summary.labels {
            writeln!(out, "<tr><td>{}</td>{}</tr>", text(&label.label), tally_cells(&label.tally))?;
        }
        writeln!(out, "</table>")?;
    }

    if has_review_or_confidence(summary) {
        writeln!(out, "<h2>Review and confidence</h2>\n<table>")?;
        writeln!(
            out,
            "<tr><th>cases</th><th>results</th><th>passed</th><th>failed</th><th>errors</th><th>ungraded</th><th>pass rate</th>\
             <th>95 % CI</th><th>mean score</th><th>95 % CI</th></tr>"
        )?;
        for (name, tally) in review_groups(summary) {
            writeln!(out, "<tr><td>{}</td>{}</tr>", text(&name), tally_cells(tally))?;
        }
        writeln!(out, "</table>")?;
    }

    if !summary.errors.is_empty() {
        writeln!(out, "<h2>Errors by kind</h2>\n<table>")?;
        writeln!(out, "<tr><th>kind</th><th>count</th><th>examples</th></tr>")?;
        for kind in &summary.errors {
            let examples: Vec<String> = kind
                .examples
                .iter()
                .map(|e| text(&format!("{} ({} #{}): {}", e.case_id, e.scenario, e.run, e.message)))
                .collect();
            writeln!(
                out,
                r#"<tr><td>{}</td>{}<td class="why">{}</td></tr>"#,
                text(&kind.kind),
                number(&kind.count.to_string()),
                examples.join("\n"),
            )?;
        }
        writeln!(out, "</table>")?;
    }

    writeln!(out, "<h2>Results ({count})</h2>")?;
    if let Some(calls) = tool_calls_text(summary) {
        writeln!(out, r#"<p class="meta">{}</p>"#, text(&calls))?;
    }
    writeln!(out, "<table>")?;
    writeln!(
        out,
        "<tr><th>case</th><th>scenario</th><th>run</th><th>score</th><th>verdict</th><th>rationale</th></tr>"
    )?;
    for result in results {
        let result = result.borrow();
        let verdict = Verdict::of(result);
        writeln!(
            out,
            r#"<tr id="{}"><td>{}</td><td>{}</td>{}{}<td class="{}">{}</td><td class="why">{}</td></tr>"#,
            attribute(&format!("{}/{}/{}", result.scenario, result.case_id, result.run)),
            text(&result.case_id),
            text(&result.scenario),
            number(&result.run.to_string()),
            number(&score(result.score)),
            verdict.as_str(),
            verdict.as_str(),
            text(&explanation(result, false).join("\n"))
                + &match output_text(result).filter(|_| verdict == Verdict::Fail) {
                    // Folded away, whole: the answer a failing case got.
                    Some(answer) =>
                        format!("<details><summary>the agent's answer</summary><pre>{}</pre></details>", text(&answer)),
                    None => String::new(),
                }
                + &calls_cell(result),
        )?;
    }
    writeln!(out, "</table>\n</body></html>")
}

/// A result's tool calls, folded away: each with its arguments and how it was answered.
fn calls_cell(result: &RunResult) -> String {
    let lines = call_lines(result);
    if lines.is_empty() {
        return String::new();
    }
    let unmatched = result.output.as_ref().map_or(0, |o| o.unmatched_calls);
    let outside = if unmatched > 0 { format!(", {unmatched} outside the snapshot") } else { String::new() };
    let items: String = lines.iter().map(|line| format!("<li>{}</li>", text(line))).collect();
    format!(
        "<details><summary>{} tool call{}{outside}</summary><ol>{items}</ol></details>",
        lines.len(),
        if lines.len() == 1 { "" } else { "s" }
    )
}

/// The cells of a tally, from results to the mean score's interval.
fn tally_cells(t: &Tally) -> String {
    [
        t.results.to_string(),
        t.passed.to_string(),
        t.failed.to_string(),
        t.errors.to_string(),
        t.ungraded.to_string(),
        percent(t.pass_rate),
        percent_interval(t.pass_rate_interval),
        score(t.mean_score),
        score_interval(t.mean_score_interval),
    ]
    .iter()
    .map(|cell| number(cell))
    .collect()
}

/// A right-aligned cell.
fn number(cell: &str) -> String {
    format!(r#"<td class="n">{}</td>"#, text(cell))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::{erroring, failing, meta, passing};

    #[test]
    fn a_failing_case_shows_the_agent_s_answer_folded_and_escaped() {
        let mut bad = failing("b", "base", 0);
        if let Ok(output) = &mut bad.output {
            output.output = serde_json::json!("<b>not it</b>");
        }
        let results = vec![passing("a", "base", 0), bad];
        let html = render(&Summary::of(&results, 0.5, meta(&["base"], 1)), &results);
        assert!(
            html.contains(
                "<details><summary>the agent's answer</summary><pre>&lt;b&gt;not it&lt;/b&gt;</pre></details>"
            ),
            "{html}"
        );
        assert_eq!(html.matches("<details>").count(), 1, "only the failing case");
    }

    #[test]
    fn agent_output_cannot_inject_markup() {
        let mut evil = failing("<img src=x onerror=alert(1)>", "base", 0);
        if let Ok(grade) = &mut evil.grades[0].outcome {
            grade.rationale = "the answer was <script>alert('pwned')</script> & \"more\"".to_owned();
        }
        let results = vec![
            passing("ok", "base", 0),
            evil,
            erroring("e", "base", 0, "<b>kind</b>", "</td></tr><script>x</script>"),
        ];
        let page = render(&Summary::of(&results, 0.5, meta(&["base"], 1)), &results);
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains("<b>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt; &amp; &quot;more&quot;"));
        assert!(page.contains("&lt;/td&gt;&lt;/tr&gt;&lt;script&gt;x&lt;/script&gt;"));
    }

    #[test]
    fn page_is_self_contained_and_lists_every_result() {
        let results =
            vec![passing("a", "base", 0), failing("b", "base", 0), erroring("c", "base", 0, "timeout", "slow")];
        let page = render(&Summary::of(&results, 0.5, meta(&["base"], 1)), &results);
        assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
        for external in ["<script", "<link", "src=", "href=", "@import", "url("] {
            assert!(!page.contains(external), "{external} in the page");
        }
        assert!(page.contains("<h2>Results (3)</h2>"));
        assert!(page.contains(r#"<td class="pass">pass</td>"#));
        assert!(page.contains(
            r#"<td class="fail">fail</td><td class="why">exact_match 0.000 fail: exact_match says 0<details>"#
        ));
        assert!(page.contains(r#"<td class="error">error</td><td class="why">timeout: slow</td>"#));
        assert_eq!(page.matches("<tr id=").count(), 3);
    }
}
