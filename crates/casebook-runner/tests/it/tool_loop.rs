//! Runs whose agents investigate: a fake chat-completions model (a real HTTP server on
//! 127.0.0.1:0) and agent-protocol agents (HTTP, a Python command, the scripted built-in) whose
//! tool calls casebook answers from the case's world snapshot, until they answer or run out of
//! steps. Each run goes through the engine as `casebook run` does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::post;
use casebook_model::Case;
use casebook_model::snapshot::Served;
use casebook_runner::engine::{self, Mode, Plan, PlannedScenario, RunKeys, Work};
use casebook_runner::environment::DEFAULT_MAX_STEPS;
use casebook_runner::planned::PlannedCases;
use casebook_runner::protocol::{Serving, Step};
use casebook_runner::record::RunResult;
use casebook_runner::target::TargetSpec;
use serde_json::{Value, json};

/// A case whose tools have recorded answers (and a default for one of them), with an
/// expectation the agent must never see.
fn case() -> Value {
    json!({
        "id": "inc-paiements",
        "input": "Pourquoi le service `paiements` renvoie-t-il des 502 ?",
        "tools": [
            {"name": "log_fetcher", "description": "Error logs of a service",
             "parameters": {"type": "object", "properties": {"service": {"type": "string"}}},
             "responses": [
                {"when": {"includes": {"service": "paiements"}},
                 "result": ["12:01 ERROR pool de connexions épuisé (50/50)"]},
             ]},
            {"name": "metrics_query", "description": "A metric of a service",
             "responses": [{"when": {"arguments": {"service": "paiements", "metric": "error_rate"}}, "result": {"value": 0.31}}],
             "default": {"result": "no data"}},
        ],
        "expected": {"output": "SECRET-ROOT-CAUSE: the pool was resized"},
    })
}

/// Runs `case` once against `target` with `max_steps`, as `casebook run` does.
async fn run(case: Value, target: Value, max_steps: u32) -> RunResult {
    let case: Case = serde_json::from_value(case).unwrap();
    let spec: TargetSpec = serde_json::from_value(target).unwrap();
    let scenario =
        PlannedScenario { name: "s".into(), describe: spec.describe(), target: spec.connect().unwrap(), max_steps };
    let keys = RunKeys::new(std::slice::from_ref(&scenario), &[], 1).unwrap();
    let plan = Arc::new(Plan {
        cases: PlannedCases::of(std::slice::from_ref(&case), &keys).unwrap(),
        scenarios: vec![scenario],
        n_runs: 1,
        graders: Vec::new(),
        case_asserts: None,
        seeds: Vec::new(),
        concurrency: 1,
        noise: None,
    });
    let (work_tx, work_rx) = tokio::sync::mpsc::channel(1);
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    work_tx.send(plan.jobs(0..1).unwrap().into_iter().map(|job| Work { job, stored: None }).collect()).await.unwrap();
    drop(work_tx);
    let finish = Arc::new(|finished: engine::Finished| finished.result);
    engine::execute(plan, work_rx, Mode::Run, stop_rx, finish, tx).await;
    rx.recv().await.unwrap().pop().unwrap()
}

/// What a fake server was sent.
type Seen = Arc<Mutex<Vec<Value>>>;

/// Serves `answer` (given each request body) on a free loopback port at `path`.
async fn serve(path: &str, answer: fn(&Value) -> Value) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let kept = seen.clone();
    let app = Router::new().route(
        path,
        post(move |axum::Json(body): axum::Json<Value>| {
            let kept = kept.clone();
            async move {
                let reply = answer(&body);
                kept.lock().unwrap().push(body);
                axum::Json(reply)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), seen)
}

/// A chat completion whose message is `message`.
fn completion(message: Value) -> Value {
    json!({"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": message}]})
}

