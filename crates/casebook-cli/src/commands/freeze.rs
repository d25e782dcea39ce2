//! `casebook freeze NAME[@REF]`: runs the queries of a stored version's tool snapshots once
//! (`casebook_runner::freeze`) and commits the answers as the next version, on the version read
//! (a commit made meanwhile is a conflict, not an update lost). Only the cases holding queries
//! are kept in memory. With `CASEBOOK_URL` set (and no store named), the version is read from
//! the team server and the answered cases are sent back as `push` sends a pulled file: merged
//! onto the head from the version read, so a change made on the server meanwhile is kept, or is
//! a conflict if it touched a case frozen here. `casebook freeze FILE [-o OUT]` does the same to
//! a dataset file and writes the result in the native format.

use std::path::Path;

use anyhow::Context;
use casebook_formats::{Encoder, Format, Syntax, Writer};
use casebook_model::Case;
use casebook_runner::freeze::{self, Plan, QueryError};
use casebook_store::{AnyStore, CommitMode, CommitOutcome, CommitRequest, Ref, Select, Store, StoreError, VersionInfo};
use serde_json::{Value, json};

use super::remote::{self, Onto, Sending};
use crate::Outcome;
use crate::args::FreezeArgs;
use crate::output::Output;
use crate::progress::Progress;
use crate::remote::{Remote, RemoteError};
use crate::settings::Global;
use crate::source::Source;
use crate::stores;

/// Cases read from the store, or handed to a commit, at a time.
const BATCH: usize = 4096;

pub fn run(settings: &Global, args: FreezeArgs) -> anyhow::Result<Outcome> {
    // A file (`-o` says one is meant even when it is missing, for a usage error naming it).
    let file = Path::new(&args.target);
    if args.output.is_some() || file.is_file() {
        return freeze_file(settings, &args, file);
    }
    let (name, reference) = stores::target(&args.target)?;
    if settings.on_server() {
        return freeze_on_server(settings, &args, &name, &reference);
    }
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
    on_head(args, &version, &head)?;
    let mut cases = Vec::new();
    store
        .cases(name, version.number, &Select::all(), BATCH, &mut |batch| {
            cases.extend(batch.into_iter().filter(|case| freeze::has_pending(case, args.refresh)));
            true
        })
        .await?;
    let plan = freeze::plan(&cases, args.refresh);
    let shown = format!("{name} v{}", version.number);
    let base = json!({"dataset": name, "from": version.number});
    let mut ran = match run_queries(settings, args, &plan, &shown, base, "committed").await? {
        Ran::Done(outcome) => return Ok(outcome),
        Ran::Answers(ran) => ran,
    };

    let changed = freeze::apply(&mut cases, &plan, &ran.answers, &settings.time);
    let mut prepared = Vec::with_capacity(changed.len());
    for &i in &changed {
        prepared.push(casebook_store::prepare(&cases[i])?);
    }
    drop(cases);
    let message = commit_message(args, &ran);
    let request = CommitRequest {
        dataset: name.to_owned(),
        header: None,
        mode: CommitMode::Upsert,
        parent: Some(version.number),
        author: settings.author.clone(),
        time: settings.time.clone(),
        message,
    };
    let outcome = match casebook_store::commit_prepared(store, request, prepared).await {
        Ok(outcome) => outcome,
        Err(StoreError::Conflict { dataset, parent, head }) => anyhow::bail!(
            "dataset `{dataset}` moved on while the queries ran: its head is v{head}, they were run for v{parent}; \
             nothing was committed: freeze `{dataset}` again"
        ),
        Err(err) => return Err(err.into()),
    };
    let line = match &outcome {
        CommitOutcome::Created(v) => {
            ran.report["created"] = json!(true);
            ran.report["version"] = json!(v);
            super::versions::created_line(v)
        }
        CommitOutcome::Unchanged(v) => {
            ran.report["version"] = json!(v);
            "no change: the answers are the ones recorded".to_owned()
        }
    };
    finish(settings, &ran, &shown, &line, &format!("casebook freeze {name}"), true)
}

