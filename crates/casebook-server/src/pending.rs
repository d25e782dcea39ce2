//! Traces received by the OTLP receiver ([`crate::routes`]' `otlp`) become cases here, once
//! complete: a background task of the server looks at the kept traces every tick and
//!
//! - makes the cases of a trace whose root span (a span without a parent: exporters send only
//!   ended spans) has come and no span has come for [`crate::Limits::capture_quiet`]; or of one
//!   without a root after [`crate::Limits::capture_max_wait`] since its first span (with a
//!   warning: an abandoned partial trace is still captured); a trace of which only GenAI log
//!   records came is dropped then, with a warning;
//! - rebuilds the cases of a captured trace that got more spans since (quiet again), from all its
//!   spans: a case still exactly as captured (same content id) is replaced, one reviewed or
//!   edited since is left and the event logged ([`casebook_store::recapture`]);
//! - forgets a captured trace's spans once no span has come for `capture_max_wait` after it
//!   was captured.
//!
//! The GenAI log records kept with a trace's spans are attached to them when its cases are made
//! (as `casebook capture traces.json logs.json` attaches them), and a record that comes later
//! rebuilds them as a late span does. The warnings of these captures (the capture's own
//! diagnostics, a trace without its root, records without their trace) are kept in the store per
//! dataset ([`Store::capture_warn`]), so `casebook capture --pending` shows them, and logged.
//!
//! The spans are in the store, so a restart loses none: the next server's task carries on.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use casebook_formats::capture::logs::Record;
use casebook_formats::capture::{Capture, Span};
use casebook_model::Diagnostic;
use casebook_store::{AnyStore, CaptureRequest, PendingTrace, Store, StoreError};

use crate::Limits;

/// `Retry-After` of a 503 for a full backlog: about a tick or two of the task.
pub(crate) const BACKLOG_RETRY_SECONDS: u32 = 5;

/// The author of versions the receiver makes.
const AUTHOR: &str = "casebook otlp receiver";

/// What the receiving requests share: how many are received at once, and how many spans wait.
pub(crate) struct Receiver {
    pub(crate) receiving: Arc<tokio::sync::Semaphore>,
    /// Spans kept, as last counted by the task, plus those received since.
    backlog: AtomicU64,
}

impl Receiver {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            receiving: Arc::new(tokio::sync::Semaphore::new(limits.max_receiving.max(1))),
            backlog: AtomicU64::new(0),
        }
    }

    pub(crate) fn backlog(&self) -> u64 {
        self.backlog.load(Ordering::Relaxed)
    }

    pub(crate) fn received(&self, spans: u64) {
        self.backlog.fetch_add(spans, Ordering::Relaxed);
    }
}

