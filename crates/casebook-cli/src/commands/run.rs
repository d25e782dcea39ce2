//! `casebook run`, `casebook results`, `casebook compare`: running a dataset against agents,
//! and reading what runs found.
//!
//! A run reads its dataset (a file, or `NAME@REF` in the store), selects cases, builds a target
//! per scenario and the graders, and hands the jobs to `casebook_runner::engine`. With a store,
//! results are kept as they finish, agents' outputs are kept by run hash (a later run, or
//! `--regrade`, reuses them), and Ctrl-C stops cleanly.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use casebook_filter::Filter;
use casebook_formats::{Batch, Consumer, Flow, Start, read};
use casebook_model::Case;
use casebook_runner::engine::{self, Job, Mode, Plan, PlannedScenario};
use casebook_runner::experiment::{Experiment, ExperimentError, Located};
use casebook_runner::grade::GraderSpec;
use casebook_runner::record::{RunOutput, RunResult};
use casebook_runner::report;
use casebook_runner::summary::{RunMeta, Summary, SummaryBuilder};
use casebook_runner::target::TargetSpec;
use casebook_store::{ResultRow, SqliteStore, Store};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::Outcome;
use crate::args::{CompareArgs, ReportFormat, ResultsArgs, RunArgs};
use crate::report::Reporter;
use crate::settings::Global;
use crate::stores;

/// Results kept in the store at a time while running.
const SAVE_EVERY: usize = 512;
/// Jobs whose stored outputs are looked up at a time.
const WINDOW: usize = 4096;

