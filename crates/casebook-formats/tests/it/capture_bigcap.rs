//! Capture of large inputs (issue 36): one document walked span by span gives what JSON lines
//! give, spans and cases through temporary files give what memory gives, and problems in a
//! document are located in the file. The traces follow the shape of `casebook generate --kind
//! otlp` (the generator's `otlp_invocation`: GenAI agents with model calls and tools, flattened
//! and OpenInference forms, conversations, content not recorded) and OTLP JSON exports
//! (`ExportTraceServiceRequest`, `resourceSpans` → `scopeSpans` → `spans`).

use casebook_formats::capture::{Capture, Captured};
use casebook_formats::synthetic::{Rng, otlp_invocation};
use casebook_model::{Case, Diagnostic};
use serde_json::{Value, json};

/// `n` invocations as batches of `per` spans: each batch's `resourceSpans` item. The agent span
/// of every fifth invocation is moved four batches later, as an exporter sends it when it ends.
fn batches(n: u64, per: usize) -> Vec<Value> {
    let mut rng = Rng(7);
    let mut spans: Vec<Value> = Vec::new();
    let mut late: Vec<Value> = Vec::new();
    for i in 0..n {
        let mut one = otlp_invocation(&mut rng, i);
        if i % 5 == 2 && one.len() > 1 {
            late.push(one.remove(0));
        }
        spans.extend(one);
        if late.len() > 4 {
            let later = late.remove(0);
            spans.push(later);
        }
    }
    spans.append(&mut late);
    spans
        .chunks(per)
        .map(|chunk| {
            json!({"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "support"}}]},
                "scopeSpans": [{"scope": {"name": "t"}, "spans": chunk}]})
        })
        .collect()
}

fn capture(capture: Capture, files: &[(&str, String)]) -> Captured {
    let mut capture = capture;
    for (name, text) in files {
        capture.read(name, text.as_bytes()).unwrap();
    }
    capture.finish()
}

fn lines(items: &[Value]) -> String {
    items.iter().map(|item| json!({"resourceSpans": [item]}).to_string() + "\n").collect()
}

fn ids(cases: &[Case]) -> Vec<&str> {
    cases.iter().map(|c| c.id.as_str()).collect()
}

#[test]
fn one_document_gives_the_cases_of_json_lines_in_memory_or_through_temporary_files() {
    let items = batches(600, 37);
    let as_lines = capture(Capture::new(), &[("t.jsonl", lines(&items))]);
    assert!(!as_lines.has_errors(), "{:#?}", as_lines.diagnostics);
    // Every generated invocation is found; most make a case, in the order they started.
    assert_eq!(as_lines.invocations, 600);
    assert!(as_lines.cases.len() > 500, "{}", as_lines.cases.len());
    let starts: Vec<&str> =
        as_lines.cases.iter().map(|c| c.provenance.as_ref().unwrap().extra["time"].as_str().unwrap()).collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]));
    // Conversations sending only the new message are joined (the generator's `talk-` ids).
    assert!(as_lines.cases.iter().any(|c| c.task.turns.is_some()
        && c.metadata.as_ref().unwrap()["conversation_id"].as_str().is_some_and(|t| t.starts_with("talk-"))));

    let document = json!({"resourceSpans": items}).to_string();
    let pretty = serde_json::to_string_pretty(&json!({"resourceSpans": items})).unwrap();
    for (name, text) in [("one-line.json", document), ("pretty.json", pretty)] {
        let one = capture(Capture::new(), &[(name, text.clone())]);
        assert!(!one.has_errors(), "{:#?}", one.diagnostics);
        assert_eq!(one.cases, as_lines.cases, "{name}");
        assert_eq!((one.spans, one.invocations), (as_lines.spans, as_lines.invocations));
        assert_eq!(warnings(&one).len(), warnings(&as_lines).len());
        // Held to a few KiB: spans, invocations of conversations and cases go through files.
        let spilled = capture(Capture::with_memory(4096), &[(name, text)]);
        assert_eq!(spilled.cases, as_lines.cases, "{name}, spilled");
        assert_eq!(messages(&spilled), messages(&one));
    }
    // Files given twice, in either order: each span read once.
    let twice = capture(Capture::with_memory(4096), &[("a.jsonl", lines(&items[20..])), ("b.jsonl", lines(&items))]);
    assert_eq!(ids(&twice.cases), ids(&as_lines.cases));
}

