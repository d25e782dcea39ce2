//! Command-line definitions (clap). Raw arguments only; `settings` resolves them.

use std::path::PathBuf;

use casebook_formats::{ColumnMap, Format, Syntax};
use casebook_model::Code;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "casebook",
    version,
    about = "The system of record for agent-evaluation datasets",
    long_about = None,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line as clap reads it and `--help` shows it, with the values of the
    /// environment variables that may hold a password (`CASEBOOK_STORE`, `CASEBOOK_URL`) masked
    /// as every message masks them: clap would print them whole.
    pub fn definition() -> clap::Command {
        Self::command()
            .mut_arg("store", |arg| mask_env(arg, "CASEBOOK_STORE"))
            .mut_subcommand("login", |login| login.mut_arg("url", |arg| mask_env(arg, "CASEBOOK_URL")))
    }

    /// Parses the process's arguments against [`Cli::definition`]; a usage error exits 2. With
    /// the command's name (`tag`).
    pub fn parse_masked() -> (Self, String) {
        let matches = Self::definition().get_matches();
        let name = matches.subcommand_name().unwrap_or_default().to_owned();
        (Self::from_arg_matches(&matches).unwrap_or_else(|err| err.exit()), name)
    }
}

/// `arg` with clap's `[env: NAME=VALUE]` replaced by one whose value has its secrets masked.
fn mask_env(arg: clap::Arg, name: &str) -> clap::Arg {
    let shown = match std::env::var(name) {
        Ok(value) if !value.is_empty() => format!("[env: {name}={}]", casebook_store::redact(&value)),
        _ => format!("[env: {name}]"),
    };
    let help = arg.get_help().map_or_else(String::new, |h| format!("{h} "));
    arg.hide_env(true).help(format!("{help}{shown}"))
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// How the command's answer is printed on standard output: human or json (`results` also
    /// markdown, junit, html or jsonl)
    #[arg(long = "format", id = "output_format", value_name = "FORMAT", global = true, value_enum, default_value_t = OutputFormat::Human)]
    pub output_format: OutputFormat,
    /// No progress bars or summaries on stderr
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Colour: auto (on a terminal, unless NO_COLOR is set), always, never
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// The store folder (default: the nearest `.casebook/` at or above the working directory)
    #[arg(long, global = true, env = "CASEBOOK_STORE", value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// The project of the store to work in (default: `default`); a shared store keeps each
    /// project's datasets and runs apart
    #[arg(long, global = true, env = "CASEBOOK_PROJECT", value_name = "NAME")]
    pub project: Option<String>,
}

/// What `--format` asks for. Commands print `human` or `json`; `results` prints the report
/// formats too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    // No doc comments on the values: clap would list them one a line with their help, and lay
    // every command's options out on two lines each.
    #[value(alias = "text")]
    Human,
    Json,
    Markdown,
    Junit,
    Html,
    Jsonl,
}

