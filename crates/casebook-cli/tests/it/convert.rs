//! `casebook convert`: fields the target cannot hold are refused (or dropped with `--lossy`),
//! a failed conversion leaves no output file, and a round trip gives the same samples back.

use serde_json::{Value, json};

use crate::cli::{Folder, at, casebook, cb, jsonl, message, run};

const WITH_CONTEXT: &str = "{\"id\": \"a\", \"input\": \"why?\", \"context\": [{\"type\": \"log\", \"content\": \"boom\"}], \"expected\": {\"output\": \"x\"}}\n";

#[test]
fn a_field_the_target_cannot_hold_is_refused_and_nothing_is_written() {
    let dir = Folder::new();
    let file = dir.file("cases.jsonl", WITH_CONTEXT);
    let out = dir.join("out.jsonl");
    let r = run(casebook().arg("convert").arg(&file).args(["--to", "letta", "--format", "json", "-o"]).arg(&out));
    r.expect_status(1);
    let diagnostics = r.stderr_diagnostics();
    assert_eq!(diagnostics.len(), 1, "{r:?}");
    assert_eq!(diagnostics[0]["code"], "E-unrepresentable");
    assert!(message(&diagnostics[0]).contains("context"), "the message names the field:\n{r:?}");
    assert_eq!(diagnostics[0]["line"], 1);
    assert!(!out.exists(), "out.jsonl must not be created");
    assert_eq!(dir.entries(), ["cases.jsonl"], "no temporary file is left behind");
}

#[test]
fn lossy_drops_the_field_with_a_warning() {
    let dir = Folder::new();
    let file = dir.file("cases.jsonl", WITH_CONTEXT);
    let out = dir.join("out.jsonl");
    let r = run(casebook()
        .arg("convert")
        .arg(&file)
        .args(["--to", "letta", "--lossy", "--format", "json", "-o"])
        .arg(&out));
    r.expect_status(0);
    let diagnostics = r.stderr_diagnostics();
    assert_eq!(diagnostics.len(), 1, "{r:?}");
    assert_eq!(diagnostics[0]["code"], "W-dropped");
    assert_eq!(diagnostics[0]["severity"], "warning");
    assert!(message(&diagnostics[0]).contains("context"), "the message names the field:\n{r:?}");
    let rows = jsonl(&fs_err::read_to_string(&out).unwrap());
    assert_eq!(rows, [json!({"id": "a", "input": "why?", "ground_truth": "x"})]);
}

#[test]
fn a_file_with_errors_writes_nothing_to_standard_output() {
    let dir = Folder::new();
    // Good rows first, the error last: nothing of the good ones may reach the pipe.
    let mut text: String = (0..30000).map(|i| format!("{{\"id\": \"c{i}\", \"input\": \"fine {i}\"}}\n")).collect();
    text.push_str("{\"id\": \"bad\", \"input\": 1}\n");
    let file = dir.file("cases.jsonl", text);
    let r = run(casebook().arg("convert").arg(&file).args(["--to", "letta"]));
    r.expect_status(1);
    assert_eq!(r.stdout, "", "no partial output on standard output");
    assert!(r.stderr.contains("30001:"), "{}", r.stderr);
    assert!(r.stderr.contains("nothing was written to standard output"), "{}", r.stderr);
}

#[test]
fn a_file_with_errors_leaves_no_output_file() {
    let dir = Folder::new();
    let file = dir.file(
        "cases.jsonl",
        "{\"id\": \"a\", \"input\": \"fine\"}\n{\"id\": \"b\", \"input\": 1}\n{\"id\": \"c\", \"input\": \"fine\"}\n",
    );
    let out = dir.join("out.jsonl");
    let r = run(casebook().arg("convert").arg(&file).args(["--to", "casebook", "--format", "json", "-o"]).arg(&out));
    r.expect_status(1);
    let locations: Vec<_> = r.stderr_diagnostics().iter().map(crate::cli::Loc::of).collect();
    assert_eq!(locations, [at("E-wrong-type", 2, 22, "/input")]);
    assert!(!out.exists(), "no partial output file");
    assert_eq!(dir.entries(), ["cases.jsonl"], "no temporary file is left behind");
}

