//! The short plain-text summaries a terminal shows after a run ([`human`]) and after a
//! comparison ([`human_comparison`]): no colour, no line wider than [`WIDTH`] columns. The
//! library only builds the text; the CLI decides where it goes.

use super::{
    flips, has_review_or_confidence, output_text, pass_rate_text, percent, percent_interval, points, review_groups,
    score, score_interval, selection_text, threshold_verdict, tool_calls_text, truncate,
};
use crate::pairing::PairedBy;
use crate::record::RunResult;
use crate::summary::{CaseRun, Comparison, PairedDifference, Summary};

/// The widest line, in characters.
pub const WIDTH: usize = 100;

/// How many cases each list of a comparison names.
pub(crate) const CASES_NAMED: usize = 10;

/// Width of the name column of the scenario and grader tables.
const NAME: usize = 32;

/// A few lines saying how the run went.
pub fn human(summary: &Summary) -> String {
    let mut lines: Vec<String> = Vec::new();
    let meta = &summary.meta;
    let t = &summary.totals;
    let k = meta.n_runs;
    lines.push(format!(
        "{} · run {} · dataset {} · {k} run{} per case",
        meta.experiment,
        meta.run_id,
        meta.dataset,
        if k == 1 { "" } else { "s" }
    ));
    // The rate the threshold compares, with what it is over, and the verdict on one line.
    lines.push(format!(
        "{} · threshold {}: {}",
        pass_rate_text(summary),
        percent(Some(summary.threshold)),
        threshold_verdict(summary)
    ));
    lines.push(format!(
        "pass rate 95 % CI {} · mean score {} (95 % CI {}) over the {} graded",
        percent_interval(t.pass_rate_interval),
        score(t.mean_score),
        score_interval(t.mean_score_interval),
        t.passed + t.failed,
    ));
    if let Some(text) = selection_text(summary) {
        lines.push(text);
    }

    if summary.scenarios.len() > 1 || k > 1 {
        lines.push(String::new());
        lines.push(format!(
            "{:<NAME$} {:>7} {:>9} {:>7} {:>8} {:>8} {:>6}",
            "scenario",
            "results",
            "pass rate",
            "mean",
            format!("pass@{k}"),
            format!("pass^{k}"),
            "errors"
        ));
        for s in &summary.scenarios {
            lines.push(format!(
                "{:<NAME$} {:>7} {:>9} {:>7} {:>8} {:>8} {:>6}",
                truncate(&s.scenario, NAME),
                s.tally.results,
                percent(s.tally.pass_rate),
                score(s.tally.mean_score),
                percent(s.pass_at_k.pass_at_k),
                percent(s.pass_at_k.pass_hat_k),
                s.tally.errors,
            ));
        }
    }

    if !summary.robustness.is_empty() {
        lines.push(String::new());
        lines.push("robustness to noise (paired case runs; errors left out)".to_owned());
        for r in &summary.robustness {
            lines.push(format!(
                "  {} vs {}: pass rate {} → {} ({}) over {} pairs; {} pass → fail, {} fail → pass, {} error{}",
                r.without_noise,
                r.scenario,
                percent(r.pass_rate_without),
                percent(r.pass_rate_with),
                points(r.difference),
                r.pairs,
                r.pass_to_fail.len(),
                r.fail_to_pass.len(),
                r.errors,
                if r.errors == 1 { "" } else { "s" },
            ));
            if !r.pass_to_fail.is_empty() {
                lines.push(format!("    pass → fail: {}", flips(&r.pass_to_fail, CASES_NAMED)));
            }
        }
    }

    if !summary.graders.is_empty() {
        lines.push(String::new());
        lines.push(format!(
            "{:<NAME$} {:>7} {:>7} {:>7} {:>7} {:>9} {:>6}",
            "grader", "grades", "mean", "min", "max", "pass rate", "errors"
        ));
        for g in &summary.graders {
            lines.push(format!(
                "{:<NAME$} {:>7} {:>7} {:>7} {:>7} {:>9} {:>6}",
                truncate(&g.grader, NAME),
                g.count,
                score(g.mean_score),
                score(g.min_score),
                score(g.max_score),
                percent(g.pass_rate),
                g.errors,
            ));
        }
    }

    if has_review_or_confidence(summary) {
        lines.push(String::new());
        lines.push(format!(
            "{:<NAME$} {:>7} {:>9} {:>7} {:>6}",
            "review · confidence", "results", "pass rate", "mean", "errors"
        ));
        for (name, t) in review_groups(summary) {
            lines.push(format!(
                "{:<NAME$} {:>7} {:>9} {:>7} {:>6}",
                name,
                t.results,
                percent(t.pass_rate),
                score(t.mean_score),
                t.errors
            ));
        }
    }

    if let Some(text) = tool_calls_text(summary) {
        lines.push(String::new());
        lines.push(text);
    }

    if !summary.errors.is_empty() {
        lines.push(String::new());
        lines.push("errors by kind".to_owned());
        for kind in &summary.errors {
            let example = kind
                .examples
                .first()
                .map(|e| format!(", e.g. {} ({} #{}): {}", e.case_id, e.scenario, e.run, e.message))
                .unwrap_or_default();
            lines.push(format!("  {} ×{}{}", kind.kind, kind.count, example));
        }
    }
    finish(lines)
}

