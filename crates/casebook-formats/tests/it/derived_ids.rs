//! Ids of rows that have none: `t-` and 16 hex digits of the task's content id for the first row
//! of a task; a later row of the same task adds 8 hex digits of the rest of its case
//! (`t-…-1a2b3c4d`); only rows wholly identical to an earlier one are numbered by their place
//! (`t-…-1a2b3c4d-2`, `-3`, …). The same whatever the number of threads and the file's syntax.

use casebook_canon::Variant;
use casebook_formats::synthetic::{Rng, letta_realistic_row};
use casebook_formats::{
    Batch, Consumer, Flow, Format, Input, ReadOptions, Start, Summary, Syntax, Target, convert, read,
};
use casebook_model::Diagnostic;
use serde_json::{Value, json};

use crate::harness::{convert_file, errors};

/// What reading a file gave: the ids of every case in order, the diagnostics, the summary.
struct Read {
    ids: Vec<String>,
    diagnostics: Vec<Diagnostic>,
    summary: Summary,
}

fn read_file(path: &std::path::Path, threads: usize) -> Read {
    struct Ids(Vec<String>, Vec<Diagnostic>);
    impl Consumer<()> for Ids {
        fn start(&mut self, _: &Start) -> Flow {
            Flow::Continue
        }
        fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
            self.0.extend(batch.cases.iter().map(|c| c.id.clone()));
            self.1.append(&mut batch.diagnostics);
            Flow::Continue
        }
    }
    let mut ids = Ids(Vec::new(), Vec::new());
    let opts = ReadOptions { threads, ..ReadOptions::default() };
    let summary = read(&Input::path(path), &opts, &|_: &Batch| (), &mut ids).expect("read");
    Read { ids: ids.0, diagnostics: ids.1, summary }
}

/// The ids of every case of a file, in order, and the number of errors.
fn ids_of(path: &std::path::Path, threads: usize) -> (Vec<String>, u64) {
    let read = read_file(path, threads);
    (read.ids, read.summary.errors)
}

/// The ids of letta JSON lines, one row a value.
fn ids_of_rows(dir: &tempfile::TempDir, name: &str, rows: &[Value]) -> Vec<String> {
    let path = dir.path().join(name);
    fs_err::write(&path, jsonl(rows)).expect("write");
    let read = read_file(&path, 2);
    assert_eq!(errors(&read.diagnostics), Vec::<String>::new());
    read.ids
}

fn jsonl(rows: &[Value]) -> String {
    rows.iter().map(|r| format!("{r}\n")).collect()
}

/// The id the first row of a task whose whole task is `input` gets.
fn base(input: &str) -> String {
    casebook_canon::derived_case_id_of_input(input)
}

/// The id a later row of that task gets, whose case apart from its task is `rest` (as JSON).
fn later(input: &str, rest: Value, copy: u64) -> String {
    Variant::of(&rest).expect("variant").id(&base(input), copy)
}

/// Converts a file to native JSONL with `threads` workers.
fn to_native(path: &std::path::Path, threads: usize) -> Vec<u8> {
    let opts = ReadOptions { threads, ..ReadOptions::default() };
    let target = Target {
        format: Format::Casebook,
        syntax: Syntax::Jsonl,
        lossy: false,
        column_map: None,
        seed_files: Default::default(),
        confirm_drafts: false,
    };
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut on_batch = |d: &[Diagnostic], _: &casebook_formats::Progress| {
        errors.extend(d.iter().filter(|d| d.is_error()).map(ToString::to_string));
    };
    convert(&Input::path(path), &opts, &target, Vec::new(), Box::new(&mut out), None, &mut on_batch).expect("convert");
    assert_eq!(errors, Vec::<String>::new());
    out
}

