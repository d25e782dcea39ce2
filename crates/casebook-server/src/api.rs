//! The shapes the API answers with, as the OpenAPI document describes them. Cases travel as the
//! native casebook JSON, byte for byte as stored (`casebook schema` prints their JSON Schema).

use casebook_store::{DatasetInfo, Revision, VersionInfo};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Project {
    pub name: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Dataset {
    pub name: String,
    /// The head version number; 0 before the first commit.
    pub head: u64,
    /// Cases in the head.
    pub cases: u64,
    /// The dataset's header: description, labels, metadata, provenance.
    #[schema(value_type = Object)]
    pub header: serde_json::Value,
}

impl From<DatasetInfo> for Dataset {
    fn from(d: DatasetInfo) -> Self {
        Self { name: d.name, head: d.head, cases: d.cases, header: serde_json::to_value(&d.header).unwrap_or_default() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Version {
    pub number: u64,
    /// The version's content id.
    pub id: String,
    pub parent: Option<u64>,
    pub author: String,
    /// RFC 3339.
    pub time: String,
    pub message: String,
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    pub cases: u64,
}

impl Version {
    /// The version as the store describes it, `dataset` being the dataset it belongs to (which
    /// the API's version does not repeat): what a client of the API reads it back into.
    pub fn into_info(self, dataset: &str) -> VersionInfo {
        VersionInfo {
            dataset: dataset.to_owned(),
            number: self.number,
            id: self.id,
            parent: self.parent,
            author: self.author,
            time: self.time,
            message: self.message,
            added: self.added,
            removed: self.removed,
            modified: self.modified,
            cases: self.cases,
        }
    }
}

impl From<VersionInfo> for Version {
    fn from(v: VersionInfo) -> Self {
        Self {
            number: v.number,
            id: v.id,
            parent: v.parent,
            author: crate::routes::shown_author(&v.author),
            time: v.time,
            message: v.message,
            added: v.added,
            removed: v.removed,
            modified: v.modified,
            cases: v.cases,
        }
    }
}

/// A dataset's versions, oldest first, and what else happened to it (tags, header edits).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Log {
    pub versions: Vec<Version>,
    pub events: Vec<Event>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Event {
    pub time: String,
    pub author: String,
    /// `tag` or `header`.
    pub kind: String,
    pub detail: String,
}

/// A page of the cases of one version.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CasePage {
    /// The version the page is of (a walk stays on it).
    pub version: u64,
    /// The cases, in the version's order, as native casebook JSON.
    #[schema(value_type = Vec<Object>)]
    pub cases: Vec<Box<serde_json::value::RawValue>>,
    /// Each case's content id, in the same order: given when asked for (`content_ids=true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_ids: Option<Vec<String>>,
    /// Pass as `cursor` for the next page; absent after the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Pass as `cursor` for the page before; absent on the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_cursor: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Count {
    pub version: u64,
    pub count: u64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct History {
    pub case: String,
    pub revisions: Vec<RevisionOut>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RevisionOut {
    pub from_version: u64,
    /// The first version without this content; absent while it is in the head.
    pub to_version: Option<u64>,
    pub content_id: String,
}

impl From<Revision> for RevisionOut {
    fn from(r: Revision) -> Self {
        Self { from_version: r.from_version, to_version: r.to_version, content_id: r.content_id }
    }
}

/// What changed from one version to another.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DiffOut {
    pub from: u64,
    pub to: u64,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Each modified case with its changed fields (JSON Pointers, old and new values).
    #[schema(value_type = Vec<Object>)]
    pub modified: Vec<serde_json::Value>,
    /// Same content, new place in the order.
    pub moved: Vec<String>,
    /// How many cases each list holds: on the whole diff and on the first page of a paged one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totals: Option<DiffTotalsOut>,
    /// A paged diff (`limit` or `cursor` given): the cursor of each list's next page, for the
    /// lists that go on. Each cursor pages its list alone.
    #[serde(default, skip_serializing_if = "DiffNext::is_empty")]
    pub next: DiffNext,
}

/// How many cases each list of a diff holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DiffTotalsOut {
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    pub moved: u64,
}

impl From<casebook_store::DiffTotals> for DiffTotalsOut {
    fn from(t: casebook_store::DiffTotals) -> Self {
        Self { added: t.added, removed: t.removed, modified: t.modified, moved: t.moved }
    }
}

/// The cursor of the next page of each list of a paged diff (absent: the list ends here).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DiffNext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<String>,
}

impl DiffNext {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The cursor slot of one list.
    pub fn of(&mut self, list: casebook_store::DiffList) -> &mut Option<String> {
        match list {
            casebook_store::DiffList::Added => &mut self.added,
            casebook_store::DiffList::Removed => &mut self.removed,
            casebook_store::DiffList::Modified => &mut self.modified,
            casebook_store::DiffList::Moved => &mut self.moved,
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Tag {
    pub name: String,
    pub version: u64,
    /// The tag already named this version: nothing changed and nothing was logged (absent when
    /// false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TagRequest {
    /// The version to name: `v3`, `latest`, a tag or a content-id prefix.
    pub version: String,
}

/// A stored experiment run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Run {
    pub id: String,
    pub experiment: String,
    pub started: String,
    pub finished: Option<String>,
    /// The run's settings as the runner recorded them (dataset version, scenarios, graders).
    #[schema(value_type = Object)]
    pub meta: serde_json::Value,
    /// Absent while running or when the run was stopped.
    #[schema(value_type = Object)]
    pub summary: Option<serde_json::Value>,
}

impl TryFrom<casebook_store::RunRow> for Run {
    type Error = serde_json::Error;
    fn try_from(r: casebook_store::RunRow) -> Result<Self, Self::Error> {
        Ok(Self {
            id: r.id,
            experiment: r.experiment,
            started: r.started,
            finished: r.finished,
            meta: serde_json::from_str(&r.meta)?,
            summary: r.summary.as_deref().map(serde_json::from_str).transpose()?,
        })
    }
}

/// A run to begin (`POST …/runs`): its id (unique in the store), its settings and start.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NewRun {
    pub id: String,
    pub experiment: String,
    /// RFC 3339.
    pub started: String,
    /// The run's settings, a JSON object kept as sent (dataset version, scenarios, graders).
    #[schema(value_type = Object)]
    pub meta: Box<serde_json::value::RawValue>,
}

/// One finished result of a run (`POST …/runs/{run}/results` takes a list of them).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ResultIn {
    /// The result's place in the run; a place sent again replaces the result there.
    pub seq: u64,
    /// The runner's result, a JSON object kept as sent.
    #[schema(value_type = Object)]
    pub result: Box<serde_json::value::RawValue>,
    /// The agent's output to keep under its run hash, for later runs to reuse; null when the
    /// output was read from the server or the agent failed.
    pub output: Option<OutputIn>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OutputIn {
    /// The run hash (64 hexadecimal digits).
    pub hash: String,
    /// The agent's output, JSON kept as sent.
    #[schema(value_type = Object)]
    pub output: Box<serde_json::value::RawValue>,
}

/// The end of a run (`PUT …/runs/{run}/finish`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FinishRun {
    /// RFC 3339.
    pub finished: String,
    /// The run's summary, a JSON object kept as sent. Absent: the server counts it from the
    /// run's stored results and settings (`meta`), as `casebook results` would (what clients
    /// that log results from their own loop, the TypeScript and Python ones, do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub summary: Option<Box<serde_json::value::RawValue>>,
    /// The pass rate the run must reach (0..1) when the server counts the summary; 1 when
    /// absent. Ignored with `summary`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
}

/// A page of a run's results (`GET …/runs/{run}/results?limit=N`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ResultPage {
    /// The results, in the run's order, as the runner recorded them.
    #[schema(value_type = Vec<Object>)]
    pub results: Vec<Box<serde_json::value::RawValue>>,
    /// Pass as `cursor` for the next page; absent after the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Run hashes whose stored outputs are wanted (`POST …/outputs`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OutputsRequest {
    pub hashes: Vec<String>,
}

/// What an import did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ImportReport {
    /// Whether a version was made (false: the content is the head's).
    pub created: bool,
    /// The version made, or the head that already had this content.
    pub version: Option<Version>,
    /// With `base`: the cases changed on the server since the base (and not in the file) that
    /// were kept as the head has them.
    #[serde(default)]
    pub kept: u64,
    /// Those cases, by id, with the content id the file holds for each (`null`: the file lacks
    /// it): the file is the version made except for these. Its next push sends them as
    /// `base_except`, with that version as `base`.
    #[serde(default)]
    pub kept_cases: std::collections::BTreeMap<String, Option<String>>,
    /// Cases of the file without an id, whose id casebook derived from their content.
    #[serde(default)]
    pub derived_ids: u64,
    /// Of those, the ones wholly identical to an earlier row, numbered by their place in the
    /// file (`-2`, `-3`, …): their ids change if rows before them are added or removed.
    #[serde(default)]
    pub positional_ids: u64,
    pub warnings: u64,
    /// The warnings (at most 1,000), with their lines and columns.
    #[schema(value_type = Vec<Object>)]
    pub diagnostics: Vec<serde_json::Value>,
}