/// How many failing case runs [`failing`] names.
pub const FAILING_NAMED: usize = 5;

/// Characters of an answer [`failing`] shows.
const EXCERPT: usize = 60;

/// The first [`FAILING_NAMED`] of `results` that failed, each with the start of what the agent
/// answered and the grader that failed it and why, then how many more failed (of `failed` in
/// all) and how to see them: the lines under a run's summary. Empty when none failed.
pub fn failing<'a>(results: impl IntoIterator<Item = &'a RunResult>, failed: u64, run_id: Option<&str>) -> String {
    let mut lines = Vec::new();
    for result in results.into_iter().filter(|r| r.pass == Some(false)).take(FAILING_NAMED) {
        if lines.is_empty() {
            lines.push(String::new());
            lines.push("failing:".to_owned());
        }
        let answer = output_text(result).map_or_else(|| "nothing".to_owned(), |text| one_line(&text));
        lines.push(format!("  {} ({} #{}) answered {answer}", result.case_id, result.scenario, result.run));
        let grade = result.grades.iter().find_map(|g| match &g.outcome {
            Ok(grade) if !grade.pass => Some(format!("{}: {}", g.grader, grade.rationale)),
            _ => None,
        });
        let why = grade.unwrap_or_else(|| "its score is below the pass mark".to_owned());
        lines.push(format!("    {}", why.split_whitespace().collect::<Vec<_>>().join(" ")));
    }
    let named = (lines.len().saturating_sub(2) / 2) as u64;
    if failed > named {
        let how = match run_id {
            Some(id) => format!(": `casebook results {id} --format markdown` lists every one"),
            None => String::new(),
        };
        lines.push(format!("  …and {} more{how}", failed - named));
    }
    finish(lines)
}

/// `text` on one line, cut to [`EXCERPT`] characters, quoted.
fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("\"{}\"", truncate(&flat, EXCERPT))
}

/// A few lines saying how run B differs from run A.
pub fn human_comparison(comparison: &Comparison) -> String {
    let keys = |list: &[PairedDifference]| list.iter().map(|d| d.key.clone()).collect::<Vec<_>>();
    let errors: Vec<CaseRun> = comparison.errors.iter().map(|e| e.key.clone()).collect();
    comparison_lines(
        comparison.pairs,
        (comparison.mean_difference, comparison.mean_difference_interval),
        &comparison.paired_scenarios,
        [
            (comparison.pass_to_fail.len(), keys(&comparison.pass_to_fail)),
            (comparison.fail_to_pass.len(), keys(&comparison.fail_to_pass)),
            (comparison.only_in_a.len(), comparison.only_in_a.clone()),
            (comparison.only_in_b.len(), comparison.only_in_b.clone()),
            (errors.len(), errors),
        ],
    )
}

/// [`human_comparison`] of a comparison made from streams, which keeps the first cases of each
/// list (as many as are named) and counts the rest.
pub fn human_compared(compared: &crate::comparison::Compared) -> String {
    let keys = |list: &[PairedDifference]| list.iter().map(|d| d.key.clone()).collect::<Vec<_>>();
    comparison_lines(
        compared.pairs,
        (compared.mean_difference, compared.mean_difference_interval),
        &compared.paired_scenarios,
        [
            (compared.pass_to_fail.count, keys(&compared.pass_to_fail.first)),
            (compared.fail_to_pass.count, keys(&compared.fail_to_pass.first)),
            (compared.only_in_a.count, compared.only_in_a.first.clone()),
            (compared.only_in_b.count, compared.only_in_b.first.clone()),
            (compared.errors.count, compared.errors.first.iter().map(|e| e.key.clone()).collect()),
        ],
    )
}

