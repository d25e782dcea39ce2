//! One vocabulary on the command line (README, "Conventions"): every option of every command,
//! found by walking clap's tree of the real definition (`src/args.rs`), has a help text and a
//! spelling of the documented vocabulary; the spellings it replaced still work, each saying once
//! that it is deprecated; and every command that writes a file follows one rule: never over its
//! own input, and over any other existing file only with `--overwrite` (or a yes on a terminal).
//!
//! Dataset files here are small letta JSONL rows (`id`, `input`, `ground_truth`, `tags`), the
//! shape of `examples/letta/support.jsonl`; the traces are one OTLP JSON request, the shape of
//! `examples/traces/`.

use std::collections::BTreeMap;

use clap::CommandFactory;

use crate::args::Cli;
use crate::cli::{Backend, Folder, Run, cb, run};
use crate::remote::{PROJECT, Server, ok};

/// The documented spellings, kept by hand: one for each idea that several commands share (the
/// README's conventions name the chief ones). A long option that two commands or more show must
/// be one of these; an option only one command has is its own, read from clap, and needs no
/// entry, but may not look like a documented spelling or a retired one. A new shared option is
/// added here (and to README's conventions when it names an idea the user meets on many
/// commands).
const DOCUMENTED: &[&str] = &[
    // Global.
    "format",
    "quiet",
    "color",
    "store",
    "project",
    "help",
    // The root's: casebook's own version (`pull --version`, retired, meant a dataset's).
    "version",
    // Naming a dataset, reading files, selecting cases, writing files.
    "dataset",
    "from",
    "map",
    "threads",
    "where",
    "tag",
    "limit",
    "to",
    "syntax",
    "lossy",
    "output",
    "overwrite",
    "report",
    "message",
    "parent",
    "dry-run",
    // Running agents, and reading labels' confidence (`run`, `freeze`, `lint`).
    "concurrency",
    "min-confidence",
    // Writing a dataset format (`convert`, `export`, `pull`, `capture --dry-run`).
    "confirm-drafts",
    "inline-seeds",
];

/// Each command's path (`keys create`) and its clap definition, the root first.
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(path: &str, command: &clap::Command, into: &mut Vec<(String, clap::Command)>) {
        into.push((path.to_owned(), command.clone()));
        for sub in command.get_subcommands() {
            let path = if path.is_empty() { sub.get_name().to_owned() } else { format!("{path} {}", sub.get_name()) };
            walk(&path, sub, into);
        }
    }
    let mut root = Cli::command();
    // Adds `--help` and the global options to every command, as the binary shows them.
    root.build();
    let mut all = Vec::new();
    walk("", &root, &mut all);
    all
}

