//! `casebook run`, `casebook results`, `casebook compare`: running a dataset against agents,
//! and reading what runs found.
//!
//! A run reads its dataset (a file, or `NAME@REF` in the store or on the server), selects
//! cases, builds a target per scenario and the graders, and hands the jobs to
//! `casebook_runner::engine`. With a store, or a server (`CASEBOOK_URL`: see `crate::runs`),
//! results are kept as they finish, agents' outputs are kept by run hash (a later run, anyone's
//! on the server, or `--regrade`, reuses them), and Ctrl-C stops cleanly.

use std::hash::BuildHasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use casebook_filter::Filter;
use casebook_formats::{Batch, Consumer, Flow, Start, read};
use casebook_model::Case;
use casebook_runner::engine::{self, Job, Mode, Plan, PlannedScenario, RunKeys};
use casebook_runner::experiment::{Experiment, ExperimentError, Located};
use casebook_runner::grade::GraderSpec;
use casebook_runner::grade::asserts::{CaseAsserts, Tally};
use casebook_runner::mcp::McpServer;
use casebook_runner::noise::{Noise, NoisePools, NoiseSpec};
use casebook_runner::planned::{PlanWriter, PlannedCases};
use casebook_runner::record::RunResult;
use casebook_runner::report;
use casebook_runner::report::listing::Listing;
use casebook_runner::summary::{LeftOut, RunMeta, Summary, SummaryBuilder};
use casebook_runner::target::TargetSpec;
use casebook_store::ResultRow;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::Outcome;
use crate::args::{ReportFormat, RunArgs};
use crate::report::Reporter;
use crate::runs::RunStore;
use crate::settings::Global;
use crate::stores;

mod record;
mod stored;
mod version_id;

pub use record::record;
pub use stored::{compare, results};
use version_id::FirstVersion;

