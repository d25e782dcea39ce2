//! A Markdown report of a run, for pull-request comments and CI job summaries: the verdict,
//! tables of totals per scenario, graders, labels and errors by kind, then the failing cases
//! with their rationales (the first [`FAILING_CASES_SHOWN`], then "…and N more"), and the tool
//! calls casebook answered, result by result, with how each was answered.
//!
//! Text from cases, agents and graders is escaped so it cannot break a table or turn into
//! markup (CommonMark renders inline HTML).

use std::io::{self, Write};

use super::{
    call_lines, explanation, flips, has_review_or_confidence, ordered, output_text, pass_rate_definition,
    pass_rate_text, percent, percent_interval, points, review_groups, score, score_interval, selection_text,
    threshold_verdict, tool_calls_text, truncate,
};
use crate::record::RunResult;
use crate::summary::{Summary, Tally, Verdict};

/// How many failing cases the report lists.
pub const FAILING_CASES_SHOWN: usize = 50;

/// How much of one rationale the report shows.
const RATIONALE_CHARS: usize = 300;

/// Answers up to this long (and on one line) are shown inline; longer ones are folded away.
const SHORT_OUTPUT: usize = 200;

/// The Markdown report of a run.
pub fn render(summary: &Summary, results: &[RunResult]) -> String {
    super::to_string(|out| write(summary, results, out))
}

