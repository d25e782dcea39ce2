//! `casebook capture TRACES… --dataset NAME`: cases from production traces
//! (`casebook_formats::capture`), added to a dataset as a new version
//! (`casebook_store::add_captured`) or, with `--dry-run`, written to standard output in any
//! format. Problems in the traces go to stderr; a trace file with errors writes nothing.

use anyhow::Context;
use casebook_formats::capture::{self, Captured};
use casebook_formats::{CsvColumns, ExportSettings, Exporter, Format, SeedFiles};
use casebook_model::{Case, DatasetHeader};
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
    let mut captured = capture.finish();

    let mut reporter = Reporter::new(settings, true);
    report_diagnostics(settings, &captured, &mut reporter);
    let errors = captured.diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        if !settings.quiet {
            stderr!("nothing was captured: the traces have {errors} error{}", if errors == 1 { "" } else { "s" });
        }
        return Ok(Outcome::Invalid);
    }
    if captured.cases.is_empty() {
        if !settings.quiet {
            stderr!(
                "nothing was captured: {} span{} hold no agent invocation with recorded messages",
                captured.spans,
                if captured.spans == 1 { "" } else { "s" }
            );
        }
        return Ok(Outcome::Invalid);
    }
    let made = captured.cases.len();
    let mut cases = std::mem::take(&mut captured.cases);
    if let Some(filter) = &select.filter {
        cases.retain(|c| filter.matches(c));
    }
    if let Some(limit) = select.limit {
        cases.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    let left_out = made - cases.len();

    if args.dry_run {
        return dry_run(settings, &args, &cases, &mut reporter);
    }
    let dataset = args.dataset.clone().context("`--dataset` names the dataset the cases go to")?;
    if cases.is_empty() {
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
    let shown: Vec<String> = args.traces.iter().map(|p| p.display().to_string()).collect();
    let request = CaptureRequest {
        dataset: dataset.clone(),
        author: settings.author.clone(),
        time: settings.time.clone(),
        message: args.message.clone().unwrap_or_else(|| format!("capture {}", shown.join(" "))),
    };
    let runtime = stores::runtime()?;
    let store = stores::open_write(settings, &runtime)?;
    let place = stores::described(&store);
    let outcome = runtime.block_on(casebook_store::add_captured(&store, request, cases));
    runtime.block_on(store.close());
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(StoreError::Conflict { dataset, head, .. }) => anyhow::bail!(
            "dataset `{dataset}` moved on to v{head} while the capture was added: nothing was written; capture again"
        ),
        Err(err) => return Err(err.into()),
    };
    report(settings, &dataset, &captured, left_out, &outcome)?;
    if let Some(CommitOutcome::Created(v)) = &outcome.commit {
        stores::say_wrote(settings, &format!("{}@v{}", v.dataset, v.number), &place);
    }
    Ok(Outcome::Ok)
}

/// Warnings shown per code on a terminal before the rest are counted; `--format json` lists all.
const SHOWN_PER_CODE: usize = 20;

/// The problems found, on stderr: every one with `--format json`; for people, the first
/// [`SHOWN_PER_CODE`] of each code and a count of the others (traces captured with content
/// capture off give one warning per invocation).
fn report_diagnostics(settings: &Global, captured: &Captured, reporter: &mut Reporter) {
    let mut shown: std::collections::HashMap<_, usize> = std::collections::HashMap::new();
    for d in &captured.diagnostics {
        let count = shown.entry(d.code).or_default();
        *count += 1;
        if settings.json || d.is_error() || *count <= SHOWN_PER_CODE {
            reporter.emit(d);
        }
    }
    if settings.quiet || settings.json {
        return;
    }
    let mut more: Vec<_> = shown.into_iter().filter(|(_, n)| *n > SHOWN_PER_CODE).collect();
    more.sort_by_key(|(code, _)| code.as_str());
    for (code, n) in more {
        stderr!("… and {} more {code} warnings (`--format json` lists every one)", n - SHOWN_PER_CODE);
    }
}

