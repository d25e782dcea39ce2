//! `casebook capture TRACES… --dataset NAME`: cases from production traces
//! (`casebook_formats::capture`), added to a dataset as a new version
//! (`casebook_store::add_captured`) or, with `--dry-run`, written to standard output in any
//! format. Problems in the traces go to stderr; a trace file with errors writes nothing.

use anyhow::Context;
use casebook_formats::capture::{self, stream::KEPT_PER_CODE};
use casebook_formats::{CsvColumns, ExportSettings, Exporter, SeedFiles};
use casebook_model::{Case, Code, DatasetHeader, Diagnostic};
use casebook_store::{CaptureOutcome, CaptureRequest, CommitOutcome, StoreError};
use serde_json::json;

use crate::Outcome;
use crate::args::CaptureArgs;
use crate::output::Output;
use crate::report::Reporter;
use crate::settings::Global;
use crate::stores;

pub fn run(settings: &Global, args: CaptureArgs) -> anyhow::Result<Outcome> {
    if args.pending {
        return pending(settings);
    }
    let select = crate::settings::selection(&args.select)?;
    if let Some(out) = args.output.as_deref().filter(|_| args.dry_run) {
        let inputs: Vec<&std::path::Path> = args.traces.iter().map(std::path::PathBuf::as_path).collect();
        crate::output::may_write(settings, out, &inputs, args.overwrite.overwrite)?;
    }
    let mut capture = capture::Capture::new();
    for path in &args.traces {
        super::check_exists(path)?;
        if path.as_os_str() == "-" {
            capture.read("<stdin>", std::io::stdin().lock()).context("cannot read standard input")?;
        } else {
            let file = fs_err::File::open(path)?;
            capture
                .read(&path.display().to_string(), std::io::BufReader::with_capacity(1 << 16, file))
                .with_context(|| format!("cannot read `{}`", path.display()))?;
        }
    }
    // Into a store without `--where`: the cases are prepared for the commit (serialised, hashed,
    // their facets made) on the threads that make them, and go to the store as they come out of
    // the sort, never parsed again.
    let prepared = !args.dry_run && select.filter.is_none();
    let prepare = |case: &Case| {
        casebook_store::prepare(case).map(|p| p.to_bytes()).map_err(|e| std::io::Error::other(e.to_string()))
    };
    let mut captured = if prepared { capture.stream_encoded(&prepare) } else { capture.stream() }
        .context("the capture's temporary files failed")?;

    let mut reporter = Reporter::new(settings, true);
    report_diagnostics(settings, &captured.diagnostics, &captured.diagnostics_left_out, &mut reporter);
    let errors = captured.diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        if !settings.quiet {
            stderr!("nothing was captured: the traces have {errors} error{}", if errors == 1 { "" } else { "s" });
        }
        return Ok(Outcome::Invalid);
    }
    if captured.cases == 0 {
        if !settings.quiet {
            stderr!(
                "nothing was captured: {} span{} hold no agent invocation with recorded messages",
                captured.spans,
                if captured.spans == 1 { "" } else { "s" }
            );
        }
        return Ok(Outcome::Invalid);
    }
    let (made, spans, invocations) = (captured.cases, captured.spans, captured.invocations);
    if prepared {
        return into_store(settings, &args, captured, (made, spans, invocations), select.limit);
    }
    let limit = select.limit.unwrap_or(u64::MAX);
    let filter = select.filter.as_ref();
    let mut taken = 0u64;
    let selected = std::iter::from_fn(move || {
        loop {
            if taken >= limit {
                return None;
            }
            match captured.next()? {
                Ok(case) if filter.is_some_and(|f| !f.matches(&case)) => continue,
                Ok(case) => {
                    taken += 1;
                    return Some(Ok(case));
                }
                Err(e) => return Some(Err(e)),
            }
        }
    });

    if args.dry_run {
        return dry_run(settings, &args, selected, made, &mut reporter);
    }
    let dataset = args.dataset.clone().context("`--dataset` names the dataset the cases go to")?;
    let request = capture_request(settings, &args, &dataset);
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let place = stores::described(&store);
    // The cases go to the commit in batches as they come out of the capture's sort.
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let (outcome, produced) = std::thread::scope(|scope| {
        let producer = scope.spawn(move || -> std::io::Result<u64> {
            let mut selected = selected;
            let mut batch = Vec::with_capacity(BATCH);
            let mut sent = 0;
            for case in &mut selected {
                batch.push(case?);
                if batch.len() == BATCH {
                    sent += batch.len() as u64;
                    if tx.blocking_send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))).is_err() {
                        return Ok(sent);
                    }
                }
            }
            sent += batch.len() as u64;
            if !batch.is_empty() {
                let _ = tx.blocking_send(batch);
            }
            Ok(sent)
        });
        let outcome = runtime.block_on(casebook_store::add_captured_batches(&store, request, rx));
        (outcome, producer.join())
    });
    runtime.block_on(store.close());
    let kept = match produced {
        Ok(Ok(kept)) => kept,
        Ok(Err(e)) => {
            return Err(anyhow::Error::new(e).context("the capture's temporary files failed: nothing was written"));
        }
        Err(_) => anyhow::bail!("the capture stopped unexpectedly: nothing was written"),
    };
    let left_out = made - kept;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(StoreError::Conflict { dataset, head, .. }) => anyhow::bail!(
            "dataset `{dataset}` moved on to v{head} while the capture was added: nothing was written; capture again"
        ),
        Err(err) => return Err(err.into()),
    };
    if kept == 0 {
        say(
            settings,
            &json!({"dataset": dataset, "created": false, "added": [], "present": [], "left_out": left_out}),
            || {
                format!(
                    "nothing added: the selection (`--where`, `--tag`, `--limit`) kept none of the {made} captured cases\n"
                )
            },
        )?;
        return Ok(Outcome::Ok);
    }
    report(settings, &dataset, (spans, invocations), left_out, &outcome)?;
    if let Some(CommitOutcome::Created(v)) = &outcome.commit {
        stores::say_wrote(settings, &format!("{}@v{}", v.dataset, v.number), &place);
    }
    Ok(Outcome::Ok)
}

