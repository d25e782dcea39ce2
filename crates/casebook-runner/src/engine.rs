//! Running the jobs of an experiment: cases × scenarios × runs, at most `concurrency` at a time,
//! each run's turns in order on one session, then its grades.
//!
//! A job whose run hash has a stored output is not sent to the agent again (and `--regrade`
//! sends none). Results go to the caller as they finish, so that a run stopped half way keeps
//! what it did. Requests are built from the case's task only ([`AgentRequest::first`]); the
//! graders are given the whole case.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use casebook_model::{Case, MemorySeeds, Role, Seed};
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::grade::Grader;
use crate::hash::{CaseKey, run_hash_of, target_key};
use crate::protocol::{AgentRequest, Message, Speaker, Step};
use crate::record::{Failure, GraderResult, RunOutput, RunResult};
use crate::target::Target;

/// One scenario, ready to run.
pub struct PlannedScenario {
    pub name: String,
    /// The target's configuration without secrets: part of the run hash.
    pub describe: Value,
    pub target: Target,
}

/// Everything a run of an experiment needs.
pub struct Plan {
    /// The selected cases, in dataset order, their seed files already read, each as its native
    /// JSON (a third of the memory of a parsed case; a job parses its case when it runs).
    pub cases: Vec<String>,
    /// Content id of each case.
    pub content_ids: Vec<String>,
    pub scenarios: Vec<PlannedScenario>,
    pub n_runs: u32,
    pub graders: Vec<Grader>,
    /// The experiment's seeds, before each case's own.
    pub seeds: Vec<Seed>,
    pub concurrency: usize,
}

/// One run to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub case: usize,
    pub scenario: usize,
    pub run: u32,
    pub hash: String,
    /// Its place in the experiment's results.
    pub seq: u64,
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
    /// Case `i`, parsed.
    pub fn case(&self, i: usize) -> Result<Case, Failure> {
        serde_json::from_str(&self.cases[i])
            .map_err(|e| Failure::new("config", format!("case {i} cannot be read: {e}")))
    }

    /// The effective seeds of `case`: the experiment's, then the case's (a seed file must have
    /// been read into the case by then).
    pub fn seeds_of(&self, case: &Case) -> Vec<Seed> {
        let mut seeds = self.seeds.clone();
        if let Some(MemorySeeds::Inline(own)) = &case.task.memory_seeds {
            seeds.extend(own.iter().cloned());
        }
        seeds
    }

    /// Every job, with its run hash, in result order (case, scenario, run).
    pub fn jobs(&self) -> Result<Vec<Job>, Failure> {
        let targets = self.scenarios.iter().map(|s| target_key(&s.describe)).collect::<Result<Vec<_>, _>>()?;
        let indexes: Vec<usize> = (0..self.cases.len()).collect();
        // Each case's hashes, its canonical parts made and dropped on the way (they are as big
        // as the case: keeping them all would double the memory of a large experiment).
        let hashes = parallel_map(&indexes, |&i| {
            let case = self.case(i)?;
            let key = CaseKey::new(&self.seeds_of(&case), &case.task, &case.id)?;
            Ok::<_, Failure>(
                targets
                    .iter()
                    .flat_map(|target| (0..self.n_runs).map(|run| run_hash_of(&key, target, run)))
                    .collect::<Vec<_>>(),
            )
        });
        let mut jobs = Vec::with_capacity(self.cases.len() * self.scenarios.len() * self.n_runs as usize);
        for (case, hashes) in hashes.into_iter().enumerate() {
            let mut hashes = hashes?.into_iter();
            for scenario in 0..targets.len() {
                for run in 0..self.n_runs {
                    let hash = hashes.next().unwrap_or_default();
                    let seq = jobs.len() as u64;
                    jobs.push(Job { case, scenario, run, hash, seq });
                }
            }
        }
        Ok(jobs)
    }
}

