//! `casebook run` end to end against fake agents that are real HTTP servers on 127.0.0.1:0:
//! the ground truth never reaches an agent, finished runs are reused, failures are errors and
//! not scores, and the reports and exit status say what happened.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::cli::{Backend, Folder, cb, run};

/// A fake agent: what it answers, and every request body it was sent.
#[derive(Clone)]
struct Agent {
    bodies: Arc<Mutex<Vec<String>>>,
    behaviour: Behaviour,
}

#[derive(Clone, Copy)]
pub(crate) enum Behaviour {
    /// Answers with the text of the last message, upper-cased.
    Shout,
    /// 429 with `Retry-After: 1` on every first request of a turn, then the answer.
    Flaky,
    /// 500 every time.
    Crash,
    /// Answers like `Shout` after 200 ms.
    Slow,
    /// Answers like `Shout` when given at most one context item, else something wrong: an
    /// agent that noise throws off.
    Distracted,
    /// Calls `logs` with `{"service": "db"}` on the MCP server the request names, if any, and
    /// answers with what it got (`NO MCP` without one).
    McpClient,
    /// Asks casebook to answer a call of each of the request's tools (agent protocol), then
    /// shouts the turn's message followed by what the tools said. At `/v1/chat/completions`, the
    /// same as a chat-completions model.
    Investigate,
}

/// Starts `behaviour` on a free port of 127.0.0.1; returns its URL and what it recorded.
pub(crate) fn serve(behaviour: Behaviour) -> (String, Arc<Mutex<Vec<String>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent { bodies: bodies.clone(), behaviour };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
            tx.send(listener.local_addr().expect("an address")).expect("the test is waiting");
            let model = agent.clone();
            let app = axum::Router::new()
                .route(
                    "/agent",
                    axum::routing::post(move |body: String| {
                        let agent = agent.clone();
                        async move { agent.answer(body).await }
                    }),
                )
                .route(
                    "/v1/chat/completions",
                    axum::routing::post(move |body: String| {
                        let model = model.clone();
                        async move {
                            model.bodies.lock().expect("the lock").push(body.clone());
                            Json(investigating_model(&serde_json::from_str(&body).unwrap_or_default()))
                        }
                    }),
                );
            axum::serve(listener, app).await.expect("the fake agent serves");
        });
    });
    let addr = rx.recv().expect("the fake agent starts");
    (format!("http://{addr}/agent"), bodies)
}

impl Agent {
    async fn answer(&self, body: String) -> Response {
        if matches!(self.behaviour, Behaviour::Slow) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let seen = {
            let mut bodies = self.bodies.lock().expect("the lock");
            bodies.push(body.clone());
            bodies.iter().filter(|b| **b == body).count()
        };
        match self.behaviour {
            Behaviour::Crash => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
            Behaviour::Flaky if seen == 1 => {
                (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], "slow down").into_response()
            }
            Behaviour::Investigate => {
                Json(investigating_agent(&serde_json::from_str(&body).unwrap_or_default())).into_response()
            }
            Behaviour::McpClient => {
                let request: Value = serde_json::from_str(&body).unwrap_or_default();
                let Some(mcp) = request["mcp"].as_str() else {
                    return Json(json!({"output": "NO MCP"})).into_response();
                };
                let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": "logs", "arguments": {"service": "db"}}});
                let answer: Value = reqwest::Client::new()
                    .post(mcp)
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2025-06-18")
                    .json(&call)
                    .send()
                    .await
                    .expect("the MCP server answers")
                    .json()
                    .await
                    .expect("a JSON-RPC answer");
                Json(json!({"output": answer["result"]["content"][0]["text"]})).into_response()
            }
            _ => {
                let request: Value = serde_json::from_str(&body).unwrap_or_default();
                let last = request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
                let mut text = last["content"].as_str().unwrap_or_default().to_uppercase();
                let context = request["context"].as_array().map_or(0, Vec::len);
                if matches!(self.behaviour, Behaviour::Distracted) && context > 1 {
                    text = "LOST IN THE NOISE".to_owned();
                }
                Json(json!({"output": text, "trajectory": [{"type": "tool_call", "name": "lookup", "arguments": {"q": 1}}]}))
                    .into_response()
            }
        }
    }
}

/// The fake investigator's calls: one of each tool, with the turn's message as the `service`.
fn investigation(request: &Value) -> (String, Vec<(String, Value)>) {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let start = messages.iter().rposition(|m| ["user", "hitl"].contains(&m["role"].as_str().unwrap_or_default()));
    let said = start.map(|i| messages[i]["content"].as_str().unwrap_or_default().to_owned()).unwrap_or_default();
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    // A protocol tool is `{name}`, a chat-completions one `{function: {name}}`.
    let name = |t: &Value| t["name"].as_str().or(t["function"]["name"].as_str()).unwrap_or_default().to_owned();
    let calls = tools.iter().map(|t| (name(t), json!({"service": said}))).collect();
    (said, calls)
}

/// [`Behaviour::Investigate`] in the agent protocol.
fn investigating_agent(request: &Value) -> Value {
    let (said, calls) = investigation(request);
    match request.get("tool_results").and_then(Value::as_array) {
        None if !calls.is_empty() => json!({
            "tool_calls": calls.iter().map(|(name, arguments)| json!({"name": name, "arguments": arguments})).collect::<Vec<_>>()
        }),
        results => {
            let told: Vec<String> = results.into_iter().flatten().map(|r| r["content"].to_string()).collect();
            json!({"output": format!("{} {}", said.to_uppercase(), told.join(" ")).trim_end()})
        }
    }
}

/// [`Behaviour::Investigate`] as a chat-completions model: after the tools have answered (or
/// when there are none) it shouts the turn's message followed by what they said.
fn investigating_model(request: &Value) -> Value {
    let (said, calls) = investigation(request);
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let answered = messages.last().is_some_and(|m| m["role"] == "tool");
    let message = if calls.is_empty() || answered {
        let start = messages.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
        let told: Vec<String> =
            messages[start..].iter().filter(|m| m["role"] == "tool").map(|m| m["content"].to_string()).collect();
        json!({"role": "assistant", "content": format!("{} {}", said.to_uppercase(), told.join(" ")).trim_end()})
    } else {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, arguments))| {
                json!({"id": format!("c{i}"), "type": "function",
                       "function": {"name": name, "arguments": arguments.to_string()}})
            })
            .collect();
        json!({"role": "assistant", "content": null, "tool_calls": calls})
    };
    json!({"choices": [{"index": 0, "message": message}]})
}

/// Cases whose tools have recorded answers (fine ones: they hold no expectation), and
/// expectations that hold strings found nowhere else.
const INVESTIGATED: &str = r#"{"id": "i1", "input": "api est lent — pourquoi ?", "tools": [{"name": "log_fetcher", "responses": [{"when": {"matches": {"service": "^api"}}, "result": ["GC pause 2 s — 垃圾回收"]}], "default": {"error": "no logs for that service"}}, {"name": "metrics_query", "default": "empty"}], "expected": {"output": "TOOL-SECRET-1", "outcomes": ["TOOL-SECRET-2"], "rubric": "TOOL-SECRET-3", "tool_calls": [{"name": "log_fetcher", "arguments": {"service": "TOOL-SECRET-4"}}]}}
{"id": "i2", "input": "db is down", "turns": [{"role": "hitl", "content": "api too"}], "tools": [{"name": "log_fetcher", "responses": [{"when": {"arguments": {"service": "db is down"}}, "result": "disk full on db-1"}]}], "expected": {"output": "TOOL-SECRET-5", "per_turn": ["TOOL-SECRET-6", "TOOL-SECRET-5"]}}
"#;