impl OutputFormat {
    /// The report `results` prints for this format.
    pub fn report(self) -> ReportFormat {
        match self {
            Self::Human => ReportFormat::Human,
            Self::Json => ReportFormat::Json,
            Self::Markdown => ReportFormat::Markdown,
            Self::Junit => ReportFormat::Junit,
            Self::Html => ReportFormat::Html,
            Self::Jsonl => ReportFormat::Jsonl,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Report every problem in dataset files (exit 1 if any error)
    Validate(ValidateArgs),
    /// Hygiene warnings: duplicates, conflicting or leaked ground truth, label typos, weak labels
    Lint(LintArgs),
    /// Convert a dataset from one format to another, streaming
    Convert(ConvertArgs),
    /// Summarise a dataset: format, cases, fields, labels, turns
    Inspect(InspectArgs),
    /// Print the JSON Schema of the native casebook format, for editors
    Schema(SchemaArgs),
    /// Create a store (`.casebook/`) in the working directory
    Init(InitArgs),
    /// Store a file as a dataset: its first version, or its next one
    Import(ImportArgs),
    /// Make a file's cases the next version of a dataset
    Commit(CommitArgs),
    /// Add or replace a file's cases in a dataset; all others stay
    Put(PutArgs),
    /// Remove cases from a dataset; all others stay
    Rm(RmArgs),
    /// Make cases of production traces (OTLP JSON, GenAI or OpenInference): one per agent invocation
    Capture(CaptureArgs),
    /// Set the review state or label confidence of cases: a new version, logged with author and time
    Review(ReviewArgs),
    /// Run the queries of a dataset's tool snapshots once and commit their answers as a new version
    Freeze(FreezeArgs),
    /// List the datasets of the store
    Datasets(DatasetsArgs),
    /// The versions of a dataset and what happened to it
    Log(LogArgs),
    /// A version of a dataset, or one case in it
    Show(ShowArgs),
    /// The contents one case has had across versions
    History(HistoryArgs),
    /// What changed between two versions, or between a version and a file
    Diff(DiffArgs),
    /// Write a version of a dataset in any format
    Export(ExportArgs),
    /// List, count or group the cases of a file or a stored version that a filter selects
    Cases(CasesArgs),
    /// Run a dataset against agents and grade the answers (exit 1 below the pass threshold)
    Run(RunArgs),
    /// The summary and results of a stored run (the latest by default)
    Results(ResultsArgs),
    /// Paired per-case differences between two stored runs
    Compare(CompareArgs),
    /// Keep a run made by your own code: results as JSON lines on standard input (what the
    /// Python client's `casebook.run` sends)
    #[command(hide = true)]
    Record(RecordArgs),
    /// Name a version (`prod`); moving a tag is logged
    Tag(TagArgs),
    /// Erase cases from every version of a dataset (personal data); cannot be undone
    Purge(PurgeArgs),
    /// Look after the store itself: `casebook store check`
    #[command(subcommand)]
    Store(StoreCommand),
    /// Serve the store to a team: the REST API under `/api/v1` (API keys from `casebook keys`)
    Serve(ServeArgs),
    /// API keys of the server: `create`, `list`, `revoke`
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Save the server's address and an API key for `push` and `pull` (mode 0600)
    Login(LoginArgs),
    /// Forget the server and API key `login` saved
    Logout(LogoutArgs),
    /// Send a dataset file to the server as the dataset's next version
    Push(PushArgs),
    /// Fetch a version of a dataset from the server into a file
    Pull(PullArgs),
    /// Serve the datasets to coding agents and IDEs over MCP (stdio): list, search, show, diff, lint; read only
    Mcp(McpArgs),
    /// Generate a synthetic dataset for benchmarks
    #[command(hide = true)]
    Generate(GenerateArgs),
    /// Help on a command, or on a topic: `filter` (the filter language), `formats`, `experiment`
    Help(HelpArgs),
    /// Print a shell's completion script, e.g. `casebook completions bash > ~/.local/share/bash-completion/completions/casebook`
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write one page per command into a folder with `-o DIR`
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// An experiment file (YAML): dataset, filter, scenarios, graders, n_runs, threshold
    pub experiment: Option<PathBuf>,
    /// The dataset: a file, or `NAME@REF` in the store (replaces the experiment's)
    #[arg(long)]
    pub dataset: Option<String>,
    /// One target for every case (replaces the experiment's scenarios): `http://…`,
    /// `openai+https://…/v1?model=M`, `cmd:PROGRAM ARGS`, `builtin:echo`
    #[arg(long)]
    pub target: Option<String>,
    /// A grader by kind (repeat for several), e.g. `contains`, `exact_match`
    #[arg(long = "grader", value_name = "KIND")]
    pub graders: Vec<String>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Deprecated spelling of `--where`
    #[arg(long, value_name = "EXPR", hide = true, conflicts_with = "filter")]
    pub only: Option<String>,
    /// Leave out cases whose label `confidence` is below X (0..1); cases without a confidence
    /// are kept, as unrated (replaces the experiment's `min_confidence`)
    #[arg(long, value_name = "X", value_parser = parse_confidence, allow_negative_numbers = true)]
    pub min_confidence: Option<f64>,
    /// Run cases reviewed as `rejected` too: by default they are left out, their expected
    /// answer having been judged wrong
    #[arg(long)]
    pub include_rejected: bool,
    /// Leave results no grader could judge (a promptfoo test with only `javascript` asserts) out
    /// of the pass rate and the threshold; by default they count as not passed (sets the
    /// experiment's `exclude_ungraded`)
    #[arg(long)]
    pub exclude_ungraded: bool,
    /// Runs at a time
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Grade the stored outputs again without calling any agent
    #[arg(long)]
    pub regrade: bool,
    /// Run the agents and keep their outputs without grading them: the runs are reported as
    /// ungraded, with no pass/fail and no threshold (a run needs graders otherwise)
    #[arg(long, conflicts_with_all = ["graders", "regrade"])]
    pub no_grade: bool,
    /// Also write a report: `junit=FILE`, `markdown=FILE`, `html=FILE`, `jsonl=FILE` (repeatable)
    #[arg(long = "report", value_name = "KIND=FILE", value_parser = parse_report)]
    pub reports: Vec<(ReportFormat, PathBuf)>,
    #[command(flatten)]
    pub overwrite: OverwriteArgs,
}

#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// A run id, a unique prefix of one, `latest` (the default) or `previous`
    pub run: Option<String>,
    /// Deprecated spelling of `--format`
    #[arg(long = "as", value_enum, hide = true)]
    pub report: Option<ReportFormat>,
    /// List the stored runs instead
    #[arg(long)]
    pub list: bool,
    /// Also write a report: `junit=FILE`, `markdown=FILE`, `html=FILE`, `jsonl=FILE` (repeatable)
    #[arg(long = "report", value_name = "KIND=FILE", value_parser = parse_report, conflicts_with = "list")]
    pub reports: Vec<(ReportFormat, PathBuf)>,
    #[command(flatten)]
    pub overwrite: OverwriteArgs,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The dataset version the results are of: `NAME@REF`
    pub dataset: String,
    /// The run's experiment name (what `results --list` shows, and `--resume` looks for)
    #[arg(long)]
    pub experiment: String,
    /// The pass rate the run needs, 0..1
    #[arg(long, default_value_t = 1.0)]
    pub threshold: f64,
    /// Go on with the latest unfinished run of this name and version instead of beginning one
    #[arg(long)]
    pub resume: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The run before: an id, a unique prefix of one, `latest` or `previous`
    pub a: String,
    /// The run after, named the same ways
    pub b: String,
    /// Pair A's scenario NAME_A with B's NAME_B (repeatable); without it, scenarios pair by
    /// name, then by the same target, then when each run has one
    #[arg(long = "scenario", value_name = "NAME_A=NAME_B", value_parser = parse_scenario_pair)]
    pub scenarios: Vec<(String, String)>,
}

fn parse_scenario_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_owned(), b.to_owned())),
        _ => Err(format!("`{s}`: write A's scenario, `=`, then B's, e.g. `--scenario baseline=tuned`")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Human,
    Json,
    Markdown,
    Junit,
    Html,
    Jsonl,
}

