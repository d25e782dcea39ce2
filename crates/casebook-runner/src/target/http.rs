//! The `http` target (casebook's agent protocol) and the POST that it and the `openai` target
//! share: status codes and transport errors sorted into failures that are retried or not.

use std::error::Error;
use std::fmt::Write as _;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Client, StatusCode, Url};
use serde::Serialize;

use super::policy::{AttemptError, Retry, parse_retry_after};
use crate::protocol::{AgentReply, AgentRequest};

/// An agent that speaks casebook's protocol over HTTP.
#[derive(Debug)]
pub(crate) struct HttpAgent {
    pub client: Client,
    pub url: Url,
    /// The URL without secrets, for messages.
    pub shown: String,
}

impl HttpAgent {
    pub async fn call(&self, request: &AgentRequest) -> Result<AgentReply, AttemptError> {
        let body = post_json(&self.client, &self.url, &self.shown, request).await?;
        AgentReply::parse(&body).map_err(|error| {
            AttemptError::fatal(
                "protocol",
                format!(
                    "{} did not answer with an agent reply `{{\"output\": …, \"trajectory\": [optional steps]}}` \
                     or `{{\"tool_calls\": [{{\"id\", \"name\", \"arguments\"}}]}}`: {error}; it answered: {}",
                    self.shown,
                    excerpt(&body)
                ),
            )
        })
    }
}

/// POSTs `body` as JSON and returns the response body of a 2xx answer.
pub(crate) async fn post_json(
    client: &Client,
    url: &Url,
    shown: &str,
    body: &impl Serialize,
) -> Result<Vec<u8>, AttemptError> {
    let response = client.post(url.clone()).json(body).send().await.map_err(|error| transport(shown, &error))?;
    let status = response.status();
    let retry = retry_for(status, response.headers());
    let body = response.bytes().await.map_err(|error| transport(shown, &error))?;
    if status.is_success() {
        return Ok(body.to_vec());
    }
    let failure = format!("`POST {shown}` answered {status}: {}", excerpt(&body));
    Err(AttemptError { failure: crate::record::Failure::new("http", failure), retry })
}

/// Which non-2xx answers are worth another attempt: 408, 429 and 5xx; 429 and 503 say when.
fn retry_for(status: StatusCode, headers: &HeaderMap) -> Retry {
    if status.is_success() {
        return Retry::Never;
    }
    if matches!(status, StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE) {
        let after = headers
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| parse_retry_after(value, jiff::Timestamp::now()));
        if let Some(after) = after {
            return Retry::After(after);
        }
    }
    if status == StatusCode::REQUEST_TIMEOUT || status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        Retry::Backoff
    } else {
        Retry::Never
    }
}

/// A request that got no complete answer: refused, reset, or cut off mid-body. Retried.
fn transport(shown: &str, error: &reqwest::Error) -> AttemptError {
    let mut message = format!("could not reach {shown}: {}", without_url(error));
    let mut source = error.source();
    while let Some(cause) = source {
        let _ = write!(message, ": {cause}");
        source = cause.source();
    }
    AttemptError::transient("connect", message)
}

/// reqwest's message names the URL in full, which may hold secrets; `shown` says where instead.
fn without_url(error: &reqwest::Error) -> String {
    if error.is_connect() {
        "connection failed".to_owned()
    } else if error.is_body() || error.is_decode() {
        "the answer was cut off".to_owned()
    } else {
        "the request failed".to_owned()
    }
}

/// The first 200 characters of a body, for messages.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None if text.is_empty() => "an empty body".to_owned(),
        None => text.to_owned(),
    }
}
