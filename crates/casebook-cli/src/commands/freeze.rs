//! `casebook freeze NAME[@REF]`: runs the queries of a stored version's tool snapshots once
//! (`casebook_runner::freeze`) and commits the answers as the next version, on the version read
//! (a commit made meanwhile is a conflict, not an update lost). Only the cases holding queries
//! are kept in memory.

use casebook_runner::freeze::{self, Plan, QueryError};
use casebook_store::{AnyStore, CommitMode, CommitOutcome, CommitRequest, Ref, Select, Store, StoreError};
use serde_json::{Value, json};

use crate::Outcome;
use crate::args::FreezeArgs;
use crate::progress::Progress;
use crate::settings::Global;
use crate::stores;

/// Cases read from the store, or handed to a commit, at a time.
const BATCH: usize = 4096;

pub fn run(settings: &Global, args: FreezeArgs) -> anyhow::Result<Outcome> {
    let (name, reference) = stores::target(&args.target)?;
    let runtime = stores::runtime()?;
    let store = if args.dry_run { stores::open(settings, &runtime)? } else { stores::open_write(settings, &runtime)? };
    let result = runtime.block_on(freeze_version(settings, &store, &args, &name, &reference));
    // Closing checkpoints the write-ahead log (as every command that writes does).
    runtime.block_on(store.close());
    result
}

async fn freeze_version(
    settings: &Global,
    store: &AnyStore,
    args: &FreezeArgs,
    name: &str,
    reference: &Ref,
) -> anyhow::Result<Outcome> {
    let version = store.resolve(name, reference).await?;
    let head = store.resolve(name, &Ref::Latest).await?;
    if version.number != head.number {
        anyhow::bail!(
            "`{}` is {name} v{}, but the head is v{}: `freeze` commits the next version on the head, so freeze \
             `{name}` (or `{name}@v{}`)",
            args.target,
            version.number,
            head.number,
            head.number
        );
    }
    let mut cases = Vec::new();
    store
        .cases(name, version.number, &Select::all(), BATCH, &mut |batch| {
            cases.extend(batch.into_iter().filter(|case| freeze::has_pending(case, args.refresh)));
            true
        })
        .await?;
    let plan = freeze::plan(&cases, args.refresh);
    if plan.queries.is_empty() {
        let which = if args.refresh { "no query" } else { "no query that has not been run" };
        crate::write_stdout(&if settings.json {
            format!("{}\n", json!({"dataset": name, "from": version.number, "queries": 0, "created": false}))
        } else {
            format!("nothing to freeze: {name} v{} has {which}\n", version.number)
        })?;
        return Ok(Outcome::Ok);
    }
    if args.dry_run {
        crate::write_stdout(&dry_run(settings, name, version.number, &plan))?;
        return Ok(Outcome::Ok);
    }

    let progress = Progress::counting(settings, plan.queries.len() as u64, false, "queries");
    let env = |var: &str| std::env::var(var).ok();
    let answers = freeze::run(&plan, usize::from(args.concurrency), &env, || progress.add(1)).await;
    progress.finish();
    let errors: Vec<&QueryError> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    for error in &errors {
        stderr!("error: {error}");
    }
    let left: usize = errors.iter().map(|e| e.others + 1).sum();
    let answered = plan.queries.len() - errors.len();
    let frozen = plan.responses() - left;
    let mut report = json!({
        "dataset": name,
        "from": version.number,
        "queries": plan.queries.len(),
        "answered": answered,
        "failed": errors.len(),
        "responses": frozen,
        "left": left,
        "errors": errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        "created": false,
        "version": Value::Null,
    });
    let failed = queries(errors.len());
    if !errors.is_empty() && !args.keep_going {
        if settings.json {
            crate::write_stdout(&format!("{report}\n"))?;
        } else {
            stderr!(
                "nothing was committed: {failed} of {} failed; fix {} and freeze again, or commit the answers that \
                 came with `--keep-going`",
                plan.queries.len(),
                if errors.len() == 1 { "it" } else { "them" }
            );
        }
        return Ok(Outcome::Invalid);
    }

    let changed = freeze::apply(&mut cases, &plan, &answers, &settings.time);
    let mut prepared = Vec::with_capacity(changed.len());
    for &i in &changed {
        prepared.push(casebook_store::prepare(&cases[i])?);
    }
    drop(cases);
    let unfrozen =
        if left > 0 { format!(", {} left unfrozen", crate::plural(left as u64, "response")) } else { String::new() };
    let message = args.message.clone().unwrap_or_else(|| format!("freeze: {} answered{unfrozen}", queries(answered)));
    let request = CommitRequest {
        dataset: name.to_owned(),
        header: None,
        mode: CommitMode::Upsert,
        parent: Some(version.number),
        author: settings.author.clone(),
        time: settings.time.clone(),
        message,
    };
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let send = async move {
        let mut prepared = prepared.into_iter().peekable();
        while prepared.peek().is_some() {
            let batch: Vec<_> = prepared.by_ref().take(BATCH).collect();
            if tx.send(Ok(batch)).await.is_err() {
                break;
            }
        }
    };
    let outcome = match tokio::join!(store.commit(request, rx), send).0 {
        Ok(outcome) => outcome,
        Err(StoreError::Conflict { dataset, parent, head }) => anyhow::bail!(
            "dataset `{dataset}` moved on while the queries ran: its head is v{head}, they were run for v{parent}; \
             nothing was committed: freeze `{dataset}` again"
        ),
        Err(err) => return Err(err.into()),
    };
    let line = match &outcome {
        CommitOutcome::Created(v) => {
            report["created"] = json!(true);
            report["version"] = json!(v);
            super::versions::created_line(v)
        }
        CommitOutcome::Unchanged(v) => {
            report["version"] = json!(v);
            "no change: the answers are the ones recorded".to_owned()
        }
    };
    let mut text = if settings.json {
        format!("{report}\n")
    } else {
        let answered_text = queries(answered);
        let responses = crate::plural(frozen as u64, "response");
        format!("froze {answered_text} ({responses}) of {name} v{}\n{line}\n", version.number)
    };
    if !errors.is_empty() && !settings.json {
        text.push_str(&format!(
            "{failed} failed: {} left unfrozen; run `casebook freeze {name}` again to retry\n",
            crate::plural(left as u64, "response")
        ));
    }
    crate::write_stdout(&text)?;
    Ok(if errors.is_empty() { Outcome::Ok } else { Outcome::Invalid })
}