fn parse_report(s: &str) -> Result<(ReportFormat, PathBuf), String> {
    let (format, path) =
        s.split_once('=').ok_or_else(|| format!("`{s}`: write FORMAT=FILE, e.g. junit=results.xml"))?;
    let format = ReportFormat::from_str(format, true)
        .map_err(|_| format!("unknown report `{format}`: junit, markdown, html, jsonl or json"))?;
    Ok((format, PathBuf::from(path)))
}

#[derive(Debug, Args)]
pub struct HelpArgs {
    /// A command (`tag`, `keys create`), or a topic: `filter`, `formats`, `experiment`
    pub topic: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell the script is for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command into this folder (`casebook.1`, `casebook-validate.1`, …)
    /// instead of printing the page of `casebook`
    #[arg(long, short, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Replace pages already in the folder (on a terminal, casebook asks instead)
    #[arg(long, requires = "output")]
    pub overwrite: bool,
}

/// Which cases a command works on.
#[derive(Debug, Clone, Default, Args)]
pub struct SelectArgs {
    /// Only the cases this expression selects, e.g. `labels contains "math" and len(turns) >= 2`
    /// (`casebook help filter`)
    #[arg(long = "where", value_name = "EXPR")]
    pub filter: Option<String>,
    /// Only cases with this label; repeat for cases with all of them
    #[arg(long = "tag", value_name = "LABEL")]
    pub tags: Vec<String>,
    /// At most this many cases: the first ones selected
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Deprecated spelling of `--limit`
    #[arg(long, value_name = "N", hide = true, conflicts_with = "limit")]
    pub max_samples: Option<u64>,
}

