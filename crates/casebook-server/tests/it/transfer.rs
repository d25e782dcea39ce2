//! Import and export through the API: a file in any format in, a version in any format out,
//! every error located, nothing written on a refusal, limits on size and on slow clients, and
//! requests in flight finished on shutdown.

use std::time::Duration;

use crate::harness::{Backend, Server, answer};

const A: &str = "/api/v1/projects/team-a/datasets";

async fn import(server: &Server, dataset: &str, query: &str, body: &str) -> (u16, serde_json::Value) {
    let response = server
        .client
        .post(format!("{}{A}/{dataset}/import?{query}", server.url))
        .bearer_auth(&server.keys.a_write)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    answer(response).await
}

async fn versions(server: &Server, dataset: &str) -> usize {
    let (_, log) = server.get(&server.keys.a_read, &format!("{A}/{dataset}/versions")).await;
    log["versions"].as_array().map_or(0, Vec::len)
}

const LETTA: &str = "{\"input\": \"What is 2+2?\", \"ground_truth\": \"4\"}\n\
                     {\"input\": \"Capital of France?\", \"ground_truth\": \"Paris\", \"tags\": [\"geo\"]}\n";

async fn imports_are_read_as_the_command_line_reads_them(backend: Backend) {
    let server = Server::start(backend).await;
    let (status, report) = import(&server, "qa", "filename=qa.jsonl&message=first", LETTA).await;
    assert_eq!(status, 201, "{report}");
    assert_eq!((report["created"].as_bool(), report["version"]["cases"].as_u64()), (Some(true), Some(2)));
    assert_eq!(report["version"]["message"], "first");
    // Who: the key that made the version.
    assert_eq!(report["version"]["author"], format!("key {}", &server.keys.a_write[3..15]));
    // The same content again makes no version.
    let (status, report) = import(&server, "qa", "filename=qa.jsonl", LETTA).await;
    assert_eq!((status, report["created"].as_bool()), (200, Some(false)), "{report}");
    assert_eq!(versions(&server, "qa").await, 1);
    // A bad line: every error with its line and column in the file as the client named it, and
    // nothing written.
    let bad = format!("{LETTA}{{\"input\": 7, \"ground_truth\": \"x\"}}\n{{\"input\": \"ok\", \"ground_truth\": }}\n");
    let (status, body) = import(&server, "qa", "filename=qa.jsonl", &bad).await;
    assert_eq!(status, 422, "{body}");
    let error = &body["error"];
    assert_eq!(error["code"], "invalid-input");
    assert_eq!(error["message"], "nothing was imported: `qa.jsonl` has 2 errors");
    let located: Vec<(String, u64, u64)> = error["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["file"].as_str().unwrap().to_owned(), d["line"].as_u64().unwrap(), d["column"].as_u64().unwrap()))
        .collect();
    assert_eq!(located, [("qa.jsonl".to_owned(), 3, 11), ("qa.jsonl".to_owned(), 4, 33)]);
    assert_eq!(versions(&server, "qa").await, 1);
    // Upsert adds; a stale parent is a conflict that writes nothing.
    let one = "{\"input\": \"Largest ocean?\", \"ground_truth\": \"Pacific\"}\n";
    let (status, report) = import(&server, "qa", "filename=more.jsonl&mode=upsert&parent=v1", one).await;
    assert_eq!((status, report["version"]["cases"].as_u64()), (201, Some(3)), "{report}");
    let (status, body) = import(&server, "qa", "filename=more.jsonl&parent=v1", LETTA).await;
    assert_eq!(
        (status, body["error"]["code"].as_str(), body["error"]["head"].as_u64()),
        (409, Some("conflict"), Some(2))
    );
    assert_eq!(versions(&server, "qa").await, 2);
    // A client names who pushed; the key that did is kept beside the name.
    let response = server
        .client
        .post(format!("{}{A}/named/import?filename=n.jsonl", server.url))
        .bearer_auth(&server.keys.a_write)
        .header("x-casebook-author", "Ana Lima")
        .body(LETTA)
        .send()
        .await
        .unwrap();
    let (status, report) = answer(response).await;
    assert_eq!(status, 201, "{report}");
    assert_eq!(report["version"]["author"], format!("Ana Lima (key {})", &server.keys.a_write[3..15]));
    // `v0` is "a new dataset": a conflict once it exists.
    let (status, _) = import(&server, "fresh", "filename=f.jsonl&parent=v0", LETTA).await;
    assert_eq!(status, 201);
    let (status, body) = import(&server, "fresh", "filename=f.jsonl&parent=v0", one).await;
    assert_eq!((status, body["error"]["head"].as_u64()), (409, Some(1)));
    // Bad parameters are named.
    let (status, body) = import(&server, "qa", "format=excel", LETTA).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().starts_with("`format`:"), "{body}");
    server.stop().await;
}

