//! promptfoo tests (YAML list or configuration, JSON, JSONL, CSV): detection, the native shape,
//! the round trip, located errors, what the format cannot hold, and `run` grading each case by
//! its own asserts when the experiment lists no graders.
// Helpers of the tests (fixtures, a fake judge) panic like the tests do.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::cli::{Folder, at, casebook, cb, jsonl, run, to_native, validate};
use crate::inspect_ai::csv_records;

fn example(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/promptfoo").join(name)
}

/// The JSON value of a file of one of promptfoo's syntaxes (CSV: records as objects of cells).
fn value(text: &str, syntax: &str) -> Value {
    match syntax {
        "yaml" => casebook_formats::yaml::parse(text).unwrap().to_value(&casebook_formats::pointer::Ptr::ROOT).unwrap(),
        "json" => serde_json::from_str(text).unwrap(),
        "jsonl" => Value::Array(jsonl(text)),
        _ => {
            let mut records = csv_records(text);
            let header = records.remove(0);
            Value::Array(
                records
                    .into_iter()
                    .map(|r| Value::Object(header.iter().cloned().zip(r.into_iter().map(Value::String)).collect()))
                    .collect(),
            )
        }
    }
}

#[test]
fn tests_are_detected_and_read_into_the_case_model() {
    // A YAML list: one variable of text is the input as text, asserts and threshold are
    // expectations, description and metadata kept, unknown keys (`options`) in metadata.
    let (_, cases) = to_native(&example("tests.yaml"));
    assert_eq!(cases.len(), 4);
    assert!(cases.iter().all(|c| c["provenance"]["format"] == "promptfoo"), "{cases:?}");
    assert_eq!(cases[0]["input"], "What is the capital of France?");
    assert_eq!(cases[0]["description"], "Capital of France");
    assert_eq!(
        cases[0]["expected"],
        json!({"assert": [{"type": "contains", "value": "Paris"}, {"type": "not-icontains", "value": "london"}]})
    );
    assert_eq!(cases[1]["expected"]["threshold"], 0.5);
    assert_eq!(cases[1]["metadata"], json!({"category": "math", "difficulty": "easy"}));
    assert_eq!(cases[2]["input"], json!({"language": "French", "text": "Hello world"}));
    assert_eq!(cases[3]["input"], "Réponds en JSON avec la clé « réponse »");
    assert_eq!(cases[3]["metadata"], json!({"options": {"provider": "openai:gpt-4o-mini"}}));
    assert!(cases.iter().all(|c| c["id"].as_str().unwrap().starts_with("t-")), "ids derived from the task");
    // A configuration with its tests inline, and its `defaultTest` applied to each as promptfoo
    // applies it: the default variables under the test's own, the default asserts first.
    let (_, cases) = to_native(&example("promptfooconfig.yaml"));
    assert_eq!(cases.len(), 3);
    let no_ai = json!({"type": "not-icontains", "value": "as an AI"});
    assert_eq!(cases[0]["input"], json!({"language": "French", "input": "Hello world"}));
    assert_eq!(cases[0]["expected"]["assert"], json!([no_ai, {"type": "contains", "value": "Bonjour"}]));
    assert_eq!(cases[1]["input"], json!({"language": "German", "input": "How's it going?"}));
    assert_eq!(cases[1]["expected"]["assert"], json!([no_ai, {"type": "contains-any", "value": ["Wie", "geht"]}]));
    assert_eq!(cases[2]["input"], json!({"language": "French", "input": "Good night"}));
    assert_eq!(cases[2]["expected"]["assert"], json!([no_ai]));
    // Tests written on their own (JSON Lines) are the tests promptfoo runs, defaults in them.
    let out = run(casebook().arg("convert").arg(example("promptfooconfig.yaml")).args([
        "--to",
        "promptfoo",
        "--syntax",
        "jsonl",
    ]));
    out.expect_status(0);
    let first: serde_json::Value = serde_json::from_str(out.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        first,
        json!({"vars": {"language": "French", "input": "Hello world"}, "assert": [no_ai, {"type": "contains", "value": "Bonjour"}]})
    );
    // JSON and JSONL, numbers in the variables.
    let (_, cases) = to_native(&example("tests.json"));
    assert_eq!(cases[1]["expected"]["assert"][0]["type"], "llm-rubric");
    let (_, cases) = to_native(&example("tests.jsonl"));
    assert_eq!(cases[0]["input"], json!({"x": 5, "y": 3}));
    // CSV: `__expected` cells are asserts as promptfoo reads them, a multi-line quoted cell,
    // `__metadata:KEY[]` lists with an escaped comma, non-ASCII text.
    let (_, cases) = to_native(&example("tests.csv"));
    assert_eq!(cases.len(), 3);
    assert!(cases.iter().all(|c| c["provenance"]["format"] == "promptfoo"), "{cases:?}");
    assert_eq!(
        cases[0]["expected"]["assert"],
        json!([{"type": "equals", "value": "4"}, {"type": "contains", "value": "4"}])
    );
    assert_eq!(cases[1]["input"], "Write a haiku about\nthe sea");
    assert_eq!(cases[2]["expected"]["assert"][1], json!({"type": "not-contains", "value": "Paris"}));
    assert_eq!(cases[2]["metadata"], json!({"category": "geography", "tags": ["europe", "capitals,cities"]}));
    for file in ["tests.yaml", "promptfooconfig.yaml", "tests.json", "tests.jsonl", "tests.csv"] {
        validate(&example(file)).expect_status(0);
    }
}

