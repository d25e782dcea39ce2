//! Saving a console edit after someone else committed: commits that touched other cases only
//! leave the edit applied on the new head; a commit that changed the edited case shows theirs
//! and yours and writes nothing until an explicit choice, however often the stale form is sent.
//! In a real headless Chromium for what a person does, over HTTP on both backends.

use casebook_store::{CommitMode, Store};
use serde_json::json;

use crate::browser::Browser;
use crate::console::{cookie, sign_in};
use crate::harness::{Backend, Server, case, commit};

crate::on_both!(an_edit_saved_after_commits_to_other_cases_is_applied_on_the_new_head);

/// The editor's form fields for `case`, as the page has them (its token and version).
async fn editor_form(client: &reqwest::Client, server: &Server, cookie: &str, case: &str) -> (String, String) {
    let page = client
        .get(format!("{}/projects/team-a/datasets/support/edit?case={case}", server.url))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let field = |name: &str| {
        page.split(&format!("name=\"{name}\" value=\"")).nth(1).unwrap().split('"').next().unwrap().to_owned()
    };
    (field("csrf"), field("parent"))
}

async fn an_edit_saved_after_commits_to_other_cases_is_applied_on_the_new_head(backend: Backend) {
    let server = Server::start(backend).await;
    let a = server.store.in_project("team-a");
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let writer = cookie(&server, &server.keys.a_write).await;
    let (csrf, parent) = editor_form(&client, &server, &writer, "c1").await;
    assert_eq!(parent, "v3");
    let save = |text: &'static str, overrides: &'static str| {
        let request = client
            .post(format!("{}/projects/team-a/datasets/support/edit", server.url))
            .header("cookie", &writer)
            .header("origin", &server.url)
            .form(&[
                ("csrf", csrf.as_str()),
                ("parent", "v3"),
                ("original", "c1"),
                ("text", text),
                ("message", ""),
                ("overrides", overrides),
            ]);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let location =
                response.headers().get("location").map(|l| l.to_str().unwrap().to_owned()).unwrap_or_default();
            (status, location, response.text().await.unwrap())
        }
    };

    // Someone else changes c2 and adds c9 while c1 is edited from v3.
    commit(&a, "support", CommitMode::Upsert, vec![case("c2", "deux, modifié"), case("c9", "九")]).await;
    let (status, location, body) = save("{\"id\": \"c1\", \"input\": \"un, modifié\"}", "").await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(location, "/projects/team-a/datasets/support/diff?from=v4&to=v5&started=v3");
    let v5 = a.resolve("support", &casebook_store::Ref::Latest).await.unwrap();
    assert_eq!(v5.number, 5);
    assert_eq!(a.case("support", 5, "c1").await.unwrap().unwrap().task.input, json!("un, modifié"));
    assert_eq!(a.case("support", 5, "c2").await.unwrap().unwrap().task.input, json!("deux, modifié"));
    assert!(a.case("support", 5, "c9").await.unwrap().is_some(), "the other commit is kept");
    let page = client
        .get(format!("{}{location}", server.url))
        .header("cookie", &writer)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(
            "Your edit started from v3; v4 was committed meanwhile and changed other cases only: your edit was applied on v4."
        ),
        "{page}"
    );

    // The same case changed on both sides (c1, from v3): 409, and the stale form sent again
    // writes nothing either.
    for _ in 0..2 {
        let (status, _, body) = save("{\"id\": \"c1\", \"input\": \"eins\"}", "").await;
        assert_eq!(status, 409, "{body}");
        assert!(
            body.contains(
                "v5 was committed while you edited (you started from v3) and changed `c1` too: nothing was written"
            ),
            "{body}"
        );
        assert!(body.contains("name=\"overrides\" value=\"v5\""), "{body}");
        assert_eq!(a.versions("support").await.unwrap().len(), 5);
    }
    // Saving it over theirs, naming the head it overrides.
    let (status, location, body) = save("{\"id\": \"c1\", \"input\": \"eins\"}", "v5").await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(location, "/projects/team-a/datasets/support/diff?from=v5&to=v6&started=v3");
    assert_eq!(a.case("support", 6, "c1").await.unwrap().unwrap().task.input, json!("eins"));
    server.stop().await;
}

/// Case c2 opened from v3; meanwhile a commit changes c2; the save shows theirs and yours,
/// saving the same form again still writes nothing, and only the explicit choice does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_over_a_colleagues_change_to_the_same_case_needs_an_explicit_choice() {
    let server = Server::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_write).await;
    browser.goto(&format!("{}/projects/team-a/datasets/support/edit?case=c2", server.url)).await;
    browser.wait_for_text("Saving makes a new version on v3").await;
    let a = server.store.in_project("team-a");
    commit(&a, "support", CommitMode::Upsert, vec![case("c2", "two, theirs")]).await;

    browser.fill("#text", "{\"id\": \"c2\", \"input\": \"two, mine\"}").await;
    browser.submit("#edit-form button").await;
    let text = browser.wait_for_text("changed `c2` too").await;
    browser.shot("conflict-same-case").await;
    assert!(
        text.contains(
            "v4 was committed while you edited (you started from v3) and changed `c2` too: nothing was written"
        ),
        "{text}"
    );
    assert!(browser.text_of("#theirs").await.contains("\"two, theirs\""));
    assert!(browser.text_of("#mine").await.contains("\"two, mine\""));
    assert_eq!(a.versions("support").await.unwrap().len(), 4);

    // Sent again as it is: the same answer, nothing written.
    browser.submit("#edit-form button").await;
    browser.wait_for_text("changed `c2` too").await;
    assert_eq!(a.versions("support").await.unwrap().len(), 4);
    assert_eq!(a.case("support", 4, "c2").await.unwrap().unwrap().task.input, json!("two, theirs"));

    // "Keep theirs" leads to their case; "edit again from theirs" to the editor on v4.
    let keep = browser.run("return document.querySelector('#keep-theirs').getAttribute('href')", json!([])).await;
    assert_eq!(keep, "/projects/team-a/datasets/support/versions/v4/cases/c2");
    let again = browser.run("return document.querySelector('#edit-theirs').getAttribute('href')", json!([])).await;
    assert_eq!(again, "/projects/team-a/datasets/support/edit?case=c2");

    // Yours over theirs, confirmed.
    browser.click("#overrides").await;
    browser.submit("#edit-form button").await;
    browser.wait_for_text("v4 → v5").await;
    assert_eq!(a.case("support", 5, "c2").await.unwrap().unwrap().task.input, json!("two, mine"));

    // Edit again from theirs: the editor opens on the head's case.
    browser.goto(&format!("{}{}", server.url, again.as_str().unwrap())).await;
    browser.wait_for_text("Saving makes a new version on v5").await;
    browser.quit().await;
    server.stop().await;
}
