//! Runs pages: a project's runs, one run's summary and results, one result with the agent's
//! output and trajectory and the graders' verdicts, and two runs compared.
//!
//! The numbers are the runner's: the summary a run recorded ([`Summary`]), or the one the
//! runner computes again from the results for a run that recorded none, and [`compare`] for
//! two runs. The pages only lay them out.

use std::collections::HashMap;

use crate::extract::{Path, Query};
use askama::Template;
use casebook_runner::pairing::{Ran as Scenarios, pair_scenarios};
use casebook_runner::protocol::Step;
use casebook_runner::record::{RunOutput, RunResult};
use casebook_runner::summary::{
    CaseRun, Comparison, Interval, PairedDifference, RunMeta, Summary, Verdict, compare_paired,
};
use casebook_store::{AnyStore, Ref, RunRow, Store};
use serde::Deserialize;
use serde_json::Value;

use super::page::{Chrome, Failure, PageResult, case_url, filters, html, project_url, query, seg};
use super::session::Viewer;
use super::view::{preview, show};

/// Results a run page lists at a time.
const PAGE: usize = 200;
/// Pairs a comparison page lists before saying how many more there are.
const PAIRS_SHOWN: usize = 500;

pub fn runs_url(project: &str) -> String {
    format!("{}/runs", project_url(project))
}

pub fn run_url(project: &str, run: &str) -> String {
    format!("{}/{}", runs_url(project), seg(run))
}

fn result_url(project: &str, run: &str, place: usize) -> String {
    format!("{}/results/{place}", run_url(project, run))
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| format!("{:.1} %", v * 100.0))
}

fn percent_interval(interval: Option<Interval>) -> String {
    interval.map_or_else(|| "–".to_owned(), |i| format!("{:.1}–{:.1} %", i.low * 100.0, i.high * 100.0))
}

fn score(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| format!("{v:.3}"))
}

fn score_interval(interval: Option<Interval>) -> String {
    interval.map_or_else(|| "–".to_owned(), |i| format!("{:.3}–{:.3}", i.low, i.high))
}

fn signed(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| format!("{v:+.3}"))
}

fn signed_interval(interval: Option<Interval>) -> String {
    interval.map_or_else(|| "–".to_owned(), |i| format!("{:+.3} to {:+.3}", i.low, i.high))
}

/// A stored run read back: what it says it was, its summary if it can be read, and the
/// version of the dataset it ran (when the project still has it).
struct Known {
    row: RunRow,
    meta: Option<RunMeta>,
    summary: Option<Summary>,
}

impl Known {
    fn new(row: RunRow) -> Self {
        let meta = serde_json::from_str(&row.meta).ok();
        let summary = row.summary.as_deref().and_then(|s| serde_json::from_str(s).ok());
        Self { row, meta, summary }
    }
}

/// Where a run's cases are: the dataset and the number of the version it ran.
#[derive(Clone)]
struct Ran {
    dataset: String,
    version: Option<u64>,
}

impl Ran {
    fn label(&self) -> String {
        match self.version {
            Some(n) => format!("{}@v{n}", self.dataset),
            None => self.dataset.clone(),
        }
    }

    fn case_url(&self, project: &str, case: &str) -> String {
        match self.version {
            Some(n) => case_url(project, &self.dataset, n, case),
            None => String::new(),
        }
    }
}

/// The version a run's meta names, by its content id (none when the dataset is gone or the run
/// was of a file).
async fn ran(store: &AnyStore, meta: Option<&RunMeta>, seen: &mut HashMap<(String, String), Ran>) -> Option<Ran> {
    let meta = meta.filter(|m| !m.dataset.is_empty())?;
    // `casebook run` names the dataset as a user would name it again (`support@v4`); a dataset's
    // name holds no `@`, and the version is found by its content id below.
    let name = meta.dataset.split_once('@').map_or(meta.dataset.as_str(), |(name, _)| name);
    let key = (name.to_owned(), meta.dataset_version_id.clone());
    if let Some(found) = seen.get(&key) {
        return Some(found.clone());
    }
    let version = if meta.dataset_version_id.is_empty() {
        None
    } else {
        store
            .resolve(name, &Ref::Id(meta.dataset_version_id.to_ascii_lowercase()))
            .await
            .ok()
            // Only that version (a damaged or foreign id could be a tag in an older store).
            .filter(|v| v.id == meta.dataset_version_id)
            .map(|v| v.number)
    };
    let found = Ran { dataset: name.to_owned(), version };
    seen.insert(key, found.clone());
    Some(found)
}

