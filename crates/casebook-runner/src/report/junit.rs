//! JUnit XML for CI: one `<testsuite>` per scenario, one `<testcase>` per result named
//! `{case_id} #{run}` with class name `{dataset}.{scenario}`. A failed case carries a
//! `<failure>` with the graders' rationales, an error an `<error type="{kind}">`; so CI counts
//! errors apart from failures, as the summary does. An ungraded result is what the pass rate
//! makes it: a `<failure type="ungraded">` when it counts as not passed (the default), a
//! `<skipped>` when ungraded results are excluded or the run graded nothing by design
//! (`--no-grade`). Either way, CI fails the job exactly when a result counts against the pass
//! rate.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::io::{self, Write};

use super::escape::{attribute, text};
use super::{explanation, ordered};
use crate::record::RunResult;
use crate::summary::{Summary, Tally, Verdict};

/// The JUnit XML document of a run.
pub fn render(summary: &Summary, results: &[RunResult]) -> String {
    super::to_string(|out| write(summary, results, out))
}

/// Writes the JUnit XML document of a run to `out`.
pub fn write(summary: &Summary, results: &[RunResult], out: impl Write) -> io::Result<()> {
    let mut millis: HashMap<&str, u64> = HashMap::new();
    for result in results {
        *millis.entry(&result.scenario).or_default() += self::millis(result);
    }
    write_listed(summary, &|scenario| millis.get(scenario).copied().unwrap_or(0), ordered(summary, results), out)
}

/// Writes the JUnit XML document of a run to `out`, its results coming from `results` in
/// report order (as a [`Listing`](super::listing::Listing) gives them back), so that none need
/// be held; `millis` gives each scenario's time, which its `<testsuite>` states first.
pub fn write_listed<R: Borrow<RunResult>>(
    summary: &Summary,
    millis: &dyn Fn(&str) -> u64,
    results: impl IntoIterator<Item = R>,
    mut out: impl Write,
) -> io::Result<()> {
    let mut results = results.into_iter().peekable();
    let totals = &summary.totals;
    // An ungraded result is a failure or a skip, as the pass rate counts it.
    let failures_skipped =
        |t: &Tally| if ungraded_fail(summary) { (t.failed + t.ungraded, 0) } else { (t.failed, t.ungraded) };
    let (failures, skipped) = failures_skipped(totals);
    let all_time: u64 = summary.scenarios.iter().map(|s| millis(&s.scenario)).sum();
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="{}" tests="{}" failures="{}" errors="{}" skipped="{}" time="{}">"#,
        attribute(&summary.meta.experiment),
        totals.results,
        failures,
        totals.errors,
        skipped,
        seconds(all_time),
    )?;
    for scenario in &summary.scenarios {
        let tally = &scenario.tally;
        let (failures, skipped) = failures_skipped(tally);
        writeln!(
            out,
            r#"  <testsuite name="{}" tests="{}" failures="{}" errors="{}" skipped="{}" time="{}">"#,
            attribute(&scenario.scenario),
            tally.results,
            failures,
            tally.errors,
            skipped,
            seconds(millis(&scenario.scenario)),
        )?;
        writeln!(out, "    <properties>")?;
        for (name, value) in [
            ("run_id", summary.meta.run_id.as_str()),
            ("dataset", &summary.meta.dataset),
            ("dataset_version_id", &summary.meta.dataset_version_id),
        ] {
            writeln!(out, r#"      <property name="{name}" value="{}"/>"#, attribute(value))?;
        }
        writeln!(out, "    </properties>")?;
        // Report order lists a scenario's results together, in the summary's scenario order.
        while let Some(result) = results.next_if(|r| r.borrow().scenario == scenario.scenario) {
            testcase(&mut out, summary, result.borrow())?;
        }
        writeln!(out, "  </testsuite>")?;
    }
    writeln!(out, "</testsuites>")
}