/// Results kept in the store at a time while running, at most…
const SAVE_EVERY: usize = 4096;
/// …and at most this much of their JSON (outputs included): with a batch saving and
/// [`SAVE_WAITING`] waiting, what a run holds for the store stays bounded however long the run
/// (4,096 results with their trajectories were 10 MiB a batch, and a slow moment of the store
/// let several pile up). Batches of 1 MiB (about 600 realistic results) made a million runs 10 %
/// slower: each commit rewrites the index pages its run hashes fall in, so smaller batches
/// write the same pages more often.
const SAVE_BYTES: usize = 8 << 20;
/// Batches that may wait while one is saved.
const SAVE_WAITING: usize = 2;
/// Jobs whose stored outputs are looked up at a time.
const WINDOW: usize = 4096;
/// Characters of a failing case's answer kept for the reports of a run.
const REPORTED_ANSWER: usize = 4000;

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
            // The experiment's noise applies to the target that stands in for its scenarios.
            for scenario in &mut experiment.scenarios {
                scenario.noise.clone_from(&experiment.noise);
                scenario.max_steps = experiment.max_steps;
            }
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
    if let Some(x) = args.min_confidence {
        experiment.min_confidence = Some(x);
    }
    experiment.include_rejected |= args.include_rejected;
    experiment.exclude_ungraded |= args.exclude_ungraded;
    // Without graders, the cases' own asserts grade them (promptfoo tests); a run that grades
    // nothing at all is refused once the cases are read, before any agent is called.
    let by_asserts = experiment.graders.is_empty() && !args.no_grade;
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
    // The store (or the server) is where results are kept; a run works without one (and says so).
    let store = RunStore::open_for_run(settings, &runtime)?;

    // `--tag` and `--limit` as the experiment's `tags` and `limit` (the limit replacing its).
    experiment.tags.extend(args.select.tags.iter().cloned());
    if let Some(limit) = args.select.limit {
        experiment.limit = Some(limit);
    }
    let select = Selection::of(&experiment, args.select.filter.as_deref())?;
    // A report never replaces the experiment file or the dataset file it reads.
    let dataset_file = base.join(&experiment.dataset);
    let inputs: Vec<&Path> = args.experiment.iter().map(PathBuf::as_path).chain([dataset_file.as_path()]).collect();
    for (_, path) in &args.reports {
        crate::output::may_write(settings, path, &inputs, args.overwrite.overwrite)?;
    }
    let (scenarios, graders, case_asserts) = match parts(&runtime, &args, &experiment) {
        Ok(parts) => parts,
        Err(err) => match err.downcast::<InvalidParts>() {
            Ok(InvalidParts(problems)) => {
                let mut reporter = Reporter::new(settings, true);
                problems.iter().for_each(|d| reporter.emit(d));
                return Ok(Outcome::Invalid);
            }
            Err(err) => return Err(err),
        },
    };
    let keys = RunKeys::new(&scenarios, &experiment.memory_seeds, experiment.n_runs).map_err(anyhow::Error::msg)?;
    // Noise draws from the other selected cases: a bounded sample of them, taken as they are read.
    let noise: Vec<Option<NoiseSpec>> = experiment.scenarios.iter().map(|s| s.noise.clone()).collect();
    let pools = NoisePools::new(&noise);
    let Some(dataset) = load_dataset(settings, &runtime, store.as_ref(), &experiment, &base, &select, &keys, pools)?
    else {
        return Ok(Outcome::Invalid);
    };
    if by_asserts {
        check_asserts(settings, &args, &dataset, case_asserts.has_judge(), experiment.exclude_ungraded)?;
    } else if !args.no_grade && !settings.quiet {
        warn_of_unused_asserts(&args, &dataset);
    }
    let selected = dataset.selection;
    let plan = Arc::new(Plan {
        cases: dataset.cases,
        noise: dataset.noise,
        scenarios,
        n_runs: experiment.n_runs,
        graders,
        case_asserts: by_asserts.then_some(case_asserts),
        seeds: experiment.memory_seeds.clone(),
        concurrency: experiment.concurrency,
    });
    let (dataset_name, version_id) = (dataset.name, dataset.version_id);
    let total = plan.total();

    let mode = if args.regrade { Mode::Regrade } else { Mode::Run };
    let store = store.map(Arc::new);
    let kept = store.is_some();
    // Without a store nothing can find the run again: it gets no id to look for.
    let run_id = if store.is_some() { run_id(&settings.time) } else { "(not kept)".to_owned() };
    let meta = RunMeta {
        run_id: run_id.clone(),
        experiment: experiment.name.clone(),
        dataset: dataset_name,
        dataset_version_id: version_id,
        started: settings.time.clone(),
        finished: String::new(),
        n_runs: experiment.n_runs,
        scenarios: plan.scenarios.iter().map(|s| s.name.clone()).collect(),
        selection: Some(selected.clone()),
        targets: plan.scenarios.iter().map(|s| casebook_runner::target::recorded(&s.describe)).collect(),
    };
    if let Some(store) = &store {
        runtime.block_on(store.begin_run(&run_id, &experiment.name, &settings.time, &serde_json::to_string(&meta)?))?;
        if let (RunStore::Remote(_), false) = (&**store, settings.quiet || settings.json) {
            stderr!("results are kept on {}", store.shown());
        }
    } else if !settings.quiet {
        stderr!("note: no store here: results are not kept (run `casebook init` to keep them and resume)");
    }
    if !settings.quiet && !settings.json {
        stderr!(
            "run {run_id}: {} × {} × {} = {}",
            crate::plural(plan.cases.len() as u64, "case"),
            crate::plural(plan.scenarios.len() as u64, "scenario"),
            experiment.n_runs,
            crate::plural(total as u64, "run"),
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
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Done>>(64);
    // What is written of each result is made on the thread that ran it.
    let finish = {
        let (line, keep) = (jsonl.is_some(), store.is_some());
        Arc::new(move |finished| Done::of(finished, line, keep)) as Arc<dyn Fn(engine::Finished) -> Done + Send + Sync>
    };
    // The summary is built as results come, a case's verdicts kept until it has all its runs;
    // the reports that list results (JUnit, Markdown, HTML) get them through a listing, which
    // keeps Markdown's failing cases and sorts the rest in temporary files beside the reports.
    let described: Vec<(&str, &serde_json::Value, bool)> =
        plan.scenarios.iter().zip(&noise).map(|(s, noise)| (s.name.as_str(), &s.describe, noise.is_some())).collect();
    let mut summary = SummaryBuilder::default()
        .with_noise_pairs(casebook_runner::noise::pairs(&described))
        .exclude_ungraded(experiment.exclude_ungraded)
        .closing_cases(plan.scenarios.len(), experiment.n_runs);
    let mut listing = listing(&args.reports, &meta.scenarios)?;
    let mut listing_error = None;
    let mut done = 0usize;
    let mut reused = 0u64;
    let (stopped, read, failing) = runtime.block_on(async {
        // The jobs (their cases read from the plan's files, widened by their noise) and their
        // stored outputs are read a window at a time, the next while this one runs, so that
        // memory holds a window's or two, not the experiment's.
        let (work_tx, work_rx) = tokio::sync::mpsc::channel(1);
        let reader = {
            let (plan, store, stop, stop_tx) = (plan.clone(), store.clone(), stop_rx.clone(), stop_tx.clone());
            tokio::spawn(async move {
                for start in (0..total).step_by(WINDOW) {
                    if *stop.borrow() {
                        break;
                    }
                    let planned = plan.clone();
                    let window = tokio::task::spawn_blocking(move || planned.jobs(start..total.min(start + WINDOW)))
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|jobs| jobs.map_err(|failure| failure.message));
                    let window = match window {
                        Ok(window) => window,
                        Err(message) => {
                            // Nothing more can run: stopped as Ctrl-C stops, what finished is kept.
                            let _ = stop_tx.send(true);
                            return Err(anyhow::anyhow!("{message}"));
                        }
                    };
                    if work_tx.send(lookup(store.as_deref(), window).await).await.is_err() {
                        break;
                    }
                }
                Ok(())
            })
        };
        let work = tokio::spawn(engine::execute(plan.clone(), work_rx, mode, stop_rx.clone(), finish, tx));
        // Results are kept by a task of their own, so that taking the next ones does not wait
        // for the store.
        let (save_tx, mut save_rx) = tokio::sync::mpsc::channel::<Vec<ResultRow>>(SAVE_WAITING);
        let saver = store.clone().map(|store| {
            let run_id = run_id.clone();
            tokio::spawn(async move {
                while let Some(rows) = save_rx.recv().await {
                    if let Err(err) = store.save_results(&run_id, &rows).await {
                        stderr!("error: cannot keep results in {}: {err}", store.shown());
                    }
                }
            })
        });
        let mut pending: Vec<ResultRow> = Vec::new();
        let mut pending_bytes = 0usize;
        // The first failing results, which the summary names.
        let mut failing: Vec<(u64, RunResult)> = Vec::new();
        let (mut passed, mut errors, mut ungraded) = (0u64, 0u64, 0u64);
        let mut stopped = false;
        loop {
            tokio::select! {
                next = rx.recv() => {
                    let Some(batch) = next else { break };
                    for Done { seq, mut result, from_store, row, line } in batch {
                        match (result.failure(), result.pass) {
                            (Some(_), _) => errors += 1,
                            (None, Some(true)) => passed += 1,
                            (None, Some(false)) => {}
                            (None, None) => ungraded += 1,
                        }
                        reused += u64::from(from_store);
                        if let (Some((_, out)), Some(line)) = (&mut jsonl, line) {
                            if let Err(err) = out.write_all(line.as_bytes()) {
                                stderr!("error: cannot write the JSONL report: {err}");
                            }
                        }
                        if let Some(row) = row {
                            pending_bytes += row.result.len() + row.output.as_ref().map_or(0, |(h, o)| h.len() + o.len());
                            pending.push(row);
                            if pending.len() >= SAVE_EVERY || pending_bytes >= SAVE_BYTES {
                                pending_bytes = 0;
                                let _ = save_tx.send(std::mem::take(&mut pending)).await;
                            }
                        }
                        summary.add(&result);
                        // The first in the dataset's order, whatever order they finish in.
                        if result.pass == Some(false) {
                            failing.push((seq, result.clone()));
                            failing.sort_by_key(|(seq, _)| *seq);
                            failing.truncate(report::terminal::FAILING_NAMED);
                        }
                        done += 1;
                        if let (Some(listing), None) = (&mut listing, &listing_error) {
                            // Reports show why a case failed, not why one passed; the store has it all.
                            result.slim(160);
                            listing_error = listing.add(seq, result).err();
                        }
                    }
                    if let Some(bar) = &bar {
                        bar.set_position(done as u64);
                        // The summary's rule: every result counts, but ungraded ones when excluded.
                        let of = done as u64 - if experiment.exclude_ungraded { ungraded } else { 0 };
                        let rate = if of == 0 { 0.0 } else { 100.0 * passed as f64 / of as f64 };
                        bar.set_message(format!("pass {rate:.0}%  errors {errors}"));
                    }
                }
                _ = tokio::signal::ctrl_c(), if !stopped => {
                    stopped = true;
                    let _ = stop_tx.send(true);
                    stderr!("\nstopping: finished runs are kept; run the same command again to resume");
                }
            }
        }
        let read = reader.await.map_err(anyhow::Error::from).and_then(|read| read);
        let _ = work.await;
        if !pending.is_empty() {
            let _ = save_tx.send(pending).await;
        }
        drop(save_tx);
        if let Some(saver) = saver {
            let _ = saver.await;
        }
        (stopped, read, failing)
    });
    // A plan that cannot be read back stops the run where it is; it is not finished.
    let stopped = stopped || read.is_err();
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let finished = crate::settings::now();
    let meta = RunMeta { finished: finished.clone(), ..meta };
    let summary = summary.finish(experiment.threshold, meta);
    if let Some(store) = store.and_then(|s| Arc::try_unwrap(s).ok()) {
        if !stopped {
            runtime.block_on(store.finish_run(&run_id, &finished, &serde_json::to_string(&summary)?))?;
        }
        runtime.block_on(store.close());
    }
    read.context("the run stopped")?;
    if let Some((output, mut out)) = jsonl {
        out.flush()?;
        drop(out);
        output.keep()?;
    }
    if let Some(err) = listing_error {
        anyhow::bail!("cannot keep the results for the reports: {err}");
    }
    if let Some(listing) = &mut listing {
        write_reports(&args.reports, &summary, listing)?;
    }
    if stopped {
        // The summary of the runs done would judge the threshold on part of the plan: say what
        // was done and how to go on instead.
        let how = if kept {
            "the finished runs are kept: run the same command again to resume (they are not run again)"
        } else {
            "no store here, nothing was kept"
        };
        stderr!("interrupted after {done} of {total} runs; {how}");
        return Ok(Outcome::Interrupted);
    }
    if settings.json {
        crate::write_stdout(&format!("{}\n", serde_json::to_string(&summary)?))?;
    } else {
        crate::write_stdout(&report::human(&summary))?;
        let id = kept.then_some(run_id.as_str());
        crate::write_stdout(&report::terminal::failing(
            failing.iter().map(|(_, r)| r),
            summary.totals.failed as u64,
            id,
        ))?;
        if !settings.quiet {
            let secs = started.elapsed().as_secs_f64();
            stderr!(
                "{} in {secs:.1} s ({:.0} runs/s), {reused} from stored outputs",
                crate::plural(done as u64, "run"),
                done as f64 / secs.max(1e-9)
            );
        }
    }
    let ok = if args.no_grade { summary.totals.errors == 0 } else { summary.threshold_met };
    Ok(if ok { Outcome::Ok } else { Outcome::Invalid })
}

