//! One module per command.

pub mod browse;
pub mod capture;
pub mod cases;
pub mod convert;
pub mod freeze;
pub mod generate;
pub mod help;
pub mod inspect;
pub mod lint;
pub mod remote;
pub mod run;
pub mod schema;
pub mod serve;
pub mod store;
pub mod validate;
pub mod versions;

use std::path::Path;

use casebook_formats::{Input, ReadOptions};

use crate::args::ReadArgs;

pub fn input(path: &Path) -> Input {
    if path.as_os_str() == "-" { Input::stdin() } else { Input::path(path) }
}

pub fn read_options(args: &ReadArgs) -> ReadOptions {
    ReadOptions {
        // A column map reads a CSV file as the generic `csv` format (the reader decides that
        // from the file's syntax); for any other input it only shapes the output.
        format: args.from,
        syntax: None,
        threads: args.threads,
        column_map: args.map.clone(),
        stream_from: None,
    }
}

/// Checks an input file exists before reading, for a usage error that names it.
pub fn check_exists(path: &Path) -> anyhow::Result<()> {
    if path.as_os_str() != "-" && !path.exists() {
        anyhow::bail!("`{}` does not exist", path.display());
    }
    Ok(())
}