async fn an_imported_manifest_reads_no_file_of_the_server(backend: Backend) {
    let server = Server::start(backend).await;
    // A mas-lab manifest whose items are "in another file", and a seed file: the body's folder
    // holds the body alone, so neither is found, and nothing is written.
    let manifest = "apiVersion: maslab/v1\nkind: Dataset\nmetadata:\n  name: trip\nspec:\n  path: ../../../etc/hostname\n  format: json\n";
    let (status, body) = import(&server, "trip", "filename=trip.yaml", manifest).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["diagnostics"][0]["file"], "trip.yaml", "{body}");
    assert_eq!(versions(&server, "trip").await, 0);
    server.stop().await;
}

async fn bodies_over_the_limit_or_too_slow_are_refused(backend: Backend) {
    let limits = casebook_server::Limits {
        max_body: 1000,
        body_idle: Duration::from_millis(300),
        ..casebook_server::Limits::default()
    };
    let server = Server::start_with(backend, limits).await;
    let big: String =
        (0..40).map(|i| format!("{{\"input\": \"question {i}\", \"ground_truth\": \"{i}\"}}\n")).collect();
    assert!(big.len() > 1000);
    // Declared too large.
    let (status, body) = import(&server, "big", "filename=big.jsonl", &big).await;
    assert_eq!((status, body["error"]["code"].as_str()), (413, Some("too-large")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("1000 bytes"));
    // Sent in chunks without a length: counted as it comes.
    let chunks: Vec<Result<String, std::io::Error>> = big.lines().map(|l| Ok(format!("{l}\n"))).collect();
    let response = server
        .client
        .post(format!("{}{A}/big/import?filename=big.jsonl", server.url))
        .bearer_auth(&server.keys.a_write)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    let (status, body) = answer(response).await;
    assert_eq!((status, body["error"]["code"].as_str()), (413, Some("too-large")), "{body}");
    // A client that stops sending halfway is cut off.
    let stalled = futures_util::stream::unfold(0, |n| async move {
        match n {
            0 => Some((Ok::<_, std::io::Error>("{\"input\": \"a\", \"ground_truth\": \"b\"}\n".to_owned()), 1)),
            _ => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                None
            }
        }
    });
    let started = std::time::Instant::now();
    let response = server
        .client
        .post(format!("{}{A}/slow/import?filename=slow.jsonl", server.url))
        .bearer_auth(&server.keys.a_write)
        .body(reqwest::Body::wrap_stream(stalled))
        .send()
        .await;
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    if let Ok(response) = response {
        let (status, body) = answer(response).await;
        assert_eq!((status, body["error"]["code"].as_str()), (408, Some("timeout")), "{body}");
    }
    assert_eq!(versions(&server, "big").await + versions(&server, "slow").await, 0);
    server.stop().await;
}

