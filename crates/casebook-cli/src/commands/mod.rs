//! One module per command.

pub mod browse;
pub mod convert;
pub mod generate;
pub mod inspect;
pub mod schema;
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
        format: args.from.or(args.map.as_ref().map(|_| casebook_formats::Format::Csv)),
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
