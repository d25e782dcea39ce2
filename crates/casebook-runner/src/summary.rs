//! The numbers a run is judged by: totals, pass rates with confidence intervals, per scenario,
//! grader and label breakdowns, pass@k and pass^k over repeated runs, errors by kind, whether
//! the pass threshold was met ([`Summary`]); and the paired comparison of two runs
//! ([`compare`]).
//!
//! Definitions (every report renders these numbers, none recomputes them):
//!
//! - A result's [`Verdict`]: `error` when the agent or any grader failed
//!   ([`RunResult::failure`]), else `pass`/`fail` from [`RunResult::pass`], else `ungraded`
//!   (no grades at all). Errors are counted apart: never as failed cases, never as a score of 0.
//! - **Pass rate** = passed / (passed + failed + errors + ungraded): every result counts, and
//!   only a pass is a pass. An error is not a failed case (it is counted apart, and never a score
//!   of 0), but neither is it a pass; a result nobody could grade is not a pass either. With
//!   [`SummaryBuilder::exclude_ungraded`] (`--exclude-ungraded`, `exclude_ungraded: true`),
//!   ungraded results are left out of the denominator instead: passed / (passed + failed +
//!   errors). The denominator is [`Tally::pass_rate_of`]. The rate is `None` when no result was
//!   graded (passed + failed = 0). Its 95 % interval is the Wilson score interval (z = 1.959964)
//!   of passed out of that denominator. Every tally (the whole run, a scenario, a label, a review
//!   state, a confidence band) uses this one rule.
//! - **Mean score** = mean of the scores of passed and failed results. Its 95 % interval is
//!   Student's t interval (mean ± t₀.₉₇₅,ₙ₋₁ · s/√n, s the sample standard deviation), clipped to
//!   0..1, the range of scores; none for fewer than two scores.
//! - **threshold_met** = at least one result was graded (passed + failed ≥ 1) and the whole run's
//!   pass rate, the one the reports print, is at least the threshold. A run that graded nothing
//!   never meets it, whatever the threshold.
//! - Per review state and per confidence band (see [`REVIEW_STATES`], [`CONFIDENCE_BANDS`]):
//!   tallies as for a label, by the case's `review` and `confidence` as run.
//! - **pass@k / pass^k**, per scenario, with k = the experiment's `n_runs`: over the cases whose
//!   runs `0..k` are all present and graded (cases with an error, an ungraded or a missing run
//!   are left out and counted in `excluded`), pass@k = the fraction with at least one passing run
//!   and pass^k = the fraction with all k runs passing. With n = k samples per case the unbiased
//!   estimator 1 − C(n−c, k)/C(n, k) is exactly this indicator, so no estimator is needed.
//! - [`compare`] pairs results by (case id, scenario, run); a difference is B − A, so a positive
//!   mean difference means B scored higher. Its 95 % interval is the paired t interval, clipped to
//!   −1..1.
//! - **Robustness** ([`Robustness`]), when the experiment has scenarios with noise
//!   ([`crate::noise`]) and one without: each noisy scenario against its noise-free partner
//!   (see [`crate::noise::pairs`]), paired by (case id, run). A pair is a case run passed or
//!   failed on both sides; a case run that is an error on either side is counted in `errors`,
//!   one ungraded or missing on a side in `unpaired`, and neither is in the rates. The pass
//!   rates are over the pairs, so they are comparable; `difference` = with noise − without.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::pairing::{Ran, ScenarioPair, pair_scenarios};
use crate::record::{Failure, RunResult};

/// The 0.975 quantile of the standard normal distribution: two-sided 95 % intervals.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// How many example errors a summary keeps per kind.
pub const ERROR_EXAMPLES_PER_KIND: usize = 3;

/// What a result counts as in every tally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    /// The agent or a grader failed: counted apart, never as a failed case.
    Error,
    /// Neither an error nor a pass flag: no grader gave a verdict.
    Ungraded,
}

impl Verdict {
    pub fn of(result: &RunResult) -> Self {
        if result.failure().is_some() {
            return Self::Error;
        }
        match result.pass {
            Some(true) => Self::Pass,
            Some(false) => Self::Fail,
            None => Self::Ungraded,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Error => "error",
            Self::Ungraded => "ungraded",
        }
    }
}

/// A two-sided 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// What the run was: the context a summary is read in. The caller supplies the times (the
/// clock is injected), as RFC 3339 strings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub run_id: String,
    pub experiment: String,
    /// The dataset's name (or file).
    pub dataset: String,
    /// Content id of the dataset version that was run.
    pub dataset_version_id: String,
    pub started: String,
    pub finished: String,
    pub n_runs: u32,
    /// The experiment's scenarios, in its order.
    pub scenarios: Vec<String>,
    /// Which of the dataset's cases were run, and why the others were not; `None` in runs
    /// kept before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// Each scenario's target, in `scenarios`' order, as [`crate::target::recorded`]
    /// describes it (kind, URL, model, program and arguments; never a key or a header): what
    /// `compare` pairs differently named scenarios by. Empty in runs kept before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<serde_json::Value>,
}

/// How many cases of the dataset version a run had, ran, and left out, by reason. The reasons
/// apply in this order, each counting only what the ones before it kept: the filter (the
/// experiment's `filter` and `tags`, and `run --where`, `--tag`), the review state (`rejected` cases, unless
/// they were asked for), `min_confidence` (cases without a confidence are kept), then `limit`.
/// So `cases = run + every left_out count`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// Cases in the dataset version (or file).
    pub cases: u64,
    /// Cases run.
    pub run: u64,
    pub left_out: LeftOut,
    /// The `min_confidence` the run used, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_confidence: Option<f64>,
    /// Whether cases reviewed as `rejected` were run.
    #[serde(default)]
    pub include_rejected: bool,
}

/// Cases left out of a run, by reason (see [`Selection`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// Not selected by the filter or tags.
    pub filter: u64,
    /// Reviewed as `rejected`: their ground truth was judged wrong.
    pub rejected: u64,
    /// A confidence below `min_confidence`.
    pub min_confidence: u64,
    /// Past the `limit`.
    pub limit: u64,
}

impl LeftOut {
    pub fn total(&self) -> u64 {
        self.filter + self.rejected + self.min_confidence + self.limit
    }
}

/// Counts and rates of a set of results: the whole run, one scenario or one label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    pub results: usize,
    pub passed: usize,
    pub failed: usize,
    pub errors: usize,
    pub ungraded: usize,
    /// passed / [`Tally::pass_rate_of`]; `None` when nothing was graded (no pass, no failure).
    pub pass_rate: Option<f64>,
    /// The results the pass rate is over: passed + failed + errors + ungraded, or without the
    /// ungraded when they are excluded ([`Summary::exclude_ungraded`]). 0 in summaries kept
    /// before it was recorded (see [`Summary::predates_pass_rate_of`]).
    #[serde(default)]
    pub pass_rate_of: usize,
    /// Wilson score interval of the pass rate.
    pub pass_rate_interval: Option<Interval>,
    /// Mean score of the passed and failed results.
    pub mean_score: Option<f64>,
    /// Student's t interval of the mean score, clipped to 0..1.
    pub mean_score_interval: Option<Interval>,
}

/// pass@k and pass^k of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassAtK {
    /// The experiment's `n_runs`.
    pub k: u32,
    /// Cases whose k runs are all present and graded: the denominator.
    pub cases: usize,
    /// Cases left out because a run is missing, an error or ungraded.
    pub excluded: usize,
    /// Fraction of the cases with at least one passing run.
    pub pass_at_k: Option<f64>,
    /// pass^k: fraction of the cases with all k runs passing.
    pub pass_hat_k: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioSummary {
    pub scenario: String,
    #[serde(flatten)]
    pub tally: Tally,
    pub pass_at_k: PassAtK,
}

/// One grader over the whole run: only the grades it gave (a run whose agent failed has none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraderSummary {
    pub grader: String,
    /// Grades given.
    pub count: usize,
    pub passed: usize,
    /// Times the grader itself failed.
    pub errors: usize,
    pub mean_score: Option<f64>,
    pub min_score: Option<f64>,
    pub max_score: Option<f64>,
    /// passed / count.
    pub pass_rate: Option<f64>,
}

/// One label over the whole run. A result counts once in each of its labels; a `key:value`
/// label is a label of its own (labels sort by name, so the values of a key sit together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelSummary {
    pub label: String,
    #[serde(flatten)]
    pub tally: Tally,
}

/// One review state over the whole run: `reviewed`, `draft`, `rejected`, or `unreviewed` for
/// cases with none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewSummary {
    pub review: String,
    #[serde(flatten)]
    pub tally: Tally,
}

/// One band of label confidence over the whole run: [`CONFIDENCE_BANDS`], or `unrated` for
/// cases without a confidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfidenceSummary {
    pub band: String,
    #[serde(flatten)]
    pub tally: Tally,
}

/// The review states in the order summaries list them.
pub const REVIEW_STATES: [&str; 4] = ["reviewed", "draft", "rejected", "unreviewed"];

/// The confidence bands, low to high, then cases without a confidence: below 0.5, from 0.5 to
/// below 0.8, from 0.8.
pub const CONFIDENCE_BANDS: [&str; 4] = ["< 0.5", "0.5–0.8", "≥ 0.8", "unrated"];

/// The review state a result is counted under (an index of [`REVIEW_STATES`]).
fn review_group(review: Option<casebook_model::Review>) -> usize {
    match review {
        Some(casebook_model::Review::Reviewed) => 0,
        Some(casebook_model::Review::Draft) => 1,
        Some(casebook_model::Review::Rejected) => 2,
        None => 3,
    }
}