async fn imports_can_report_progress_as_json_lines(backend: Backend) {
    let server = Server::start(backend).await;
    let many: String =
        (0..3000).map(|i| format!("{{\"input\": \"question {i}\", \"ground_truth\": \"{i}\"}}\n")).collect();
    let response = server
        .client
        .post(format!("{}{A}/many/import?filename=many.jsonl", server.url))
        .bearer_auth(&server.keys.a_write)
        .header("accept", "application/x-ndjson")
        .body(many)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let last = lines.last().unwrap();
    assert_eq!(
        (last["status"].as_u64(), last["report"]["version"]["cases"].as_u64()),
        (Some(201), Some(3000)),
        "{text}"
    );
    let progress: Vec<u64> = lines.iter().filter_map(|l| l["progress"]["cases"].as_u64()).collect();
    assert!(!progress.is_empty() && progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
    // An error arrives as the last line too.
    let response = server
        .client
        .post(format!("{}{A}/many/import?filename=bad.jsonl", server.url))
        .bearer_auth(&server.keys.a_write)
        .header("accept", "application/x-ndjson")
        .body("{\"input\": 1}\n")
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!((last["status"].as_u64(), last["error"]["code"].as_str()), (Some(422), Some("invalid-input")), "{text}");
    server.stop().await;
}

async fn exports_write_a_version_in_any_format(backend: Backend) {
    let server = Server::start(backend).await;
    let many: String =
        (0..4500).map(|i| format!("{{\"input\": \"question {i}\", \"ground_truth\": \"{i}\"}}\n")).collect();
    let (status, _) = import(&server, "big", "filename=big.jsonl", &many).await;
    assert_eq!(status, 201);
    let get = |query: &'static str| {
        let server = &server;
        async move {
            let response = server
                .client
                .get(format!("{}{A}/big/versions/latest/export?{query}", server.url))
                .bearer_auth(&server.keys.a_read)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    // Native JSON lines over several pages (a letta file has no header to write): each case as
    // stored.
    let (status, native) = get("").await;
    assert_eq!(status, 200);
    let lines: Vec<&str> = native.lines().collect();
    assert_eq!(lines.len(), 4500);
    let (_, page) = server.get(&server.keys.a_read, &format!("{A}/big/versions/latest/cases?limit=3")).await;
    for (line, case) in lines[..3].iter().zip(page["cases"].as_array().unwrap()) {
        assert_eq!(serde_json::from_str::<serde_json::Value>(line).unwrap(), *case);
    }
    // letta, as it came: the values of the file sent.
    let (status, letta) = get("format=letta").await;
    assert_eq!(status, 200);
    let sent: Vec<serde_json::Value> = many.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let back: Vec<serde_json::Value> = letta.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(back, sent);
    // A filter, and a format that cannot hold the cases: refused before a byte is sent.
    let (status, some) = get("where=input%20%3D%3D%20%22question%207%22").await;
    assert_eq!((status, some.lines().count()), (200, 1));
    let (status, refused) = get("format=agenthealth").await;
    assert_eq!(status, 422, "{refused}");
    let body: serde_json::Value = serde_json::from_str(&refused).unwrap();
    assert_eq!(body["error"]["code"], "invalid-input");
    let (status, _) = get("format=letta&syntax=yaml").await;
    assert_eq!(status, 400);
    server.stop().await;
}

/// Rows without an id get ids derived from their content; the import's report says how many,
/// and how many of them are positional (rows wholly identical to an earlier one), as
/// `casebook import` does; in the streamed report too.
async fn an_import_says_how_many_ids_it_made_and_how_many_by_position(backend: Backend) {
    let server = Server::start(backend).await;
    let rows = "{\"input\": \"Où est la gare ?\", \"ground_truth\": \"à gauche\"}\n\
                {\"input\": \"Où est la gare ?\", \"ground_truth\": \"左です\"}\n\
                {\"id\": \"k1\", \"input\": \"hi\"}\n\
                {\"input\": \"Où est la gare ?\", \"ground_truth\": \"左です\"}\n\
                {\"input\": \"Où est la gare ?\", \"ground_truth\": \"左です\"}\n";
    let (status, report) = import(&server, "gare", "filename=gare.jsonl", rows).await;
    assert_eq!(status, 201, "{report}");
    assert_eq!((report["derived_ids"].as_u64(), report["positional_ids"].as_u64()), (Some(4), Some(2)), "{report}");
    // Every row with an id: none made.
    let (status, report) =
        import(&server, "named", "filename=named.jsonl", "{\"id\": \"k\", \"input\": \"hi\"}\n").await;
    assert_eq!(status, 201, "{report}");
    assert_eq!((report["derived_ids"].as_u64(), report["positional_ids"].as_u64()), (Some(0), Some(0)), "{report}");
    let response = server
        .client
        .post(format!("{}{A}/gare2/import?filename=gare.jsonl", server.url))
        .bearer_auth(&server.keys.a_write)
        .header("accept", "application/x-ndjson")
        .body(rows)
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["report"]["derived_ids"].as_u64(), last["report"]["positional_ids"].as_u64()),
        (Some(4), Some(2)),
        "{text}"
    );
    server.stop().await;
}