pub fn run(settings: &Global, args: RunArgs) -> anyhow::Result<Outcome> {
    let (mut experiment, base) = match &args.experiment {
        Some(path) => {
            super::check_exists(path)?;
            let text = fs_err::read_to_string(path)?;
            match Experiment::parse(path, &text) {
                Ok(e) => (e, path.parent().map(Path::to_path_buf).unwrap_or_default()),
                Err(err) => {
                    report_experiment_error(settings, &err);
                    return Ok(Outcome::Invalid);
                }
            }
        }
        None => {
            let (Some(dataset), Some(target)) = (&args.dataset, &args.target) else {
                anyhow::bail!(
                    "name an experiment file, or a dataset and a target: `casebook run --dataset FILE --target URL`"
                );
            };
            (Experiment::ad_hoc(dataset, target, &args.graders), PathBuf::new())
        }
    };
    if args.experiment.is_some() {
        if let Some(target) = &args.target {
            experiment.scenarios = Experiment::ad_hoc("", target, &[]).scenarios;
        }
        if let Some(dataset) = &args.dataset {
            experiment.dataset.clone_from(dataset);
        }
        for kind in &args.graders {
            experiment.graders.push(Located { value: json!({"kind": kind}), at: Default::default() });
        }
    }
    if let Some(n) = args.concurrency {
        experiment.concurrency = n.max(1);
    }
    // A letta suite's target is a Letta agent, which casebook cannot start.
    if let Some(err) = experiment.missing_target() {
        report_experiment_error(settings, err);
        return Ok(Outcome::Invalid);
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // The store is where results are kept; a run works without one (and says so).
    let store = match stores::folder(settings) {
        Ok(_) => Some(stores::open(settings, &runtime)?),
        Err(_) => None,
    };

    let select = selection(&experiment, args.only.as_deref())?;
    let Some(dataset) = load_dataset(settings, &runtime, store.as_ref(), &experiment, &base, &select)? else {
        return Ok(Outcome::Invalid);
    };
    let (dataset_name, version_id) = (dataset.name.clone(), dataset.version_id.clone());
    let plan = Arc::new(plan_of(&runtime, &args, &experiment, dataset)?);
    let jobs = plan.jobs().map_err(|e| anyhow::anyhow!("{e}"))?;
    let total = jobs.len();

    let mode = if args.regrade { Mode::Regrade } else { Mode::Run };
    let store = store.map(Arc::new);
    let run_id = run_id(&settings.time);
    let meta = RunMeta {
        run_id: run_id.clone(),
        experiment: experiment.name.clone(),
        dataset: dataset_name,
        dataset_version_id: version_id,
        started: settings.time.clone(),
        finished: String::new(),
        n_runs: experiment.n_runs,
        scenarios: plan.scenarios.iter().map(|s| s.name.clone()).collect(),
    };
    if let Some(store) = &store {
        runtime.block_on(store.begin_run(&run_id, &experiment.name, &settings.time, &serde_json::to_string(&meta)?))?;
    } else if !settings.quiet {
        eprintln!("note: no store here: results are not kept (run `casebook init` to keep them and resume)");
    }
    if !settings.quiet && !settings.json {
        eprintln!(
            "run {run_id}: {} cases × {} scenario{} × {} = {total} runs",
            plan.cases.len(),
            plan.scenarios.len(),
            if plan.scenarios.len() == 1 { "" } else { "s" },
            experiment.n_runs
        );
    }

    // The JSONL report is written as results come (the others need them all).
    let mut jsonl = match args.reports.iter().find(|(f, _)| *f == ReportFormat::Jsonl) {
        Some((_, path)) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                fs_err::create_dir_all(dir)?;
            }
            Some(crate::output::Output::create(Some(path))?)
        }
        None => None,
    };
    let started = Instant::now();
    let bar = progress_bar(settings, total as u64);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Job, RunResult, bool)>(1024);
    // The summary is built as results come; results themselves are kept only for the reports
    // that need them all (JUnit, Markdown, HTML).
    let mut summary = SummaryBuilder::default();
    let keep = args.reports.iter().any(|(f, _)| *f != ReportFormat::Jsonl);
    let mut results: Vec<(u64, RunResult)> = Vec::new();
    let mut done = 0usize;
    let mut reused = 0u64;
    let stopped = runtime.block_on(async {
        // The jobs a window at a time: the outputs stored for a window are looked up just before
        // it runs, so memory holds one window's, not the experiment's.
        let work = {
            let (plan, store, stop) = (plan.clone(), store.clone(), stop_rx.clone());
            tokio::spawn(async move {
                let mut jobs = jobs.into_iter().peekable();
                while jobs.peek().is_some() && !*stop.borrow() {
                    let window: Vec<Job> = jobs.by_ref().take(WINDOW).collect();
                    let stored = match &store {
                        Some(store) => {
                            let hashes: Vec<String> = window.iter().map(|j| j.hash.clone()).collect();
                            match store.outputs(&hashes).await {
                                Ok(found) => found
                                    .into_iter()
                                    .filter_map(|(hash, text)| serde_json::from_str(&text).ok().map(|o| (hash, o)))
                                    .collect(),
                                Err(err) => {
                                    eprintln!("error: cannot read stored outputs: {err}");
                                    HashMap::new()
                                }
                            }
                        }
                        None => HashMap::new(),
                    };
                    engine::execute(plan.clone(), window, Arc::new(stored), mode, stop.clone(), tx.clone()).await;
                }
            })
        };
        let mut pending: Vec<ResultRow> = Vec::new();
        let (mut passed, mut errors) = (0u64, 0u64);
        let mut stopped = false;
        loop {
            tokio::select! {
                next = rx.recv() => {
                    let Some((job, mut result, from_store)) = next else { break };
                    match (result.failure(), result.pass) {
                        (Some(_), _) => errors += 1,
                        (None, Some(true)) => passed += 1,
                        _ => {}
                    }
                    reused += u64::from(from_store);
                    if let Some(bar) = &bar {
                        bar.inc(1);
                        let graded = bar.position() - errors;
                        let rate = if graded == 0 { 0.0 } else { 100.0 * passed as f64 / graded as f64 };
                        bar.set_message(format!("pass {rate:.0}%  errors {errors}"));
                    }
                    if let Some((_, out)) = &mut jsonl {
                        if let Err(err) = serde_json::to_writer(&mut *out, &result).map_err(std::io::Error::from).and_then(|()| out.write_all(b"\n")) {
                            eprintln!("error: cannot write the JSONL report: {err}");
                        }
                    }
                    let output = result.take_output();
                    if let Some(store) = &store {
                        // An output read from the store is there already.
                        let output = output
                            .filter(|_| !from_store)
                            .and_then(|o| serde_json::to_string(&o).ok())
                            .map(|o| (result.hash.clone(), o));
                        pending.push(ResultRow { seq: job.seq, result: serde_json::to_string(&result).unwrap_or_default(), output });
                        if pending.len() >= SAVE_EVERY {
                            if let Err(err) = store.save_results(&run_id, &pending).await {
                                eprintln!("error: cannot keep results in the store: {err}");
                            }
                            pending.clear();
                        }
                    }
                    summary.add(&result);
                    done += 1;
                    if keep {
                        // Reports show why a case failed, not why one passed; the store has it all.
                        result.slim(160);
                        results.push((job.seq, result));
                    }
                }
                _ = tokio::signal::ctrl_c(), if !stopped => {
                    stopped = true;
                    let _ = stop_tx.send(true);
                    eprintln!("\nstopping: finished runs are kept; run the same command again to resume");
                }
            }
        }
        let _ = work.await;
        if let (Some(store), false) = (&store, pending.is_empty()) {
            if let Err(err) = store.save_results(&run_id, &pending).await {
                eprintln!("error: cannot keep results in the store: {err}");
            }
        }
        stopped
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    results.sort_by_key(|(seq, _)| *seq);
    let results: Vec<RunResult> = results.into_iter().map(|(_, r)| r).collect();
    let finished = crate::settings::now();
    let meta = RunMeta { finished: finished.clone(), ..meta };
    let summary = summary.finish(experiment.threshold, meta);
    if let Some(store) = store.and_then(|s| Arc::try_unwrap(s).ok()) {
        if !stopped {
            runtime.block_on(store.finish_run(&run_id, &finished, &serde_json::to_string(&summary)?))?;
        }
        runtime.block_on(store.close());
    }
    if let Some((output, mut out)) = jsonl {
        out.flush()?;
        drop(out);
        output.keep()?;
    }
    write_reports(&args.reports, &summary, &results)?;
    if settings.json {
        crate::write_stdout(&format!("{}\n", serde_json::to_string(&summary)?))?;
    } else {
        crate::write_stdout(&report::human(&summary))?;
        if !settings.quiet {
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "{done} runs in {secs:.1} s ({:.0} runs/s), {reused} from stored outputs",
                done as f64 / secs.max(1e-9)
            );
        }
    }
    if stopped {
        eprintln!("stopped after {done} of {total} runs");
        return Ok(Outcome::Invalid);
    }
    Ok(if summary.threshold_met { Outcome::Ok } else { Outcome::Invalid })
}

