//! The routes, one module per resource. [`all`] is the only place routes are added, each with
//! its OpenAPI operation.

mod capture;
mod cases;
mod datasets;
mod meta;
mod otlp;
mod purge;
mod review;
mod runs;
mod transfer;

pub(crate) use transfer::{ExportQuery, export_version};

use casebook_store::{AnyStore, Ref, Store, VersionInfo};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::error::{ApiError, ApiResult};

pub(crate) fn all(router: OpenApiRouter<AppState>) -> OpenApiRouter<AppState> {
    router
        .routes(routes!(meta::healthz))
        .routes(routes!(meta::openapi))
        .routes(routes!(meta::projects))
        .routes(routes!(datasets::list))
        .routes(routes!(datasets::one))
        .routes(routes!(datasets::log))
        .routes(routes!(datasets::version))
        .routes(routes!(datasets::tags))
        .routes(routes!(datasets::set_tag, datasets::delete_tag))
        .routes(routes!(datasets::diff))
        .routes(routes!(datasets::history))
        .routes(routes!(cases::page))
        .routes(routes!(cases::count))
        .routes(routes!(cases::one))
        .routes(routes!(transfer::import))
        .routes(routes!(capture::capture))
        .routes(routes!(review::review))
        .routes(routes!(otlp::traces))
        .routes(routes!(otlp::project_traces))
        .routes(routes!(otlp::logs))
        .routes(routes!(otlp::project_logs))
        .routes(routes!(otlp::pending))
        .routes(routes!(transfer::export))
        .routes(routes!(runs::list))
        .routes(routes!(runs::one))
        .routes(routes!(runs::results))
        .routes(routes!(runs::begin))
        .routes(routes!(runs::save_results))
        .routes(routes!(runs::finish))
        .routes(routes!(runs::outputs))
        .routes(routes!(purge::purge))
}

/// The time now (RFC 3339), as the server's clock says.
/// How the API and the console name who wrote something, the one form: `NAME (key ID)` when
/// the writer gave a name (the CLI's `CASEBOOK_AUTHOR`, sent as `x-casebook-author`), `key ID`
/// when not (the console, a client without a name).
pub(crate) fn author_of(name: Option<&str>, key: &str) -> String {
    match name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => format!("{name} (key {key})"),
        None => format!("key {key}"),
    }
}

/// An author as stored, in the one form of [`author_of`]: versions written before it kept
/// `key:ID`, which is shown as `key ID`; every other text is shown as it is. What the console
/// and the API's answers (log, versions, events) print.
pub(crate) fn shown_author(stored: &str) -> String {
    match stored.strip_prefix("key:") {
        Some(key) if !key.is_empty() && !key.contains(char::is_whitespace) => author_of(None, key),
        _ => stored.to_owned(),
    }
}

pub(crate) fn now() -> String {
    format!("{:.0}", jiff::Timestamp::now())
}

/// Any path no route serves: the API's JSON error under `/api/`, the console's page elsewhere.
pub(crate) async fn no_route(uri: axum::http::Uri) -> axum::response::Response {
    use axum::response::IntoResponse;
    if !uri.path().starts_with("/api/") {
        return crate::console::not_found(uri.path());
    }
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "no-route",
        format!("no such resource `{}`: `/api/v1/openapi.json` lists them", uri.path()),
    )
    .into_response()
}

pub(crate) async fn no_method(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        format!("`{method}` is not served at `{}`: `/api/v1/openapi.json` lists what is", uri.path()),
    )
}

/// The version a path's `{version}` names: `v3`, `latest`, a content id or a prefix of one, or a
/// tag (see `casebook_store::names`).
pub(crate) async fn resolve(store: &AnyStore, dataset: &str, text: &str) -> ApiResult<VersionInfo> {
    let reference: Ref = text.parse().map_err(|e: String| ApiError::bad_request(e))?;
    Ok(store.resolve(dataset, &reference).await?)
}

/// The cases a `where=` filter selects (all of them without one); errors located in it.
pub(crate) async fn select(filter: Option<String>) -> ApiResult<casebook_store::Select> {
    let Some(text) = filter.filter(|f| !f.trim().is_empty()) else {
        return Ok(casebook_store::Select::all());
    };
    let filter = parse_filter(text).await.map_err(ApiError::internal)??;
    Ok(casebook_store::Select { filter: Some(filter), limit: None })
}

/// Parses a filter on a thread of the blocking pool: parsing a long one (up to
/// `casebook_filter`'s 128 KiB) is CPU work that must not hold up the threads answering other
/// requests. Fails only if the parser panicked.
pub(crate) async fn parse_filter(
    text: String,
) -> Result<Result<casebook_filter::Filter, casebook_filter::FilterError>, tokio::task::JoinError> {
    tokio::task::spawn_blocking(move || casebook_filter::Filter::parse(&text)).await
}

/// The answer to a request whose body could not be read: 408 when the client sent nothing of
/// it for too long (`Limits::body_idle`), else 400; `outcome` ends the message (what was not done).
pub(crate) fn unread_body(err: &axum::Error, outcome: &str) -> crate::error::ApiError {
    let timed_out = std::iter::successors(Some(err as &dyn std::error::Error), |e| e.source())
        .any(|e| e.is::<tower_http::timeout::TimeoutError>());
    if timed_out {
        crate::error::ApiError::new(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!("the client sent nothing of the body for too long{outcome}"),
        )
    } else {
        crate::error::ApiError::bad_request(format!("the body could not be read: {err}{outcome}"))
    }
}

/// Path parameters shared by the routes of a dataset.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct DatasetPath {
    /// The project (the API key's).
    #[allow(dead_code)] // `auth` checks it against the key's project
    pub project: String,
    /// The dataset's name (percent-encoded where it needs to be). A new dataset's name is 1 to
    /// 128 bytes, without `/`, `@`, control, bidirectional or invisible characters, and not `.`
    /// or `..`; names are compared in Unicode NFC.
    pub dataset: String,
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct VersionPath {
    #[allow(dead_code)] // `auth` checks it against the key's project
    pub project: String,
    pub dataset: String,
    /// `v3`, `latest`, the version's content id or a prefix of it (8 hexadecimal digits or
    /// more), or a tag, in that order.
    pub version: String,
}
