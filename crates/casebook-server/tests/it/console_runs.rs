//! The console's runs pages: runs written as `casebook run` writes them (the runner's own
//! results and summary, the agents' outputs kept apart by run hash), read in a real headless
//! Chromium, and over plain HTTP on both backends.

use casebook_model::snapshot::Served;
use casebook_runner::protocol::{Serving, Speaker, Step};
use casebook_runner::record::{Failure, Grade, GraderResult, RunOutput, RunResult};
use casebook_runner::summary::{RunMeta, Summary, compare};
use casebook_store::{AnyStore, Ref, ResultRow, Store};
use serde_json::json;

use crate::browser::Browser;
use crate::console::sign_in;
use crate::harness::{Backend, Server};

/// A grader's `(score, pass)`, or the message of its failure.
type Outcome<'a> = Result<(f64, bool), &'a str>;

/// A graded result: one grader per `(name, outcome)`.
fn graded(case: &str, run: u32, labels: &[&str], grades: &[(&str, Outcome)]) -> RunResult {
    let grades: Vec<GraderResult> = grades
        .iter()
        .map(|(name, outcome)| GraderResult {
            grader: (*name).to_owned(),
            weight: 1.0,
            outcome: match outcome {
                Ok((score, pass)) => {
                    Ok(Grade { score: *score, pass: *pass, rationale: format!("{name} gave {score}") })
                }
                Err(message) => Err(Failure::new("judge", *message)),
            },
        })
        .collect();
    let scores: Option<Vec<f64>> = grades.iter().map(|g| g.outcome.as_ref().ok().map(|g| g.score)).collect();
    let score = scores.map(|s| s.iter().sum::<f64>() / s.len() as f64);
    RunResult {
        case_id: case.to_owned(),
        row: None,
        case_content_id: format!("content of {case}"),
        labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        review: None,
        confidence: None,
        scenario: "default".to_owned(),
        run,
        hash: String::new(),
        output: Ok(RunOutput {
            output: json!(format!("the answer to {case}, run {run}")),
            millis: 1200 + u64::from(run),
            ..RunOutput::default()
        }),
        pass: score.map(|s| s >= 0.5 && grades.iter().all(|g| g.outcome.as_ref().is_ok_and(|g| g.pass))),
        score,
        grades,
        noise: Vec::new(),
    }
}

fn pass(case: &str, run: u32, labels: &[&str]) -> RunResult {
    graded(case, run, labels, &[("exact_match", Ok((1.0, true))), ("judge", Ok((0.9, true)))])
}

fn fail(case: &str, run: u32, labels: &[&str]) -> RunResult {
    graded(case, run, labels, &[("exact_match", Ok((0.0, false))), ("judge", Ok((0.2, false)))])
}

/// The agent timed out: an error, not a failed case.
fn timed_out(case: &str, run: u32, labels: &[&str]) -> RunResult {
    RunResult {
        output: Err(Failure::new("timeout", "the agent gave no answer in 60 s")),
        grades: Vec::new(),
        score: None,
        pass: None,
        ..pass(case, run, labels)
    }
}

/// Keeps a run in the store as `casebook run` does: its meta at the start, each result with the
/// agent's output taken out and kept under the run hash, then the runner's summary.
async fn keep(store: &AnyStore, id: &str, started: &str, mut results: Vec<RunResult>) -> Vec<RunResult> {
    let version = store.resolve("support", &Ref::Number(3)).await.unwrap();
    let meta = RunMeta {
        run_id: id.to_owned(),
        experiment: "support-bot".to_owned(),
        dataset: "support".to_owned(),
        dataset_version_id: version.id,
        started: started.to_owned(),
        finished: String::new(),
        n_runs: 2,
        scenarios: vec!["default".to_owned()],
        selection: None,
        targets: Vec::new(),
    };
    store.begin_run(id, "support-bot", started, &serde_json::to_string(&meta).unwrap()).await.unwrap();
    for (n, r) in results.iter_mut().enumerate() {
        r.hash = format!("{:032x}{:032x}", id.len() * 1000 + n, u128::from(id.as_bytes()[id.len() - 1]));
    }
    let finished = started.replace(":00:00Z", ":05:00Z");
    let summary = Summary::of(&results, 0.8, RunMeta { finished: finished.clone(), ..meta });
    let rows: Vec<ResultRow> = results
        .iter()
        .enumerate()
        .map(|(seq, r)| {
            let mut stored = r.clone();
            let output = stored.take_output();
            ResultRow {
                seq: seq as u64,
                result: serde_json::to_string(&stored).unwrap(),
                output: output.map(|o| (stored.hash.clone(), serde_json::to_string(&o).unwrap())),
            }
        })
        .collect();
    store.save_results(id, &rows).await.unwrap();
    store.finish_run(id, &finished, &serde_json::to_string(&summary).unwrap()).await.unwrap();
    results
}

