//! Behaviour that depends on the terminal: colours (`NO_COLOR`, `--color`) and a reader of
//! standard output that goes away (`casebook ... | head`).

use std::process::{Command, Stdio};

use crate::cli::{Folder, casebook, run};

const INVALID: &str =
    "{\"id\": \"a\", \"input\": 1}\n{\"id\": \"b\", \"input\": \"x\"}\n{\"id\": \"b\", \"input\": \"y\"}\n";

/// Whether `text` holds an SGR (colour or style) escape sequence, `ESC [ ... m`.
fn has_colour(text: &str) -> bool {
    text.match_indices("\u{1b}[").any(|(i, _)| {
        let rest = &text[i + 2..];
        let params = rest.bytes().take_while(|b| b.is_ascii_digit() || *b == b';').count();
        rest.as_bytes().get(params) == Some(&b'm')
    })
}

#[test]
fn no_color_output_has_no_escapes() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", INVALID);
    let out = dir.join("out.jsonl");
    let runs = [
        run(casebook().arg("validate").arg(&file)),
        run(casebook().args(["--color", "auto", "validate"]).arg(&file)),
        run(casebook().arg("inspect").arg(&file)),
        run(casebook().arg("convert").arg(&file).args(["--to", "letta", "-o"]).arg(&out)),
        run(casebook().arg("validate").arg(dir.join("missing.jsonl"))),
    ];
    for r in &runs {
        assert!(!r.stdout.is_empty() || !r.stderr.is_empty(), "{r:?}");
        assert!(!r.stdout.contains('\u{1b}') && !r.stderr.contains('\u{1b}'), "escape sequence in output:\n{r:?}");
    }
}

#[test]
fn color_flag_turns_colours_on_and_off() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", INVALID);
    let always = run(casebook().args(["validate", "--color", "always"]).arg(&file));
    always.expect_status(1);
    assert!(has_colour(&always.stdout), "`--color always` colours the diagnostics:\n{always:?}");
    let never = run(casebook().args(["validate", "--color", "never"]).arg(&file).env_remove("NO_COLOR"));
    never.expect_status(1);
    assert!(!never.stdout.contains('\u{1b}'), "{never:?}");
}

/// Runs `casebook ARGS` on a pseudo-terminal (util-linux `script`), stdout and stderr merged.
#[cfg(target_os = "linux")]
fn on_terminal(args: &[&str], file: &std::path::Path, no_color: bool) -> Option<String> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = quote(env!("CARGO_BIN_EXE_casebook"));
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    line.push(' ');
    line.push_str(&quote(&file.display().to_string()));
    let mut cmd = Command::new("script");
    cmd.args(["-q", "-e", "-c", &line, "/dev/null"]).env("TERM", "xterm-256color").stdin(Stdio::null());
    if no_color {
        cmd.env("NO_COLOR", "1");
    } else {
        cmd.env_remove("NO_COLOR");
    }
    let out = cmd.output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(target_os = "linux")]
#[test]
fn no_color_is_respected_on_a_terminal() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", INVALID);
    let Some(coloured) = on_terminal(&["validate"], &file, false) else {
        eprintln!("skipped: util-linux `script` is not available to run casebook on a terminal");
        return;
    };
    // Without NO_COLOR, a terminal gets colours: the check below can see them.
    assert!(has_colour(&coloured), "expected colours on a terminal without NO_COLOR:\n{coloured:?}");
    assert!(coloured.contains("E-duplicate-id"), "{coloured:?}");

    let plain = on_terminal(&["validate"], &file, true).unwrap();
    assert!(plain.contains("E-duplicate-id"), "{plain:?}");
    assert!(!has_colour(&plain), "colours despite NO_COLOR:\n{plain:?}");
    let quiet = on_terminal(&["validate", "--quiet"], &file, true).unwrap();
    assert!(quiet.contains("E-duplicate-id"), "{quiet:?}");
    assert!(!quiet.contains('\u{1b}'), "escape sequence despite NO_COLOR and --quiet:\n{quiet:?}");
}

/// `casebook inspect ... | head -1`: the reader closes the pipe early. casebook must not print a
/// panic and a backtrace.
#[cfg(unix)]
#[test]
fn closed_stdout_is_not_a_crash() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "{\"id\": \"a\", \"input\": \"x\"}\n");
    for args in [&["inspect", "--format", "json"][..], &["convert", "--to", "casebook"][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_casebook"))
            .args(args)
            .arg(&file)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the reading end before casebook writes anything.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: casebook panicked on a closed pipe:\n{stderr}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {stderr}");
    }
}
