//! Stored experiment runs of a project, and their results.

use axum::Json;
use axum::extract::Path;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::api::Run;
use crate::auth::Reader;
use crate::error::{ApiError, ApiResult, ErrorBody};

fn run(row: casebook_store::RunRow) -> ApiResult<Run> {
    Run::try_from(row).map_err(|e| ApiError::internal(format!("a stored run is not JSON: {e}")))
}

/// The project's runs, oldest first.
#[utoipa::path(get, path = "/api/v1/projects/{project}/runs", tag = "runs", security(("bearer" = [])),
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
#[utoipa::path(get, path = "/api/v1/projects/{project}/runs/{run}", tag = "runs", security(("bearer" = [])),
    params(RunPath), responses((status = 200, body = Run), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn one(reader: Reader, Path(path): Path<RunPath>) -> ApiResult<Json<Run>> {
    Ok(Json(run(reader.store.run(Some(&path.run)).await?)?))
}

/// A run's results in order: each case's grades, scores and errors, as the runner recorded them.
#[utoipa::path(get, path = "/api/v1/projects/{project}/runs/{run}/results", tag = "runs", security(("bearer" = [])),
    params(RunPath), responses((status = 200, description = "The results, a JSON array", content_type = "application/json"),
        (status = 404, body = ErrorBody)))]
pub async fn results(reader: Reader, Path(path): Path<RunPath>) -> ApiResult<Response> {
    let run = reader.store.run(Some(&path.run)).await?;
    let results = reader.store.run_results(&run.id).await?;
    let mut out = String::with_capacity(2 + results.iter().map(|r| r.len() + 1).sum::<usize>());
    out.push('[');
    out.push_str(&results.join(","));
    out.push(']');
    Ok(([(CONTENT_TYPE, "application/json")], out).into_response())
}
