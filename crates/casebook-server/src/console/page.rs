//! What every console page shares: the frame around it (who is signed in, where the page is),
//! rendering, links, and failures shown as pages.

use askama::Template;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use axum::response::{IntoResponse, Response};
use casebook_store::{Access, StoreError};

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
        Self::signed_in(&viewer.access, &viewer.csrf, title)
    }

    /// The frame of a signed-in key's page, from what its session holds (an error page has no
    /// [`Viewer`] yet still shows who is signed in).
    pub fn signed_in(access: &Access, csrf: &str, title: impl Into<String>) -> Self {
        let project = access.project.clone();
        Self {
            title: title.into(),
            trail: vec![(project.clone(), project_url(&project))],
            signed_in: Some(SignedIn {
                project,
                key: access.key.clone(),
                scope: access.scope.as_str(),
                csrf: csrf.to_owned(),
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

/// A count with thousands separators: `100,000` (see [`number`]).
pub fn thousands(n: u64) -> String {
    number(&n.to_string())
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

pub(crate) use crate::routes::shown_author;

/// A number as the console shows it: digits in groups of three (`100,000`; `0.25` stays).
pub fn number(text: &str) -> String {
    let (sign, rest) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits <= 3 {
        return text.to_owned();
    }
    let (whole, tail) = rest.split_at(digits);
    let mut out = String::with_capacity(text.len() + digits / 3);
    out.push_str(sign);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (digits - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out.push_str(tail);
    out
}

/// An RFC 3339 time as the page shows it before (or without) the script: `2026-11-24 08:00 UTC`.
/// A text that is not such a time is shown as it is.
pub fn utc_text(time: &str) -> String {
    match time.parse::<jiff::Timestamp>() {
        Ok(t) => t.strftime("%Y-%m-%d %H:%M UTC").to_string(),
        Err(_) => time.to_owned(),
    }
}

/// Filters the console's templates share: a module that renders a template uses them with
/// `use super::page::filters;`.
pub mod filters {
    use std::fmt::Display;

    /// `{{ n|num }}`: a number with thousands separators (see [`super::number`]).
    #[askama::filter_fn]
    pub fn num<T: Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(super::number(&value.to_string()))
    }

    /// `{{ time|utc }}`: a `<time>` element, UTC in its `datetime` and text; `console.js` shows
    /// the reader's local time instead and keeps the UTC text in its title. Empty for no time.
    #[askama::filter_fn]
    pub fn utc<T: Display>(value: T, _: &dyn askama::Values) -> askama::Result<askama::filters::Safe<String>> {
        let time = value.to_string();
        if time.is_empty() {
            return Ok(askama::filters::Safe(String::new()));
        }
        let (attribute, text) = (escaped(&time), escaped(&super::utc_text(&time)));
        Ok(askama::filters::Safe(format!(r#"<time datetime="{attribute}" title="{text}">{text}</time>"#)))
    }

    /// `{{ author|author }}`: an author as stored, in the one form (see [`super::shown_author`]).
    #[askama::filter_fn]
    pub fn author<T: Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(super::shown_author(&value.to_string()))
    }

    fn escaped(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '"' => out.push_str("&quot;"),
                '\'' => out.push_str("&#39;"),
                c => out.push(c),
            }
        }
        out
    }
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
        let mut response = self.render(None);
        // Kept so that `console::framed` can render it again in the frame of who is signed in.
        response.extensions_mut().insert(Shown { status: self.status, message: self.message });
        response
    }
}

/// A failure page's status and message, on its response, for [`Failure::framed`].
#[derive(Clone)]
pub struct Shown {
    status: StatusCode,
    message: String,
}

impl Failure {
    /// The failure's page, in the frame of a signed-in key (`Some((access, csrf))`) or bare.
    fn render(&self, signed_in: Option<(&Access, &str)>) -> Response {
        let reason = self.status.canonical_reason().unwrap_or("error");
        let chrome = match signed_in {
            Some((access, csrf)) => Chrome::signed_in(access, csrf, reason),
            None => Chrome::anonymous(reason),
        };
        let page = FailurePage { chrome, status: self.status.as_u16(), reason, message: &self.message };
        let text = page.render().unwrap_or_else(|_| self.message.clone());
        (self.status, [(CONTENT_TYPE, "text/html; charset=utf-8"), (CACHE_CONTROL, "no-store")], text).into_response()
    }

    /// A failure page rendered again in the frame of the key signed in: its header, project
    /// links and sign-out (a failure is made where no [`Viewer`] is at hand).
    pub fn framed(shown: &Shown, access: &Access, csrf: &str) -> Response {
        let failure = Failure::new(shown.status, shown.message.clone());
        let mut response = failure.render(Some((access, csrf)));
        response.extensions_mut().insert(shown.clone());
        response
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

    #[test]
    fn numbers_are_grouped_by_three() {
        assert_eq!(number("0"), "0");
        assert_eq!(number("999"), "999");
        assert_eq!(number("1000"), "1,000");
        assert_eq!(number("100000"), "100,000");
        assert_eq!(number("1234567"), "1,234,567");
        assert_eq!(number("-12345"), "-12,345");
        assert_eq!(number("12345.678"), "12,345.678");
        assert_eq!(number("0.25"), "0.25");
        assert_eq!(number("v12"), "v12");
    }

    #[test]
    fn authors_have_one_form() {
        use crate::routes::author_of;
        assert_eq!(author_of(Some("Ana Lima"), "037b1c2d3e4f"), "Ana Lima (key 037b1c2d3e4f)");
        assert_eq!(author_of(Some("  "), "037b1c2d3e4f"), "key 037b1c2d3e4f");
        assert_eq!(author_of(None, "037b1c2d3e4f"), "key 037b1c2d3e4f");
        assert_eq!(shown_author("key:037b1c2d3e4f"), "key 037b1c2d3e4f");
        assert_eq!(shown_author("root (key 037b1c2d3e4f)"), "root (key 037b1c2d3e4f)");
        assert_eq!(shown_author("ana"), "ana");
    }

    #[test]
    fn times_read_as_utc_without_the_script() {
        assert_eq!(utc_text("2026-11-24T08:00:00Z"), "2026-11-24 08:00 UTC");
        assert_eq!(utc_text("2026-11-24T09:30:00+01:00"), "2026-11-24 08:30 UTC");
        assert_eq!(utc_text("yesterday"), "yesterday");
    }
}
