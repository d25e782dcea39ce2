//! Targets against real fake agents: axum servers on 127.0.0.1:0 and python3 subprocesses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use casebook_model::{Case, Seed};
use casebook_runner::protocol::{AgentReply, AgentRequest, Message, Speaker, Step, ToolCall};
use casebook_runner::record::Failure;
use casebook_runner::target::{CallPolicy, OPERATOR_PREFIX, Target, TargetSpec, agent_protocol_schema};
use serde_json::{Value, json};

/// What a fake agent saw: each request's headers and body.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(HeaderMap, Value)>>>);

impl Seen {
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn bodies(&self) -> Vec<Value> {
        self.0.lock().unwrap().iter().map(|(_, body)| body.clone()).collect()
    }
    fn header(&self, index: usize, name: &str) -> Option<String> {
        let seen = self.0.lock().unwrap();
        seen[index].0.get(name).map(|value| value.to_str().unwrap().to_owned())
    }
}

/// Serves `app` on a free loopback port; returns its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// A fake agent at `/` whose answer `respond` picks from the number of earlier requests.
async fn agent<R>(respond: fn(usize) -> R) -> (String, Seen)
where
    R: IntoResponse + Send + 'static,
{
    let seen = Seen::default();
    let app = Router::new()
        .route(
            "/",
            post(move |State(seen): State<Seen>, headers: HeaderMap, body: String| async move {
                let earlier = {
                    let mut seen = seen.0.lock().unwrap();
                    seen.push((headers, serde_json::from_str(&body).unwrap_or(Value::String(body))));
                    seen.len() - 1
                };
                respond(earlier)
            }),
        )
        .with_state(seen.clone());
    (serve(app).await, seen)
}

/// A case with a task in every part and expectations the agent must never see.
fn case() -> Case {
    serde_json::from_value(json!({
        "id": "rca-1",
        "input": "why is checkout slow?",
        "context": [{"type": "log", "source": "app.log", "content": "ERROR pool exhausted"}],
        "tools": [{"name": "query_metrics", "description": "Reads a metric",
                   "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}}],
        "agent_args": {"temperature": 0},
        "expected": {"output": "the SECRET-ANSWER is the pool", "outcomes": ["should query pool metrics first"]},
    }))
    .unwrap()
}

fn request() -> AgentRequest {
    let seed = Seed {
        source: "user_history".into(),
        content: "checkout was slow last week too".into(),
        target_agent: None,
        metadata: None,
        extra: Default::default(),
    };
    AgentRequest::first("rca-1", 0, &case().task, vec![seed], "session-1".into())
}

fn connect(spec: &str) -> Target {
    spec.parse::<TargetSpec>().unwrap().connect().unwrap()
}

fn fast(retries: u32) -> CallPolicy {
    CallPolicy {
        timeout: Duration::from_secs(10),
        retries,
        backoff: Duration::from_millis(10),
        ..CallPolicy::default()
    }
}

/// The reply of the protocol document's own example: a step of a type casebook does not know
/// (`reasoning`) is kept whole, and written back as the agent sent it.
#[tokio::test]
async fn a_step_of_any_other_type_is_kept_whole_and_written_back_as_sent() {
    let reasoning = json!({"type": "reasoning", "text": "in use equals the pool size: exhausted"});
    let (url, _seen) = agent(|_| {
        axum::Json(json!({"output": "raise the pool", "trajectory": [
            {"type": "tool_call", "name": "query_metrics", "arguments": {"name": "db_pool_in_use"}, "result": 50},
            {"type": "reasoning", "text": "in use equals the pool size: exhausted"}]}))
    })
    .await;
    let spec: TargetSpec = serde_json::from_value(json!({"url": url})).unwrap();
    let reply = spec.connect().unwrap().call(&request()).await.unwrap();
    assert_eq!(reply.trajectory[1], Step::Other { detail: reasoning.as_object().unwrap().clone() });
    assert_eq!(serde_json::to_value(&reply.trajectory[1]).unwrap(), reasoning);
    // casebook's own events, which carry no `type`, are written as `other` and read back the same.
    let event = Step::Other { detail: json!({"event": "max_steps"}).as_object().unwrap().clone() };
    let written = serde_json::to_value(&event).unwrap();
    assert_eq!(written, json!({"type": "other", "event": "max_steps"}));
    let read: Step = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(serde_json::to_value(&read).unwrap(), written);
    // A step without a type, or a known type with missing fields, is still an error.
    assert!(serde_json::from_value::<Step>(json!({"text": "no type"})).is_err());
    assert!(serde_json::from_value::<Step>(json!({"type": "tool_call"})).is_err());
}

fn has_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(name, value)| name == key || has_key(value, key)),
        Value::Array(items) => items.iter().any(|item| has_key(item, key)),
        _ => false,
    }
}

