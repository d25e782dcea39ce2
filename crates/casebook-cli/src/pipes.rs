//! Standard output and standard error when their reader goes away (`casebook validate big.jsonl
//! | head -1`): a closed pipe ends the command quietly with exit status 0, as ripgrep does, not
//! with a panic. Data written with `?` reaches `main` as a broken-pipe error; messages written
//! with [`stderr!`] and diagnostics ([`crate::report::Reporter`]) end the process where they
//! are, after removing its temporary files (a commit not finished is not committed, as when the
//! process is killed).

use std::io::Write;

/// Writes a line to standard error, as `eprintln!` does, without its panic on a closed pipe.
macro_rules! stderr {
    ($($arg:tt)*) => {
        $crate::pipes::line_to_stderr(format_args!($($arg)*))
    };
}

pub fn line_to_stderr(args: std::fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    written(stderr.write_fmt(args).and_then(|()| stderr.write_all(b"\n")));
}

/// Ends the command quietly if `result` says the reader of the pipe went away; any other error
/// of a message is ignored (there is nowhere left to say it).
pub fn written(result: std::io::Result<()>) {
    if result.is_err_and(|err| err.kind() == std::io::ErrorKind::BrokenPipe) {
        closed();
    }
}

/// Ends the process with status 0, leaving none of its temporary files behind.
pub fn closed() -> ! {
    crate::output::remove_temporary_files();
    std::process::exit(0)
}
