//! Documentation of the command line made from its clap definition: `casebook help` (commands
//! and topics), `casebook completions` (shell scripts) and `casebook man` (roff pages).

use std::path::Path;

use anyhow::Context;

use crate::Outcome;
use crate::args::{CompletionsArgs, HelpArgs, ManArgs};
use crate::settings::Global;

/// The help topics that are not commands, with what each covers (for `help nosuch`).
const TOPICS: [(&str, &str, &str); 3] = [
    ("filter", "the filter language of `--where`", casebook_filter::HELP),
    ("formats", "the formats casebook reads and writes", include_str!("../../../../docs/formats.md")),
    (
        "experiment",
        "the experiment file of `casebook run`, field by field",
        include_str!("../../../../docs/experiment.md"),
    ),
];

/// `casebook help [COMMAND… | TOPIC]`.
pub fn help(args: &HelpArgs) -> anyhow::Result<Outcome> {
    let mut command = crate::args::Cli::definition();
    // Gives subcommands their full name (`Usage: casebook validate`).
    command.build();
    let text = match args.topic.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => command.render_long_help().to_string(),
        [topic] if TOPICS.iter().any(|(name, ..)| name == topic) => {
            TOPICS.iter().find(|(name, ..)| name == topic).map(|(.., text)| (*text).to_owned()).unwrap_or_default()
        }
        path => {
            let mut current = &mut command;
            for name in path {
                current = current.find_subcommand_mut(name).ok_or_else(|| unknown_topic(name))?;
            }
            current.render_long_help().to_string()
        }
    };
    crate::write_stdout(&text)?;
    Ok(Outcome::Ok)
}

/// The error for `help NAME` when NAME is neither a command nor a topic: lists the topics.
fn unknown_topic(name: &str) -> anyhow::Error {
    // The error's renderer indents the lines after the first under its message.
    let topics: String = TOPICS.iter().map(|(name, what, _)| format!("\ncasebook help {name:<11} {what}")).collect();
    anyhow::anyhow!(
        "no command or help topic `{name}`: see `casebook --help` for the commands; the topics are:{topics}"
    )
}

/// `casebook completions SHELL`: the shell's completion script on standard output.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<Outcome> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut crate::args::Cli::definition(), "casebook", &mut script);
    crate::write_stdout(&String::from_utf8_lossy(&script))?;
    Ok(Outcome::Ok)
}

/// `casebook man`: the man page of `casebook` (roff) on standard output, or with `-o DIR` one
/// page per command written into DIR (`casebook.1`, `casebook-validate.1`, `casebook-keys-create.1`, …).
pub fn man(settings: &Global, args: &ManArgs) -> anyhow::Result<Outcome> {
    let mut command = crate::args::Cli::definition();
    command.build();
    let Some(dir) = &args.output else {
        crate::write_stdout(&String::from_utf8_lossy(&render(command)?))?;
        return Ok(Outcome::Ok);
    };
    let mut pages = Vec::new();
    collect_pages(command, dir, &mut pages)?;
    // One question (or `--overwrite`) for the folder's pages, not one a page.
    if let Some((existing, _)) = pages.iter().find(|(path, _)| path.exists()) {
        crate::output::may_write(settings, existing, &[], args.overwrite)?;
    }
    fs_err::create_dir_all(dir)?;
    for (path, page) in &pages {
        fs_err::write(path, page)?;
    }
    if !settings.quiet {
        eprintln!("wrote {} into `{}`", crate::plural(pages.len() as u64, "man page"), dir.display());
    }
    Ok(Outcome::Ok)
}

/// The page of `command` and those of its visible subcommands, depth first, each with the path
/// it is written to.
fn collect_pages(
    command: clap::Command,
    dir: &Path,
    pages: &mut Vec<(std::path::PathBuf, Vec<u8>)>,
) -> anyhow::Result<()> {
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        collect_pages(sub.clone(), dir, pages)?;
    }
    let path = dir.join(clap_mangen::Man::new(command.clone()).get_filename());
    pages.push((path, render(command)?));
    Ok(())
}

fn render(command: clap::Command) -> anyhow::Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page).context("rendering the man page")?;
    Ok(page)
}