pub fn results(settings: &Global, args: ResultsArgs) -> anyhow::Result<Outcome> {
    stores::print(settings, |runtime, store| {
        if args.list {
            let runs = runtime.block_on(store.runs())?;
            let mut out = String::new();
            for run in runs.iter().rev() {
                let line = if settings.json {
                    json!({"id": run.id, "experiment": run.experiment, "started": run.started, "finished": run.finished}).to_string()
                } else {
                    format!(
                        "{}  {}  {}  {}",
                        run.id,
                        run.started,
                        run.finished.as_deref().unwrap_or("(stopped)"),
                        run.experiment
                    )
                };
                out.push_str(&line);
                out.push('\n');
            }
            return Ok(out);
        }
        let (summary, results) = load_run(runtime, store, args.run.as_deref())?;
        let format = if settings.json { ReportFormat::Json } else { args.report.unwrap_or(ReportFormat::Human) };
        Ok(render(format, &summary, &results))
    })
}

pub fn compare(settings: &Global, args: CompareArgs) -> anyhow::Result<Outcome> {
    stores::print(settings, |runtime, store| {
        let (_, a) = load_run(runtime, store, Some(&args.a))?;
        let (_, b) = load_run(runtime, store, Some(&args.b))?;
        let comparison = casebook_runner::summary::compare(&a, &b);
        Ok(if settings.json {
            format!("{}\n", serde_json::to_string(&comparison)?)
        } else {
            report::human_comparison(&comparison)
        })
    })
}

