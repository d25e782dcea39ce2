//! `casebook serve`, `keys`, `login`, `push` and `pull` as a team uses them: a real server
//! (`casebook serve --listen 127.0.0.1:0`, a child process over a fresh store, SQLite or
//! PostgreSQL) and the real client commands, with their keys in the environment or saved by
//! `login` in a temporary home. Each test checks what a user sees: the files written, their bytes
//! or values, the messages and the exit status.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::{Value, json};

use crate::cli::{Backend, Folder, Run, cb, run};

on_both!(
    every_format_comes_back_as_it_was_pushed,
    the_same_content_again_makes_no_version,
    a_push_on_a_moved_head_is_refused,
    invalid_input_is_told_and_nothing_is_sent,
    keys_are_listed_without_secrets_and_revoked_keys_stop_working,
    a_key_sees_only_its_own_project,
    a_large_dataset_round_trips,
    with_a_server_named_commands_act_there_not_on_a_store_found_here,
);

/// The project the tests' keys open (not `default`, so `--project` is exercised).
pub(crate) const PROJECT: &str = "team";

/// A file of the real-file corpus (`CASEBOOK_CORPUS`, `../shared/corpus` beside the workspace by
/// default; see `scripts/corpus_cfg.rs`).
fn corpus(path: &str) -> PathBuf {
    Path::new(env!("CASEBOOK_CORPUS_DIR")).join(path)
}

/// The workspace's `examples/`.
pub(crate) fn example(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(path)
}

/// What a child process wrote on stderr so far, line by line, and a way to wait for a line.
#[derive(Clone, Default)]
struct Lines(Arc<(Mutex<Vec<String>>, Condvar)>);

impl Lines {
    /// Reads `from` to its end on a thread of its own (so the child never blocks on a full pipe).
    fn collect(from: impl std::io::Read + Send + 'static) -> Self {
        let lines = Lines::default();
        let kept = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(from).lines() {
                let Ok(line) = line else { break };
                let (list, changed) = &*kept.0;
                list.lock().unwrap().push(line);
                changed.notify_all();
            }
        });
        lines
    }

    fn text(&self) -> String {
        self.0.0.lock().unwrap().join("\n")
    }

    /// The number of lines so far.
    fn count(&self) -> usize {
        self.0.0.lock().unwrap().len()
    }

    /// Waits (at most a minute) for a line after the first `skip` that satisfies `wanted`.
    #[track_caller]
    fn wait_for(&self, skip: usize, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        let (list, changed) = &*self.0;
        let mut lines = list.lock().unwrap();
        loop {
            if let Some(line) = lines.iter().skip(skip).find(|l| wanted(l)) {
                return line.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the line never came; so far:\n{}", lines.join("\n"));
            lines = changed.wait_timeout(lines, left).unwrap().0;
        }
    }
}

/// A `casebook serve` child process over the test's store, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) url: String,
    log: Lines,
}

impl Server {
    /// Makes the store (`casebook init`) and serves it with `extra` arguments.
    pub(crate) fn start(b: &Backend, dir: &Folder, extra: &[&str]) -> Server {
        ok(b.cb(dir).arg("init"));
        Server::serve(b, dir, extra)
    }

    /// Serves the store that is there with `extra` arguments.
    pub(crate) fn serve(b: &Backend, dir: &Folder, extra: &[&str]) -> Server {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("casebook"));
        cmd.current_dir(dir.join(""))
            .env("NO_COLOR", "1")
            .env_remove("CASEBOOK_STORE")
            .env_remove("CASEBOOK_PROJECT")
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Backend::Postgres(url) = b {
            cmd.env("CASEBOOK_STORE", url);
        }
        let mut child = cmd.spawn().expect("start `casebook serve`");
        let log = Lines::collect(child.stderr.take().unwrap());
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        // The rest of stdout (nothing, normally) is drained so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        // `--format json`: `{"listening": URL, "store": …}`.
        let url = match serde_json::from_str::<Value>(&first) {
            Ok(said) => said["listening"].as_str().unwrap_or_default().to_owned(),
            Err(_) => first.trim_end().to_owned(),
        };
        let mut server = Server { child, url, log };
        assert!(
            server.url.starts_with("http://127.0.0.1:") && server.url.len() > "http://127.0.0.1:".len(),
            "`casebook serve` printed {first:?} as its first line; its log:\n{}",
            server.stop_now()
        );
        server
    }

    /// Kills the server at once and returns its log.
    pub(crate) fn stop_now(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log.text()
    }

    /// A key of `project` with `scope`, made with `casebook keys create` on the store.
    pub(crate) fn key(b: &Backend, dir: &Folder, project: &str, scope: &str) -> String {
        let token = ok(b.cb(dir).args(["keys", "create", "--project", project, "--scope", scope]));
        let token = token.trim_end().to_owned();
        assert!(is_token(&token), "{token:?}");
        token
    }

    /// The binary as a client of this server with `token`, in `dir`, with a home of its own.
    pub(crate) fn client(&self, dir: &Folder, token: &str) -> Command {
        let mut cmd = client(dir);
        cmd.env("CASEBOOK_URL", &self.url).env("CASEBOOK_TOKEN", token);
        cmd
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// [`cb`] with a temporary `HOME` (`dir/home`), no config folder, and nothing of the test's own
/// environment that names a server, key, project or dataset.
fn client(dir: &Folder) -> Command {
    let mut cmd = cb(dir);
    cmd.env("HOME", dir.join("home"))
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CASEBOOK_URL")
        .env_remove("CASEBOOK_TOKEN")
        .env_remove("CASEBOOK_PROJECT")
        .env_remove("CASEBOOK_DATASET")
        .timeout(Duration::from_secs(300));
    cmd
}

/// [`Backend::cb`] in the tests' project: the store as its owner sees it, without the server.
pub(crate) fn owner(b: &Backend, dir: &Folder) -> Command {
    let mut cmd = b.cb(dir);
    cmd.env_remove("CASEBOOK_PROJECT").args(["--project", PROJECT]);
    cmd
}

/// `cb_<12 hex>_<64 hex>`.
fn is_token(text: &str) -> bool {
    let parts: Vec<&str> = text.split('_').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    parts.len() == 3 && parts[0] == "cb" && hex(parts[1], 12) && hex(parts[2], 64)
}

#[track_caller]
pub(crate) fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert_eq!(out.status, Some(0), "{out:?}");
    out.stdout
}

/// The one line an environment error prints on stderr, checked to be the only one.
#[track_caller]
pub(crate) fn one_error(out: &Run, status: i32) -> &str {
    out.expect_status(status);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "not one line on stderr:\n{out:?}");
    lines[0]
}

/// The versions of a dataset in the store (`casebook log --format json`).
pub(crate) fn versions(b: &Backend, dir: &Folder, name: &str) -> Vec<Value> {
    crate::cli::log_versions(&ok(owner(b, dir).args(["log", name, "--format", "json"])))
}

