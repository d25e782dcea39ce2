//! `casebook results` and `casebook compare`: stored runs read back a page at a time, so that
//! neither holds a run's results, whatever their number.
//!
//! `results` reads a run's pages once (none at all for `--format json` of a finished run,
//! whose summary is kept): each result, with its agent's output fetched by run hash for the page,
//! goes to the JSONL outputs as it comes, to the summary's running counts when the kept summary
//! cannot be used, to the first failing results the terminal names, and to a report
//! [`Listing`] (sorted runs in temporary files) for Markdown, JUnit and HTML, as `casebook run`
//! does. `compare` sorts what it reads of each run by case run in temporary files and merges
//! the two streams ([`casebook_runner::comparison`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use casebook_runner::comparison::{Side, compare_sides};
use casebook_runner::pairing::pair_scenarios;
use casebook_runner::record::{RunOutput, RunResult};
use casebook_runner::report;
use casebook_runner::report::listing::Listing;
use casebook_runner::summary::{RunMeta, Summary, SummaryBuilder};
use casebook_store::RunRow;

use crate::Outcome;
use crate::args::{CompareArgs, ReportFormat, ResultsArgs};
use crate::output::Output;
use crate::runs::{ResultPages, RunStore};
use crate::settings::Global;
use crate::stores;

pub fn results(settings: &Global, args: ResultsArgs) -> anyhow::Result<Outcome> {
    if args.list {
        return super::print(settings, |runtime, store| list(settings, runtime, store));
    }
    for (_, path) in &args.reports {
        crate::output::may_write(settings, path, &[], args.overwrite.overwrite)?;
    }
    // `--as` (deprecated) is the report `--format` asks for now.
    let format = args.report.unwrap_or_else(|| settings.format.report());
    let runtime = stores::runtime()?;
    let store = RunStore::open(settings, &runtime)?;
    let run = runtime.block_on(store.run(args.run.as_deref()))?;
    // Every report asked for, the one on stdout last (`None`).
    let mut wanted: Vec<(ReportFormat, Option<&Path>)> =
        args.reports.iter().map(|(f, path)| (*f, Some(path.as_path()))).collect();
    wanted.push((format, None));
    let written = write_results(&runtime, &store, &run, &wanted);
    runtime.block_on(store.close());
    written?;
    Ok(Outcome::Ok)
}

