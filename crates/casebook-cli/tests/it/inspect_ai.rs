//! Inspect AI samples (JSON array, JSONL, CSV): detection, the native shape, the round trip,
//! located errors, what the format cannot hold, the choices reaching the agent lettered while
//! the target does not, and multiple choice graded as Inspect grades it.
// Helpers of the tests (fixtures, a fake judge) panic like the tests do.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::cli::{Folder, at, casebook, cb, jsonl, run, to_native, validate};

fn example(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/inspect").join(name)
}

/// The records of a CSV file (RFC 4180), read independently of casebook's reader.
pub(crate) fn csv_records(text: &str) -> Vec<Vec<String>> {
    let (mut records, mut record, mut cell) = (Vec::new(), Vec::new(), String::new());
    let (mut in_quotes, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (in_quotes, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => in_quotes = false,
            (true, c) => cell.push(c),
            (false, '"') => in_quotes = true,
            (false, ',') => record.push(std::mem::take(&mut cell)),
            (false, '\r') => {}
            (false, '\n') => {
                record.push(std::mem::take(&mut cell));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => cell.push(c),
        }
    }
    if !cell.is_empty() || !record.is_empty() {
        record.push(cell);
        records.push(record);
    }
    records
}

/// The JSON value of an Inspect CSV file: its records as objects of their non-empty cells, the
/// cells Inspect reads as JSON decoded.
fn csv_value(text: &str) -> Vec<Value> {
    let mut records = csv_records(text);
    let header = records.remove(0);
    records
        .into_iter()
        .map(|record| {
            let mut object = serde_json::Map::new();
            for (column, cell) in header.iter().zip(record) {
                if cell.is_empty() {
                    continue;
                }
                let value = if column == "metadata" || column == "files" {
                    serde_json::from_str(&cell).unwrap()
                } else {
                    json!(cell)
                };
                object.insert(column.clone(), value);
            }
            Value::Object(object)
        })
        .collect()
}

#[test]
fn samples_are_detected_and_read_into_the_case_model() {
    // JSONL: chat messages kept as the input, a list of targets as accepted answers, int ids,
    // choices as a context item, sandbox/files/setup as agent settings, a row without an id.
    let (_, cases) = to_native(&example("samples.jsonl"));
    assert_eq!(cases.len(), 5);
    assert!(cases.iter().all(|c| c["provenance"]["format"] == "inspect"), "{cases:?}");
    assert_eq!(cases[0]["id"], "1");
    assert_eq!(cases[0]["input"][1]["role"], "user");
    assert_eq!(cases[0]["expected"], json!({"output": "bathtub"}));
    assert_eq!(cases[1]["expected"], json!({"acceptable": ["Paris", "paris"]}));
    assert_eq!(cases[1]["metadata"], json!({"topic": "geography"}));
    assert_eq!(
        cases[2]["context"],
        json!([{"type": "custom", "source": "choices", "content": ["Venus", "Mars", "Jupiter"]}])
    );
    assert_eq!(cases[2]["expected"], json!({"output": "B"}));
    assert_eq!(cases[3]["expected"]["output"], "こんにちは");
    assert_eq!(cases[3]["metadata"], json!({"difficulty": "easy"}));
    assert_eq!(cases[3]["id"], "4", "no id in the file: its place, as Inspect names it");
    assert_eq!(
        cases[4]["agent_args"],
        json!({"sandbox": ["docker", "compose.yaml"], "files": {"challenge.txt": "challenge/challenge.txt"},
               "setup": "chmod 600 challenge.txt"})
    );
    // A JSON array of samples, told from Agent Health's arrays by its first sample.
    let (_, cases) = to_native(&example("samples.json"));
    assert_eq!(cases.len(), 3);
    assert!(cases.iter().all(|c| c["provenance"]["format"] == "inspect"), "{cases:?}");
    assert_eq!(cases[1]["expected"], json!({"acceptable": ["B"]}));
    // CSV, told from letta's by its `target` column: a multi-line quoted cell, choices split on
    // commas, metadata decoded from JSON, non-ASCII text.
    let (_, cases) = to_native(&example("security.csv"));
    assert_eq!(cases.len(), 4);
    assert!(cases.iter().all(|c| c["provenance"]["format"] == "inspect"), "{cases:?}");
    assert_eq!(cases[1]["input"], "How should I store passwords securely\nfor an authentication system database?");
    assert_eq!(
        cases[2]["context"][0]["content"],
        json!(["X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"])
    );
    assert_eq!(cases[3]["metadata"], json!({"langue": "français"}));
    for file in ["samples.jsonl", "samples.json", "security.csv"] {
        validate(&example(file)).expect_status(0);
    }
}

#[test]
fn samples_to_casebook_and_back_give_the_same_values() {
    let dir = Folder::new();
    for (file, syntax) in [("samples.jsonl", "jsonl"), ("samples.json", "json"), ("security.csv", "csv")] {
        let source = example(file);
        let original = fs_err::read_to_string(&source).unwrap();
        let value = |text: &str| -> Vec<Value> {
            match syntax {
                "jsonl" => jsonl(text),
                "json" => serde_json::from_str::<Vec<Value>>(text).unwrap(),
                _ => csv_value(text),
            }
        };
        for native in ["n.jsonl", "n.yaml", "n.json"] {
            let middle = dir.join(&format!("{file}.{native}"));
            run(casebook().arg("convert").arg(&source).args(["--to", "casebook", "-o"]).arg(&middle)).expect_status(0);
            let out = dir.join(&format!("{file}.{native}.back.{syntax}"));
            run(casebook().arg("convert").arg(&middle).args(["--to", "inspect", "-o"]).arg(&out)).expect_status(0);
            let back = fs_err::read_to_string(&out).unwrap();
            assert_eq!(value(&back), value(&original), "{file} via {native}:\n{back}");
        }
        // Straight through, too.
        let out = dir.join(&format!("{file}.same.{syntax}"));
        run(casebook().arg("convert").arg(&source).args(["--to", "inspect", "-o"]).arg(&out)).expect_status(0);
        assert_eq!(value(&fs_err::read_to_string(&out).unwrap()), value(&original), "{file}");
    }
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
        ("letta.csv", "input,ground_truth\nhi,there\n", "letta"),
        ("letta.jsonl", "{\"input\": \"hi\", \"ground_truth\": \"there\"}\n", "letta"),
        ("evals.jsonl", "{\"input\": \"hi\", \"ideal\": \"there\"}\n", "openai-evals"),
        ("inspect.jsonl", "{\"input\": \"hi\", \"target\": \"there\"}\n", "inspect"),
        ("inspect.csv", "input,target\nhi,there\n", "inspect"),
    ];
    for (name, text, format) in files {
        let (_, cases) = to_native(&dir.file(name, text));
        assert_eq!(cases[0]["provenance"]["format"], format, "{name}");
    }
}

