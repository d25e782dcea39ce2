//! Graders that talk to the outside: `llm_judge` against a real fake judge (an axum server on
//! 127.0.0.1:0 speaking chat completions) and `command` against real python3 and sh programs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use casebook_model::Case;
use casebook_runner::grade::{Grader, GraderSpec};
use casebook_runner::protocol::{Speaker, Step};
use casebook_runner::record::{Failure, Grade, RunOutput};
use serde_json::{Value, json};

/// What the fake judge was sent: each request's headers and JSON body.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(HeaderMap, Value)>>>);

impl Seen {
    fn bodies(&self) -> Vec<Value> {
        self.0.lock().unwrap().iter().map(|(_, body)| body.clone()).collect()
    }
    fn header(&self, index: usize, name: &str) -> Option<String> {
        self.0.lock().unwrap()[index].0.get(name).map(|value| value.to_str().unwrap().to_owned())
    }
}

/// A fake chat-completions judge at `/v1/chat/completions` answering every request with
/// `respond()`; returns its base URL (`http://127.0.0.1:PORT/v1`).
async fn judge(respond: fn() -> Response) -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(move |State(seen): State<Seen>, headers: HeaderMap, body: String| async move {
                let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
                seen.0.lock().unwrap().push((headers, body));
                respond()
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}/v1"), seen)
}

/// A chat-completions reply whose message is `content`.
fn reply(content: &str) -> Response {
    axum::Json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }))
    .into_response()
}

/// A letta-style case: a rubric with placeholders, its variables, and expected outcomes.
fn case() -> Case {
    serde_json::from_value(json!({
        "id": "fib-1",
        "input": "Write a function to calculate fibonacci numbers",
        "expected": {
            "output": "def fib(n): return n if n <= 1 else fib(n-1) + fib(n-2)",
            "outcomes": ["should test the function before answering"],
            "rubric": "Compare the code with {reference_code}. Required features: {required_features}.",
            "rubric_vars": {"reference_code": "REFERENCE-FIB-CODE", "required_features": "recursion, base case"},
            "tool_calls": ["python"],
        },
    }))
    .unwrap()
}

/// A run that called a tool before answering.
fn run() -> RunOutput {
    RunOutput {
        output: json!("def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)"),
        per_turn: vec![json!("def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)")],
        trajectory: vec![
            Step::Message { role: Speaker::User, content: json!("Write a function"), operator: false },
            Step::ToolCall {
                name: "run_python".into(),
                arguments: json!({"code": "print(fib(10))"}),
                result: Some(json!("55")),
                served: None,
            },
        ],
        millis: 1200,
        ..RunOutput::default()
    }
}

/// A grader built the way the CLI builds one: from the experiment's JSON, its environment
/// resolved through a fixed lookup.
fn grader(spec: Value) -> Grader {
    let mut spec: GraderSpec = serde_json::from_value(spec).unwrap();
    spec.resolve_env(|name| (name == "JUDGE_API_KEY").then(|| "sk-test-123".to_owned()));
    spec.build().unwrap()
}

async fn judged(respond: fn() -> Response, template: Option<&str>) -> (Result<Grade, Failure>, Seen) {
    judged_with(respond, template, json!({})).await
}

/// [`judged`] with more options for the judge.
async fn judged_with(respond: fn() -> Response, template: Option<&str>, more: Value) -> (Result<Grade, Failure>, Seen) {
    let (endpoint, seen) = judge(respond).await;
    let mut spec = json!({"kind": "llm_judge", "name": "quality", "endpoint": endpoint, "model": "judge-model",
                          "api_key_env": "JUDGE_API_KEY", "timeout_secs": 5});
    if let Some(template) = template {
        spec["template"] = json!(template);
    }
    for (key, value) in more.as_object().into_iter().flatten() {
        spec[key] = value.clone();
    }
    (grader(spec).grade(&case(), &run()).await, seen)
}

#[tokio::test]
async fn the_judge_temperature_is_zero_unless_set_and_absent_when_null() {
    let verdict = || reply("{\"score\": 1, \"rationale\": \"ok\"}");
    let (_, seen) = judged_with(verdict, None, json!({"temperature": 0.7})).await;
    assert_eq!(seen.bodies()[0]["temperature"], 0.7);
    // Some models take no temperature but their own: `null` sends none.
    let (grade, seen) = judged_with(verdict, None, json!({"temperature": null})).await;
    assert!(grade.is_ok());
    assert!(seen.bodies()[0].get("temperature").is_none(), "{:?}", seen.bodies()[0]);
}

