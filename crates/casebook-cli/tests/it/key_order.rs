//! Object keys come back in the order the source file wrote them, in every format: converted to
//! the same format, through casebook's native file and back, and imported into a store (embedded
//! and PostgreSQL) and exported. The assertions read the output TEXT, so a writer that kept the
//! values but sorted the keys fails them.
//!
//! Every nested object below has keys in an order that is sorted by no rule: byte order (UTF-8),
//! UTF-16 order (RFC 8785's, which the content id uses) and the order written all differ, since
//! `𝔘` (U+1D518, a surrogate pair in UTF-16) sorts after `ｆ` (U+FF46) in UTF-8 and before it in
//! UTF-16. Each object's keys carry a tag of their own, so each key occurs once in a file.
// Helpers of the tests panic like the tests do.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use crate::cli::{Backend, Folder, run};

/// The keys of the object tagged `tag`, in the order the files write them.
fn keys(tag: &str) -> Vec<String> {
    ["zulu", "ｆｕｌｌ", "Ähre", "𝔘ncial", "alpha", "mike"].iter().map(|k| format!("{k}{tag}")).collect()
}

/// A JSON object (also YAML flow) with the keys of `tag` in order, each with a string value.
fn obj(tag: &str) -> String {
    let fields: Vec<String> = keys(tag).iter().enumerate().map(|(i, k)| format!("\"{k}\": \"v{i}\"")).collect();
    format!("{{{}}}", fields.join(", "))
}

/// `obj(tag)` with the object tagged `inner` as the value of one more key in the middle.
fn nested(tag: &str, inner: &str) -> String {
    let mut fields: Vec<String> = keys(tag).iter().enumerate().map(|(i, k)| format!("\"{k}\": \"v{i}\"")).collect();
    fields.insert(3, format!("\"nest{tag}\": {}", obj(inner)));
    format!("{{{}}}", fields.join(", "))
}