#[test]
fn problems_are_located() {
    let dir = Folder::new();
    // Line 3: a target that is an object (column 12); line 4: a chat message with an unknown
    // role; line 5: no input.
    let file = dir.file(
        "bad.jsonl",
        concat!(
            "{\"input\": \"a\", \"target\": \"x\"}\n",
            "{\"input\": [{\"role\": \"user\", \"content\": \"b\"}], \"target\": [\"y\", \"z\"]}\n",
            "{\"target\": {\"answer\": \"x\"}, \"input\": \"c\"}\n",
            "{\"input\": [{\"role\": \"human\", \"content\": \"d\"}], \"target\": \"w\"}\n",
            "{\"target\": \"v\", \"id\": 5}\n",
        ),
    );
    let checked = validate(&file);
    checked.expect_status(1);
    assert_eq!(
        checked.locations(),
        [
            at("E-wrong-type", 3, 12, "/target"),
            at("E-unknown-role", 4, 21, "/input/0/role"),
            at("E-missing-field", 5, 1, ""),
        ]
    );
    // CSV: the physical line where the record starts, and the cell's column.
    let file =
        dir.file("bad.csv", "id,input,target,metadata\nq1,\"two\nlines\",x,\nq2,text,y,\"{\"\"broken\"\": }\"\n");
    let checked = validate(&file);
    checked.expect_status(1);
    assert_eq!(checked.locations(), [at("E-json-syntax", 4, 25, "/metadata")]);
}