/// A window of jobs, each with the output stored for its run hash.
async fn lookup(store: Option<&RunStore>, window: Vec<Job>) -> Vec<engine::Work> {
    let stored = match store {
        Some(store) => {
            let hashes: Vec<String> = window.iter().map(|j| j.hash.clone()).collect();
            store.outputs(&hashes).await.unwrap_or_else(|err| {
                stderr!("error: cannot read stored outputs: {err}");
                Vec::new()
            })
        }
        None => Vec::new(),
    };
    let mut stored = stored.into_iter();
    window.into_iter().map(|job| engine::Work { job, stored: stored.next().flatten() }).collect()
}

/// A finished job as the run's loop takes it.
struct Done {
    seq: u64,
    /// The result, without the agent's output.
    result: RunResult,
    from_store: bool,
    /// What the store keeps: the result's JSON, and the agent's output by run hash when it is new.
    row: Option<ResultRow>,
    /// The JSONL report's line: the whole result, output included.
    line: Option<String>,
}

impl Done {
    fn of(finished: engine::Finished, line: bool, keep: bool) -> Self {
        let engine::Finished { job, mut result, from_store } = finished;
        let line = line.then(|| serde_json::to_string(&result).unwrap_or_default() + "\n");
        let output = result.take_output();
        // And each result's served tool calls, their answers cut short.
        let calls = output.as_ref().map(|o| report::served_calls(&o.trajectory));
        // Reports show what a failing case got: its final answer stays (cut to a few KB, so a
        // large run keeps little), its trajectory does not.
        let answer = output.as_ref().filter(|_| result.pass == Some(false)).map(|o| match &o.output {
            serde_json::Value::String(text) if text.chars().nth(REPORTED_ANSWER).is_some() => {
                let cut: String = text.chars().take(REPORTED_ANSWER).collect();
                serde_json::Value::String(format!("{cut}… (cut here; the whole answer is in the store)"))
            }
            other => other.clone(),
        });
        let row = keep.then(|| ResultRow {
            seq: job.seq,
            result: serde_json::to_string(&result).unwrap_or_default(),
            // An output read from the store is there already.
            output: output
                .filter(|_| !from_store)
                .and_then(|o| serde_json::to_string(&o).ok())
                .map(|o| (result.hash.clone(), o)),
        });
        if let (Ok(kept), Some(answer)) = (&mut result.output, answer) {
            kept.output = answer;
        }
        if let (Ok(kept), Some(calls)) = (&mut result.output, calls) {
            kept.trajectory = calls;
        }
        Self { seq: job.seq, result, from_store, row, line }
    }
}

