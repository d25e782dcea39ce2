//! Error answers as the OpenAPI document describes them: real 401, 404, 409 and 422 answers,
//! each checked against the schema its operation names for that status (`{"error": {…}}`, the
//! envelope the answers have, and not the object inside it), with every key described.

use serde_json::{Value, json};

use crate::harness::{Backend, Server, answer};

/// The schema `reference` (`#/components/schemas/NAME`) points to.
fn resolve<'d>(doc: &'d Value, schema: &'d Value) -> &'d Value {
    match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.strip_prefix("#/components/schemas/").expect("a local reference");
            let found = &doc["components"]["schemas"][name];
            assert!(!found.is_null(), "the document has no schema `{name}`");
            resolve(doc, found)
        }
        None => schema,
    }
}

/// Whether `value` has JSON Schema type `kind`.
fn is_type(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        other => panic!("a type this check does not know: {other}"),
    }
}

/// The places where `value` breaks `schema` (the parts of JSON Schema utoipa writes: `$ref`,
/// `type` (one or a list), `required`, `properties`, `items`, `oneOf`/`anyOf`), read strictly: a
/// key of an object the schema does not describe is a break too, since a client's generated
/// types would not have it.
fn breaks(doc: &Value, schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema[key].as_array() {
            let fits = options.iter().any(|option| {
                let mut found = Vec::new();
                breaks(doc, option, value, at, &mut found);
                found.is_empty()
            });
            if !fits {
                out.push(format!("{at}: {value} fits none of {key}"));
            }
            return;
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(kind) => vec![kind.as_str()],
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|kind| is_type(value, kind)) {
        out.push(format!("{at}: {value} is not of type {types:?}"));
        return;
    }
    if let Value::Object(object) = value {
        for required in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !object.contains_key(required) {
                out.push(format!("{at}: no `{required}`, which the schema requires"));
            }
        }
        let properties = schema["properties"].as_object();
        for (key, item) in object {
            match properties.and_then(|p| p.get(key)) {
                Some(property) => breaks(doc, property, item, &format!("{at}/{key}"), out),
                // `type: object` without properties (a diagnostic) holds anything.
                None if properties.is_some() => out.push(format!("{at}: `{key}` is not described")),
                None => {}
            }
        }
    }
    if let (Value::Array(items), Some(schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            breaks(doc, schema, item, &format!("{at}/{i}"), out);
        }
    }
}

/// Checks an answer against the schema the document gives operation `method path` for `status`.
fn check(doc: &Value, method: &str, path: &str, status: u16, body: &Value) {
    let response = &doc["paths"][path][method]["responses"][status.to_string()];
    let schema = &response["content"]["application/json"]["schema"];
    assert!(!schema.is_null(), "the document gives `{method} {path}` no JSON schema for {status}: {response}");
    let mut found = Vec::new();
    breaks(doc, schema, body, "", &mut found);
    assert!(
        found.is_empty(),
        "`{method} {path}` answered {status} with {body}, which breaks its schema:\n{}",
        found.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_answers_fit_the_documented_schema() {
    let server = Server::start(Backend::Sqlite).await;
    let url = &server.url;
    let doc: Value =
        server.client.get(format!("{url}/api/v1/openapi.json")).send().await.unwrap().json().await.unwrap();
    // The envelope, and what is in it.
    assert_eq!(doc["components"]["schemas"]["ErrorBody"]["required"], json!(["error"]));
    assert_eq!(
        doc["components"]["schemas"]["ErrorBody"]["properties"]["error"]["$ref"],
        "#/components/schemas/ErrorDetail"
    );

    // 401: a key the store does not know.
    let (status, body) = server.get("cb_000000000000_nope", "/api/v1/projects").await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("unauthorized")), "{body}");
    check(&doc, "get", "/api/v1/projects", status, &body);

    // 404: a dataset that is not there.
    let (status, body) = server.get(&server.keys.a_read, "/api/v1/projects/team-a/datasets/nope/versions/latest").await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not-found")), "{body}");
    check(&doc, "get", "/api/v1/projects/{project}/datasets/{dataset}/versions/{version}", status, &body);

    // 409: a run id that is taken.
    let run = json!({"id": "r-a-1", "experiment": "again", "started": "2026-11-24T09:00:00Z", "meta": {}});
    let response = server
        .client
        .post(format!("{url}/api/v1/projects/team-a/runs"))
        .bearer_auth(&server.keys.a_write)
        .json(&run)
        .send()
        .await
        .unwrap();
    let (status, body) = answer(response).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("conflict")), "{body}");
    check(&doc, "post", "/api/v1/projects/{project}/runs", status, &body);

    let import = "/api/v1/projects/{project}/datasets/{dataset}/import";
    let post_import = |query: String, text: &'static str| {
        server
            .client
            .post(format!("{url}/api/v1/projects/team-a/datasets/support/import?{query}"))
            .bearer_auth(&server.keys.a_write)
            .header("content-type", "application/octet-stream")
            .body(text)
            .send()
    };
    let mine = "{\"id\": \"c2\", \"input\": \"two, mine\"}\n";
    // 409 with the head: built on v1, which is no longer the head.
    let (status, body) =
        answer(post_import("filename=support.jsonl&mode=upsert&parent=v1".into(), mine).await.unwrap()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str(), &body["error"]["head"]),
        (409, Some("conflict"), &json!(3)),
        "{body}"
    );
    check(&doc, "post", import, status, &body);
    // 409 with the conflicting ids: merged onto the head from v1, but c2 changed there (v2) too.
    let (_, v1) = server.get(&server.keys.a_read, "/api/v1/projects/team-a/datasets/support/versions/v1").await;
    let base = v1["id"].as_str().unwrap();
    let (status, body) =
        answer(post_import(format!("filename=support.jsonl&mode=upsert&base={base}"), mine).await.unwrap()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("merge-conflict")), "{body}");
    assert_eq!(body["error"]["conflicts"], json!(["c2"]), "{body}");
    check(&doc, "post", import, status, &body);

    // 422 with located diagnostics: a case without an input.
    let (status, body) =
        answer(post_import("filename=support.jsonl".into(), "{\"id\": \"c9\"}\n").await.unwrap()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("invalid-input")), "{body}");
    assert_eq!(body["error"]["diagnostics"][0]["line"], 1, "{body}");
    check(&doc, "post", import, status, &body);

    // The check itself refuses the inner object as a whole answer (the document's old shape).
    let mut found = Vec::new();
    let schema = json!({"$ref": "#/components/schemas/ErrorBody"});
    breaks(&doc, &schema, &body["error"], "", &mut found);
    assert!(found.iter().any(|f| f.contains("no `error`")), "{found:?}");
    server.stop().await;
}