/// The confidence band a result is counted under (an index of [`CONFIDENCE_BANDS`]).
fn confidence_band(confidence: Option<f64>) -> usize {
    match confidence {
        Some(c) if c < 0.5 => 0,
        Some(c) if c < 0.8 => 1,
        Some(_) => 2,
        None => 3,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorExample {
    pub case_id: String,
    pub scenario: String,
    pub run: u32,
    pub message: String,
}

/// The errors of one [`Failure::kind`]: each error result counts once, by its first failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorKindSummary {
    pub kind: String,
    pub count: usize,
    /// The first few, in result order.
    pub examples: Vec<ErrorExample>,
}

/// Everything reports say about a run; serialised as is for `--format json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub meta: RunMeta,
    /// The pass rate required, 0..1.
    pub threshold: f64,
    /// Whether ungraded results were left out of the pass rates rather than counted as not
    /// passed (false, the default).
    #[serde(default)]
    pub exclude_ungraded: bool,
    /// Something graded, and the whole run's pass rate (`totals.pass_rate`) ≥ threshold.
    pub threshold_met: bool,
    pub totals: Tally,
    /// The experiment's scenarios in its order, then any other scenario found in the results.
    pub scenarios: Vec<ScenarioSummary>,
    /// In order of first appearance.
    pub graders: Vec<GraderSummary>,
    /// Sorted by label.
    pub labels: Vec<LabelSummary>,
    /// The review states that have results, in the order of [`REVIEW_STATES`] (empty in
    /// summaries kept before it was recorded).
    #[serde(default)]
    pub review: Vec<ReviewSummary>,
    /// The confidence bands that have results, in the order of [`CONFIDENCE_BANDS`].
    #[serde(default)]
    pub confidence: Vec<ConfidenceSummary>,
    /// Most frequent kind first.
    pub errors: Vec<ErrorKindSummary>,
    /// Each scenario with noise against its noise-free partner; empty (and left out of the
    /// JSON) unless the experiment has both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub robustness: Vec<Robustness>,
    /// The tool calls casebook answered from the cases' world snapshots; left out of the JSON
    /// when it answered none.
    #[serde(default, skip_serializing_if = "ServedCalls::is_empty")]
    pub tool_calls: ServedCalls,
}

/// How many tool calls a run's agents asked casebook to answer, and how many of them were
/// outside the cases' snapshots (no recorded answer and no default, or an unknown tool).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServedCalls {
    pub served: u64,
    pub unmatched: u64,
    /// Results with at least one unmatched call.
    pub results_with_unmatched: u64,
    /// Some of those results (at most [`ERROR_EXAMPLES_PER_KIND`] × 3), sorted.
    pub unmatched_in: Vec<CaseRun>,
}

impl ServedCalls {
    pub fn is_empty(&self) -> bool {
        self.served == 0
    }

    fn add(&mut self, result: &RunResult) {
        let Ok(output) = &result.output else { return };
        self.served += u64::from(output.served_calls);
        if output.unmatched_calls > 0 {
            self.unmatched += u64::from(output.unmatched_calls);
            self.results_with_unmatched += 1;
            if self.unmatched_in.len() < ERROR_EXAMPLES_PER_KIND * 3 {
                self.unmatched_in.push(CaseRun::of(result));
            }
        }
    }
}

/// One case run whose verdict noise changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Flip {
    pub case_id: String,
    pub run: u32,
}

/// How a scenario with noise did against the same cases without it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Robustness {
    /// The scenario with noise.
    pub scenario: String,
    /// The noise-free scenario it is paired with.
    pub without_noise: String,
    /// Case runs passed or failed on both sides.
    pub pairs: usize,
    /// Pass rate of the pairs without noise, and with it.
    pub pass_rate_without: Option<f64>,
    pub pass_rate_with: Option<f64>,
    /// `pass_rate_with − pass_rate_without`: negative when noise hurts.
    pub difference: Option<f64>,
    /// Passed without noise, failed with it; by case id and run.
    pub pass_to_fail: Vec<Flip>,
    /// Failed without noise, passed with it.
    pub fail_to_pass: Vec<Flip>,
    /// Case runs that are an error on either side: not paired.
    pub errors: usize,
    /// Case runs ungraded or missing on a side: not paired.
    pub unpaired: usize,
}

impl Summary {
    pub fn of(results: &[RunResult], threshold: f64, meta: RunMeta) -> Self {
        let mut builder = SummaryBuilder::default();
        for result in results {
            builder.add(result);
        }
        builder.finish(threshold, meta)
    }

    /// Whether this summary was kept before pass rates counted every result (errors and
    /// ungraded results were left out of them then): its rates and verdict are not this
    /// version's, and should be computed again from the run's results.
    pub fn predates_pass_rate_of(&self) -> bool {
        self.totals.results > 0 && self.totals.pass_rate_of == 0
    }
}

/// A [`Summary`] built one result at a time, so that a run of any size need not keep its
/// results: what it holds is counts and running sums, and the verdicts of the cases still open.
///
/// pass@k and robustness need a case's verdicts across its runs and scenarios: they are kept
/// per case until the case is closed, then folded into counts. With
/// [`SummaryBuilder::closing_cases`] a case is closed as soon as it has all its results (a run
/// makes a case's jobs one after the other, so only the cases in flight are open); otherwise
/// every case stays open until [`SummaryBuilder::finish`].
#[derive(Debug, Default)]
pub struct SummaryBuilder {
    totals: Counter,
    scenarios: BTreeMap<String, Counter>,
    /// The open cases: case id → its verdicts.
    open: HashMap<String, CaseVerdicts>,
    /// `(results a case has, k)` when cases are closed as they complete.
    closing: Option<(usize, u32)>,
    /// pass@k counts of the closed cases, by scenario.
    at_k: HashMap<String, AtK>,
    labels: BTreeMap<String, Counter>,
    review: [Counter; 4],
    confidence: [Counter; 4],
    graders: Vec<GraderCounter>,
    grader_index: HashMap<String, usize>,
    errors: BTreeMap<String, ErrorKindSummary>,
    /// `(scenario with noise, scenario without)`.
    noise_pairs: Vec<(String, String)>,
    tool_calls: ServedCalls,
    /// The robustness of each noise pair over the closed cases.
    robust: Vec<RobustCount>,
    exclude_ungraded: bool,
}

/// One case's verdicts: scenario → run → verdict (the first result of a run counts), and how
/// many results it has had.
#[derive(Debug, Default)]
struct CaseVerdicts {
    results: usize,
    runs: BTreeMap<String, BTreeMap<u32, Verdict>>,
}

/// pass@k counts of one scenario's closed cases.
#[derive(Debug, Default, Clone, Copy)]
struct AtK {
    counted: usize,
    excluded: usize,
    any: usize,
    all: usize,
}

/// A [`Robustness`] being counted.
#[derive(Debug, Default)]
struct RobustCount {
    pairs: usize,
    passed_without: usize,
    passed_with: usize,
    pass_to_fail: Vec<Flip>,
    fail_to_pass: Vec<Flip>,
    errors: usize,
    unpaired: usize,
}

impl SummaryBuilder {
    /// Asks for a [`Robustness`] of each `(scenario with noise, scenario without)`.
    pub fn with_noise_pairs(mut self, pairs: Vec<(String, String)>) -> Self {
        self.robust = pairs.iter().map(|_| RobustCount::default()).collect();
        self.noise_pairs = pairs;
        self
    }

    /// With `true`, ungraded results are left out of every pass rate (and so of the threshold)
    /// instead of counting as not passed.
    pub fn exclude_ungraded(mut self, exclude: bool) -> Self {
        self.exclude_ungraded = exclude;
        self
    }

    /// Closes each case once it has `scenarios × n_runs` results, so that memory holds only
    /// the cases whose runs are still coming. `n_runs` is the k of pass@k: the `n_runs` of the
    /// [`RunMeta`] given to [`SummaryBuilder::finish`]. A case id must not come back once its
    /// case is closed (a dataset's ids are unique).
    pub fn closing_cases(mut self, scenarios: usize, n_runs: u32) -> Self {
        self.closing = Some((scenarios * n_runs as usize, n_runs));
        self
    }

    pub fn add(&mut self, result: &RunResult) {
        let verdict = Verdict::of(result);
        self.tool_calls.add(result);
        self.totals.add(result, verdict);
        match self.scenarios.get_mut(&result.scenario) {
            Some(counter) => counter.add(result, verdict),
            None => self.scenarios.entry(result.scenario.clone()).or_default().add(result, verdict),
        }
        let case = match self.open.get_mut(&result.case_id) {
            Some(case) => case,
            None => self.open.entry(result.case_id.clone()).or_default(),
        };
        let runs = match case.runs.get_mut(&result.scenario) {
            Some(runs) => runs,
            None => case.runs.entry(result.scenario.clone()).or_default(),
        };
        runs.entry(result.run).or_insert(verdict);
        case.results += 1;
        if let Some((per_case, k)) = self.closing {
            if case.results >= per_case {
                if let Some(case) = self.open.remove(&result.case_id) {
                    self.close(&result.case_id, &case, k);
                }
            }
        }
        let distinct: BTreeSet<&str> = result.labels.iter().map(String::as_str).collect();
        for label in distinct {
            match self.labels.get_mut(label) {
                Some(counter) => counter.add(result, verdict),
                None => self.labels.entry(label.to_owned()).or_default().add(result, verdict),
            }
        }
        self.review[review_group(result.review)].add(result, verdict);
        self.confidence[confidence_band(result.confidence)].add(result, verdict);
        for grade in &result.grades {
            let index = match self.grader_index.get(&grade.grader) {
                Some(index) => *index,
                None => {
                    self.graders.push(GraderCounter::new(&grade.grader));
                    self.grader_index.insert(grade.grader.clone(), self.graders.len() - 1);
                    self.graders.len() - 1
                }
            };
            if let Some(counter) = self.graders.get_mut(index) {
                counter.add(&grade.outcome);
            }
        }
        if let Some(failure) = result.failure() {
            let entry = self.errors.entry(failure.kind.clone()).or_insert_with(|| ErrorKindSummary {
                kind: failure.kind.clone(),
                count: 0,
                examples: Vec::new(),
            });
            entry.count += 1;
            if entry.examples.len() < ERROR_EXAMPLES_PER_KIND {
                entry.examples.push(ErrorExample {
                    case_id: result.case_id.clone(),
                    scenario: result.scenario.clone(),
                    run: result.run,
                    message: failure.message.clone(),
                });
            }
        }
    }