const TOOL_SECRETS: [&str; 6] =
    ["TOOL-SECRET-1", "TOOL-SECRET-2", "TOOL-SECRET-3", "TOOL-SECRET-4", "TOOL-SECRET-5", "TOOL-SECRET-6"];

/// Cases whose expectations hold strings found nowhere else.
pub(crate) const DATASET: &str = r#"{"id": "a", "input": "hello there", "expected": {"output": "HELLO THERE", "outcomes": ["OUTCOME-SECRET-1"], "rubric": "RUBRIC-SECRET-2", "acceptable": ["ACCEPT-SECRET-3"], "rubric_vars": {"ref": "VARS-SECRET-4"}}, "labels": ["greeting"], "context": [{"type": "document", "content": "the manual"}], "tools": [{"name": "lookup"}], "memory_seeds": [{"source": "profile", "content": "likes tea"}]}
{"id": "b", "input": "first", "turns": [{"role": "hitl", "content": "operator says stop"}, {"role": "user", "content": "last"}], "expected": {"output": "LAST", "per_turn": ["FIRST-SECRET-5", "STOP-SECRET-6", "LAST"]}, "labels": ["multi"]}
{"id": "c", "input": "wrong answer please", "expected": {"output": "GROUND-TRUTH-SECRET-7"}, "labels": ["greeting"]}
"#;

const SECRETS: [&str; 7] = [
    "OUTCOME-SECRET-1",
    "RUBRIC-SECRET-2",
    "ACCEPT-SECRET-3",
    "VARS-SECRET-4",
    "FIRST-SECRET-5",
    "STOP-SECRET-6",
    "GROUND-TRUTH-SECRET-7",
];

fn experiment(dir: &Folder, url: &str, extra: &str) -> std::path::PathBuf {
    dir.file("cases.jsonl", DATASET);
    dir.file(
        "exp.yaml",
        format!(
            "name: smoke\ndataset: cases.jsonl\ntarget: '{url}'\nn_runs: 2\nthreshold: 0.5\nconcurrency: 4\ntimeout_secs: 5\n\
             graders:\n  - {{kind: exact_match}}\n  - {{kind: tool_called, tool: lookup}}\n{extra}"
        ),
    )
}

pub(crate) fn summary(stdout: &str) -> Value {
    serde_json::from_str(stdout.lines().last().expect("a summary line")).expect("the summary is JSON")
}

on_both!(
    finished_runs_are_reused_and_regrade_calls_no_agent,
    seed_files_are_read_for_files_and_kept_with_stored_versions,
    runs_are_named_by_prefix_latest_and_previous,
);

#[test]
fn no_expectation_reaches_the_agent() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Shout);
    let exp = experiment(&dir, &url, "");
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    // a and b pass (b's last turn is "last" → "LAST"); c fails: 4 of 6 pass, above 0.5.
    assert_eq!(out.status, Some(0), "{out:?}");
    let bodies = bodies.lock().expect("the lock").clone();
    // a: 1 turn, b: 3 turns, c: 1 turn; twice each.
    assert_eq!(bodies.len(), 10);
    for body in &bodies {
        for secret in SECRETS {
            assert!(!body.contains(secret), "`{secret}` was sent to the agent: {body}");
        }
        assert!(!body.contains("\"expected\""), "{body}");
    }
    // The task did arrive: context, tools, seeds, and the operator turn as `hitl`.
    assert!(bodies.iter().any(|b| b.contains("the manual") && b.contains("lookup") && b.contains("likes tea")));
    assert!(bodies.iter().any(|b| b.contains(r#""role":"hitl""#) && b.contains("operator says stop")));
    let s = summary(&out.stdout);
    assert_eq!(
        (s["totals"]["passed"].as_u64(), s["totals"]["failed"].as_u64(), s["totals"]["errors"].as_u64()),
        (Some(4), Some(2), Some(0)),
        "{s}"
    );
}

#[test]
fn no_expectation_reaches_the_agent_through_tool_answers() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Investigate);
    let base = url.trim_end_matches("/agent");
    dir.file("cases.jsonl", INVESTIGATED);
    let exp = dir.file(
        "exp.yaml",
        format!(
            "dataset: cases.jsonl\nscenarios:\n  - {{name: protocol, target: '{url}'}}\n  \
             - {{name: model, target: 'openai+{base}/v1?model=m'}}\ngraders: [{{kind: exact_match}}]\nthreshold: 0\n"
        ),
    );
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json", "--report", "jsonl=results.jsonl"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    let bodies = bodies.lock().expect("the lock").clone();
    // Each scenario: i1 asks, then answers (2 calls); i2 asks and answers on each of its 2 turns (4).
    assert_eq!(bodies.len(), 12, "{bodies:#?}");
    for body in &bodies {
        for secret in TOOL_SECRETS {
            assert!(!body.contains(secret), "`{secret}` was sent to the agent: {body}");
        }
        assert!(!body.contains("\"expected\"") && !body.contains("\"responses\""), "{body}");
    }
    // The answers did arrive, in the protocol's `tool_results` and as the model's tool messages.
    assert!(
        bodies.iter().any(|b| b.contains("\"tool_results\"") && b.contains("GC pause 2 s — 垃圾回收")),
        "{bodies:#?}"
    );
    assert!(bodies.iter().any(|b| b.contains("\"role\":\"tool\"") && b.contains("disk full on db-1")), "{bodies:#?}");
    // A call outside the snapshot is an error the agent sees as a failing tool's.
    assert!(bodies.iter().any(|b| b.contains("\"is_error\":true")), "{bodies:#?}");
    assert!(bodies.iter().any(|b| b.contains("\"content\":\"error: ")), "{bodies:#?}");
    // Each result counts its calls outside the snapshot; the summary adds them up.
    let rows: Vec<Value> = fs_err::read_to_string(dir.join("results.jsonl"))
        .expect("the JSONL report")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    for row in &rows {
        let (served, unmatched) = (&row["output"]["served_calls"], &row["output"]["unmatched_calls"]);
        match row["case_id"].as_str() {
            Some("i1") => assert_eq!((served, unmatched), (&json!(2), &Value::Null), "{row}"),
            // Turn 1 asks about "api too", which log_fetcher has no answer for.
            _ => assert_eq!((served, unmatched), (&json!(2), &json!(1)), "{row}"),
        }
        let how: Vec<&Value> = row["output"]["trajectory"]
            .as_array()
            .expect("a trajectory")
            .iter()
            .filter(|s| s["type"] == "tool_call")
            .map(|s| &s["served"]["how"])
            .collect();
        assert!(!how.is_empty() && how.iter().all(|h| h.is_string()), "{row}");
    }
    let s = summary(&out.stdout);
    assert_eq!(
        s["tool_calls"],
        json!({"served": 8, "unmatched": 2, "results_with_unmatched": 2,
               "unmatched_in": [{"case_id": "i2", "scenario": "model", "run": 0}, {"case_id": "i2", "scenario": "protocol", "run": 0}]}),
        "{s}"
    );
}