/// A version with a draft expectation (`review: draft`) exported to a format without `review`
/// is refused (422, `E-unconfirmed-drafts` naming the case), lossy or not; `confirm_drafts=true`
/// writes it as confirmed; a format that holds `review` keeps it a draft.
async fn an_export_confirms_draft_expectations_only_when_asked(backend: Backend) {
    let server = Server::start(backend).await;
    let cases = "{\"id\": \"ñ-1\", \"input\": \"¿2+2?\", \"expected\": {\"output\": \"4\"}, \"review\": \"draft\"}\n\
                 {\"id\": \"b\", \"input\": \"3+3?\", \"expected\": {\"output\": \"6\"}}\n\
                 {\"id\": \"c\", \"input\": \"¿sin respuesta?\", \"review\": \"draft\"}\n";
    let (status, report) = import(&server, "qa", "filename=qa.jsonl", cases).await;
    assert_eq!(status, 201, "{report}");
    let get = |query: &'static str| {
        let server = &server;
        async move {
            let (status, text) = export(server, "qa", query).await;
            (status, text.unwrap())
        }
    };
    // Lossy: the one refusal is the drafts'.
    for query in ["format=letta&lossy=true", "format=letta&lossy=true&confirm_drafts=false"] {
        let (status, text) = get(query).await;
        assert_eq!(status, 422, "{query}: {text}");
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["error"]["code"], "invalid-input", "{body}");
        assert_eq!(
            body["error"]["message"],
            "`qa` cannot be written as `letta`: 1 case with draft expectations (`review: draft`) would be written \
             as confirmed, `letta` having no place for `review`: `ñ-1`",
            "{query}"
        );
        let diagnostics = body["error"]["diagnostics"].as_array().unwrap();
        assert_eq!(diagnostics.len(), 1, "{body}");
        assert_eq!(
            (&diagnostics[0]["code"], &diagnostics[0]["file"]),
            (&"E-unconfirmed-drafts".into(), &"qa@v1".into())
        );
    }
    // Not lossy: refused for the drafts too (beside what letta cannot hold).
    let (status, text) = get("format=letta").await;
    assert_eq!(status, 422, "{text}");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    let codes: Vec<&str> =
        body["error"]["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"E-unconfirmed-drafts"), "{body}");
    let (status, text) = get("format=letta&lossy=true&confirm_drafts=true").await;
    assert_eq!(status, 200, "{text}");
    let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows[0], serde_json::json!({"id": "ñ-1", "input": "¿2+2?", "ground_truth": "4"}));
    assert_eq!(rows.len(), 3);
    // Native JSON holds `review`: nothing to confirm.
    let (status, text) = get("format=casebook").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.lines().next().unwrap().contains("\"review\":\"draft\""), "{text}");
    server.stop().await;
}

