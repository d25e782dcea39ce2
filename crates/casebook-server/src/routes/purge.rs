//! Purging cases through the server (`casebook purge` with `CASEBOOK_URL` set): keys of the
//! `admin` scope only; `casebook_store`'s purge does the rest, as on a local store.

use axum::http::HeaderMap;
use casebook_store::PurgeRequest;

use super::DatasetPath;
use crate::api::{PurgeBody, PurgeReport};
use crate::auth::Admin;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Json, Path};

/// Erases the cases named by id and those the filter selects in the head from every version of
/// the dataset: their bodies, the seed documents only they use, the results of runs on them;
/// each version id still verifies (the content ids stay as tombstones). Logged as one purge
/// event; cannot be undone. A read or write key is refused (403); an id no version held is a
/// 404 naming it, and nothing is written.
#[utoipa::path(post, path = "/api/v1/projects/{project}/datasets/{dataset}/purge", tag = "datasets",
    security(("bearer" = ["admin"])), params(DatasetPath), request_body = PurgeBody,
    responses((status = 200, body = PurgeReport, description = "The cases were purged"),
        (status = 400, body = ErrorBody), (status = 403, body = ErrorBody, description = "Not an admin key"),
        (status = 404, body = ErrorBody, description = "No such dataset or case"),
        (status = 422, body = ErrorBody)))]
pub async fn purge(
    admin: Admin,
    Path(path): Path<DatasetPath>,
    headers: HeaderMap,
    Json(body): Json<PurgeBody>,
) -> ApiResult<axum::Json<PurgeReport>> {
    let filter = body.filter.filter(|f| !f.trim().is_empty());
    if body.ids.is_empty() && filter.is_none() {
        return Err(ApiError::bad_request("name the cases to purge: `ids`, `where`, or both"));
    }
    if body.reason.trim().is_empty() {
        return Err(ApiError::bad_request("say why: `reason` is logged with the purge"));
    }
    let select = match filter {
        Some(filter) => {
            let mut select = super::select(Some(filter)).await?;
            select.limit = body.limit;
            Some(select)
        }
        None => None,
    };
    let cases = casebook_store::purge_choice(&admin.store, &path.dataset, &body.ids, select.as_ref()).await?;
    let author = headers
        .get("x-casebook-author")
        .and_then(|v| v.to_str().ok())
        .filter(|a| a.len() <= 200)
        .map_or_else(|| super::author_of(None, &admin.access.key), |a| super::author_of(Some(a), &admin.access.key));
    let request = PurgeRequest {
        dataset: path.dataset,
        cases,
        author,
        time: super::now(),
        reason: body.reason,
        full: body.rewrite.unwrap_or(true),
    };
    let outcome = admin.store.purge(&request).await?;
    Ok(axum::Json(PurgeReport::from(outcome)))
}
