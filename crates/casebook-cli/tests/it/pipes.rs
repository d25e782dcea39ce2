//! A reader that goes away ends the command quietly, with exit status 0 (as ripgrep does): its
//! standard output closed after one line (`casebook validate big.jsonl | head -1`), both streams
//! (`2>&1 | head -1`), or its standard error alone. No panic (exit 101), no message, and no
//! temporary file left behind.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use crate::cli::{Folder, cb, run};

/// Which of the command's streams is the pipe whose reader goes away.
#[derive(Debug, Clone, Copy)]
enum Closed {
    Stdout,
    Both,
    Stderr,
}

/// The binary in `dir`, as [`cb`] runs it, as a plain process whose streams the test chooses.
fn binary(dir: &Folder, args: &[&str]) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("casebook"));
    cmd.current_dir(dir.join("")).args(args).env("NO_COLOR", "1").env("CASEBOOK_AUTHOR", "tester");
    cmd.env_remove("CASEBOOK_STORE").env_remove("CASEBOOK_URL").env_remove("CASEBOOK_TOKEN");
    cmd
}

/// Runs `args` with the `closed` streams going to a pipe whose reader reads one line and goes
/// away; the exit status and what the command wrote on the stream that stayed open.
fn one_line_then_closed(dir: &Folder, args: &[&str], closed: Closed) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    let mut cmd = binary(dir, args);
    match closed {
        Closed::Stdout => cmd.stdout(writer).stderr(Stdio::piped()),
        Closed::Both => cmd.stdout(writer.try_clone().unwrap()).stderr(writer),
        Closed::Stderr => cmd.stdout(Stdio::piped()).stderr(writer),
    };
    let mut child = cmd.spawn().unwrap();
    // The command's copies of the pipe's writing end: the child holds the only ones left.
    drop(cmd);
    let mut reader = BufReader::new(reader);
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    assert!(!first.is_empty(), "{args:?} wrote a line before the reader went away");
    drop(reader);
    let mut other = String::new();
    if let Some(mut open) = child.stderr.take() {
        open.read_to_string(&mut other).unwrap();
    }
    if let Some(mut open) = child.stdout.take() {
        // What goes to stdout here is data: only how it ends is checked.
        let mut data = Vec::new();
        open.read_to_end(&mut data).unwrap();
    }
    (child.wait().unwrap().code(), other)
}

/// A folder with `big.jsonl` (20,000 generated letta rows: repeated prompts, rows without ids)
/// and `broken.jsonl` (20,000 rows each with an error), and a store holding `big` as `qa`.
fn inputs() -> Folder {
    let dir = Folder::new();
    let out = run(cb(&dir).args(["generate", "--kind", "letta-realistic", "--cases", "20000", "-o", "big.jsonl"]));
    out.expect_status(0);
    let broken: String =
        (0..20_000).map(|i| format!("{{\"id\": \"ü-{i}\", \"input\": {i}, \"ground_truth\": \"naïve\"}}\n")).collect();
    dir.file("broken.jsonl", broken);
    run(cb(&dir).arg("init")).expect_status(0);
    run(cb(&dir).args(["import", "big.jsonl", "--dataset", "qa", "-q"])).expect_status(0);
    dir
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let dir = inputs();
    let commands: [&[&str]; 5] = [
        &["validate", "broken.jsonl"],
        &["lint", "big.jsonl"],
        &["cases", "big.jsonl"],
        &["cases", "qa", "--format", "json"],
        &["export", "qa", "--to", "letta"],
    ];
    for args in commands {
        for closed in [Closed::Stdout, Closed::Both] {
            let (status, stderr) = one_line_then_closed(&dir, args, closed);
            assert_eq!((status, stderr.as_str()), (Some(0), ""), "{args:?} with {closed:?} closed");
        }
    }
    // Diagnostics on stderr, the reader of which goes away: nothing is written, no temporary
    // file is left, and the data on stdout stops.
    let (status, _) = one_line_then_closed(&dir, &["convert", "broken.jsonl", "--to", "casebook"], Closed::Stderr);
    assert_eq!(status, Some(0));
    let (status, _) =
        one_line_then_closed(&dir, &["convert", "broken.jsonl", "--to", "casebook", "-o", "out.jsonl"], Closed::Stderr);
    assert_eq!(status, Some(0));
    let (status, _) = one_line_then_closed(&dir, &["import", "broken.jsonl", "--dataset", "broken"], Closed::Stderr);
    assert_eq!(status, Some(0));
    assert_eq!(dir.entries(), [".casebook", "big.jsonl", "broken.jsonl"]);
    let datasets = run(cb(&dir).arg("datasets"));
    assert!(!datasets.stdout.contains("broken"), "{datasets:?}");
}
