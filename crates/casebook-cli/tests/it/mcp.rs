//! `casebook mcp`: the dataset tools over a child process's standard input and output, driven by
//! rmcp's client (as an agent's would) and by the official Python SDK's stdio client; answers
//! bounded, mistakes answered as tool errors saying what to do. The datasets are written here in
//! letta's JSON-lines shape (as `examples/tour/data.jsonl`).
// Helpers of the tests (`every_tool_on_support`) unwrap as the tests do.
#![allow(clippy::unwrap_used)]

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use std::path::PathBuf;

use crate::cli::{Backend, Folder, cb, run};
use crate::remote::{PROJECT, Server, push};

/// The two files of `support`'s versions: v2 drops q5, changes q2's answer and adds q7 and q8
/// (q8 a duplicate of q1's question, which `lint_version` reports).
fn support_files(dir: &Folder) -> (PathBuf, PathBuf) {
    let row = |k: u32, answer: &str, tag: &str| {
        json!({"id": format!("q{k}"), "input": format!("Question {k}?"), "ground_truth": answer, "tags": [tag]})
            .to_string()
    };
    let v1: Vec<String> =
        (1..=6).map(|k| row(k, &format!("answer {k}"), if k % 2 == 0 { "even" } else { "odd" })).collect();
    let mut v2: Vec<String> = [1, 2, 3, 4, 6]
        .iter()
        .map(|&k| row(k, &format!("answer {k}"), if k % 2 == 0 { "even" } else { "odd" }))
        .collect();
    v2[1] = row(2, "a better answer", "even");
    v2.push(row(7, "answer 7", "odd"));
    v2.push(json!({"id": "q8", "input": "Question 1?", "ground_truth": "answer 1", "tags": ["odd"]}).to_string());
    (dir.file("v1.jsonl", v1.join("\n") + "\n"), dir.file("v2.jsonl", v2.join("\n") + "\n"))
}

/// A store here holding both versions of `support`.
fn store_with_support() -> Folder {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    let (v1, v2) = support_files(&dir);
    run(cb(&dir).arg("import").arg(&v1).args(["--dataset", "support"])).expect_status(0);
    run(cb(&dir).args(["commit", "support"]).arg(&v2)).expect_status(0);
    dir
}

async fn connect(dir: &Folder) -> RunningService<RoleClient, ClientConfig> {
    connect_with(dir, &[]).await
}

/// `casebook mcp` in `dir` with the environment `env` (and no store, server or key of the test's own).
async fn connect_with(dir: &Folder, env: &[(&str, &str)]) -> RunningService<RoleClient, ClientConfig> {
    let mut command = tokio::process::Command::new(assert_cmd::cargo::cargo_bin("casebook"));
    command.arg("mcp").current_dir(dir.join("")).env("NO_COLOR", "1");
    command.env_remove("CASEBOOK_STORE").env_remove("CASEBOOK_URL").env_remove("CASEBOOK_TOKEN");
    command.env_remove("CASEBOOK_PROJECT").env_remove("XDG_CONFIG_HOME").env("HOME", dir.join("home"));
    command.envs(env.iter().copied());
    let transport = TokioChildProcess::new(command).expect("start `casebook mcp`");
    ClientConfig::default().serve(transport).await.expect("an MCP session with `casebook mcp`")
}

