//! The console's runs pages with runs made by `casebook run` itself (through the server, as a
//! team runs): the run page and compare link each result to the exact case version it ran and to
//! its dataset, and compare says when A and B ran different versions of the dataset.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use crate::cli::{Backend, Folder, run};
use crate::remote::{PROJECT, Server, push};
use crate::run::{Behaviour, DATASET, serve, summary};

on_both!(runs_made_by_casebook_run_link_to_their_dataset_and_cases);

/// The console page at `path`, signed in with `key`.
fn page(server: &Server, key: &str, path: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let signed = client.post(format!("{}/signin", server.url)).form(&[("key", key)]).send().await.unwrap();
        assert_eq!(signed.status().as_u16(), 303);
        let cookie = signed.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
        let response = client.get(format!("{}{path}", server.url)).header("cookie", cookie).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        response.text().await.unwrap()
    })
}

/// Runs `support@REF` on the server with `casebook run` and returns the run's id.
fn run_on_server(server: &Server, key: &str, reference: &str, agent: &str) -> String {
    let dir = Folder::new();
    let dataset = format!("support@{reference}");
    let out = run(server.client(&dir, key).args([
        "run",
        "--dataset",
        &dataset,
        "--target",
        agent,
        "--grader",
        "exact_match",
    ]));
    out.expect_status(1);
    let shown = run(server.client(&dir, key).args(["results", "--format", "json"]));
    summary(&shown.stdout)["meta"]["run_id"].as_str().unwrap().to_owned()
}

fn runs_made_by_casebook_run_link_to_their_dataset_and_cases(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let key = Server::key(b, &dir, PROJECT, "write");
    push(&server, &dir, &key, "support", &dir.file("support.jsonl", DATASET));
    let (agent, _) = serve(Behaviour::Shout);
    let first = run_on_server(&server, &key, "v1", &agent);
    let changed = DATASET.replace("wrong answer please", "a changed question");
    push(&server, &dir, &key, "support", &dir.file("support-2.jsonl", &changed));
    let second = run_on_server(&server, &key, "latest", &agent);

    let base = format!("/projects/{PROJECT}");
    let runs = page(&server, &key, &format!("{base}/runs"));
    for (run, version) in [(&first, 1), (&second, 2)] {
        assert!(runs.contains(run.as_str()), "{runs}");
        assert!(runs.contains(&format!("href=\"{base}/datasets/support/versions/v{version}\"")), "{runs}");
    }
    assert!(runs.contains("support@v1") && runs.contains("support@v2"), "{runs}");

    // The run page: the dataset's version and each case of the version it ran.
    let one = page(&server, &key, &format!("{base}/runs/{first}"));
    assert!(one.contains(&format!("href=\"{base}/datasets/support/versions/v1\"")), "{one}");
    for case in ["a", "b", "c"] {
        assert!(one.contains(&format!("href=\"{base}/datasets/support/versions/v1/cases/{case}\"")), "{case}: {one}");
    }
    // A result's page links its case too.
    let result = page(&server, &key, &format!("{base}/runs/{first}/results/0"));
    assert!(result.contains(&format!("{base}/datasets/support/versions/v1/cases/")), "{result}");

    // Compare: the pairs link to B's version of the case, and the page says the versions differ.
    let compare = page(&server, &key, &format!("{base}/compare?a={first}&b={second}"));
    assert!(compare.contains(&format!("href=\"{base}/datasets/support/versions/v2/cases/a\"")), "{compare}");
    assert!(
        compare.contains("A ran support@v1 and B ran support@v2: a case may have changed between them"),
        "{compare}"
    );
    let same = page(&server, &key, &format!("{base}/compare?a={first}&b={first}"));
    assert!(!same.contains("versions-differ"), "{same}");
}