#[tokio::test]
async fn http_agent_gets_the_task_and_never_the_expectations() {
    let (url, seen) = agent(|_| {
        axum::Json(json!({"output": "the pool", "trajectory": [
            {"type": "tool_call", "name": "query_metrics", "arguments": {"name": "pool"}}]}))
    })
    .await;
    let mut spec: TargetSpec =
        serde_json::from_value(json!({"url": url, "headers": {"X-Team": "evals"}, "api_key_env": "AGENT_KEY"}))
            .unwrap();
    spec.resolve_env(|name| (name == "AGENT_KEY").then(|| "sk-test".to_owned()));

    let reply = spec.connect().unwrap().call(&request()).await.unwrap();

    assert_eq!(
        reply,
        AgentReply {
            output: json!("the pool"),
            trajectory: vec![Step::ToolCall {
                name: "query_metrics".into(),
                arguments: json!({"name": "pool"}),
                result: None,
                served: None
            }],
            tool_calls: Vec::new(),
        }
    );
    let body = &seen.bodies()[0];
    assert_eq!(body["messages"], json!([{"role": "user", "content": "why is checkout slow?"}]));
    assert_eq!(body["context"][0]["content"], "ERROR pool exhausted");
    assert_eq!(body["tools"][0]["name"], "query_metrics");
    assert_eq!(body["memory_seeds"][0]["content"], "checkout was slow last week too");
    assert_eq!(
        (&body["session_id"], &body["agent_args"], &body["turn"]),
        (&json!("session-1"), &json!({"temperature": 0}), &json!(0))
    );
    assert!(!has_key(body, "expected"), "{body}");
    assert!(!body.to_string().contains("SECRET-ANSWER"), "{body}");
    assert_eq!(seen.header(0, "authorization").as_deref(), Some("Bearer sk-test"));
    assert_eq!(seen.header(0, "x-team").as_deref(), Some("evals"));
    assert!(!spec.describe().to_string().contains("sk-test"));
}

#[test]
fn an_api_key_variable_that_is_not_set_stops_connect() {
    let mut spec: TargetSpec =
        serde_json::from_value(json!({"url": "https://agent.example/", "api_key_env": "AGENT_KEY"})).unwrap();
    spec.resolve_env(|_| None);

    let failure = spec.connect().unwrap_err();

    assert_eq!(failure, Failure::new("config", "the target's `api_key_env` names `AGENT_KEY`, which is not set"));
}

#[tokio::test]
async fn a_slow_agent_times_out() {
    let app = Router::new().route(
        "/",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            axum::Json(json!({"output": "late"}))
        }),
    );
    let url = serve(app).await;
    let policy = CallPolicy { timeout: Duration::from_millis(200), ..fast(2) };
    let start = Instant::now();

    let failure = connect(&url).call_with(&policy, &request()).await.unwrap_err();

    assert_eq!(failure.kind, "timeout");
    assert_eq!(failure.message, format!("{url}/ did not reply within 0.2 s"));
    assert!(start.elapsed() < Duration::from_secs(2), "a timeout is not retried: {:?}", start.elapsed());
}

#[tokio::test]
async fn too_many_requests_waits_for_retry_after_then_succeeds() {
    let (url, seen) = agent(|earlier| {
        if earlier == 0 {
            (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], "slow down").into_response()
        } else {
            axum::Json(json!({"output": "ok"})).into_response()
        }
    })
    .await;
    let start = Instant::now();

    // The default policy: its 500 ms backoff gives way to the server's one second.
    let reply = connect(&url).call(&request()).await.unwrap();

    assert_eq!(reply.output, json!("ok"));
    assert!(start.elapsed() >= Duration::from_secs(1), "waited only {:?}", start.elapsed());
    assert_eq!(seen.count(), 2);
}