async fn call(client: &RunningService<RoleClient, ClientConfig>, tool: &str, arguments: Value) -> (bool, String) {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .expect("an answer");
    let text = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("");
    (result.is_error == Some(true), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_lists_searches_shows_diffs_and_lints_over_stdio() {
    let dir = store_with_support();
    let client = connect(&dir).await;
    every_tool_on_support(&client).await;
    client.cancel().await.unwrap();
}

/// With `CASEBOOK_URL` and a key, the tools read the server's datasets through its API (from a
/// folder without a store), answering as they do on the store; a key the server refuses, or a
/// server that is not there, makes each call a tool error naming the server and the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reads_a_servers_datasets_and_is_told_when_the_server_refuses() {
    let b = Backend::Embedded;
    let dir = Folder::new();
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "read");
    let writer = Server::key(&b, &dir, PROJECT, "write");
    let (v1, v2) = support_files(&dir);
    push(&server, &dir, &writer, "support", &v1);
    push(&server, &dir, &writer, "support", &v2);
    let elsewhere = Folder::new();
    let client = connect_with(&elsewhere, &[("CASEBOOK_URL", &server.url), ("CASEBOOK_TOKEN", &token)]).await;
    every_tool_on_support(&client).await;
    client.cancel().await.unwrap();

    let refused =
        connect_with(&elsewhere, &[("CASEBOOK_URL", &server.url), ("CASEBOOK_TOKEN", "cb_000000000000_nope")]).await;
    // The tools are listed without the server; each call says why it cannot be answered.
    assert_eq!(refused.list_all_tools().await.unwrap().len(), 6);
    for (tool, arguments) in [("list_datasets", json!({})), ("show_case", json!({"dataset": "support", "id": "q1"}))] {
        let (error, text) = call(&refused, tool, arguments).await;
        assert!(error, "{text}");
        assert!(
            text.starts_with(&format!("the server at {}: the server refused the key (", server.url)),
            "{tool}: {text}"
        );
    }
    refused.cancel().await.unwrap();

    let gone = connect_with(&elsewhere, &[("CASEBOOK_URL", "http://127.0.0.1:9"), ("CASEBOOK_TOKEN", &token)]).await;
    let (error, text) = call(&gone, "list_datasets", json!({})).await;
    assert!(error);
    assert!(text.starts_with("cannot reach the server at http://127.0.0.1:9: "), "{text}");
    gone.cancel().await.unwrap();
}

