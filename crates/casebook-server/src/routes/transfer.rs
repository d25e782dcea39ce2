//! Bulk import of a file in any format, and export of a version in any format, both streamed.
//!
//! An import's body is written to a file of its own in a new temporary folder as it arrives
//! (counted against the size limit, cut off when the client stalls), then read by the same
//! pipeline as `casebook import` (`casebook_store::ingest`): every diagnostic with its line and
//! column, and nothing written unless the whole file is valid. The folder holds the body alone,
//! so a manifest that names other files (`spec.path`, seed files) finds none of the server's.
//! An export is written page by page into the response as the store gives the version.

use std::sync::{Arc, Mutex};

use crate::extract::{Path, Query};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use casebook_formats::{ExportSettings, Exporter, Format, Input, ReadOptions, SeedFiles, Syntax};
use casebook_model::Diagnostic;
use casebook_store::{
    CommitMode, CommitOutcome, Exceptions, IngestError, IngestEvent, IngestRequest, Parent, Ref, Store,
};
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use super::{DatasetPath, VersionPath, resolve};
use crate::AppState;
use crate::api::{ImportReport, Version};
use crate::auth::{Reader, Writer};
use crate::error::{ApiError, ApiResult, ErrorBody};

/// Diagnostics an answer carries at most; the count says how many there were.
pub(super) const MAX_DIAGNOSTICS: usize = 1000;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ImportQuery {
    /// The body's format (`casebook`, `letta`, `maslab`, `agenthealth`, `voltagent`,
    /// `openai-evals`, `inspect`, `promptfoo`, `csv`); detected when absent.
    pub format: Option<String>,
    /// The body's syntax (`jsonl`, `json`, `yaml`, `csv`, `parquet`); from `filename` when absent.
    pub syntax: Option<String>,
    /// The file's name, as diagnostics name it (default `body.jsonl`).
    pub filename: Option<String>,
    /// The version the import builds on (`v3`; `v0` for a new dataset): if the head is another
    /// by the time it commits, nothing is written and the answer is 409 with the head.
    pub parent: Option<String>,
    /// The content id of the version the file was made from (what `casebook pull` wrote): the
    /// file is merged onto the head, keeping the cases changed there since that version and not
    /// in the file; cases changed on both sides to different content are a `merge-conflict`
    /// (409, their ids in `conflicts`) and nothing is written. Not with `parent`.
    pub base: Option<String>,
    /// With `base`: the cases the file holds with other content than `base`'s, as a JSON object
    /// from case id to the content id the file holds (`null`: the file lacks the case), which
    /// the merge takes for what the file started from. What an answer's `kept_cases` said: a
    /// file pushed with cases kept from the head is that version except for those cases, and its
    /// next push names that version as `base` with `base_except` = `kept_cases`, so that the
    /// push's own earlier merge does not count as a change on the server's side.
    pub base_except: Option<String>,
    /// `replace` (default: the file is the whole next version) or `upsert` (its cases are added
    /// or replace those with their ids).
    pub mode: Option<String>,
    /// The version's message.
    pub message: Option<String>,
}

fn parse_format(text: Option<&str>) -> ApiResult<Option<Format>> {
    text.map(|t| t.parse::<Format>().map_err(|e| ApiError::bad_request(format!("`format`: {e}")))).transpose()
}

fn parse_syntax(text: Option<&str>) -> ApiResult<Option<Syntax>> {
    text.map(|t| {
        Syntax::from_path(std::path::Path::new(&format!("x.{t}"))).ok_or_else(|| {
            ApiError::bad_request(format!(
                "`syntax`: unknown syntax `{t}`; use `jsonl`, `json`, `yaml`, `csv` or `parquet`"
            ))
        })
    })
    .transpose()
}

fn too_large(max: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too-large",
        format!("the body is larger than this server takes ({max} bytes): split the file, or raise `--max-body`"),
    )
}