#[tokio::test]
async fn a_crashing_agent_fails_with_http_after_every_retry() {
    let (url, seen) = agent(|_| (StatusCode::INTERNAL_SERVER_ERROR, "Traceback: KeyError 'messages'")).await;

    let failure = connect(&url).call_with(&fast(2), &request()).await.unwrap_err();

    assert_eq!(
        failure,
        Failure::new(
            "http",
            format!(
                "`POST {url}/` answered 500 Internal Server Error: Traceback: KeyError 'messages' (after 3 attempts)"
            )
        )
    );
    assert_eq!(seen.count(), 3);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_long_bodies_are_cut() {
    let (url, seen) = agent(|_| (StatusCode::BAD_REQUEST, "x".repeat(1000))).await;

    let failure = connect(&url).call_with(&fast(2), &request()).await.unwrap_err();

    assert_eq!(failure.kind, "http");
    assert_eq!(failure.message, format!("`POST {url}/` answered 400 Bad Request: {}…", "x".repeat(200)));
    assert_eq!(seen.count(), 1);
}

#[tokio::test]
async fn garbage_is_a_protocol_failure_that_says_what_was_expected() {
    let (url, seen) = agent(|_| "<html>hello</html>").await;

    let failure = connect(&url).call_with(&fast(2), &request()).await.unwrap_err();

    assert_eq!(failure.kind, "protocol");
    assert!(failure.message.starts_with(&format!("{url}/ did not answer with an agent reply `{{\"output\": …")));
    assert!(failure.message.ends_with("it answered: <html>hello</html>"), "{}", failure.message);
    assert_eq!(seen.count(), 1, "a wrong reply is not retried");
}

#[tokio::test]
async fn an_agent_that_is_not_listening_is_a_connect_failure() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);

    let failure = connect(&url).call_with(&fast(1), &request()).await.unwrap_err();

    assert_eq!(failure.kind, "connect");
    assert!(failure.message.starts_with(&format!("could not reach {url}/: connection failed")), "{}", failure.message);
    assert!(failure.message.ends_with("(after 2 attempts)"), "{}", failure.message);
}

#[tokio::test]
async fn openai_target_sends_history_and_tools_and_reads_tool_calls() {
    let seen = Seen::default();
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(|State(seen): State<Seen>, headers: HeaderMap, axum::Json(body): axum::Json<Value>| async move {
                seen.0.lock().unwrap().push((headers, body));
                axum::Json(json!({"id": "c1", "object": "chat.completion", "choices": [{"index": 0, "message": {
                    "role": "assistant",
                    "content": "checking the pool",
                    "tool_calls": [{"id": "call_1", "type": "function",
                                    "function": {"name": "query_metrics", "arguments": "{\"name\":\"pool\"}"}}]
                }}]}))
            }),
        )
        .with_state(seen.clone());
    let base = serve(app).await;
    let mut spec: TargetSpec = serde_json::from_value(json!({
        "url": format!("openai+{base}/v1?model=small-model"), "api_key_env": "OPENAI_KEY"
    }))
    .unwrap();
    spec.resolve_env(|_| Some("sk-openai".into()));
    let mut request = request();
    request.turn = 1;
    request.messages.push(Message::new(Speaker::Assistant, json!("which service?")));
    request.messages.push(Message::new(Speaker::Hitl, json!("checkout, hurry")));

    let reply = spec.connect().unwrap().call(&request).await.unwrap();

    assert_eq!(reply.output, json!("checking the pool"));
    assert_eq!(
        reply.tool_calls,
        vec![ToolCall { id: "call_1".into(), name: "query_metrics".into(), arguments: json!({"name": "pool"}) }]
    );
    let body = &seen.bodies()[0];
    assert_eq!(body["model"], "small-model");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "query_metrics", "description": "Reads a metric",
               "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}}}])
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    let preamble = messages[0]["content"].as_str().unwrap();
    assert!(preamble.contains("[log from app.log] ERROR pool exhausted"), "{preamble}");
    assert!(preamble.contains("[user_history] checkout was slow last week too"), "{preamble}");
    assert_eq!(
        messages[1..],
        [
            json!({"role": "user", "content": "why is checkout slow?"}),
            json!({"role": "assistant", "content": "which service?"}),
            json!({"role": "user", "content": format!("{OPERATOR_PREFIX}checkout, hurry")}),
        ]
    );
    assert!(!body.to_string().contains("SECRET-ANSWER"));
    assert_eq!(seen.header(0, "authorization").as_deref(), Some("Bearer sk-openai"));
}

/// A JSON-lines agent that counts the requests it has answered and says which process it is.
const COUNTER: &str = r#"cmd:python3 -u -c '
import json, os, sys
count = 0
for line in iter(sys.stdin.readline, ""):
    request = json.loads(line)
    count += 1
    print(json.dumps({"output": {"pid": os.getpid(), "count": count, "said": request["messages"][-1]["content"]}}))
'"#;

#[tokio::test]
async fn a_command_agent_is_one_process_reused_across_calls() {
    let target = connect(COUNTER);

    let first = target.call(&request()).await.unwrap().output;
    let second = target.call(&request()).await.unwrap().output;

    assert_eq!((&first["count"], &second["count"]), (&json!(1), &json!(2)));
    assert_eq!(first["pid"], second["pid"]);
    assert_eq!(first["said"], "why is checkout slow?");
    assert_eq!(target.idle_processes(), 1);
}