#[test]
fn twenty_thousand_identical_rows_are_numbered_in_order() {
    // Once quadratic: each row tried every suffix taken before it (30 s for this file).
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("hi.jsonl");
    fs_err::write(&path, "{\"input\": \"hi\"}\n".repeat(20_000)).expect("write");
    let read = read_file(&path, 2);
    assert_eq!(read.summary.errors, 0);
    assert_eq!(read.ids.len(), 20_000);
    // The first keeps the task's id; the others are copies of it, numbered from 2.
    assert_eq!(read.ids[0], base("hi"));
    // As the canon's vectors say (the variant of a case that is only its task is `6a65b59c…`).
    assert_eq!(read.ids[..2], ["t-2f2fc14921831f5f", "t-2f2fc14921831f5f-6a65b59c-2"]);
    for (i, id) in read.ids.iter().enumerate().skip(1) {
        assert_eq!(*id, later("hi", json!({}), i as u64 + 1));
    }
    assert_eq!((read.summary.derived_ids, read.summary.positional_ids), (20_000, 19_999));
}

#[test]
fn a_repeated_task_is_named_by_the_rest_of_its_case() {
    let dir = tempfile::tempdir().expect("temp dir");
    let q = "Où est la gare ? 🚉";
    let rows = [
        json!({"input": q, "ground_truth": "à gauche"}),
        json!({"input": q, "ground_truth": "左です"}),
        json!({"input": q, "ground_truth": "左です", "tags": ["ja"]}),
        json!({"input": q, "ground_truth": "左です"}),
        json!({"input": q, "ground_truth": "à gauche"}),
        json!({"input": q}),
        json!({"input": q, "ground_truth": "左です"}),
    ];
    let ids = ids_of_rows(&dir, "gare.jsonl", &rows);
    let ja = json!({"expected": {"output": "左です"}});
    assert_eq!(
        ids,
        [
            base(q),
            later(q, ja.clone(), 1),
            later(q, json!({"labels": ["ja"], "expected": {"output": "左です"}}), 1),
            // Wholly identical to the second row: numbered as its second copy.
            later(q, ja.clone(), 2),
            // Identical to the first row, which has the plain id: its second copy.
            later(q, json!({"expected": {"output": "à gauche"}}), 2),
            later(q, json!({}), 1),
            later(q, ja, 3),
        ]
    );
    let path = dir.path().join("gare.jsonl");
    let summary = read_file(&path, 1).summary;
    assert_eq!((summary.derived_ids, summary.positional_ids), (7, 3));
}

#[test]
fn an_edit_moves_at_most_two_ids() {
    let dir = tempfile::tempdir().expect("temp dir");
    let row = |q: &str, a: &str| json!({"input": q, "ground_truth": a});
    let rows = vec![
        row("capital of France?", "Paris"),
        json!({"id": "k1", "input": "capital of Italy?", "ground_truth": "Rome"}),
        row("capital of France?", "paris"),
        row("2+2", "4"),
        row("capital of France?", "Paris, France"),
        row("2+2", "four"),
        row("capital of France?", "PARIS"),
    ];
    let before = ids_of_rows(&dir, "before.jsonl", &rows);

    // Another row of a known task: one id more, the others as they were.
    let mut added = rows.clone();
    added.insert(3, row("capital of France?", "Lutèce"));
    let after = ids_of_rows(&dir, "added.jsonl", &added);
    let mut expected = before.clone();
    expected.insert(3, later("capital of France?", json!({"expected": {"output": "Lutèce"}}), 1));
    assert_eq!(after, expected);

    // A later row of a task removed, or a middle one: the others keep their ids.
    let mut removed = rows.clone();
    removed.remove(4);
    let mut expected = before.clone();
    expected.remove(4);
    assert_eq!(ids_of_rows(&dir, "removed.jsonl", &removed), expected);

    // The answer of the first row of a task changed: every id stays (a change of one case).
    let mut first_changed = rows.clone();
    first_changed[0] = row("capital of France?", "Paris (capital since 987)");
    assert_eq!(ids_of_rows(&dir, "first_changed.jsonl", &first_changed), before);

    // The answer of a later row changed: that row alone is renamed, since its id is its content.
    let mut later_changed = rows.clone();
    later_changed[2] = row("capital of France?", "Paris ");
    let mut expected = before.clone();
    expected[2] = later("capital of France?", json!({"expected": {"output": "Paris "}}), 1);
    assert_eq!(ids_of_rows(&dir, "later_changed.jsonl", &later_changed), expected);

    // The first row of a task removed: the next row of that task takes the plain id, the others
    // of the task keep theirs.
    let mut first_removed = rows.clone();
    first_removed.remove(0);
    let mut expected = before.clone();
    expected.remove(0);
    expected[1] = base("capital of France?");
    assert_eq!(ids_of_rows(&dir, "first_removed.jsonl", &first_removed), expected);
}