/// The names of the datasets of the tests' project in the store.
fn datasets(b: &Backend, dir: &Folder) -> Vec<String> {
    ok(owner(b, dir).args(["datasets", "--format", "json"]))
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `casebook push --format json`: the server's report.
#[track_caller]
pub(crate) fn push(server: &Server, dir: &Folder, token: &str, name: &str, file: &Path) -> Value {
    let out = ok(server.client(dir, token).args(["push", "--dataset", name, "--format", "json"]).arg(file));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// A file's value: JSON, JSON lines (a list), or YAML (read by [`yaml`]).
fn value_of(path: &Path) -> Value {
    let text = fs_err::read_to_string(path).unwrap();
    match path.extension().and_then(|e| e.to_str()) {
        Some("jsonl") => Value::Array(text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()),
        Some("json") => serde_json::from_str(&text).unwrap(),
        Some("yaml" | "yml") => yaml(&text),
        other => panic!("no reader for {other:?}"),
    }
}

/// A YAML document as JSON, read with saphyr's parser (not casebook's reader): the 1.2 core
/// schema for plain scalars, anything quoted or in a block a string. Enough for the examples
/// and the corpus (no aliases, no tags).
fn yaml(text: &str) -> Value {
    use saphyr_parser::{Event, Parser, ScalarStyle};
    fn scalar(text: &str, style: ScalarStyle) -> Value {
        if style != ScalarStyle::Plain {
            return Value::String(text.to_owned());
        }
        match text {
            "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
            "true" | "True" | "TRUE" => return Value::Bool(true),
            "false" | "False" | "FALSE" => return Value::Bool(false),
            _ => {}
        }
        let number = text.strip_prefix('+').unwrap_or(text);
        let digits = number.strip_prefix('-').unwrap_or(number);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(n) = number.parse::<i64>() {
                return json!(n);
            }
        }
        let looks_real = digits.bytes().next().is_some_and(|b| b.is_ascii_digit() || b == b'.')
            && digits.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'));
        if looks_real {
            if let Ok(x) = number.parse::<f64>() {
                return json!(x);
            }
        }
        Value::String(text.to_owned())
    }
    enum Open {
        List(Vec<Value>),
        Map(serde_json::Map<String, Value>, Option<String>),
    }
    let mut stack: Vec<Open> = Vec::new();
    let mut done = None;
    for event in Parser::new_from_str(text) {
        let (event, _) = event.unwrap_or_else(|e| panic!("not YAML: {e}"));
        let value = match event {
            Event::SequenceStart(..) => {
                stack.push(Open::List(Vec::new()));
                continue;
            }
            Event::MappingStart(..) => {
                stack.push(Open::Map(serde_json::Map::new(), None));
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::List(items)) => Value::Array(items),
                _ => panic!("unbalanced YAML events"),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Map(map, None)) => Value::Object(map),
                _ => panic!("unbalanced YAML events"),
            },
            Event::Scalar(text, style, _, tag) => {
                assert!(tag.is_none(), "a tagged YAML scalar: {text}");
                scalar(&text, style)
            }
            Event::Alias(_) => panic!("a YAML alias"),
            _ => continue,
        };
        match stack.last_mut() {
            None => done = Some(value),
            Some(Open::List(items)) => items.push(value),
            Some(Open::Map(map, key)) => match key.take() {
                Some(k) => {
                    map.insert(k, value);
                }
                None => *key = Some(value.as_str().unwrap_or_else(|| panic!("a YAML key that is not text")).to_owned()),
            },
        }
    }
    done.expect("a YAML document")
}

/// Pushes `file` as `name`, pulls it into an empty folder in the dataset's own format, and
/// checks the pulled file has the file's value (and, with `bytes`, its bytes). Returns the
/// pulled file's path.
#[track_caller]
fn round_trip(server: &Server, dir: &Folder, token: &str, name: &str, file: &Path, bytes: bool) -> PathBuf {
    let report = push(server, dir, token, name, file);
    assert_eq!(report["created"], true, "{report}");
    let out = dir.join(&format!("pulled-{name}"));
    fs_err::create_dir_all(&out).unwrap();
    let said = ok(server.client(dir, token).current_dir(&out).args(["pull", "--dataset", name]));
    let ext = file.extension().unwrap().to_str().unwrap();
    let pulled = out.join(format!("{name}.{ext}"));
    let cases = report["version"]["cases"].as_u64().unwrap();
    let counted = if cases == 1 { "1 case".to_owned() } else { format!("{cases} cases") };
    assert!(said.starts_with(&format!("wrote `{name}.{ext}`: {name}@v1, {counted} (")), "{said}");
    if bytes {
        assert_eq!(fs_err::read_to_string(&pulled).unwrap(), fs_err::read_to_string(file).unwrap(), "{name}");
    }
    assert_eq!(value_of(&pulled), value_of(file), "{name} does not come back as it was pushed");
    pulled
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn corpus_files_come_back_as_they_were_pushed_embedded() {
    corpus_files_come_back_as_they_were_pushed(&Backend::Embedded);
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn corpus_files_come_back_as_they_were_pushed_postgres() {
    corpus_files_come_back_as_they_were_pushed(&Backend::postgres());
}

/// Real files of each system come back with the value they were pushed with: letta rows of
/// several turns (one file without a final newline), VoltAgent's cached shape with a `category`
/// per item, an Agent Health benchmark and mas-lab manifests named by `metadata.name`.
fn corpus_files_come_back_as_they_were_pushed(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    for (name, file) in [
        ("dataset", "letta-evals/multiturn-per-turn-grading/dataset.jsonl"),
        ("agent-creation", "letta-evals/programmatic-agent-creation/dataset.jsonl"),
        ("supervisor", "voltagent/supervisor.json"),
        ("benchmark", "agent-health/observability-agent-benchmark.json"),
        ("fact-recall-smoke", "mas-lab/labs/extensions.lab/datasets/fact-recall-smoke.yaml"),
        ("lifecycle-control-queries", "mas-lab/labs/lifecycle-control.lab/datasets/lifecycle-queries.yaml"),
    ] {
        round_trip(&server, &dir, &token, name, &corpus(file), false);
    }
}

/// Native JSON lines come back byte for byte; every other format with the same value, a mas-lab
/// manifest's seed file beside it.
fn every_format_comes_back_as_it_was_pushed(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");

    // casebook's own JSON lines, as `convert` writes them.
    let native = dir.join("incidents.jsonl");
    ok(cb(&dir)
        .arg("convert")
        .arg(example("casebook/incidents.yaml"))
        .args(["--to", "casebook", "-q", "-o"])
        .arg(&native));
    round_trip(&server, &dir, &token, "incidents", &native, true);

    // letta (no dataset name: the file's stem), VoltAgent and Agent Health.
    round_trip(&server, &dir, &token, "support", &example("letta/support.jsonl"), false);
    // letta rows of several turns, each turn with its expected answer; the last line has no
    // final newline.
    let turns = dir.file(
        "turns.jsonl",
        "{\"input\": [\"Capitale de la France ?\", \"Et de l'Allemagne ?\"], \"ground_truth\": [\"Paris\", \"Berlin\"]}\n\
         {\"input\": [\"2 + 2\", \"3 × 4\", \"10 − 7\"], \"ground_truth\": [\"4\", \"12\", \"3\"]}",
    );
    round_trip(&server, &dir, &token, "turns", &turns, false);
    round_trip(&server, &dir, &token, "geography", &example("voltagent/geography.json"), false);
    // viteval's cached shape, with an unknown per-item key, `category`.
    let cached = dir.file(
        "cached.json",
        r#"{"timestamp": "2026-01-02T03:04:05.678Z", "data": [
  {"input": "Quelle est la capitale du Japon ?", "expected": "Tōkyō", "category": "géographie"},
  {"input": "Quelle est la capitale du Japon ?", "expected": "Tokyo", "category": "geography"}
]}"#,
    );
    round_trip(&server, &dir, &token, "cached", &cached, false);
    round_trip(&server, &dir, &token, "rca", &example("agenthealth/rca.json"), false);
    // One case names a seed file (`seeds/bob.yaml`), which the server never sees: it comes back
    // beside the manifest with the content it had.
    let pulled = round_trip(&server, &dir, &token, "trip-planner", &example("maslab/trip-planner.yaml"), false);
    let seed = pulled.parent().unwrap().join("seeds/bob.yaml");
    assert_eq!(value_of(&seed), value_of(&example("maslab/seeds/bob.yaml")));
    assert_eq!(
        fs_err::read_to_string(&seed).unwrap(),
        fs_err::read_to_string(example("maslab/seeds/bob.yaml")).unwrap()
    );
}