/// Replaces `{@A}` … with `obj("A")` … and `{@A/B}` with `nested("A", "B")` (with each `"`
/// doubled in a CSV file, whose objects are in quoted cells); returns the text and the tags it
/// used.
fn fill(template: &str, csv: bool) -> (String, Vec<(String, bool)>) {
    let quote = |text: String| if csv { text.replace('"', "\"\"") } else { text };
    let mut out = String::new();
    let mut tags = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{@") {
        out.push_str(&rest[..start]);
        let end = start + rest[start..].find('}').unwrap();
        let spec = &rest[start + 2..end];
        match spec.split_once('/') {
            Some((outer, inner)) => {
                out.push_str(&quote(nested(outer, inner)));
                tags.push((outer.to_owned(), true));
                tags.push((inner.to_owned(), false));
            }
            None => {
                out.push_str(&quote(obj(spec)));
                tags.push((spec.to_owned(), false));
            }
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    (out, tags)
}

/// Checks that each object's keys occur in `text`, once each, in the order written (a nested
/// object's key in its place among them).
#[track_caller]
fn assert_order(text: &str, tags: &[(String, bool)], what: &str) {
    for (tag, has_nest) in tags {
        let mut keys = keys(tag);
        if *has_nest {
            keys.insert(3, format!("nest{tag}"));
        }
        let places: Vec<usize> = keys
            .iter()
            .map(|k| {
                let found: Vec<usize> = text.match_indices(k.as_str()).map(|(i, _)| i).collect();
                assert_eq!(found.len(), 1, "{what}: key `{k}` occurs {} times in\n{text}", found.len());
                found[0]
            })
            .collect();
        assert!(places.is_sorted(), "{what}: the keys of object {tag} are out of order in\n{text}");
    }
}

/// One file of a format: its name (the extension gives the syntax), its text with `{@A}`
/// placeholders, the `--to` name and syntax it is written back with, and other keys that must
/// stay in the order given (each occurring once in the file).
struct Source {
    file: &'static str,
    template: &'static str,
    to: &'static str,
    syntax: &'static str,
    orders: &'static [&'static [&'static str]],
}

/// [`assert_order`] and the source's other orders (in a file of the source's format).
#[track_caller]
fn assert_all(text: &str, tags: &[(String, bool)], source: &Source, what: &str) {
    assert_order(text, tags, what);
    for keys in source.orders {
        let places: Vec<usize> = keys
            .iter()
            .map(|k| {
                let found: Vec<usize> = text.match_indices(k).map(|(i, _)| i).collect();
                assert_eq!(found.len(), 1, "{what}: key `{k}` occurs {} times in\n{text}", found.len());
                found[0]
            })
            .collect();
        assert!(places.is_sorted(), "{what}: {keys:?} are out of order in\n{text}");
    }
}

const SOURCES: &[Source] = &[
    // casebook's native format (the shape of `examples/casebook/incidents.yaml`, as JSON lines).
    Source {
        file: "native.jsonl",
        template: r#"{"id": "c1", "input": {@A}, "tools": [{"name": "lookup", "parameters": {"type": "object", "properties": {@B}}, "responses": [{"when": {"matches": {@C}}, "result": {@D}, "query": {"url": "http://127.0.0.1:9/q", "headers": {@Q}}}]}], "expected": {"output": {@E}, "rubric_vars": {@F}}, "metadata": {@G/H}}
{"id": "c2", "input": "plain", "context": [{"type": "log", "content": {@I}}], "agent_args": {@J}}
"#,
        to: "casebook",
        syntax: "jsonl",
        orders: &[],
    },
    // The same, as a native YAML document with a header (`examples/casebook/incidents.yaml`).
    Source {
        file: "native.yaml",
        template: r#"name: ordered
metadata: {@K}
cases:
- id: c1
  input: {@A}
  tools:
  - name: lookup
    parameters: {type: object, properties: {@B}}
    responses:
    - when: {matches: {@C}}
      result: {@D}
  expected:
    output: {@E}
  metadata: {@G/H}
"#,
        to: "casebook",
        syntax: "yaml",
        orders: &[],
    },
    Source {
        file: "native.json",
        template: r#"{"name": "ordered", "metadata": {@K}, "cases": [
  {"id": "c1", "input": {@A}, "expected": {"output": {@E}}, "metadata": {@G/H}}
]}
"#,
        to: "casebook",
        syntax: "json",
        orders: &[],
    },
    // letta JSONL (`examples/letta/support.jsonl`): metadata, agent_args, rubric_vars, extra_vars.
    Source {
        file: "letta.jsonl",
        template: r#"{"id": 1, "input": "A question", "ground_truth": "an answer", "metadata": {@G/H}, "agent_args": {@J}, "rubric_vars": {@F}, "extra_vars": {@L}}
"#,
        to: "letta",
        syntax: "jsonl",
        orders: &[],
    },
    // letta CSV: JSON objects in cells (letta parses cells that look like JSON).
    Source {
        file: "letta.csv",
        template: "id,input,ground_truth,metadata,agent_args\n1,A question,an answer,\"{@G/H}\",\"{@J}\"\n",
        to: "letta",
        syntax: "csv",
        orders: &[],
    },
    // mas-lab manifest (`examples/maslab/trip-planner.yaml`): manifest metadata, item metadata,
    // a tool call's arguments in the expectations.
    Source {
        file: "maslab.yaml",
        template: r#"apiVersion: lab/v1
kind: Dataset
metadata:
  name: ordered
  labelsOf: {@K}
spec:
  items:
  - id: m1
    inputs:
      user:
      - role: user
        content: Plan a trip
    expectations:
      ground_truth: {@E}
    metadata: {@G/H}
"#,
        to: "maslab",
        syntax: "yaml",
        orders: &[],
    },
    // Agent Health (`examples/agenthealth/rca.json`): a context item's value as an object.
    Source {
        file: "agenthealth.json",
        template: r#"[
  {
    "name": "Slow checkout",
    "description": "p99 doubled",
    "category": "RCA",
    "difficulty": "Medium",
    "initialPrompt": "Why is checkout slow?",
    "context": [{"description": "Deploy", "value": {@A}}],
    "expectedOutcomes": ["Agent should read the deploy log"],
    "owner": {@G/H}
  }
]
"#,
        to: "agenthealth",
        syntax: "json",
        orders: &[],
    },
    // VoltAgent (`examples/voltagent/geography.json`): dataset metadata, input, expected, extra.
    Source {
        file: "voltagent.json",
        template: r#"{
  "name": "ordered",
  "description": "Key order",
  "metadata": {@K},
  "data": [
    {"name": "one", "input": {@A}, "expected": {@E}, "extra": {@G/H}},
    {"name": "two", "input": "Capital of France?", "expected": "Paris", "extra": {"scoreThreshold": 0.8, "acceptableAnswers": ["Paris", "Paris, France"], "domain": "geo"}}
  ]
}
"#,
        to: "voltagent",
        syntax: "json",
        // `acceptableAnswers` is the expectations' `acceptable`, written back in its place in
        // `extra` (here not first, where VoltAgent's documentation writes it).
        orders: &[&["scoreThreshold", "acceptableAnswers", "domain"]],
    },
    // Inspect JSONL (`examples/inspect/samples.jsonl`): metadata and files.
    Source {
        file: "inspect.jsonl",
        template: r#"{"id": 1, "input": "What is the capital of France?", "target": "Paris", "metadata": {@G/H}, "files": {@J}}
"#,
        to: "inspect",
        syntax: "jsonl",
        orders: &[],
    },
    // Inspect CSV (`examples/inspect/security.csv`): metadata as JSON in a cell.
    Source {
        file: "inspect.csv",
        template: "id,input,target,metadata\ncookie,Which attributes?,secure,\"{@G/H}\"\n",
        to: "inspect",
        syntax: "csv",
        orders: &[],
    },
    // promptfoo tests (`examples/promptfoo/tests.yaml`): vars, metadata, options, an assert's value.
    Source {
        file: "promptfoo.yaml",
        template: r#"- description: ordered
  vars: {@A}
  assert:
  - type: is-json
    value: {@E}
  options: {@J}
  metadata: {@G/H}
"#,
        to: "promptfoo",
        syntax: "yaml",
        orders: &[],
    },
    // A promptfoo configuration (`examples/promptfoo/promptfooconfig.yaml`) whose `defaultTest`
    // gives each test a variable: written back without it, the test's own in their order.
    Source {
        file: "promptfooconfig.yaml",
        template: r#"prompts:
  - 'Answer in {{language}}'
defaultTest:
  vars:
    language: French
  metadata: {team: qa, owner: casebook}
tests:
  - vars: {@V}
    assert:
      - type: contains
        value: Bonjour
"#,
        to: "promptfoo",
        syntax: "yaml",
        orders: &[],
    },
    // OpenAI evals samples: chat input, and an unknown key holding an object (kept in metadata).
    Source {
        file: "evals.jsonl",
        template: r#"{"input": [{"role": "user", "content": "2 + 3 =", "name": "asker"}], "ideal": "5", "notes": {@G/H}}
"#,
        to: "openai-evals",
        syntax: "jsonl",
        orders: &[],
    },
];

