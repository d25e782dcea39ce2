//! The `casebook` command: parses arguments, resolves them into settings, runs a command, and
//! maps the outcome to an exit status (0 success, 1 invalid input, 2 usage or environment).

#[macro_use]
mod pipes;
mod args;
mod commands;
mod output;
mod progress;
mod pulled;
mod remote;
mod report;
mod runs;
mod settings;
mod source;
mod stores;

use std::process::ExitCode;

/// Parsing allocates many small strings on worker threads and frees them on another; mimalloc
/// handles that without the lock contention of the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How a command ended, when it did not fail outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The input is invalid (or an evaluation missed its threshold).
    Invalid,
    /// The user interrupted it (Ctrl-C), and it said what it left (exit 130, as a shell
    /// reports a process killed by SIGINT).
    Interrupted,
}

/// How long mimalloc keeps memory freed before it gives it back to the system, for a command
/// that runs once, unless `MIMALLOC_PURGE_DELAY` says otherwise: its own default of 1 s keeps
/// what one batch freed for batches long gone, and with batches made on one thread and freed on
/// another that held a third of `convert`'s peak (1M realistic rows: 90–105 MiB at 1 s, 64–71
/// MiB at 50 ms, 2 % slower; `import` 15 MiB less at the same speed; see BENCHMARKS.md). The
/// server keeps the default, which spares it giving pages back between one request and the next.
const PURGE_DELAY_MS: std::ffi::c_long = 50;

/// mimalloc's `mi_option_purge_delay` (the same place in the options of its versions 2 and 3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

#[allow(unsafe_code)]
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an option that mimalloc reads as it frees; any value is valid.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

fn main() -> ExitCode {
    let (mut cli, command) = args::Cli::parse_masked();
    settings::resolve_renamed(&mut cli.command);
    if !matches!(cli.command, args::Command::Serve(_)) {
        tune_allocator();
    }
    let settings = settings::Global::resolve(&cli.global, command);
    let result = match cli.command {
        _ if !matches!(settings.format, args::OutputFormat::Human | args::OutputFormat::Json)
            && !matches!(cli.command, args::Command::Results(_)) =>
        {
            Err(anyhow::anyhow!(
                "`--format {}` is for `casebook results`; `casebook {}` prints `human` or `json`",
                clap::ValueEnum::to_possible_value(&settings.format)
                    .map_or_else(String::new, |v| v.get_name().to_owned()),
                settings.command
            ))
        }
        args::Command::Validate(a) => commands::validate::run(&settings, a),
        args::Command::Lint(a) => commands::lint::run(&settings, a),
        args::Command::Convert(a) => commands::convert::run(&settings, a),
        args::Command::Inspect(a) => commands::inspect::run(&settings, a),
        args::Command::Schema(a) => commands::schema::run(&settings, a),
        args::Command::Init(a) => commands::versions::init(&settings, a),
        args::Command::Import(a) => commands::versions::import(&settings, a),
        args::Command::Commit(a) => commands::versions::commit(&settings, a),
        args::Command::Put(a) => commands::versions::put(&settings, a),
        args::Command::Capture(a) => commands::capture::run(&settings, a),
        args::Command::Rm(a) => commands::versions::rm(&settings, a),
        args::Command::Review(a) => commands::versions::review(&settings, a),
        args::Command::Freeze(a) => commands::freeze::run(&settings, a),
        args::Command::Tag(a) => commands::versions::tag(&settings, a),
        args::Command::Purge(a) => commands::purge::purge(&settings, a),
        args::Command::Datasets(a) => commands::browse::datasets(&settings, a),
        args::Command::Store(args::StoreCommand::Check) => commands::store::check(&settings),
        args::Command::Store(args::StoreCommand::Copy(a)) => commands::store::copy(&settings, a),
        args::Command::Store(args::StoreCommand::Gc(a)) => commands::store::gc(&settings, a),
        args::Command::Serve(a) => commands::serve::run(&settings, a),
        args::Command::Keys(a) => commands::serve::keys(&settings, a),
        args::Command::Login(a) => commands::remote::login(&settings, a),
        args::Command::Logout(a) => commands::remote::logout(&settings, a),
        args::Command::Push(a) => commands::remote::push(&settings, a),
        args::Command::Pull(a) => commands::remote::pull(&settings, a),
        args::Command::Mcp(a) => commands::mcp::run(&settings, a),
        args::Command::Log(a) => commands::browse::log(&settings, a),
        args::Command::Show(a) => commands::browse::show(&settings, a),
        args::Command::History(a) => commands::browse::history(&settings, a),
        args::Command::Diff(a) => commands::browse::diff(&settings, a),
        args::Command::Export(a) => commands::browse::export(&settings, a),
        args::Command::Cases(a) => commands::cases::run(&settings, a),
        args::Command::Run(a) => commands::run::run(&settings, a),
        args::Command::Results(a) => commands::run::results(&settings, a),
        args::Command::Compare(a) => commands::run::compare(&settings, a),
        args::Command::Record(a) => commands::run::record(&settings, a),
        args::Command::Generate(a) => commands::generate::run(&settings, a),
        args::Command::Help(a) => commands::help::help(&a),
        args::Command::Completions(a) => commands::help::completions(&a),
        args::Command::Man(a) => commands::help::man(&settings, &a),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Invalid) => ExitCode::from(1),
        Ok(Outcome::Interrupted) => ExitCode::from(130),
        // The reader of our output went away (`casebook ... | head`): nothing left to say
        // (see `pipes`).
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            report::environment_error(&settings, &err);
            ExitCode::from(2)
        }
    }
}

/// `1 case`, `2 cases`.
pub fn plural(n: u64, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

/// Writes command output to stdout.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || e.downcast_ref::<casebook_formats::ReadError>().is_some_and(
                |e| matches!(e, casebook_formats::ReadError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe),
            )
    })
}