/// Pushing what the head holds makes no version, and the content id of a push is the one a
/// local import of the same file gives.
fn the_same_content_again_makes_no_version(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    let support = example("letta/support.jsonl");
    let trips = example("maslab/trip-planner.yaml");

    let pushed = push(&server, &dir, &token, "support", &support);
    let id = pushed["version"]["id"].as_str().unwrap().to_owned();
    let again = ok(server.client(&dir, &token).args(["push", "--dataset", "support"]).arg(&support));
    assert_eq!(again, format!("up to date: support v1 on {} already has this content; no version made\n", server.url));
    let log = versions(b, &dir, "support");
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["id"], id.as_str());

    let trip_id = push(&server, &dir, &token, "trip-planner", &trips)["version"]["id"].as_str().unwrap().to_owned();
    let again = push(&server, &dir, &token, "trip-planner", &trips);
    assert_eq!((&again["created"], &again["version"]["number"]), (&json!(false), &json!(1)), "{again}");
    assert_eq!(versions(b, &dir, "trip-planner").len(), 1);

    // The same files imported into the store under the same names: no change, same versions.
    let local = ok(owner(b, &dir).args(["import", "--dataset", "support"]).arg(&support));
    assert_eq!(local, format!("no change: support v1 ({}) already has this content\n", &id[..12]));
    let local = ok(owner(b, &dir).args(["import", "--dataset", "trip-planner"]).arg(&trips));
    assert_eq!(local, format!("no change: trip-planner v1 ({}) already has this content\n", &trip_id[..12]));

    // And into a store of their own: the same content ids, whatever the path taken (the
    // manifest was sent as JSON lines with its seed file inside; here it is read from disk).
    let elsewhere = Folder::new();
    ok(cb(&elsewhere).arg("init"));
    for (name, file, id) in [("support", &support, &id), ("trip-planner", &trips, &trip_id)] {
        let out = ok(cb(&elsewhere).args(["import", "--dataset", name, "--format", "json"]).arg(file));
        let imported: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(imported["version"]["id"], id.as_str(), "{name}");
    }
}

const QA: &str = "{\"id\": \"a\", \"input\": \"What is 2+2?\", \"ground_truth\": \"4\"}\n{\"id\": \"b\", \"input\": \"Capital of France?\", \"ground_truth\": \"Paris\"}\n";

/// A push prepared on v1 that reaches the server when the head is v2 is refused whole: from the
/// command line (the push is held after reading the head while someone commits), and over HTTP.
fn a_push_on_a_moved_head_is_refused(b: &Backend) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    let qa = dir.file("qa.jsonl", QA);
    push(&server, &dir, &token, "qa", &qa);
    // A file big enough that its body is still on its way when the push is stopped.
    let big = dir.join("big.jsonl");
    ok(cb(&dir).args(["generate", "--kind", "letta-jsonl", "--cases", "20000", "-o"]).arg(&big));

    let mut pushing = std::process::Command::new(assert_cmd::cargo::cargo_bin("casebook"));
    pushing
        .current_dir(dir.join(""))
        .env("NO_COLOR", "1")
        .env("HOME", dir.join("home"))
        .env("CASEBOOK_AUTHOR", "tester")
        .env("CASEBOOK_URL", &server.url)
        .env("CASEBOOK_TOKEN", &token)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CASEBOOK_STORE")
        .env_remove("CASEBOOK_PROJECT")
        .args(["push", "--dataset", "qa"])
        .arg(&big)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let seen = server.log.count();
    let pushing = pushing.spawn().unwrap();
    let pid = Pid::from_raw(i32::try_from(pushing.id()).unwrap());
    // Once the server has told the push its head (v1), the push is held while v2 is committed
    // straight into the store; then it goes on and sends its file as built on v1.
    server.log.wait_for(seen, |l| l.contains("/datasets/qa/versions/latest") && l.contains("answered"));
    kill(pid, Signal::SIGSTOP).unwrap();
    let put = dir.file("put.jsonl", "{\"id\": \"c\", \"input\": \"2*3?\", \"ground_truth\": \"6\"}\n");
    let made = ok(owner(b, &dir).args(["put", "qa"]).arg(&put));
    assert!(made.contains("qa v2 "), "{made}");
    kill(pid, Signal::SIGCONT).unwrap();
    let out = pushing.wait_with_output().unwrap();
    let out = Run {
        status: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    assert_eq!(
        one_error(&out, 2),
        "error: dataset `qa` moved on while this push was prepared: the server's head is v2, the push was made on v1; pull it (`casebook pull --dataset qa`), merge, and push again"
    );
    assert_eq!(out.stdout, "");
    let log = versions(b, &dir, "qa");
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[1]["cases"], 3);

    // The same over HTTP: the answer says the head, and nothing is written.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (status, body) = runtime.block_on(async {
        let response = reqwest::Client::new()
            .post(format!(
                "{}/api/v1/projects/{PROJECT}/datasets/qa/import?parent=v1&format=letta&syntax=jsonl",
                server.url
            ))
            .bearer_auth(&token)
            .body(QA.replace("Paris", "Lyon"))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json::<Value>().await.unwrap())
    });
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "conflict", "{body}");
    assert_eq!(body["error"]["head"], 2, "{body}");
    assert_eq!(versions(b, &dir, "qa").len(), 2);
    let exported = ok(owner(b, &dir).args(["export", "qa", "--to", "letta", "-q"]));
    assert!(!exported.contains("Lyon") && exported.contains("Paris"), "{exported}");
}

