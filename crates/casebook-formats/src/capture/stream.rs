//! How a capture holds its spans and makes its cases in bounded memory and linear time:
//!
//! 1. spans are kept by trace ([`Spans`]: partitions by a hash of the trace id, in memory up to
//!    [`SPANS_IN_MEMORY`] bytes, then in chunks of a temporary file);
//! 2. one partition at a time, spans met twice are dropped, grouped by trace and made into
//!    invocations; an invocation without a [`super::join_key`] becomes its case at once, one
//!    with a key is kept (its spans) in partitions by a hash of the key;
//! 3. one such partition at a time, the invocations of each key are taken in the order they
//!    started and made into cases, each joined to the earlier ones of its conversation;
//! 4. the cases are sorted by (start, trace id, span id) through a [`Sorter`] (runs in a
//!    temporary file beyond [`CASES_IN_MEMORY`] bytes) and come out one at a time ([`Cases`]).
//!
//! Diagnostics are bounded too: [`Kept`] keeps the first [`KEPT_PER_CODE`] of each code (those
//! of the reading in the order met, then those of the invocations in the order they started)
//! and counts the others.

use std::collections::HashMap;
use std::io;

use casebook_model::{Case, Code, Diagnostic};
use serde::{Deserialize, Serialize};

use super::logs::Record;
use super::otlp::Span;
use super::{FastMap, FastSet};
use crate::spill::{Partitions, Sorted, Sorter};

/// Bytes of spans (as JSON) held in memory before they go to a temporary file.
pub const SPANS_IN_MEMORY: usize = 48 << 20;
/// Bytes of cases (as JSON) sorted in memory before they go to a temporary file as a run.
pub const CASES_IN_MEMORY: usize = 48 << 20;
/// Partitions of spans by trace (and of invocations by conversation): a partition is what is
/// held in memory at once, a 512th of the spans.
const PARTITIONS: usize = 512;
/// Diagnostics kept of each code; the others are counted.
pub const KEPT_PER_CODE: usize = 10_000;

/// The order of the cases: when the invocation started, its trace id and span id.
type Key = (u64, String, String);

/// How each case is kept for the sort, on the threads that make the cases: its JSON by
/// default ([`json`]); a caller that wants the cases in another form (a store's prepared
/// rows) gives its own and reads them back with [`Cases::next_encoded`].
pub type Encode<'a> = &'a (dyn Fn(&Case) -> io::Result<Vec<u8>> + Sync);

/// The default [`Encode`]: the case's JSON, which [`Cases`] parses back.
pub fn json(case: &Case) -> io::Result<Vec<u8>> {
    serde_json::to_vec(case).map_err(io::Error::other)
}

/// A capture's spans, kept by trace (see the module's comment).
pub struct Spans {
    parts: Partitions<Span>,
    failed: Option<io::Error>,
    memory: usize,
    /// Partitions worked on at once.
    pub(super) workers: usize,
}

impl Default for Spans {
    fn default() -> Self {
        Self::with_memory(SPANS_IN_MEMORY)
    }
}

impl Spans {
    pub(super) fn with_memory(bytes: usize) -> Self {
        Self { parts: Partitions::new(PARTITIONS, bytes), failed: None, memory: bytes, workers: workers() }
    }
}

impl Extend<Span> for Spans {
    fn extend<T: IntoIterator<Item = Span>>(&mut self, spans: T) {
        for span in spans {
            if self.failed.is_some() {
                return;
            }
            let part = self.parts.of(&span.trace_id);
            if let Err(e) = self.parts.push(part, &span) {
                self.failed = Some(e);
            }
        }
    }
}

/// Diagnostics, the first [`KEPT_PER_CODE`] of each code (see the module's comment).
#[derive(Default)]
pub struct Kept {
    read: Vec<Diagnostic>,
    /// Those of invocations, by code, with the invocation's key and their order within it.
    found: HashMap<Code, Vec<(Key, u64, Diagnostic)>>,
    counts: HashMap<Code, u64>,
    order: u64,
}

impl Extend<Diagnostic> for Kept {
    fn extend<T: IntoIterator<Item = Diagnostic>>(&mut self, diags: T) {
        for d in diags {
            let count = self.counts.entry(d.code).or_default();
            *count += 1;
            if *count <= KEPT_PER_CODE as u64 {
                self.read.push(d);
            }
        }
    }
}