/// The terminal's comparison: the pairs and mean difference, the size of each list (pass →
/// fail, fail → pass, only in A, only in B, errors: each a count and its first cases).
fn comparison_lines(
    pairs: usize,
    (mean, interval): (Option<f64>, Option<crate::summary::Interval>),
    paired_scenarios: &[crate::pairing::ScenarioPair],
    lists: [(usize, Vec<CaseRun>); 5],
) -> String {
    let mut lines = vec![format!(
        "{} pairs · mean difference B − A {} (95 % CI {})",
        pairs,
        mean.map_or_else(|| "–".to_owned(), |d| format!("{d:+.3}")),
        interval.map_or_else(|| "–".to_owned(), |i| format!("{:+.3} to {:+.3}", i.low, i.high)),
    )];
    lines.push(format!(
        "pass → fail {} · fail → pass {} · only in A {} · only in B {} · errors {}",
        lists[0].0, lists[1].0, lists[2].0, lists[3].0, lists[4].0,
    ));
    for pair in paired_scenarios {
        let why = match (pair.by, &pair.target) {
            (PairedBy::Choice, _) => format!("as `--scenario {}={}` asks", pair.a, pair.b),
            (PairedBy::Target, Some(target)) => format!("the same target, {target}"),
            (PairedBy::Target, None) => "the same target".to_owned(),
            (PairedBy::OneEach, _) => "each run has one".to_owned(),
        };
        lines.push(format!(
            "scenario `{}` of B paired with scenario `{}` of A ({why}; the lists name A's)",
            pair.b, pair.a
        ));
    }
    for (title, (count, first)) in
        ["pass → fail", "fail → pass", "only in A", "only in B", "errors"].into_iter().zip(lists)
    {
        name_cases(&mut lines, title, count, &first);
    }
    finish(lines)
}

/// The first of `count` cases (`cases` holds at least the first [`CASES_NAMED`]) under `title`.
fn name_cases(lines: &mut Vec<String>, title: &str, count: usize, cases: &[CaseRun]) {
    if count == 0 {
        return;
    }
    lines.push(String::new());
    lines.push(format!("{title}:"));
    for case in cases.iter().take(CASES_NAMED) {
        lines.push(format!("  {} ({} #{})", case.case_id, case.scenario, case.run));
    }
    if count > CASES_NAMED {
        lines.push(format!("  …and {} more", count - CASES_NAMED));
    }
}

/// Joins the lines, each made printable and wrapped at [`WIDTH`] (never cut: an error message
/// is read whole).
fn finish(lines: Vec<String>) -> String {
    let mut out = String::new();
    for line in lines {
        let printable: String = line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        wrap(&mut out, printable.trim_end(), WIDTH);
    }
    out
}

