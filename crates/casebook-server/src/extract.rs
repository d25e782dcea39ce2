//! The extractors every route takes its query, form, JSON body and path from: axum's, with
//! their refusals said as the server says everything else. Under `/api/` that is the JSON
//! [`ApiError`] with the request's id, naming the parameter or the place in the body; in the
//! console, a page. axum's own extractors answer `text/plain`, so routes take these instead
//! (and [`plain_errors`] turns any plain-text refusal left into the same shapes).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A refused request, answered as the part of the server it was sent to answers.
#[derive(Debug)]
pub struct Refused {
    error: ApiError,
    console: bool,
}

impl Refused {
    fn new(uri: &Uri, error: ApiError) -> Self {
        Self { error, console: !uri.path().starts_with("/api/") }
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        if self.console { crate::console::failure(self.error) } else { self.error.into_response() }
    }
}

/// `serde_path_to_error`'s path as a parameter's name: `limit`, `meta.a`; empty at the top.
fn place(path: &serde_path_to_error::Path) -> String {
    let text = path.to_string();
    if text == "." { String::new() } else { text }
}

/// A query string's parameters (`?limit=20&where=…`).
pub struct Query<T>(pub T);

/// Deserializes `a=1&b=2` text, the refusal naming the parameter at fault.
fn from_pairs<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, ApiError> {
    let pairs = serde_urlencoded::Deserializer::new(form_urlencoded::parse(text.as_bytes()));
    serde_path_to_error::deserialize(pairs).map_err(|err| {
        let at = place(err.path());
        let inner = err.into_inner().to_string();
        let message = if at.is_empty() {
            // A missing parameter is said by serde as "missing field `from`".
            match inner.strip_prefix("missing field ") {
                Some(name) => format!("the {what} needs the parameter {name}"),
                None => format!("the {what} is not valid: {inner}"),
            }
        } else {
            format!("the {what} parameter `{at}` is not valid: {inner}")
        };
        ApiError::bad_request(message)
    })
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        from_pairs(parts.uri.query().unwrap_or_default(), "query").map(Query).map_err(|e| Refused::new(&parts.uri, e))
    }
}

/// A form sent as `application/x-www-form-urlencoded`.
pub struct Form<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Form<T> {
    type Rejection = Refused;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let uri = request.uri().clone();
        let bytes = Bytes::from_request(request, state).await.map_err(|e| Refused::new(&uri, unread_body(&e)))?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| Refused::new(&uri, ApiError::bad_request("the form is not UTF-8 text")))?;
        from_pairs(text, "form").map(Form).map_err(|e| Refused::new(&uri, e))
    }
}

/// The error for a body that could not be read: larger than the limit, or cut off.
fn unread_body(err: &axum::extract::rejection::BytesRejection) -> ApiError {
    if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too-large", "the body is larger than this route takes")
    } else {
        ApiError::bad_request(format!("the body could not be read: {}", lowercase_first(&err.body_text())))
    }
}

/// A JSON body, read whole (bounded by the router's body limit). As a response, JSON.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = Refused;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let uri = request.uri().clone();
        let bytes = Bytes::from_request(request, state).await.map_err(|e| Refused::new(&uri, unread_body(&e)))?;
        from_json(&bytes).map(Json).map_err(|e| Refused::new(&uri, e))
    }
}

/// Deserializes a JSON body, the refusal naming the field at fault and the line and column.
pub(crate) fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut reader).map_err(|err| {
        let at = place(err.path());
        let inner = err.into_inner();
        let message = if !inner.is_data() {
            format!("the body is not valid JSON: {inner}")
        } else if at.is_empty() {
            format!("the body is not valid for this request: {inner}")
        } else {
            format!("the body's `{at}` is not valid: {inner}")
        };
        let status = if inner.is_data() { StatusCode::UNPROCESSABLE_ENTITY } else { StatusCode::BAD_REQUEST };
        let code = if inner.is_data() { "invalid-input" } else { "bad-request" };
        ApiError::new(status, code, message)
    })?;
    reader.end().map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
    Ok(value)
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// The parameters of a route's path.
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        use axum::extract::path::ErrorKind;
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(PathRejection::FailedToDeserializePathParams(err)) => {
                let message = match err.kind() {
                    ErrorKind::InvalidUtf8InPathParam { key } => {
                        format!("the path's `{key}` is not UTF-8 text once percent-decoded")
                    }
                    ErrorKind::ParseErrorAtKey { key, value, expected_type } => {
                        format!("the path's `{key}` is `{value}`, not {expected_type}")
                    }
                    other => format!("the path is not valid: {}", lowercase_first(&other.to_string())),
                };
                Err(Refused::new(&parts.uri, ApiError::bad_request(message)))
            }
            Err(other) => Err(Refused::new(&parts.uri, ApiError::internal(other.body_text()))),
        }
    }
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| c.to_lowercase().chain(chars).collect())
}

/// The largest plain-text refusal [`plain_errors`] reads to say it again.
const PLAIN_MAX: usize = 4096;

/// Says any refusal still answered as `text/plain` (an extractor or layer of axum's that no
/// route wraps: a multipart body, a body limit) as the server says the others: JSON under
/// `/api/`, a page in the console. So no request, however bad, gets a bare text answer.
pub(crate) async fn plain_errors(request: Request, next: Next) -> Response {
    let uri = request.uri().clone();
    let response = next.run(request).await;
    let status = response.status();
    let plain =
        response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/plain"));
    if !plain || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), PLAIN_MAX).await.unwrap_or_default();
    let message = lowercase_first(String::from_utf8_lossy(&text).trim());
    let error = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(status, "too-large", message),
        StatusCode::REQUEST_TIMEOUT => ApiError::new(status, "timeout", message),
        s if s.is_server_error() => ApiError::internal(message),
        _ => ApiError::new(status, "bad-request", message),
    };
    Refused::new(&uri, error).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct Page {
        #[allow(dead_code)]
        limit: Option<usize>,
        #[allow(dead_code)]
        from: String,
    }

    #[test]
    fn refusals_name_the_parameter() {
        let err = from_pairs::<Page>("from=v1&limit=-1", "query").unwrap_err();
        assert_eq!(err.body.message, "the query parameter `limit` is not valid: invalid digit found in string");
        let err = from_pairs::<Page>("limit=3", "query").unwrap_err();
        assert_eq!(err.body.message, "the query needs the parameter `from`");
    }

    #[test]
    fn json_refusals_name_the_field_and_place() {
        #[derive(serde::Deserialize, Debug)]
        struct Tag {
            #[allow(dead_code)]
            version: String,
        }
        let err = from_json::<Tag>(br#"{"version": 3}"#).unwrap_err();
        assert_eq!(err.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            err.body.message,
            "the body's `version` is not valid: invalid type: integer `3`, expected a string at line 1 column 13"
        );
        let err = from_json::<Tag>(b"{\"version\": \"v1\"} x").unwrap_err();
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
    }
}
