//! Issue 37's review workflow in the console: the review queue (keys, and a form per case
//! without script), next / next unreviewed through the table's filter on the case page,
//! restoring an old content, and editing an old version's content; in Chromium and over HTTP,
//! on both backends.
#![allow(clippy::unwrap_used)]

use casebook_model::{Case, Review};
use casebook_store::{AnyStore, CommitMode, Ref, Store};
use serde_json::json;

use crate::browser::Browser;
use crate::console::{cookie, sign_in};
use crate::harness::{Backend, Server, case, commit};

crate::on_both!(
    a_reviewer_works_through_the_queue_with_the_keyboard,
    the_queue_marks_by_form_pages_and_applies_a_stale_page_only_where_the_case_did_not_change,
    the_case_page_leads_through_the_tables_filter,
    an_old_content_is_restored_as_a_new_version,
    an_old_versions_content_is_edited_and_saved_onto_the_head,
);

/// A case in casebook's own JSON, as `casebook review` leaves them: with or without a review
/// state and labels.
fn reviewed(id: &str, state: Option<&str>, labels: &[&str]) -> Case {
    let mut value =
        json!({"id": id, "input": format!("question {id}"), "expected": {"output": format!("answer {id}")}});
    if let Some(state) = state {
        value["review"] = json!(state);
    }
    if !labels.is_empty() {
        value["labels"] = json!(labels);
    }
    serde_json::from_value(value).unwrap()
}

/// `inbox` v1: q1 none, q2 draft, q3 reviewed, q4 none (billing), q5 draft (billing).
async fn inbox(store: &AnyStore) {
    let cases = vec![
        reviewed("q1", None, &[]),
        reviewed("q2", Some("draft"), &[]),
        reviewed("q3", Some("reviewed"), &[]),
        reviewed("q4", None, &["billing"]),
        reviewed("q5", Some("draft"), &["billing"]),
    ];
    commit(store, "inbox", CommitMode::Replace, cases).await;
}

async fn review_of(store: &AnyStore, version: u64, id: &str) -> Option<Review> {
    store.case("inbox", version, id).await.unwrap().unwrap().review
}

async fn queue_order(browser: &Browser) -> Vec<String> {
    let found =
        browser.run("return [...document.querySelectorAll('li.queue-item')].map(e => e.dataset.case)", json!([])).await;
    serde_json::from_value(found).unwrap()
}