/// The capture into the store, its cases prepared already (see [`run`]): the commit takes them
/// in batches as they come out of the sort.
fn into_store(
    settings: &Global,
    args: &CaptureArgs,
    mut captured: capture::stream::Cases,
    (made, spans, invocations): (u64, u64, u64),
    limit: Option<u64>,
) -> anyhow::Result<Outcome> {
    let dataset = args.dataset.clone().context("`--dataset` names the dataset the cases go to")?;
    let request = capture_request(settings, args, &dataset);
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let place = stores::described(&store);
    let limit = limit.unwrap_or(u64::MAX);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let (outcome, kept) = std::thread::scope(|scope| {
        let producer = scope.spawn(move || -> u64 {
            let mut batch = Vec::with_capacity(BATCH);
            let mut sent = 0u64;
            while sent + (batch.len() as u64) < limit {
                let Some(next) = captured.next_encoded() else { break };
                let case = next
                    .map_err(|e| {
                        casebook_store::StoreError::Corrupt(format!("the capture's temporary files failed: {e}"))
                    })
                    .and_then(|bytes| casebook_store::Prepared::from_bytes(&bytes));
                match case {
                    Ok(case) => batch.push(case),
                    Err(e) => {
                        // The commit is abandoned: nothing is written.
                        let _ = tx.blocking_send(Err(e));
                        return sent;
                    }
                }
                if batch.len() == BATCH {
                    sent += batch.len() as u64;
                    if tx.blocking_send(Ok(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))).is_err() {
                        return sent;
                    }
                }
            }
            sent += batch.len() as u64;
            if !batch.is_empty() {
                let _ = tx.blocking_send(Ok(batch));
            }
            sent
        });
        let outcome = runtime.block_on(casebook_store::add_captured_prepared(&store, request, rx));
        (outcome, producer.join())
    });
    runtime.block_on(store.close());
    let Ok(kept) = kept else { anyhow::bail!("the capture stopped unexpectedly: nothing was written") };
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(StoreError::Conflict { dataset, head, .. }) => anyhow::bail!(
            "dataset `{dataset}` moved on to v{head} while the capture was added: nothing was written; capture again"
        ),
        Err(StoreError::Corrupt(e)) if e.starts_with("the capture's temporary files failed") => {
            anyhow::bail!("{e}: nothing was written")
        }
        Err(err) => return Err(err.into()),
    };
    report(settings, &dataset, (spans, invocations), made - kept, &outcome)?;
    if let Some(CommitOutcome::Created(v)) = &outcome.commit {
        stores::say_wrote(settings, &format!("{}@v{}", v.dataset, v.number), &place);
    }
    Ok(Outcome::Ok)
}

/// The version a capture makes: who, when, and the message (`--message`, else the files).
fn capture_request(settings: &Global, args: &CaptureArgs, dataset: &str) -> CaptureRequest {
    let shown: Vec<String> = args.traces.iter().map(|p| p.display().to_string()).collect();
    CaptureRequest {
        dataset: dataset.to_owned(),
        author: settings.author.clone(),
        time: settings.time.clone(),
        message: args.message.clone().unwrap_or_else(|| format!("capture {}", shown.join(" "))),
    }
}

