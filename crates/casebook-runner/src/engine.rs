//! Running the jobs of an experiment: cases × scenarios × runs, at most `concurrency` at a time,
//! each run's turns in order on one session, then its grades.
//!
//! A job whose run hash has a stored output is not sent to the agent again (and `--regrade`
//! sends none). Results go to the caller as they finish, so that a run stopped half way keeps
//! what it did. Requests are built from the case's task only ([`AgentRequest::first`]); the
//! graders are given the whole case.
//!
//! With noise ([`crate::noise`]), a job's case is widened before it runs: the widened task is
//! what its run hash was made from, what the agent is sent and what the graders see; the result
//! records what was added.

use std::sync::Arc;
use std::time::Instant;

use casebook_model::{Case, Role, Seed, Task};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use crate::environment::tool_loop::{TurnEnd, play_turn};
use crate::environment::{DEFAULT_MAX_STEPS, Environment};
use crate::grade::Grader;
use crate::grade::asserts::CaseAsserts;
use crate::hash::{CaseKey, run_hash_bytes, target_key};
use crate::noise::{Noise, Widening};
use crate::planned::{PlannedCase, PlannedCases};
use crate::protocol::{AgentRequest, Message, Speaker, Step};
use crate::record::{Failure, GraderResult, RunOutput, RunResult};
use crate::target::Target;

/// One scenario, ready to run.
pub struct PlannedScenario {
    pub name: String,
    /// The target's configuration without secrets: part of the run hash.
    pub describe: Value,
    pub target: Target,
    /// The most calls of the agent in one turn (see [`crate::environment::tool_loop`]): part of
    /// the run hash of cases with recorded tool answers when it is not the default.
    pub max_steps: u32,
}

/// Everything a run of an experiment needs.
pub struct Plan {
    /// The selected cases, in dataset order, in temporary files.
    pub cases: PlannedCases,
    pub scenarios: Vec<PlannedScenario>,
    pub n_runs: u32,
    pub graders: Vec<Grader>,
    /// Grading by each case's own asserts, when the experiment lists no graders (`None`: no
    /// grading, `--no-grade`).
    pub case_asserts: Option<CaseAsserts>,
    /// The experiment's seeds, before each case's own.
    pub seeds: Vec<Seed>,
    pub concurrency: usize,
    /// What each scenario's noise draws from, when a scenario has noise: each case's widening
    /// is made when its window of jobs is.
    pub noise: Option<Noise>,
}

/// What a case's run hashes are made from besides the case: each scenario's target, the
/// experiment's seeds, the number of runs.
pub struct RunKeys {
    targets: Vec<String>,
    /// Each scenario's target with its `max_steps` when that is not the default: what the runs
    /// of cases with recorded tool answers are hashed with (`max_steps` changes only those).
    looping: Vec<String>,
    seeds: Vec<Seed>,
    n_runs: u32,
}