/// A file with an error is told against the file, line and column, and never sent.
fn invalid_input_is_told_and_nothing_is_sent(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    dir.file("bad.jsonl", "{\"id\": 1, \"input\": \"fine\"}\n{\"id\": 2, \"input\": 3\n");
    let out = run(server.client(&dir, &token).args(["push", "--dataset", "bad", "bad.jsonl"]));
    out.expect_status(1);
    assert!(out.stderr.contains("unexpected end of input, expected `,` or `}`"), "{out:?}");
    assert!(out.stderr.contains(" --> bad.jsonl:2:21\n"), "{out:?}");
    assert!(out.stderr.ends_with("nothing was pushed: `bad.jsonl` has 1 error\n"), "{out:?}");
    assert_eq!(out.stdout, "");
    // Machines get the diagnostic as JSON, with the same place.
    let out = run(server.client(&dir, &token).args(["push", "--dataset", "bad", "bad.jsonl", "--format", "json"]));
    out.expect_status(1);
    let diagnostics = out.stderr_diagnostics();
    assert_eq!(diagnostics.len(), 1, "{out:?}");
    assert_eq!(
        (diagnostics[0]["file"].as_str(), diagnostics[0]["line"].as_u64(), diagnostics[0]["column"].as_u64()),
        (Some("bad.jsonl"), Some(2), Some(21)),
        "{out:?}"
    );
    assert!(datasets(b, &dir).is_empty());
    // Nor did any request reach the import.
    assert!(!server.log.text().contains("/import"), "{}", server.log.text());
}

/// `keys list` shows ids, projects and scopes, never a key; a revoked key is refused.
fn keys_are_listed_without_secrets_and_revoked_keys_stop_working(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let writer = Server::key(b, &dir, PROJECT, "write");
    let reader = ok(b.cb(&dir).args(["keys", "create", "--project", "other", "--scope", "read", "--label", "ci"]));
    let reader = reader.trim_end();
    let id_of = |token: &str| token.split('_').nth(1).unwrap().to_owned();

    let listed = ok(b.cb(&dir).args(["keys", "list", "--format", "json"]));
    assert!(!listed.contains(&writer[16..]) && !listed.contains(&reader[16..]), "{listed}");
    let keys = crate::cli::jsonl(&listed);
    let mut seen: Vec<(String, String, String, String)> = keys
        .iter()
        .map(|k| {
            assert!(k.get("token").is_none() && k.get("secret").is_none(), "{k}");
            assert_eq!(k["revoked"], Value::Null);
            let s = |f: &str| k[f].as_str().unwrap().to_owned();
            (s("id"), s("project"), s("scope"), s("label"))
        })
        .collect();
    seen.sort();
    let mut expected = vec![
        (id_of(&writer), PROJECT.to_owned(), "write".to_owned(), String::new()),
        (id_of(reader), "other".to_owned(), "read".to_owned(), "ci".to_owned()),
    ];
    expected.sort();
    assert_eq!(seen, expected);
    // `--project` keeps that project's keys.
    let other = crate::cli::jsonl(&ok(b.cb(&dir).args(["keys", "list", "--project", "other", "--format", "json"])));
    assert_eq!(other.len(), 1);
    assert_eq!(other[0]["id"], id_of(reader).as_str());

    let support = example("letta/support.jsonl");
    push(&server, &dir, &writer, "support", &support);
    let revoked = ok(b.cb(&dir).args(["keys", "revoke", &id_of(&writer)]));
    assert_eq!(revoked, format!("revoked key `{}` of project `{PROJECT}`\n", id_of(&writer)));
    let listed = crate::cli::jsonl(&ok(b.cb(&dir).args(["keys", "list", "--project", PROJECT, "--format", "json"])));
    assert!(listed[0]["revoked"].is_string(), "{listed:?}");
    for args in [&["push", "--dataset", "support"][..], &["pull", "--dataset", "support", "-o"][..]] {
        let out = run(server.client(&dir, &writer).args(args).arg(dir.join("support.jsonl")));
        let line = one_error(&out, 2);
        assert!(line.starts_with("error: the server refused the key (the API key is unknown or revoked"), "{line}");
        assert!(
            line.ends_with("run `casebook login` with a key of `casebook keys create`, or set `CASEBOOK_TOKEN`"),
            "{line}"
        );
    }
    assert!(!dir.join("support.jsonl").exists());
}

/// A key opens its own project only: another project's dataset does not exist for it.
fn a_key_sees_only_its_own_project(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let alpha = Server::key(b, &dir, "alpha", "write");
    let beta = Server::key(b, &dir, "beta", "write");
    let secrets = dir.file("secrets.jsonl", QA);
    let pushed = push(&server, &dir, &beta, "secrets", &secrets);
    let id = pushed["version"]["id"].as_str().unwrap();

    let out = run(server.client(&dir, &alpha).args(["pull", "--dataset", "secrets", "-o", "out.jsonl"]));
    let line = one_error(&out, 2);
    assert!(line.starts_with("error: no dataset named `secrets`"), "{line}");
    assert!(!line.contains("forbidden") && !line.contains("beta"), "{line}");
    let out = run(server.client(&dir, &alpha).args(["pull", "--id", &id[..12], "-o", "out.jsonl"]));
    assert_eq!(
        one_error(&out, 2),
        format!("error: no version of project `alpha` has an id starting with `{}`", &id[..12])
    );
    assert!(!dir.join("out.jsonl").exists());
    // Over HTTP too: not found, never forbidden (which would say the project exists).
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (status, body) = runtime.block_on(async {
        let response = reqwest::Client::new()
            .get(format!("{}/api/v1/projects/beta/datasets/secrets", server.url))
            .bearer_auth(&alpha)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json::<Value>().await.unwrap())
    });
    assert_eq!((status, &body["error"]["code"]), (404, &json!("not-found")), "{body}");

    // Alpha's own `secrets` is another dataset: beta's is untouched.
    let mine = dir.file("mine.jsonl", QA.replace("Paris", "Rome"));
    push(&server, &dir, &alpha, "secrets", &mine);
    ok(server.client(&dir, &beta).args(["pull", "--dataset", "secrets", "-o", "beta.jsonl"]));
    assert_eq!(value_of(&dir.join("beta.jsonl")), value_of(&secrets));
    ok(server.client(&dir, &alpha).args(["pull", "--dataset", "secrets", "-o", "alpha.jsonl"]));
    assert_eq!(value_of(&dir.join("alpha.jsonl")), value_of(&mine));
}

