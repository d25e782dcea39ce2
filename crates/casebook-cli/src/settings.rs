//! Global settings resolved from arguments and the environment (`NO_COLOR`, terminals).

use std::io::IsTerminal;
use std::path::PathBuf;

use casebook_filter::{Filter, FilterError};
use casebook_store::Select;

use crate::args::{ColorChoice, Command, GlobalArgs, OutputFormat, SelectArgs};

#[derive(Debug, Clone)]
pub struct Global {
    /// `--format json`.
    pub json: bool,
    /// `--format` as given (`results` prints its report formats too).
    pub format: OutputFormat,
    pub quiet: bool,
    /// Colour on stdout / stderr.
    pub color_stdout: bool,
    pub color_stderr: bool,
    /// Progress bars: only on a terminal, never with `--quiet`.
    pub progress: bool,
    /// `--store` or `CASEBOOK_STORE`.
    pub store: Option<PathBuf>,
    /// `CASEBOOK_URL` is set: `run`, `results` and `compare` keep and read runs on that server,
    /// `datasets`, `log`, `tag`, `show`, `diff`, `history`, `export` and `cases NAME@REF` work
    /// there (`source.rs`), and other commands that would open the store here refuse to unless
    /// it is named (see `stores::location`).
    pub server: bool,
    /// The command's name (`tag`), for messages.
    pub command: String,
    /// `--project` or `CASEBOOK_PROJECT`, if given.
    pub project: Option<String>,
    /// Who commits: `CASEBOOK_AUTHOR`, else the login name.
    pub author: String,
    /// When: `CASEBOOK_TIME` (RFC 3339, for reproducible runs and tests), else now.
    pub time: String,
}

impl Global {
    pub fn resolve(args: &GlobalArgs, command: String) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = |terminal: bool| match args.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => terminal && !no_color,
        };
        let stderr_tty = std::io::stderr().is_terminal();
        Self {
            json: args.output_format == OutputFormat::Json,
            format: args.output_format,
            quiet: args.quiet,
            color_stdout: color(std::io::stdout().is_terminal()),
            color_stderr: color(stderr_tty),
            progress: stderr_tty && !args.quiet,
            store: args.store.clone(),
            server: std::env::var_os("CASEBOOK_URL").is_some_and(|v| !v.is_empty()),
            command,
            project: args.project.clone(),
            author: std::env::var("CASEBOOK_AUTHOR")
                .or_else(|_| std::env::var("USER"))
                .or_else(|_| std::env::var("LOGNAME"))
                .ok()
                .filter(|name| !name.is_empty())
                .or_else(login_name)
                .unwrap_or_else(|| "unknown".into()),
            time: now(),
        }
    }
}

/// The value of an option spelled `new` that was formerly spelled `old`: the new spelling's
/// value, else the old one's, which says on stderr (one line) that it is deprecated. Every
/// deprecated spelling goes through here (see [`resolve_renamed`]).
pub fn renamed<T>(new_value: Option<T>, old_value: Option<T>, old: &str, new: &str) -> Option<T> {
    if old_value.is_some() {
        stderr!("warning: {old} is deprecated; use {new}");
    }
    new_value.or(old_value)
}

/// Moves the values given under deprecated spellings to the options that replace them (each
/// saying so once, with [`renamed`]), so commands read only the new spellings.
pub fn resolve_renamed(command: &mut Command) {
    fn select(args: &mut SelectArgs) {
        args.limit = renamed(args.limit, args.max_samples.take(), "--max-samples", "--limit");
    }
    match command {
        Command::Push(a) => {
            a.dataset = renamed(a.dataset.take(), a.name.take(), "--name", "--dataset");
            a.file = renamed(a.file.take(), a.file_option.take(), "--file", "`casebook push FILE`");
        }
        Command::Pull(a) => {
            a.dataset = renamed(a.dataset.take(), a.name.take(), "--name", "--dataset");
            if let Some(reference) = renamed(None, a.version.take(), "--version", "--dataset NAME@REF") {
                // `--version` was the REF of `NAME@REF`; with `--id` it was ignored, as before.
                if let Some(name) = a.dataset.as_mut().filter(|name| !name.contains('@')) {
                    name.push('@');
                    name.push_str(&reference);
                } else if a.dataset.is_none() && a.id.is_none() {
                    a.version = Some(reference);
                }
            }
        }
        Command::Run(a) => {
            a.select.filter = renamed(a.select.filter.take(), a.only.take(), "--only", "--where");
            select(&mut a.select);
        }
        Command::Results(a) => {
            a.report = renamed(None, a.report.take(), "--as", "--format");
        }
        Command::Validate(a) => select(&mut a.select),
        Command::Cases(a) => select(&mut a.select),
        Command::Export(a) => select(&mut a.select),
        Command::Capture(a) => select(&mut a.select),
        Command::Review(a) => select(&mut a.select),
        _ => {}
    }
}

/// The cases `--where`, `--tag` and `--limit` select.
pub fn selection(args: &SelectArgs) -> anyhow::Result<Select> {
    let mut filter = match &args.filter {
        Some(text) => Some(Filter::parse(text).map_err(|err| expression_error("--where", text, &err))?),
        None => None,
    };
    if !args.tags.is_empty() {
        let tags = Filter::tags(&args.tags);
        filter = Some(match filter {
            Some(f) => f.and(tags),
            None => tags,
        });
    }
    Ok(Select { filter, limit: args.limit })
}

/// A usage error in the expression given to `option`, with the expression and a caret under
/// the problem.
pub fn expression_error(option: &str, text: &str, err: &FilterError) -> anyhow::Error {
    let rendered = err.render(text);
    let rendered = rendered.strip_prefix("error: ").unwrap_or(&rendered);
    anyhow::anyhow!("invalid `{option}`: {rendered}")
}

/// `CASEBOOK_TIME` (RFC 3339, for reproducible runs and tests), else the time now.
pub fn now() -> String {
    std::env::var("CASEBOOK_TIME").unwrap_or_else(|_| format!("{:.0}", jiff::Timestamp::now()))
}

/// The name the system's user database gives this process's user (as `id -un` does), for when
/// the environment names nobody (cron, containers, CI).
fn login_name() -> Option<String> {
    let status = fs_err::read_to_string("/proc/self/status").ok()?;
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.to_owned();
    let passwd = fs_err::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)? == uid).then(|| name.to_owned())
    })
}

impl Global {
    /// Whether the command works on the server `CASEBOOK_URL` names: it is set, and no store
    /// is named (`--store` or `CASEBOOK_STORE` always means that store).
    pub fn on_server(&self) -> bool {
        self.server && self.store.is_none()
    }
}