#[test]
fn tests_to_casebook_and_back_give_the_same_values() {
    let dir = Folder::new();
    for file in ["tests.yaml", "promptfooconfig.yaml", "tests.json", "tests.jsonl", "tests.csv"] {
        let syntax = file.rsplit('.').next().unwrap();
        let source = example(file);
        let original = value(&fs_err::read_to_string(&source).unwrap(), syntax);
        for native in ["jsonl", "yaml", "json"] {
            let middle = dir.join(&format!("{file}.{native}"));
            run(casebook().arg("convert").arg(&source).args(["--to", "casebook", "-o"]).arg(&middle)).expect_status(0);
            let out = dir.join(&format!("{file}.{native}.back.{syntax}"));
            run(casebook().arg("convert").arg(&middle).args(["--to", "promptfoo", "-o"]).arg(&out)).expect_status(0);
            let back = fs_err::read_to_string(&out).unwrap();
            assert_eq!(value(&back, syntax), original, "{file} via {native}:\n{back}");
        }
        let out = dir.join(&format!("{file}.same.{syntax}"));
        run(casebook().arg("convert").arg(&source).args(["--to", "promptfoo", "-o"]).arg(&out)).expect_status(0);
        assert_eq!(value(&fs_err::read_to_string(&out).unwrap(), syntax), original, "{file}");
    }
    // YAML tests written as CSV: asserts as promptfoo's cell syntax, read back the same.
    let yaml = dir.file(
        "t.yaml",
        "- description: Capital\n  vars:\n    question: Capital of France?\n  assert:\n    - type: icontains\n      value: paris\n    - type: similar\n      value: Paris\n      threshold: 0.9\n",
    );
    let csv = dir.join("t.csv");
    run(casebook().arg("convert").arg(&yaml).args(["--to", "promptfoo", "-o"]).arg(&csv)).expect_status(0);
    let text = fs_err::read_to_string(&csv).unwrap();
    assert_eq!(
        text,
        "question,__description,__expected1,__expected2\nCapital of France?,Capital,icontains:paris,similar(0.9):Paris\n"
    );
    let back = dir.join("back.yaml");
    run(casebook().arg("convert").arg(&csv).args(["--to", "promptfoo", "-o"]).arg(&back)).expect_status(0);
    assert_eq!(
        value(&fs_err::read_to_string(&back).unwrap(), "yaml"),
        value(&fs_err::read_to_string(&yaml).unwrap(), "yaml")
    );
}