/// 50,000 generated cases (200,000 take over a minute of the debug build) through push and
/// pull: native JSON lines as `casebook export` writes them from the store, byte for byte, and
/// letta with the generated file's value.
fn a_large_dataset_round_trips(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    let big = dir.join("big.jsonl");
    ok(cb(&dir).args(["generate", "--kind", "letta-realistic", "--cases", "50000", "-o"]).arg(&big));
    let report = push(&server, &dir, &token, "big", &big);
    assert_eq!(report["version"]["cases"], 50_000, "{report}");

    fs_err::create_dir_all(dir.join("out")).unwrap();
    let said = ok(server.client(&dir, &token).current_dir(dir.join("out")).args([
        "pull",
        "--dataset",
        "big",
        "--to",
        "casebook",
        "-o",
        "native.jsonl",
        "--page-size",
        "3000",
    ]));
    assert_eq!(said, "wrote `native.jsonl`: big@v1, 50000 cases (casebook)\n");
    ok(owner(b, &dir).args(["export", "big", "--to", "casebook", "-q", "-o", "exported.jsonl"]));
    let pulled = fs_err::read(dir.join("out/native.jsonl")).unwrap();
    let exported = fs_err::read(dir.join("exported.jsonl")).unwrap();
    assert!(pulled == exported, "the pulled JSON lines differ from `casebook export`'s");

    let said = ok(server.client(&dir, &token).current_dir(dir.join("out")).args(["pull", "--dataset", "big"]));
    assert_eq!(said, "wrote `big.jsonl`: big@v1, 50000 cases (letta)\n");
    let (generated, pulled) =
        (fs_err::read_to_string(&big).unwrap(), fs_err::read_to_string(dir.join("out/big.jsonl")).unwrap());
    assert_eq!(generated.lines().count(), pulled.lines().count());
    for (n, (a, b)) in generated.lines().zip(pulled.lines()).enumerate() {
        let (a, b): (Value, Value) = (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap());
        assert_eq!(a, b, "line {}", n + 1);
    }
}

/// An existing file: the same content is left alone; other content is never replaced without
/// being told what to do.
#[test]
fn a_pull_over_a_different_file_asks_what_to_do() {
    let dir = Folder::new();
    let b = Backend::Embedded;
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    push(&server, &dir, &token, "support", &example("letta/support.jsonl"));
    let pull = |extra: &[&str]| run(server.client(&dir, &token).args(["pull", "--dataset", "support"]).args(extra));

    let first = pull(&[]);
    first.expect_status(0);
    assert_eq!(first.stdout, "wrote `support.jsonl`: support@v1, 4 cases (letta)\n");
    let pulled = fs_err::read(dir.join("support.jsonl")).unwrap();

    // The same content: nothing written, not even the file's time.
    let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::options().write(true).open(dir.join("support.jsonl")).unwrap().set_modified(old).unwrap();
    let again = pull(&[]);
    again.expect_status(0);
    assert_eq!(again.stdout, "up to date: `support.jsonl` is support@v1\n");
    assert_eq!(fs_err::metadata(dir.join("support.jsonl")).unwrap().modified().unwrap(), old);

    // Edited: without a terminal and without a flag, a usage error that names the flags.
    let edited = String::from_utf8(pulled.clone()).unwrap().replace("5 business days", "a week");
    dir.file("support.jsonl", &edited);
    let before = dir.entries();
    let out = pull(&[]);
    assert_eq!(
        one_error(&out, 2),
        "error: `support.jsonl` exists and differs from support@v1: pass `--overwrite` to replace it (or `--save-as-new` to write `support-remote.jsonl` beside it, or `--cancel-on-conflict` to write nothing)"
    );
    assert_eq!(fs_err::read_to_string(dir.join("support.jsonl")).unwrap(), edited);
    assert_eq!(dir.entries(), before, "a pull that wrote nothing left a file behind");

    let out = pull(&["--cancel-on-conflict"]);
    out.expect_status(1);
    assert_eq!(out.stderr, "cancelled: `support.jsonl` differs from support@v1 and was left as it is\n");
    assert_eq!(out.stdout, "");
    assert_eq!(fs_err::read_to_string(dir.join("support.jsonl")).unwrap(), edited);
    assert_eq!(dir.entries(), before);

    let out = pull(&["--save-as-new"]);
    out.expect_status(0);
    assert_eq!(out.stdout, "wrote `support-remote.jsonl`: support@v1, 4 cases (letta)\n");
    assert_eq!(fs_err::read_to_string(dir.join("support.jsonl")).unwrap(), edited);
    assert_eq!(fs_err::read(dir.join("support-remote.jsonl")).unwrap(), pulled);

    let out = pull(&["--overwrite"]);
    out.expect_status(0);
    assert_eq!(out.stdout, "overwrote `support.jsonl`: support@v1, 4 cases (letta)\n");
    assert_eq!(fs_err::read(dir.join("support.jsonl")).unwrap(), pulled);

    // The flags answer one question: two of them are a usage error.
    let out = pull(&["--overwrite", "--save-as-new"]);
    out.expect_status(2);
    assert!(out.stderr.contains("cannot be used with"), "{out:?}");
}

/// A seed file beside the output with other content is never replaced (another dataset may use
/// it): the pull says so and how to write the seeds into the cases instead.
#[test]
fn a_pull_never_replaces_a_seed_file_with_other_content() {
    let dir = Folder::new();
    let b = Backend::Embedded;
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    push(&server, &dir, &token, "trip-planner", &example("maslab/trip-planner.yaml"));
    let pull =
        |extra: &[&str]| run(server.client(&dir, &token).args(["pull", "--dataset", "trip-planner"]).args(extra));
    pull(&[]).expect_status(0);
    let manifest = fs_err::read_to_string(dir.join("trip-planner.yaml")).unwrap();
    let mine = "- source: notes\n  content: Bob moved to Turin.\n";
    dir.file("seeds/bob.yaml", mine);
    for flag in [&[][..], &["--overwrite"], &["--save-as-new"], &["--cancel-on-conflict"]] {
        let out = pull(flag);
        assert_eq!(
            one_error(&out, 2),
            "error: the seed file `seeds/bob.yaml` is already there with other content: write to another folder, or pass `--inline-seeds` to put the seeds in the cases",
            "{flag:?}"
        );
        assert_eq!(fs_err::read_to_string(dir.join("seeds/bob.yaml")).unwrap(), mine);
        assert_eq!(fs_err::read_to_string(dir.join("trip-planner.yaml")).unwrap(), manifest);
        assert!(!dir.join("trip-planner-remote.yaml").exists());
    }
    // As the message says: the seeds inside the cases, and no file beside.
    pull(&["--inline-seeds", "-o", "inline/trips.yaml"]).expect_status(0);
    assert!(!dir.join("inline/seeds").exists());
    let inline = value_of(&dir.join("inline/trips.yaml"));
    let bob = inline["spec"]["items"].as_array().unwrap().iter().find(|i| i["id"] == "warm-bob-001").unwrap();
    assert_eq!(bob["inputs"]["memory_seeds"], value_of(&example("maslab/seeds/bob.yaml")));
}

