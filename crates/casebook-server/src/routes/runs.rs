//! Experiment runs of a project: read back, and recorded as a client runs them (begin, results
//! in batches, finish), with the agents' outputs kept by run hash for any later run of the
//! project to reuse (`outputs`).
//!
//! Results, outputs, settings and summaries are kept as the exact JSON text the client sent
//! (`RawValue`: checked to be JSON, never parsed into values and written again).

use std::marker::PhantomData;

use crate::extract::Json;
use crate::extract::{Path, Query};
use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use casebook_store::ResultRow;
use futures_util::StreamExt;
use serde::de::{DeserializeOwned, Error as _, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::AppState;
use crate::api::{FinishRun, NewRun, OutputsRequest, ResultIn, Run};
use crate::auth::{Reader, Writer};
use crate::error::{ApiError, ApiResult, ErrorBody};

/// Results one request may carry, and run hashes one lookup may ask for.
pub const MAX_ROWS: usize = 10_000;

fn run(row: casebook_store::RunRow) -> ApiResult<Run> {
    Run::try_from(row).map_err(|e| ApiError::internal(format!("a stored run is not JSON: {e}")))
}

/// The project's runs, oldest first.
#[utoipa::path(get, path = "/api/v1/projects/{project}/runs", operation_id = "runs", tag = "runs", security(("bearer" = [])),
    params(("project" = String, Path, description = "The project (the API key's)")),
    responses((status = 200, body = Vec<Run>), (status = 404, body = ErrorBody)))]
pub async fn list(reader: Reader, Path(_project): Path<String>) -> ApiResult<Json<Vec<Run>>> {
    Ok(Json(reader.store.runs().await?.into_iter().map(run).collect::<ApiResult<_>>()?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunPath {
    #[allow(dead_code)] // `auth` checks it against the key's project
    pub project: String,
    /// A run id, a prefix of one, `latest` or `previous`.
    pub run: String,
}

/// One run: its settings and summary.
#[utoipa::path(get, path = "/api/v1/projects/{project}/runs/{run}", operation_id = "run", tag = "runs", security(("bearer" = [])),
    params(RunPath), responses((status = 200, body = Run), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn one(reader: Reader, Path(path): Path<RunPath>) -> ApiResult<Json<Run>> {
    Ok(Json(run(reader.store.run(Some(&path.run)).await?)?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResultsQuery {
    /// Results a page holds (at most the server's page limit): with it (or `cursor`), the answer
    /// is a [`ResultPage`](crate::api::ResultPage); without either, every result as one JSON array.
    pub limit: Option<usize>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
}

/// A run's results in order: each case's grades, scores and errors, as the runner recorded them;
/// a page at a time with `limit` (a run's results are read without the server holding them all).
#[utoipa::path(get, path = "/api/v1/projects/{project}/runs/{run}/results", tag = "runs", security(("bearer" = [])),
    params(RunPath, ResultsQuery), responses((status = 200, description = "The results, a JSON array; with `limit` or `cursor`, a `ResultPage`", content_type = "application/json"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn results(
    State(state): State<AppState>,
    reader: Reader,
    Path(path): Path<RunPath>,
    Query(query): Query<ResultsQuery>,
) -> ApiResult<Response> {
    let run = reader.store.run(Some(&path.run)).await?;
    if query.limit.is_some() || query.cursor.is_some() {
        let size = query.limit.unwrap_or(1000);
        if size == 0 || size > state.limits.max_page {
            return Err(ApiError::bad_request(format!("`limit` must be 1 to {}", state.limits.max_page)));
        }
        // A cursor is the place of the next result (`r` and a number), opaque to clients.
        let from = match query.cursor.as_deref() {
            None => 0,
            Some(text) => text.strip_prefix('r').and_then(|n| n.parse::<u64>().ok()).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`cursor` `{text}` is not one this server gave: pass a page's `next_cursor`, or start without one"
                ))
            })?,
        };
        // One more than the page, to know whether another follows.
        let mut rows = reader.store.run_results_from(&run.id, from, size + 1).await?;
        let next = (rows.len() > size).then(|| format!("r{}", rows[size].0));
        rows.truncate(size);
        let mut out = String::with_capacity(64 + rows.iter().map(|(_, r)| r.len() + 1).sum::<usize>());
        out.push_str("{\"results\":[");
        for (i, (_, result)) in rows.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(result);
        }
        out.push(']');
        if let Some(next) = next {
            out.push_str(&format!(",\"next_cursor\":\"{next}\""));
        }
        out.push('}');
        return Ok(([(CONTENT_TYPE, "application/json")], out).into_response());
    }
    let results = reader.store.run_results(&run.id).await?;
    let mut out = String::with_capacity(2 + results.iter().map(|r| r.len() + 1).sum::<usize>());
    out.push('[');
    out.push_str(&results.join(","));
    out.push(']');
    Ok(([(CONTENT_TYPE, "application/json")], out).into_response())
}

/// Path of a run that is written to: its exact id.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunIdPath {
    #[allow(dead_code)] // `auth` checks it against the key's project
    pub project: String,
    /// The run's id, whole.
    pub run: String,
}

/// Reads a JSON body of at most `--max-json` bytes ([`crate::Limits::max_json`]) and parses it
/// on the blocking pool (a batch of results is megabytes of JSON). A body that says it is larger
/// is refused before any of it is read; one sent in chunks, at the first chunk past the limit.
/// Either way the memory it takes is bounded by the limit, not by what the client sends.
async fn json_body<T: DeserializeOwned + Send + 'static>(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    what: &'static str,
) -> ApiResult<T> {
    let max = state.limits.max_json;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-large",
            format!(
                "the body is larger than this server takes for JSON ({max} bytes): send fewer results a request, \
                 or raise `casebook serve --max-json`"
            ),
        )
    };
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(declared.map_or(0, |n| usize::try_from(n).unwrap_or(0)));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|err| super::unread_body(&err, ""))?;
        if (bytes.len() + chunk.len()) as u64 > max {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    tokio::task::spawn_blocking(move || serde_json::from_slice(&bytes))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::bad_request(format!("the body is not {what}: {e}")))
}

