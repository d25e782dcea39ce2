//! Ctrl-C (SIGINT) during a command's work: it exits 130 and says what it left as it was. The
//! inputs are generated Letta JSONL files (`casebook generate`), large enough that the command is
//! still at work when the signal comes.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::cli::{Backend, Folder, casebook, run};
use crate::waits::command;

/// A generated file of `cases` Letta rows, `big.jsonl` in `dir`.
fn big(dir: &Folder, cases: u64) {
    let data = dir.join("big.jsonl");
    let generate =
        run(casebook().args(["generate", "--kind", "letta-jsonl", "--cases", &cases.to_string(), "-o"]).arg(&data));
    generate.expect_status(0);
}

/// Sends SIGINT to `child` once `started` says its work is under way, and returns its exit
/// status and stderr.
fn interrupt(mut child: Child, started: impl Fn() -> bool) -> (Option<i32>, String) {
    let start = Instant::now();
    while !started() {
        assert!(start.elapsed() < Duration::from_secs(30), "the work did not start");
        assert!(child.try_wait().unwrap().is_none(), "the command finished before it could be interrupted");
        std::thread::sleep(Duration::from_millis(5));
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

fn spawn(dir: &Folder, args: &[&str]) -> Child {
    command(&Backend::Embedded, dir).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
}

#[test]
fn an_interrupted_convert_says_nothing_was_written_and_leaves_the_old_file_whole() {
    let dir = Folder::new();
    big(&dir, 50_000);
    let old = dir.file("out.jsonl", "{\"id\": \"old\", \"input\": \"kept\"}\n");
    let child = spawn(&dir, &["convert", "big.jsonl", "--to", "casebook", "-o", "out.jsonl", "--overwrite"]);
    let temporary = || dir.entries().iter().any(|n| n.starts_with(".casebook-") && n.ends_with(".tmp"));
    let (status, stderr) = interrupt(child, temporary);
    assert_eq!(status, Some(130), "{stderr}");
    assert_eq!(stderr, "interrupted; nothing was written\n");
    assert!(!temporary());
    assert_eq!(fs_err::read_to_string(old).unwrap(), "{\"id\": \"old\", \"input\": \"kept\"}\n");
}

#[test]
fn an_interrupted_validate_says_the_input_was_not_checked_to_its_end() {
    let dir = Folder::new();
    big(&dir, 200_000);
    let child = spawn(&dir, &["validate", "big.jsonl"]);
    let begun = Instant::now();
    let (status, stderr) = interrupt(child, || begun.elapsed() > Duration::from_millis(300));
    assert_eq!(status, Some(130), "{stderr}");
    assert_eq!(stderr, "interrupted: the input was not checked to its end (validate writes nothing)\n");
}

#[test]
fn an_interrupted_import_says_the_store_is_as_it_was() {
    let dir = Folder::new();
    big(&dir, 200_000);
    run(crate::cli::cb(&dir).arg("init")).expect_status(0);
    let child = spawn(&dir, &["import", "big.jsonl", "--dataset", "big"]);
    let begun = Instant::now();
    let (status, stderr) = interrupt(child, || begun.elapsed() > Duration::from_millis(500));
    assert_eq!(status, Some(130), "{stderr}");
    assert_eq!(stderr, "interrupted; nothing was written: the store is as it was\n");
    let datasets = run(crate::cli::cb(&dir).args(["datasets"]));
    datasets.expect_status(0);
    assert!(!datasets.stdout.contains("big"), "{datasets:?}");
}

#[test]
fn an_interrupted_put_says_the_store_is_as_it_was() {
    let dir = Folder::new();
    big(&dir, 200_000);
    run(crate::cli::cb(&dir).arg("init")).expect_status(0);
    dir.file("first.jsonl", "{\"id\": \"kept\", \"input\": \"hello\", \"ground_truth\": \"hi\"}\n");
    run(crate::cli::cb(&dir).args(["import", "first.jsonl", "--dataset", "big", "-q"])).expect_status(0);
    let child = spawn(&dir, &["put", "big", "big.jsonl"]);
    let begun = Instant::now();
    let (status, stderr) = interrupt(child, || begun.elapsed() > Duration::from_millis(500));
    assert_eq!(status, Some(130), "{stderr}");
    assert_eq!(stderr, "interrupted; nothing was written: the store is as it was\n");
    let log = run(crate::cli::cb(&dir).args(["log", "big", "--format", "json"]));
    assert_eq!(crate::cli::log_versions(&log.stdout).len(), 1, "{log:?}");
}
