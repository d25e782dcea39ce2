//! The MCP server of a run, end to end: the engine runs cases against an HTTP agent on
//! 127.0.0.1:0 that connects to the address it is sent with rmcp's client (streamable HTTP),
//! lists the tools, calls them, and answers with what it got.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use casebook_model::Case;
use casebook_model::snapshot::Served;
use casebook_runner::engine::{Finished, Mode, Plan, PlannedScenario, RunKeys, Work, execute};
use casebook_runner::environment::Environment;
use casebook_runner::mcp::McpServer;
use casebook_runner::planned::PlannedCases;
use casebook_runner::protocol::{Serving, Step, ToolDefinition};
use casebook_runner::record::RunResult;
use casebook_runner::target::TargetSpec;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::sync::{Barrier, mpsc, watch};

/// What the agent was sent: each request's `mcp` address (`null` when there was none).
#[derive(Clone)]
struct McpAgent {
    addresses: Arc<Mutex<Vec<Value>>>,
    /// Every run's request waits here for the others, so that their sessions are open at once.
    together: Arc<Barrier>,
}

/// The agent: lists the session's tools, makes the calls its case's `agent_args.calls` say
/// (`[name, arguments]` pairs), tries a made-up token on the same server, and answers with all
/// of it.
async fn investigate(State(agent): State<McpAgent>, body: String) -> String {
    let request: Value = serde_json::from_str(&body).unwrap();
    agent.addresses.lock().unwrap().push(request["mcp"].clone());
    agent.together.wait().await;
    let Some(url) = request["mcp"].as_str() else {
        return json!({"output": "no tools"}).to_string();
    };
    let client = ClientConfig::default().serve(StreamableHttpClientTransport::from_uri(url.to_owned())).await.unwrap();
    let tools: Vec<Value> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| json!({"name": tool.name, "description": tool.description, "schema": *tool.input_schema}))
        .collect();
    let mut answers = Vec::new();
    for call in request["agent_args"]["calls"].as_array().into_iter().flatten() {
        let params = CallToolRequestParams::new(call[0].as_str().unwrap().to_owned())
            .with_arguments(call[1].as_object().unwrap().clone());
        let result = client.call_tool(params).await.unwrap();
        let text: Vec<&str> = result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.as_str()).collect();
        answers.push(json!({"text": text, "error": result.is_error == Some(true)}));
    }
    let _ = client.cancel().await;
    if let Some(late) = request["agent_args"]["late"].as_array() {
        late_call(url, late[0].as_str().unwrap(), &late[1]).await;
    }
    let (prefix, _) = url.split_once("/s/").unwrap();
    let forged = list_tools_status(&format!("{prefix}/s/{}/mcp", "0".repeat(32))).await;
    let mut reply = json!({"output": {"tools": tools, "answers": answers, "forged": forged}});
    // Agents that log their tool use report the calls they made, as they made them.
    if request["agent_args"]["report"] == json!(true) {
        let calls = request["agent_args"]["calls"].as_array().unwrap();
        reply["trajectory"] =
            calls.iter().map(|c| json!({"type": "tool_call", "name": c[0], "arguments": c[1]})).collect();
    }
    reply.to_string()
}

/// Starts a `tools/call` of `name` that the MCP server has taken (its head and part of its body
/// are sent, and the server has had time to route it) and that ends after the agent has
/// replied: the rest of the body follows 300 ms later.
async fn late_call(url: &str, name: &str, arguments: &Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (host, path) = url.strip_prefix("http://").unwrap().split_once('/').unwrap();
    let body =
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
            .to_string();
    let head = format!(
        "POST /{path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body.as_bytes()[..10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        stream.write_all(&body.as_bytes()[10..]).await.unwrap();
        let mut answer = vec![0; 4096];
        let n = stream.read(&mut answer).await.unwrap();
        assert!(answer[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer[..n]));
    });
}

/// The HTTP status a `tools/list` POST to `url` gets (0 when nothing listens).
async fn list_tools_status(url: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await;
    response.map_or(0, |r| r.status().as_u16())
}

/// Serves the agent on a free loopback port; `runs` requests meet at the barrier.
async fn agent(runs: usize) -> (String, McpAgent) {
    let state = McpAgent { addresses: Arc::default(), together: Arc::new(Barrier::new(runs)) };
    let app = Router::new().route("/", post(investigate)).with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}/"), state)
}