/// A JSON array of at most [`MAX_ROWS`] items: reading stops at the first one too many.
struct Rows<T>(Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Rows<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Items<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Items<T> {
            type Value = Rows<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a list of at most {MAX_ROWS} items")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Rows<T>, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_ROWS));
                while let Some(item) = seq.next_element()? {
                    if items.len() == MAX_ROWS {
                        return Err(A::Error::custom(format!(
                            "more than {MAX_ROWS} items in one request: send them in batches"
                        )));
                    }
                    items.push(item);
                }
                Ok(Rows(items))
            }
        }
        deserializer.deserialize_seq(Items(PhantomData))
    }
}

/// How deep the JSON a run keeps may nest (objects and arrays): deeper than the server reads
/// back (serde_json stops at 128), so a run holding it could no longer be listed.
pub const MAX_DEPTH: usize = 64;

/// Checks a JSON value a run keeps before anything is written: an object where one is needed,
/// nested at most [`MAX_DEPTH`] deep. `at` is its JSON pointer in the body (`/meta`); a
/// refusal names the place at fault by pointer (`/meta/a/0`), in its message and diagnostic.
fn check_json(raw: &serde_json::value::RawValue, at: &str, object: bool) -> ApiResult<()> {
    if object && !raw.get().trim_start().starts_with('{') {
        return Err(ApiError::bad_request(format!("`{}` must be a JSON object", at.trim_start_matches('/'))));
    }
    let Some(inner) = too_deep(raw.get(), MAX_DEPTH) else { return Ok(()) };
    let pointer = format!("{at}{inner}");
    let message = format!("`{pointer}` nests deeper than {MAX_DEPTH} levels: nothing was kept; flatten it");
    Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-input", message.clone()).with_diagnostics(vec![
        casebook_model::Diagnostic {
            severity: casebook_model::Severity::Error,
            code: casebook_model::Code::TooDeep,
            message,
            file: "body".into(),
            line: 0,
            column: 0,
            pointer: Some(pointer),
            path: None,
            hint: None,
            case: None,
            line_offset: None,
        },
    ]))
}

/// Checks a text field a run keeps: at most `max` bytes, no control character.
fn check_text(text: &str, name: &str, max: usize) -> ApiResult<()> {
    if text.len() > max || text.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!("`{name}` must be at most {max} bytes, none a control character")));
    }
    Ok(())
}

