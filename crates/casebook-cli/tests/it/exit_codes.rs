//! Exit statuses (0 valid, 1 invalid input, 2 usage or environment), `--help` everywhere, and
//! the shape of `--format json` output.

use crate::cli::{Folder, casebook, run, validate};

const VALID: &str = "{\"id\": \"a\", \"input\": \"x\"}\n";
const INVALID: &str = "{\"id\": \"a\", \"input\": 1}\n";

#[test]
fn valid_input_exits_0_and_invalid_input_exits_1() {
    let dir = Folder::new();
    let good = dir.file("good.jsonl", VALID);
    let bad = dir.file("bad.jsonl", INVALID);
    for command in ["validate", "inspect"] {
        run(casebook().arg(command).arg(&good)).expect_status(0);
        run(casebook().arg(command).arg(&bad)).expect_status(1);
    }
    run(casebook().arg("convert").arg(&good).args(["--to", "letta"])).expect_status(0);
    run(casebook().arg("convert").arg(&bad).args(["--to", "letta"])).expect_status(1);
    // One invalid file among valid ones.
    run(casebook().arg("validate").arg(&good).arg(&bad).arg(&good)).expect_status(1);
}

#[test]
fn warnings_alone_exit_0() {
    let dir = Folder::new();
    let file = dir.file("bom.jsonl", format!("\u{feff}{VALID}"));
    validate(&file).expect_status(0);
}

#[test]
fn missing_file_exits_2_and_names_it() {
    let dir = Folder::new();
    let good = dir.file("good.jsonl", VALID);
    let missing = dir.join("nope.jsonl");
    let runs = [
        run(casebook().arg("validate").arg(&missing)),
        run(casebook().arg("validate").arg(&good).arg(&missing)),
        run(casebook().arg("inspect").arg(&missing)),
        run(casebook().arg("convert").arg(&missing).args(["--to", "casebook"])),
    ];
    for r in &runs {
        r.expect_status(2);
        assert!(r.stderr.contains("nope.jsonl"), "the error names the file:\n{r:?}");
        assert!(r.stdout.is_empty(), "{r:?}");
    }
}

#[test]
fn bad_flags_and_unknown_formats_exit_2() {
    let dir = Folder::new();
    let good = dir.file("good.jsonl", VALID);
    let unknown_to = run(casebook().arg("convert").arg(&good).args(["--to", "excel"]));
    unknown_to.expect_status(2);
    assert!(unknown_to.stderr.contains("excel"), "{unknown_to:?}");
    assert!(unknown_to.stderr.contains("`parquet`"), "the error names Parquet too:\n{unknown_to:?}");
    assert!(unknown_to.stderr.contains("letta"), "the error lists the formats:\n{unknown_to:?}");

    let cases: [&[&str]; 6] = [
        &["validate", "--bogus"],
        &["validate", "--from", "nope"],
        &["validate", "--max-errors", "many"],
        &["validate", "--format", "xml"],
        &["convert"], // no `--to`
        &["frobnicate"],
    ];
    for args in cases {
        let r = run(casebook().args(args).arg(&good));
        r.expect_status(2);
        assert!(!r.stderr.is_empty(), "{args:?} says what is wrong:\n{r:?}");
    }
    run(casebook().arg("validate")).expect_status(2);
}

#[test]
fn output_syntax_the_target_format_cannot_have_exits_2_and_writes_nothing() {
    let dir = Folder::new();
    let good = dir.file("good.jsonl", VALID);
    let out = dir.join("out.yaml");
    run(casebook().arg("convert").arg(&good).args(["--to", "letta", "-o"]).arg(&out)).expect_status(2);
    assert!(!out.exists());
}

#[test]
fn help_works_on_every_command() {
    for command in ["validate", "convert", "inspect", "schema", "cases", "export", "import", "diff", "review", "run"] {
        let r = run(casebook().args([command, "--help"]));
        r.expect_status(0);
        assert!(r.stdout.contains(&format!("Usage: casebook {command}")), "{r:?}");
        let r = run(casebook().args(["help", command]));
        r.expect_status(0);
        assert!(r.stdout.contains(&format!("Usage: casebook {command}")), "{r:?}");
    }
    let r = run(casebook().arg("--help"));
    r.expect_status(0);
    for command in ["validate", "convert", "inspect", "schema", "review"] {
        assert!(r.stdout.contains(command), "{r:?}");
    }
}

#[test]
fn validate_json_prints_one_diagnostic_object_a_line_on_stdout() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", "{\"id\": \"a\", \"input\": 1}\n{\"id\": \"b\"}\n{\"id\": \"c\", \"input\": \"x\"}\n{\"id\": \"c\", \"input\": \"y\"}\n");
    let r = validate(&file);
    r.expect_status(1);
    let diagnostics = r.diagnostics();
    assert_eq!(diagnostics.len(), 3, "{r:?}");
    assert_eq!(r.stdout.lines().count(), 3, "nothing but diagnostics on stdout:\n{r:?}");
    for d in &diagnostics {
        for key in ["severity", "code", "message", "file", "line", "column", "pointer"] {
            assert!(d.get(key).is_some(), "`{key}` missing from {d}");
        }
        assert!(d["line"].is_u64() && d["column"].is_u64(), "{d}");
        assert!(d["code"].as_str().unwrap().starts_with("E-"), "{d}");
    }
}

