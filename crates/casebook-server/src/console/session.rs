//! Console sessions: signing in with an API key gives a random session id in an `HttpOnly`,
//! `SameSite=Strict` cookie. The server keeps the key behind the id (in memory: a restart signs
//! everyone out) and checks it against the store on every request, so a revoked key ends its
//! sessions at once. Each session has its own token that every form that writes must carry
//! (checked in constant time), and a write whose `Origin` or `Sec-Fetch-Site` says it came from
//! another site is refused whatever it carries.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode};
use casebook_store::{Access, AnyStore, Scope};

use super::page::Failure;
use crate::AppState;

pub(crate) const COOKIE: &str = "casebook_session";
/// A session unused this long is forgotten.
const IDLE: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at most; signing in beyond it forgets the least recently used.
const MOST: usize = 10_000;

struct Session {
    token: String,
    csrf: String,
    seen: Instant,
}

#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

/// 32 random bytes as hex.
pub(crate) fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// A new session for `token` (a key already checked): its id.
    pub(crate) fn open(&self, token: &str) -> Result<String, getrandom::Error> {
        let id = random_hex()?;
        let csrf = random_hex()?;
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        map.retain(|_, s| now.duration_since(s.seen) < IDLE);
        if map.len() >= MOST {
            if let Some(oldest) = map.iter().min_by_key(|(_, s)| s.seen).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        map.insert(id.clone(), Session { token: token.to_owned(), csrf, seen: now });
        Ok(id)
    }

    pub(crate) fn close(&self, id: &str) {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }

    /// The key and form token of a live session.
    fn get(&self, id: &str) -> Option<(String, String)> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let session = map.get_mut(id)?;
        if session.seen.elapsed() >= IDLE {
            map.remove(id);
            return None;
        }
        session.seen = Instant::now();
        Some((session.token.clone(), session.csrf.clone()))
    }
}

/// The session id a request's cookie carries.
pub(crate) fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .filter(|v| !v.is_empty())
}

/// The `Set-Cookie` value that keeps `id` (or, with `None`, forgets the cookie). Behind a proxy
/// that speaks HTTPS to browsers (`X-Forwarded-Proto: https`) the cookie is also `Secure`.
pub(crate) fn set_cookie(id: Option<&str>, headers: &HeaderMap) -> String {
    let secure =
        headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let (value, age) = match id {
        Some(id) => (id, IDLE.as_secs()),
        None => ("", 0),
    };
    let mut cookie = format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={age}");
    if secure {
        cookie.push_str("; Secure");
    }
    cookie
}

/// Whether a request that writes came from a page of this server: browsers say where a
/// request comes from (`Sec-Fetch-Site`, `Origin`); one from another site is refused.
pub(crate) fn same_site(headers: &HeaderMap) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = header("sec-fetch-site") {
        if site != "same-origin" && site != "none" {
            return false;
        }
    }
    match (header("origin"), header("host")) {
        (Some("null"), _) => false,
        (Some(origin), Some(host)) => origin.split_once("://").is_some_and(|(_, rest)| rest == host),
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// Constant-time comparison of two tokens.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A signed-in person looking at the project in the path: a store handle that sees the key's
/// project only, what the key may do, and the session's form token.
pub struct Viewer {
    pub store: AnyStore,
    pub access: Access,
    pub csrf: String,
}

impl Viewer {
    pub fn can_write(&self) -> bool {
        self.access.scope == Scope::Write
    }

    /// Refuses a form without this session's token.
    pub fn check_form(&self, csrf: &str) -> Result<(), Failure> {
        if same_token(csrf, &self.csrf) {
            return Ok(());
        }
        Err(Failure::new(
            StatusCode::FORBIDDEN,
            "this form has expired or did not come from this console: reload the page and try again",
        ))
    }

    /// Refuses a write: a form without this session's token, or a read key.
    pub fn check_write(&self, csrf: &str) -> Result<(), Failure> {
        self.check_form(csrf)?;
        self.require_write()
    }

    /// Refuses a read key (the pages that only lead to a write).
    pub fn require_write(&self) -> Result<(), Failure> {
        if self.can_write() {
            return Ok(());
        }
        Err(Failure::new(
            StatusCode::FORBIDDEN,
            format!("the API key `{}` may only read: sign in with a key made with `--scope write`", self.access.key),
        ))
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let here = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let signin = || {
            if parts.method == Method::GET {
                Failure::sign_in(&here)
            } else {
                Failure::new(StatusCode::UNAUTHORIZED, "you are signed out: sign in again, then repeat what you did")
            }
        };
        let Some((token, csrf)) = cookie(&parts.headers).and_then(|id| state.console.sessions.get(id)) else {
            return Err(signin());
        };
        let Some(access) = state.store.authenticate(&token).await.map_err(Failure::from)? else {
            return Err(signin());
        };
        if parts.method != Method::GET && parts.method != Method::HEAD && !same_site(&parts.headers) {
            return Err(Failure::new(StatusCode::FORBIDDEN, "this request came from another site and was refused"));
        }
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| Failure::new(StatusCode::BAD_REQUEST, "the address is not valid UTF-8"))?;
        if let Some((_, project)) = params.iter().find(|(name, _)| *name == "project") {
            if project != access.project {
                return Err(Failure::not_found(format!("no project `{project}`")));
            }
        }
        Ok(Viewer { store: state.store.in_project(&access.project), access, csrf })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; casebook_session=abc; b=2")]);
        assert_eq!(cookie(&h), Some("abc"));
        assert_eq!(cookie(&headers(&[("cookie", "casebook_sessionx=1")])), None);
        assert_eq!(cookie(&headers(&[("cookie", "casebook_session=")])), None);
    }

    #[test]
    fn the_cookie_is_secure_behind_https() {
        let plain = set_cookie(Some("abc"), &HeaderMap::new());
        assert_eq!(plain, "casebook_session=abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200");
        let proxied = set_cookie(Some("abc"), &headers(&[("x-forwarded-proto", "https")]));
        assert!(proxied.ends_with("; Secure"), "{proxied}");
        assert!(set_cookie(None, &HeaderMap::new()).contains("casebook_session=; "));
    }

    #[test]
    fn writes_from_other_sites_are_refused() {
        assert!(same_site(&headers(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:8080")])));
        assert!(same_site(&headers(&[("host", "h"), ("sec-fetch-site", "same-origin")])));
        assert!(!same_site(&headers(&[("host", "127.0.0.1:8080"), ("origin", "http://evil.example")])));
        assert!(!same_site(&headers(&[("host", "h"), ("sec-fetch-site", "cross-site")])));
        assert!(!same_site(&headers(&[("host", "h"), ("sec-fetch-site", "same-site")])));
        assert!(!same_site(&headers(&[("host", "h"), ("origin", "null")])));
        // A client that is not a browser sends neither.
        assert!(same_site(&headers(&[("host", "h")])));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("abc", "ab"));
    }

    #[test]
    fn sessions_open_and_close() {
        let sessions = Sessions::default();
        let id = sessions.open("cb_key").unwrap();
        assert_eq!(id.len(), 64);
        assert_eq!(sessions.get(&id).map(|s| s.0), Some("cb_key".to_owned()));
        sessions.close(&id);
        assert!(sessions.get(&id).is_none());
    }
}
