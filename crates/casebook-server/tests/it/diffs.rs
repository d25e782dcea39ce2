//! Diffs at size: the API's diff paged by cursor with its totals, and the console's diff page
//! paged list by list with positions, on both backends. The versions are commits of cases in
//! the native shape (`id`, `input`, `expected.output`), as `casebook put` makes them.

use casebook_store::CommitMode;
use serde_json::Value;

use crate::harness::{Backend, Server, case, commit};

const BIG: &str = "/api/v1/projects/team-a/datasets/big";

/// `big` v1: 300 cases; v2: 30 removed, 120 modified, 210 added (the rest kept).
async fn seed(server: &Server) {
    let a = server.store.in_project("team-a");
    let v1: Vec<_> = (0..300).map(|i| case(&format!("m{i:03}"), &format!("question {i}"))).collect();
    commit(&a, "big", CommitMode::Replace, v1).await;
    let mut v2: Vec<_> = (30..300)
        .map(|i| {
            case(
                &format!("m{i:03}"),
                &if i < 150 { format!("question {i}, reworded") } else { format!("question {i}") },
            )
        })
        .collect();
    v2.extend((0..210).map(|i| case(&format!("n{i:03}"), &format!("new question {i}"))));
    commit(&a, "big", CommitMode::Replace, v2).await;
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|v| v.as_str().or(v["id"].as_str()).unwrap().to_owned()).collect()
}

async fn the_api_pages_a_diff_by_cursor_with_its_totals(backend: Backend) {
    let server = Server::start(backend).await;
    seed(&server).await;
    let read = &server.keys.a_read;
    let (status, whole) = server.get(read, &format!("{BIG}/diff?from=v1&to=v2")).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["totals"], serde_json::json!({"added": 210, "removed": 30, "modified": 120, "moved": 0}));
    let (status, first) = server.get(read, &format!("{BIG}/diff?from=v1&to=v2&limit=50")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["totals"], whole["totals"]);
    assert_eq!(ids(&first["added"]).len(), 50);
    assert_eq!(ids(&first["removed"]).len(), 30);
    assert!(first["next"].get("removed").is_none(), "{}", first["next"]);
    // A modified case's field changes come with it, on every page.
    assert_eq!(first["modified"][0]["id"], "m030");
    assert_eq!(first["modified"][0]["changes"][0]["pointer"], "/input");
    assert_eq!(first["modified"][0]["changes"][0]["new"], "question 30, reworded");
    // Each list walked by its cursors is the whole diff's list, in id order.
    for list in ["added", "removed", "modified", "moved"] {
        let mut walked = ids(&first[list]);
        let mut next = first["next"][list].as_str().map(str::to_owned);
        let mut pages = 1;
        while let Some(cursor) = next {
            let (status, page) = server.get(read, &format!("{BIG}/diff?cursor={cursor}&limit=50")).await;
            assert_eq!(status, 200, "{page}");
            assert!(page.get("totals").is_none(), "{page}");
            // A cursor pages its own list alone.
            for other in ["added", "removed", "modified", "moved"].iter().filter(|o| **o != list) {
                assert_eq!(page[other], serde_json::json!([]), "{list}: {page}");
            }
            walked.extend(ids(&page[list]));
            next = page["next"][list].as_str().map(str::to_owned);
            pages += 1;
        }
        assert_eq!(walked, ids(&whole[list]), "{list}");
        let expected_pages = (ids(&whole[list]).len().max(1)).div_ceil(50);
        assert_eq!(pages, expected_pages, "{list}: no empty last page");
    }
    // Wrong paging is refused with what to do.
    let (status, body) = server.get(read, &format!("{BIG}/diff?from=v1&limit=0")).await;
    assert_eq!(
        (status, body["error"]["message"].as_str().unwrap()),
        (400, "`limit` is 0: give at least 1 (at most 1000)")
    );
    let (status, body) = server.get(read, &format!("{BIG}/diff?from=v1&limit=5000")).await;
    assert_eq!(
        (status, body["error"]["message"].as_str().unwrap()),
        (400, "`limit` is 5000: at most 1000 cases a list a page")
    );
    let (status, body) = server.get(read, &format!("{BIG}/diff?cursor=nonsense")).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["message"], "`cursor` is not a diff cursor this server gave: start again without it");
    server.stop().await;
}

/// The console's pages as a signed-in reader gets them.
async fn signed_in(server: &Server) -> impl AsyncFn(&str) -> (u16, String) {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let response =
        client.post(format!("{}/signin", server.url)).form(&[("key", &server.keys.a_read)]).send().await.unwrap();
    let cookie = response.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let url = server.url.clone();
    async move |path: &str| {
        let response = client.get(format!("{url}{path}")).header("cookie", &cookie).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }
}

/// The `href` of the first link of `class` inside the section `id` of a page (HTML-unescaped).
fn link(html: &str, section: &str, class: &str) -> Option<String> {
    let start = html.find(&format!("id=\"{section}\""))?;
    let part = &html[start..];
    let part = &part[..part.find("</section>").unwrap_or(part.len())];
    let at = part.find(&format!("class=\"{class}\" href=\""))? + class.len() + 15;
    Some(part[at..at + part[at..].find('"')?].replace("&amp;", "&").replace("&#38;", "&"))
}