/// Cases sent to the store (or the writer) at a time.
const BATCH: usize = 1000;

/// Warnings shown per code on a terminal before the rest are counted; `--format json` lists all.
const SHOWN_PER_CODE: u64 = 20;

/// The problems found, on stderr: every one with `--format json`; for people, the first
/// [`SHOWN_PER_CODE`] of each code and a count of the others (traces captured with content
/// capture off give one warning per invocation).
fn report_diagnostics(
    settings: &Global,
    diagnostics: &[Diagnostic],
    left_out: &[(Code, u64)],
    reporter: &mut Reporter,
) {
    let mut shown: std::collections::HashMap<_, u64> = std::collections::HashMap::new();
    for d in diagnostics {
        let count = shown.entry(d.code).or_default();
        *count += 1;
        if settings.json || d.is_error() || *count <= SHOWN_PER_CODE {
            reporter.emit(d);
        }
    }
    for (code, n) in left_out {
        *shown.entry(*code).or_default() += n;
    }
    if settings.quiet {
        return;
    }
    let mut more: Vec<_> = shown.into_iter().filter(|(_, n)| *n > SHOWN_PER_CODE).collect();
    more.sort_by_key(|(code, _)| code.as_str());
    for (code, n) in more {
        if !settings.json {
            stderr!("… and {} more {code} warnings (`--format json` lists every one)", n - SHOWN_PER_CODE);
        }
    }
    // Beyond what a capture keeps, even `--format json` gives a count.
    for (code, n) in left_out {
        stderr!("… {n} more {code} diagnostics were found than a capture keeps ({KEPT_PER_CODE} of each code)");
    }
}

fn report(
    settings: &Global,
    dataset: &str,
    (spans, invocations): (u64, u64),
    left_out: u64,
    outcome: &CaptureOutcome,
) -> anyhow::Result<()> {
    let version = match &outcome.commit {
        Some(CommitOutcome::Created(v)) | Some(CommitOutcome::Unchanged(Some(v))) => Some(v),
        _ => None,
    };
    let value = json!({
        "dataset": dataset,
        "created": matches!(outcome.commit, Some(CommitOutcome::Created(_))),
        "version": version,
        "added": outcome.added,
        "present": outcome.present,
        "left_out": left_out,
        "spans": spans,
        "invocations": invocations,
    });
    say(settings, &value, || {
        let mut text = match version {
            Some(v) if !outcome.added.is_empty() => format!(
                "captured {} into {} v{} ({}): {} in all",
                crate::plural(outcome.added.len() as u64, "case"),
                v.dataset,
                v.number,
                &v.id[..12],
                crate::plural(v.cases, "case")
            ),
            _ => format!("nothing added: {dataset} has every captured case already"),
        };
        if !outcome.present.is_empty() {
            text.push_str(&format!("; {} already there, left as they are", outcome.present.len()));
        }
        if left_out > 0 {
            text.push_str(&format!("; {left_out} left out by the selection"));
        }
        text.push_str(&format!(
            "\n{} agent invocation{} in {} span{}; the expectations are drafts: confirm them with `casebook review`\n",
            invocations,
            if invocations == 1 { "" } else { "s" },
            spans,
            if spans == 1 { "" } else { "s" },
        ));
        text
    })
}

/// Prints the report: JSON with `--format json`, else the text.
fn say(settings: &Global, value: &serde_json::Value, text: impl FnOnce() -> String) -> anyhow::Result<()> {
    crate::write_stdout(&if settings.json { format!("{value}\n") } else { text() })?;
    Ok(())
}

