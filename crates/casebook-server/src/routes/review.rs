//! Reviewing cases through the server: `casebook review` with `CASEBOOK_URL` set, and the
//! console, set the review state and label confidence of chosen cases as a new version, with
//! `casebook_store::review` doing what it does on a local store.

use axum::http::{HeaderMap, StatusCode};
use casebook_store::{CommitOutcome, ReviewRequest};

use super::DatasetPath;
use super::transfer::author;
use crate::api::{ReviewBody, ReviewReport, Version};
use crate::auth::Writer;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path};

/// Sets the review state and/or confidence of the cases named by id and of those the filter
/// selects, as a new version built on `base` (default the head). Cases already as asked make
/// no version (200); an id the base version lacks is a 404 naming it, a filter that selects
/// nothing a 422, a commit made since `base` a 409: nothing is written in each case.
#[utoipa::path(post, path = "/api/v1/projects/{project}/datasets/{dataset}/review", tag = "datasets",
    security(("bearer" = ["write"])), params(DatasetPath), request_body = ReviewBody,
    responses((status = 201, body = ReviewReport, description = "A version was made"),
        (status = 200, body = ReviewReport, description = "Every chosen case was already as asked"),
        (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such dataset, version or case"),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn review(
    writer: Writer,
    Path(path): Path<DatasetPath>,
    headers: HeaderMap,
    Json(body): Json<ReviewBody>,
) -> ApiResult<(StatusCode, axum::Json<ReviewReport>)> {
    if body.ids.is_empty() && body.filter.as_deref().is_none_or(|f| f.trim().is_empty()) {
        return Err(ApiError::bad_request("name the cases to review: `ids`, `where`, or both"));
    }
    if body.state.is_none() && body.confidence.is_none() {
        return Err(ApiError::bad_request("say what to set: `state`, `confidence`, or both"));
    }
    if let Some(c) = body.confidence.filter(|c| !(0.0..=1.0).contains(c)) {
        return Err(ApiError::bad_request(format!("`confidence` is {c}: a confidence is from 0 to 1")));
    }
    let select = match body.filter {
        Some(filter) if !filter.trim().is_empty() => {
            let mut select = super::select(Some(filter)).await?;
            select.limit = body.limit;
            Some(select)
        }
        _ => None,
    };
    let base = body.base.as_deref().unwrap_or("latest");
    let request = ReviewRequest {
        dataset: path.dataset,
        base: base.parse().map_err(ApiError::bad_request)?,
        ids: body.ids,
        select,
        review: body.state,
        confidence: body.confidence,
        author: author(&headers, &writer),
        time: super::now(),
        message: body.message,
    };
    let reviewed = casebook_store::review(&writer.store, request).await?;
    let (status, created, version) = match reviewed.outcome {
        CommitOutcome::Created(v) => (StatusCode::CREATED, true, v),
        CommitOutcome::Unchanged(Some(v)) => (StatusCode::OK, false, v),
        CommitOutcome::Unchanged(None) => return Err(ApiError::internal("a review of no case made no version")),
    };
    Ok((
        status,
        axum::Json(ReviewReport {
            created,
            version: Version::from(version),
            cases: reviewed.cases as u64,
            base: reviewed.base,
        }),
    ))
}