/// A model that asks for the logs, then the error rate, then answers quoting what the logs said.
fn investigating_model(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let told: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    let call = |id: &str, name: &str, arguments: &str| {
        completion(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}))
    };
    match told.len() {
        0 => call("call_logs", "log_fetcher", r#"{"service": "paiements"}"#),
        1 => call("call_rate", "metrics_query", r#"{"service": "paiements", "metric": "latency"}"#),
        _ => completion(json!({"role": "assistant", "content": format!(
            "The logs say {}; the error rate: {}", told[0]["content"].as_str().unwrap(), told[1]["content"].as_str().unwrap()
        )})),
    }
}

/// A model that never stops asking.
fn looping_model(_: &Value) -> Value {
    completion(json!({"role": "assistant", "content": "still looking", "tool_calls": [
        {"id": "again", "type": "function", "function": {"name": "log_fetcher", "arguments": "{\"service\": \"paiements\"}"}}]}))
}

fn served(step: &Step) -> Option<(&str, Option<Serving>)> {
    match step {
        Step::ToolCall { name, served, .. } => Some((name.as_str(), *served)),
        _ => None,
    }
}

fn kinds(trajectory: &[Step]) -> Vec<String> {
    trajectory
        .iter()
        .map(|step| match step {
            Step::Message { role, .. } => format!("message {}", serde_json::to_value(role).unwrap().as_str().unwrap()),
            Step::ToolCall { name, .. } => format!("call {name}"),
            Step::Other { detail } => format!("other {}", detail["event"].as_str().unwrap_or_default()),
        })
        .collect()
}

#[tokio::test]
async fn a_chat_model_investigates_the_snapshot_and_answers_from_what_it_was_told() {
    let (base, seen) = serve("/v1/chat/completions", investigating_model).await;

    let result = run(case(), json!(format!("openai+{base}/v1?model=m")), DEFAULT_MAX_STEPS).await;

    let output = result.output.as_ref().unwrap();
    assert_eq!(
        output.output,
        json!("The logs say [\"12:01 ERROR pool de connexions épuisé (50/50)\"]; the error rate: no data")
    );
    assert_eq!(
        kinds(&output.trajectory),
        ["message user", "call log_fetcher", "call metrics_query", "message assistant"]
    );
    let how: Vec<_> = output.trajectory.iter().filter_map(served).collect();
    assert_eq!(
        how,
        [
            ("log_fetcher", Some(Serving { how: Served::Matched, entry: Some(0), error: false })),
            ("metrics_query", Some(Serving { how: Served::Default, entry: None, error: false })),
        ]
    );
    assert_eq!((output.served_calls, output.unmatched_calls, output.unfinished.as_ref()), (2, 0, None));
    // The model was called three times; the last time with both calls and both answers.
    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies.len(), 3);
    let last = bodies[2]["messages"].as_array().unwrap();
    assert_eq!(
        last[1..],
        [
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_logs", "type": "function",
                   "function": {"name": "log_fetcher", "arguments": "{\"service\":\"paiements\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "call_logs",
                   "content": "[\"12:01 ERROR pool de connexions épuisé (50/50)\"]"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_rate", "type": "function",
                   "function": {"name": "metrics_query", "arguments": "{\"service\":\"paiements\",\"metric\":\"latency\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "call_rate", "content": "no data"}),
        ]
    );
    for body in &bodies {
        let text = body.to_string();
        assert!(!text.contains("SECRET-ROOT-CAUSE") && !text.contains("responses"), "{text}");
    }
}

#[tokio::test]
async fn a_model_still_calling_tools_at_max_steps_is_stopped_and_the_run_is_an_error() {
    let (base, seen) = serve("/v1/chat/completions", looping_model).await;

    let result = run(case(), json!(format!("openai+{base}/v1?model=m")), 3).await;

    assert_eq!(seen.lock().unwrap().len(), 3, "at most max_steps calls of the model");
    let failure = result.failure().expect("an error");
    assert_eq!(failure.kind, "max-steps");
    assert_eq!(
        failure.message,
        "the agent was still calling tools after 3 steps of turn 0 (`max_steps`); its last calls were not answered: \
         `log_fetcher`"
    );
    assert_eq!((result.pass, result.score), (None, None), "an unfinished run does not pass");
    // Its trajectory is kept: what it said, the two calls answered, the third not, and the stop.
    let output = result.output.as_ref().unwrap();
    assert_eq!(
        kinds(&output.trajectory),
        [
            "message user",
            "message assistant",
            "call log_fetcher",
            "message assistant",
            "call log_fetcher",
            "message assistant",
            "call log_fetcher",
            "other max_steps"
        ]
    );
    assert_eq!(output.trajectory.iter().filter_map(served).filter(|(_, s)| s.is_none()).count(), 1);
    assert_eq!((output.served_calls, &output.output), (2, &Value::Null));
}

#[tokio::test]
async fn calls_outside_the_snapshot_get_an_error_and_are_counted() {
    fn asks_elsewhere(body: &Value) -> Value {
        let messages = body["messages"].as_array().unwrap();
        match messages.iter().rfind(|m| m["role"] == "tool") {
            None => completion(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "log_fetcher", "arguments": "{\"service\": \"ledger\"}"}},
                {"id": "b", "type": "function", "function": {"name": "deploy", "arguments": "not json"}}]})),
            Some(last) => completion(json!({"role": "assistant", "content": last["content"]})),
        }
    }
    let (base, seen) = serve("/v1/chat/completions", asks_elsewhere).await;

    let result = run(case(), json!(format!("openai+{base}/v1?model=m")), DEFAULT_MAX_STEPS).await;

    let output = result.output.as_ref().unwrap();
    assert_eq!((output.served_calls, output.unmatched_calls), (2, 2));
    let how: Vec<_> = output.trajectory.iter().filter_map(served).map(|(_, s)| s.map(|s| (s.how, s.error))).collect();
    assert_eq!(how, [Some((Served::Unmatched, true)), Some((Served::UnknownTool, true))]);
    // The model read the errors as a failing tool's, in order; unparseable arguments went as text.
    let bodies = seen.lock().unwrap().clone();
    let tools: Vec<&Value> = bodies[1]["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert!(tools[0]["content"].as_str().unwrap().starts_with("error: "), "{}", tools[0]);
    assert_eq!(tools[1]["content"], "error: there is no tool `deploy`; the tools are: log_fetcher, metrics_query");
    assert_eq!(bodies[1]["messages"][1]["tool_calls"][1]["function"]["arguments"], "not json");
    let Step::ToolCall { arguments, .. } = &output.trajectory[2] else { panic!("{:?}", output.trajectory) };
    assert_eq!(arguments, &json!("not json"));
}

