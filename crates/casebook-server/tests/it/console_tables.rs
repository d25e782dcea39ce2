//! The cases table at size: position and paging both ways (console and API), bare-word search,
//! chosen columns and multi-message input, counts that link to their cases, and bulk actions
//! on ticked cases or on all a filter selects, with a stale page refused when the head touched
//! the cases acted on.
//!
//! The cases are native casebook JSON as `casebook import` stores it (an input that is text or
//! a list of `{role, content}` messages, `expected.output`, `metadata`, `labels`).

use casebook_model::Case;
use casebook_store::{CommitMode, Ref, Select, Store};
use serde_json::{Value, json};

use crate::browser::Browser;
use crate::console::{cookie, sign_in};
use crate::harness::{Backend, Server, commit};
use crate::on_both;

/// `n` cases `row-000`…: every third about a refund, with two messages; a team each in
/// metadata; a `kind:` label.
fn rows(n: usize) -> Vec<Case> {
    (0..n)
        .map(|i| {
            let input = if i % 3 == 0 {
                json!([
                    {"role": "system", "content": "You answer billing questions."},
                    {"role": "user", "content": format!("Where is my Refund for order {i}?")}
                ])
            } else {
                json!(format!("question {i}: login fails"))
            };
            serde_json::from_value(json!({
                "id": format!("row-{i:03}"),
                "input": input,
                "expected": {"output": format!("answer {i}")},
                "metadata": {"team": if i % 2 == 0 { "north" } else { "south" }},
                "labels": [if i % 3 == 0 { "kind:refund" } else { "kind:login" }],
                "review": "draft",
            }))
            .unwrap()
        })
        .collect()
}

/// The ids in a console page's table, in order (from the links to their cases).
fn ids_in(html: &str) -> Vec<String> {
    // (A link goes on with the filter and the case's position after `?`.)
    html.split("/cases/").skip(1).map(|s| s.split(['"', '?']).next().unwrap().to_owned()).collect()
}

/// The address of a page's link with `rel`, unescaped (`&amp;` in the HTML).
fn link(html: &str, rel: &str) -> Option<String> {
    let at = html.find(&format!("rel=\"{rel}\""))?;
    let start = html[..at].rfind("href=\"")? + 6;
    Some(html[start..].split('"').next()?.replace("&amp;", "&").replace("&#38;", "&"))
}

