//! Running the `casebook` binary on files in a temporary folder, and reading what it prints:
//! exit status, JSON diagnostics (one object a line) and their locations.

use std::fmt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// A temporary folder holding a test's dataset files.
pub struct Folder {
    dir: tempfile::TempDir,
}

impl Folder {
    pub fn new() -> Self {
        Self { dir: tempfile::tempdir().expect("create a temporary folder") }
    }

    /// Writes `contents` to `name` (folders created as needed) and returns its path.
    pub fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent).expect("create the folder");
        }
        fs_err::write(&path, contents).expect("write the file");
        path
    }

    /// The path `name` would have in the folder (the file may not exist).
    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Names of the entries of the folder, sorted.
    pub fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = fs_err::read_dir(self.dir.path())
            .expect("list the folder")
            .map(|e| e.expect("read a folder entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// `text` with the folder's path replaced by `[TMP]`, for snapshots.
    pub fn normalise(&self, text: &str) -> String {
        text.replace(&self.dir.path().display().to_string(), "[TMP]")
    }
}

/// The binary, with colours off and no stray colour settings from the environment.
pub fn casebook() -> Command {
    let mut cmd = Command::cargo_bin("casebook").expect("the casebook binary is built");
    cmd.env("NO_COLOR", "1").env_remove("CLICOLOR_FORCE").env_remove("CLICOLOR");
    cmd
}

/// The binary working in `dir`, with a fixed author and clock, and no store or server named
/// from the test's own environment.
pub fn cb(dir: &Folder) -> Command {
    let mut cmd = casebook();
    cmd.current_dir(dir.join("")).env("CASEBOOK_AUTHOR", "tester").env("CASEBOOK_TIME", "2026-11-23T10:00:00Z");
    cmd.env_remove("CASEBOOK_STORE").env_remove("CASEBOOK_URL").env_remove("CASEBOOK_TOKEN");
    cmd
}

/// What one run of the binary did.
pub struct Run {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exit status {:?}\n--- stdout\n{}\n--- stderr\n{}", self.status, self.stdout, self.stderr)
    }
}

pub fn run(cmd: &mut Command) -> Run {
    let out = cmd.output().expect("run casebook");
    Run {
        status: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// `casebook validate --format json FILE`.
pub fn validate(file: &Path) -> Run {
    run(casebook().arg("validate").arg("--format").arg("json").arg(file))
}

impl Run {
    /// Checks the exit status, showing everything the run printed if it is not `code`.
    #[track_caller]
    pub fn expect_status(&self, code: i32) -> &Self {
        assert_eq!(self.status, Some(code), "unexpected exit status:\n{self:?}");
        self
    }

    /// Every line of stdout as a JSON object (`--format json` diagnostics).
    #[track_caller]
    pub fn diagnostics(&self) -> Vec<Value> {
        json_lines(&self.stdout, self)
    }

    /// The lines of stderr that are JSON objects (convert reports on stderr, its data is on stdout).
    #[track_caller]
    pub fn stderr_diagnostics(&self) -> Vec<Value> {
        let lines: String =
            self.stderr.lines().filter(|l| l.starts_with('{')).map(|l| format!("{l}\n")).collect::<String>();
        json_lines(&lines, self)
    }

    /// Code, line, column and pointer of each stdout diagnostic, in order.
    #[track_caller]
    pub fn locations(&self) -> Vec<Loc> {
        self.diagnostics().iter().map(Loc::of).collect()
    }
}

#[track_caller]
fn json_lines(text: &str, run: &Run) -> Vec<Value> {
    text.lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}\n{run:?}"));
            assert!(value.is_object(), "not a JSON object: {line}");
            value
        })
        .collect()
}

/// Where a diagnostic says a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loc {
    pub code: String,
    pub line: u64,
    pub column: u64,
    pub pointer: String,
}

impl Loc {
    #[track_caller]
    pub fn of(d: &Value) -> Loc {
        Loc {
            code: d["code"].as_str().unwrap_or_else(|| panic!("no code in {d}")).to_owned(),
            line: d["line"].as_u64().unwrap_or_else(|| panic!("no line in {d}")),
            column: d["column"].as_u64().unwrap_or_else(|| panic!("no column in {d}")),
            pointer: d["pointer"].as_str().unwrap_or_else(|| panic!("no pointer in {d}")).to_owned(),
        }
    }
}

pub fn at(code: &str, line: u64, column: u64, pointer: &str) -> Loc {
    Loc { code: code.to_owned(), line, column, pointer: pointer.to_owned() }
}

/// The message of a diagnostic.
pub fn message(d: &Value) -> &str {
    d["message"].as_str().unwrap_or_default()
}

/// Parses JSON Lines output (native casebook JSONL).
pub fn jsonl(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}"))).collect()
}

/// The versions in `casebook log --format json` output (one object a line, each with its
/// `kind`), oldest first.
#[track_caller]
pub fn log_versions(stdout: &str) -> Vec<Value> {
    jsonl(stdout).into_iter().filter(|line| line["kind"] == "version").collect()
}

/// `casebook convert FILE --to casebook` (native JSONL on stdout): the run and the cases,
/// without the `{"$dataset": ...}` header record.
#[track_caller]
pub fn to_native(file: &Path) -> (Run, Vec<Value>) {
    let run = run(casebook().arg("convert").arg(file).args(["--to", "casebook", "--format", "json"]));
    run.expect_status(0);
    let mut cases = jsonl(&run.stdout);
    cases.retain(|row| row.get("$dataset").is_none());
    (run, cases)
}

/// The `id` of each case.
pub fn ids(cases: &[Value]) -> Vec<&str> {
    cases.iter().map(|c| c["id"].as_str().unwrap_or_else(|| panic!("no string id in {c}"))).collect()
}

/// A new, empty database on the PostgreSQL server the test command starts
/// (`CASEBOOK_TEST_POSTGRES`); its URL. Without the server the test fails: it is never skipped.
pub fn postgres_database() -> String {
    use sqlx::Connection;
    static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = std::env::var("CASEBOOK_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!("CASEBOOK_TEST_POSTGRES is not set: run the tests with `scripts/test.sh`, which starts PostgreSQL")
    });
    let (server, _) = base.rsplit_once('/').expect("a URL with a database");
    let name = format!(
        "cli_{}_{}_{}",
        std::process::id(),
        COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos())
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let mut admin = sqlx::PgConnection::connect(&base).await.expect("the test server answers");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("a new database");
    });
    format!("{server}/{name}")
}

/// Where a test keeps its store: the embedded one in the test's folder, or a fresh database on
/// the PostgreSQL server the test command starts.
pub enum Backend {
    Embedded,
    Postgres(String),
}

impl Backend {
    pub fn postgres() -> Self {
        Backend::Postgres(postgres_database())
    }

    /// [`cb`] on this store.
    pub fn cb(&self, dir: &Folder) -> Command {
        let mut cmd = cb(dir);
        if let Backend::Postgres(url) = self {
            cmd.env("CASEBOOK_STORE", url);
        }
        cmd
    }
}

/// Each test function (taking a `&Backend`) as a test on each store.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(#[test]
            fn $name() {
                super::$name(&$crate::cli::Backend::Embedded);
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                super::$name(&$crate::cli::Backend::postgres());
            })*
        }
    };
}
