//! `POST …/datasets/NAME/purge`: only a key of the `admin` scope may purge; read and write keys
//! get 403 naming the scope needed, and nothing is purged.

use casebook_store::{KeyMaterial, Scope, Store};

use crate::harness::{Backend, Server, answer};

async fn purge(server: &Server, key: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let url = format!("{}/api/v1/projects/team-a/datasets/support/purge", server.url);
    let response =
        server.client.post(url).bearer_auth(key).header("x-casebook-author", "dpo").json(&body).send().await.unwrap();
    answer(response).await
}

async fn only_an_admin_key_purges(backend: Backend) {
    let server = Server::start(backend).await;
    let material = KeyMaterial { id: [200; 6], secret: [201; 32], store_secret: [9; 32] };
    let admin = server
        .store
        .create_key("team-a", Scope::Admin, "dpo", "ana", "2026-11-29T08:00:00Z", &material)
        .await
        .unwrap()
        .token;
    let store = server.store.in_project("team-a");
    let head = store.versions("support").await.unwrap().pop().unwrap();
    let body = serde_json::json!({"ids": ["c1"], "reason": "erasure request #12"});
    for (key, scope) in [(&server.keys.a_read, "read"), (&server.keys.a_write, "write")] {
        let (status, answer) = purge(&server, key, body.clone()).await;
        assert_eq!(status, 403, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("has the scope `{scope}`: purging needs a key made with `--scope admin`")),
            "{message}"
        );
    }
    assert!(store.case("support", head.number, "c1").await.unwrap().is_some(), "nothing was purged");
    // No reason: refused before anything is read.
    let (status, answer) = purge(&server, &admin, serde_json::json!({"ids": ["c1"], "reason": " "})).await;
    assert_eq!(status, 400, "{answer}");
    // An id no version held: 404 naming it.
    let (status, answer) = purge(&server, &admin, serde_json::json!({"ids": ["nope"], "reason": "r"})).await;
    assert_eq!(status, 404, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("`nope`"), "{answer}");

    let (status, answer) = purge(&server, &admin, body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["purge"]["cases"], serde_json::json!(["c1"]));
    assert_eq!(answer["purge"]["reason"], "erasure request #12");
    assert!(answer["purge"]["author"].as_str().unwrap().starts_with("dpo (key "), "{answer}");
    assert!(store.case("support", head.number, "c1").await.unwrap().is_none());
    let (_, log) = server.get(&server.keys.a_read, "/api/v1/projects/team-a/datasets/support/versions").await;
    assert!(log.to_string().contains("erasure request #12"), "{log}");
    let report = server.store.check().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    server.stop().await;
}

crate::on_both!(only_an_admin_key_purges);
