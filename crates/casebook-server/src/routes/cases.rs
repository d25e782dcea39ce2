//! The cases of a version: pages walked by cursor, counts, one case.

use crate::extract::{Path, Query};
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use casebook_store::{Cursor, Store};
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
    /// The `next_cursor` of the page before, or the `prev_cursor` of the page after (to walk
    /// backwards).
    pub cursor: Option<String>,
    /// The order of the pages: `id`, or a field (`metadata.difficulty`), with `-` before it for
    /// descending (`-confidence`); by default the version's order. Numbers come first, then
    /// strings (by their UTF-8 bytes), booleans, null, lists and objects; cases without the
    /// field last, either way; ties by id. A cursor keeps its sort.
    pub sort: Option<String>,
    /// `true`: the page also gives each case's content id (`content_ids`), which a client that
    /// records results of the cases sends with them.
    #[serde(default)]
    pub content_ids: bool,
}

/// A page of a version's cases that the filter selects, in order. A cursor stays on the
/// version it was made for (with `latest`, the version that was the head at the first page).
/// `next_cursor` is given only when more cases follow, `prev_cursor` when some come before.
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
    let sort = casebook_store::Sort::parse(query.sort.as_deref().unwrap_or_default()).map_err(ApiError::bad_request)?;
    if let Some(sort) = sort {
        return sorted_page(&reader, &path, &select, &sort, query.cursor.as_deref(), size).await;
    }
    let (number, place) = match query.cursor.as_deref() {
        None => (resolve(&reader.store, &path.dataset, &path.version).await?.number, None),
        Some(text) => {
            let place = cursor::decode_place_for(&reader.store, &path.dataset, text).await?;
            let v = place.version;
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
            (v, Some(place))
        }
    };
    let at = |cursor: Cursor, backward: bool| {
        cursor::encode_place(&cursor::Place { version: number, at: cursor, backward, position: None })
    };
    // The page before one that starts after a case ends with that case: it is the page
    // before the first case after it, which is the cursor's case with the least longer
    // id (`id` + U+0000; ids are compared as bytes, and none holds a U+0000).
    let before = |after: Option<Cursor>, count: usize| {
        after.filter(|_| count > 0).map(|a| Cursor { ord: a.ord, id: format!("{}\0", a.id) })
    };
    let mut content_ids: Option<Vec<String>> = None;
    let ids_of = |bodies: &[String]| -> ApiResult<Vec<String>> {
        bodies
            .iter()
            .map(|body| casebook_canon::content_id_of_json(casebook_canon::Kind::Case, body))
            .collect::<Result<_, _>>()
            .map_err(|e| ApiError::internal(format!("a stored case is not JSON: {e}")))
    };
    let (json, next, previous) = match place {
        // Backwards (a `prev_cursor`): the page before the cursor's case.
        Some(place) if place.backward => {
            let page = reader.store.page_before(&path.dataset, number, &select, &place.at, size).await?;
            if query.content_ids {
                content_ids = Some(ids_of(&page.bodies)?);
            }
            (page.bodies.join(",").into_bytes(), page.next, page.previous)
        }
        // With content ids: the bodies one by one, each hashed.
        place if query.content_ids => {
            let after = place.map(|p| p.at);
            let page = reader.store.page(&path.dataset, number, &select, after.as_ref(), size).await?;
            content_ids = Some(ids_of(&page.bodies)?);
            let previous = before(after, page.bodies.len());
            (page.bodies.join(",").into_bytes(), page.next, previous)
        }
        place => {
            let after = place.map(|p| p.at);
            let page = reader.store.page_json(&path.dataset, number, &select, after.as_ref(), size).await?;
            let previous = before(after, page.count);
            (page.json, page.next, previous)
        }
    };
    // The bodies are the stored native JSON: they go out as they are, not parsed and written again.
    let mut out = Vec::with_capacity(256 + json.len());
    out.extend_from_slice(format!("{{\"version\":{number},\"cases\":[").as_bytes());
    out.extend_from_slice(&json);
    out.push(b']');
    if let Some(ids) = content_ids {
        out.extend_from_slice(b",\"content_ids\":");
        out.extend_from_slice(&serde_json::to_vec(&ids).unwrap_or_default());
    }
    if let Some(next) = next {
        out.extend_from_slice(format!(",\"next_cursor\":\"{}\"", at(next, false)).as_bytes());
    }
    if let Some(previous) = previous {
        out.extend_from_slice(format!(",\"prev_cursor\":\"{}\"", at(previous, true)).as_bytes());
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

/// [`page`] in the order of `sort`, by keyset cursors that keep it.
async fn sorted_page(
    reader: &Reader,
    path: &VersionPath,
    select: &casebook_store::Select,
    sort: &casebook_store::Sort,
    cursor_text: Option<&str>,
    size: usize,
) -> ApiResult<Response> {
    let sort_text = sort.text();
    let place = match cursor_text {
        Some(text) => Some(cursor::decode_sorted_for(&reader.store, &path.dataset, &sort_text, text).await?),
        None => None,
    };
    let number = match &place {
        Some(place) => {
            let v = place.version;
            if path.version != "latest" && path.version != format!("v{v}") {
                let version = resolve(&reader.store, &path.dataset, &path.version).await?;
                if version.number != v {
                    return Err(ApiError::bad_request(format!(
                        "`cursor` walks v{v}, not `{}`: continue at versions/v{v}, or start again without a cursor",
                        path.version
                    )));
                }
            }
            v
        }
        None => resolve(&reader.store, &path.dataset, &path.version).await?.number,
    };
    let seek = place.as_ref().map(|p| &p.seek);
    let page = reader.store.page_sorted(&path.dataset, number, select, sort, seek, size).await?;
    let at = |key: casebook_store::SortKey, backward: bool| {
        let seek = casebook_store::SortSeek { key, backward };
        cursor::encode_sorted(&cursor::SortedPlace { version: number, sort: sort_text.clone(), seek, position: None })
    };
    let json = page.bodies.join(",");
    let mut out = Vec::with_capacity(256 + json.len());
    out.extend_from_slice(format!("{{\"version\":{number},\"cases\":[").as_bytes());
    out.extend_from_slice(json.as_bytes());
    out.push(b']');
    if let Some(next) = page.next {
        out.extend_from_slice(format!(",\"next_cursor\":\"{}\"", at(next, false)).as_bytes());
    }
    if let Some(previous) = page.previous {
        out.extend_from_slice(format!(",\"prev_cursor\":\"{}\"", at(previous, true)).as_bytes());
    }
    out.push(b'}');
    Ok(([(CONTENT_TYPE, "application/json")], out).into_response())
}