#[test]
fn what_samples_cannot_hold_is_refused_or_dropped_with_lossy() {
    let dir = Folder::new();
    let file = dir.file(
        "cases.jsonl",
        "{\"id\": \"k1\", \"input\": \"hi\", \"turns\": [{\"role\": \"user\", \"content\": \"more\"}], \"expected\": {\"output\": \"x\"}, \"labels\": [\"a\"]}\n",
    );
    let refused = run(casebook().arg("convert").arg(&file).args(["--to", "inspect", "--format", "json"]));
    refused.expect_status(1);
    assert_eq!(refused.stdout, "");
    assert!(refused.stderr.contains("cannot hold: labels, turns"), "{refused:?}");
    let lossy = run(casebook().arg("convert").arg(&file).args(["--to", "inspect", "--lossy", "-q"]));
    lossy.expect_status(0);
    assert_eq!(jsonl(&lossy.stdout), [json!({"id": "k1", "input": "hi", "target": "x"})]);
    // CSV cells are text: a list of targets has no cell to go in.
    let listed = dir.file("listed.jsonl", "{\"id\": \"k2\", \"input\": \"hi\", \"target\": [\"a\", \"b\"]}\n");
    let refused = run(casebook().arg("convert").arg(&listed).args(["--to", "inspect", "-o"]).arg(dir.join("o.csv")));
    refused.expect_status(1);
    assert!(refused.stderr.contains("cannot hold: expected (an Inspect CSV target is one text)"), "{refused:?}");
}

/// The choices are part of what the agent is asked; the target never reaches it.
#[test]
fn a_run_sends_the_choices_and_not_the_target() {
    let dir = Folder::new();
    let (url, bodies) = crate::run::serve(crate::run::Behaviour::Shout);
    dir.file(
        "mc.jsonl",
        "{\"id\": \"q1\", \"input\": \"Which is the odd one out?\", \"choices\": [\"CHOICE-APPLE\", \"CHOICE-PEAR\", \"CHOICE-BRICK\"], \"target\": \"TARGET-SECRET-C\"}\n",
    );
    let out = run(cb(&dir).args(["run", "--dataset", "mc.jsonl", "--target", &url, "--grader", "exact_match"]));
    out.expect_status(1);
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    let request: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(
        request["context"],
        json!([{"type": "custom", "source": "choices", "content": ["A) CHOICE-APPLE", "B) CHOICE-PEAR", "C) CHOICE-BRICK"]}])
    );
    assert!(!bodies[0].contains("TARGET-SECRET"), "{}", bodies[0]);
}

/// As Inspect's `csv_dataset` does, a record of blank cells is left out, not an error.
#[test]
fn csv_records_of_blank_cells_are_left_out() {
    let dir = Folder::new();
    let (_, cases) = to_native(&dir.file("blank.csv", "input,target\nq1,a1\n, \nq2,a2\n"));
    let inputs: Vec<&Value> = cases.iter().map(|c| &c["input"]).collect();
    assert_eq!(inputs, [&json!("q1"), &json!("q2")]);
}

