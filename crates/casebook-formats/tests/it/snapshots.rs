//! A tool's world snapshot (`responses`, `default`) read node by node: every problem at its
//! file, line, column and pointer, in JSONL, YAML and JSON documents; snapshot files named by a
//! path read with the dataset and kept in the case; what the case then serves.

use std::path::Path;

use casebook_formats::{Batch, Consumer, Flow, Input, ReadOptions, Start, read};
use casebook_model::snapshot::Served;
use casebook_model::{Case, Diagnostic, Responses, Snapshot};
use serde_json::{Value, json};

/// Every case and diagnostic of a file.
fn read_file(path: &Path) -> (Vec<Case>, Vec<Diagnostic>) {
    struct All(Vec<Case>, Vec<Diagnostic>);
    impl Consumer<()> for All {
        fn start(&mut self, _: &Start) -> Flow {
            Flow::Continue
        }
        fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
            self.0.append(&mut batch.cases);
            self.1.append(&mut batch.diagnostics);
            Flow::Continue
        }
    }
    let mut all = All(Vec::new(), Vec::new());
    let opts = ReadOptions { threads: 2, ..ReadOptions::default() };
    read(&Input::path(path), &opts, &|_: &Batch| (), &mut all).expect("read");
    (all.0, all.1)
}

/// `(code, line, column, pointer)` of each diagnostic, in order.
fn places(diags: &[Diagnostic]) -> Vec<(String, u64, u64, String)> {
    diags.iter().map(|d| (d.code.to_string(), d.line, d.column, d.pointer.clone().unwrap_or_default())).collect()
}

fn place(code: &str, line: u64, column: u64, pointer: &str) -> (String, u64, u64, String) {
    (code.to_owned(), line, column, pointer.to_owned())
}

/// The 1-based column (in characters) where `needle` starts on `line`.
fn col(line: &str, needle: &str) -> u64 {
    let at = line.find(needle).unwrap_or_else(|| panic!("`{needle}` not in {line}"));
    line[..at].chars().count() as u64 + 1
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent).unwrap();
    }
    fs_err::write(&path, text).unwrap();
    path
}

