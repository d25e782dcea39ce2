//! What every console page shares: the frame around it (who is signed in, where the page is),
//! rendering, links, and failures shown as pages.

use askama::Template;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use axum::response::{IntoResponse, Response};
use casebook_store::StoreError;

use super::session::Viewer;
/// One path segment, percent-encoded.
pub use crate::path_segment as seg;

/// The frame of a page: the signed-in key, the form token for its sign-out button, and the
/// trail of links to where the page is.
pub struct Chrome {
    pub title: String,
    pub signed_in: Option<SignedIn>,
    pub trail: Vec<(String, String)>,
}

pub struct SignedIn {
    pub project: String,
    pub key: String,
    pub scope: &'static str,
    pub csrf: String,
}

impl Chrome {
    pub fn new(viewer: &Viewer, title: impl Into<String>) -> Self {
        let project = viewer.access.project.clone();
        Self {
            title: title.into(),
            trail: vec![(project.clone(), project_url(&project))],
            signed_in: Some(SignedIn {
                project,
                key: viewer.access.key.clone(),
                scope: if viewer.can_write() { "write" } else { "read" },
                csrf: viewer.csrf.clone(),
            }),
        }
    }

    pub fn anonymous(title: impl Into<String>) -> Self {
        Self { title: title.into(), signed_in: None, trail: Vec::new() }
    }

    /// Adds a step to the trail.
    pub fn at(mut self, name: impl Into<String>, url: impl Into<String>) -> Self {
        self.trail.push((name.into(), url.into()));
        self
    }
}

/// A rendered page. Pages show a person's data: no cache keeps them.
pub fn html(template: &impl Template) -> Response {
    match template.render() {
        Ok(text) => ([(CONTENT_TYPE, "text/html; charset=utf-8"), (CACHE_CONTROL, "no-store")], text).into_response(),
        Err(err) => Failure::internal(err).into_response(),
    }
}

/// A 303 to `to` (after a form is sent, so a reload does not send it again).
pub fn see_other(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to)]).into_response()
}

/// A query value, percent-encoded.
pub fn query(text: &str) -> String {
    seg(text)
}

/// A count with thousands separators: `100,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

pub fn project_url(project: &str) -> String {
    format!("/projects/{}", seg(project))
}

pub fn dataset_url(project: &str, dataset: &str) -> String {
    format!("{}/datasets/{}", project_url(project), seg(dataset))
}

pub fn version_url(project: &str, dataset: &str, version: u64) -> String {
    format!("{}/versions/v{version}", dataset_url(project, dataset))
}

pub fn case_url(project: &str, dataset: &str, version: u64, case: &str) -> String {
    format!("{}/cases/{}", version_url(project, dataset, version), seg(case))
}

/// A page that went wrong: a status and what to do about it, or a trip to the sign-in page.
#[derive(Debug)]
pub struct Failure {
    status: StatusCode,
    message: String,
    /// Where to sign in and come back to.
    sign_in: Option<String>,
}

#[derive(Template)]
#[template(path = "failure.html")]
struct FailurePage<'a> {
    chrome: Chrome,
    status: u16,
    reason: &'a str,
    message: &'a str,
}

impl Failure {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into(), sign_in: None }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn sign_in(next: &str) -> Self {
        Self { status: StatusCode::SEE_OTHER, message: String::new(), sign_in: Some(next.to_owned()) }
    }

    /// A failure of the server's own: logged whole, shown by request id.
    pub fn internal(what: impl std::fmt::Display) -> Self {
        let api = crate::ApiError::internal(what);
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the server failed to show this page: its log says why, under request id `{}`",
                api.body.request_id
            ),
        )
    }
}

impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Self {
        crate::ApiError::from(err).into()
    }
}

impl From<crate::ApiError> for Failure {
    fn from(err: crate::ApiError) -> Self {
        Self::new(err.status, err.body.message)
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        if let Some(next) = &self.sign_in {
            return see_other(&format!("/signin?next={}", query(next)));
        }
        let page = FailurePage {
            chrome: Chrome::anonymous(self.status.canonical_reason().unwrap_or("error")),
            status: self.status.as_u16(),
            reason: self.status.canonical_reason().unwrap_or("error"),
            message: &self.message,
        };
        let text = page.render().unwrap_or_else(|_| self.message.clone());
        (self.status, [(CONTENT_TYPE, "text/html; charset=utf-8"), (CACHE_CONTROL, "no-store")], text).into_response()
    }
}

pub type PageResult = Result<Response, Failure>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_451), "1,451");
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }

    #[test]
    fn segments_keep_only_unreserved_characters() {
        assert_eq!(seg("support-v2_x.y~"), "support-v2_x.y~");
        assert_eq!(seg("a/b c?d#e%"), "a%2Fb%20c%3Fd%23e%25");
        assert_eq!(seg("café"), "caf%C3%A9");
    }
}
