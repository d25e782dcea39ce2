//! The console's import preview says how many cases had no id, and how many of those are told
//! apart by their place only, before anything is imported.

use crate::console::cookie;
use crate::harness::{Backend, Server};

crate::on_both!(an_import_preview_says_how_many_ids_were_made);

/// A preview of pasted text, as the console's form sends it: the page it answers with.
async fn preview(server: &Server, text: &str) -> (u16, String) {
    let client = reqwest::Client::new();
    let session = cookie(server, &server.keys.a_write).await;
    let url = format!("{}/projects/team-a/datasets/support/import", server.url);
    let form = client.get(&url).header("cookie", &session).send().await.unwrap().text().await.unwrap();
    let csrf = form.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let boundary = "casebook-test-boundary";
    let mut body = String::new();
    for (name, value) in
        [("csrf", csrf.as_str()), ("text", text), ("format", "auto"), ("syntax", "jsonl"), ("mode", "replace")]
    {
        body.push_str(&format!("--{boundary}\r\ncontent-disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"));
    }
    body.push_str(&format!("--{boundary}--\r\n"));
    let response = client
        .post(&url)
        .header("cookie", &session)
        .header("origin", &server.url)
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn an_import_preview_says_how_many_ids_were_made(backend: Backend) {
    let server = Server::start(backend).await;
    // Rows without ids, a repeated question with other answers, and one row twice.
    let text = "{\"input\": \"Où est la gare ?\", \"ground_truth\": \"à gauche\"}\n\
                {\"input\": \"Où est la gare ?\", \"ground_truth\": \"左です\"}\n\
                {\"id\": \"k1\", \"input\": \"hi\"}\n\
                {\"input\": \"Où est la gare ?\", \"ground_truth\": \"左です\"}\n";
    let (status, page) = preview(&server, text).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(
            "<p class=\"meta\" id=\"derived-ids\">3 cases had no id: ids derived from their content; 1 of them is identical to another row and numbered by position</p>"
        ),
        "{page}"
    );
    // With an id on every row, nothing to say.
    let (status, page) =
        preview(&server, "{\"id\": \"k1\", \"input\": \"hi\"}\n{\"id\": \"k2\", \"input\": \"hi\"}\n").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("id=\"detected\"") && !page.contains("derived-ids"), "{page}");
    server.stop().await;
}