/// What a capture of traces did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CaptureReport {
    /// Whether a version was made (false: the dataset had every captured case already).
    pub created: bool,
    /// The version made; absent when nothing was added.
    pub version: Option<Version>,
    /// Ids of the cases added.
    pub added: Vec<String>,
    /// Ids of captured cases the dataset had already (left as they are).
    pub present: Vec<String>,
    /// Captured cases the `where` filter left out.
    pub left_out: u64,
    pub spans: u64,
    /// Agent invocations found (those without recorded messages make no case).
    pub invocations: u64,
    /// The warnings (at most 1,000), with their lines and columns: content the traces did not record.
    #[schema(value_type = Vec<Object>)]
    pub diagnostics: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
    pub version: String,
}

/// What a review changes: the cases named by id and those the filter selects, in the `base`
/// version (default the head), set to the state and confidence given.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct ReviewBody {
    /// Ids of cases to change; each must be in the base version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Also the cases this filter selects (the filter language of `casebook help filter`).
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// At most this many of the cases the filter selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// `draft`, `reviewed` or `rejected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "reviewed")]
    pub state: Option<casebook_model::Review>,
    /// How much the cases' expected answers are trusted, from 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The cases' labels, replacing those they have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// The version the change builds on (`v3`, a tag, a content id; default `latest`): a commit
    /// made since is a conflict (409), not an update lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The version's message (default: what changed, `review: 3 cases reviewed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a review wrote.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReviewReport {
    /// False when every chosen case was already as asked (no version was made).
    pub created: bool,
    /// The new version, or the head that already had this content.
    pub version: Version,
    /// How many cases were chosen.
    pub cases: u64,
    /// The number of the version the change was built on.
    pub base: u64,
}