impl Kept {
    /// A diagnostic about the invocation of `key`.
    fn found(&mut self, key: &Key, d: Diagnostic) {
        *self.counts.entry(d.code).or_default() += 1;
        self.order += 1;
        let list = self.found.entry(d.code).or_default();
        list.push((key.clone(), self.order, d));
        if list.len() >= 2 * KEPT_PER_CODE {
            keep_first(list);
        }
    }

    fn has_errors(&self) -> bool {
        self.read.iter().any(Diagnostic::is_error)
    }

    /// The diagnostics kept, in order, and how many of each code were left out.
    fn into_parts(self) -> (Vec<Diagnostic>, Vec<(Code, u64)>) {
        let Kept { mut read, found, counts, .. } = self;
        let mut found: Vec<(Key, u64, Diagnostic)> = found
            .into_values()
            .flat_map(|mut list| {
                keep_first(&mut list);
                list
            })
            .collect();
        found.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        read.extend(found.into_iter().map(|(_, _, d)| d));
        let mut kept: HashMap<Code, u64> = HashMap::new();
        read.iter().for_each(|d| *kept.entry(d.code).or_default() += 1);
        let mut left_out: Vec<(Code, u64)> = counts
            .into_iter()
            .map(|(code, n)| (code, n - kept.get(&code).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        left_out.sort_by_key(|(code, _)| code.as_str());
        (read, left_out)
    }
}

fn keep_first(list: &mut Vec<(Key, u64, Diagnostic)>) {
    list.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    list.truncate(KEPT_PER_CODE);
}

/// An error of the temporary files as a diagnostic, for [`super::Capture::finish`], which
/// returns no `Result`.
pub fn failure(e: &io::Error) -> Diagnostic {
    Diagnostic {
        severity: casebook_model::Severity::Error,
        code: Code::InvalidValue,
        message: format!("the capture's temporary files failed: {e}"),
        file: String::new(),
        line: 0,
        column: 0,
        pointer: None,
        path: None,
        hint: Some("check the space left in the temporary folder (`TMPDIR`)".into()),
        case: None,
        line_offset: None,
    }
}

/// An invocation kept for its conversation: its spans (in the order they were read) and
/// which of them is the invocation.
#[derive(Serialize, Deserialize)]
struct Joined {
    key: String,
    root: usize,
    spans: Vec<Span>,
}

/// The cases of a capture, in the order the invocations started (see [`super::Capture::stream`]).
pub struct Cases {
    /// Errors and warnings: the first [`KEPT_PER_CODE`] of each code.
    pub diagnostics: Vec<Diagnostic>,
    /// How many more diagnostics of each code were found than kept.
    pub diagnostics_left_out: Vec<(Code, u64)>,
    /// Spans read (each once).
    pub spans: u64,
    /// Agent invocations found (some make no case: see the diagnostics).
    pub invocations: u64,
    /// Cases to come.
    pub cases: u64,
    sorted: Option<Sorted<Key, Case>>,
}

impl Cases {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

impl Cases {
    /// The next case as its [`Encode`] made it (its JSON, unless the capture was streamed with
    /// another), without parsing it.
    pub fn next_encoded(&mut self) -> Option<io::Result<Vec<u8>>> {
        self.sorted.as_mut()?.next_bytes().map(|next| next.map(|(_, bytes)| bytes)).transpose()
    }
}

/// The cases, for a capture streamed with the default [`Encode`] ([`json`]).
impl Iterator for Cases {
    type Item = io::Result<Case>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.sorted.as_mut()?.next()?.map(|(_, case)| case))
    }
}

/// Steps 2 to 4 of the module's comment; the GenAI events of log records (`records`, held in
/// memory: log files carry the events, not the bulk of a capture) join their spans as each
/// partition is taken. Partitions are worked on by several threads at a time ([`workers`]), their
/// findings taken in partition order, so what comes out is what one thread would make.
pub(super) fn cases(spans: Spans, records: Vec<Record>, mut kept: Kept, encode: Encode) -> io::Result<Cases> {
    let Spans { mut parts, failed, memory, workers } = spans;
    if let Some(e) = failed {
        return Err(e);
    }
    let mut out = Cases {
        diagnostics: Vec::new(),
        diagnostics_left_out: Vec::new(),
        spans: 0,
        invocations: 0,
        cases: 0,
        sorted: None,
    };
    let mut sorter: Sorter<Key, Case> = Sorter::new(memory.min(CASES_IN_MEMORY));
    let mut joined: Partitions<Joined> = Partitions::new(PARTITIONS, memory / 2);
    let errors = kept.has_errors();
    // By partition of their trace, each with its place in the order read.
    let mut records_of: Vec<Vec<(usize, Record)>> = (0..parts.count()).map(|_| Vec::new()).collect();
    for (i, record) in records.into_iter().enumerate() {
        records_of[parts.of(&record.trace_id)].push((i, record));
    }
    // Records of traces not read.
    let mut left: Vec<(usize, Record)> = Vec::new();
    let mut part = 0;
    while part < parts.count() {
        let batch = part..parts.count().min(part + workers);
        let mut taken = Vec::with_capacity(batch.len());
        for p in batch.clone() {
            taken.push((parts.take_bytes(p)?, std::mem::take(&mut records_of[p])));
        }
        for found in in_parallel(taken, |(bytes, records)| spans_found(&bytes, records, errors, encode)) {
            let found = found?;
            out.spans += found.spans;
            out.invocations += found.invocations;
            kept.extend(found.read);
            left.extend(found.left);
            merge(&mut out, &mut kept, &mut sorter, found.cases)?;
            for one in found.joined {
                let p = joined.of(&one.key);
                joined.push(p, &one)?;
            }
        }
        part = batch.end;
    }
    if !errors && !left.is_empty() {
        // Records of traces not read: one warning per span, in the order they were read.
        left.sort_by_key(|(i, _)| *i);
        let mut diags = Vec::new();
        super::attach_records(&mut [], left.into_iter().map(|(_, r)| r).collect(), &mut diags);
        kept.extend(diags);
    }
    let mut part = 0;
    while part < joined.count() {
        let batch = part..joined.count().min(part + workers);
        let mut taken = Vec::with_capacity(batch.len());
        for p in batch.clone() {
            taken.push(joined.take_bytes(p)?);
        }
        for found in in_parallel(taken, |bytes| conversations_found(&bytes, encode)) {
            let (merged, made) = found?;
            // The calls of one question are one invocation.
            out.invocations -= merged;
            merge(&mut out, &mut kept, &mut sorter, made)?;
        }
        part = batch.end;
    }
    (out.diagnostics, out.diagnostics_left_out) = kept.into_parts();
    out.sorted = Some(sorter.finish()?);
    Ok(out)
}

/// Threads that work on partitions at once: the cores there are, at most 4.
fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

/// `work` on each of `items`, each on a thread of its own but the last (on this one); the
/// results in the order of `items`.
fn in_parallel<I: Send, R: Send>(items: Vec<I>, work: impl Fn(I) -> R + Sync) -> Vec<R> {
    if items.len() <= 1 {
        return items.into_iter().map(work).collect();
    }
    std::thread::scope(|scope| {
        let mut items = items;
        let last = items.pop();
        let work = &work;
        let handles: Vec<_> = items.into_iter().map(|item| scope.spawn(move || work(item))).collect();
        let last = last.map(work);
        let mut results: Vec<R> =
            handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect();
        results.extend(last);
        results
    })
}

/// An invocation's case (as its [`Encode`] made it, for the [`Sorter`]) or the diagnostics that
/// stopped it.
struct Made {
    key: Key,
    case: Option<Vec<u8>>,
    diags: Vec<Diagnostic>,
}

/// What one partition of spans gave (step 2).
struct SpansFound {
    spans: u64,
    invocations: u64,
    /// Diagnostics of the reading (of log records joining their spans).
    read: Vec<Diagnostic>,
    /// Log records whose trace is not among the spans.
    left: Vec<(usize, Record)>,
    cases: Vec<Made>,
    joined: Vec<Joined>,
}

/// Takes what one partition made, in order: its diagnostics and its cases.
fn merge(out: &mut Cases, kept: &mut Kept, sorter: &mut Sorter<Key, Case>, made: Vec<Made>) -> io::Result<()> {
    for Made { key, case, diags } in made {
        diags.into_iter().for_each(|d| kept.found(&key, d));
        if let Some(case) = case {
            sorter.push_json(key, case)?;
            out.cases += 1;
        }
    }
    Ok(())
}

fn made(key: Key, case: Option<Case>, diags: Vec<Diagnostic>, encode: Encode) -> io::Result<Made> {
    let case = case.map(|case| encode(&case)).transpose()?;
    Ok(Made { key, case, diags })
}

/// Step 2 on one partition of spans (its bytes as [`Partitions::take_bytes`] gave them), with
/// the log records of its traces.
fn spans_found(bytes: &[u8], records: Vec<(usize, Record)>, errors: bool, encode: Encode) -> io::Result<SpansFound> {
    let mut spans = Partitions::<Span>::parse(bytes)?;
    let mut seen = FastSet::default();
    spans.retain(|s| seen.insert((s.trace_id.clone(), s.span_id.clone())));
    drop(seen);
    let mut found = SpansFound {
        spans: spans.len() as u64,
        invocations: 0,
        read: Vec::new(),
        left: Vec::new(),
        cases: Vec::new(),
        joined: Vec::new(),
    };
    if errors {
        found.left = records;
        return Ok(found);
    }
    if !records.is_empty() {
        let traces: FastSet<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
        // Records come in the order they were read, whatever the partition.
        let (these, left): (Vec<_>, Vec<_>) =
            records.into_iter().partition(|(_, r)| traces.contains(r.trace_id.as_str()));
        drop(traces);
        found.left = left;
        super::attach_records(&mut spans, these.into_iter().map(|(_, r)| r).collect(), &mut found.read);
    }
    let mut traces: FastMap<&str, Vec<usize>> = FastMap::default();
    for (i, span) in spans.iter().enumerate() {
        traces.entry(&span.trace_id).or_default().push(i);
    }
    let mut invocations: Vec<(usize, Vec<usize>)> = Vec::new();
    for members in traces.values() {
        invocations.extend(super::trace_invocations(&spans, members));
    }
    drop(traces);
    found.invocations = invocations.len() as u64;
    for (root, mut members) in invocations {
        match super::join_key(&spans, root, &members) {
            None => {
                let mut diags = Vec::new();
                let case = super::invocation_case(&spans, root, &members, &mut FastMap::default(), &mut diags);
                found.cases.push(made(key_of(&spans[root]), case, diags, encode)?);
            }
            Some(key) => {
                // In the order read, so spans that started together are taken as before.
                members.sort_unstable();
                let root = members.iter().position(|&i| i == root).unwrap_or(0);
                let kept_spans = members.iter().map(|&i| spans[i].clone()).collect();
                found.joined.push(Joined { key, root, spans: kept_spans });
            }
        }
    }
    Ok(found)
}

/// Step 3 on one partition of invocations kept for their conversation: how many model calls
/// were merged into the invocation of their question, and the cases.
fn conversations_found(bytes: &[u8], encode: Encode) -> io::Result<(u64, Vec<Made>)> {
    let list = Partitions::<Joined>::parse(bytes)?;
    let mut merged = 0u64;
    let mut out = Vec::new();
    let mut by_key: FastMap<&str, Vec<usize>> = FastMap::default();
    for (i, one) in list.iter().enumerate() {
        by_key.entry(&one.key).or_default().push(i);
    }
    let mut conversations = FastMap::default();
    for (key, mut members) in by_key {
        members.sort_by_cached_key(|&i| key_of(&list[i].spans[list[i].root]));
        if key.starts_with(super::CALLS) {
            // The model calls of one question, each in a trace of its own: joined first.
            let mut spans: Vec<Span> = Vec::new();
            let mut invocations = Vec::new();
            for &i in &members {
                let one = &list[i];
                let base = spans.len();
                spans.extend(one.spans.iter().cloned());
                invocations.push((base + one.root, (base..spans.len()).collect::<Vec<usize>>()));
            }
            let calls = invocations.len();
            let joined = super::join_model_calls(&spans, invocations);
            merged += (calls - joined.len()) as u64;
            for (root, members) in joined {
                let mut diags = Vec::new();
                let case = super::invocation_case(&spans, root, &members, &mut conversations, &mut diags);
                out.push(made(key_of(&spans[root]), case, diags, encode)?);
            }
            continue;
        }
        for i in members {
            let one = &list[i];
            let all: Vec<usize> = (0..one.spans.len()).collect();
            let mut diags = Vec::new();
            let case = super::invocation_case(&one.spans, one.root, &all, &mut conversations, &mut diags);
            out.push(made(key_of(&one.spans[one.root]), case, diags, encode)?);
        }
    }
    Ok((merged, out))
}

fn key_of(span: &Span) -> Key {
    (span.start, span.trace_id.clone(), span.span_id.clone())
}
