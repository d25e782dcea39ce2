//! Datasets of a project: the list, one dataset, its log, versions, tags, diffs and case
//! histories.

use crate::extract::Json;
use crate::extract::{Path, Query};
use casebook_store::Store;
use serde::Deserialize;

use super::{DatasetPath, VersionPath, resolve};
use crate::api::{Dataset, DiffOut, Event, History, Log, RevisionOut, Tag, TagRequest, Version};
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
        .map(|e| Event { time: e.time, author: e.author, kind: e.kind, detail: e.detail })
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
    Ok(Json(tags.into_iter().map(|(name, version)| Tag { name, version }).collect()))
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

/// Names a version (moving the tag if it names another); the move is logged.
#[utoipa::path(put, path = "/api/v1/projects/{project}/datasets/{dataset}/tags/{tag}", tag = "versions",
    security(("bearer" = ["write"])), params(TagPath), request_body = TagRequest,
    responses((status = 200, body = Tag), (status = 400, body = ErrorBody, description = "The tag's name is not allowed"),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn set_tag(writer: Writer, Path(path): Path<TagPath>, Json(body): Json<TagRequest>) -> ApiResult<Json<Tag>> {
    // The name first: a refused tag is refused whatever version it would name.
    let name = casebook_store::names::tag_name(&path.tag).map_err(casebook_store::StoreError::from)?;
    let version = resolve(&writer.store, &path.dataset, &body.version).await?;
    let author = format!("key:{}", writer.access.key);
    writer.store.tag(&path.dataset, version.number, &name, &author, &crate::routes::now()).await?;
    Ok(Json(Tag { name, version: version.number }))
}

/// Removes a tag; the removal is logged. Gives the tag and the version it named.
#[utoipa::path(delete, path = "/api/v1/projects/{project}/datasets/{dataset}/tags/{tag}", tag = "versions",
    security(("bearer" = ["write"])), params(TagPath),
    responses((status = 200, body = Tag), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such dataset, or the dataset has no such tag")))]
pub async fn delete_tag(writer: Writer, Path(path): Path<TagPath>) -> ApiResult<Json<Tag>> {
    let author = format!("key:{}", writer.access.key);
    let version = writer.store.untag(&path.dataset, &path.tag, &author, &crate::routes::now()).await?;
    let name = casebook_store::names::nfc(&path.tag).into_owned();
    Ok(Json(Tag { name, version }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiffQuery {
    /// The older version (`v1`, a tag, …).
    pub from: String,
    /// The newer version; the head if absent.
    pub to: Option<String>,
}

/// What changed between two versions: added, removed, modified (with field changes) and moved
/// cases.
#[utoipa::path(get, path = "/api/v1/projects/{project}/datasets/{dataset}/diff", tag = "versions",
    security(("bearer" = [])), params(DatasetPath, DiffQuery),
    responses((status = 200, body = DiffOut), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn diff(
    reader: Reader,
    Path(path): Path<DatasetPath>,
    Query(query): Query<DiffQuery>,
) -> ApiResult<Json<DiffOut>> {
    let from = resolve(&reader.store, &path.dataset, &query.from).await?;
    let to = resolve(&reader.store, &path.dataset, query.to.as_deref().unwrap_or("latest")).await?;
    let diff = reader.store.diff(&path.dataset, from.number, to.number).await?;
    let modified = diff.modified.iter().map(|m| serde_json::to_value(m).unwrap_or_default()).collect();
    Ok(Json(DiffOut {
        from: from.number,
        to: to.number,
        added: diff.added,
        removed: diff.removed,
        modified,
        moved: diff.moved,
    }))
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