fn testcase(out: &mut impl Write, summary: &Summary, result: &RunResult) -> io::Result<()> {
    write!(
        out,
        r#"    <testcase name="{}" classname="{}" time="{}""#,
        attribute(&format!("{} #{}", result.case_id, result.run)),
        attribute(&format!("{}.{}", summary.meta.dataset, result.scenario)),
        seconds(millis(result)),
    )?;
    match Verdict::of(result) {
        Verdict::Pass => writeln!(out, "/>"),
        Verdict::Fail => {
            let failing: Vec<String> = result
                .grades
                .iter()
                .filter(|g| g.outcome.as_ref().is_ok_and(|grade| !grade.pass))
                .map(|g| g.grader.clone())
                .collect();
            let score = result.score.map_or_else(|| "no score".to_owned(), |s| format!("score {s:.3}"));
            let message = if failing.is_empty() { score } else { format!("{score}; failed: {}", failing.join(", ")) };
            writeln!(out, ">")?;
            writeln!(
                out,
                r#"      <failure message="{}" type="fail">{}</failure>"#,
                attribute(&message),
                text(&explanation(result, true).join("\n")),
            )?;
            writeln!(out, "    </testcase>")
        }
        Verdict::Error => {
            let (kind, message) =
                result.failure().map_or(("error", ""), |failure| (failure.kind.as_str(), failure.message.as_str()));
            writeln!(out, ">")?;
            writeln!(
                out,
                r#"      <error type="{}" message="{}">{}</error>"#,
                attribute(kind),
                attribute(message),
                text(&explanation(result, true).join("\n")),
            )?;
            writeln!(out, "    </testcase>")
        }
        Verdict::Ungraded => {
            writeln!(out, ">")?;
            if ungraded_fail(summary) {
                writeln!(
                    out,
                    r#"      <failure message="no grader gave a verdict: counted as not passed" type="ungraded"/>"#
                )?;
            } else if summary.graders.is_empty() {
                writeln!(out, r#"      <skipped message="not graded: the run kept outputs only"/>"#)?;
            } else {
                writeln!(out, r#"      <skipped message="no grader gave a verdict: left out of the pass rate"/>"#)?;
            }
            writeln!(out, "    </testcase>")
        }
    }
}

/// Whether an ungraded result counts against the pass rate, and so is a `<failure>`: unless
/// ungraded results are excluded, or nothing was graded by design (`--no-grade`: no grader ran).
fn ungraded_fail(summary: &Summary) -> bool {
    !summary.exclude_ungraded && !summary.graders.is_empty()
}

fn millis(result: &RunResult) -> u64 {
    result.output.as_ref().map_or(0, |output| output.millis)
}

fn seconds(millis: u64) -> String {
    format!("{}.{:03}", millis / 1000, millis % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::{erroring, failing, graded, meta, passing};

    /// The `<testcase …>…</testcase>` (or self-closed) element whose name attribute is `name`.
    fn testcase_of<'a>(xml: &'a str, name: &str) -> &'a str {
        let start = xml.find(&format!(r#"<testcase name="{name}""#)).unwrap();
        let rest = &xml[start..];
        let self_closed = rest.find("/>").unwrap();
        let open_end = rest.find('>').unwrap();
        if open_end == self_closed + 1 {
            &rest[..self_closed + 2]
        } else {
            &rest[..rest.find("</testcase>").unwrap() + 11]
        }
    }

    /// A check of well-formedness enough for these documents: tags balance, attribute values
    /// hold no raw `<` or `"`, and no text holds a raw `<`, `>` or `&` outside a reference.
    fn assert_well_formed(xml: &str) {
        let body = xml.strip_prefix(r#"<?xml version="1.0" encoding="UTF-8"?>"#).unwrap();
        let mut stack: Vec<String> = Vec::new();
        let mut rest = body;
        while let Some(open) = rest.find('<') {
            assert_text(&rest[..open]);
            let close = rest[open..].find('>').unwrap() + open;
            let tag = &rest[open + 1..close];
            assert!(!tag.contains('<'), "raw < inside a tag: {tag}");
            assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
            let values: Vec<&str> = tag.split('"').skip(1).step_by(2).collect();
            for value in values {
                assert_text(value);
            }
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "mismatched close tag");
            } else if !tag.ends_with('/') {
                stack.push(tag.split_whitespace().next().unwrap().to_owned());
            }
            rest = &rest[close + 1..];
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        assert_text(rest);
    }

    fn assert_text(text: &str) {
        assert!(!text.contains('<') && !text.contains('>'), "raw markup in {text:?}");
        for (i, _) in text.match_indices('&') {
            let reference = &text[i..text[i..].find(';').map(|j| i + j + 1).unwrap()];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;", "&#10;", "&#9;", "&#13;"].contains(&reference),
                "bad reference {reference}"
            );
        }
        assert!(!text.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\t')), "control character in {text:?}");
    }

    fn nasty() -> Vec<RunResult> {
        let mut nasty_fail = graded(r#"q<1>&"2"'"#, "base", 0, &[("exact_match", 0.0, false)]);
        if let Ok(grade) = &mut nasty_fail.grades[0].outcome {
            grade.rationale = "expected <b>&amp;</b> got \u{1b}[31m\"nothing\"'".to_owned();
        }
        vec![
            passing("ok", "base", 1),
            failing("plain", "base", 0),
            nasty_fail,
            erroring("boom", "base", 2, "http", "status 502: <html>\"bad gateway\" & more\n\u{0}"),
            graded("silent", "tools", 0, &[]).with_no_verdict(),
        ]
    }

    trait NoVerdict {
        fn with_no_verdict(self) -> Self;
    }

    impl NoVerdict for RunResult {
        fn with_no_verdict(mut self) -> Self {
            self.score = None;
            self.pass = None;
            self
        }
    }

    #[test]
    fn output_is_well_formed_and_escaped() {
        let results = nasty();
        let xml = render(&Summary::of(&results, 0.5, meta(&["base", "tools"], 3)), &results);
        assert_well_formed(&xml);
        assert!(
            xml.contains(r#"<testcase name="q&lt;1&gt;&amp;&quot;2&quot;&#39; #0" classname="support.base""#),
            "{xml}"
        );
        assert!(xml.contains("expected &lt;b&gt;&amp;amp;&lt;/b&gt; got \\u{1b}[31m&quot;nothing&quot;&#39;"), "{xml}");
        assert!(
            xml.contains(r#"message="status 502: &lt;html&gt;&quot;bad gateway&quot; &amp; more&#10;\u{0}""#),
            "{xml}"
        );
    }

    #[test]
    fn failures_errors_and_skips_use_their_elements() {
        let results = nasty();
        let xml = render(&Summary::of(&results, 0.5, meta(&["base", "tools"], 3)), &results);
        // The ungraded result counts as not passed: a failure of its own type.
        assert!(xml.contains(r#"<testsuites name="smoke" tests="5" failures="3" errors="1" skipped="0""#), "{xml}");
        assert!(xml.contains(r#"<testsuite name="base" tests="4" failures="2" errors="1" skipped="0" time="4.500">"#));
        assert!(xml.contains(r#"<testsuite name="tools" tests="1" failures="1" errors="0" skipped="0""#));

        let ok = testcase_of(&xml, "ok #1");
        assert_eq!(ok, r#"<testcase name="ok #1" classname="support.base" time="1.500"/>"#);
        let plain = testcase_of(&xml, "plain #0");
        assert!(plain.contains(r#"<failure message="score 0.000; failed: exact_match" type="fail">"#), "{plain}");
        assert!(plain.contains("exact_match 0.000 fail: exact_match says 0</failure>"), "{plain}");
        assert!(!plain.contains("<error"));
        let boom = testcase_of(&xml, "boom #2");
        assert!(boom.contains(r#"<error type="http" message="status 502"#), "{boom}");
        assert!(!boom.contains("<failure"));
        assert!(
            testcase_of(&xml, "silent #0")
                .contains(r#"<failure message="no grader gave a verdict: counted as not passed" type="ungraded"/>"#),
            "{xml}"
        );
    }

    #[test]
    fn excluded_ungraded_results_are_skipped() {
        let results = nasty();
        let mut builder = crate::summary::SummaryBuilder::default().exclude_ungraded(true);
        results.iter().for_each(|r| builder.add(r));
        let xml = render(&builder.finish(0.5, meta(&["base", "tools"], 3)), &results);
        assert!(xml.contains(r#"<testsuites name="smoke" tests="5" failures="2" errors="1" skipped="1""#), "{xml}");
        assert!(xml.contains(r#"<testsuite name="tools" tests="1" failures="0" errors="0" skipped="1""#));
        assert!(
            testcase_of(&xml, "silent #0")
                .contains(r#"<skipped message="no grader gave a verdict: left out of the pass rate"/>"#),
            "{xml}"
        );
    }
}