#[test]
fn other_formats_are_still_told_apart() {
    let dir = Folder::new();
    let files = [
        (
            "health.json",
            r#"[{"name": "n", "category": "RCA", "difficulty": "Easy", "initialPrompt": "why?", "expectedOutcomes": ["x"]}]"#,
            "agenthealth",
        ),
        ("cases.yaml", "name: d\ncases:\n  - {id: a, input: hi}\n", "(native: no provenance)"),
        ("lab.yaml", "name: d\nitems:\n  - {id: a, prompt: hi, expected_answer: there}\n", "maslab"),
        ("letta.csv", "input,ground_truth\nhi,there\n", "letta"),
        ("promptfoo.csv", "question,__expected\nhi,contains: there\n", "promptfoo"),
        (
            "promptfoo.jsonl",
            "{\"vars\": {\"q\": \"hi\"}, \"assert\": [{\"type\": \"equals\", \"value\": \"x\"}]}\n",
            "promptfoo",
        ),
        ("promptfoo.json", "[{\"vars\": {\"q\": \"hi\"}}]", "promptfoo"),
        ("promptfoo.yaml", "- vars: {q: hi}\n", "promptfoo"),
    ];
    for (name, text, format) in files {
        let (_, cases) = to_native(&dir.file(name, text));
        let found = cases[0]["provenance"]["format"].as_str().unwrap_or("(native: no provenance)");
        assert_eq!(found, format, "{name}");
    }
}

#[test]
fn problems_are_located() {
    let dir = Folder::new();
    // An assert without `type` (line 5, where its mapping starts), a threshold that is text
    // (line 11); `vars` that are a list name files of variables to promptfoo, and none is
    // there (a warning at each, line 7).
    let file = dir.file(
        "bad.yaml",
        "- vars:\n    q: one\n  assert:\n    - type: contains\n    - value: two\n- description: no vars\n  vars: [a, b]\n- vars:\n    q: three\n  assert:\n    - {type: equals, value: x, threshold: high}\n",
    );
    let checked = validate(&file);
    checked.expect_status(1);
    assert_eq!(
        checked.locations(),
        [
            at("E-missing-field", 5, 7, "/0/assert/1"),
            at("W-file-var", 7, 10, "/1/vars/0"),
            at("W-file-var", 7, 13, "/1/vars/1"),
            at("E-wrong-type", 11, 43, "/2/assert/0/threshold"),
        ]
    );
    // CSV: a `__config` threshold that is not a number, which promptfoo refuses, on the physical
    // line its record starts on (after a record of two lines).
    let file = dir.file(
        "bad.csv",
        "q,__expected,__config:__expected:threshold\n\"two\nlines\",contains: a,0.5\nb,contains: b,high\n",
    );
    let checked = validate(&file);
    checked.expect_status(1);
    assert_eq!(checked.locations(), [at("E-invalid-value", 4, 15, "/__config:__expected:threshold")]);
}

/// promptfoo runs a test with list variables once per combination; casebook reads one case and
/// says so where the variables are, unless the test turns the expansion off.
#[test]
fn list_variables_promptfoo_would_expand_are_said_to_be_read_as_one_case() {
    let dir = Folder::new();
    let file = dir.file(
        "lists.yaml",
        "- vars:\n    lang: [French, German]\n    tone: [kind, curt, dry]\n    q: hi\n\
         - vars: {lang: [French, German]}\n  options: {disableVarExpansion: true}\n\
         - vars: {numbers: [1, 2]}\n",
    );
    let checked = validate(&file);
    checked.expect_status(0);
    assert_eq!(checked.locations(), [at("W-unexpanded-vars", 2, 5, "/0/vars")]);
    let message = checked.diagnostics()[0]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("`lang` (2), `tone` (3), 6 times"), "{message}");
}

