//! `casebook capture`: trace files written from the OpenTelemetry GenAI and OpenInference
//! conventions' documents (`examples/traces/`, one per convention and form) become cases with
//! draft expectations; content the traces did not record is a located warning; errors in the
//! traces are located and write nothing; a trace captured twice adds nothing, and a captured
//! case reviewed since is never overwritten, on both store backends.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cli::{Folder, Loc, at, cb, jsonl, postgres_database, run};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces").join(name)
}

/// The cases `capture --dry-run` writes (native JSONL, its header line left out).
fn captured(dir: &Folder, files: &[&Path]) -> Vec<Value> {
    let out = run(cb(dir).args(["capture", "--dry-run"]).args(files));
    out.expect_status(0);
    jsonl(&out.stdout).into_iter().filter(|v| v.get("$dataset").is_none()).collect()
}

/// Code, line, column and pointer of each diagnostic printed on stderr with `--format json`.
fn warnings(stderr: &str) -> Vec<Loc> {
    stderr.lines().filter(|l| l.starts_with('{')).map(|l| Loc::of(&serde_json::from_str(l).unwrap())).collect()
}

#[test]
fn a_tool_calling_agent_becomes_one_case_with_draft_expectations() {
    let dir = Folder::new();
    let cases = captured(&dir, &[&example("genai-agent.json")]);
    assert_eq!(
        cases,
        [json!({
            "id": "trace-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "input": "What is the weather in Paris?",
            "context": [{"type": "custom", "source": "system_instructions",
                "content": "You are a weather assistant. Answer in one sentence."}],
            "tools": [{"name": "get_weather", "description": "Current weather of a city",
                "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
                // What the tool answered in production, served when the case is run.
                "responses": [{"when": {"arguments": {"location": "Paris"}}, "result": "rainy, 57°F"}],
                "type": "function"}],
            "expected": {"output": "It is rainy in Paris, 57°F.",
                "tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}]},
            "metadata": {"service": "weather-service", "agent": "Weather Agent", "model": "gpt-4o",
                "conversation_id": "conv_5j66UpCpwteGg4YSxUnt7lPY", "status": "ok"},
            "review": "draft",
            "provenance": {"format": "otlp", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
                "span_id": "00f067aa0ba902b7", "service": "weather-service", "time": "2024-04-24T23:06:40Z",
                "convention": "gen_ai"}
        })]
    );
}

#[test]
fn conversations_become_turns_with_the_answers_of_each_turn() {
    let dir = Folder::new();
    let cases = captured(&dir, &[&example("genai-conversation.jsonl")]);
    assert_eq!(cases.len(), 3);
    // A stateful agent sent one message an invocation: the second invocation replays the first.
    assert_eq!(cases[0]["input"], "I want to return my order 1234, the café grinder");
    assert_eq!(cases[0].get("turns"), None);
    assert_eq!(cases[1]["input"], cases[0]["input"]);
    assert_eq!(cases[1]["turns"], json!([{"role": "user", "content": "Yes, the burr is cracked (割れています)"}]));
    assert_eq!(
        cases[1]["expected"],
        json!({"output": "I have opened return R-77; a label is on its way.",
            "per_turn": ["Sure — was the item damaged?", "I have opened return R-77; a label is on its way."]})
    );
    // The history in the input (as structured attribute values): system, user, assistant, user.
    assert_eq!(cases[2]["input"], "Hi");
    assert_eq!(cases[2]["turns"], json!([{"role": "user", "content": "Cancel my subscription, please"}]));
    assert_eq!(cases[2]["context"][0]["content"], "You help customers of a coffee-gear shop.");
    assert_eq!(cases[2]["expected"]["per_turn"][0], "Hello! How can I help?");
    assert!(cases.iter().all(|c| c["review"] == "draft"));
}

#[test]
fn deprecated_genai_forms_are_read() {
    let dir = Folder::new();
    // Flattened attributes on model calls under an HTTP span, without an agent span: the trace
    // is one invocation; the tool call comes from the model's output.
    let flat = captured(&dir, &[&example("genai-flattened.json")]);
    assert_eq!(flat.len(), 1);
    assert_eq!(flat[0]["id"], "trace-a3ce929d0e0e47364bf92f3577b34da6-53995c3f42cd8ad8");
    assert_eq!(flat[0]["input"], "What time is it in Tokyo?");
    assert_eq!(flat[0]["context"][0]["content"], "You tell the time anywhere.");
    assert_eq!(flat[0]["tools"][0]["parameters"], json!({"type": "object", "properties": {"tz": {"type": "string"}}}));
    assert_eq!(
        flat[0]["expected"],
        json!({"output": "It is 21:04 in Tokyo.", "tool_calls": [{"name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}]})
    );
    assert_eq!(flat[0]["provenance"]["convention"], "gen_ai-flattened");
    // Span events: `gen_ai.content.prompt`/`completion`, and one event per message.
    let events = captured(&dir, &[&example("genai-events.json")]);
    let read: Vec<(&Value, &Value, &Value)> =
        events.iter().map(|c| (&c["input"], &c["context"][0]["content"], &c["expected"]["output"])).collect();
    assert_eq!(
        read,
        [
            (&json!("Where is the station?"), &json!("Translate into German."), &json!("Wo ist der Bahnhof?")),
            (&json!("Good morning"), &json!("Translate into German."), &json!("Guten Morgen")),
        ]
    );
}

#[test]
fn openinference_agents_keep_documents_tools_and_tool_calls() {
    let dir = Folder::new();
    let cases = captured(&dir, &[&example("openinference.json")]);
    assert_eq!(cases.len(), 1);
    let case = &cases[0];
    assert_eq!(case["input"], "Which of our plans include SSO?");
    assert_eq!(
        case["context"],
        json!([
            {"type": "custom", "source": "system_instructions", "content": "Answer from the documents; use tools for plan details."},
            {"type": "document", "source": "plans.md#business", "content": "Business: SSO, audit log, 99.9% SLA.",
                "metadata": {"score": 0.91, "source": "docs"}},
            {"type": "document", "source": "plans.md#team", "content": "Team: shared workspaces, no SSO.",
                "metadata": {"score": 0.74}}
        ])
    );
    assert_eq!(case["tools"][0]["name"], "lookup_plan");
    assert_eq!(case["tools"][0]["description"], "Features of a plan");
    // The tool the agent executed (its JSON input), and the agent's own answer.
    assert_eq!(
        case["expected"],
        json!({"output": "The Business and Enterprise plans include SSO.",
            "tool_calls": [{"name": "lookup_plan", "arguments": {"plan": "enterprise"}}]})
    );
    assert_eq!(case["metadata"]["conversation_id"], "sess-42");
    assert_eq!(case["provenance"]["convention"], "openinference");
}

#[test]
fn traces_without_content_are_warnings_located_at_the_agent_span() {
    let dir = Folder::new();
    let quiet = example("no-content.json");
    let alone = run(cb(&dir).args(["--format", "json", "capture", "--dry-run"]).arg(&quiet));
    alone.expect_status(1);
    assert_eq!(warnings(&alone.stderr), [at("W-no-content", 20, 13, "/resourceSpans/0/scopeSpans/0/spans/0")]);
    assert!(alone.stderr.contains("recorded no user message: no case was made from it"), "{alone:?}");
    assert!(alone.stderr.contains("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only"), "{alone:?}");
    assert!(
        alone.stderr.contains("nothing was captured: 2 spans hold no agent invocation with recorded messages"),
        "{alone:?}"
    );
    assert_eq!(alone.stdout, "");
    // Beside a trace with content, the warning stays and the other trace makes its case.
    let both =
        run(cb(&dir).args(["--format", "json", "capture", "--dry-run"]).arg(&quiet).arg(example("genai-agent.json")));
    both.expect_status(0);
    assert_eq!(warnings(&both.stderr).len(), 1, "{both:?}");
    assert_eq!(jsonl(&both.stdout).len(), 2, "{both:?}");
    // An answer that was not recorded: the case is made, without an expected output.
    let no_answer = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef","spanId":"0000000000000b01","name":"invoke_agent Helper","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"invoke_agent"}},{"key":"gen_ai.input.messages","value":{"stringValue":"[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"Ping?\"}]}]"}}]}]}]}]}"#;
    let file = dir.file("no-answer.json", no_answer);
    let out = run(cb(&dir).args(["--format", "json", "capture", "--dry-run"]).arg(&file));
    out.expect_status(0);
    assert_eq!(warnings(&out.stderr), [at("W-no-content", 1, 44, "/resourceSpans/0/scopeSpans/0/spans/0")]);
    let cases = jsonl(&out.stdout);
    assert_eq!((cases[1]["input"].as_str(), cases[1].get("expected")), (Some("Ping?"), None));
}

