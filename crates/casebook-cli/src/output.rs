//! Where a command's data goes: a file, written beside its destination and moved into place
//! only when the command succeeded (so a failure never leaves a partial file), or stdout.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

pub struct Output {
    temp: Option<(tempfile::NamedTempFile, PathBuf)>,
}

impl Output {
    /// The writer for `path` (standard output when `None`).
    pub fn create(path: Option<&Path>) -> anyhow::Result<(Self, Box<dyn Write>)> {
        let Some(path) = path else {
            return Ok((Self { temp: None }, Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout().lock()))));
        };
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut builder = tempfile::Builder::new();
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
        let temp = builder.tempfile_in(dir).with_context(|| format!("cannot write in `{}`", dir.display()))?;
        let file = temp.reopen().with_context(|| format!("cannot write in `{}`", dir.display()))?;
        Ok((Self { temp: Some((temp, path.to_owned())) }, Box::new(BufWriter::with_capacity(1 << 20, file))))
    }

    /// Moves the file into place. Dropping an `Output` instead discards it.
    pub fn keep(self) -> anyhow::Result<()> {
        if let Some((temp, path)) = self.temp {
            temp.persist(&path).with_context(|| format!("cannot write `{}`", path.display()))?;
        }
        Ok(())
    }
}
