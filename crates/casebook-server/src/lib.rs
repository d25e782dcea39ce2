//! casebook's team server: a REST API under `/api/v1` over a store of either backend, for
//! `casebook serve`.
//!
//! The server is a shell around `casebook-store`: handlers take a [`auth::Reader`] or
//! [`auth::Writer`] (an API key turned into a store handle that sees one project), call the
//! store, and answer JSON, or stream a body in or out. Every route is declared with its
//! OpenAPI operation (`utoipa`) and added to the router through `utoipa_axum`'s `routes!`, the
//! only way a route is added, so the document served at `/api/v1/openapi.json` lists exactly
//! the routes served. Errors are [`ApiError`]s: a code, a message, the CLI's diagnostics, and
//! the request's id, which the request log carries too.

pub mod api;
pub mod auth;
mod connections;
mod console;
mod cursor;
mod error;
mod extract;
mod pending;
mod routes;
mod spool;

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::Next;
use axum::response::Response;
use casebook_store::AnyStore;
use tracing::Instrument;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

pub use error::{ApiError, ErrorBody, ErrorDetail};

/// The largest form or JSON body read by axum's extractors (the console's forms and uploads,
/// tags); the API's run routes read theirs with [`Limits::max_json`].
const JSON_BODY_LIMIT: usize = 64 << 20;

/// [`Limits::max_json`] unless `casebook serve --max-json` says otherwise: 8 MiB holds a batch
/// of results with their outputs as `casebook run` sends them (it splits batches at 2 MiB).
pub const DEFAULT_MAX_JSON: u64 = 8 << 20;

/// [`Limits::header_read`], in seconds, unless `casebook serve --header-timeout` says otherwise.
pub const DEFAULT_HEADER_TIMEOUT: u64 = 10;

/// [`Limits::max_connections_per_client`] unless `casebook serve --max-connections-per-client`
/// says otherwise: far more than a browser (6) or `casebook run`'s workers open.
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: usize = 256;

/// Percent-encodes one path segment of a URL: dataset names and case ids may hold `/`,
/// spaces, anything. The console builds its links with it, and `casebook push`/`pull` their
/// requests.
pub fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether a URL path can carry `name` as one segment: `.` and `..` (which an older casebook let
/// a dataset be named) are folded away by every URL parser, even percent-encoded, and an empty
/// segment names nothing.
pub fn path_can_carry(name: &str) -> bool {
    !matches!(name, "" | "." | "..")
}

/// What a server allows.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The largest request body (a bulk import); larger ones get 413.
    pub max_body: u64,
    /// The largest JSON body of the API (a run, a batch of its results, its end, a list of run
    /// hashes), read into memory: larger ones get 413, refused on their `Content-Length` before
    /// any of it is read, or as soon as a body sent in chunks passes it.
    pub max_json: u64,
    /// Requests served at once; more wait their turn.
    pub max_concurrent: usize,
    /// A client that sends nothing of its body for this long is cut off (408).
    pub body_idle: Duration,
    /// The most cases one page may hold.
    pub max_page: usize,
    /// Where uploaded bodies are kept while they are read (in a folder of this server's, whose
    /// leftovers the next server removes); the system's temporary folder when `None`.
    pub spool: Option<PathBuf>,
    /// A client that has not sent a request's whole head this long after it began (or after
    /// the connection opened) is cut off: half-sent requests cannot hold connections open.
    pub header_read: Duration,
    /// Connections one client address may hold open at once; more are closed as soon as they
    /// are accepted, so one address cannot use up the server's files.
    pub max_connections_per_client: usize,
    /// A received trace whose root span has come becomes cases when no span of it has come
    /// for this long (`casebook serve --capture-quiet`).
    pub capture_quiet: Duration,
    /// A received trace without its root span becomes cases (with a warning logged) this long
    /// after its first span; a captured trace's spans are kept this long for late spans, which
    /// rebuild its cases (`casebook serve --capture-max-wait`).
    pub capture_max_wait: Duration,
    /// The largest OTLP request body, and the most bytes a gzip body may decompress to; more is
    /// 413.
    pub max_otlp: u64,
    /// OTLP requests received at once; more get 429 with `Retry-After`.
    pub max_receiving: usize,
    /// Spans kept waiting for their traces to complete, in all projects; past it, OTLP
    /// requests get 503 with `Retry-After` (`casebook serve --max-pending-spans`).
    pub max_pending_spans: u64,
}

/// [`Limits::capture_quiet`] unless `casebook serve --capture-quiet` says otherwise, in seconds.
pub const DEFAULT_CAPTURE_QUIET: u64 = 5;
/// [`Limits::capture_max_wait`] unless `casebook serve --capture-max-wait` says otherwise, in
/// seconds.
pub const DEFAULT_CAPTURE_MAX_WAIT: u64 = 600;
/// [`Limits::max_pending_spans`] unless `casebook serve --max-pending-spans` says otherwise.
pub const DEFAULT_MAX_PENDING_SPANS: u64 = 1_000_000;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body: 1 << 30,
            max_json: DEFAULT_MAX_JSON,
            max_concurrent: 64,
            body_idle: Duration::from_secs(30),
            max_page: 5000,
            spool: None,
            header_read: Duration::from_secs(DEFAULT_HEADER_TIMEOUT),
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
            capture_quiet: Duration::from_secs(DEFAULT_CAPTURE_QUIET),
            capture_max_wait: Duration::from_secs(DEFAULT_CAPTURE_MAX_WAIT),
            max_otlp: 32 << 20,
            max_receiving: 16,
            max_pending_spans: DEFAULT_MAX_PENDING_SPANS,
        }
    }
}