/// A run's results in order, each read as the runner wrote it (`Err` holds what could not be).
async fn results(store: &AnyStore, run: &str) -> Result<Vec<Result<RunResult, String>>, Failure> {
    Ok(store
        .run_results(run)
        .await?
        .iter()
        .map(|text| serde_json::from_str::<RunResult>(text).map_err(|e| e.to_string()))
        .collect())
}

/// The run's summary: the one it recorded, or the runner's again from its results.
fn summary_of(known: &Known, results: &[Result<RunResult, String>]) -> (Summary, bool) {
    if let Some(summary) = &known.summary {
        return (summary.clone(), true);
    }
    let readable: Vec<RunResult> = results.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
    let meta = known.meta.clone().unwrap_or_else(|| RunMeta {
        run_id: known.row.id.clone(),
        experiment: known.row.experiment.clone(),
        started: known.row.started.clone(),
        ..RunMeta::default()
    });
    (Summary::of(&readable, 1.0, meta), false)
}

pub struct RunItem {
    pub id: String,
    pub url: String,
    pub experiment: String,
    pub dataset: String,
    pub dataset_url: String,
    pub started: String,
    pub finished: String,
    pub pass_rate: String,
    pub results: String,
    pub passed: String,
    pub failed: String,
    pub errors: String,
    pub verdict: &'static str,
}

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsPage {
    chrome: Chrome,
    project: String,
    runs: Vec<RunItem>,
    compare_url: String,
}

/// The project's runs, newest first.
pub async fn list(viewer: Viewer, Path(project): Path<String>) -> PageResult {
    let store = &viewer.store;
    let mut seen = HashMap::new();
    let mut runs = Vec::new();
    for row in store.runs().await?.into_iter().rev() {
        let known = Known::new(row);
        let ran = ran(store, known.meta.as_ref(), &mut seen).await;
        let dataset_url = match ran.as_ref().and_then(|r| r.version.map(|n| (r, n))) {
            Some((r, n)) => super::page::version_url(&project, &r.dataset, n),
            None => String::new(),
        };
        let t = known.summary.as_ref().map(|s| &s.totals);
        let count = |f: fn(&casebook_runner::summary::Tally) -> usize| t.map_or_else(String::new, |t| f(t).to_string());
        runs.push(RunItem {
            url: run_url(&project, &known.row.id),
            id: known.row.id.clone(),
            experiment: known.row.experiment.clone(),
            dataset: ran.map(|r| r.label()).unwrap_or_default(),
            dataset_url,
            started: known.row.started.clone(),
            finished: known.row.finished.clone().unwrap_or_else(|| "(stopped or running)".to_owned()),
            pass_rate: t.map_or_else(String::new, |t| percent(t.pass_rate)),
            results: count(|t| t.results),
            passed: count(|t| t.passed),
            failed: count(|t| t.failed),
            errors: count(|t| t.errors),
            verdict: match &known.summary {
                Some(s) if s.threshold_met => "met",
                Some(_) => "not met",
                None => "",
            },
        });
    }
    Ok(html(&RunsPage {
        chrome: Chrome::new(&viewer, format!("{project} · runs")).at("runs", ""),
        compare_url: format!("{}/compare", project_url(&project)),
        project,
        runs,
    }))
}

pub struct Row {
    pub cells: Vec<String>,
}

