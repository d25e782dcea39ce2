//! Every route the OpenAPI document lists, asked with a key of one project about the other
//! project's data, answers 404 and says nothing of it; without a key, 401; with a read key, a
//! write (an operation whose security names the role `write`) is 403. The routes come from the document, so a new route is covered as it is added;
//! and the document is checked against the router (every operation is served, and routes are
//! added only with their operation).

use crate::harness::{Backend, Server, answer};

/// `(method, path template)` of every operation in the document.
async fn operations(server: &Server) -> Vec<(String, String)> {
    documented(server).await.into_iter().map(|(method, path, _)| (method, path)).collect()
}

/// `(method, path template, whether it needs a write key)` of every operation in the document.
async fn documented(server: &Server) -> Vec<(String, String, bool)> {
    let doc: serde_json::Value =
        server.client.get(format!("{}/api/v1/openapi.json", server.url)).send().await.unwrap().json().await.unwrap();
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let roles = operation["security"].as_array().into_iter().flatten().filter_map(|s| s["bearer"].as_array());
            // An operation for admin keys (a purge) is a write too.
            let write = roles.flatten().any(|role| role == "write" || role == "admin");
            out.push((method.to_uppercase(), path.clone(), write));
        }
    }
    assert!(out.len() >= 15, "{out:?}");
    out
}

/// A template with its parameters filled in for `project`'s data.
fn fill(template: &str, project: &str, dataset: &str, case: &str, run: &str) -> String {
    template
        .replace("{project}", project)
        .replace("{dataset}", dataset)
        .replace("{version}", "v1")
        .replace("{case}", case)
        .replace("{run}", run)
        .replace("{tag}", "prod")
}

/// The error an answer is: its API code and message; the OTLP routes answer with a
/// `google.rpc.Status` (`{"code": 5, "message": …}` to a JSON request), read as the API code
/// its gRPC code stands for.
fn error(path: &str, body: &serde_json::Value) -> (String, String) {
    let message = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    if path.ends_with("/v1/traces") || path.ends_with("/v1/logs") {
        let code = match body["code"].as_i64() {
            Some(5) => "not-found",
            Some(7) => "forbidden",
            Some(16) => "unauthorized",
            _ => "not a google.rpc.Status",
        };
        return (code.to_owned(), message(&body["message"]));
    }
    (message(&body["error"]["code"]), message(&body["error"]["message"]))
}

fn is_open(path: &str) -> bool {
    path == "/healthz" || path == "/api/v1/openapi.json"
}

async fn send(server: &Server, method: &str, path: &str, key: Option<&str>) -> (u16, serde_json::Value, String) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    // Queries every route accepts or ignores; a body every write route can read.
    let url = format!("{}{path}?from=v1&format=jsonl", server.url);
    let mut request = server.client.request(method, url).header("content-type", "application/json");
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.body(r#"{"version":"v1"}"#).send().await.unwrap();
    let (status, body) = answer(response).await;
    let text = body.to_string();
    (status, body, text)
}

async fn keys_see_nothing_of_the_other_project(backend: Backend) {
    let server = Server::start(backend).await;
    let ops = operations(&server).await;
    // The key of A about B's data (datasets of both names: one B alone has, one both have), and
    // the key of B about A's.
    let probes = [
        (&server.keys.a_write, "team-b", "secret-b", "s1", "r-b-1", ["secret-b", "hidden", "r-b-1"]),
        (&server.keys.a_write, "team-b", "support", "b1", "r-b-1", ["secret-b", "bee", "r-b-1"]),
        (&server.keys.b_write, "team-a", "support", "c1", "r-a-1", ["two, again", "c4", "r-a-1"]),
    ];
    for (key, project, dataset, case, run, secrets) in probes {
        for (method, template) in ops.iter().filter(|(_, t)| t.contains("{project}")) {
            let path = fill(template, project, dataset, case, run);
            let (status, body, text) = send(&server, method, &path, Some(key)).await;
            assert_eq!(status, 404, "{method} {path}: {text}");
            let (code, message) = error(&path, &body);
            assert_eq!(code, "not-found", "{method} {path}: {text}");
            assert_eq!(message, format!("no project `{project}`"), "{method} {path}");
            // Everything but the request id (random hex, which may spell anything short).
            let mut told = body.clone();
            if told.get("error").is_some() {
                told["error"]["request_id"] = serde_json::Value::Null;
            }
            let told = told.to_string();
            for secret in secrets {
                assert!(!told.contains(secret), "{method} {path} tells of `{secret}`: {text}");
            }
        }
    }
    // What a key lists is its own project's.
    let (_, projects) = server.get(&server.keys.a_read, "/api/v1/projects").await;
    assert_eq!(projects, serde_json::json!([{"name": "team-a"}]));
    let (_, datasets) = server.get(&server.keys.b_read, "/api/v1/projects/team-b/datasets").await;
    let names: Vec<&str> = datasets.as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["secret-b", "support"]);
    let (_, runs) = server.get(&server.keys.a_read, "/api/v1/projects/team-a/runs").await;
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(runs[0]["id"], "r-a-1");
    // Nor through a miss inside one's own: asking for B's dataset answers as for a name that
    // is nowhere.
    let miss = |name: &'static str| {
        let server = &server;
        async move {
            let (status, body) =
                server.get(&server.keys.a_read, &format!("/api/v1/projects/team-a/datasets/{name}/versions")).await;
            (status, body["error"]["message"].as_str().unwrap().replace(name, "NAME"))
        }
    };
    let (b_status, b_message) = miss("secret-b").await;
    assert_eq!((b_status, b_message), miss("secret-x").await);
    server.stop().await;
}

