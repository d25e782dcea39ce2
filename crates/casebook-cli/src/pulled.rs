//! What `pull` (and `push`) knows a file to be: a small record beside it, `.NAME.casebook-pull`
//! next to `NAME` (`support.jsonl` → `.support.jsonl.casebook-pull`), holding the server,
//! project, dataset and version it holds and the hash of the file as written. `push` of the file
//! sends that version as the base the server merges onto its head (cases changed there since
//! are kept, cases changed on both sides are a conflict); `pull` knows an unedited file without
//! reading it.
//!
//! A push that kept cases changed on the server leaves a file that is the version it made
//! except for those cases, which the file still holds as it had them: the record names that
//! version and, in `except`, those cases with the content ids the file holds (`null`: the file
//! lacks the case). The next push sends them along (`base_except`), so that the server takes
//! them for what the file started from: the push's own earlier merge is not a change made on
//! the server, and a case the file changes again conflicts only with what the server has that
//! the file never had.
//!
//! Beside the file, not in a store folder: pulling and pushing need no local store, and the
//! record goes wherever the folder goes (moved, copied, another checkout). The file's values
//! are never touched, whatever its format. A file renamed or copied elsewhere has no record,
//! and is pushed as a whole replacement of the head, as a file never pulled is.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use casebook_formats::{Batch, Consumer, Flow, Format, Input, ReadOptions, Start, Syntax};
use serde::{Deserialize, Serialize};

/// The record of the version a file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pulled {
    /// The server's URL, as `CASEBOOK_URL` or `login` named it (without a final `/`).
    pub server: String,
    pub project: String,
    pub dataset: String,
    /// The version's number, for messages.
    pub version: u64,
    /// The version's content id: what names it on the server.
    pub id: String,
    /// BLAKE3 of the file's bytes when the record was made (hex).
    pub file_hash: String,
    /// Cases the file holds otherwise than the version, by id: the content id it holds (hex),
    /// `None` for a case the file lacks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub except: BTreeMap<String, Option<String>>,
}

impl Pulled {
    /// The record's place for `file`.
    pub fn path_for(file: &Path) -> PathBuf {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        file.with_file_name(format!(".{name}.casebook-pull"))
    }

    /// The record beside `file`, when there is one that reads.
    pub fn load(file: &Path) -> Option<Self> {
        let text = fs_err::read_to_string(Self::path_for(file)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// A record of `version` of `dataset` on `remote`, for a file that holds it except for the
    /// cases in `except`; its hash is taken when it is saved.
    pub fn of(
        remote: &crate::remote::Remote,
        dataset: &str,
        version: &casebook_server::api::Version,
        except: BTreeMap<String, Option<String>>,
    ) -> Self {
        Self {
            server: remote.url.clone(),
            project: remote.project.clone(),
            dataset: dataset.to_owned(),
            version: version.number,
            id: version.id.clone(),
            file_hash: String::new(),
            except,
        }
    }

    /// Whether the record is of this dataset on this server.
    pub fn is_of(&self, server: &str, project: &str, dataset: &str) -> bool {
        self.server == server && self.project == project && self.dataset == dataset
    }

    /// Keeps the record beside `file`, with the hash of the file as it is now (replacing the
    /// record whole: a reader never sees half of one).
    pub fn save(mut self, file: &Path) -> anyhow::Result<()> {
        self.file_hash = file_hash(file)?;
        let path = Self::path_for(file);
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut temp =
            tempfile::NamedTempFile::new_in(dir).with_context(|| format!("cannot write `{}`", path.display()))?;
        temp.write_all(format!("{}\n", serde_json::to_string_pretty(&self)?).as_bytes())?;
        temp.persist(&path).map_err(|e| anyhow::anyhow!("cannot write `{}`: {}", path.display(), e.error))?;
        Ok(())
    }

    /// Keeps the record, or says on stderr why it could not (the file itself is written: only
    /// the next push's merge is lost).
    pub fn save_or_warn(self, file: &Path, quiet: bool) {
        if let Err(err) = self.save(file) {
            if !quiet {
                stderr!(
                    "warning: {err:#}; a push of `{}` will replace the server's head instead of merging onto it",
                    file.display()
                );
            }
        }
    }
}

/// BLAKE3 of a file's bytes, in hex.
pub fn file_hash(file: &Path) -> anyhow::Result<String> {
    let mut hasher = blake3::Hasher::new();
    let mut reader = fs_err::File::open(file)?;
    std::io::copy(&mut reader, &mut hasher).with_context(|| format!("cannot read `{}`", file.display()))?;
    Ok(hasher.finalize().to_hex().to_string())
}

/// A digest of the cases `file` holds, read as `format` in `syntax`: their ids and content ids
/// in order, so two files with the same digest hold the same values however they are laid out.
/// `None` when the file does not read without errors.
pub fn cases_digest(file: &Path, format: Format, syntax: Syntax, options: &ReadOptions) -> Option<[u8; 32]> {
    struct Digest {
        hasher: blake3::Hasher,
        failed: bool,
    }
    impl Consumer<Option<Vec<[u8; 32]>>> for Digest {
        fn start(&mut self, _: &Start) -> Flow {
            Flow::Continue
        }
        fn batch(&mut self, batch: &mut Batch, ids: &mut Option<Vec<[u8; 32]>>) -> Flow {
            let Some(ids) = ids.take().filter(|_| !batch.diagnostics.iter().any(|d| d.is_error())) else {
                self.failed = true;
                return Flow::Stop;
            };
            for (case, content_id) in batch.cases.iter().zip(ids) {
                // Length-prefixed: no two lists of ids hash alike.
                self.hasher.update(&(case.id.len() as u64).to_le_bytes());
                self.hasher.update(case.id.as_bytes());
                self.hasher.update(&content_id);
            }
            Flow::Continue
        }
    }
    let options = ReadOptions { format: Some(format), syntax: Some(syntax), ..options.clone() };
    // The content ids are made on the reader's workers.
    let work = |batch: &Batch| {
        batch
            .cases
            .iter()
            .map(|case| {
                let json = serde_json::to_string(case).ok()?;
                casebook_canon::content_id_bytes_of_json(casebook_canon::Kind::Case, &json).ok()
            })
            .collect::<Option<Vec<_>>>()
    };
    let mut digest = Digest { hasher: blake3::Hasher::new(), failed: false };
    let summary = casebook_formats::read(&Input::path(file), &options, &work, &mut digest).ok()?;
    (!digest.failed && summary.errors == 0).then(|| *digest.hasher.finalize().as_bytes())
}