pub struct ResultItem {
    pub place: usize,
    pub url: String,
    pub case_id: String,
    pub case_url: String,
    pub scenario: String,
    pub run: u32,
    pub verdict: &'static str,
    pub score: String,
    pub millis: String,
    /// The tool calls casebook served in the run: `3`, or `3 (1 unmatched)`; empty without any.
    pub calls: String,
    pub note: String,
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    chrome: Chrome,
    id: String,
    experiment: String,
    dataset: String,
    dataset_url: String,
    started: String,
    finished: String,
    recorded: bool,
    k: u32,
    totals: Vec<(String, String)>,
    threshold: String,
    threshold_met: bool,
    graded_nothing: bool,
    scenarios: Vec<Row>,
    graders: Vec<Row>,
    labels: Vec<Row>,
    errors: Vec<Row>,
    results: Vec<ResultItem>,
    total: usize,
    from: usize,
    newer: String,
    older: String,
    compare_previous: String,
    previous_id: String,
}

#[derive(Deserialize)]
pub struct RunPath {
    pub project: String,
    pub run: String,
}

#[derive(Deserialize)]
pub struct Paging {
    #[serde(default)]
    pub from: usize,
}

fn item(project: &str, run: &str, ran: Option<&Ran>, place: usize, result: &Result<RunResult, String>) -> ResultItem {
    match result {
        Ok(r) => ResultItem {
            place,
            url: result_url(project, run, place),
            case_url: ran.map(|x| x.case_url(project, &r.case_id)).unwrap_or_default(),
            case_id: r.case_id.clone(),
            scenario: r.scenario.clone(),
            run: r.run,
            verdict: Verdict::of(r).as_str(),
            score: score(r.score),
            millis: r.output.as_ref().map(|o| o.millis.to_string()).unwrap_or_default(),
            calls: match &r.output {
                Ok(o) if o.unmatched_calls > 0 => format!("{} ({} unmatched)", o.served_calls, o.unmatched_calls),
                Ok(o) if o.served_calls > 0 => o.served_calls.to_string(),
                _ => String::new(),
            },
            note: r
                .failure()
                .map(|f| format!("{}: {}", f.kind, preview(&Value::String(f.message.clone()), 80)))
                .unwrap_or_default(),
        },
        Err(err) => ResultItem {
            place,
            url: result_url(project, run, place),
            case_url: String::new(),
            case_id: String::new(),
            scenario: String::new(),
            run: 0,
            verdict: "unreadable",
            score: String::new(),
            millis: String::new(),
            calls: String::new(),
            note: format!("this stored result is not a result the runner wrote: {err}"),
        },
    }
}