#[test]
fn a_failed_conversion_leaves_an_existing_output_file_as_it_was() {
    let dir = Folder::new();
    let file = dir.file("cases.jsonl", WITH_CONTEXT);
    let out = dir.file("out.jsonl", "previous contents\n");
    run(casebook().arg("convert").arg(&file).args(["--to", "letta", "-q", "--overwrite", "-o"]).arg(&out))
        .expect_status(1);
    assert_eq!(fs_err::read_to_string(&out).unwrap(), "previous contents\n");
}

#[test]
fn convert_json_reports_only_json_on_stderr() {
    let dir = Folder::new();
    let file = dir.file("cases.jsonl", WITH_CONTEXT);
    let out = dir.join("out.jsonl");
    let r = run(casebook().arg("convert").arg(&file).args(["--to", "letta", "--format", "json", "-o"]).arg(&out));
    r.expect_status(1);
    for line in r.stderr.lines() {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v.is_object()),
            "with `--format json`, every line on stderr is a JSON object; found {line:?}\n{r:?}"
        );
    }
}

/// The output file gets the permissions any new file gets (the umask's), not a temporary
/// file's private ones.
#[cfg(unix)]
#[test]
fn the_output_file_has_ordinary_permissions() {
    use std::os::unix::fs::PermissionsExt;

    let dir = Folder::new();
    let file = dir.file("cases.jsonl", "{\"id\": \"a\", \"input\": \"x\"}\n");
    let reference = dir.file("reference.txt", "");
    let out = dir.join("out.jsonl");
    run(casebook().arg("convert").arg(&file).args(["--to", "letta", "-q", "-o"]).arg(&out)).expect_status(0);
    let mode = |p: &std::path::Path| fs_err::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(format!("{:o}", mode(&out)), format!("{:o}", mode(&reference)));
}

/// `-o` naming a device or a pipe writes into it: it is never replaced by a file (as root,
/// `-o /dev/null` once replaced the machine's `/dev/null`). Tested with a named pipe.
#[cfg(unix)]
#[test]
fn an_output_that_is_a_pipe_is_written_into_not_replaced() {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;

    let dir = Folder::new();
    let file = dir.file("cases.jsonl", "{\"id\": \"a\", \"input\": \"x\"}\n");
    let pipe = dir.join("pipe");
    assert!(std::process::Command::new("mkfifo").arg(&pipe).status().unwrap().success());
    let reader = {
        let pipe = pipe.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            fs_err::File::open(&pipe).unwrap().read_to_string(&mut text).unwrap();
            text
        })
    };
    run(casebook().arg("convert").arg(&file).args(["--to", "letta", "-q", "-o"]).arg(&pipe)).expect_status(0);
    // (Checked first: a pipe replaced by a file would leave the reader waiting for ever.)
    assert!(fs_err::metadata(&pipe).unwrap().file_type().is_fifo());
    assert_eq!(reader.join().unwrap(), "{\"id\":\"a\",\"input\":\"x\"}\n");
    assert_eq!(fs_err::read_dir(dir.join(".")).unwrap().count(), 2, "no temporary file is left");
}

#[test]
fn letta_to_casebook_and_back_gives_the_same_samples() {
    let dir = Folder::new();
    let source = r#"{"id": 1, "input": "a", "ground_truth": "x", "tags": ["math"], "metadata": {"k": 1}, "custom": true}
{"sample_id": "s2", "input": ["b", "c"], "ground_truth": ["y", "z"], "rubric_vars": {"r": "v"}}
{"input": "no id", "rubric": "be nice"}
"#;
    let file = dir.file("samples.jsonl", source);
    let native = dir.join("samples.yaml");
    let back = dir.join("back.jsonl");
    run(casebook().arg("convert").arg(&file).args(["--to", "casebook", "-q", "-o"]).arg(&native)).expect_status(0);
    run(casebook().arg("convert").arg(&native).args(["--to", "letta", "-q", "-o"]).arg(&back)).expect_status(0);
    assert_eq!(jsonl(&fs_err::read_to_string(&back).unwrap()), jsonl(source));
}