#[tokio::test]
async fn without_recorded_answers_a_model_s_calls_are_recorded_unanswered() {
    let (base, seen) = serve("/v1/chat/completions", looping_model).await;
    let mut plain = case();
    for tool in plain["tools"].as_array_mut().unwrap() {
        let tool = tool.as_object_mut().unwrap();
        tool.remove("responses");
        tool.remove("default");
    }

    let result = run(plain, json!(format!("openai+{base}/v1?model=m")), DEFAULT_MAX_STEPS).await;

    let output = result.output.as_ref().unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(output.output, json!("still looking"));
    assert_eq!(kinds(&output.trajectory), ["message user", "call log_fetcher", "message assistant"]);
    assert_eq!(output.served_calls, 0);
}

/// An agent-protocol agent that asks for the logs (without an id), then answers with the
/// results it was sent.
fn protocol_agent(body: &Value) -> Value {
    match body.get("tool_results") {
        None => json!({"tool_calls": [{"name": "log_fetcher", "arguments": {"service": "paiements"}}]}),
        Some(results) => json!({"output": format!("told: {}", results[0]["content"][0].as_str().unwrap())}),
    }
}

#[tokio::test]
async fn an_http_agent_asks_casebook_for_tool_calls_on_the_same_session() {
    let (url, seen) = serve("/agent", protocol_agent).await;

    let result = run(case(), json!(format!("{url}/agent")), DEFAULT_MAX_STEPS).await;

    let output = result.output.as_ref().unwrap();
    assert_eq!(output.output, json!("told: 12:01 ERROR pool de connexions épuisé (50/50)"));
    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["session_id"], bodies[1]["session_id"]);
    assert_eq!((&bodies[0]["turn"], &bodies[1]["turn"]), (&json!(0), &json!(0)));
    assert_eq!(
        bodies[1]["tool_results"],
        json!([{"id": "call-1", "name": "log_fetcher", "content": ["12:01 ERROR pool de connexions épuisé (50/50)"],
                "is_error": false}])
    );
    // The calls and their answers are in the conversation too, for agents that keep no state.
    assert_eq!(
        bodies[1]["messages"].as_array().unwrap()[1..],
        [
            json!({"role": "assistant", "content": null,
                   "tool_calls": [{"id": "call-1", "name": "log_fetcher", "arguments": {"service": "paiements"}}]}),
            json!({"role": "tool", "content": ["12:01 ERROR pool de connexions épuisé (50/50)"],
                   "tool_call_id": "call-1", "name": "log_fetcher"}),
        ]
    );
    assert!(bodies.iter().all(|b| !b.to_string().contains("SECRET-ROOT-CAUSE")));
}