/// Runs every case once against `target` through the engine, all at once.
async fn run(cases: &[Case], scenario: PlannedScenario) -> Vec<RunResult> {
    let scenarios = vec![scenario];
    let keys = RunKeys::new(&scenarios, &[], 1).unwrap();
    let plan = Arc::new(Plan {
        cases: PlannedCases::of(cases, &keys).unwrap(),
        scenarios,
        n_runs: 1,
        graders: Vec::new(),
        case_asserts: None,
        seeds: Vec::new(),
        concurrency: cases.len(),
        noise: None,
    });
    let (work_tx, work_rx) = mpsc::channel(1);
    work_tx
        .send(plan.jobs(0..plan.total()).unwrap().into_iter().map(|job| Work { job, stored: None }).collect())
        .await
        .unwrap();
    drop(work_tx);
    let (_stop_tx, stop_rx) = watch::channel(false);
    let (results_tx, mut results_rx) = mpsc::channel(16);
    let finish = Arc::new(|finished: Finished| finished.result);
    tokio::spawn(execute(plan, work_rx, Mode::Run, stop_rx, finish, results_tx));
    let mut results = Vec::new();
    while let Some(batch) = results_rx.recv().await {
        results.extend(batch);
    }
    results.sort_by(|a, b| a.case_id.cmp(&b.case_id));
    results
}

fn scenario(url: &str, server: Option<Arc<McpServer>>) -> PlannedScenario {
    let spec: TargetSpec = url.parse().unwrap();
    let target = spec.connect().unwrap();
    let target = match server {
        Some(server) => target.with_mcp(server),
        None => target,
    };
    PlannedScenario {
        name: "mcp".into(),
        describe: spec.describe(),
        target,
        max_steps: casebook_runner::environment::DEFAULT_MAX_STEPS,
    }
}

/// An incident with logs and metrics on record, and an agent told to look at both, at a service
/// the snapshot knows nothing about, and at a tool the case does not have.
fn incident() -> Case {
    serde_json::from_value(json!({
        "id": "a-incident",
        "input": "Pourquoi la base de données répond-elle lentement ?",
        "tools": [
            {
                "name": "logs",
                "description": "Fetch a service's logs",
                "parameters": {"type": "object", "properties": {"service": {"type": "string"}}},
                "responses": [{"when": {"includes": {"service": "db"}}, "result": "connexion refusée: pool épuisé"}]
            },
            {
                "name": "metrics",
                "responses": [{"when": {"arguments": {"name": "pool"}}, "result": {"used": 50, "max": 50}}]
            }
        ],
        "agent_args": {"calls": [
            ["logs", {"service": "db", "since": "1h"}],
            ["metrics", {"name": "pool"}],
            ["logs", {"service": "web"}],
            ["shell", {"command": "uptime"}]
        ]},
        "expected_output": "the pool is exhausted"
    }))
    .unwrap()
}

/// Another case, run beside the incident: its own tool only.
fn deploys() -> Case {
    serde_json::from_value(json!({
        "id": "b-deploys",
        "input": "What changed?",
        "tools": [{"name": "deploys", "responses": [{"result": ["v2 rolled out"]}]}],
        "agent_args": {"calls": [["deploys", {}], ["metrics", {"name": "pool"}]]}
    }))
    .unwrap()
}

/// The served calls of a result's trajectory: name, arguments, result, serving.
fn calls(result: &RunResult) -> Vec<(String, Value, Option<Value>, Serving)> {
    let output = result.output.as_ref().unwrap();
    output
        .trajectory
        .iter()
        .filter_map(|step| match step {
            Step::ToolCall { name, arguments, result, served: Some(served) } => {
                Some((name.clone(), arguments.clone(), result.clone(), *served))
            }
            _ => None,
        })
        .collect()
}

