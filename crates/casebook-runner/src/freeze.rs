//! `casebook freeze`: running the queries of a dataset's world snapshots once and recording their
//! answers (SPEC §8 "investigation environment"), so a case stays replayable after its source's
//! retention has run out.
//!
//! [`plan`] finds the queries still to run in some cases (responses with a `query` and neither
//! `result` nor `error`, or every query with `refresh`), fills their `{name}` templates from the
//! arguments each response's `when` fixes, and merges identical ones. [`run`] runs them (an HTTP
//! GET with reqwest, or a program without a shell), a few at a time, each with its timeout and a
//! cap on what it may answer. [`apply`] records the answers in the cases. What templates are and
//! which arguments fill them is defined once, in [`casebook_model::snapshot`].

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use casebook_model::snapshot::{Query, Response, Responses, fill_template, template_values};
use casebook_model::{Case, Tool};
use reqwest::Url;
use serde_json::Value;
use tokio::io::AsyncReadExt;

use crate::target::{excerpt, is_secret_name};

/// How long a query may take when it does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The most a query may answer (a body, or a command's standard output) before it is refused:
/// a recorded answer is stored in every case that asks it.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

/// How much of a failed command's standard error a message quotes.
const STDERR_KEPT: usize = 4096;

/// Where a query sits in a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub case: String,
    pub tool: String,
    /// The response's index in the tool's `responses`.
    pub response: usize,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "case `{}`, tool `{}`, response {}", self.case, self.tool, self.response)
    }
}

/// A query with its templates filled: what is run, and what tells two queries are the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Request {
    /// A GET; header values still hold their `${VAR}`s, which [`run`] resolves.
    Get { url: String, headers: Vec<(String, String)> },
    /// A program and its arguments.
    Command(Vec<String>),
}

impl Request {
    /// The request as messages show it: `GET URL` with secret-looking parts of the URL masked,
    /// or the command's words.
    pub fn shown(&self) -> String {
        match self {
            Request::Get { url, .. } => format!("GET {}", masked(url)),
            Request::Command(words) => words.join(" "),
        }
    }
}

/// `url` as sent, but with its password and the values of secret-looking query parameters
/// (`api_key`, `token`, …) replaced by `redacted`. Unlike the targets' `redact_url`, the rest
/// keeps its encoding, so the message shows the URL the source was asked.
fn masked(url: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else { return url.to_owned() };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("redacted"));
    }
    let Some(query) = parsed.query().map(str::to_owned) else { return parsed.to_string() };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if is_secret_name(&percent_decode(key)) => format!("{key}=redacted"),
            _ => pair.to_owned(),
        })
        .collect();
    parsed.set_query(Some(&pairs.join("&")));
    parsed.to_string()
}

/// A query parameter's name decoded (`+` and `%XX`), to tell whether it names a secret.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| char::from(b).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(high), Some(low)) => {
                        // Two hexadecimal digits make a byte below 256.
                        out.push(u8::try_from(high * 16 + low).unwrap_or(b'%'));
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One distinct query to run, and every response that asks it.
#[derive(Debug, Clone)]
pub struct Planned {
    pub request: Request,
    pub timeout: Duration,
    pub sites: Vec<Site>,
}

/// The queries to run in some cases, and where each answer goes.
#[derive(Debug, Default)]
pub struct Plan {
    pub queries: Vec<Planned>,
    /// (case index, tool index, response index, query index), in the cases' order.
    places: Vec<(usize, usize, usize, usize)>,
}

impl Plan {
    /// How many responses the plan's queries answer (at least as many as queries).
    pub fn responses(&self) -> usize {
        self.places.len()
    }
}

