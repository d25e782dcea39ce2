//! A fake agent for benchmarks: casebook's http protocol on 127.0.0.1, answering every turn at
//! once with the last message's text. Prints its URL on stdout, then serves until killed.
//!
//! `cargo run --release -p casebook-runner --example fake_agent [PORT]`

use axum::Json;
use serde_json::{Value, json};

async fn answer(Json(request): Json<Value>) -> Json<Value> {
    let last = request["messages"].as_array().and_then(|m| m.last()).map(|m| m["content"].clone());
    Json(json!({"output": last.unwrap_or(Value::Null)}))
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        println!("http://{}/agent", listener.local_addr()?);
        let app = axum::Router::new().route("/agent", axum::routing::post(answer));
        axum::serve(listener, app).await
    })
}
