//! `casebook record`: a run made by the user's own code (the Python client's `casebook.run`),
//! kept as `casebook run` keeps its runs, in the store or on the server (`crate::runs`), so that
//! `results`, `compare` and the console show it beside them.
//!
//! The results come as JSON lines on standard input, one per case run
//! (`{"case", "output", "scores", "trajectory", "error", "pass", "run", "millis"}`); each is
//! answered on standard output by one line, `{"ok": true}` or `{"error": "…"}` (a refused line
//! is not kept, and the run goes on), so the client learns of a mistake at the call that made it.
//! `{"finish": true}` finishes the run and prints its summary. Standard input closed without it
//! (the client's loop raised, or its process died) keeps the whole results received so far and
//! leaves the run unfinished (`results --list` says `(stopped)`); `--resume` goes on with it.
//!
//! The first line on standard output, before any result is read, says which run this is:
//! `{"run_id", "dataset", "version", "version_id", "cases", "done": [[case, run], …]}`, `done`
//! being the case runs a resumed run has already.
//!
//! Memory does not grow with the version: its cases are looked up by id in a temporary file
//! (`spill::Lookup`, made in one pass over the version), the case runs already recorded are a
//! bit per case and run number, and the summary is counted at the end from the stored results,
//! sorted by case (`spill::Sorter`) so that each case is closed as its results are counted.

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};

use anyhow::Context;
use casebook_formats::spill::{Lookup, Sorter};
use casebook_model::Case;
use casebook_runner::hash::CaseKey;
use casebook_runner::protocol::Step;
use casebook_runner::record::{Failure, Grade, GraderResult, RunOutput, RunResult};
use casebook_runner::summary::{RunMeta, SummaryBuilder};
use casebook_store::{ResultRow, Select};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Outcome;
use crate::args::RecordArgs;
use crate::runs::{ResultPages, RunStore};
use crate::settings::Global;
use crate::stores;

/// Results kept at a time: a client's loop is slow next to the store, so a small batch keeps
/// what a crash of the recorder itself could lose small.
const SAVE_EVERY: usize = 64;
/// The scenario of a recorded run's results.
const SCENARIO: &str = "client";
/// A numeric score at or above this passes its grade, unless the line says `pass`.
const PASS_SCORE: f64 = 0.5;
/// Bytes of one line at most (a server takes 8 MiB of JSON a request by default).
const MAX_LINE: usize = 8 << 20;

/// Bytes of results the summary's sort keeps in memory before it writes sorted runs out.
const SORT_BUDGET: usize = 16 << 20;

/// A case of the version, as the run's lookup keeps it: its row and its native JSON body.
type Indexed = (u64, String);

/// The case runs a run has results of: a bit per case (by row) and run number.
#[derive(Default)]
struct Done {
    runs: BTreeMap<u32, Vec<u64>>,
}

impl Done {
    /// Notes case `row`'s run `run`; `false` when it was noted already.
    fn insert(&mut self, row: u64, run: u32) -> bool {
        let bits = self.runs.entry(run).or_default();
        let (word, bit) = ((row / 64) as usize, 1u64 << (row % 64));
        if bits.len() <= word {
            bits.resize(word + 1, 0);
        }
        let new = bits[word] & bit == 0;
        bits[word] |= bit;
        new
    }
}

/// One line of standard input.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    finish: bool,
    case: Option<String>,
    #[serde(default)]
    run: u32,
    #[serde(default)]
    output: Value,
    #[serde(default)]
    scores: serde_json::Map<String, Value>,
    #[serde(default)]
    trajectory: Vec<Step>,
    error: Option<String>,
    pass: Option<bool>,
    #[serde(default)]
    millis: u64,
}