/// An export longer than one page (2,000 cases) with drafts on its second page only: with
/// `confirm_drafts=true` every case is written whole, the drafts with their expectations as
/// confirmed; without it the export never ends as a shorter valid file (the drafts left out).
/// (Native JSON lines in, shaped as the import test's rows.)
async fn drafts_past_the_first_page_of_an_export_are_written_whole_or_refused(backend: Backend) {
    let server = Server::start(backend).await;
    let mut cases = String::new();
    for i in 0..2100 {
        let review = if i >= 2050 && i % 10 == 0 { ", \"review\": \"draft\"" } else { "" };
        cases.push_str(&format!(
            "{{\"id\": \"c{i:04}\", \"input\": \"¿{i}+1?\", \"expected\": {{\"output\": \"{}\"}}, \"labels\": [\"n\"]{review}}}\n",
            i + 1
        ));
    }
    let (status, report) = import(&server, "long", "filename=long.jsonl", &cases).await;
    assert_eq!(status, 201, "{report}");
    let get = |query: &'static str| export(&server, "long", query);
    let (status, text) = get("format=letta&confirm_drafts=true").await;
    assert_eq!(status, 200);
    let rows: Vec<serde_json::Value> = text.unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2100);
    for (i, row) in rows.iter().enumerate() {
        let want = serde_json::json!({"id": format!("c{i:04}"), "input": format!("¿{i}+1?"), "ground_truth": format!("{}", i + 1), "tags": ["n"]});
        assert_eq!(row, &want, "row {i}");
    }
    // Without `confirm_drafts`: refused, or cut short; never the other 2,095 cases alone.
    let (status, text) = get("format=letta").await;
    match text {
        Ok(text) if status == 200 => panic!("a shorter valid file of {} lines", text.lines().count()),
        Ok(text) => {
            assert_eq!(status, 422, "{text}");
            assert!(text.contains("E-unconfirmed-drafts"), "{text}");
        }
        Err(_) => assert_eq!(status, 200),
    }
    server.stop().await;
}

/// The export of `dataset`'s latest version with `query`, read with project a's read key: the
/// status and the body, or why the body could not be read whole (a body cut short).
async fn export(server: &Server, dataset: &str, query: &str) -> (u16, Result<String, String>) {
    let response = server
        .client
        .get(format!("{}{A}/{dataset}/versions/latest/export?{query}", server.url))
        .bearer_auth(&server.keys.a_read)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.map_err(|e| e.to_string()))
}