/// Where in a JSON text (already known to be valid) an object or array opens deeper than `max`
/// levels: its JSON pointer, relative to the text. Read in one pass with a stack of the
/// places open, so no depth, however large, recurses.
fn too_deep(text: &str, max: usize) -> Option<String> {
    enum Open {
        Object(Option<String>),
        Array(usize),
    }
    let pointer = |stack: &[Open]| {
        stack.iter().fold(String::new(), |mut out, open| {
            out.push('/');
            match open {
                Open::Object(key) => out.push_str(&key.as_deref().unwrap_or("").replace('~', "~0").replace('/', "~1")),
                Open::Array(i) => out.push_str(&i.to_string()),
            }
            out
        })
    };
    let bytes = text.as_bytes();
    let mut stack: Vec<Open> = Vec::new();
    // In an object: whether the next string is a key.
    let mut want_key = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => {
                if stack.len() == max {
                    return Some(pointer(&stack));
                }
                let object = bytes[i] == b'{';
                stack.push(if object { Open::Object(None) } else { Open::Array(0) });
                want_key = object;
            }
            b'}' | b']' => {
                stack.pop();
                want_key = false;
            }
            b',' => match stack.last_mut() {
                Some(Open::Array(n)) => *n += 1,
                Some(Open::Object(_)) => want_key = true,
                None => {}
            },
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if want_key {
                    let key = serde_json::from_str::<String>(text.get(start..=i).unwrap_or("\"\"")).unwrap_or_default();
                    if let Some(Open::Object(slot)) = stack.last_mut() {
                        *slot = Some(key);
                    }
                    want_key = false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Begins a run: its results follow in batches, then its end. The id is the client's (unique in
/// the store: a taken one is 409).
#[utoipa::path(post, path = "/api/v1/projects/{project}/runs", tag = "runs", security(("bearer" = ["write"])),
    params(("project" = String, Path, description = "The project (the API key's)")), request_body = NewRun,
    responses((status = 201, body = Run, description = "The run, begun"), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 408, body = ErrorBody, description = "The client sent nothing of the body for too long"), (status = 413, body = ErrorBody, description = "The body is over `--max-json` (8 MiB by default)")))]
pub async fn begin(
    State(state): State<AppState>,
    writer: Writer,
    Path(_project): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let new: NewRun = json_body(&state, &headers, body, "a run (`id`, `experiment`, `started`, `meta`)").await?;
    if new.id.is_empty() || new.id.len() > 200 || new.id.chars().any(char::is_control) {
        return Err(ApiError::bad_request("`id` must be 1 to 200 characters, none a control character"));
    }
    check_text(&new.experiment, "experiment", 1000)?;
    check_text(&new.started, "started", 64)?;
    check_json(&new.meta, "/meta", true)?;
    // Read back as the run's answer before it is kept: a run that cannot be answered is not kept.
    let meta = serde_json::from_str(new.meta.get()).map_err(|e| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-input", format!("`meta` cannot be read back: {e}"))
    })?;
    writer.store.begin_run(&new.id, &new.experiment, &new.started, new.meta.get()).await?;
    let run = Run { id: new.id, experiment: new.experiment, started: new.started, finished: None, meta, summary: None };
    Ok((StatusCode::CREATED, Json(run)).into_response())
}

/// Keeps a batch of a run's finished results (at most 10,000), and the agents' outputs by run
/// hash, in one transaction. A place sent again replaces its result.
#[utoipa::path(post, path = "/api/v1/projects/{project}/runs/{run}/results", tag = "runs",
    security(("bearer" = ["write"])), params(RunIdPath), request_body = Vec<ResultIn>,
    responses((status = 204, description = "Kept"), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 408, body = ErrorBody, description = "The client sent nothing of the body for too long"), (status = 413, body = ErrorBody, description = "The body is over `--max-json` (8 MiB by default)")))]
pub async fn save_results(
    State(state): State<AppState>,
    writer: Writer,
    Path(path): Path<RunIdPath>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<StatusCode> {
    let Rows(results): Rows<ResultIn> = json_body(&state, &headers, body, "a list of results").await?;
    let mut rows = Vec::with_capacity(results.len());
    for (i, r) in results.into_iter().enumerate() {
        // A run's results are keyed from its place in the store's order times 2³²: a place past
        // that would land in another run's range.
        if r.seq >= 1 << 32 {
            return Err(ApiError::bad_request(format!(
                "`seq` {} is too large: a run holds fewer than 2³² results",
                r.seq
            )));
        }
        if !r.result.get().trim_start().starts_with('{') {
            return Err(ApiError::bad_request(format!("the result at place {} is not a JSON object", r.seq)));
        }
        check_json(&r.result, &format!("/{i}/result"), false)?;
        if let Some(output) = &r.output {
            check_json(&output.output, &format!("/{i}/output/output"), false)?;
        }
        rows.push(ResultRow {
            seq: r.seq,
            result: Box::<str>::from(r.result).into_string(),
            output: r.output.map(|o| (o.hash, Box::<str>::from(o.output).into_string())),
        });
    }
    writer.store.save_results(&path.run, &rows).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Ends a run with its summary.
#[utoipa::path(put, path = "/api/v1/projects/{project}/runs/{run}/finish", tag = "runs",
    security(("bearer" = ["write"])), params(RunIdPath), request_body = FinishRun,
    responses((status = 204, description = "Finished"), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 408, body = ErrorBody, description = "The client sent nothing of the body for too long"), (status = 413, body = ErrorBody, description = "The body is over `--max-json` (8 MiB by default)")))]