#[test]
fn partitions_worked_on_by_several_threads_give_what_one_thread_gives() {
    // Conversations, model calls joined per question, late agent spans and warnings (content not
    // recorded) all come from partitions taken by different threads and merged back.
    let items = batches(300, 41);
    let text = lines(&items);
    let all = |c: &Captured| {
        (serde_json::to_string(&c.cases).unwrap(), messages(c), c.spans, c.invocations, c.diagnostics_left_out.clone())
    };
    for memory in [None, Some(4096)] {
        let with = |threads| {
            let made = memory.map_or_else(Capture::new, Capture::with_memory).with_threads(threads);
            capture(made, &[("t.jsonl", text.clone())])
        };
        let one = with(1);
        assert!(!one.has_errors(), "{:#?}", one.diagnostics);
        assert!(one.cases.len() > 240 && !warnings(&one).is_empty(), "{} cases", one.cases.len());
        for threads in [2, 3] {
            assert!(all(&with(threads)) == all(&one), "{threads} threads, memory {memory:?}");
        }
    }
}

#[test]
fn a_document_read_a_few_bytes_at_a_time_gives_what_it_gives_read_whole() {
    // Values are cut out of the document by skipping strings to their next quote or backslash:
    // escapes (`\"`, `\\`, `\n`, `\u…`) falling across the reader's buffers must not end a
    // string or a value early. The generator's prompts hold quotes, backslashes and non-ASCII.
    let items = batches(40, 13);
    let document = json!({"resourceSpans": items}).to_string();
    assert!(document.contains("\\\"") || document.contains("\\\\"), "escapes in the document");
    let whole = capture(Capture::new(), &[("d.json", document.clone())]);
    assert!(!whole.has_errors() && whole.cases.len() > 30, "{:#?}", whole.diagnostics);
    for size in [1, 2, 3, 7, 64] {
        let mut small = Capture::new();
        small.read("d.json", std::io::BufReader::with_capacity(size, document.as_bytes())).unwrap();
        let small = small.finish();
        assert_eq!(small.cases, whole.cases, "buffers of {size} bytes");
        assert_eq!(messages(&small), messages(&whole), "buffers of {size} bytes");
    }
}

fn warnings(captured: &Captured) -> Vec<&Diagnostic> {
    captured.diagnostics.iter().filter(|d| !d.is_error()).collect()
}

fn messages(captured: &Captured) -> Vec<(String, u64, u64, String)> {
    captured.diagnostics.iter().map(|d| (d.code.to_string(), d.line, d.column, d.message.clone())).collect()
}