#[test]
fn errors_in_traces_are_located_and_nothing_is_written() {
    let dir = Folder::new();
    let store = dir.join("store");
    run(cb(&dir).arg("--store").arg(&store).arg("init")).expect_status(0);
    let line = fs_err::read_to_string(example("genai-conversation.jsonl")).unwrap();
    let first = line.lines().next().unwrap();
    // JSON lines: a broken second line, an id that is not hex on the third.
    let broken = format!(
        "{first}\n{{\"resourceSpans\": [}}\n{}\n",
        first.replace("\"traceId\":\"5b8efff798038103d269b633813fc60c\"", "\"traceId\":\"5b8e-not-hex\"")
    );
    let file = dir.file("broken.jsonl", &broken);
    let out =
        run(cb(&dir).arg("--store").arg(&store).args(["--format", "json", "capture", "--dataset", "prod"]).arg(&file));
    out.expect_status(1);
    let col = first.find("\"5b8efff").unwrap() as u64 + 1;
    assert_eq!(
        warnings(&out.stderr),
        [
            at("E-json-syntax", 2, 20, ""),
            at("E-invalid-value", 3, col, "/resourceSpans/0/scopeSpans/0/spans/0/traceId")
        ]
    );
    assert!(out.stderr.contains("nothing was captured: the traces have 2 errors"), "{out:?}");
    let datasets = run(cb(&dir).arg("--store").arg(&store).args(["datasets", "--format", "json"]));
    assert!(!datasets.stdout.contains("prod"), "{datasets:?}");
    // Not a trace document at all.
    let other = dir.file("cases.json", "{\"cases\": []}");
    let out = run(cb(&dir).args(["--format", "json", "capture", "--dry-run"]).arg(&other));
    out.expect_status(1);
    assert_eq!(warnings(&out.stderr), [at("E-missing-field", 1, 1, "")]);
    assert!(out.stderr.contains("not an OTLP trace or log document"), "{out:?}");
    // Not UTF-8.
    let binary = dir.file("binary.json", b"{\"resourceSpans\": [\"\xff\"]}");
    let out = run(cb(&dir).args(["--format", "json", "capture", "--dry-run"]).arg(&binary));
    out.expect_status(1);
    assert_eq!(warnings(&out.stderr), [at("E-invalid-utf8", 1, 21, "")]);
    // A missing dataset name without `--dry-run` is a usage error.
    let out = run(cb(&dir).arg("capture").arg(example("genai-agent.json")));
    out.expect_status(2);
}