/// promptfoo reads a `file://` variable from its file when it runs a test; casebook keeps the
/// reference, says so where it is (a `defaultTest` variable once, however many tests take it),
/// and writes it back as it was.
#[test]
fn file_variables_are_said_to_be_kept_as_references() {
    let dir = Folder::new();
    let text = "defaultTest:\n  vars:\n    style: file://style.md\n\
                tests:\n  - vars:\n      q: hi\n  - vars:\n      q: file://inputs/q2.txt\n  - vars: {q: bye, style: plain}\n";
    let file = dir.file("promptfooconfig.yaml", text);
    let checked = validate(&file);
    checked.expect_status(0);
    assert_eq!(
        checked.locations(),
        [at("W-file-var", 3, 12, "/defaultTest/vars/style"), at("W-file-var", 8, 10, "/tests/1/vars/q")]
    );
    let message = checked.diagnostics()[1]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("`q` from the file `inputs/q2.txt`"), "{message}");
    assert!(message.contains("keeps `file://inputs/q2.txt` itself as the value"), "{message}");
    let (_, cases) = to_native(&file);
    assert_eq!(cases[1]["input"], json!({"style": "file://style.md", "q": "file://inputs/q2.txt"}));
    let back = run(casebook().arg("convert").arg(&file).args(["--to", "promptfoo", "-q"]));
    back.expect_status(0);
    assert_eq!(value(&back.stdout, "yaml"), value(text, "yaml"));

    // In CSV, at the cell.
    let csv = dir.file("tests.csv", "q,__expected\nhello,contains: hi\nfile://q.txt,contains: x\n");
    let checked = validate(&csv);
    checked.expect_status(0);
    assert_eq!(checked.locations(), [at("W-file-var", 3, 1, "/vars/q")]);
}

#[test]
fn what_tests_cannot_hold_is_refused_or_dropped_with_lossy() {
    let dir = Folder::new();
    let file = dir.file(
        "cases.jsonl",
        "{\"id\": \"k1\", \"input\": \"hi\", \"expected\": {\"output\": \"x\"}, \"labels\": [\"a\"]}\n",
    );
    let refused = run(casebook().arg("convert").arg(&file).args(["--to", "promptfoo", "--format", "json"]));
    refused.expect_status(1);
    assert_eq!(refused.stdout, "");
    assert!(refused.stderr.contains("cannot hold: labels, expected.output"), "{refused:?}");
    let lossy = run(casebook()
        .arg("convert")
        .arg(&file)
        .args(["--to", "promptfoo", "--lossy", "-q", "-o"])
        .arg(dir.join("o.jsonl")));
    lossy.expect_status(0);
    assert_eq!(
        jsonl(&fs_err::read_to_string(dir.join("o.jsonl")).unwrap()),
        [json!({"id": "k1", "vars": {"input": "hi"}})]
    );
    // An assert promptfoo's CSV syntax cannot say (a weight) keeps a test out of CSV.
    let weighted = dir.file("w.yaml", "- vars: {q: hi}\n  assert:\n    - {type: contains, value: hi, weight: 3}\n");
    let refused =
        run(casebook().arg("convert").arg(&weighted).args(["--to", "promptfoo", "-o"]).arg(dir.join("w.csv")));
    refused.expect_status(1);
    assert!(
        refused.stderr.contains("cannot hold: expected.assert (it reads back from CSV as something else)"),
        "{refused:?}"
    );
}

/// A fake chat-completions judge: it says `pass` when the rubric it is sent mentions `polite`,
/// and records every prompt.
fn judge() -> (String, Arc<Mutex<Vec<String>>>) {
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let seen = prompts.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new().route(
                "/v1/chat/completions",
                axum::routing::post(move |body: String| {
                    let seen = seen.clone();
                    async move {
                        let request: Value = serde_json::from_str(&body).unwrap();
                        let prompt = request["messages"][1]["content"].as_str().unwrap().to_owned();
                        let pass = prompt.contains("polite");
                        seen.lock().unwrap().push(prompt);
                        let verdict =
                            json!({"score": if pass { 0.9 } else { 0.1 }, "pass": pass, "rationale": "judged"});
                        axum::Json(json!({"choices": [{"message": {"content": verdict.to_string()}}]}))
                    }
                }),
            );
            axum::serve(listener, app).await.unwrap();
        });
    });
    (format!("http://{}/v1", rx.recv().unwrap()), prompts)
}