/// A run's summary as `casebook results` shows it, and its results.
pub async fn one(viewer: Viewer, Path(path): Path<RunPath>, Query(paging): Query<Paging>) -> PageResult {
    let store = &viewer.store;
    let known = Known::new(store.run(Some(&path.run)).await?);
    let all = results(store, &known.row.id).await?;
    let (summary, recorded) = summary_of(&known, &all);
    let ran = ran(store, known.meta.as_ref(), &mut HashMap::new()).await;
    let project = &path.project;
    let id = known.row.id.clone();
    let t = &summary.totals;
    let k = summary.meta.n_runs;
    let totals = vec![
        ("results".to_owned(), t.results.to_string()),
        ("passed".to_owned(), t.passed.to_string()),
        ("failed".to_owned(), t.failed.to_string()),
        ("errors (not failures)".to_owned(), t.errors.to_string()),
        ("ungraded".to_owned(), t.ungraded.to_string()),
        (
            "pass rate".to_owned(),
            format!("{} (95 % CI {})", percent(t.pass_rate), percent_interval(t.pass_rate_interval)),
        ),
        (
            "mean score".to_owned(),
            format!("{} (95 % CI {})", score(t.mean_score), score_interval(t.mean_score_interval)),
        ),
    ];
    let scenarios = summary
        .scenarios
        .iter()
        .map(|s| Row {
            cells: vec![
                s.scenario.clone(),
                s.tally.results.to_string(),
                s.tally.passed.to_string(),
                s.tally.failed.to_string(),
                percent(s.tally.pass_rate),
                score(s.tally.mean_score),
                percent(s.pass_at_k.pass_at_k),
                percent(s.pass_at_k.pass_hat_k),
                format!("{} of {}", s.pass_at_k.cases, s.pass_at_k.cases + s.pass_at_k.excluded),
                s.tally.errors.to_string(),
            ],
        })
        .collect();
    let graders = summary
        .graders
        .iter()
        .map(|g| Row {
            cells: vec![
                g.grader.clone(),
                g.count.to_string(),
                g.passed.to_string(),
                percent(g.pass_rate),
                score(g.mean_score),
                score(g.min_score),
                score(g.max_score),
                g.errors.to_string(),
            ],
        })
        .collect();
    let labels = summary
        .labels
        .iter()
        .map(|l| Row {
            cells: vec![
                l.label.clone(),
                l.tally.results.to_string(),
                l.tally.passed.to_string(),
                l.tally.failed.to_string(),
                percent(l.tally.pass_rate),
                score(l.tally.mean_score),
                l.tally.errors.to_string(),
            ],
        })
        .collect();
    let errors = summary
        .errors
        .iter()
        .map(|e| Row {
            cells: vec![
                e.kind.clone(),
                e.count.to_string(),
                e.examples
                    .first()
                    .map(|x| format!("{} ({} #{}): {}", x.case_id, x.scenario, x.run, x.message))
                    .unwrap_or_default(),
            ],
        })
        .collect();
    let from = paging.from.min(all.len().saturating_sub(1));
    let to = (from + PAGE).min(all.len());
    let results = (from..to).filter_map(|i| all.get(i).map(|r| item(project, &id, ran.as_ref(), i, r))).collect();
    let base = run_url(project, &id);
    // The run before this one, to compare with (runs come oldest first).
    let ids: Vec<String> = store.runs().await?.into_iter().map(|r| r.id).collect();
    let before = ids.iter().position(|x| *x == id).and_then(|i| i.checked_sub(1)).and_then(|i| ids.get(i));
    Ok(html(&RunPage {
        compare_previous: before.map(|p| compare_url(project, p, &id)).unwrap_or_default(),
        previous_id: before.cloned().unwrap_or_default(),
        chrome: Chrome::new(&viewer, format!("run {id}")).at("runs", runs_url(project)).at(id.clone(), ""),
        dataset: ran.as_ref().map(Ran::label).unwrap_or_default(),
        dataset_url: match ran.as_ref().and_then(|r| r.version.map(|n| (r, n))) {
            Some((r, n)) => super::page::version_url(project, &r.dataset, n),
            None => String::new(),
        },
        experiment: known.row.experiment.clone(),
        started: known.row.started.clone(),
        finished: known.row.finished.clone().unwrap_or_default(),
        recorded,
        k,
        totals,
        threshold: percent(Some(summary.threshold)),
        threshold_met: summary.threshold_met,
        graded_nothing: t.pass_rate.is_none(),
        scenarios,
        graders,
        labels,
        errors,
        results,
        total: all.len(),
        from,
        newer: if from > 0 { format!("{base}?from={}", from.saturating_sub(PAGE)) } else { String::new() },
        older: if to < all.len() { format!("{base}?from={to}") } else { String::new() },
        id,
    }))
}

pub struct GradeItem {
    pub grader: String,
    pub weight: String,
    pub score: String,
    pub verdict: &'static str,
    pub text: String,
}

pub struct StepItem {
    pub kind: &'static str,
    pub title: String,
    pub body: String,
    pub result: String,
    /// How casebook answered a tool call (`matched entry 0`, `default`, `unmatched, error`…).
    pub served: String,
}

#[derive(Template)]
#[template(path = "result.html")]
struct ResultPage {
    chrome: Chrome,
    place: usize,
    run: String,
    item: ResultItem,
    labels: Vec<String>,
    content_id: String,
    hash: String,
    failure: String,
    grades: Vec<GradeItem>,
    output: String,
    kept: bool,
    turns: Vec<String>,
    steps: Vec<StepItem>,
    previous: String,
    next: String,
}

