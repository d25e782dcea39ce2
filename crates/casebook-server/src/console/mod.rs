//! The web console: HTML pages rendered on the server from templates compiled into the binary
//! (askama), over the same store functions the API calls. Its addresses are the API's without
//! `/api/v1` (`/projects/team/datasets/support/versions/v3/cases/c1`), so a page's address is
//! its permalink. Pages work as links and forms; `console.js` only makes some of them quicker.
//!
//! A person signs in with an API key ([`session`]); a read key's pages show no edit controls,
//! and a key sees its own project only (another answers 404, as one that does not exist).

mod browse;
mod bulk;
mod download;
mod edit;
mod import;
mod page;
mod queue;
mod restore;
mod review;
mod runs;
mod session;
mod table;
mod view;

use crate::extract::Form;
use crate::extract::Query;
use axum::Router;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::AppState;
use page::{Chrome, Failure, PageResult, html, project_url, see_other};

/// What the console keeps between requests: sessions, and files previewed for import.
#[derive(Default)]
pub struct ConsoleState {
    sessions: session::Sessions,
    uploads: import::Uploads,
}
use session::Viewer;

/// The console's routes, added to the API's router.
pub(crate) fn mount(router: Router<AppState>) -> Router<AppState> {
    router
        .route("/", get(home))
        .route("/signin", get(sign_in_page).post(sign_in))
        .route("/signout", post(sign_out))
        .route("/console.css", get(|| asset("text/css; charset=utf-8", include_str!("../../assets/console.css"))))
        .route("/console.js", get(|| asset("text/javascript; charset=utf-8", include_str!("../../assets/console.js"))))
        .route("/favicon.svg", get(favicon))
        .route("/favicon.ico", get(favicon))
        .route("/projects/{project}", get(browse::project))
        .route("/projects/{project}/new", get(edit::new_dataset).post(edit::create))
        .route("/projects/{project}/check", post(edit::check_text))
        .route("/projects/{project}/runs", get(runs::list))
        .route("/projects/{project}/runs/{run}", get(runs::one))
        .route("/projects/{project}/runs/{run}/results/{place}", get(runs::result))
        .route("/projects/{project}/compare", get(runs::compare_runs))
        .route("/projects/{project}/datasets/{dataset}/edit", get(edit::editor).post(edit::save))
        .route("/projects/{project}/datasets/{dataset}/import", get(import::form).post(import::preview))
        .route("/projects/{project}/datasets/{dataset}/import/confirm", post(import::confirm))
        .route("/projects/{project}/datasets/{dataset}", get(browse::dataset))
        .route("/projects/{project}/datasets/{dataset}/tags", post(browse::tag))
        .route("/projects/{project}/datasets/{dataset}/diff", get(browse::diff))
        .route("/projects/{project}/datasets/{dataset}/versions/{version}", get(table::version))
        .route("/projects/{project}/datasets/{dataset}/versions/{version}/export", get(download::export))
        .route("/projects/{project}/datasets/{dataset}/versions/{version}/bulk", post(bulk::apply))
        .route("/projects/{project}/datasets/{dataset}/versions/{version}/cases/{case}", get(browse::case))
        .route("/projects/{project}/datasets/{dataset}/versions/{version}/cases/{case}/review", post(review::save))
        .route("/projects/{project}/datasets/{dataset}/versions/{version}/cases/{case}/restore", post(restore::restore))
        .route("/projects/{project}/datasets/{dataset}/queue", get(queue::queue).post(queue::act))
}

/// Shows every console failure page in the frame of the key signed in (header, project links,
/// sign-out), whichever handler, extractor or fallback made it; its status stays.
pub(crate) async fn framed(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if request.uri().path().starts_with("/api/") {
        return next.run(request).await;
    }
    let headers = request.headers().clone();
    let response = next.run(request).await;
    let Some(shown) = response.extensions().get::<page::Shown>() else {
        return response;
    };
    match session::signed_in(&state, &headers).await {
        Some((access, csrf)) => {
            let mut framed = Failure::framed(shown, &access, &csrf);
            // (Headers set on the way, such as `Retry-After`, are kept.)
            for (name, value) in response.headers() {
                if name != CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
                    framed.headers_mut().insert(name.clone(), value.clone());
                }
            }
            framed
        }
        None => response,
    }
}

/// A page of the console for a path no route serves (an API path gets the API's JSON error).
pub(crate) fn not_found(path: &str) -> Response {
    Failure::not_found(format!("there is no page at `{path}`")).into_response()
}

/// A console page for an error met before any handler ran (a refused query or form).
pub(crate) fn failure(err: crate::ApiError) -> Response {
    Failure::from(err).into_response()
}

async fn asset(kind: &'static str, text: &'static str) -> Response {
    ([(CONTENT_TYPE, kind), (CACHE_CONTROL, "public, max-age=300")], text).into_response()
}

