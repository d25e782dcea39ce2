//! Where request bodies are kept while they are read (an import, a capture, a console upload),
//! and the names they are kept under.
//!
//! Each server keeps them in a folder of its own, `casebook-spool-*`, in the spool folder
//! (`Limits::spool`, or the system's temporary folder), holding a lock on its `lock` file while
//! it runs. A server killed before it could remove its folder leaves it behind: the next server
//! to start there removes every such folder whose lock no process holds, and only those, so
//! servers sharing a spool folder leave each other's alone.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::error::ApiError;

/// How a server's spool folder is named.
const PREFIX: &str = "casebook-spool-";
/// The file each server holds locked in its spool folder.
const LOCK: &str = "lock";
/// A folder is left alone this long after its lock file was made: its server may be about to
/// lock it.
const GRACE: Duration = Duration::from_secs(60);

/// A server's spool folder, removed when the server ends; or why it could not be made.
pub(crate) struct Spool {
    own: Result<(tempfile::TempDir, fs_err::File), String>,
}

impl Spool {
    /// Removes what killed servers left in `parent` (the system's temporary folder when
    /// `None`), then makes this server's own folder there and locks it.
    pub(crate) fn start(parent: Option<&Path>) -> Self {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        remove_leftovers(&parent);
        let own = (|| {
            let dir = tempfile::Builder::new().prefix(PREFIX).tempdir_in(&parent)?;
            let lock = fs_err::File::create(dir.path().join(LOCK))?;
            lock.try_lock().map_err(std::io::Error::from)?;
            Ok::<_, std::io::Error>((dir, lock))
        })()
        .map_err(|e| format!("cannot make a spool folder in `{}`: {e}", parent.display()));
        if let Err(err) = &own {
            tracing::error!(error = %err, "uploads will fail");
        }
        Self { own }
    }

    /// A new folder of its own for one request's body, removed when dropped.
    pub(crate) fn folder(&self) -> Result<tempfile::TempDir, ApiError> {
        match &self.own {
            Ok((dir, _)) => {
                tempfile::Builder::new().prefix("upload-").tempdir_in(dir.path()).map_err(ApiError::internal)
            }
            Err(err) => Err(ApiError::internal(err)),
        }
    }
}

/// Removes the spool folders in `parent` whose lock no process holds (their server was killed).
fn remove_leftovers(parent: &Path) {
    let Ok(entries) = fs_err::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry.file_name().to_str().is_some_and(|n| n.starts_with(PREFIX));
        if !ours || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(lock) = fs_err::File::open(path.join(LOCK)) else { continue };
        let settled = lock
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|made| SystemTime::now().duration_since(made).is_ok_and(|age| age >= GRACE));
        // Held: its server runs. The lock is let go as the folder goes.
        if settled && lock.try_lock().is_ok() {
            match fs_err::remove_dir_all(&path) {
                Ok(()) => tracing::info!(folder = %path.display(), "removed the spool of a server that was stopped"),
                Err(err) => tracing::warn!(error = %err, "cannot remove the spool of a server that was stopped"),
            }
        }
    }
}

/// The most bytes a file name may have on the file systems the server writes to.
const NAME_MAX: usize = 255;

/// The name an uploaded file is kept and shown under: the last part of the client's `filename`
/// (`default` without one). A name no file system takes (a control character such as NUL,
/// more than 255 bytes) is refused, naming the `parameter` that sent it.
pub(crate) fn upload_name(parameter: &str, filename: Option<&str>, default: &str) -> Result<String, ApiError> {
    let Some(given) = filename else { return Ok(default.to_owned()) };
    let last = given.rsplit(['/', '\\']).next().unwrap_or_default();
    if let Some(c) = last.chars().find(|c| c.is_control()) {
        return Err(ApiError::bad_request(format!(
            "`{parameter}` holds the control character U+{:04X}: name the file without it",
            u32::from(c)
        )));
    }
    if last.len() > NAME_MAX {
        return Err(ApiError::bad_request(format!(
            "`{parameter}` is {} bytes long: a file name has at most {NAME_MAX}",
            last.len()
        )));
    }
    Ok(match last {
        "" | "." | ".." => default.to_owned(),
        name => name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_last_part_and_refuse_what_no_file_system_takes() {
        assert_eq!(upload_name("filename", Some("a/b/cases.jsonl"), "body.jsonl").unwrap(), "cases.jsonl");
        assert_eq!(upload_name("filename", Some("..\\x.csv"), "body.jsonl").unwrap(), "x.csv");
        assert_eq!(upload_name("filename", Some("ünï.yaml"), "body.jsonl").unwrap(), "ünï.yaml");
        assert_eq!(upload_name("filename", Some(".."), "body.jsonl").unwrap(), "body.jsonl");
        assert_eq!(upload_name("filename", None, "body.jsonl").unwrap(), "body.jsonl");
        let err = upload_name("filename", Some("a\0.jsonl"), "body.jsonl").unwrap_err();
        assert_eq!(err.body.message, "`filename` holds the control character U+0000: name the file without it");
        let long = format!("{}.jsonl", "é".repeat(130));
        let err = upload_name("filename", Some(&long), "body.jsonl").unwrap_err();
        assert_eq!(err.body.message, "`filename` is 266 bytes long: a file name has at most 255");
    }
}
