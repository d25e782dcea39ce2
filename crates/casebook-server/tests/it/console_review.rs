//! Reviewing a case from its console page: review state, confidence and labels in one action,
//! a new version on the version the page showed, refused for a read key, a bad value, nothing
//! to change; a page made stale by a later commit is applied on the head when the case did not
//! change since, and refused naming the version when it did.
#![allow(clippy::unwrap_used)]

use casebook_store::Store;

use crate::console::cookie;
use crate::harness::{Backend, Server};

crate::on_both!(a_case_is_reviewed_from_its_page);

async fn a_case_is_reviewed_from_its_page(backend: Backend) {
    let server = Server::start(backend).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let store = server.store.in_project("team-a");
    let case_page = |version: u64, cookie: String| {
        let url = format!("{}/projects/team-a/datasets/support/versions/v{version}/cases/c2", server.url);
        let request = client.get(url).header("cookie", cookie);
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let post = |version: u64, cookie: String, fields: Vec<(&'static str, String)>| {
        let url = format!("{}/projects/team-a/datasets/support/versions/v{version}/cases/c2/review", server.url);
        let request = client.post(url).header("cookie", cookie).form(&fields);
        async move {
            let response = request.send().await.unwrap();
            let location = response.headers().get("location").map(|l| l.to_str().unwrap().to_owned());
            (response.status().as_u16(), location, response.text().await.unwrap())
        }
    };
    let csrf_of =
        |page: &str| page.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();

    // A read key sees no form, and its post is refused.
    let reader = cookie(&server, &server.keys.a_read).await;
    let page = case_page(3, reader.clone()).await;
    assert!(!page.contains("review-form"), "{page}");
    let (status, _, text) = post(3, reader.clone(), vec![("csrf", csrf_of(&page)), ("state", "reviewed".into())]).await;
    assert_eq!(status, 403, "{text}");

    let writer = cookie(&server, &server.keys.a_write).await;
    let page = case_page(3, writer.clone()).await;
    assert!(page.contains("id=\"review-form\"") && page.contains("Save review as a new version of v3"), "{page}");
    let csrf = csrf_of(&page);
    let fields = |state: &str, confidence: &str, labels: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("state", state.to_owned()),
            ("confidence", confidence.to_owned()),
            ("labels", labels.to_owned()),
            ("message", String::new()),
        ]
    };
    // Bad values and an empty form write nothing.
    for (bad, said) in [
        (fields("approved", "", ""), "`approved` is not a review state"),
        (fields("", "1.5", ""), "`1.5` is not a confidence: a number from 0 to 1"),
        (fields("", "", ""), "nothing to change"),
    ] {
        let (status, _, text) = post(3, writer.clone(), bad).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains(said), "{said}: {text}");
    }
    assert_eq!(store.resolve("support", &casebook_store::Ref::Latest).await.unwrap().number, 3);

    // State, confidence and labels in one action: v4, and the page of the case in v4.
    let (status, location, text) =
        post(3, writer.clone(), fields("reviewed", "0.75", "billing, urgent, billing")).await;
    assert_eq!(status, 303, "{text}");
    assert_eq!(location.as_deref(), Some("/projects/team-a/datasets/support/versions/v4/cases/c2"));
    let case = store.case("support", 4, "c2").await.unwrap().unwrap();
    assert_eq!(case.review, Some(casebook_model::Review::Reviewed));
    assert_eq!(case.confidence, Some(0.75));
    assert_eq!(case.labels, Some(vec!["billing".to_owned(), "urgent".to_owned()]));
    assert_eq!(store.case("support", 4, "c1").await.unwrap(), store.case("support", 3, "c1").await.unwrap());
    let head = store.resolve("support", &casebook_store::Ref::Latest).await.unwrap();
    assert_eq!(head.message, "review: 1 case reviewed (confidence 0.75), labels set");
    assert!(head.author.starts_with("key "), "{}", head.author);
    let page = case_page(4, writer.clone()).await;
    assert!(page.contains("value=\"billing, urgent\"") && page.contains("value=\"0.75\""), "{page}");

    // The page of v3 is stale now. For c2, which v4 changed, the review is refused and names
    // the version that changed it.
    let (status, _, text) = post(3, writer.clone(), fields("rejected", "", "billing, urgent")).await;
    assert_eq!(status, 409, "{text}");
    assert!(
        text.contains(
            "v4 changed `c2` after this page was shown (it showed v3; the head is v4): nothing was written. \
             Review the case again on the head: /projects/team-a/datasets/support/versions/v4/cases/c2"
        ),
        "{text}"
    );
    assert_eq!(store.case("support", 4, "c2").await.unwrap().unwrap().review, Some(casebook_model::Review::Reviewed));
    assert_eq!(store.resolve("support", &casebook_store::Ref::Latest).await.unwrap().number, 4);

    // For c1, which no version since v3 changed, the review from the page of v3 is applied on
    // the head: v5, with c2's review of v4 kept.
    let url = format!("{}/projects/team-a/datasets/support/versions/v3/cases/c1/review", server.url);
    let response = client
        .post(url)
        .header("cookie", writer.clone())
        .form(&[("csrf", csrf.as_str()), ("state", "rejected"), ("labels", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
    let location = response.headers().get("location").unwrap().to_str().unwrap().to_owned();
    assert_eq!(location, "/projects/team-a/datasets/support/versions/v5/cases/c1");
    assert_eq!(store.case("support", 5, "c1").await.unwrap().unwrap().review, Some(casebook_model::Review::Rejected));
    assert_eq!(store.case("support", 5, "c2").await.unwrap().unwrap().review, Some(casebook_model::Review::Reviewed));
    server.stop().await;
}
