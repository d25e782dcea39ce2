//! Targets: the agents a dataset runs against (SPEC §8).
//!
//! A [`TargetSpec`] says how to reach an agent (`http`, `openai`, `command`, or a built-in);
//! [`TargetSpec::connect`] turns it into a [`Target`], which holds what calls share (an HTTP
//! client, a pool of processes), and [`Target::call`] runs one turn under a [`CallPolicy`]
//! (timeout, retries with backoff or `Retry-After`). Every target is fed the same
//! [`AgentRequest`], which is built from a case's task half only.
//!
//! A call that fails is a [`Failure`] of kind `timeout`, `http`, `connect`, `protocol`, `process`
//! or `config`; never an empty output.

mod builtin;
mod command;
mod http;
mod openai;
mod policy;
mod schema;
mod spec;

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

pub use openai::OPERATOR_PREFIX;
pub use policy::CallPolicy;
pub use schema::agent_protocol_schema;
pub use spec::{Script, TargetKind, TargetSpec, TargetSpecError, described_label, recorded};
// `freeze` shows query URLs and failed answers as the targets do.
pub(crate) use http::excerpt;
pub(crate) use spec::is_secret_name;

use crate::mcp::McpServer;
use crate::protocol::{AgentReply, AgentRequest};
use crate::record::Failure;
use command::CommandPool;
use http::HttpAgent;
use openai::OpenAiAgent;
use policy::{AttemptError, Retry, request_salt};

/// A connected target: cheap to clone, and shared by all the calls of an experiment.
#[derive(Debug, Clone)]
pub struct Target {
    backend: Arc<Backend>,
    policy: CallPolicy,
    name: Arc<str>,
    /// Where the sessions of runs with an environment get their tools over MCP, if this target
    /// takes it ([`Target::with_mcp`]).
    mcp: Option<Arc<McpServer>>,
}

#[derive(Debug)]
enum Backend {
    Http(HttpAgent),
    OpenAi(OpenAiAgent),
    Command(CommandPool),
    Echo,
    Scripted(Script),
}

impl TargetSpec {
    /// The target, ready to call: an HTTP client (rustls) with the spec's headers and API key, or
    /// an empty process pool (processes start on the first calls). Its policy is the default
    /// with the spec's `timeout_secs` and `retries`.
    pub fn connect(&self) -> Result<Target, Failure> {
        let backend = match &self.kind {
            TargetKind::Http { url } => {
                Backend::Http(HttpAgent { client: self.client()?, url: url.clone(), shown: spec::redact_url(url) })
            }
            TargetKind::OpenAi { base, model } => {
                let mut endpoint = base.clone();
                endpoint.set_path(&format!("{}/chat/completions", base.path().trim_end_matches('/')));
                Backend::OpenAi(OpenAiAgent {
                    client: self.client()?,
                    shown: spec::redact_url(&endpoint),
                    endpoint,
                    model: model.clone(),
                })
            }
            TargetKind::Command { program, args } => Backend::Command(CommandPool::new(program.clone(), args.clone())),
            TargetKind::Echo => Backend::Echo,
            TargetKind::Scripted { replies } => Backend::Scripted(replies.clone()),
        };
        let defaults = CallPolicy::default();
        let policy = CallPolicy {
            timeout: self.timeout.unwrap_or(defaults.timeout),
            retries: self.retries.unwrap_or(defaults.retries),
            ..defaults
        };
        Ok(Target { backend: Arc::new(backend), policy, name: self.display_name().into(), mcp: None })
    }

    fn client(&self) -> Result<reqwest::Client, Failure> {
        let config = |message: String| Failure::new("config", message);
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| config(format!("`{name}` is not a valid HTTP header name")))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| config(format!("the value of header `{name}` is not valid in HTTP")))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        if let Some(key) = self.api_key()? {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| config("the API key holds characters HTTP headers cannot carry".to_owned()))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        reqwest::Client::builder()
            .use_rustls_tls()
            .default_headers(headers)
            .build()
            .map_err(|error| config(format!("could not set up an HTTP client: {error}")))
    }
}

impl Target {
    /// The policy [`Target::call`] applies.
    pub fn policy(&self) -> &CallPolicy {
        &self.policy
    }

    /// The same target with another policy.
    pub fn with_policy(mut self, policy: CallPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The same target, its runs' tools served by `server` over MCP when their case has recorded
    /// answers. Only agents that can be told an address take it (`http` and `command`): a
    /// chat-completions model is answered by the tool loop, and the built-in agents call no tools.
    pub fn with_mcp(mut self, server: Arc<McpServer>) -> Self {
        if self.takes_mcp() {
            self.mcp = Some(server);
        }
        self
    }

    /// Whether [`Target::with_mcp`] gives this target an MCP server.
    pub fn takes_mcp(&self) -> bool {
        matches!(*self.backend, Backend::Http(_) | Backend::Command(_))
    }

    /// The MCP server this target's sessions are given, if any.
    pub fn mcp(&self) -> Option<&McpServer> {
        self.mcp.as_deref()
    }

    /// How the target is named in messages: its redacted URL, program or built-in.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the target is a chat-completions model, whose tool calls are recorded unanswered
    /// when the case has no recorded answers (an agent protocol reply with tool calls asks
    /// casebook to answer them).
    pub fn is_chat_completions(&self) -> bool {
        matches!(&*self.backend, Backend::OpenAi(_))
    }

    /// How many processes of a `command` target wait for a call (0 for other targets).
    pub fn idle_processes(&self) -> usize {
        match &*self.backend {
            Backend::Command(pool) => pool.idle_count(),
            _ => 0,
        }
    }

    /// Runs one turn under the target's policy.
    pub async fn call(&self, request: &AgentRequest) -> Result<AgentReply, Failure> {
        self.call_with(&self.policy, request).await
    }

    /// Runs one turn under `policy`: each attempt within its timeout, and failed attempts retried
    /// when they may be transient (connection errors, HTTP 408, 429, 5xx), after the backoff or
    /// the server's `Retry-After`.
    pub async fn call_with(&self, policy: &CallPolicy, request: &AgentRequest) -> Result<AgentReply, Failure> {
        let salt = request_salt(request);
        let mut attempt: u32 = 0;
        loop {
            let error = match tokio::time::timeout(policy.timeout, self.attempt(request)).await {
                Ok(Ok(reply)) => return Ok(reply),
                Ok(Err(error)) => error,
                Err(_) => AttemptError::fatal(
                    "timeout",
                    format!("{} did not reply within {}", self.name, seconds(policy.timeout)),
                ),
            };
            if error.retry == Retry::Never || attempt >= policy.retries {
                let mut failure = error.failure;
                if attempt > 0 {
                    failure.message.push_str(&format!(" (after {} attempts)", attempt + 1));
                }
                return Err(failure);
            }
            tokio::time::sleep(policy.wait(attempt, error.retry, salt)).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, request: &AgentRequest) -> Result<AgentReply, AttemptError> {
        match &*self.backend {
            Backend::Http(agent) => agent.call(request).await,
            Backend::OpenAi(agent) => agent.call(request).await,
            Backend::Command(pool) => pool.call(request).await,
            Backend::Echo => Ok(builtin::echo(request)),
            Backend::Scripted(script) => builtin::scripted(script, request),
        }
    }
}

/// `1.5 s`, `60 s`.
fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}