/// A stored run's summary (as recorded, or computed again for a stopped run) and results.
fn load_run(
    runtime: &tokio::runtime::Runtime,
    store: &SqliteStore,
    reference: Option<&str>,
) -> anyhow::Result<(Summary, Vec<RunResult>)> {
    let run = runtime.block_on(store.run(reference))?;
    let mut results: Vec<RunResult> = runtime
        .block_on(store.run_results(&run.id))?
        .iter()
        .map(|text| serde_json::from_str(text))
        .collect::<Result<_, _>>()
        .context("a stored result cannot be read back")?;
    // The agents' outputs are kept apart, by run hash.
    let hashes: Vec<String> = results.iter().filter(|r| r.output.is_ok()).map(|r| r.hash.clone()).collect();
    let outputs = runtime.block_on(store.outputs(&hashes))?;
    for result in &mut results {
        if let (Ok(kept), Some(text)) = (&mut result.output, outputs.get(&result.hash)) {
            let output: RunOutput = serde_json::from_str(text).context("a stored output cannot be read back")?;
            *kept = RunOutput { millis: kept.millis, ..output };
        }
    }
    let summary = match &run.summary {
        Some(text) => serde_json::from_str(text).context("a stored summary cannot be read back")?,
        None => {
            let meta: RunMeta = serde_json::from_str(&run.meta).context("a stored run cannot be read back")?;
            Summary::of(&results, 1.0, meta)
        }
    };
    Ok((summary, results))
}

fn render(format: ReportFormat, summary: &Summary, results: &[RunResult]) -> String {
    match format {
        ReportFormat::Human => report::human(summary),
        ReportFormat::Json => format!("{}\n", serde_json::to_string(summary).unwrap_or_default()),
        ReportFormat::Markdown => report::markdown::render(summary, results),
        ReportFormat::Junit => report::junit::render(summary, results),
        ReportFormat::Html => report::html::render(summary, results),
        ReportFormat::Jsonl => {
            let mut out = Vec::new();
            let _ = report::write_jsonl(results, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        }
    }
}

fn write_reports(reports: &[(ReportFormat, PathBuf)], summary: &Summary, results: &[RunResult]) -> anyhow::Result<()> {
    for (format, path) in reports.iter().filter(|(f, _)| *f != ReportFormat::Jsonl) {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs_err::create_dir_all(dir)?;
        }
        let (output, mut out) = crate::output::Output::create(Some(path))?;
        out.write_all(render(*format, summary, results).as_bytes())?;
        out.flush()?;
        drop(out);
        output.keep()?;
    }
    Ok(())
}

/// The cases an experiment runs: its filter and tags, and `--only`.
fn selection(experiment: &Experiment, only: Option<&str>) -> anyhow::Result<casebook_store::Select> {
    let mut filter = match &experiment.filter {
        Some(text) => Some(Filter::parse(text).map_err(|err| crate::settings::expression_error("filter", text, &err))?),
        None => None,
    };
    if !experiment.tags.is_empty() {
        filter = Some(Filter::tags(&experiment.tags).and(filter.unwrap_or_else(Filter::everything)));
    }
    if let Some(text) = only {
        let only = Filter::parse(text).map_err(|err| crate::settings::expression_error("--only", text, &err))?;
        filter = Some(filter.map_or(only.clone(), |f| f.and(only)));
    }
    Ok(casebook_store::Select { filter, limit: experiment.limit })
}

/// The selected cases of a dataset, as native JSON with their content ids, and the dataset's
/// name and version id.
struct Dataset {
    cases: Vec<String>,
    content_ids: Vec<String>,
    name: String,
    version_id: String,
}