/// Runs `read` on where runs are kept (the store, or the server), prints what it returns, and
/// closes the store.
pub(super) fn print(
    settings: &Global,
    read: impl FnOnce(&tokio::runtime::Runtime, &RunStore) -> anyhow::Result<String>,
) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let store = RunStore::open(settings, &runtime)?;
    let text = read(&runtime, &store)?;
    crate::write_stdout(&text)?;
    runtime.block_on(store.close());
    Ok(Outcome::Ok)
}

/// Why two runs have no case run in common: what each ran, where the difference usually is.
pub(super) fn why_unpaired(a: &RunMeta, b: &RunMeta) -> String {
    let side = |meta: &RunMeta| {
        let scenarios: Vec<String> = meta
            .scenarios
            .iter()
            .enumerate()
            .map(|(i, s)| match meta.targets.get(i) {
                Some(target) => format!("`{s}` ({})", casebook_runner::target::described_label(target)),
                None => format!("`{s}`"),
            })
            .collect();
        let version = meta.dataset_version_id.get(..12).unwrap_or(&meta.dataset_version_id);
        format!(
            "run {} ran {} {} on dataset {} (version {version})",
            meta.run_id,
            if scenarios.len() == 1 { "scenario" } else { "scenarios" },
            scenarios.join(", "),
            meta.dataset,
        )
    };
    let example = match (a.scenarios.first(), b.scenarios.first()) {
        (Some(x), Some(y)) => format!(" (`--scenario {x}={y}`)"),
        _ => String::new(),
    };
    format!(
        "note: nothing paired: results pair by case id, scenario and run number, and {}; {}. Scenarios pair by \
         name, else by the same target when each run has one scenario with it, else when each run has one \
         scenario. Compare runs of the same dataset, and choose which scenario of B stands for which of A with \
         `--scenario A=B`{example}",
        side(a),
        side(b)
    )
}

