//! Traces through the API: the body `casebook capture` reads becomes cases of a dataset, a trace
//! sent again adds nothing, a reviewed case is never overwritten, and traces with errors or
//! without recorded content write nothing and say where.

use crate::harness::{Backend, Server, answer};

const A: &str = "/api/v1/projects/team-a/datasets";

fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces").join(name);
    fs_err::read_to_string(path).unwrap()
}

async fn capture(server: &Server, dataset: &str, query: &str, body: String) -> (u16, serde_json::Value) {
    let response = server
        .client
        .post(format!("{}{A}/{dataset}/capture?{query}", server.url))
        .bearer_auth(&server.keys.a_write)
        .header("x-casebook-author", "ops-bot")
        .body(body)
        .send()
        .await
        .unwrap();
    answer(response).await
}

async fn traces_become_draft_cases_once(backend: Backend) {
    let server = Server::start(backend).await;
    let agent = example("genai-agent.json");
    let (status, report) = capture(&server, "prod", "filename=agent.json&message=from%20prod", agent.clone()).await;
    assert_eq!(status, 201, "{report}");
    let id = "trace-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7";
    assert_eq!(report["added"], serde_json::json!([id]));
    assert_eq!((report["spans"].as_u64(), report["invocations"].as_u64()), (Some(4), Some(1)));
    assert_eq!(report["version"]["message"], "from prod");
    assert_eq!(report["version"]["author"], format!("ops-bot (key {})", &server.keys.a_write[3..15]));
    let (status, case) = server.get(&server.keys.a_read, &format!("{A}/prod/versions/v1/cases/{id}")).await;
    assert_eq!(status, 200, "{case}");
    assert_eq!(case["review"], "draft");
    assert_eq!(case["expected"]["output"], "It is rainy in Paris, 57°F.");
    assert_eq!(case["provenance"]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");

    // Sent again, with another trace: only the new one is added.
    let both = format!("{}\n", example("genai-conversation.jsonl"));
    let (status, report) = capture(&server, "prod", "", both).await;
    assert_eq!(status, 201, "{report}");
    assert_eq!(report["added"].as_array().unwrap().len(), 3, "{report}");
    let (status, report) = capture(&server, "prod", "", agent.clone()).await;
    assert_eq!((status, report["created"].as_bool()), (200, Some(false)), "{report}");
    assert_eq!(report["present"], serde_json::json!([id]));

    // A filter keeps what it selects; what it leaves out is counted.
    let (status, report) =
        capture(&server, "errors", "where=metadata.status%20%3D%3D%20%22error%22", example("openinference.json")).await;
    assert_eq!(
        (status, report["left_out"].as_u64(), report["created"].as_bool()),
        (200, Some(1), Some(false)),
        "{report}"
    );
    // A bad filter is located in the expression.
    let (status, body) = capture(&server, "errors", "where=metadata.status%20%3D%3D", agent).await;
    assert_eq!(status, 400, "{body}");
}

async fn bad_traces_write_nothing_and_say_where(backend: Backend) {
    let server = Server::start(backend).await;
    let broken = "{\"resourceSpans\": [{\"scopeSpans\": [{\"spans\": [\n  {\"traceId\": \"xyz\", \"spanId\": \"00f067aa0ba902b7\"}]}]}]}\n";
    let (status, body) = capture(&server, "prod", "filename=broken.json", broken.to_owned()).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["message"], "nothing was captured: `broken.json` has 1 error");
    let d = &body["error"]["diagnostics"][0];
    assert_eq!(
        (d["code"].as_str(), d["line"].as_u64(), d["column"].as_u64()),
        (Some("E-invalid-value"), Some(2), Some(15))
    );
    assert_eq!(d["pointer"], "/resourceSpans/0/scopeSpans/0/spans/0/traceId");
    // Content capture off: a warning at the agent span, no case, nothing written.
    let (status, body) = capture(&server, "prod", "filename=quiet.json", example("no-content.json")).await;
    assert_eq!(status, 422, "{body}");
    let d = &body["error"]["diagnostics"][0];
    assert_eq!(
        (d["code"].as_str(), d["file"].as_str(), d["line"].as_u64()),
        (Some("W-no-content"), Some("quiet.json"), Some(20))
    );
    let (status, _) = server.get(&server.keys.a_read, &format!("{A}/prod")).await;
    assert_eq!(status, 404);
}

crate::on_both!(traces_become_draft_cases_once, bad_traces_write_nothing_and_say_where);