fn report(
    settings: &Global,
    dataset: &str,
    captured: &Captured,
    left_out: usize,
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
        "spans": captured.spans,
        "invocations": captured.invocations,
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
            captured.invocations,
            if captured.invocations == 1 { "" } else { "s" },
            captured.spans,
            if captured.spans == 1 { "" } else { "s" },
        ));
        text
    })
}

/// Prints the report: JSON with `--format json`, else the text.
fn say(settings: &Global, value: &serde_json::Value, text: impl FnOnce() -> String) -> anyhow::Result<()> {
    crate::write_stdout(&if settings.json { format!("{value}\n") } else { text() })?;
    Ok(())
}

fn dry_run(settings: &Global, args: &CaptureArgs, cases: &[Case], reporter: &mut Reporter) -> anyhow::Result<Outcome> {
    let format = args.to.unwrap_or(Format::Casebook);
    let syntax = args
        .syntax
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
    let columns = if export.needs_columns() {
        let mut columns = CsvColumns::new(&export);
        columns.add(cases);
        columns.ordered(&header)
    } else {
        Vec::new()
    };
    // Through a temporary file, as `convert` does: a refused case leaves standard output (or
    // the file) as it was.
    crate::output::remove_on_signals();
    let (output, out) = Output::create(args.output.as_deref())?;
    let mut exporter = Exporter::new(export, &header, columns, out, None)?;
    exporter.begin()?;
    let refused = exporter.cases(cases)?;
    refused.iter().for_each(|d| reporter.emit(d));
    let exported = exporter.finish()?;
    exported.diagnostics.iter().for_each(|d| reporter.emit(d));
    if exported.errors > 0 {
        if !settings.quiet && !settings.json {
            stderr!(
                "nothing was written: {} of {} captured cases refused",
                exported.cases - exported.written,
                cases.len()
            );
        }
        return Ok(Outcome::Invalid);
    }
    output.keep()?;
    if !settings.quiet && !settings.json {
        let to = args.output.as_ref().map_or_else(String::new, |p| format!(" to `{}`", p.display()));
        stderr!("{} of {} captured cases written{to} (nothing was stored)", exported.written, cases.len());
    }
    Ok(Outcome::Ok)
}

/// `casebook capture --pending`: the traces the OTLP receiver keeps, from the server
/// `CASEBOOK_URL` names, else from the store (where a server on it keeps them).
fn pending(settings: &Global) -> anyhow::Result<Outcome> {
    use casebook_server::api::{PendingList, PendingTrace};
    let runtime = stores::runtime()?;
    let traces: Vec<PendingTrace> = if settings.on_server() {
        runtime.block_on(async {
            let remote = crate::remote::Remote::connect().await?;
            let path = format!("/api/v1/projects/{}/capture/pending", crate::remote::segment(&remote.project));
            let list: PendingList = remote.get_json(&path).await?;
            Ok::<_, anyhow::Error>(list.traces)
        })?
    } else {
        let store = stores::open(settings, &runtime)?;
        let traces = runtime.block_on(store.pending_traces(false));
        runtime.block_on(store.close());
        traces?.into_iter().map(PendingTrace::from).collect()
    };
    let mut out = String::new();
    if settings.json {
        for t in &traces {
            out.push_str(&serde_json::to_string(t)?);
            out.push('\n');
        }
    } else if traces.is_empty() {
        out.push_str("no pending traces: every trace received was made into cases, or none was received\n");
    } else {
        for t in &traces {
            let state = match (&t.captured, t.root) {
                (Some(at), _) => format!("captured {at}, kept for late spans"),
                (None, true) => "root seen, waiting for quiet".to_owned(),
                (None, false) => "waiting for its root span".to_owned(),
            };
            out.push_str(&format!(
                "{}  {:<24} {:>5} spans  first {}  last {}  {state}\n",
                t.trace_id, t.dataset, t.spans, t.first_received, t.last_received
            ));
        }
    }
    crate::write_stdout(&out)?;
    Ok(Outcome::Ok)
}
