//! Inspect AI samples (JSON array, JSONL, CSV): detection, the native shape, the round trip,
//! located errors, what the format cannot hold, and the choices reaching the agent while the
//! target does not.
// Helpers of the tests (fixtures, a fake judge) panic like the tests do.
#![allow(clippy::unwrap_used)]

use std::path::Path;

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
    assert!(cases[3]["id"].as_str().unwrap().starts_with("t-"), "no id in the file: derived");
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
        json!([{"type": "custom", "source": "choices", "content": ["CHOICE-APPLE", "CHOICE-PEAR", "CHOICE-BRICK"]}])
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