async fn a_reviewer_works_through_the_queue_with_the_keyboard(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    inbox(&a).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    browser.goto(&format!("{}/projects/team-a/datasets/inbox", server.url)).await;
    browser.click_link("Review queue").await;
    let text = browser.wait_for_text("Review queue").await;
    // Drafts first, then the cases with no state; a reviewed case is not in it.
    assert_eq!(queue_order(&browser).await, ["q2", "q5", "q1", "q4"]);
    assert!(
        text.contains("j/k next/previous case · a accept (reviewed) · r reject · / filter · ? these keys"),
        "{text}"
    );
    let expected = browser.text_of("li.queue-item:nth-child(2) section.expected").await;
    assert!(expected.contains("answer q5"), "{expected}");
    assert!(browser.text_of("li.queue-item:nth-child(2) h2").await.contains("billing"));
    browser.shot("queue").await;

    // `?` shows the keys; `j` selects the second case, `a` accepts it.
    browser.press("?").await;
    assert!(browser.text_of("#queue-help").await.contains("marks the selected case reviewed"));
    browser.press("j").await;
    assert_eq!(browser.run("return document.querySelector('li.selected').dataset.case", json!([])).await, "q5");
    browser.press_to_submit("a").await;
    browser.wait_for_text("`q5` marked reviewed in v2").await;
    assert_eq!(review_of(&a, 2, "q5").await, Some(Review::Reviewed));
    let head = a.resolve("inbox", &Ref::Latest).await.unwrap();
    assert_eq!(head.message, "review: 1 case reviewed");
    assert!(head.author.starts_with("key "), "{}", head.author);
    // The queue moved on: q5 left it, and the case that took its place is selected.
    assert_eq!(queue_order(&browser).await, ["q2", "q1", "q4"]);
    assert_eq!(browser.run("return document.querySelector('li.selected').dataset.case", json!([])).await, "q1");
    browser.press_to_submit("r").await;
    browser.wait_for_text("`q1` marked rejected in v3").await;
    assert_eq!(review_of(&a, 3, "q1").await, Some(Review::Rejected));
    assert_eq!(queue_order(&browser).await, ["q2", "q4"]);

    // `/` goes to the filter, which narrows the queue.
    browser.press("/").await;
    assert_eq!(browser.run("return document.activeElement.id", json!([])).await, "where");
    browser.fill("#where", r#"labels contains "billing""#).await;
    browser.submit("#queue-filter button").await;
    assert_eq!(queue_order(&browser).await, ["q4"]);
    browser.press_to_submit("a").await;
    let text = browser.wait_for_text("`q4` marked reviewed in v4").await;
    assert!(text.contains("Nothing left to review in this filter"), "{text}");
    assert!(browser.url().await.contains("where="), "{}", browser.url().await);
    browser.quit().await;
    server.stop().await;
}

async fn the_queue_marks_by_form_pages_and_applies_a_stale_page_only_where_the_case_did_not_change(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    inbox(&a).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let queue = format!("{}/projects/team-a/datasets/inbox/queue", server.url);
    let get = |url: String, cookie: String| {
        let request = client.get(url).header("cookie", cookie);
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let post = |cookie: String, fields: Vec<(&'static str, String)>| {
        let request = client.post(&queue).header("cookie", cookie).form(&fields);
        async move {
            let response = request.send().await.unwrap();
            let location = response.headers().get("location").map(|l| l.to_str().unwrap().to_owned());
            (response.status().as_u16(), location, response.text().await.unwrap())
        }
    };
    let csrf_of =
        |page: &str| page.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let order = |page: &str| -> Vec<String> {
        page.split("data-case=\"").skip(1).map(|s| s.split('"').next().unwrap().to_owned()).collect()
    };

    // A read key sees the queue without forms, and cannot mark.
    let reader = cookie(&server, &server.keys.a_read).await;
    let (status, page) = get(queue.clone(), reader.clone()).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(order(&page), ["q2", "q5", "q1", "q4"]);
    assert!(!page.contains("queue-form"), "{page}");
    let fields = |csrf: &str, case: &str, base: &str, state: &str| {
        vec![
            ("csrf", csrf.to_owned()),
            ("case", case.to_owned()),
            ("base", base.to_owned()),
            ("state", state.to_owned()),
            ("message", String::new()),
            ("where", String::new()),
            ("cursor", String::new()),
        ]
    };
    let (status, _, text) = post(reader, fields(&csrf_of(&page), "q2", "v1", "reviewed")).await;
    assert_eq!(status, 403, "{text}");

    // A form per case: marking works without script.
    let writer = cookie(&server, &server.keys.a_write).await;
    let (_, page) = get(queue.clone(), writer.clone()).await;
    assert_eq!(page.matches("class=\"row queue-form\"").count(), 4, "{page}");
    let csrf = csrf_of(&page);
    let (status, _, text) = post(writer.clone(), fields(&csrf, "q2", "v1", "approved")).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("`approved` is not a review state: draft, reviewed or rejected"), "{text}");
    let (status, location, text) = post(writer.clone(), fields(&csrf, "q2", "v1", "reviewed")).await;
    assert_eq!(status, 303, "{text}");
    assert_eq!(location.unwrap(), "/projects/team-a/datasets/inbox/queue?done=q2&state=reviewed&v=2");
    assert_eq!(review_of(&a, 2, "q2").await, Some(Review::Reviewed));

    // Sent from the page of v1 again (stale): q4 did not change since, so it is marked on v2,
    // which keeps q2's review.
    let (status, location, text) = post(writer.clone(), fields(&csrf, "q4", "v1", "rejected")).await;
    assert_eq!(status, 303, "{text}");
    assert!(location.unwrap().ends_with("done=q4&state=rejected&v=3"));
    assert_eq!(review_of(&a, 3, "q4").await, Some(Review::Rejected));
    assert_eq!(review_of(&a, 3, "q2").await, Some(Review::Reviewed));
    // q2 changed in v2: its mark from the page of v1 is refused, naming v2.
    let (status, _, text) = post(writer.clone(), fields(&csrf, "q2", "v1", "rejected")).await;
    assert_eq!(status, 409, "{text}");
    assert!(
        text.contains("v2 changed `q2` after the queue was shown (it showed v1; the head is v3): nothing was written"),
        "{text}"
    );
    assert_eq!(a.resolve("inbox", &Ref::Latest).await.unwrap().number, 3);

    // The case page's review keeps the filter and place it was reached through.
    let review = [
        ("csrf", csrf.clone()),
        ("state", "reviewed".to_owned()),
        ("where", "labels contains \"billing\"".to_owned()),
        ("pos", "2".to_owned()),
        ("of", "2".to_owned()),
    ];
    let response = client
        .post(format!("{}/projects/team-a/datasets/inbox/versions/v3/cases/q5/review", server.url))
        .header("cookie", writer.clone())
        .form(&review)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(
        response.headers()["location"],
        "/projects/team-a/datasets/inbox/versions/v4/cases/q5?where=labels%20contains%20%22billing%22&pos=2&of=2"
    );

    // A bad filter is shown where it is wrong.
    let (status, page) = get(format!("{queue}?where=id%20%3D%20%22x%22"), writer.clone()).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("expected a comparison operator after `id`, found `=` at column 4"), "{page}");

    // Pages: 15 drafts and 15 unreviewed, 20 a page: the drafts, then the rest by cursor.
    let many: Vec<Case> = (0..15)
        .flat_map(|i| [reviewed(&format!("n{i:02}"), None, &[]), reviewed(&format!("d{i:02}"), Some("draft"), &[])])
        .collect();
    commit(&a, "many", CommitMode::Replace, many).await;
    let url = format!("{}/projects/team-a/datasets/many/queue", server.url);
    let (_, page) = get(url.clone(), writer.clone()).await;
    let first = order(&page);
    let want: Vec<String> = (0..15).map(|i| format!("d{i:02}")).chain((0..5).map(|i| format!("n{i:02}"))).collect();
    assert_eq!(first, want);
    let next = page.split("href=\"").find_map(|s| s.split_once("\" rel=\"next\"")).unwrap().0.replace("&amp;", "&");
    let (_, page) = get(format!("{}{next}", server.url), writer.clone()).await;
    let want: Vec<String> = (5..15).map(|i| format!("n{i:02}")).collect();
    assert_eq!(order(&page), want);
    assert!(!page.contains("rel=\"next\""), "{page}");
    server.stop().await;
}

