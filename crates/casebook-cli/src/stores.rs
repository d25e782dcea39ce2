//! Finding and opening the store a command works on, and running its async calls.

use std::path::PathBuf;

use anyhow::Context;
use casebook_store::{Ref, STORE_DIR, STORE_FILE, SqliteStore, find_store};

use crate::settings::Global;

/// The store folder: `--store` / `CASEBOOK_STORE`, else the nearest `.casebook/`.
pub fn folder(settings: &Global) -> anyhow::Result<PathBuf> {
    if let Some(path) = &settings.store {
        // A project folder holding a store stands for its store.
        let inner = path.join(STORE_DIR);
        if !path.join(STORE_FILE).exists() && inner.join(STORE_FILE).exists() {
            return Ok(inner);
        }
        return Ok(path.clone());
    }
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    find_store(&cwd).ok_or_else(|| {
        anyhow::anyhow!("no store here or in any parent folder: run `casebook init`, or name one with `--store PATH`")
    })
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")
}

/// Opens the store the settings name.
pub fn open(settings: &Global, runtime: &tokio::runtime::Runtime) -> anyhow::Result<SqliteStore> {
    let folder = folder(settings)?;
    let file = folder.join(STORE_FILE);
    runtime.block_on(SqliteStore::open(&file)).with_context(|| format!("cannot open the store `{}`", folder.display()))
}

/// Opens the store the settings name for a command that writes to it.
pub fn open_write(settings: &Global, runtime: &tokio::runtime::Runtime) -> anyhow::Result<SqliteStore> {
    let store = open(settings, runtime)?;
    if store.is_read_only() {
        return Err(casebook_store::StoreError::ReadOnly(store.path().to_owned()).into());
    }
    Ok(store)
}

/// Runs `read` on the store the settings name, prints what it returns, and closes the store.
pub fn print(
    settings: &Global,
    read: impl FnOnce(&tokio::runtime::Runtime, &SqliteStore) -> anyhow::Result<String>,
) -> anyhow::Result<crate::Outcome> {
    let runtime = runtime()?;
    let store = open(settings, &runtime)?;
    let text = read(&runtime, &store)?;
    crate::write_stdout(&text)?;
    runtime.block_on(store.close());
    Ok(crate::Outcome::Ok)
}

/// Where `init` creates a store.
pub fn new_folder(settings: &Global) -> anyhow::Result<PathBuf> {
    match &settings.store {
        Some(path) => Ok(path.clone()),
        None => Ok(std::env::current_dir().context("cannot read the working directory")?.join(STORE_DIR)),
    }
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