/// A fake agent that answers a multiple-choice question with the letter of its last choice
/// (`…\nANSWER: C`), at `/agent` (casebook's protocol: the choices context item, each option
/// lettered) and at `/v1/chat/completions` (the options as lettered lines of the question).
/// Without lettered options it answers `UNLETTERED`. Returns its base URL and every body.
fn serve_last_choice() -> (String, Arc<Mutex<Vec<String>>>) {
    fn last_letter<'a>(options: impl Iterator<Item = &'a str>) -> Option<String> {
        let mut last = None;
        for option in options {
            let mut chars = option.chars();
            match (chars.next(), chars.next(), chars.next()) {
                (Some(letter @ 'A'..='Z'), Some(')'), Some(' ')) => last = Some(letter.to_string()),
                _ => return None,
            }
        }
        last
    }
    fn answer(letter: Option<String>) -> String {
        letter.map_or_else(|| "UNLETTERED".to_owned(), |l| format!("The last one, I think.\nANSWER: {l}"))
    }
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let (agent_bodies, model_bodies) = (bodies.clone(), bodies.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new()
                .route(
                    "/agent",
                    axum::routing::post(move |body: String| {
                        agent_bodies.lock().unwrap().push(body.clone());
                        let request: Value = serde_json::from_str(&body).unwrap();
                        let items = request["context"].as_array().cloned().unwrap_or_default();
                        let choices = items.iter().find(|item| item["source"] == "choices").cloned();
                        let options = choices.map(|c| c["content"].clone()).unwrap_or_default();
                        let letter = last_letter(options.as_array().into_iter().flatten().filter_map(Value::as_str));
                        async move { axum::Json(json!({"output": answer(letter)})) }
                    }),
                )
                .route(
                    "/v1/chat/completions",
                    axum::routing::post(move |body: String| {
                        model_bodies.lock().unwrap().push(body.clone());
                        let request: Value = serde_json::from_str(&body).unwrap();
                        let question =
                            request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
                        let text = question["content"].as_str().unwrap_or_default().to_owned();
                        // The option lines are the last lines of the question.
                        let lines: Vec<&str> = text.lines().rev().take_while(|l| l.contains(") ")).collect();
                        let letter = last_letter(lines.into_iter().rev());
                        async move {
                            axum::Json(
                                json!({"choices": [{"message": {"role": "assistant", "content": answer(letter)}}]}),
                            )
                        }
                    }),
                );
            axum::serve(listener, app).await.unwrap();
        });
    });
    (format!("http://{}", rx.recv().unwrap()), bodies)
}