#[tokio::test]
async fn judge_sees_rubric_vars_outcomes_and_trajectory_and_its_verdict_is_the_grade() {
    let (grade, seen) =
        judged(|| reply("```json\n{\"score\": 0.8, \"rationale\": \"correct and recursive\"}\n```"), None).await;
    assert_eq!(grade.unwrap(), Grade { score: 0.8, pass: true, rationale: "correct and recursive".into() });

    let bodies = seen.bodies();
    assert_eq!(bodies.len(), 1);
    let body = &bodies[0];
    assert_eq!(body["model"], "judge-model");
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["role"], "user");
    assert_eq!(seen.header(0, "authorization").as_deref(), Some("Bearer sk-test-123"));
    let prompt = body["messages"][1]["content"].as_str().unwrap();
    for part in [
        "Write a function to calculate fibonacci numbers",
        // The rubric, its placeholders filled from rubric_vars.
        "Compare the code with REFERENCE-FIB-CODE. Required features: recursion, base case.",
        "\"required_features\": \"recursion, base case\"",
        "should test the function before answering",
        // The trajectory: the tool call with its arguments and result.
        "call `run_python` {\"code\":\"print(fib(10))\"} → 55",
        "fib(n - 1) + fib(n - 2)",
    ] {
        assert!(prompt.contains(part), "the prompt lacks {part:?}:\n{prompt}");
    }
}

#[tokio::test]
async fn the_judge_sees_each_served_call_with_its_answer_and_the_expected_outcomes() {
    // An Agent Health case: tools with recorded answers, expected outcomes for the judge.
    let case: Case = serde_json::from_value(json!({
        "id": "incident-7",
        "input": "Pourquoi le paiement échoue-t-il ?",
        "tools": [
            {"name": "metrics_query", "responses": [
                {"when": {"includes": {"metric": "db.pool.active"}}, "result": {"active": 100, "max": 100, "hôte": "東京-1"}}
            ], "default": {"result": []}},
            {"name": "log_fetcher", "responses": [{"when": {"matches": {"service": "^pay"}}, "result": ["ERROR pool épuisé"]}]}
        ],
        "expected": {"outcomes": ["should query connection pool metrics", "should NOT make more than 5 tool calls"]},
    }))
    .unwrap();
    let tools = case.task.tools.clone().unwrap();
    let environment = casebook_runner::environment::Environment::of(Some(&tools)).unwrap().unwrap();
    environment.serve("metrics_query", &json!({"metric": "db.pool.active", "service": "paiement"}));
    environment.serve("metrics_query", &json!({"metric": "cpu"}));
    environment.serve("log_fetcher", &json!({"service": "web"}));
    let mut trajectory = vec![Step::Message { role: Speaker::User, content: case.task.input.clone(), operator: false }];
    trajectory.extend(environment.drain());
    let run = RunOutput {
        output: json!("le pool de connexions est saturé"),
        per_turn: vec![json!("le pool de connexions est saturé")],
        trajectory,
        millis: 10,
        ..RunOutput::default()
    };
    let (endpoint, seen) = judge(|| reply("{\"score\": 1, \"rationale\": \"queried the pool\"}")).await;
    let grader = grader(json!({"kind": "llm_judge", "endpoint": endpoint, "model": "m", "timeout_secs": 5}));
    assert!(grader.grade(&case, &run).await.unwrap().pass);
    let body = &seen.bodies()[0];
    let prompt = body["messages"][1]["content"].as_str().unwrap();
    for part in [
        "- should query connection pool metrics",
        "- should NOT make more than 5 tool calls",
        "call `metrics_query` {\"metric\":\"db.pool.active\",\"service\":\"paiement\"} → [matched #0] \
         {\"active\":100,\"max\":100,\"hôte\":\"東京-1\"}",
        "call `metrics_query` {\"metric\":\"cpu\"} → [default] []",
        "call `log_fetcher` {\"service\":\"web\"} → [unmatched, error] no recorded answer for this call of `log_fetcher`",
    ] {
        assert!(prompt.contains(part), "the prompt lacks {part:?}:\n{prompt}");
    }
}