pub async fn finish(
    State(state): State<AppState>,
    writer: Writer,
    Path(path): Path<RunIdPath>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<StatusCode> {
    let end: FinishRun = json_body(&state, &headers, body, "a run's end (`finished`, `summary`)").await?;
    check_text(&end.finished, "finished", 64)?;
    let counted;
    let summary = match &end.summary {
        Some(summary) => {
            check_json(summary, "/summary", true)?;
            summary.get()
        }
        None => {
            let threshold = end.threshold.unwrap_or(1.0);
            if !(0.0..=1.0).contains(&threshold) {
                return Err(ApiError::bad_request(format!("`threshold` must be from 0 to 1, not {threshold}")));
            }
            counted = count_summary(&writer.store, &path.run, &end.finished, threshold).await?;
            counted.as_str()
        }
    };
    writer.store.finish_run(&path.run, &end.finished, summary).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The summary of a run counted from its stored results, a page at a time (memory holds the
/// summary's counts and the verdicts of its cases, never the results), with its meta as
/// recorded and `finished` as its end.
async fn count_summary(
    store: &casebook_store::AnyStore,
    run: &str,
    finished: &str,
    threshold: f64,
) -> ApiResult<String> {
    use casebook_runner::record::RunResult;
    use casebook_runner::summary::{RunMeta, SummaryBuilder};
    const PAGE: usize = 1000;
    let row = store.run(Some(run)).await?;
    let meta: RunMeta = serde_json::from_str(&row.meta).map_err(|e| {
        ApiError::bad_request(format!(
            "the run's `meta` is not one casebook can count a summary for ({e}): send the run's `summary` with its end"
        ))
    })?;
    let mut builder = SummaryBuilder::default();
    let mut from = 0;
    loop {
        let rows = store.run_results_from(&row.id, from, PAGE).await?;
        for (seq, text) in &rows {
            let result: RunResult = serde_json::from_str(text).map_err(|e| {
                ApiError::bad_request(format!(
                    "the run's result {seq} is not a casebook result ({e}): send it again, or send the run's `summary` with its end"
                ))
            })?;
            builder.add(&result);
        }
        match rows.last() {
            Some((seq, _)) if rows.len() == PAGE => from = seq + 1,
            _ => break,
        }
    }
    let summary = builder.finish(threshold, RunMeta { finished: finished.to_owned(), ..meta });
    serde_json::to_string(&summary).map_err(|e| ApiError::internal(format!("cannot write the run's summary: {e}")))
}

/// The project's stored output of each run hash (at most 10,000), in the same order: the
/// output's JSON, or null where none is kept. A read (it writes nothing; `POST` only because the
/// list is long): any key of the project may ask. The body is at most `--max-json`.
#[utoipa::path(post, path = "/api/v1/projects/{project}/outputs", tag = "runs", security(("bearer" = [])),
    params(("project" = String, Path, description = "The project (the API key's)")), request_body = OutputsRequest,
    responses((status = 200, description = "A JSON array: each output, or null", content_type = "application/json"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 408, body = ErrorBody, description = "The client sent nothing of the body for too long"), (status = 413, body = ErrorBody, description = "The body is over `--max-json` (8 MiB by default)")))]
pub async fn outputs(
    State(state): State<AppState>,
    reader: Reader,
    Path(_project): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    #[derive(Deserialize)]
    struct Hashes {
        hashes: Rows<String>,
    }
    let Hashes { hashes: Rows(hashes) } = json_body(&state, &headers, body, "`{\"hashes\": [...]}`").await?;
    let found = reader.store.outputs(&hashes).await?;
    let mut out = String::with_capacity(2 + found.iter().map(|o| o.as_ref().map_or(4, String::len) + 1).sum::<usize>());
    out.push('[');
    for (i, output) in found.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(output.as_deref().unwrap_or("null"));
    }
    out.push(']');
    Ok(([(CONTENT_TYPE, "application/json")], out).into_response())
}
