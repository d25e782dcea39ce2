//! Bad requests get the documented answers: the API's JSON error (with the request id, naming
//! the parameter or the place at fault) rather than a bare text or a 500, nothing stored by a
//! request that fails, and a sign-in that only ever sends the browser back to this server.

use crate::harness::{Backend, Server};

const A: &str = "/api/v1/projects/team-a/datasets/support";

/// Asserts a JSON error answer: its status, code, and words its message must hold.
async fn refused(response: reqwest::Response, status: u16, code: &str, says: &[&str]) -> serde_json::Value {
    let got = response.status().as_u16();
    let kind = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let header_id = response.headers().get("x-request-id").map(|v| v.to_str().unwrap().to_owned());
    let text = response.text().await.unwrap();
    assert_eq!((got, kind.as_str()), (status, "application/json"), "{text}");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    let error = &body["error"];
    assert_eq!(error["code"], code, "{text}");
    let message = error["message"].as_str().unwrap();
    for word in says {
        assert!(message.contains(word), "`{message}` does not say `{word}`");
    }
    assert!(!error["request_id"].as_str().unwrap().is_empty(), "{text}");
    assert_eq!(header_id.as_deref(), error["request_id"].as_str());
    body
}

async fn bad_queries_and_bodies_get_the_json_error_naming_the_parameter(backend: Backend) {
    let server = Server::start(backend).await;
    let get = |path: String| server.client.get(format!("{}{path}", server.url)).bearer_auth(&server.keys.a_read).send();
    for (query, said) in
        [("limit=-1", "`limit`"), ("limit=abc", "`limit`"), ("limit=99999999999999999999999", "`limit`")]
    {
        let response = get(format!("{A}/versions/v3/cases?{query}")).await.unwrap();
        let body = refused(response, 400, "bad-request", &["query parameter", said]).await;
        assert_eq!(
            body["error"]["message"].as_str().unwrap().split(':').next().unwrap(),
            format!("the query parameter {said} is not valid"),
        );
    }
    let response = get(format!("{A}/versions/v3/export?lossy=maybe")).await.unwrap();
    refused(response, 400, "bad-request", &["`lossy`"]).await;
    let response = get(format!("{A}/diff")).await.unwrap();
    let body = refused(response, 400, "bad-request", &[]).await;
    assert_eq!(body["error"]["message"], "the query needs the parameter `from`");
    // A path that is not UTF-8 once percent-decoded.
    let response = get(format!("{A}%FF/versions")).await.unwrap();
    refused(response, 400, "bad-request", &["UTF-8"]).await;

    let put = |body: &'static str, kind: Option<&'static str>| {
        let mut request =
            server.client.put(format!("{}{A}/tags/prod", server.url)).bearer_auth(&server.keys.a_write).body(body);
        if let Some(kind) = kind {
            request = request.header("content-type", kind);
        }
        request.send()
    };
    let response = put("{\"version\": ", Some("application/json")).await.unwrap();
    refused(response, 400, "bad-request", &["not valid JSON", "line 1 column 12"]).await;
    let response = put("{\"version\": 3}", Some("application/json")).await.unwrap();
    refused(response, 422, "invalid-input", &["`version`", "expected a string", "line 1 column 13"]).await;
    let response = put("{}", None).await.unwrap();
    refused(response, 422, "invalid-input", &["missing field `version`"]).await;
    // The tag did not move.
    let (_, tags) = server.get(&server.keys.a_read, &format!("{A}/tags")).await;
    assert_eq!(tags, serde_json::json!([{"name": "prod", "version": 2}]));

    // A file name no file system takes, to an import and to a capture.
    let post = |path: String| {
        server.client.post(format!("{}{path}", server.url)).bearer_auth(&server.keys.a_write).body("{}\n").send()
    };
    let response = post(format!("{A}/import?filename=cases%00.jsonl")).await.unwrap();
    refused(response, 400, "bad-request", &["`filename`", "U+0000"]).await;
    let long = "ü".repeat(200);
    let response = post(format!("{A}/import?filename={long}.jsonl")).await.unwrap();
    refused(response, 400, "bad-request", &["`filename`", "406 bytes", "at most 255"]).await;
    let response = post(format!("{A}/capture?filename=t%0A.json")).await.unwrap();
    refused(response, 400, "bad-request", &["`filename`", "U+000A"]).await;
    let (_, log) = server.get(&server.keys.a_read, &format!("{A}/versions")).await;
    assert_eq!(log["versions"].as_array().unwrap().len(), 3);

    // The console answers a bad form with a page, not a bare text.
    let response = server
        .client
        .post(format!("{}/signin", server.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("next=%2Fprojects%2Fteam-a")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let kind = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(kind.starts_with("text/html"), "{kind}");
    assert!(response.text().await.unwrap().contains("the form needs the parameter `key`"));
    server.stop().await;
}

/// `{"a":{"a":…}}` nested `depth` objects deep around `leaf`.
fn nested(depth: usize, leaf: &str) -> String {
    format!("{}{leaf}{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

async fn a_run_refused_for_its_json_keeps_nothing_and_the_list_still_answers(backend: Backend) {
    let server = Server::start(backend).await;
    const RUNS: &str = "/api/v1/projects/team-a/runs";
    let send = |method: reqwest::Method, path: String, body: String| {
        server
            .client
            .request(method, format!("{}{path}", server.url))
            .bearer_auth(&server.keys.a_write)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // `meta` nested 200 deep (past what serde_json reads back) and 65 deep (past the limit).
    for depth in [200, 65] {
        let body = format!(
            r#"{{"id": "r-deep-{depth}", "experiment": "ünïcode", "started": "2026-11-24T09:00:00Z", "meta": {}}}"#,
            nested(depth, "1")
        );
        let response = send(reqwest::Method::POST, RUNS.into(), body).await.unwrap();
        let body = refused(response, 422, "invalid-input", &["nests deeper than 64 levels", "nothing was kept"]).await;
        let pointer = format!("/meta{}", "/a".repeat(64));
        assert!(body["error"]["message"].as_str().unwrap().starts_with(&format!("`{pointer}`")), "{body}");
        assert_eq!(body["error"]["diagnostics"][0]["pointer"], pointer);
        assert_eq!(body["error"]["diagnostics"][0]["code"], "E-too-deep");
    }
    // 64 deep is kept, and read back.
    let body = format!(
        r#"{{"id": "r-deep-64", "experiment": "x", "started": "2026-11-24T09:00:00Z", "meta": {}}}"#,
        nested(64, "\"ß\"")
    );
    let response = send(reqwest::Method::POST, RUNS.into(), body).await.unwrap();
    assert_eq!(response.status().as_u16(), 201, "{}", response.text().await.unwrap());
    // A summary or a result nested too deep is refused too, located in the body.
    let summary = format!(r#"{{"finished": "2026-11-24T09:01:00Z", "summary": {{"by": [{}]}}}}"#, nested(70, "0"));
    let response = send(reqwest::Method::PUT, format!("{RUNS}/r-deep-64/finish"), summary).await.unwrap();
    refused(response, 422, "invalid-input", &["`/summary/by/0/a/a/"]).await;
    let results = format!(r#"[{{"seq": 0, "result": {{}}}}, {{"seq": 1, "result": {}}}]"#, nested(80, "0"));
    let response = send(reqwest::Method::POST, format!("{RUNS}/r-deep-64/results"), results).await.unwrap();
    refused(response, 422, "invalid-input", &["`/1/result/a/a/"]).await;
    let response = send(
        reqwest::Method::POST,
        RUNS.into(),
        r#"{"id": "r-ctl", "experiment": "x", "started": "2026\u0000", "meta": {}}"#.into(),
    )
    .await
    .unwrap();
    refused(response, 400, "bad-request", &["`started`"]).await;

    let (status, runs) = server.get(&server.keys.a_read, RUNS).await;
    assert_eq!(status, 200, "{runs}");
    let ids: Vec<&str> = runs.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["r-a-1", "r-deep-64"]);
    let (status, run) = server.get(&server.keys.a_read, &format!("{RUNS}/r-deep-64")).await;
    assert_eq!((status, run["summary"].is_null()), (200, true), "{run}");
    let (_, results) = server.get(&server.keys.a_read, &format!("{RUNS}/r-deep-64/results")).await;
    assert_eq!(results, serde_json::json!([]));
    server.stop().await;
}

/// Where a sign-in with `form` (a form body, as sent) sends the browser.
async fn signed_in_to(server: &Server, form: &str) -> String {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let response = client
        .post(format!("{}/signin", server.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("key={}&{form}", server.keys.a_read))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 303, "{form}");
    response.headers()["location"].to_str().unwrap().to_owned()
}

async fn sign_in_sends_the_browser_only_to_a_page_of_this_server(backend: Backend) {
    let server = Server::start(backend).await;
    // Form-encoded as a browser sends them: each decodes to a `next` that leads elsewhere.
    for hostile in [
        "next=//evil.example",
        "next=%2F%2Fevil.example",
        "next=/%09/evil.example",
        "next=/%0A/evil.example",
        "next=/%0D%0ASet-Cookie:%20x=1",
        "next=/%5Cevil.example",
        "next=%2F%5Cevil.example",
        "next=/\t/evil.example",
        "next=%252F%252Fevil.example",
        "next=/%252F/evil.example",
        "next=https://evil.example/",
        "next=javascript:alert(1)",
        "next=%20/evil.example",
        "next=",
    ] {
        assert_eq!(signed_in_to(&server, hostile).await, "/projects/team-a", "{hostile}");
    }
    for (form, location) in [
        (
            "next=%2Fprojects%2Fteam-a%2Fdatasets%2Fsupport%2Fversions%2Fv3%3Fwhere%3Dlabels%2520contains%2520%2522m%25C3%25BC%2522",
            "/projects/team-a/datasets/support/versions/v3?where=labels%20contains%20%22m%C3%BC%22",
        ),
        ("next=/projects/team-a/runs", "/projects/team-a/runs"),
        ("next=/projects/team-a/datasets/caf%25C3%25A9%2520set", "/projects/team-a/datasets/caf%C3%A9%20set"),
    ] {
        assert_eq!(signed_in_to(&server, form).await, location, "{form}");
    }
    server.stop().await;
}

async fn forged_cursors_are_refused_and_an_exact_run_id_wins_over_a_prefix(backend: Backend) {
    use base64::Engine;
    let server = Server::start(backend).await;
    let read = &server.keys.a_read;
    let forge = |v: u64| {
        let token = serde_json::json!({"v": v, "o": 0.0, "i": "c1"}).to_string();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token)
    };
    for version in ["latest", "v99"] {
        let response = server
            .client
            .get(format!("{}{A}/versions/{version}/cases?limit=1&cursor={}", server.url, forge(99)))
            .bearer_auth(read)
            .send()
            .await
            .unwrap();
        let body = refused(response, 400, "bad-request", &[]).await;
        assert_eq!(
            body["error"]["message"],
            "`cursor` is not valid for `support`: it names v99, which the dataset does not have; start again without a cursor"
        );
    }
    let response = server
        .client
        .get(format!("{}{A}/versions/latest/cases?cursor={}", server.url, forge(0)))
        .bearer_auth(read)
        .send()
        .await
        .unwrap();
    refused(response, 400, "bad-request", &["names v0"]).await;
    // A cursor of a version the dataset has still walks it.
    let (status, page) = server.get(read, &format!("{A}/versions/latest/cases?cursor={}", forge(2))).await;
    assert_eq!((status, page["version"].as_u64()), (200, Some(2)), "{page}");

    // `r-a` is a run of its own and the start of `r-a-1`: `r-a` names it, and `r-a-` still
    // finds `r-a-1` alone.
    let begin = |id: &'static str| {
        server
            .client
            .post(format!("{}/api/v1/projects/team-a/runs", server.url))
            .bearer_auth(&server.keys.a_write)
            .json(
                &serde_json::json!({"id": id, "experiment": "é", "started": "2026-11-24T09:00:00Z", "meta": {"n": id}}),
            )
            .send()
    };
    assert_eq!(begin("r-a").await.unwrap().status().as_u16(), 201);
    let (status, run) = server.get(read, "/api/v1/projects/team-a/runs/r-a").await;
    assert_eq!((status, run["id"].as_str()), (200, Some("r-a")), "{run}");
    let (_, run) = server.get(read, "/api/v1/projects/team-a/runs/r-a-").await;
    assert_eq!(run["id"], "r-a-1");
    let (_, results) = server.get(read, "/api/v1/projects/team-a/runs/r-a/results").await;
    assert_eq!(results, serde_json::json!([]));
    assert_eq!(begin("r-a-2").await.unwrap().status().as_u16(), 201);
    let response =
        server.client.get(format!("{}/api/v1/projects/team-a/runs/r-a-", server.url)).bearer_auth(read).send().await;
    refused(response.unwrap(), 400, "bad-request", &["r-a-1", "r-a-2"]).await;
    server.stop().await;
}

async fn answers_carry_headers_that_keep_browsers_from_misreading_them(backend: Backend) {
    let server = Server::start(backend).await;
    let policy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                  form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let signed_in = client.post(format!("{}/signin", server.url)).form(&[("key", &server.keys.a_read)]).send().await;
    let cookie = signed_in.unwrap().headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    // Console pages (signed out and in, and a failure) and its assets.
    for path in
        ["/signin", "/projects/team-a/datasets/support", "/projects/team-a/nowhere", "/console.css", "/console.js"]
    {
        let response =
            server.client.get(format!("{}{path}", server.url)).header("cookie", &cookie).send().await.unwrap();
        let headers = response.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["content-security-policy"], policy, "{path}");
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
    }
    // API answers, good and bad.
    for (path, status) in [("/healthz", 200), ("/api/v1/projects/team-a/datasets", 200), ("/api/v1/nowhere", 404)] {
        let response =
            server.client.get(format!("{}{path}", server.url)).bearer_auth(&server.keys.a_read).send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{path}");
        assert_eq!(response.headers()["x-content-type-options"], "nosniff", "{path}");
    }
    server.stop().await;
}

crate::on_both!(
    bad_queries_and_bodies_get_the_json_error_naming_the_parameter,
    a_run_refused_for_its_json_keeps_nothing_and_the_list_still_answers,
    sign_in_sends_the_browser_only_to_a_page_of_this_server,
    forged_cursors_are_refused_and_an_exact_run_id_wins_over_a_prefix,
    answers_carry_headers_that_keep_browsers_from_misreading_them,
);