/// A request body written to a file of its own in a new temporary folder (which removes it when
/// dropped), named as the client's `filename` (only its last part) or `default`, refused over
/// the size limit; with the name diagnostics show.
pub(super) async fn receive(
    state: &AppState,
    headers: &HeaderMap,
    filename: Option<&str>,
    default: &str,
    body: Body,
) -> ApiResult<(tempfile::TempDir, std::path::PathBuf, String)> {
    let max = state.limits.max_body;
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(too_large(max));
    }
    let shown = crate::spool::upload_name("filename", filename, default)?;
    let folder = state.spool.folder()?;
    let file = folder.path().join(&shown);
    spool(body, &file, max).await?;
    Ok((folder, file, shown))
}

/// Writes a request body to `file`, at most `max` bytes.
async fn spool(body: Body, file: &std::path::Path, max: u64) -> ApiResult<u64> {
    let mut out = tokio::fs::File::create(file).await.map_err(ApiError::internal)?;
    let mut stream = body.into_data_stream();
    let mut size = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|err| super::unread_body(&err, ": nothing was imported"))?;
        size += chunk.len() as u64;
        if size > max {
            return Err(too_large(max));
        }
        out.write_all(&chunk).await.map_err(ApiError::internal)?;
    }
    out.flush().await.map_err(ApiError::internal)?;
    Ok(size)
}

/// Imports a file (the body, in any supported format) as the dataset's next version. With
/// `Accept: application/x-ndjson` the answer is a stream of JSON lines: `{"progress": {"cases":
/// N}}` as the file is read, then `{"report": …}` or `{"error": …}`.
#[utoipa::path(post, path = "/api/v1/projects/{project}/datasets/{dataset}/import", tag = "datasets",
    security(("bearer" = ["write"])), params(DatasetPath, ImportQuery),
    request_body(content = String, description = "The file, in any supported format", content_type = "application/octet-stream"),
    responses((status = 201, body = ImportReport, description = "A version was made"),
        (status = 200, body = ImportReport, description = "The content is the head's: no version was made"),
        (status = 400, body = ErrorBody, description = "A parameter is wrong, or a new dataset's name is not allowed"),
        (status = 403, body = ErrorBody), (status = 408, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The head is not `parent` (`conflict`), or cases changed both in the file and on the head since `base` (`merge-conflict`): nothing was written"),
        (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "The file has errors (every one, located): nothing was written")))]
pub async fn import(
    State(state): State<AppState>,
    writer: Writer,
    Path(path): Path<DatasetPath>,
    Query(query): Query<ImportQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let format = parse_format(query.format.as_deref())?;
    let syntax = parse_syntax(query.syntax.as_deref())?;
    let mode = match query.mode.as_deref().unwrap_or("replace") {
        "replace" => CommitMode::Replace,
        "upsert" => CommitMode::Upsert,
        other => return Err(ApiError::bad_request(format!("`mode`: `{other}` is not `replace` or `upsert`"))),
    };
    if query.base_except.is_some() && query.base.is_none() {
        return Err(ApiError::bad_request("`base_except` needs `base`: it names the cases the file holds otherwise"));
    }
    let parent = match (query.parent.as_deref(), query.base.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "`parent` and `base` cannot both be given: `base` merges onto the head, `parent` replaces it",
            ));
        }
        (None, Some(base)) => {
            let except = exceptions(query.base_except.as_deref())?;
            Parent::Merge(Ref::Number(base_version(&writer.store, &path.dataset, base).await?), except)
        }
        (parent, None) => match parent {
            None => Parent::Head,
            Some("v0" | "0") => Parent::Given(Ref::Number(0)),
            Some(text) => {
                Parent::Given(text.parse().map_err(|e: String| ApiError::bad_request(format!("`parent`: {e}")))?)
            }
        },
    };
    // A name no new dataset may have is refused before the body is received (the store would
    // refuse it at the commit); a dataset named so before the rules takes imports as ever.
    casebook_store::check_commit_name(&writer.store, &path.dataset).await?;
    let (folder, file, shown) = receive(&state, &headers, query.filename.as_deref(), "body.jsonl", body).await?;

    let author = author(&headers, &writer);
    let request = IngestRequest {
        input: Input { path: Some(file), display: shown.clone() },
        options: ReadOptions { format, syntax, threads: 0, column_map: None, stream_from: None },
        dataset: Some(path.dataset.clone()),
        mode,
        parent,
        author,
        time: super::now(),
        message: query.message.unwrap_or_else(|| format!("import {shown}")),
    };
    let streaming =
        headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("application/x-ndjson"));
    if streaming {
        return Ok(import_streaming(writer.store, request, folder));
    }
    let diagnostics = Arc::new(Mutex::new(Vec::new()));
    let kept = diagnostics.clone();
    let events = Box::new(move |event: IngestEvent| {
        if let IngestEvent::Diagnostic(d) = event {
            if let Ok(mut list) = kept.lock() {
                if list.len() < MAX_DIAGNOSTICS {
                    list.push(d);
                }
            }
        }
    });
    let result = casebook_store::ingest(&writer.store, request, events).await;
    drop(folder);
    let diagnostics = std::mem::take(&mut *diagnostics.lock().map_err(|_| ApiError::internal("a lock was poisoned"))?);
    let (status, report) = report(result, diagnostics, &shown)?;
    Ok((status, axum::Json(report)).into_response())
}

