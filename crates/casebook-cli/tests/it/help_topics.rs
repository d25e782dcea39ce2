//! What a newcomer reaches for besides the commands (issue 40, "Small ones a newcomer hit"):
//! shell completions, the man page, the help topics, and `validate` of files whose format cannot
//! be told. The dataset files are native JSONL, one case a line (the README's `data.jsonl`); the
//! seed file is a mas-lab seed list as `examples/maslab/seeds/bob.yaml` holds one.

use crate::cli::{Folder, cb, run};

const DATA: &str = "{\"id\":\"1\",\"input\":\"hi\",\"expected\":{\"output\":\"hello\"}}\n";

#[test]
fn bash_completion_knows_the_commands_and_their_flags() {
    let dir = Folder::new();
    let out = run(cb(&dir).args(["completions", "bash"]));
    out.expect_status(0);
    assert!(out.stdout.contains("complete -F _casebook"), "a bash completion function:\n{}", out.stdout);
    assert!(out.stdout.lines().any(|l| l.trim() == "casebook,validate)"), "the `validate` command");
    assert!(out.stdout.contains("--max-errors"), "a flag of `validate`");
    for shell in ["zsh", "fish", "powershell"] {
        let out = run(cb(&dir).args(["completions", shell]));
        out.expect_status(0);
        assert!(out.stdout.contains("validate"), "{shell}");
    }
    let out = run(cb(&dir).args(["completions", "tcsh"]));
    out.expect_status(2);
    assert!(out.stderr.starts_with("error: invalid value 'tcsh' for '<SHELL>'"), "{out:?}");
}

