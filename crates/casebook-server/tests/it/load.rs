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
pub(crate) async fn raw(server: &Server, request: &[u8], wait: Duration) -> (u16, String) {
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

/// The routes that read a JSON body, the key each needs, and a body each accepts.
fn json_routes(server: &Server) -> Vec<(&'static str, String, String, &'static str)> {
    let p = "/api/v1/projects/team-a";
    vec![
        (
            "POST",
            format!("{p}/runs"),
            server.keys.a_write.clone(),
            r#"{"id":"r-ü","experiment":"e","started":"t","meta":{}}"#,
        ),
        ("POST", format!("{p}/runs/r-a-1/results"), server.keys.a_write.clone(), r#"[{"seq":1,"result":{}}]"#),
        ("PUT", format!("{p}/runs/r-a-1/finish"), server.keys.a_write.clone(), r#"{"finished":"t","summary":{}}"#),
        // A read: a read key may ask, so its body is bounded as the others are.
        (
            "POST",
            format!("{p}/outputs"),
            server.keys.a_read.clone(),
            r#"{"hashes":["0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"]}"#,
        ),
    ]
}

/// Three 1.5 GB bodies took the server to 3 GB: now one that says it is larger than 8 MiB is
/// answered 413 before any of it is sent, on every JSON route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_body_over_the_limit_is_refused_on_its_length_before_it_is_read() {
    let server = Server::start(Backend::Sqlite).await;
    for (method, path, key, _) in json_routes(&server) {
        for length in [(8 << 20) + 1, 1_610_612_736u64] {
            let head = format!(
                "{method} {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\n\
                 content-length: {length}\r\n\r\n"
            );
            // Not a byte of the body is sent: the answer comes all the same.
            let (status, answer) = raw(&server, head.as_bytes(), Duration::from_secs(10)).await;
            assert_eq!(status, 413, "{method} {path}: {answer}");
            let body: serde_json::Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
            assert_eq!(body["error"]["code"], "too-large");
            assert_eq!(
                body["error"]["message"],
                "the body is larger than this server takes for JSON (8388608 bytes): send fewer results a request, \
                 or raise `casebook serve --max-json`"
            );
        }
    }
    // Bodies within the limit are taken as before.
    for (method, path, key, body) in json_routes(&server) {
        let method: reqwest::Method = method.parse().unwrap();
        let response = server
            .client
            .request(method, format!("{}{path}", server.url))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{path}: {}", response.status());
    }
    server.stop().await;
}

/// The peak memory of this process (the server runs in it; nextest gives each test its own).
fn peak_rss_kib() -> u64 {
    let status = fs_err::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Sends `head` and then a chunked body of `total` bytes of JSON whitespace, while reading the
/// answer: the status, and how much of the body the server took before it answered and closed.
async fn chunked(server: &Server, head: String, total: usize) -> (u16, usize, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.url.trim_start_matches("http://");
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        let chunk = vec![b' '; 1 << 20];
        let mut sent = 0;
        if write.write_all(head.as_bytes()).await.is_err() {
            return sent;
        }
        while sent < total {
            let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
            if write.write_all(&framed).await.is_err() {
                return sent;
            }
            sent += chunk.len();
        }
        let _ = write.write_all(b"0\r\n\r\n").await;
        sent
    });
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), read.read_to_end(&mut answer)).await;
    let sent = writer.await.unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, sent, text)
}

/// A body sent in chunks, without a length, is cut off at the first chunk past 8 MiB: three
/// clients sending 512 MiB each at once are answered 413, having sent a few MiB, and the
/// server's memory grows by much less than one of those bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_json_body_is_cut_off_past_the_limit_and_memory_stays_bounded() {
    let server = std::sync::Arc::new(Server::start(Backend::Sqlite).await);
    let before = peak_rss_kib();
    let mut clients = Vec::new();
    for (method, path, key, _) in
        json_routes(&server).into_iter().skip(1).chain(json_routes(&server).into_iter().take(1))
    {
        let server = server.clone();
        clients.push(tokio::spawn(async move {
            let head = format!(
                "{method} {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\n\
                 transfer-encoding: chunked\r\n\r\n"
            );
            (path, chunked(&server, head, 512 << 20).await)
        }));
    }
    for client in clients {
        let (path, (status, sent, answer)) = client.await.unwrap();
        assert_eq!(status, 413, "{path}: {answer}");
        assert!(answer.contains("\"code\":\"too-large\""), "{answer}");
        assert!(sent < 64 << 20, "{path}: the server read {sent} bytes before it answered");
    }
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(grown < 128 << 10, "the server's memory grew by {grown} KiB for bodies it refused");
    if let Ok(server) = std::sync::Arc::try_unwrap(server) {
        server.stop().await;
    }
}

