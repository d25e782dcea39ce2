//! Ids of rows that have none: identical tasks are numbered in file order (`t-…`, `t-…-2`, …),
//! whatever the number of identical rows and the number of threads reading them.

use casebook_formats::synthetic::{Rng, letta_realistic_row};
use casebook_formats::{Batch, Consumer, Flow, Format, Input, ReadOptions, Start, Syntax, Target, convert, read};
use casebook_model::Diagnostic;

/// The ids of every case of a file, in order, and the number of errors.
fn ids_of(path: &std::path::Path, threads: usize) -> (Vec<String>, u64) {
    struct Ids(Vec<String>);
    impl Consumer<()> for Ids {
        fn start(&mut self, _: &Start) -> Flow {
            Flow::Continue
        }
        fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
            self.0.extend(batch.cases.iter().map(|c| c.id.clone()));
            Flow::Continue
        }
    }
    let mut ids = Ids(Vec::new());
    let opts = ReadOptions { threads, ..ReadOptions::default() };
    let summary = read(&Input::path(path), &opts, &|_: &Batch| (), &mut ids).expect("read");
    (ids.0, summary.errors)
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
    let (ids, errors) = ids_of(&path, 2);
    assert_eq!(errors, 0);
    assert_eq!(ids.len(), 20_000);
    let base = &ids[0];
    assert!(base.len() == 18 && base.starts_with("t-") && base[2..].bytes().all(|b| b.is_ascii_hexdigit()), "{base}");
    for (i, id) in ids.iter().enumerate().skip(1) {
        assert_eq!(*id, format!("{base}-{}", i + 1));
    }
}

#[test]
fn derived_ids_skip_suffixes_the_file_already_uses() {
    let dir = tempfile::tempdir().expect("temp dir");
    let probe = dir.path().join("probe.jsonl");
    fs_err::write(&probe, "{\"input\": \"hi\"}\n").expect("write");
    let base = ids_of(&probe, 1).0.remove(0);
    // `-3` is someone's explicit id, met before the third copy: the copies go on with `-4`.
    let mut text = String::new();
    for i in 1..=6 {
        if i == 3 {
            text.push_str(&format!("{{\"id\": \"{base}-3\", \"input\": \"other\"}}\n"));
        }
        text.push_str("{\"input\": \"hi\"}\n");
        // Another repeated prompt in between, so the two bases interleave.
        text.push_str("{\"input\": \"bye\", \"ground_truth\": \"x\"}\n");
    }
    let path = dir.path().join("mixed.jsonl");
    fs_err::write(&path, &text).expect("write");
    let (ids, _) = ids_of(&path, 1);
    let hi: Vec<&String> = ids.iter().filter(|id| id.starts_with(&base)).collect();
    let expected: Vec<String> = ["", "-2", "-3", "-4", "-5", "-6", "-7"].iter().map(|s| format!("{base}{s}")).collect();
    // File order: hi, hi-2, explicit -3, hi-4, hi-5, hi-6, hi-7.
    assert_eq!(hi, expected.iter().collect::<Vec<_>>());
    let bye: Vec<&String> = ids.iter().filter(|id| !id.starts_with(&base)).collect();
    assert_eq!(bye.len(), 6);
    for (i, id) in bye.iter().enumerate().skip(1) {
        assert_eq!(**id, format!("{}-{}", bye[0], i + 1));
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