/// `casebook convert FROM --to TO --syntax SYNTAX -o OUT`, which must succeed; OUT's text.
#[track_caller]
fn convert(dir: &Folder, from: &Path, to: &str, syntax: &str, out: &str) -> (PathBuf, String) {
    let out = dir.join(out);
    let r = run(crate::cli::casebook()
        .arg("convert")
        .arg(from)
        .args(["--to", to, "--syntax", syntax, "-q", "--overwrite", "-o"])
        .arg(&out));
    r.expect_status(0);
    let text = fs_err::read_to_string(&out).unwrap();
    (out, text)
}

#[test]
fn every_format_keeps_key_order_when_converted() {
    for source in SOURCES {
        let dir = Folder::new();
        let (text, tags) = fill(source.template, source.syntax == "csv");
        let file = dir.file(source.file, &text);
        assert_all(&text, &tags, source, &format!("{} as written", source.file));
        let ext = source.syntax;
        let (_, same) = convert(&dir, &file, source.to, source.syntax, &format!("same.{ext}"));
        assert_all(&same, &tags, source, &format!("{} → {}", source.file, source.to));
        for native in ["jsonl", "yaml", "json"] {
            let (middle, text) = convert(&dir, &file, "casebook", native, &format!("mid.{native}"));
            assert_order(&text, &tags, &format!("{} → casebook {native}", source.file));
            let (_, back) = convert(&dir, &middle, source.to, source.syntax, &format!("back.{ext}"));
            assert_all(&back, &tags, source, &format!("{} → casebook {native} → {}", source.file, source.to));
        }
    }
}

