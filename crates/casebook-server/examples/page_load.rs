//! Load generator for `scripts/bench-server.sh`: `GET` one page of cases at random cursors of a
//! version from many clients at once, and the latency percentiles, for cursors near the start
//! and near the end of the version. Loopback only; bounded in requests.
//!
//!     page_load URL TOKEN VERSION_PATH [CLIENTS] [REQUESTS_PER_REGION] [PAGE]
//!
//! `VERSION_PATH` is `/api/v1/projects/P/datasets/D/versions/vN`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

/// Requests each client makes before those it times, in each region: the first opens the
/// client's connection, the next ones run while the other clients open theirs.
const WARM_UP: usize = 4;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, token, path, rest @ ..] = args.as_slice() else {
        eprintln!("usage: page_load URL TOKEN VERSION_PATH [CLIENTS] [REQUESTS_PER_REGION] [PAGE]");
        std::process::exit(2);
    };
    assert!(url.starts_with("http://127.0.0.1") || url.starts_with("http://localhost"), "loopback only");
    let number = |i: usize, default: usize| rest.get(i).map_or(default, |v| v.parse().unwrap());
    let (clients, requests, page) = (number(0, 32), number(1, 6400), number(2, 200));
    let client = reqwest::Client::builder().pool_max_idle_per_host(clients).build().unwrap();

    // Cursors all along the version, from a walk with large pages.
    let mut cursors: Vec<String> = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let mut target = format!("{url}{path}/cases?limit=5000");
        if let Some(c) = &next {
            target.push_str(&format!("&cursor={c}"));
        }
        let body: serde_json::Value =
            client.get(&target).bearer_auth(token).send().await.unwrap().json().await.unwrap();
        match body["next_cursor"].as_str() {
            Some(c) => {
                cursors.push(c.to_owned());
                next = Some(c.to_owned());
            }
            None => break,
        }
    }
    assert!(cursors.len() >= 10, "the version is too small for this benchmark");
    let tenth = cursors.len() / 10;
    let regions = [("start", cursors[..tenth].to_vec()), ("end", cursors[cursors.len() - tenth..].to_vec())];
    println!("| cursors | clients | requests | page | p50 | p90 | p99 | max | pages/s |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, region) in regions {
        let region = std::sync::Arc::new(region);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let (client, region, url, path, token) =
                (client.clone(), region.clone(), url.clone(), path.clone(), token.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                // A small deterministic generator per client: the cursors differ, the run repeats.
                let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (c as u64 + 1);
                for i in 0..WARM_UP + requests / clients {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let cursor = &region[(state % region.len() as u64) as usize];
                    let at = Instant::now();
                    let response = client
                        .get(format!("{url}{path}/cases?limit={page}&cursor={cursor}"))
                        .bearer_auth(&token)
                        .send()
                        .await
                        .unwrap();
                    assert!(response.status().is_success());
                    let bytes = response.bytes().await.unwrap();
                    assert!(!bytes.is_empty());
                    if i >= WARM_UP {
                        latencies.push(at.elapsed());
                    }
                }
                latencies
            }));
        }
        let mut all: Vec<Duration> = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let elapsed = started.elapsed();
        all.sort_unstable();
        let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        println!(
            "| near the {name} | {clients} | {} | {page} | {} | {} | {} | {} | {:.0} |",
            all.len(),
            ms(at(0.5)),
            ms(at(0.9)),
            ms(at(0.99)),
            ms(*all.last().unwrap()),
            all.len() as f64 / elapsed.as_secs_f64()
        );
    }
}