#[tokio::test]
async fn concurrent_calls_start_processes_on_demand_and_keep_them() {
    let target = connect(COUNTER);

    let request = request();
    let (a, b) = tokio::join!(target.call(&request), target.call(&request));
    let (a, b) = (a.unwrap().output, b.unwrap().output);
    let third = target.call(&request).await.unwrap().output;

    assert_ne!(a["pid"], b["pid"]);
    assert_eq!((&a["count"], &b["count"], &third["count"]), (&json!(1), &json!(1), &json!(2)));
    assert_eq!(target.idle_processes(), 2);
}

#[tokio::test]
async fn a_command_that_exits_is_a_process_failure_with_its_stderr() {
    let target = connect(r#"cmd:python3 -c 'import sys; sys.stderr.write("no model configured\n"); sys.exit(3)'"#);

    let failure = target.call(&request()).await.unwrap_err();

    assert_eq!(
        failure,
        Failure::new(
            "process",
            "`python3` exited without replying (exit status: 3); its stderr ends with: no model configured"
        )
    );
    assert_eq!(target.idle_processes(), 0);
}

#[tokio::test]
async fn a_command_writing_garbage_is_discarded() {
    let target =
        connect(r#"cmd:python3 -u -c 'import sys; [print("thinking...") for line in iter(sys.stdin.readline, "")]'"#);

    let failure = target.call(&request()).await.unwrap_err();

    assert_eq!(failure.kind, "process");
    assert!(failure.message.starts_with("`python3` wrote a line that is not an agent reply"), "{}", failure.message);
    assert!(failure.message.ends_with(": thinking..."), "{}", failure.message);
    assert_eq!(target.idle_processes(), 0);
}

#[tokio::test]
async fn a_command_that_times_out_is_not_reused() {
    let target = connect("cmd:python3 -c 'import time; time.sleep(30)'");
    let policy = CallPolicy { timeout: Duration::from_millis(300), ..fast(0) };

    let failure = target.call_with(&policy, &request()).await.unwrap_err();

    assert_eq!(failure, Failure::new("timeout", "`python3` did not reply within 0.3 s"));
    assert_eq!(target.idle_processes(), 0);
}

#[tokio::test]
async fn a_missing_program_is_a_process_failure() {
    let failure = connect("cmd:casebook-no-such-agent --serve").call(&request()).await.unwrap_err();

    assert_eq!(failure.kind, "process");
    assert!(failure.message.starts_with("could not start `casebook-no-such-agent`"), "{}", failure.message);
}

#[tokio::test]
async fn builtin_echo_repeats_the_last_message() {
    let mut request = request();
    request.messages.push(Message::new(Speaker::Hitl, json!({"approve": true})));

    let reply = connect("builtin:echo").call(&request).await.unwrap();

    assert_eq!(reply, AgentReply::answer(json!({"approve": true})));
}

#[tokio::test]
async fn builtin_scripted_replies_in_turn_order_or_by_input() {
    let spec: TargetSpec =
        serde_json::from_value(json!({"url": "builtin:scripted", "replies": ["first", "second"]})).unwrap();
    let target = spec.connect().unwrap();
    let mut outputs = Vec::new();
    for turn in 0..3 {
        let mut request = request();
        request.turn = turn;
        outputs.push(target.call(&request).await.unwrap().output);
    }
    assert_eq!(outputs, [json!("first"), json!("second"), json!("first")]);

    let spec: TargetSpec = serde_json::from_value(json!({
        "builtin": "scripted", "replies": {"why is checkout slow?": "the pool"}
    }))
    .unwrap();
    let target = spec.connect().unwrap();
    assert_eq!(target.call(&request()).await.unwrap().output, json!("the pool"));
    let mut other = request();
    other.messages[0].content = json!("hello?");
    assert_eq!(
        target.call(&other).await.unwrap_err(),
        Failure::new("config", "`builtin:scripted` has no reply for the input `hello?`")
    );
}

#[test]
fn the_checked_in_protocol_schema_is_the_generated_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/agent-protocol.schema.json");
    let generated = format!("{}\n", serde_json::to_string_pretty(&agent_protocol_schema()).unwrap());
    if std::env::var_os("CASEBOOK_UPDATE_SCHEMA").is_some() {
        fs_err::write(path, &generated).unwrap();
    }
    let checked_in = fs_err::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/agent-protocol.schema.json is not what the protocol types generate; regenerate it with \
         `CASEBOOK_UPDATE_SCHEMA=1 cargo nextest run -p casebook-runner the_checked_in_protocol_schema`"
    );
}