/// `--syntax` picks the syntax on standard output; casebook reads it back from there.
#[test]
fn syntax_flag_writes_yaml_to_standard_output() {
    let dir = Folder::new();
    let source = dir
        .file("support.jsonl", "{\"id\": 1, \"input\": \"Refunds?\\nPlease answer.\", \"ground_truth\": \"5 days\"}\n");
    let out = run(casebook().args(["convert", "--to", "casebook", "--syntax", "yaml", "-q"]).arg(&source));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(out.stdout.starts_with("name: support\n"), "{}", out.stdout);
    let yaml = dir.file("back.yaml", &out.stdout);
    let back = run(casebook().args(["convert", "--to", "letta", "-q"]).arg(&yaml));
    assert_eq!(back.status, Some(0), "{back:?}");
    let row: serde_json::Value = serde_json::from_str(back.stdout.trim()).expect("one letta row");
    assert_eq!(row, json!({"id": 1, "input": "Refunds?\nPlease answer.", "ground_truth": "5 days"}));
    // A syntax the format does not have is a usage error.
    let bad = run(casebook().args(["convert", "--to", "letta", "--syntax", "yaml"]).arg(&source));
    assert_eq!(bad.status, Some(2), "{bad:?}");
    assert!(bad.stderr.contains("`letta` cannot be written as yaml: it uses jsonl, csv"), "{}", bad.stderr);
}

/// letta reads a CSV cell that starts with `[` and ends with `]` as JSON: a string of that shape
/// would come back as a list, so it is refused (or, with `--lossy`, left out with a warning).
#[test]
fn a_string_letta_csv_would_read_as_a_list_is_refused() {
    let dir = Folder::new();
    let file = dir.file(
        "cases.jsonl",
        "{\"id\": \"a\", \"input\": \"ok\", \"expected\": {\"output\": \"x\"}}\n{\"id\": \"b\", \"input\": \"q\", \"expected\": {\"output\": \"[1, 2]\"}}\n",
    );
    let out = dir.join("out.csv");
    let r = run(casebook().arg("convert").arg(&file).args(["--to", "letta", "--format", "json", "-o"]).arg(&out));
    r.expect_status(1);
    let diagnostics = r.stderr_diagnostics();
    assert_eq!(diagnostics.len(), 1, "{r:?}");
    assert_eq!(diagnostics[0]["code"], "E-unrepresentable");
    assert_eq!(diagnostics[0]["line"], 2);
    assert!(message(&diagnostics[0]).contains("expected.output"), "the message names the field:\n{r:?}");
    assert!(!out.exists());

    let r = run(casebook()
        .arg("convert")
        .arg(&file)
        .args(["--to", "letta", "--lossy", "--format", "json", "-o"])
        .arg(&out));
    r.expect_status(0);
    assert_eq!(r.stderr_diagnostics()[0]["code"], "W-dropped");
    assert_eq!(fs_err::read_to_string(&out).unwrap(), "id,input,ground_truth\na,ok,x\nb,q,\n");
}

/// The temporary files of `dir` (`.casebook-PID-….tmp`).
fn temporaries(dir: &Folder) -> Vec<String> {
    dir.entries().into_iter().filter(|n| n.starts_with(".casebook-") && n.ends_with(".tmp")).collect()
}