#[test]
fn rows_with_ids_between_do_not_change_the_derived_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plain: Vec<Value> =
        (0..30).map(|i| json!({"input": format!("q{}", i % 4), "ground_truth": format!("{}", i % 3)})).collect();
    let mut mixed = Vec::new();
    for (i, row) in plain.iter().enumerate() {
        mixed.push(json!({"id": format!("x{i}"), "input": row["input"], "ground_truth": "other"}));
        mixed.push(row.clone());
    }
    let alone = ids_of_rows(&dir, "alone.jsonl", &plain);
    let between = ids_of_rows(&dir, "mixed.jsonl", &mixed);
    let derived: Vec<String> = between.iter().filter(|id| id.starts_with("t-")).cloned().collect();
    assert_eq!(derived, alone);
}

#[test]
fn derived_ids_skip_ids_the_file_already_uses() {
    let dir = tempfile::tempdir().expect("temp dir");
    let hi = json!({"input": "hi"});
    let bye = json!({"input": "bye", "ground_truth": "x"});
    // Someone's explicit ids: the plain id of `hi` before its first row, and the id of the
    // third copy of `hi` before that copy comes.
    let mut rows = vec![json!({"id": base("hi"), "input": "something else"})];
    for i in 1..=5 {
        if i == 3 {
            rows.push(json!({"id": later("hi", json!({}), 3), "input": "other"}));
        }
        rows.push(hi.clone());
        // Another repeated prompt in between, so the two tasks interleave.
        rows.push(bye.clone());
    }
    let ids = ids_of_rows(&dir, "mixed.jsonl", &rows);
    let copy = |n| later("hi", json!({}), n);
    let bye_copy = |n| later("bye", json!({"expected": {"output": "x"}}), n);
    assert_eq!(
        ids,
        [
            base("hi"),
            // `hi`'s plain id is taken: its first row takes the variant's id.
            copy(1),
            base("bye"),
            copy(2),
            bye_copy(2),
            later("hi", json!({}), 3),
            // `-3` was taken by the explicit id: the copies go on with `-4`.
            copy(4),
            bye_copy(3),
            copy(5),
            bye_copy(4),
            copy(6),
            bye_copy(5),
        ]
    );
}

#[test]
fn an_explicit_id_after_a_derived_one_is_a_duplicate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("late.jsonl");
    let taken = later("hi", json!({"expected": {"output": "yo"}}), 1);
    let text = format!(
        "{{\"input\": \"hi\"}}\n{{\"input\": \"hi\", \"ground_truth\": \"yo\"}}\n{{\"id\": \"{taken}\", \"input\": \"hello\"}}\n"
    );
    fs_err::write(&path, text).expect("write");
    let read = read_file(&path, 1);
    assert_eq!(read.ids, [base("hi"), taken.clone()]);
    let found: Vec<(String, u64, u64, String)> =
        read.diagnostics.iter().map(|d| (d.code.to_string(), d.line, d.column, d.message.clone())).collect();
    assert_eq!(found, [("E-duplicate-id".into(), 3, 8, format!("duplicate id `{taken}` (first used on line 2)"))]);
}

