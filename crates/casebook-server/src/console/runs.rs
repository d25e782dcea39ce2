//! Runs pages: a project's runs, one run's summary and results, one result with the agent's
//! output and trajectory and the graders' verdicts, and two runs compared.
//!
//! The numbers are the runner's: the summary a run recorded ([`Summary`]), or the one the
//! runner computes again from the results for a run that recorded none, and [`compare`] for
//! two runs. The pages only lay them out.

use std::collections::HashMap;

use crate::extract::{Path, Query};
use askama::Template;
use casebook_runner::comparison::{At, Keyed, ListPage, Listed, Side as ComparedSide, compare_sides};
use casebook_runner::pairing::pair_scenarios;
use casebook_runner::protocol::Step;
use casebook_runner::record::{RunOutput, RunResult};
use casebook_runner::summary::{CaseRun, Interval, PairedDifference, PairedError, RunMeta, Summary, Verdict};
use casebook_store::{AnyStore, Ref, RunRow, Store};
use serde::Deserialize;
use serde_json::Value;

use super::page::{Chrome, Failure, PageResult, case_url, filters, html, project_url, query, seg};
use super::session::Viewer;
use super::view::{preview, show};

/// Results a run page lists at a time.
const PAGE: usize = 200;

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
    /// Who made that version, in the one form of an author (empty when it is not found).
    author: String,
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
    };
    let found = Ran {
        dataset: name.to_owned(),
        author: version.as_ref().map(|v| super::page::shown_author(&v.author)).unwrap_or_default(),
        version: version.map(|v| v.number),
    };
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
    /// Who made the dataset version the run ran, in the one form of an author.
    dataset_author: String,
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
    /// All of the run's results.
    total: usize,
    /// Those the filters choose.
    shown: usize,
    from: usize,
    facets: Vec<Facet>,
    sort: String,
    sorts: Vec<(&'static str, &'static str)>,
    /// The run page without filters.
    base: String,
    filtered: bool,
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

/// The run page's choice of results: filters, order and page.
#[derive(Deserialize, Default)]
pub struct Paging {
    /// The place of the page's first result among those chosen.
    #[serde(default)]
    pub from: usize,
    /// `pass`, `fail`, `error` or `ungraded`.
    #[serde(default)]
    pub verdict: String,
    #[serde(default)]
    pub scenario: String,
    /// Results a grader of this name graded.
    #[serde(default)]
    pub grader: String,
    /// Results whose case had this label.
    #[serde(default)]
    pub label: String,
    /// `case`, `verdict`, `score`, `duration` (a leading `-`: largest first); the run's order
    /// without it.
    #[serde(default)]
    pub sort: String,
}

/// The orders the run page offers: the `sort` value and what the page calls it.
const SORTS: [(&str, &str); 8] = [
    ("", "the run's order"),
    ("case", "case id"),
    ("verdict", "verdict"),
    ("score", "score, lowest first"),
    ("-score", "score, highest first"),
    ("duration", "duration, shortest first"),
    ("-duration", "duration, longest first"),
    ("-case", "case id, last first"),
];

/// A filter of the run page: its values, each with how many results it would show with the
/// other filters as they are.
pub struct Facet {
    /// `verdict`, `scenario`, `grader`, `label`: the query name and the select's id.
    pub name: &'static str,
    pub chosen: String,
    pub values: Vec<(String, usize)>,
}

impl Paging {
    fn chosen(&self) -> [&str; 4] {
        [self.verdict.trim(), self.scenario.trim(), self.grader.trim(), self.label.trim()]
    }

    /// The page's URL with its filters and order, from the `from`-th result.
    fn url(&self, base: &str, from: usize) -> String {
        let mut parts = Vec::new();
        for (name, value) in FACETS.iter().zip(self.chosen()) {
            if !value.is_empty() {
                parts.push(format!("{name}={}", query(value)));
            }
        }
        if !self.sort.is_empty() {
            parts.push(format!("sort={}", query(&self.sort)));
        }
        if from > 0 {
            parts.push(format!("from={from}"));
        }
        if parts.is_empty() { base.to_owned() } else { format!("{base}?{}", parts.join("&")) }
    }
}