/// Inspect samples with `choices` (the shape of its `samples.jsonl` fixtures), run with no grader
/// named: each is graded by `choice`, on both the agent protocol and chat completions, as
/// Inspect's `choice()` scorer grades the `ANSWER: X` its `multiple_choice` solver asks for. The
/// samples without an id are named 1, 3 and 4, their places, as in Inspect's logs.
#[test]
fn multiple_choice_runs_are_graded_by_choice_on_every_target() {
    let dir = Folder::new();
    let (base, bodies) = serve_last_choice();
    dir.file(
        "mc.jsonl",
        concat!(
            "{\"input\": \"Which planet is known as the red planet?\", \"choices\": [\"Venus\", \"Mars\"], \"target\": \"B\"}\n",
            "{\"id\": \"cap\", \"input\": \"Capital of France?\", \"choices\": [\"Paris\", \"Berlin\", \"Rome\"], \"target\": \"A\"}\n",
            "{\"input\": \"Which are prime?\", \"choices\": [\"4\", \"3\", \"5\"], \"target\": [\"B\", \"C\"]}\n",
            "{\"input\": \"Largest ocean?\", \"choices\": [\"Atlantic\", \"Pacific\"], \"target\": \"Pacific\"}\n",
        ),
    );
    let exp = dir.file(
        "exp.yaml",
        format!(
            "dataset: mc.jsonl\nscenarios:\n  - {{name: protocol, target: '{base}/agent'}}\n  \
             - {{name: model, target: 'openai+{base}/v1?model=m'}}\nthreshold: 0\n"
        ),
    );
    let out = run(cb(&dir).arg("run").arg(&exp).args(["--format", "json", "--report", "jsonl=results.jsonl"]));
    out.expect_status(0);
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 8, "{bodies:#?}");
    assert!(bodies.iter().all(|b| !b.contains("UNLETTERED") && !b.contains("target")), "{bodies:#?}");
    // What chat completions were sent: Inspect's layout, the question then its lettered options.
    let model: Value = serde_json::from_str(
        bodies.iter().find(|b| b.contains("Capital of France?") && b.contains("\"model\"")).unwrap(),
    )
    .unwrap();
    let prompt = model["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.ends_with("\n\nCapital of France?\n\nA) Paris\nB) Berlin\nC) Rome"), "{prompt}");
    assert!(prompt.contains("'ANSWER: X'") && prompt.contains("(A,B,C)"), "{prompt}");
    let rows: Vec<Value> = jsonl(&fs_err::read_to_string(dir.join("results.jsonl")).unwrap());
    let mut got: Vec<(String, String, bool, String)> = rows
        .iter()
        .map(|r| {
            let grade = &r["grades"][0];
            assert_eq!(grade["grader"], "choice", "{r}");
            (
                r["scenario"].as_str().unwrap().to_owned(),
                r["case_id"].as_str().unwrap().to_owned(),
                r["pass"].as_bool().unwrap(),
                grade["rationale"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    let want = |scenario: &str| {
        [
            (scenario, "1", true, "the answer names B (Mars)"),
            (scenario, "3", false, "the answer names C (5); expected B (3), C (5)"),
            (scenario, "4", true, "the answer names B (Pacific)"),
            (scenario, "cap", false, "the answer names C (Rome); expected A (Paris)"),
        ]
        .map(|(s, id, pass, why)| (s.to_owned(), id.to_owned(), pass, why.to_owned()))
    };
    let expected: Vec<_> = want("model").into_iter().chain(want("protocol")).collect();
    assert_eq!(got, expected);

    // `--grader` still overrides the default: the letter is not the expected text.
    let out = run(cb(&dir).args(["run", "--dataset", "mc.jsonl", "--target", &format!("{base}/agent")]).args([
        "--grader",
        "exact_match",
        "--format",
        "json",
        "--report",
        "jsonl=exact.jsonl",
    ]));
    out.expect_status(1);
    let rows: Vec<Value> = jsonl(&fs_err::read_to_string(dir.join("exact.jsonl")).unwrap());
    // None passes (the list target has no `expected.output` for `exact_match`: an error).
    assert!(rows.iter().all(|r| r["grades"][0]["grader"] == "exact_match" && r["pass"] != true), "{rows:#?}");
}

/// A fake chat-completions model that answers with every letter it is asked for: `ANSWER: B, C`
/// when the prompt asks for `$LETTERS` (Inspect's `multiple_correct` template), else `ANSWER: B`.
/// Returns its base URL and every prompt it was sent.
fn serve_letters_model() -> (String, Arc<Mutex<Vec<String>>>) {
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let seen = prompts.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app =
                axum::Router::new().route(
                    "/v1/chat/completions",
                    axum::routing::post(move |body: String| {
                        let request: Value = serde_json::from_str(&body).unwrap();
                        let prompt = request["messages"][0]["content"].as_str().unwrap_or_default().to_owned();
                        let answer = if prompt.contains("'ANSWER: $LETTERS'") { "ANSWER: B, C" } else { "ANSWER: B" };
                        seen.lock().unwrap().push(prompt);
                        async move {
                            axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": answer}}]}))
                        }
                    }),
                );
            axum::serve(listener, app).await.unwrap();
        });
    });
    (format!("http://{}", rx.recv().unwrap()), prompts)
}