fn render(format: ReportFormat, summary: &Summary, results: &[RunResult]) -> String {
    match format {
        ReportFormat::Human => {
            let failing = report::terminal::failing(results, summary.totals.failed as u64, Some(&summary.meta.run_id));
            report::human(summary) + &failing
        }
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

/// What the reports of a run need of its results (see `casebook_runner::report::listing`):
/// every result when a JUnit or HTML report lists them all, kept in temporary files in the
/// first such report's folder; Markdown's failing cases otherwise. `None` without such reports.
fn listing(reports: &[(ReportFormat, PathBuf)], scenarios: &[String]) -> anyhow::Result<Option<Listing>> {
    for (_, path) in reports.iter().filter(|(f, _)| *f != ReportFormat::Jsonl) {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs_err::create_dir_all(dir)?;
        }
    }
    let every = reports.iter().find(|(f, _)| matches!(f, ReportFormat::Junit | ReportFormat::Html));
    let dir = every.map(|(_, path)| path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")));
    let any = reports.iter().any(|(f, _)| *f != ReportFormat::Jsonl);
    Ok(any.then(|| Listing::new(scenarios, dir)))
}

/// Writes the reports of a run (but JSONL, written as results came) from its listing.
fn write_reports(reports: &[(ReportFormat, PathBuf)], summary: &Summary, listing: &mut Listing) -> anyhow::Result<()> {
    for (format, path) in reports.iter().filter(|(f, _)| *f != ReportFormat::Jsonl) {
        let (output, mut out) = crate::output::Output::create(Some(path))?;
        match format {
            ReportFormat::Junit | ReportFormat::Html | ReportFormat::Markdown => {
                write_listed(*format, summary, listing, &mut out)
                    .with_context(|| format!("cannot write `{}`", path.display()))?;
            }
            other => out.write_all(render(*other, summary, &[]).as_bytes())?,
        }
        out.flush()?;
        drop(out);
        output.keep()?;
    }
    Ok(())
}

/// Writes a Markdown, JUnit or HTML report of a run from its listing.
fn write_listed(
    format: ReportFormat,
    summary: &Summary,
    listing: &mut Listing,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    match format {
        ReportFormat::Junit | ReportFormat::Html => {
            let mut results = listing.results()?;
            if format == ReportFormat::Junit {
                report::junit::write_listed(summary, &|s| listing.millis(s), &mut results, out)?;
            } else {
                report::html::write_listed(summary, listing.count(), &mut results, out)?;
            }
            if let Some(err) = results.error() {
                anyhow::bail!("cannot read back the results: {err}");
            }
        }
        ReportFormat::Markdown => {
            let ((failed, shown), (with_calls, calling)) = (listing.failing(), listing.calling());
            report::markdown::write_listed(summary, (failed, &shown), (with_calls, &calling), out)?;
        }
        other => anyhow::bail!("the {other:?} report does not list results"),
    }
    Ok(())
}

/// The cases an experiment runs, in stages: its filter and tags and `--where`, then not the
/// cases reviewed as `rejected` (unless asked for), then not those whose confidence is below its
/// `min_confidence` (cases without one are kept), then its `limit`. Each stage is a filter of
/// its own, so a run counts what each one leaves out.
struct Selection {
    filter: Option<Filter>,
    not_rejected: Option<Filter>,
    confident: Option<Filter>,
    limit: Option<u64>,
    min_confidence: Option<f64>,
    include_rejected: bool,
}

/// Why a case is not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    Filter,
    Rejected,
    MinConfidence,
}

impl Selection {
    fn of(experiment: &Experiment, only: Option<&str>) -> anyhow::Result<Self> {
        let mut filter = match &experiment.filter {
            Some(text) => {
                Some(Filter::parse(text).map_err(|err| crate::settings::expression_error("filter", text, &err))?)
            }
            None => None,
        };
        if !experiment.tags.is_empty() {
            filter = Some(Filter::tags(&experiment.tags).and(filter.unwrap_or_else(Filter::everything)));
        }
        if let Some(text) = only {
            let only = Filter::parse(text).map_err(|err| crate::settings::expression_error("--where", text, &err))?;
            filter = Some(filter.map_or(only.clone(), |f| f.and(only)));
        }
        // `not in` holds for a case without a review; `not (<)` for one without a confidence.
        let not_rejected = match experiment.include_rejected {
            true => None,
            false => Some(Filter::parse(r#"review not in ["rejected"]"#)?),
        };
        let confident = match experiment.min_confidence {
            Some(x) => Some(Filter::parse(&format!("not (confidence < {x})"))?),
            None => None,
        };
        Ok(Self {
            filter,
            not_rejected,
            confident,
            limit: experiment.limit,
            min_confidence: experiment.min_confidence,
            include_rejected: experiment.include_rejected,
        })
    }

    /// The stages' filters, in order, each with the reason it leaves cases out.
    fn stages(&self) -> impl Iterator<Item = (Left, &Filter)> {
        [(Left::Filter, &self.filter), (Left::Rejected, &self.not_rejected), (Left::MinConfidence, &self.confident)]
            .into_iter()
            .filter_map(|(left, filter)| filter.as_ref().map(|f| (left, f)))
    }

    /// Why `case` is not run, the limit aside; `None` when it is selected.
    fn left_out(&self, case: &Case) -> Option<Left> {
        self.stages().find(|(_, filter)| !filter.matches(case)).map(|(left, _)| left)
    }

    /// What a store is asked for: every stage at once, and the limit.
    fn pushed(&self) -> casebook_store::Select {
        let filter = self.stages().map(|(_, f)| f.clone()).reduce(Filter::and);
        casebook_store::Select { filter, limit: self.limit }
    }

    /// The summary's account of a dataset of `cases` cases of which `run` ran.
    fn counted(&self, cases: u64, run: u64, left_out: LeftOut) -> casebook_runner::summary::Selection {
        casebook_runner::summary::Selection {
            cases,
            run,
            left_out,
            min_confidence: self.min_confidence,
            include_rejected: self.include_rejected,
        }
    }
}

/// Counts `n` more cases left out for `left`.
fn bump(left_out: &mut LeftOut, left: Left, n: u64) {
    match left {
        Left::Filter => left_out.filter += n,
        Left::Rejected => left_out.rejected += n,
        Left::MinConfidence => left_out.min_confidence += n,
    }
}

/// The selected cases of a dataset, as native JSON with their content ids and run hashes (in
/// temporary files: a million cases would take a gigabyte of memory), what their noise draws
/// from, and the dataset's name and version id.
struct Dataset {
    cases: PlannedCases,
    noise: Option<Noise>,
    name: String,
    version_id: String,
    /// How many cases the version had and why those not run were left out.
    selection: casebook_runner::summary::Selection,
}

/// Reads the experiment's dataset: a file beside the experiment, or a version in the store or
/// on the server (resolved once, then read by number), each selected case into the plan's files
/// and offered to the noise `pools`. `None` when the file has errors (they are reported).
#[allow(clippy::too_many_arguments)]
fn load_dataset(
    settings: &Global,
    runtime: &tokio::runtime::Runtime,
    store: Option<&RunStore>,
    experiment: &Experiment,
    base: &Path,
    select: &Selection,
    keys: &RunKeys,
    mut pools: Option<NoisePools>,
) -> anyhow::Result<Option<Dataset>> {
    let file = base.join(&experiment.dataset);
    let mut plan = PlanWriter::new(keys.per_case()).context("cannot make a temporary file for the selected cases")?;
    let (name, version_id, selection, rows) = if file.is_file() {
        let Some(cases) = read_cases(settings, &file, base, select, keys, &mut plan, pools.as_mut())? else {
            return Ok(None);
        };
        let name = file_dataset_name(&file);
        let all = cases.all.count();
        let id = cases.all.finish()?;
        let selection = select.counted(all, plan.len() as u64, cases.left_out);
        (name, id, selection, true)
    } else {
        let Some(store) = store else {
            anyhow::bail!(
                "`{}` is not a file, and there is no store to find it in: give a dataset file, or run `casebook init`",
                experiment.dataset
            );
        };
        let (name, reference) = stores::target(&experiment.dataset)?;
        let version = runtime.block_on(store.resolve(&name, &reference))?;
        if let (RunStore::Local(local), false) = (store, settings.quiet) {
            // Cases purged from this version are not run: say which, and which purge took them.
            let purged = runtime.block_on(local.purged_in(&name, version.number))?;
            if let Some(text) = casebook_store::purged_warning(&name, version.number, &purged) {
                stderr!("warning: {text}");
            }
        }
        // Each batch of bodies is planned as it comes, into the plan's files.
        let mut failed = None::<anyhow::Error>;
        let pushed = select.pushed();
        let mut row = 0u64;
        runtime.block_on(store.bodies(&name, version.number, &pushed, &mut |batch| {
            if failed.is_some() {
                return;
            }
            let indexed: Vec<(u64, String)> = (row..).zip(batch).collect();
            row += indexed.len() as u64;
            let planned = engine::parallel_map(&indexed, |(_, body)| plan_stored(body, keys));
            for (planned, (row, body)) in planned.into_iter().zip(&indexed) {
                let kept = planned.and_then(|stored| {
                    if let Some(pools) = &mut pools {
                        pools.add(plan.len(), &stored.case);
                    }
                    plan.keep(body, &stored.content_id, Some(*row), &stored.hashes)
                        .context("cannot write the selected cases to a temporary file")
                });
                if let Err(err) = kept {
                    failed = Some(err);
                    return;
                }
            }
        }))?;
        if let Some(err) = failed {
            return Err(err);
        }
        let selected = plan.len() as u64;
        // What each stage leaves out: the store counts the cases that pass the stages so far.
        let mut left_out = LeftOut::default();
        let (mut before, mut so_far) = (version.cases, None::<Filter>);
        for (left, filter) in select.stages() {
            let next = so_far.map_or_else(|| filter.clone(), |f| f.and(filter.clone()));
            let kept = runtime.block_on(store.count(
                &name,
                version.number,
                &casebook_store::Select { filter: Some(next.clone()), limit: None },
            ))?;
            bump(&mut left_out, left, before.saturating_sub(kept));
            (before, so_far) = (kept, Some(next));
        }
        left_out.limit = before.saturating_sub(selected);
        let selection = select.counted(version.cases, selected, left_out);
        // A version's order gives each case its row, unless a stage left some of them out.
        let rows = left_out.filter + left_out.rejected + left_out.min_confidence == 0;
        // Named as a user would name it again: `support@v4`.
        (format!("{name}@v{}", version.number), version.id, selection, rows)
    };
    let mut cases = plan.finish().context("cannot write the selected cases to a temporary file")?;
    if !rows {
        cases.forget_rows();
    }
    Ok(Some(Dataset { cases, noise: pools.map(NoisePools::finish), name, version_id, selection }))
}

/// The name a dataset file's cases have as a dataset: the file's name without its extension.
fn file_dataset_name(file: &Path) -> String {
    file.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

/// A case of a stored version, planned: parsed (for its noise), its content id and run hashes.
struct Stored {
    case: Case,
    content_id: [u8; 32],
    hashes: Vec<[u8; 32]>,
}

/// A case of a stored version (its JSON `body`), planned; its JSON is left for the caller to
/// keep.
fn plan_stored(body: &str, keys: &RunKeys) -> anyhow::Result<Stored> {
    let mut case: Case = serde_json::from_str(body)?;
    // A seed file cannot be found from a stored dataset: say so now.
    casebook_runner::seeds::inline_case_seeds(&mut case, None).map_err(anyhow::Error::msg)?;
    Ok(Stored {
        content_id: casebook_canon::content_id_bytes_of_json(casebook_canon::Kind::Case, body)?,
        hashes: keys.hashes(&case).map_err(anyhow::Error::msg)?,
        case,
    })
}

/// Cases read back from the plan at a time by the checks that look at every selected case.
const CHECKED: usize = 4096;

/// `f` of each selected case's JSON (`None` for one that cannot be read back), on every core,
/// a window at a time, handed to `take` in order.
fn each_case<R: Send>(cases: &PlannedCases, f: impl Fn(Option<&str>) -> R + Sync, mut take: impl FnMut(R)) {
    for start in (0..cases.len()).step_by(CHECKED) {
        let texts = cases.window(start..start + CHECKED).and_then(|window| cases.texts(&window));
        match texts {
            Ok(texts) => engine::parallel_map(&texts, |text| f(Some(text))).into_iter().for_each(&mut take),
            Err(_) => (start..cases.len().min(start + CHECKED)).for_each(|_| take(f(None))),
        }
    }
}

/// Refuses a run without graders whose cases carry no assert casebook can check (it would grade
/// nothing), and says which asserts are left out of the grading.
/// How the run counts a result no grader could judge, for the warnings that say some will be.
fn ungraded_note(exclude: bool) -> &'static str {
    if exclude {
        "they are left out of the pass rate, as `exclude_ungraded` asks"
    } else {
        "they count as not passed (`--exclude-ungraded` leaves them out of the pass rate)"
    }
}

fn check_asserts(
    settings: &Global,
    args: &RunArgs,
    dataset: &Dataset,
    judge: bool,
    exclude: bool,
) -> anyhow::Result<()> {
    let mut tally = Tally::default();
    let one_case = |text: Option<&str>| {
        let mut tally = Tally::default();
        if let Some(case) = text.and_then(|text| serde_json::from_str::<Case>(text).ok()) {
            tally.add(&case, judge);
        }
        tally
    };
    each_case(&dataset.cases, one_case, |one| {
        tally.graded_cases += one.graded_cases;
        tally.ungraded_cases += one.ungraded_cases;
        tally.bare_cases += one.bare_cases;
        for (why, n) in one.unchecked {
            *tally.unchecked.entry(why).or_default() += n;
        }
    });
    if tally.graded_cases == 0 {
        let source = if args.experiment.is_some() { "`graders:` in the experiment file" } else { "`--grader KIND`" };
        let asserts = if tally.ungraded_cases > 0 {
            format!(" (the cases' asserts are none casebook can check: {})", listed(&tally))
        } else {
            String::new()
        };
        anyhow::bail!(
            "nothing would grade the answers{asserts}: add {source} (e.g. `contains`, `exact_match`), \
             or pass `--no-grade` to keep the agents' outputs without grading them"
        );
    }
    if tally.bare_cases > 0 && !settings.quiet {
        stderr!(
            "warning: {} case{} without asserts will be ungraded (the experiment lists no graders): {}",
            tally.bare_cases,
            if tally.bare_cases == 1 { "" } else { "s" },
            ungraded_note(exclude),
        );
    }
    if !tally.unchecked.is_empty() && !settings.quiet {
        let total: u64 = tally.unchecked.values().sum();
        stderr!(
            "warning: {total} of the cases' asserts cannot be checked by casebook and are left out of the grading: {}",
            listed(&tally)
        );
        if tally.ungraded_cases > 0 {
            stderr!(
                "warning: {} case{} with nothing else to check will be ungraded: {}",
                tally.ungraded_cases,
                if tally.ungraded_cases == 1 { "" } else { "s" },
                ungraded_note(exclude),
            );
        }
    }
    Ok(())
}

/// Says how many cases carry asserts of their own (promptfoo's), which a run with graders does
/// not check: a user who wrote them would otherwise take the graders' verdict for theirs.
fn warn_of_unused_asserts(args: &RunArgs, dataset: &Dataset) {
    let mut with_asserts = 0usize;
    let has_asserts = |text: Option<&str>| {
        // Most cases carry none: only those whose JSON names `assert` are parsed.
        text.is_some_and(|text| {
            text.contains("\"assert\"")
                && serde_json::from_str::<Case>(text)
                    .is_ok_and(|case| casebook_runner::grade::asserts::asserts_of(&case).is_some())
        })
    };
    each_case(&dataset.cases, has_asserts, |has| with_asserts += usize::from(has));
    if with_asserts > 0 {
        let source = if args.experiment.is_some() { "the experiment's `graders:`" } else { "`--grader`" };
        let (cases, carry) = if with_asserts == 1 { ("case carries", "its") } else { ("cases carry", "their") };
        stderr!(
            "warning: {with_asserts} {cases} {carry} own asserts, which this run does not check (it grades by \
             {source}); run without graders to grade each case by its asserts"
        );
    }
}

/// `javascript` (2), `cost` (1): the asserts a tally left out, by reason.
fn listed(tally: &Tally) -> String {
    tally.unchecked.iter().map(|(why, n)| format!("{why} ({n})")).collect::<Vec<_>>().join(", ")
}

/// The scenarios of a run, each with its target, the graders, and the grading by the cases' own
/// asserts (with the experiment's `judge`).
fn parts(
    runtime: &tokio::runtime::Runtime,
    args: &RunArgs,
    experiment: &Experiment,
) -> anyhow::Result<(Vec<PlannedScenario>, Vec<casebook_runner::grade::Grader>, CaseAsserts)> {
    let env = |name: &str| std::env::var(name).ok();
    // In an experiment file, a target or grader that cannot be made is a problem of the file,
    // reported with the others; on the command line it is a usage error.
    let mut invalid = Vec::new();
    let mut problem = |at: casebook_runner::experiment::Place, err: String| -> anyhow::Result<()> {
        // A grader given with `--grader` has no place in the file.
        let Some(path) = args.experiment.as_ref().filter(|_| at.line > 0) else { return Err(anyhow::anyhow!(err)) };
        invalid.push(casebook_model::Diagnostic {
            severity: casebook_model::Severity::Error,
            code: casebook_model::Code::InvalidValue,
            message: err,
            file: path.display().to_string(),
            line: at.line,
            column: at.column,
            pointer: Some(String::new()),
            path: None,
            hint: None,
            case: None,
            line_offset: None,
        });
        Ok(())
    };
    let mut scenarios = Vec::new();
    // One MCP listener for the experiment, started by the first run that serves its tools.
    let mcp = Arc::new(McpServer::new());
    for scenario in &experiment.scenarios {
        let parsed: Result<TargetSpec, String> = match &scenario.target.value {
            serde_json::Value::String(text) => text.parse().map_err(|e| format!("{e}")),
            value => serde_json::from_value(value.clone()).map_err(|e| e.to_string()),
        };
        let mut spec = match parsed {
            Ok(spec) => spec,
            Err(err) => {
                problem(scenario.target.at, err)?;
                continue;
            }
        };
        spec.resolve_env(env);
        // The experiment's settings apply to each call unless the target sets its own.
        spec.timeout.get_or_insert(Duration::from_secs_f64(experiment.timeout_secs));
        spec.retries.get_or_insert(experiment.retries);
        let target = runtime
            .block_on(async { spec.connect() })
            .map_err(|e| anyhow::anyhow!("scenario `{}`: {e}", scenario.name))?;
        let mut describe = spec.describe();
        // An agent kept from the cases' tools answers otherwise: its runs do not reuse the outputs
        // of the served ones (nor they its).
        if !scenario.mcp && target.takes_mcp() {
            if let Some(fields) = describe.as_object_mut() {
                fields.insert("mcp".to_owned(), serde_json::Value::Bool(false));
            }
        }
        let target = if scenario.mcp { target.with_mcp(mcp.clone()) } else { target };
        scenarios.push(PlannedScenario {
            name: scenario.name.clone(),
            describe,
            target,
            max_steps: scenario.max_steps.unwrap_or(casebook_runner::environment::DEFAULT_MAX_STEPS),
        });
    }
    let mut graders = Vec::new();
    for grader in &experiment.graders {
        let mut spec: GraderSpec = match serde_json::from_value(grader.value.clone()) {
            Ok(spec) => spec,
            Err(err) => {
                problem(grader.at, err.to_string())?;
                continue;
            }
        };
        spec.resolve_env(env);
        match spec.build() {
            Ok(built) => graders.push(built),
            Err(err) => problem(grader.at, err.to_string())?,
        }
    }
    let mut judge = None;
    if let Some(located) = &experiment.judge {
        let mut value = located.value.clone();
        if let serde_json::Value::Object(map) = &mut value {
            map.insert("kind".into(), json!("llm_judge"));
        }
        match serde_json::from_value::<GraderSpec>(value) {
            Ok(mut spec) => {
                spec.resolve_env(env);
                judge = Some(spec);
            }
            Err(err) => problem(located.at, format!("`judge`: {err}"))?,
        }
    }
    let case_asserts = match CaseAsserts::new(judge.as_ref()) {
        Ok(asserts) => asserts,
        Err(err) => {
            let at = experiment.judge.as_ref().map(|j| j.at).unwrap_or_default();
            problem(at, format!("`judge`: {err}"))?;
            CaseAsserts::new(None).map_err(anyhow::Error::msg)?
        }
    };
    if !invalid.is_empty() {
        return Err(InvalidParts(invalid).into());
    }
    Ok((scenarios, graders, case_asserts))
}

/// What reading a dataset file found besides the selected cases (which went to the plan's
/// files): every case's id and content id, for the version id, and why cases were left out.
struct FileCases {
    all: FirstVersion,
    /// The cases not selected, by reason.
    left_out: LeftOut,
}

/// Reads a dataset file, keeping each selected case (as compact JSON, seed files read, with
/// its content id and run hashes) in `plan` and offering it to the noise `pools`; reports its
/// problems.
fn read_cases(
    settings: &Global,
    file: &Path,
    experiment_dir: &Path,
    select: &Selection,
    keys: &RunKeys,
    plan: &mut PlanWriter,
    pools: Option<&mut NoisePools>,
) -> anyhow::Result<Option<FileCases>> {
    type Prepared = Result<Body, String>;
    struct Collect<'a> {
        cases: FileCases,
        /// Where the selected cases go.
        plan: &'a mut PlanWriter,
        pools: Option<&'a mut NoisePools>,
        select: &'a Selection,
        keys: &'a RunKeys,
        base: Option<&'a Path>,
        /// Where letta's `rubric_path`s are relative to: the suite (experiment) file.
        rubrics: &'a Path,
        reporter: Reporter,
        errors: u64,
        failed: Option<String>,
    }
    impl Collect<'_> {
        /// Keeps a selected case in the plan's files, and offers it to the noise pools.
        fn keep(&mut self, case: &Case, json: &str, content_id: &[u8; 32], hashes: &[[u8; 32]]) -> Result<(), String> {
            if let Some(pools) = &mut self.pools {
                pools.add(self.plan.len(), case);
            }
            let row = case.provenance.as_ref().and_then(|p| p.row);
            self.plan
                .keep(json, content_id, row, hashes)
                .map_err(|e| format!("cannot write the selected cases to a temporary file: {e}"))
        }

        fn take(&mut self, case: &mut Case, prepared: Prepared) -> Result<(), String> {
            let prepared = prepared?;
            let wanted = match self.select.left_out(case) {
                Some(left) => {
                    bump(&mut self.cases.left_out, left, 1);
                    false
                }
                None if self.select.limit.is_some_and(|limit| self.plan.len() as u64 >= limit) => {
                    self.cases.left_out.limit += 1;
                    false
                }
                None => true,
            };
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
                    let p = Body::of(case, None)?;
                    let hashes = self.keys.hashes(case).map_err(|e| e.to_string())?;
                    self.keep(case, &p.body, &p.content_id, &hashes)?;
                } else {
                    let hashes = match &prepared.hashes {
                        Some(hashes) => hashes,
                        None => &self.keys.hashes(case).map_err(|e| e.to_string())?,
                    };
                    self.keep(case, &prepared.body, &prepared.content_id, hashes)?;
                }
            }
            self.cases
                .all
                .add(&prepared.id, &prepared.content_id)
                .map_err(|e| format!("cannot write the cases' ids to a temporary file: {e}"))?;
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
                if let Err(err) = self.take(case, prepared) {
                    self.failed = Some(err);
                    return Flow::Stop;
                }
            }
            Flow::Continue
        }
    }
    // The run hashes of a case are made here, on the reading threads, unless it names a seed
    // file (read later) or is not selected.
    let work = |batch: &Batch| -> Vec<Prepared> {
        let hashed = |case: &Case| {
            !matches!(case.task.memory_seeds, Some(casebook_model::MemorySeeds::Path(_)))
                && select.left_out(case).is_none()
        };
        batch.cases.iter().map(|case| Body::of(case, hashed(case).then_some(keys))).collect()
    };
    let mut collect = Collect {
        cases: FileCases { all: FirstVersion::new(&file_dataset_name(file)), left_out: LeftOut::default() },
        plan,
        pools,
        select,
        keys,
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
        stderr!(
            "nothing was run: `{}` has {} error{}",
            file.display(),
            collect.errors,
            if collect.errors == 1 { "" } else { "s" }
        );
        return Ok(None);
    }
    Ok(Some(collect.cases))
}