/// A native file written from such cases holds their ids and says they were derived: they are
/// the file's ids now, kept as they are and checked as any other (once, a duplicate was
/// renamed without a word).
#[test]
fn ids_a_native_file_holds_are_not_made_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("pulled.jsonl");
    let row = |id: &str, answer: &str| json!({"id": id, "input": "hi", "expected": {"output": answer}, "provenance": {"format": "letta", "id_derived": true}});
    let rows =
        [row("t-2f2fc14921831f5f", "a"), row("t-2f2fc14921831f5f-00000000", "b"), row("t-2f2fc14921831f5f", "c")];
    fs_err::write(&path, jsonl(&rows)).expect("write");
    let read = read_file(&path, 1);
    assert_eq!(read.ids, ["t-2f2fc14921831f5f", "t-2f2fc14921831f5f-00000000"]);
    let found: Vec<(String, u64)> = read.diagnostics.iter().map(|d| (d.code.to_string(), d.line)).collect();
    assert_eq!(found, [("E-duplicate-id".into(), 3)]);
    assert_eq!((read.summary.derived_ids, read.summary.positional_ids), (0, 0));
}

/// Rows of repeated tasks, in the shapes letta allows: non-ASCII text with a line break, tags,
/// metadata, multi-turn inputs, rubric variables; one row with an id; then `tail` more rows of
/// questions asked three times each, with `padding` in each.
fn repeated_rows(tail: usize, padding: &str) -> Vec<Value> {
    let q = QUESTION;
    let mut rows = vec![
        json!({"input": q, "ground_truth": "Paris"}),
        json!({"id": "k1", "input": q, "ground_truth": "Paris"}),
        json!({"input": q, "ground_truth": "Paris", "tags": ["geo", "fr"]}),
        json!({"input": q, "ground_truth": "Paris", "metadata": {"source": "forum", "n": 3}}),
        json!({"input": q, "ground_truth": "Paris"}),
        json!({"input": ["hi", "and then?"], "ground_truth": ["hello", "bye"]}),
        json!({"input": ["hi", "and then?"], "ground_truth": ["hello", "ciao"]}),
        json!({"input": q, "ground_truth": "Paris", "tags": ["geo", "fr"]}),
        json!({"input": "مرحبا", "rubric_vars": {"ref": "أهلا"}}),
        json!({"input": "مرحبا", "rubric_vars": {"ref": "أهلا"}}),
    ];
    // Each question three times: answered `0`, `1`, then `0` again (a copy of its first row).
    let n = (tail / 3).max(1);
    for i in 0..tail {
        rows.push(json!({"input": format!("question {}{padding}", i % n), "ground_truth": format!("{}", (i / n) % 2)}));
    }
    rows
}

const QUESTION: &str = "Quelle est la capitale\nde la France ? « 巴黎 »";

/// The ids of those rows, from the task and the rest of each case as the canon defines them.
fn golden_ids() -> Vec<String> {
    let q = QUESTION;
    let geo = json!({"labels": ["geo", "fr"], "expected": {"output": "Paris"}});
    let turns =
        casebook_canon::derived_case_id(&json!({"input": "hi", "turns": [{"role": "user", "content": "and then?"}]}))
            .expect("id");
    vec![
        base(q),
        "k1".to_owned(),
        later(q, geo.clone(), 1),
        later(q, json!({"metadata": {"n": 3, "source": "forum"}, "expected": {"output": "Paris"}}), 1),
        later(q, json!({"expected": {"output": "Paris"}}), 2),
        turns.clone(),
        Variant::of(&json!({"expected": {"per_turn": ["hello", "ciao"]}})).expect("variant").id(&turns, 1),
        later(q, geo, 2),
        base("مرحبا"),
        later("مرحبا", json!({"expected": {"rubric_vars": {"ref": "أهلا"}}}), 2),
    ]
}

