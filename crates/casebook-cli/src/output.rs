//! Where a command's data goes: a file, written beside its destination and moved into place
//! only when the command succeeded (so a failure never leaves a partial file), or standard
//! output, written to an unnamed temporary file first and copied out on success (so a failure
//! half way through a large input never leaves the reader of a pipe with the first part).
//! Files that go next to an output file (a mas-lab items file, seed files) are written the same
//! way and moved into place with it. Temporary files are named `.casebook-PID-….tmp`: Ctrl-C or
//! SIGTERM removes them ([`remove_on_signals`]), and one left by a process that no longer runs
//! (killed with SIGKILL) is removed by the next command that writes to the same folder.

use std::io::{BufWriter, Seek, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;

pub struct Output {
    temp: Temp,
    beside: Arc<Mutex<Vec<(Tracked, PathBuf)>>>,
}

enum Temp {
    File(Tracked, PathBuf),
    Stdout(std::fs::File),
}

/// Temporary files of this process that a signal must not leave behind.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A temporary file listed in [`LIVE`] for as long as it exists under its temporary name.
struct Tracked {
    temp: Option<tempfile::NamedTempFile>,
    path: PathBuf,
}

impl Tracked {
    fn new(temp: tempfile::NamedTempFile) -> Self {
        let path = temp.path().to_owned();
        live().push(path.clone());
        Self { temp: Some(temp), path }
    }

    /// Moves the file to `path`. It leaves the list first: a signal in between leaves a stale
    /// temporary file (removed later), never removes the output.
    fn persist(mut self, path: &Path) -> anyhow::Result<()> {
        live().retain(|p| *p != self.path);
        if let Some(temp) = self.temp.take() {
            temp.persist(path).with_context(|| format!("cannot write `{}`", path.display()))?;
        }
        Ok(())
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        live().retain(|p| *p != self.path);
    }
}

/// On Ctrl-C or SIGTERM, removes this process's temporary files and exits (130 or 143), so an
/// interrupted `convert` or `export` leaves nothing behind, and says so. For commands that have
/// no other use for these signals.
pub fn remove_on_signals() {
    on_interrupt("interrupted; nothing was written");
}

/// What an interrupted command says (see [`on_interrupt`]).
static INTERRUPTED: Mutex<&str> = Mutex::new("interrupted");

/// On Ctrl-C or SIGTERM, removes this process's temporary files, says `message` on stderr
/// (what the interruption left as it was, a user who pressed Ctrl-C wants to know) and exits
/// (130 or 143). The first call starts listening; later ones change the message only.
pub fn on_interrupt(message: &'static str) {
    use tokio::signal::unix::{SignalKind, signal};
    static STARTED: std::sync::Once = std::sync::Once::new();
    *INTERRUPTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = message;
    STARTED.call_once(|| {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_io().build() else { return };
        // The handlers are in place when this returns, before any temporary file exists.
        let handlers = {
            let _context = runtime.enter();
            (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
        };
        let (Ok(mut int), Ok(mut term)) = handlers else { return };
        std::thread::spawn(move || {
            runtime.block_on(async {
                let code = tokio::select! {
                    _ = int.recv() => 130,
                    _ = term.recv() => 143,
                };
                remove_temporary_files();
                let message = *INTERRUPTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                // Below a progress bar's line, if one is drawn.
                let start = if std::io::IsTerminal::is_terminal(&std::io::stderr()) { "\n" } else { "" };
                stderr!("{start}{message}");
                std::process::exit(code);
            });
        });
    });
}

/// Removes this process's temporary files, before it exits without unwinding.
pub fn remove_temporary_files() {
    for path in live().drain(..) {
        let _ = fs_err::remove_file(path);
    }
}

impl Output {
    /// The writer for `path` (standard output when `None`).
    pub fn create(path: Option<&Path>) -> anyhow::Result<(Self, Box<dyn Write + Send>)> {
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
    pub fn beside(&self) -> Option<Box<dyn casebook_formats::Beside + Send>> {
        let Temp::File(_, path) = &self.temp else { return None };
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_owned();
        Some(Box::new(BesideFiles { dir, made: Arc::clone(&self.beside) }))
    }

    /// Where the file is written until it is kept (`None` for standard output).
    pub fn written(&self) -> Option<&Path> {
        match &self.temp {
            Temp::File(temp, _) => Some(&temp.path),
            Temp::Stdout(_) => None,
        }
    }

    /// Whether what was written is byte for byte the file at `path` (false when there is none).
    /// (The writer must have been flushed and dropped.)
    pub fn same_as(&self, path: &Path) -> anyhow::Result<bool> {
        let Temp::File(temp, _) = &self.temp else { return Ok(false) };
        let Ok(existing) = fs_err::File::open(path) else { return Ok(false) };
        let written = fs_err::File::open(&temp.path)?;
        if existing.metadata()?.len() != written.metadata()?.len() {
            return Ok(false);
        }
        let (mut a, mut b) = (std::io::BufReader::new(existing), std::io::BufReader::new(written));
        loop {
            use std::io::BufRead;
            let (x, y) = (a.fill_buf()?, b.fill_buf()?);
            let n = x.len().min(y.len());
            if x[..n] != y[..n] {
                return Ok(false);
            }
            if n == 0 {
                return Ok(x.is_empty() && y.is_empty());
            }
            a.consume(n);
            b.consume(n);
        }
    }

    /// Like [`Output::keep`], the file going to `path` instead.
    pub fn keep_as(mut self, path: &Path) -> anyhow::Result<()> {
        if let Temp::File(_, target) = &mut self.temp {
            *target = path.to_owned();
        }
        self.keep()
    }

    /// Moves the file into place, or copies the output to standard output. Dropping an
    /// `Output` instead discards it. (The writer must have been flushed and dropped.)
    pub fn keep(self) -> anyhow::Result<()> {
        let beside = std::mem::take(&mut *self.beside.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for (temp, path) in beside {
            temp.persist(&path)?;
        }
        match self.temp {
            Temp::File(temp, path) => {
                if fs_err::metadata(&path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
                    // A device or a pipe (`-o /dev/null`, a named pipe) is written into, never
                    // replaced by a file.
                    let mut from = fs_err::File::open(&temp.path)?;
                    let mut to = fs_err::OpenOptions::new().write(true).open(&path)?;
                    std::io::copy(&mut from, &mut to)?;
                    drop(temp);
                } else {
                    temp.persist(&path)?;
                }
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

const TEMP_PREFIX: &str = ".casebook-";
const TEMP_SUFFIX: &str = ".tmp";

fn temp_in(dir: &Path) -> anyhow::Result<(Tracked, std::fs::File)> {
    remove_stale(dir);
    let mut builder = tempfile::Builder::new();
    let prefix = format!("{TEMP_PREFIX}{}-", std::process::id());
    builder.prefix(&prefix).suffix(TEMP_SUFFIX);
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    let temp = builder.tempfile_in(dir).with_context(|| format!("cannot write in `{}`", dir.display()))?;
    let file = temp.reopen().with_context(|| format!("cannot write in `{}`", dir.display()))?;
    Ok((Tracked::new(temp), file))
}

/// Removes the temporary files in `dir` of casebook processes that no longer run.
fn remove_stale(dir: &Path) {
    let Ok(entries) = fs_err::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TEMP_PREFIX)?.strip_suffix(TEMP_SUFFIX)?.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs_err::remove_file(entry.path());
        }
    }
}

/// The files next to an output file, made as temporary files and kept by [`Output::keep`].
struct BesideFiles {
    dir: PathBuf,
    made: Arc<Mutex<Vec<(Tracked, PathBuf)>>>,
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

    fn create(&mut self, path: &str) -> std::io::Result<Box<dyn Write + Send>> {
        let target = self.resolve(path)?;
        let dir = target.parent().unwrap_or(&self.dir).to_owned();
        fs_err::create_dir_all(&dir)?;
        let (temp, file) = temp_in(&dir).map_err(std::io::Error::other)?;
        self.made.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((temp, target));
        Ok(Box::new(BufWriter::new(file)))
    }
}

/// The one rule of every command that writes a file (`convert -o`, `export -o`, `pull`,
/// `freeze -o`, `capture --dry-run -o`, `--report KIND=FILE`, `generate -o`): `path` is never
/// one of the command's `inputs` (the same file however named: paths are compared
/// canonicalised), and a file that exists there is replaced only with `--overwrite`
/// (`overwrite`) or, on a terminal, when the user says yes. Both refusals are usage errors
/// (exit 2) that name the file and what to do. A device or a pipe (`/dev/null`) is written
/// into without a question. `-` (standard output) is not a file.
pub fn may_write(
    settings: &crate::settings::Global,
    path: &Path,
    inputs: &[&Path],
    overwrite: bool,
) -> anyhow::Result<()> {
    may_replace(settings, path, inputs, overwrite, "exists", "")
}

/// [`may_write`], the file being said to be in `state` (`exists and differs from support@v3`)
/// and the refusal ending with `other_ways` (what else the command can do).
pub fn may_replace(
    settings: &crate::settings::Global,
    path: &Path,
    inputs: &[&Path],
    overwrite: bool,
    state: &str,
    other_ways: &str,
) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let Ok(meta) = fs_err::metadata(path) else { return Ok(()) };
    if let Ok(target) = path.canonicalize() {
        let input =
            inputs.iter().find(|input| input.as_os_str() != "-" && input.canonicalize().is_ok_and(|i| i == target));
        if let Some(input) = input {
            anyhow::bail!(
                "the output `{}` is the input `{}`: a command never overwrites its input; write to another file",
                path.display(),
                input.display()
            );
        }
    }
    if overwrite || !meta.is_file() {
        return Ok(());
    }
    if ask(settings) {
        let question = format!("`{}` {state}: overwrite it?", path.display());
        let yes = dialoguer::Confirm::new().with_prompt(question).default(false).interact().unwrap_or(false);
        if yes {
            return Ok(());
        }
        anyhow::bail!("`{}` exists and was left as it is", path.display());
    }
    anyhow::bail!("`{}` {state}: pass `--overwrite` to replace it{other_ways}", path.display())
}

/// Whether a command may ask its user a question: standard input and standard error are
/// terminals, and the output is not for programs (`--format json`).
pub fn ask(settings: &crate::settings::Global) -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal() && !settings.json
}