#[tokio::test]
async fn an_http_agent_asking_for_tools_a_case_cannot_answer_is_a_protocol_failure() {
    let (url, _) = serve("/agent", protocol_agent).await;
    let plain = json!({"id": "bare", "input": "why?", "tools": [{"name": "log_fetcher"}]});

    let result = run(plain, json!(format!("{url}/agent")), DEFAULT_MAX_STEPS).await;

    let failure = result.failure().unwrap();
    assert_eq!(failure.kind, "protocol");
    assert_eq!(
        failure.message,
        format!(
            "{url}/agent replied with tool calls (`log_fetcher`), but case `bare` has no recorded tool answers to give: \
             reply with an `output`, or record the tools' answers in the case (`responses`, `default`)"
        )
    );
}

#[tokio::test]
async fn the_python_example_agent_investigates_through_the_protocol() {
    let agent = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/agents/investigator.py");

    let result = run(case(), json!({"program": "python3", "args": [agent]}), DEFAULT_MAX_STEPS).await;

    let output = result.output.as_ref().unwrap();
    assert_eq!(
        output.output,
        json!(
            "Findings for paiements: log_fetcher: [\"12:01 ERROR pool de connexions épuisé (50/50)\"]; \
             metrics_query: {\"value\": 0.31}"
        )
    );
    assert_eq!((output.served_calls, output.unmatched_calls), (2, 0));
    let how: Vec<_> = output.trajectory.iter().filter_map(served).map(|(n, s)| (n, s.unwrap().entry)).collect();
    assert_eq!(how, [("log_fetcher", Some(0)), ("metrics_query", Some(0))]);

    // With one step allowed, it never gets to answer.
    let result = run(case(), json!({"program": "python3", "args": [agent]}), 1).await;
    assert_eq!(result.failure().map(|f| f.kind.as_str()), Some("max-steps"));
}

#[tokio::test]
async fn the_scripted_agent_makes_its_calls_a_step_at_a_time_then_answers() {
    let target = json!({"builtin": "scripted", "replies": [{
        "tool_calls": [
            {"name": "log_fetcher", "arguments": {"service": "paiements"}},
            [{"name": "metrics_query", "arguments": {"service": "paiements", "metric": "error_rate"}},
             {"name": "metrics_query", "arguments": {"service": "ledger"}}],
        ],
        "output": "the connection pool",
    }]});

    let result = run(case(), target, DEFAULT_MAX_STEPS).await;

    let output = result.output.as_ref().unwrap();
    assert_eq!(output.output, json!("the connection pool"));
    let how: Vec<_> = output.trajectory.iter().filter_map(served).map(|(n, s)| (n, s.unwrap().how)).collect();
    assert_eq!(
        how,
        [("log_fetcher", Served::Matched), ("metrics_query", Served::Matched), ("metrics_query", Served::Default)]
    );
}

#[test]
fn max_steps_changes_the_run_hash_of_cases_with_recorded_answers_only() {
    let scenario = |max_steps| {
        let spec: TargetSpec = "builtin:echo".parse().unwrap();
        PlannedScenario { name: "s".into(), describe: spec.describe(), target: spec.connect().unwrap(), max_steps }
    };
    let hashes = |case: &Value, max_steps| {
        let case: Case = serde_json::from_value(case.clone()).unwrap();
        RunKeys::new(&[scenario(max_steps)], &[], 1).unwrap().hashes(&case).unwrap()
    };
    let investigated = case();
    let plain = json!({"id": "p", "input": "hi", "tools": [{"name": "log_fetcher"}]});
    assert_eq!(hashes(&investigated, DEFAULT_MAX_STEPS), hashes(&investigated, DEFAULT_MAX_STEPS));
    assert_ne!(hashes(&investigated, 3), hashes(&investigated, DEFAULT_MAX_STEPS));
    assert_eq!(hashes(&plain, 3), hashes(&plain, DEFAULT_MAX_STEPS));
    // The default keeps the hashes runs had before `max_steps` existed.
    let case: Case = serde_json::from_value(investigated).unwrap();
    assert_eq!(
        casebook_canon::id_hex(&hashes(&serde_json::to_value(&case).unwrap(), DEFAULT_MAX_STEPS)[0]),
        casebook_runner::hash::run_hash(&json!({"kind": "echo"}), &[], &case.task, &case.id, 0).unwrap()
    );
}