impl RunKeys {
    pub fn new(scenarios: &[PlannedScenario], seeds: &[Seed], n_runs: u32) -> Result<Self, Failure> {
        let targets = scenarios.iter().map(|s| target_key(&s.describe)).collect::<Result<_, _>>()?;
        let looping = scenarios
            .iter()
            .map(|s| match (&s.describe, s.max_steps) {
                (Value::Object(described), steps) if steps != DEFAULT_MAX_STEPS => {
                    let mut described = described.clone();
                    described.insert("max_steps".to_owned(), Value::from(steps));
                    target_key(&Value::Object(described))
                }
                (described, _) => target_key(described),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { targets, looping, seeds: seeds.to_vec(), n_runs })
    }

    /// How many hashes a case has: one per scenario and run.
    pub fn per_case(&self) -> usize {
        self.targets.len() * self.n_runs as usize
    }

    /// The targets `task`'s runs are hashed with, scenario by scenario.
    fn targets_of(&self, task: &Task) -> &[String] {
        if task.tools.iter().flatten().any(casebook_model::Tool::is_recorded) { &self.looping } else { &self.targets }
    }

    /// The hashes of the runs of `case` (its seed files read), scenario by scenario, run by run.
    pub fn hashes(&self, case: &Case) -> Result<Vec<[u8; 32]>, Failure> {
        let key = CaseKey::new(&effective_seeds(&self.seeds, case)?, &case.task, &case.id)?;
        Ok(self
            .targets_of(&case.task)
            .iter()
            .flat_map(|target| (0..self.n_runs).map(|run| run_hash_bytes(&key, target, run)))
            .collect())
    }

    /// [`RunKeys::hashes`] of `case` widened in each scenario by `noise` (one per scenario,
    /// `None` where it has none): the noise is part of the hash.
    pub fn widened_hashes(&self, case: &Case, noise: &[Option<Arc<Widening>>]) -> Result<Vec<[u8; 32]>, Failure> {
        let seeds = effective_seeds(&self.seeds, case)?;
        let plain = CaseKey::new(&seeds, &case.task, &case.id)?;
        let mut hashes = Vec::with_capacity(self.targets.len() * self.n_runs as usize);
        for (s, target) in self.targets_of(&case.task).iter().enumerate() {
            let key = match noise.get(s).and_then(Option::as_ref) {
                Some(widening) => &CaseKey::new(&seeds, &widening.widened(&case.task), &case.id)?,
                None => &plain,
            };
            hashes.extend((0..self.n_runs).map(|run| run_hash_bytes(key, target, run)));
        }
        Ok(hashes)
    }
}

/// The effective seeds of `case`: the experiment's, then the case's.
fn effective_seeds(experiment: &[Seed], case: &Case) -> Result<Vec<Seed>, Failure> {
    let mut seeds = experiment.to_vec();
    if let Some(own) = &case.task.memory_seeds {
        seeds.extend(own.seeds().map_err(|e| Failure::new("config", format!("case `{}`: {e}", case.id)))?);
    }
    Ok(seeds)
}

/// One run to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Its case's place among the selected cases.
    pub case: usize,
    pub scenario: usize,
    pub run: u32,
    pub hash: String,
    /// Its place in the experiment's results.
    pub seq: u64,
    /// Its case, as the plan keeps it.
    pub planned: Arc<PlannedCase>,
    /// The noise its case gets in its scenario.
    pub noise: Option<Arc<Widening>>,
}

/// Whether agents are called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Call agents for what has no stored output.
    Run,
    /// Grade stored outputs only; a job without one is an error.
    Regrade,
}

impl Plan {
    /// The case `job` runs, parsed.
    pub fn case(&self, job: &Job) -> Result<Case, Failure> {
        self.cases.case(&job.planned)
    }

    /// How many runs the experiment makes.
    pub fn total(&self) -> usize {
        self.cases.len() * self.scenarios.len() * self.n_runs as usize
    }

    /// The jobs whose places in the results are `seqs` (in result order: case, scenario, run),
    /// read from the plan's files; with noise, each of their cases is read and widened here
    /// (a case whose jobs two windows share is widened in each, the same way).
    pub fn jobs(&self, seqs: std::ops::Range<usize>) -> Result<Vec<Job>, Failure> {
        let runs = self.n_runs.max(1) as usize;
        let per_case = (self.scenarios.len() * runs).max(1);
        let end = seqs.end.min(self.total());
        if seqs.start >= end {
            return Ok(Vec::new());
        }
        let first = seqs.start / per_case;
        let read_back = |e: std::io::Error| {
            Failure::new("config", format!("the selected cases cannot be read back from their temporary file: {e}"))
        };
        let cases = self.cases.window(first..(end - 1) / per_case + 1).map_err(read_back)?;
        // With noise: each case's widening in each scenario, and the hashes of its widened tasks.
        let widened: Vec<Widened> = match &self.noise {
            None => Vec::new(),
            Some(noise) => {
                let keys = RunKeys::new(&self.scenarios, &self.seeds, self.n_runs)?;
                let texts = self.cases.texts(&cases).map_err(read_back)?;
                let indexed: Vec<(usize, String)> = (first..).zip(texts).collect();
                parallel_map(&indexed, |(c, text)| {
                    let case: Case = serde_json::from_str(text)
                        .map_err(|e| Failure::new("config", format!("a selected case cannot be read: {e}")))?;
                    let widenings = noise.widen(*c, &case);
                    let hashes = keys.widened_hashes(&case, &widenings)?;
                    Ok((widenings, hashes))
                })
                .into_iter()
                .collect::<Result<_, Failure>>()?
            }
        };
        Ok((seqs.start..end)
            .filter_map(|seq| {
                let (case, within) = (seq / per_case, seq % per_case);
                let planned = cases.get(case - first)?;
                let scenario = within / runs;
                let (hash, noise) = match widened.get(case - first) {
                    Some((widenings, hashes)) => (hashes.get(within)?, widenings.get(scenario).cloned().flatten()),
                    None => (planned.hashes.get(within)?, None),
                };
                Some(Job {
                    case,
                    scenario,
                    run: (within % runs) as u32,
                    hash: casebook_canon::id_hex(hash),
                    seq: seq as u64,
                    planned: planned.clone(),
                    noise,
                })
            })
            .collect())
    }
}