/// What `--dry-run` prints: each query once, with the responses that ask it.
fn dry_run(settings: &Global, name: &str, number: u64, plan: &Plan) -> String {
    if settings.json {
        let queries: Vec<Value> = plan
            .queries
            .iter()
            .map(|q| {
                json!({
                    "query": q.request.shown(),
                    "timeout_secs": q.timeout.as_secs_f64(),
                    "asked_by": q.sites.iter().map(|s| json!({"case": s.case, "tool": s.tool, "response": s.response})).collect::<Vec<_>>(),
                })
            })
            .collect();
        return format!("{}\n", json!({"dataset": name, "from": number, "queries": queries}));
    }
    let mut text = String::new();
    for q in &plan.queries {
        let first = &q.sites[0];
        let others = match q.sites.len() - 1 {
            0 => String::new(),
            n => format!(", and {}", crate::plural(n as u64, "other response")),
        };
        text.push_str(&format!("{}  ({first}{others})\n", q.request.shown()));
    }
    text.push_str(&format!(
        "would run {} for {} of {name} v{number}\n",
        queries(plan.queries.len()),
        crate::plural(plan.responses() as u64, "response")
    ));
    text
}

/// `1 query`, `2 queries`.
fn queries(n: usize) -> String {
    if n == 1 { "1 query".to_owned() } else { format!("{n} queries") }
}