/// Every tool on the two versions of `support` ([`support_files`]), mistakes included.
async fn every_tool_on_support(client: &RunningService<RoleClient, ClientConfig>) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["list_datasets", "list_versions", "search_cases", "show_case", "diff_versions", "lint_version"]);

    let (error, text) = call(client, "list_datasets", json!({})).await;
    assert!(!error);
    assert_eq!(
        serde_json::from_str::<Value>(text.trim()).unwrap(),
        json!({"name": "support", "head": "v2", "cases": 7, "description": null})
    );

    let (_, text) = call(client, "list_versions", json!({"dataset": "support"})).await;
    let versions: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(versions.iter().map(|v| v["version"].as_str().unwrap()).collect::<Vec<_>>(), ["v2", "v1"]);
    assert_eq!(
        (&versions[0]["added"], &versions[0]["removed"], &versions[0]["modified"]),
        (&json!(2), &json!(1), &json!(1))
    );

    // A page of two odd cases, then the next from where it said.
    let (_, text) =
        call(client, "search_cases", json!({"dataset": "support", "where": "labels contains \"odd\"", "limit": 2}))
            .await;
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("support@v2: 4 cases selected; 2 shown from 1; next page: skip 2"));
    let ids: Vec<String> =
        lines.map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids, ["q1", "q3"]);
    let (_, text) = call(
        client,
        "search_cases",
        json!({"dataset": "support@v1", "where": "labels contains \"odd\"", "limit": 2, "skip": 2}),
    )
    .await;
    assert!(text.starts_with("support@v1: 3 cases selected; 1 shown from 3\n"), "{text}");
    assert!(text.contains(r#""id":"q5""#), "{text}");

    let (_, text) = call(client, "show_case", json!({"dataset": "support@v1", "id": "q2"})).await;
    let case: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(case["expected"]["output"], "answer 2");

    let (_, text) = call(client, "diff_versions", json!({"dataset": "support", "from": "v1"})).await;
    let diff: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(diff["counts"], json!({"added": 2, "removed": 1, "modified": 1, "moved": 0}));
    assert_eq!((&diff["added"], &diff["removed"]), (&json!(["q7", "q8"]), &json!(["q5"])));
    assert_eq!(diff["modified"], json!([{"id": "q2", "fields": ["/expected/output"]}]));

    let (_, text) = call(client, "lint_version", json!({"dataset": "support"})).await;
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("support@v2: 7 cases, "), "{text}");
    assert!(text.contains("W-duplicate-input") && text.contains("\"q8\""), "{text}");

    // Mistakes are tool errors that say what to do.
    let (error, text) = call(client, "search_cases", json!({"dataset": "suport"})).await;
    assert!(error);
    assert!(text.contains("did you mean `support`?"), "{text}");
    let (error, text) =
        call(client, "search_cases", json!({"dataset": "support", "where": "labels contain \"odd\""})).await;
    assert!(error);
    assert!(text.starts_with("invalid `where`: "), "{text}");
    assert!(text.contains("found `contain` at column 8\n  labels contain \"odd\"\n         ^^^^^^^"), "{text}");
    let (error, text) = call(client, "search_cases", json!({"dataset": "support", "limit": 1000})).await;
    assert!(error);
    assert_eq!(text, "`limit` must be 1 to 100, not 1000");
    let (error, text) = call(client, "show_case", json!({"dataset": "support", "id": "q5"})).await;
    assert!(error);
    assert_eq!(text, "support@v2 has no case `q5`: find ids with `search_cases`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_answer_stays_within_its_bound() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    let big = "x".repeat(5000);
    let rows: Vec<String> =
        (1..=100).map(|k| json!({"id": format!("b{k}"), "input": big, "ground_truth": "y"}).to_string()).collect();
    dir.file("big.jsonl", rows.join("\n") + "\n");
    run(cb(&dir).args(["import", "big.jsonl", "--dataset", "big"])).expect_status(0);
    let client = connect(&dir).await;
    let (error, text) = call(&client, "search_cases", json!({"dataset": "big", "limit": 100})).await;
    assert!(!error);
    assert!(text.len() <= 64 * 1024 + 200, "{} bytes", text.len());
    assert!(text.contains("… (cut: "), "each case is cut");
    assert!(
        text.ends_with("(answer cut at 65536 bytes: ask for less, with `limit` or `where`)\n"),
        "{}",
        &text[text.len() - 200..]
    );
    client.cancel().await.unwrap();
}

/// A Python that has the `mcp` package: `CASEBOOK_TEST_MCP_PYTHON`, else `python3` if it has it.
fn python_with_mcp() -> Option<String> {
    let candidates = std::env::var("CASEBOOK_TEST_MCP_PYTHON").into_iter().chain(["python3".to_owned()]);
    candidates.into_iter().find(|python| {
        std::process::Command::new(python)
            .args(["-c", "import mcp.client.stdio"])
            .output()
            .is_ok_and(|out| out.status.success())
    })
}

/// The official Python SDK's stdio client: starts `casebook mcp`, lists the tools and searches.
const PYTHON_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], cwd=sys.argv[2])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = [t.name for t in (await session.list_tools()).tools]
            found = await session.call_tool("search_cases", {"dataset": "support@v1", "where": 'labels contains "even"'})
            missing = await session.call_tool("show_case", {"dataset": "support", "id": "nope"})
            print(json.dumps({"tools": tools, "found": found.content[0].text, "missing": [missing.is_error, missing.content[0].text]}))

asyncio.run(main())
"#;

#[test]
fn the_python_sdk_reads_datasets_over_stdio() {
    let python = python_with_mcp().expect(
        "no Python with the `mcp` package: `scripts/test.sh` installs one, or set CASEBOOK_TEST_MCP_PYTHON to one",
    );
    let dir = store_with_support();
    let script = dir.file("client.py", PYTHON_CLIENT);
    let out = std::process::Command::new(python)
        .arg(&script)
        .arg(assert_cmd::cargo::cargo_bin("casebook"))
        .arg(dir.join(""))
        .env_remove("CASEBOOK_STORE")
        .env_remove("CASEBOOK_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["tools"].as_array().unwrap().len(), 6);
    let found = answer["found"].as_str().unwrap();
    assert!(found.starts_with("support@v1: 3 cases selected; 3 shown from 1\n"), "{found}");
    assert_eq!(answer["missing"], json!([true, "support@v2 has no case `nope`: find ids with `search_cases`"]));
}