/// Letta JSON lines and CSV, native JSON and YAML documents without ids: the same cases give
/// the same ids, these ones.
#[test]
fn ids_do_not_depend_on_the_syntax() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines = dir.path().join("set.jsonl");
    fs_err::write(&lines, jsonl(&repeated_rows(300, ""))).expect("write");
    let (expected, found) = ids_of(&lines, 1);
    assert_eq!(found, 0);
    let golden = golden_ids();
    assert_eq!(expected[..golden.len()], golden);

    let csv = dir.path().join("set.csv");
    let (out, diags) = convert_file(&lines, None, Format::Letta, Syntax::Csv, None);
    assert_eq!(errors(&diags), Vec::<String>::new());
    fs_err::write(&csv, out).expect("write");
    let mut files = vec![csv];
    for syntax in [Syntax::Json, Syntax::Yaml] {
        let (out, diags) = convert_file(&lines, None, Format::Casebook, syntax, None);
        assert_eq!(errors(&diags), Vec::<String>::new());
        // The native form without what the rows had not: their ids, and where they came from.
        let mut doc = crate::harness::value_of(&out, syntax);
        for case in doc["cases"].as_array_mut().expect("cases") {
            let object = case.as_object_mut().expect("a case");
            if object["provenance"]["id_derived"] == true {
                object.remove("id");
            }
            object.remove("provenance");
        }
        let path = dir.path().join(format!("set.{}", syntax.name()));
        // JSON is YAML too (flow style), which the YAML reader reads as such.
        fs_err::write(&path, serde_json::to_string_pretty(&doc).expect("JSON")).expect("write");
        files.push(path);
    }
    for path in &files {
        let (ids, found) = ids_of(path, 1);
        assert_eq!(found, 0, "{}", path.display());
        assert!(ids == expected, "{} gives other ids", path.display());
    }
}

/// JSON lines and CSV of many chunks, read with one thread and with several: the same ids.
#[test]
fn ids_do_not_depend_on_the_threads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines = dir.path().join("set.jsonl");
    fs_err::write(&lines, jsonl(&repeated_rows(3_000, &format!(" {}", "é".repeat(300))))).expect("write");
    // Chunks are 192 KiB: about ten of them.
    assert!(fs_err::metadata(&lines).expect("size").len() > 3 << 19);
    let (expected, found) = ids_of(&lines, 1);
    assert_eq!(found, 0);
    let golden = golden_ids();
    assert_eq!(expected[..golden.len()], golden);
    let csv = dir.path().join("set.csv");
    let (out, diags) = convert_file(&lines, None, Format::Letta, Syntax::Csv, None);
    assert_eq!(errors(&diags), Vec::<String>::new());
    fs_err::write(&csv, out).expect("write");
    for (path, threads) in [(&lines, 4), (&lines, 7), (&csv, 1), (&csv, 4)] {
        let read = read_file(path, threads);
        assert_eq!(read.summary.errors, 0, "{}", path.display());
        assert!(read.ids == expected, "{} with {threads} threads gives other ids", path.display());
        assert_eq!((read.summary.derived_ids, read.summary.positional_ids), (3_009, 1_003));
    }
}

#[test]
fn renamed_cases_convert_the_same_with_any_thread_count() {
    // Several MiB of realistic rows (many repeats without an id), so the file is cut into many
    // chunks and most of them hold renamed cases.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("realistic.jsonl");
    let mut bytes = Vec::new();
    let mut rng = Rng(7);
    for i in 0..12_000 {
        letta_realistic_row(&mut rng, i, &mut bytes);
    }
    fs_err::write(&path, &bytes).expect("write");
    let (ids, errors) = ids_of(&path, 2);
    assert_eq!(errors, 0);
    let renamed = ids.iter().filter(|id| id.starts_with("t-") && id.len() > 18).count();
    assert!(renamed > 100, "only {renamed} renamed cases");
    let one = to_native(&path, 1);
    assert!(one.len() > 4 << 20, "{} bytes", one.len());
    for threads in [2, 3, 8] {
        assert!(to_native(&path, threads) == one, "output with {threads} threads differs from one thread's");
    }
    // The ids written are the ones read.
    let written: Vec<String> = String::from_utf8(one)
        .expect("UTF-8")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("id").and_then(|id| id.as_str()).map(str::to_owned))
        .collect();
    assert_eq!(written, ids);
}

