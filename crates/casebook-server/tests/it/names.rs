//! Dataset names, tags and version references over HTTP: the API and the console's forms refuse
//! what the store refuses, in its words, as a client's mistake (never a 500).

use casebook_store::Store;

use crate::harness::{Backend, Server, answer};

/// The API's error for a request: its status, code and message (with a request id).
async fn error_of(response: reqwest::Response) -> (u16, String, String) {
    let (status, body) = answer(response).await;
    assert!(!body["error"]["request_id"].as_str().unwrap_or_default().is_empty(), "{body}");
    (
        status,
        body["error"]["code"].as_str().unwrap_or_default().to_owned(),
        body["error"]["message"].as_str().unwrap_or_default().to_owned(),
    )
}

async fn the_api_refuses_names_and_tags_that_would_mislead(backend: Backend) {
    let server = Server::start(backend).await;
    let key = &server.keys.a_write;
    let base = format!("{}/api/v1/projects/team-a/datasets", server.url);
    let v1 = server.store.in_project("team-a").versions("support").await.unwrap()[0].id.clone();
    let tag = |name: String| {
        server
            .client
            .put(format!("{base}/support/tags/{name}"))
            .bearer_auth(key)
            .json(&serde_json::json!({"version": "v1"}))
            .send()
    };
    for (name, message) in [
        ("v3".to_owned(), "tag `v3` is not allowed: `v3` always means version 3".to_owned()),
        ("latest".to_owned(), "tag `latest` is not allowed: `latest` always means the newest version".to_owned()),
        (
            v1.clone(),
            format!(
                "tag `{}…` is not allowed: 8 or more hexadecimal digits read as a content id (or the start of one)",
                &v1[..40]
            ),
        ),
        (
            "a%40b".to_owned(),
            "tag `a@b` is not allowed: it holds `@`, which separates a dataset from its version (`NAME@v3`)".to_owned(),
        ),
        ("nul%00".to_owned(), "tag `nul\\u{0000}` is not allowed: it holds U+0000, a control character".to_owned()),
    ] {
        let (status, code, got) = error_of(tag(name.clone()).await.unwrap()).await;
        assert_eq!((status, code.as_str(), got.as_str()), (400, "bad-request", message.as_str()), "{name}");
    }
    assert_eq!(server.store.in_project("team-a").tags("support").await.unwrap(), [("prod".into(), 2)]);

    let import = |name: &str| {
        server
            .client
            .post(format!("{base}/{name}/import"))
            .bearer_auth(key)
            .body("{\"id\": \"x\", \"input\": \"é\"}\n")
            .send()
    };
    let long = "n".repeat(3000);
    for (name, message) in [
        ("a%2Fb".to_owned(), "dataset name `a/b` is not allowed: it holds `/`, which separates the parts of paths and URLs: use `-` or `_`".to_owned()),
        ("a%00b".to_owned(), "dataset name `a\\u{0000}b` is not allowed: it holds U+0000, a control character".to_owned()),
        ("rtl%E2%80%AEtxt".to_owned(), "dataset name `rtl\\u{202e}txt` is not allowed: it holds U+202E, a bidirectional control, which changes how the text around it is shown".to_owned()),
        (long.clone(), format!("dataset name `{}…` is not allowed: it is 3,000 bytes long, and names are at most 128 bytes (UTF-8)", "n".repeat(40))),
    ] {
        let (status, code, got) = error_of(import(&name).await.unwrap()).await;
        assert_eq!((status, code.as_str(), got.as_str()), (400, "bad-request", message.as_str()), "{name}");
    }
    // Looking such names up is a miss, not a failure.
    for name in ["a%00b", long.as_str()] {
        let (status, code, _) =
            error_of(server.client.get(format!("{base}/{name}/versions")).bearer_auth(key).send().await.unwrap()).await;
        assert_eq!((status, code.as_str()), (404, "not-found"), "{name}");
    }
    let names: Vec<String> =
        server.store.in_project("team-a").datasets().await.unwrap().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["support"]);

    // A number is not a version, on every route that takes one.
    let (status, _, message) =
        error_of(server.client.get(format!("{base}/support/versions/3")).bearer_auth(key).send().await.unwrap()).await;
    assert_eq!(status, 404);
    assert_eq!(
        message,
        "dataset `support` has no version `3`; did you mean `v3`? (a number alone is not a version, and a content-id prefix needs at least 8 hexadecimal digits)"
    );
    let (status, _, message) =
        error_of(server.client.get(format!("{base}/support/diff?from=9")).bearer_auth(key).send().await.unwrap()).await;
    assert_eq!(status, 404);
    assert!(message.starts_with("dataset `support` has no version `9`; a version is written `v9`"), "{message}");
    let (status, body) =
        server.get(key, &format!("/api/v1/projects/team-a/datasets/support/versions/{}", &v1[..8])).await;
    assert_eq!((status, body["number"].as_u64()), (200, Some(1)), "{body}");
    server.stop().await;
}