#[derive(Deserialize)]
pub struct ResultPath {
    pub project: String,
    pub run: String,
    pub place: usize,
}

fn step(s: &Step) -> StepItem {
    match s {
        Step::Message { role, content, operator } => StepItem {
            kind: "message",
            title: match (serde_json::to_value(role), operator) {
                (Ok(Value::String(r)), false) => r,
                (Ok(Value::String(r)), true) => format!("{r} (operator)"),
                _ => "message".to_owned(),
            },
            body: show(content),
            result: String::new(),
            served: String::new(),
        },
        Step::ToolCall { name, arguments, result, served } => StepItem {
            kind: "tool",
            title: name.clone(),
            body: show(arguments),
            result: result.as_ref().map(show).unwrap_or_default(),
            served: casebook_runner::report::served_text(served.as_ref(), result.is_some()),
        },
        Step::Other { detail } => StepItem {
            kind: "other",
            title: detail.get("type").and_then(Value::as_str).unwrap_or("step").to_owned(),
            body: serde_json::to_string_pretty(detail).unwrap_or_default(),
            result: String::new(),
            served: String::new(),
        },
    }
}

/// One result: the agent's output and trajectory, and the graders' verdicts.
pub async fn result(viewer: Viewer, Path(path): Path<ResultPath>) -> PageResult {
    let store = &viewer.store;
    let known = Known::new(store.run(Some(&path.run)).await?);
    let id = known.row.id.clone();
    let texts = store.run_results(&id).await?;
    let Some(text) = texts.get(path.place) else {
        return Err(Failure::not_found(format!("run `{id}` has no result {} (it has {})", path.place, texts.len())));
    };
    let parsed = serde_json::from_str::<RunResult>(text).map_err(|e| e.to_string());
    let ran = ran(store, known.meta.as_ref(), &mut HashMap::new()).await;
    let project = &path.project;
    let item = item(project, &id, ran.as_ref(), path.place, &parsed);
    let mut page = ResultPage {
        chrome: Chrome::new(&viewer, format!("result {} of run {id}", path.place))
            .at("runs", runs_url(project))
            .at(id.clone(), run_url(project, &id))
            .at(format!("result {}", path.place), ""),
        place: path.place,
        run: id.clone(),
        labels: Vec::new(),
        content_id: String::new(),
        hash: String::new(),
        failure: String::new(),
        grades: Vec::new(),
        output: String::new(),
        kept: false,
        turns: Vec::new(),
        steps: Vec::new(),
        previous: if path.place > 0 { result_url(project, &id, path.place - 1) } else { String::new() },
        next: if path.place + 1 < texts.len() { result_url(project, &id, path.place + 1) } else { String::new() },
        item,
    };
    let Ok(result) = parsed else {
        page.output = text.clone();
        return Ok(html(&page));
    };
    page.labels = result.labels.clone();
    page.content_id = result.case_content_id.clone();
    page.hash = result.hash.clone();
    page.failure = result.failure().map(|f| format!("{}: {}", f.kind, f.message)).unwrap_or_default();
    page.grades = result
        .grades
        .iter()
        .map(|g| match &g.outcome {
            Ok(grade) => GradeItem {
                grader: g.grader.clone(),
                weight: format!("{}", g.weight),
                score: score(Some(grade.score)),
                verdict: if grade.pass { "pass" } else { "fail" },
                text: grade.rationale.clone(),
            },
            Err(failure) => GradeItem {
                grader: g.grader.clone(),
                weight: format!("{}", g.weight),
                score: String::new(),
                verdict: "error",
                text: format!("{}: {}", failure.kind, failure.message),
            },
        })
        .collect();
    // The agent's output is kept apart, once per run hash.
    if result.output.is_ok() && !result.hash.is_empty() {
        let kept = store.outputs(std::slice::from_ref(&result.hash)).await.ok().and_then(|mut o| o.pop().flatten());
        if let Some(output) = kept.and_then(|text| serde_json::from_str::<RunOutput>(&text).ok()) {
            page.kept = true;
            page.output = show(&output.output);
            if output.per_turn.len() > 1 {
                page.turns = output.per_turn.iter().map(show).collect();
            }
            page.steps = output.trajectory.iter().map(step).collect();
        }
    }
    Ok(html(&page))
}