async fn every_route_needs_a_key_and_writes_need_a_write_key(backend: Backend) {
    let server = Server::start(backend).await;
    let ops = documented(&server).await;
    // Every change is a write; the one read sent with a body is the lookup of outputs.
    let reads_with_a_body: Vec<&str> =
        ops.iter().filter(|(m, _, write)| m != "GET" && !write).map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(reads_with_a_body, ["/api/v1/projects/{project}/outputs"]);
    for (method, template, write) in ops {
        let path = fill(&template, "team-a", "support", "c1", "r-a-1");
        let (status, body, text) = send(&server, &method, &path, None).await;
        if is_open(&template) {
            assert_eq!(status, 200, "{method} {path}: {text}");
            continue;
        }
        assert_eq!(status, 401, "{method} {path}: {text}");
        assert_eq!(error(&path, &body).0, "unauthorized");
        let (status, body, _) = send(&server, &method, &path, Some("cb_000000000000_nonsense")).await;
        assert_eq!((status, error(&path, &body).0.as_str()), (401, "unauthorized"), "{method} {path}");
        let (status, body, text) = send(&server, &method, &path, Some(&server.keys.a_read)).await;
        if write {
            assert_eq!(status, 403, "{method} {path}: {text}");
            assert_eq!(error(&path, &body).0, "forbidden");
        } else {
            assert_ne!(status, 403, "{method} {path}: {text}");
        }
    }
    // A revoked key opens nothing.
    let id = &server.keys.a_read[3..15];
    server.store.revoke_key(id, "2026-11-24T09:00:00Z").await.unwrap();
    let (status, _) = server.get(&server.keys.a_read, "/api/v1/projects/team-a/datasets").await;
    assert_eq!(status, 401);
    server.stop().await;
}

/// Every operation of the document is served (its own project, real data: never a "no route"
/// or "method not allowed" answer), and a path or method outside it is.
async fn the_document_lists_exactly_the_routes_served(backend: Backend) {
    let server = Server::start(backend).await;
    for (method, template) in operations(&server).await {
        let path = fill(&template, "team-a", "support", "c1", "r-a-1");
        let (status, body, text) = send(&server, &method, &path, Some(&server.keys.a_write)).await;
        let code = body["error"]["code"].as_str().unwrap_or("");
        assert!(code != "no-route" && code != "method-not-allowed", "{method} {path}: {text}");
        assert!(status < 500, "{method} {path}: {text}");
    }
    let (status, body, _) = send(&server, "GET", "/api/v1/projects/team-a/nothing", Some(&server.keys.a_read)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("no-route")));
    let (status, body, _) = send(&server, "DELETE", "/api/v1/projects", Some(&server.keys.a_read)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (405, Some("method-not-allowed")));
    server.stop().await;
}

crate::on_both!(
    keys_see_nothing_of_the_other_project,
    every_route_needs_a_key_and_writes_need_a_write_key,
    the_document_lists_exactly_the_routes_served
);

/// Routes are added only through `utoipa_axum`'s `routes!`, which adds each with its
/// operation: no file of the server adds one any other way.
#[test]
fn routes_are_added_only_with_their_operation() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // The console's pages are HTML, not API operations: they are added in its own module.
    let console = root.join("console");
    let mut stack = vec![root];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path == console {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = fs_err::read_to_string(&path).unwrap();
            seen += 1;
            for bad in [".route(", ".nest(", ".route_service(", ".nest_service(", ".merge("] {
                assert!(!text.contains(bad), "{} adds a route with `{bad}`", path.display());
            }
        }
    }
    assert!(seen >= 5);
}