#[test]
fn max_steps_from_the_experiment_stops_an_agent_still_calling_tools() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Investigate);
    dir.file("cases.jsonl", INVESTIGATED);
    let exp = dir.file(
        "exp.yaml",
        format!(
            "dataset: cases.jsonl\nmax_steps: 1\nscenarios:\n  - {{name: short, target: '{url}'}}\n  \
             - {{name: enough, target: '{url}', max_steps: 2}}\ngraders: [{{kind: tool_called, tool: log_fetcher}}]\n\
             threshold: 0.5\n"
        ),
    );
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json", "--report", "markdown=report.md"]));
    // `short` lets the agent ask but never answer: both its runs are errors; `enough` passes.
    assert_eq!(out.status, Some(0), "{out:?}");
    let s = summary(&out.stdout);
    assert_eq!((&s["totals"]["passed"], &s["totals"]["errors"]), (&json!(2), &json!(2)), "{s}");
    assert_eq!(s["errors"][0]["kind"], "max-steps", "{s}");
    let i1 = s["errors"][0]["examples"].as_array().unwrap().iter().find(|e| e["case_id"] == "i1").cloned();
    assert_eq!(
        i1.map(|e| e["message"].clone()),
        Some(json!(
            "the agent was still calling tools after 1 step of turn 0 (`max_steps`); its last calls were not answered: \
             `log_fetcher`, `metrics_query`"
        )),
        "{s}"
    );
    // i1 × (1 + 2) calls, i2 × (1 + 4).
    assert_eq!(bodies.lock().expect("the lock").len(), 8);
    let report = fs_err::read_to_string(dir.join("report.md")).expect("the report");
    assert!(report.contains("| max-steps | 2 |"), "{report}");
    // A command-line target keeps the experiment's max_steps.
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json", "--target", &url]));
    assert_eq!(summary(&out.stdout)["totals"]["errors"], 2, "{out:?}");
}

fn finished_runs_are_reused_and_regrade_calls_no_agent(b: &Backend) {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Shout);
    let exp = experiment(&dir, &url, "");
    assert_eq!(run(b.cb(&dir).arg("init")).status, Some(0));
    assert_eq!(run(b.cb(&dir).arg("run").arg(&exp).arg("-q")).status, Some(0));
    assert_eq!(bodies.lock().expect("the lock").len(), 10);
    // The same experiment again: every output is stored, no agent is called.
    let again = run(b.cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    assert_eq!(again.status, Some(0), "{again:?}");
    // The results name the dataset version they ran: the id the file has once imported.
    let imported = run(b.cb(&dir).args(["import", "cases.jsonl", "--format", "json"]));
    let version: Value = serde_json::from_str(imported.stdout.trim()).expect("the import's JSON");
    assert_eq!(summary(&again.stdout)["meta"]["dataset_version_id"], version["version"]["id"], "{imported:?}");
    assert_eq!(bodies.lock().expect("the lock").len(), 10);
    // Re-grading with a stricter grader changes the verdicts, still without the agent.
    let strict = dir.file(
        "strict.yaml",
        format!("dataset: cases.jsonl\ntarget: '{url}'\nn_runs: 2\ngraders:\n  - {{kind: exact_match}}\n  - {{kind: contains, ignore_case: false}}\n"),
    );
    let regraded = run(b.cb(&dir).arg("run").arg(&strict).args(["--regrade", "--format", "json"]));
    assert_eq!(bodies.lock().expect("the lock").len(), 10);
    assert_eq!(regraded.status, Some(1), "{regraded:?}");
    // A new target configuration is a new run hash: the agent is called again.
    let other = dir
        .file("other.yaml", format!("dataset: cases.jsonl\ntarget: '{url}?v=2'\ngraders: [{{kind: exact_match}}]\n"));
    run(b.cb(&dir).arg("run").arg(&other).arg("-q"));
    assert_eq!(bodies.lock().expect("the lock").len(), 15);

    // The runs are stored and can be reported and compared.
    let listed = run(b.cb(&dir).args(["results", "--list"]));
    // A header line, then one line a run.
    assert_eq!(listed.stdout.lines().count(), 5, "{listed:?}");
    let junit = run(b.cb(&dir).args(["results", "--format", "junit"]));
    assert!(junit.stdout.contains("<testsuite"), "{junit:?}");
}

#[test]
fn a_failing_agent_is_an_error_not_a_score() {
    let dir = Folder::new();
    let (url, _) = serve(Behaviour::Crash);
    let exp = experiment(&dir, &url, "retries: 1\n");
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let s = summary(&out.stdout);
    assert_eq!((s["totals"]["errors"].as_u64(), s["totals"]["failed"].as_u64()), (Some(6), Some(0)), "{s}");
    assert_eq!((s["errors"][0]["kind"].as_str(), s["errors"][0]["count"].as_u64()), (Some("http"), Some(6)), "{s}");
}

/// The experiment's `retries` and `timeout_secs` are what each call gets (a target's own
/// settings win): one attempt per run with `retries: 0`, two with `retries: 1`, and a slow agent
/// times out after the experiment's timeout.
#[test]
fn the_experiments_retries_and_timeout_apply_to_its_targets() {
    let attempts = |retries: u32| {
        let dir = Folder::new();
        let (url, bodies) = serve(Behaviour::Crash);
        let exp = experiment(&dir, &url, &format!("retries: {retries}\n"));
        let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
        assert_eq!(out.status, Some(1), "{out:?}");
        bodies.lock().expect("the lock").len()
    };
    // Three cases, two runs each, every run fails at its first turn.
    assert_eq!((attempts(0), attempts(1)), (6, 12));

    let dir = Folder::new();
    let (url, _) = serve(Behaviour::Slow);
    dir.file("one.jsonl", "{\"id\": \"x\", \"input\": \"hi\", \"expected\": {\"output\": \"HI\"}}\n");
    let exp = dir.file(
        "exp.yaml",
        format!(
            "dataset: one.jsonl\ntarget: '{url}'\ntimeout_secs: 0.05\nretries: 0\ngraders: [{{kind: exact_match}}]\n"
        ),
    );
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let s = summary(&out.stdout);
    assert_eq!((s["errors"][0]["kind"].as_str(), s["errors"][0]["count"].as_u64()), (Some("timeout"), Some(1)), "{s}");
    // A target's own timeout wins over the experiment's.
    let exp = dir.file(
        "own.yaml",
        format!(
            "dataset: one.jsonl\ntarget: {{url: '{url}', timeout_secs: 5}}\ntimeout_secs: 0.05\nretries: 0\n\
             graders: [{{kind: exact_match}}]\n"
        ),
    );
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    assert_eq!(out.status, Some(0), "{out:?}");
}

#[test]
fn a_rate_limited_agent_is_waited_for() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Flaky);
    dir.file("one.jsonl", "{\"id\": \"x\", \"input\": \"hi\", \"expected\": {\"output\": \"HI\"}}\n");
    let exp = dir.file("exp.yaml", format!("dataset: one.jsonl\ntarget: '{url}'\ngraders: [{{kind: exact_match}}]\n"));
    let started = std::time::Instant::now();
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After was not honoured");
    assert_eq!(bodies.lock().expect("the lock").len(), 2);
}