    /// Folds case `id`'s verdicts into the pass@k and robustness counts.
    fn close(&mut self, id: &str, case: &CaseVerdicts, k: u32) {
        for (scenario, runs) in &case.runs {
            let at_k = match self.at_k.get_mut(scenario) {
                Some(at_k) => at_k,
                None => self.at_k.entry(scenario.clone()).or_default(),
            };
            at_k.add(runs, k);
        }
        let empty = BTreeMap::new();
        for ((noisy, clean), count) in self.noise_pairs.iter().zip(&mut self.robust) {
            let without = case.runs.get(clean).unwrap_or(&empty);
            let with = case.runs.get(noisy).unwrap_or(&empty);
            count.add(id, without, with);
        }
    }

    pub fn finish(mut self, threshold: f64, meta: RunMeta) -> Summary {
        let k = self.closing.map_or(meta.n_runs, |(_, k)| k);
        for (id, case) in std::mem::take(&mut self.open) {
            self.close(&id, &case, k);
        }
        let exclude = self.exclude_ungraded;
        let mut names: Vec<&str> = Vec::new();
        for name in &meta.scenarios {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        for name in self.scenarios.keys() {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        let scenarios = names
            .into_iter()
            .map(|name| ScenarioSummary {
                scenario: name.to_owned(),
                tally: self.scenarios.get(name).unwrap_or(&Counter::default()).tally(exclude),
                pass_at_k: self.at_k.get(name).copied().unwrap_or_default().pass_at_k(meta.n_runs),
            })
            .collect();

        let totals = self.totals.tally(exclude);
        // `pass_rate` is `None` when nothing was graded: such a run never meets a threshold.
        let threshold_met = totals.pass_rate.is_some_and(|rate| rate >= threshold);
        let mut errors: Vec<ErrorKindSummary> = self.errors.into_values().collect();
        errors.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.kind.cmp(&b.kind)));

        let robustness = self
            .noise_pairs
            .into_iter()
            .zip(self.robust)
            .map(|((noisy, clean), count)| count.robustness(noisy, clean))
            .collect();
        Summary {
            meta,
            threshold,
            exclude_ungraded: exclude,
            threshold_met,
            totals,
            scenarios,
            graders: self.graders.into_iter().map(GraderCounter::summary).collect(),
            labels: self
                .labels
                .into_iter()
                .map(|(label, counter)| LabelSummary { label, tally: counter.tally(exclude) })
                .collect(),
            review: REVIEW_STATES
                .iter()
                .zip(&self.review)
                .filter(|(_, counter)| counter.results > 0)
                .map(|(state, counter)| ReviewSummary { review: (*state).to_owned(), tally: counter.tally(exclude) })
                .collect(),
            confidence: CONFIDENCE_BANDS
                .iter()
                .zip(&self.confidence)
                .filter(|(_, counter)| counter.results > 0)
                .map(|(band, counter)| ConfidenceSummary { band: (*band).to_owned(), tally: counter.tally(exclude) })
                .collect(),
            errors,
            robustness,
            tool_calls: ServedCalls {
                unmatched_in: {
                    let mut named = self.tool_calls.unmatched_in;
                    named.sort();
                    named
                },
                ..self.tool_calls
            },
        }
    }
}

impl AtK {
    /// Counts a case by its verdicts in one scenario (run → verdict): in the denominator when
    /// its runs `0..k` are all there and graded, left out otherwise.
    fn add(&mut self, runs: &BTreeMap<u32, Verdict>, k: u32) {
        let verdicts = (0..k).map(|run| runs.get(&run).copied());
        let (mut complete, mut any, mut all) = (k > 0, false, true);
        for verdict in verdicts {
            match verdict {
                Some(Verdict::Pass) => any = true,
                Some(Verdict::Fail) => all = false,
                _ => complete = false,
            }
        }
        if !complete {
            self.excluded += 1;
            return;
        }
        self.counted += 1;
        self.any += usize::from(any);
        self.all += usize::from(all);
    }

    fn pass_at_k(self, k: u32) -> PassAtK {
        PassAtK {
            k,
            cases: self.counted,
            excluded: self.excluded,
            pass_at_k: ratio(self.any, self.counted),
            pass_hat_k: ratio(self.all, self.counted),
        }
    }
}

impl RobustCount {
    /// Counts case `case`'s runs without noise against its runs with it (run → verdict).
    fn add(&mut self, case: &str, without: &BTreeMap<u32, Verdict>, with: &BTreeMap<u32, Verdict>) {
        let runs: BTreeSet<u32> = without.keys().chain(with.keys()).copied().collect();
        for run in runs {
            let flip = || Flip { case_id: case.to_owned(), run };
            match (without.get(&run).copied(), with.get(&run).copied()) {
                (Some(Verdict::Error), _) | (_, Some(Verdict::Error)) => self.errors += 1,
                (Some(a @ (Verdict::Pass | Verdict::Fail)), Some(b @ (Verdict::Pass | Verdict::Fail))) => {
                    self.pairs += 1;
                    self.passed_without += usize::from(a == Verdict::Pass);
                    self.passed_with += usize::from(b == Verdict::Pass);
                    match (a, b) {
                        (Verdict::Pass, Verdict::Fail) => self.pass_to_fail.push(flip()),
                        (Verdict::Fail, Verdict::Pass) => self.fail_to_pass.push(flip()),
                        _ => {}
                    }
                }
                _ => self.unpaired += 1,
            }
        }
    }

    /// The [`Robustness`] of `noisy` against `clean`; flips by case id and run, whatever order
    /// the cases were closed in.
    fn robustness(mut self, noisy: String, clean: String) -> Robustness {
        self.pass_to_fail.sort();
        self.fail_to_pass.sort();
        let pass_rate_without = ratio(self.passed_without, self.pairs);
        let pass_rate_with = ratio(self.passed_with, self.pairs);
        Robustness {
            scenario: noisy,
            without_noise: clean,
            pairs: self.pairs,
            pass_rate_without,
            pass_rate_with,
            difference: pass_rate_with.zip(pass_rate_without).map(|(w, wo)| w - wo),
            pass_to_fail: self.pass_to_fail,
            fail_to_pass: self.fail_to_pass,
            errors: self.errors,
            unpaired: self.unpaired,
        }
    }
}

/// The Wilson score interval at 95 % of `successes` out of `n`; `None` when `n` is 0.
pub fn wilson_interval(successes: usize, n: usize) -> Option<Interval> {
    if n == 0 {
        return None;
    }
    let n = n as f64;
    let p = successes as f64 / n;
    let z2 = Z_95 * Z_95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    // At 0 and n successes the bounds are exactly 0 and 1; rounding would leave a trace.
    let low = if successes == 0 { 0.0 } else { (centre - half).max(0.0) };
    let high = if p >= 1.0 { 1.0 } else { (centre + half).min(1.0) };
    Some(Interval { low, high })
}

/// The mean of `values` with Student's t interval at 95 %, clipped to `low..=high`. The
/// interval is `None` for fewer than two values; everything is `None` for none.
pub fn mean_interval(values: &[f64], low: f64, high: f64) -> (Option<f64>, Option<Interval>) {
    if values.is_empty() {
        return (None, None);
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let variance = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n.saturating_sub(1).max(1) as f64;
    (Some(mean), t_interval(mean, variance, n, low, high))
}

/// Student's t interval at 95 % of a mean of `n` values of sample variance `variance`, clipped
/// to `low..=high`; `None` for fewer than two values.
pub(crate) fn t_interval(mean: f64, variance: f64, n: usize, low: f64, high: f64) -> Option<Interval> {
    if n < 2 {
        return None;
    }
    let half = t_975(n - 1) * (variance / n as f64).sqrt();
    Some(Interval { low: (mean - half).max(low), high: (mean + half).min(high) })
}

/// Scores as running sums, for a mean and its interval without keeping the scores: the sum in
/// the order they came (so the mean is the one a list of them gives), and Welford's sum of
/// squared deviations for the variance.
#[derive(Debug, Clone, Copy)]
struct Scores {
    n: usize,
    /// Starts at −0.0, as `Iterator::sum` of floats does.
    sum: f64,
    /// The running mean and sum of squared deviations from it (Welford).
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Default for Scores {
    fn default() -> Self {
        Self { n: 0, sum: -0.0, mean: 0.0, m2: 0.0, min: f64::NAN, max: f64::NAN }
    }
}

impl Scores {
    fn push(&mut self, score: f64) {
        self.n += 1;
        self.sum += score;
        let delta = score - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (score - self.mean);
        // As `reduce(f64::min)` over the list: the first score, then each against it.
        (self.min, self.max) = if self.n == 1 { (score, score) } else { (self.min.min(score), self.max.max(score)) };
    }

    fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    /// The mean with its t interval clipped to `low..=high`, as [`mean_interval`] gives them.
    fn mean_interval(&self, low: f64, high: f64) -> (Option<f64>, Option<Interval>) {
        let Some(mean) = self.mean() else { return (None, None) };
        let variance = self.m2 / self.n.saturating_sub(1).max(1) as f64;
        (Some(mean), t_interval(mean, variance, self.n, low, high))
    }

    fn min(&self) -> Option<f64> {
        (self.n > 0).then_some(self.min)
    }

    fn max(&self) -> Option<f64> {
        (self.n > 0).then_some(self.max)
    }
}

/// The 0.975 quantile of Student's t distribution with `df` degrees of freedom: exact values up
/// to 30, then the Cornish–Fisher expansion (error below 10⁻⁵ there and shrinking).
fn t_975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706_204_7,
        4.302_652_7,
        3.182_446_3,
        2.776_445_1,
        2.570_581_8,
        2.446_911_9,
        2.364_624_3,
        2.306_004_1,
        2.262_157_2,
        2.228_138_9,
        2.200_985_2,
        2.178_812_8,
        2.160_368_7,
        2.144_786_7,
        2.131_449_5,
        2.119_905_3,
        2.109_815_6,
        2.100_922_0,
        2.093_024_1,
        2.085_963_4,
        2.079_613_8,
        2.073_873_1,
        2.068_657_6,
        2.063_898_6,
        2.059_538_6,
        2.055_529_4,
        2.051_830_5,
        2.048_407_1,
        2.045_229_6,
        2.042_272_5,
    ];
    if let Some(t) = df.checked_sub(1).and_then(|i| TABLE.get(i)) {
        return *t;
    }
    cornish_fisher_t_975(df as f64)
}