#[test]
fn jsonl_rows_report_each_problem_at_its_place() {
    let dir = tempfile::tempdir().unwrap();
    // A valid row with non-ASCII patterns and results, and an unfrozen query (a warning).
    let ok = r#"{"id":"ok","input":"Größe in 東京?","tools":[{"name":"metrics","responses":[{"when":{"matches":{"service":"^zürich-東京$"}},"result":{"msg":"Größe überschritten 東京"}},{"when":{"includes":{"metric":"cpu"}},"query":{"url":"http://m/q?m={metric}"}}],"default":"empty"}]}"#;
    // Wrong types and unknown keys.
    let types = r#"{"id":"types","input":"x","tools":[{"name":"m","responses":[{"wen":{"arguments":{}},"result":1},{"when":"always","error":5},{"when":{"incldes":{"a":1}},"query":{"url":"http://x","timeout_secs":"5","comand":["x"]}}],"default":"emty"}]}"#;
    // What the model's checks find, each at the node it is about.
    let checks = r#"{"id":"checks","input":"x","tools":[{"name":"m","responses":[{"when":{"matches":{"q":"(größe"}},"result":1},{"result":"é","error":"e"},{"when":{},"result":2},{"when":{"includes":{"m":"cpu"}},"query":{"url":"http://h/{m}/{host}","command":["c"],"timeout_secs":0}},{"error":"x","query":{}}],"default":{"result":1,"error":"x"}}]}"#;
    let path = write(dir.path(), "data.jsonl", &format!("{ok}\n{types}\n{checks}\n"));
    let (cases, diags) = read_file(&path);
    let r = "/tools/0/responses";
    assert_eq!(
        places(&diags),
        [
            place("W-unfrozen-query", 1, col(ok, r#"{"url""#), &format!("{r}/1/query")),
            place("E-unknown-field", 2, col(types, r#""wen""#), &format!("{r}/0/wen")),
            place("E-wrong-type", 2, col(types, r#""always""#), &format!("{r}/1/when")),
            place("E-wrong-type", 2, col(types, "5}"), &format!("{r}/1/error")),
            place("E-unknown-field", 2, col(types, r#""incldes""#), &format!("{r}/2/when/incldes")),
            place("E-wrong-type", 2, col(types, r#""5""#), &format!("{r}/2/query/timeout_secs")),
            place("E-unknown-field", 2, col(types, r#""comand""#), &format!("{r}/2/query/comand")),
            place("E-invalid-value", 2, col(types, r#""emty""#), "/tools/0/default"),
            place("W-unfrozen-query", 3, col(checks, r#"{"url""#), &format!("{r}/3/query")),
            place("E-invalid-value", 3, col(checks, r#""(größe""#), &format!("{r}/0/when/matches/q")),
            place("E-invalid-value", 3, col(checks, r#"{"result":"é""#), &format!("{r}/1")),
            place("E-invalid-value", 3, col(checks, r#"{},"result":2"#), &format!("{r}/2/when")),
            place("E-invalid-value", 3, col(checks, r#"{"url""#), &format!("{r}/3/query")),
            place("E-invalid-value", 3, col(checks, "0}}"), &format!("{r}/3/query/timeout_secs")),
            place("E-invalid-value", 3, col(checks, r#""http://h/"#), &format!("{r}/3/query/url")),
            place("E-invalid-value", 3, col(checks, r#"{}}],"#), &format!("{r}/4/query")),
            place("E-invalid-value", 3, col(checks, r#"{"result":1,"error":"x"}"#), "/tools/0/default"),
        ],
        "{diags:#?}"
    );
    let messages: Vec<(&str, Option<&str>)> = diags.iter().map(|d| (d.message.as_str(), d.hint.as_deref())).collect();
    assert_eq!(messages[1], ("unknown field `wen`", Some("did you mean `when`?")));
    assert_eq!(messages[4], ("unknown field `incldes`", Some("did you mean `includes`?")));
    assert_eq!(messages[7].0, "unknown default `emty`");
    assert!(messages[9].0.starts_with("`(größe` is not a valid pattern"), "{messages:?}");
    assert_eq!(messages[12].0, "a query is a `url` or a `command`, not both");
    assert_eq!(
        messages[14].0,
        "`{host}` is not an argument this response's `when` fixes (by `arguments` or `includes`)"
    );
    assert_eq!(messages[15].0, "a query needs a `url` or a `command`");
    assert_eq!(messages[0].0, "this query was never run");

    // Only the valid row is a case, and it serves its non-ASCII answers.
    assert_eq!(cases.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["ok"]);
    let snapshot = Snapshot::compile(cases[0].task.tools.as_deref().unwrap()).unwrap();
    let answer = snapshot.serve("metrics", &json!({"service": "zürich-東京"}));
    assert_eq!((answer.served, answer.content), (Served::Matched, json!({"msg": "Größe überschritten 東京"})));
    assert_eq!(snapshot.serve("metrics", &json!({"metric": "cpu"})).served, Served::Unfrozen);
    assert_eq!(snapshot.serve("metrics", &json!({"service": "zürich"})).content, json!(""));
}

#[test]
fn yaml_and_json_documents_locate_snapshot_problems() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = write(
        dir.path(),
        "dataset.yaml",
        "name: incidents
cases:
  - id: a
    input: Warum ist checkout langsam?
    tools:
      - name: log_fetcher
        responses:
          - when:
              matches: {service: \"^zahlungs[\"}
            result: [\"ERROR pool exhausted — Größe\"]
          - when: {arguments: {service: checkout}}
            result: ok
            eror: nope
        default: {error: no such service}
",
    );
    let (cases, diags) = read_file(&yaml);
    assert_eq!(places(&diags), [place("E-unknown-field", 13, 13, "/cases/0/tools/0/responses/1/eror")], "{diags:#?}");
    assert_eq!(diags[0].hint.as_deref(), Some("did you mean `error`?"));
    assert!(cases.is_empty());
    fs_err::write(&yaml, fs_err::read_to_string(&yaml).unwrap().replace("            eror: nope\n", "")).unwrap();
    let (_, diags) = read_file(&yaml);
    // `              matches: {service: ` is 33 characters: the pattern starts at column 34.
    assert_eq!(
        places(&diags),
        [place("E-invalid-value", 9, 34, "/cases/0/tools/0/responses/0/when/matches/service")],
        "{diags:#?}"
    );

    let json = write(
        dir.path(),
        "dataset.json",
        "{\"cases\": [\n  {\"input\": \"hi\",\n   \"tools\": [{\"name\": \"q\",\n     \"responses\": [{\"when\": {\"includes\": {\"m\": \"é\"}}, \"query\": {\"command\": [\"fetch\", \"{m}\", \"{n}\"], \"timeout_secs\": -1}}]}]}\n]}\n",
    );
    let (_, diags) = read_file(&json);
    let line = "     \"responses\": [{\"when\": {\"includes\": {\"m\": \"é\"}}, \"query\": {\"command\": [\"fetch\", \"{m}\", \"{n}\"], \"timeout_secs\": -1}}]}]}";
    assert_eq!(
        places(&diags),
        [
            place("W-unfrozen-query", 4, col(line, "{\"command\""), "/cases/0/tools/0/responses/0/query"),
            // A document's diagnostics come in the order of their places.
            place("E-invalid-value", 4, col(line, "\"{n}\""), "/cases/0/tools/0/responses/0/query/command/2"),
            place("E-invalid-value", 4, col(line, "-1"), "/cases/0/tools/0/responses/0/query/timeout_secs"),
        ],
        "{diags:#?}"
    );
}

#[test]
fn a_snapshot_file_is_read_with_the_dataset_and_changes_the_content_id() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "ds/snapshots/incident-42.json",
        r#"[{"when": {"includes": {"service": "checkout"}}, "result": ["pool exhausted — 東京"]}]"#,
    );
    let row = |id: &str| {
        format!(
            r#"{{"id":"{id}","input":"why?","tools":[{{"name":"logs","responses":"snapshots/incident-42.json","default":{{"error":"none"}}}}]}}"#
        )
    };
    let path = write(dir.path(), "ds/data.jsonl", &format!("{}\n{}\n", row("a"), row("b")));
    let (cases, diags) = read_file(&path);
    assert!(diags.is_empty(), "{diags:#?}");
    let content = json!([{"when": {"includes": {"service": "checkout"}}, "result": ["pool exhausted — 東京"]}]);
    for case in &cases {
        let tool = &case.task.tools.as_ref().unwrap()[0];
        assert_eq!(
            tool.responses,
            Some(Responses::File { file: "snapshots/incident-42.json".into(), content: content.clone() })
        );
        let answer = Snapshot::compile(case.task.tools.as_deref().unwrap())
            .unwrap()
            .serve("logs", &json!({"service": "checkout", "since": "1h"}));
        assert_eq!((answer.served, answer.content), (Served::Matched, json!(["pool exhausted — 東京"])));
    }
    let id_before = casebook_canon::content_id(casebook_canon::Kind::Case, &cases[0]).unwrap();

    // The same dataset with another snapshot: another case.
    write(dir.path(), "ds/snapshots/incident-42.json", "- result: [\"pool fine\"]\n");
    let (cases, diags) = read_file(&path);
    assert!(diags.is_empty(), "{diags:#?}");
    assert_ne!(casebook_canon::content_id(casebook_canon::Kind::Case, &cases[0]).unwrap(), id_before);

    // The native form a casebook file writes for a carried file reads back the same.
    let carried = serde_json::to_string(&cases[0]).unwrap();
    let back = write(dir.path(), "ds/carried.jsonl", &format!("{carried}\n"));
    let (again, diags) = read_file(&back);
    assert!(diags.is_empty(), "{diags:#?}");
    assert_eq!(again[0].task, cases[0].task);
}

#[test]
fn snapshot_file_problems_name_the_dataset_line_and_their_place_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "ds/snapshots/broken.yaml", "- when:\n    matches: {host: \"db[\"}\n  result: [1]\n");
    write(dir.path(), "ds/snapshots/bad.json", "[{\"result\": 1,,}]\n");
    write(dir.path(), "outside.json", "[]\n");
    let rows = [
        r#"{"id":"a","input":"x","tools":[{"name":"t","responses":"snapshots/broken.yaml"}]}"#,
        r#"{"id":"b","input":"x","tools":[{"name":"t","responses":"snapshots/broken.yaml"}]}"#,
        r#"{"id":"c","input":"x","tools":[{"name":"t","responses":"snapshots/missing.json"}]}"#,
        r#"{"id":"d","input":"x","tools":[{"name":"t","responses":"../outside.json"}]}"#,
        r#"{"id":"e","input":"x","tools":[{"name":"t","responses":"snapshots/bad.json"}]}"#,
        r#"{"id":"f","input":"x","tools":[{"name":"t","responses":{"file":"../outside.json","content":[]}}]}"#,
    ];
    let path = write(dir.path(), "ds/data.jsonl", &(rows.join("\n") + "\n"));
    let (cases, diags) = read_file(&path);
    assert!(cases.is_empty());
    let at = r#""snapshots/"#;
    assert_eq!(
        places(&diags),
        [
            // In the file itself, at the pattern (`    matches: {host: ` is 20 characters).
            place("E-invalid-value", 2, 21, "/0/when/matches/host"),
            // Each row of a JSONL file reads it again.
            place("E-invalid-value", 2, 21, "/0/when/matches/host"),
            place("E-snapshot-path-missing", 3, col(rows[2], at), "/tools/0/responses"),
            place("E-snapshot-path-escapes", 4, col(rows[3], r#""../"#), "/tools/0/responses"),
            place("E-yaml-syntax", 1, 15, ""),
            place("E-snapshot-path-escapes", 6, col(rows[5], r#""../"#), "/tools/0/responses/file"),
        ],
        "{diags:#?}"
    );
    assert!(diags[0].file.ends_with("broken.yaml"), "{}", diags[0].file);
    let named = format!("the snapshot file is named at {}:1:{} (/tools/0/responses)", path.display(), col(rows[0], at));
    assert_eq!(diags[0].hint.as_deref(), Some(named.as_str()));
    assert_eq!(diags[2].message, "snapshot file `snapshots/missing.json` cannot be read: entity not found");
    assert!(diags[4].file.ends_with("bad.json") && diags[4].hint.as_deref().unwrap().contains(":5:"), "{:?}", diags[4]);
}

/// A native dataset with every part of a snapshot: patterns and results in other scripts, a
/// frozen query, an error, each form of default, and a snapshot file.
fn snapshot_dataset(dir: &Path) -> std::path::PathBuf {
    write(
        dir,
        "ds/snapshots/incident-42.yaml",
        "- when: {arguments: {service: checkout}}\n  result: [\"pool exhausted — 東京\"]\n",
    );
    let rows = [
        json!({"id": "a", "input": "Warum ist checkout langsam?", "tools": [
            {"name": "metrics_query", "description": "Metriken", "parameters": {"type": "object"}, "responses": [
                {"when": {"matches": {"service": "^zürich-東京$", "/window/unit": "^m"}}, "result": {"p99": 2.1, "note": "Größe"}},
                {"when": {"includes": {"metric": "db.pool.wait"}}, "result": "p99 2.1 s",
                 "query": {"url": "http://m/q?m={metric}", "headers": {"Authorization": "${TOKEN}"}, "timeout_secs": 2.5, "frozen_at": "2026-11-27T18:00:00Z"}},
                {"error": "rate limited"}
            ], "default": "empty"},
            {"name": "log_fetcher", "responses": "snapshots/incident-42.yaml", "default": {"error": "no such service"}},
            {"name": "ping", "default": {"result": []}}
        ], "labels": ["category:RCA", "difficulty:Hard"], "expected": {"outcomes": ["should query the pool metrics"]}}),
        json!({"id": "b", "input": "again", "tools": [
            {"name": "log_fetcher", "responses": "snapshots/incident-42.yaml"}
        ], "labels": ["category:RCA", "difficulty:Easy"], "expected": {"outcomes": ["should read the logs"]}}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    write(dir, "ds/data.jsonl", &text)
}

#[test]
fn native_files_round_trip_snapshots_in_every_syntax() {
    use casebook_formats::{Format, Syntax};

    use crate::harness::{cases_of, convert_file, errors};
    let dir = tempfile::tempdir().unwrap();
    let path = snapshot_dataset(dir.path());
    let (jsonl, diags) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    assert_eq!(errors(&diags), Vec::<String>::new());
    let first = cases_of(&jsonl);
    // The snapshot file is carried in the cases.
    assert_eq!(
        first[1]["tools"][0]["responses"],
        json!({"file": "snapshots/incident-42.yaml", "content": [{"when": {"arguments": {"service": "checkout"}}, "result": ["pool exhausted — 東京"]}]})
    );
    assert_eq!(first[0]["tools"][0]["responses"][1]["query"]["timeout_secs"], json!(2.5));
    for (syntax, extension) in [(Syntax::Json, "json"), (Syntax::Yaml, "yaml"), (Syntax::Jsonl, "jsonl")] {
        let name = format!("ds/out.{extension}");
        let again = write(dir.path(), &name, "");
        let (out, diags) = convert_file(&path, None, Format::Casebook, syntax, None);
        fs_err::write(&again, &out).unwrap();
        let (back, diags_back) = convert_file(&again, None, Format::Casebook, Syntax::Jsonl, None);
        assert_eq!(errors(&diags), Vec::<String>::new());
        assert_eq!(errors(&diags_back), Vec::<String>::new(), "{syntax:?}");
        assert_eq!(cases_of(&back), first, "{syntax:?}");
    }
}

#[test]
fn agent_health_carries_snapshots_and_other_formats_refuse_them() {
    use casebook_formats::{Format, Syntax};

    use crate::harness::{convert_file, errors, value_of};
    let dir = tempfile::tempdir().unwrap();
    let path = snapshot_dataset(dir.path());
    let (out, diags) = convert_file(&path, None, Format::AgentHealth, Syntax::Json, None);
    assert_eq!(errors(&diags), Vec::<String>::new());
    let value = value_of(&out, Syntax::Json);
    let tools = &value[0]["tools"];
    assert_eq!(tools[0]["responses"][0]["result"], json!({"p99": 2.1, "note": "Größe"}));
    assert_eq!(tools[0]["default"], json!("empty"));
    // Agent Health has no files beside a test case: the snapshot file's responses go inline.
    assert_eq!(
        tools[1]["responses"],
        json!([{"when": {"arguments": {"service": "checkout"}}, "result": ["pool exhausted — 東京"]}])
    );
    assert_eq!(tools[1]["default"], json!({"error": "no such service"}));
    // And read back, as the same snapshot (inline now).
    let ah = write(dir.path(), "ds/ah.json", std::str::from_utf8(&out).unwrap());
    let (cases, diags) = read_file(&ah);
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:#?}");
    let snapshot = Snapshot::compile(cases[1].task.tools.as_deref().unwrap()).unwrap();
    assert_eq!(
        snapshot.serve("log_fetcher", &json!({"service": "checkout"})).content,
        json!(["pool exhausted — 東京"])
    );

    // A format without tools refuses, naming the field.
    let (_, diags) = convert_file(&path, None, Format::Letta, Syntax::Jsonl, None);
    let refused = errors(&diags);
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(
        refused.iter().all(|e| e.contains("E-unrepresentable") && e.ends_with("tools, expected.outcomes")),
        "{refused:#?}"
    );
}

/// The cases `casebook capture` makes of the example traces (`examples/traces`).
fn captured(names: &[&str]) -> Vec<Case> {
    let mut capture = casebook_formats::capture::Capture::new();
    for name in names {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces").join(name);
        let file = std::io::BufReader::new(fs_err::File::open(&path).unwrap());
        capture.read(name, file).unwrap();
    }
    let captured = capture.finish();
    assert!(!captured.has_errors(), "{:#?}", captured.diagnostics);
    captured.cases
}

#[test]
fn capture_records_what_each_executed_tool_answered_and_the_case_serves_it() {
    // GenAI: `execute_tool` spans with `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result`.
    let cases = captured(&["genai-agent.json"]);
    let tools = cases[0].task.tools.as_deref().unwrap();
    let responses = serde_json::to_value(&tools[0].responses).unwrap();
    assert_eq!(responses, json!([{"when": {"arguments": {"location": "Paris"}}, "result": "rainy, 57°F"}]));
    let snapshot = Snapshot::compile(tools).unwrap();
    let answer = snapshot.serve("get_weather", &json!({"location": "Paris"}));
    assert_eq!((answer.served, answer.content), (Served::Matched, json!("rainy, 57°F")));
    assert_eq!(snapshot.serve("get_weather", &json!({"location": "Zürich"})).served, Served::Unmatched);

    // OpenInference: `TOOL` spans' `tool.name`, `input.value` and `output.value`.
    let cases = captured(&["openinference.json"]);
    let with_answers: Vec<(&str, Value)> = cases
        .iter()
        .flat_map(|c| c.task.tools.iter().flatten())
        .filter(|t| t.responses.is_some())
        .map(|t| (t.name.as_str(), serde_json::to_value(&t.responses).unwrap()))
        .collect();
    assert_eq!(
        with_answers,
        [(
            "lookup_plan",
            json!([{"when": {"arguments": {"plan": "enterprise"}}, "result": "Enterprise: SSO, SCIM, dedicated support."}])
        )]
    );

    // The same trace with a second declared tool never called, the call made again with the same
    // arguments, and one with other arguments (in another script).
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces/genai-agent.json");
    let text = fs_err::read_to_string(example).unwrap();
    let text = text.replace(
        r#"\"required\":[\"location\"]}}]"#,
        r#"\"required\":[\"location\"]}},{\"type\":\"function\",\"name\":\"get_alerts\"}]"#,
    );
    let mut trace: Value = serde_json::from_str(&text).unwrap();
    let spans = trace["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array_mut().unwrap();
    let tool_span = spans.iter().find(|s| s["spanId"] == "2b3c4d5e6f708192").unwrap().clone();
    for (id, arguments, result) in [
        ("2b3c4d5e6f7081a1", r#"{"location": "Paris"}"#, "sunny"),
        ("2b3c4d5e6f7081a2", r#"{"location":"Zürich"}"#, "sonnig, 12 °C — 東京 nicht"),
    ] {
        let mut span = tool_span.clone();
        span["spanId"] = json!(id);
        for attr in span["attributes"].as_array_mut().unwrap() {
            match attr["key"].as_str() {
                Some("gen_ai.tool.call.arguments") => attr["value"] = json!({"stringValue": arguments}),
                Some("gen_ai.tool.call.result") => attr["value"] = json!({"stringValue": result}),
                _ => {}
            }
        }
        spans.push(span);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "trace.json", &trace.to_string());
    let mut capture = casebook_formats::capture::Capture::new();
    capture.read("trace.json", std::io::BufReader::new(fs_err::File::open(&path).unwrap())).unwrap();
    let cases = capture.finish().cases;
    let tools = cases[0].task.tools.as_deref().unwrap();
    assert_eq!(tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["get_weather", "get_alerts"]);
    assert_eq!(
        serde_json::to_value(&tools[0].responses).unwrap(),
        json!([
            {"when": {"arguments": {"location": "Paris"}}, "result": "rainy, 57°F"},
            {"when": {"arguments": {"location": "Zürich"}}, "result": "sonnig, 12 °C — 東京 nicht"}
        ])
    );
    assert_eq!((&tools[1].responses, &tools[1].default), (&None, &None));
    let snapshot = Snapshot::compile(tools).unwrap();
    assert_eq!(
        snapshot.serve("get_weather", &json!({"location": "Zürich"})).content,
        json!("sonnig, 12 °C — 東京 nicht")
    );
    assert_eq!(snapshot.serve("get_alerts", &json!({})).served, Served::Unmatched);
}