#[test]
fn reports_are_written_and_the_threshold_sets_the_exit_status() {
    let dir = Folder::new();
    let (url, _) = serve(Behaviour::Shout);
    let exp = experiment(&dir, &url, "");
    let out = run(cb(&dir)
        .arg("run")
        .arg(&exp)
        .args(["--report", "junit=out/results.xml", "--report", "html=report.html", "--report", "markdown=report.md"])
        .args(["--report", "jsonl=out/results.jsonl"])
        .args(["--where", "labels contains \"greeting\""]));
    // Only a and c: 2 of 4 pass, and the threshold is 0.5.
    assert_eq!(out.status, Some(0), "{out:?}");
    let junit = fs_err::read_to_string(dir.join("out/results.xml")).unwrap_or_default();
    assert!(junit.contains("<failure"), "{junit}");
    // The JSONL report has every result whole: its run hash and the agent's output.
    let jsonl = fs_err::read_to_string(dir.join("out/results.jsonl")).expect("the JSONL report");
    let rows: Vec<Value> = jsonl.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r["hash"].as_str().is_some_and(|h| h.len() == 64)), "{jsonl}");
    assert!(rows.iter().any(|r| r["output"]["output"] == "HELLO THERE"), "{jsonl}");
    // Each grade carries its verdict, or the error that kept it from one.
    assert!(
        rows.iter().flat_map(|r| r["grades"].as_array().into_iter().flatten()).all(|g| g["grader"].is_string()
            && (g["score"].is_number() && g["pass"].is_boolean()) != g["error"]["kind"].is_string()),
        "{jsonl}"
    );
    let html = fs_err::read_to_string(dir.join("report.html")).expect("the HTML report");
    assert!(html.starts_with("<!DOCTYPE html>") || html.starts_with("<!doctype html>"), "{html}");
    let strict = dir.file(
        "strict.yaml",
        format!("dataset: cases.jsonl\ntarget: '{url}'\nthreshold: 0.9\ngraders: [{{kind: exact_match}}]\n"),
    );
    assert_eq!(run(cb(&dir).arg("run").arg(&strict).arg("-q")).status, Some(1));
}

#[test]
fn experiment_mistakes_are_located() {
    let dir = Folder::new();
    dir.file("cases.jsonl", DATASET);
    let exp = dir.file(
        "exp.yaml",
        "dataset: cases.jsonl\ntarget: 'builtin:echo'\ngraders:\n  - {kind: exact_match}\n  - {kind: no_such_grader}\n",
    );
    let out = run(cb(&dir).arg("run").arg(&exp));
    // An unknown grader kind makes the file invalid, as an unknown key does.
    assert_eq!(out.status, Some(1), "{out:?}");
    assert!(out.stderr.contains("exp.yaml:5:5"), "{}", out.stderr);
    let exp = dir.file("bad.yaml", "dataset: cases.jsonl\ntarget: 'builtin:echo'\nn_rusn: 2\n");
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let d: Value = serde_json::from_str(out.stderr.lines().next().unwrap_or_default()).expect("a JSON diagnostic");
    assert_eq!((d["line"].as_u64(), d["column"].as_u64()), (Some(3), Some(1)), "{d}");
    // For people: the line itself, and what was meant.
    let out = run(cb(&dir).arg("run").arg(&exp));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert!(out.stderr.contains("3 | n_rusn: 2"), "{}", out.stderr);
    assert!(out.stderr.contains("did you mean `n_runs`?"), "{}", out.stderr);
}

#[test]
fn ctrl_c_keeps_finished_runs_and_the_next_run_resumes() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Slow);
    let rows: String = (0..12)
        .map(|i| format!("{{\"id\": \"c{i}\", \"input\": \"q{i}\", \"expected\": {{\"output\": \"Q{i}\"}}}}\n"))
        .collect();
    dir.file("many.jsonl", rows);
    let exp = dir.file(
        "exp.yaml",
        format!("dataset: many.jsonl\ntarget: '{url}'\nconcurrency: 1\ngraders: [{{kind: exact_match}}]\n"),
    );
    assert_eq!(run(cb(&dir).arg("init")).status, Some(0));
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("casebook"))
        .current_dir(dir.join(""))
        .env("NO_COLOR", "1")
        .env_remove("CASEBOOK_STORE")
        .arg("run")
        .arg(&exp)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("casebook starts");
    // Let a few runs finish (200 ms each, one at a time), then press Ctrl-C.
    std::thread::sleep(Duration::from_millis(1100));
    let kill = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill runs");
    assert!(kill.success());
    let out = child.wait_with_output().expect("casebook stops");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Interrupted (130, as a shell says of Ctrl-C), with how to resume; no summary of a part
    // of the plan judged against the threshold.
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopping"), "{stderr}");
    let called = bodies.lock().expect("the lock").len();
    assert!((2..12).contains(&called), "{called} calls before Ctrl-C");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("interrupted after "), "{stderr}");
    assert!(
        last.ends_with(
            " of 12 runs; the finished runs are kept: run the same command again to resume (they are not run again)"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("threshold") && out.stdout.is_empty(), "{stderr}");
    // The stopped run is listed as stopped; running again calls the agent only for the rest.
    let listed = run(cb(&dir).args(["results", "--list"]));
    assert!(listed.stdout.contains("(stopped)"), "{listed:?}");
    let again = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    assert_eq!(again.status, Some(0), "{again:?}");
    let total = bodies.lock().expect("the lock").len();
    // Each case once, plus at most the one that was in flight when Ctrl-C came.
    assert!((12..=13).contains(&total), "{total} calls in all");
    assert_eq!(summary(&again.stdout)["totals"]["passed"].as_u64(), Some(12));
}

