//! Finding and opening the store a command works on, and running its async calls.

use anyhow::Context;
use casebook_store::{AnyStore, Location, Ref, STORE_DIR, STORE_FILE, StoreError, find_store};

use crate::settings::Global;

/// The store: `--store` / `CASEBOOK_STORE` (a folder, or a `postgres://` URL), else the
/// nearest `.casebook/`.
pub fn location(settings: &Global) -> anyhow::Result<Location> {
    if let Some(path) = &settings.store {
        return Ok(named(path));
    }
    // With a server named, a store found here would be acted on while the user thinks of the
    // server: only the commands that administer a store (`serve`, `keys`) may find one.
    if settings.server && !matches!(settings.command.as_str(), "serve" | "keys") {
        anyhow::bail!(
            "`CASEBOOK_URL` is set, and `casebook {}` does not work on a server: to run it on a store here, name \
             it with `--store PATH` (`--store .` for the `.casebook/` of this folder), or unset `CASEBOOK_URL`",
            settings.command
        );
    }
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let folder = find_store(&cwd).ok_or_else(|| {
        anyhow::anyhow!(
            "no store here or in any parent folder: run `casebook init`, or name one with `--store PATH` \
             (or `--store postgres://…` for a shared store)"
        )
    })?;
    Ok(Location::File(folder.join(STORE_FILE)))
}

/// The store a command-line argument names: a `postgres://` URL, a store folder, or a project
/// folder holding `.casebook/`.
pub fn named(path: &std::path::Path) -> Location {
    if let Some(url) = path.to_str().filter(|text| Location::is_url(text)) {
        return Location::Postgres(url.to_owned());
    }
    // A project folder holding a store stands for its store.
    let inner = path.join(STORE_DIR);
    if !path.join(STORE_FILE).exists() && inner.join(STORE_FILE).exists() {
        return Location::File(inner.join(STORE_FILE));
    }
    Location::File(path.join(STORE_FILE))
}

/// How messages name a store: its folder, or its URL without the password.
pub fn shown(location: &Location) -> String {
    match location {
        Location::File(file) => file.parent().unwrap_or(file).display().to_string(),
        Location::Postgres(_) => location.to_string(),
    }
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")
}

/// Opens the store the settings name, seeing the project they name.
pub fn open(settings: &Global, runtime: &tokio::runtime::Runtime) -> anyhow::Result<AnyStore> {
    let project = settings.project.as_deref().unwrap_or(casebook_store::DEFAULT_PROJECT);
    casebook_store::check_project(project)?;
    Ok(open_all(settings, runtime)?.in_project(project))
}

/// Opens the store the settings name, seeing the default project (for what spans projects).
pub fn open_all(settings: &Global, runtime: &tokio::runtime::Runtime) -> anyhow::Result<AnyStore> {
    let location = location(settings)?;
    let quiet = settings.quiet;
    casebook_store::on_upgrade(move |store, from, to| {
        if !quiet {
            stderr!(
                "note: upgrading the store `{store}` from schema {from} to {to} before the command runs; \
                 on a large store this takes a while (nothing else needs doing)"
            );
        }
    });
    tell_waits(settings);
    match runtime.block_on(AnyStore::open(&location)) {
        Ok(store) => Ok(store),
        // These name the database already.
        Err(err @ StoreError::Connect { .. }) => Err(err.into()),
        Err(err @ StoreError::NotAStore(..)) if matches!(location, Location::Postgres(_)) => Err(err.into()),
        Err(err) => Err(anyhow::Error::new(err).context(format!("cannot open the store `{}`", shown(&location)))),
    }
}

/// Has the store say when the command waits for another process's lock ([`say_waiting`]),
/// unless `--quiet`.
pub fn tell_waits(settings: &Global) {
    if !settings.quiet {
        casebook_store::on_wait(say_waiting);
    }
}

