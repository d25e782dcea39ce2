//! Datasets of a project: the list, one dataset, its log, versions, tags, diffs and case
//! histories.

use crate::extract::Json;
use crate::extract::{Path, Query};
use casebook_store::Store;
use serde::Deserialize;

use super::{DatasetPath, VersionPath, resolve};
use crate::api::{Dataset, DiffOut, DiffTotalsOut, Event, History, Log, RevisionOut, Tag, TagRequest, Version};
use crate::auth::{Reader, Writer};
use crate::error::{ApiError, ApiResult, ErrorBody};

/// The project's datasets, by name.
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets", operation_id = "datasets", tag = "datasets", security(("bearer" = [])),
    params(("project" = String, Path, description = "The project (the API key's)")),
    responses((status = 200, body = Vec<Dataset>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list(reader: Reader, Path(_project): Path<String>) -> ApiResult<Json<Vec<Dataset>>> {
    Ok(Json(reader.store.datasets().await?.into_iter().map(Dataset::from).collect()))
}

/// One dataset: its head and header.
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}", operation_id = "dataset", tag = "datasets",
    security(("bearer" = [])), params(DatasetPath),
    responses((status = 200, body = Dataset), (status = 404, body = ErrorBody)))]
pub async fn one(reader: Reader, Path(path): Path<DatasetPath>) -> ApiResult<Json<Dataset>> {
    let store = &reader.store;
    let header = store.header(&path.dataset).await?;
    let head = store.resolve(&path.dataset, &casebook_store::Ref::Latest).await.ok();
    Ok(Json(Dataset::from(casebook_store::DatasetInfo {
        name: path.dataset,
        head: head.as_ref().map_or(0, |v| v.number),
        cases: head.as_ref().map_or(0, |v| v.cases),
        header,
    })))
}

/// The dataset's versions, oldest first, and its other events (tags, header edits).
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/versions", tag = "versions",
    security(("bearer" = [])), params(DatasetPath),
    responses((status = 200, body = Log), (status = 404, body = ErrorBody)))]
pub async fn log(reader: Reader, Path(path): Path<DatasetPath>) -> ApiResult<Json<Log>> {
    let versions = reader.store.versions(&path.dataset).await?.into_iter().map(Version::from).collect();
    let events = reader
        .store
        .events(&path.dataset)
        .await?
        .into_iter()
        .map(|e| Event { time: e.time, author: super::shown_author(&e.author), kind: e.kind, detail: e.detail })
        .collect();
    Ok(Json(Log { versions, events }))
}

/// One version.
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/versions/{version}", tag = "versions",
    security(("bearer" = [])), params(VersionPath),
    responses((status = 200, body = Version), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn version(reader: Reader, Path(path): Path<VersionPath>) -> ApiResult<Json<Version>> {
    Ok(Json(resolve(&reader.store, &path.dataset, &path.version).await?.into()))
}

/// The dataset's tags and the versions they name.
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/tags", tag = "versions",
    security(("bearer" = [])), params(DatasetPath),
    responses((status = 200, body = Vec<Tag>), (status = 404, body = ErrorBody)))]