/// Refuses to freeze a version other than the head: the answers are committed as the next one.
fn on_head(args: &FreezeArgs, version: &VersionInfo, head: &VersionInfo) -> anyhow::Result<()> {
    if version.number != head.number {
        let name = &version.dataset;
        anyhow::bail!(
            "`{}` is {name} v{}, but the head is v{}: `freeze` commits the next version on the head, so freeze \
             `{name}` (or `{name}@v{}`)",
            args.target,
            version.number,
            head.number,
            head.number
        );
    }
    Ok(())
}

/// The version's message: `--message`, else what was answered.
fn commit_message(args: &FreezeArgs, ran: &Answers) -> String {
    let unfrozen = if ran.left > 0 {
        format!(", {} left unfrozen", crate::plural(ran.left as u64, "response"))
    } else {
        String::new()
    };
    args.message.clone().unwrap_or_else(|| format!("freeze: {} answered{unfrozen}", queries(ran.answered)))
}

/// `casebook freeze NAME[@REF]` on the team server: the version read from it (the head), its
/// queries run here, and the answered cases sent to its import as an upsert merged onto the
/// head from the version read ([`remote::send_import`], as `push` sends a pulled file). Cases
/// changed on the server meanwhile are kept; one changed there and frozen here is a conflict,
/// and nothing is committed.
fn freeze_on_server(settings: &Global, args: &FreezeArgs, name: &str, reference: &Ref) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let source = Source::Server(runtime.block_on(Remote::connect())?);
    let Source::Server(server) = &source else { unreachable!("made as a server just above") };
    source.tell(settings);
    let version = source.resolve(&runtime, name, reference)?;
    let head = source.resolve(&runtime, name, &Ref::Latest)?;
    on_head(args, &version, &head)?;
    let header = source.header(&runtime, name)?;
    let mut cases = Vec::new();
    source.cases(&runtime, name, version.number, &Select::all(), BATCH, &mut |batch| {
        cases.extend(batch.into_iter().filter(|case| freeze::has_pending(case, args.refresh)));
        true
    })?;
    let plan = freeze::plan(&cases, args.refresh);
    let shown = format!("{name} v{} on {}", version.number, server.url);
    let base = json!({"dataset": name, "from": version.number, "server": server.url});
    let mut ran = match runtime.block_on(run_queries(settings, args, &plan, &shown, base, "committed"))? {
        Ran::Done(outcome) => return Ok(outcome),
        Ran::Answers(ran) => ran,
    };
    let changed = freeze::apply(&mut cases, &plan, &ran.answers, &settings.time);
    let changed: std::collections::HashSet<usize> = changed.into_iter().collect();
    let changed: Vec<Case> =
        cases.into_iter().enumerate().filter(|(i, _)| changed.contains(i)).map(|(_, case)| case).collect();
    // The answered cases as native JSON lines, with the dataset's header (an import's file
    // carries the header the version gets).
    let spool = tempfile::NamedTempFile::new().context("cannot make a temporary file for the freeze")?;
    {
        let out = std::io::BufWriter::new(spool.reopen().context("cannot make a temporary file for the freeze")?);
        let encoder = Encoder::new(Format::Casebook, Syntax::Jsonl, &header, Vec::new(), None, false);
        let mut writer = Writer::new(Box::new(out), &encoder, &header)?;
        writer.begin()?;
        for chunk in changed.chunks(BATCH) {
            writer.write(&encoder.encode(chunk))?;
        }
        writer.finish(None)?;
    }
    drop(changed);
    let message = commit_message(args, &ran);
    let sending = Sending {
        file: spool.path(),
        format: Format::Casebook,
        syntax: Syntax::Jsonl,
        shown: "freeze.jsonl",
        onto: Onto::Base(version.id.clone()),
        except: None,
        upsert: true,
        message: &message,
    };
    let report = match remote::send_import(settings, &runtime, server, name, &sending)? {
        Ok(report) => report,
        Err(RemoteError::Refused(409, e)) if e.code == "merge-conflict" => {
            let n = e.conflicts.len();
            let ids: Vec<String> =
                e.conflicts.iter().take(20).map(|id| format!("`{}`", casebook_model::excerpt(id))).collect();
            let more = if n > 20 { format!(" and {} more", n - 20) } else { String::new() };
            anyhow::bail!(
                "dataset `{name}` moved on while the queries ran: {} {}{more} changed on the server since v{} (its \
                 head is v{}) and got answers here; nothing was committed: freeze `{name}` again",
                if n == 1 { "case" } else { "cases" },
                ids.join(", "),
                version.number,
                e.head.map_or("?".to_owned(), |h| h.to_string())
            );
        }
        Err(err) => return Err(err.into()),
    };
    let line = match (&report.version, report.created) {
        (Some(v), true) => {
            ran.report["created"] = json!(true);
            ran.report["version"] = json!(v.clone().into_info(name));
            let mut line = super::versions::created_line(&v.clone().into_info(name));
            if report.kept > 0 {
                line.push_str(&format!(
                    "\nkept {} changed on the server since v{}",
                    crate::plural(report.kept, "case"),
                    version.number
                ));
            }
            line
        }
        (v, _) => {
            ran.report["version"] = json!(v.clone().map(|v| v.into_info(name)));
            "no change: the answers are the ones recorded".to_owned()
        }
    };
    finish(settings, &ran, &shown, &line, &format!("casebook freeze {name}"), true)
}

