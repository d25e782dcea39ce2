//! The cases of a version: pages walked by cursor, counts, one case.

use crate::extract::{Path, Query};
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use casebook_store::Store;
use serde::Deserialize;

use super::{VersionPath, resolve, select};
use crate::AppState;
use crate::api::{CasePage, Count};
use crate::auth::Reader;
use crate::cursor;
use crate::error::{ApiError, ApiResult, ErrorBody};

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// A filter in casebook's filter language (`labels contains "math" and len(turns) >= 2`).
    #[serde(rename = "where")]
    #[param(rename = "where")]
    pub filter: Option<String>,
    /// Cases a page holds (default 200, at most the server's limit).
    pub limit: Option<usize>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<String>,
}

/// A page of a version's cases that the filter selects, in order. A cursor stays on the
/// version it was made for (with `latest`, the version that was the head at the first page).
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/versions/{version}/cases", tag = "cases",
    security(("bearer" = [])), params(VersionPath, PageQuery),
    responses((status = 200, body = CasePage), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn page(
    State(state): State<AppState>,
    reader: Reader,
    Path(path): Path<VersionPath>,
    Query(query): Query<PageQuery>,
) -> ApiResult<Response> {
    let select = select(query.filter).await?;
    let size = query.limit.unwrap_or(200);
    if size == 0 || size > state.limits.max_page {
        return Err(ApiError::bad_request(format!("`limit` must be 1 to {}", state.limits.max_page)));
    }
    let (number, after) = match query.cursor.as_deref() {
        None => (resolve(&reader.store, &path.dataset, &path.version).await?.number, None),
        Some(text) => {
            let (v, at) = cursor::decode_for(&reader.store, &path.dataset, text).await?;
            // No lookup of the path's version when it says the same as the cursor.
            if path.version != "latest" && path.version != format!("v{v}") {
                let version = resolve(&reader.store, &path.dataset, &path.version).await?;
                if version.number != v {
                    return Err(ApiError::bad_request(format!(
                        "`cursor` walks v{v}, not `{}`: continue at versions/v{v}, or start again without a cursor",
                        path.version
                    )));
                }
            }
            (v, Some(at))
        }
    };
    let page = reader.store.page_json(&path.dataset, number, &select, after.as_ref(), size).await?;
    // The bodies are the stored native JSON: they go out as they are, not parsed and written again.
    let mut out = Vec::with_capacity(256 + page.json.len());
    out.extend_from_slice(format!("{{\"version\":{number},\"cases\":[").as_bytes());
    out.extend_from_slice(&page.json);
    out.push(b']');
    if let Some(next) = &page.next {
        out.extend_from_slice(format!(",\"next_cursor\":\"{}\"", cursor::encode(number, next)).as_bytes());
    }
    out.push(b'}');
    Ok(([(CONTENT_TYPE, "application/json")], out).into_response())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CountQuery {
    /// A filter in casebook's filter language.
    #[serde(rename = "where")]
    #[param(rename = "where")]
    pub filter: Option<String>,
}

/// How many cases of a version the filter selects.
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/versions/{version}/count", tag = "cases",
    security(("bearer" = [])), params(VersionPath, CountQuery),
    responses((status = 200, body = Count), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn count(
    reader: Reader,
    Path(path): Path<VersionPath>,
    Query(query): Query<CountQuery>,
) -> ApiResult<axum::Json<Count>> {
    let select = select(query.filter).await?;
    let version = resolve(&reader.store, &path.dataset, &path.version).await?;
    let count = reader.store.count(&path.dataset, version.number, &select).await?;
    Ok(axum::Json(Count { version: version.number, count }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CaseInVersion {
    #[allow(dead_code)] // `auth` checks it against the key's project
    pub project: String,
    pub dataset: String,
    pub version: String,
    /// The case's id.
    pub case: String,
}

/// One case as it is in a version (native casebook JSON).
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/versions/{version}/cases/{case}", operation_id = "case",
    tag = "cases", security(("bearer" = [])), params(CaseInVersion),
    responses((status = 200, description = "The case, as native casebook JSON", content_type = "application/json"),
        (status = 404, body = ErrorBody)))]
pub async fn one(reader: Reader, Path(path): Path<CaseInVersion>) -> ApiResult<axum::Json<casebook_model::Case>> {
    let version = resolve(&reader.store, &path.dataset, &path.version).await?;
    match reader.store.case(&path.dataset, version.number, &path.case).await? {
        Some(case) => Ok(axum::Json(case)),
        None => Err(ApiError::not_found(format!(
            "`{}` v{} has no case `{}`",
            path.dataset,
            version.number,
            casebook_model::excerpt(&path.case)
        ))),
    }
}