/// The traces whose spans the OTLP receiver keeps (`GET …/capture/pending`), oldest first, and
/// the most recent warnings of the captures it made (at most
/// [`casebook_store::CAPTURE_WARNINGS_KEPT`] per dataset).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PendingList {
    pub traces: Vec<PendingTrace>,
    /// By dataset, the most recent first (absent from servers older than it).
    #[serde(default)]
    pub warnings: Vec<CaptureWarning>,
}

/// A warning of a capture the receiver made in the background.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CaptureWarning {
    pub dataset: String,
    /// The trace it concerns (32 lowercase hex digits).
    pub trace_id: String,
    /// When (RFC 3339, the server's clock).
    pub at: String,
    pub message: String,
}

impl From<casebook_store::CaptureWarning> for CaptureWarning {
    fn from(w: casebook_store::CaptureWarning) -> Self {
        Self { dataset: w.dataset, trace_id: w.trace_id, at: server_time(w.at), message: w.message }
    }
}

/// Unix milliseconds of the server's clock as RFC 3339 (the number itself if out of range).
fn server_time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| format!("{t:.3}"))
}

/// One trace whose spans the receiver keeps.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PendingTrace {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// The dataset its cases go to.
    pub dataset: String,
    /// Spans received.
    pub spans: u64,
    /// GenAI log records received for its spans (absent from servers older than them).
    #[serde(default)]
    pub records: u64,
    /// When its first and its last span (or record) came (RFC 3339, the server's clock).
    pub first_received: String,
    pub last_received: String,
    /// Whether its root span (a span without a parent) has come: a trace becomes cases when
    /// it has, and no span has come for `casebook serve --capture-quiet` seconds (or after
    /// `--capture-max-wait` without it).
    pub root: bool,
    /// When it was made into cases (its spans are kept `--capture-max-wait` for late ones,
    /// which rebuild its cases); absent while it waits.
    pub captured: Option<String>,
}

impl From<casebook_store::PendingTrace> for PendingTrace {
    fn from(t: casebook_store::PendingTrace) -> Self {
        let time = server_time;
        Self {
            trace_id: t.trace_id,
            dataset: t.dataset,
            spans: t.spans,
            records: t.records,
            first_received: time(t.first_received),
            last_received: time(t.last_received),
            root: t.root,
            captured: t.captured.map(time),
        }
    }
}

/// What to purge (`casebook purge` through the server): the cases named by id and those the
/// filter selects in the head, erased from every version of the dataset.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct PurgeBody {
    /// Ids of cases to purge; each must be held by some version of the dataset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Also the cases this filter selects in the head (`casebook help filter`).
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// At most this many of the cases the filter selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Why (logged with the purge; required).
    pub reason: String,
    /// PostgreSQL: rewrite the touched tables (`VACUUM FULL`) so no byte of the cases is left
    /// in the data files (default true; false is faster and leaves them in free space).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<bool>,
}

/// A purge as logged: when, who, why, which cases, how many versions held them and how many
/// results of runs went with them.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PurgeEvent {
    pub id: u64,
    pub time: String,
    pub author: String,
    pub reason: String,
    /// The dataset's head when the purge ran.
    pub head: u64,
    pub cases: Vec<String>,
    pub versions: u64,
    pub results: u64,
}

/// What a purge did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PurgeReport {
    pub purge: PurgeEvent,
    /// Case bodies deleted.
    pub bodies: u64,
    /// Seed documents deleted.
    pub seed_documents: u64,
    /// Pending capture spans deleted.
    pub pending_spans: u64,
    /// Cases whose content another dataset holds too (that body stays).
    pub kept_shared: Vec<String>,
    /// Whether the freed space is known to be overwritten in the store's files.
    pub erased: bool,
}

impl From<casebook_store::PurgeOutcome> for PurgeReport {
    fn from(o: casebook_store::PurgeOutcome) -> Self {
        let p = o.purge;
        PurgeReport {
            purge: PurgeEvent {
                id: p.id,
                time: p.time,
                author: p.author,
                reason: p.reason,
                head: p.head,
                cases: p.cases,
                versions: p.versions,
                results: p.results,
            },
            bodies: o.bodies,
            seed_documents: o.seed_documents,
            pending_spans: o.pending_spans,
            kept_shared: o.kept_shared,
            erased: o.erased,
        }
    }
}