/// Inspect's own shape (`input`, `target`, `choices`, as in its `samples.jsonl` fixtures):
/// Inspect's eval numbers samples without an id by their place, from 1, a sample with its own id
/// keeping it (and its place counting), and its logs name them so; casebook reads them with the
/// same ids, counts them as positional, and does not write them back.
#[test]
fn inspect_samples_without_ids_are_numbered_as_inspect_numbers_them() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [
        json!({"input": "Capital of France?", "target": "A", "choices": ["Paris", "Berlin"]}),
        json!({"id": "q-de", "input": "Capital of Germany?", "target": "B", "choices": ["Paris", "Berlin"]}),
        json!({"input": "Capital of France?", "target": "A", "choices": ["Paris", "Berlin"]}),
        json!({"input": "Capital of Spain?", "target": "Madrid"}),
    ];
    let path = dir.path().join("samples.jsonl");
    fs_err::write(&path, jsonl(&rows)).unwrap();
    let read = read_file(&path, 2);
    assert_eq!(read.ids, ["1", "q-de", "3", "4"], "{:?}", read.diagnostics);
    assert_eq!((read.summary.derived_ids, read.summary.positional_ids), (3, 3));
    assert_eq!(read.summary.derived_ids_note().unwrap(), "3 cases had no id: each is named by its place in the file");
    // Back to Inspect: the numbered samples still have no id.
    let (native, diags) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    assert!(errors(&diags).is_empty(), "{diags:?}");
    let native_path = dir.path().join("native.jsonl");
    fs_err::write(&native_path, native).unwrap();
    let (back, diags) = convert_file(&native_path, None, Format::Inspect, Syntax::Jsonl, None);
    assert!(errors(&diags).is_empty(), "{diags:?}");
    let back: Vec<Value> = String::from_utf8(back).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(back, rows);

    // CSV (`csv_dataset`'s shape): a blank record is no sample, for Inspect as for casebook.
    let csv = dir.path().join("samples.csv");
    fs_err::write(
        &csv,
        "input,target,id\nCapital of France?,Paris,\n,,\nCapital of Peru?,Lima,7\nOf Chile?,Santiago,\n",
    )
    .unwrap();
    let read = read_file(&csv, 1);
    assert_eq!(read.ids, ["1", "7", "3"], "{:?}", read.diagnostics);
}

/// A sample without an id whose place is another sample's id: Inspect refuses the dataset
/// (`ensure_unique_ids`); casebook says which place and which line.
#[test]
fn an_inspect_place_taken_by_an_explicit_id_is_a_located_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clash.jsonl");
    fs_err::write(&path, jsonl(&[json!({"id": 2, "input": "a", "target": "x"}), json!({"input": "b", "target": "y"})]))
        .unwrap();
    let read = read_file(&path, 1);
    assert_eq!(read.ids, ["2"]);
    let d = &read.diagnostics[0];
    assert_eq!((d.code.as_str(), d.line, d.column), ("E-duplicate-id", 2, 1), "{d:?}");
    assert_eq!(
        d.message,
        "this sample has no id, and Inspect names it by its place, `2`: the id of the sample on line 1"
    );
}