#[tokio::test]
async fn a_custom_template_gets_rubric_vars_at_the_top_level() {
    let template = "Reference: {{ reference_code }}; tools: {% for s in trajectory if s.type == 'tool_call' %}{{ s.name }}{% endfor %}";
    let (grade, seen) =
        judged(|| reply("{\"score\": 0.3, \"pass\": false, \"rationale\": \"no base case\"}"), Some(template)).await;
    assert_eq!(grade.unwrap(), Grade { score: 0.3, pass: false, rationale: "no base case".into() });
    assert_eq!(seen.bodies()[0]["messages"][1]["content"], "Reference: REFERENCE-FIB-CODE; tools: run_python");
}

#[tokio::test]
async fn a_judge_http_error_is_a_judge_failure_not_a_zero() {
    let (grade, _) = judged(|| (StatusCode::INTERNAL_SERVER_ERROR, "model overloaded").into_response(), None).await;
    let failure = grade.unwrap_err();
    assert_eq!(failure.kind, "judge");
    assert!(failure.message.starts_with("case `fib-1`: the judge answered HTTP 500"), "{}", failure.message);
    assert!(failure.message.contains("model overloaded"), "the judge's own words are kept: {}", failure.message);
}

#[tokio::test]
async fn a_judge_answering_prose_is_a_judge_failure() {
    let (grade, _) = judged(|| reply("The code looks correct to me, I'd give it 9 out of 10."), None).await;
    let failure = grade.unwrap_err();
    assert_eq!(failure.kind, "judge");
    assert!(failure.message.contains("holds no JSON verdict object"), "{}", failure.message);
    assert!(failure.message.contains("9 out of 10"), "{}", failure.message);
}

#[tokio::test]
async fn a_score_outside_zero_to_one_is_a_judge_failure() {
    let (grade, _) = judged(|| reply("{\"score\": 9, \"rationale\": \"great\"}"), None).await;
    let failure = grade.unwrap_err();
    assert_eq!(failure.kind, "judge");
    assert!(failure.message.contains("score 9 is outside 0..1"), "{}", failure.message);
}

#[tokio::test]
async fn a_reply_that_is_not_chat_completions_is_a_judge_failure() {
    let (grade, _) = judged(|| axum::Json(json!({"result": "ok"})).into_response(), None).await;
    let failure = grade.unwrap_err();
    assert_eq!(failure.kind, "judge");
    assert!(failure.message.contains("no `choices[0].message.content`"), "{}", failure.message);
}

#[tokio::test]
async fn an_undefined_template_variable_is_a_config_failure_and_nothing_is_sent() {
    let (grade, seen) = judged(|| reply("{\"score\": 1}"), Some("Grade {{ output }} against {{ gold_answer }}")).await;
    let failure = grade.unwrap_err();
    assert_eq!(failure.kind, "config");
    assert!(
        failure.message.starts_with("case `fib-1`: the judge template uses the undefined variable `gold_answer`"),
        "{}",
        failure.message
    );
    assert!(seen.bodies().is_empty(), "a broken prompt is not sent");
}

#[tokio::test]
async fn a_slow_judge_times_out_as_a_judge_failure() {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            reply("{\"score\": 1}")
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let grader = grader(json!({"kind": "llm_judge", "endpoint": format!("http://{address}/v1"), "model": "m",
                               "timeout_secs": 0.3}));
    let started = Instant::now();
    let failure = grader.grade(&case(), &run()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(failure.kind, "judge");
    assert!(failure.message.contains("did not answer within 300ms"), "{}", failure.message);
}

#[tokio::test]
async fn an_unreachable_judge_is_a_judge_failure() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let grader = grader(json!({"kind": "llm_judge", "endpoint": format!("http://{address}/v1"), "model": "m"}));
    let failure = grader.grade(&case(), &run()).await.unwrap_err();
    assert_eq!(failure.kind, "judge");
    assert!(failure.message.contains("cannot reach the judge"), "{}", failure.message);
}

/// A python3 grader that passes when the output mentions the expected function name, and
/// reports what it was given.
const PY_GRADER: &str = r#"
import json, sys
given = json.load(sys.stdin)
case, output = given["case"], given["output"]
tools = [s["name"] for s in given["trajectory"] if s["type"] == "tool_call"]
ok = "fib" in output and case["expected"]["tool_calls"] == ["python"]
print("checking...", file=sys.stderr)
print(json.dumps({"score": 1.0 if ok else 0.0, "rationale": f"{case['id']}: {len(given['per_turn'])} turn(s), tools {tools}"}))
"#;