/// `results --list`.
fn list(settings: &Global, runtime: &tokio::runtime::Runtime, store: &RunStore) -> anyhow::Result<String> {
    let runs = runtime.block_on(store.runs())?;
    let mut out = String::new();
    if runs.is_empty() && !settings.json {
        stderr!("no run yet: `casebook run` keeps its results in the store");
    } else if !settings.json {
        out.push_str("run                         started               finished              experiment\n");
    }
    for run in runs.iter().rev() {
        let line = if settings.json {
            serde_json::json!({"id": run.id, "experiment": run.experiment, "started": run.started, "finished": run.finished})
                .to_string()
        } else {
            format!(
                "{:<26}  {:<20}  {:<20}  {}",
                run.id,
                run.started,
                run.finished.as_deref().unwrap_or("(stopped)"),
                run.experiment
            )
        };
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}

/// How a run's summary is had: as kept, or counted again from its results.
enum Kept {
    Summary(Box<Summary>),
    /// Counted again, with this threshold and meta (and, for a summary kept under the old pass
    /// rule, its robustness).
    Recount {
        threshold: f64,
        meta: Box<RunMeta>,
        robustness: Option<Vec<casebook_runner::summary::Robustness>>,
    },
}

impl Kept {
    fn of(run: &RunRow) -> anyhow::Result<Self> {
        Ok(match &run.summary {
            Some(text) => {
                let kept: Summary = serde_json::from_str(text).context("a stored summary cannot be read back")?;
                if kept.predates_pass_rate_of() {
                    // Kept when errors and ungraded results were left out of pass rates: counted
                    // again under the rule the threshold follows now (robustness is unchanged).
                    let Summary { threshold, meta, robustness, .. } = kept;
                    Kept::Recount { threshold, meta: Box::new(meta), robustness: Some(robustness) }
                } else {
                    Kept::Summary(Box::new(kept))
                }
            }
            None => {
                let meta: RunMeta = serde_json::from_str(&run.meta).context("a stored run cannot be read back")?;
                Kept::Recount { threshold: 1.0, meta: Box::new(meta), robustness: None }
            }
        })
    }

    fn meta(&self) -> &RunMeta {
        match self {
            Kept::Summary(summary) => &summary.meta,
            Kept::Recount { meta, .. } => meta,
        }
    }
}

/// Reads `run` once and writes each of `wanted` (to its file, or to stdout for `None`).
fn write_results(
    runtime: &tokio::runtime::Runtime,
    store: &RunStore,
    run: &RunRow,
    wanted: &[(ReportFormat, Option<&Path>)],
) -> anyhow::Result<()> {
    let kept = Kept::of(run)?;
    let has = |format: ReportFormat| wanted.iter().any(|(f, _)| *f == format);
    let recount = matches!(kept, Kept::Recount { .. });
    let listed = has(ReportFormat::Markdown) || has(ReportFormat::Junit) || has(ReportFormat::Html);
    let read = recount || listed || has(ReportFormat::Human) || has(ReportFormat::Jsonl);
    // Outputs are shown by the reports that list results; the summary does without them, and
    // the terminal shows only the first failing results' (fetched for them alone).
    let with_outputs = listed || has(ReportFormat::Jsonl);
    // The terminal alone, with the summary kept, needs only the first failing results.
    let first_failing_only = !recount && !with_outputs;

    let mut outputs: Vec<(ReportFormat, Output, Box<dyn Write + Send>)> = Vec::new();
    for (format, path) in wanted {
        if let Some(dir) = path.and_then(Path::parent).filter(|d| !d.as_os_str().is_empty()) {
            fs_err::create_dir_all(dir)?;
        }
        let (output, out) = Output::create(*path)?;
        outputs.push((*format, output, out));
    }
    let meta = kept.meta().clone();
    let mut builder = match &kept {
        // A run makes a case's results one after the other: a case's verdicts are held until
        // it has them all (runs kept before the scenarios were recorded keep every case open).
        Kept::Recount { meta, .. } if !meta.scenarios.is_empty() => {
            Some(SummaryBuilder::default().closing_cases(meta.scenarios.len(), meta.n_runs))
        }
        Kept::Recount { .. } => Some(SummaryBuilder::default()),
        Kept::Summary(_) => None,
    };
    let mut listing = listed.then(|| {
        let every = wanted.iter().find(|(f, _)| matches!(f, ReportFormat::Junit | ReportFormat::Html));
        let dir: Option<PathBuf> = every.map(|(_, path)| match path.and_then(Path::parent) {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            Some(_) => PathBuf::from("."),
            None => std::env::temp_dir(),
        });
        Listing::new(&meta.scenarios, dir.as_deref())
    });
    let mut failing: Vec<RunResult> = Vec::new();
    let mut seq = 0u64;
    if read {
        let mut pages = ResultPages::of(&run.id);
        while let Some(page) = runtime.block_on(store.next_results(&mut pages))? {
            let mut results: Vec<RunResult> = page
                .iter()
                .map(|text| serde_json::from_str(text))
                .collect::<Result<_, _>>()
                .context("a stored result cannot be read back")?;
            drop(page);
            if with_outputs {
                add_outputs(runtime, store, &mut results)?;
            }
            for (format, _, out) in &mut outputs {
                if *format == ReportFormat::Jsonl {
                    report::write_jsonl(&results, &mut *out)?;
                }
            }
            for result in results {
                if let Some(builder) = &mut builder {
                    builder.add(&result);
                }
                if result.pass == Some(false) && failing.len() < report::terminal::FAILING_NAMED {
                    failing.push(result.clone());
                }
                if let Some(listing) = &mut listing {
                    listing.add(seq, result).context("cannot keep the results for the reports")?;
                }
                seq += 1;
            }
            if first_failing_only && failing.len() >= report::terminal::FAILING_NAMED {
                break;
            }
        }
        if !with_outputs {
            add_outputs(runtime, store, &mut failing)?;
        }
    }
    let summary = match (kept, builder) {
        (Kept::Summary(summary), _) => *summary,
        (Kept::Recount { threshold, meta, robustness }, Some(builder)) => {
            let counted = builder.finish(threshold, *meta);
            match robustness {
                Some(robustness) => Summary { robustness, ..counted },
                None => counted,
            }
        }
        (Kept::Recount { threshold, meta, .. }, None) => Summary::of(&[], threshold, *meta),
    };
    for (format, output, mut out) in outputs {
        match format {
            ReportFormat::Human => {
                let failing = report::terminal::failing(&failing, summary.totals.failed as u64, Some(&meta.run_id));
                out.write_all((report::human(&summary) + &failing).as_bytes())?;
            }
            ReportFormat::Json => out.write_all(format!("{}\n", serde_json::to_string(&summary)?).as_bytes())?,
            ReportFormat::Jsonl => {}
            ReportFormat::Markdown | ReportFormat::Junit | ReportFormat::Html => {
                let Some(listing) = &mut listing else { continue };
                super::write_listed(format, &summary, listing, &mut out)?;
            }
        }
        out.flush()?;
        drop(out);
        output.keep()?;
    }
    Ok(())
}

/// Puts each result's agent output back (outputs are kept apart, by run hash).
fn add_outputs(runtime: &tokio::runtime::Runtime, store: &RunStore, results: &mut [RunResult]) -> anyhow::Result<()> {
    let hashes: Vec<String> = results.iter().filter(|r| r.output.is_ok()).map(|r| r.hash.clone()).collect();
    if hashes.is_empty() {
        return Ok(());
    }
    let mut outputs = runtime.block_on(store.outputs(&hashes))?.into_iter();
    for result in results.iter_mut().filter(|r| r.output.is_ok()) {
        if let (Ok(kept), Some(text)) = (&mut result.output, outputs.next().flatten()) {
            let output: RunOutput = serde_json::from_str(&text).context("a stored output cannot be read back")?;
            *kept = RunOutput { millis: kept.millis, ..output };
        }
    }
    Ok(())
}

pub fn compare(settings: &Global, args: CompareArgs) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let store = RunStore::open(settings, &runtime)?;
    let compared = compare_runs(settings, &runtime, &store, &args);
    runtime.block_on(store.close());
    compared?;
    Ok(Outcome::Ok)
}