/// Starts converting a large file into `dir` and waits until its temporary output exists.
fn interrupted_convert(dir: &Folder) -> std::process::Child {
    let data = dir.join("big.jsonl");
    let generate = run(casebook().args(["generate", "--kind", "letta-jsonl", "--cases", "50000", "-o"]).arg(&data));
    assert_eq!(generate.status, Some(0), "{generate:?}");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("casebook"))
        .current_dir(dir.join(""))
        .args(["convert", "big.jsonl", "--to", "casebook", "-o", "out.jsonl"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("convert starts");
    let start = std::time::Instant::now();
    while temporaries(dir).is_empty() {
        assert!(start.elapsed() < std::time::Duration::from_secs(30), "no temporary file appeared");
        assert!(child.try_wait().expect("wait").is_none(), "convert finished before it could be interrupted");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child
}

#[test]
fn an_interrupted_convert_leaves_no_temporary_file() {
    let dir = Folder::new();
    let mut child = interrupted_convert(&dir);
    let kill = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(kill.expect("kill runs").success());
    let status = child.wait().expect("convert ends");
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert_eq!(temporaries(&dir), Vec::<String>::new());
    assert!(!dir.join("out.jsonl").exists());
}

#[test]
fn a_killed_convert_s_temporary_file_is_removed_by_the_next_one() {
    let dir = Folder::new();
    let mut child = interrupted_convert(&dir);
    child.kill().expect("SIGKILL");
    child.wait().expect("convert ends");
    let stale = temporaries(&dir);
    assert_eq!(stale.len(), 1, "SIGKILL leaves the file: {stale:?}");
    let small = dir.file("small.jsonl", "{\"input\": \"hi\"}\n");
    let out = run(casebook().current_dir(dir.join("")).arg("convert").arg(&small).args([
        "--to",
        "letta",
        "-o",
        "small-out.jsonl",
    ]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert_eq!(temporaries(&dir), Vec::<String>::new());
}

#[test]
fn a_conversion_never_writes_a_file_its_own_reader_refuses() {
    let dir = Folder::new();
    // An Agent Health case needs a category, a difficulty and expected outcomes.
    let file = dir.file("cases.jsonl", "{\"id\": \"a\", \"input\": \"why?\"}\n");
    let out = dir.join("out.json");
    let r = run(casebook().arg("convert").arg(&file).args(["--to", "agenthealth", "--lossy", "-o"]).arg(&out));
    r.expect_status(1);
    assert!(
        r.stderr.contains("case `a` lacks what `agenthealth` requires: `category`, `difficulty`, `expectedOutcomes`"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("give the case a `category:…` label"), "{}", r.stderr);
    assert!(!out.exists(), "out.json must not be created");
    // An empty dataset, which a letta file cannot be.
    let file = dir.file("empty.json", "[]\n");
    let out = dir.join("out.jsonl");
    let r = run(casebook()
        .arg("convert")
        .arg(&file)
        .args(["--from", "agenthealth", "--to", "letta", "--format", "json", "-o"])
        .arg(&out));
    r.expect_status(1);
    let errors: Vec<_> = r.stderr_diagnostics().into_iter().filter(|d| d["severity"] == "error").collect();
    assert_eq!(errors.len(), 1, "{r:?}");
    assert_eq!(errors[0]["code"], "E-empty-dataset");
    assert_eq!(message(&errors[0]), "the dataset has no cases, and a `letta` file must hold at least one");
    assert!(!out.exists(), "out.jsonl must not be created");
}

/// A file with a draft case, a reviewed one and one never reviewed, in native JSONL.
const REVIEWS: &str =
    "{\"id\": \"ok-1\", \"input\": \"2+2?\", \"expected\": {\"output\": \"4\"}, \"review\": \"reviewed\"}
{\"id\": \"brouillon-é\", \"input\": \"capitale ?\", \"expected\": {\"output\": \"Paris\"}, \"review\": \"draft\"}
{\"id\": \"plain\", \"input\": \"2+2?\", \"expected\": {\"output\": \"4\"}}
{\"id\": \"no-answer\", \"input\": \"hi\", \"review\": \"draft\"}
";

/// Converting a draft expectation to a format without `review` would make it a confirmed one:
/// refused (at the first draft's line, naming it and the flag), `--lossy` or not, unless
/// `--confirm-drafts`. A draft without expectations confirms nothing and is not refused.
#[test]
fn a_draft_expectation_is_not_converted_into_a_confirmed_one() {
    let dir = Folder::new();
    let file = dir.file("cases.jsonl", REVIEWS);
    let out = dir.join("out.jsonl");
    for lossy in [&[][..], &["--lossy"]] {
        let r = run(casebook()
            .arg("convert")
            .arg(&file)
            .args(["--to", "letta", "--format", "json", "-o"])
            .arg(&out)
            .args(lossy));
        r.expect_status(1);
        let refused: Vec<_> =
            r.stderr_diagnostics().into_iter().filter(|d| d["code"] == "E-unconfirmed-drafts").collect();
        assert_eq!(refused.len(), 1, "{r:?}");
        assert_eq!(
            message(&refused[0]),
            "1 case with draft expectations (`review: draft`) would be written as confirmed, `letta` having no place \
             for `review`: `brouillon-é`"
        );
        assert_eq!((refused[0]["line"].as_u64(), refused[0]["pointer"].as_str()), (Some(2), Some("/review")));
        assert!(refused[0]["hint"].as_str().unwrap().contains("pass `--confirm-drafts`"), "{r:?}");
        assert!(!out.exists(), "{r:?}");
    }
    assert_eq!(dir.entries(), ["cases.jsonl"]);
    let r = run(casebook()
        .arg("convert")
        .arg(&file)
        .args(["--to", "letta", "--lossy", "--confirm-drafts", "-o"])
        .arg(&out));
    r.expect_status(0);
    let rows = jsonl(&fs_err::read_to_string(&out).unwrap());
    assert_eq!(rows[1], json!({"id": "brouillon-é", "input": "capitale ?", "ground_truth": "Paris"}));
    assert_eq!(rows.len(), 4);
}

/// Reviewed cases convert as before: `review` is one more field the format cannot hold.
#[test]
fn a_reviewed_expectation_converts_as_before() {
    let dir = Folder::new();
    let file =
        dir.file("cases.jsonl", REVIEWS.lines().filter(|l| !l.contains("brouillon")).collect::<Vec<_>>().join("\n"));
    let r = run(casebook().arg("convert").arg(&file).args(["--to", "letta", "--format", "json"]));
    r.expect_status(1);
    let codes: Vec<_> = r.stderr_diagnostics().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect();
    assert_eq!(codes, ["E-unrepresentable", "E-unrepresentable"], "{r:?}");
    let r = run(casebook().arg("convert").arg(&file).args(["--to", "letta", "--lossy", "-q"]));
    r.expect_status(0);
    assert_eq!(jsonl(&r.stdout).len(), 3, "{r:?}");
}

/// A case whose expectations a reviewer rejected is left out of a lossy conversion to a format
/// without `review` (written, it would read as ground truth), with a warning naming it; the
/// other cases are written, and an export of the stored version does the same.
#[test]
fn a_rejected_expectation_is_left_out_not_turned_into_ground_truth() {
    let dir = Folder::new();
    let file = dir.file(
        "cases.jsonl",
        "{\"id\": \"rejeté-1\", \"input\": \"capitale du Pérou ?\", \"expected\": {\"output\": \"Quito\"}, \"review\": \"rejected\"}\n\
         {\"id\": \"ok\", \"input\": \"capitale du Chili ?\", \"expected\": {\"output\": \"Santiago\"}, \"review\": \"reviewed\"}\n\
         {\"id\": \"sans-réponse\", \"input\": \"bonjour\", \"review\": \"rejected\"}\n",
    );
    let r = run(casebook().arg("convert").arg(&file).args(["--to", "letta", "--lossy", "--format", "json"]));
    r.expect_status(0);
    let rows = jsonl(&r.stdout);
    assert_eq!(
        rows,
        [
            json!({"id": "ok", "input": "capitale du Chili ?", "ground_truth": "Santiago"}),
            json!({"id": "sans-réponse", "input": "bonjour"})
        ]
    );
    let warnings = r.stderr_diagnostics();
    let first = warnings.iter().find(|d| d["line"] == 1).expect("a warning for the rejected case");
    assert_eq!(first["code"], "W-dropped");
    assert_eq!(
        message(first),
        "case `rejeté-1`: dropped what `letta` cannot hold: the whole case (its expectations were rejected, \
         `review: rejected`, and would read as ground truth)"
    );

    // The same from a stored version.
    run(cb(&dir).arg("init")).expect_status(0);
    run(cb(&dir).arg("import").arg(&file).args(["--dataset", "geo"])).expect_status(0);
    let r = run(cb(&dir).args(["export", "geo", "--to", "letta", "--lossy"]));
    r.expect_status(0);
    let ids: Vec<Value> = jsonl(&r.stdout).iter().map(|row| row["id"].clone()).collect();
    assert_eq!(ids, [json!("ok"), json!("sans-réponse")], "{r:?}");
    assert!(r.stderr.contains("`rejeté-1`") && r.stderr.contains("review: rejected"), "{}", r.stderr);
}