/// Reads the experiment's dataset: a file beside the experiment, or a version in the store.
/// `None` when the file has errors (they are reported).
fn load_dataset(
    settings: &Global,
    runtime: &tokio::runtime::Runtime,
    store: Option<&SqliteStore>,
    experiment: &Experiment,
    base: &Path,
    select: &casebook_store::Select,
) -> anyhow::Result<Option<Dataset>> {
    let file = base.join(&experiment.dataset);
    let (cases, name, version_id) = if file.is_file() {
        let Some(cases) = read_cases(settings, &file, base, select)? else { return Ok(None) };
        let name = file.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let id = version_id_of(&name, &cases.all)?;
        (cases.selected, name, id)
    } else {
        let Some(store) = store else {
            anyhow::bail!(
                "`{}` is not a file, and there is no store to find it in: give a dataset file, or run `casebook init`",
                experiment.dataset
            );
        };
        let (name, reference) = stores::target(&experiment.dataset)?;
        let version = runtime.block_on(store.resolve(&name, &reference))?;
        let mut bodies = Vec::new();
        runtime.block_on(store.bodies(&name, version.number, select, 4096, &mut |batch| {
            bodies.extend(batch);
            true
        }))?;
        let cases = bodies
            .into_iter()
            .map(|body| {
                // A seed file cannot be found from a stored dataset: say so now. (Only a body
                // that may name one is parsed to find out.)
                if body.contains("\"memory_seeds\":\"") {
                    let mut case: Case = serde_json::from_str(&body)?;
                    casebook_runner::seeds::inline_case_seeds(&mut case, None).map_err(anyhow::Error::msg)?;
                }
                let id = casebook_canon::content_id_of_json(casebook_canon::Kind::Case, &body)?;
                Ok((body, id))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        (cases, name, version.id)
    };
    let (cases, content_ids) = cases.into_iter().unzip();
    Ok(Some(Dataset { cases, content_ids, name, version_id }))
}

/// The plan of a run: the dataset's cases, a connected target per scenario, the graders.
fn plan_of(
    runtime: &tokio::runtime::Runtime,
    args: &RunArgs,
    experiment: &Experiment,
    dataset: Dataset,
) -> anyhow::Result<Plan> {
    let env = |name: &str| std::env::var(name).ok();
    let mut scenarios = Vec::new();
    for scenario in &experiment.scenarios {
        let mut spec: TargetSpec = match &scenario.target.value {
            serde_json::Value::String(text) => text.parse().map_err(|e| located(args, scenario.target.at, e))?,
            value => serde_json::from_value(value.clone()).map_err(|e| located(args, scenario.target.at, e))?,
        };
        spec.resolve_env(env);
        let target = runtime
            .block_on(async { spec.connect() })
            .map_err(|e| anyhow::anyhow!("scenario `{}`: {e}", scenario.name))?;
        scenarios.push(PlannedScenario { name: scenario.name.clone(), describe: spec.describe(), target });
    }
    let mut graders = Vec::new();
    for grader in &experiment.graders {
        let mut spec: GraderSpec =
            serde_json::from_value(grader.value.clone()).map_err(|e| located(args, grader.at, e))?;
        spec.resolve_env(env);
        graders.push(spec.build().map_err(|e| located(args, grader.at, e))?);
    }
    Ok(Plan {
        cases: dataset.cases,
        content_ids: dataset.content_ids,
        scenarios,
        n_runs: experiment.n_runs,
        graders,
        seeds: experiment.memory_seeds.clone(),
        concurrency: experiment.concurrency,
    })
}

/// A dataset file's cases: every case's id and content id (for the version id), and the
/// selected ones as native JSON with their content ids, seed files read.
struct FileCases {
    /// Every case's id and content id (32 bytes, not 64 hex digits: a million cases each).
    all: Vec<(String, [u8; 32])>,
    selected: Vec<(String, String)>,
}

/// Reads a dataset file, keeping each selected case as compact JSON; reports its problems.
fn read_cases(
    settings: &Global,
    file: &Path,
    experiment_dir: &Path,
    select: &casebook_store::Select,
) -> anyhow::Result<Option<FileCases>> {
    type Prepared = Result<casebook_store::Prepared, String>;
    struct Collect<'a> {
        cases: FileCases,
        select: &'a casebook_store::Select,
        base: Option<&'a Path>,
        /// Where letta's `rubric_path`s are relative to: the suite (experiment) file.
        rubrics: &'a Path,
        reporter: Reporter,
        errors: u64,
        failed: Option<String>,
    }
    impl Collect<'_> {
        fn keep(&mut self, case: &mut Case, prepared: Prepared) -> Result<(), String> {
            let prepared = prepared?;
            let wanted = self.select.filter.as_ref().is_none_or(|f| f.matches(case))
                && self.select.limit.is_none_or(|limit| (self.cases.selected.len() as u64) < limit);
            if wanted {
                let seed_file = matches!(case.task.memory_seeds, Some(casebook_model::MemorySeeds::Path(_)));
                let rubric_file = case.expected.rubric.is_none() && case.expected.rubric_path.is_some();
                if seed_file || rubric_file {
                    casebook_runner::seeds::inline_case_seeds(case, self.base)?;
                    if let (true, Some(path)) = (rubric_file, &case.expected.rubric_path) {
                        let path = self.rubrics.join(path);
                        let text = fs_err::read_to_string(&path)
                            .map_err(|e| format!("case `{}`: its `rubric_path`: {e}", case.id))?;
                        case.expected.rubric = Some(text);
                    }
                    let p = casebook_store::prepare(case).map_err(|e| e.to_string())?;
                    self.cases.selected.push((p.body, p.content_id));
                } else {
                    self.cases.selected.push((prepared.body, prepared.content_id.clone()));
                }
            }
            let cid = casebook_canon::id_bytes(&prepared.content_id)
                .ok_or_else(|| format!("`{}` is not a content id", prepared.content_id))?;
            self.cases.all.push((prepared.id, cid));
            Ok(())
        }
    }
    impl Consumer<Vec<Prepared>> for Collect<'_> {
        fn start(&mut self, _: &Start) -> Flow {
            Flow::Continue
        }
        fn batch(&mut self, batch: &mut Batch, prepared: &mut Vec<Prepared>) -> Flow {
            for d in batch.diagnostics.iter().filter(|d| d.is_error()) {
                self.errors += 1;
                self.reporter.emit(d);
            }
            for (case, prepared) in batch.cases.iter_mut().zip(prepared.drain(..)) {
                if let Err(err) = self.keep(case, prepared) {
                    self.failed = Some(err);
                    return Flow::Stop;
                }
            }
            Flow::Continue
        }
    }
    let work = |batch: &Batch| -> Vec<Prepared> {
        batch.cases.iter().map(|c| casebook_store::prepare(c).map_err(|e| e.to_string())).collect()
    };
    let mut collect = Collect {
        cases: FileCases { all: Vec::new(), selected: Vec::new() },
        select,
        base: file.parent(),
        rubrics: experiment_dir,
        reporter: Reporter::new(settings, true),
        errors: 0,
        failed: None,
    };
    read(&casebook_formats::Input::path(file), &Default::default(), &work, &mut collect)?;
    if let Some(err) = collect.failed {
        anyhow::bail!("{err}");
    }
    if collect.errors > 0 {
        eprintln!(
            "nothing was run: `{}` has {} error{}",
            file.display(),
            collect.errors,
            if collect.errors == 1 { "" } else { "s" }
        );
        return Ok(None);
    }
    Ok(Some(collect.cases))
}

