//! letta-evals suites read as experiments: every `suite*.yaml` of the letta-evals corpus either
//! maps onto an experiment (dataset, runs, limit, tags, graders, the Letta target kept aside) or
//! fails with the located error that names the key casebook cannot map. A mapped judge is then
//! run against a fake chat-completions judge on 127.0.0.1 to show the prompt it sends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use casebook_model::Case;
use casebook_runner::experiment::{Experiment, Located, Place, Scenario};
use casebook_runner::grade::GraderSpec;
use casebook_runner::record::RunOutput;
use serde_json::{Value, json};

/// The letta-evals part of the real-file corpus (`CASEBOOK_CORPUS`, see `scripts/corpus_cfg.rs`).
fn corpus() -> PathBuf {
    Path::new(env!("CASEBOOK_CORPUS_DIR")).join("letta-evals")
}

/// Every `suite*.yaml` under the corpus folder, relative to it, sorted.
fn suites() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, found: &mut Vec<String>) {
        for entry in fs_err::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                walk(&path, root, found);
            } else if name.starts_with("suite") && name.ends_with(".yaml") {
                found.push(path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut found = Vec::new();
    walk(&corpus(), &corpus(), &mut found);
    found.sort();
    found
}

fn parse(relative: &str) -> Result<Experiment, casebook_runner::experiment::ExperimentError> {
    let path = corpus().join(relative);
    Experiment::parse(&path, &fs_err::read_to_string(&path).unwrap())
}

/// What a corpus suite maps to.
struct Mapped {
    n_runs: u32,
    limit: Option<u64>,
    tags: &'static [&'static str],
    timeout_secs: f64,
    retries: u32,
    /// Each grader's name, casebook kind and weight.
    graders: &'static [(&'static str, &'static str, f64)],
    /// Where the Letta target is, and its message.
    target: (u64, u64, &'static str),
}

enum Outcome {
    Mapped(Mapped),
    /// Line, column, message.
    Fails(u64, u64, &'static str),
}

const LETTA_CODE: &str = "`target.kind: letta_code` runs a Letta Code agent, which casebook cannot start: give a \
                          target with `--target URL` (casebook's http protocol) or add `scenarios:`";

fn expected() -> Vec<(&'static str, Outcome)> {
    vec![
        (
            "custom-tool-grader-and-extractor/suite.yaml",
            Outcome::Fails(
                12,
                15,
                "`graders.ticket_classification.function: custom_evaluators.py:ticket_classification_grader` is a \
                 Python grader, which casebook cannot run",
            ),
        ),
        (
            "letta-code-simple-edit/suite.yaml",
            Outcome::Fails(
                5,
                1,
                "`setup_script: setup.py:prepare_evaluation` is a Python setup step, which casebook cannot run",
            ),
        ),
        (
            "multi-model-simple-rubric-grader/suite.yaml",
            Outcome::Mapped(Mapped {
                n_runs: 1,
                limit: None,
                tags: &[],
                timeout_secs: 60.0,
                retries: 2,
                graders: &[("quality", "llm_judge", 1.0)],
                target: (
                    5,
                    9,
                    "`target.kind: letta_code` runs a Letta Code agent, which casebook cannot start: give a target \
                     with `--target URL` (casebook's http protocol) or add `scenarios:`; its 2 `model_handles` \
                     (`openai/gpt-5-mini`, `anthropic/claude-haiku-4-5`) would each be a scenario",
                ),
            }),
        ),
        (
            "multiturn-per-turn-grading/suite.yaml",
            Outcome::Mapped(Mapped {
                n_runs: 1,
                limit: None,
                tags: &[],
                timeout_secs: 60.0,
                retries: 2,
                graders: &[("correctness", "contains", 1.0)],
                target: (5, 9, LETTA_CODE),
            }),
        ),
        (
            "per-sample-rubric/suite.yaml",
            Outcome::Mapped(Mapped {
                n_runs: 1,
                limit: None,
                tags: &[],
                timeout_secs: 60.0,
                retries: 2,
                graders: &[("quality", "llm_judge", 1.0)],
                target: (5, 9, LETTA_CODE),
            }),
        ),
        (
            "programmatic-agent-creation/suite.yaml",
            Outcome::Fails(
                4,
                1,
                "`setup_script: setup.py:prepare_evaluation` is a Python setup step, which casebook cannot run",
            ),
        ),
        (
            "reward-composition/suite.logical-and.yaml",
            Outcome::Fails(
                27,
                13,
                "`reward.function: rewards.py:quality_if_ascii` is a Python reward composer, which casebook cannot run",
            ),
        ),
        (
            "reward-composition/suite.weighted-average.yaml",
            Outcome::Fails(
                27,
                13,
                "`reward.function: rewards.py:weighted_quality_ascii` is a Python reward composer, which casebook \
                 cannot run",
            ),
        ),
    ]
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn every_corpus_suite_maps_or_names_what_cannot_map() {
    let found = suites();
    assert!(!found.is_empty(), "no suite*.yaml under {}", corpus().display());
    let expected = expected();
    let listed: Vec<&str> = expected.iter().map(|(file, _)| *file).collect();
    assert_eq!(found, listed, "every corpus suite has an expected outcome here, and only those");
    for (file, outcome) in expected {
        match outcome {
            Outcome::Fails(line, column, message) => {
                let e = parse(file).expect_err(file);
                assert_eq!((e.at, e.message.as_str()), (Place { line, column }, message), "{file}");
                assert!(e.hint.is_some_and(|hint| !hint.is_empty()), "{file}: says what to do");
                assert!(e.file.ends_with(file), "{file}: the error names the file: {}", e.file);
            }
            Outcome::Mapped(want) => {
                let e = parse(file).unwrap_or_else(|e| panic!("{file}: {e}"));
                assert_eq!(e.dataset, "dataset.jsonl", "{file}: relative to the suite, as casebook's are");
                assert_eq!(
                    (e.n_runs, e.limit, e.tags.as_slice(), e.timeout_secs, e.retries),
                    (
                        want.n_runs,
                        want.limit,
                        want.tags.iter().map(|t| t.to_string()).collect::<Vec<_>>().as_slice(),
                        want.timeout_secs,
                        want.retries
                    ),
                    "{file}"
                );
                let graders: Vec<(String, String, f64)> = e
                    .graders
                    .iter()
                    .map(|g| {
                        let weight = g.value.get("weight").map_or(1.0, |w| w.as_f64().unwrap());
                        (g.value["name"].as_str().unwrap().into(), g.value["kind"].as_str().unwrap().into(), weight)
                    })
                    .collect();
                let want_graders: Vec<(String, String, f64)> =
                    want.graders.iter().map(|(n, k, w)| (n.to_string(), k.to_string(), *w)).collect();
                assert_eq!(graders, want_graders, "{file}");
                let (line, column, message) = want.target;
                assert!(e.scenarios.is_empty(), "{file}: a Letta agent is no scenario");
                let target = e.missing_target().expect(file);
                assert_eq!((target.at, target.message.as_str()), (Place { line, column }, message), "{file}");
                assert!(target.hint.is_some(), "{file}");
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn a_command_line_target_stands_in_for_the_letta_agent() {
    let mut e = parse("multiturn-per-turn-grading/suite.yaml").unwrap();
    assert!(e.missing_target().is_some());
    // What `casebook run SUITE --target URL` does.
    e.scenarios = vec![Scenario {
        name: "default".into(),
        target: Located { value: json!("http://127.0.0.1:1/turn"), at: Place::default() },
        noise: None,
        mcp: true,
        max_steps: None,
    }];
    assert_eq!(e.missing_target(), None);
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn mapped_tool_graders_build() {
    let e = parse("multiturn-per-turn-grading/suite.yaml").unwrap();
    let spec: GraderSpec = serde_json::from_value(e.graders[0].value.clone()).unwrap();
    assert_eq!((spec.name(), spec.kind(), spec.weight), ("correctness", "contains", 1.0));
    assert_eq!(e.graders[0].at, Place { line: 11, column: 5 }, "where a build error would point");
    spec.build().unwrap();
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn mapped_judges_lack_only_an_endpoint() {
    for file in ["multi-model-simple-rubric-grader/suite.yaml", "per-sample-rubric/suite.yaml"] {
        let e = parse(file).unwrap();
        let judge = &e.graders[0].value;
        assert_eq!(
            (judge["model"].as_str(), judge["api_key_env"].as_str()),
            (Some("gpt-5-mini"), Some("OPENAI_API_KEY"))
        );
        let err = serde_json::from_value::<GraderSpec>(judge.clone()).unwrap_err().to_string();
        assert!(err.contains("grader `quality`: missing field `endpoint`"), "{file}: {err}");
    }
    let e = parse("per-sample-rubric/suite.yaml").unwrap();
    assert_eq!(e.graders[0].value["timeout_secs"], json!(120.0), "the judge's `timeout`");
}

/// A fake chat-completions judge on 127.0.0.1 that records each prompt and gives score 0.75.
async fn fake_judge() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(|State(seen): State<Arc<Mutex<Vec<Value>>>>, body: String| async move {
                seen.lock().unwrap().push(serde_json::from_str(&body).unwrap());
                axum::Json(json!({"choices": [{"index": 0, "message": {"role": "assistant",
                    "content": "{\"score\": 0.75, \"rationale\": \"fine\"}"}}]}))
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}/v1"), seen)
}

/// The user prompt the suite's judge sends for `case` and an answer.
async fn prompt_for(suite: &str, case: Value) -> String {
    prompt_of(parse(suite).unwrap(), case).await
}

/// The user prompt the judge of `suite` (a parsed suite) sends for `case` and an answer.
async fn prompt_of(suite: Experiment, case: Value) -> String {
    let (endpoint, seen) = fake_judge().await;
    let mut judge = suite.graders[0].value.clone();
    judge["endpoint"] = json!(endpoint);
    let mut spec: GraderSpec = serde_json::from_value(judge).unwrap();
    spec.resolve_env(|name| (name == "OPENAI_API_KEY").then(|| "sk-test".to_owned()));
    let grader = spec.build().unwrap();
    let case: Case = serde_json::from_value(case).unwrap();
    let answer = json!("```\n /\\_/\\\n( o.o )\n```");
    let run = RunOutput {
        output: answer.clone(),
        per_turn: vec![answer],
        trajectory: Vec::new(),
        millis: 1,
        ..RunOutput::default()
    };
    let grade = grader.grade(&case, &run).await.unwrap();
    assert_eq!(grade.score, 0.75);
    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies[0]["model"], "gpt-5-mini");
    bodies[0]["messages"][1]["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
async fn the_suites_rubric_is_the_judges_prompt_with_its_placeholders_filled() {
    let prompt = prompt_for(
        "multi-model-simple-rubric-grader/suite.yaml",
        json!({"id": "cat", "input": "Draw a cat", "expected": {"rubric_vars": {"reference_ascii": "=^.^="}}}),
    )
    .await;
    assert!(prompt.starts_with("You are evaluating an agent's ASCII art submission"), "{prompt}");
    assert!(prompt.contains("Task given to the agent:\nDraw a cat\n"), "{prompt}");
    assert!(prompt.contains("Agent's Submission:\n```\n /\\_/\\\n( o.o )\n```\n"), "{prompt}");
    assert!(prompt.contains("```\n=^.^=\n```"), "`{{reference_ascii}}` from rubric_vars: {prompt}");
    assert!(prompt.contains("(```art```)"), "literal text stays: {prompt}");
    assert!(!prompt.contains("## The agent's answer"), "the rubric places the answer itself: {prompt}");
}

#[tokio::test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
async fn a_samples_own_rubric_replaces_the_suites() {
    let rubric = "You are evaluating a cat.\n\nTask:\n{input}\n\nSubmission:\n{submission}\n\nScore it.";
    let prompt = prompt_for(
        "per-sample-rubric/suite.yaml",
        json!({"id": "cat", "input": "Draw a cat", "expected": {"rubric": rubric}}),
    )
    .await;
    assert_eq!(
        prompt,
        "You are evaluating a cat.\n\nTask:\nDraw a cat\n\nSubmission:\n```\n /\\_/\\\n( o.o )\n```\n\nScore it."
    );
    let prompt =
        prompt_for("per-sample-rubric/suite.yaml", json!({"id": "fish", "input": "Draw a fish", "expected": {}})).await;
    assert!(prompt.starts_with("You are evaluating an ASCII art submission."), "the suite's rubric: {prompt}");
    assert!(prompt.contains("suite-level default rubric — used when"), "{prompt}");
}

/// The judge of a suite of our own (so a clone without the corpus checks the same): the rubric
/// file is read beside the suite, its placeholders filled from the case and the answer (other
/// braces stay as written), and a case's own rubric replaces it.
#[tokio::test]
async fn a_rubric_file_of_our_own_is_the_judges_prompt_and_a_cases_rubric_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    fs_err::write(
        dir.path().join("rubric.txt"),
        "Évaluez le dessin.\n\nConsigne :\n{input}\n\nRéponse :\n{submission}\n\nModèle :\n{reference}\n\n\
         Gardez {{ces accolades}} telles quelles.",
    )
    .unwrap();
    let file = dir.path().join("suite.yaml");
    let text = "dataset: dataset.jsonl\ntarget:\n  kind: letta_code\ngraders:\n  quality:\n    kind: model_judge\n    \
                prompt_path: rubric.txt\n    model: gpt-5-mini\n    provider: openai\n";
    let suite = || Experiment::parse(&file, text).unwrap();
    let prompt = prompt_of(
        suite(),
        json!({"id": "cat", "input": "Dessine un chat", "expected": {"rubric_vars": {"reference": "=^.^="}}}),
    )
    .await;
    assert_eq!(
        prompt,
        "Évaluez le dessin.\n\nConsigne :\nDessine un chat\n\nRéponse :\n```\n /\\_/\\\n( o.o )\n```\n\nModèle :\n=^.^=\n\n\
         Gardez {{ces accolades}} telles quelles."
    );
    let own = "Juge ceci.\nTâche : {input}\nRéponse : {submission}";
    let prompt =
        prompt_of(suite(), json!({"id": "fish", "input": "Dessine un poisson", "expected": {"rubric": own}})).await;
    assert_eq!(prompt, "Juge ceci.\nTâche : Dessine un poisson\nRéponse : ```\n /\\_/\\\n( o.o )\n```");
}