/// A TCP proxy in front of the test PostgreSQL that can be made to stop forwarding, so that the
/// database looks reachable at start and then goes silent (as a server that is down or cut off
/// by the network: connections open, nothing answers).
struct StallingProxy {
    address: std::net::SocketAddr,
    stalled: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl StallingProxy {
    async fn start(target: String) -> Self {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let stalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stalled.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (flag, target) = (flag.clone(), target.clone());
                tokio::spawn(async move {
                    if flag.load(Ordering::SeqCst) {
                        // Accepted and held, never answered.
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        drop(client);
                        return;
                    }
                    let Ok(upstream) = tokio::net::TcpStream::connect(&target).await else { return };
                    let (client_read, client_write) = client.into_split();
                    let (upstream_read, upstream_write) = upstream.into_split();
                    tokio::spawn(Self::forward(client_read, upstream_write, flag.clone()));
                    Self::forward(upstream_read, client_write, flag).await;
                });
            }
        });
        StallingProxy { address, stalled }
    }

    /// Copies bytes one way until told to stall, then holds both ends without forwarding.
    async fn forward(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        stalled: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let Ok(n) = from.read(&mut buffer).await else { return };
            if n == 0 {
                return;
            }
            if stalled.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            }
            if to.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    }

    fn stall(&self) {
        self.stalled.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// `/healthz` took 30 s (the pool's wait) to answer 503 while PostgreSQL was down; it must say so
/// within about a second, and answer 200 while the store answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_503_within_a_second_when_postgres_stops_answering() {
    let base = std::env::var("CASEBOOK_TEST_POSTGRES").expect("CASEBOOK_TEST_POSTGRES is set by `scripts/test.sh`");
    let (server_url, _) = base.rsplit_once('/').unwrap();
    let (credentials, host) = server_url.rsplit_once('@').unwrap();
    let proxy = StallingProxy::start(host.to_owned()).await;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let url = format!("{credentials}@{}/h_{}_{nanos}", proxy.address, std::process::id());
    let store = casebook_store::PostgresStore::create(&url).await.unwrap();
    let limits = casebook_server::Limits::default();
    let (router, _) = casebook_server::app(store.into(), limits.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(casebook_server::serve(listener, router, &limits, std::future::pending::<()>()));
    let client = reqwest::Client::new();
    let healthz = format!("http://{address}/healthz");

    // While the store answers: 200. The check gives the store about a second, which a machine
    // loaded by other work can miss once; it must answer 200 within a few tries.
    let mut healthy = (0, None);
    for _ in 0..10 {
        let (status, body) = crate::harness::answer(client.get(&healthz).send().await.unwrap()).await;
        healthy = (status, body["status"].as_str().map(str::to_owned));
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!((healthy.0, healthy.1.as_deref()), (200, Some("ok")));

    proxy.stall();
    let started = Instant::now();
    let response = client.get(&healthz).timeout(Duration::from_secs(10)).send().await.unwrap();
    let elapsed = started.elapsed();
    let (status, body) = crate::harness::answer(response).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "unavailable");
    assert_eq!(body["error"]["message"], "the store did not answer within 1 s");
    assert!(body["error"]["request_id"].as_str().is_some_and(|id| !id.is_empty()), "{body}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

/// Opens a connection from `from` (any of 127/8 on Linux) to the server.
async fn connect_from(server: &Server, from: [u8; 4]) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    socket.connect(server.url.trim_start_matches("http://").parse().unwrap()).await.unwrap()
}

/// Sends `request` on `stream` and reads until the server closes it or `wait` passes: the
/// status (0 if none came) and whether the server closed the connection.
async fn exchange(mut stream: tokio::net::TcpStream, request: &[u8], wait: Duration) -> (u16, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream.write_all(request).await;
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(wait, stream.read_to_end(&mut answer)).await.is_ok();
    let text = String::from_utf8_lossy(&answer).into_owned();
    (text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), closed)
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
const HALF_SENT: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-sl";

/// Half-sent requests held their connections (and files) open for ever: twenty thousand of
/// them and the server answered no one. A request head not sent within the header timeout is
/// cut off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_request_is_cut_off_after_the_header_timeout() {
    let limits = casebook_server::Limits { header_read: Duration::from_millis(500), ..Default::default() };
    let server = Server::start_with(Backend::Sqlite, limits).await;
    let started = Instant::now();
    let (status, closed) =
        exchange(connect_from(&server, [127, 0, 0, 1]).await, HALF_SENT, Duration::from_secs(5)).await;
    let elapsed = started.elapsed();
    assert!(closed, "the connection is still open after {elapsed:?}");
    assert!(status == 0 || status == 408, "{status}");
    assert!(elapsed >= Duration::from_millis(400) && elapsed < Duration::from_secs(3), "{elapsed:?}");
    // A connection that sends nothing at all is cut off too.
    let started = Instant::now();
    let (_, closed) = exchange(connect_from(&server, [127, 0, 0, 1]).await, b"", Duration::from_secs(5)).await;
    assert!(closed && started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    // A whole request in time is answered.
    let (status, _) = exchange(connect_from(&server, [127, 0, 0, 1]).await, HEALTHZ, Duration::from_secs(5)).await;
    assert_eq!(status, 200);
    server.stop().await;
}

/// Past the cap of connections from one address, new ones from it are closed at once, while
/// a client at another address is answered; a connection closed frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_of_one_address_are_closed_while_others_are_served() {
    let limits = casebook_server::Limits { max_connections_per_client: 8, ..Default::default() };
    let server = Server::start_with(Backend::Sqlite, limits).await;
    let mut held = Vec::new();
    for _ in 0..8 {
        use tokio::io::AsyncWriteExt;
        let mut stream = connect_from(&server, [127, 0, 0, 1]).await;
        stream.write_all(HALF_SENT).await.unwrap();
        held.push(stream);
    }
    // Let the server accept all eight before the ninth comes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let (status, closed) = exchange(connect_from(&server, [127, 0, 0, 1]).await, HEALTHZ, Duration::from_secs(5)).await;
    assert_eq!((status, closed), (0, true));
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    let (status, _) = exchange(connect_from(&server, [127, 0, 0, 2]).await, HEALTHZ, Duration::from_secs(5)).await;
    assert_eq!(status, 200, "another address is served");
    // One held connection closed: 127.0.0.1 gets a place again, once the server has seen it.
    drop(held.pop());
    let mut status = 0;
    for _ in 0..40 {
        (status, _) = exchange(connect_from(&server, [127, 0, 0, 1]).await, HEALTHZ, Duration::from_secs(5)).await;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200);
    drop(held);
    server.stop().await;
}

crate::on_both!(
    sign_ins_are_rate_limited_per_address_and_per_key,
    previews_by_one_project_do_not_expire_another_projects_preview
);

fn no_redirects(from: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(Some(std::net::IpAddr::from(from)))
        .build()
        .unwrap()
}

/// Signs in with `key` from `from`: the status, `Retry-After`, and the page.
async fn sign_in_from(server: &Server, from: [u8; 4], key: &str) -> (u16, Option<String>, String) {
    let response =
        no_redirects(from).post(format!("{}/signin", server.url)).form(&[("key", key)]).send().await.unwrap();
    let retry = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (response.status().as_u16(), retry, response.text().await.unwrap())
}

/// 10,000 sign-ins with project b's key in 2 s signed out project a's user: sign-ins are now
/// limited per client address and per key (429 with `Retry-After`), and a's session stays.
async fn sign_ins_are_rate_limited_per_address_and_per_key(backend: Backend) {
    let server = Server::start(backend).await;
    let a = crate::console::cookie(&server, &server.keys.a_read).await;
    let mut answers = Vec::new();
    for _ in 0..40 {
        answers.push(sign_in_from(&server, [127, 0, 0, 1], &server.keys.b_read).await);
    }
    // Thirty attempts a minute from one address, a's sign-in among them.
    assert!(answers[..29].iter().all(|(status, ..)| *status == 303));
    for (status, retry, page) in &answers[29..] {
        assert_eq!(*status, 429);
        let seconds: u64 = retry.as_deref().unwrap().parse().unwrap();
        assert!((1..=60).contains(&seconds), "{seconds}");
        assert!(page.contains(&format!("too many sign-ins from here or with this key: try again in {seconds} s")));
    }
    let page = server.client.get(format!("{}/projects/team-a", server.url)).header("cookie", &a).send().await.unwrap();
    assert_eq!(page.status(), 200, "a's user is still signed in");
    // Another address may sign in, until b's key has had its thirty.
    let (status, ..) = sign_in_from(&server, [127, 0, 0, 2], &server.keys.b_read).await;
    assert_eq!(status, 303);
    let (status, retry, _) = sign_in_from(&server, [127, 0, 0, 3], &server.keys.b_read).await;
    assert_eq!((status, retry.is_some()), (429, true));
    let (status, ..) = sign_in_from(&server, [127, 0, 0, 3], &server.keys.a_read).await;
    assert_eq!(status, 303);
    server.stop().await;
}

/// Previews `text` as the next version of `support` in `project` with the session `cookie`:
/// the confirmation form's fields (csrf, token, head, mode).
async fn preview_in(server: &Server, cookie: &str, project: &str, text: &str) -> Vec<(String, String)> {
    let url = format!("{}/projects/{project}/datasets/support/import", server.url);
    let form = server.client.get(&url).header("cookie", cookie).send().await.unwrap().text().await.unwrap();
    let field = |page: &str, name: &str| {
        page.split(&format!("name=\"{name}\" value=\"")).nth(1).unwrap().split('"').next().unwrap().to_owned()
    };
    let csrf = field(&form, "csrf");
    let boundary = "casebook-test-boundary";
    let mut body = String::new();
    for (name, value) in
        [("csrf", csrf.as_str()), ("text", text), ("format", "auto"), ("syntax", "jsonl"), ("mode", "upsert")]
    {
        body.push_str(&format!("--{boundary}\r\ncontent-disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"));
    }
    body.push_str(&format!("--{boundary}--\r\n"));
    let response = server
        .client
        .post(&url)
        .header("cookie", cookie)
        .header("origin", &server.url)
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let page = response.text().await.unwrap();
    ["csrf", "token", "head", "mode"].iter().map(|name| ((*name).to_owned(), field(&page, name))).collect()
}

/// 64 import previews by project b made a's confirmation answer 410: previews are now kept per
/// key and per project.
async fn previews_by_one_project_do_not_expire_another_projects_preview(backend: Backend) {
    let server = Server::start(backend).await;
    let a = crate::console::cookie(&server, &server.keys.a_write).await;
    let b = crate::console::cookie(&server, &server.keys.b_write).await;
    let mut form = preview_in(&server, &a, "team-a", "{\"id\": \"é1\", \"input\": \"Où est la gare ?\"}\n").await;
    for i in 0..70 {
        preview_in(&server, &b, "team-b", &format!("{{\"input\": \"question {i}\"}}\n")).await;
    }
    form.push(("message".into(), "ajout".into()));
    let client = no_redirects([127, 0, 0, 1]);
    let response = client
        .post(format!("{}/projects/team-a/datasets/support/import/confirm", server.url))
        .header("cookie", &a)
        .header("origin", &server.url)
        .form(&form)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    assert_eq!(status, 303, "{}", response.text().await.unwrap());
    let (_, body) =
        server.get(&server.keys.a_read, "/api/v1/projects/team-a/datasets/support/versions/v4/cases/%C3%A91").await;
    assert_eq!(body["input"], "Où est la gare ?", "{body}");
    server.stop().await;
}