/// Whether a command may replace an existing file it writes (see `output::may_write`).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct OverwriteArgs {
    /// Replace an output file that exists (without it, a terminal asks first and anything else
    /// is refused); an input of the command is never overwritten
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(Debug, Args)]
pub struct CasesArgs {
    /// A dataset file (`-` for standard input), or `NAME@REF` in the store (REF: v3, latest, a
    /// tag, a content-id prefix). An existing file wins over a dataset of the same name.
    pub source: String,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Count the selected cases per value of this path instead of listing them, e.g.
    /// `label.category` or `metadata.difficulty`
    #[arg(long, value_name = "PATH", conflicts_with = "count")]
    pub group_by: Option<String>,
    /// Print only how many cases are selected
    #[arg(long)]
    pub count: bool,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Make the store file readable and writable by its group too (mode 0660; without it 0600,
    /// its owner only)
    #[arg(long)]
    pub shared_group: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Dataset file
    pub file: PathBuf,
    /// The dataset (default: the file's dataset name)
    #[arg(long)]
    pub dataset: Option<String>,
    /// What this version is about
    #[arg(long, short)]
    pub message: Option<String>,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct CommitArgs {
    /// The dataset
    pub name: String,
    /// Dataset file: its cases are the whole next version
    pub file: PathBuf,
    /// What this version is about (shown by `casebook log`)
    #[arg(long, short)]
    pub message: Option<String>,
    /// The version this builds on (default: the head when the command starts)
    #[arg(long)]
    pub parent: Option<String>,
    /// Print what the commit would change (as `casebook diff NAME@latest FILE`), and write nothing
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct PutArgs {
    /// The dataset
    pub name: String,
    /// Dataset file with the cases to add or replace
    pub file: PathBuf,
    /// What this version is about (shown by `casebook log`)
    #[arg(long, short)]
    pub message: Option<String>,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
#[command(
    after_long_help = "Each agent invocation (an `invoke_agent` span, an OpenInference `AGENT` span, or a trace \
of model calls without one) becomes one case: the first user message is its input, later ones are turns, system \
instructions, tool definitions and retrieved documents are task fields, and what the agent answered and did is \
recorded as draft expectations (`review: draft`) for a person to confirm with `casebook review`. A case's id comes \
from its trace and span ids: capturing a trace again adds nothing, and a captured case that was reviewed or edited \
is never overwritten.

Examples:
  casebook capture traces.jsonl --dataset support -m 'failed tickets of Monday'
  casebook capture traces.json --dataset support --where 'metadata.status == \"error\"'
  casebook capture traces.json logs.json --dataset support    (GenAI events in OpenTelemetry logs)
  casebook capture traces.jsonl --dry-run --to letta"
)]
pub struct CaptureArgs {
    /// OTLP trace files (`-` for standard input): `ExportTraceServiceRequest` documents or JSON
    /// lines of them as the collector's file exporter writes, or the protobuf bytes of one; and
    /// OTLP log files (`ExportLogsServiceRequest`) whose GenAI events hold the messages the spans did not
    #[arg(required_unless_present = "pending", value_name = "TRACES")]
    pub traces: Vec<PathBuf>,
    /// The dataset the cases are added to (made if it does not exist)
    #[arg(long, env = "CASEBOOK_DATASET", required_unless_present_any = ["dry_run", "pending"])]
    pub dataset: Option<String>,
    /// List the traces the server's OTLP receiver keeps (waiting to be complete, or captured and
    /// kept for late spans) instead of capturing files: on the server `CASEBOOK_URL` names, else
    /// in the store; `--format json` writes JSON lines
    #[arg(long, conflicts_with_all = ["traces", "dry_run"])]
    pub pending: bool,
    #[command(flatten)]
    pub select: SelectArgs,
    /// What this version is about (shown by `casebook log`)
    #[arg(long, short)]
    pub message: Option<String>,
    /// Write the cases to standard output (or `-o FILE`) instead of adding them to the dataset
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: the file to write (default: standard output); its extension picks the syntax
    #[arg(long, short, requires = "dry_run")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub overwrite: OverwriteArgs,
    /// The format `--dry-run` writes (default: casebook JSONL)
    #[arg(long, value_parser = parse_format, requires = "dry_run")]
    pub to: Option<FormatArg>,
    /// The syntax `--dry-run` writes, when the output's extension does not say it: jsonl, json,
    /// yaml, csv or parquet
    #[arg(long, value_parser = parse_syntax, requires = "dry_run")]
    pub syntax: Option<Syntax>,
    /// With `--dry-run --to`: drop fields the format cannot hold, with a warning, instead of failing
    #[arg(long, requires = "dry_run")]
    pub lossy: bool,
    /// With `--dry-run --to` a format without `review` (all but casebook's): write the captured
    /// answers, which nobody has confirmed, as confirmed expectations
    #[arg(long, requires = "dry_run")]
    pub confirm_drafts: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// The dataset
    pub name: String,
    /// Ids of the cases to remove
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// What this version is about (shown by `casebook log`)
    #[arg(long, short)]
    pub message: Option<String>,
}

#[derive(Debug, Args)]
#[command(
    group = clap::ArgGroup::new("change").args(["state", "confidence"]).required(true).multiple(true),
    after_long_help = "Reads the cases from the dataset's head (or `--parent`), sets their `review` and/or \
`confidence`, and commits them on that version: if the head moved meanwhile, nothing is written and the \
command says so, as `commit` does. A case id that is not in the version is an error, and nothing is \
written. Content that does not change makes no version.

`casebook run` leaves out cases reviewed as `rejected` (unless `--include-rejected`), and with \
`--min-confidence X` cases whose confidence is below X.

Examples:
  casebook review support tc-001 tc-007 --state reviewed -m 'checked against the runbook'
  casebook review support --where 'label.category == \"RCA\"' --state draft --confidence 0.6
  casebook review support tc-003 --state rejected --parent v4"
)]
pub struct ReviewArgs {
    /// The dataset
    pub name: String,
    /// Ids of the cases to change (with `--where` or `--tag`, these and the cases they select)
    #[arg(required_unless_present_any = ["filter", "tags"])]
    pub ids: Vec<String>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// The review state to set
    #[arg(long, value_enum)]
    pub state: Option<ReviewState>,
    /// How much the case's expected answer (its label) is trusted, from 0 to 1
    #[arg(long, value_name = "X", value_parser = parse_confidence, allow_negative_numbers = true)]
    pub confidence: Option<f64>,
    /// What this version is about (default: `review: N cases STATE`)
    #[arg(long, short)]
    pub message: Option<String>,
    /// The version the change builds on (default: the head when the command starts)
    #[arg(long)]
    pub parent: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReviewState {
    Draft,
    Reviewed,
    Rejected,
}

/// A label confidence: a number from 0 to 1.
pub fn parse_confidence(s: &str) -> Result<f64, String> {
    let x: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number: a confidence is from 0 to 1"))?;
    if !(0.0..=1.0).contains(&x) {
        return Err(format!("`{s}` is outside 0..1: a confidence is from 0 to 1"));
    }
    Ok(x)
}

#[derive(Debug, Args)]
#[command(after_long_help = "A tool's recorded response may hold a `query` instead of a result: an HTTP GET \
(`url`, `headers`) or a command (`command`, run without a shell), with `{name}` filled from the call arguments \
the response's `when` fixes (percent-encoded in a URL). `freeze` runs each query that has not been run (a \
response with a `query` and neither `result` nor `error`) once, identical ones once in all, and commits a new \
version in which each answer is the response's `result` (its JSON when it is JSON, else its text) and \
`query.frozen_at` says when it was run. `${VAR}` in a header value is read from the environment, so secrets \
stay out of the dataset.

A query fails on a connection error, an HTTP status of 400 or more, a non-zero exit, its timeout \
(`timeout_secs`, default 30) or an answer over 16 MiB; each failure is listed. Then nothing is committed \
(exit 1), or with `--keep-going` the answers that came are, and the failed queries stay to run again.

Examples:
  casebook freeze incidents
  casebook freeze incidents --dry-run
  casebook freeze incidents@v3 --keep-going --concurrency 4
  casebook freeze incidents.jsonl -o frozen.jsonl")]
pub struct FreezeArgs {
    /// The dataset, `NAME` or `NAME@REF` (a version, which must be the head), or a dataset file
    pub target: String,
    /// For a dataset file: where to write its cases with the answers, in the casebook format
    /// (default: standard output)
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub overwrite: OverwriteArgs,
    /// Run the queries that were run before too, recording their answers anew
    #[arg(long)]
    pub refresh: bool,
    /// Commit the answers that came when some queries failed (the failed ones stay unfrozen;
    /// exit 1 still)
    #[arg(long)]
    pub keep_going: bool,
    /// Queries run at once
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// List the queries that would run, and run none
    #[arg(long)]
    pub dry_run: bool,
    /// What this version is about (default: `freeze: N queries answered`)
    #[arg(long, short)]
    pub message: Option<String>,
}

#[derive(Debug, Args)]
pub struct DatasetsArgs {}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Check the store: SQLite's integrity check and foreign keys, every case body against its
    /// content id, every version's id recomputed from its cases (exit 1 if anything is wrong)
    Check,
    /// Copy every dataset (its whole history, log and tags) and every run from one store into
    /// another, SQLite or PostgreSQL either way, content ids unchanged; only what the target
    /// lacks is copied, and a dataset whose versions differ there is left alone (exit 1)
    Copy(CopyArgs),
    /// Remove the case bodies, seed documents and run outputs that nothing refers to (left by
    /// failed commits and purges), in every project of the store; safe while others write
    Gc(GcArgs),
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server (`http://host:8080`); default `CASEBOOK_URL`
    #[arg(env = "CASEBOOK_URL")]
    pub url: Option<String>,
    /// Read the API key from standard input instead of asking for it
    #[arg(long)]
    pub token_stdin: bool,
}

