//! The console's frame around every page: errors inside it, the download that names what a
//! format would drop, times, numbers, authors, the favicon, and a layout that never scrolls
//! sideways from 360 px up (in a real headless Chromium).

use casebook_model::Case;
use casebook_store::{CommitMode, Store};
use serde_json::json;

use crate::browser::Browser;
use crate::console::{cookie, sign_in};
use crate::harness::{Backend, Server, commit};

/// A client that does not follow redirects, and a GET with a session's cookie.
fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

async fn get(server: &Server, cookie: &str, path: &str) -> (u16, String) {
    let response = client().get(format!("{}{path}", server.url)).header("cookie", cookie).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn csrf_of(page: &str) -> String {
    page.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned()
}

/// The key id of a token `cb_<id>_<secret>`.
fn key_id(token: &str) -> String {
    token.split('_').nth(1).unwrap().to_owned()
}

/// Asserts `page` is in the frame of `key` signed in to team-a: header, project links, sign-out.
fn assert_framed(page: &str, key: &str) {
    assert!(page.contains("<header class=\"top\">"), "{page}");
    assert!(page.contains(&format!("key <code>{}</code>", key_id(key))), "{page}");
    assert!(page.contains("action=\"/signout\"") && page.contains(">sign out</button>"), "{page}");
    assert!(page.contains("<a href=\"/projects/team-a\">team-a</a>"), "{page}");
    assert!(page.contains("href=\"/projects/team-a/runs\""), "{page}");
}

/// Cases with labels, which `openai-evals` cannot hold (in the shape of the native JSONL the
/// store keeps: id, input, expected output, labels).
async fn labelled(server: &Server) {
    let cases: Vec<Case> = (0..3)
        .map(|i| {
            let mut case =
                json!({"id": format!("l{i}"), "input": format!("question {i}"), "expected": {"output": "yes"}});
            if i < 2 {
                case["labels"] = json!(["kind:refund"]);
            }
            serde_json::from_value(case).unwrap()
        })
        .collect();
    commit(&server.store.in_project("team-a"), "labelled", CommitMode::Replace, cases).await;
}

async fn errors_keep_the_frame_and_their_status(backend: Backend) {
    let server = Server::start(backend).await;
    labelled(&server).await;
    let reader = cookie(&server, &server.keys.a_read).await;
    let writer = cookie(&server, &server.keys.a_write).await;
    // 404: a page no route serves, and a dataset that is not there.
    for path in ["/nothing/here", "/projects/team-a/datasets/nope"] {
        let (status, page) = get(&server, &reader, path).await;
        assert_eq!(status, 404, "{path}: {page}");
        assert_framed(&page, &server.keys.a_read);
        assert!(page.contains("404 · Not Found"), "{page}");
    }
    let (_, page) = get(&server, &reader, "/projects/team-a/datasets/nope").await;
    assert!(page.contains("no dataset named `nope`"), "{page}");
    // 400: a version that is no reference.
    let (status, page) = get(&server, &reader, "/projects/team-a/datasets/support/versions/v3?cursor=nonsense").await;
    assert_eq!(status, 400, "{page}");
    assert_framed(&page, &server.keys.a_read);
    // 403: a read key on a page that only leads to a write.
    let (status, page) = get(&server, &reader, "/projects/team-a/datasets/support/edit").await;
    assert_eq!(status, 403, "{page}");
    assert_framed(&page, &server.keys.a_read);
    assert!(page.contains("may only read: sign in with a key made with `--scope write`"), "{page}");
    // 422: a download the format cannot hold (its own page, in the frame).
    let (status, page) =
        get(&server, &reader, "/projects/team-a/datasets/labelled/versions/v1/export?format=openai-evals").await;
    assert_eq!(status, 422, "{page}");
    assert_framed(&page, &server.keys.a_read);
    // 409: a review made on a version that is no longer the head.
    let (_, case_page) = get(&server, &writer, "/projects/team-a/datasets/support/versions/v3/cases/c1").await;
    let response = client()
        .post(format!("{}/projects/team-a/datasets/support/versions/v1/cases/c2/review", server.url))
        .header("cookie", &writer)
        .form(&[("csrf", csrf_of(&case_page)), ("state", "reviewed".into()), ("labels", "x".into())])
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let page = response.text().await.unwrap();
    assert_eq!(status, 409, "{page}");
    assert_framed(&page, &server.keys.a_write);
    assert!(page.contains("nothing was written"), "{page}");
    // Signed out: the same page without anyone's frame, and the way to the start.
    let (status, page) = get(&server, "", "/nothing/here").await;
    assert_eq!(status, 404);
    assert!(!page.contains("sign out") && page.contains("Back to the start"), "{page}");
    // Another project's key: a 404 in its own frame, naming nothing of team-a's.
    let other = cookie(&server, &server.keys.b_read).await;
    let (status, page) = get(&server, &other, "/projects/team-a/datasets/support").await;
    assert_eq!(status, 404, "{page}");
    assert!(page.contains("<a href=\"/projects/team-b\">team-b</a>"), "{page}");
    server.stop().await;
}

async fn a_download_names_what_the_format_would_drop(backend: Backend) {
    let server = Server::start(backend).await;
    labelled(&server).await;
    let reader = cookie(&server, &server.keys.a_read).await;
    let base = "/projects/team-a/datasets/labelled/versions/v1";
    let (status, page) = get(&server, &reader, &format!("{base}/export?format=openai-evals")).await;
    assert_eq!(status, 422, "{page}");
    // The field, with how many cases hold it.
    assert!(
        page.contains("3 cases hold\nwhat <code>openai-evals</code> cannot hold: nothing was downloaded"),
        "{page}"
    );
    assert!(page.contains("<td><code>labels</code></td><td class=\"num\">2</td>"), "{page}");
    let anyway = format!("{base}/export?format=openai-evals&#38;lossy=1");
    assert!(page.contains(&format!("id=\"download-anyway\" href=\"{anyway}\"")), "{page}");
    // The formats that hold everything, each a download; not the one refused.
    assert!(page.contains(&format!("href=\"{base}/export?format=casebook\"")), "{page}");
    assert!(!page.contains("Download as <code>openai-evals</code>"), "{page}");
    // Downloading anyway: the cases without their labels.
    let response = client()
        .get(format!("{}{base}/export?format=openai-evals&lossy=1", server.url))
        .header("cookie", &reader)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-disposition"].to_str().unwrap().starts_with("attachment"));
    let text = response.text().await.unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(!text.contains("refund"), "{text}");
    // With a filter: only the cases it selects are counted, and the links keep it.
    let (status, page) =
        get(&server, &reader, &format!("{base}/export?format=openai-evals&where=id%20%3D%3D%20%22l0%22")).await;
    assert_eq!(status, 422, "{page}");
    assert!(page.contains("The case that matches <code>id == &#34;l0&#34;</code> holds"), "{page}");
    assert!(page.contains("<td><code>labels</code></td><td class=\"num\">1</td>"), "{page}");
    assert!(page.contains("lossy=1") && page.contains("where=id%20%3D%3D%20%22l0%22&#38;lossy=1"), "{page}");
    // A bad filter: the version's page with the filter's located error and the filter kept.
    let (status, page) =
        get(&server, &reader, &format!("{base}/export?format=casebook&where=id%20%3D%20%22l0%22")).await;
    assert_eq!(status, 400, "{page}");
    assert_framed(&page, &server.keys.a_read);
    assert!(page.contains("found `=` at column 4"), "{page}");
    assert!(page.contains("value=\"id = &#34;l0&#34;\"") || page.contains("value=\"id = &quot;l0&quot;\""), "{page}");
    assert!(page.contains("action=\"/projects/team-a/datasets/labelled/versions/v1/export\""), "{page}");
    server.stop().await;
}

async fn times_numbers_and_authors_read_one_way(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    let cases: Vec<Case> = (0..1234).map(|i| crate::harness::case(&format!("n{i:04}"), "q")).collect();
    commit(&a, "many", CommitMode::Replace, cases).await;
    // An author as older versions wrote it.
    a.tag("support", 1, "old", "key:0123456789ab", "2026-11-24T08:30:00Z").await.unwrap();
    let writer = cookie(&server, &server.keys.a_write).await;
    // Times: UTC in the element and in its text, readable without the script.
    let (_, page) = get(&server, &writer, "/projects/team-a").await;
    assert!(
        page.contains(
            "<time datetime=\"2026-11-24T08:00:00Z\" title=\"2026-11-24 08:00 UTC\">2026-11-24 08:00 UTC</time>"
        ),
        "{page}"
    );
    // Numbers in groups of three.
    assert!(page.contains("<td class=\"num\">1,234</td>"), "{page}");
    let (_, page) = get(&server, &writer, "/projects/team-a/datasets/many").await;
    assert!(page.contains("(1,234 cases)"), "{page}");
    // Authors: a tag set through the API with a name, one set in the console, one of old.
    let key = key_id(&server.keys.a_write);
    let response = client()
        .put(format!("{}/api/v1/projects/team-a/datasets/support/tags/api", server.url))
        .bearer_auth(&server.keys.a_write)
        .header("x-casebook-author", "Ana Lima")
        .json(&json!({"version": "v1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (_, page) = get(&server, &writer, "/projects/team-a/datasets/support").await;
    let response = client()
        .post(format!("{}/projects/team-a/datasets/support/tags", server.url))
        .header("cookie", &writer)
        .form(&[("csrf", csrf_of(&page)), ("version", "v3".into()), ("tag", "console".into())])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    let events = a.events("support").await.unwrap();
    let authors: Vec<&str> = events.iter().map(|e| e.author.as_str()).collect();
    assert_eq!(authors[authors.len() - 2..], [format!("Ana Lima (key {key})"), format!("key {key}")]);
    let (_, page) = get(&server, &writer, "/projects/team-a/datasets/support").await;
    assert!(page.contains(&format!("Ana Lima (key {key})")) && page.contains(&format!("key {key}")), "{page}");
    assert!(page.contains("key 0123456789ab") && !page.contains("key:0123456789ab"), "{page}");
    server.stop().await;
}

async fn tagging_the_version_a_tag_names_changes_nothing(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    let before = a.events("support").await.unwrap();
    // The API: unchanged, said so.
    let response = client()
        .put(format!("{}/api/v1/projects/team-a/datasets/support/tags/prod", server.url))
        .bearer_auth(&server.keys.a_write)
        .json(&json!({"version": "v2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body, json!({"name": "prod", "version": 2, "unchanged": true}));
    // The console: back on the dataset's page, which says so.
    let writer = cookie(&server, &server.keys.a_write).await;
    let (_, page) = get(&server, &writer, "/projects/team-a/datasets/support").await;
    let response = client()
        .post(format!("{}/projects/team-a/datasets/support/tags", server.url))
        .header("cookie", &writer)
        .form(&[("csrf", csrf_of(&page)), ("version", "v2".into()), ("tag", "prod".into())])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    let to = response.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(to, "/projects/team-a/datasets/support?already=prod");
    let (_, page) = get(&server, &writer, &to).await;
    assert!(page.contains("prod is already v2: nothing changed"), "{page}");
    // No `prod: v2 → v2` in the log.
    assert_eq!(a.events("support").await.unwrap(), before);
    assert!(!page.contains("v2 → v2"), "{page}");
    // Moving it is still a change, logged.
    let response = client()
        .put(format!("{}/api/v1/projects/team-a/datasets/support/tags/prod", server.url))
        .bearer_auth(&server.keys.a_write)
        .json(&json!({"version": "v3"}))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body, json!({"name": "prod", "version": 3}));
    assert_eq!(a.events("support").await.unwrap().last().unwrap().detail, "prod: v2 → v3");
    server.stop().await;
}

async fn the_favicon_is_served_and_linked(backend: Backend) {
    let server = Server::start(backend).await;
    for path in ["/favicon.svg", "/favicon.ico"] {
        let response = client().get(format!("{}{path}", server.url)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], "image/svg+xml", "{path}");
        assert!(response.text().await.unwrap().starts_with("<svg"), "{path}");
    }
    let (_, page) = get(&server, "", "/signin").await;
    assert!(page.contains("<link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\">"), "{page}");
    server.stop().await;
}

crate::on_both!(
    errors_keep_the_frame_and_their_status,
    a_download_names_what_the_format_would_drop,
    times_numbers_and_authors_read_one_way,
    tagging_the_version_a_tag_names_changes_nothing,
    the_favicon_is_served_and_linked,
);

/// The widths a page must fit without scrolling sideways: small and common phones, a tablet.
const WIDTHS: [u32; 3] = [360, 390, 768];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_page_scrolls_sideways_from_360_px_up() {
    let server = Server::start(Backend::Sqlite).await;
    crate::console_runs::seed(&server).await;
    // What stretches a page: a long id without a break, a long JSON value, many columns.
    let long_id = format!("case-{}", "x".repeat(120));
    let long: Case = serde_json::from_value(json!({
        "id": long_id,
        "input": [{"role": "user", "content": "a".repeat(400)}],
        "expected": {"output": "b".repeat(300)},
        "labels": ["kind:refund", format!("note:{}", "y".repeat(80))],
        "metadata": {"trace": "z".repeat(200)},
    }))
    .unwrap();
    commit(&server.store.in_project("team-a"), "support", CommitMode::Upsert, vec![long]).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    let dataset = "/projects/team-a/datasets/support";
    let pages = [
        "/projects/team-a".to_owned(),
        dataset.to_owned(),
        format!("{dataset}/versions/v4"),
        format!("{dataset}/versions/v4/cases/{long_id}"),
        format!("{dataset}/versions/v3/cases/c2"),
        format!("{dataset}/diff?from=v1&to=v4"),
        "/projects/team-a/runs".to_owned(),
        "/projects/team-a/runs/r-a-3".to_owned(),
        "/projects/team-a/runs/r-a-3/results/0".to_owned(),
        "/projects/team-a/compare?a=r-a-2&b=r-a-3".to_owned(),
        format!("{dataset}/edit?case={long_id}"),
        format!("{dataset}/import"),
        "/projects/team-a/new".to_owned(),
        "/projects/team-a/datasets/nope".to_owned(),
        format!("{dataset}/versions/v4?where=id%20%3D%20%22c1%22"),
    ];
    for width in WIDTHS {
        browser.set_width(width).await;
        for path in &pages {
            browser.goto(&format!("{}{path}", server.url)).await;
            let sizes = browser
                .run(
                    "const out = document.querySelector('button.link');
                     const box = out.getBoundingClientRect();
                     const wide = [...document.querySelectorAll('body *')]
                       .filter((e) => e.getBoundingClientRect().right > arguments[0] + 0.5)
                       .filter((e) => ![...e.children].some((c) => c.getBoundingClientRect().right > arguments[0] + 0.5))
                       .slice(0, 5)
                       .map((e) => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
                     return [document.documentElement.scrollWidth, window.innerWidth, box.right, box.width, wide];",
                    json!([width]),
                )
                .await;
            let (scroll, inner) = (sizes[0].as_f64().unwrap(), sizes[1].as_f64().unwrap());
            let wide = &sizes[4];
            assert!(scroll <= f64::from(width), "{path} at {width} px is {scroll} px wide: {wide}");
            // (A phone widens its viewport to what is laid out wider than the screen.)
            assert_eq!(inner, f64::from(width), "{path}: {wide}");
            // "sign out" is on the page, whole.
            let (right, seen) = (sizes[2].as_f64().unwrap(), sizes[3].as_f64().unwrap());
            assert!(seen > 0.0 && right <= inner, "{path} at {width} px: sign out ends at {right}");
        }
        browser.shot(&format!("case-{width}")).await;
    }
    // The sign-in page, signed out.
    browser.goto(&format!("{}/signin", server.url)).await;
    let sizes = browser.run("return [document.documentElement.scrollWidth, window.innerWidth]", json!([])).await;
    assert!(sizes[0].as_f64() <= sizes[1].as_f64(), "sign-in: {sizes}");
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_show_in_the_readers_time_zone_with_utc_in_the_title() {
    let server = Server::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    browser.devtools("Emulation.setTimezoneOverride", json!({"timezoneId": "Asia/Tokyo"})).await;
    sign_in(&browser, &server, &server.keys.a_read).await;
    browser.goto(&format!("{}/projects/team-a/datasets/support", server.url)).await;
    browser.wait_for_text("Versions").await;
    let time = browser
        .run(
            "const t = document.querySelector('table.versions time');
             return [t.textContent, t.title, t.getAttribute('datetime')];",
            json!([]),
        )
        .await;
    // 08:00 UTC is 17:00 in Tokyo.
    let text = time[0].as_str().unwrap();
    assert!(text.contains("05:00") || text.contains("17:00"), "{time}");
    assert!(text.contains("GMT+9") || text.contains("JST"), "{time}");
    assert_eq!(time[1], "2026-11-24 08:00 UTC");
    assert_eq!(time[2], "2026-11-24T08:00:00Z");
    browser.quit().await;
    server.stop().await;
}
