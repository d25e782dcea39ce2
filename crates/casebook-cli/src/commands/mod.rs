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
pub mod mcp;
pub mod purge;
pub mod remote;
pub mod run;
pub mod schema;
pub mod serve;
pub mod store;
pub mod validate;
pub mod versions;

use std::path::Path;

use casebook_formats::{Batch, Consumer, Flow, Input, ReadOptions, Start};
use casebook_model::{Case, DatasetHeader};

use crate::args::ReadArgs;

pub fn input(path: &Path) -> Input {
    if path.as_os_str() == "-" { Input::stdin() } else { Input::path(path) }
}

pub fn read_options(args: &ReadArgs) -> ReadOptions {
    ReadOptions {
        // A column map reads a CSV file as the generic `csv` format (the reader decides that
        // from the file's syntax); for any other input it only shapes the output.
        format: args.from.map(|f| f.format),
        syntax: args.from.and_then(|f| f.syntax),
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

/// A dataset file's cases and header, held whole (for commands that need every case at once:
/// `freeze` of a file, `diff` with a file); `Err(N)` when it has N errors, which are reported.
pub fn read_whole(
    settings: &crate::settings::Global,
    input: &Input,
    options: &ReadOptions,
) -> anyhow::Result<Result<(Vec<Case>, DatasetHeader), u64>> {
    struct Collect {
        cases: Vec<Case>,
        header: DatasetHeader,
        reporter: crate::report::Reporter,
        errors: u64,
    }
    impl Consumer<()> for Collect {
        fn start(&mut self, start: &Start) -> Flow {
            self.header = start.header.clone();
            Flow::Continue
        }
        fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
            for d in batch.diagnostics.iter().filter(|d| d.is_error()) {
                self.errors += 1;
                self.reporter.emit(d);
            }
            self.cases.append(&mut batch.cases);
            Flow::Continue
        }
        fn header(&mut self, header: &DatasetHeader) {
            self.header = header.clone();
        }
    }
    let mut collect = Collect {
        cases: Vec::new(),
        header: DatasetHeader::default(),
        reporter: crate::report::Reporter::new(settings, true),
        errors: 0,
    };
    casebook_formats::read(input, options, &|_: &Batch| (), &mut collect)?;
    Ok(if collect.errors == 0 { Ok((collect.cases, collect.header)) } else { Err(collect.errors) })
}

/// A dataset file's cases, handed to `f` batch by batch as they are read (for commands that
/// need each case once, in order: `diff` with a file); `Ok(false)` when the file has errors,
/// which are reported (and then `f` may have had only some of its cases).
pub fn each_case(
    settings: &crate::settings::Global,
    input: &Input,
    options: &ReadOptions,
    f: &mut dyn FnMut(Vec<Case>),
) -> anyhow::Result<bool> {
    struct Each<'f> {
        f: &'f mut dyn FnMut(Vec<Case>),
        reporter: crate::report::Reporter,
        errors: u64,
    }
    impl Consumer<()> for Each<'_> {
        fn start(&mut self, _: &Start) -> Flow {
            Flow::Continue
        }
        fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
            for d in batch.diagnostics.iter().filter(|d| d.is_error()) {
                self.errors += 1;
                self.reporter.emit(d);
            }
            // After an error the rest is read for its errors only.
            if self.errors == 0 {
                (self.f)(std::mem::take(&mut batch.cases));
            }
            Flow::Continue
        }
    }
    let mut each = Each { f, reporter: crate::report::Reporter::new(settings, true), errors: 0 };
    casebook_formats::read(input, options, &|_: &Batch| (), &mut each)?;
    if each.errors > 0 {
        let shown = input.display.clone();
        stderr!("`{shown}` has {}: `casebook validate {shown}` lists them", crate::plural(each.errors, "error"));
        return Ok(false);
    }
    Ok(true)
}