fn position(html: &str, section: &str) -> String {
    let start = html.find(&format!("id=\"{section}\"")).unwrap();
    let part = &html[start..];
    let at = part.find("class=\"position\">").unwrap() + 17;
    part[at..at + part[at..].find('<').unwrap()].to_owned()
}

async fn the_console_pages_each_list_of_a_diff_with_its_position(backend: Backend) {
    let server = Server::start(backend).await;
    seed(&server).await;
    let get = signed_in(&server).await;
    let (status, page) = get("/projects/team-a/datasets/big/diff?from=v1&to=v2").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("+210 added · −30 removed · ~120 modified"), "{page}");
    assert_eq!(position(&page, "added"), "1–100 of 210");
    assert_eq!(position(&page, "removed"), "1–30 of 30");
    assert_eq!(position(&page, "modified"), "1–100 of 120");
    assert!(link(&page, "removed", "next").is_none() && link(&page, "added", "previous").is_none());
    // Through the added list and back: positions, the ids in order, no empty last page.
    let second = link(&page, "added", "next").unwrap();
    let (status, page) = get(&second).await;
    assert_eq!(status, 200, "{second}: {page}");
    assert_eq!(position(&page, "added"), "101–200 of 210");
    assert!(page.contains(">n100<") && page.contains(">n199<") && !page.contains(">n200<"), "{page}");
    // The link carries the totals, which a list's later pages show instead of counting them
    // again (a 100k-change diff counted them in 0.7 s a page at 1M cases).
    assert!(second.contains("&totals=210.30.120.0&"), "{second}");
    let (_, shown) = get(&second.replace("totals=210.30.120.0", "totals=999.30.120.0")).await;
    assert_eq!(position(&shown, "added"), "101–200 of 999");
    let (_, counted) = get(&second.replace("totals=210.30.120.0", "totals=oops")).await;
    assert_eq!(position(&counted, "added"), "101–200 of 210");
    // The page shows its list alone, and links back to the whole diff.
    assert!(!page.contains("id=\"removed\"") && page.contains("id=\"whole-diff\""), "{page}");
    let (_, last) = get(&link(&page, "added", "next").unwrap()).await;
    assert_eq!(position(&last, "added"), "201–210 of 210");
    assert!(link(&last, "added", "next").is_none(), "no link to an empty page");
    let (_, back) = get(&link(&last, "added", "previous").unwrap()).await;
    assert_eq!(position(&back, "added"), "101–200 of 210");
    assert!(back.contains(">n100<") && back.contains(">n199<"), "{back}");
    let (_, start) = get(&link(&back, "added", "previous").unwrap()).await;
    assert_eq!(position(&start, "added"), "1–100 of 210");
    assert!(start.contains(">n000<") && link(&start, "added", "previous").is_none(), "{start}");
    // Each case links to its version: an added or modified one to v2, a removed one to v1.
    assert!(start.contains("/datasets/big/versions/v2/cases/n000\""), "{start}");
    let (_, whole) = get("/projects/team-a/datasets/big/diff?from=v1&to=v2").await;
    assert!(whole.contains("/datasets/big/versions/v1/cases/m000\""), "{whole}");
    // The modified list's second page holds the field changes of its cases.
    let (_, modified) = get(&link(&whole, "modified", "next").unwrap()).await;
    assert_eq!(position(&modified, "modified"), "101–120 of 120");
    assert!(modified.contains("question 149, reworded") && modified.contains("/input"), "{modified}");
    // A list that is not one is refused, saying which are.
    let (status, text) = get("/projects/team-a/datasets/big/diff?from=v1&to=v2&list=changed").await;
    assert_eq!(status, 400);
    assert!(text.contains("`list` is `changed`: say `added`, `removed`, `modified` or `moved`"), "{text}");
    drop(get);
    server.stop().await;
}

crate::on_both!(
    the_api_pages_a_diff_by_cursor_with_its_totals,
    the_console_pages_each_list_of_a_diff_with_its_position
);

/// A reader pages through a diff's added cases and back by clicking, then goes back to the
/// whole diff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_clicks_through_a_diff_list_and_back() {
    let server = Server::start(Backend::Sqlite).await;
    seed(&server).await;
    let browser = crate::browser::Browser::start().await;
    crate::console::sign_in(&browser, &server, &server.keys.a_read).await;
    browser.goto(&format!("{}/projects/team-a/datasets/big/diff?from=v1&to=v2", server.url)).await;
    let text = browser.wait_for_text("+210 added · −30 removed · ~120 modified").await;
    browser.shot("diff-paged").await;
    assert!(text.contains("1–100 of 210") && text.contains("1–30 of 30"), "{text}");
    browser.submit("#added a.next").await;
    assert_eq!(browser.text_of("#added .position").await, "101–200 of 210");
    assert!(browser.text_of("#added ul.ids").await.starts_with("n100"));
    browser.submit("#added a.next").await;
    assert_eq!(browser.text_of("#added .position").await, "201–210 of 210");
    assert!(browser.all("#added a.next").await.is_empty(), "no next link after the last page");
    browser.submit("#added a.previous").await;
    assert_eq!(browser.text_of("#added .position").await, "101–200 of 210");
    browser.submit("#whole-diff").await;
    assert_eq!(browser.text_of("#removed .position").await, "1–30 of 30");
    browser.quit().await;
    server.stop().await;
}