fn position(html: &str) -> String {
    html.split("id=\"position\">").nth(1).map(|s| s.split('<').next().unwrap().to_owned()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_pages_both_ways_searches_picks_columns_follows_a_count_and_acts_in_bulk() {
    let server = Server::start(Backend::Sqlite).await;
    let a = server.store.in_project("team-a");
    commit(&a, "big", CommitMode::Replace, rows(120)).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    browser.goto(&format!("{}/projects/team-a/datasets/big/versions/v1", server.url)).await;
    assert_eq!(browser.text_of("#position").await, "1–50 of 120");
    assert!(browser.all("a[rel=prev]").await.is_empty(), "the first page has no previous page");
    browser.click_link("next page").await;
    assert_eq!(browser.text_of("#position").await, "51–100 of 120");
    browser.click_link("next page").await;
    assert_eq!(browser.text_of("#position").await, "101–120 of 120");
    let last = browser.text_of("table.cases tbody").await;
    assert!(last.contains("row-119") && !last.contains("row-099"), "{last}");
    assert!(browser.all("a[rel=next]").await.is_empty(), "a last page has no next page");
    browser.click_link("previous page").await;
    assert_eq!(browser.text_of("#position").await, "51–100 of 120");
    let middle = browser.text_of("table.cases tbody").await;
    assert!(middle.contains("row-050") && middle.contains("row-099") && !middle.contains("row-100"), "{middle}");
    browser.click_link("previous page").await;
    assert_eq!(browser.text_of("#position").await, "1–50 of 120");
    assert!(browser.all("a[rel=prev]").await.is_empty());

    // Every message of a list input, as `role: text`; the expected output; a chosen column.
    let first = browser.text_of("table.cases tbody tr:first-child").await;
    assert!(first.contains("system: You answer billing questions."), "{first}");
    assert!(first.contains("user: Where is my Refund for order 0?"), "{first}");
    assert!(first.contains("answer 0"), "{first}");
    browser.fill("#columns", "metadata.team").await;
    browser.submit("#filter-form button").await;
    assert!(browser.text_of("table.cases thead").await.contains("metadata.team"));
    let first = browser.text_of("table.cases tbody tr:first-child").await;
    assert!(first.contains("north"), "{first}");
    // The columns stay on the next page.
    browser.click_link("next page").await;
    assert!(browser.url().await.contains("columns=metadata.team"), "{}", browser.url().await);
    assert!(browser.text_of("table.cases tbody tr:first-child").await.contains("north"));

    // A bare word searches the input, letter case ignored, and says so.
    browser.fill("#where", "refund").await;
    browser.submit("#filter-form button").await;
    let text = browser.wait_for_text("searched the input text").await;
    assert!(text.contains("“refund”"), "{text}");
    assert!(text.contains("40 of 120 cases match"), "{text}");
    assert_eq!(browser.text_of("#position").await, "1–40 of 40");
    // A filter gone wrong is still an error, located.
    browser.fill("#where", "labels contains").await;
    browser.submit("#filter-form button").await;
    let error = browser.text_of("pre.filter-error").await;
    assert!(error.starts_with("error:") && error.contains("labels contains\n") && error.contains('^'), "{error}");

    // Counts by value link to their cases.
    browser.goto(&format!("{}/projects/team-a/datasets/big/versions/v1?group_by=label.kind", server.url)).await;
    let groups = browser.text_of("table.groups").await;
    assert!(groups.contains("login 80") && groups.contains("refund 40"), "{groups}");
    browser.click_link("refund").await;
    let text = browser.text().await;
    assert!(text.contains("40 of 120 cases match"), "{text}");
    assert_eq!(
        browser.run("return document.getElementById('where').value", json!([])).await,
        "label.kind == \"refund\""
    );

    // Bulk: everything on this page marked reviewed, one version, the author and the message.
    browser.click("#select-page").await;
    browser.fill("#bulk-message", "checked the refunds").await;
    browser.submit("#bulk-apply").await;
    assert!(browser.url().await.contains("/versions/v2?where="), "{}", browser.url().await);
    let v2 = a.resolve("big", &Ref::Latest).await.unwrap();
    assert_eq!((v2.number, v2.modified, v2.message.as_str()), (2, 40, "checked the refunds"));
    assert!(v2.author.starts_with("key "), "{}", v2.author);
    let mut reviewed = 0;
    a.cases("big", 2, &Select::all(), 500, &mut |cases| {
        for case in cases {
            let refund = case.labels.as_ref().unwrap()[0] == "kind:refund";
            assert_eq!(case.review == Some(casebook_model::Review::Reviewed), refund, "{}", case.id);
            reviewed += usize::from(refund);
        }
        true
    })
    .await
    .unwrap();
    assert_eq!(reviewed, 40);
    // Two ticked rows labelled, then removed.
    browser.goto(&format!("{}/projects/team-a/datasets/big/versions/v2", server.url)).await;
    browser.click("input.pick[value='row-001']").await;
    browser.click("input.pick[value='row-002']").await;
    browser.run("document.getElementById('bulk-action').value = 'label'", json!([])).await;
    browser.fill("#bulk-label", "needs:docs").await;
    browser.submit("#bulk-apply").await;
    let v3 = a.resolve("big", &Ref::Latest).await.unwrap();
    assert_eq!((v3.number, v3.modified, v3.message.as_str()), (3, 2, "label `needs:docs` added to 2 cases"));
    let labels = a.case("big", 3, "row-002").await.unwrap().unwrap().labels.unwrap();
    assert_eq!(labels, ["kind:login", "needs:docs"]);
    browser.click("input.pick[value='row-001']").await;
    browser.run("document.getElementById('bulk-action').value = 'remove'", json!([])).await;
    browser.submit("#bulk-apply").await;
    let v4 = a.resolve("big", &Ref::Latest).await.unwrap();
    assert_eq!((v4.number, v4.removed, v4.cases), (4, 1, 119));
    assert!(a.case("big", 4, "row-001").await.unwrap().is_none());

    // Sorted by id, descending, from the form; the next page keeps the sort and its position.
    browser.goto(&format!("{}/projects/team-a/datasets/big/versions/v4", server.url)).await;
    browser.fill("#sort", "-id").await;
    browser.submit("#filter-form button").await;
    assert_eq!(browser.text_of("#position").await, "1–50 of 119");
    let first = browser.run("return document.querySelector('table.cases tbody td a').textContent", json!([])).await;
    assert_eq!(first, "row-119");
    browser.click_link("next page").await;
    assert_eq!(browser.text_of("#position").await, "51–100 of 119");
    let first = browser.run("return document.querySelector('table.cases tbody td a').textContent", json!([])).await;
    assert_eq!(first, "row-069");
    // Every refund (a search), labelled at once once confirmed: one version of 40 cases.
    browser.goto(&format!("{}/projects/team-a/datasets/big/versions/v4?where=refund&sort=-id", server.url)).await;
    let text = browser.text().await;
    assert!(text.contains("yes, all 40 cases matching refund"), "{text}");
    browser.run("document.getElementById('bulk-action').value = 'label'", json!([])).await;
    browser.fill("#bulk-label", "checked:all").await;
    browser.click("#bulk-confirm-all").await;
    browser.submit("#bulk-apply-all").await;
    assert!(browser.url().await.contains("/versions/v5?where=refund&sort=-id"), "{}", browser.url().await);
    let v5 = a.resolve("big", &Ref::Latest).await.unwrap();
    assert_eq!((v5.number, v5.modified, v5.message.as_str()), (5, 40, "label `checked:all` added to 40 cases"));
    browser.quit().await;
    server.stop().await;
}

async fn the_api_pages_both_ways_without_an_empty_last_page(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    commit(&a, "big", CommitMode::Replace, rows(100)).await;
    let key = server.keys.a_read.clone();
    let base = "/api/v1/projects/team-a/datasets/big/versions/v1/cases";
    let ids = |page: &Value| {
        page["cases"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let (status, first) = server.get(&key, &format!("{base}?limit=50")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(ids(&first).len(), 50);
    assert!(first.get("prev_cursor").is_none(), "{first}");
    let next = first["next_cursor"].as_str().unwrap();
    let (_, second) = server.get(&key, &format!("{base}?limit=50&cursor={next}")).await;
    assert_eq!(ids(&second), (50..100).map(|i| format!("row-{i:03}")).collect::<Vec<_>>());
    // The last full page: no cursor to an empty page.
    assert!(second.get("next_cursor").is_none(), "{second}");
    let prev = second["prev_cursor"].as_str().unwrap();
    let (_, back) = server.get(&key, &format!("{base}?limit=50&cursor={prev}")).await;
    assert_eq!(ids(&back), ids(&first));
    assert!(back.get("prev_cursor").is_none(), "{back}");
    // Forwards again from a page read backwards.
    let again = back["next_cursor"].as_str().unwrap();
    let (_, second_again) = server.get(&key, &format!("{base}?limit=50&cursor={again}")).await;
    assert_eq!(ids(&second_again), ids(&second));
    // Backwards a few at a time, through a filter: the same cases as forwards, in reverse.
    let filter = "&where=label.kind%20%3D%3D%20%22refund%22";
    let mut forwards = Vec::new();
    let mut cursor = String::new();
    let last = loop {
        let (status, page) = server.get(&key, &format!("{base}?limit=7{filter}{cursor}")).await;
        assert_eq!(status, 200, "{page}");
        assert!(!ids(&page).is_empty(), "no empty page: {page}");
        forwards.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break page,
        }
    };
    assert_eq!(forwards.len(), 34);
    let mut backwards = ids(&last);
    let mut page = last;
    while let Some(prev) = page["prev_cursor"].as_str() {
        let (_, before) = server.get(&key, &format!("{base}?limit=7{filter}&cursor={prev}")).await;
        backwards.splice(0..0, ids(&before));
        page = before;
    }
    assert_eq!(backwards, forwards);
    server.stop().await;
}

async fn console_pages_show_their_place_at_depth_and_walk_back(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    commit(&a, "big", CommitMode::Replace, rows(230)).await;
    let client = reqwest::Client::new();
    let reader = cookie(&server, &server.keys.a_read).await;
    let get = |path: String| {
        let request = client.get(format!("{}{path}", server.url)).header("cookie", reader.clone());
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let mut html = get("/projects/team-a/datasets/big/versions/v1".into()).await;
    let mut places = vec![position(&html)];
    while let Some(next) = link(&html, "next") {
        html = get(next).await;
        places.push(position(&html));
    }
    assert_eq!(places, ["1–50 of 230", "51–100 of 230", "101–150 of 230", "151–200 of 230", "201–230 of 230"]);
    assert_eq!(ids_in(&html).first().map(String::as_str), Some("row-200"));
    let mut back = Vec::new();
    while let Some(prev) = link(&html, "prev") {
        html = get(prev).await;
        back.push(position(&html));
    }
    assert_eq!(back, ["151–200 of 230", "101–150 of 230", "51–100 of 230", "1–50 of 230"]);
    assert_eq!(ids_in(&html).len(), 50);
    assert_eq!(ids_in(&html)[0], "row-000");
    // Through a filter, with thousands written out.
    commit(&a, "many", CommitMode::Replace, rows(1_234)).await;
    let html =
        get("/projects/team-a/datasets/many/versions/v1?where=metadata.team%20%3D%3D%20%22north%22".into()).await;
    assert!(html.contains("<strong>617</strong> of 1,234 cases match"), "{html}");
    assert_eq!(position(&html), "1–50 of 617");
    server.stop().await;
}

async fn a_bulk_action_on_a_stale_page_is_refused_only_if_the_head_touched_its_cases(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    commit(&a, "big", CommitMode::Replace, rows(10)).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let writer = cookie(&server, &server.keys.a_write).await;
    let page_url = format!("{}/projects/team-a/datasets/big/versions/v1", server.url);
    let html = client.get(&page_url).header("cookie", &writer).send().await.unwrap().text().await.unwrap();
    let csrf = html.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let bulk = |ids: &[&str], action: &str| {
        let mut form = vec![
            ("csrf".to_owned(), csrf.clone()),
            ("base".to_owned(), "1".to_owned()),
            ("action".to_owned(), action.to_owned()),
            ("state".to_owned(), "rejected".to_owned()),
        ];
        form.extend(ids.iter().map(|id| ("id".to_owned(), (*id).to_owned())));
        let request = client.post(format!("{page_url}/bulk")).header("cookie", &writer).form(&form);
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    // Someone else changes row-001 meanwhile: v2.
    let mut changed = rows(10)[1].clone();
    changed.task.input = json!("changed meanwhile");
    commit(&a, "big", CommitMode::Upsert, vec![changed]).await;
    let (status, text) = bulk(&["row-001", "row-003"], "review").await;
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("this page showed v1, the head is v2"), "{text}");
    assert!(text.contains("`row-001`") && !text.contains("`row-003`"), "{text}");
    assert_eq!(a.resolve("big", &Ref::Latest).await.unwrap().number, 2, "nothing written");
    // Cases the head did not touch: applied on the head, which keeps its own change.
    let (status, text) = bulk(&["row-003", "row-004"], "review").await;
    assert_eq!(status, 303, "{text}");
    let v3 = a.resolve("big", &Ref::Latest).await.unwrap();
    assert_eq!((v3.number, v3.parent, v3.modified), (3, Some(2), 2));
    assert_eq!(a.case("big", 3, "row-003").await.unwrap().unwrap().review, Some(casebook_model::Review::Rejected));
    assert_eq!(a.case("big", 3, "row-001").await.unwrap().unwrap().task.input, json!("changed meanwhile"));
    // No case ticked, a label action without a label, an id the head lacks, a read key.
    let (status, text) = bulk(&[], "review").await;
    assert_eq!((status, text.contains("no case is selected")), (400, true), "{text}");
    let (status, text) = bulk(&["row-003"], "label").await;
    assert_eq!((status, text.contains("name the label")), (400, true), "{text}");
    let (status, text) = bulk(&["row-999"], "remove").await;
    assert_eq!((status, text.contains("row-999")), (404, true), "{status} {text}");
    assert_eq!(a.resolve("big", &Ref::Latest).await.unwrap().number, 3);
    let reader = cookie(&server, &server.keys.a_read).await;
    let html = client.get(&page_url).header("cookie", &reader).send().await.unwrap().text().await.unwrap();
    assert!(!html.contains("bulk-form"), "a read key has no bulk form");
    let read_csrf = html.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let response = client
        .post(format!("{page_url}/bulk"))
        .header("cookie", &reader)
        .form(&[("csrf", read_csrf.as_str()), ("base", "3"), ("action", "remove"), ("id", "row-003")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    server.stop().await;
}

async fn a_bulk_action_applies_to_all_the_cases_a_filter_selects_once_confirmed(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    commit(&a, "big", CommitMode::Replace, rows(10)).await; // refunds: row-000, -003, -006, -009
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let writer = cookie(&server, &server.keys.a_write).await;
    let page_url = format!("{}/projects/team-a/datasets/big/versions/v1", server.url);
    // A search (bare words) is a filter here too; the page names the count and the filter.
    let html = client.get(format!("{page_url}?where=refund")).header("cookie", &writer).send().await.unwrap();
    let html = html.text().await.unwrap();
    assert!(html.contains("yes, all 4 cases matching <code>refund</code>"), "{html}");
    assert!(html.contains("Apply to all 4 matching"), "{html}");
    let csrf = html.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let all = |base: u64, action: &str, count: &str, confirm: &str| {
        let form = vec![
            ("csrf", csrf.clone()),
            ("base", base.to_string()),
            ("scope", "all".to_owned()),
            ("where", "refund".to_owned()),
            ("count", count.to_owned()),
            ("confirm", confirm.to_owned()),
            ("action", action.to_owned()),
            ("label", "checked".to_owned()),
            ("state", "reviewed".to_owned()),
            // A ticked case is not what an action on all the matching cases changes.
            ("id", "row-001".to_owned()),
        ];
        let url = format!("{}/projects/team-a/datasets/big/versions/v{base}/bulk", server.url);
        let request = client.post(url).header("cookie", &writer).form(&form);
        async move {
            let response = request.send().await.unwrap();
            let location = response.headers().get("location").map(|l| l.to_str().unwrap().to_owned());
            (response.status().as_u16(), location.unwrap_or_default(), response.text().await.unwrap())
        }
    };
    // Not confirmed, or confirmed for another count: nothing written.
    for (count, confirm) in [("4", ""), ("3", "yes")] {
        let (status, _, text) = all(1, "label", count, confirm).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("confirm the action on all 4 cases matching `refund` in v1"), "{text}");
    }
    assert_eq!(a.resolve("big", &Ref::Latest).await.unwrap().number, 1);

    // Someone else changes a matching case meanwhile (v2): the page of v1 is refused.
    let mut changed = rows(10)[3].clone();
    changed.task.input = json!("Refund, changed meanwhile");
    commit(&a, "big", CommitMode::Upsert, vec![changed]).await;
    let (status, _, text) = all(1, "label", "4", "yes").await;
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("this page showed v1, the head is v2") && text.contains("`row-003`"), "{text}");
    assert_eq!(a.resolve("big", &Ref::Latest).await.unwrap().number, 2, "nothing written");

    // On the head: one version labels the four, and only them.
    let (status, location, text) = all(2, "label", "4", "yes").await;
    assert_eq!(status, 303, "{text}");
    assert_eq!(location, "/projects/team-a/datasets/big/versions/v3?where=refund");
    let v3 = a.resolve("big", &Ref::Latest).await.unwrap();
    assert_eq!((v3.number, v3.modified, v3.message.as_str()), (3, 4, "label `checked` added to 4 cases"));
    for (id, labelled) in [("row-000", true), ("row-003", true), ("row-009", true), ("row-001", false)] {
        let labels = a.case("big", 3, id).await.unwrap().unwrap().labels.unwrap();
        assert_eq!(labels.contains(&"checked".to_owned()), labelled, "{id}: {labels:?}");
    }

    // A change since the page to a case that does not match: applied on the head.
    let mut other = rows(10)[1].clone();
    other.task.input = json!("changed meanwhile");
    commit(&a, "big", CommitMode::Upsert, vec![other]).await; // v4
    let (status, location, text) = all(3, "remove", "4", "yes").await;
    assert_eq!(status, 303, "{text}");
    assert_eq!(location, "/projects/team-a/datasets/big/versions/v5?where=refund");
    let v5 = a.resolve("big", &Ref::Latest).await.unwrap();
    assert_eq!((v5.number, v5.parent, v5.removed, v5.cases), (5, Some(4), 4, 6));
    assert_eq!(a.case("big", 5, "row-001").await.unwrap().unwrap().task.input, json!("changed meanwhile"));
    // Nothing matches any more.
    let (status, _, text) = all(5, "review", "0", "yes").await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("no case matching `refund` in v5"), "{text}");
    server.stop().await;
}

/// `n` cases like [`rows`], with `metadata.score` = (i × 7) mod 10 but none on every fifth case.
fn scored(n: usize) -> Vec<Case> {
    rows(n)
        .into_iter()
        .enumerate()
        .map(|(i, mut case)| {
            let team = if i % 2 == 0 { "north" } else { "south" };
            let metadata =
                if i % 5 == 4 { json!({"team": team}) } else { json!({"team": team, "score": (i * 7) % 10}) };
            case.metadata = Some(serde_json::from_value(metadata).unwrap());
            case
        })
        .collect()
}

/// The ids `scored(n)` gives in the order `-metadata.score` (ties by id, descending too; the
/// cases without a score last, by id descending).
fn by_score_down(n: usize) -> Vec<String> {
    let mut keyed: Vec<(Option<usize>, String)> =
        (0..n).map(|i| ((i % 5 != 4).then_some((i * 7) % 10), format!("row-{i:03}"))).collect();
    keyed.sort_by(|a, b| match (a.0, b.0) {
        (Some(x), Some(y)) => (y, &b.1).cmp(&(x, &a.1)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => b.1.cmp(&a.1),
    });
    keyed.into_iter().map(|(_, id)| id).collect()
}

async fn the_table_the_api_and_the_case_pages_walk_a_sort_both_ways(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    commit(&a, "scored", CommitMode::Replace, scored(120)).await;
    let want = by_score_down(120);
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let reader = cookie(&server, &server.keys.a_read).await;
    let get = async |path: &str| {
        let response = client.get(format!("{}{path}", server.url)).header("cookie", &reader).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    // The console: 50 a page, position kept, next to the end and previous back to the start.
    let first = "/projects/team-a/datasets/scored/versions/v1?sort=-metadata.score&columns=metadata.score";
    let (status, html) = get(first).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("id=\"sort\" name=\"sort\" value=\"-metadata.score\""), "{html}");
    let mut pages = vec![ids_in(&html)];
    assert_eq!(position(&html), "1–50 of 120");
    let mut html = html;
    while let Some(next) = link(&html, "next") {
        assert!(next.contains("sort=-metadata.score") && next.contains("columns=metadata.score"), "{next}");
        html = get(&next).await.1;
        pages.push(ids_in(&html));
    }
    assert_eq!(position(&html), "101–120 of 120");
    assert_eq!(pages.concat(), want);
    let mut back = Vec::new();
    while let Some(previous) = link(&html, "prev") {
        html = get(&previous).await.1;
        back.insert(0, ids_in(&html));
    }
    assert_eq!(position(&html), "1–50 of 120");
    assert_eq!(back.concat(), want[..100]);
    // With a filter: the south team, by id descending; a group count's link keeps the sort.
    let (_, html) = get(
        "/projects/team-a/datasets/scored/versions/v1?sort=-id&where=metadata.team%20%3D%3D%20%22south%22&group_by=label.kind",
    )
    .await;
    let south: Vec<String> = (0..120).rev().filter(|i| i % 2 == 1).map(|i| format!("row-{i:03}")).collect();
    assert_eq!(ids_in(&html), south[..50]);
    assert!(html.contains("sort=-id"), "{html}");
    // A bad sort, and a cursor of another sort, are refused saying why.
    let (status, html) = get("/projects/team-a/datasets/scored/versions/v1?sort=label.kind").await;
    assert_eq!(status, 400, "{html}");
    assert!(html.contains("labels hold several values"), "{html}");

    // The case page goes on through the sort: the 50th case's next is the 51st.
    let (_, html) = get(first).await;
    let fiftieth = html.split("href=\"").filter(|h| h.contains("/cases/")).nth(49).unwrap().split('"').next().unwrap();
    let fiftieth = fiftieth.replace("&amp;", "&").replace("&#38;", "&");
    assert!(fiftieth.contains("sort=-metadata.score") && fiftieth.contains("pos=50"), "{fiftieth}");
    let (status, case_page) = get(&fiftieth).await;
    assert_eq!(status, 200, "{case_page}");
    let next = link(&case_page, "next").unwrap();
    assert!(next.contains(&format!("/cases/{}?", want[50])) && next.contains("pos=51"), "{next}");
    let previous = link(&case_page, "prev").unwrap();
    assert!(previous.contains(&format!("/cases/{}?", want[48])), "{previous}");

    // The API: pages of 40 by `next_cursor`, and back by `prev_cursor`.
    let key = server.keys.a_read.clone();
    let base = "/api/v1/projects/team-a/datasets/scored/versions/v1/cases?sort=-metadata.score&limit=40";
    let ids = |page: &Value| {
        page["cases"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let (status, mut page) = server.get(&key, base).await;
    assert_eq!(status, 200, "{page}");
    let mut walked = ids(&page);
    while let Some(next) = page["next_cursor"].as_str().map(str::to_owned) {
        page = server.get(&key, &format!("{base}&cursor={next}")).await.1;
        walked.extend(ids(&page));
    }
    assert_eq!(walked, want);
    let previous = page["prev_cursor"].as_str().unwrap().to_owned();
    let (_, before) = server.get(&key, &format!("{base}&cursor={previous}")).await;
    assert_eq!(ids(&before), want[40..80]);
    // A cursor keeps its sort.
    let (status, body) = server
        .get(&key, &format!("/api/v1/projects/team-a/datasets/scored/versions/v1/cases?sort=id&cursor={previous}"))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("walks `sort=-metadata.score`, not `sort=id`"), "{body}");
    server.stop().await;
}

on_both!(
    the_table_the_api_and_the_case_pages_walk_a_sort_both_ways,
    the_api_pages_both_ways_without_an_empty_last_page,
    console_pages_show_their_place_at_depth_and_walk_back,
    a_bulk_action_on_a_stale_page_is_refused_only_if_the_head_touched_its_cases,
    a_bulk_action_applies_to_all_the_cases_a_filter_selects_once_confirmed,
);
