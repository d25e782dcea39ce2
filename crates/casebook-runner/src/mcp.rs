//! The MCP server of an experiment (SPEC §8): while a run is going, its case's tools are served as
//! an MCP server over streamable HTTP, so that an agent built on any MCP client calls them on its
//! normal tool path and gets the answers of the case's world snapshot.
//!
//! One listener on `127.0.0.1` serves every run of an experiment; it starts when the first run
//! that needs it opens its route. Each run gets its own route, `/s/<token>/mcp`, where the token
//! is 128 random bits: an agent only knows its own session's address, and an address whose run is
//! over (or that never was) answers 404. The MCP protocol itself is rmcp's (the official Rust
//! SDK), served statelessly with JSON answers: every request stands alone, so nothing outlives
//! the run but the closed route.
//!
//! Calls are answered by the run's [`Environment`], which logs them for the trajectory like
//! calls that arrive any other way.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::environment::Environment;
use crate::protocol::{AgentRequest, ToolDefinition};
use crate::record::Failure;

/// The MCP server shared by the runs of an experiment. Creating one costs nothing: the listener
/// starts with the first [`McpServer::open`], and stops when this is dropped.
#[derive(Default)]
pub struct McpServer {
    listener: OnceCell<Listener>,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer").field("address", &self.listener.get().map(|l| l.address)).finish()
    }
}

/// The sessions' MCP services, by token, with their requests being served.
type Routes = Mutex<HashMap<String, (SessionService, Arc<InFlight>)>>;
type SessionService = StreamableHttpService<SessionTools, NeverSessionManager>;

/// How long a closing route waits for the calls it was already serving (an agent still sending
/// one when its run ends) before the run goes on without them.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The requests a route is serving.
#[derive(Default)]
struct InFlight {
    count: std::sync::atomic::AtomicUsize,
    done: tokio::sync::Notify,
}

/// One request being served: counted while this lives.
struct Busy(Arc<InFlight>);

impl Busy {
    fn start(in_flight: Arc<InFlight>) -> Self {
        in_flight.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Busy(in_flight)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            self.0.done.notify_waiters();
        }
    }
}

struct Listener {
    address: SocketAddr,
    routes: Arc<Routes>,
    /// The accept loop; aborting it drops the connections it serves too.
    accept: tokio::task::AbortHandle,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// A session's route on the MCP server: its tools are served at [`Route::url`] until this is
/// dropped.
pub struct Route {
    url: String,
    token: String,
    routes: Arc<Routes>,
    in_flight: Arc<InFlight>,
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Route").field("url", &self.url).finish()
    }
}

impl Route {
    /// `http://127.0.0.1:PORT/s/TOKEN/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Waits, at most [`CLOSE_WAIT`], for the requests the route is serving, so that a call the
    /// agent was making when it replied is served and logged in the environment before the run
    /// takes the calls of the turn from it.
    pub async fn settle(&self) {
        let in_flight = &self.in_flight;
        let _ = tokio::time::timeout(CLOSE_WAIT, async {
            loop {
                let done = in_flight.done.notified();
                if in_flight.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    return;
                }
                done.await;
            }
        })
        .await;
    }

    /// Closes the route (later requests get 404), then [settles](Self::settle) it.
    pub async fn close(self) {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.token);
        self.settle().await;
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.token);
    }
}

impl McpServer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `tools` (the session's definitions, as the agent is sent them), answered by
    /// `environment`, at a new address; starts the listener if this is the first session.
    pub async fn open(&self, environment: Arc<Environment>, tools: &[ToolDefinition]) -> Result<Route, Failure> {
        let listener = self.listener.get_or_try_init(Listener::start).await?;
        let token = random_token()?;
        let handler = SessionTools { environment, tools: Arc::new(tools.iter().map(mcp_tool).collect()) };
        // Stateless and JSON: a tool call is one POST and one answer, with no session to keep.
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None);
        let service = StreamableHttpService::new(move || Ok(handler.clone()), Arc::default(), config);
        let in_flight = Arc::new(InFlight::default());
        listener
            .routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), (service, in_flight.clone()));
        Ok(Route {
            url: format!("http://{}/s/{token}/mcp", listener.address),
            token,
            routes: listener.routes.clone(),
            in_flight,
        })
    }
}

/// Opens the session's route on `server` when there is one and the run has an environment, and
/// puts its address in `request`. The route closes when what this returns is dropped.
pub async fn serve_session(
    server: Option<&McpServer>,
    environment: Option<&Arc<Environment>>,
    request: &mut AgentRequest,
) -> Result<Option<Route>, Failure> {
    let (Some(server), Some(environment)) = (server, environment) else { return Ok(None) };
    let route = server.open(environment.clone(), &request.tools).await?;
    request.mcp = Some(route.url().to_owned());
    Ok(Some(route))
}

