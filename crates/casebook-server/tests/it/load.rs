//! Requests meant to take the server down: huge filters, huge bodies, connections that never
//! finish their headers, one project's flood of sign-ins and previews. Each must be refused or
//! cut off quickly, and other requests must go on being answered meanwhile.

use std::time::{Duration, Instant};

use crate::harness::{Backend, Server};

const A: &str = "/api/v1/projects/team-a/datasets/support";

/// What a client sees of a `where=` filter: status, the error's message and its column.
async fn filtered(server: &Server, path: &str, filter: &str) -> (u16, String, u64) {
    let response = server
        .client
        .get(format!("{}{path}", server.url))
        .bearer_auth(&server.keys.a_read)
        .query(&[("where", filter)])
        .send()
        .await
        .unwrap();
    let (status, body) = crate::harness::answer(response).await;
    let message = body["error"]["message"].as_str().unwrap_or_default().to_owned();
    let column = body["error"]["diagnostics"][0]["column"].as_u64().unwrap_or(0);
    (status, message, column)
}

/// A path of 20,000 steps (40 KB) took seconds to parse, on a thread that serves requests.
fn deep_path() -> String {
    format!("metadata{} == 1", ".a".repeat(20_000))
}

/// A filter of 2,000 tests (the most there may be), 40 KB: about the longest a URL can carry.
fn long_filter() -> String {
    let tests: Vec<String> = (0..2000).map(|i| format!("metadata.k{i:04} == {i}")).collect();
    tests.join(" or ")
}

/// Sends `request` as it is on a new connection and reads the answer until the server closes
/// it or `wait` passes: the status (0 if none came) and the whole answer.
async fn raw(server: &Server, request: &[u8], wait: Duration) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    // The server may answer and close before it has read everything: a refused write is fine.
    let _ = stream.write_all(request).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(wait, stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_filter_is_refused_at_once_with_its_place() {
    let server = Server::start(Backend::Sqlite).await;
    let started = Instant::now();
    // On a dataset that does not exist too: the filter is read first.
    for dataset in ["support", "missing"] {
        let path = format!("/api/v1/projects/team-a/datasets/{dataset}/versions/v1/cases");
        let (status, message, column) = filtered(&server, &path, &deep_path()).await;
        assert_eq!(
            (status, message.as_str(), column),
            (400, "invalid `where`: the path is too long: more than 128 steps", 265)
        );
    }
    // A URL carries at most 64 KiB, so a longer filter (over 128 KiB is refused wherever it is
    // written) is refused before any of it is read.
    let request = format!(
        "GET {A}/versions/v1/count?where={} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\n\r\n",
        "exists(metadata.x)+or+".repeat(4000),
        server.keys.a_read
    );
    let (status, _) = raw(&server, request.as_bytes(), Duration::from_secs(5)).await;
    assert_eq!(status, 414);
    // The longest filter there may be is read (and then the dataset is found missing).
    let missing = "/api/v1/projects/team-a/datasets/missing/versions/v1/count";
    let (status, message, _) = filtered(&server, missing, &long_filter()).await;
    assert_eq!((status, message.as_str()), (404, "no dataset named `missing`; the datasets are `support`"));
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    server.stop().await;
}

/// Eight clients sending the 40 KB path and eight the longest filter, again and again, while
/// `/healthz` and a page are asked for: those are answered at once each time. (On a
/// dataset that does not exist: parsing is what is measured, not the store's query.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_requests_are_answered_while_huge_filters_are_parsed() {
    let server = std::sync::Arc::new(Server::start(Backend::Sqlite).await);
    let mut heavy = Vec::new();
    for i in 0..16 {
        let server = server.clone();
        heavy.push(tokio::spawn(async move {
            let path = "/api/v1/projects/team-a/datasets/missing/versions/v1/cases";
            let filter = if i % 2 == 0 { deep_path() } else { long_filter() };
            let mut statuses = Vec::new();
            for _ in 0..4 {
                statuses.push(filtered(&server, path, &filter).await.0);
            }
            statuses
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        for path in ["/healthz", &format!("{A}/versions/v3/cases?limit=2")] {
            let started = Instant::now();
            let (status, body) = server.get(&server.keys.a_read, path).await;
            assert_eq!(status, 200, "{path}: {body}");
            slowest = slowest.max(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut answered = Vec::new();
    for task in heavy {
        answered.extend(task.await.unwrap());
    }
    assert_eq!(answered.iter().filter(|s| **s == 400).count(), 32, "{answered:?}");
    assert_eq!(answered.iter().filter(|s| **s == 404).count(), 32, "{answered:?}");
    // Before, each of those filters held a thread that answers requests for seconds (a minute
    // in a debug build): the bound leaves room for a machine busy with other tests.
    assert!(slowest < Duration::from_secs(5), "a request waited {slowest:?} behind the filters");
    if let Ok(server) = std::sync::Arc::try_unwrap(server) {
        server.stop().await;
    }
}