fn cornish_fisher_t_975(df: f64) -> f64 {
    let z = Z_95;
    let z3 = z.powi(3);
    let z5 = z.powi(5);
    let z7 = z.powi(7);
    z + (z3 + z) / (4.0 * df)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * df * df)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * df * df * df)
}

#[derive(Debug, Default)]
struct Counter {
    results: usize,
    passed: usize,
    failed: usize,
    errors: usize,
    ungraded: usize,
    scores: Scores,
}

impl Counter {
    fn add(&mut self, result: &RunResult, verdict: Verdict) {
        self.results += 1;
        match verdict {
            Verdict::Pass => self.passed += 1,
            Verdict::Fail => self.failed += 1,
            Verdict::Error => self.errors += 1,
            Verdict::Ungraded => self.ungraded += 1,
        }
        if matches!(verdict, Verdict::Pass | Verdict::Fail) {
            if let Some(score) = result.score {
                self.scores.push(score);
            }
        }
    }

    /// The counts and rates, under the module's one rule for pass rates.
    fn tally(&self, exclude_ungraded: bool) -> Tally {
        let graded = self.passed + self.failed;
        let of = self.results - if exclude_ungraded { self.ungraded } else { 0 };
        let (mean_score, mean_score_interval) = self.scores.mean_interval(0.0, 1.0);
        Tally {
            results: self.results,
            passed: self.passed,
            failed: self.failed,
            errors: self.errors,
            ungraded: self.ungraded,
            pass_rate: if graded == 0 { None } else { ratio(self.passed, of) },
            pass_rate_of: of,
            pass_rate_interval: if graded == 0 { None } else { wilson_interval(self.passed, of) },
            mean_score,
            mean_score_interval,
        }
    }
}

#[derive(Debug)]
struct GraderCounter {
    grader: String,
    passed: usize,
    errors: usize,
    scores: Scores,
}

impl GraderCounter {
    fn new(grader: &str) -> Self {
        Self { grader: grader.to_owned(), passed: 0, errors: 0, scores: Scores::default() }
    }

    fn add(&mut self, outcome: &Result<crate::record::Grade, Failure>) {
        match outcome {
            Ok(grade) => {
                self.scores.push(grade.score);
                self.passed += usize::from(grade.pass);
            }
            Err(_) => self.errors += 1,
        }
    }

    fn summary(self) -> GraderSummary {
        let count = self.scores.n;
        GraderSummary {
            mean_score: self.scores.mean(),
            min_score: self.scores.min(),
            max_score: self.scores.max(),
            pass_rate: ratio(self.passed, count),
            grader: self.grader,
            count,
            passed: self.passed,
            errors: self.errors,
        }
    }
}

fn ratio(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// One result's place in a run: what [`compare`] matches on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CaseRun {
    pub case_id: String,
    pub scenario: String,
    pub run: u32,
}

impl CaseRun {
    fn of(result: &RunResult) -> Self {
        Self { case_id: result.case_id.clone(), scenario: result.scenario.clone(), run: result.run }
    }
}

/// One case run scored on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    #[serde(flatten)]
    pub key: CaseRun,
    pub score_a: f64,
    pub score_b: f64,
    /// `score_b - score_a`.
    pub difference: f64,
    pub verdict_a: Verdict,
    pub verdict_b: Verdict,
}

/// One case run that is an error on at least one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedError {
    #[serde(flatten)]
    pub key: CaseRun,
    pub a: Option<Failure>,
    pub b: Option<Failure>,
}

/// Run B against run A, case run by case run; every list is sorted by (case id, scenario, run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Case runs scored on both sides: the pairs the mean difference is over.
    pub pairs: usize,
    /// Mean of B − A over the pairs.
    pub mean_difference: Option<f64>,
    /// Paired t interval of the mean difference, clipped to −1..1.
    pub mean_difference_interval: Option<Interval>,
    /// Passed in A, failed in B: regressions.
    pub pass_to_fail: Vec<PairedDifference>,
    /// Failed in A, passed in B: fixes.
    pub fail_to_pass: Vec<PairedDifference>,
    pub only_in_a: Vec<CaseRun>,
    pub only_in_b: Vec<CaseRun>,
    /// An error on either side: not paired.
    pub errors: Vec<PairedError>,
    /// Present on both sides, no error, but without a score on one side: not paired.
    pub ungraded: usize,
    /// Every pair.
    pub differences: Vec<PairedDifference>,
    /// B's scenarios paired with differently named ones of A ([`crate::pairing`]): B's results
    /// are paired as if they had A's scenario, and the lists name A's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paired_scenarios: Vec<ScenarioPair>,
}

/// Pairs the results of two runs by (case id, scenario, run); when a side holds the same case run
/// twice, its first result is used. Two runs of one scenario each, named differently, pair by
/// (case id, run) ([`Comparison::paired_scenarios`]); [`compare_paired`] pairs by target too.
pub fn compare(a: &[RunResult], b: &[RunResult]) -> Comparison {
    let pairs = pair_scenarios(&Ran::of(a, None), &Ran::of(b, None), &[]).unwrap_or_default();
    compare_paired(a, b, pairs)
}

/// [`compare`], B's scenarios named as `pairs` says ([`crate::pairing::pair_scenarios`]).
pub fn compare_paired(a: &[RunResult], b: &[RunResult], pairs: Vec<ScenarioPair>) -> Comparison {
    let (a, mut b) = (by_case_run(a), by_case_run(b));
    if !pairs.is_empty() {
        let names: HashMap<&str, &str> = pairs.iter().map(|p| (p.b.as_str(), p.a.as_str())).collect();
        b = b
            .into_iter()
            .map(|(key, result)| match names.get(key.scenario.as_str()) {
                Some(name) => (CaseRun { scenario: (*name).to_owned(), ..key }, result),
                None => (key, result),
            })
            .collect();
    }
    let mut comparison = Comparison {
        pairs: 0,
        mean_difference: None,
        mean_difference_interval: None,
        pass_to_fail: Vec::new(),
        fail_to_pass: Vec::new(),
        only_in_a: Vec::new(),
        only_in_b: Vec::new(),
        errors: Vec::new(),
        ungraded: 0,
        differences: Vec::new(),
        paired_scenarios: pairs,
    };
    for (key, left) in a {
        let Some(right) = b.remove(&key) else {
            comparison.only_in_a.push(key);
            continue;
        };
        let (failure_a, failure_b) = (left.failure(), right.failure());
        if failure_a.is_some() || failure_b.is_some() {
            comparison.errors.push(PairedError { key, a: failure_a.cloned(), b: failure_b.cloned() });
            continue;
        }
        let (Some(score_a), Some(score_b)) = (left.score, right.score) else {
            comparison.ungraded += 1;
            continue;
        };
        let pair = PairedDifference {
            key,
            score_a,
            score_b,
            difference: score_b - score_a,
            verdict_a: Verdict::of(left),
            verdict_b: Verdict::of(right),
        };
        match (pair.verdict_a, pair.verdict_b) {
            (Verdict::Pass, Verdict::Fail) => comparison.pass_to_fail.push(pair.clone()),
            (Verdict::Fail, Verdict::Pass) => comparison.fail_to_pass.push(pair.clone()),
            _ => {}
        }
        comparison.differences.push(pair);
    }
    comparison.only_in_b = b.into_keys().collect();
    let differences: Vec<f64> = comparison.differences.iter().map(|d| d.difference).collect();
    comparison.pairs = differences.len();
    (comparison.mean_difference, comparison.mean_difference_interval) = mean_interval(&differences, -1.0, 1.0);
    comparison
}