/// `casebook freeze FILE [-o OUT]`: the file's cases with the answers recorded, written in the
/// native format (to standard output without `-o`, the report then on standard error).
fn freeze_file(settings: &Global, args: &FreezeArgs, file: &Path) -> anyhow::Result<Outcome> {
    super::check_exists(file)?;
    if let Some(out) = &args.output {
        crate::output::may_write(settings, out, &[file], args.overwrite.overwrite)?;
    }
    let syntax = args.output.as_deref().and_then(Syntax::from_path).unwrap_or(Syntax::Jsonl);
    if !Format::Casebook.syntaxes().contains(&syntax) {
        anyhow::bail!("`freeze` writes the casebook format, which cannot be written as {}", syntax.name());
    }
    let input = super::input(file);
    let (mut cases, header) = match super::read_whole(settings, &input, &casebook_formats::ReadOptions::default())? {
        Ok(read) => read,
        Err(errors) => {
            stderr!("nothing was written: `{}` has {}", input.display, crate::plural(errors, "error"));
            return Ok(Outcome::Invalid);
        }
    };
    let plan = freeze::plan(&cases, args.refresh);
    let shown = format!("`{}`", file.display());
    let runtime = stores::runtime()?;
    let base = json!({"file": file.display().to_string()});
    let what = if args.output.is_some() { "written" } else { "written to standard output" };
    let ran = match runtime.block_on(run_queries(settings, args, &plan, &shown, base, what))? {
        Ran::Done(outcome) => return Ok(outcome),
        Ran::Answers(ran) => ran,
    };
    freeze::apply(&mut cases, &plan, &ran.answers, &settings.time);
    let encoder = Encoder::new(Format::Casebook, syntax, &header, Vec::new(), None, false);
    let (output, out) = Output::create(args.output.as_deref())?;
    let mut writer = Writer::new(out, &encoder, &header)?;
    writer.begin()?;
    writer.write(&encoder.encode(&cases))?;
    writer.finish(None)?;
    output.keep()?;
    let mut ran = ran;
    ran.report["written"] = json!(cases.len());
    let to = args.output.as_ref().map_or("standard output".to_owned(), |p| format!("`{}`", p.display()));
    let line = format!("wrote {} to {to}", crate::plural(cases.len() as u64, "case"));
    finish(settings, &ran, &shown, &line, &format!("casebook freeze {}", file.display()), args.output.is_some())
}

/// The queries run, and what came of them.
struct Answers {
    answers: Vec<Result<Value, QueryError>>,
    /// The JSON report so far.
    report: Value,
    errors: usize,
    answered: usize,
    /// Responses answered, and left unfrozen.
    frozen: usize,
    left: usize,
}

enum Ran {
    /// Nothing (more) to do: nothing to freeze, a dry run, or failures without `--keep-going`.
    Done(Outcome),
    Answers(Answers),
}