fn serving(how: Served, entry: Option<usize>, error: bool) -> Serving {
    Serving { how, entry, error }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_agent_gets_the_snapshot_answers_and_the_calls_are_in_the_trajectory() {
    let (url, agent) = agent(2).await;
    let server = Arc::new(McpServer::new());
    let results = run(&[incident(), deploys()], scenario(&url, Some(server.clone()))).await;
    assert_eq!(results.len(), 2);

    // The incident's agent saw its tools as MCP lists them, and the snapshot's answers.
    let output = &results[0].output.as_ref().unwrap().output;
    assert_eq!(
        output["tools"],
        json!([
            {"name": "logs", "description": "Fetch a service's logs",
             "schema": {"type": "object", "properties": {"service": {"type": "string"}}}},
            {"name": "metrics", "description": null, "schema": {"type": "object"}}
        ])
    );
    let answers = &output["answers"];
    assert_eq!(answers[0], json!({"text": ["connexion refusée: pool épuisé"], "error": false}));
    assert_eq!(answers[1], json!({"text": ["{\"used\":50,\"max\":50}"], "error": false}));
    assert_eq!(answers[2]["error"], json!(true), "{answers}");
    assert_eq!(answers[3]["error"], json!(true), "{answers}");
    // Every call is in the trajectory, with how it was served; the two outside the snapshot are
    // what the case's unmatched count counts.
    let incident_calls = calls(&results[0]);
    let how: Vec<(&str, Serving)> = incident_calls.iter().map(|(name, _, _, s)| (name.as_str(), *s)).collect();
    assert_eq!(
        how,
        [
            ("logs", serving(Served::Matched, Some(0), false)),
            ("metrics", serving(Served::Matched, Some(0), false)),
            ("logs", serving(Served::Unmatched, None, true)),
            ("shell", serving(Served::UnknownTool, None, true)),
        ]
    );
    assert_eq!(incident_calls[0].1, json!({"service": "db", "since": "1h"}));
    assert_eq!(incident_calls[1].2, Some(json!({"used": 50, "max": 50})));
    assert_eq!(incident_calls.iter().filter(|(_, _, _, s)| s.how.is_outside()).count(), 2);

    // The other session, open at the same time on the same server, reached its own tools only:
    // `metrics` is not one of them, and the incident's calls are not in its trajectory.
    let other = &results[1].output.as_ref().unwrap().output;
    assert_eq!(other["tools"].as_array().unwrap().len(), 1);
    assert_eq!(other["tools"][0]["name"], "deploys");
    let how: Vec<(String, Served)> = calls(&results[1]).into_iter().map(|(name, _, _, s)| (name, s.how)).collect();
    assert_eq!(how, [("deploys".to_owned(), Served::Matched), ("metrics".to_owned(), Served::UnknownTool)]);
    // A token that is not a session's gets nothing.
    assert_eq!((output["forged"].clone(), other["forged"].clone()), (json!(404), json!(404)));

    // Each session had an address of its own; once its run is over it answers 404.
    let addresses: Vec<String> =
        agent.addresses.lock().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
    assert_eq!(addresses.len(), 2);
    assert_ne!(addresses[0], addresses[1]);
    for address in &addresses {
        assert!(address.starts_with("http://127.0.0.1:") && address.ends_with("/mcp"), "{address}");
        assert_eq!(list_tools_status(address).await, 404);
    }
    // And when the experiment's server goes, nothing listens there any more.
    drop(results);
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(5);
    while list_tools_status(&addresses[0]).await != 0 {
        assert!(Instant::now() < deadline, "the MCP listener outlived its server");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_address_is_sent_without_recorded_answers_or_to_a_target_without_mcp() {
    let (url, agent) = agent(1).await;
    let server = Arc::new(McpServer::new());
    let plain: Case =
        serde_json::from_value(json!({"id": "plain", "input": "q", "tools": [{"name": "logs"}]})).unwrap();
    let results = run(&[plain], scenario(&url, Some(server.clone()))).await;
    assert_eq!(results[0].output.as_ref().unwrap().output, json!("no tools"));
    let results = run(&[incident()], scenario(&url, None)).await;
    assert_eq!(results[0].output.as_ref().unwrap().output, json!("no tools"));
    assert_eq!(*agent.addresses.lock().unwrap(), [Value::Null, Value::Null]);
    // Only agents that can be told an address take the server: a chat-completions model is
    // answered by the tool loop, a built-in agent calls no tools.
    let takes = |spec: &str| {
        let spec: TargetSpec = spec.parse().unwrap();
        spec.connect().unwrap().with_mcp(server.clone()).mcp().is_some()
    };
    assert!(takes("http://127.0.0.1:9/agent"));
    assert!(takes("cmd:python3 agent.py"));
    assert!(!takes("openai+http://127.0.0.1:9/v1?model=m"));
    assert!(!takes("builtin:echo"));
}

/// The p50 and p99 of `durations`, in microseconds.
fn percentiles(mut durations: Vec<Duration>) -> (f64, f64) {
    durations.sort();
    let at = |q: f64| durations[((durations.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e6;
    (at(0.50), at(0.99))
}

/// What a served call costs over loopback (issue 34's budget: under 1 ms p99), as figures:
/// `cargo nextest run -p casebook-runner --run-ignored only -E 'test(/served_call_latency/)' --no-capture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: prints figures"]
async fn served_call_latency() {
    const CALLS: usize = 2_000;
    let tools: Vec<casebook_model::Tool> = serde_json::from_value(json!([{
        "name": "logs",
        "responses": [
            {"when": {"includes": {"service": "db"}}, "result": ["timeout", "pool exhausted"]},
            {"when": {"matches": {"service": "^web"}}, "result": "ok"}
        ]
    }]))
    .unwrap();
    let definitions: Vec<ToolDefinition> = tools.iter().map(ToolDefinition::of).collect();
    let environment = Arc::new(Environment::of(Some(&tools)).unwrap().unwrap());
    let arguments = json!({"service": "db", "since": "1h"});

    // In process: the snapshot's answer and the log, nothing else.
    let mut alone = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        std::hint::black_box(environment.serve("logs", &arguments));
        alone.push(started.elapsed());
    }
    environment.drain();

    let server = McpServer::new();
    let route = server.open(environment.clone(), &definitions).await.unwrap();
    // With rmcp's client, as an agent would call.
    let client =
        ClientConfig::default().serve(StreamableHttpClientTransport::from_uri(route.url().to_owned())).await.unwrap();
    let call = || CallToolRequestParams::new("logs").with_arguments(arguments.as_object().unwrap().clone());
    for _ in 0..100 {
        client.call_tool(call()).await.unwrap();
    }
    let mut sdk = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let result = client.call_tool(call()).await.unwrap();
        sdk.push(started.elapsed());
        assert_ne!(result.is_error, Some(true));
    }
    let _ = client.cancel().await;

    // One JSON-RPC POST on a kept-alive connection: the server's part without the SDK client's.
    let http = reqwest::Client::new();
    let body =
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "logs", "arguments": arguments}});
    let post = || {
        http.post(route.url())
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
            .send()
    };
    for _ in 0..100 {
        post().await.unwrap().bytes().await.unwrap();
    }
    let mut raw = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let answer = post().await.unwrap().bytes().await.unwrap();
        raw.push(started.elapsed());
        assert!(String::from_utf8_lossy(&answer).contains("pool exhausted"), "{}", String::from_utf8_lossy(&answer));
    }
    assert_eq!(environment.drain().len(), 2 * (CALLS + 100));
    // The same POST to an address that is no session's: the listener and HTTP without MCP.
    let (prefix, _) = route.url().split_once("/s/").unwrap();
    let nobody = format!("{prefix}/s/{}/mcp", "0".repeat(32));
    let mut bare = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let answer = http.post(&nobody).json(&body).send().await.unwrap();
        answer.bytes().await.unwrap();
        bare.push(started.elapsed());
    }

    for (what, durations) in [
        ("Environment::serve in process", alone),
        ("MCP tools/call, rmcp client", sdk),
        ("MCP tools/call, one HTTP POST", raw),
        ("HTTP POST answered 404, no MCP", bare),
    ] {
        let (p50, p99) = percentiles(durations);
        println!("{what}: p50 {p50:.0} µs, p99 {p99:.0} µs over {CALLS} calls");
    }
}