#[test]
fn validate_json_of_a_valid_file_prints_nothing_on_stdout() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", VALID);
    let r = validate(&file);
    r.expect_status(0);
    assert_eq!(r.stdout, "");
}

#[test]
fn human_output_says_how_many_errors_on_stderr() {
    let dir = Folder::new();
    let file = dir.file("data.jsonl", INVALID);
    let r = run(casebook().arg("validate").arg(&file));
    r.expect_status(1);
    assert!(r.stdout.contains("E-wrong-type"), "{r:?}");
    assert!(r.stderr.contains("1 error"), "{r:?}");
    let r = run(casebook().arg("validate").arg("--quiet").arg(&file));
    r.expect_status(1);
    assert_eq!(r.stderr, "", "--quiet hides the summary");
}

/// The README's first command finds the binary where cargo puts it, `CARGO_TARGET_DIR`
/// included (it asks cargo rather than assuming `target/`).
#[test]
fn the_demo_finds_the_binary_where_cargo_builds_it() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/release-binary.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .env("CARGO_TARGET_DIR", "/somewhere/else")
        .output()
        .expect("the script runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "/somewhere/else/release/casebook\n");
    let demo = fs_err::read_to_string(script.with_file_name("demo.sh")).expect("demo.sh");
    assert!(demo.contains("bin=$(scripts/release-binary.sh)"), "demo.sh uses it");
}

/// Every summary line counts exactly what was printed above it.
#[test]
fn summaries_count_what_they_printed() {
    let dir = Folder::new();
    // Two errors (a duplicate id, a missing input) and one warning (a byte order mark).
    let file = dir.file(
        "mixed.jsonl",
        "\u{feff}{\"id\": \"a\", \"input\": \"x\"}\n{\"id\": \"a\", \"input\": \"y\"}\n{\"id\": \"b\"}\n",
    );
    for args in [&["validate"][..], &["inspect"], &["convert", "--to", "casebook"]] {
        let out = run(casebook().args(args).arg(&file));
        let text = format!("{}{}", out.stdout, out.stderr);
        let (errors, warnings) = (text.matches("error[E-").count(), text.matches("warning[W-").count());
        assert_eq!((errors, warnings), (2, 1), "{args:?}: {text}");
        let said = match args[0] {
            "validate" => "2 errors, 1 warning",
            "inspect" => "problems  2 errors, 1 warnings",
            _ => "conversion failed: 2 errors",
        };
        assert!(text.contains(said), "{args:?}: {text}");
    }
}

/// The commands `casebook [path] --help` lists (hidden ones aside), as paths from the top.
fn subcommands(path: &[String]) -> Vec<Vec<String>> {
    let r = run(casebook().args(path).arg("--help").env("COLUMNS", "200"));
    r.expect_status(0);
    let Some((_, listed)) = r.stdout.split_once("Commands:\n") else { return Vec::new() };
    listed
        .lines()
        .take_while(|line| line.starts_with("  "))
        // Not the continuation lines of a long description.
        .filter(|line| !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(|name| path.iter().cloned().chain([name.to_owned()]).collect())
        .collect()
}

/// `--help` (and `casebook help`) of every command names the store and server from the
/// environment with their passwords masked, as every other message does, never whole.
#[test]
fn help_never_shows_a_password_from_the_environment() {
    let mut commands: Vec<Vec<String>> = vec![Vec::new(), vec!["generate".to_owned()]];
    let mut at = 0;
    while at < commands.len() {
        for more in subcommands(&commands[at]) {
            if !commands.contains(&more) {
                commands.push(more);
            }
        }
        at += 1;
    }
    assert!(commands.len() > 30, "every command is listed: {commands:?}");
    let env = [
        ("CASEBOOK_STORE", "postgres://ana:s3cret-pw@db.example:5432/cases?sslmode=require&password=s3cret-q"),
        ("CASEBOOK_URL", "https://ci:s3cret-url@casebook.example:8080"),
        ("CASEBOOK_TOKEN", "cbk_s3cret_token"),
        // No wrapping inside what is checked below.
        ("COLUMNS", "1000"),
    ];
    for path in &commands {
        let asked = [
            run(casebook().args(path).arg("--help").envs(env)),
            run(casebook().arg("help").args(path).envs(env)),
            run(casebook().args(path).arg("-h").envs(env)),
        ];
        for r in &asked {
            r.expect_status(0);
            assert!(!r.stdout.contains("s3cret") && !r.stderr.contains("s3cret"), "{path:?}:\n{r:?}");
        }
        let help = &asked[0].stdout;
        assert!(
            help.contains(
                "[env: CASEBOOK_STORE=postgres://ana:***@db.example:5432/cases?sslmode=require&password=***]"
            ),
            "{path:?} shows the store, masked:\n{help}"
        );
    }
    let login = run(casebook().args(["login", "--help"]).envs(env));
    assert!(login.stdout.contains("[env: CASEBOOK_URL=https://ci:***@casebook.example:8080]"), "{login:?}");
    // Unset, the variables are named as clap names them.
    let login = run(casebook()
        .args(["login", "--help"])
        .env("COLUMNS", "1000")
        .env_remove("CASEBOOK_URL")
        .env_remove("CASEBOOK_STORE"));
    assert!(
        login.stdout.contains("[env: CASEBOOK_URL]") && login.stdout.contains("[env: CASEBOOK_STORE]"),
        "{login:?}"
    );
}