/// A letta-evals suite from the corpus: its Letta target cannot run here (a located error
/// names it), and with `--target` it runs, graded per turn as letta grades a list
/// `ground_truth`.
#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn a_letta_suite_runs_with_a_casebook_target() {
    let suite =
        std::path::Path::new(env!("CASEBOOK_CORPUS_DIR")).join("letta-evals/multiturn-per-turn-grading/suite.yaml");
    let dir = Folder::new();
    let out = run(cb(&dir).arg("run").arg(&suite).args(["--format", "json"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let d: Value = serde_json::from_str(out.stderr.lines().next().unwrap_or_default()).expect("a JSON diagnostic");
    assert_eq!((d["line"].as_u64(), d["column"].as_u64()), (Some(5), Some(9)), "{d}");
    assert!(d["message"].as_str().unwrap_or_default().contains("letta_code"), "{d}");

    // The echo agent repeats each question: every turn fails `contains`, none is an error.
    let out = run(cb(&dir).arg("run").arg(&suite).args(["--target", "builtin:echo", "--format", "json"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let s = summary(&out.stdout);
    assert_eq!(
        (s["totals"]["results"].as_u64(), s["totals"]["failed"].as_u64(), s["totals"]["errors"].as_u64()),
        (Some(3), Some(3), Some(0)),
        "{s}"
    );
}

/// The same on a suite and dataset of our own: a Letta target is a located error that says to
/// give one; with `--target`, each row runs its turns on one session and is graded per turn.
#[test]
fn a_letta_suite_of_our_own_runs_with_a_casebook_target() {
    let dir = Folder::new();
    dir.file(
        "letta/dataset.jsonl",
        "{\"input\": [\"Répète : olá\", \"Répète : 你好\"], \"ground_truth\": [\"olá\", \"你好\"]}\n\
         {\"input\": [\"Capital of Peru?\", \"Capital of Chile?\"], \"ground_truth\": [\"Lima\", \"Santiago\"]}\n\
         {\"input\": \"Say hello\", \"ground_truth\": \"bonjour\"}\n",
    );
    let suite = dir.file(
        "letta/suite.yaml",
        "name: own-per-turn\ndataset: dataset.jsonl\ntarget:\n  kind: letta_code\n  base_url: https://letta.invalid/\n\
         graders:\n  correctness:\n    kind: tool\n    function: contains\n    extractor: last_assistant\n\
         reward:\n  kind: metric\n  metric_key: correctness\n",
    );
    let out = run(cb(&dir).arg("run").arg(&suite).args(["--format", "json"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let d: Value = serde_json::from_str(out.stderr.lines().next().unwrap_or_default()).expect("a JSON diagnostic");
    assert_eq!((d["line"].as_u64(), d["column"].as_u64()), (Some(4), Some(9)), "{d}");
    assert!(d["message"].as_str().unwrap_or_default().contains("letta_code"), "{d}");

    // The echo agent repeats each question: the first row's answers are in its questions.
    let out = run(cb(&dir).arg("run").arg(&suite).args(["--target", "builtin:echo", "--format", "json"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let s = summary(&out.stdout);
    assert_eq!(
        (
            s["totals"]["results"].as_u64(),
            s["totals"]["passed"].as_u64(),
            s["totals"]["failed"].as_u64(),
            s["totals"]["errors"].as_u64()
        ),
        (Some(3), Some(1), Some(2), Some(0)),
        "{s}"
    );
}

/// Seed files are read from beside a dataset file, and kept with a stored version: a run of the
/// stored dataset needs no file on disk, sends the agent the same seeds and has the same run
/// hashes (so it reuses the file's outputs).
fn seed_files_are_read_for_files_and_kept_with_stored_versions(b: &Backend) {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/maslab");
    let dir = Folder::new();
    let dataset =
        dir.file("data/trip-planner.yaml", fs_err::read(examples.join("trip-planner.yaml")).expect("example"));
    let seeds = fs_err::read_to_string(examples.join("seeds/bob.yaml")).expect("the seed file");
    dir.file("data/seeds/bob.yaml", &seeds);
    let first =
        seeds.lines().find_map(|l| l.trim().strip_prefix("content: ")).expect("a seed").trim_matches('"').to_owned();
    let (url, bodies) = serve(Behaviour::Shout);
    let hashes = |report: &str| -> Vec<String> {
        let text = fs_err::read_to_string(dir.join(report)).expect("the JSONL report");
        let mut hashes: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("JSON")["hash"].as_str().expect("a hash").to_owned())
            .collect();
        hashes.sort();
        hashes
    };
    // From the file, without a store.
    let out = run(cb(&dir)
        .arg("run")
        .args(["--no-grade", "--target", &url, "--report", "jsonl=file.jsonl", "--dataset"])
        .arg(&dataset));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(bodies.lock().expect("the lock").iter().any(|b| b.contains(&first)), "{first}");

    assert_eq!(run(b.cb(&dir).arg("init")).status, Some(0));
    assert_eq!(run(b.cb(&dir).arg("import").arg(&dataset).args(["--dataset", "trips"])).status, Some(0));
    fs_err::remove_dir_all(dir.join("data")).expect("remove the files");
    bodies.lock().expect("the lock").clear();
    let out = run(b.cb(&dir).args([
        "run",
        "--no-grade",
        "--dataset",
        "trips",
        "--target",
        &url,
        "--report",
        "jsonl=stored.jsonl",
    ]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(bodies.lock().expect("the lock").iter().any(|b| b.contains(&first)), "the stored seeds reach the agent");
    assert_eq!(hashes("file.jsonl"), hashes("stored.jsonl"));
}

/// A run that grades nothing never looks like a pass: without graders it is refused before any
/// agent is called; with `--no-grade` the runs are ungraded and no threshold is applied.
#[test]
fn a_run_that_grades_nothing_is_refused_or_reported_as_ungraded() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Shout);
    dir.file("cases.jsonl", DATASET);
    let out = run(cb(&dir).args(["run", "--dataset", "cases.jsonl", "--target", &url]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("nothing would grade the answers: add `--grader KIND`"), "{}", out.stderr);
    dir.file("exp.yaml", format!("name: bare\ndataset: cases.jsonl\ntarget: '{url}'\n"));
    let out = run(cb(&dir).args(["run", "exp.yaml"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("add `graders:` in the experiment file"), "{}", out.stderr);
    assert!(bodies.lock().expect("the lock").is_empty(), "no agent was called");

    let out = run(cb(&dir).args(["run", "--no-grade", "--dataset", "cases.jsonl", "--target", &url]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(
        out.stdout
            .contains("\npass rate – of 3 results (0 passed, 0 failed, 0 errors, 3 ungraded) · threshold 100.0 %:"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(" not\n    applied (outputs only: no grader)\n"), "{}", out.stdout);
    let json =
        run(cb(&dir).args(["run", "--no-grade", "--format", "json", "--dataset", "cases.jsonl", "--target", &url]));
    let s = summary(&json.stdout);
    assert_eq!((s["totals"]["ungraded"].as_u64(), s["totals"]["passed"].as_u64()), (Some(3), Some(0)), "{s}");
    assert_eq!(s["threshold_met"], false);
}

/// `results` and `compare` name runs by unique prefix, `latest` and `previous`; before any run,
/// `results` says there is none yet.
fn runs_are_named_by_prefix_latest_and_previous(b: &Backend) {
    let dir = Folder::new();
    assert_eq!(run(b.cb(&dir).arg("init")).status, Some(0));
    let out = run(b.cb(&dir).arg("results"));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("no run yet: `casebook run` keeps its results in the store"), "{}", out.stderr);
    let list = run(b.cb(&dir).args(["results", "--list"]));
    assert_eq!(list.status, Some(0), "{list:?}");
    assert!(list.stderr.contains("no run yet"), "{}", list.stderr);

    dir.file("cases.jsonl", DATASET);
    let ids: Vec<String> = ["2026-11-23T10:00:00Z", "2026-11-23T11:00:00Z"]
        .iter()
        .map(|time| {
            let out = run(b
                .cb(&dir)
                .env("CASEBOOK_TIME", time)
                .args(["run", "--format", "json", "--dataset", "cases.jsonl", "--target", "builtin:echo"])
                .args(["--grader", "contains"]));
            summary(&out.stdout)["meta"]["run_id"].as_str().expect("a run id").to_owned()
        })
        .collect();
    let list = run(b.cb(&dir).args(["results", "--list"]));
    assert!(list.stdout.starts_with("run  "), "{}", list.stdout);
    let id_of = |reference: &str| {
        let out = run(b.cb(&dir).args(["results", "--format", "json", reference]));
        assert_eq!(out.status, Some(0), "{reference}: {out:?}");
        summary(&out.stdout)["meta"]["run_id"].as_str().expect("a run id").to_owned()
    };
    assert_eq!(id_of("latest"), ids[1]);
    assert_eq!(id_of("previous"), ids[0]);
    assert_eq!(id_of(&ids[0][..18]), ids[0]);
    let out = run(b.cb(&dir).args(["compare", "previous", "latest"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    let out = run(b.cb(&dir).args(["results", "r-2026"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("names several runs"), "{}", out.stderr);
}

/// Every mistake of an experiment file is reported, each at its line with a suggestion.
#[test]
fn every_mistake_of_an_experiment_is_reported() {
    let dir = Folder::new();
    dir.file("cases.jsonl", DATASET);
    let exp = dir.file(
        "exp.yaml",
        "dataset: cases.jsonl\ntarget: 'builtin:echo'\ngrader: contains\ntreshold: 0.5\nn_runs: zero\n",
    );
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let found: Vec<(u64, String)> = out
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|d| (d["line"].as_u64().unwrap_or(0), d["hint"].as_str().unwrap_or_default().to_owned()))
        .collect();
    assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [3, 4, 5], "{}", out.stderr);
    assert_eq!(found[0].1, "did you mean `graders`?");
    assert_eq!(found[1].1, "did you mean `threshold`?");
}

/// Without a store, the run says before it starts that its results will not be kept, and shows
/// no run id that `results` could not find.
#[test]
fn a_run_without_a_store_says_its_results_are_not_kept() {
    let dir = Folder::new();
    dir.file("cases.jsonl", DATASET);
    let out =
        run(cb(&dir).args(["run", "--dataset", "cases.jsonl", "--target", "builtin:echo", "--grader", "contains"]));
    let note = out.stderr.find("results are not kept (run `casebook init` to keep them");
    let start = out.stderr.find("running");
    assert!(note.is_some(), "{}", out.stderr);
    assert!(start.is_none_or(|start| note < Some(start)), "the note comes first: {}", out.stderr);
    assert!(out.stdout.contains("· run (not kept) ·"), "{}", out.stdout);
    assert!(!out.stdout.contains("r-2026"), "{}", out.stdout);
}

/// Reports name a stored dataset as it would be named again, and show what a failing case's
/// agent answered.
#[test]
fn reports_name_the_version_and_show_failing_answers() {
    let dir = Folder::new();
    assert_eq!(run(cb(&dir).arg("init")).status, Some(0));
    let data = dir.file("cases.jsonl", DATASET);
    assert_eq!(run(cb(&dir).arg("import").arg(&data).args(["--dataset", "support"])).status, Some(0));
    let out = run(cb(&dir)
        .args(["run", "--dataset", "support", "--target", "builtin:echo", "--grader", "exact_match"])
        .args(["--report", "markdown=report.md"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    assert!(out.stdout.contains("· dataset support@v1 ·"), "{}", out.stdout);
    let md = fs_err::read_to_string(dir.join("report.md")).expect("the report");
    assert!(md.contains("dataset support@v1 (version "), "{md}");
    // The echo agent answers with the input, which is not the expected answer.
    assert!(md.contains("  - the agent answered: wrong answer please\n"), "{md}");
}

/// Cases with context items and `service` labels whose expectations hold strings found nowhere
/// else; the answers are the inputs upper-cased.
const NOISY_DATASET: &str = r#"{"id": "a", "input": "hello there", "labels": ["service:db"], "expected": {"output": "HELLO THERE", "outcomes": ["OUTCOME-SECRET-1"], "acceptable": ["ACCEPT-SECRET-3"]}, "context": [{"type": "log", "source": "db", "content": "ctx-a-0 pool exhausted"}]}
{"id": "b", "input": "second", "labels": ["service:db"], "expected": {"output": "SECOND", "per_turn": ["SECOND"], "rubric": "RUBRIC-SECRET-2"}, "context": [{"type": "metric", "content": "ctx-b-0 cpu 93"}, {"type": "log", "content": "ctx-b-1 retry"}]}
{"id": "c", "input": "third", "labels": ["service:web"], "expected": {"output": "THIRD", "rubric_vars": {"ref": "VARS-SECRET-4"}}, "context": [{"type": "document", "content": "ctx-c-0 runbook"}]}
{"id": "d", "input": "fourth", "labels": ["service:web"], "expected": {"output": "FOURTH", "acceptable": ["GROUND-TRUTH-SECRET-7"]}, "context": [{"type": "trace", "content": "ctx-d-0 span"}]}
"#;

const NOISY_SECRETS: [&str; 9] = [
    "OUTCOME-SECRET-1",
    "RUBRIC-SECRET-2",
    "ACCEPT-SECRET-3",
    "VARS-SECRET-4",
    "GROUND-TRUTH-SECRET-7",
    "HELLO THERE",
    "\"SECOND\"",
    "\"THIRD\"",
    "\"FOURTH\"",
];

#[test]
fn noise_widens_the_context_is_recorded_and_carries_no_expectation() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Shout);
    dir.file("cases.jsonl", NOISY_DATASET);
    let exp = dir.file(
        "exp.yaml",
        format!(
            "dataset: cases.jsonl\nnoise: {{from: cases, items: 2, similar_by: label.service, seed: 11}}\n\
             scenarios:\n  - {{name: noisy, target: '{url}'}}\n  - {{name: clean, target: '{url}', noise: false}}\n\
             graders: [{{kind: exact_match}}]\nthreshold: 0.5\n"
        ),
    );
    let report = |name: &str| {
        let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json", "--report", &format!("jsonl={name}")]));
        assert_eq!(out.status, Some(0), "{out:?}");
        let text = fs_err::read_to_string(dir.join(name)).expect("the JSONL report");
        let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        (rows, summary(&out.stdout))
    };
    let (rows, s) = report("first.jsonl");
    let sent = bodies.lock().expect("the lock").clone();
    assert_eq!(sent.len(), 8, "4 cases × 2 scenarios");
    for body in &sent {
        for secret in NOISY_SECRETS {
            assert!(!body.contains(secret), "`{secret}` was sent to the agent: {body}");
        }
        assert!(!body.contains("\"expected\"") && !body.contains("noise"), "{body}");
    }
    // The noisy scenario's requests carry two more items than the case has, the clean one's none.
    let own = [("a", 1), ("b", 2), ("c", 1), ("d", 1)];
    for (row, body) in rows.iter().filter(|r| r["scenario"] == "noisy").map(|r| {
        let case = r["case_id"].as_str().unwrap_or_default();
        let body = sent.iter().find(|b| {
            b.contains(&format!("\"case_id\":\"{case}\""))
                && serde_json::from_str::<Value>(b).unwrap()["context"].as_array().map_or(0, Vec::len)
                    == own.iter().find(|o| o.0 == case).unwrap().1 + 2
        });
        (r, body)
    }) {
        let case = row["case_id"].as_str().unwrap();
        let body: Value = serde_json::from_str(body.expect("a widened request for each case")).unwrap();
        let noise = row["noise"].as_array().expect("the result records its noise");
        assert_eq!(noise.len(), 2, "{row}");
        for added in noise {
            let from = added["from_case"].as_str().unwrap();
            assert_ne!(from, case);
            // similar_by: a and b are `db`, c and d `web`: each case's first pick shares its service.
            let context = &body["context"][added["at"].as_u64().unwrap() as usize]["content"];
            assert!(
                context.as_str().unwrap().starts_with(&format!("ctx-{from}-{}", added["item"])),
                "{context} {added}"
            );
        }
        let partner = match case {
            "a" => "b",
            "b" => "a",
            "c" => "d",
            _ => "c",
        };
        assert!(noise.iter().any(|n| n["from_case"] == partner), "{case}: {noise:?}");
    }
    assert!(rows.iter().filter(|r| r["scenario"] == "clean").all(|r| r.get("noise").is_none()), "{rows:?}");
    // The noisy runs have their own hashes; a second run reuses the same hashes, so the same noise.
    let hashes = |rows: &[Value]| {
        rows.iter()
            .map(|r| {
                (r["scenario"].to_string(), r["case_id"].to_string(), r["hash"].to_string(), r["noise"].to_string())
            })
            .collect::<std::collections::BTreeSet<_>>()
    };
    let (again, _) = report("second.jsonl");
    assert_eq!(hashes(&rows), hashes(&again));
    let noisy: std::collections::BTreeSet<String> =
        rows.iter().filter(|r| r["scenario"] == "noisy").map(|r| r["hash"].to_string()).collect();
    assert!(rows.iter().filter(|r| r["scenario"] == "clean").all(|r| !noisy.contains(&r["hash"].to_string())));
    // The Shout agent is not thrown off: no flip.
    assert_eq!(s["robustness"][0]["pairs"], 4, "{s}");
    assert_eq!(s["robustness"][0]["difference"], 0.0, "{s}");
}

/// Incident cases whose tools have recorded answers: `logs` lists lines for the case's service,
/// `metrics` has a default.
const INCIDENTS: &str = r#"{"id": "i1", "input": "why is checkout slow", "expected": {"output": "WHY IS CHECKOUT SLOW", "outcomes": ["OUTCOME-SECRET-1"]}, "tools": [{"name": "logs", "responses": [{"when": {"includes": {"service": "checkout"}}, "result": ["i1 pool exhausted", "i1 retry"]}]}, {"name": "metrics", "responses": [{"when": {"includes": {"m": "pool"}}, "result": {"pool": "i1 100/100"}}], "default": {"result": []}}]}
{"id": "i2", "input": "why does payment fail", "expected": {"output": "WHY DOES PAYMENT FAIL"}, "tools": [{"name": "logs", "responses": [{"when": {"includes": {"service": "payment"}}, "result": ["i2 délai 東京", "i2 timeout"]}]}, {"name": "metrics", "responses": [{"result": {"cpu": "i2 93"}}], "default": "empty"}]}
{"id": "i3", "input": "why is search down", "expected": {"output": "WHY IS SEARCH DOWN"}, "tools": [{"name": "logs", "responses": [{"result": ["i3 oom killed"]}]}, {"name": "metrics", "responses": [{"result": {"mem": "i3 99"}}], "default": {"result": []}}]}
"#;

#[test]
fn tool_noise_is_recorded_in_the_run_hash_and_compared_in_robustness() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Shout);
    dir.file("cases.jsonl", INCIDENTS);
    let exp = dir.file(
        "exp.yaml",
        format!(
            "dataset: cases.jsonl\nscenarios:\n  - {{name: clean, target: '{url}'}}\n  \
             - {{name: noisy, target: '{url}', noise: {{tools: {{entries: 1, defaults: 1}}, seed: 5}}}}\n\
             graders: [{{kind: exact_match}}]\n"
        ),
    );
    let report = |name: &str| {
        let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json", "--report", &format!("jsonl={name}")]));
        assert_eq!(out.status, Some(0), "{out:?}");
        let text = fs_err::read_to_string(dir.join(name)).expect("the JSONL report");
        let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        (rows, summary(&out.stdout))
    };
    let (rows, s) = report("first.jsonl");
    // Agents get tool definitions, never the recorded answers, noisy or not.
    for body in bodies.lock().expect("the lock").iter() {
        for hidden in ["responses", "pool exhausted", "délai", "oom killed", "OUTCOME-SECRET-1", "noise"] {
            assert!(!body.contains(hidden), "`{hidden}` was sent to the agent: {body}");
        }
    }
    for row in rows.iter().filter(|r| r["scenario"] == "noisy") {
        let case = row["case_id"].as_str().unwrap();
        let noise = row["noise"].as_array().expect("the result records its noise");
        // One entry in the `logs` list, and the default of `metrics` replaced (i2's `empty` too).
        let lists: Vec<&Value> = noise.iter().filter(|n| n["tool"]["response"] == 0).collect();
        let defaults: Vec<&Value> = noise.iter().filter(|n| n["tool"].get("response").is_none()).collect();
        assert_eq!((lists.len(), defaults.len()), (1, 1), "{case}: {noise:?}");
        assert_eq!(
            (lists[0]["tool"]["name"].as_str(), defaults[0]["tool"]["name"].as_str()),
            (Some("logs"), Some("metrics"))
        );
        assert!(noise.iter().all(|n| n["from_case"] != case), "{case}: {noise:?}");
    }
    assert!(rows.iter().filter(|r| r["scenario"] == "clean").all(|r| r.get("noise").is_none()), "{rows:?}");
    let hashes = |rows: &[Value], scenario: &str| {
        rows.iter()
            .filter(|r| r["scenario"] == scenario)
            .map(|r| (r["case_id"].to_string(), r["hash"].to_string(), r["noise"].to_string()))
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert!(hashes(&rows, "clean").iter().all(|c| hashes(&rows, "noisy").iter().all(|n| n.1 != c.1)));
    let (again, _) = report("second.jsonl");
    assert_eq!(hashes(&rows, "noisy"), hashes(&again, "noisy"), "the same seed, the same noise and hashes");
    let r = &s["robustness"][0];
    assert_eq!(
        (r["scenario"].as_str(), r["without_noise"].as_str(), r["pairs"].as_u64()),
        (Some("noisy"), Some("clean"), Some(3)),
        "{s}"
    );
}

#[test]
fn robustness_pairs_the_noisy_scenario_with_the_clean_one() {
    let dir = Folder::new();
    let (url, _) = serve(Behaviour::Distracted);
    dir.file("cases.jsonl", NOISY_DATASET);
    let exp = dir.file(
        "exp.yaml",
        format!(
            "dataset: cases.jsonl\nn_runs: 2\nscenarios:\n  - {{name: clean, target: '{url}'}}\n  \
             - {{name: noisy, target: '{url}', noise: {{items: 1, seed: 3}}}}\ngraders: [{{kind: exact_match}}]\n"
        ),
    );
    let out = run(cb(&dir).arg("run").arg(&exp).args([
        "--format",
        "json",
        "--report",
        "markdown=report.md",
        "--report",
        "html=report.html",
    ]));
    // b has two context items of its own: it fails on both sides. Everything else flips.
    assert_eq!(out.status, Some(1), "{out:?}");
    let s = summary(&out.stdout);
    let r = &s["robustness"][0];
    assert_eq!((r["scenario"].as_str(), r["without_noise"].as_str()), (Some("noisy"), Some("clean")), "{s}");
    assert_eq!((r["pairs"].as_u64(), r["errors"].as_u64(), r["unpaired"].as_u64()), (Some(8), Some(0), Some(0)));
    assert_eq!((r["pass_rate_without"].as_f64(), r["pass_rate_with"].as_f64()), (Some(0.75), Some(0.0)), "{r}");
    assert_eq!(r["difference"].as_f64(), Some(-0.75));
    let flips: Vec<(String, u64)> = r["pass_to_fail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["case_id"].as_str().unwrap().to_owned(), f["run"].as_u64().unwrap()))
        .collect();
    let want: Vec<(String, u64)> =
        ["a", "c", "d"].iter().flat_map(|c| [0, 1].map(|run| ((*c).to_owned(), run))).collect();
    assert_eq!(flips, want);
    assert_eq!(r["fail_to_pass"].as_array().map(Vec::len), Some(0));
    let md = fs_err::read_to_string(dir.join("report.md")).expect("the report");
    assert!(md.contains("## Robustness to noise"), "{md}");
    assert!(md.contains("| noisy | clean | 8 | 75.0 % | 0.0 % | -75.0 pts | 6 | 0 | 0 |"), "{md}");
    let html = fs_err::read_to_string(dir.join("report.html")).expect("the report");
    assert!(html.contains("<h2>Robustness to noise</h2>"), "{html}");
    assert!(html.contains("<td>noisy</td><td>clean</td><td class=\"n\">8</td>"), "{html}");
    let human = run(cb(&dir).arg("run").arg(&exp));
    assert!(
        human.stdout.contains("clean vs noisy: pass rate 75.0 % → 0.0 % (-75.0 pts) over 8 pairs; 6 pass → fail"),
        "{}",
        human.stdout
    );
}

#[test]
fn a_stored_dataset_gets_the_same_noise_as_its_file() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::Shout);
    dir.file("cases.jsonl", NOISY_DATASET);
    let experiment = |dataset: &str| {
        format!(
            "dataset: {dataset}\nnoise: {{from: cases, items: 2, similar_by: label.service, seed: 5}}\n\
             scenarios:\n  - {{name: noisy, target: '{url}'}}\ngraders: [{{kind: exact_match}}]\n"
        )
    };
    let report = |exp: &std::path::Path, name: &str| {
        let out = run(cb(&dir).arg("run").arg(exp).args(["--format", "json", "--report", &format!("jsonl={name}")]));
        assert_eq!(out.status, Some(0), "{out:?}");
        let text = fs_err::read_to_string(dir.join(name)).expect("the JSONL report");
        // In case order (results are written as they finish).
        text.lines()
            .map(|l| {
                let r: Value = serde_json::from_str(l).expect("a JSON line");
                (r["case_id"].to_string(), r["hash"].to_string(), r["noise"].to_string())
            })
            .collect::<std::collections::BTreeSet<_>>()
    };
    let from_file = report(&dir.file("file.yaml", experiment("cases.jsonl")), "file.jsonl");
    run(cb(&dir).arg("init")).expect_status(0);
    run(cb(&dir).args(["import", "cases.jsonl", "--dataset", "noisy"])).expect_status(0);
    let from_store = report(&dir.file("stored.yaml", experiment("noisy@v1")), "stored.jsonl");
    assert_eq!(from_file.len(), 4);
    assert!(from_file.iter().all(|(_, _, noise)| noise != "null"), "{from_file:?}");
    // The same cases widened the same way: the same run hashes and the same items in the same places.
    assert_eq!(from_file, from_store);
    // And the stored dataset's requests carry no expectation either.
    for body in bodies.lock().expect("the lock").iter() {
        for secret in NOISY_SECRETS {
            assert!(!body.contains(secret), "`{secret}` was sent to the agent: {body}");
        }
    }
}

/// A file too large for the run to hold its ids (they are sorted through a temporary file) and
/// whose selected cases hold more context items than noise keeps as its sample: the run names
/// the version id its import gets, and draws the same noise from the file as from the store.
#[test]
fn a_large_file_has_its_imported_version_id_and_the_same_sampled_noise_as_its_import() {
    let dir = Folder::new();
    // Native JSONL (the shape of the noisy dataset above), ids in descending order.
    let mut text = String::new();
    for i in (0..20_000).rev() {
        text.push_str(&format!(
            "{{\"id\": \"case-{i:05}\", \"input\": \"q{i}\", \"context\": [{{\"content\": \"log {i}.0\"}}, \
             {{\"content\": \"log {i}.1\"}}, {{\"content\": \"log {i}.2\"}}], \"expected\": {{\"output\": \"a{i}\"}}}}\n"
        ));
    }
    dir.file("large.jsonl", &text);
    let experiment = |dataset: &str| {
        format!(
            "dataset: {dataset}\nlimit: 1000\nnoise: {{from: cases, items: 2, seed: 8}}\n\
             scenarios:\n  - {{name: noisy, target: 'builtin:echo'}}\ngraders: [{{kind: contains}}]\nthreshold: 0\n"
        )
    };
    let report = |exp: &std::path::Path, name: &str| {
        let out = run(cb(&dir).arg("run").arg(exp).args(["--format", "json", "--report", &format!("jsonl={name}")]));
        assert_eq!(out.status, Some(0), "{out:?}");
        let text = fs_err::read_to_string(dir.join(name)).expect("the JSONL report");
        let rows: std::collections::BTreeSet<(String, String, String)> = text
            .lines()
            .map(|l| {
                let r: Value = serde_json::from_str(l).expect("a JSON line");
                (r["case_id"].to_string(), r["hash"].to_string(), r["noise"].to_string())
            })
            .collect();
        (summary(&out.stdout)["meta"]["dataset_version_id"].clone(), rows)
    };
    run(cb(&dir).arg("init")).expect_status(0);
    let (file_version, from_file) = report(&dir.file("file.yaml", experiment("large.jsonl")), "file.jsonl");
    let imported = run(cb(&dir).args(["import", "large.jsonl", "--format", "json"]));
    let version: Value = serde_json::from_str(imported.stdout.trim()).expect("the import's JSON");
    assert_eq!(file_version, version["version"]["id"], "{imported:?}");
    let (_, from_store) = report(&dir.file("stored.yaml", experiment("large@v1")), "stored.jsonl");
    assert_eq!(from_file.len(), 1000);
    // 3,000 items to draw from, more than the sample keeps: every case still gets its two.
    for (case, _, noise) in &from_file {
        let noise: Vec<Value> = serde_json::from_str(noise).expect("the noise");
        assert_eq!(noise.len(), 2, "{case}");
        let own: Value = serde_json::from_str(case).expect("the case id");
        assert!(noise.iter().all(|n| n["from_case"] != own), "{case}: {noise:?}");
    }
    assert_eq!(from_file, from_store);
}

#[test]
fn an_http_agent_is_served_its_case_tools_over_mcp_unless_the_scenario_says_no() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::McpClient);
    dir.file(
        "cases.jsonl",
        r#"{"id": "pool", "input": "Pourquoi ça rame ?", "expected": {"output": "pool épuisé"}, "tools": [{"name": "logs", "responses": [{"when": {"includes": {"service": "db"}}, "result": "pool épuisé"}]}]}
"#,
    );
    let exp = dir.file(
        "exp.yaml",
        format!(
            "dataset: cases.jsonl\nscenarios:\n  - {{name: served, target: '{url}'}}\n  \
             - {{name: plain, target: '{url}?v=2', mcp: false}}\ngraders: [{{kind: exact_match}}]\nthreshold: 0.5\n"
        ),
    );
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json", "--report", "jsonl=results.jsonl"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    let text = fs_err::read_to_string(dir.join("results.jsonl")).expect("the JSONL report");
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let row = |scenario: &str| rows.iter().find(|r| r["scenario"] == scenario).expect("a result per scenario");
    assert_eq!(row("served")["output"]["output"], "pool épuisé", "{text}");
    assert_eq!(row("plain")["output"]["output"], "NO MCP", "{text}");
    // The call the agent made over MCP is in the served run's trajectory, with how it was served.
    let steps = row("served")["output"]["trajectory"].as_array().expect("a trajectory").clone();
    let call = steps.iter().find(|s| s["type"] == "tool_call").expect("the served call");
    assert_eq!(
        call,
        &json!({"type": "tool_call", "name": "logs", "arguments": {"service": "db"}, "result": "pool épuisé",
                "served": {"how": "matched", "entry": 0}})
    );
    let sent = bodies.lock().expect("the lock").clone();
    assert_eq!(sent.iter().filter(|b| b.contains("\"mcp\":\"http://127.0.0.1:")).count(), 1, "{sent:?}");
}

#[test]
fn runs_kept_from_mcp_are_not_reused_for_runs_served_over_it() {
    let dir = Folder::new();
    let (url, bodies) = serve(Behaviour::McpClient);
    dir.file(
        "cases.jsonl",
        r#"{"id": "pool", "input": "q", "expected": {"output": "pool exhausted"}, "tools": [{"name": "logs", "responses": [{"result": "pool exhausted"}]}]}
"#,
    );
    assert_eq!(run(cb(&dir).arg("init")).status, Some(0));
    let output = |file: &str, extra: &str| {
        let exp = dir.file(
            file,
            format!("dataset: cases.jsonl\ntarget: '{url}'\ngraders: [{{kind: exact_match}}]\nthreshold: 0\n{extra}"),
        );
        let report = format!("jsonl={file}.jsonl");
        let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json", "--report", &report, "--overwrite"]));
        assert!(matches!(out.status, Some(0 | 1)), "{out:?}");
        let text = fs_err::read_to_string(dir.join(&format!("{file}.jsonl"))).expect("the JSONL report");
        serde_json::from_str::<Value>(text.lines().next().expect("a result")).expect("JSON")["output"]["output"].clone()
    };
    assert_eq!(output("plain.yaml", "mcp: false\n"), "NO MCP");
    assert_eq!(output("served.yaml", ""), "pool exhausted");
    assert_eq!(bodies.lock().expect("the lock").len(), 2, "the served run called the agent again");
    // Run again, each is its own stored output.
    assert_eq!(output("plain.yaml", "mcp: false\n"), "NO MCP");
    assert_eq!(output("served.yaml", ""), "pool exhausted");
    assert_eq!(bodies.lock().expect("the lock").len(), 2);
}