/// The number of the version of `dataset` whose content id is `id` (whole: a base is what a
/// client was given, never typed).
async fn base_version(store: &casebook_store::AnyStore, dataset: &str, id: &str) -> ApiResult<u64> {
    let wanted = id.to_ascii_lowercase();
    if wanted.len() != 64 || !wanted.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad_request(format!(
            "`base`: `{}` is not a version's content id (64 hexadecimal digits)",
            casebook_model::excerpt(id)
        )));
    }
    let versions = store.versions(dataset).await?;
    match versions.iter().find(|v| v.id == wanted) {
        Some(v) => Ok(v.number),
        None => Err(ApiError::not_found(format!(
            "`base`: dataset `{dataset}` has no version with content id `{}`",
            &wanted[..12]
        ))),
    }
}

/// The `base_except` parameter: a JSON object from case id to a content id or `null`.
fn exceptions(text: Option<&str>) -> ApiResult<Exceptions> {
    let Some(text) = text else { return Ok(Exceptions::new()) };
    let refused = |why: String| ApiError::bad_request(format!("`base_except`: {why}"));
    let listed: std::collections::BTreeMap<String, Option<String>> = serde_json::from_str(text).map_err(|e| {
        refused(format!("{e}; give a JSON object from case id to the content id the file holds (or `null`)"))
    })?;
    listed
        .into_iter()
        .map(|(id, content)| {
            let content = match content {
                None => None,
                Some(hex) => Some(
                    hex.bytes()
                        .all(|b| b.is_ascii_hexdigit())
                        .then(|| casebook_canon::id_bytes(&hex.to_ascii_lowercase()))
                        .flatten()
                        .ok_or_else(|| {
                            refused(format!(
                                "case `{}`: `{}` is not a content id (64 hexadecimal digits)",
                                casebook_model::excerpt(&id),
                                casebook_model::excerpt(&hex)
                            ))
                        })?,
                ),
            };
            Ok((id, content))
        })
        .collect()
}

/// Who writes: the client's `x-casebook-author`, with the key that vouches for it.
pub(super) fn author(headers: &HeaderMap, writer: &Writer) -> String {
    headers
        .get("x-casebook-author")
        .and_then(|v| v.to_str().ok())
        .filter(|a| a.len() <= 200)
        .map_or_else(|| super::author_of(None, &writer.access.key), |a| super::author_of(Some(a), &writer.access.key))
}