/// The content id a file's cases would have as the first version of a dataset named `name`.
fn version_id_of(name: &str, cases: &[(String, [u8; 32])]) -> anyhow::Result<String> {
    let mut listed: Vec<&(String, [u8; 32])> = cases.iter().collect();
    listed.sort_unstable();
    Ok(casebook_canon::first_version_id(name, listed.into_iter().map(|(id, cid)| (id.as_str(), cid)))?)
}

/// `r-20261123T100000-1a2b`: sortable by time, told apart by a few bits of the process.
fn run_id(time: &str) -> String {
    let stamp: String = time.chars().filter(|c| c.is_ascii_alphanumeric()).take(15).collect();
    let salt = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    format!("r-{stamp}-{:06x}", salt & 0xff_ffff)
}

fn progress_bar(settings: &Global, total: u64) -> Option<ProgressBar> {
    if !settings.progress {
        return None;
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(5));
    let style = ProgressStyle::with_template("{spinner} {pos}/{len} runs {bar:30} {msg} eta {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    Some(bar)
}

fn located(args: &RunArgs, at: casebook_runner::experiment::Place, err: impl std::fmt::Display) -> anyhow::Error {
    match &args.experiment {
        Some(path) if at.line > 0 => anyhow::anyhow!("{}:{}:{}: {err}", path.display(), at.line, at.column),
        _ => anyhow::anyhow!("{err}"),
    }
}

fn report_experiment_error(settings: &Global, err: &ExperimentError) {
    let d = casebook_model::Diagnostic {
        severity: casebook_model::Severity::Error,
        code: casebook_model::Code::InvalidValue,
        message: err.message.clone(),
        file: err.file.clone(),
        line: err.at.line,
        column: err.at.column,
        pointer: String::new(),
        hint: err.hint.clone(),
        line_offset: Some(err.line_offset),
    };
    Reporter::new(settings, true).emit(&d);
}