/// A sample with several right choices (a list target, Inspect's `multiple_correct`; the shape
/// of Inspect's `samples.jsonl` fixtures) is asked for all of them, as Inspect's
/// `MULTIPLE_ANSWER_TEMPLATE` asks (`ANSWER: $LETTERS`), and a model that names both passes; a
/// sample with one right choice is still asked for one letter.
#[test]
fn several_right_choices_are_asked_for_as_letters() {
    let dir = Folder::new();
    let (base, prompts) = serve_letters_model();
    dir.file(
        "mc.jsonl",
        concat!(
            "{\"id\": \"primes\", \"input\": \"Which are prime?\", \"choices\": [\"4\", \"3\", \"5\"], \"target\": [\"B\", \"C\"]}\n",
            "{\"id\": \"red\", \"input\": \"Which planet is red?\", \"choices\": [\"Venus\", \"Mars\", \"Earth\"], \"target\": \"B\"}\n",
        ),
    );
    let out = run(cb(&dir)
        .args(["run", "--dataset", "mc.jsonl", "--target", &format!("openai+{base}/v1?model=m")])
        .args(["--report", "jsonl=results.jsonl"]));
    out.expect_status(0);
    let prompts = prompts.lock().unwrap().clone();
    let primes = prompts.iter().find(|p| p.contains("Which are prime?")).unwrap();
    assert!(
        primes.starts_with(
            "Answer the following multiple choice question, where more than one choice may be right, with a last \
             line of the form 'ANSWER: $LETTERS', where LETTERS is the letters of all the choices you pick, \
             separated by commas (A,B,C).\n\nWhich are prime?\n\nA) 4\nB) 3\nC) 5"
        ),
        "{primes}"
    );
    let red = prompts.iter().find(|p| p.contains("Which planet is red?")).unwrap();
    assert!(
        red.starts_with("Answer the following multiple choice question with a last line of the form 'ANSWER: X'"),
        "{red}"
    );
    let rows: Vec<Value> = jsonl(&fs_err::read_to_string(dir.join("results.jsonl")).unwrap());
    let mut got: Vec<(String, bool, String)> = rows
        .iter()
        .map(|r| {
            let rationale = r["grades"][0]["rationale"].as_str().unwrap().to_owned();
            (r["case_id"].as_str().unwrap().to_owned(), r["pass"].as_bool().unwrap(), rationale)
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("primes".to_owned(), true, "the answer names B (3), C (5)".to_owned()),
            ("red".to_owned(), true, "the answer names B (Mars)".to_owned()),
        ]
    );
}

/// A case without choices under `choice` is an error of that case, never a pass or a 0.
#[test]
fn a_choice_grader_on_a_case_without_choices_is_an_error() {
    let dir = Folder::new();
    let (base, _) = serve_last_choice();
    dir.file("open.jsonl", "{\"id\": \"o1\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n");
    let out = run(cb(&dir).args(["run", "--dataset", "open.jsonl", "--target", &format!("{base}/agent")]).args([
        "--grader",
        "choice",
        "--report",
        "jsonl=open.results.jsonl",
    ]));
    out.expect_status(1);
    let rows: Vec<Value> = jsonl(&fs_err::read_to_string(dir.join("open.results.jsonl")).unwrap());
    assert_eq!(rows.len(), 1);
    assert!(rows[0]["pass"].is_null() && rows[0]["score"].is_null(), "{}", rows[0]);
    let outcome = rows[0]["grades"][0].to_string();
    assert!(outcome.contains("config") && outcome.contains("the case offers no choices"), "{outcome}");
}

/// `import` of Inspect samples without ids (its `samples.jsonl` fixtures' shape) reports them as
/// positional, and the stored cases keep Inspect's numbers.
#[test]
fn import_reports_inspect_numbers_as_positional_ids() {
    let dir = Folder::new();
    run(cb(&dir).arg("init")).expect_status(0);
    let file = dir.file(
        "mc.jsonl",
        "{\"input\": \"Red planet?\", \"choices\": [\"Venus\", \"Mars\"], \"target\": \"B\"}\n\
         {\"id\": \"own\", \"input\": \"Blue planet?\", \"choices\": [\"Earth\", \"Mars\"], \"target\": \"A\"}\n\
         {\"input\": \"Red planet?\", \"choices\": [\"Venus\", \"Mars\"], \"target\": \"B\"}\n",
    );
    let imported = run(cb(&dir).args(["import", "--dataset", "mc", "--format", "json"]).arg(&file));
    imported.expect_status(0);
    let report: Value = serde_json::from_str(&imported.stdout).unwrap();
    assert_eq!((&report["derived_ids"], &report["positional_ids"]), (&json!(2), &json!(2)), "{report}");
    let quiet = run(cb(&dir).args(["put", "mc"]).arg(&file));
    assert!(quiet.stderr.starts_with("note: 2 cases had no id: each is named by its place in the file\n"), "{quiet:?}");
    let exported = run(cb(&dir).args(["export", "mc@latest", "--to", "casebook"]));
    exported.expect_status(0);
    let ids: Vec<Value> = jsonl(&exported.stdout).iter().map(|c| c["id"].clone()).filter(|id| !id.is_null()).collect();
    assert_eq!(ids, [json!("1"), json!("own"), json!("3")], "{}", exported.stdout);
}