/// Writes the Markdown report of a run to `out`.
pub fn write(summary: &Summary, results: &[RunResult], out: impl Write) -> io::Result<()> {
    let ordered = ordered(summary, results);
    let failing: Vec<&RunResult> = ordered.iter().copied().filter(|r| Verdict::of(r) == Verdict::Fail).collect();
    let calling: Vec<&RunResult> = ordered.into_iter().filter(|r| super::has_tool_calls(r)).collect();
    let first = |list: &[&'_ RunResult]| list.len().min(FAILING_CASES_SHOWN);
    write_listed(
        summary,
        (failing.len(), &failing[..first(&failing)]),
        (calling.len(), &calling[..first(&calling)]),
        out,
    )
}

/// Writes the Markdown report of a run to `out`, given only what it lists: how many results
/// failed and the first [`FAILING_CASES_SHOWN`] of them in report order, and the same of the
/// results with tool calls (what a [`Listing`](super::listing::Listing) keeps).
pub fn write_listed<R: std::borrow::Borrow<RunResult>>(
    summary: &Summary,
    (failed, shown): (usize, &[R]),
    (with_calls, calling): (usize, &[R]),
    mut out: impl Write,
) -> io::Result<()> {
    let meta = &summary.meta;
    let k = meta.n_runs;
    writeln!(out, "# {}\n", inline(&meta.experiment))?;
    writeln!(
        out,
        "Run {} · dataset {} (version {}) · {} run{} per case · {} → {}\n",
        inline(&meta.run_id),
        inline(&meta.dataset),
        inline(&meta.dataset_version_id),
        k,
        if k == 1 { "" } else { "s" },
        inline(&meta.started),
        inline(&meta.finished),
    )?;
    writeln!(
        out,
        "**Threshold {}**: {} against {} required.\n",
        threshold_verdict(summary),
        pass_rate_text(summary),
        percent(Some(summary.threshold)),
    )?;
    if let Some(text) = selection_text(summary) {
        writeln!(out, "Cases: {}.\n", inline(&text))?;
    }

    writeln!(out, "## Totals\n")?;
    writeln!(
        out,
        "| scenario | results | passed | failed | errors | ungraded | pass rate | 95 % CI | mean score | 95 % CI | pass@{k} | pass^{k} |"
    )?;
    writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")?;
    for scenario in &summary.scenarios {
        writeln!(
            out,
            "| {} | {} | {} | {} |",
            inline(&scenario.scenario),
            tally_cells(&scenario.tally),
            percent(scenario.pass_at_k.pass_at_k),
            percent(scenario.pass_at_k.pass_hat_k),
        )?;
    }
    writeln!(out, "| **all** | {} | | |\n", tally_cells(&summary.totals))?;
    writeln!(
        out,
        "{}, Wilson interval. Mean score with Student's t interval, over the graded results. \
         pass@{k} / pass^{k}: cases with at least one / all of their {k} runs passing, over cases \
         with no error.\n",
        pass_rate_definition(summary),
    )?;

    if !summary.robustness.is_empty() {
        writeln!(out, "## Robustness to noise\n")?;
        writeln!(
            out,
            "| with noise | without | pairs | pass rate without | pass rate with | difference | pass → fail | fail → pass | errors |"
        )?;
        writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|")?;
        for r in &summary.robustness {
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                inline(&r.scenario),
                inline(&r.without_noise),
                r.pairs,
                percent(r.pass_rate_without),
                percent(r.pass_rate_with),
                points(r.difference),
                r.pass_to_fail.len(),
                r.fail_to_pass.len(),
                r.errors,
            )?;
        }
        writeln!(
            out,
            "\nEach scenario with noise against the same cases and runs without it: pairs are case runs \
             graded on both sides, errors on either side are left out and counted apart.\n"
        )?;
        for r in summary.robustness.iter().filter(|r| !r.pass_to_fail.is_empty()) {
            writeln!(out, "Broken by the noise of {}: {}\n", inline(&r.scenario), inline(&flips(&r.pass_to_fail, 50)))?;
        }
    }

    if !summary.graders.is_empty() {
        writeln!(out, "## Graders\n")?;
        writeln!(out, "| grader | grades | mean | min | max | pass rate | errors |")?;
        writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|")?;
        for grader in &summary.graders {
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                inline(&grader.grader),
                grader.count,
                score(grader.mean_score),
                score(grader.min_score),
                score(grader.max_score),
                percent(grader.pass_rate),
                grader.errors,
            )?;
        }
        writeln!(out)?;
    }

    if !summary.labels.is_empty() {
        writeln!(out, "## Labels\n")?;
        writeln!(out, "| label | results | passed | failed | errors | ungraded | pass rate | mean score |")?;
        writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|")?;
        for label in &summary.labels {
            let t = &label.tally;
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                inline(&label.label),
                t.results,
                t.passed,
                t.failed,
                t.errors,
                t.ungraded,
                percent(t.pass_rate),
                score(t.mean_score),
            )?;
        }
        writeln!(out)?;
    }

    if has_review_or_confidence(summary) {
        writeln!(out, "## Review and confidence\n")?;
        writeln!(out, "| cases | results | passed | failed | errors | ungraded | pass rate | mean score |")?;
        writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|")?;
        for (name, t) in review_groups(summary) {
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                inline(&name),
                t.results,
                t.passed,
                t.failed,
                t.errors,
                t.ungraded,
                percent(t.pass_rate),
                score(t.mean_score),
            )?;
        }
        writeln!(out)?;
    }

    if !summary.errors.is_empty() {
        writeln!(out, "## Errors by kind\n")?;
        writeln!(out, "| kind | count | example |")?;
        writeln!(out, "|---|--:|---|")?;
        for kind in &summary.errors {
            let example = kind.examples.first().map_or_else(String::new, |e| {
                format!(
                    "{} ({} #{}): {}",
                    inline(&e.case_id),
                    inline(&e.scenario),
                    e.run,
                    // An error is shown whole: the reader's Markdown view wraps it.
                    inline(&e.message)
                )
            });
            writeln!(out, "| {} | {} | {} |", inline(&kind.kind), kind.count, example)?;
        }
        writeln!(out)?;
    }

    if failed > 0 {
        writeln!(out, "## Failing cases ({failed})\n")?;
        for result in shown.iter().take(FAILING_CASES_SHOWN).map(std::borrow::Borrow::borrow) {
            writeln!(
                out,
                "- **{}** ({} #{}), score {}",
                inline(&result.case_id),
                inline(&result.scenario),
                result.run,
                score(result.score),
            )?;
            for line in explanation(result, true) {
                writeln!(out, "  - {}", inline(&truncate(&line, RATIONALE_CHARS)))?;
            }
            match output_text(result) {
                Some(text) if text.chars().count() <= SHORT_OUTPUT && !text.contains('\n') => {
                    writeln!(out, "  - the agent answered: {}", inline(&text))?;
                }
                // A long answer is folded away, whole, in a code block that it cannot close.
                Some(text) => {
                    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
                    let fence = "`".repeat(longest.max(2) + 1);
                    writeln!(
                        out,
                        "  <details><summary>the agent's answer ({} characters)</summary>\n",
                        text.chars().count()
                    )?;
                    writeln!(out, "  {fence}text")?;
                    for line in text.lines() {
                        writeln!(out, "  {line}")?;
                    }
                    writeln!(out, "  {fence}\n\n  </details>")?;
                }
                None => {}
            }
        }
        if failed > FAILING_CASES_SHOWN {
            writeln!(out, "\n…and {} more", failed - FAILING_CASES_SHOWN)?;
        }
    }

    if let Some(total) = tool_calls_text(summary) {
        writeln!(out, "\n## Tool calls\n\n{}\n", inline(&total))?;
        for result in calling.iter().take(FAILING_CASES_SHOWN).map(std::borrow::Borrow::borrow) {
            writeln!(
                out,
                "- **{}** ({} #{}), {}",
                inline(&result.case_id),
                inline(&result.scenario),
                result.run,
                Verdict::of(result).as_str()
            )?;
            for line in call_lines(result) {
                writeln!(out, "  - {}", inline(&line))?;
            }
        }
        if with_calls > FAILING_CASES_SHOWN {
            writeln!(out, "\n…and {} more results with tool calls", with_calls - FAILING_CASES_SHOWN)?;
        }
    }
    Ok(())
}

