//! A fake investigating agent for benchmarks of served tool calls: it makes `CALLS` calls of the
//! first tool it is given, each asking for another step, then answers with the last answer it
//! got. Serves on 127.0.0.1, prints its target on stdout, then serves until killed.
//!
//! `cargo run --release -p casebook-runner --example fake_investigator -- MODE [CALLS]`, where
//! MODE says how the calls are made:
//! - `model`: a chat-completions model (`openai+http://…/v1?model=fake`): each completion asks
//!   for one tool call until `CALLS` tool messages are in the conversation; casebook's tool loop
//!   answers them;
//! - `protocol`: an agent of casebook's HTTP protocol replying `tool_calls`, one a step;
//! - `mcp`: an agent of casebook's HTTP protocol that calls the tools on the MCP server it is
//!   sent (`mcp` in the request) with rmcp's client, then answers.
//!
//! One worker thread, like `fake_agent`: the agent takes one of the machine's cores at most.

use axum::Json;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

/// The arguments of call `step`: the cases' snapshots answer `service: db`.
fn arguments(step: usize) -> Value {
    json!({"service": "db", "step": step})
}

/// How many tool answers `messages` holds, and the text of the last.
fn told(messages: &Value) -> (usize, Value) {
    let tools: Vec<&Value> = messages.as_array().into_iter().flatten().filter(|m| m["role"] == "tool").collect();
    (tools.len(), tools.last().map_or(Value::Null, |m| m["content"].clone()))
}

/// The first tool's name: chat completions nest it in `function`, the protocol does not.
fn first_tool(request: &Value) -> Option<&str> {
    let tool = &request["tools"][0];
    tool["function"]["name"].as_str().or_else(|| tool["name"].as_str())
}

fn model(calls: usize, request: &Value) -> Value {
    let (done, last) = told(&request["messages"]);
    let message = match first_tool(request) {
        Some(name) if done < calls => json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{done}"), "type": "function",
            "function": {"name": name, "arguments": arguments(done).to_string()}
        }]}),
        _ => json!({"role": "assistant", "content": format!("found: {last}")}),
    };
    json!({"id": "fake", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
}

fn protocol(calls: usize, request: &Value) -> Value {
    let (done, last) = told(&request["messages"]);
    match first_tool(request) {
        Some(name) if done < calls => json!({"tool_calls": [{"name": name, "arguments": arguments(done)}]}),
        _ => json!({"output": format!("found: {last}")}),
    }
}

async fn mcp(calls: usize, request: &Value) -> Value {
    let (Some(url), Some(name)) = (request["mcp"].as_str(), first_tool(request)) else {
        return json!({"output": "no MCP server"});
    };
    let client = match ClientConfig::default().serve(StreamableHttpClientTransport::from_uri(url.to_owned())).await {
        Ok(client) => client,
        Err(error) => return json!({"error": format!("MCP: {error}")}),
    };
    let mut last = Value::Null;
    for step in 0..calls {
        let Value::Object(arguments) = arguments(step) else { unreachable!("arguments are an object") };
        match client.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)).await {
            Ok(result) => {
                last = json!(result.content.iter().filter_map(|c| c.as_text()).map(|t| &t.text).collect::<Vec<_>>())
            }
            Err(error) => return json!({"error": format!("MCP call: {error}")}),
        }
    }
    let _ = client.cancel().await;
    json!({"output": format!("found: {last}")})
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "model".to_owned());
    let calls: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(5);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let app = match mode.as_str() {
            "model" => {
                println!("openai+http://{address}/v1?model=fake");
                axum::Router::new().route(
                    "/v1/chat/completions",
                    axum::routing::post(move |Json(request): Json<Value>| async move { Json(model(calls, &request)) }),
                )
            }
            "protocol" | "mcp" => {
                println!("http://{address}/agent");
                let with_mcp = mode == "mcp";
                axum::Router::new().route(
                    "/agent",
                    axum::routing::post(move |Json(request): Json<Value>| async move {
                        Json(if with_mcp { mcp(calls, &request).await } else { protocol(calls, &request) })
                    }),
                )
            }
            other => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("unknown mode `{other}`: give model, protocol or mcp"),
                ));
            }
        };
        axum::serve(listener, app).await
    })
}