/// Says on stderr, once for the command, that it waits for another process's lock, and whose
/// (see [`casebook_store::on_wait`]): a command silent for many seconds looks hung.
fn say_waiting(wait: &casebook_store::Wait) {
    use casebook_store::Holder;
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let who = match &wait.holder {
        Some(Holder { casebook: true, pid: Some(pid), .. }) => format!("another casebook command (pid {pid})"),
        Some(Holder { casebook: true, pid: None, .. }) => "another casebook command".to_owned(),
        Some(Holder { pid: Some(pid), program: Some(program), .. }) => {
            format!("another program (`{program}`, pid {pid})")
        }
        Some(Holder { pid: None, program: Some(program), .. }) => format!("another program (`{program}`)"),
        Some(Holder { pid: Some(pid), .. }) => format!("another process (pid {pid})"),
        _ => "another command".to_owned(),
    };
    let what = match &wait.lock {
        None => format!("writing to the store {}", wait.store),
        Some(lock) => format!("holding the lock on {lock} in the store {}", wait.store),
    };
    stderr!("waiting for {who} {what}; this command goes on as soon as that one is done…");
}

/// Opens the store the settings name for a command that writes to it.
pub fn open_write(settings: &Global, runtime: &tokio::runtime::Runtime) -> anyhow::Result<AnyStore> {
    let store = open(settings, runtime)?;
    if store.is_read_only() {
        return Err(casebook_store::StoreError::ReadOnly(store.name().into()).into());
    }
    Ok(store)
}

/// How messages name the store a command opened, for a user who may have more than one: its
/// folder or its URL (password masked), and its project when it is not the default
/// (`store /work/.casebook`, `store postgres://u:***@db/cases, project `team``).
pub fn described(store: &AnyStore) -> String {
    let place = match store {
        AnyStore::Sqlite(s) => s.path().parent().unwrap_or(s.path()).display().to_string(),
        AnyStore::Postgres(s) => s.url().to_owned(),
    };
    match store.project() {
        casebook_store::DEFAULT_PROJECT => format!("store {place}"),
        project => format!("store {place}, project `{project}`"),
    }
}

/// Says on stderr (unless `--quiet`) what a command wrote and to which store (`described`), so
/// a user never writes to another store than the one they think of without seeing it.
pub fn say_wrote(settings: &Global, what: &str, store: &str) {
    if !settings.quiet {
        stderr!("wrote {what} to {store}");
    }
}

/// Runs `read` on the store the settings name, prints what it returns, and closes the store.
pub fn print(
    settings: &Global,
    read: impl FnOnce(&tokio::runtime::Runtime, &AnyStore) -> anyhow::Result<String>,
) -> anyhow::Result<crate::Outcome> {
    let runtime = runtime()?;
    let store = open(settings, &runtime)?;
    let text = read(&runtime, &store)?;
    crate::write_stdout(&text)?;
    runtime.block_on(store.close());
    Ok(crate::Outcome::Ok)
}

/// Where `init` creates a store.
pub fn new_location(settings: &Global) -> anyhow::Result<Location> {
    match &settings.store {
        Some(path) => match path.to_str().filter(|text| Location::is_url(text)) {
            Some(url) => Ok(Location::Postgres(url.to_owned())),
            None => Ok(Location::File(path.join(STORE_FILE))),
        },
        None => {
            let folder = std::env::current_dir().context("cannot read the working directory")?.join(STORE_DIR);
            Ok(Location::File(folder.join(STORE_FILE)))
        }
    }
}

/// The folder above the one holding the store file `file` whose `.casebook/` holds a store, if
/// any: the store a new one at `file` would hide.
pub fn enclosing_store(file: &std::path::Path) -> Option<std::path::PathBuf> {
    let folder = file.parent()?.parent()?;
    folder.ancestors().skip(1).find(|f| f.join(STORE_DIR).join(STORE_FILE).is_file()).map(std::path::Path::to_path_buf)
}

/// `NAME@REF` (REF defaults to `latest`).
pub fn target(text: &str) -> anyhow::Result<(String, Ref)> {
    let (name, reference) = match text.rsplit_once('@') {
        Some((name, reference)) => (name, reference.parse().map_err(|e: String| anyhow::anyhow!(e))?),
        None => (text, Ref::Latest),
    };
    if name.is_empty() {
        anyhow::bail!("`{text}` names no dataset: write `NAME@REF`, e.g. `support@v3`");
    }
    Ok((name.to_owned(), reference))
}
