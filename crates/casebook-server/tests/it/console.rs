//! The web console: in a real headless Chromium for what a person does, and over plain HTTP
//! for what a person cannot see (cookies, forged forms), on both backends.

use casebook_model::Case;
use casebook_store::{CommitMode, Store};
use serde_json::json;

use crate::browser::Browser;
use crate::harness::{Backend, Server, commit};

/// Signs in through the sign-in page, which leads to the key's project.
pub async fn sign_in(browser: &Browser, server: &Server, key: &str) {
    browser.goto(&format!("{}/", server.url)).await;
    browser.fill("#key", key).await;
    browser.submit("form[action='/signin'] button").await;
    browser.wait_for_text("Datasets of").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_browses_to_a_case_and_reads_its_history() {
    let server = Server::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    // A page asked for before signing in is where signing in leads.
    browser.goto(&format!("{}/projects/team-a/datasets/support", server.url)).await;
    browser.wait_for_text("Sign in with an API key").await;
    browser.fill("#key", "cb_000000000000_wrong").await;
    browser.submit("form[action='/signin'] button").await;
    browser.wait_for_text("the API key is unknown or revoked").await;
    browser.fill("#key", &server.keys.a_write).await;
    browser.submit("form[action='/signin'] button").await;
    let text = browser.wait_for_text("Versions").await;
    assert!(browser.url().await.ends_with("/projects/team-a/datasets/support"), "{}", browser.url().await);
    // Newest first, with their counts and the tag.
    assert!(text.contains("v3"), "{text}");
    assert!(text.contains("prod"), "{text}");
    browser.shot("dataset").await;

    browser.click_link("team-a").await;
    let text = browser.wait_for_text("Datasets of team-a").await;
    assert!(text.contains("support") && text.contains("v3") && text.contains("prod → v2"), "{text}");
    assert!(!text.contains("secret-b"), "{text}");
    browser.click_link("support").await;
    browser.click_link("Browse the cases of v3").await;
    let text = browser.wait_for_text("4 cases").await;
    for id in ["c1", "c2", "c3", "c4"] {
        assert!(text.contains(id), "{text}");
    }
    browser.click_link("c2").await;
    let text = browser.wait_for_text("The agent sees").await;
    browser.shot("case").await;
    // The halves apart: the input on one side, the expected answer on the other.
    let task = browser.text_of("section.task").await;
    let expected = browser.text_of("section.expected").await;
    assert!(task.contains("two, again") && !task.contains("answer to"), "{task}");
    assert!(expected.contains("Never sent to the agent") && expected.contains("answer to two, again"), "{expected}");
    // Its history: first added in v1, changed in v2, with the field's old and new values.
    let history = browser.text_of("ol.history").await;
    assert!(history.contains("v2") && history.contains("changed") && history.contains("/input"), "{history}");
    assert!(history.contains("two") && history.contains("two, again"), "{history}");
    assert!(history.contains("v1 until v2") && history.contains("added"), "{history}");
    assert!(text.contains("permalink"));
    let permalink = browser.run("return document.querySelector('a.permalink').href", json!([])).await;
    assert_eq!(
        permalink.as_str().unwrap(),
        format!("{}/projects/team-a/datasets/support/versions/v3/cases/c2", server.url)
    );
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filter_box_selects_cases_and_shows_where_an_expression_is_wrong() {
    let server = Server::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_read).await;
    browser.goto(&format!("{}/projects/team-a/datasets/support/versions/latest", server.url)).await;
    browser.fill("#where", r#"id == "c2" or input == "four""#).await;
    browser.submit("#filter-form button").await;
    let text = browser.wait_for_text("of 4 cases match").await;
    let rows = browser.text_of("table.cases tbody").await;
    assert!(text.contains("2 of 4 cases match"), "{text}");
    assert!(rows.contains("c2") && rows.contains("c4") && !rows.contains("c1"), "{rows}");
    // The filter stays in the box, and the address can be shared.
    assert!(browser.url().await.contains("where="));

    browser.fill("#where", r#"id = "c2""#).await;
    browser.submit("#filter-form button").await;
    let error = browser.text_of("pre.filter-error").await;
    browser.shot("filter-error").await;
    // As the CLI shows it: the expression, a caret under the `=`, and the hint.
    assert_eq!(
        error,
        "error: expected a comparison operator after `id`, found `=` at column 4\n  id = \"c2\"\n     ^\n  hint: did you mean `==`?"
    );
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_walk_a_version_by_cursor_and_counts_group_by_value() {
    let server = Server::start(Backend::Sqlite).await;
    let a = server.store.in_project("team-a");
    let cases: Vec<Case> = (0..120)
        .map(|i| {
            serde_json::from_value(json!({
                "id": format!("row-{i:03}"),
                "input": format!("question {i} — ¿qué?"),
                "labels": [if i % 3 == 0 { "kind:refund" } else { "kind:login" }],
            }))
            .unwrap()
        })
        .collect();
    commit(&a, "big", CommitMode::Replace, cases).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_read).await;
    browser.goto(&format!("{}/projects/team-a/datasets/big/versions/v1", server.url)).await;
    let first = browser.text_of("table.cases tbody").await;
    assert!(first.contains("row-000") && first.contains("row-049") && !first.contains("row-050"), "{first}");
    assert!(first.contains("question 7 — ¿qué?"), "{first}");
    browser.click_link("next page").await;
    let second = browser.text_of("table.cases tbody").await;
    assert!(second.contains("row-050") && second.contains("row-099") && !second.contains("row-049"), "{second}");
    browser.click_link("next page").await;
    let third = browser.text_of("table.cases tbody").await;
    assert!(third.contains("row-119") && !third.contains("row-099"), "{third}");
    assert!(browser.all("a[rel=next]").await.is_empty(), "a last page has no next page");
    browser.click_link("first page").await;
    assert!(browser.text_of("table.cases tbody").await.contains("row-000"));

    browser.fill("#group_by", "label.kind").await;
    browser.submit("#filter-form button").await;
    let groups = browser.text_of("table.groups").await;
    assert!(groups.contains("login 80") && groups.contains("refund 40"), "{groups}");
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_tags_a_version_and_compares_two() {
    let server = Server::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    browser.goto(&format!("{}/projects/team-a/datasets/support", server.url)).await;
    browser.run("document.querySelector('#tag-form select').value = 'v3'", json!([])).await;
    browser.fill("#tag-form input[name=tag]", "candidate").await;
    browser.submit("#tag-form button").await;
    browser.wait_for_text("candidate").await;
    let row = browser.run("return [...document.querySelectorAll('table.versions tr')].find(r => r.innerText.includes('candidate')).innerText", json!([])).await;
    assert!(row.as_str().unwrap().contains("v3"), "{row}");
    assert_eq!(
        server.store.in_project("team-a").tags("support").await.unwrap(),
        [("candidate".into(), 3), ("prod".into(), 2)]
    );

    // Compare v1 with v3: pick them in the version list.
    browser.click("input[name=from][value=v1]").await;
    browser.click("input[name=to][value=v3]").await;
    browser.submit("#compare button").await;
    let text = browser.wait_for_text("v1 → v3").await;
    browser.shot("diff").await;
    assert!(text.contains("1 added") && text.contains("0 removed") && text.contains("1 modified"), "{text}");
    let modified = browser.text_of(".modified-case").await;
    assert!(modified.contains("c2") && modified.contains("/input") && modified.contains("two, again"), "{modified}");
    assert!(browser.text_of("ul.ids.added").await.contains("c4"));
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_key_sees_no_edit_controls_and_another_project_sees_nothing() {
    let server = Server::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_read).await;
    browser.goto(&format!("{}/projects/team-a/datasets/support", server.url)).await;
    let text = browser.wait_for_text("Versions").await;
    assert!(text.contains("read"), "{text}");
    assert!(browser.all("#tag-form").await.is_empty(), "a read key sees the tag form");
    assert!(browser.all("form[method=post]").await.len() == 1, "only the sign-out form posts");
    assert!(!text.contains("Add a case"), "{text}");
    browser.goto(&format!("{}/projects/team-a/datasets/support/versions/v3/cases/c1", server.url)).await;
    assert!(!browser.wait_for_text("The agent sees").await.contains("Edit this case"));
    browser.goto(&format!("{}/projects/team-a", server.url)).await;
    assert!(!browser.wait_for_text("Datasets of team-a").await.contains("New dataset"));
    // The editor itself refuses a read key.
    browser.goto(&format!("{}/projects/team-a/datasets/support/edit?case=c1", server.url)).await;
    assert!(browser.wait_for_text("403").await.contains("may only read"));
    browser.goto(&format!("{}/projects/team-a", server.url)).await;
    browser.submit("form[action='/signout'] button").await;
    browser.wait_for_text("Sign in with an API key").await;

    // team-b's key: team-a's pages answer as if there were no such project.
    sign_in(&browser, &server, &server.keys.b_read).await;
    assert!(browser.text().await.contains("Datasets of team-b"));
    for path in [
        "/projects/team-a",
        "/projects/team-a/datasets/support",
        "/projects/team-a/datasets/support/versions/v1/cases/c1",
    ] {
        browser.goto(&format!("{}{path}", server.url)).await;
        let text = browser.wait_for_text("404").await;
        assert!(text.contains("no project `team-a`") && !text.contains("c1"), "{path}: {text}");
    }
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_edits_a_case_sees_problems_as_typed_and_the_new_version_diff() {
    let server = Server::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    browser.goto(&format!("{}/projects/team-a/datasets/support/versions/v3/cases/c2", server.url)).await;
    browser.click_link("Edit this case").await;
    let text = browser.wait_for_text("Saving makes a new version on v3").await;
    assert!(text.contains("Edit c2 in support"), "{text}");
    // Problems as it is typed, located in the editor.
    browser.fill("#text", "{\"id\": \"c2\",\n \"input\": \"two, edited\",\n \"expected\": {\"output\": 4,}\n}").await;
    let problems = browser.wait_for_text("line 3, column").await;
    browser.shot("edit-problem").await;
    let shown = browser.text_of("#problems").await;
    assert_eq!(shown, "line 3, column 27: trailing comma before `}` · hint: fix the JSON syntax here", "{problems}");
    // Saving a case with an error writes nothing and shows the same place.
    browser.submit("#edit-form button").await;
    assert!(browser.text_of("#problems").await.starts_with("line 3, column 27: trailing comma"));
    assert_eq!(server.store.in_project("team-a").versions("support").await.unwrap().len(), 3);
    browser.fill("#text", "{\"id\": \"c2\", \"input\": \"two, edited\", \"expected\": {\"output\": \"4\"}}").await;
    browser.wait_for_text("no problems").await;
    browser.fill("#message", "c2 reads better").await;
    browser.submit("#edit-form button").await;
    // The new version and its diff.
    let text = browser.wait_for_text("v3 → v4").await;
    assert!(text.contains("0 added") && text.contains("1 modified"), "{text}");
    let modified = browser.text_of(".modified-case").await;
    assert!(
        modified.contains("/input") && modified.contains("two, again") && modified.contains("two, edited"),
        "{modified}"
    );
    let v4 = server.store.in_project("team-a").versions("support").await.unwrap().pop().unwrap();
    assert_eq!(
        (v4.number, v4.message.as_str(), v4.author.as_str()),
        (4, "c2 reads better", &*format!("key {}", server.keys.a_write.split('_').nth(1).unwrap()))
    );
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_creates_a_dataset_from_its_first_case() {
    let server = Server::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    browser.click_link("New dataset").await;
    browser.fill("#dataset", "support").await;
    browser
        .fill(
            "#text",
            "{\"id\": \"q1\", \"input\": \"¿dónde está mi pedido?\", \"expected\": {\"output\": \"en camino\"}}",
        )
        .await;
    browser.submit("#edit-form button").await;
    let text = browser.wait_for_text("pick another name").await;
    assert!(text.contains("a dataset named `support` already exists (its head is v3)"), "{text}");
    browser.fill("#dataset", "pedidos").await;
    browser.submit("#edit-form button").await;
    let text = browser.wait_for_text("The agent sees").await;
    assert!(text.contains("¿dónde está mi pedido?") && text.contains("en camino"), "{text}");
    assert!(browser.url().await.ends_with("/projects/team-a/datasets/pedidos/versions/v1/cases/q1"));
    browser.click_link("team-a").await;
    assert!(browser.text().await.contains("pedidos"));
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_import_is_previewed_with_its_errors_located_and_committed_on_confirmation() {
    let server = Server::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    browser.goto(&format!("{}/projects/team-a/datasets/support", server.url)).await;
    browser.click_link("Import a file").await;
    // An uploaded letta file with a broken second row: its line and column, nothing to confirm.
    let folder = tempfile::tempdir().unwrap();
    let bad = folder.path().join("bad.jsonl");
    fs_err::write(&bad, "{\"input\": \"a\", \"ground_truth\": \"b\"}\n{\"input\": \"c\" \"ground_truth\": \"d\"}\n")
        .unwrap();
    browser.fill("#file", bad.to_str().unwrap()).await;
    browser.submit("#import-form button").await;
    let text = browser.wait_for_text("Preview of bad.jsonl").await;
    browser.shot("import-error").await;
    let problems = browser.text_of("#import-problems").await;
    assert!(problems.starts_with("bad.jsonl:2:15 error: "), "{problems}\n{text}");
    assert!(text.contains("nothing can be imported while the file has errors"), "{text}");
    assert!(browser.all("#confirm-form").await.is_empty());

    // Pasted cases: detected, and what they would do to the head, before anything is written.
    let pasted = [
        r#"{"id": "c1", "input": "one", "expected": {"output": "answer to one"}}"#,
        r#"{"id": "c2", "input": "two, third time", "expected": {"output": "answer to two"}}"#,
        r#"{"id": "c5", "input": "cinco — ¿sí?"}"#,
    ]
    .join("\n");
    browser.fill("#text", &pasted).await;
    browser.submit("#import-form button").await;
    let text = browser.wait_for_text("Preview of pasted.jsonl").await;
    browser.shot("import-preview").await;
    assert!(browser.text_of("#detected").await.starts_with("read as casebook (jsonl) · 3 cases · 0 errors"), "{text}");
    assert_eq!(browser.text_of("#would").await, "On v3 (replace), this would add 1, change 1 and remove 2 cases.");
    assert!(text.contains("c5") && text.contains("c3") && text.contains("c4"), "{text}");
    assert_eq!(
        server.store.in_project("team-a").versions("support").await.unwrap().len(),
        3,
        "a preview writes nothing"
    );
    // The confirmation, kept to send again below.
    let again = browser.run("return document.querySelector('#confirm-form').outerHTML", json!([])).await;
    browser.fill("#confirm-form input[name=message]", "from the console").await;
    browser.submit("#confirm-form button").await;
    let text = browser.wait_for_text("v3 → v4").await;
    assert!(text.contains("1 added") && text.contains("2 removed") && text.contains("1 modified"), "{text}");
    let v4 = server.store.in_project("team-a").versions("support").await.unwrap().pop().unwrap();
    assert_eq!((v4.number, v4.cases, v4.message.as_str()), (4, 3, "from the console"));
    // A preview is confirmed once.
    browser.run("document.body.insertAdjacentHTML('beforeend', arguments[0])", json!([again])).await;
    browser.submit("#confirm-form button").await;
    assert!(browser.wait_for_text("410").await.contains("preview the file again"));
    browser.quit().await;
    server.stop().await;
}

/// A session's cookie, signed in over HTTP.
pub(crate) async fn cookie(server: &Server, key: &str) -> String {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let response = client.post(format!("{}/signin", server.url)).form(&[("key", key)]).send().await.unwrap();
    assert_eq!(response.status(), 303);
    let set = response.headers()["set-cookie"].to_str().unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    set.split(';').next().unwrap().to_owned()
}

async fn writes_need_the_session_token_a_write_key_and_this_site(backend: Backend) {
    let server = Server::start(backend).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let tag_url = format!("{}/projects/team-a/datasets/support/tags", server.url);
    let page = |cookie: &str| {
        client.get(format!("{}/projects/team-a/datasets/support", server.url)).header("cookie", cookie).send()
    };
    let writer = cookie(&server, &server.keys.a_write).await;
    let body = page(&writer).await.unwrap().text().await.unwrap();
    let csrf = body.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let tag = |cookie: String, csrf: String, origin: Option<String>| {
        let mut request = client.post(&tag_url).header("cookie", cookie).form(&[
            ("csrf", csrf.as_str()),
            ("version", "v1"),
            ("tag", "forged"),
        ]);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    // Without the session's form token, or from another site: refused, nothing tagged.
    let (status, text) = tag(writer.clone(), "0".repeat(64), None).await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("reload the page"), "{text}");
    let (status, text) = tag(writer.clone(), csrf.clone(), Some("http://evil.example".into())).await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("another site"), "{text}");
    // A read key's session with its own token: refused.
    let reader = cookie(&server, &server.keys.a_read).await;
    let body = page(&reader).await.unwrap().text().await.unwrap();
    let read_csrf = body.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let (status, text) = tag(reader, read_csrf, None).await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("may only read"), "{text}");
    // No cookie: signed out.
    let (status, _) = tag(String::new(), csrf.clone(), None).await;
    assert_eq!(status, 401);
    assert_eq!(server.store.in_project("team-a").tags("support").await.unwrap(), [("prod".into(), 2)]);
    // The real form: tagged.
    let (status, _) = tag(writer.clone(), csrf, Some(server.url.clone())).await;
    assert_eq!(status, 303);
    assert_eq!(
        server.store.in_project("team-a").tags("support").await.unwrap(),
        [("forged".into(), 1), ("prod".into(), 2)]
    );
    // A revoked key's session ends at once.
    let key_id = server.keys.a_write.split('_').nth(1).unwrap().to_owned();
    server.store.revoke_key(&key_id, "2026-11-24T09:00:00Z").await.unwrap();
    let response = page(&writer).await.unwrap();
    assert_eq!(response.status(), 303);
    assert!(response.headers()["location"].to_str().unwrap().starts_with("/signin?next="));
    server.stop().await;
}

async fn pages_and_exports_answer_over_http(backend: Backend) {
    let server = Server::start(backend).await;
    let client = reqwest::Client::new();
    let reader = cookie(&server, &server.keys.a_read).await;
    let get = |path: &str| client.get(format!("{}{path}", server.url)).header("cookie", reader.clone()).send();
    let response = get("/projects/team-a/datasets/support/versions/prod/export?format=letta").await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-disposition"], "attachment; filename=\"support-v2.jsonl\"");
    let text = response.text().await.unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains("two, again"), "{text}");
    // An unknown page of the console is a page, an unknown API path the API's JSON.
    let response = get("/nothing/here").await.unwrap();
    assert_eq!(response.status(), 404);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let response = get("/api/v1/nothing").await.unwrap();
    assert_eq!(response.status(), 404);
    assert!(response.text().await.unwrap().contains("\"no-route\""));
    // Pages of people's data are never cached.
    let response = get("/projects/team-a").await.unwrap();
    assert_eq!(response.headers()["cache-control"], "no-store");
    server.stop().await;
}

crate::on_both!(writes_need_the_session_token_a_write_key_and_this_site, pages_and_exports_answer_over_http);