/// Two runs of support@v3, two runs per case: c2 goes from pass to fail, c3 from fail to pass,
/// c4 errs in each (the agent in A, a grader in B). B's first result has a trajectory.
pub(crate) async fn seed(server: &Server) -> (Vec<RunResult>, Vec<RunResult>) {
    let store = server.store.in_project("team-a");
    let a = vec![
        pass("c1", 0, &["billing"]),
        pass("c1", 1, &["billing"]),
        pass("c2", 0, &["tone:polite"]),
        fail("c2", 1, &["tone:polite"]),
        fail("c3", 0, &["billing", "tone:polite"]),
        fail("c3", 1, &["billing", "tone:polite"]),
        timed_out("c4", 0, &[]),
        pass("c4", 1, &[]),
    ];
    let mut first = pass("c1", 0, &["billing"]);
    first.output = Ok(RunOutput {
        output: json!("your refund for order 42 is on its way"),
        per_turn: vec![json!("your refund for order 42 is on its way")],
        trajectory: vec![
            Step::Message { role: Speaker::User, content: json!("where is my refund for order 42?"), operator: false },
            Step::ToolCall {
                name: "lookup_order".to_owned(),
                arguments: json!({"order": 42}),
                result: Some(json!({"status": "refunded"})),
                served: None,
            },
            // Calls casebook answered from the case's snapshot: one matched, one outside it.
            Step::ToolCall {
                name: "refund_status".to_owned(),
                arguments: json!({"order": 42}),
                result: Some(json!("remboursé le 3 mai")),
                served: Some(Serving { how: Served::Matched, entry: Some(1), error: false }),
            },
            Step::ToolCall {
                name: "refund_status".to_owned(),
                arguments: json!({"order": 7}),
                result: Some(json!("no recorded answer for this call of `refund_status`")),
                served: Some(Serving { how: Served::Unmatched, entry: None, error: true }),
            },
        ],
        millis: 2345,
        served_calls: 2,
        unmatched_calls: 1,
        ..RunOutput::default()
    });
    let b = vec![
        first,
        pass("c1", 1, &["billing"]),
        fail("c2", 0, &["tone:polite"]),
        fail("c2", 1, &["tone:polite"]),
        pass("c3", 0, &["billing", "tone:polite"]),
        graded("c3", 1, &["billing", "tone:polite"], &[("exact_match", Ok((0.0, false))), ("judge", Ok((0.5, false)))]),
        pass("c4", 0, &[]),
        graded("c4", 1, &[], &[("exact_match", Ok((1.0, true))), ("judge", Err("the judge answered no JSON"))]),
    ];
    let a = keep(&store, "r-a-2", "2026-11-24T08:00:00Z", a).await;
    let b = keep(&store, "r-a-3", "2026-11-24T09:00:00Z", b).await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_lists_runs_reads_a_summary_and_a_result_with_its_trajectory() {
    let server = Server::start(Backend::Sqlite).await;
    seed(&server).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_read).await;
    browser.click_link("Runs of team-a").await;
    let text = browser.wait_for_text("Runs of team-a").await;
    browser.shot("runs").await;
    // Newest first, with the dataset version each ran and its numbers.
    let rows = browser.text_of("table.runs tbody").await;
    let (at_3, at_2, at_1) = (rows.find("r-a-3").unwrap(), rows.find("r-a-2").unwrap(), rows.find("r-a-1").unwrap());
    assert!(at_3 < at_2 && at_2 < at_1, "{rows}");
    assert!(rows.contains("support@v3") && rows.contains("support-bot"), "{rows}");
    assert!(text.contains("Compare two runs"), "{text}");

    browser.click_link("r-a-3").await;
    let text = browser.wait_for_text("Summary").await;
    browser.shot("run").await;
    // An error is counted apart, and any error means the threshold is not met.
    let totals = browser.text_of("table.totals").await;
    assert!(totals.contains("errors (not failures)"), "{totals}");
    assert!(text.contains("threshold 80.0 %") && text.contains("not met"), "{text}");
    let graders = browser.text_of("table.graders").await;
    assert!(graders.contains("exact_match") && graders.contains("judge"), "{graders}");
    let labels = browser.text_of("table.labels").await;
    assert!(labels.contains("billing") && labels.contains("tone:polite"), "{labels}");
    let scenarios = browser.text_of("table.scenarios").await;
    assert!(text.contains("pass@2") && scenarios.contains("default"), "{scenarios}");
    assert!(browser.text_of("table.errors").await.contains("the judge answered no JSON"));
    let results = browser.text_of("table.results tbody").await;
    assert_eq!(results.lines().count(), 8, "{results}");
    assert!(results.lines().next().unwrap().contains("2 (1 unmatched)"), "{results}");
    // The case links to the case in the version the run used.
    let href =
        browser.run("return document.querySelector('table.results tbody a[href*=\"/cases/\"]').href", json!([])).await;
    assert_eq!(href.as_str().unwrap(), format!("{}/projects/team-a/datasets/support/versions/v3/cases/c1", server.url));

    browser.submit("table.results tbody tr:first-child td a").await;
    let text = browser.wait_for_text("The agent's output").await;
    browser.shot("result").await;
    assert!(text.contains("your refund for order 42 is on its way"), "{text}");
    let trajectory = browser.text_of("ol.trajectory").await;
    assert!(trajectory.contains("where is my refund") && trajectory.contains("lookup_order"), "{trajectory}");
    assert!(trajectory.contains("\"order\": 42") && trajectory.contains("refunded"), "{trajectory}");
    // Each call says how it was answered: the agent's own tool, or the snapshot's entry, or none.
    assert!(trajectory.contains("lookup_order (the agent's own)"), "{trajectory}");
    assert!(trajectory.contains("refund_status (matched entry 1)") && trajectory.contains("remboursé le 3 mai"));
    assert!(trajectory.contains("refund_status (unmatched, error)"), "{trajectory}");
    assert!(text.contains("tool calls served 2 (1 unmatched)"), "{text}");
    let grades = browser.text_of("table.grades").await;
    assert!(grades.contains("exact_match") && grades.contains("judge gave 0.9"), "{grades}");
    // The error of a grader is shown as an error, not a failure.
    browser.goto(&format!("{}/projects/team-a/runs/r-a-3/results/7", server.url)).await;
    let text = browser.wait_for_text("Graders").await;
    assert!(
        text.contains("An error is not a failed case") && text.contains("judge: the judge answered no JSON"),
        "{text}"
    );
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_compared_show_the_flipped_cases_and_the_paired_difference() {
    let server = Server::start(Backend::Sqlite).await;
    let (a, b) = seed(&server).await;
    let expected = compare(&a, &b);
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.a_read).await;
    browser.goto(&format!("{}/projects/team-a/runs", server.url)).await;
    browser.wait_for_text("Compare two runs").await;
    // The two newest are picked: the older as A.
    browser.submit("#compare-form button").await;
    let text = browser.wait_for_text("Paired difference").await;
    browser.shot("compare").await;
    assert!(browser.url().await.ends_with("/projects/team-a/compare?a=r-a-2&b=r-a-3"), "{}", browser.url().await);
    let regressions = browser.text_of("section.pass-to-fail").await;
    assert!(regressions.contains("c2") && !regressions.contains("c3"), "{regressions}");
    let fixes = browser.text_of("section.fail-to-pass").await;
    assert!(fixes.contains("c3") && !fixes.contains("c2"), "{fixes}");
    let errored = browser.text_of("section.errored").await;
    assert!(errored.contains("timeout") && errored.contains("the judge answered no JSON"), "{errored}");
    // The runner's numbers, as `casebook compare` prints them.
    assert_eq!(expected.pairs, 6);
    assert!(expected.mean_difference.unwrap() > 0.0, "{expected:?}");
    let mean = browser.text_of("#mean-difference").await;
    assert_eq!(mean, format!("{:+.3}", expected.mean_difference.unwrap()));
    let interval = expected.mean_difference_interval.unwrap();
    assert_eq!(browser.text_of("#mean-interval").await, format!("{:+.3} to {:+.3}", interval.low, interval.high));
    assert!(text.contains("Every pair"), "{text}");
    browser.quit().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_projects_key_sees_none_of_the_runs() {
    let server = Server::start(Backend::Sqlite).await;
    seed(&server).await;
    let browser = Browser::start().await;
    sign_in(&browser, &server, &server.keys.b_read).await;
    for path in [
        "/projects/team-a/runs",
        "/projects/team-a/runs/r-a-3",
        "/projects/team-a/runs/r-a-3/results/0",
        "/projects/team-a/compare?a=r-a-2&b=r-a-3",
        // In its own project, team-a's run is one that does not exist.
        "/projects/team-b/runs/r-a-3",
        "/projects/team-b/runs/r-a-3/results/0",
        "/projects/team-b/compare?a=r-a-2&b=r-a-3",
    ] {
        browser.goto(&format!("{}{path}", server.url)).await;
        let text = browser.wait_for_text("404").await;
        assert!(!text.contains("lookup_order") && !text.contains("support-bot"), "{path}: {text}");
    }
    browser.goto(&format!("{}/projects/team-b/runs", server.url)).await;
    let text = browser.wait_for_text("Runs of team-b").await;
    assert!(text.contains("r-b-1") && !text.contains("r-a-"), "{text}");
    browser.quit().await;
    server.stop().await;
}

async fn run_pages_answer_over_http(backend: Backend) {
    let server = Server::start(backend).await;
    seed(&server).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let response =
        client.post(format!("{}/signin", server.url)).form(&[("key", &server.keys.a_read)]).send().await.unwrap();
    let cookie = response.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let get = async |path: &str| {
        let response = client.get(format!("{}{path}", server.url)).header("cookie", &cookie).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    for path in [
        "/projects/team-a/runs",
        "/projects/team-a/runs/r-a-2",
        "/projects/team-a/runs/latest",
        "/projects/team-a/runs/r-a-2/results/6",
        "/projects/team-a/compare?a=r-a-2&b=latest",
        "/projects/team-a/compare",
    ] {
        let (status, text) = get(path).await;
        assert_eq!(status, 200, "{path}: {text}");
    }
    // The harness's run kept nothing the runner wrote: it graded nothing, so it did not pass.
    let (status, text) = get("/projects/team-a/runs/r-a-1").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("not met") && text.contains("nothing was graded") && text.contains("unreadable"), "{text}");
    let (status, text) = get("/projects/team-a/runs/r-a-1/results/0").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("not a result the runner wrote"), "{text}");
    let (status, text) = get("/projects/team-a/runs").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("no summary"), "{text}");
    // A page past the end shows the last results.
    let (status, text) = get("/projects/team-a/runs/r-a-2?from=100").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("8–8 of 8"), "{text}");
    let (status, _) = get("/projects/team-a/runs/nope").await;
    assert_eq!(status, 404);
    let (status, _) = get("/projects/team-a/runs/r-a-2/results/8").await;
    assert_eq!(status, 404);
    let (status, _) = get("/projects/team-a/compare?a=r-a-2").await;
    assert_eq!(status, 400);
    server.stop().await;
}