/// Older versions by number or by content id, a name that is no file name, and a spreadsheet
/// read through a column map.
#[test]
fn versions_names_and_column_maps() {
    let dir = Folder::new();
    let b = Backend::Embedded;
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    let name = "support\\qa set";
    let v1 = dir.file("v1.jsonl", QA);
    let v2 = dir.file("v2.jsonl", QA.replace("Paris", "Paris, France"));
    let first = push(&server, &dir, &token, name, &v1);
    let said = ok(server.client(&dir, &token).args(["push", "--dataset", name, "v2.jsonl", "-m", "more"]));
    assert!(said.starts_with("pushed support\\qa set v2 (") && said.ends_with(": 2 cases, +0 -0 ~1\n"), "{said}");

    // The latest, into a file named after the dataset (`\` is no file name on every system).
    ok(server.client(&dir, &token).args(["pull", "--dataset", name]));
    assert_eq!(value_of(&dir.join("support_qa set.jsonl")), value_of(&v2));
    // v1, by number and by a prefix of its content id.
    let said = ok(server.client(&dir, &token).args(["pull", "--dataset", &format!("{name}@v1"), "-o", "old.jsonl"]));
    assert_eq!(said, "wrote `old.jsonl`: support\\qa set@v1, 2 cases (letta)\n");
    assert_eq!(value_of(&dir.join("old.jsonl")), value_of(&v1));
    let id = first["version"]["id"].as_str().unwrap();
    let said = ok(server.client(&dir, &token).args(["pull", "--id", &id[..10], "-o", "by-id.jsonl"]));
    assert_eq!(said, "wrote `by-id.jsonl`: support\\qa set@v1, 2 cases (letta)\n");
    assert_eq!(fs_err::read(dir.join("by-id.jsonl")).unwrap(), fs_err::read(dir.join("old.jsonl")).unwrap());
    let out = run(server.client(&dir, &token).args(["pull", "--dataset", &format!("{name}@v9"), "-o", "v9.jsonl"]));
    assert!(one_error(&out, 2).contains("v9"), "{out:?}");
    assert!(!dir.join("v9.jsonl").exists());

    // A spreadsheet goes through its column map, and comes back through it.
    let sheet = dir.file("sheet.csv", "q,a\nWhat is 2+2?,4\n\"Capital of France, in one word?\",Paris\n");
    let map = "input=q,expected.output=a";
    ok(server.client(&dir, &token).args(["push", "--dataset", "sheet", "sheet.csv", "--map", map]));
    let out = run(server.client(&dir, &token).args(["pull", "--dataset", "sheet", "--to", "csv", "-o", "back.csv"]));
    assert_eq!(
        one_error(&out, 2),
        "error: writing the `csv` format needs a column map: `input=COLUMN,expected.output=COLUMN`"
    );
    ok(server.client(&dir, &token).args(["pull", "--dataset", "sheet", "--to", "csv", "--map", map, "-o", "back.csv"]));
    assert_eq!(fs_err::read_to_string(dir.join("back.csv")).unwrap(), fs_err::read_to_string(&sheet).unwrap());
}

/// Without `--name` and without a terminal, `pull` says what it needs instead of waiting for
/// an answer nobody can give.
#[test]
fn a_pull_without_a_name_off_a_terminal_is_a_usage_error() {
    let dir = Folder::new();
    let b = Backend::Embedded;
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "read");
    let out = run(server.client(&dir, &token).arg("pull").timeout(Duration::from_secs(60)));
    assert_eq!(one_error(&out, 2), "error: name the dataset with `--dataset NAME` (or `CASEBOOK_DATASET`)");
    assert_eq!(dir.entries(), [".casebook"]);
}