/// Unix milliseconds now, by the server's clock.
pub(crate) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Runs the task: a tick of a fifth of the quiet period (between 50 ms
/// and 1 s). A failed tick is logged and tried again at the next.
/// It ends when the application is dropped (its state holds the only strong reference to
/// `receiver`), so a stopped server's task does not go on beside the next one's.
pub(crate) async fn run(store: AnyStore, limits: Arc<Limits>, receiver: std::sync::Weak<Receiver>) {
    let tick = (limits.capture_quiet / 5).clamp(Duration::from_millis(50), Duration::from_secs(1));
    loop {
        let Some(receiver) = receiver.upgrade() else { return };
        if let Err(e) = step(&store, &limits, &receiver).await {
            tracing::error!(error = %e, "the pending traces could not be captured; trying again");
        }
        drop(receiver);
        tokio::time::sleep(tick).await;
    }
}

/// One look at every kept trace.
pub(crate) async fn step(store: &AnyStore, limits: &Limits, receiver: &Receiver) -> Result<(), StoreError> {
    receiver.backlog.store(store.pending_count().await?, Ordering::Relaxed);
    let now = now_ms();
    let quiet = limits.capture_quiet.as_millis() as i64;
    let max_wait = limits.capture_max_wait.as_millis() as i64;
    for trace in store.pending_traces(true).await? {
        let project = store.in_project(&trace.project);
        match trace.captured {
            None => {
                let complete = trace.root && now - trace.last_received >= quiet;
                let abandoned = now - trace.first_received >= max_wait;
                if abandoned && trace.spans == 0 {
                    let message = format!(
                        "{} GenAI log record(s) of trace {} were dropped: no span of the trace came within the maximum wait (`--capture-max-wait`); export the traces to the same server as the logs",
                        trace.records, trace.trace_id
                    );
                    tracing::warn!(trace = %trace.trace_id, project = %trace.project, records = trace.records, "{message}");
                    project.capture_warn(&trace.dataset, &trace.trace_id, now, &message).await?;
                    project.forget_trace(&trace.trace_id).await?;
                } else if complete || abandoned {
                    let mut warnings = Vec::new();
                    if !complete {
                        let message = format!(
                            "trace {} was captured without its root span after the maximum wait (`--capture-max-wait`): its cases may be partial",
                            trace.trace_id
                        );
                        tracing::warn!(trace = %trace.trace_id, project = %trace.project, spans = trace.spans, "{message}");
                        warnings.push(message);
                    }
                    make_cases(&project, &trace, now, warnings).await?;
                }
            }
            Some(captured) if trace.last_received > captured => {
                if now - trace.last_received >= quiet {
                    make_cases(&project, &trace, now, Vec::new()).await?;
                }
            }
            Some(captured) => {
                if now - captured >= max_wait {
                    project.forget_trace(&trace.trace_id).await?;
                }
            }
        }
    }
    Ok(())
}

/// Makes (again) the cases of one trace from all its kept spans, and records them; the trace's
/// kept warnings become this capture's (`warnings`, then its diagnostics): one that a capture
/// made with more spans no longer has is not listed as current.
async fn make_cases(store: &AnyStore, trace: &PendingTrace, now: i64, warnings: Vec<String>) -> Result<(), StoreError> {
    let kept = store.pending_spans(&trace.trace_id).await?;
    let mut capture = Capture::new();
    let corrupt = |what: &str, e: serde_json::Error| {
        StoreError::Corrupt(format!("a kept {what} of trace {} is not one: {e}", trace.trace_id))
    };
    for row in &kept {
        if row.record {
            capture.push_record(serde_json::from_str::<Record>(&row.json).map_err(|e| corrupt("log record", e))?);
        } else {
            capture.push(serde_json::from_str::<Span>(&row.json).map_err(|e| corrupt("span", e))?);
        }
    }
    let captured = tokio::task::spawn_blocking(move || capture.finish())
        .await
        .map_err(|e| StoreError::Corrupt(format!("making the cases of a trace failed: {e}")))?;
    let warned = captured.diagnostics.len();
    let before: HashMap<String, String> =
        trace.cases.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
    let mut recorded = before.clone();
    if !captured.cases.is_empty() {
        let request = CaptureRequest {
            dataset: trace.dataset.clone(),
            author: AUTHOR.into(),
            time: crate::routes::now(),
            message: format!("capture trace {} (OTLP)", trace.trace_id),
        };
        let done = casebook_store::recapture(store, request, captured.cases, &before).await;
        let done = match done {
            Ok(done) => done,
            // Someone committed meanwhile: the next tick tries again on the new head.
            Err(StoreError::Conflict { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        for id in &done.kept {
            if before.contains_key(id) {
                tracing::info!(trace = %trace.trace_id, case = %id, dataset = %trace.dataset,
                    "the trace got more spans, but its case was changed since it was captured: left as it is");
            }
        }
        tracing::info!(trace = %trace.trace_id, project = %trace.project, dataset = %trace.dataset,
            added = done.added.len(), replaced = done.replaced.len(), spans = trace.spans, warnings = warned,
            "captured a trace");
        for (id, cid) in done.content_ids {
            // A case left as changed keeps its old record: it is never replaced later either.
            if !done.kept.contains(&id) || !before.contains_key(&id) {
                recorded.insert(id, cid);
            }
        }
    } else {
        tracing::info!(trace = %trace.trace_id, project = %trace.project, spans = trace.spans, warnings = warned,
            "a trace with no agent invocation with recorded messages: no case (its spans are kept for late ones)");
    }
    // Kept once the cases are (a conflict above tries again at the next tick, warning again),
    // in place of those of the trace's earlier capture.
    store.capture_warnings_clear(&trace.trace_id).await?;
    for message in warnings.into_iter().chain(captured.diagnostics.iter().map(warning)) {
        store.capture_warn(&trace.dataset, &trace.trace_id, now, &message).await?;
    }
    let cases = serde_json::to_string(&recorded).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    store.trace_captured(&trace.trace_id, now.max(trace.last_received), &cases).await
}

/// A capture's diagnostic as a kept warning: its code, message and place in the trace, and its
/// hint.
fn warning(d: &Diagnostic) -> String {
    let at = d.pointer.as_deref().filter(|p| !p.is_empty()).map(|p| format!(" (at {p})")).unwrap_or_default();
    let hint = d.hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default();
    format!("{}: {}{at}{hint}", d.code, d.message)
}