/// The results keyed by case run, the first of each.
fn by_case_run(results: &[RunResult]) -> BTreeMap<CaseRun, &RunResult> {
    let mut map = BTreeMap::new();
    for result in results {
        map.entry(CaseRun::of(result)).or_insert(result);
    }
    map
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::{Grade, GraderResult, RunOutput};

    /// A graded result: one grader per `(name, score, pass)`; the result passes when all do.
    pub(crate) fn graded(case_id: &str, scenario: &str, run: u32, grades: &[(&str, f64, bool)]) -> RunResult {
        let score = grades.iter().map(|g| g.1).sum::<f64>() / grades.len().max(1) as f64;
        RunResult {
            case_id: case_id.to_owned(),
            row: None,
            case_content_id: format!("content-{case_id}"),
            labels: Vec::new(),
            review: None,
            confidence: None,
            scenario: scenario.to_owned(),
            run,
            hash: format!("hash-{case_id}-{scenario}-{run}"),
            output: Ok(RunOutput { output: serde_json::json!("answer"), millis: 1500, ..RunOutput::default() }),
            grades: grades
                .iter()
                .map(|(name, score, pass)| GraderResult {
                    grader: (*name).to_owned(),
                    weight: 1.0,
                    outcome: Ok(Grade { score: *score, pass: *pass, rationale: format!("{name} says {score}") }),
                })
                .collect(),
            score: Some(score),
            pass: Some(grades.iter().all(|g| g.2)),
            noise: Vec::new(),
        }
    }

    pub(crate) fn passing(case_id: &str, scenario: &str, run: u32) -> RunResult {
        graded(case_id, scenario, run, &[("exact_match", 1.0, true)])
    }

    pub(crate) fn failing(case_id: &str, scenario: &str, run: u32) -> RunResult {
        graded(case_id, scenario, run, &[("exact_match", 0.0, false)])
    }

    /// A result whose agent failed.
    pub(crate) fn erroring(case_id: &str, scenario: &str, run: u32, kind: &str, message: &str) -> RunResult {
        RunResult {
            output: Err(Failure::new(kind, message)),
            grades: Vec::new(),
            score: None,
            pass: None,
            ..passing(case_id, scenario, run)
        }
    }

    pub(crate) fn meta(scenarios: &[&str], n_runs: u32) -> RunMeta {
        RunMeta {
            run_id: "run-1".to_owned(),
            experiment: "smoke".to_owned(),
            dataset: "support".to_owned(),
            dataset_version_id: "cb1-abc".to_owned(),
            started: "2025-01-01T00:00:00Z".to_owned(),
            finished: "2025-01-01T00:01:00Z".to_owned(),
            n_runs,
            scenarios: scenarios.iter().map(|s| (*s).to_owned()).collect(),
            selection: None,
            targets: Vec::new(),
        }
    }

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn wilson_interval_of_8_out_of_10() {
        let interval = wilson_interval(8, 10).unwrap();
        assert!(close(interval.low, 0.4902, 5e-4), "{interval:?}");
        assert!(close(interval.high, 0.9433, 5e-4), "{interval:?}");
        assert_eq!(wilson_interval(0, 0), None);
        let none = wilson_interval(0, 3).unwrap();
        assert_eq!(none.low, 0.0);
        assert!(close(none.high, 0.5615, 5e-4), "{none:?}");
        let all = wilson_interval(10, 10).unwrap();
        assert!(all.high <= 1.0 && close(all.low, 0.7225, 5e-4), "{all:?}");
    }

    #[test]
    fn t_interval_of_known_sample() {
        // 0.2, 0.4, 0.6: mean 0.4, s = 0.2, t(2) = 4.3027 → half width 4.3027 · 0.2/√3 = 0.4968.
        let (mean, interval) = mean_interval(&[0.2, 0.4, 0.6], f64::MIN, f64::MAX);
        assert!(close(mean.unwrap(), 0.4, 1e-12));
        let interval = interval.unwrap();
        assert!(close(interval.low, 0.4 - 0.49683, 1e-4) && close(interval.high, 0.4 + 0.49683, 1e-4));
        // Clipped to the range of scores.
        let (_, clipped) = mean_interval(&[0.2, 0.4, 0.6], 0.0, 1.0);
        assert_eq!(clipped.unwrap().low, 0.0);
        assert_eq!(mean_interval(&[0.5], 0.0, 1.0), (Some(0.5), None));
        assert_eq!(mean_interval(&[], 0.0, 1.0), (None, None));
    }

    #[test]
    fn t_quantile_table_meets_the_expansion() {
        assert!(close(t_975(30), cornish_fisher_t_975(30.0), 1e-5));
        assert!(close(t_975(31), 2.039_513_4, 1e-5));
        assert!(close(t_975(60), 2.000_297_8, 1e-5));
        assert!(t_975(10_000) > Z_95 && t_975(10_000) < Z_95 + 1e-3);
    }

    #[test]
    fn errors_are_not_failures() {
        let results = vec![
            passing("a", "base", 0),
            passing("b", "base", 0),
            failing("c", "base", 0),
            erroring("d", "base", 0, "timeout", "no reply after 30s"),
        ];
        let summary = Summary::of(&results, 0.5, meta(&["base"], 1));
        let t = &summary.totals;
        assert_eq!((t.results, t.passed, t.failed, t.errors, t.ungraded), (4, 2, 1, 1, 0));
        // The error is not a pass: the rate is over all four results.
        assert_eq!((t.pass_rate, t.pass_rate_of), (Some(0.5), 4));
        // Nor is it a score of 0: the mean is over the three graded results.
        assert!(close(t.mean_score.unwrap(), 2.0 / 3.0, 1e-12));
        // The threshold compares the rate printed: 2 of 4 meets 0.5, not 0.6.
        assert!(summary.threshold_met);
        assert!(!Summary::of(&results, 0.6, meta(&["base"], 1)).threshold_met);
        assert_eq!(summary.errors.len(), 1);
        assert_eq!(summary.errors[0].kind, "timeout");
        assert_eq!(summary.errors[0].examples[0].case_id, "d");
        assert_eq!(summary.errors[0].examples[0].message, "no reply after 30s");
    }

    #[test]
    fn a_failing_grader_makes_an_error_counted_by_its_kind() {
        let mut result = graded("a", "base", 0, &[("exact_match", 1.0, true), ("llm_judge", 0.0, false)]);
        result.grades[1].outcome = Err(Failure::new("judge", "judge returned 500"));
        result.score = None;
        result.pass = None;
        let summary = Summary::of(&[result, passing("b", "base", 0)], 0.5, meta(&["base"], 1));
        assert_eq!((summary.totals.errors, summary.totals.failed, summary.totals.passed), (1, 0, 1));
        assert_eq!(summary.errors[0].kind, "judge");
        let judge = summary.graders.iter().find(|g| g.grader == "llm_judge").unwrap();
        assert_eq!((judge.count, judge.errors, judge.mean_score), (0, 1, None));
        let exact = summary.graders.iter().find(|g| g.grader == "exact_match").unwrap();
        assert_eq!((exact.count, exact.errors, exact.pass_rate), (2, 0, Some(1.0)));
    }

    /// A result no grader gave a verdict on (a promptfoo test with only `javascript` asserts).
    fn ungraded(case_id: &str) -> RunResult {
        RunResult { grades: Vec::new(), score: None, pass: None, ..passing(case_id, "base", 0) }
    }

    #[test]
    fn ungraded_results_count_as_not_passed_unless_excluded() {
        // 1 of 5 graded and passing, 4 ungraded: 20 %, not 100 %.
        let mut results = vec![passing("a", "base", 0)];
        results.extend(["b", "c", "d", "e"].map(ungraded));
        let summary = Summary::of(&results, 0.8, meta(&["base"], 1));
        let t = &summary.totals;
        assert_eq!((t.passed, t.ungraded, t.pass_rate, t.pass_rate_of), (1, 4, Some(0.2), 5));
        assert!(!summary.threshold_met && !summary.exclude_ungraded);
        assert_eq!(summary.scenarios[0].tally.pass_rate, Some(0.2), "every tally has the one rule");
        // Asked for, the ungraded are left out of the rate; errors never are.
        results.push(erroring("f", "base", 0, "http", "502"));
        let mut builder = SummaryBuilder::default().exclude_ungraded(true);
        results.iter().for_each(|r| builder.add(r));
        let excluded = builder.finish(0.5, meta(&["base"], 1));
        let t = &excluded.totals;
        assert_eq!((t.pass_rate, t.pass_rate_of), (Some(0.5), 2));
        assert!(excluded.threshold_met && excluded.exclude_ungraded);
        assert_eq!(serde_json::to_value(&excluded).unwrap()["exclude_ungraded"], true);
    }

    #[test]
    fn a_run_that_graded_nothing_never_meets_the_threshold() {
        let all_ungraded: Vec<RunResult> = ["a", "b"].map(ungraded).into();
        for exclude in [false, true] {
            let mut builder = SummaryBuilder::default().exclude_ungraded(exclude);
            all_ungraded.iter().for_each(|r| builder.add(r));
            let summary = builder.finish(0.0, meta(&["base"], 1));
            assert_eq!(summary.totals.pass_rate, None, "exclude {exclude}");
            assert!(!summary.threshold_met, "exclude {exclude}");
        }
        let all_errors = vec![erroring("a", "base", 0, "http", "502")];
        let summary = Summary::of(&all_errors, 0.0, meta(&["base"], 1));
        assert_eq!((summary.totals.pass_rate, summary.totals.pass_rate_of), (None, 1));
        assert!(!summary.threshold_met);
    }

    #[test]
    fn a_summary_kept_before_pass_rate_of_is_known() {
        let summary = Summary::of(&[passing("a", "base", 0)], 0.5, meta(&["base"], 1));
        assert!(!summary.predates_pass_rate_of());
        let mut old = serde_json::to_value(&summary).unwrap();
        old["totals"].as_object_mut().unwrap().remove("pass_rate_of");
        old.as_object_mut().unwrap().remove("exclude_ungraded");
        let old: Summary = serde_json::from_value(old).unwrap();
        assert!(old.predates_pass_rate_of() && !old.exclude_ungraded);
        assert!(!Summary::of(&[], 0.5, meta(&["base"], 1)).predates_pass_rate_of(), "an empty run is not old");
    }

    #[test]
    fn threshold_met_needs_the_rate() {
        let mut results: Vec<RunResult> = (0..8).map(|i| passing(&format!("p{i}"), "base", 0)).collect();
        results.extend((0..2).map(|i| failing(&format!("f{i}"), "base", 0)));
        let summary = Summary::of(&results, 0.8, meta(&["base"], 1));
        assert!(summary.threshold_met, "8/10 meets 0.8");
        let interval = summary.totals.pass_rate_interval.unwrap();
        assert!(close(interval.low, 0.4902, 5e-4) && close(interval.high, 0.9433, 5e-4));
        assert!(!Summary::of(&results, 0.81, meta(&["base"], 1)).threshold_met);
        assert!(!Summary::of(&[], 0.0, meta(&["base"], 1)).threshold_met, "nothing graded");
    }

    #[test]
    fn graders_mean_min_max() {
        let results = vec![
            graded("a", "base", 0, &[("similarity", 0.9, true), ("contains", 1.0, true)]),
            graded("b", "base", 0, &[("similarity", 0.3, false), ("contains", 0.0, false)]),
            graded("c", "base", 0, &[("similarity", 0.6, true)]),
        ];
        let summary = Summary::of(&results, 0.5, meta(&["base"], 1));
        let names: Vec<&str> = summary.graders.iter().map(|g| g.grader.as_str()).collect();
        assert_eq!(names, ["similarity", "contains"]);
        let similarity = &summary.graders[0];
        assert_eq!(similarity.count, 3);
        assert!(close(similarity.mean_score.unwrap(), 0.6, 1e-12));
        assert_eq!((similarity.min_score, similarity.max_score), (Some(0.3), Some(0.9)));
        assert!(close(similarity.pass_rate.unwrap(), 2.0 / 3.0, 1e-12));
        assert_eq!(summary.graders[1].pass_rate, Some(0.5));
    }

    #[test]
    fn labels_count_each_result_once_per_label() {
        let with = |mut r: RunResult, labels: &[&str]| {
            r.labels = labels.iter().map(|l| (*l).to_owned()).collect();
            r
        };
        let results = vec![
            with(passing("a", "base", 0), &["lang:fr", "billing", "billing"]),
            with(failing("b", "base", 0), &["lang:fr"]),
            with(passing("c", "base", 0), &["lang:en", "billing"]),
            with(erroring("d", "base", 0, "http", "502"), &["lang:en"]),
        ];
        let summary = Summary::of(&results, 0.5, meta(&["base"], 1));
        let names: Vec<&str> = summary.labels.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(names, ["billing", "lang:en", "lang:fr"]);
        let billing = &summary.labels[0].tally;
        assert_eq!((billing.results, billing.passed, billing.pass_rate), (2, 2, Some(1.0)));
        let en = &summary.labels[1].tally;
        // The error is not a failure, nor a pass.
        assert_eq!((en.results, en.passed, en.failed, en.errors, en.pass_rate), (2, 1, 0, 1, Some(0.5)));
        let fr = &summary.labels[2].tally;
        assert_eq!((fr.results, fr.passed, fr.failed, fr.pass_rate, fr.mean_score), (2, 1, 1, Some(0.5), Some(0.5)));
    }

    #[test]
    fn review_states_and_confidence_bands_count_like_labels() {
        use casebook_model::Review;
        let with = |mut r: RunResult, review: Option<Review>, confidence: Option<f64>| {
            r.review = review;
            r.confidence = confidence;
            r
        };
        let results = vec![
            with(passing("a", "base", 0), Some(Review::Reviewed), Some(0.9)),
            with(failing("b", "base", 0), Some(Review::Reviewed), Some(0.8)),
            with(passing("c", "base", 0), Some(Review::Draft), Some(0.5)),
            with(erroring("d", "base", 0, "http", "502"), Some(Review::Draft), Some(0.79)),
            with(failing("e", "base", 0), None, Some(0.49)),
            with(passing("f", "base", 0), None, None),
        ];
        let summary = Summary::of(&results, 0.5, meta(&["base"], 1));
        let review: Vec<(&str, usize, usize, usize, usize)> = summary
            .review
            .iter()
            .map(|r| (r.review.as_str(), r.tally.results, r.tally.passed, r.tally.failed, r.tally.errors))
            .collect();
        // No rejected case ran: its state is left out.
        assert_eq!(review, [("reviewed", 2, 1, 1, 0), ("draft", 2, 1, 0, 1), ("unreviewed", 2, 1, 1, 0)]);
        assert_eq!(summary.review[1].tally.pass_rate, Some(0.5), "the error is not a failure, nor a pass");
        let bands: Vec<(&str, usize, usize, usize, usize)> = summary
            .confidence
            .iter()
            .map(|c| (c.band.as_str(), c.tally.results, c.tally.passed, c.tally.failed, c.tally.errors))
            .collect();
        assert_eq!(
            bands,
            [("< 0.5", 1, 0, 1, 0), ("0.5–0.8", 2, 1, 0, 1), ("≥ 0.8", 2, 1, 1, 0), ("unrated", 1, 1, 0, 0)]
        );
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["review"][0]["review"], "reviewed");
        assert_eq!(json["confidence"][2]["band"], "≥ 0.8");
        assert_eq!(json["confidence"][2]["pass_rate"], 0.5);
    }

    #[test]
    fn summaries_and_results_kept_before_review_and_selection_read_back() {
        // A result and a summary as `casebook run` kept them before the review state, the
        // confidence and the selection were recorded.
        let result: RunResult = serde_json::from_str(
            r#"{"case_id":"a","case_content_id":"c","labels":["x"],"scenario":"base","run":0,"hash":"h",
                "output":{"output":"A","millis":3},"grades":[{"grader":"exact_match","weight":1.0,"score":1.0,"pass":true}],
                "score":1.0,"pass":true}"#,
        )
        .unwrap();
        assert_eq!((result.review, result.confidence), (None, None));
        let text = serde_json::to_string(&result).unwrap();
        assert!(!text.contains("review") && !text.contains("confidence"), "{text}");
        let mut old =
            serde_json::to_value(Summary::of(std::slice::from_ref(&result), 0.5, meta(&["base"], 1))).unwrap();
        let object = old.as_object_mut().unwrap();
        object.remove("review");
        object.remove("confidence");
        let back: Summary = serde_json::from_value(old).unwrap();
        assert!(back.review.is_empty() && back.confidence.is_empty() && back.meta.selection.is_none());
        // Counted again, an old result is unreviewed and unrated.
        let again = Summary::of(&[result], 0.5, meta(&["base"], 1));
        assert_eq!((again.review[0].review.as_str(), again.confidence[0].band.as_str()), ("unreviewed", "unrated"));
    }

    #[test]
    fn pass_at_k_and_pass_hat_k_over_three_runs() {
        // Case a passes 3/3, b passes 1/3, c passes 0/3: pass@3 = 2/3, pass^3 = 1/3.
        // Case d has an errored run and case e a missing one: both left out.
        let mut results = Vec::new();
        for run in 0..3 {
            results.push(passing("a", "base", run));
            results.push(if run == 1 { passing("b", "base", run) } else { failing("b", "base", run) });
            results.push(failing("c", "base", run));
            results.push(if run == 2 {
                erroring("d", "base", run, "timeout", "slow")
            } else {
                passing("d", "base", run)
            });
            if run < 2 {
                results.push(passing("e", "base", run));
            }
        }
        // Another scenario where every case passes every run.
        results.extend((0..3).map(|run| passing("a", "tools", run)));
        let summary = Summary::of(&results, 0.5, meta(&["base", "tools"], 3));
        let base = &summary.scenarios[0];
        assert_eq!(base.scenario, "base");
        let p = &base.pass_at_k;
        assert_eq!((p.k, p.cases, p.excluded), (3, 3, 2));
        assert!(close(p.pass_at_k.unwrap(), 2.0 / 3.0, 1e-12));
        assert!(close(p.pass_hat_k.unwrap(), 1.0 / 3.0, 1e-12));
        let tools = &summary.scenarios[1].pass_at_k;
        assert_eq!((tools.cases, tools.pass_at_k, tools.pass_hat_k), (1, Some(1.0), Some(1.0)));
    }

    #[test]
    fn scenarios_follow_the_experiment_then_the_results() {
        let results = vec![passing("a", "zeta", 0), passing("a", "extra", 0)];
        let summary = Summary::of(&results, 0.5, meta(&["zeta", "unused"], 1));
        let names: Vec<&str> = summary.scenarios.iter().map(|s| s.scenario.as_str()).collect();
        assert_eq!(names, ["zeta", "unused", "extra"]);
        assert_eq!(summary.scenarios[1].tally.results, 0);
        assert_eq!(summary.scenarios[1].pass_at_k.pass_at_k, None);
    }

    #[test]
    fn summary_serialises_with_flattened_tallies() {
        let summary = Summary::of(&[passing("a", "base", 0)], 0.5, meta(&["base"], 1));
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["scenarios"][0]["passed"], 1);
        assert_eq!(json["scenarios"][0]["pass_at_k"]["pass_hat_k"], 1.0);
        assert_eq!(json["threshold_met"], true);
        let back: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(back, summary);
    }

    #[test]
    fn compare_finds_flips_one_sided_cases_and_errors() {
        let a = vec![
            passing("x", "base", 0),
            failing("y", "base", 0),
            graded("z", "base", 0, &[("similarity", 0.5, true)]),
            passing("gone", "base", 0),
            passing("broke", "base", 0),
        ];
        let b = vec![
            failing("x", "base", 0),
            passing("y", "base", 0),
            graded("z", "base", 0, &[("similarity", 0.8, true)]),
            passing("new", "base", 0),
            erroring("broke", "base", 0, "http", "503"),
            // Same case, other run: not a pair of anything in A.
            passing("x", "base", 1),
        ];
        let comparison = compare(&a, &b);
        assert_eq!(comparison.pairs, 3);
        let keys = |list: &[PairedDifference]| list.iter().map(|d| d.key.case_id.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&comparison.pass_to_fail), ["x"]);
        assert_eq!(keys(&comparison.fail_to_pass), ["y"]);
        assert_eq!(comparison.only_in_a.iter().map(|k| k.case_id.as_str()).collect::<Vec<_>>(), ["gone"]);
        let only_b: Vec<(&str, u32)> = comparison.only_in_b.iter().map(|k| (k.case_id.as_str(), k.run)).collect();
        assert_eq!(only_b, [("new", 0), ("x", 1)]);
        assert_eq!(comparison.errors.len(), 1);
        assert_eq!(comparison.errors[0].a, None);
        assert_eq!(comparison.errors[0].b.as_ref().map(|f| f.kind.as_str()), Some("http"));
        // Differences B − A: x −1, y +1, z +0.3 → mean 0.1.
        assert!(close(comparison.mean_difference.unwrap(), 0.1, 1e-12));
        let interval = comparison.mean_difference_interval.unwrap();
        assert!(interval.low >= -1.0 && interval.high <= 1.0 && interval.low < 0.1 && interval.high > 0.1);
    }

    #[test]
    fn compare_pairs_runs_of_one_scenario_each_whatever_their_names() {
        let a = vec![passing("c1", "echo", 0), passing("c2", "echo", 0)];
        let b = vec![failing("c1", "echo-again", 0), passing("c2", "echo-again", 0)];
        let comparison = compare(&a, &b);
        assert_eq!(comparison.pairs, 2);
        let named: Vec<(&str, &str)> =
            comparison.paired_scenarios.iter().map(|p| (p.a.as_str(), p.b.as_str())).collect();
        assert_eq!(named, [("echo", "echo-again")]);
        let flipped: Vec<&str> = comparison.pass_to_fail.iter().map(|d| d.key.case_id.as_str()).collect();
        assert_eq!(flipped, ["c1"]);
        // Two scenarios on one side: no guess, nothing pairs.
        let c = vec![passing("c1", "left", 0), passing("c1", "right", 0)];
        let comparison = compare(&a, &c);
        assert_eq!((comparison.pairs, comparison.paired_scenarios), (0, Vec::new()));
        assert_eq!((comparison.only_in_a.len(), comparison.only_in_b.len()), (2, 2));
        // The same names: paired as before, nothing noted.
        assert_eq!(compare(&a, &a).paired_scenarios, []);
    }

    #[test]
    fn compare_interval_is_the_paired_t_interval() {
        let a: Vec<RunResult> = [0.2, 0.4, 0.6]
            .iter()
            .enumerate()
            .map(|(i, s)| graded(&format!("c{i}"), "s", 0, &[("g", *s, true)]))
            .collect();
        let b: Vec<RunResult> = [0.3, 0.6, 0.9]
            .iter()
            .enumerate()
            .map(|(i, s)| graded(&format!("c{i}"), "s", 0, &[("g", *s, true)]))
            .collect();
        // Differences 0.1, 0.2, 0.3: mean 0.2, s 0.1, half width 4.3027 · 0.1/√3 = 0.24842.
        let comparison = compare(&a, &b);
        let interval = comparison.mean_difference_interval.unwrap();
        assert!(close(comparison.mean_difference.unwrap(), 0.2, 1e-12));
        assert!(close(interval.low, 0.2 - 0.24842, 1e-4) && close(interval.high, 0.2 + 0.24842, 1e-4));
    }

    #[test]
    fn robustness_pairs_case_runs_and_counts_errors_apart() {
        let results = vec![
            // a: passes clean on both runs, fails with noise on run 1.
            passing("a", "clean", 0),
            passing("a", "clean", 1),
            passing("a", "noisy", 0),
            failing("a", "noisy", 1),
            // b: fails clean, passes with noise.
            failing("b", "clean", 0),
            passing("b", "noisy", 0),
            // c: an error with noise: not paired, not a failure.
            passing("c", "clean", 0),
            erroring("c", "noisy", 0, "timeout", "slow"),
            // d: only clean.
            passing("d", "clean", 0),
        ];
        let mut builder = SummaryBuilder::default().with_noise_pairs(vec![("noisy".into(), "clean".into())]);
        for result in &results {
            builder.add(result);
        }
        let summary = builder.finish(0.5, meta(&["clean", "noisy"], 2));
        let r = &summary.robustness[0];
        assert_eq!((r.scenario.as_str(), r.without_noise.as_str()), ("noisy", "clean"));
        assert_eq!((r.pairs, r.errors, r.unpaired), (3, 1, 1));
        // Clean: a0, a1 pass, b0 fails → 2/3; noisy: a0, b0 pass, a1 fails → 2/3.
        assert_eq!(
            (r.pass_rate_without, r.pass_rate_with, r.difference),
            (Some(2.0 / 3.0), Some(2.0 / 3.0), Some(0.0))
        );
        assert_eq!(r.pass_to_fail, vec![Flip { case_id: "a".into(), run: 1 }]);
        assert_eq!(r.fail_to_pass, vec![Flip { case_id: "b".into(), run: 0 }]);
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(json["robustness"][0]["pass_to_fail"][0]["case_id"], "a");
        // Without noise pairs there is no section, in the JSON either.
        let plain = Summary::of(&results, 0.5, meta(&["clean", "noisy"], 2));
        assert!(plain.robustness.is_empty());
        assert!(serde_json::to_value(&plain).unwrap().get("robustness").is_none());
    }

    /// The summary as it was computed before it was kept as running counts: from the list of
    /// every result, every score kept, every verdict grouped by scenario and case at the end.
    /// The oracle [`SummaryBuilder`] must agree with.
    fn summary_from_the_list(
        results: &[RunResult],
        threshold: f64,
        meta: RunMeta,
        pairs: &[(String, String)],
        exclude: bool,
    ) -> Summary {
        let tally = |members: &[&RunResult]| {
            let verdicts: Vec<Verdict> = members.iter().map(|r| Verdict::of(r)).collect();
            let count = |v: Verdict| verdicts.iter().filter(|x| **x == v).count();
            let (passed, failed, errors, ungraded) =
                (count(Verdict::Pass), count(Verdict::Fail), count(Verdict::Error), count(Verdict::Ungraded));
            let scores: Vec<f64> = members
                .iter()
                .zip(&verdicts)
                .filter(|(_, v)| matches!(v, Verdict::Pass | Verdict::Fail))
                .filter_map(|(r, _)| r.score)
                .collect();
            let of = members.len() - if exclude { ungraded } else { 0 };
            let graded = passed + failed;
            let (mean_score, mean_score_interval) = mean_interval(&scores, 0.0, 1.0);
            Tally {
                results: members.len(),
                passed,
                failed,
                errors,
                ungraded,
                pass_rate: if graded == 0 { None } else { ratio(passed, of) },
                pass_rate_of: of,
                pass_rate_interval: if graded == 0 { None } else { wilson_interval(passed, of) },
                mean_score,
                mean_score_interval,
            }
        };
        let all: Vec<&RunResult> = results.iter().collect();
        let totals = tally(&all);
        let mut names: Vec<String> = Vec::new();
        for name in meta.scenarios.iter().chain(&results.iter().map(|r| r.scenario.clone()).collect::<BTreeSet<_>>()) {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        // scenario → case → run → the first verdict.
        let mut verdicts: BTreeMap<&str, BTreeMap<&str, BTreeMap<u32, Verdict>>> = BTreeMap::new();
        for r in results {
            verdicts
                .entry(&r.scenario)
                .or_default()
                .entry(&r.case_id)
                .or_default()
                .entry(r.run)
                .or_insert(Verdict::of(r));
        }
        let k = meta.n_runs;
        let scenarios = names
            .iter()
            .map(|name| {
                let members: Vec<&RunResult> = results.iter().filter(|r| &r.scenario == name).collect();
                let (mut counted, mut excluded, mut any, mut every) = (0, 0, 0, 0);
                for runs in verdicts.get(name.as_str()).into_iter().flat_map(BTreeMap::values) {
                    let got: Vec<Verdict> = (0..k).filter_map(|run| runs.get(&run).copied()).collect();
                    if k == 0
                        || got.len() != k as usize
                        || got.iter().any(|v| !matches!(v, Verdict::Pass | Verdict::Fail))
                    {
                        excluded += 1;
                        continue;
                    }
                    counted += 1;
                    any += usize::from(got.contains(&Verdict::Pass));
                    every += usize::from(got.iter().all(|v| *v == Verdict::Pass));
                }
                ScenarioSummary {
                    scenario: name.clone(),
                    tally: tally(&members),
                    pass_at_k: PassAtK {
                        k,
                        cases: counted,
                        excluded,
                        pass_at_k: ratio(any, counted),
                        pass_hat_k: ratio(every, counted),
                    },
                }
            })
            .collect();
        let mut graders: Vec<GraderSummary> = Vec::new();
        for grade in results.iter().flat_map(|r| &r.grades) {
            if !graders.iter().any(|g| g.grader == grade.grader) {
                let outcomes: Vec<&Result<crate::record::Grade, Failure>> = results
                    .iter()
                    .flat_map(|r| &r.grades)
                    .filter(|g| g.grader == grade.grader)
                    .map(|g| &g.outcome)
                    .collect();
                let scores: Vec<f64> = outcomes.iter().filter_map(|o| o.as_ref().ok()).map(|g| g.score).collect();
                let passed = outcomes.iter().filter(|o| o.as_ref().is_ok_and(|g| g.pass)).count();
                graders.push(GraderSummary {
                    grader: grade.grader.clone(),
                    count: scores.len(),
                    passed,
                    errors: outcomes.len() - scores.len(),
                    mean_score: mean_interval(&scores, 0.0, 1.0).0,
                    min_score: scores.iter().copied().reduce(f64::min),
                    max_score: scores.iter().copied().reduce(f64::max),
                    pass_rate: ratio(passed, scores.len()),
                });
            }
        }
        let labels = results
            .iter()
            .flat_map(|r| r.labels.iter().cloned())
            .collect::<BTreeSet<String>>()
            .into_iter()
            .map(|label| {
                let members: Vec<&RunResult> = results.iter().filter(|r| r.labels.contains(&label)).collect();
                LabelSummary { tally: tally(&members), label }
            })
            .collect();
        let review = REVIEW_STATES
            .iter()
            .enumerate()
            .filter_map(|(i, state)| {
                let members: Vec<&RunResult> = results.iter().filter(|r| review_group(r.review) == i).collect();
                (!members.is_empty()).then(|| ReviewSummary { review: (*state).to_owned(), tally: tally(&members) })
            })
            .collect();
        let confidence = CONFIDENCE_BANDS
            .iter()
            .enumerate()
            .filter_map(|(i, band)| {
                let members: Vec<&RunResult> = results.iter().filter(|r| confidence_band(r.confidence) == i).collect();
                (!members.is_empty()).then(|| ConfidenceSummary { band: (*band).to_owned(), tally: tally(&members) })
            })
            .collect();
        let mut errors: Vec<ErrorKindSummary> = Vec::new();
        for r in results {
            let Some(failure) = r.failure() else { continue };
            if errors.iter().any(|e| e.kind == failure.kind) {
                continue;
            }
            let of_kind: Vec<&RunResult> =
                results.iter().filter(|x| x.failure().is_some_and(|f| f.kind == failure.kind)).collect();
            errors.push(ErrorKindSummary {
                kind: failure.kind.clone(),
                count: of_kind.len(),
                examples: of_kind
                    .iter()
                    .take(ERROR_EXAMPLES_PER_KIND)
                    .map(|x| ErrorExample {
                        case_id: x.case_id.clone(),
                        scenario: x.scenario.clone(),
                        run: x.run,
                        message: x.failure().map(|f| f.message.clone()).unwrap_or_default(),
                    })
                    .collect(),
            });
        }
        errors.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.kind.cmp(&b.kind)));
        let robustness = pairs
            .iter()
            .map(|(noisy, clean)| {
                let side = |s: &str| verdicts.get(s).cloned().unwrap_or_default();
                let (without, with) = (side(clean), side(noisy));
                let keys: BTreeSet<(&str, u32)> = without
                    .iter()
                    .chain(&with)
                    .flat_map(|(case, runs)| runs.keys().map(move |run| (*case, *run)))
                    .collect();
                let mut count = RobustCount::default();
                for (case, run) in keys {
                    let get = |side: &BTreeMap<&str, BTreeMap<u32, Verdict>>| {
                        side.get(case)
                            .and_then(|runs| runs.get(&run))
                            .copied()
                            .into_iter()
                            .map(move |v| (run, v))
                            .collect()
                    };
                    count.add(case, &get(&without), &get(&with));
                }
                count.robustness(noisy.clone(), clean.clone())
            })
            .collect();
        Summary {
            threshold_met: totals.pass_rate.is_some_and(|rate| rate >= threshold),
            meta,
            threshold,
            exclude_ungraded: exclude,
            totals,
            scenarios,
            graders,
            labels,
            review,
            confidence,
            errors,
            robustness,
            tool_calls: {
                let mut calls = ServedCalls::default();
                results.iter().for_each(|r| calls.add(r));
                calls.unmatched_in.sort();
                calls
            },
        }
    }

    /// `a` and `b` as JSON, equal but for the last bits of the intervals' bounds (the running
    /// variance is Welford's, the list's was two passes).
    fn assert_same_summary(a: &Summary, b: &Summary) {
        fn walk(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
            use serde_json::Value;
            match (a, b) {
                (Value::Object(x), Value::Object(y)) => {
                    assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>(), "at {at}");
                    for (key, value) in x {
                        walk(value, &y[key], &format!("{at}.{key}"));
                    }
                }
                (Value::Array(x), Value::Array(y)) => {
                    assert_eq!(x.len(), y.len(), "at {at}");
                    x.iter().zip(y).enumerate().for_each(|(i, (x, y))| walk(x, y, &format!("{at}[{i}]")));
                }
                (Value::Number(x), Value::Number(y)) if at.contains("_interval.") => {
                    let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                    assert!((x - y).abs() <= 1e-12, "at {at}: {x} against {y}");
                }
                _ => assert_eq!(a, b, "at {at}"),
            }
        }
        walk(&serde_json::to_value(a).unwrap(), &serde_json::to_value(b).unwrap(), "summary");
    }

    #[test]
    fn running_counts_give_the_summary_the_list_of_results_gave() {
        use casebook_model::Review;
        // Three scenarios (one with noise), three runs, 60 cases: passes, failures, errors of
        // two kinds, a failing grader, ungraded results, labels (repeated, non-ASCII), review
        // states and confidences, scores of every kind; results come in a run's order, jobs
        // finishing out of order within a window, as `execute` hands them over.
        let scenarios = ["clean", "noisy", "other"];
        let mut results = Vec::new();
        for case in 0..60u32 {
            let id = format!("cas-{case:02}-é");
            for (s, scenario) in scenarios.iter().enumerate() {
                for run in 0..3u32 {
                    let x = case * 7 + s as u32 * 3 + run;
                    let score = f64::from(x % 11) / 10.0;
                    let mut result = match x % 13 {
                        0 => erroring(&id, scenario, run, "timeout", "no reply after 30 s"),
                        1 => erroring(&id, scenario, run, "http", &format!("502 on run {run}")),
                        2 => ungraded_in(&id, scenario, run),
                        3 => {
                            let mut r =
                                graded(&id, scenario, run, &[("contains", 1.0, true), ("llm_judge", 0.0, false)]);
                            r.grades[1].outcome = Err(Failure::new("judge", "judge returned 500"));
                            (r.score, r.pass) = (None, None);
                            r
                        }
                        _ => graded(
                            &id,
                            scenario,
                            run,
                            &[("similarity", score, score >= 0.5), ("contains", 1.0, !x.is_multiple_of(4))],
                        ),
                    };
                    result.labels = match case % 4 {
                        0 => vec!["lang:fr".into(), "billing".into(), "billing".into()],
                        1 => vec!["語言:日本".into()],
                        2 => Vec::new(),
                        _ => vec!["billing".into()],
                    };
                    result.review = [Some(Review::Reviewed), Some(Review::Draft), None][case as usize % 3];
                    result.confidence = [Some(0.3), Some(0.79), Some(0.8), None][case as usize % 4];
                    results.push(result);
                }
            }
        }
        // A case whose last run never came (a stopped run) stays open until the end.
        results.retain(|r| !(r.case_id == "cas-59-é" && r.scenario == "other" && r.run == 2));
        // Out of order within windows of 16, as concurrent jobs finish.
        let mut arrived = Vec::new();
        for window in results.chunks(16) {
            let mut window = window.to_vec();
            window.reverse();
            window.rotate_left(5);
            arrived.extend(window);
        }
        let pairs = vec![("noisy".to_owned(), "clean".to_owned())];
        for exclude in [false, true] {
            let mut builder = SummaryBuilder::default()
                .with_noise_pairs(pairs.clone())
                .exclude_ungraded(exclude)
                .closing_cases(scenarios.len(), 3);
            for result in &arrived {
                builder.add(result);
            }
            // Only the cases in flight are open: never more than a window's.
            assert!(builder.open.len() <= 16, "{} cases open", builder.open.len());
            let running = builder.finish(0.4, meta(&scenarios, 3));
            let listed = summary_from_the_list(&arrived, 0.4, meta(&scenarios, 3), &pairs, exclude);
            assert_same_summary(&running, &listed);
            // The means are the list's to the last bit; everything was counted.
            assert_eq!(running.totals.mean_score, listed.totals.mean_score);
            assert_eq!(running.totals.results, 539);
            assert!(running.robustness[0].pairs > 0 && !running.robustness[0].pass_to_fail.is_empty());
            assert!(running.scenarios[2].pass_at_k.excluded > 0 && running.scenarios[0].pass_at_k.cases > 0);
            // Without closing cases as they complete (`Summary::of`), the same summary.
            let mut open = SummaryBuilder::default().with_noise_pairs(pairs.clone()).exclude_ungraded(exclude);
            arrived.iter().for_each(|r| open.add(r));
            assert_same_summary(&open.finish(0.4, meta(&scenarios, 3)), &listed);
        }
    }

    fn ungraded_in(case_id: &str, scenario: &str, run: u32) -> RunResult {
        RunResult { grades: Vec::new(), score: None, pass: None, ..passing(case_id, scenario, run) }
    }
}