/// A query that could not be run, or whose answer cannot be recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// The first response that asks it.
    pub site: Site,
    /// How many other responses ask the same query.
    pub others: usize,
    /// What happened, naming the query (`GET URL` with secrets masked, or the command).
    pub message: String,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.site)?;
        if self.others > 0 {
            let s = if self.others == 1 { "" } else { "s" };
            write!(f, " (and {} other response{s} asking the same)", self.others)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// The responses of a tool as a list: inline, or the document of its snapshot file (`None` for
/// a file that was not read or is not a list of responses, which `validate` reports).
fn responses_of(tool: &Tool) -> Option<Vec<Response>> {
    match tool.responses.as_ref()? {
        Responses::Inline(list) => Some(list.clone()),
        Responses::File { content, .. } => serde_json::from_value(content.clone()).ok(),
        Responses::Path(_) => None,
    }
}

/// Whether `response` has a query to run: one never run, or any with `refresh`.
fn is_pending(response: &Response, refresh: bool) -> bool {
    response.query.is_some() && (refresh || (response.result.is_none() && response.error.is_none()))
}

/// Whether any response of `case` has a query to run (to keep only those cases in memory).
pub fn has_pending(case: &Case, refresh: bool) -> bool {
    case.task
        .tools
        .iter()
        .flatten()
        .any(|tool| responses_of(tool).is_some_and(|list| list.iter().any(|r| is_pending(r, refresh))))
}

/// The queries of `cases` to run, identical ones (the same filled URL and headers, or the same
/// command) merged.
pub fn plan(cases: &[Case], refresh: bool) -> Plan {
    let mut plan = Plan::default();
    let mut index: HashMap<Request, usize> = HashMap::new();
    for (c, case) in cases.iter().enumerate() {
        for (t, tool) in case.task.tools.iter().flatten().enumerate() {
            for (r, response) in responses_of(tool).into_iter().flatten().enumerate() {
                if !is_pending(&response, refresh) {
                    continue;
                }
                let Some(query) = &response.query else { continue };
                let Some(request) = request_of(query, &response) else { continue };
                let site = Site { case: case.id.clone(), tool: tool.name.clone(), response: r };
                let q = *index.entry(request.clone()).or_insert_with(|| {
                    let timeout = query
                        .timeout_secs
                        .filter(|t| t.is_finite() && *t > 0.0)
                        .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64);
                    plan.queries.push(Planned { request, timeout, sites: Vec::new() });
                    plan.queries.len() - 1
                });
                plan.queries[q].sites.push(site);
                plan.places.push((c, t, r, q));
            }
        }
    }
    plan
}

/// The request a query makes, its templates filled (`None` for a query that is neither a URL
/// nor a command, which `validate` reports).
fn request_of(query: &Query, response: &Response) -> Option<Request> {
    let values = template_values(response.when.as_ref());
    match (&query.url, &query.command) {
        (Some(url), None) => {
            // Sorted, so queries that differ only in the order their headers are written merge.
            let mut headers: Vec<(String, String)> =
                query.headers.iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect();
            headers.sort_unstable();
            Some(Request::Get { url: fill_template(url, &values, percent_encode), headers })
        }
        (None, Some(words)) if !words.is_empty() => {
            Some(Request::Command(words.iter().map(|w| fill_template(w, &values, str::to_owned)).collect()))
        }
        _ => None,
    }
}