/// A command agent on the MCP Python SDK (the `mcp` package): one JSON line in, one out.
const PYTHON_AGENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

async def investigate(request):
    async with streamable_http_client(request["mcp"]) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            answers = []
            for name, arguments in request["agent_args"]["calls"]:
                result = await session.call_tool(name, arguments)
                texts = [block.text for block in result.content if block.type == "text"]
                answers.append({"text": texts, "error": bool(result.is_error)})
    return {"tools": [tool.name for tool in tools], "answers": answers}

for line in sys.stdin:
    print(json.dumps({"output": asyncio.run(investigate(json.loads(line)))}), flush=True)
"#;

/// A Python that has the `mcp` package: `CASEBOOK_TEST_MCP_PYTHON`, else `python3` if it has it.
fn python_with_mcp() -> Option<String> {
    let candidates = std::env::var("CASEBOOK_TEST_MCP_PYTHON").into_iter().chain(["python3".to_owned()]);
    candidates.into_iter().find(|python| {
        std::process::Command::new(python)
            .args(["-c", "import mcp.client.streamable_http"])
            .output()
            .is_ok_and(|out| out.status.success())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_agent_on_the_python_mcp_sdk_gets_the_snapshot_answers() {
    let python = python_with_mcp().expect(
        "no Python with the `mcp` package: `scripts/test.sh` installs one, or set CASEBOOK_TEST_MCP_PYTHON to one",
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.py");
    fs_err::write(&script, PYTHON_AGENT).unwrap();
    let server = Arc::new(McpServer::new());
    let results = run(&[incident()], scenario(&format!("cmd:{python} {}", script.display()), Some(server))).await;
    let output = &results[0].output.as_ref().unwrap().output;
    assert_eq!(output["tools"], json!(["logs", "metrics"]));
    let answers = output["answers"].as_array().unwrap();
    assert_eq!(
        answers[..2],
        [
            json!({"text": ["connexion refusée: pool épuisé"], "error": false}),
            json!({"text": ["{\"used\":50,\"max\":50}"], "error": false}),
        ]
    );
    assert_eq!((&answers[2]["error"], &answers[3]["error"]), (&json!(true), &json!(true)));
    let how: Vec<Served> = calls(&results[0]).into_iter().map(|(_, _, _, s)| s.how).collect();
    assert_eq!(how, [Served::Matched, Served::Matched, Served::Unmatched, Served::UnknownTool]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_an_mcp_agent_reports_having_made_are_the_served_ones() {
    let (url, _) = agent(1).await;
    let server = Arc::new(McpServer::new());
    let mut case = incident();
    case.task.agent_args.as_mut().unwrap().insert("report".into(), json!(true));

    let results = run(&[case], scenario(&url, Some(server))).await;

    let output = results[0].output.as_ref().unwrap();
    // Each reported call is the served one, kept once with its answer and how it was served.
    let steps: Vec<(&str, bool)> = output
        .trajectory
        .iter()
        .filter_map(|s| match s {
            Step::ToolCall { name, served, .. } => Some((name.as_str(), served.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(steps, [("logs", true), ("metrics", true), ("logs", true), ("shell", true)]);
    assert_eq!((output.served_calls, output.unmatched_calls), (4, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_calls_still_arriving_after_a_reply_end_their_turn() {
    let (url, _) = agent(1).await;
    let server = Arc::new(McpServer::new());
    // Two turns; each reply leaves a call on its way.
    let case: Case = serde_json::from_value(json!({
        "id": "late",
        "input": "first look",
        "turns": [{"role": "user", "content": "and now?"}],
        "tools": [{"name": "logs", "responses": [{"when": {"includes": {"service": "db"}}, "result": "pool épuisé"}]}],
        "agent_args": {"calls": [["logs", {"service": "db"}]], "late": ["logs", {"service": "web"}]}
    }))
    .unwrap();

    let results = run(&[case], scenario(&url, Some(server))).await;

    let output = results[0].output.as_ref().unwrap();
    let steps: Vec<String> = output
        .trajectory
        .iter()
        .map(|s| match s {
            Step::Message { role, .. } => serde_json::to_value(role).unwrap().as_str().unwrap().to_owned(),
            Step::ToolCall { arguments, served, .. } => {
                format!("{} {:?}", arguments["service"].as_str().unwrap(), served.unwrap().how)
            }
            Step::Other { .. } => "other".into(),
        })
        .collect();
    assert_eq!(
        steps,
        ["user", "db Matched", "assistant", "web Unmatched", "user", "db Matched", "assistant", "web Unmatched"]
    );
    assert_eq!((output.served_calls, output.unmatched_calls), (4, 2));
}