#[test]
fn man_prints_a_page_with_the_commands_and_writes_one_per_command() {
    let dir = Folder::new();
    let out = run(cb(&dir).arg("man"));
    out.expect_status(0);
    assert!(out.stdout.lines().any(|l| l.starts_with(".TH casebook 1")), "a roff title:\n{}", out.stdout);
    assert!(out.stdout.contains(".SH SUBCOMMANDS"), "{}", out.stdout);
    for command in ["validate", "import", "tag", "logout", "completions"] {
        assert!(out.stdout.contains(&format!("casebook\\-{command}(1)")), "{command}");
    }
    // The hidden benchmark command is not documented.
    assert!(!out.stdout.contains("generate"));

    let out = run(cb(&dir).args(["man", "-o", "man1"]));
    out.expect_status(0);
    let mut pages: Vec<String> = fs_err::read_dir(dir.join("man1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    assert!(
        pages.contains(&"casebook.1".to_owned()) && pages.contains(&"casebook-keys-create.1".to_owned()),
        "{pages:?}"
    );
    assert!(!pages.contains(&"casebook-generate.1".to_owned()));
    assert_eq!(out.stderr.trim_end(), format!("wrote {} man pages into `man1`", pages.len()));
    let page = fs_err::read_to_string(dir.join("man1/casebook-validate.1")).unwrap();
    assert!(page.contains(".TH casebook-validate 1") && page.contains("max\\-errors"), "{page}");
    // Written again: refused without `--overwrite`, as every writer is, and nothing changed.
    fs_err::write(dir.join("man1/casebook.1"), "mine").unwrap();
    let out = run(cb(&dir).args(["man", "-o", "man1"]));
    out.expect_status(2);
    assert!(out.stderr.contains(".1` exists: pass `--overwrite` to replace it"), "{out:?}");
    assert_eq!(fs_err::read_to_string(dir.join("man1/casebook.1")).unwrap(), "mine");
    run(cb(&dir).args(["man", "-o", "man1", "--overwrite", "-q"])).expect_status(0);
    assert!(fs_err::read_to_string(dir.join("man1/casebook.1")).unwrap().contains(".TH casebook 1"));
}

#[test]
fn help_has_formats_and_the_experiment_file_and_lists_its_topics() {
    let dir = Folder::new();
    let out = run(cb(&dir).args(["help", "formats"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("# Formats\n"), "{}", out.stdout);
    for part in ["## `letta`", "## Detection", "## What each format cannot hold", "E-unknown-format"] {
        assert!(out.stdout.contains(part), "{part}");
    }
    let out = run(cb(&dir).args(["help", "experiment"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("# The experiment file\n"), "{}", out.stdout);
    for field in ["\ndataset (required)\n", "\nthreshold\n", "\nscenarios (or one `target`)\n", "\nmax_steps\n"] {
        assert!(out.stdout.contains(field), "{field}");
    }
    // Commands still have their help.
    let out = run(cb(&dir).args(["help", "keys", "create"]));
    out.expect_status(0);
    assert!(out.stdout.contains("Usage: casebook keys create"), "{}", out.stdout);

    let out = run(cb(&dir).args(["help", "nosuch"]));
    out.expect_status(2);
    assert_eq!(
        out.stderr.trim_end(),
        "error: no command or help topic `nosuch`: see `casebook --help` for the commands; the topics are:
       casebook help filter      the filter language of `--where`
       casebook help formats     the formats casebook reads and writes
       casebook help experiment  the experiment file of `casebook run`, field by field"
    );
}

#[test]
fn validate_reports_an_undetectable_file_and_goes_on() {
    let dir = Folder::new();
    dir.file("a.jsonl", DATA);
    dir.file("notes.yaml", "title: my notes\nbody: nothing to see\n");
    dir.file("b.jsonl", "{\"id\":\"1\",\"input\":\"hi\",\"expected\":{\"output\":7}}\n{\"input\":\n");
    let out = run(cb(&dir).args(["validate", "a.jsonl", "notes.yaml", "b.jsonl"]));
    out.expect_status(1);
    assert!(
        out.stdout.starts_with(
            "error[E-unknown-format]: cannot tell the format of `notes.yaml`
 --> notes.yaml:1:1
  |
1 | title: my notes
  | ^
  |
help: name it with `--from` (casebook, agenthealth, maslab, voltagent, inspect, promptfoo)
"
        ),
        "{out:?}"
    );
    // The file after it was read too: its error is reported, with its line.
    assert!(out.stdout.contains(" --> b.jsonl:2:"), "{out:?}");
    assert!(out.stderr.trim_end().ends_with("invalid: 3 files: 2 cases, 2 errors, 0 warnings"), "{out:?}");

    let out = run(cb(&dir).args(["validate", "--format", "json", "notes.yaml", "a.jsonl"]));
    out.expect_status(1);
    let d = &out.diagnostics()[0];
    assert_eq!(
        (d["code"].as_str(), d["file"].as_str(), d["line"].as_u64()),
        (Some("E-unknown-format"), Some("notes.yaml"), Some(1))
    );
}

#[test]
fn a_maslab_seed_file_validated_alone_is_named_as_one() {
    let dir = Folder::new();
    let seeds = "- source: user_history\n  content: Bob travels Geneva to Milan twice a month.\n- source: user_preferences\n  content: Bob prefers aisle seats.\n  target_agent: concierge\n";
    dir.file("seeds/bob.yaml", seeds);
    let out = run(cb(&dir).args(["validate", "seeds/bob.yaml"]));
    out.expect_status(1);
    assert_eq!(out.stderr.trim_end(), "invalid: 1 file: 0 cases, 1 error, 0 warnings");
    assert_eq!(
        out.stdout.trim_end(),
        "error[E-unknown-format]: `seeds/bob.yaml` looks like a mas-lab seed file (memory seeds), not a dataset
 --> seeds/bob.yaml:1:1
  |
1 | - source: user_history
  | ^
  |
help: validate the dataset that names it (`memory_seeds: FILE`): the seeds are read and checked there"
    );
    // The dict form (`seeds:`) too; the manifest that names the file reads it.
    dir.file("seeds/alice.json", "{\"memory_seeds\": [{\"source\": \"profile\", \"content\": \"Alice\"}]}");
    let out = run(cb(&dir).args(["validate", "seeds/alice.json"]));
    out.expect_status(1);
    assert!(out.stdout.contains("looks like a mas-lab seed file"), "{out:?}");
    dir.file(
        "trip.yaml",
        "apiVersion: lab/v1\nkind: Dataset\nmetadata: {name: trip}\nspec:\n  items:\n  - id: bob-1\n    inputs:\n      user: [{role: user, content: Book my usual route.}]\n      memory_seeds: seeds/bob.yaml\n",
    );
    let out = run(cb(&dir).args(["validate", "trip.yaml"]));
    out.expect_status(0);
    assert_eq!(out.stderr.trim_end(), "valid: 1 file: 1 case, 0 errors, 0 warnings");
}