/// `text` percent-encoded for any part of a URL: every byte but the unreserved characters of
/// RFC 3986 (letters, digits, `-._~`), so an argument cannot add a path segment or a parameter.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Runs the plan's queries, at most `concurrency` at a time; `env` looks up the `${VAR}`s of
/// header values (the CLI passes the process environment); `on_done` is called as each query
/// ends. Returns each query's answer, in the plan's order.
pub async fn run(
    plan: &Plan,
    concurrency: usize,
    env: &dyn Fn(&str) -> Option<String>,
    mut on_done: impl FnMut(),
) -> Vec<Result<Value, QueryError>> {
    let client = reqwest::Client::builder().user_agent(concat!("casebook-freeze/", env!("CARGO_PKG_VERSION"))).build();
    let mut answers: Vec<Option<Result<Value, String>>> = vec![None; plan.queries.len()];
    let mut tasks = tokio::task::JoinSet::new();
    let mut next = 0;
    loop {
        while tasks.len() < concurrency.max(1) && next < plan.queries.len() {
            let planned = &plan.queries[next];
            let i = next;
            next += 1;
            let work = match (&planned.request, &client) {
                (Request::Get { url, headers }, Ok(client)) => match resolve_headers(headers, env) {
                    Ok(headers) => Work::Get { client: client.clone(), url: url.clone(), headers },
                    Err(message) => Work::Done(Err(format!("`{}`: {message}", planned.request.shown()))),
                },
                (Request::Get { .. }, Err(e)) => Work::Done(Err(format!("cannot make an HTTP client: {e}"))),
                (Request::Command(words), _) => Work::Command(words.clone()),
            };
            let shown = planned.request.shown();
            let timeout = planned.timeout;
            tasks.spawn(async move { (i, work.run(&shown, timeout).await) });
        }
        let Some(joined) = tasks.join_next().await else { break };
        on_done();
        // A task that panicked leaves its answer missing, reported below.
        if let Ok((i, answer)) = joined {
            answers[i] = Some(answer);
        }
    }
    answers
        .into_iter()
        .zip(&plan.queries)
        .map(|(answer, planned)| {
            answer
                .unwrap_or_else(|| Err(format!("{}: the query stopped unexpectedly", planned.request.shown())))
                .map_err(|message| QueryError {
                    site: planned.sites[0].clone(),
                    others: planned.sites.len() - 1,
                    message,
                })
        })
        .collect()
}

/// A query ready to run on its own task.
enum Work {
    Get { client: reqwest::Client, url: String, headers: Vec<(String, String)> },
    Command(Vec<String>),
    Done(Result<Value, String>),
}

impl Work {
    async fn run(self, shown: &str, timeout: Duration) -> Result<Value, String> {
        let work = async {
            match self {
                Work::Get { client, url, headers } => get(&client, &url, &headers, shown).await,
                Work::Command(words) => command(&words, shown).await,
                Work::Done(answer) => answer,
            }
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(answer) => answer,
            // Dropping the work drops the connection, or kills the program (`kill_on_drop`).
            Err(_) => Err(format!("`{shown}` did not answer within {} s", timeout.as_secs_f64())),
        }
    }
}

/// Header values with each `${VAR}` replaced by the variable's value; an unset (or empty) one is
/// an error naming it.
fn resolve_headers(
    headers: &[(String, String)],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    let mut resolved = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let mut out = String::with_capacity(value.len());
        let mut rest = value.as_str();
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start + 2..].find('}') else { break };
            let var = &rest[start + 2..start + 2 + len];
            let Some(found) = env(var).filter(|v| !v.is_empty()) else {
                return Err(format!("the header `{name}` needs the environment variable `{var}`, which is not set"));
            };
            out.push_str(&rest[..start]);
            out.push_str(&found);
            rest = &rest[start + 3 + len..];
        }
        out.push_str(rest);
        resolved.push((name.clone(), out));
    }
    Ok(resolved)
}