/// What stops a push or pull before it starts: each a one-line error, exit 2.
#[test]
fn environment_errors_are_one_line_and_exit_2() {
    let dir = Folder::new();
    let b = Backend::Embedded;
    let server = Server::start(&b, &dir, &[]);
    let writer = Server::key(&b, &dir, PROJECT, "write");
    let reader = Server::key(&b, &dir, PROJECT, "read");
    let support = example("letta/support.jsonl");

    // No server there.
    let out = run(client(&dir)
        .env("CASEBOOK_URL", "http://127.0.0.1:1")
        .env("CASEBOOK_TOKEN", &writer)
        .args(["push", "--dataset", "support"])
        .arg(&support));
    let line = one_error(&out, 2);
    assert!(line.starts_with("error: cannot reach the server at http://127.0.0.1:1: "), "{line}");
    assert!(
        line.ends_with("is `casebook serve` running there? (`CASEBOOK_URL` or `casebook login URL` names it)"),
        "{line}"
    );

    // A key the server does not know, well formed or not.
    for bad in ["cb_000000000000_0000000000000000000000000000000000000000000000000000000000000000", "nonsense"] {
        let out = run(server.client(&dir, bad).args(["push", "--dataset", "support"]).arg(&support));
        let line = one_error(&out, 2);
        assert!(line.starts_with("error: the server refused the key (the API key is unknown or revoked"), "{line}");
    }

    // No server or key named at all.
    let out = run(client(&dir).args(["pull", "--dataset", "support"]));
    assert_eq!(one_error(&out, 2), "error: no server: set `CASEBOOK_URL`, or run `casebook login URL`");
    let out = run(client(&dir).env("CASEBOOK_URL", &server.url).args(["pull", "--dataset", "support"]));
    assert_eq!(
        one_error(&out, 2),
        format!("error: no API key for {0}: set `CASEBOOK_TOKEN`, or run `casebook login {0}`", server.url)
    );

    // A read key may not push.
    let out = run(server.client(&dir, &reader).args(["push", "--dataset", "support"]).arg(&support));
    let id = reader.split('_').nth(1).unwrap();
    assert_eq!(
        one_error(&out, 2),
        format!("error: the API key `{id}` may only read: writing needs a key made with `--scope write`")
    );
    assert!(datasets(&b, &dir).is_empty());

    // A server that takes 1,000 bytes at most, and a file of about 4,000.
    let small = Server::serve(&b, &dir, &["--max-body", "1000"]);
    let items: Vec<String> =
        (0..40).map(|i| format!(r#"{{"input": "question nº {i} — über lang?", "expected": "réponse {i}"}}"#)).collect();
    let history = dir.file("history.json", format!(r#"{{"name": "history", "data": [{}]}}"#, items.join(",\n")));
    let out = run(small.client(&dir, &writer).args(["push", "--dataset", "history"]).arg(&history));
    assert_eq!(
        one_error(&out, 2),
        "error: the server refused the push as too large: the body is larger than this server takes (1000 bytes): split the file, or raise `--max-body`"
    );
    assert!(datasets(&b, &dir).is_empty());

    // `keys create` must be told the project.
    let out = run(cb(&dir).env_remove("CASEBOOK_PROJECT").args(["keys", "create", "--scope", "read"]));
    assert_eq!(
        one_error(&out, 2),
        "error: name the project the key opens: `casebook keys create --project NAME --scope read|write`"
    );
}

/// `login --token-stdin` checks the key with the server and saves it for the user alone; later
/// commands need neither variable.
#[test]
fn login_saves_the_key_for_the_user_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Folder::new();
    let b = Backend::Embedded;
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    let saved = dir.join("home/.config/casebook/credentials.json");

    // A wrong key: refused, nothing saved.
    let wrong = "cb_000000000000_0000000000000000000000000000000000000000000000000000000000000000\n";
    let out = run(client(&dir).args(["login", &server.url, "--token-stdin"]).write_stdin(wrong));
    assert!(one_error(&out, 2).starts_with("error: the server refused the key"), "{out:?}");
    assert!(!dir.join("home/.config/casebook").exists());

    let out = ok(client(&dir).args(["login", &server.url, "--token-stdin"]).write_stdin(format!("{token}\n")));
    assert_eq!(
        out,
        format!("logged in to {} (project `{PROJECT}`); the key is saved in {}\n", server.url, saved.display())
    );
    let mode = fs_err::metadata(&saved).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    let credentials: Value = serde_json::from_str(&fs_err::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(credentials, json!({"url": server.url, "token": token}));

    // Push and pull with what was saved.
    let said = ok(client(&dir).args(["push", "--dataset", "support"]).arg(example("letta/support.jsonl")));
    assert!(
        said.starts_with("pushed support v1 (") && said.ends_with(&format!(") to {}: 4 cases, +4 -0 ~0\n", server.url)),
        "{said}"
    );
    ok(client(&dir).args(["pull", "--dataset", "support"]));
    assert_eq!(value_of(&dir.join("support.jsonl")), value_of(&example("letta/support.jsonl")));
    // The variables win over the saved key.
    let out =
        run(client(&dir).env("CASEBOOK_TOKEN", "nonsense").args(["pull", "--dataset", "support", "-o", "x.jsonl"]));
    assert!(one_error(&out, 2).starts_with("error: the server refused the key"), "{out:?}");

    // `XDG_CONFIG_HOME` says where the file goes.
    let config = dir.join("config");
    ok(client(&dir)
        .env("XDG_CONFIG_HOME", &config)
        .args(["login", &server.url, "--token-stdin"])
        .write_stdin(token.clone()));
    let mode = fs_err::metadata(config.join("casebook/credentials.json")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
}

/// `logout` forgets what `login` saved, and says which server; with a URL, only that server's
/// key; with nothing saved, it says so and succeeds.
#[test]
fn logout_forgets_the_saved_key() {
    let dir = Folder::new();
    let b = Backend::Embedded;
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    let saved = dir.join("home/.config/casebook/credentials.json");
    ok(client(&dir).args(["login", &server.url, "--token-stdin"]).write_stdin(format!("{token}\n")));

    // Another server's address: nothing removed.
    let out = ok(client(&dir).args(["logout", "http://127.0.0.1:1"]));
    assert_eq!(
        out,
        format!(
            "no key saved for http://127.0.0.1:1: the one saved is for {}; nothing removed (`casebook logout` forgets it)\n",
            server.url
        )
    );
    assert!(saved.exists());

    let out = ok(client(&dir).args(["logout", &format!("{}/", server.url)]));
    assert_eq!(out, format!("logged out of {}: removed {}\n", server.url, saved.display()));
    assert!(!saved.exists());
    // Push now needs a server again.
    let out = run(client(&dir).arg("push").arg(example("letta/support.jsonl")).args(["--dataset", "support"]));
    assert_eq!(one_error(&out, 2), "error: no server: set `CASEBOOK_URL`, or run `casebook login URL`");

    // Nothing saved: said, exit 0.
    let out = ok(client(&dir).arg("logout"));
    assert_eq!(out, format!("not logged in: no key is saved in {}\n", saved.display()));
    let out = ok(client(&dir).args(["logout", "--format", "json"]));
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), json!({"forgot": null}));
}

/// With `--format json` the server says where it listens and what it serves as JSON, and logs
/// JSON lines.
#[test]
fn the_server_speaks_json_to_programs() {
    let dir = Folder::new();
    let b = Backend::Embedded;
    ok(b.cb(&dir).arg("init"));
    let server = Server::serve(&b, &dir, &["--format", "json"]);
    let token = Server::key(&b, &dir, PROJECT, "read");
    let out = run(server.client(&dir, &token).args(["pull", "--dataset", "nothing-here", "-o", "x.jsonl"]));
    assert!(one_error(&out, 2).starts_with("error: no dataset named `nothing-here`"), "{out:?}");
    let line = server.log.wait_for(0, |l| l.contains("\"serving\""));
    let line: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(line["fields"]["url"], server.url.as_str());
    let store = dir.join(".casebook/store.db");
    assert_eq!(line["fields"]["store"], store.display().to_string().as_str());
}

/// SIGTERM stops the server after the requests in flight, with exit status 0.
#[test]
fn the_server_stops_on_sigterm() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let dir = Folder::new();
    let mut server = Server::start(&Backend::Embedded, &dir, &[]);
    kill(Pid::from_raw(i32::try_from(server.child.id()).unwrap()), Signal::SIGTERM).unwrap();
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    server.log.wait_for(0, |l| l.contains("stopped: every request in flight was answered"));
}

const DOWN: &[u8] = b"\x1b[B";
const UP: &[u8] = b"\x1b[A";
const ENTER: &[u8] = b"\r";

/// On a terminal (a pseudo-terminal made by util-linux's `script`), with `keys` typed in.
fn on_terminal(server: &Server, dir: &Folder, token: &str, args: &str, keys: &[&[u8]]) -> (Option<i32>, String) {
    use std::io::{Read, Write};
    let bin = assert_cmd::cargo::cargo_bin("casebook");
    let mut child = std::process::Command::new("script")
        .args(["-qec", &format!("'{}' {args}", bin.display()), "/dev/null"])
        .current_dir(dir.join(""))
        .env("HOME", dir.join("home"))
        .env("NO_COLOR", "1")
        .env("CASEBOOK_URL", &server.url)
        .env("CASEBOOK_TOKEN", token)
        .env_remove("CASEBOOK_STORE")
        .env_remove("CASEBOOK_DATASET")
        .env_remove("CASEBOOK_PROJECT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs");
    let mut stdin = child.stdin.take().unwrap();
    for key in keys {
        // One key at a time, as a person types: each answers the prompt that is up.
        std::thread::sleep(Duration::from_millis(700));
        stdin.write_all(key).unwrap();
        stdin.flush().unwrap();
    }
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut text = String::new();
            child.stdout.take().unwrap().read_to_string(&mut text).unwrap();
            return (status.code(), text);
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the prompt did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// On a terminal, `pull` without a name asks for the dataset (with its versions and cases) and
/// then the version (newest first); over a file that differs, it asks what to do, and `cancel`
/// is the default.
#[test]
fn a_pull_on_a_terminal_asks_for_what_it_was_not_told() {
    let dir = Folder::new();
    let b = Backend::Embedded;
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    push(&server, &dir, &token, "support", &example("letta/support.jsonl"));
    let edited = dir.file("edited.jsonl", "{\"input\": \"only one\", \"ground_truth\": \"x\"}\n");
    push(&server, &dir, &token, "support", &edited);
    push(&server, &dir, &token, "geography", &example("voltagent/geography.json"));

    // Down to the second dataset (`support`), then down to its second newest version (v1).
    let (status, screen) = on_terminal(&server, &dir, &token, "pull", &[DOWN, ENTER, DOWN, ENTER]);
    assert_eq!(status, Some(0), "{screen}");
    assert!(screen.contains("geography  (1 version, 2 cases)"), "{screen}");
    assert!(screen.contains("support  (2 versions, 1 case)"), "{screen}");
    assert!(screen.contains("v2  1 case "), "{screen}");
    assert!(screen.contains("wrote `support.jsonl`: support@v1, 4 cases (letta)"), "{screen}");
    assert_eq!(value_of(&dir.join("support.jsonl")), value_of(&example("letta/support.jsonl")));

    // The file differs from v2: Enter takes the default answer, cancel.
    let (status, screen) = on_terminal(&server, &dir, &token, "pull --dataset support", &[ENTER]);
    assert_eq!(status, Some(1), "{screen}");
    assert!(screen.contains("differs from support@v2"), "{screen}");
    assert_eq!(value_of(&dir.join("support.jsonl")), value_of(&example("letta/support.jsonl")));
    // Up twice from `cancel`: overwrite.
    let (status, screen) = on_terminal(&server, &dir, &token, "pull --dataset support", &[UP, UP, ENTER]);
    assert_eq!(status, Some(0), "{screen}");
    assert!(screen.contains("overwrote `support.jsonl`: support@v2"), "{screen}");
}

/// With `CASEBOOK_URL` and `CASEBOOK_TOKEN` set, in a folder under a project that has a
/// `.casebook/` of its own: `tag`, `datasets` and `log` work on the server and say so; a command
/// that cannot work on a server refuses (exit 2, naming `CASEBOOK_URL` and `--store`) instead of
/// acting on the store found above; `--store` names that store explicitly.
fn with_a_server_named_commands_act_there_not_on_a_store_found_here(b: &Backend) {
    let srv = Folder::new();
    let server = Server::start(b, &srv, &[]);
    let token = Server::key(b, &srv, PROJECT, "write");
    let v1 = srv.file("support.jsonl", "{\"id\": \"a\", \"input\": \"¿qué hora es?\"}\n");
    push(&server, &srv, &token, "support", &v1);
    let v2 = srv
        .file("support2.jsonl", "{\"id\": \"a\", \"input\": \"¿qué hora es?\"}\n{\"id\": \"b\", \"input\": \"x\"}\n");
    push(&server, &srv, &token, "support", &v2);

    // The user's project: a store of its own with a dataset of the same name, one version.
    let home = Folder::new();
    ok(cb(&home).arg("init"));
    let local = home.file("local.jsonl", "{\"id\": \"z\", \"input\": \"local\"}\n");
    ok(cb(&home).args(["import", "--dataset", "support"]).arg(&local));
    let work = home.join("work");
    fs_err::create_dir_all(&work).unwrap();
    let user = || {
        let mut cmd = server.client(&home, &token);
        cmd.current_dir(&work);
        cmd
    };
    let local_log = || ok(cb(&home).args(["log", "support"]));
    let before = local_log();
    let on_server = format!("(on the server at {}, project `{PROJECT}`)\n", server.url);

    let out = run(user().args(["tag", "support@v1", "prod"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("support@prod is v1 ("), "{out:?}");
    assert_eq!(out.stderr, on_server);
    assert!(ok(owner(b, &srv).args(["log", "support"])).contains("prod: v1"), "the server's tag moved");
    let out = run(user().args(["tag", "--delete", "support", "prod"]));
    out.expect_status(0);
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str()),
        ("deleted tag support@prod (it named v1)\n", on_server.as_str())
    );
    assert!(ok(owner(b, &srv).args(["log", "support"])).contains("prod: v1 → deleted"), "the server's tag went");
    ok(user().args(["tag", "support@v1", "prod"]));
    // Again on the version it names: the server says nothing changed.
    let out = run(user().args(["tag", "support@v1", "prod"]));
    out.expect_status(0);
    assert!(
        out.stdout.starts_with("support@prod is already v1 (") && out.stdout.ends_with("): nothing changed\n"),
        "{out:?}"
    );

    let out = run(user().args(["datasets", "--format", "json"]));
    out.expect_status(0);
    let listed: Vec<Value> = out.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(listed, [json!({"name": "support", "head": 2, "cases": 2, "description": null})]);
    let out = run(user().arg("datasets"));
    assert_eq!(
        (out.stdout.lines().nth(1), out.stderr.as_str()),
        (Some("support     v2          2"), on_server.as_str())
    );

    let out = run(user().args(["log", "support"]));
    out.expect_status(0);
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with('v')).count(), 2, "{out:?}");
    assert!(out.stdout.contains("prod: v1"), "{out:?}");
    assert_eq!(out.stderr, on_server);

    // What cannot work on a server says so, and acts on nothing.
    for args in [&["rm", "support", "z"][..], &["import", "../local.jsonl", "--dataset", "support"]] {
        let out = run(user().args(args));
        let line = one_error(&out, 2);
        assert_eq!(
            line,
            format!(
                "error: `CASEBOOK_URL` is set, and `casebook {}` does not work on a server: to run it on a store here, \
                 name it with `--store PATH` (`--store .` for the `.casebook/` of this folder), or unset `CASEBOOK_URL`",
                args[0]
            ),
            "{args:?}"
        );
    }
    assert_eq!(local_log(), before, "the store found above is untouched");

    // Named, the store here is the one acted on.
    let out = run(user().args(["tag", "support@v1", "local", "--store", ".."]));
    out.expect_status(0);
    assert!(local_log().contains("local: v1"), "{out:?}");
    assert!(!ok(owner(b, &srv).args(["log", "support"])).contains("local: v1"));
}

/// `pull --to` a format without `review` never turns a draft expectation (`review: draft`) into
/// confirmed ground truth: refused with `E-unconfirmed-drafts` naming the case, exit 1, nothing
/// written (no file, no record); native JSON keeps it a draft.
#[test]
fn a_pull_to_a_format_without_review_does_not_confirm_drafts() {
    let b = Backend::Embedded;
    let dir = Folder::new();
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    let file = dir.file(
        "setup/qa.jsonl",
        "{\"id\": \"ñ-1\", \"input\": \"¿2+2?\", \"expected\": {\"output\": \"4\"}, \"review\": \"draft\"}\n\
         {\"id\": \"b\", \"input\": \"3+3?\", \"expected\": {\"output\": \"6\"}}\n",
    );
    push(&server, &dir, &token, "qa", &file);
    let out = run(server.client(&dir, &token).args(["pull", "--dataset", "qa", "--to", "letta"]));
    out.expect_status(1);
    assert!(
        out.stderr.contains(
            "error[E-unconfirmed-drafts]: 1 case with draft expectations (`review: draft`) would be written as \
             confirmed, `letta` having no place for `review`: `ñ-1`\n--> qa@v1"
        ),
        "{out:?}"
    );
    assert!(out.stderr.contains("pass `--confirm-drafts`"), "{out:?}");
    assert!(out.stderr.ends_with("nothing was written: qa@v1 cannot be written as `letta` (1 errors)\n"), "{out:?}");
    assert!(!dir.join("qa.jsonl").exists() && !dir.join(".qa.jsonl.casebook-pull").exists());

    // `--confirm-drafts`: written as confirmed (the `review` it leaves out is what was asked).
    let out = run(server.client(&dir, &token).args(["pull", "--dataset", "qa", "--to", "letta", "--confirm-drafts"]));
    out.expect_status(0);
    let written = fs_err::read_to_string(dir.join("qa.jsonl")).unwrap();
    assert!(written.contains("\"ground_truth\":\"4\"") || written.contains("\"ground_truth\": \"4\""), "{written}");

    let out = run(server.client(&dir, &token).args(["pull", "--dataset", "qa", "-o", "native.jsonl"]));
    out.expect_status(0);
    assert!(fs_err::read_to_string(dir.join("native.jsonl")).unwrap().contains("\"review\":\"draft\""));
}