/// Every command's `--help` lists each of its options with a help text; an option several
/// commands show is spelled as documented ([`DOCUMENTED`]), and one a single command has does not
/// look like a documented or a retired spelling. The retired spellings are read from clap (its
/// hidden options): each is still accepted, and named in README's conventions with what replaces
/// it; each documented spelling is named in the README or `docs/`.
#[test]
fn every_option_has_help_and_a_documented_spelling() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = fs_err::read_to_string(root.join("README.md")).expect("the README");
    // The README and the references under `docs/`.
    let mut documentation = readme.clone();
    for entry in fs_err::read_dir(root.join("docs")).expect("the docs folder") {
        documentation.push_str(&fs_err::read_to_string(entry.expect("a docs entry").path()).unwrap_or_default());
    }
    let conventions = readme.split("### Conventions").nth(1).expect("README has its conventions");
    let mut problems = Vec::new();
    let mut retired = BTreeMap::<String, Vec<String>>::new();
    let mut shown = BTreeMap::<String, Vec<String>>::new();
    for (path, command) in commands() {
        let help = command.clone().render_long_help().to_string();
        for arg in command.get_arguments() {
            let name = arg.get_long().map_or_else(|| format!("<{}>", arg.get_id()), |l| format!("--{l}"));
            if arg.is_hide_set() {
                if let Some(long) = arg.get_long() {
                    retired.entry(long.to_owned()).or_default().push(path.clone());
                }
                continue;
            }
            let text = arg.get_long_help().or(arg.get_help()).map(ToString::to_string).unwrap_or_default();
            if text.trim().is_empty() {
                problems.push(format!("`casebook {path}`: {name} has no help text"));
            }
            if let Some(long) = arg.get_long() {
                // Global options are shown by every command: counted once, at the root.
                if !arg.is_global_set() || path.is_empty() {
                    shown.entry(long.to_owned()).or_default().push(path.clone());
                }
                if !help.contains(&format!("--{long}")) {
                    problems.push(format!("`casebook {path} --help` does not list --{long}"));
                }
            }
            if let Some(aliases) = arg.get_visible_aliases() {
                problems.push(format!("`casebook {path}`: {name} shows other spellings: {aliases:?}"));
            }
        }
    }
    let retired_names: Vec<&str> = retired.keys().map(String::as_str).collect();
    for (long, paths) in &shown {
        if DOCUMENTED.contains(&long.as_str()) {
            continue;
        }
        let commands = paths.iter().map(|p| format!("`casebook {p}`")).collect::<Vec<_>>().join(", ");
        if paths.len() > 1 {
            problems.push(format!(
                "--{long} is shown by {commands}: an option several commands share takes a documented spelling; \
                 use one of DOCUMENTED in tests/it/vocabulary.rs, or add --{long} there (and to README's \
                 conventions if users meet it on many commands)"
            ));
        } else if let Some(like) = DOCUMENTED
            .iter()
            .chain(&retired_names)
            .find(|d| *d == long || casebook_model::edit_distance(long, d) <= long.len().min(d.len()) / 3)
        {
            problems.push(format!(
                "--{long} of {commands} looks like --{like}: spell the idea as documented (DOCUMENTED in \
                 tests/it/vocabulary.rs, README's conventions)"
            ));
        }
    }
    for long in DOCUMENTED {
        if !documentation.contains(&format!("--{long}")) {
            problems.push(format!(
                "--{long} is documented in tests/it/vocabulary.rs, but neither the README nor docs/ names it"
            ));
        }
        if !shown.contains_key(*long) {
            problems.push(format!("--{long} is documented in tests/it/vocabulary.rs, but no command shows it"));
        }
    }
    for (long, paths) in &retired {
        if !conventions.contains(&format!("--{long}")) {
            problems.push(format!(
                "--{long} is hidden on {paths:?}: a retired spelling is named in README's conventions with what \
                 replaces it"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// One idea, one spelling: an option has the same short form everywhere (`-o` is `--output`,
/// `-m` is `--message`), a command that selects cases takes all of `--where`, `--tag` and
/// `--limit`, one that writes a file or a report takes `--overwrite`, and one that writes a
/// dataset format takes `--lossy`.
#[test]
fn shared_ideas_are_spelled_alike_everywhere() {
    let mut shorts: BTreeMap<String, BTreeMap<Option<char>, Vec<String>>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (path, command) in commands() {
        let visible: Vec<&clap::Arg> = command.get_arguments().filter(|a| !a.is_hide_set()).collect();
        let has = |long: &str| visible.iter().any(|a| a.get_long() == Some(long));
        for arg in &visible {
            if let Some(long) = arg.get_long() {
                shorts.entry(long.to_owned()).or_default().entry(arg.get_short()).or_default().push(path.clone());
            }
        }
        if (has("where") || has("tag") || has("limit")) && !(has("where") && has("tag") && has("limit")) {
            problems.push(format!("`casebook {path}` selects cases without all of --where, --tag and --limit"));
        }
        if (has("output") || has("report")) && !has("overwrite") {
            problems.push(format!("`casebook {path}` writes files without --overwrite"));
        }
        if has("to") && !has("lossy") {
            problems.push(format!("`casebook {path}` writes a dataset format without --lossy"));
        }
    }
    for (long, by_short) in &shorts {
        if by_short.len() > 1 {
            problems.push(format!("--{long} has several short forms: {by_short:?}"));
        }
    }
    for (long, short) in [("output", 'o'), ("message", 'm'), ("quiet", 'q')] {
        if shorts.get(long).is_some_and(|s| s.keys().any(|k| *k != Some(short))) {
            problems.push(format!("--{long} is not always -{short}: {:?}", shorts[long]));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const ROWS: &str = r#"{"id": "a", "input": "What is 2 + 2?", "ground_truth": "4", "tags": ["math"]}
{"id": "b", "input": "Capital of France?", "ground_truth": "Paris", "tags": ["geo"]}
{"id": "c", "input": "What is 3 + 3?", "ground_truth": "6", "tags": ["math"]}
"#;

/// The first line of standard error, and the rest.
fn first_line(out: &Run) -> (&str, &str) {
    out.stderr.split_once('\n').unwrap_or((&out.stderr, ""))
}

/// `cases --max-samples`, `run --only` and `results --as` still do what they did, after one
/// line saying what to write instead.
#[test]
fn retired_spellings_work_and_say_so() {
    let dir = Folder::new();
    dir.file("data.jsonl", ROWS);
    ok(cb(&dir).arg("init"));

    let old = run(cb(&dir).args(["cases", "data.jsonl", "--tag", "math", "--max-samples", "1", "--format", "json"]));
    old.expect_status(0);
    assert_eq!(old.stderr, "warning: --max-samples is deprecated; use --limit\n");
    let new = run(cb(&dir).args(["cases", "data.jsonl", "--tag", "math", "--limit", "1", "--format", "json"]));
    assert_eq!((old.stdout.lines().count(), &old.stdout), (1, &new.stdout));

    let run_with = |selection: &[&str]| {
        run(cb(&dir)
            .args(["run", "--dataset", "data.jsonl", "--target", "builtin:echo", "--grader", "contains"])
            .args(selection)
            .args(["--format", "json", "-q"]))
    };
    let old = run_with(&["--only", r#"id != "b""#]);
    assert_eq!(first_line(&old).0, "warning: --only is deprecated; use --where");
    let new = run_with(&["--where", r#"id != "b""#]);
    assert!(!new.stderr.contains("deprecated"), "{new:?}");
    let selection = |out: &Run| -> serde_json::Value {
        let summary: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        summary["meta"]["selection"].clone()
    };
    assert_eq!(selection(&old), selection(&new));
    assert_eq!(selection(&new)["run"], 2, "{new:?}");

    let old = run(cb(&dir).args(["results", "--as", "markdown"]));
    old.expect_status(0);
    assert_eq!(old.stderr, "warning: --as is deprecated; use --format\n");
    let new = run(cb(&dir).args(["results", "--format", "markdown"]));
    assert_eq!((new.stderr.as_str(), &new.stdout), ("", &old.stdout));
    assert!(new.stdout.starts_with('#'), "{new:?}");
}

/// `run --tag` and `--limit` select as `cases` does, and the run records what they left out.
#[test]
fn run_selects_with_tag_and_limit() {
    let dir = Folder::new();
    dir.file("data.jsonl", ROWS);
    let out = run(cb(&dir)
        .args(["run", "--dataset", "data.jsonl", "--target", "builtin:echo", "--grader", "contains"])
        .args(["--tag", "math", "--limit", "1", "--format", "json", "-q"]));
    let summary: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let selection = &summary["meta"]["selection"];
    assert_eq!((&selection["cases"], &selection["run"]), (&3.into(), &1.into()), "{summary}");
    assert_eq!((&selection["left_out"]["filter"], &selection["left_out"]["limit"]), (&1.into(), &1.into()));
    let cases = run(cb(&dir).args(["cases", "data.jsonl", "--tag", "math", "--limit", "1", "--count"]));
    assert_eq!(cases.stdout.trim(), "1", "{cases:?}");
}

/// `push --name`/`--file` and `pull --name`/`--version` still work, each saying what to write
/// instead; `pull --dataset NAME@REF` names the version.
#[test]
fn push_and_pull_name_the_dataset_with_dataset() {
    let b = Backend::Embedded;
    let dir = Folder::new();
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    dir.file("data.jsonl", ROWS);

    let old = run(server.client(&dir, &token).args(["push", "--name", "qa", "--file", "data.jsonl", "-q"]));
    old.expect_status(0);
    assert_eq!(
        old.stderr,
        "warning: --name is deprecated; use --dataset\nwarning: --file is deprecated; use `casebook push FILE`\n"
    );
    let edited = dir.file("edited.jsonl", ROWS.replace("Paris", "Paris, France"));
    let new = run(server.client(&dir, &token).args(["push"]).arg(&edited).args(["--dataset", "qa", "-q"]));
    assert_eq!((new.status, new.stderr.as_str()), (Some(0), ""), "{new:?}");

    let old = run(server.client(&dir, &token).args(["pull", "--name", "qa", "--version", "v1", "-o", "old.jsonl"]));
    old.expect_status(0);
    assert_eq!(
        old.stderr,
        "warning: --name is deprecated; use --dataset\nwarning: --version is deprecated; use --dataset NAME@REF\n"
    );
    assert_eq!(old.stdout, "wrote `old.jsonl`: qa@v1, 3 cases (letta)\n");
    let new = run(server.client(&dir, &token).args(["pull", "--dataset", "qa@v1", "-o", "new.jsonl"]));
    assert_eq!((new.status, new.stderr.as_str()), (Some(0), ""), "{new:?}");
    assert_eq!(fs_err::read(dir.join("new.jsonl")).unwrap(), fs_err::read(dir.join("old.jsonl")).unwrap());
    let latest = ok(server.client(&dir, &token).args(["pull", "--dataset", "qa", "-o", "latest.jsonl"]));
    assert_eq!(latest, "wrote `latest.jsonl`: qa@v2, 3 cases (letta)\n");
}

/// `pull --lossy` is what the error of a format that cannot hold a field tells users to pass,
/// and means what it means for `export`: the field is dropped with a warning.
#[test]
fn pull_takes_lossy() {
    let b = Backend::Embedded;
    let dir = Folder::new();
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    // A context item: a letta row has no place for it (the shape of `convert.rs`'s case).
    dir.file(
        "multi.jsonl",
        r#"{"id": "t", "input": "why?", "context": [{"type": "log", "content": "boom"}], "expected": {"output": "x"}}
"#,
    );
    ok(server.client(&dir, &token).args(["push", "multi.jsonl", "--dataset", "multi", "-q"]));
    let refused =
        run(server.client(&dir, &token).args(["pull", "--dataset", "multi", "--to", "letta", "-o", "m.jsonl"]));
    refused.expect_status(1);
    assert!(refused.stderr.contains("--lossy"), "{refused:?}");
    assert!(!dir.join("m.jsonl").exists());
    let lossy = run(server
        .client(&dir, &token)
        .args(["pull", "--dataset", "multi", "--to", "letta", "--lossy"])
        .args(["-o", "m.jsonl"]));
    lossy.expect_status(0);
    assert!(lossy.stderr.contains("warning"), "{lossy:?}");
    assert!(dir.join("m.jsonl").exists());
}

/// Every writer refuses its own input, however the path is spelled, naming both paths; an
/// existing file needs `--overwrite`; and a failed write with `--overwrite` leaves the old file
/// whole.
#[test]
fn writers_never_overwrite_their_input_nor_without_overwrite() {
    let dir = Folder::new();
    let data = dir.file("data.jsonl", ROWS);
    dir.file("traces.json", r#"{"resourceSpans": []}"#);
    let old = dir.file("out.jsonl", "old contents\n");
    let refused = |args: &[&str], expected: &str| {
        let out = run(cb(&dir).args(args));
        assert_eq!((out.status, out.stderr.as_str()), (Some(2), expected), "casebook {}", args.join(" "));
        assert_eq!(fs_err::read_to_string(&data).unwrap(), ROWS, "casebook {}", args.join(" "));
        assert_eq!(fs_err::read_to_string(&old).unwrap(), "old contents\n", "casebook {}", args.join(" "));
    };
    let input = "error: the output `./data.jsonl` is the input `data.jsonl`: a command never overwrites its input; write to another file\n";
    refused(&["convert", "data.jsonl", "--to", "casebook", "-o", "./data.jsonl"], input);
    refused(&["convert", "data.jsonl", "--to", "casebook", "-o", "./data.jsonl", "--overwrite"], input);
    refused(&["freeze", "data.jsonl", "-o", "./data.jsonl", "--overwrite"], input);
    refused(
        &["capture", "traces.json", "--dry-run", "-o", "./traces.json"],
        "error: the output `./traces.json` is the input `traces.json`: a command never overwrites its input; write to another file\n",
    );
    refused(
        &[
            "run",
            "--dataset",
            "data.jsonl",
            "--target",
            "builtin:echo",
            "--grader",
            "contains",
            "--report",
            "junit=./data.jsonl",
        ],
        input,
    );
    let exists = "error: `out.jsonl` exists: pass `--overwrite` to replace it\n";
    refused(&["convert", "data.jsonl", "--to", "casebook", "-o", "out.jsonl"], exists);
    refused(&["freeze", "data.jsonl", "-o", "out.jsonl"], exists);
    refused(&["capture", "traces.json", "--dry-run", "-o", "out.jsonl"], exists);
    refused(&["generate", "--cases", "2", "-o", "out.jsonl"], exists);
    refused(
        &[
            "run",
            "--dataset",
            "data.jsonl",
            "--target",
            "builtin:echo",
            "--grader",
            "contains",
            "--report",
            "markdown=out.jsonl",
        ],
        exists,
    );

    // A store's version and a run's results, written to files that exist.
    ok(cb(&dir).arg("init"));
    ok(cb(&dir).args(["import", "data.jsonl", "--dataset", "qa", "-q"]));
    refused(&["export", "qa", "--to", "letta", "-o", "out.jsonl"], exists);
    run(cb(&dir).args(["run", "--dataset", "qa@latest", "--target", "builtin:echo", "--grader", "contains", "-q"]));
    refused(&["results", "--report", "junit=out.jsonl"], exists);

    // A write that fails leaves the old file whole, and no temporary file.
    dir.file("bad.jsonl", "{\"id\": \"x\", \"input\": \n");
    let before = dir.entries();
    let out = run(cb(&dir).args(["convert", "bad.jsonl", "--to", "casebook", "-o", "out.jsonl", "--overwrite"]));
    out.expect_status(1);
    assert_eq!(fs_err::read_to_string(&old).unwrap(), "old contents\n");
    assert_eq!(dir.entries(), before);

    // With `--overwrite`, each replaces the file.
    for args in [
        &["convert", "data.jsonl", "--to", "casebook", "-o", "out.jsonl", "--overwrite"][..],
        &["export", "qa", "--to", "letta", "-o", "out.jsonl", "--overwrite"],
        &["results", "--report", "markdown=out.jsonl", "--overwrite"],
        &["generate", "--cases", "2", "-o", "out.jsonl", "--overwrite"],
    ] {
        fs_err::write(&old, "old contents\n").unwrap();
        let out = run(cb(&dir).args(args));
        assert_eq!(out.status, Some(0), "casebook {}: {out:?}", args.join(" "));
        assert_ne!(fs_err::read_to_string(&old).unwrap(), "old contents\n", "casebook {}", args.join(" "));
    }
}

/// On a terminal, a writer asks before it replaces a file: `y` replaces it, anything else
/// (Enter: no is the default) leaves it and exits 2.
#[test]
fn on_a_terminal_a_writer_asks_before_replacing() {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let dir = Folder::new();
    dir.file("data.jsonl", ROWS);
    let asked = |key: &[u8]| {
        fs_err::write(dir.join("out.jsonl"), "old contents\n").unwrap();
        let bin = assert_cmd::cargo::cargo_bin("casebook");
        let mut child = std::process::Command::new("script")
            .args(["-qec", &format!("'{}' convert data.jsonl --to casebook -o out.jsonl", bin.display()), "/dev/null"])
            .current_dir(dir.join(""))
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("util-linux `script` runs");
        let mut stdin = child.stdin.take().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(700));
        stdin.write_all(key).unwrap();
        stdin.flush().unwrap();
        let mut screen = String::new();
        child.stdout.take().unwrap().read_to_string(&mut screen).unwrap();
        (child.wait().unwrap().code(), screen, fs_err::read_to_string(dir.join("out.jsonl")).unwrap())
    };
    let (status, screen, text) = asked(b"y");
    assert_eq!(status, Some(0), "{screen}");
    assert!(screen.contains("`out.jsonl` exists: overwrite it?"), "{screen}");
    assert!(text.contains("\"Paris\""), "{text}");
    let (status, screen, text) = asked(b"\r");
    assert_eq!(status, Some(2), "{screen}");
    assert!(screen.contains("`out.jsonl` exists and was left as it is"), "{screen}");
    assert_eq!(text, "old contents\n");
}