/// A signed-in reader's GET of a console page: its status and HTML.
async fn reader(server: &Server) -> impl AsyncFn(&str) -> (u16, String) {
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

/// The places of the results a run page lists, in the page's order.
fn places_listed(html: &str) -> Vec<usize> {
    let table = &html[html.find("<table class=\"list results\">").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let mut places = Vec::new();
    for part in table.split("/results/").skip(1) {
        let n: usize = part[..part.find('"').unwrap()].parse().unwrap();
        if places.last() != Some(&n) {
            places.push(n);
        }
    }
    places
}

/// The text of the element with `id` (up to its first tag inside).
fn text_at(html: &str, id: &str) -> String {
    let at = html.find(&format!("id=\"{id}\"")).unwrap();
    let start = at + html[at..].find('>').unwrap() + 1;
    html[start..start + html[start..].find('<').unwrap()].trim().to_owned()
}

async fn the_run_page_filters_sorts_and_counts_its_results(backend: Backend) {
    let server = Server::start(backend).await;
    seed(&server).await;
    let get = reader(&server).await;
    const B: &str = "/projects/team-a/runs/r-a-3";
    // B: c1 passes twice, c2 fails twice, c3 passes then fails, c4 passes then a grader errs.
    let (status, page) = get(&format!("{B}?verdict=fail")).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(places_listed(&page), [2, 3, 5]);
    assert_eq!(text_at(&page, "results-position"), "1–3 of 3 (of 8 results)");
    // Each filter's values are counted with the other filters as they are.
    assert!(page.contains(">pass (4)<") && page.contains(">fail (3)<") && page.contains(">error (1)<"), "{page}");
    assert!(page.contains(">tone:polite (3)<") && page.contains(">billing (1)<"), "{page}");
    assert!(page.contains("<option value=\"fail\" selected>"), "{page}");
    // Filters combine; each result links to the case as the run ran it.
    let (_, page) = get(&format!("{B}?verdict=fail&label=billing")).await;
    assert_eq!(places_listed(&page), [5]);
    assert!(page.contains("href=\"/projects/team-a/datasets/support/versions/v3/cases/c3\""), "{page}");
    let (_, page) = get(&format!("{B}?grader=judge&scenario=default&verdict=error")).await;
    assert_eq!(places_listed(&page), [7]);
    let (_, page) = get(&format!("{B}?label=nothing-has-this")).await;
    assert_eq!(text_at(&page, "results-position"), "No result of the 8 fits these filters.");
    // Sorted: by score, highest first, results without one last; by case id; by duration.
    let (_, page) = get(&format!("{B}?sort=-score")).await;
    assert_eq!(places_listed(&page), [0, 1, 4, 6, 5, 2, 3, 7]);
    let (_, page) = get(&format!("{B}?sort=score")).await;
    assert_eq!(places_listed(&page), [2, 3, 5, 0, 1, 4, 6, 7]);
    let (_, page) = get(&format!("{B}?sort=-duration&verdict=pass")).await;
    assert_eq!(places_listed(&page), [0, 1, 4, 6]);
    let (_, page) = get(&format!("{B}?sort=verdict")).await;
    assert_eq!(places_listed(&page), [0, 1, 4, 6, 2, 3, 5, 7]);
    let (status, text) = get(&format!("{B}?sort=speed")).await;
    assert_eq!(status, 400);
    assert!(text.contains("`sort` is `speed`: say one of `case`, `verdict`"), "{text}");
    drop(get);
    server.stop().await;
}

/// Keeps two runs of `n` case runs each: every one passes in A and fails in B.
async fn flipped_runs(server: &Server, n: usize) {
    let store = server.store.in_project("team-a");
    let a = (0..n).map(|i| pass(&format!("k{i:03}"), 0, &[])).collect();
    let b = (0..n).map(|i| fail(&format!("k{i:03}"), 0, &[])).collect();
    keep(&store, "r-a-4", "2026-11-24T10:00:00Z", a).await;
    keep(&store, "r-a-5", "2026-11-24T11:00:00Z", b).await;
}

/// The `href` of the link of `class` inside the section `id` of a page.
fn link_in(html: &str, section: &str, class: &str) -> Option<String> {
    let start = html.find(&format!("id=\"{section}\""))?;
    let part = &html[start..];
    let part = &part[..part.find("</section>").unwrap_or(part.len())];
    let at = part.find(&format!("class=\"{class}\" href=\""))? + class.len() + 15;
    Some(part[at..at + part[at..].find('"')?].replace("&amp;", "&").replace("&#38;", "&"))
}

async fn a_comparison_pages_its_lists_and_shows_flipped_outputs_side_by_side(backend: Backend) {
    let server = Server::start(backend).await;
    seed(&server).await;
    let get = reader(&server).await;
    let (status, page) = get("/projects/team-a/compare?a=r-a-2&b=r-a-3").await;
    assert_eq!(status, 200, "{page}");
    // c2's first run flipped: both outputs and both sides' grades, each side linked to its
    // result and to the case version it ran.
    let flipped = &page[page.find("id=\"pass-to-fail\"").unwrap()..];
    let flipped = &flipped[..flipped.find("</section>").unwrap()];
    assert!(flipped.contains("<code>c2</code>") && !flipped.contains("<code>c3</code>"), "{flipped}");
    assert!(flipped.contains("outputs and grades side by side"), "{flipped}");
    let (a, b) = flipped.split_at(flipped.find("class=\"side-b\"").unwrap());
    assert!(a.contains("the answer to c2, run 0") && a.contains("exact_match gave 1"), "{a}");
    assert!(b.contains("the answer to c2, run 0") && b.contains("exact_match gave 0"), "{b}");
    assert!(flipped.contains("class=\"result-a\" href=\"/projects/team-a/runs/r-a-2/results/2\""), "{flipped}");
    assert!(flipped.contains("class=\"result-b\" href=\"/projects/team-a/runs/r-a-3/results/2\""), "{flipped}");
    assert!(flipped.contains("href=\"/projects/team-a/datasets/support/versions/v3/cases/c2\">v3<"), "{flipped}");
    assert!(page.contains("<th>unchanged (paired, same verdict)</th><td class=\"num\">4</td>"), "{page}");

    // 120 flips: paged 50 at a time, both ways, with positions; no link to an empty page.
    flipped_runs(&server, 120).await;
    let (status, page) = get("/projects/team-a/compare?a=r-a-4&b=r-a-5").await;
    assert_eq!(status, 200, "{page}");
    let pos = |html: &str, list: &str| {
        let at = html.find(&format!("id=\"{list}\"")).unwrap();
        let part = &html[at..];
        let s = part.find("class=\"position\">").unwrap() + 17;
        part[s..s + part[s..].find('<').unwrap()].to_owned()
    };
    assert_eq!(pos(&page, "pass-to-fail"), "1–50 of 120");
    assert_eq!(pos(&page, "pairs"), "1–50 of 120");
    assert!(link_in(&page, "pass-to-fail", "previous").is_none());
    let (_, second) = get(&link_in(&page, "pass-to-fail", "next").unwrap()).await;
    assert_eq!(pos(&second, "pass-to-fail"), "51–100 of 120");
    assert!(
        second.contains("<code>k050</code>")
            && second.contains("<code>k099</code>")
            && !second.contains("<code>k100</code>")
    );
    assert!(!second.contains("id=\"pairs\"") && second.contains("id=\"whole-comparison\""), "one list alone");
    let (_, last) = get(&link_in(&second, "pass-to-fail", "next").unwrap()).await;
    assert_eq!(pos(&last, "pass-to-fail"), "101–120 of 120");
    assert!(link_in(&last, "pass-to-fail", "next").is_none());
    let (_, back) = get(&link_in(&last, "pass-to-fail", "previous").unwrap()).await;
    assert_eq!(pos(&back, "pass-to-fail"), "51–100 of 120");
    let (_, start) = get(&link_in(&back, "pass-to-fail", "previous").unwrap()).await;
    assert_eq!(pos(&start, "pass-to-fail"), "1–50 of 120");
    assert!(link_in(&start, "pass-to-fail", "previous").is_none());
    // A list or cursor that is not one is refused.
    let (status, text) = get("/projects/team-a/compare?a=r-a-4&b=r-a-5&list=flips").await;
    assert_eq!(status, 400);
    assert!(text.contains("`list` is `flips`: say one of `pass-to-fail`"), "{text}");
    let (status, _) = get("/projects/team-a/compare?a=r-a-4&b=r-a-5&list=pairs&after=nonsense").await;
    assert_eq!(status, 400);
    drop(get);
    server.stop().await;
}

crate::on_both!(
    run_pages_answer_over_http,
    the_run_page_filters_sorts_and_counts_its_results,
    a_comparison_pages_its_lists_and_shows_flipped_outputs_side_by_side
);