#[test]
fn a_trace_split_over_files_or_given_twice_makes_one_case() {
    let dir = Folder::new();
    let whole: Value = serde_json::from_str(&fs_err::read_to_string(example("genai-agent.json")).unwrap()).unwrap();
    let spans = whole["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array().unwrap();
    let part = |spans: &[Value]| {
        let mut doc = whole.clone();
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"] = Value::Array(spans.to_vec());
        doc.to_string()
    };
    // The model calls and the tool in one file, the agent span in another, read in that order.
    let children = dir.file("children.json", part(&spans[1..]));
    let agent = dir.file("agent.json", part(&spans[..1]));
    let split = captured(&dir, &[&children, &agent]);
    let whole_cases = captured(&dir, &[&example("genai-agent.json")]);
    assert_eq!(split, whole_cases);
    let twice = captured(&dir, &[&example("genai-agent.json"), &example("genai-agent.json")]);
    assert_eq!(twice, whole_cases);
}

#[test]
fn dry_runs_write_any_format() {
    let dir = Folder::new();
    let out = run(cb(&dir)
        .args(["capture", "--dry-run", "--to", "openai-evals", "--lossy", "--confirm-drafts", "-q"])
        .arg(example("genai-flattened.json")));
    out.expect_status(0);
    // The id (from the trace, not derived) and the metadata are kept, as the format keeps extra keys.
    assert_eq!(
        jsonl(&out.stdout),
        [json!({"id": "trace-a3ce929d0e0e47364bf92f3577b34da6-53995c3f42cd8ad8", "input": "What time is it in Tokyo?",
            "ideal": "It is 21:04 in Tokyo.", "service": "clock-api", "model": "gpt-4o", "status": "ok"})]
    );
    // Without `--lossy`, what the format cannot hold is refused, by name (`review` is not among
    // it: `--confirm-drafts` asked for it to go).
    let out = run(cb(&dir)
        .args(["capture", "--dry-run", "--to", "openai-evals", "--confirm-drafts"])
        .arg(example("genai-flattened.json")));
    out.expect_status(1);
    assert!(out.stderr.contains("cannot hold: context, tools, expected.tool_calls\n"), "{out:?}");
}

/// What an agent answered in production is a draft nobody confirmed: a format without `review`
/// would make it plain ground truth, so it is refused, `--lossy` or not, unless
/// `--confirm-drafts` says so; nothing reaches standard output when it is refused.
#[test]
fn captured_answers_are_not_written_as_confirmed_ground_truth() {
    let dir = Folder::new();
    let traces = [example("genai-flattened.json"), example("genai-conversation.jsonl")];
    let ids: Vec<String> = captured(&dir, &[&traces[0], &traces[1]])
        .iter()
        .map(|c| {
            assert_eq!(c["review"], "draft", "{c}");
            c["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert!(ids.len() >= 4, "{ids:?}");
    let named = format!("`{}`, `{}`, `{}`, {} more", ids[0], ids[1], ids[2], ids.len() - 3);
    for lossy in [&[][..], &["--lossy"]] {
        let out =
            run(cb(&dir).args(["capture", "--dry-run", "--to", "letta", "--format", "json"]).args(lossy).args(&traces));
        out.expect_status(1);
        assert_eq!(out.stdout, "", "nothing is written: {out:?}");
        let refused: Vec<Value> = out
            .stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|d| d["code"] == "E-unconfirmed-drafts")
            .collect();
        assert_eq!(refused.len(), 1, "one error for every draft: {out:?}");
        assert_eq!(
            refused[0]["message"],
            format!(
                "{} cases with draft expectations (`review: draft`) would be written as confirmed, `letta` having no \
                 place for `review`: {named}",
                ids.len()
            )
        );
        assert!(refused[0]["hint"].as_str().unwrap().contains("`--confirm-drafts`"), "{out:?}");
        // `--lossy` drops nothing else either: no case was written.
        assert!(!out.stderr.contains("W-dropped"), "{out:?}");
    }
    let out = run(cb(&dir)
        .args(["capture", "--dry-run", "--to", "letta", "--lossy", "--confirm-drafts", "-q"])
        .args(&traces));
    out.expect_status(0);
    let rows = jsonl(&out.stdout);
    assert_eq!(rows.len(), ids.len());
    assert!(rows.iter().any(|r| r["ground_truth"] == "It is 21:04 in Tokyo." && r.get("review").is_none()), "{rows:?}");
    // Native JSONL keeps `review: draft`: nothing to confirm.
    run(cb(&dir).args(["capture", "--dry-run", "-q"]).args(&traces)).expect_status(0);
}

fn captures_add_only_new_cases(store: &str, dir: &Folder) {
    let cb = |dir: &Folder| {
        let mut cmd = cb(dir);
        cmd.args(["--store", store]);
        cmd
    };
    run(cb(dir).arg("init")).expect_status(0);
    let agent = example("genai-agent.json");
    let conversation = example("genai-conversation.jsonl");
    let first = run(cb(dir).args(["--format", "json", "capture", "--dataset", "prod", "-m", "monday"]).arg(&agent));
    first.expect_status(0);
    let report: Value = serde_json::from_str(&first.stdout).unwrap();
    assert_eq!((report["created"].as_bool(), report["version"]["number"].as_u64()), (Some(true), Some(1)), "{report}");
    assert_eq!(report["version"]["message"], "monday");
    // Only what `--where` selects.
    let some = run(cb(dir)
        .args(["--format", "json", "capture", "--dataset", "prod", "--where", "'Hi' == input"])
        .arg(&conversation)
        .arg(&agent));
    some.expect_status(0);
    let report: Value = serde_json::from_str(&some.stdout).unwrap();
    assert_eq!(report["added"], json!(["trace-0af7651916cd43dd8448eb211c80319c-b9c7c989f97918e1"]), "{report}");
    assert_eq!((report["left_out"].as_u64(), report["present"].as_array().map(Vec::len)), (Some(3), Some(0)));
    // A reviewed case is not put back to draft by capturing its trace again.
    let id = "trace-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7";
    run(cb(dir).args(["review", "prod", id, "--state", "reviewed"])).expect_status(0);
    let again = run(cb(dir).args(["capture", "--dataset", "prod"]).arg(&agent));
    again.expect_status(0);
    assert!(again.stdout.contains("nothing added: prod has every captured case already; 1 already there"), "{again:?}");
    let shown = run(cb(dir).args(["show", "prod", id, "--format", "json"]));
    let case: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(case["review"], "reviewed", "{shown:?}");
    assert_eq!(case["provenance"]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    let log = run(cb(dir).args(["log", "prod", "--format", "json"]));
    assert_eq!(crate::cli::log_versions(&log.stdout).len(), 3, "{log:?}");
    // `--limit` into a store (the cases go to it prepared, in the order the invocations
    // started): the first ones are added, the others counted as left out.
    let limited =
        run(cb(dir).args(["--format", "json", "capture", "--dataset", "limited", "--limit", "2"]).arg(&conversation));
    limited.expect_status(0);
    let report: Value = serde_json::from_str(&limited.stdout).unwrap();
    assert_eq!((report["added"].as_array().map(Vec::len), report["left_out"].as_u64()), (Some(2), Some(1)), "{report}");
    assert_eq!(report["version"]["cases"], 2, "{report}");
}

#[test]
fn captures_add_only_new_cases_on_sqlite() {
    let dir = Folder::new();
    captures_add_only_new_cases(&dir.join("store").display().to_string(), &dir);
}

#[test]
fn captures_add_only_new_cases_on_postgres() {
    let dir = Folder::new();
    captures_add_only_new_cases(&postgres_database(), &dir);
}

#[test]
fn attributes_that_break_their_convention_are_warnings_and_left_out() {
    let dir = Folder::new();
    let attr = |k: &str, v: &str| json!({"key": k, "value": {"stringValue": v}});
    let spans = json!([
        {"traceId": "99999999999999999999999999999999", "spanId": "9999999999999901", "name": "invoke_agent Helper",
         "attributes": [attr("gen_ai.operation.name", "invoke_agent"), attr("gen_ai.input.messages", "Ping?")]},
        {"traceId": "99999999999999999999999999999999", "spanId": "9999999999999902", "parentSpanId": "9999999999999901",
         "name": "chat", "attributes": [attr("gen_ai.operation.name", "chat"),
            attr("gen_ai.input.messages", r#"[{"role":"user","parts":[{"type":"text","content":"Ping?"}]}]"#),
            attr("gen_ai.output.messages", r#"[{"role":"assistant","parts":[{"type":"text","content":"Pong."}]}]"#)]}
    ]);
    let doc = json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]});
    let file = dir.file("odd.json", serde_json::to_string_pretty(&doc).unwrap());
    let out = run(cb(&dir).args(["--format", "json", "capture", "--dry-run"]).arg(&file));
    out.expect_status(0);
    // Once, at the agent span, however often the attribute was looked at.
    assert_eq!(warnings(&out.stderr), [at("W-trace-attribute", 7, 13, "/resourceSpans/0/scopeSpans/0/spans/0")]);
    assert!(out.stderr.contains("`gen_ai.input.messages` of span `invoke_agent Helper`"), "{out:?}");
    // The model call's messages are read instead.
    let cases = jsonl(&out.stdout);
    assert_eq!((cases[1]["input"].as_str(), cases[1]["expected"]["output"].as_str()), (Some("Ping?"), Some("Pong.")));
}

#[test]
fn many_warnings_of_one_code_are_counted_after_the_first_twenty() {
    let dir = Folder::new();
    // 25 invocations recorded without content, and the example's with content.
    let spans: Vec<Value> = (0..25)
        .map(|i| {
            json!({"traceId": format!("{i:032x}"), "spanId": "00000000000000a1", "name": "invoke_agent Quiet",
                "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]})
        })
        .collect();
    let quiet = dir.file("quiet.json", json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).to_string());
    let human = run(cb(&dir).args(["capture", "--dry-run"]).arg(&quiet).arg(example("genai-agent.json")));
    human.expect_status(0);
    assert_eq!(human.stderr.matches("warning[W-no-content]").count(), 20, "{human:?}");
    assert!(human.stderr.contains("… and 5 more W-no-content warnings (`--format json` lists every one)"), "{human:?}");
    let machine =
        run(cb(&dir).args(["--format", "json", "capture", "--dry-run"]).arg(&quiet).arg(example("genai-agent.json")));
    assert_eq!(warnings(&machine.stderr).len(), 25, "{machine:?}");
}

#[test]
fn json_lines_with_a_byte_order_mark_or_on_standard_input_are_read() {
    let dir = Folder::new();
    let lines = fs_err::read_to_string(example("genai-conversation.jsonl")).unwrap();
    let file = dir.file("bom.jsonl", format!("\u{feff}{lines}{{\"resourceSpans\": 7}}\n"));
    let out = run(cb(&dir).args(["--format", "json", "capture", "--dry-run"]).arg(&file));
    out.expect_status(1);
    assert_eq!(warnings(&out.stderr), [at("E-wrong-type", 4, 19, "/resourceSpans")]);
    let piped = run(cb(&dir)
        .args(["capture", "--dry-run", "-"])
        .write_stdin(fs_err::read(example("genai-conversation.jsonl")).unwrap()));
    piped.expect_status(0);
    assert_eq!(jsonl(&piped.stdout).len(), 4, "{piped:?}");
}