/// Runs `plan` (or says there is nothing to run, or lists it for `--dry-run`), listing each
/// failed query on stderr; with failures and without `--keep-going`, says nothing was `what`.
async fn run_queries(
    settings: &Global,
    args: &FreezeArgs,
    plan: &Plan,
    shown: &str,
    mut report: Value,
    what: &str,
) -> anyhow::Result<Ran> {
    if plan.queries.is_empty() {
        let which = if args.refresh { "no query" } else { "no query that has not been run" };
        crate::write_stdout(&if settings.json {
            report["queries"] = json!(0);
            report["created"] = json!(false);
            format!("{report}\n")
        } else {
            format!("nothing to freeze: {shown} has {which}\n")
        })?;
        return Ok(Ran::Done(Outcome::Ok));
    }
    if args.dry_run {
        crate::write_stdout(&dry_run(settings, report, shown, plan))?;
        return Ok(Ran::Done(Outcome::Ok));
    }
    let progress = Progress::counting(settings, plan.queries.len() as u64, false, "queries");
    let env = |var: &str| std::env::var(var).ok();
    let answers = freeze::run(plan, usize::from(args.concurrency), &env, || progress.add(1)).await;
    progress.finish();
    let failed: Vec<&QueryError> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    for error in &failed {
        stderr!("error: {error}");
    }
    let errors = failed.len();
    let left: usize = failed.iter().map(|e| e.others + 1).sum();
    let answered = plan.queries.len() - errors;
    let frozen = plan.responses() - left;
    for (key, value) in [
        ("queries", json!(plan.queries.len())),
        ("answered", json!(answered)),
        ("failed", json!(errors)),
        ("responses", json!(frozen)),
        ("left", json!(left)),
        ("errors", json!(failed.iter().map(|e| e.to_string()).collect::<Vec<_>>())),
        ("created", json!(false)),
        ("version", Value::Null),
    ] {
        report[key] = value;
    }
    if errors > 0 && !args.keep_going {
        if settings.json {
            crate::write_stdout(&format!("{report}\n"))?;
        } else {
            stderr!(
                "nothing was {what}: {} of {} failed; fix {} and freeze again, or keep the answers that came with \
                 `--keep-going`",
                queries(errors),
                plan.queries.len(),
                if errors == 1 { "it" } else { "them" }
            );
        }
        return Ok(Ran::Done(Outcome::Invalid));
    }
    Ok(Ran::Answers(Answers { answers, report, errors, answered, frozen, left }))
}

/// Prints the summary (`line` says what was made), on stdout or stderr; exit 1 if any query failed.
fn finish(
    settings: &Global,
    ran: &Answers,
    shown: &str,
    line: &str,
    again: &str,
    on_stdout: bool,
) -> anyhow::Result<Outcome> {
    let mut text = if settings.json {
        format!("{}\n", ran.report)
    } else {
        let responses = crate::plural(ran.frozen as u64, "response");
        format!("froze {} ({responses}) of {shown}\n{line}\n", queries(ran.answered))
    };
    if ran.errors > 0 && !settings.json {
        text.push_str(&format!(
            "{} failed: {} left unfrozen; run `{again}` again to retry\n",
            queries(ran.errors),
            crate::plural(ran.left as u64, "response")
        ));
    }
    if on_stdout {
        crate::write_stdout(&text)?;
    } else if !settings.quiet || settings.json {
        stderr!("{}", text.trim_end());
    }
    Ok(if ran.errors == 0 { Outcome::Ok } else { Outcome::Invalid })
}

/// What `--dry-run` prints: each query once, with the responses that ask it.
fn dry_run(settings: &Global, mut report: Value, shown: &str, plan: &Plan) -> String {
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
        report["queries"] = json!(queries);
        return format!("{report}\n");
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
        "would run {} for {} of {shown}\n",
        queries(plan.queries.len()),
        crate::plural(plan.responses() as u64, "response")
    ));
    text
}

/// `1 query`, `2 queries`.
fn queries(n: usize) -> String {
    if n == 1 { "1 query".to_owned() } else { format!("{n} queries") }
}