fn command(program: &str, args: &[&str]) -> Grader {
    grader(json!({"kind": "command", "program": program, "args": args, "timeout_secs": 10}))
}

#[tokio::test]
async fn a_command_grader_gets_the_case_and_run_on_stdin() {
    let grade = command("python3", &["-c", PY_GRADER]).grade(&case(), &run()).await.unwrap();
    assert_eq!(grade, Grade { score: 1.0, pass: true, rationale: "fib-1: 1 turn(s), tools ['run_python']".into() });
}

#[tokio::test]
async fn a_command_verdict_may_follow_log_lines_and_omit_pass() {
    let program = "cat > /dev/null; echo 'loading model'; echo '{\"score\": 0.4}'";
    let grade = command("sh", &["-c", program]).grade(&case(), &run()).await.unwrap();
    assert_eq!(grade, Grade { score: 0.4, pass: false, rationale: String::new() }, "below the default pass_score 0.5");
}

#[tokio::test]
async fn a_crashing_command_is_a_grader_failure_not_a_zero() {
    let program = "import sys; sys.stdin.read(); print('bad input', file=sys.stderr); sys.exit(1)";
    let failure = command("python3", &["-c", program]).grade(&case(), &run()).await.unwrap_err();
    assert_eq!(failure.kind, "grader");
    assert_eq!(failure.message, "case `fib-1`: `python3` exited with status 1: bad input");
}

#[tokio::test]
async fn a_command_printing_no_verdict_is_a_grader_failure() {
    let failure = command("sh", &["-c", "echo looks good"]).grade(&case(), &run()).await.unwrap_err();
    assert_eq!(failure.kind, "grader");
    assert_eq!(failure.message, "case `fib-1`: `sh` printed no JSON verdict object: `looks good`");
    let failure = command("sh", &["-c", "echo '{\"score\": 1.5}'"]).grade(&case(), &run()).await.unwrap_err();
    assert_eq!(failure.message, "case `fib-1`: `sh` printed an unusable verdict: score 1.5 is outside 0..1");
}

#[tokio::test]
async fn a_command_past_its_time_limit_is_stopped() {
    let grader = grader(json!({"kind": "command", "program": "sleep", "args": ["30"], "timeout_secs": 0.3}));
    let started = Instant::now();
    let failure = grader.grade(&case(), &run()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "the grader does not wait for the program");
    assert_eq!(failure.kind, "grader");
    assert_eq!(failure.message, "case `fib-1`: `sleep` did not finish within 300ms");
}

#[tokio::test]
async fn a_missing_program_is_a_grader_failure() {
    let failure = command("casebook-no-such-grader", &[]).grade(&case(), &run()).await.unwrap_err();
    assert_eq!(failure.kind, "grader");
    assert!(failure.message.starts_with("case `fib-1`: `casebook-no-such-grader` cannot start"), "{}", failure.message);
}

#[tokio::test]
async fn graders_from_an_experiment_grade_a_run_end_to_end() {
    // The deterministic kinds as an experiment file lists them, on the same case and run.
    let specs = json!([
        {"kind": "contains", "name": "contains-answer", "ignore_case": true},
        {"kind": "regex_match", "pattern": "def fib\\(n\\)"},
        {"kind": "tool_called", "tool": "run_python", "weight": 2},
        {"kind": "tool_called"},
        {"kind": "max_tool_calls", "max": 3},
        {"kind": "similarity", "threshold": 0.5},
        {"kind": "exact_match"},
    ]);
    let specs: Vec<GraderSpec> = serde_json::from_value(specs).unwrap();
    let mut results = Vec::new();
    for spec in &specs {
        let grader = spec.build().unwrap();
        let grade = grader.grade(&case(), &run()).await.unwrap();
        results.push((grader.name().to_owned(), grader.weight(), grade.pass));
    }
    assert_eq!(
        results,
        [
            ("contains-answer".to_owned(), 1.0, false),
            ("regex_match".to_owned(), 1.0, true),
            ("tool_called".to_owned(), 2.0, true),
            // `expected.tool_calls` says `python`, the agent called `run_python`.
            ("tool_called".to_owned(), 1.0, false),
            ("max_tool_calls".to_owned(), 1.0, true),
            ("similarity".to_owned(), 1.0, true),
            ("exact_match".to_owned(), 1.0, false),
        ]
    );
}