#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// Forget the key only if it is for this server
    pub url: Option<String>,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The file to send (default: the one file `NAME.{jsonl,json,yaml,yml,csv}` here)
    pub file: Option<PathBuf>,
    /// The dataset on the server
    #[arg(long, env = "CASEBOOK_DATASET", value_name = "NAME")]
    pub dataset: Option<String>,
    /// Deprecated spelling of `--dataset`
    #[arg(long, hide = true, conflicts_with = "dataset")]
    pub name: Option<String>,
    /// Deprecated: name the file as the first argument
    #[arg(long = "file", id = "file_option", hide = true, conflicts_with = "file")]
    pub file_option: Option<PathBuf>,
    /// What this version is about (shown by `casebook log`)
    #[arg(long, short)]
    pub message: Option<String>,
    /// Replace the server's head with the file, even where it changed since the file was pulled
    /// (without it, a pulled file is merged: what changed only on the server is kept, and a case
    /// changed on both sides is a conflict)
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// The dataset on the server, `NAME` or `NAME@REF` (REF: `v3`, `latest`, a tag, a content
    /// id or a prefix of one; default: latest)
    #[arg(long, env = "CASEBOOK_DATASET", value_name = "NAME[@REF]", conflicts_with = "id")]
    pub dataset: Option<String>,
    /// Deprecated spelling of `--dataset`
    #[arg(long, hide = true, conflicts_with_all = ["dataset", "id"])]
    pub name: Option<String>,
    /// A version's content id (or a prefix of one: 8 hexadecimal digits or more), in whichever
    /// dataset it is
    #[arg(long)]
    pub id: Option<String>,
    /// Deprecated: name the version as `--dataset NAME@REF`
    #[arg(long, hide = true)]
    pub version: Option<String>,
    /// The file to write (default: `NAME.jsonl`, or the dataset's own format's extension)
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// The format to write (default: the format the dataset was imported from, else casebook);
    /// `parquet` writes casebook's cases as a Parquet table
    #[arg(long, value_parser = parse_format)]
    pub to: Option<FormatArg>,
    /// Column map for `--to csv`
    #[arg(long, value_parser = parse_map)]
    pub map: Option<ColumnMap>,
    /// Drop fields the output format cannot hold, with a warning, instead of failing (never
    /// `review: draft`: see `--confirm-drafts`)
    #[arg(long)]
    pub lossy: bool,
    /// Cases a request fetches
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub page_size: usize,
    /// Put the seed files' content in the cases instead of writing the files beside the output
    #[arg(long)]
    pub inline_seeds: bool,
    /// Write cases whose expectations are drafts (`review: draft`) to a format without `review`,
    /// where they read as confirmed (by default they are refused)
    #[arg(long)]
    pub confirm_drafts: bool,
    /// When the output file exists and differs: replace it (without it, a terminal asks first
    /// and anything else is refused)
    #[arg(long, group = "on_conflict")]
    pub overwrite: bool,
    /// When the output file exists and differs: write `NAME-remote.EXT` beside it (the server's
    /// copy, replaced by each such pull)
    #[arg(long, group = "on_conflict")]
    pub save_as_new: bool,
    /// When the output file exists and differs: write nothing (exit 1)
    #[arg(long, group = "on_conflict")]
    pub cancel_on_conflict: bool,
}