/// A session's cookie and the form token of a page, signed in over HTTP.
async fn session(server: &Server, client: &reqwest::Client, page: &str) -> (String, String) {
    let response = client
        .post(format!("{}/signin", server.url))
        .form(&[("key", server.keys.a_write.as_str())])
        .send()
        .await
        .unwrap();
    let cookie = response.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let body = client
        .get(format!("{}{page}", server.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = body.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    (cookie, csrf)
}

async fn the_console_forms_refuse_names_and_tags_that_would_mislead(backend: Backend) {
    let server = Server::start(backend).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let (cookie, csrf) = session(&server, &client, "/projects/team-a/datasets/support").await;
    let post = |path: &str, form: Vec<(&str, &str)>| {
        client
            .post(format!("{}{path}", server.url))
            .header("cookie", &cookie)
            .header("origin", &server.url)
            .form(&form)
            .send()
    };
    for (tag, message) in [
        ("latest", "tag `latest` is not allowed: `latest` always means the newest version"),
        ("v1", "tag `v1` is not allowed: `v1` always means version 1"),
        (
            "deadbeef01",
            "tag `deadbeef01` is not allowed: 8 or more hexadecimal digits read as a content id (or the start of one)",
        ),
    ] {
        let response =
            post("/projects/team-a/datasets/support/tags", vec![("csrf", &csrf), ("version", "v1"), ("tag", tag)])
                .await
                .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, 400, "{tag}: {text}");
        assert!(text.contains(&message.replace('`', "&#x60;")) || text.contains(message), "{tag}: {text}");
    }
    assert_eq!(server.store.in_project("team-a").tags("support").await.unwrap(), [("prod".into(), 2)]);

    let case = "{\"id\": \"n1\", \"input\": \"new\"}";
    let response =
        post("/projects/team-a/new", vec![("csrf", &csrf), ("dataset", "team/a"), ("parent", "v0"), ("text", case)])
            .await
            .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(status, 422, "{text}");
    let message = "dataset name `team/a` is not allowed: it holds `/`, which separates the parts of paths and URLs: use `-` or `_`";
    assert!(text.contains(&message.replace('`', "&#x60;")) || text.contains(message), "{text}");
    // The name in another normal form is the existing dataset's: not a second one.
    let response =
        post("/projects/team-a/new", vec![("csrf", &csrf), ("dataset", "caf\u{e9}"), ("parent", "v0"), ("text", case)])
            .await
            .unwrap();
    assert_eq!(response.status().as_u16(), 303);
    let response = post(
        "/projects/team-a/new",
        vec![("csrf", &csrf), ("dataset", "cafe\u{301}"), ("parent", "v0"), ("text", case)],
    )
    .await
    .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("already exists"), "{text}");
    // The import form refuses the name before it reads the file (a multipart form, by hand).
    let body = format!(
        "--XyZ\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{csrf}\r\n--XyZ\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\n{case}\r\n--XyZ--\r\n"
    );
    let response = client
        .post(format!("{}/projects/team-a/datasets/a%40b/import", server.url))
        .header("cookie", &cookie)
        .header("origin", &server.url)
        .header("content-type", "multipart/form-data; boundary=XyZ")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(status, 400, "{text}");
    let message =
        "dataset name `a@b` is not allowed: it holds `@`, which separates a dataset from its version (`NAME@v3`)";
    assert!(text.contains(&message.replace('`', "&#x60;")) || text.contains(message), "{text}");
    let names: Vec<String> =
        server.store.in_project("team-a").datasets().await.unwrap().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["caf\u{e9}", "support"]);
    server.stop().await;
}

crate::on_both!(
    the_api_refuses_names_and_tags_that_would_mislead,
    the_console_forms_refuse_names_and_tags_that_would_mislead
);