/// A case's widening in each scenario, and the hashes of its runs with it.
type Widened = (Vec<Option<Arc<Widening>>>, Vec<[u8; 32]>);

/// A job, with the agent's output an earlier run kept for its run hash (as stored JSON).
pub struct Work {
    pub job: Job,
    pub stored: Option<String>,
}

/// A finished job: its result, and whether the agent's output came from the store.
pub struct Finished {
    pub job: Job,
    pub result: RunResult,
    pub from_store: bool,
}

/// Jobs graded in one task when no agent is called and every grader is local.
const GRADE_BATCH: usize = 128;
/// Such batches being graded at once: enough to keep every core busy, few enough that memory
/// holds a window or two of outputs, not the experiment's.
const BATCHES_AT_ONCE: usize = 16;

/// Runs the jobs that come from `work` (a window at a time, each job with the output stored for
/// it, if any), handing each finished job to `finish` (on the thread that ran it, so that the
/// caller's per-result work is spread over the cores too) and sending what it returns to
/// `results`, in batches, as they finish. Stops starting new jobs when `stop` turns true
/// (in-flight ones are dropped, unrecorded).
///
/// At most `concurrency` jobs call agents at once. Jobs that call no agent (a stored output, or
/// `--regrade`) are graded in batches when every grader is local: no task or message per job.
pub async fn execute<T: Send + 'static>(
    plan: Arc<Plan>,
    mut work: mpsc::Receiver<Vec<Work>>,
    mode: Mode,
    mut stop: watch::Receiver<bool>,
    finish: Arc<dyn Fn(Finished) -> T + Send + Sync>,
    results: mpsc::Sender<Vec<T>>,
) {
    let permits = Arc::new(Semaphore::new(plan.concurrency.max(1)));
    let batches = Arc::new(Semaphore::new(BATCHES_AT_ONCE));
    let local =
        plan.graders.iter().all(Grader::is_local) && !plan.case_asserts.as_ref().is_some_and(CaseAsserts::has_judge);
    let mut tasks = tokio::task::JoinSet::new();
    let mut batch = Vec::with_capacity(GRADE_BATCH);
    // Waits for a permit of `semaphore`, unless the run is stopped first.
    async fn acquire(semaphore: &Arc<Semaphore>, stop: &mut watch::Receiver<bool>) -> Option<OwnedSemaphorePermit> {
        let permit = tokio::select! {
            permit = semaphore.clone().acquire_owned() => permit.ok(),
            _ = stop.wait_for(|stopped| *stopped) => None,
        };
        permit.filter(|_| !*stop.borrow())
    }
    let spawn_batch = |tasks: &mut tokio::task::JoinSet<()>, batch: Vec<Work>, permit: OwnedSemaphorePermit| {
        let (plan, finish, results) = (plan.clone(), finish.clone(), results.clone());
        tasks.spawn(async move {
            let mut done = Vec::with_capacity(batch.len());
            // Consecutive jobs often run the same case (`n_runs`, scenarios): parsed once.
            let mut parsed: Option<(usize, Result<Case, Failure>)> = None;
            for Work { job, stored } in batch {
                let stored = stored.and_then(|text| serde_json::from_str::<RunOutput>(&text).ok());
                if parsed.as_ref().is_none_or(|(i, _)| *i != job.case) {
                    parsed = Some((job.case, plan.case(&job)));
                }
                if let Some((_, case)) = &parsed {
                    done.push(finish(run_job(&plan, case, job, stored, mode).await));
                }
            }
            // The permit goes once the results are handed over: a finished job waiting for a
            // slow consumer (the store) holds its result, so it must count against the limit,
            // or finished results pile up in memory without bound.
            let _ = results.send(done).await;
            drop(permit);
        });
    };
    'windows: while let Some(window) = work.recv().await {
        for item in window {
            if *stop.borrow() {
                break 'windows;
            }
            if local && (item.stored.is_some() || mode == Mode::Regrade) {
                batch.push(item);
                if batch.len() == GRADE_BATCH {
                    let Some(permit) = acquire(&batches, &mut stop).await else { break 'windows };
                    spawn_batch(&mut tasks, std::mem::replace(&mut batch, Vec::with_capacity(GRADE_BATCH)), permit);
                }
            } else {
                let Some(permit) = acquire(&permits, &mut stop).await else { break 'windows };
                let (plan, finish, results) = (plan.clone(), finish.clone(), results.clone());
                tasks.spawn(async move {
                    let stored = item.stored.and_then(|text| serde_json::from_str::<RunOutput>(&text).ok());
                    let case = plan.case(&item.job);
                    let done = finish(run_job(&plan, &case, item.job, stored, mode).await);
                    // Held until the result is handed over (see `spawn_batch`).
                    let _ = results.send(vec![done]).await;
                    drop(permit);
                });
            }
            // Reap finished tasks as we go so the set does not grow with the experiment.
            while tasks.try_join_next().is_some() {}
        }
    }
    if !batch.is_empty() && !*stop.borrow() {
        if let Some(permit) = acquire(&batches, &mut stop).await {
            spawn_batch(&mut tasks, batch, permit);
        }
    }
    if *stop.borrow() {
        tasks.abort_all();
    }
    while tasks.join_next().await.is_some() {}
}

/// Job `job` of `case` (parsed once for all the jobs of a batch that run it).
async fn run_job(
    plan: &Plan,
    case: &Result<Case, Failure>,
    job: Job,
    stored: Option<RunOutput>,
    mode: Mode,
) -> Finished {
    let scenario = &plan.scenarios[job.scenario];
    let from_store = stored.is_some();
    let case = match case {
        Ok(case) => case,
        Err(failure) => {
            let result = RunResult {
                case_id: format!("#{}", job.case),
                row: job.planned.row,
                case_content_id: casebook_canon::id_hex(&job.planned.content_id),
                labels: Vec::new(),
                review: None,
                confidence: None,
                scenario: scenario.name.clone(),
                run: job.run,
                hash: job.hash.clone(),
                output: Err(failure.clone()),
                grades: Vec::new(),
                score: None,
                pass: None,
                noise: Vec::new(),
            };
            return Finished { job, result, from_store };
        }
    };
    // The case as this scenario runs it: widened by its noise, if any.
    let widening = job.noise.clone();
    let widened;
    let case = match &widening {
        Some(widening) => {
            let mut copy = case.clone();
            widening.apply(&mut copy.task);
            widened = copy;
            &widened
        }
        None => case,
    };
    let output = match (stored, mode) {
        (Some(output), _) => Ok(output),
        (None, Mode::Regrade) => {
            Err(Failure::new("not-run", "no stored output to grade: run without `--regrade` first"))
        }
        (None, Mode::Run) => match effective_seeds(&plan.seeds, case) {
            Ok(seeds) => converse(case, seeds, &job, &scenario.target, scenario.max_steps).await,
            Err(failure) => Err(failure),
        },
    };
    let mut grades = Vec::with_capacity(plan.graders.len());
    let mut threshold = None;
    if let Ok(output) = &output {
        for grader in &plan.graders {
            grades.push(GraderResult {
                grader: grader.name().to_owned(),
                weight: grader.weight(),
                outcome: grader.grade(case, output).await,
            });
        }
        if let (true, Some(asserts)) = (plan.graders.is_empty(), &plan.case_asserts) {
            let graded = asserts.grade(case, output).await;
            grades = graded.grades;
            threshold = graded.threshold;
        }
    }
    let (score, pass) = verdict(&output, &grades, threshold);
    let result = RunResult {
        case_id: case.id.clone(),
        row: job.planned.row,
        case_content_id: casebook_canon::id_hex(&job.planned.content_id),
        labels: case.labels.clone().unwrap_or_default(),
        review: case.review,
        confidence: case.confidence,
        scenario: scenario.name.clone(),
        run: job.run,
        hash: job.hash.clone(),
        output,
        grades,
        score,
        pass,
        noise: widening.map(|w| w.added.clone()).unwrap_or_default(),
    };
    Finished { job, result, from_store }
}

/// The weighted mean of the grades and whether every grader passed (or, with a `threshold`,
/// whether the mean reaches it); nothing when the run or a grader failed (an error is not a
/// score), nor when nothing graded it.
fn verdict(
    output: &Result<RunOutput, Failure>,
    grades: &[GraderResult],
    threshold: Option<f64>,
) -> (Option<f64>, Option<bool>) {
    // A run that did not finish (`max-steps`) is an error too, though its output is kept.
    if output.as_ref().map_or(true, |o| o.unfinished.is_some()) || grades.iter().any(|g| g.outcome.is_err()) {
        return (None, None);
    }
    // Nothing graded it: neither a pass nor a fail.
    if grades.is_empty() {
        return (None, None);
    }
    let (mut total, mut weights, mut pass) = (0.0, 0.0, true);
    for g in grades {
        if let Ok(grade) = &g.outcome {
            total += grade.score * g.weight;
            weights += g.weight;
            pass &= grade.pass;
        }
    }
    let score = if weights > 0.0 { total / weights } else { 0.0 };
    (Some(score), Some(threshold.map_or(pass, |t| score >= t)))
}

/// One run: the input, then each later turn, on one session; within a turn, the agent's tool
/// calls answered from the case's environment, at most `max_steps` calls of the agent a turn.
async fn converse(
    case: &Case,
    seeds: Vec<Seed>,
    job: &Job,
    target: &Target,
    max_steps: u32,
) -> Result<RunOutput, Failure> {
    let started = Instant::now();
    let task = &case.task;
    let session = task.session_id.clone().unwrap_or_else(|| format!("cb-{}", &job.hash[..16]));
    let mut request = AgentRequest::first(&case.id, job.run, task, seeds, session);
    request.several_answers = crate::grade::several_right(case);
    let mut trajectory = vec![Step::Message { role: Speaker::User, content: task.input.clone(), operator: false }];
    let mut per_turn = Vec::with_capacity(1 + task.turns.as_ref().map_or(0, Vec::len));
    let later = task.turns.as_deref().unwrap_or_default();
    // The world the agent investigates, when the case's tools have recorded answers.
    let environment = Environment::of(task.tools.as_deref())?.map(Arc::new);
    // Its MCP server's route, closed when the run ends.
    let mcp = crate::mcp::serve_session(target.mcp(), environment.as_ref(), &mut request).await?;
    let mut unfinished = None;
    for turn in 0..=later.len() {
        if turn > 0 {
            // MCP calls that came after the agent's reply belong to the turn it replied to.
            if let Some(route) = &mcp {
                route.settle().await;
            }
            if let Some(environment) = &environment {
                trajectory.extend(environment.drain());
            }
            let next = &later[turn - 1];
            let role = match next.role {
                Role::User => Speaker::User,
                Role::Hitl => Speaker::Hitl,
                Role::System => Speaker::System,
            };
            let content = Value::String(next.content.clone());
            trajectory.push(Step::Message { role, content: content.clone(), operator: next.role == Role::Hitl });
            request.messages.push(Message::new(role, content));
            request.turn = turn;
        }
        match play_turn(target, &mut request, environment.as_deref(), max_steps, &mut trajectory).await? {
            TurnEnd::Answered(output) => {
                trajectory.push(Step::Message { role: Speaker::Assistant, content: output.clone(), operator: false });
                request.messages.push(Message::new(Speaker::Assistant, output.clone()));
                per_turn.push(output);
            }
            // The later turns answer a conversation that never got its answer: not played.
            TurnEnd::Unfinished(failure) => {
                unfinished = Some(failure);
                break;
            }
        }
    }
    // The calls still arriving when the agent gave its last reply: served (they happened), so
    // recorded at the end of its turn.
    if let Some(route) = mcp {
        route.close().await;
    }
    if let Some(environment) = &environment {
        trajectory.extend(environment.drain());
    }
    let mut output = RunOutput {
        output: if unfinished.is_some() { Value::Null } else { per_turn.last().cloned().unwrap_or(Value::Null) },
        per_turn,
        trajectory,
        millis: started.elapsed().as_millis() as u64,
        unfinished,
        ..RunOutput::default()
    };
    output.count_served_calls();
    Ok(output)
}

/// `f` of each item, on as many threads as there are cores, in order.
pub fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if threads == 1 || items.len() < 256 {
        return items.iter().map(f).collect();
    }
    let size = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> =
            items.chunks(size).map(|chunk| scope.spawn(|| chunk.iter().map(&f).collect::<Vec<R>>())).collect();
        parts.into_iter().flat_map(|part| part.join().unwrap_or_default()).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(name: &str, target: &str) -> PlannedScenario {
        let spec: crate::target::TargetSpec = target.parse().unwrap();
        PlannedScenario {
            name: name.into(),
            describe: spec.describe(),
            target: spec.connect().unwrap(),
            max_steps: DEFAULT_MAX_STEPS,
        }
    }

    fn plan_of(cases: &[Case], scenarios: Vec<PlannedScenario>, n_runs: u32, noise: Option<Noise>) -> Plan {
        let keys = RunKeys::new(&scenarios, &[], n_runs).unwrap();
        Plan {
            cases: PlannedCases::of(cases, &keys).unwrap(),
            scenarios,
            n_runs,
            graders: Vec::new(),
            case_asserts: None,
            seeds: Vec::new(),
            concurrency: 1,
            noise,
        }
    }

    #[test]
    fn jobs_go_case_by_case_then_scenario_then_run_with_their_own_hashes() {
        // (Scenarios with the same target share their runs' hashes, and so their outputs.)
        let scenarios = vec![scenario("a", "builtin:echo"), scenario("b", "http://127.0.0.1:9/agent")];
        let cases: Vec<Case> = ["x", "y"]
            .iter()
            .map(|id| serde_json::from_value(serde_json::json!({"id": id, "input": format!("q{id}")})).unwrap())
            .collect();
        let plan = plan_of(&cases, scenarios, 3, None);
        assert_eq!(plan.total(), 12);
        let all = plan.jobs(0..12).unwrap();
        let places: Vec<(usize, usize, u32)> = all.iter().map(|j| (j.case, j.scenario, j.run)).collect();
        let expected: Vec<(usize, usize, u32)> =
            (0..2).flat_map(|c| (0..2).flat_map(move |s| (0..3).map(move |r| (c, s, r)))).collect();
        assert_eq!(places, expected);
        assert!(all.iter().enumerate().all(|(i, j)| j.seq == i as u64));
        // Every run has its own hash, the one `run_hash` gives it; a window is the same jobs.
        let distinct: std::collections::BTreeSet<&str> = all.iter().map(|j| j.hash.as_str()).collect();
        assert_eq!(distinct.len(), 12);
        let target = plan.scenarios[1].describe.clone();
        let y = &cases[1];
        assert_eq!(all[10].hash, crate::hash::run_hash(&target, &[], &y.task, &y.id, 1).unwrap());
        assert_eq!(plan.jobs(5..8).unwrap(), all[5..8].to_vec());
        assert!(plan.jobs(12..20).unwrap().is_empty());
        assert_eq!(plan.jobs(11..20).unwrap(), all[11..].to_vec());
        // Each job reads its own case back.
        assert_eq!(plan.case(&all[10]).unwrap(), cases[1]);
        assert_eq!(plan.case(&all[0]).unwrap(), cases[0]);
        let content_id = casebook_canon::content_id_bytes_of_json(
            casebook_canon::Kind::Case,
            &serde_json::to_string(&cases[1]).unwrap(),
        )
        .unwrap();
        assert_eq!(all[10].planned.content_id, content_id);
    }

    #[test]
    fn noisy_jobs_of_a_window_carry_the_noise_their_hashes_cover() {
        use crate::noise::{NoisePools, NoiseSource, NoiseSpec};
        let scenarios = vec![scenario("clean", "builtin:echo"), scenario("noisy", "builtin:echo")];
        let cases: Vec<Case> = (0..5)
            .map(|i| {
                serde_json::from_value(serde_json::json!({
                    "id": format!("c{i}"), "input": "q", "context": [{"content": format!("item {i}")}]
                }))
                .unwrap()
            })
            .collect();
        let spec = NoiseSpec { from: NoiseSource::Cases, items: 2, similar_by: None, seed: 3, tools: None };
        let specs = [None, Some(spec)];
        let mut pools = NoisePools::new(&specs).unwrap();
        cases.iter().enumerate().for_each(|(c, case)| pools.add(c, case));
        let plan = plan_of(&cases, scenarios, 1, Some(pools.finish()));
        let expected = crate::noise::plan(&cases, &specs);
        let keys = RunKeys::new(&plan.scenarios, &[], 1).unwrap();
        // Windows that cut a case's jobs in two give each half the same noise and hashes.
        let jobs: Vec<Job> = [0..3, 3..7, 7..10].into_iter().flat_map(|w| plan.jobs(w).unwrap()).collect();
        assert_eq!(jobs.len(), 10);
        for job in &jobs {
            let widening = &expected[job.case][job.scenario];
            assert_eq!(&job.noise, widening, "{job:?}");
            assert_eq!(job.noise.is_some(), job.scenario == 1);
            let hashes = keys.widened_hashes(&cases[job.case], &expected[job.case]).unwrap();
            assert_eq!(job.hash, casebook_canon::id_hex(&hashes[job.scenario]));
        }
        // The clean scenario keeps the hash the plan was written with.
        assert_eq!(jobs[0].hash, casebook_canon::id_hex(&jobs[0].planned.hashes[0]));
        assert_ne!(jobs[1].hash, casebook_canon::id_hex(&jobs[1].planned.hashes[1]));
    }

    #[test]
    fn noise_is_part_of_the_run_hash_and_the_same_seed_keeps_it() {
        use crate::noise::{NoiseSource, NoiseSpec, plan};
        let scenarios = vec![scenario("clean", "builtin:echo"), scenario("noisy", "builtin:echo")];
        let keys = RunKeys::new(&scenarios, &[], 1).unwrap();
        let cases: Vec<Case> = (0..4)
            .map(|i| {
                serde_json::from_value(serde_json::json!({
                    "id": format!("c{i}"), "input": "q", "context": [{"content": format!("item {i}")}]
                }))
                .unwrap()
            })
            .collect();
        let spec = |seed| Some(NoiseSpec { from: NoiseSource::Cases, items: 2, similar_by: None, seed, tools: None });
        let hashes = |seed| {
            let noise = plan(&cases, &[None, spec(seed)]);
            keys.widened_hashes(&cases[0], &noise[0]).unwrap()
        };
        let plain = keys.hashes(&cases[0]).unwrap();
        let (one, again, other) = (hashes(1), hashes(1), hashes(2));
        // The clean scenario keeps the hash it has without noise; the noisy one's differs.
        assert_eq!(one[0], plain[0]);
        assert_ne!(one[1], plain[1]);
        assert_eq!(one, again);
        assert_ne!(one[1], other[1]);
        // It is the hash of the widened task.
        let widened = plan(&cases, &[spec(1)])[0][0].clone().unwrap().widened(&cases[0].task);
        let target = scenarios[1].describe.clone();
        assert_eq!(casebook_canon::id_hex(&one[1]), crate::hash::run_hash(&target, &[], &widened, "c0", 0).unwrap());
    }
}
