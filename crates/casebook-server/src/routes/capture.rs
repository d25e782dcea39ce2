//! Production traces become cases: the body of `casebook capture` (OTLP JSON, a document or
//! JSON lines of them) read by `casebook_formats::capture` and added by
//! `casebook_store::add_captured`, so a console or a script can send the traces a user picked.

use crate::extract::{Path, Query};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use casebook_store::{CaptureRequest, CommitOutcome};
use serde::Deserialize;

use super::DatasetPath;
use super::transfer::{MAX_DIAGNOSTICS, author, receive};
use crate::AppState;
use crate::api::{CaptureReport, Version};
use crate::auth::Writer;
use crate::error::{ApiError, ApiResult, ErrorBody};

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CaptureQuery {
    /// Keep only the captured cases this filter selects (the filter language of `casebook help filter`).
    #[serde(rename = "where")]
    pub filter: Option<String>,
    /// The version's message.
    pub message: Option<String>,
    /// The body's name, as diagnostics name it (default `traces.json`).
    pub filename: Option<String>,
}

/// Makes cases of the traces in the body (OTLP JSON: an `ExportTraceServiceRequest`, or JSON
/// lines of them), one per agent invocation with draft expectations, and adds those the dataset
/// does not have as its next version (a dataset that does not exist is made). Cases it has
/// already, captured before and maybe reviewed since, are left as they are.
#[utoipa::path(post, path = "/api/v1/projects/{project}/datasets/{dataset}/capture", tag = "datasets",
    security(("bearer" = ["write"])), params(DatasetPath, CaptureQuery),
    request_body(content = String, description = "OTLP JSON traces", content_type = "application/json"),
    responses((status = 201, body = CaptureReport, description = "A version was made with the new cases"),
        (status = 200, body = CaptureReport, description = "Every captured case was there already, or the filter selected none"),
        (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 408, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "The traces have errors, or hold no agent invocation with recorded messages: nothing was written")))]
pub async fn capture(
    State(state): State<AppState>,
    writer: Writer,
    Path(path): Path<DatasetPath>,
    Query(query): Query<CaptureQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, axum::Json<CaptureReport>)> {
    let filter = super::select(query.filter).await?.filter;
    let (folder, file, shown) = receive(&state, &headers, query.filename.as_deref(), "traces.json", body).await?;
    let name = shown.clone();
    let captured = tokio::task::spawn_blocking(move || {
        let mut capture = casebook_formats::capture::Capture::new();
        capture.read(&name, std::io::BufReader::new(fs_err::File::open(&file)?))?;
        drop(folder);
        Ok::<_, std::io::Error>(capture.finish())
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(ApiError::internal)?;
    let mut diagnostics = captured.diagnostics.clone();
    diagnostics.truncate(MAX_DIAGNOSTICS);
    let errors = captured.diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 0 || captured.cases.is_empty() {
        let message = if errors > 0 {
            format!("nothing was captured: `{shown}` has {errors} error{}", if errors == 1 { "" } else { "s" })
        } else {
            format!(
                "nothing was captured: the {} spans of `{shown}` hold no agent invocation with recorded messages",
                captured.spans
            )
        };
        return Err(
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-input", message).with_diagnostics(diagnostics)
        );
    }
    let made = captured.cases.len();
    let cases: Vec<_> = match &filter {
        Some(filter) => captured.cases.into_iter().filter(|c| filter.matches(c)).collect(),
        None => captured.cases,
    };
    let left_out = (made - cases.len()) as u64;
    let diagnostics: Vec<serde_json::Value> =
        diagnostics.iter().map(|d| serde_json::to_value(d).unwrap_or_default()).collect();
    let mut report = CaptureReport {
        created: false,
        version: None,
        added: Vec::new(),
        present: Vec::new(),
        left_out,
        spans: captured.spans,
        invocations: captured.invocations,
        diagnostics,
    };
    if cases.is_empty() {
        return Ok((StatusCode::OK, axum::Json(report)));
    }
    let author = author(&headers, &writer);
    let request = CaptureRequest {
        dataset: path.dataset,
        author,
        time: super::now(),
        message: query.message.unwrap_or_else(|| format!("capture {shown}")),
    };
    let outcome = casebook_store::add_captured(&writer.store, request, cases).await?;
    report.added = outcome.added;
    report.present = outcome.present;
    let status = match outcome.commit {
        Some(CommitOutcome::Created(v)) => {
            report.created = true;
            report.version = Some(Version::from(v));
            StatusCode::CREATED
        }
        Some(CommitOutcome::Unchanged(v)) => {
            report.version = v.map(Version::from);
            StatusCode::OK
        }
        None => StatusCode::OK,
    };
    Ok((status, axum::Json(report)))
}
