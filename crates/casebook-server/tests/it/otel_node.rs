//! The OpenTelemetry JS SDK's OTLP/HTTP protobuf exporter (`@opentelemetry/sdk-trace-node` and
//! `@opentelemetry/exporter-trace-otlp-proto` from npm) against a real server on `127.0.0.1:0`,
//! with its default settings and configured only by the environment variables a user sets
//! (`tests/otel_exporter_node.cjs`): one whole case per agent invocation. Not run (said on
//! stderr) without Node.js and the packages: `scripts/test.sh` installs them into
//! `target/node-otel`, or set `CASEBOOK_TEST_OTEL_NODE_MODULES` to a `node_modules` folder that
//! has them.
//!
//! The Go SDK and the OpenTelemetry Collector's `otlphttp` exporter are not tested: this machine
//! has no Go toolchain to build a Go exporter, and the Collector's release binaries (GitHub
//! releases) cannot be fetched from it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Backend, Server};

/// The `node_modules` folder with the SDK and the exporter, if Node.js and they are there.
fn node_modules() -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = std::env::var_os("CASEBOOK_TEST_OTEL_NODE_MODULES")
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace.join("target/node-otel/node_modules")]);
    for candidate in candidates {
        let has = Command::new("node")
            .args([
                "-e",
                "require('@opentelemetry/sdk-trace-node'); require('@opentelemetry/exporter-trace-otlp-proto')",
            ])
            .env("NODE_PATH", &candidate)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if has {
            return Some(candidate);
        }
    }
    eprintln!(
        "not run: no Node.js with `@opentelemetry/sdk-trace-node` and `@opentelemetry/exporter-trace-otlp-proto`: `scripts/test.sh` installs them into target/node-otel, or set CASEBOOK_TEST_OTEL_NODE_MODULES"
    );
    None
}

async fn head_cases(server: &Server, dataset: &str) -> Vec<Value> {
    let path = format!("/api/v1/projects/team-a/datasets/{dataset}/versions/latest/cases");
    let (status, page) = server.get(&server.keys.a_read, &path).await;
    if status == 404 { Vec::new() } else { page["cases"].as_array().unwrap().clone() }
}

async fn the_node_exporter_with_its_defaults_makes_one_case_per_invocation(backend: Backend) {
    let Some(modules) = node_modules() else { return };
    let limits = casebook_server::Limits { capture_quiet: Duration::from_millis(400), ..Default::default() };
    let server = Server::start_with(backend, limits).await;
    let n = 4;
    let mut command = Command::new("node");
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otel_exporter_node.cjs"))
        .arg(n.to_string())
        .env("NODE_PATH", &modules)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url)
        .env("OTEL_EXPORTER_OTLP_HEADERS", format!("Authorization=Bearer%20{}", server.keys.a_write))
        .env("OTEL_SERVICE_NAME", "weather-agent");
    let out = tokio::task::spawn_blocking(move || command.output()).await.unwrap().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done", "{}", String::from_utf8_lossy(&out.stderr));
    let mut cases = Vec::new();
    for _ in 0..100 {
        cases = head_cases(&server, "weather-agent").await;
        if cases.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cases.len(), n, "{cases:#?}");
    let mut inputs: Vec<String> = cases.iter().map(|c| c["input"].as_str().unwrap().to_owned()).collect();
    inputs.sort();
    assert_eq!(inputs, (0..n).map(|i| format!("What is the weather in city {i}?")).collect::<Vec<_>>());
    for case in &cases {
        let i: usize =
            case["input"].as_str().unwrap().trim_end_matches('?').rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(case["expected"]["output"], format!("It is rainy in city {i}."), "{case:#}");
        assert_eq!(case["expected"]["tool_calls"], json!([{"name": "get_weather", "arguments": {"city": i}}]));
        assert_eq!(
            case["tools"][0]["responses"],
            json!([{"when": {"arguments": {"city": i}}, "result": format!("rainy in city {i}")}])
        );
        assert_eq!(case["metadata"]["service"], "weather-agent");
    }
    server.stop().await;
}

crate::on_both!(the_node_exporter_with_its_defaults_makes_one_case_per_invocation);