/// A command agent (JSON lines, as `examples/agents/investigator.py`) that asks casebook for
/// two calls, one step each, then answers with a trajectory of its own that reports both (the
/// second with its arguments as JSON text, as chat-completions agents write them) and a call of
/// a tool of its own.
const REPORTING_AGENT: &str = r#"
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    told = [m for m in request["messages"] if m["role"] == "tool"]
    if len(told) == 0:
        reply = {"tool_calls": [{"name": "log_fetcher", "arguments": {"service": "paiements"}}]}
    elif len(told) == 1:
        reply = {"tool_calls": [{"name": "metrics_query", "arguments": {"service": "paiements", "metric": "error_rate"}}]}
    else:
        reply = {"output": "pool exhausted", "trajectory": [
            {"type": "tool_call", "name": "log_fetcher", "arguments": {"service": "paiements"}, "result": "seen"},
            {"type": "tool_call", "name": "grep_runbook", "arguments": {"q": "pool"}},
            {"type": "tool_call", "name": "metrics_query", "arguments": "{\"metric\": \"error_rate\", \"service\": \"paiements\"}"},
            {"type": "tool_call", "name": "log_fetcher", "arguments": {"service": "paiements"}},
        ]}
    print(json.dumps(reply), flush=True)
"#;

#[tokio::test]
async fn calls_an_agent_reports_that_casebook_served_are_counted_once() {
    let result = run(case(), json!({"program": "python3", "args": ["-c", REPORTING_AGENT]}), DEFAULT_MAX_STEPS).await;

    let output = result.output.as_ref().unwrap();
    assert_eq!(output.output, json!("pool exhausted"));
    // The two served calls stand for the first and third reports; the call of the agent's own
    // tool is kept, and so is the second report of `log_fetcher` (served once only).
    assert_eq!(
        kinds(&output.trajectory),
        [
            "message user",
            "call log_fetcher",
            "call metrics_query",
            "call grep_runbook",
            "call log_fetcher",
            "message assistant"
        ]
    );
    let how: Vec<_> = output.trajectory.iter().filter_map(served).map(|(n, s)| (n, s.map(|s| s.how))).collect();
    assert_eq!(
        how,
        [
            ("log_fetcher", Some(Served::Matched)),
            ("metrics_query", Some(Served::Matched)),
            ("grep_runbook", None),
            ("log_fetcher", None)
        ]
    );
    assert_eq!((output.served_calls, output.unmatched_calls), (2, 0));
    assert_eq!(output.tool_calls().count(), 4);
}

/// What casebook adds to a tool call served through the protocol (issue 34's budget: under
/// 1 ms p99 over loopback): from the moment the agent has made its reply asking for a call to
/// the moment its next request, carrying the answer, arrives: reading the reply, serving the
/// call, recording it, building and sending the next request. 400 runs of 5 calls each,
/// one at a time, through the engine; as figures:
/// `cargo nextest run --release -p casebook-runner --run-ignored only -E 'test(/protocol_served_call_latency/)' --no-capture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: prints figures"]
async fn protocol_served_call_latency() {
    use std::time::{Duration, Instant};
    const RUNS: usize = 400;
    const CALLS: usize = 5;
    /// When each request came and when its reply was made.
    type Times = Arc<Mutex<Vec<(Instant, Instant)>>>;
    let times: Times = Arc::default();
    let kept = times.clone();
    let app = Router::new().route(
        "/agent",
        post(move |axum::Json(body): axum::Json<Value>| {
            let kept = kept.clone();
            async move {
                let came = Instant::now();
                let told = body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").count();
                let reply = if told < CALLS {
                    json!({"tool_calls": [{"name": "log_fetcher", "arguments": {"service": "paiements", "step": told}}]})
                } else {
                    json!({"output": "pool"})
                };
                let text = reply.to_string();
                kept.lock().unwrap().push((came, Instant::now()));
                text
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut added: Vec<Duration> = Vec::with_capacity(RUNS * CALLS);
    for i in 0..RUNS + 20 {
        let result = run(case(), json!(format!("http://{address}/agent")), DEFAULT_MAX_STEPS).await;
        assert_eq!(result.output.as_ref().unwrap().served_calls, CALLS as u32);
        let times = std::mem::take(&mut *times.lock().unwrap());
        assert_eq!(times.len(), CALLS + 1);
        if i >= 20 {
            added.extend(times.windows(2).map(|pair| pair[1].0 - pair[0].1));
        }
    }
    added.sort();
    let at = |q: f64| added[((added.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e6;
    println!(
        "protocol tool call, casebook's part over loopback: p50 {:.0} µs, p99 {:.0} µs over {} calls",
        at(0.5),
        at(0.99),
        added.len()
    );
}
