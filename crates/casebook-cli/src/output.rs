//! Where a command's data goes: a file, written beside its destination and moved into place
//! only when the command succeeded (so a failure never leaves a partial file), or standard
//! output, written to an unnamed temporary file first and copied out on success (so a failure
//! half way through a large input never leaves the reader of a pipe with the first part).
//! Files that go next to an output file (a mas-lab items file, seed files) are written the same
//! way and moved into place with it.

use std::io::{BufWriter, Seek, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;

pub struct Output {
    temp: Temp,
    beside: Arc<Mutex<Vec<(tempfile::NamedTempFile, PathBuf)>>>,
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
            let output = Self { temp: Temp::Stdout(file), beside: Arc::default() };
            return Ok((output, Box::new(BufWriter::with_capacity(1 << 20, writer))));
        };
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let (temp, file) = temp_in(dir)?;
        let output = Self { temp: Temp::File(temp, path.to_owned()), beside: Arc::default() };
        Ok((output, Box::new(BufWriter::with_capacity(1 << 20, file))))
    }

    /// Where files next to the output go: beside an output file, none for standard output.
    pub fn beside(&self) -> Option<Box<dyn casebook_formats::Beside>> {
        let Temp::File(_, path) = &self.temp else { return None };
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_owned();
        Some(Box::new(BesideFiles { dir, made: Arc::clone(&self.beside) }))
    }

    /// Moves the file into place, or copies the output to standard output. Dropping an
    /// `Output` instead discards it. (The writer must have been flushed and dropped.)
    pub fn keep(self) -> anyhow::Result<()> {
        let beside = std::mem::take(&mut *self.beside.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for (temp, path) in beside {
            temp.persist(&path).with_context(|| format!("cannot write `{}`", path.display()))?;
        }
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

fn temp_in(dir: &Path) -> anyhow::Result<(tempfile::NamedTempFile, std::fs::File)> {
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    let temp = builder.tempfile_in(dir).with_context(|| format!("cannot write in `{}`", dir.display()))?;
    let file = temp.reopen().with_context(|| format!("cannot write in `{}`", dir.display()))?;
    Ok((temp, file))
}

/// The files next to an output file, made as temporary files and kept by [`Output::keep`].
struct BesideFiles {
    dir: PathBuf,
    made: Arc<Mutex<Vec<(tempfile::NamedTempFile, PathBuf)>>>,
}

impl BesideFiles {
    /// `path` under the output's folder; a path that would leave it is refused.
    fn resolve(&self, path: &str) -> std::io::Result<PathBuf> {
        let relative = Path::new(path);
        let plain = relative.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !plain {
            return Err(std::io::Error::other(format!("`{path}` is not a path inside the output's folder")));
        }
        Ok(self.dir.join(relative))
    }
}

impl casebook_formats::Beside for BesideFiles {
    fn existing(&mut self, path: &str) -> std::io::Result<Option<String>> {
        match fs_err::read_to_string(self.resolve(path)?) {
            Ok(text) => Ok(Some(text)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    fn is(&self, path: &str, other: &Path) -> bool {
        let base = |p: &Path| if p.as_os_str().is_empty() { Path::new(".").to_owned() } else { p.to_owned() };
        match (self.resolve(path).map(|p| base(&p).canonicalize()), base(other).canonicalize()) {
            (Ok(Ok(a)), Ok(b)) => a == b,
            _ => false,
        }
    }

    fn create(&mut self, path: &str) -> std::io::Result<Box<dyn Write>> {
        let target = self.resolve(path)?;
        let dir = target.parent().unwrap_or(&self.dir).to_owned();
        fs_err::create_dir_all(&dir)?;
        let (temp, file) = temp_in(&dir).map_err(std::io::Error::other)?;
        self.made.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((temp, target));
        Ok(Box::new(BufWriter::new(file)))
    }
}