/// A case of a dataset file as read: its native JSON and content id, and its run hashes when
/// they could be made.
struct Body {
    id: String,
    body: String,
    content_id: [u8; 32],
    hashes: Option<Vec<[u8; 32]>>,
}

impl Body {
    fn of(case: &Case, keys: Option<&RunKeys>) -> Result<Self, String> {
        let body = serde_json::to_string(case).map_err(|e| e.to_string())?;
        let content_id =
            casebook_canon::content_id_bytes_of_json(casebook_canon::Kind::Case, &body).map_err(|e| e.to_string())?;
        let hashes = keys.map(|keys| keys.hashes(case)).transpose().map_err(|e| e.to_string())?;
        Ok(Self { id: case.id.clone(), body, content_id, hashes })
    }
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

/// Reports an experiment's problems, every one of them, at their places in its file.
fn report_experiment_error(settings: &Global, err: &ExperimentError) {
    let mut reporter = Reporter::new(settings, true);
    for err in std::iter::once(err).chain(&err.more) {
        reporter.emit(&casebook_model::Diagnostic {
            severity: casebook_model::Severity::Error,
            code: casebook_model::Code::InvalidValue,
            message: err.message.clone(),
            file: err.file.clone(),
            line: err.at.line,
            column: err.at.column,
            pointer: Some(String::new()),
            path: None,
            hint: err.hint.clone(),
            case: None,
            line_offset: Some(err.line_offset),
        });
    }
}

/// Targets and graders of an experiment file that cannot be made: the file is invalid (exit 1),
/// as it is for an unknown key.
#[derive(Debug)]
struct InvalidParts(Vec<casebook_model::Diagnostic>);

impl std::fmt::Display for InvalidParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} invalid targets or graders", self.0.len())
    }
}

impl std::error::Error for InvalidParts {}