/// `casebook mcp` takes no options of its own: it reads where the other commands read (the
/// store, or the server `CASEBOOK_URL` names).
#[derive(Debug, Args)]
pub struct McpArgs {}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: String,
    /// The largest request body (a bulk import), in bytes; larger ones are refused with 413
    #[arg(long, default_value_t = 1 << 30, value_name = "BYTES")]
    pub max_body: u64,
    /// The largest JSON body of the API (a run, a batch of its results, a list of run hashes),
    /// in bytes; larger ones are refused with 413 before they are read
    #[arg(long, default_value_t = casebook_server::DEFAULT_MAX_JSON, value_name = "BYTES")]
    pub max_json: u64,
    /// Requests served at once; more wait their turn
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_concurrent: usize,
    /// Seconds a client may send nothing of a request body before it is cut off
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub body_timeout: u64,
    /// Seconds a client may take to send a request's headers before it is cut off
    #[arg(long, default_value_t = casebook_server::DEFAULT_HEADER_TIMEOUT, value_name = "SECONDS")]
    pub header_timeout: u64,
    /// Connections one client address may hold open at once; more are closed when accepted
    #[arg(long, default_value_t = casebook_server::DEFAULT_MAX_CONNECTIONS_PER_CLIENT, value_name = "N")]
    pub max_connections_per_client: usize,
    /// Seconds without a new span after which a received trace whose root span has come
    /// becomes cases (the OTLP receiver, `/v1/traces`)
    #[arg(long, default_value_t = casebook_server::DEFAULT_CAPTURE_QUIET, value_name = "SECS")]
    pub capture_quiet: u64,
    /// Seconds after its first span that a received trace without its root span becomes cases
    /// anyway (with a warning); a captured trace's spans are kept as long for late spans
    #[arg(long, default_value_t = casebook_server::DEFAULT_CAPTURE_MAX_WAIT, value_name = "SECS")]
    pub capture_max_wait: u64,
    /// Spans the OTLP receiver keeps waiting at most; past it exporters are told to retry later (503)
    #[arg(long, default_value_t = casebook_server::DEFAULT_MAX_PENDING_SPANS, value_name = "N")]
    pub max_pending_spans: u64,
    /// Print the API's OpenAPI document (as `/api/v1/openapi.json` serves it) and exit, without
    /// opening the store; the npm package's build generates the TypeScript client's types from it
    #[arg(long)]
    pub print_openapi: bool,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make an API key for a project (`--project`) and print it: it is shown only this once
    Create(KeysCreateArgs),
    /// List the keys (ids, projects, scopes; never the keys themselves)
    List,
    /// Revoke a key by its id (or the key itself): requests with it are refused from now on
    Revoke(KeysRevokeArgs),
}