fn compare_runs(
    settings: &Global,
    runtime: &tokio::runtime::Runtime,
    store: &RunStore,
    args: &CompareArgs,
) -> anyhow::Result<()> {
    let mut sides = Vec::new();
    for reference in [&args.a, &args.b] {
        let run = runtime.block_on(store.run(Some(reference)))?;
        let meta = Kept::of(&run)?.meta().clone();
        let mut side = Side::default();
        let mut pages = ResultPages::of(&run.id);
        while let Some(page) = runtime.block_on(store.next_results(&mut pages))? {
            for text in page {
                let result: RunResult = serde_json::from_str(&text).context("a stored result cannot be read back")?;
                side.add(&result).context("cannot sort the results in a temporary file")?;
            }
        }
        sides.push((meta, side));
    }
    let (Some((meta_b, b)), Some((meta_a, a))) = (sides.pop(), sides.pop()) else {
        anyhow::bail!("two runs are compared");
    };
    let (ran_a, ran_b) = (a.ran(Some(&meta_a)), b.ran(Some(&meta_b)));
    let pairs = pair_scenarios(&ran_a, &ran_b, &args.scenarios).map_err(|e| {
        anyhow::anyhow!(
            "{e}; see each run's scenarios with `casebook results {}` and `casebook results {}`",
            meta_a.run_id,
            meta_b.run_id
        )
    })?;
    let mut compared = compare_sides(a, b, pairs).context("cannot compare the runs through temporary files")?;
    if compared.pairs == 0 && compared.errors.count == 0 && compared.ungraded == 0 && !settings.quiet {
        stderr!("{}", super::why_unpaired(&meta_a, &meta_b));
    }
    let (output, mut out) = Output::create(None)?;
    if settings.json {
        compared.write_json(&mut out)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(report::terminal::human_compared(&compared).as_bytes())?;
    }
    out.flush()?;
    drop(out);
    output.keep()
}
