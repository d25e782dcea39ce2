//! The README's "A five-minute tour" runs as written (issue 40): its commands are read from the
//! README's code block itself, so the README cannot drift from the tool, and run in order in one
//! bash session (variables, `&` and `$!` as a user's shell has them) in a temporary copy of
//! `examples/`, with the built binary in place of the `alias casebook=…` line.
//!
//! Each command must exit 0 unless its trailing comment starts with `exit N` (`# exit 1: …`).
//! A command that cannot run here (a network, a secret) would say `# not run by the tour test:
//! WHY`; the list of those is asserted below, by name, and is empty today. The `AGENT_PORT=…`
//! line is given a free port, and the test waits for the agent started in the background to
//! listen before the next command.
// Test code: a failed read or spawn is a failed test.
#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cli::{Folder, casebook, run};

/// What the test expects of a command of the tour.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    /// It exits with this status.
    Exit(i32),
    /// It is not run here, for this reason.
    NotRun(String),
}

/// One command of the tour, continuation lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    /// Its first line in the README (1-based).
    line: usize,
    /// The command as written, comment included.
    text: String,
    expect: Expect,
}

/// The lines the tour test may leave out (`# not run by the tour test: …`), by their command.
const NOT_RUN: &[&str] = &[];

/// How long the whole tour may take before the test gives up on it.
const TOUR_TIMEOUT: Duration = Duration::from_secs(300);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The commands of the first `sh` code block after the `## A five-minute tour` heading.
fn tour_steps(readme: &str) -> Vec<Step> {
    let lines: Vec<&str> = readme.lines().collect();
    let heading = lines.iter().position(|l| l.trim() == "## A five-minute tour").expect("the README has its tour");
    let open = heading + lines[heading..].iter().position(|l| l.trim() == "```sh").expect("the tour has a code block");
    let mut steps = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in lines.iter().enumerate().skip(open + 1) {
        if line.trim_start().starts_with("```") {
            assert!(pending.is_none(), "README line {}: the tour's last command ends with `\\`", i + 1);
            return steps;
        }
        let (first, mut text) = pending.take().unwrap_or((i + 1, String::new()));
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(line);
        if line.ends_with('\\') {
            pending = Some((first, text));
            continue;
        }
        let command = text.trim();
        if command.is_empty() || command.starts_with('#') {
            continue;
        }
        let expect = expectation(comment_of(command), first);
        steps.push(Step { line: first, text: command.to_owned(), expect });
    }
    panic!("the tour's code block is not closed");
}

/// The trailing comment of a shell command: from the first `#` outside quotes that starts a word.
fn comment_of(command: &str) -> Option<&str> {
    let mut quote = None;
    let mut previous = ' ';
    for (at, c) in command.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') if previous.is_whitespace() => return Some(command[at + 1..].trim()),
            _ => {}
        }
        previous = c;
    }
    None
}

fn expectation(comment: Option<&str>, line: usize) -> Expect {
    let Some(comment) = comment else { return Expect::Exit(0) };
    if let Some(why) = comment.strip_prefix("not run by the tour test:") {
        return Expect::NotRun(why.trim().to_owned());
    }
    match comment.strip_prefix("exit ") {
        Some(rest) => {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            Expect::Exit(digits.parse().unwrap_or_else(|_| panic!("README line {line}: `# exit` wants a number")))
        }
        None => Expect::Exit(0),
    }
}

#[test]
fn commands_and_their_expected_exits_are_read_from_the_code_block() {
    let readme = "# x\n\n## A five-minute tour\n\ntext\n\n```sh\nalias casebook='x'\n\n# a comment\n\
                  casebook a 'b # not a comment' # exit 1: fails\ncasebook run x \\\n  --y z   # two lines\n\
                  casebook c   # not run by the tour test: needs a secret\ncasebook d#e\n```\n\n```sh\nnot this\n```\n";
    let steps = tour_steps(readme);
    let got: Vec<(usize, &str, &Expect)> = steps.iter().map(|s| (s.line, s.text.as_str(), &s.expect)).collect();
    assert_eq!(
        got,
        [
            (8, "alias casebook='x'", &Expect::Exit(0)),
            (11, "casebook a 'b # not a comment' # exit 1: fails", &Expect::Exit(1)),
            (12, "casebook run x \\\n  --y z   # two lines", &Expect::Exit(0)),
            (14, "casebook c   # not run by the tour test: needs a secret", &Expect::NotRun("needs a secret".into())),
            (15, "casebook d#e", &Expect::Exit(0)),
        ]
    );
}

/// Copies the folder `from` into `to`, recursively.
fn copy_tree(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).unwrap();
    for entry in fs_err::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs_err::copy(entry.path(), &target).unwrap();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The tour as one bash script: each step's output and status go to files `N.out`, `N.err` and