/// A client that sends a request's head and part of its body, then nothing more, is answered
/// 408 with the API's JSON error once `body_idle` passes, on an upload (import) and on a JSON
/// route (runs); nothing is stored.
async fn a_body_that_stalls_halfway_is_answered_408_with_the_json_error(backend: Backend) {
    let limits =
        casebook_server::Limits { body_idle: Duration::from_millis(300), ..casebook_server::Limits::default() };
    let server = Server::start_with(backend, limits).await;
    let requests = [
        (
            format!("POST {A}/slow/import?filename=slow.jsonl HTTP/1.1"),
            &server.keys.a_write,
            "{\"input\": \"¿a?\", \"ground_truth\": \"b\"}\n{\"input\": ",
            "the client sent nothing of the body for too long: nothing was imported",
        ),
        (
            "POST /api/v1/projects/team-a/runs HTTP/1.1".to_owned(),
            &server.keys.a_write,
            "{\"id\": \"r-slow\", \"experiment\": ",
            "the client sent nothing of the body for too long",
        ),
    ];
    for (line, key, part, message) in requests {
        let head = format!(
            "{line}\r\nHost: casebook\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n\
             Content-Length: 4000\r\n\r\n{part}"
        );
        let started = std::time::Instant::now();
        let (status, answer) = crate::load::raw(&server, head.as_bytes(), Duration::from_secs(5)).await;
        assert_eq!(status, 408, "{line}: {answer}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        let (headers, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(headers.to_ascii_lowercase().contains("content-type: application/json"), "{headers}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!((&body["error"]["code"], &body["error"]["message"]), (&"timeout".into(), &message.into()), "{body}");
        assert!(body["error"]["request_id"].as_str().is_some_and(|id| !id.is_empty()), "{body}");
    }
    assert_eq!(versions(&server, "slow").await, 0);
    let (_, runs) = server.get(&server.keys.a_read, "/api/v1/projects/team-a/runs").await;
    assert!(!runs.to_string().contains("r-slow"), "{runs}");
    server.stop().await;
}

/// A request in flight when the server is told to stop is answered before it stops.
async fn shutdown_finishes_requests_in_flight(backend: Backend) {
    let server = Server::start(backend).await;
    let url = format!("{}{A}/late/import?filename=late.jsonl", server.url);
    let key = server.keys.a_write.clone();
    let client = server.client.clone();
    let slow = futures_util::stream::unfold(0, |n| async move {
        if n == 3 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        Some((Ok::<_, std::io::Error>(format!("{{\"input\": \"q{n}\", \"ground_truth\": \"a\"}}\n")), n + 1))
    });
    let request =
        tokio::spawn(
            async move { client.post(url).bearer_auth(key).body(reqwest::Body::wrap_stream(slow)).send().await },
        );
    tokio::time::sleep(Duration::from_millis(150)).await;
    let store = server.store.clone();
    server.stop().await;
    let response = request.await.unwrap().unwrap();
    let (status, report) = answer(response).await;
    assert_eq!((status, report["version"]["cases"].as_u64()), (201, Some(3)), "{report}");
    let versions = casebook_store::Store::versions(&store.in_project("team-a"), "late").await.unwrap();
    assert_eq!(versions.len(), 1);
}

crate::on_both!(
    imports_are_read_as_the_command_line_reads_them,
    an_imported_manifest_reads_no_file_of_the_server,
    bodies_over_the_limit_or_too_slow_are_refused,
    imports_can_report_progress_as_json_lines,
    exports_write_a_version_in_any_format,
    shutdown_finishes_requests_in_flight,
    an_export_confirms_draft_expectations_only_when_asked,
    drafts_past_the_first_page_of_an_export_are_written_whole_or_refused,
    an_import_says_how_many_ids_it_made_and_how_many_by_position,
    a_body_that_stalls_halfway_is_answered_408_with_the_json_error,
);

/// The folders a spool folder holds, by name.
fn spool_folders(parent: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = fs_err::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("casebook-spool-"))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_left_by_a_killed_server_are_removed_when_a_server_starts() {
    let parent = tempfile::tempdir().unwrap();
    let at = |name: &str| parent.path().join(name);
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    // A killed server's spool: its lock file held by no one, an upload half written.
    fs_err::create_dir_all(at("casebook-spool-killed/upload-1")).unwrap();
    fs_err::write(at("casebook-spool-killed/upload-1/cases.jsonl"), "{\"input\": \"ünï\"").unwrap();
    let lock = fs_err::File::create(at("casebook-spool-killed/lock")).unwrap();
    lock.file().set_modified(an_hour_ago).unwrap();
    drop(lock);
    // A running server's: its lock is held (here, by the test).
    fs_err::create_dir_all(at("casebook-spool-running/upload-2")).unwrap();
    let held = fs_err::File::create(at("casebook-spool-running/lock")).unwrap();
    held.file().set_modified(an_hour_ago).unwrap();
    held.lock().unwrap();
    // What is not a spool of a server's is left alone.
    fs_err::write(at("casebook-spool-notes.txt"), "mine").unwrap();
    fs_err::create_dir_all(at("other/upload-3")).unwrap();

    let limits = casebook_server::Limits { spool: Some(parent.path().to_owned()), ..Default::default() };
    let server = Server::start_with(Backend::Sqlite, limits).await;
    assert!(!at("casebook-spool-killed").exists());
    assert!(at("casebook-spool-running/upload-2").is_dir());
    assert_eq!(fs_err::read_to_string(at("casebook-spool-notes.txt")).unwrap(), "mine");
    assert!(at("other/upload-3").is_dir());
    // The server keeps its uploads in a spool of its own, and imports still work.
    let folders = spool_folders(parent.path());
    assert_eq!(folders.len(), 3, "{folders:?}");
    let (status, report) = import(&server, "qa", "filename=qa.jsonl", LETTA).await;
    assert_eq!(status, 201, "{report}");
    // A second server sharing the folder leaves the first one's spool alone.
    let second = Server::start_with(
        Backend::Sqlite,
        casebook_server::Limits { spool: Some(parent.path().to_owned()), ..Default::default() },
    )
    .await;
    assert_eq!(spool_folders(parent.path()).len(), 4);
    second.stop().await;
    server.stop().await;
    assert!(at("casebook-spool-running").is_dir());
    drop(held);
}