impl Listener {
    async fn start() -> Result<Listener, Failure> {
        let socket = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.map_err(|error| {
            Failure::new("config", format!("could not listen on 127.0.0.1 to serve the cases' tools over MCP: {error}"))
        })?;
        let address = socket
            .local_addr()
            .map_err(|error| Failure::new("config", format!("the MCP server's socket has no address: {error}")))?;
        let routes: Arc<Routes> = Arc::default();
        let accept = tokio::spawn(accept_loop(socket, routes.clone())).abort_handle();
        Ok(Listener { address, routes, accept })
    }
}

/// Serves each connection in a task of its own, held by this loop so that they end with it.
async fn accept_loop(socket: tokio::net::TcpListener, routes: Arc<Routes>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = socket.accept().await else {
            // Out of file descriptors, most likely: give the open connections time to end.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        // Tool calls are small request-answer pairs: do not wait to fill a packet.
        let _ = stream.set_nodelay(true);
        let routes = routes.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let routes = routes.clone();
                async move { Ok::<_, Infallible>(dispatch(&routes, request).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
        });
        while connections.try_join_next().is_some() {}
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Hands a request to its session's MCP service, or answers 404.
async fn dispatch<B>(routes: &Routes, request: Request<B>) -> Response<Body>
where
    B: hyper::body::Body + Send + 'static,
    B::Error: fmt::Display,
    B::Data: Send,
{
    let token = request.uri().path().strip_prefix("/s/").and_then(|rest| rest.strip_suffix("/mcp"));
    let service = token.and_then(|token| {
        let routes = routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes.get(token).map(|(service, in_flight)| (service.clone(), Busy::start(in_flight.clone())))
    });
    match service {
        Some((service, _serving)) => service.handle(request).await,
        None => {
            let body = "no MCP session at this address: its run is over, or it never was\n";
            let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed());
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }
    }
}

/// 128 random bits, as hex.
fn random_token() -> Result<String, Failure> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| Failure::new("config", format!("no randomness for an MCP session's address: {error}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A case's tool as MCP lists it: its parameters' JSON Schema as the input schema (an object
/// schema accepting anything when it has none).
fn mcp_tool(definition: &ToolDefinition) -> Tool {
    let schema = match &definition.parameters {
        Some(Value::Object(schema)) => schema.clone(),
        _ => JsonObject::from_iter([("type".to_owned(), Value::String("object".to_owned()))]),
    };
    Tool::new_with_raw(definition.name.clone(), definition.description.clone().map(Into::into), schema)
}

/// One session's tools, answered by its run's environment.
#[derive(Clone)]
struct SessionTools {
    environment: Arc<Environment>,
    tools: Arc<Vec<Tool>>,
}

impl ServerHandler for SessionTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("casebook", env!("CARGO_PKG_VERSION")))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|tool| tool.name == name).cloned()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    /// Every call is answered and logged, a tool the case does not have included (as an error
    /// the agent sees, counted as such in the trajectory).
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let answer = self.environment.serve(&request.name, &arguments);
        let text = match answer.content {
            Value::String(text) => text,
            other => other.to_string(),
        };
        let content = vec![ContentBlock::text(text)];
        let result = if answer.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::*;

    /// The server's own part of a served call, without the network or a client: routing, rmcp's
    /// JSON-RPC handling and the snapshot's answer, as figures:
    /// `cargo nextest run -p casebook-runner --run-ignored only -E 'test(/server_side/)' --no-capture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a measurement: prints figures"]
    async fn server_side_latency_of_a_served_call() {
        const CALLS: usize = 2_000;
        let tools: Vec<casebook_model::Tool> = serde_json::from_value(json!([{
            "name": "logs",
            "responses": [{"when": {"includes": {"service": "db"}}, "result": ["timeout", "pool exhausted"]}]
        }]))
        .unwrap();
        let definitions: Vec<ToolDefinition> = tools.iter().map(ToolDefinition::of).collect();
        let environment = Arc::new(Environment::of(Some(&tools)).unwrap().unwrap());
        let server = McpServer::new();
        let route = server.open(environment.clone(), &definitions).await.unwrap();
        let path = route.url().split_once("127.0.0.1").unwrap().1.split_once('/').unwrap().1.to_owned();
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                          "params": {"name": "logs", "arguments": {"service": "db"}}})
        .to_string();
        let request = || {
            Request::post(format!("http://127.0.0.1/{path}"))
                .header("host", "127.0.0.1")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2025-06-18")
                .body(Full::new(Bytes::from(body.clone())))
                .unwrap()
        };
        let routes = route.routes.clone();
        let mut durations: Vec<Duration> = Vec::with_capacity(CALLS);
        for i in 0..CALLS + 100 {
            let started = Instant::now();
            let response = dispatch(&routes, request()).await;
            let answer = response.into_body().collect().await.unwrap().to_bytes();
            if i >= 100 {
                durations.push(started.elapsed());
            }
            assert!(String::from_utf8_lossy(&answer).contains("pool exhausted"), "{answer:?}");
        }
        durations.sort();
        let at = |q: f64| durations[((CALLS as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e6;
        println!("served call, server side: p50 {:.0} µs, p99 {:.0} µs over {CALLS} calls", at(0.5), at(0.99));
        assert_eq!(environment.drain().len(), CALLS + 100);
    }
}