/// Writes `line` in lines of at most `width` characters, broken at spaces where it can be; the
/// lines after the first are indented under it.
fn wrap(out: &mut String, line: &str, width: usize) {
    const INDENT: &str = "    ";
    let mut rest = line;
    let mut first = true;
    loop {
        let room = if first { width } else { width - INDENT.len() };
        if !first {
            out.push_str(INDENT);
        }
        if rest.chars().count() <= room {
            out.push_str(rest);
            out.push('\n');
            return;
        }
        let limit = rest.char_indices().nth(room).map_or(rest.len(), |(i, _)| i);
        let cut = rest[..limit].rfind(' ').filter(|&i| i > 0).unwrap_or(limit);
        out.push_str(rest[..cut].trim_end());
        out.push('\n');
        rest = rest[cut..].trim_start();
        first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::compare;
    use crate::summary::tests::{erroring, failing, graded, meta, passing};

    #[test]
    fn long_lines_are_wrapped_not_cut() {
        let message = format!("grader `contains` needs `expected.output`, which the case {} lacks", "word ".repeat(60));
        let text = finish(vec![format!("  config ×1, e.g. a (base #0): {message}")]);
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        let joined: Vec<&str> = text.split_whitespace().collect();
        let original: Vec<String> =
            format!("config ×1, e.g. a (base #0): {message}").split_whitespace().map(str::to_owned).collect();
        assert_eq!(joined, original, "every word is kept, in order");
        assert!(text.ends_with("lacks\n"), "{text}");
        // A word longer than a line is broken, not lost.
        let long = "x".repeat(WIDTH * 2 + 5);
        let text = finish(vec![long.clone()]);
        assert_eq!(text.replace(['\n', ' '], ""), long);
    }

    #[test]
    fn human_summary_is_short_and_narrow() {
        let long = "a-scenario-name-that-goes-on-and-on-and-on-and-on";
        let mut results = Vec::new();
        for run in 0..3 {
            results.push(passing("a", "base", run));
            results.push(failing("b", long, run));
        }
        results.push(erroring("c", "base", 0, "timeout", &format!("no reply\n{}", "x".repeat(300))));
        results.push(graded("d", "base", 0, &[(&"g".repeat(80), 0.5, true)]));
        let text = human(&Summary::of(&results, 0.8, meta(&["base", long], 3)));
        for line in text.lines() {
            assert!(line.chars().count() <= WIDTH, "too wide: {line}");
            assert!(!line.chars().any(char::is_control));
        }
        assert!(text.starts_with("smoke · run run-1 · dataset support · 3 runs per case\n"), "{text}");
        assert!(
            text.contains(
                "\npass rate 50.0 % of 8 results (4 passed, 3 failed, 1 error, 0 ungraded) · threshold 80.0 %: missed\n"
            ),
            "{text}"
        );
        assert!(text.contains("\npass rate 95 % CI 21.5–78.5 % · mean score 0.500 (95 % CI"), "{text}");
        assert!(text.contains(") over the 7 graded\n"), "{text}");
        assert!(text.contains("a-scenario-name-that-goes-on-an…"), "{text}");
        // The message is wrapped, not cut: all 300 `x` are there.
        assert!(text.contains("  timeout ×1, e.g. c (base #0): no reply\n    xxx"), "{text}");
        let after = text.find("no reply").map_or("", |at| &text[at..]);
        assert_eq!(after.matches('x').count(), 300, "{text}");
        assert!(text.lines().count() < 24);
    }

    #[test]
    fn human_summary_says_what_was_left_out_and_breaks_down_review_and_confidence() {
        use crate::summary::{LeftOut, Selection};
        let mut reviewed = passing("a", "base", 0);
        reviewed.review = Some(casebook_model::Review::Reviewed);
        reviewed.confidence = Some(0.9);
        let results = vec![reviewed, failing("b", "base", 0)];
        let mut meta = meta(&["base"], 1);
        meta.selection = Some(Selection {
            cases: 7,
            run: 2,
            left_out: LeftOut { filter: 1, rejected: 2, min_confidence: 1, limit: 1 },
            min_confidence: Some(0.7),
            include_rejected: false,
        });
        let text = human(&Summary::of(&results, 0.5, meta));
        assert!(
            text.contains(
                "7 cases, 2 run; left out: 1 by the filter, 2 rejected, 1 below confidence 0.7, 1 past the limit\n"
            ),
            "{text}"
        );
        assert!(text.contains("\nreview reviewed                        1   100.0 %   1.000      0\n"), "{text}");
        assert!(text.contains("\nreview unreviewed                      1     0.0 %   0.000      0\n"), "{text}");
        assert!(text.contains("\nconfidence ≥ 0.8                       1   100.0 %   1.000      0\n"), "{text}");
        assert!(text.contains("\nconfidence unrated                     1     0.0 %   0.000      0\n"), "{text}");
        // Nothing left out and nothing rated: neither part is shown.
        let plain = human(&Summary::of(&[passing("a", "base", 0)], 0.5, crate::summary::tests::meta(&["base"], 1)));
        assert!(!plain.contains("left out") && !plain.contains("review"), "{plain}");
    }

    #[test]
    fn human_comparison_names_the_flips() {
        let a = vec![passing("x", "base", 0), failing("y", "base", 0)];
        let b = vec![failing("x", "base", 0), passing("y", "base", 0), passing("z", "base", 0)];
        let text = human_comparison(&compare(&a, &b));
        assert!(text.starts_with("2 pairs · mean difference B − A +0.000"), "{text}");
        assert!(text.contains("pass → fail 1 · fail → pass 1 · only in A 0 · only in B 1 · errors 0"), "{text}");
        assert!(text.contains("pass → fail:\n  x (base #0)\n"), "{text}");
        assert!(text.contains("only in B:\n  z (base #0)\n"), "{text}");
    }
}
