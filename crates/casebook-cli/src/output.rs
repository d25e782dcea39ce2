//! Where a command's data goes: a file, written beside its destination and moved into place
//! only when the command succeeded (so a failure never leaves a partial file), or standard
//! output, written to an unnamed temporary file first and copied out on success (so a failure
//! half way through a large input never leaves the reader of a pipe with the first part).

use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

pub struct Output {
    temp: Temp,
}

enum Temp {
    File(tempfile::NamedTempFile, PathBuf),
    Stdout(std::fs::File),
}

impl Output {
    /// The writer for `path` (standard output when `None`).
    pub fn create(path: Option<&Path>) -> anyhow::Result<(Self, Box<dyn Write>)> {
        let Some(path) = path else {
            let file = tempfile::tempfile().context("cannot make a temporary file for the output")?;
            let writer = file.try_clone().context("cannot make a temporary file for the output")?;
            return Ok((Self { temp: Temp::Stdout(file) }, Box::new(BufWriter::with_capacity(1 << 20, writer))));
        };
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut builder = tempfile::Builder::new();
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
        let temp = builder.tempfile_in(dir).with_context(|| format!("cannot write in `{}`", dir.display()))?;
        let file = temp.reopen().with_context(|| format!("cannot write in `{}`", dir.display()))?;
        Ok((Self { temp: Temp::File(temp, path.to_owned()) }, Box::new(BufWriter::with_capacity(1 << 20, file))))
    }

    /// Moves the file into place, or copies the output to standard output. Dropping an
    /// `Output` instead discards it. (The writer must have been flushed and dropped.)
    pub fn keep(self) -> anyhow::Result<()> {
        match self.temp {
            Temp::File(temp, path) => {
                temp.persist(&path).with_context(|| format!("cannot write `{}`", path.display()))?;
            }
            Temp::Stdout(mut file) => {
                file.rewind()?;
                let mut stdout = std::io::stdout().lock();
                std::io::copy(&mut file, &mut stdout)?;
                stdout.flush()?;
            }
        }
        Ok(())
    }
}
