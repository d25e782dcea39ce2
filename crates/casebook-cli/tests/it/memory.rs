//! Memory stays within a small multiple of the largest record, also when that record is wrong:
//! a huge value is quoted as an excerpt, a huge line is shown as a window around the column.
//! Each input is a 16 MB record; the binary's peak resident memory is read from `wait4`.

use std::process::{Command, Stdio};

use nix::sys::resource::{UsageWho, getrusage};

use crate::cli::Folder;

/// The size of the one big record of each input.
const RECORD: usize = 16 << 20;

/// Runs `casebook ARGS` and returns its exit status, its output and the peak resident memory of
/// this test's children so far, in bytes. (cargo nextest runs each test in a process of its own,
/// so those children are this test's runs of the binary.)
fn peak(args: &[std::ffi::OsString]) -> (Option<i32>, String, usize) {
    let out = Command::new(assert_cmd::cargo::cargo_bin("casebook"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs");
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // ru_maxrss is in KiB on Linux.
    (out.status.code(), text, usize::try_from(usage.max_rss()).unwrap_or(0) * 1024)
}

/// Validates `file` for people and for programs; each run stays under `bound` bytes.
fn validate_within(file: &std::path::Path, bound: usize, expect: &str) {
    for json in [false, true] {
        let mut args: Vec<std::ffi::OsString> = vec!["validate".into()];
        if json {
            args.extend(["--format".into(), "json".into()]);
        }
        args.push(file.into());
        let (code, output, rss) = peak(&args);
        assert_eq!(code, Some(1), "{output}");
        assert!(output.contains(expect), "{expect}: {}", &output[..output.len().min(2000)]);
        // Nothing the size of the record is printed.
        assert!(output.len() < 4096, "{} bytes printed", output.len());
        assert!(rss < bound, "peak {} MiB (json: {json}), bound {} MiB", rss >> 20, bound >> 20);
    }
}

/// Six times the record, plus what the binary takes on its own.
const BOUND: usize = 6 * RECORD + (48 << 20);

#[test]
fn a_huge_wrong_value_is_quoted_as_an_excerpt() {
    let dir = Folder::new();
    let role = "x".repeat(RECORD);
    let file = dir.file(
        "big.yaml",
        format!(
            "name: d\nitems:\n  - id: a\n    inputs:\n      user:\n        - role: {role}\n          content: hi\n"
        ),
    );
    validate_within(&file, BOUND, &format!("unknown turn role `{}… ({RECORD} bytes)`", "x".repeat(60)));
}

#[test]
fn a_huge_line_with_invalid_utf8_is_shown_around_the_place() {
    let dir = Folder::new();
    let mut bytes = b"{\"input\": \"".to_vec();
    bytes.extend(std::iter::repeat_n(b'y', RECORD));
    bytes.extend_from_slice(b"\xff\xfe\"}\n");
    let file = dir.file("big.jsonl", bytes);
    validate_within(&file, BOUND, "E-invalid-utf8");
}

#[test]
fn a_huge_csv_record_with_too_many_cells_is_shown_around_the_place() {
    let dir = Folder::new();
    let file = dir.file("big.csv", format!("input,ground_truth\n\"{}\",a,b\n", "z".repeat(RECORD)));
    validate_within(&file, BOUND, "record has 3 cells but the header has 2 columns");
}
