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
use casebook_store::{Access, AnyStore};

use super::page::Failure;
use crate::AppState;

pub(crate) const COOKIE: &str = "casebook_session";
/// A session unused this long is forgotten.
const IDLE: Duration = Duration::from_secs(12 * 3600);
/// Sessions one key keeps at most; signing in beyond it forgets that key's least recently
/// used. Per key and per project, so that signing in again and again with one project's key
/// never signs out anyone of another project (it did with one server-wide cap).
const MOST_PER_KEY: usize = 256;
/// Sessions one project keeps at most, all its keys together.
const MOST_PER_PROJECT: usize = 2_000;
/// Sign-in attempts one client address may make in [`WINDOW`], and sign-ins one key may.
const SIGN_INS: u32 = 30;
const WINDOW: Duration = Duration::from_secs(60);

struct Session {
    token: String,
    key: String,
    project: String,
    csrf: String,
    seen: Instant,
}

#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
    by_address: Mutex<HashMap<std::net::IpAddr, (Instant, u32)>>,
    by_key: Mutex<HashMap<String, (Instant, u32)>>,
}

/// 32 random bytes as hex.
pub(crate) fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Counts one more attempt by `who` in its window: the seconds to wait when it is one too many.
fn count<K: std::hash::Hash + Eq>(map: &Mutex<HashMap<K, (Instant, u32)>>, who: K) -> Result<(), u64> {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    // Forget finished windows, so the map holds only those who tried in the last minute.
    if map.len() >= 1024 {
        map.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
    }
    let (start, tries) = map.entry(who).or_insert((now, 0));
    if now.duration_since(*start) >= WINDOW {
        (*start, *tries) = (now, 0);
    }
    if *tries >= SIGN_INS {
        return Err((WINDOW - now.duration_since(*start)).as_secs().max(1));
    }
    *tries += 1;
    Ok(())
}

impl Sessions {
    /// Counts a sign-in attempt from `address` (before its key is checked): the seconds to
    /// wait when there were too many.
    pub(crate) fn attempt_from(&self, address: std::net::IpAddr) -> Result<(), u64> {
        count(&self.by_address, address)
    }

    /// Counts a sign-in with the key `key` (its id): the seconds to wait when there were too many.
    pub(crate) fn attempt_with(&self, key: &str) -> Result<(), u64> {
        count(&self.by_key, key.to_owned())
    }

    /// A new session for `token` (a key already checked, giving `access`): its id.
    pub(crate) fn open(&self, token: &str, access: &Access) -> Result<String, getrandom::Error> {
        let id = random_hex()?;
        let csrf = random_hex()?;
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        map.retain(|_, s| now.duration_since(s.seen) < IDLE);
        for (most, same) in [
            (MOST_PER_KEY, &(|s: &Session| s.key == access.key) as &dyn Fn(&Session) -> bool),
            (MOST_PER_PROJECT, &|s: &Session| s.project == access.project),
        ] {
            if map.values().filter(|s| same(s)).count() >= most {
                let oldest = map.iter().filter(|(_, s)| same(s)).min_by_key(|(_, s)| s.seen).map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    map.remove(&oldest);
                }
            }
        }
        let session = Session {
            token: token.to_owned(),
            key: access.key.clone(),
            project: access.project.clone(),
            csrf,
            seen: now,
        };
        map.insert(id.clone(), session);
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
        self.access.scope.may_write()
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

/// The key and form token of the session a request's cookie names, if it is open and its key
/// still works (for pages made without a [`Viewer`], such as failures).
pub(crate) async fn signed_in(state: &AppState, headers: &HeaderMap) -> Option<(Access, String)> {
    let (token, csrf) = cookie(headers).and_then(|id| state.console.sessions.get(id))?;
    let access = state.store.authenticate(&token).await.ok()??;
    Some((access, csrf))
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

    fn access(key: &str, project: &str) -> Access {
        Access { key: key.into(), project: project.into(), scope: casebook_store::Scope::Read }
    }

    /// 10,000 sign-ins with project b's key signed out project a's user: now they only
    /// forget b's own oldest sessions.
    #[test]
    fn signing_in_again_and_again_forgets_only_sessions_of_the_same_key_and_project() {
        let sessions = Sessions::default();
        let a = sessions.open("cb_a", &access("ka", "team-a")).unwrap();
        let b_first = sessions.open("cb_b", &access("kb", "team-b")).unwrap();
        for _ in 0..10_000 {
            sessions.open("cb_b", &access("kb", "team-b")).unwrap();
        }
        assert_eq!(sessions.get(&a).map(|s| s.0), Some("cb_a".to_owned()));
        assert_eq!(sessions.get(&b_first), None);
        // Many keys of one project: the project's cap, still only its own sessions.
        let mut map_len = 0;
        for n in 0..(MOST_PER_PROJECT / MOST_PER_KEY + 2) {
            for _ in 0..MOST_PER_KEY {
                sessions.open("cb_b", &access(&format!("kb{n}"), "team-b")).unwrap();
            }
            map_len = sessions.map.lock().unwrap().values().filter(|s| s.project == "team-b").count();
        }
        assert_eq!(map_len, MOST_PER_PROJECT);
        assert_eq!(sessions.get(&a).map(|s| s.0), Some("cb_a".to_owned()));
    }

    #[test]
    fn sign_ins_are_limited_per_address_and_per_key() {
        let sessions = Sessions::default();
        let here: std::net::IpAddr = [127, 0, 0, 1].into();
        for _ in 0..SIGN_INS {
            assert_eq!(sessions.attempt_from(here), Ok(()));
            assert_eq!(sessions.attempt_with("kb"), Ok(()));
        }
        assert!(matches!(sessions.attempt_from(here), Err(1..=60)));
        assert!(matches!(sessions.attempt_with("kb"), Err(1..=60)));
        assert_eq!(sessions.attempt_from([127, 0, 0, 2].into()), Ok(()));
        assert_eq!(sessions.attempt_with("ka"), Ok(()));
    }

    #[test]
    fn sessions_open_and_close() {
        let sessions = Sessions::default();
        let id = sessions.open("cb_key", &access("k1", "team-a")).unwrap();
        assert_eq!(id.len(), 64);
        assert_eq!(sessions.get(&id).map(|s| s.0), Some("cb_key".to_owned()));
        sessions.close(&id);
        assert!(sessions.get(&id).is_none());
    }
}