/// Runs `jobs`, sending each result to `results` as it finishes (and whether its output came
/// from `stored`). Stops starting new jobs when
/// `stop` turns true (in-flight ones are dropped, unrecorded). `stored` maps run hashes to
/// outputs kept from earlier runs.
pub async fn execute(
    plan: Arc<Plan>,
    jobs: Vec<Job>,
    stored: Arc<HashMap<String, RunOutput>>,
    mode: Mode,
    mut stop: watch::Receiver<bool>,
    results: mpsc::Sender<(Job, RunResult, bool)>,
) {
    let permits = Arc::new(Semaphore::new(plan.concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for job in jobs {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = stop.wait_for(|stopped| *stopped) => break,
        };
        if *stop.borrow() {
            break;
        }
        let (plan, stored, results) = (plan.clone(), stored.clone(), results.clone());
        tasks.spawn(async move {
            let from_store = stored.contains_key(&job.hash);
            let result = run_job(&plan, &job, &stored, mode).await;
            drop(permit);
            let _ = results.send((job, result, from_store)).await;
        });
        // Reap finished tasks as we go so the set does not grow with the experiment.
        while tasks.try_join_next().is_some() {}
    }
    if *stop.borrow() {
        tasks.abort_all();
    }
    while tasks.join_next().await.is_some() {}
}

async fn run_job(plan: &Plan, job: &Job, stored: &HashMap<String, RunOutput>, mode: Mode) -> RunResult {
    let scenario = &plan.scenarios[job.scenario];
    let case = match plan.case(job.case) {
        Ok(case) => case,
        Err(failure) => {
            return RunResult {
                case_id: format!("#{}", job.case),
                case_content_id: plan.content_ids[job.case].clone(),
                labels: Vec::new(),
                scenario: scenario.name.clone(),
                run: job.run,
                hash: job.hash.clone(),
                output: Err(failure),
                grades: Vec::new(),
                score: None,
                pass: None,
            };
        }
    };
    let case = &case;
    let output = match (stored.get(&job.hash), mode) {
        (Some(output), _) => Ok(output.clone()),
        (None, Mode::Regrade) => {
            Err(Failure::new("not-run", "no stored output to grade: run without `--regrade` first"))
        }
        (None, Mode::Run) => converse(case, plan.seeds_of(case), job, &scenario.target).await,
    };
    let mut grades = Vec::with_capacity(plan.graders.len());
    if let Ok(output) = &output {
        for grader in &plan.graders {
            grades.push(GraderResult {
                grader: grader.name().to_owned(),
                weight: grader.weight(),
                outcome: grader.grade(case, output).await,
            });
        }
    }
    let (score, pass) = verdict(&output, &grades);
    RunResult {
        case_id: case.id.clone(),
        case_content_id: plan.content_ids[job.case].clone(),
        labels: case.labels.clone().unwrap_or_default(),
        scenario: scenario.name.clone(),
        run: job.run,
        hash: job.hash.clone(),
        output,
        grades,
        score,
        pass,
    }
}

/// The weighted mean of the grades and whether every grader passed; nothing when the run or a
/// grader failed (an error is not a score). Without graders a run that answered passes.
fn verdict(output: &Result<RunOutput, Failure>, grades: &[GraderResult]) -> (Option<f64>, Option<bool>) {
    if output.is_err() || grades.iter().any(|g| g.outcome.is_err()) {
        return (None, None);
    }
    if grades.is_empty() {
        return (Some(1.0), Some(true));
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
    (Some(score), Some(pass))
}

/// One run: the input, then each later turn, on one session.
async fn converse(case: &Case, seeds: Vec<Seed>, job: &Job, target: &Target) -> Result<RunOutput, Failure> {
    let started = Instant::now();
    let task = &case.task;
    let session = task.session_id.clone().unwrap_or_else(|| format!("cb-{}", &job.hash[..16]));
    let mut request = AgentRequest::first(&case.id, job.run, task, seeds, session);
    let mut trajectory = vec![Step::Message { role: Speaker::User, content: task.input.clone(), operator: false }];
    let mut per_turn = Vec::with_capacity(1 + task.turns.as_ref().map_or(0, Vec::len));
    let later = task.turns.as_deref().unwrap_or_default();
    for turn in 0..=later.len() {
        if turn > 0 {
            let next = &later[turn - 1];
            let role = match next.role {
                Role::User => Speaker::User,
                Role::Hitl => Speaker::Hitl,
                Role::System => Speaker::System,
            };
            let content = Value::String(next.content.clone());
            trajectory.push(Step::Message { role, content: content.clone(), operator: next.role == Role::Hitl });
            request.messages.push(Message { role, content });
            request.turn = turn;
        }
        let reply = target.call(&request).await?;
        trajectory.extend(reply.trajectory);
        trajectory.push(Step::Message { role: Speaker::Assistant, content: reply.output.clone(), operator: false });
        request.messages.push(Message { role: Speaker::Assistant, content: reply.output.clone() });
        per_turn.push(reply.output);
    }
    Ok(RunOutput {
        output: per_turn.last().cloned().unwrap_or(Value::Null),
        per_turn,
        trajectory,
        millis: started.elapsed().as_millis() as u64,
    })
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