#[derive(Deserialize)]
pub struct CompareQuery {
    #[serde(default)]
    pub a: String,
    #[serde(default)]
    pub b: String,
}

pub struct PairItem {
    pub case_id: String,
    pub case_url: String,
    pub scenario: String,
    pub run: u32,
    pub a: String,
    pub b: String,
    pub difference: String,
    pub url_a: String,
    pub url_b: String,
}

pub struct Side {
    pub id: String,
    pub url: String,
    pub experiment: String,
    pub dataset: String,
    pub started: String,
    pub pass_rate: String,
    pub unreadable: usize,
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage {
    chrome: Chrome,
    choices: Vec<(String, String)>,
    a: String,
    b: String,
    sides: Option<(Side, Side)>,
    pairs: usize,
    mean: String,
    interval: String,
    pass_to_fail: Vec<PairItem>,
    fail_to_pass: Vec<PairItem>,
    only_in_a: Vec<PairItem>,
    only_in_b: Vec<PairItem>,
    errors: Vec<PairItem>,
    ungraded: usize,
    differences: Vec<PairItem>,
    more: usize,
    /// Set when A and B ran different datasets or versions: a case's content may differ between them.
    versions_differ: Option<String>,
}

/// Where each case run of a run is in its results, for links to them.
fn places(results: &[Result<RunResult, String>]) -> HashMap<CaseRun, usize> {
    let mut map = HashMap::new();
    for (i, r) in results.iter().enumerate() {
        if let Ok(r) = r {
            let key = CaseRun { case_id: r.case_id.clone(), scenario: r.scenario.clone(), run: r.run };
            map.entry(key).or_insert(i);
        }
    }
    map
}

type Loaded = (Side, HashMap<CaseRun, usize>, Option<Ran>, Vec<RunResult>, Option<RunMeta>);

/// One side of a comparison: the run, where its results are, and those that can be read.
async fn side(
    store: &AnyStore,
    project: &str,
    reference: &str,
    seen: &mut HashMap<(String, String), Ran>,
) -> Result<Loaded, Failure> {
    let known = Known::new(store.run(Some(reference)).await?);
    let all = results(store, &known.row.id).await?;
    let (summary, _) = summary_of(&known, &all);
    let ran = ran(store, known.meta.as_ref(), seen).await;
    let readable: Vec<RunResult> = all.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
    let side = Side {
        url: run_url(project, &known.row.id),
        id: known.row.id.clone(),
        experiment: known.row.experiment.clone(),
        dataset: ran.as_ref().map(Ran::label).unwrap_or_default(),
        started: known.row.started.clone(),
        pass_rate: percent(summary.totals.pass_rate),
        unreadable: all.len() - readable.len(),
    };
    Ok((side, places(&all), ran, readable, known.meta))
}

/// Two runs side by side, as `casebook compare A B` computes them: B against A.
pub async fn compare_runs(viewer: Viewer, Path(project): Path<String>, Query(q): Query<CompareQuery>) -> PageResult {
    let store = &viewer.store;
    let rows = store.runs().await?;
    let choices: Vec<(String, String)> =
        rows.iter().rev().map(|r| (r.id.clone(), format!("{} · {} · {}", r.id, r.experiment, r.started))).collect();
    let mut page = ComparePage {
        chrome: Chrome::new(&viewer, format!("{project} · compare runs"))
            .at("runs", runs_url(&project))
            .at("compare", ""),
        a: q.a.clone(),
        b: q.b.clone(),
        choices,
        sides: None,
        pairs: 0,
        mean: String::new(),
        interval: String::new(),
        pass_to_fail: Vec::new(),
        fail_to_pass: Vec::new(),
        only_in_a: Vec::new(),
        only_in_b: Vec::new(),
        errors: Vec::new(),
        ungraded: 0,
        differences: Vec::new(),
        more: 0,
        versions_differ: None,
    };
    if q.a.is_empty() || q.b.is_empty() {
        if q.a.is_empty() != q.b.is_empty() {
            return Err(Failure::bad_request("pick two runs: `a` and `b`"));
        }
        return Ok(html(&page));
    }
    let mut seen = HashMap::new();
    let (side_a, places_a, ran_a, a, meta_a) = side(store, &project, &q.a, &mut seen).await?;
    let (side_b, places_b, ran_b, b, meta_b) = side(store, &project, &q.b, &mut seen).await?;
    // Scenarios pair as `casebook compare` pairs them: by name, else by the target they ran.
    let (scenarios_a, scenarios_b) = (Scenarios::of(&a, meta_a.as_ref()), Scenarios::of(&b, meta_b.as_ref()));
    let pairs = pair_scenarios(&scenarios_a, &scenarios_b, &[]).unwrap_or_default();
    let comparison: Comparison = compare_paired(&a, &b, pairs);
    page.a = side_a.id.clone();
    page.b = side_b.id.clone();
    if side_a.dataset != side_b.dataset {
        let named = |label: &str| {
            if label.is_empty() { "a file or a dataset no longer here".to_owned() } else { label.to_owned() }
        };
        page.versions_differ = Some(format!(
            "A ran {} and B ran {}: a case may have changed between them, so a difference can come from the case as well as from the agent",
            named(&side_a.dataset),
            named(&side_b.dataset)
        ));
    }
    let ran = ran_b.or(ran_a);
    let link = |place: Option<&usize>, run: &str| place.map(|p| result_url(&project, run, *p)).unwrap_or_default();
    let keyed = |key: &CaseRun, a: String, b: String, difference: String| PairItem {
        case_url: ran.as_ref().map(|r| r.case_url(&project, &key.case_id)).unwrap_or_default(),
        case_id: key.case_id.clone(),
        scenario: key.scenario.clone(),
        run: key.run,
        url_a: link(places_a.get(key), &side_a.id),
        url_b: link(places_b.get(key), &side_b.id),
        a,
        b,
        difference,
    };
    let pair = |d: &PairedDifference| {
        keyed(
            &d.key,
            format!("{} {}", d.verdict_a.as_str(), score(Some(d.score_a))),
            format!("{} {}", d.verdict_b.as_str(), score(Some(d.score_b))),
            signed(Some(d.difference)),
        )
    };
    page.pairs = comparison.pairs;
    page.mean = signed(comparison.mean_difference);
    page.interval = signed_interval(comparison.mean_difference_interval);
    page.pass_to_fail = comparison.pass_to_fail.iter().map(pair).collect();
    page.fail_to_pass = comparison.fail_to_pass.iter().map(pair).collect();
    page.only_in_a =
        comparison.only_in_a.iter().map(|k| keyed(k, String::new(), String::new(), String::new())).collect();
    page.only_in_b =
        comparison.only_in_b.iter().map(|k| keyed(k, String::new(), String::new(), String::new())).collect();
    let failure = |f: &Option<casebook_runner::record::Failure>| {
        f.as_ref().map_or_else(|| "no error".to_owned(), |f| format!("{}: {}", f.kind, f.message))
    };
    page.errors =
        comparison.errors.iter().map(|e| keyed(&e.key, failure(&e.a), failure(&e.b), String::new())).collect();
    page.ungraded = comparison.ungraded;
    page.more = comparison.differences.len().saturating_sub(PAIRS_SHOWN);
    page.differences = comparison.differences.iter().take(PAIRS_SHOWN).map(pair).collect();
    page.sides = Some((side_a, side_b));
    Ok(html(&page))
}

/// A link to compare two runs, for the run page.
pub fn compare_url(project: &str, a: &str, b: &str) -> String {
    format!("{}/compare?a={}&b={}", project_url(project), query(a), query(b))
}