async fn get(client: &reqwest::Client, url: &str, headers: &[(String, String)], shown: &str) -> Result<Value, String> {
    let parsed = Url::parse(url).map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("`{shown}`: a query URL is `http://` or `https://`"));
    }
    let mut request = client.get(parsed);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let mut response = request.send().await.map_err(|e| format!("could not reach `{shown}`: {}", transport(&e)))?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("`{shown}`: {}", transport(&e)))? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(format!("`{shown}` answered more than {} MiB", MAX_ANSWER_BYTES >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    if status.as_u16() >= 400 {
        return Err(format!("`{shown}` answered {status}: {}", excerpt(&body)));
    }
    recorded(body).map_err(|len| format!("`{shown}` answered {len} bytes that are not UTF-8 text"))
}

/// What a transport error says, without the URL reqwest puts in it (it may hold secrets).
fn transport(error: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut message = if error.is_connect() {
        "connection failed".to_owned()
    } else if error.is_body() || error.is_decode() {
        "the answer was cut off".to_owned()
    } else {
        "the request failed".to_owned()
    };
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

async fn command(words: &[String], shown: &str) -> Result<Value, String> {
    let (program, args) = words.split_first().ok_or_else(|| "the command is empty".to_owned())?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("`{shown}` could not be started: {e}"))?;
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(format!("`{shown}`: its output could not be read"));
    };
    // Standard error is read to its end (a program blocked on a full pipe would never exit) and
    // its start kept for the message.
    let stderr = tokio::spawn(async move {
        let mut kept = Vec::new();
        let mut chunk = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            let room = STDERR_KEPT.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..n.min(room)]);
        }
        kept
    });
    let mut out = Vec::new();
    let read = (&mut stdout).take(MAX_ANSWER_BYTES as u64 + 1).read_to_end(&mut out).await;
    if out.len() > MAX_ANSWER_BYTES {
        stderr.abort();
        return Err(format!("`{shown}` wrote more than {} MiB", MAX_ANSWER_BYTES >> 20));
    }
    read.map_err(|e| format!("`{shown}`: its output could not be read: {e}"))?;
    let status = child.wait().await.map_err(|e| format!("`{shown}`: {e}"))?;
    let kept = stderr.await.unwrap_or_default();
    if !status.success() {
        let how = status.code().map_or_else(|| "was stopped by a signal".to_owned(), |c| format!("exited with {c}"));
        let said = String::from_utf8_lossy(&kept);
        let said = said.trim();
        return Err(if said.is_empty() { format!("`{shown}` {how}") } else { format!("`{shown}` {how}: {said}") });
    }
    recorded(out).map_err(|len| format!("`{shown}` wrote {len} bytes that are not UTF-8 text"))
}

/// An answer as it is recorded: its JSON when it is JSON, else its text. `Err(length)` when it
/// is not UTF-8.
fn recorded(body: Vec<u8>) -> Result<Value, usize> {
    if let Ok(value) = serde_json::from_slice::<Value>(&body) {
        return Ok(value);
    }
    let len = body.len();
    String::from_utf8(body).map(Value::String).map_err(|_| len)
}

/// Records the answers [`run`] returned in `cases`: each answered response gets its `result`
/// (an `error` recorded before is dropped) and `query.frozen_at`; a failed query leaves its
/// responses as they were. Returns the indices of the cases that changed.
pub fn apply(cases: &mut [Case], plan: &Plan, answers: &[Result<Value, QueryError>], frozen_at: &str) -> Vec<usize> {
    let mut changed = Vec::new();
    for &(c, t, r, q) in &plan.places {
        let Some(Ok(answer)) = answers.get(q) else { continue };
        let Some(tool) = cases.get_mut(c).and_then(|case| case.task.tools.as_mut()).and_then(|tools| tools.get_mut(t))
        else {
            continue;
        };
        let recorded = with_responses(tool, |list| {
            let Some(response) = list.get_mut(r) else { return false };
            response.result = Some(answer.clone());
            response.error = None;
            if let Some(query) = &mut response.query {
                query.frozen_at = Some(frozen_at.to_owned());
            }
            true
        });
        if recorded && changed.last() != Some(&c) {
            changed.push(c);
        }
    }
    changed
}