pub fn record(settings: &Global, args: crate::args::RecordArgs) -> anyhow::Result<Outcome> {
    let RecordArgs { dataset, experiment: name, threshold, resume } = args;
    // Every result is of one scenario, named for where it comes from.
    let scenario = SCENARIO.to_owned();
    let runtime = stores::runtime()?;
    let Some(store) = RunStore::open_for_run(settings, &runtime)? else {
        anyhow::bail!("no store here and no server: run `casebook init`, or set `CASEBOOK_URL`, to keep the run");
    };
    let (dataset_name, reference) = stores::target(&dataset)?;
    let version = runtime.block_on(store.resolve(&dataset_name, &reference))?;
    let index = runtime.block_on(index(&store, &dataset_name, version.number, version.cases))?;
    let target = json!({"kind": "client", "scenario": scenario});

    let mut done = Done::default();
    // What a resumed run has, for the first line.
    let mut done_list: Vec<(String, u32)> = Vec::new();
    let mut seq = 0u64;
    let mut n_runs = 1u32;
    let (run_id, started) = match resume.then(|| runtime.block_on(unfinished(&store, &name, &version.id))) {
        Some(found) => {
            let run = found?.ok_or_else(|| {
                anyhow::anyhow!(
                    "no unfinished run `{name}` of {dataset_name}@v{} in {}: leave out `--resume` to begin one",
                    version.number,
                    store.shown()
                )
            })?;
            let mut pages = ResultPages::of(&run.id);
            while let Some(page) = runtime.block_on(store.next_results(&mut pages))? {
                for text in page {
                    let result: RunResult = serde_json::from_str(&text)
                        .with_context(|| format!("cannot read a result of run {}", run.id))?;
                    n_runs = n_runs.max(result.run + 1);
                    let row = match result.row {
                        Some(row) => Some(row),
                        None => index.get(&result.case_id)?.map(|(row, _)| row),
                    };
                    if let Some(row) = row {
                        done.insert(row, result.run);
                    }
                    done_list.push((result.case_id, result.run));
                    seq += 1;
                }
            }
            (run.id, run.started)
        }
        None => (super::run_id(&settings.time), settings.time.clone()),
    };
    let mut meta = RunMeta {
        run_id: run_id.clone(),
        experiment: name.clone(),
        dataset: format!("{dataset_name}@v{}", version.number),
        dataset_version_id: version.id.clone(),
        started: started.clone(),
        finished: String::new(),
        n_runs,
        scenarios: vec![scenario.clone()],
        selection: None,
        targets: vec![target.clone()],
    };
    if !resume {
        runtime.block_on(store.begin_run(&run_id, &name, &started, &serde_json::to_string(&meta)?))?;
    }
    done_list.sort();
    let mut out = std::io::stdout().lock();
    let start = json!({
        "run_id": run_id,
        "dataset": meta.dataset,
        "version": version.number,
        "version_id": version.id,
        "cases": version.cases,
        "done": done_list,
        "kept": store.shown(),
    });
    writeln!(out, "{start}")?;
    out.flush()?;

    let mut pending: Vec<ResultRow> = Vec::new();
    let mut finished = false;
    let mut stdin = std::io::stdin().lock();
    let mut text = String::new();
    let mut number = 0u64;
    loop {
        text.clear();
        let read = Read::by_ref(&mut stdin)
            .take(MAX_LINE as u64 + 1)
            .read_line(&mut text)
            .context("cannot read standard input")?;
        if read == 0 {
            break;
        }
        number += 1;
        let answer = if text.len() > MAX_LINE {
            // The rest of the line is skipped; the run goes on.
            let mut rest = Vec::new();
            stdin.read_until(b'\n', &mut rest)?;
            Err(format!("line {number}: longer than {} MiB", MAX_LINE >> 20))
        } else {
            match serde_json::from_str::<Line>(text.trim_end()) {
                Err(err) => {
                    let text = err.to_string();
                    let at = format!(" at line {} column {}", err.line(), err.column());
                    Err(format!("line {number}, column {}: {}", err.column(), text.strip_suffix(&at).unwrap_or(&text)))
                }
                Ok(line) if line.finish => {
                    finished = true;
                    break;
                }
                Ok(line) => {
                    result_of(line, &index, &target, &scenario, &mut done).map_err(|e| format!("line {number}: {e}"))
                }
            }
        };
        let reply = match answer {
            Ok((result, output)) => {
                n_runs = n_runs.max(result.run + 1);
                pending.push(ResultRow {
                    seq,
                    result: serde_json::to_string(&result)?,
                    output: output.map(|o| (result.hash.clone(), o)),
                });
                seq += 1;
                if pending.len() >= SAVE_EVERY {
                    runtime.block_on(store.save_results(&run_id, &std::mem::take(&mut pending)))?;
                }
                json!({"ok": true})
            }
            Err(message) => json!({"error": message}),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    if !pending.is_empty() {
        runtime.block_on(store.save_results(&run_id, &pending))?;
    }
    if !finished {
        runtime.block_on(store.close());
        stderr!("run {run_id} left unfinished: {seq} results kept; `casebook record --resume` goes on with it");
        return Ok(Outcome::Interrupted);
    }
    let finished = crate::settings::now();
    meta.finished = finished.clone();
    meta.n_runs = n_runs;
    let summary = runtime.block_on(summarise(&store, &run_id, n_runs))?.finish(threshold, meta);
    runtime.block_on(store.finish_run(&run_id, &finished, &serde_json::to_string(&summary)?))?;
    runtime.block_on(store.close());
    writeln!(out, "{}", serde_json::to_string(&summary)?)?;
    out.flush()?;
    Ok(Outcome::Ok)
}

/// Every case of version `number` of `dataset` (`cases` of them), by id, in a temporary file.
async fn index(store: &RunStore, dataset: &str, number: u64, cases: u64) -> anyhow::Result<Lookup<Indexed>> {
    let mut index = Lookup::new(cases).context("cannot make the temporary file of the version's cases")?;
    let mut failed = None;
    let mut row = 0u64;
    store
        .bodies(dataset, number, &Select::default(), &mut |batch| {
            for body in batch {
                // The id alone is read now; the rest of the case when a result names it.
                #[derive(serde::Deserialize)]
                struct Id {
                    id: String,
                }
                let kept = serde_json::from_str::<Id>(&body)
                    .map_err(anyhow::Error::from)
                    .and_then(|case| Ok(index.insert(&case.id, &(row, body))?));
                if let Err(err) = kept {
                    failed.get_or_insert(err);
                }
                row += 1;
            }
        })
        .await?;
    match failed {
        Some(err) => Err(err.context(format!("cannot index the cases of {dataset}@v{number}"))),
        None => Ok(index),
    }
}

/// The summary of run `run_id`'s stored results, counted case by case: the results sorted by
/// case and run, so each case closes once its `n_runs` runs are counted.
async fn summarise(store: &RunStore, run_id: &str, n_runs: u32) -> anyhow::Result<SummaryBuilder> {
    let mut sorter: Sorter<(String, u32), RunResult> = Sorter::new(SORT_BUDGET);
    let mut pages = ResultPages::of(run_id);
    while let Some(page) = store.next_results(&mut pages).await? {
        for text in page {
            #[derive(serde::Deserialize)]
            struct Key {
                case_id: String,
                #[serde(default)]
                run: u32,
            }
            let key: Key =
                serde_json::from_str(&text).with_context(|| format!("cannot read a result of run {run_id}"))?;
            sorter.push_json((key.case_id, key.run), text.into_bytes())?;
        }
    }
    let mut summary = SummaryBuilder::default().closing_cases(1, n_runs);
    for sorted in sorter.finish()? {
        let (_, result) = sorted.with_context(|| format!("cannot read a result of run {run_id} back"))?;
        summary.add(&result);
    }
    Ok(summary)
}

/// The latest unfinished run named `name` of the version whose content id is `version_id`.
async fn unfinished(store: &RunStore, name: &str, version_id: &str) -> anyhow::Result<Option<casebook_store::RunRow>> {
    let runs = store.runs().await?;
    Ok(runs.into_iter().rev().find(|run| {
        run.experiment == name
            && run.finished.is_none()
            && serde_json::from_str::<RunMeta>(&run.meta).is_ok_and(|meta| meta.dataset_version_id == version_id)
    }))
}

/// The result a line records, and the agent's output to keep by run hash; or why it is refused.
fn result_of(
    line: Line,
    index: &Lookup<Indexed>,
    target: &Value,
    scenario: &str,
    done: &mut Done,
) -> Result<(RunResult, Option<String>), String> {
    let Some(case_id) = line.case else {
        return Err("no `case`: name the case id the result is of".into());
    };
    let found =
        index.get(&case_id).map_err(|e| format!("cannot read the temporary file of the version's cases: {e}"))?;
    let Some((row, body)) = found else {
        return Err(format!("no case `{case_id}` in the run's dataset version"));
    };
    let unreadable = |e: String| format!("case `{case_id}` of the run's dataset version cannot be read: {e}");
    let case: Case = serde_json::from_str(&body).map_err(|e| unreadable(e.to_string()))?;
    let content_id = casebook_canon::content_id_bytes_of_json(casebook_canon::Kind::Case, &body)
        .map(|id| casebook_canon::id_hex(&id))
        .map_err(|e| unreadable(e.to_string()))?;
    let key = CaseKey::new(&[], &case.task, &case.id).map_err(|e| unreadable(e.to_string()))?;
    let mut grades = Vec::new();
    for (grader, value) in &line.scores {
        let grade = match value {
            Value::Bool(pass) => Grade { score: f64::from(u8::from(*pass)), pass: *pass, rationale: String::new() },
            Value::Number(n) => match n.as_f64().filter(|x| (0.0..=1.0).contains(x)) {
                Some(score) => Grade { score, pass: score >= PASS_SCORE, rationale: String::new() },
                None => return Err(format!("score `{grader}` is {n}: a score is from 0 to 1, or true or false")),
            },
            other => {
                return Err(format!("score `{grader}` is {other}: a score is a number from 0 to 1, or true or false"));
            }
        };
        grades.push(GraderResult { grader: grader.clone(), weight: 1.0, outcome: Ok(grade) });
    }
    if grades.is_empty() {
        if let Some(pass) = line.pass {
            let grade = Grade { score: f64::from(u8::from(pass)), pass, rationale: String::new() };
            grades.push(GraderResult { grader: "pass".into(), weight: 1.0, outcome: Ok(grade) });
        }
    }
    if !done.insert(row, line.run) {
        return Err(format!(
            "case `{case_id}` has a result in this run already (run {}); give `run=` a new number to run it again",
            line.run
        ));
    }
    let target = casebook_runner::hash::target_key(target).map_err(|e| e.to_string())?;
    let hash = casebook_runner::hash::run_hash_of(&key, &target, line.run);
    let (output, kept, score, pass) = match line.error {
        Some(message) => (Err(Failure::new("client", message)), None, None, None),
        None => {
            let full = RunOutput {
                output: line.output,
                trajectory: line.trajectory,
                millis: line.millis,
                ..Default::default()
            };
            let kept = serde_json::to_string(&full).map_err(|e| e.to_string())?;
            let slim = RunOutput { millis: line.millis, ..Default::default() };
            let (score, pass) = if grades.is_empty() {
                (None, None)
            } else {
                let score = grades.iter().filter_map(|g| g.outcome.as_ref().ok()).map(|g| g.score).sum::<f64>()
                    / grades.len() as f64;
                let all = grades.iter().all(|g| g.outcome.as_ref().is_ok_and(|g| g.pass));
                (Some(score), Some(line.pass.unwrap_or(all)))
            };
            (Ok(slim), Some(kept), score, pass)
        }
    };
    let result = RunResult {
        case_id,
        row: Some(row),
        case_content_id: content_id,
        labels: case.labels.unwrap_or_default(),
        review: case.review,
        confidence: case.confidence,
        scenario: scenario.to_owned(),
        run: line.run,
        hash,
        output,
        grades,
        score,
        pass,
        noise: Vec::new(),
    };
    Ok((result, kept))
}
