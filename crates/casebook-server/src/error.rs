//! The one error type of the API: a status, a stable code, a message, the diagnostics behind it
//! (the same `Diagnostic`s the command line prints), and the request's id, rendered as JSON:
//!
//! ```json
//! {"error": {"code": "not-found", "message": "…", "diagnostics": [], "request_id": "…"}}
//! ```

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use casebook_model::Diagnostic;
use casebook_store::StoreError;
use serde::Serialize;

tokio::task_local! {
    /// The id of the request being served (`x-request-id`), for error bodies and logs.
    pub(crate) static REQUEST_ID: String;
}

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorDetail,
}

/// The body of every error answer, `{"error": {…}}`: what the routes' OpenAPI operations name,
/// so that the document describes the answer as sent.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What an error answer says (inside [`ErrorBody`]).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable: `not-found`, `no-route`, `method-not-allowed`, `unauthorized`, `forbidden`,
    /// `bad-request`, `invalid-filter`, `invalid-input`, `conflict`, `merge-conflict`,
    /// `too-large`, `timeout`, `unavailable`, `internal`.
    pub code: &'static str,
    pub message: String,
    /// Problems located in the input (file line and column, or column in a filter).
    #[schema(value_type = Vec<Object>)]
    pub diagnostics: Vec<Diagnostic>,
    /// The current head, on a `conflict` or a `merge-conflict`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<u64>,
    /// On a `merge-conflict`: the ids of the cases changed both in the request and on the head
    /// since its base, in the order found.
    /// (Boxed: every error answer carries the field, few have ids in it.)
    #[serde(skip_serializing_if = "no_ids")]
    #[schema(value_type = Vec<String>)]
    pub conflicts: Box<Vec<String>>,
    pub request_id: String,
}

// serde's predicate takes a reference to the field's own type.
#[allow(clippy::borrowed_box)]
fn no_ids(ids: &Box<Vec<String>>) -> bool {
    ids.is_empty()
}

/// [`ErrorBody`] without taking the detail out of the error.
#[derive(Serialize)]
struct Envelope<'a> {
    error: &'a ErrorDetail,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        let request_id = REQUEST_ID.try_with(Clone::clone).unwrap_or_default();
        Self {
            status,
            body: ErrorDetail {
                code,
                message: message.into(),
                diagnostics: Vec::new(),
                head: None,
                conflicts: Box::default(),
                request_id,
            },
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad-request", message)
    }

    pub fn with_diagnostics(mut self, diagnostics: Vec<Diagnostic>) -> Self {
        self.body.diagnostics = diagnostics;
        self
    }

    /// An error of the server's own: logged whole, told to the client by request id.
    pub fn internal(what: impl std::fmt::Display) -> Self {
        tracing::error!(error = %what, "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to answer: its log says why, under this request's id",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(Envelope { error: &self.body })).into_response();
        if let Ok(value) = self.body.request_id.parse() {
            response.headers_mut().insert("x-request-id", value);
        }
        response
    }
}

impl From<StoreError> for ApiError {
    /// The store's own words where they concern the request (they name only the key's
    /// project: a store handle sees no other); the server's failures are logged, not shown.
    fn from(err: StoreError) -> Self {
        match &err {
            // The store's hint for an empty project speaks of `casebook import`; a client pushes.
            StoreError::NoDataset(name, hint) if hint.contains("no datasets yet") => Self::not_found(format!(
                "no dataset named `{name}`; the project has no datasets yet (`casebook push --dataset NAME FILE` adds one)"
            )),
            StoreError::NoDataset(..)
            | StoreError::NoVersion { .. }
            | StoreError::NoRun(_)
            | StoreError::NoCase { .. } => Self::not_found(err.to_string()),
            StoreError::Ambiguous { .. }
            | StoreError::AmbiguousRun(..)
            | StoreError::BadHash(_)
            | StoreError::BadProject(_)
            | StoreError::BadName(_) => Self::bad_request(err.to_string()),
            StoreError::RunExists(_) => Self::new(StatusCode::CONFLICT, "conflict", err.to_string()),
            StoreError::Conflict { head, .. } => {
                let mut e = Self::new(StatusCode::CONFLICT, "conflict", err.to_string());
                e.body.head = Some(*head);
                e
            }
            StoreError::TooLong(_)
            | StoreError::UnreadSeedFile { .. }
            | StoreError::Cancelled
            | StoreError::NoneSelected { .. }
            | StoreError::DuplicateId(_) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-input", err.to_string())
            }
            _ => Self::internal(err),
        }
    }
}

impl From<casebook_filter::FilterError> for ApiError {
    fn from(err: casebook_filter::FilterError) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid-filter", format!("invalid `where`: {}", err.message))
            .with_diagnostics(vec![Diagnostic {
                severity: casebook_model::Severity::Error,
                code: casebook_model::Code::InvalidValue,
                message: err.message.clone(),
                file: "where".into(),
                line: err.line as u64,
                column: err.column as u64,
                pointer: Some(String::new()),
                path: None,
                hint: err.hint.clone(),
                case: None,
                line_offset: None,
            }])
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