/// The cells `results | passed | failed | errors | pass rate | CI | mean | CI`.
fn tally_cells(t: &Tally) -> String {
    format!(
        "{} | {} | {} | {} | {} | {} | {} | {} | {}",
        t.results,
        t.passed,
        t.failed,
        t.errors,
        t.ungraded,
        percent(t.pass_rate),
        percent_interval(t.pass_rate_interval),
        score(t.mean_score),
        score_interval(t.mean_score_interval),
    )
}

/// `text` as inline Markdown that renders as itself on one line: punctuation with a meaning is
/// backslash-escaped (CommonMark allows it before any ASCII punctuation), line breaks become
/// spaces and control characters are shown as `\u{…}`.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '#' | '!' | '$' => {
                out.push('\\');
                out.push(c);
            }
            '\r' | '\n' | '\t' => out.push(' '),
            c if c.is_control() => out.push_str(&format!("\\\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::{erroring, failing, meta, passing};

    #[test]
    fn inline_text_cannot_break_a_table_or_become_markup() {
        assert_eq!(inline("a|b\nc <script>x</script> *y*"), r"a\|b c \<script\>x\</script\> \*y\*");
        assert_eq!(inline("a\u{1b}b"), r"a\\u{1b}b");
    }

    #[test]
    fn failing_cases_show_what_the_agent_answered_short_inline_long_folded() {
        let short = failing("short", "base", 0);
        let mut long = failing("long", "base", 0);
        let answer = format!("line one with ``` fences\n{}", "word ".repeat(80));
        if let Ok(output) = &mut long.output {
            output.output = serde_json::json!(answer);
        }
        let results = [short, long];
        let text = render(&Summary::of(&results, 0.5, meta(&["base"], 1)), &results);
        assert!(text.contains("  - the agent answered: answer\n"), "{text}");
        let summary = format!("<details><summary>the agent's answer ({} characters)</summary>", answer.chars().count());
        assert!(text.contains(&summary), "{text}");
        // The answer's own ``` cannot close the block around it.
        assert!(text.contains("  ````text\n  line one with ``` fences\n"), "{text}");
        assert!(text.contains(&"word ".repeat(80).trim_end().to_owned()), "the answer is whole");
    }

    #[test]
    fn report_has_the_tables_and_the_failing_cases() {
        let mut results = vec![passing("a", "base", 0), failing("b|c", "base", 0)];
        results.push(erroring("d", "base", 0, "timeout", "no reply"));
        results[0].labels = vec!["lang:fr".to_owned()];
        let text = render(&Summary::of(&results, 0.5, meta(&["base"], 1)), &results);
        assert!(text.starts_with("# smoke\n"), "{text}");
        assert!(
            text.contains(
                "**Threshold missed**: pass rate 33.3 % of 3 results (1 passed, 1 failed, 1 error, 0 ungraded) \
                 against 50.0 % required."
            ),
            "{text}"
        );
        assert!(text.contains("| base | 3 | 1 | 1 | 1 | 0 | 33.3 % |"), "{text}");
        assert!(text.contains("Pass rate = passed / (passed + failed + errors + ungraded): an error"), "{text}");
        assert!(text.contains("| exact\\_match | 2 | 0.500 | 0.000 | 1.000 | 50.0 % | 0 |"), "{text}");
        assert!(text.contains("| lang:fr | 1 | 1 | 0 | 0 | 0 | 100.0 % | 1.000 |"), "{text}");
        assert!(text.contains("| timeout | 1 | d (base #0): no reply |"), "{text}");
        assert!(
            text.contains("## Failing cases (1)\n\n- **b\\|c** (base #0), score 0.000\n  - exact\\_match 0.000 fail")
        );
    }

    #[test]
    fn failing_cases_are_truncated() {
        let results: Vec<RunResult> = (0..57).map(|i| failing(&format!("case-{i:02}"), "base", 0)).collect();
        let text = render(&Summary::of(&results, 0.5, meta(&["base"], 1)), &results);
        assert!(text.contains("## Failing cases (57)"));
        assert_eq!(text.matches("\n- **case-").count(), FAILING_CASES_SHOWN);
        assert!(text.contains("case-49") && !text.contains("case-50"));
        assert!(text.trim_end().ends_with("…and 7 more"), "{text}");
    }
}