async fn the_case_page_leads_through_the_tables_filter(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    let cases = vec![
        reviewed("n1", Some("reviewed"), &[]),
        reviewed("n2", None, &[]),
        reviewed("n3", Some("reviewed"), &[]),
        reviewed("n4", Some("draft"), &[]),
        reviewed("n5", None, &[]),
    ];
    commit(&a, "nav", CommitMode::Replace, cases).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_read).await;
    browser.goto(&format!("{}/projects/team-a/datasets/nav/versions/v1", server.url)).await;
    browser.fill("#where", r#"id != "n2""#).await;
    browser.submit("#filter-form button").await;
    browser.wait_for_text("4 of 5 cases match").await;
    browser.click_link("n1").await;
    let text = browser.wait_for_text("The agent sees").await;
    assert_eq!(browser.text_of("#case-position").await, "case 1 of 4");
    assert!(text.contains("id != \"n2\""), "{text}");
    // Next unreviewed skips n2 (not in the filter) and n3 (reviewed): the draft n4.
    let unreviewed = browser.run("return document.getElementById('next-unreviewed').href", json!([])).await;
    assert!(unreviewed.as_str().unwrap().contains("/cases/n4?where="), "{unreviewed}");
    browser.click_link("next").await;
    browser.wait_for_text("n3 in nav v1").await;
    assert_eq!(browser.text_of("#case-position").await, "case 2 of 4");
    browser.click_link("next").await;
    browser.click_link("next").await;
    browser.wait_for_text("n5 in nav v1").await;
    assert_eq!(browser.text_of("#case-position").await, "case 4 of 4");
    assert!(browser.all("#next-case").await.is_empty(), "the last case of the filter has no next");
    assert!(browser.all("#next-unreviewed").await.is_empty());
    // Back through the filter: n4, then n3 (n2 is not in it).
    browser.click_link("previous").await;
    browser.wait_for_text("n4 in nav v1").await;
    assert_eq!(browser.text_of("#case-position").await, "case 3 of 4");
    browser.click_link("previous").await;
    browser.wait_for_text("n3 in nav v1").await;
    assert_eq!(browser.text_of("#case-position").await, "case 2 of 4");
    browser.click_link("previous").await;
    browser.wait_for_text("n1 in nav v1").await;
    assert!(browser.all("#previous-case").await.is_empty(), "the first case of the filter has no previous");
    browser.click_link("the cases of this filter").await;
    browser.wait_for_text("4 of 5 cases match").await;
    browser.click_link("review queue").await;
    // The queue keeps the filter: n4 (draft), then n5.
    assert_eq!(queue_order(&browser).await, ["n4", "n5"]);
    browser.quit().await;
    server.stop().await;
}