#[test]
fn problems_in_a_document_are_located_in_the_file() {
    let span = |trace: &str| {
        json!({"traceId": trace, "spanId": "00000000000000a1", "name": "invoke_agent Quiet",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]})
    };
    let good = format!("{:032x}", 1);
    // On one line: the second span's id, after non-ASCII text, is the error's column.
    let doc =
        json!({"resourceSpans": [{"resource": {"attributes": [{"key": "note", "value": {"stringValue": "café 東京"}}]},
        "scopeSpans": [{"spans": [span(&good), span("not-hex")]}]}]})
        .to_string();
    let captured = capture(Capture::new(), &[("one.json", doc.clone())]);
    let errors: Vec<_> = captured.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let byte = doc.find("\"not-hex\"").unwrap();
    let column = doc[..byte].chars().count() as u64 + 1;
    assert_eq!(
        (errors[0].line, errors[0].column, errors[0].pointer.as_deref(), errors[0].line_offset),
        (1, column, Some("/resourceSpans/0/scopeSpans/0/spans/1/traceId"), Some(0))
    );
    // Pretty-printed, with a byte-order mark: line, column and the line's offset.
    let pretty =
        format!("\u{feff}{}", serde_json::to_string_pretty(&serde_json::from_str::<Value>(&doc).unwrap()).unwrap());
    let captured = capture(Capture::new(), &[("pretty.json", pretty.clone())]);
    let error = captured.diagnostics.iter().find(|d| d.is_error()).unwrap();
    let byte = pretty.find("\"not-hex\"").unwrap();
    let line = pretty[..byte].matches('\n').count() as u64 + 1;
    let line_start = pretty[..byte].rfind('\n').unwrap() + 1;
    assert_eq!(
        (error.line, error.column, error.line_offset),
        (line, (byte - line_start) as u64 + 1, Some(line_start as u64))
    );

    // A syntax error inside a span, and one in the document around the spans.
    let broken = doc.replacen("\"name\":", "\"name\" ", 1);
    let captured = capture(Capture::new(), &[("broken.json", broken.clone())]);
    let error = &captured.diagnostics[0];
    // At the value where the `:` should be (columns count characters: `café 東京` is before).
    let at = broken.find("\"name\" ").unwrap() + 7;
    assert_eq!((error.code.as_str(), error.column), ("E-json-syntax", broken[..at].chars().count() as u64 + 1));
    let cut = &doc[..doc.len() - 2];
    let captured = capture(Capture::new(), &[("cut.json", cut.to_owned())]);
    // The id that is not hex before it, then the end that is missing.
    assert_eq!(captured.diagnostics.len(), 2, "{:#?}", captured.diagnostics);
    assert_eq!(
        (captured.diagnostics[1].code.as_str(), captured.diagnostics[1].column),
        ("E-json-syntax", cut.chars().count() as u64 + 1)
    );
    assert!(captured.cases.is_empty());
}

#[test]
fn a_resource_after_its_spans_still_names_their_service() {
    let input = json!([{"role": "user", "parts": [{"type": "text", "content": "Ping?"}]}]).to_string();
    let spans: Vec<Value> = (0..5000)
        .map(|i| {
            json!({"traceId": format!("{i:032x}"), "spanId": "00000000000000a1", "name": "invoke_agent Helper",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue": input}}]})
        })
        .collect();
    // Keys in the order written: the resource last.
    let resource = json!({"attributes": [{"key": "service.name", "value": {"stringValue": "late"}}]});
    let doc = format!(
        "{{\"resourceSpans\": [{{\"scopeSpans\": [{{\"spans\": {}}}], \"resource\": {resource}}}]}}",
        Value::Array(spans)
    );
    let captured = capture(Capture::new(), &[("late.json", doc)]);
    assert!(!captured.has_errors(), "{:#?}", &captured.diagnostics[..1]);
    assert_eq!(captured.cases.len(), 5000);
    assert!(captured.cases.iter().all(|c| c.metadata.as_ref().unwrap()["service"] == "late"));
}

#[test]
fn many_warnings_are_kept_up_to_a_bound_and_counted() {
    let kept = casebook_formats::capture::stream::KEPT_PER_CODE;
    let spans: Vec<Value> = (0..kept as u64 + 50)
        .map(|i| {
            json!({"traceId": format!("{i:032x}"), "spanId": "00000000000000a1", "name": "invoke_agent Quiet",
                "startTimeUnixNano": (1_000_000 - i).to_string(),
                "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]})
        })
        .collect();
    let doc = json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).to_string();
    let captured = capture(Capture::new(), &[("quiet.json", doc)]);
    assert_eq!(captured.diagnostics.len(), kept);
    assert_eq!(captured.diagnostics_left_out.len(), 1);
    assert_eq!((captured.diagnostics_left_out[0].0.as_str(), captured.diagnostics_left_out[0].1), ("W-no-content", 50));
    // The first in the order the invocations started: the last spans of the file.
    let last = format!("/resourceSpans/0/scopeSpans/0/spans/{}", kept + 49);
    assert_eq!(captured.diagnostics[0].pointer.as_deref(), Some(last.as_str()));
}