pub async fn tags(reader: Reader, Path(path): Path<DatasetPath>) -> ApiResult<Json<Vec<Tag>>> {
    let tags = reader.store.tags(&path.dataset).await?;
    Ok(Json(tags.into_iter().map(|(name, version)| Tag { name, version, unchanged: false }).collect()))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TagPath {
    #[allow(dead_code)] // `auth` checks it against the key's project
    pub project: String,
    pub dataset: String,
    /// The tag's name (`prod`): 1 to 128 bytes, without `/`, `@`, control, bidirectional or
    /// invisible characters, not `.` or `..`, and nothing a version reference reads as
    /// something else (`latest`, `v3`, a number, 8 or more hexadecimal digits). Compared in
    /// Unicode NFC.
    pub tag: String,
}

/// Names a version (moving the tag if it names another); the move is logged. A tag that already
/// names the version is left as it is (`unchanged`), and nothing is logged.
#[utoipa::path(put, path = "/api/v1/projects/{project}/datasets/{dataset}/tags/{tag}", tag = "versions",
    security(("bearer" = ["write"])), params(TagPath), request_body = TagRequest,
    responses((status = 200, body = Tag), (status = 400, body = ErrorBody, description = "The tag's name is not allowed"),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn set_tag(
    writer: Writer,
    headers: axum::http::HeaderMap,
    Path(path): Path<TagPath>,
    Json(body): Json<TagRequest>,
) -> ApiResult<Json<Tag>> {
    // The name first: a refused tag is refused whatever version it would name.
    let name = casebook_store::names::tag_name(&path.tag).map_err(casebook_store::StoreError::from)?;
    let version = resolve(&writer.store, &path.dataset, &body.version).await?;
    let author = super::transfer::author(&headers, &writer);
    let tagged = writer.store.tag(&path.dataset, version.number, &name, &author, &crate::routes::now()).await?;
    Ok(Json(Tag { name, version: version.number, unchanged: tagged == casebook_store::Tagged::Already }))
}

/// Removes a tag; the removal is logged. Gives the tag and the version it named.
#[utoipa::path(delete, path = "/api/v1/projects/{project}/datasets/{dataset}/tags/{tag}", tag = "versions",
    security(("bearer" = ["write"])), params(TagPath),
    responses((status = 200, body = Tag), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such dataset, or the dataset has no such tag")))]
pub async fn delete_tag(
    writer: Writer,
    headers: axum::http::HeaderMap,
    Path(path): Path<TagPath>,
) -> ApiResult<Json<Tag>> {
    let author = super::transfer::author(&headers, &writer);
    let version = writer.store.untag(&path.dataset, &path.tag, &author, &crate::routes::now()).await?;
    let name = casebook_store::names::nfc(&path.tag).into_owned();
    Ok(Json(Tag { name, version, unchanged: false }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiffQuery {
    /// The older version (`v1`, a tag, …); a `cursor` names it itself.
    pub from: Option<String>,
    /// The newer version; the head if absent.
    pub to: Option<String>,
    /// Pages the diff: at most this many cases of each list (at most 1,000), the totals, and a
    /// cursor per list that goes on (`next`). Without `limit` or `cursor`, the whole diff.
    pub limit: Option<usize>,
    /// The next page of one list, from a `next` cursor of the page before.
    pub cursor: Option<String>,
}

/// Cases of each list a page of a diff holds at most.
const DIFF_LIMIT: usize = 1000;
/// … unless `limit` says fewer; with a `cursor` and no `limit`.
const DIFF_DEFAULT: usize = 100;

/// What changed between two versions: added, removed, modified (with field changes) and moved
/// cases, with how many of each. Paged with `limit` and `cursor` (each list in case id order):
/// the first page holds the totals and up to `limit` cases of each list; a list's `next`
/// cursor gives its next page alone.
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/diff", tag = "versions",
    security(("bearer" = [])), params(DatasetPath, DiffQuery),
    responses((status = 200, body = DiffOut), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn diff(
    reader: Reader,
    Path(path): Path<DatasetPath>,
    Query(query): Query<DiffQuery>,
) -> ApiResult<Json<DiffOut>> {
    use casebook_store::{DiffFrom, DiffList};
    let store = &reader.store;
    let limit = match query.limit {
        Some(0) => return Err(ApiError::bad_request("`limit` is 0: give at least 1 (at most 1000)")),
        Some(n) if n > DIFF_LIMIT => {
            return Err(ApiError::bad_request(format!("`limit` is {n}: at most {DIFF_LIMIT} cases a list a page")));
        }
        Some(n) => n,
        None => DIFF_DEFAULT,
    };
    let page = |list: DiffList, cases: Vec<casebook_store::ModifiedCase>, out: &mut DiffOut| match list {
        DiffList::Added => out.added = cases.into_iter().map(|c| c.id).collect(),
        DiffList::Removed => out.removed = cases.into_iter().map(|c| c.id).collect(),
        DiffList::Moved => out.moved = cases.into_iter().map(|c| c.id).collect(),
        DiffList::Modified => {
            out.modified = cases.iter().map(|m| serde_json::to_value(m).unwrap_or_default()).collect()
        }
    };
    let empty = |from: u64, to: u64| DiffOut {
        from,
        to,
        added: Vec::new(),
        removed: Vec::new(),
        modified: Vec::new(),
        moved: Vec::new(),
        totals: None,
        next: Default::default(),
    };
    if let Some(cursor) = query.cursor.as_deref() {
        let (from, to, list, after) = crate::cursor::decode_diff(cursor)?;
        for number in [from, to] {
            resolve(store, &path.dataset, &format!("v{number}")).await.map_err(|_| {
                ApiError::bad_request(format!(
                    "`cursor` is not valid for `{}`: it names v{number}, which the dataset does not have; start again without a cursor",
                    path.dataset
                ))
            })?;
        }
        let found = store.diff_page(&path.dataset, from, to, list, DiffFrom::After(&after), limit).await?;
        let mut out = empty(from, to);
        if let Some(last) = &found.more {
            *out.next.of(list) = Some(crate::cursor::encode_diff(from, to, list, last));
        }
        page(list, found.cases, &mut out);
        return Ok(Json(out));
    }
    let Some(from_text) = query.from.as_deref() else {
        return Err(ApiError::bad_request("the query needs the parameter `from`"));
    };
    let from = resolve(store, &path.dataset, from_text).await?;
    let to = resolve(store, &path.dataset, query.to.as_deref().unwrap_or("latest")).await?;
    let (from, to) = (from.number, to.number);
    if query.limit.is_none() {
        let diff = store.diff(&path.dataset, from, to).await?;
        let totals = DiffTotalsOut {
            added: diff.added.len() as u64,
            removed: diff.removed.len() as u64,
            modified: diff.modified.len() as u64,
            moved: diff.moved.len() as u64,
        };
        let modified = diff.modified.iter().map(|m| serde_json::to_value(m).unwrap_or_default()).collect();
        return Ok(Json(DiffOut {
            from,
            to,
            added: diff.added,
            removed: diff.removed,
            modified,
            moved: diff.moved,
            totals: Some(totals),
            next: Default::default(),
        }));
    }
    let totals = store.diff_totals(&path.dataset, from, to).await?;
    let mut out = empty(from, to);
    out.totals = Some(totals.into());
    for list in DiffList::ALL {
        if totals.of(list) == 0 {
            continue;
        }
        let found = store.diff_page(&path.dataset, from, to, list, DiffFrom::Start, limit).await?;
        if let Some(last) = &found.more {
            *out.next.of(list) = Some(crate::cursor::encode_diff(from, to, list, last));
        }
        page(list, found.cases, &mut out);
    }
    Ok(Json(out))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CasePath {
    #[allow(dead_code)] // `auth` checks it against the key's project
    pub project: String,
    pub dataset: String,
    /// The case's id.
    pub case: String,
}

/// The contents a case has had across versions.
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/cases/{case}/history", tag = "cases",
    security(("bearer" = [])), params(CasePath),
    responses((status = 200, body = History), (status = 404, body = ErrorBody)))]
pub async fn history(reader: Reader, Path(path): Path<CasePath>) -> ApiResult<Json<History>> {
    let revisions = reader.store.history(&path.dataset, &path.case).await?;
    if revisions.is_empty() {
        return Err(ApiError::not_found(format!("dataset `{}` never had a case `{}`", path.dataset, path.case)));
    }
    Ok(Json(History { case: path.case, revisions: revisions.into_iter().map(RevisionOut::from).collect() }))
}