/// The console's icon, an SVG of its own; also at `/favicon.ico`, where browsers look unasked.
async fn favicon() -> Response {
    asset("image/svg+xml", include_str!("../../assets/favicon.svg")).await
}

async fn home(viewer: Result<Viewer, Failure>) -> Response {
    match viewer {
        Ok(viewer) => see_other(&project_url(&viewer.access.project)),
        Err(_) => see_other("/signin"),
    }
}

#[derive(Deserialize)]
struct Next {
    next: Option<String>,
}

#[derive(askama::Template)]
#[template(path = "signin.html")]
struct SignInPage {
    chrome: Chrome,
    next: String,
    error: Option<String>,
}

async fn sign_in_page(Query(query): Query<Next>) -> Response {
    html(&SignInPage { chrome: Chrome::anonymous("Sign in"), next: query.next.unwrap_or_default(), error: None })
}

#[derive(Deserialize)]
struct SignInForm {
    key: String,
    #[serde(default)]
    next: String,
}

/// Where to go after signing in: a path of this server only, never another site. Browsers
/// drop tabs and line breaks from an address and read `\\` as `/`, so `/<tab>/evil.example`
/// would lead elsewhere: a `next` with any control or space character is refused, and its path,
/// percent-decoded, must start with one `/` and hold no `\\` nor control character (as some
/// clients decode it).
fn local_path(next: &str) -> Option<&str> {
    if next.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return None;
    }
    let path = next.split(['?', '#']).next().unwrap_or_default();
    let decoded = percent_decoded(path);
    let rest = decoded.strip_prefix('/')?;
    // (A space, `%20`, is kept: dataset names may hold one.)
    let foreign = rest.starts_with('/') || decoded.chars().any(|c| c == '\\' || c.is_control());
    (!foreign).then_some(next)
}

/// `%XX` escapes decoded (as bytes, then read as UTF-8, lossily); anything else kept.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn sign_in(
    State(state): State<AppState>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> PageResult {
    if !session::same_site(&headers) {
        return Err(Failure::new(StatusCode::FORBIDDEN, "this request came from another site and was refused"));
    }
    let token = form.key.trim();
    let page = |error: String, status: StatusCode| {
        let page = SignInPage { chrome: Chrome::anonymous("Sign in"), next: form.next.clone(), error: Some(error) };
        let mut response = html(&page);
        *response.status_mut() = status;
        response
    };
    let again = |error: String| page(error, StatusCode::UNAUTHORIZED);
    let too_many = |seconds: u64| {
        let mut response = page(
            format!("too many sign-ins from here or with this key: try again in {seconds} s"),
            StatusCode::TOO_MANY_REQUESTS,
        );
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
        response
    };
    // Every attempt counts against the client's address, a wrong key too.
    let address = extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    if let Some(Err(seconds)) = address.map(|a| state.console.sessions.attempt_from(a)) {
        return Ok(too_many(seconds));
    }
    if token.is_empty() {
        return Ok(again("paste an API key: `casebook keys create --project P --scope read|write` makes one".into()));
    }
    let Some(access) = state.store.authenticate(token).await.map_err(Failure::from)? else {
        return Ok(again(
            "the API key is unknown or revoked: check it, or make a new one with `casebook keys create`".into(),
        ));
    };
    if let Err(seconds) = state.console.sessions.attempt_with(&access.key) {
        return Ok(too_many(seconds));
    }
    let id = state.console.sessions.open(token, &access).map_err(Failure::internal)?;
    let to = local_path(&form.next).map_or_else(|| project_url(&access.project), str::to_owned);
    let mut response = see_other(&to);
    if let Ok(value) = session::set_cookie(Some(&id), &headers).parse() {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    Ok(response)
}

#[derive(Deserialize)]
struct SignOutForm {
    #[serde(default)]
    csrf: String,
}

async fn sign_out(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(form): Form<SignOutForm>,
) -> PageResult {
    // Any key may sign itself out; the form still has to be this session's.
    viewer.check_form(&form.csrf)?;
    if let Some(id) = session::cookie(&headers) {
        state.console.sessions.close(id);
    }
    let mut response = see_other("/signin");
    if let Ok(value) = session::set_cookie(None, &headers).parse() {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_sign_in() {
        assert_eq!(local_path("/projects/a"), Some("/projects/a"));
        assert_eq!(local_path("//evil.example/x"), None);
        assert_eq!(local_path("https://evil.example"), None);
        assert_eq!(local_path("/\\evil.example"), None);
        assert_eq!(local_path(""), None);
        assert_eq!(local_path("/\t/evil.example"), None);
        assert_eq!(local_path("/%09/evil.example"), None);
        assert_eq!(local_path("/%2F/evil.example"), None);
        assert_eq!(local_path("/%5Cevil.example"), None);
        assert_eq!(local_path("%2F%2Fevil.example"), None);
        assert_eq!(local_path("/x?where=a%20b"), Some("/x?where=a%20b"));
        assert_eq!(percent_decoded("/caf%C3%A9%2"), "/café%2");
    }
}