fn every_format_keeps_key_order_through_a_store(b: &Backend) {
    let dir = Folder::new();
    run(b.cb(&dir).arg("init")).expect_status(0);
    for (i, source) in SOURCES.iter().enumerate() {
        let (text, tags) = fill(source.template, source.syntax == "csv");
        let file = dir.file(source.file, &text);
        let dataset = format!("d{i}");
        run(b.cb(&dir).args(["import", "-q", "--dataset", &dataset]).arg(&file)).expect_status(0);
        let out = dir.join(&format!("export-{i}.{}", source.syntax));
        run(b.cb(&dir).args(["export", &dataset, "--to", source.to, "--syntax", source.syntax, "-q", "-o"]).arg(&out))
            .expect_status(0);
        let exported = fs_err::read_to_string(&out).unwrap();
        assert_all(&exported, &tags, source, &format!("{} imported and exported", source.file));
        let native = run(b.cb(&dir).args(["export", &dataset, "--to", "casebook", "-q"]));
        native.expect_status(0);
        assert_order(&native.stdout, &tags, &format!("{} imported, exported as casebook", source.file));
    }
}

/// Two files with the same values in other key orders hold the same cases (the content id is
/// of the canonical form): the store keeps the body it stored first, so the second dataset
/// exports in the first file's order, and importing the reordered file onto the first changes
/// nothing.
fn the_same_case_in_another_order_is_the_same_content(b: &Backend) {
    let dir = Folder::new();
    run(b.cb(&dir).arg("init")).expect_status(0);
    let first = dir.file("first.jsonl", "{\"id\": \"c\", \"input\": \"q\", \"metadata\": {\"b\": 1, \"a\": 2}}\n");
    let second = dir.file("second.jsonl", "{\"id\": \"c\", \"input\": \"q\", \"metadata\": {\"a\": 2, \"b\": 1}}\n");
    run(b.cb(&dir).args(["import", "-q", "--dataset", "one"]).arg(&first)).expect_status(0);
    let again = run(b.cb(&dir).args(["import", "--dataset", "one"]).arg(&second));
    again.expect_status(0);
    assert!(again.stdout.starts_with("no change: one v1 "), "{again:?}");
    run(b.cb(&dir).args(["import", "-q", "--dataset", "two"]).arg(&second)).expect_status(0);
    for dataset in ["one", "two"] {
        let out = run(b.cb(&dir).args(["export", dataset, "--to", "letta", "-q"]));
        out.expect_status(0);
        assert_eq!(out.stdout, "{\"id\":\"c\",\"input\":\"q\",\"metadata\":{\"b\":1,\"a\":2}}\n", "{dataset}");
    }
}

on_both!(every_format_keeps_key_order_through_a_store, the_same_case_in_another_order_is_the_same_content);