/// `N.code` in `results`.
fn script(steps: &[Step], results: &Path, port: u16) -> String {
    let mut out = String::from(
        "casebook() { \"$CASEBOOK_TOUR_BIN\" \"$@\"; }\n\
         __tour_wait_port() {\n\
         \x20 for _ in $(seq 200); do (exec 3<>\"/dev/tcp/127.0.0.1/$1\") 2>/dev/null && return 0; sleep 0.05; done\n\
         \x20 echo \"nothing listens on port $1\" >&2; return 1\n\
         }\n",
    );
    for (i, step) in steps.iter().enumerate() {
        if step.text.starts_with("alias casebook=") || matches!(step.expect, Expect::NotRun(_)) {
            continue;
        }
        let command =
            if step.text.starts_with("AGENT_PORT=") { format!("AGENT_PORT={port}") } else { step.text.clone() };
        let base = results.join(i.to_string()).display().to_string();
        writeln!(out, "{{ {command}\n}} >'{base}.out' 2>'{base}.err' </dev/null\necho $? >'{base}.code'").unwrap();
        if command.trim_end().ends_with('&') {
            assert!(
                command.contains("$AGENT_PORT"),
                "README line {}: a background command other than the agent",
                step.line
            );
            writeln!(out, "__tour_wait_port \"$AGENT_PORT\"").unwrap();
        }
    }
    out.push_str("kill $(jobs -p) 2>/dev/null\nexit 0\n");
    out
}

/// Kills the tour's process group (bash and the agent it started) when dropped.
struct Group(i32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.0), nix::sys::signal::Signal::SIGKILL);
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

#[test]
fn the_readme_tour_runs_as_written() {
    use std::os::unix::process::CommandExt as _;

    let root = workspace_root();
    let readme = fs_err::read_to_string(root.join("README.md")).unwrap();
    let steps = tour_steps(&readme);
    assert!(steps.len() > 40, "the tour was read whole: {} commands", steps.len());
    assert!(steps[0].text.starts_with("alias casebook="), "the tour starts by naming casebook: {:?}", steps[0]);
    let ports: Vec<&Step> = steps.iter().filter(|s| s.text.starts_with("AGENT_PORT=")).collect();
    assert_eq!(ports.len(), 1, "one `AGENT_PORT=` line gives the agent its port");
    let not_run: Vec<&str> = steps
        .iter()
        .filter(|s| matches!(s.expect, Expect::NotRun(_)))
        .map(|s| s.text.split("  #").next().unwrap_or(&s.text).trim())
        .collect();
    assert_eq!(not_run, NOT_RUN, "the tour's commands this test leaves out");

    let work = Folder::new();
    copy_tree(&root.join("examples"), &work.join("examples"));
    let results = Folder::new();
    let home = Folder::new();
    let port = free_port();
    let script_path = results.file("tour.sh", script(&steps, &results.join(""), port));
    let bin = assert_cmd::cargo::cargo_bin("casebook");

    let mut child = std::process::Command::new("bash")
        .arg(&script_path)
        .current_dir(work.join(""))
        .env("CASEBOOK_TOUR_BIN", &bin)
        .env("NO_COLOR", "1")
        .env("HOME", home.join(""))
        .env("CASEBOOK_AUTHOR", "tour")
        .env_remove("CASEBOOK_STORE")
        .env_remove("CASEBOOK_URL")
        .env_remove("CASEBOOK_TOKEN")
        .env_remove("CASEBOOK_PROJECT")
        .env_remove("METRICS_TOKEN")
        .env_remove("CLICOLOR_FORCE")
        .stdin(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("bash runs");
    let _group = Group(i32::try_from(child.id()).unwrap());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < TOUR_TIMEOUT, "the tour took more than {TOUR_TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "the tour's script itself failed: {status}");

    let mut wrong = String::new();
    for (i, step) in steps.iter().enumerate() {
        let Expect::Exit(expected) = step.expect else { continue };
        if step.text.starts_with("alias casebook=") {
            continue;
        }
        let read = |ext: &str| fs_err::read_to_string(results.join(&format!("{i}.{ext}"))).unwrap_or_default();
        let code: Option<i32> = read("code").trim().parse().ok();
        if code != Some(expected) {
            writeln!(
                wrong,
                "README line {}: `{}`\n  exit {code:?}, expected {expected}\n--- stdout\n{}\n--- stderr\n{}\n",
                step.line,
                step.text,
                tail(&read("out")),
                tail(&read("err"))
            )
            .unwrap();
        }
    }
    assert!(wrong.is_empty(), "commands of the tour did not do what the README says:\n\n{wrong}");

    // What a user reads off the tour: the refund change is in the diff, the review by label
    // selected the billing cases, the agent's run graded every case of `prod`.
    let output_of = |prefix: &str| {
        let i = steps.iter().position(|s| s.text.starts_with(prefix)).unwrap_or_else(|| panic!("no `{prefix}`"));
        fs_err::read_to_string(results.join(&format!("{i}.out"))).unwrap()
    };
    let diff = output_of("casebook diff support@v1 support@latest");
    assert!(diff.contains("7 business days"), "the diff shows the edit:\n{diff}");
    let agent = output_of("casebook run --dataset support@prod --target http://127.0.0.1:$AGENT_PORT/agent");
    assert!(agent.contains("(5 passed, 0 failed, 0 errors, 0 ungraded)"), "every case of prod graded:\n{agent}");
    let drafts = run(casebook().current_dir(work.join("")).env_remove("CASEBOOK_STORE").args([
        "cases",
        "support@v6",
        "--where",
        "label.category == \"billing\" and review == \"draft\"",
        "--count",
    ]));
    assert_eq!(drafts.expect_status(0).stdout, "2\n", "the review by label made the billing cases drafts");
    for file in ["support.yaml", "support-again.jsonl", "casebook.schema.json", "support-prod.jsonl", "some.yaml"]
        .into_iter()
        .chain(["frozen.yaml", "results.xml", "report.html"])
    {
        let len = fs_err::metadata(work.join(file)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "the tour wrote `{file}`");
    }
}
