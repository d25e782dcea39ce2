//! The server itself: health, the OpenAPI document, and the projects a key sees.

use crate::extract::Json;
use axum::extract::State;
use axum::response::IntoResponse;

use crate::AppState;
use crate::api::{Health, Project};
use crate::auth::Reader;
use crate::error::ErrorBody;

/// How long `/healthz` waits for the store: a store that does not answer (PostgreSQL down or
/// unreachable) is reported as such within about a second, not after the pool's own timeout.
const HEALTH_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the server is up and its store answers. Needs no key.
#[utoipa::path(get, path = "/healthz", tag = "server",
    responses((status = 200, body = Health), (status = 503, body = ErrorBody)))]
pub async fn healthz(State(state): State<AppState>) -> axum::response::Response {
    let checked = tokio::time::timeout(HEALTH_WAIT, state.store.projects()).await;
    match checked {
        Ok(Ok(_)) => Json(Health { status: "ok".into(), version: env!("CARGO_PKG_VERSION").into() }).into_response(),
        Err(_) => crate::ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("the store did not answer within {} s", HEALTH_WAIT.as_secs()),
        )
        .into_response(),
        Ok(Err(err)) => {
            let mut e = crate::ApiError::internal(err);
            e.status = axum::http::StatusCode::SERVICE_UNAVAILABLE;
            e.into_response()
        }
    }
}

/// This document. Needs no key.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "server",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json")))]
pub async fn openapi(State(state): State<AppState>) -> impl IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], state.document.get().cloned().unwrap_or_default())
}

/// The projects the key may use: its own.
#[utoipa::path(get, path = "/api/v1/projects", tag = "projects", security(("bearer" = [])),
    responses((status = 200, body = Vec<Project>), (status = 401, body = ErrorBody)))]
pub async fn projects(reader: Reader) -> Json<Vec<Project>> {
    Json(vec![Project { name: reader.access.project }])
}