#[derive(Debug, Args)]
pub struct KeysCreateArgs {
    /// What the key may do
    #[arg(long, value_enum)]
    pub scope: KeyScope,
    /// A note to tell keys apart (`ci`, `ana's laptop`)
    #[arg(long, default_value = "")]
    pub label: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeyScope {
    /// Read datasets, versions, cases and runs
    Read,
    /// Read, and push versions, tags and runs
    Write,
    /// Write, and purge cases from a dataset's history (`casebook purge`)
    Admin,
}

#[derive(Debug, Args)]
pub struct KeysRevokeArgs {
    /// The key's id (as `casebook keys list` shows it)
    pub id: String,
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to copy from: a folder (or the project folder holding `.casebook/`), or a
    /// `postgres://` URL
    pub from: PathBuf,
    /// The store to copy into, made if it does not exist
    pub to: PathBuf,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Count what would be removed, and remove nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Give the freed space back at once: SQLite rewrites the store file (`VACUUM`: as long as
    /// a copy of the store, and as much free disk; readers go on, writers wait), PostgreSQL
    /// vacuums the tables instead of leaving them to autovacuum
    #[arg(long, conflicts_with = "dry_run")]
    pub vacuum: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The dataset
    pub name: String,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// `NAME@REF`: REF is v3, latest, a content id or a prefix of it (8 hexadecimal digits or
    /// more), or a tag (default: latest)
    pub target: String,
    /// A case id: show that case
    pub case: Option<String>,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The dataset
    pub name: String,
    /// The case id
    pub case: String,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// `NAME@REF` of the older version, or a dataset file
    #[arg(value_name = "OLD")]
    pub old: String,
    /// `NAME@REF` of the newer version, or a dataset file (`diff support@prod edited.jsonl`)
    #[arg(value_name = "NEW")]
    pub new: String,
    /// How a dataset file is read (`--from`, `--map`), as `validate` and `import` read it
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// `NAME@REF` (default: latest)
    pub target: String,
    #[command(flatten)]
    pub write: WriteArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Column map for `--to csv`
    #[arg(long, value_parser = parse_map)]
    pub map: Option<ColumnMap>,
}

#[derive(Debug, Args)]
pub struct TagArgs {
    /// `NAME@REF`: the version to name (with `--delete`, the dataset `NAME`)
    pub target: String,
    /// The tag: not `latest`, `vN`, a number or 8 or more hexadecimal digits (which name
    /// versions), nor `.`, `..`, or with `/`, `@` or control characters; at most 128 bytes
    pub tag: String,
    /// Remove the tag from the dataset instead (`casebook tag --delete NAME TAG`); logged
    #[arg(long, short)]
    pub delete: bool,
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The input format (default: detected from the file name and content; `parquet` for a
    /// Parquet table of casebook's cases)
    #[arg(long, value_parser = parse_format)]
    pub from: Option<FormatArg>,
    /// Column map for `--from csv` or a Parquet table of another tool's, e.g.
    /// `input=question,expected.output=answer`
    #[arg(long, value_parser = parse_map)]
    pub map: Option<ColumnMap>,
    /// Worker threads (default: one per core)
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Dataset files (`-` for standard input)
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub read: ReadArgs,
    /// Stop after this many errors
    #[arg(long)]
    pub max_errors: Option<u64>,
    #[command(flatten)]
    pub select: SelectArgs,
}

#[derive(Debug, Args)]
#[command(after_long_help = LINT_HELP)]
pub struct LintArgs {
    /// Dataset files (`-` for standard input), or stored versions `NAME@REF`
    #[arg(required = true, value_name = "FILE|NAME@REF")]
    pub sources: Vec<String>,
    /// Also report cases whose input is in this dataset (a file or `NAME@REF`), such as a
    /// few-shot or training set
    #[arg(long, value_name = "FILE|NAME@REF")]
    pub against: Option<String>,
    /// `--deny warnings`: exit 1 when there is any warning (for CI)
    #[arg(long, value_enum, value_name = "WHAT")]
    pub deny: Option<Deny>,
    /// Leave out warnings with this code (`W-no-expectations`); repeatable
    #[arg(long, value_name = "CODE", value_parser = parse_warning_code)]
    pub allow: Vec<Code>,
    /// Report cases whose label confidence is below this
    #[arg(long, default_value_t = 0.5, value_parser = parse_confidence, value_name = "X")]
    pub min_confidence: f64,
    #[command(flatten)]
    pub read: ReadArgs,
}

const LINT_HELP: &str = "\
Warnings (each with its case id; for files, its line and column):
  W-duplicate-input           the agent is asked exactly the same as in an earlier case
  W-near-duplicate-input      the same, ignoring letter case and spacing
  W-conflicting-expectations  the same task, expecting something else
  W-leaked-ground-truth       an expected answer, acceptable answer, per-turn expectation or
                              outcome is in what the agent sees (as whole words: `4` is not in `40`)
  W-label-typo                a label that looks like a misspelling of a more common one
  W-no-expectations           nothing to grade against
  W-low-confidence            label confidence below --min-confidence
  W-rejected-case             rejected in review, still in the dataset
  W-overlapping-input         the input is also in the --against dataset

Two cases are the same task when everything the agent is given is the same (input, turns,
context, tools, seeds, agent arguments); --against compares the input and turns only.
Errors that make a file unreadable are reported too (exit 1).";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Deny {
    /// Any warning fails
    Warnings,
}

fn parse_warning_code(text: &str) -> Result<Code, String> {
    Code::HYGIENE.into_iter().find(|code| code.as_str().eq_ignore_ascii_case(text)).ok_or_else(|| {
        let known: Vec<&str> = Code::HYGIENE.iter().map(|c| c.as_str()).collect();
        format!("not a lint warning; one of: {}", known.join(", "))
    })
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Dataset file (`-` for standard input)
    pub file: PathBuf,
    #[command(flatten)]
    pub write: WriteArgs,
    #[command(flatten)]
    pub read: ReadArgs,
}

/// Where and how `convert` and `export` write.
#[derive(Debug, Args)]
pub struct WriteArgs {
    /// The output format; `parquet` writes casebook's cases as a Parquet table (one row a case)
    #[arg(long, value_parser = parse_format)]
    pub to: FormatArg,
    /// Output file (default: standard output); its extension picks JSON, JSONL, YAML, CSV or Parquet
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub overwrite: OverwriteArgs,
    /// The output syntax, when the output's extension does not say it (standard output):
    /// jsonl, json, yaml, csv or parquet (casebook's format only)
    #[arg(long, value_parser = parse_syntax)]
    pub syntax: Option<Syntax>,
    /// Drop fields the output format cannot hold, with a warning, instead of failing (never
    /// `review: draft`: see `--confirm-drafts`)
    #[arg(long)]
    pub lossy: bool,
    /// Write cases whose expectations are drafts (`review: draft`) to a format without `review`,
    /// where they read as confirmed (by default they are refused, `--lossy` or not)
    #[arg(long)]
    pub confirm_drafts: bool,
    /// Put the seeds of cases that name a seed file inline, instead of naming the file (by
    /// default `export` writes seed files beside the output, and `convert` names them by their
    /// path from the output's folder, or inlines those outside it)
    #[arg(long)]
    pub inline_seeds: bool,
}

impl WriteArgs {
    /// The syntax to write: `--syntax`, else the output's extension, else the format's first.
    pub fn syntax(&self) -> Result<Syntax, String> {
        let format = self.to.format;
        let syntax = self
            .syntax
            .or(self.to.syntax)
            .or_else(|| self.output.as_deref().and_then(Syntax::from_path))
            .unwrap_or_else(|| format.syntax_for(None));
        if format.syntaxes().contains(&syntax) {
            Ok(syntax)
        } else {
            let list = format.syntaxes().iter().map(|s| s.name()).collect::<Vec<_>>().join(", ");
            Err(format!("`{format}` cannot be written as {}: it uses {list}", syntax.name()))
        }
    }
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Dataset file (`-` for standard input)
    pub file: PathBuf,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// What to generate: letta-jsonl (every row with an id), letta-realistic (JSONL like users'
    /// files: rows without ids, repeated prompts, escapes), letta-csv, maslab-yaml, otlp
    /// (traces of agent invocations for `capture`, JSON lines; `--cases` invocations) or
    /// otlp-document (the same traces as one document)
    #[arg(long, default_value = "letta-jsonl")]
    pub kind: String,
    /// Number of cases
    #[arg(long, default_value_t = 1000)]
    pub cases: u64,
    /// Output file (default: standard output)
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub overwrite: OverwriteArgs,
    /// Seed of the generator
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// A format as named on the command line: one of casebook's formats, or `parquet`, which is
/// casebook's own cases in a Parquet table (the `casebook` format in the Parquet syntax).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatArg {
    pub format: Format,
    /// The syntax the name says (`parquet`), before the output's extension.
    pub syntax: Option<Syntax>,
}

impl FormatArg {
    pub const CASEBOOK: FormatArg = FormatArg { format: Format::Casebook, syntax: None };
}

fn parse_format(s: &str) -> Result<FormatArg, String> {
    if s.eq_ignore_ascii_case("parquet") {
        return Ok(FormatArg { format: Format::Casebook, syntax: Some(Syntax::Parquet) });
    }
    s.parse().map(|format| FormatArg { format, syntax: None }).map_err(|e| format!("{e}, or `parquet`"))
}

fn parse_syntax(s: &str) -> Result<Syntax, String> {
    Syntax::from_path(std::path::Path::new(&format!("x.{s}")))
        .ok_or_else(|| format!("unknown syntax `{s}`; use `jsonl`, `json`, `yaml`, `csv` or `parquet`"))
}

fn parse_map(s: &str) -> Result<ColumnMap, String> {
    s.parse()
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::definition().debug_assert();
    }
}

#[derive(Debug, Args)]
#[command(after_long_help = "Removes the content of the cases from every version of the dataset: their \
bodies, the seed documents only they use, the results of runs of the dataset on them and their stored \
outputs, and pending capture spans of the traces they came from. Each body's content id stays as a \
tombstone, so every version id still verifies (`casebook store check`). The purge is logged (`casebook \
log`: time, author, reason, case ids); `show`, `export`, `pull` and `run` of an old version leave the \
cases out with a warning that names the purge. It cannot be undone.

On the embedded store, whoever can write the store file may purge; through `CASEBOOK_URL`, only a key \
of the `admin` scope (`casebook keys create --scope admin`). Without `--yes`, a terminal asks first; \
anything else is refused.

Examples:
  casebook purge support tc-017 --reason 'erasure request #12'
  casebook purge support --where 'metadata.user == \"u-881\"' --reason 'GDPR art. 17' --yes")]
pub struct PurgeArgs {
    /// The dataset
    pub name: String,
    /// Ids of the cases to purge (with `--where` or `--tag`, these and the cases they select in
    /// the head)
    pub ids: Vec<String>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Why (logged with the purge)
    #[arg(long, required = true)]
    pub reason: String,
    /// Do not ask for confirmation
    #[arg(long)]
    pub yes: bool,
    /// PostgreSQL: do not rewrite the touched tables (`VACUUM FULL`) after the purge; faster on
    /// a large store, but the deleted bytes stay in the tables' free space until reused
    #[arg(long)]
    pub no_vacuum: bool,
}