/// Rows of one task told apart by their rest as `serde_json` writes it (the reader hashes its
/// shape, not its text): the same value spelt otherwise (`\u00e9`, spaces) is the same content,
/// a float for an integer or keys in another order is other content, whose variant is taken and
/// so numbered. The ids are the ones `casebook` 2b35d54 gave this file, which hashed the text.
#[test]
fn rests_are_the_same_content_exactly_when_serde_json_writes_them_alike() {
    // Letta JSON lines, written by hand so that spellings vary as in files from other tools.
    let text = concat!(
        r#"{"input":"q","ground_truth":"é","metadata":{"a":1,"b":"x"}}"#,
        "\n",
        r#"{"input":"q","ground_truth":"\u00e9","metadata":{"a":1,"b":"x"}}"#,
        "\n",
        r#"{"input":"q","ground_truth":"é","metadata":{"a":1.0,"b":"x"}}"#,
        "\n",
        r#"{"input":"q","metadata":{"b":"x","a":1},"ground_truth":"é"}"#,
        "\n",
        r#"{"input":"q", "ground_truth":"é", "metadata":{"a":1,"b":"x"}}"#,
        "\n",
        r#"{"input":"q","ground_truth":"e"}"#,
        "\n",
        r#"{"input":"q","ground_truth":"é","metadata":{"a":1,"b":"x"},"tags":[]}"#,
        "\n",
        r#"{"input":"q","ground_truth":"é","metadata":{"a":1,"b":"x","c":null}}"#,
        "\n",
        r#"{"input":"q","ground_truth":"é","metadata":{"a":1,"b":"x","c":null}}"#,
        "\n",
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rests.jsonl");
    fs_err::write(&path, text).expect("write");
    let first = json!({"expected": {"output": "é"}, "metadata": {"a": 1, "b": "x"}});
    let with_c = json!({"expected": {"output": "é"}, "metadata": {"a": 1, "b": "x", "c": null}});
    let expected = [
        base("q"),
        // The same value as the first row: its second copy.
        later("q", first.clone(), 2),
        // `1.0` is not `1` in the text, but is in the canonical form: the first variant id.
        later("q", first.clone(), 1),
        // Keys in another order: other content, whose variant ids 1 and 2 are taken.
        later("q", first.clone(), 3),
        // The first row again, spaced otherwise: after the copies given so far.
        later("q", first.clone(), 4),
        later("q", json!({"expected": {"output": "e"}}), 1),
        later("q", json!({"labels": [], "expected": {"output": "é"}, "metadata": {"a": 1, "b": "x"}}), 1),
        later("q", with_c.clone(), 1),
        later("q", with_c, 2),
    ];
    assert_eq!(
        expected[..4],
        [
            "t-d0ad161f682a466b",
            "t-d0ad161f682a466b-5545ab45-2",
            "t-d0ad161f682a466b-5545ab45",
            "t-d0ad161f682a466b-5545ab45-3"
        ]
    );
    for threads in [1, 2] {
        let read = read_file(&path, threads);
        assert_eq!(errors(&read.diagnostics), Vec::<String>::new());
        assert_eq!(read.ids, expected, "{threads} threads");
    }
}

/// Derived ids of popular prompts are remembered per thread (a cache of a few thousand inputs):
/// many more distinct prompts than it holds, each coming back after others took its place, get
/// the id of their task every time.
#[test]
fn prompts_coming_back_after_many_others_keep_the_id_of_their_task() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prompt = |i: usize| format!("prompt {} with \"quotes\"\n", i % 9_000);
    let rows: Vec<Value> = (0..12_000).map(|i| json!({"input": prompt(i), "ground_truth": i.to_string()})).collect();
    let path = dir.path().join("popular.jsonl");
    fs_err::write(&path, jsonl(&rows)).expect("write");
    for threads in [1, 2] {
        let read = read_file(&path, threads);
        assert_eq!(read.ids.len(), rows.len());
        for (i, id) in read.ids.iter().enumerate() {
            let task = casebook_model::Task::new(Value::String(prompt(i)));
            let base = casebook_canon::derived_case_id(&task).expect("id");
            let expected =
                if i < 9_000 { base } else { later(&prompt(i), json!({"expected": {"output": i.to_string()}}), 1) };
            assert_eq!(*id, expected, "row {i}");
        }
    }
}