/// Runs `change` on the responses of `tool`, writing them back where they came from (a snapshot
/// file's document is rewritten as a whole).
fn with_responses(tool: &mut Tool, change: impl FnOnce(&mut Vec<Response>) -> bool) -> bool {
    match &mut tool.responses {
        Some(Responses::Inline(list)) => change(list),
        Some(Responses::File { content, .. }) => {
            let Ok(mut list) = serde_json::from_value::<Vec<Response>>(content.clone()) else { return false };
            let changed = change(&mut list);
            if changed {
                match serde_json::to_value(&list) {
                    Ok(value) => *content = value,
                    Err(_) => return false,
                }
            }
            changed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cases(value: Value) -> Vec<Case> {
        serde_json::from_value(value).expect("cases")
    }

    #[test]
    fn plans_fill_templates_and_merge_identical_queries() {
        let cases = cases(json!([
            {"id": "a", "input": "?", "tools": [{"name": "m", "responses": [
                {"when": {"includes": {"q": "p99 / café"}}, "query": {"url": "http://h/q?x={q}", "timeout_secs": 2}},
                {"when": {"includes": {"q": "x"}}, "result": 1, "query": {"url": "http://h/q?x={q}"}},
                {"result": 2}
            ]}]},
            {"id": "b", "input": "?", "tools": [{"name": "m", "responses": [
                {"when": {"arguments": {"q": "p99 / café"}}, "query": {"url": "http://h/q?x={q}"}},
                {"when": {"arguments": {"n": 3}}, "query": {"command": ["echo", "{n}"]}}
            ]}]}
        ]));
        let plan = plan(&cases, false);
        assert_eq!(plan.queries.len(), 2);
        assert_eq!(
            plan.queries[0].request,
            Request::Get { url: "http://h/q?x=p99%20%2F%20caf%C3%A9".into(), headers: vec![] }
        );
        assert_eq!(plan.queries[0].timeout, Duration::from_secs(2));
        assert_eq!(plan.queries[0].sites.iter().map(|s| s.case.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(plan.queries[1].request, Request::Command(vec!["echo".into(), "3".into()]));
        assert_eq!(plan.responses(), 3);
        assert_eq!(super::plan(&cases, true).responses(), 4, "refresh runs the frozen one too");
    }

    #[test]
    fn headers_read_variables_and_name_a_missing_one() {
        let headers = vec![("Authorization".to_owned(), "Bearer ${TOKEN}!".to_owned())];
        let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
        assert_eq!(resolve_headers(&headers, &env).unwrap()[0].1, "Bearer s3cret!");
        assert_eq!(
            resolve_headers(&headers, &|_| None).unwrap_err(),
            "the header `Authorization` needs the environment variable `TOKEN`, which is not set"
        );
    }

    #[test]
    fn shown_urls_mask_secrets() {
        let request = Request::Get { url: "http://u:pw@h/q?api_key=abc&m=cpu".into(), headers: vec![] };
        assert_eq!(request.shown(), "GET http://u:redacted@h/q?api_key=redacted&m=cpu");
        let encoded = Request::Get { url: "http://h/q?s=caf%C3%A9%20x&API%5FKEY=abc&t".into(), headers: vec![] };
        assert_eq!(encoded.shown(), "GET http://h/q?s=caf%C3%A9%20x&API%5FKEY=redacted&t");
    }

    #[test]
    fn answers_are_json_or_text() {
        assert_eq!(recorded(b" {\"a\": 1}\n".to_vec()), Ok(json!({"a": 1})));
        assert_eq!(recorded(b"p99 2.1 s\n".to_vec()), Ok(json!("p99 2.1 s\n")));
        assert_eq!(recorded(vec![0xff, 0xfe]), Err(2));
    }

    #[test]
    fn snapshot_files_are_rewritten_whole() {
        let mut cases = cases(json!([{"id": "a", "input": "?", "tools": [{"name": "m", "responses":
            {"file": "snap.json", "content": [{"query": {"command": ["true"]}}]}}]}]));
        let plan = plan(&cases, false);
        let changed = apply(&mut cases, &plan, &[Ok(json!("up"))], "2026-11-23T10:00:00Z");
        assert_eq!(changed, [0]);
        let Some(Responses::File { content, .. }) = &cases[0].task.tools.as_ref().unwrap()[0].responses else {
            panic!("still a file")
        };
        assert_eq!(
            content,
            &json!([{"result": "up", "query": {"command": ["true"], "frozen_at": "2026-11-23T10:00:00Z"}}])
        );
    }
}