/// What every handler shares: the store (seeing no project until a key picks one), the limits,
/// the OpenAPI document.
#[derive(Clone)]
pub struct AppState {
    pub store: AnyStore,
    pub limits: Arc<Limits>,
    document: Arc<OnceLock<String>>,
    /// The console's sessions and previewed imports.
    console: Arc<console::ConsoleState>,
    /// Where uploaded bodies are kept while they are read.
    spool: Arc<spool::Spool>,
    /// The OTLP receiver's counts.
    receiver: Arc<pending::Receiver>,
}

#[derive(OpenApi)]
#[openapi(
    info(title = "casebook", description = "Versioned agent-evaluation datasets: projects, datasets, versions, cases, runs."),
    modifiers(&BearerKey),
    components(schemas(ErrorBody, ErrorDetail))
)]
struct ApiDoc;

struct BearerKey;

impl utoipa::Modify for BearerKey {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("casebook API key").build(),
            ),
        );
    }
}

/// The application: its router (state, limits and logging applied) and its OpenAPI document.
/// The store is taken as a server's ([`AnyStore::shared`]): no commit keeps requests waiting.
/// Called inside a Tokio runtime, it also starts the task that makes cases of the traces the
/// OTLP receiver keeps (see `pending`); outside one, received traces wait for a server that runs.
pub fn app(store: AnyStore, limits: Limits) -> (Router, utoipa::openapi::OpenApi) {
    let store = store.shared();
    let spool = Arc::new(spool::Spool::start(limits.spool.as_deref()));
    let receiver = Arc::new(pending::Receiver::new(&limits));
    let limits = Arc::new(limits);
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(pending::run(store.clone(), limits.clone(), Arc::downgrade(&receiver)));
    }
    let state =
        AppState { store, limits: limits.clone(), document: Arc::default(), console: Arc::default(), spool, receiver };
    let (router, document) = routes::all(OpenApiRouter::with_openapi(ApiDoc::openapi())).split_for_parts();
    let text = document.to_pretty_json().unwrap_or_default();
    let _ = state.document.set(text);
    let router = console::mount(router)
        .fallback(routes::no_route)
        .method_not_allowed_fallback(routes::no_method)
        .with_state(state.clone())
        // JSON bodies (tags, runs' results) are read whole: bounded. An import's body is a stream
        // with its own limit (`max_body`), which this does not touch.
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(limits.body_idle))
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(limits.max_concurrent.max(1)))
        .layer(axum::middleware::from_fn(extract::plain_errors))
        .layer(axum::middleware::from_fn_with_state(state, console::framed))
        .layer(axum::middleware::from_fn(protective_headers))
        .layer(axum::middleware::from_fn(request_log));
    (router, document)
}

/// The OpenAPI document `/api/v1/openapi.json` serves, made without a store or a server (for
/// `casebook serve --print-openapi`, from which the TypeScript client's types are generated).
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    routes::all(OpenApiRouter::with_openapi(ApiDoc::openapi())).split_for_parts().1
}

/// Serves `router` on `listener` with the connection limits of `limits` (header timeout,
/// connections per client address) until `shutdown` resolves, then finishes the requests in
/// flight and returns. Handlers can read the client's address as
/// `ConnectInfo<std::net::SocketAddr>`.
pub fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
    connections::serve(listener, router, limits.header_read, limits.max_connections_per_client, shutdown)
}

/// What the console's pages may load and run: the console's own script and stylesheet only
/// (its templates hold no inline script or style), forms sent to this server only, and no page
/// of another site may frame it.
const CONSOLE_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/// Headers that keep browsers from misreading answers: no answer is sniffed as another type;
/// the console's answers also carry its content policy and may not be framed.
async fn protective_headers(request: Request, next: Next) -> Response {
    use axum::http::HeaderValue;
    use axum::http::header::{CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
    let console = !request.uri().path().starts_with("/api/");
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if console {
        headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONSOLE_POLICY));
        headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    }
    response
}

/// Gives each request an id (`x-request-id`, kept from the client if it sent one), logs it
/// when it is answered, and makes the id known to error bodies.
async fn request_log(request: Request, next: Next) -> Response {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    static PREFIX: OnceLock<String> = OnceLock::new();
    let prefix = PREFIX.get_or_init(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        format!("{:08x}", (nanos as u64 ^ u64::from(std::process::id())) & 0xffff_ffff)
    });
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    let span = tracing::info_span!("request", id = %id, method = %request.method(), path = %request.uri().path());
    let started = Instant::now();
    let mut response = error::REQUEST_ID.scope(id.clone(), next.run(request)).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::info!(status = response.status().as_u16(), millis = started.elapsed().as_millis() as u64, "answered");
    });
    if let Ok(value) = id.parse() {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

#[cfg(test)]
mod tests {
    /// Generated clients (the npm package's types) name each operation by its id: two alike
    /// make two declarations of one name.
    #[test]
    fn every_operation_has_an_id_of_its_own() {
        let document = serde_json::to_value(super::openapi_document()).unwrap();
        let mut seen = std::collections::BTreeMap::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let Some(id) = operation.get("operationId").and_then(|id| id.as_str()) else { continue };
                if let Some(before) = seen.insert(id.to_owned(), format!("{method} {path}")) {
                    panic!("`{id}` names both {before} and {method} {path}");
                }
            }
        }
        assert!(seen.contains_key("datasets") && seen.contains_key("run"), "{seen:?}");
    }
}