/// The answer to an import: its status and report, or the error.
fn report(
    result: Result<casebook_store::Ingested, IngestError>,
    diagnostics: Vec<Diagnostic>,
    shown: &str,
) -> ApiResult<(StatusCode, ImportReport)> {
    let ingested = result.map_err(|err| match err {
        IngestError::Store(e) | IngestError::Unstorable(e) => ApiError::from(e),
        IngestError::Conflicts { ref ids, head, .. } => {
            let mut e = ApiError::new(StatusCode::CONFLICT, "merge-conflict", err.to_string());
            e.body.head = Some(head);
            e.body.conflicts = Box::new(ids.iter().take(MAX_DIAGNOSTICS).cloned().collect());
            e
        }
        IngestError::Read(e) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-input",
            format!("`{shown}` cannot be read: {e}; nothing was imported"),
        ),
        other => ApiError::internal(other),
    })?;
    if ingested.errors > 0 {
        let n = ingested.errors;
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-input",
            format!("nothing was imported: `{shown}` has {n} error{}", if n == 1 { "" } else { "s" }),
        )
        .with_diagnostics(diagnostics));
    }
    let (status, created, version) = match ingested.outcome {
        Some(CommitOutcome::Created(v)) => (StatusCode::CREATED, true, Some(v)),
        Some(CommitOutcome::Unchanged(v)) => (StatusCode::OK, false, v),
        None => return Err(ApiError::internal("an import without errors made no commit")),
    };
    Ok((
        status,
        ImportReport {
            created,
            version: version.map(Version::from),
            kept: ingested.kept.len() as u64,
            kept_cases: ingested
                .kept
                .into_iter()
                .map(|(id, content)| (id, content.as_ref().map(casebook_canon::id_hex)))
                .collect(),
            derived_ids: ingested.derived_ids,
            positional_ids: ingested.positional_ids,
            warnings: ingested.warnings,
            diagnostics: diagnostics.iter().map(|d| serde_json::to_value(d).unwrap_or_default()).collect(),
        },
    ))
}