async fn an_old_content_is_restored_as_a_new_version(backend: Backend) {
    // `support`: c2 is "two" in v1 and "two, again" from v2; the head is v3.
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    browser.goto(&format!("{}/projects/team-a/datasets/support/versions/v3/cases/c2", server.url)).await;
    // Only the content the head does not have can be restored.
    assert_eq!(browser.all("form.restore-form").await.len(), 1);
    browser.click("details.restore summary").await;
    browser.fill("form.restore-form input[name=message]", "back to the first wording").await;
    browser.click("form.restore-form input[name=confirm]").await;
    browser.submit("form.restore-form button").await;
    browser.wait_for_text("c2 in support v4").await;
    assert!(browser.text_of("section.task").await.contains("two"));
    assert!(!browser.text_of("section.task").await.contains("again"));
    let head = a.resolve("support", &Ref::Latest).await.unwrap();
    assert_eq!((head.number, head.message.as_str()), (4, "back to the first wording"));
    assert_eq!(a.case("support", 4, "c2").await.unwrap(), a.case("support", 1, "c2").await.unwrap());
    browser.quit().await;

    // Over HTTP: the confirmation is needed; a stale page is applied on the new head when the
    // case did not change since, else refused naming the version that changed it.
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let writer = cookie(&server, &server.keys.a_write).await;
    let page = client
        .get(format!("{}/projects/team-a/datasets/support/versions/v4/cases/c2", server.url))
        .header("cookie", &writer)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let restore = |content: &str, base: &str, confirm: &str| {
        let fields =
            [("csrf", csrf.clone()), ("content", content.into()), ("base", base.into()), ("confirm", confirm.into())];
        let request = client
            .post(format!("{}/projects/team-a/datasets/support/versions/v4/cases/c2/restore", server.url))
            .header("cookie", &writer)
            .form(&fields);
        async move {
            let response = request.send().await.unwrap();
            let location = response.headers().get("location").map(|l| l.to_str().unwrap().to_owned());
            (response.status().as_u16(), location, response.text().await.unwrap())
        }
    };
    let (status, _, text) = restore("v2", "v4", "").await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("tick the confirmation to restore `c2` as it was in v2: nothing was written"), "{text}");
    commit(&a, "support", CommitMode::Upsert, vec![case("c1", "one, changed")]).await; // v5
    let (status, location, text) = restore("v2", "v4", "yes").await;
    assert_eq!(status, 303, "{text}");
    assert_eq!(location.unwrap(), "/projects/team-a/datasets/support/versions/v6/cases/c2");
    assert_eq!(a.case("support", 6, "c2").await.unwrap(), a.case("support", 2, "c2").await.unwrap());
    assert_eq!(a.case("support", 6, "c1").await.unwrap().unwrap().task.input, json!("one, changed"));
    assert_eq!(a.resolve("support", &Ref::Latest).await.unwrap().message, "restore `c2` as it was in v2");
    commit(&a, "support", CommitMode::Upsert, vec![case("c2", "two, theirs")]).await; // v7
    let (status, _, text) = restore("v1", "v6", "yes").await;
    assert_eq!(status, 409, "{text}");
    assert!(
        text.contains(
            "v7 changed `c2` after this page was shown (it showed the head v6; the head is v7): nothing was written"
        ),
        "{text}"
    );
    assert_eq!(a.resolve("support", &Ref::Latest).await.unwrap().number, 7);
    server.stop().await;
}

async fn an_old_versions_content_is_edited_and_saved_onto_the_head(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    // c2 in v1 ("two"); the head v3 has "two, again".
    browser.goto(&format!("{}/projects/team-a/datasets/support/versions/v1/cases/c2", server.url)).await;
    assert!(browser.text_of("#not-head").await.contains("the head is v3"));
    browser.click_link("Edit this case").await;
    let text = browser.wait_for_text("This is the case as it was in v1; the head is v3").await;
    let editor = browser.run("return document.getElementById('text').value", json!([])).await;
    assert!(editor.as_str().unwrap().contains("\"two\"") && !editor.as_str().unwrap().contains("again"), "{text}");
    browser.fill("#text", "{\"id\": \"c2\", \"input\": \"two, mine\"}").await;
    browser.submit("#edit-form button").await;
    // The head changed c2 since v1: theirs and yours, nothing written.
    browser.wait_for_text("changed `c2` too").await;
    assert!(browser.text_of("#theirs").await.contains("\"two, again\""));
    assert_eq!(a.resolve("support", &Ref::Latest).await.unwrap().number, 3);
    browser.click("#overrides").await;
    browser.submit("#edit-form button").await;
    browser.wait_for_text("v3 → v4").await;
    assert_eq!(a.case("support", 4, "c2").await.unwrap().unwrap().task.input, json!("two, mine"));
    browser.quit().await;
    server.stop().await;
}