fn dry_run(
    settings: &Global,
    args: &CaptureArgs,
    cases: impl Iterator<Item = std::io::Result<Case>>,
    made: u64,
    reporter: &mut Reporter,
) -> anyhow::Result<Outcome> {
    let to = args.to.unwrap_or(crate::args::FormatArg::CASEBOOK);
    let format = to.format;
    let syntax = args
        .syntax
        .or(to.syntax)
        .or_else(|| args.output.as_deref().and_then(casebook_formats::Syntax::from_path))
        .unwrap_or_else(|| format.syntax_for(None));
    if !format.syntaxes().contains(&syntax) {
        anyhow::bail!("`{format}` cannot be written as {}", syntax.name());
    }
    let export = ExportSettings {
        format,
        syntax,
        column_map: None,
        lossy: args.lossy,
        seed_files: SeedFiles::Inline,
        place: "captured cases".into(),
        confirm_drafts: args.confirm_drafts,
    };
    let header = DatasetHeader {
        name: Some(args.dataset.clone().unwrap_or_else(|| "captured".into())),
        ..DatasetHeader::default()
    };
    let failed = |e: std::io::Error| anyhow::Error::new(e).context("the capture's temporary files failed");
    // CSV names its columns first: those formats take the cases in memory (the others stream).
    let (columns, mut stream): (_, Box<dyn Iterator<Item = std::io::Result<Case>>>) = if export.needs_columns() {
        let held = cases.collect::<Result<Vec<Case>, _>>().map_err(failed)?;
        let mut columns = CsvColumns::new(&export);
        columns.add(&held);
        (columns.ordered(&header), Box::new(held.into_iter().map(Ok)))
    } else {
        (Vec::new(), Box::new(cases))
    };
    // Through a temporary file, as `convert` does: a refused case leaves standard output (or
    // the file) as it was.
    crate::output::remove_on_signals();
    let (output, out) = Output::create(args.output.as_deref())?;
    let mut exporter = Exporter::new(export, &header, columns, out, None)?;
    exporter.begin()?;
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        batch.clear();
        for case in stream.by_ref().take(BATCH) {
            batch.push(case.map_err(failed)?);
        }
        if batch.is_empty() {
            break;
        }
        let refused = exporter.cases(&batch)?;
        refused.iter().for_each(|d| reporter.emit(d));
    }
    let exported = exporter.finish()?;
    exported.diagnostics.iter().for_each(|d| reporter.emit(d));
    if exported.errors > 0 {
        if !settings.quiet && !settings.json {
            stderr!("nothing was written: {} of {made} captured cases refused", exported.cases - exported.written);
        }
        return Ok(Outcome::Invalid);
    }
    output.keep()?;
    if !settings.quiet && !settings.json {
        let to = args.output.as_ref().map_or_else(String::new, |p| format!(" to `{}`", p.display()));
        stderr!("{} of {made} captured cases written{to} (nothing was stored)", exported.written);
    }
    Ok(Outcome::Ok)
}

/// `casebook capture --pending`: the traces the OTLP receiver keeps and the recent warnings of
/// its captures, from the server `CASEBOOK_URL` names, else from the store (where a server on it
/// keeps them).
fn pending(settings: &Global) -> anyhow::Result<Outcome> {
    use casebook_server::api::{CaptureWarning, PendingList, PendingTrace};
    use casebook_store::Store;
    let runtime = stores::runtime()?;
    let list: PendingList = if settings.on_server() {
        runtime.block_on(async {
            let remote = crate::remote::Remote::connect().await?;
            let path = format!("/api/v1/projects/{}/capture/pending", crate::remote::segment(&remote.project));
            let list: PendingList = remote.get_json(&path).await?;
            Ok::<_, anyhow::Error>(list)
        })?
    } else {
        let store = stores::open(settings, &runtime)?;
        let read = runtime.block_on(async {
            Ok::<_, casebook_store::StoreError>((store.pending_traces(false).await?, store.capture_warnings().await?))
        });
        runtime.block_on(store.close());
        let (traces, warnings) = read?;
        PendingList {
            traces: traces.into_iter().map(PendingTrace::from).collect(),
            warnings: warnings.into_iter().map(CaptureWarning::from).collect(),
        }
    };
    let mut out = String::new();
    if settings.json {
        for t in &list.traces {
            out.push_str(&serde_json::to_string(t)?);
            out.push('\n');
        }
        for w in &list.warnings {
            let line =
                serde_json::json!({"warning": w.message, "dataset": w.dataset, "trace_id": w.trace_id, "at": w.at});
            out.push_str(&line.to_string());
            out.push('\n');
        }
    } else {
        if list.traces.is_empty() {
            out.push_str("no pending traces: every trace received was made into cases, or none was received\n");
        }
        for t in &list.traces {
            let state = match (&t.captured, t.root) {
                (Some(at), _) => format!("captured {at}, kept for late spans"),
                (None, true) => "root seen, waiting for quiet".to_owned(),
                (None, false) if t.spans == 0 => "log records only, waiting for their spans".to_owned(),
                (None, false) => "waiting for its root span".to_owned(),
            };
            let records = if t.records > 0 { format!(" {:>5} log records", t.records) } else { String::new() };
            out.push_str(&format!(
                "{}  {:<24} {:>5} spans{records}  first {}  last {}  {state}\n",
                t.trace_id, t.dataset, t.spans, t.first_received, t.last_received
            ));
        }
        if !list.warnings.is_empty() {
            out.push_str("\nwarnings of the receiver's captures (most recent first, per dataset):\n");
        }
        for w in &list.warnings {
            out.push_str(&format!("{}  {}  trace {}  {}\n", w.at, w.dataset, w.trace_id, w.message));
        }
    }
    crate::write_stdout(&out)?;
    Ok(Outcome::Ok)
}