/// The import as a stream of JSON lines: progress as it goes, then the report or the error.
fn import_streaming(store: casebook_store::AnyStore, request: IngestRequest, folder: tempfile::TempDir) -> Response {
    let (lines, receiver) = tokio::sync::mpsc::channel::<String>(64);
    let shown = request.input.display.clone();
    let request_id = crate::error::REQUEST_ID.try_with(Clone::clone).unwrap_or_default();
    let work = async move {
        let diagnostics = Arc::new(Mutex::new(Vec::new()));
        let kept = diagnostics.clone();
        let progress = lines.clone();
        let events = Box::new(move |event: IngestEvent| match event {
            IngestEvent::Diagnostic(d) => {
                if let Ok(mut list) = kept.lock() {
                    if list.len() < MAX_DIAGNOSTICS {
                        list.push(d);
                    }
                }
            }
            // Progress is best effort: a slow reader of the stream misses some, never the end.
            IngestEvent::Progress { cases } => {
                let _ = progress.try_send(format!("{}\n", serde_json::json!({"progress": {"cases": cases}})));
            }
        });
        let result = casebook_store::ingest(&store, request, events).await;
        drop(folder);
        let diagnostics = diagnostics.lock().map(|mut d| std::mem::take(&mut *d)).unwrap_or_default();
        let line = match report(result, diagnostics, &shown) {
            Ok((status, report)) => serde_json::json!({"status": status.as_u16(), "report": report}),
            Err(e) => serde_json::json!({"status": e.status.as_u16(), "error": e.body}),
        };
        let _ = lines.send(format!("{line}\n")).await;
    };
    tokio::spawn(crate::error::REQUEST_ID.scope(request_id, work));
    let stream = futures_util::stream::unfold(receiver, |mut r| async move {
        r.recv().await.map(|line| (Ok::<_, std::convert::Infallible>(line), r))
    });
    ([(header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(stream)).into_response()
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// The format to write (default `casebook`).
    pub format: Option<String>,
    /// The syntax (`jsonl`, `json`, `yaml`, `csv`, `parquet` for `casebook`; default: the format's first).
    pub syntax: Option<String>,
    /// Only the cases this filter selects.
    #[serde(rename = "where")]
    #[param(rename = "where")]
    pub filter: Option<String>,
    /// Drop what the format cannot hold instead of failing.
    pub lossy: Option<bool>,
    /// Write cases whose expectations are drafts (`review: draft`) to a format without
    /// `review`, where they read as confirmed; else they fail the export, lossy or not.
    pub confirm_drafts: Option<bool>,
}

/// Shared output of an [`Exporter`]: what it wrote since the last chunk was sent.
#[derive(Clone, Default)]
struct Chunks(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Chunks {
    fn take(&self) -> Vec<u8> {
        self.0.lock().map(|mut b| std::mem::take(&mut *b)).unwrap_or_default()
    }
}

/// Cases an export reads at a time.
const EXPORT_PAGE: usize = 2000;

/// A version in any format, written as it is read. Seed files are inline; what the format
/// cannot hold fails the export (422) before anything is sent, unless `lossy`. A failure after
/// the first bytes (the store, or a case the format refuses) ends the body early, with the
/// error in the server's log; a client sees a body cut short, never a shorter valid file.
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/versions/{version}/export", tag = "cases",
    security(("bearer" = [])), params(VersionPath, ExportQuery),
    responses((status = 200, description = "The version, written in the format asked for", content_type = "application/octet-stream"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn export(
    reader: Reader,
    Path(path): Path<VersionPath>,
    Query(query): Query<ExportQuery>,
) -> ApiResult<Response> {
    export_version(reader.store, &path.dataset, &path.version, query, false).await
}

/// A version of `dataset` written as `query` says, streamed; with `download`, named as a file
/// to save (`support-v3.jsonl`).
pub(crate) async fn export_version(
    store: casebook_store::AnyStore,
    dataset: &str,
    version: &str,
    query: ExportQuery,
    download: bool,
) -> ApiResult<Response> {
    let format = parse_format(query.format.as_deref())?.unwrap_or(Format::Casebook);
    let syntax = parse_syntax(query.syntax.as_deref())?.unwrap_or_else(|| format.syntax_for(None));
    if !format.syntaxes().contains(&syntax) {
        return Err(ApiError::bad_request(format!("`{format}` cannot be written as {}", syntax.name())));
    }
    let select = super::select(query.filter).await?;
    let version = resolve(&store, dataset, version).await?;
    let header = store.header(dataset).await?;
    let settings = ExportSettings {
        format,
        syntax,
        column_map: None,
        lossy: query.lossy.unwrap_or(false),
        seed_files: SeedFiles::Inline,
        place: format!("{dataset}@v{}", version.number),
        confirm_drafts: query.confirm_drafts.unwrap_or(false),
    };
    let mut columns = Vec::new();
    if settings.needs_columns() {
        // (Page by page: a store's callback reads are not `Send`.)
        let mut found = casebook_formats::CsvColumns::new(&settings);
        let mut after = None;
        loop {
            let page = store.page(dataset, version.number, &select, after.as_ref(), EXPORT_PAGE).await?;
            let cases = page
                .bodies
                .iter()
                .map(|b| serde_json::from_str::<casebook_model::Case>(b))
                .collect::<Result<Vec<_>, _>>()
                .map_err(ApiError::internal)?;
            found.add(&cases);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        columns = found.ordered(&header);
    }
    let chunks = Chunks::default();
    let mut exporter = Exporter::new(settings, &header, columns, Box::new(chunks.clone()), None)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    exporter.begin().map_err(ApiError::internal)?;
    // The first page decides the answer: what the format refuses is an error, not a cut body.
    let first = store.page(dataset, version.number, &select, None, EXPORT_PAGE).await?;
    let refused = |diagnostics: Vec<Diagnostic>| {
        let errors: Vec<Diagnostic> = diagnostics.into_iter().filter(Diagnostic::is_error).collect();
        if errors.is_empty() {
            return None;
        }
        Some(
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-input",
                format!("`{dataset}` cannot be written as `{format}`: {}", errors[0].message),
            )
            .with_diagnostics(errors),
        )
    };
    let mut diagnostics = exporter.bodies(&first.bodies).map_err(ApiError::internal)?;
    diagnostics.extend(exporter.refused_drafts());
    if let Some(err) = refused(diagnostics) {
        return Err(err);
    }
    let (content_type, extension) = match syntax {
        Syntax::Jsonl => ("application/x-ndjson", "jsonl"),
        Syntax::Json => ("application/json", "json"),
        Syntax::Yaml => ("application/yaml", "yaml"),
        Syntax::Csv => ("text/csv", "csv"),
        Syntax::Parquet => ("application/vnd.apache.parquet", "parquet"),
    };
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    if download {
        // The name is ASCII letters, digits, `-`, `_` and `.` only: nothing to quote.
        let name: String = dataset
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' })
            .collect();
        let disposition = format!("attachment; filename=\"{name}-v{}.{extension}\"", version.number);
        if let Ok(value) = disposition.parse() {
            headers.insert(header::CONTENT_DISPOSITION, value);
        }
    }
    // A version of one page is answered whole, so that a refusal at the end (an empty version
    // in a format that needs cases) is an error answer too.
    if first.next.is_none() {
        let exported = exporter.finish().map_err(ApiError::internal)?;
        if let Some(err) = refused(exported.diagnostics) {
            return Err(err);
        }
        return Ok((headers, chunks.take()).into_response());
    }
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
    let dataset = dataset.to_owned();
    let number = version.number;
    let work = async move {
        let send = |bytes: Vec<u8>| {
            let sender = sender.clone();
            async move { bytes.is_empty() || sender.send(Ok(bytes)).await.is_ok() }
        };
        if !send(chunks.take()).await {
            return;
        }
        let mut next = first.next;
        while let Some(after) = next.take() {
            let page = match store.page(&dataset, number, &select, Some(&after), EXPORT_PAGE).await {
                Ok(page) => page,
                Err(err) => {
                    tracing::error!(error = %err, "the export stopped");
                    let _ = sender.send(Err(std::io::Error::other(err.to_string()))).await;
                    return;
                }
            };
            // A draft the format would write as confirmed is left out of the page and told only
            // at the end: the body is cut here instead, never a valid file without those cases.
            match exporter.bodies(&page.bodies).map(|mut d| {
                d.extend(exporter.refused_drafts());
                d
            }) {
                Ok(diagnostics) if !diagnostics.iter().any(Diagnostic::is_error) => {}
                Ok(diagnostics) => {
                    let message =
                        diagnostics.iter().find(|d| d.is_error()).map(|d| d.message.clone()).unwrap_or_default();
                    tracing::error!(%message, "the export stopped: a case the format cannot hold");
                    let _ = sender.send(Err(std::io::Error::other(message))).await;
                    return;
                }
                Err(err) => {
                    let _ = sender.send(Err(std::io::Error::other(err.to_string()))).await;
                    return;
                }
            }
            if !send(chunks.take()).await {
                return;
            }
            next = page.next;
        }
        match exporter.finish() {
            Ok(exported) if exported.diagnostics.iter().any(Diagnostic::is_error) => {
                let message = exported.diagnostics.iter().find(|d| d.is_error()).map(|d| d.message.clone());
                tracing::error!(message = %message.clone().unwrap_or_default(), "the export stopped at its end");
                let _ = sender.send(Err(std::io::Error::other(message.unwrap_or_default()))).await;
            }
            Ok(_) => {
                let _ = send(chunks.take()).await;
            }
            Err(err) => {
                let _ = sender.send(Err(err)).await;
            }
        }
    };
    tokio::spawn(work);
    let stream = futures_util::stream::unfold(receiver, |mut r| async move { r.recv().await.map(|item| (item, r)) });
    Ok((headers, Body::from_stream(stream)).into_response())
}