/// With no graders in the experiment, each test is graded by its own asserts: those casebook
/// maps onto its graders decide, an `llm-rubric` goes to the experiment's judge, the others are
/// reported and a test with nothing else is never a pass; no assert value reaches the agent.
#[test]
fn a_run_without_graders_grades_each_test_by_its_asserts() {
    let dir = Folder::new();
    let (url, bodies) = crate::run::serve(crate::run::Behaviour::Shout);
    let (judge_url, prompts) = judge();
    dir.file(
        "tests.yaml",
        "\
- description: passes
  vars: {question: hello there}
  assert:
    - {type: contains, value: HELLO}
    - {type: not-icontains, value: SECRET-ASSERT-1}
- description: fails
  vars: {question: goodbye}
  assert:
    - {type: equals, value: SECRET-ASSERT-2}
- description: only javascript
  vars: {question: anything}
  assert:
    - {type: javascript, value: output.includes('SECRET-ASSERT-3')}
- description: judged
  vars: {question: be nice}
  assert:
    - {type: llm-rubric, value: 'is polite, SECRET-ASSERT-4'}
    - {type: cost, threshold: 0.01}
- description: threshold
  vars: {question: weighted}
  threshold: 0.6
  assert:
    - {type: contains, value: WEIGHTED, weight: 3}
    - {type: contains, value: SECRET-ASSERT-5}
",
    );
    dir.file(
        "exp.yaml",
        format!("name: pf\ndataset: tests.yaml\ntarget: '{url}'\nthreshold: 0.5\njudge: {{endpoint: '{judge_url}', model: m}}\n"),
    );
    let out = run(cb(&dir).args(["run", "exp.yaml", "--format", "json"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("warning: 2 of the cases' asserts cannot be checked by casebook and are left out of the grading: `cost` (1), `javascript` (1)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "warning: 1 case with nothing else to check will be ungraded: they count as not passed \
             (`--exclude-ungraded` leaves them out of the pass rate)"
        ),
        "{}",
        out.stderr
    );
    let summary = crate::run::summary(&out.stdout);
    let totals = &summary["totals"];
    assert_eq!(
        (totals["passed"].as_u64(), totals["failed"].as_u64(), totals["ungraded"].as_u64(), totals["errors"].as_u64()),
        (Some(3), Some(1), Some(1), Some(0)),
        "{summary}"
    );
    let mut graders: Vec<&str> =
        summary["graders"].as_array().unwrap().iter().map(|g| g["grader"].as_str().unwrap()).collect();
    graders.sort_unstable();
    assert_eq!(
        graders,
        ["assert:contains", "assert:contains#2", "assert:equals", "assert:llm-rubric", "assert:not-icontains"]
    );
    // The judge was asked with the assert's value as the rubric.
    let prompts = prompts.lock().unwrap().clone();
    assert_eq!(prompts.len(), 1);
    assert!(prompts[0].contains("# Rubric\nis polite, SECRET-ASSERT-4"), "{}", prompts[0]);
    // The agent got the variables, never an assert.
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 5);
    assert!(bodies.iter().any(|b| b.contains("hello there")));
    for body in &bodies {
        assert!(!body.contains("SECRET-ASSERT") && !body.contains("\"assert\""), "{body}");
    }
}

/// With graders named, the tests' own asserts are not checked, and the run says so rather than
/// let the graders' verdict pass for the asserts'.
#[test]
fn a_run_with_graders_says_it_leaves_the_asserts_unchecked() {
    let dir = Folder::new();
    dir.file(
        "tests.yaml",
        "\
- vars: {question: one}
  assert: [{type: equals, value: never}]
- vars: {question: two}
  assert: [{type: contains, value: two}, {type: javascript, value: 'false'}]
- vars: {question: three}
",
    );
    let out =
        run(cb(&dir).args(["run", "--dataset", "tests.yaml", "--target", "builtin:echo", "--grader", "contains"]));
    assert!(
        out.stderr.contains(
            "warning: 2 cases carry their own asserts, which this run does not check (it grades by `--grader`); \
             run without graders to grade each case by its asserts"
        ),
        "{}",
        out.stderr
    );
    // Without asserts anywhere, nothing to say.
    dir.file("plain.yaml", "- vars: {question: one}\n");
    let out =
        run(cb(&dir).args(["run", "--dataset", "plain.yaml", "--target", "builtin:echo", "--grader", "contains"]));
    assert!(
        out.stderr.contains("1 case × 1 scenario × 1 = 1 run\n") && !out.stderr.contains("asserts"),
        "{}",
        out.stderr
    );
}

/// Without graders and without an assert casebook can check, nothing would grade the run: it is
/// refused before any agent is called.
#[test]
fn a_run_with_nothing_to_check_is_refused() {
    let dir = Folder::new();
    let (url, bodies) = crate::run::serve(crate::run::Behaviour::Shout);
    dir.file("tests.yaml", "- vars: {q: hi}\n  assert:\n    - {type: python, value: 'True'}\n");
    let out = run(cb(&dir).args(["run", "--dataset", "tests.yaml", "--target", &url]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(
        out.stderr.contains(
            "nothing would grade the answers (the cases' asserts are none casebook can check: `python` (1)): add `--grader KIND`"
        ),
        "{}",
        out.stderr
    );
    assert!(bodies.lock().unwrap().is_empty(), "no agent was called");
}

/// A configuration whose tests and variables are in other files (our own files, in the shape of
/// promptfoo's "Import tests from separate files" guide and of a third-party payments suite
/// with `vars: ../vars/vars_*.yaml`): the files' tests are the dataset's, a changed file is a
/// new version, references that name nothing are kept with a warning where they are, and the
/// two compatible checks of one question are not a conflict.
#[test]
fn tests_in_other_files_are_part_of_the_dataset_and_its_versions() {
    let dir = Folder::new();
    dir.file(
        "suite/tests/pagamentos.yaml",
        "- vars: ../vars/vars_*.yaml\n  assert:\n    - {type: icontains, value: pix}\n\
         - vars: ../vars/vars_*.yaml\n  assert:\n    - {type: icontains-all, value: [pix, boleto, cartão]}\n",
    );
    dir.file("suite/vars/vars_1.yaml", "question: Quais formas de pagamento?\n");
    dir.file("suite/vars/vars_2.yaml", "lang: pt-BR\n");
    let config = dir.file(
        "suite/promptfooconfig.yaml",
        "prompts: [file://prompt.txt]\ntests:\n  - file://tests/*.yaml\n  - file://extra/*.yaml\n  - vars: {question: Aceita Pix?}\n",
    );
    // The pattern that matches nothing is kept, with a warning at it.
    let checked = validate(&config);
    checked.expect_status(0);
    assert_eq!(checked.locations(), [at("W-file-var", 4, 5, "/tests/1")]);
    let (_, cases) = to_native(&config);
    assert_eq!(cases.len(), 3);
    assert_eq!(cases[0]["input"], json!({"question": "Quais formas de pagamento?", "lang": "pt-BR"}));
    // `icontains: pix` and `icontains-all: [pix, …]` on one question: the same question twice.
    let linted = run(cb(&dir).args(["lint", "--format", "json"]).arg(&config));
    let codes: Vec<String> = linted.diagnostics().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect();
    assert!(codes.contains(&"W-duplicate-input".to_owned()), "{linted:?}");
    assert!(!codes.contains(&"W-conflicting-expectations".to_owned()), "{linted:?}");

    // A referenced variables file that changes is a new version of the dataset.
    run(cb(&dir).arg("init")).expect_status(0);
    run(cb(&dir).args(["import", "suite/promptfooconfig.yaml", "--dataset", "pagamentos"])).expect_status(0);
    dir.file("suite/vars/vars_2.yaml", "lang: pt-PT\n");
    let committed = run(cb(&dir).args(["commit", "pagamentos", "suite/promptfooconfig.yaml"]));
    committed.expect_status(0);
    let diff = run(cb(&dir).args(["diff", "pagamentos@v1", "pagamentos@v2"]));
    diff.expect_status(0);
    // The cases' ids come from what they ask, which changed: two cases replaced.
    assert_eq!(diff.stdout.lines().filter(|l| l.starts_with("+ t-")).count(), 2, "{diff:?}");
    assert_eq!(diff.stdout.lines().filter(|l| l.starts_with("- t-")).count(), 2, "{diff:?}");
}

/// A configuration whose tests are a pattern of files (`tests: file://tests/*.yaml`, the shape
/// of promptfoo's "Import tests from separate files" guide) converted to promptfoo: the tests
/// are written inline, which promptfoo reads as the same tests, so the conversion succeeds
/// without `--lossy` and says which references were written inline (on stderr as a warning,
/// in `--format json` as a diagnostic).
#[test]
fn tests_from_other_files_convert_to_promptfoo_inline_with_a_note() {
    let dir = Folder::new();
    dir.file("suite/tests/a.yaml", "- vars: {question: Tem boleto?}\n  assert:\n    - {type: icontains, value: sim}\n");
    dir.file("suite/tests/b.yaml", "- description: troco\n  vars: {question: E o troco?}\n");
    let config = dir.file("suite/promptfooconfig.yaml", "prompts: [file://prompt.txt]\ntests: file://tests/*.yaml\n");
    let out = dir.join("suite/inline.yaml");
    let converted = run(casebook().arg("convert").arg(&config).args(["--to", "promptfoo", "-o"]).arg(&out));
    converted.expect_status(0);
    assert!(converted.stderr.contains("W-inlined"), "{converted:?}");
    assert!(
        converted.stderr.contains(
            "the tests read from `file://tests/*.yaml` are written inline: `promptfoo` reads the same tests from the one file written"
        ),
        "{converted:?}"
    );
    // Read back: the same cases, now inline in the one file.
    let (_, before) = to_native(&config);
    let (_, after) = to_native(&out);
    let shown = |cases: &[Value]| -> Vec<(Value, Value, Value)> {
        cases.iter().map(|c| (c["input"].clone(), c["description"].clone(), c["expected"].clone())).collect()
    };
    assert_eq!(shown(&before), shown(&after));
    assert_eq!(shown(&after).len(), 2);
    let text = fs_err::read_to_string(&out).unwrap();
    assert!(!text.contains("file://tests"), "{text}");
    // As JSON: one diagnostic, located at the first test of the pattern.
    let json = run(casebook()
        .arg("convert")
        .arg(&config)
        .args(["--to", "promptfoo", "--overwrite", "--format", "json", "-o"])
        .arg(&out));
    json.expect_status(0);
    let said = json.stderr_diagnostics();
    let codes: Vec<&str> = said.iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["W-inlined"], "{json:?}");
}

/// A reference casebook keeps unread (`W-file-var`: a pattern matching no file) rides beside
/// its neighbouring test, and is kept by the dataset too: exported with `--where` selecting
/// none of its neighbours, the configuration still names it (at the end of `tests`). The
/// configuration is of our own, in the shape of promptfoo's "Import tests from separate files"
/// guide.
#[test]
fn a_kept_reference_survives_its_neighbours_being_filtered_out() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    let config = dir.file(
        "suite/promptfooconfig.yaml",
        "prompts: [file://prompt.txt]\ntests:\n  - vars: {q: one}\n  - file://missing/*.yaml\n  - vars: {q: two}\n  - vars: {q: three}\n",
    );
    run(cb(&dir).args(["import", "--dataset", "suite"]).arg(&config)).expect_status(0);
    let out = run(cb(&dir).args([
        "export",
        "suite",
        "--where",
        "input == \"three\"",
        "--to",
        "promptfoo",
        "--syntax",
        "yaml",
        "-q",
    ]));
    out.expect_status(0);
    let back = value(&out.stdout, "yaml");
    assert_eq!(back["tests"], json!([{"vars": {"q": "three"}}, "file://missing/*.yaml"]), "{}", out.stdout);
    // Unfiltered, it is where it was, once.
    let all = run(cb(&dir).args(["export", "suite", "--to", "promptfoo", "--syntax", "yaml", "-q"]));
    all.expect_status(0);
    assert_eq!(
        value(&all.stdout, "yaml")["tests"],
        json!([{"vars": {"q": "one"}}, "file://missing/*.yaml", {"vars": {"q": "two"}}, {"vars": {"q": "three"}}])
    );
}