const FACETS: [&str; 4] = ["verdict", "scenario", "grader", "label"];

/// A result's values for each facet (a result has one verdict and scenario, and any number of
/// graders and labels); an unreadable one has none.
fn facet_values(result: &Result<RunResult, String>) -> [Vec<&str>; 4] {
    match result {
        Ok(r) => [
            vec![Verdict::of(r).as_str()],
            vec![r.scenario.as_str()],
            r.grades.iter().map(|g| g.grader.as_str()).collect(),
            r.labels.iter().map(String::as_str).collect(),
        ],
        Err(_) => [vec!["unreadable"], Vec::new(), Vec::new(), Vec::new()],
    }
}

/// The places of the results the filters choose, in the order asked for, and each facet's
/// values counted over the results the other filters choose.
fn choose(all: &[Result<RunResult, String>], paging: &Paging) -> Result<(Vec<usize>, Vec<Facet>), Failure> {
    let chosen = paging.chosen();
    let mut counts: [std::collections::BTreeMap<String, usize>; 4] = Default::default();
    let mut places = Vec::new();
    for (place, result) in all.iter().enumerate() {
        let values = facet_values(result);
        let fits: Vec<bool> =
            values.iter().zip(chosen).map(|(vs, want)| want.is_empty() || vs.contains(&want)).collect();
        for (d, vs) in values.iter().enumerate() {
            if fits.iter().enumerate().all(|(o, fit)| o == d || *fit) {
                // A grader that graded a result twice counts it once.
                let mut seen: Vec<&str> = Vec::new();
                for v in vs {
                    if !seen.contains(v) {
                        seen.push(v);
                        *counts[d].entry((*v).to_owned()).or_default() += 1;
                    }
                }
            }
        }
        if fits.iter().all(|f| *f) {
            places.push(place);
        }
    }
    let sort = paging.sort.trim();
    let (key, descending) = match sort.strip_prefix('-') {
        Some(key) => (key, true),
        None => (sort, false),
    };
    let ok = |p: &usize| all[*p].as_ref().ok();
    match key {
        "" => {}
        "case" => places.sort_by(|x, y| {
            let k = |p: &usize| ok(p).map(|r| (r.case_id.clone(), r.scenario.clone(), r.run));
            k(x).cmp(&k(y))
        }),
        "verdict" => places.sort_by_key(|p| ok(p).map(Verdict::of).map_or(4, |v| v as u8)),
        "score" => places.sort_by(|x, y| {
            let k = |p: &usize| ok(p).and_then(|r| r.score);
            // Results without a score last, whichever way.
            match (k(x), k(y)) {
                (Some(a), Some(b)) if descending => b.total_cmp(&a),
                (Some(a), Some(b)) => a.total_cmp(&b),
                (a, b) => b.is_some().cmp(&a.is_some()),
            }
        }),
        "duration" => places.sort_by(|x, y| {
            let k = |p: &usize| ok(p).and_then(|r| r.output.as_ref().ok()).map(|o| o.millis);
            match (k(x), k(y)) {
                (Some(a), Some(b)) if descending => b.cmp(&a),
                (Some(a), Some(b)) => a.cmp(&b),
                (a, b) => b.is_some().cmp(&a.is_some()),
            }
        }),
        _ => {
            let known: Vec<&str> = SORTS.iter().map(|(v, _)| *v).filter(|v| !v.is_empty()).collect();
            return Err(Failure::bad_request(format!(
                "`sort` is `{}`: say one of {}",
                casebook_model::excerpt(sort),
                known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    if descending && matches!(key, "case" | "verdict") {
        places.reverse();
    }
    let facets = FACETS
        .into_iter()
        .zip(counts)
        .zip(chosen)
        .map(|((name, values), chosen)| Facet { name, chosen: chosen.to_owned(), values: values.into_iter().collect() })
        .collect();
    Ok((places, facets))
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
    let (places, facets) = choose(&all, &paging)?;
    let from = paging.from.min(places.len().saturating_sub(1));
    let to = (from + PAGE).min(places.len());
    let results = places[from..to].iter().map(|&i| item(project, &id, ran.as_ref(), i, &all[i])).collect();
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
        dataset_author: ran.as_ref().map(|r| r.author.clone()).unwrap_or_default(),
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
        shown: places.len(),
        from,
        newer: if from > 0 { paging.url(&base, from.saturating_sub(PAGE)) } else { String::new() },
        older: if to < places.len() { paging.url(&base, to) } else { String::new() },
        facets,
        sort: paging.sort.trim().to_owned(),
        sorts: SORTS.to_vec(),
        base,
        filtered: paging.chosen().iter().any(|c| !c.is_empty()),
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
    page.grades = grade_items(&result);
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
    /// One list paged alone (`pass-to-fail`, `fail-to-pass`, `errored`, `only-a`, `only-b`,
    /// `pairs`); the first page of each without it.
    #[serde(default)]
    pub list: String,
    /// The list's page starts just after this case run (a cursor the page gave) …
    #[serde(default)]
    pub after: String,
    /// … or ends just before this one.
    #[serde(default)]
    pub before: String,
}

/// One side of a pair: its result, the case version it ran, and for a flipped case its output
/// and grades.
pub struct PairSide {
    /// Its verdict and score, or its error.
    pub text: String,
    pub url: String,
    /// The case as that run ran it (`/versions/N/cases/ID`), and the version's name (`v3`).
    pub case_url: String,
    pub version: String,
    pub output: String,
    pub grades: Vec<GradeItem>,
}

pub struct PairItem {
    pub case_id: String,
    pub scenario: String,
    pub run: u32,
    pub a: PairSide,
    pub b: PairSide,
    pub difference: String,
    /// Both sides ran the same version of the case.
    pub same_version: bool,
}

/// A list of a comparison as the page shows it: a page of its pairs and the links around it.
pub struct PairList {
    /// The list's name in URLs and its HTML class.
    pub list: &'static str,
    pub title: &'static str,
    pub count: usize,
    pub pairs: Vec<PairItem>,
    /// "1–50 of 1,200".
    pub position: String,
    pub previous_url: String,
    pub next_url: String,
    /// The list paged alone (empty when the page shows it alone, or all of it fits).
    pub all_url: String,
    /// Its pairs show both outputs side by side.
    pub outputs: bool,
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
    /// Pass → fail, fail → pass, unchanged, only in A, only in B, errors, ungraded.
    counts: Vec<(&'static str, String)>,
    lists: Vec<PairList>,
    /// The whole comparison's URL when the page shows one list alone.
    whole_url: String,
    /// Set when A and B ran different datasets or versions: a case's content may differ between them.
    versions_differ: Option<String>,
}

/// Pairs a comparison page lists of each list at a time.
const PAIRS_PAGE: usize = 50;
/// Results read from the store at a time while a run is streamed into a comparison.
const STREAM_BATCH: usize = 2000;

/// The lists of a comparison: name in URLs, title, whether its pairs show outputs.
const PAIR_LISTS: [(&str, &str, bool); 6] = [
    ("pass-to-fail", "Pass → fail", true),
    ("fail-to-pass", "Fail → pass", true),
    ("errored", "An error on a side", false),
    ("only-a", "Only in A", false),
    ("only-b", "Only in B", false),
    ("pairs", "Every pair", false),
];

/// A run streamed into one side of a comparison, a page of results at a time: the side
/// (sorted through temporary files), its page header, where it ran, and its meta.
async fn stream_side(
    store: &AnyStore,
    project: &str,
    reference: &str,
    seen: &mut HashMap<(String, String), Ran>,
) -> Result<(ComparedSide, Side, Option<Ran>, Option<RunMeta>), Failure> {
    let known = Known::new(store.run(Some(reference)).await?);
    let ran = ran(store, known.meta.as_ref(), seen).await;
    let mut side = ComparedSide::default();
    let mut unreadable = 0;
    let mut next = 0;
    loop {
        let page = store.run_results_from(&known.row.id, next, STREAM_BATCH).await?;
        let Some((last, _)) = page.last() else { break };
        next = last + 1;
        for (_, text) in &page {
            match serde_json::from_str::<RunResult>(text) {
                Ok(result) => side.add(&result).map_err(Failure::internal)?,
                Err(_) => unreadable += 1,
            }
        }
        if page.len() < STREAM_BATCH {
            break;
        }
    }
    let header = Side {
        url: run_url(project, &known.row.id),
        id: known.row.id.clone(),
        experiment: known.row.experiment.clone(),
        dataset: ran.as_ref().map(Ran::label).unwrap_or_default(),
        started: known.row.started.clone(),
        pass_rate: known.summary.as_ref().map_or_else(|| "–".to_owned(), |s| percent(s.totals.pass_rate)),
        unreadable,
    };
    Ok((side, header, ran, known.meta))
}

/// One page of a list of the comparison: its case runs with what the page shows of each.
struct Listing {
    name: &'static str,
    count: usize,
    page: ListPage<Entry>,
}

/// An entry of any list, as the page needs it.
#[derive(Clone)]
enum Entry {
    Pair(PairedDifference),
    Error(PairedError),
    Only(CaseRun),
}

impl Entry {
    fn key(&self) -> &CaseRun {
        match self {
            Entry::Pair(p) => &p.key,
            Entry::Error(e) => &e.key,
            Entry::Only(k) => k,
        }
    }
}

fn listed<T: Clone + serde::Serialize + serde::de::DeserializeOwned + Keyed>(
    listed: &mut Listed<T>,
    at: At<'_>,
    wrap: fn(T) -> Entry,
) -> std::io::Result<(usize, ListPage<Entry>)> {
    let page = listed.page(at, PAIRS_PAGE)?;
    Ok((
        listed.count,
        ListPage {
            entries: page.entries.into_iter().map(wrap).collect(),
            first: page.first,
            more_before: page.more_before,
            more_after: page.more_after,
        },
    ))
}

/// The results of a run at the case runs asked for (the first of each), with their places: one
/// more pass over the run, keeping only those. `rename` names B's scenarios as A's.
async fn results_at(
    store: &AnyStore,
    run: &str,
    wanted: &std::collections::HashSet<CaseRun>,
    rename: &HashMap<String, String>,
) -> Result<HashMap<CaseRun, (u64, RunResult)>, Failure> {
    let mut found = HashMap::new();
    let mut next = 0;
    while found.len() < wanted.len() {
        let page = store.run_results_from(run, next, STREAM_BATCH).await?;
        let Some((last, _)) = page.last() else { break };
        next = last + 1;
        for (place, text) in &page {
            let Ok(result) = serde_json::from_str::<RunResult>(text) else { continue };
            let scenario = rename.get(&result.scenario).cloned().unwrap_or_else(|| result.scenario.clone());
            let key = CaseRun { case_id: result.case_id.clone(), scenario, run: result.run };
            if wanted.contains(&key) && !found.contains_key(&key) {
                found.insert(key, (*place, result));
            }
        }
        if page.len() < STREAM_BATCH {
            break;
        }
    }
    Ok(found)
}

fn grade_items(result: &RunResult) -> Vec<GradeItem> {
    result
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
        .collect()
}

/// The agent's output a result kept (apart, by run hash), as the result page shows it.
async fn output_of(store: &AnyStore, result: &RunResult) -> String {
    if result.output.is_err() || result.hash.is_empty() {
        return String::new();
    }
    let kept = store.outputs(std::slice::from_ref(&result.hash)).await.ok().and_then(|mut o| o.pop().flatten());
    kept.and_then(|text| serde_json::from_str::<RunOutput>(&text).ok()).map(|o| show(&o.output)).unwrap_or_default()
}

/// Two runs side by side, as `casebook compare A B` computes them (B against A), streamed: each
/// run is read a page at a time into the runner's sorted sides, the comparison's lists go to
/// temporary files, and the page reads back one page of each list.
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
        counts: Vec::new(),
        lists: Vec::new(),
        whole_url: String::new(),
        versions_differ: None,
    };
    if q.a.is_empty() || q.b.is_empty() {
        if q.a.is_empty() != q.b.is_empty() {
            return Err(Failure::bad_request("pick two runs: `a` and `b`"));
        }
        return Ok(html(&page));
    }
    let alone = match q.list.trim() {
        "" => None,
        text => {
            Some(PAIR_LISTS.iter().find(|(name, _, _)| *name == text).map(|(name, _, _)| *name).ok_or_else(|| {
                Failure::bad_request(format!(
                    "`list` is `{}`: say one of {}",
                    casebook_model::excerpt(text),
                    PAIR_LISTS.iter().map(|(n, _, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                ))
            })?)
        }
    };
    let cursor = |text: &str| -> Result<Option<CaseRun>, Failure> {
        match text.trim() {
            "" => Ok(None),
            text => crate::cursor::decode_key(text).map(Some).map_err(Failure::from),
        }
    };
    let (after, before) = (cursor(&q.after)?, cursor(&q.before)?);
    let mut seen = HashMap::new();
    let (a, side_a, ran_a, meta_a) = stream_side(store, &project, &q.a, &mut seen).await?;
    let (b, side_b, ran_b, meta_b) = stream_side(store, &project, &q.b, &mut seen).await?;
    // Scenarios pair as `casebook compare` pairs them: by name, else by the target they ran.
    let pairs = pair_scenarios(&a.ran(meta_a.as_ref()), &b.ran(meta_b.as_ref()), &[]).unwrap_or_default();
    let rename: HashMap<String, String> = pairs.iter().map(|p| (p.b.clone(), p.a.clone())).collect();
    let (compared, listings) = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
        let mut c = compare_sides(a, b, pairs)?;
        let at = match (&after, &before) {
            (Some(key), _) => At::After(key),
            (None, Some(key)) => At::Before(key),
            (None, None) => At::Start,
        };
        let mut listings = Vec::new();
        for (name, _, _) in PAIR_LISTS {
            if alone.is_some_and(|a| a != name) {
                continue;
            }
            let at = if alone.is_some() { at } else { At::Start };
            let (count, page) = match name {
                "pass-to-fail" => listed(&mut c.pass_to_fail, at, Entry::Pair)?,
                "fail-to-pass" => listed(&mut c.fail_to_pass, at, Entry::Pair)?,
                "errored" => listed(&mut c.errors, at, Entry::Error)?,
                "only-a" => listed(&mut c.only_in_a, at, Entry::Only)?,
                "only-b" => listed(&mut c.only_in_b, at, Entry::Only)?,
                _ => listed(&mut c.differences, at, Entry::Pair)?,
            };
            listings.push(Listing { name, count, page });
        }
        let counts = (
            c.pairs,
            c.mean_difference,
            c.mean_difference_interval,
            [
                c.pass_to_fail.count,
                c.fail_to_pass.count,
                c.only_in_a.count,
                c.only_in_b.count,
                c.errors.count,
                c.ungraded,
            ],
        );
        Ok((counts, listings))
    })
    .await
    .map_err(Failure::internal)?
    .map_err(Failure::internal)?;
    let (pairs_count, mean, interval, [p2f, f2p, only_a, only_b, errors, ungraded]) = compared;
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
    // The results of the page's case runs on each side: places, and the flipped ones' outputs.
    let wanted: std::collections::HashSet<CaseRun> =
        listings.iter().flat_map(|l| l.page.entries.iter().map(|e| e.key().clone())).collect();
    let found_a = results_at(store, &side_a.id, &wanted, &HashMap::new()).await?;
    let found_b = results_at(store, &side_b.id, &wanted, &rename).await?;
    let base = compare_url(&project, &side_a.id, &side_b.id);
    let failure = |f: &Option<casebook_runner::record::Failure>| {
        f.as_ref().map_or_else(|| "no error".to_owned(), |f| format!("{}: {}", f.kind, f.message))
    };
    for listing in listings {
        let (name, title, outputs) =
            PAIR_LISTS.iter().copied().find(|(n, _, _)| *n == listing.name).unwrap_or(("pairs", "Every pair", false));
        let mut items = Vec::new();
        for entry in &listing.page.entries {
            let key = entry.key();
            let side = |found: &HashMap<CaseRun, (u64, RunResult)>, run: &str, ran: &Option<Ran>, text: String| {
                let hit = found.get(key);
                PairSide {
                    text,
                    url: hit.map(|(p, _)| result_url(&project, run, *p as usize)).unwrap_or_default(),
                    case_url: ran.as_ref().map(|r| r.case_url(&project, &key.case_id)).unwrap_or_default(),
                    version: ran.as_ref().and_then(|r| r.version).map(|n| format!("v{n}")).unwrap_or_default(),
                    output: String::new(),
                    grades: if outputs { hit.map(|(_, r)| grade_items(r)).unwrap_or_default() } else { Vec::new() },
                }
            };
            let (ta, tb, difference) = match entry {
                Entry::Pair(d) => (
                    format!("{} {}", d.verdict_a.as_str(), score(Some(d.score_a))),
                    format!("{} {}", d.verdict_b.as_str(), score(Some(d.score_b))),
                    signed(Some(d.difference)),
                ),
                Entry::Error(e) => (failure(&e.a), failure(&e.b), String::new()),
                Entry::Only(_) => (String::new(), String::new(), String::new()),
            };
            let mut a = side(&found_a, &side_a.id, &ran_a, ta);
            let mut b = side(&found_b, &side_b.id, &ran_b, tb);
            if outputs {
                if let Some((_, r)) = found_a.get(key) {
                    a.output = output_of(store, r).await;
                }
                if let Some((_, r)) = found_b.get(key) {
                    b.output = output_of(store, r).await;
                }
            }
            items.push(PairItem {
                case_id: key.case_id.clone(),
                scenario: key.scenario.clone(),
                run: key.run,
                same_version: a.case_url == b.case_url,
                a,
                b,
                difference,
            });
        }
        let shown = items.len();
        let list_url = format!("{base}&list={name}");
        let ListPage { first, more_before, more_after, .. } = listing.page;
        page.lists.push(PairList {
            list: name,
            title,
            count: listing.count,
            position: match shown {
                0 => format!("none of {}", listing.count),
                _ => format!("{}–{} of {}", first + 1, first + shown, listing.count),
            },
            previous_url: match items.first() {
                Some(_) if more_before => {
                    format!("{list_url}&before={}", query(&crate::cursor::encode_key(listing.page.entries[0].key())))
                }
                _ => String::new(),
            },
            next_url: match listing.page.entries.last() {
                Some(last) if more_after => {
                    format!("{list_url}&after={}", query(&crate::cursor::encode_key(last.key())))
                }
                _ => String::new(),
            },
            all_url: if alone.is_some() || !more_after { String::new() } else { list_url },
            outputs,
            pairs: items,
        });
    }
    page.whole_url = if alone.is_some() { base } else { String::new() };
    page.pairs = pairs_count;
    page.mean = signed(mean);
    page.interval = signed_interval(interval);
    let unchanged = pairs_count.saturating_sub(p2f + f2p);
    page.counts = vec![
        ("pass → fail", p2f.to_string()),
        ("fail → pass", f2p.to_string()),
        ("unchanged (paired, same verdict)", unchanged.to_string()),
        ("only in A", only_a.to_string()),
        ("only in B", only_b.to_string()),
        ("an error on a side (not paired)", errors.to_string()),
        ("no score on a side (not paired)", ungraded.to_string()),
    ];
    page.sides = Some((side_a, side_b));
    Ok(html(&page))
}

/// A link to compare two runs, for the run page.
pub fn compare_url(project: &str, a: &str, b: &str) -> String {
    format!("{}/compare?a={}&b={}", project_url(project), query(a), query(b))
}
