//! Where the commands that read a dataset (`show`, `diff`, `history`, `export`, `cases NAME@REF`)
//! read it: the store here, or, with `CASEBOOK_URL` set and no store named, the team server
//! through its API. Both answer in the store's types, so each command prints the same whichever
//! it reads.

use casebook_model::{Case, DatasetHeader};
use casebook_store::{
    AnyStore, DatasetInfo, Diff, FieldChange, ModifiedCase, Ref, Revision, Select, Store, VersionInfo,
};

use crate::remote::{Remote, RemoteError, segment};
use crate::settings::Global;
use crate::stores;

/// Cases a page of the server holds when a command walks a version (its limit is 5,000).
const SERVER_PAGE: usize = 2000;

pub enum Source {
    Store(AnyStore),
    Server(Remote),
}

impl Source {
    /// The server when the settings say to work on one (`Global::on_server`), else the store.
    pub fn open(settings: &Global, runtime: &tokio::runtime::Runtime) -> anyhow::Result<Self> {
        if settings.on_server() {
            Ok(Source::Server(runtime.block_on(Remote::connect())?))
        } else {
            Ok(Source::Store(stores::open(settings, runtime)?))
        }
    }

    /// Says on stderr which server was read (unless `--quiet` or `--format json`): a reader
    /// never wonders whether it saw the store here or the team's.
    pub fn tell(&self, settings: &Global) {
        if let Source::Server(remote) = self {
            if !settings.quiet && !settings.json {
                stderr!("(on the server at {}, project `{}`)", remote.url, remote.project);
            }
        }
    }

    pub fn close(self, runtime: &tokio::runtime::Runtime) {
        if let Source::Store(store) = self {
            runtime.block_on(store.close());
        }
    }

    /// The datasets, by name.
    pub fn datasets(&self, runtime: &tokio::runtime::Runtime) -> anyhow::Result<Vec<DatasetInfo>> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.datasets())?),
            Source::Server(remote) => {
                let path = format!("/api/v1/projects/{}/datasets", segment(&remote.project));
                let list: Vec<casebook_server::api::Dataset> = runtime.block_on(remote.get_json(&path))?;
                list.into_iter()
                    .map(|d| {
                        let header = serde_json::from_value(d.header)
                            .map_err(|e| anyhow::anyhow!("the server's dataset header is not casebook's: {e}"))?;
                        Ok(DatasetInfo { name: d.name, head: d.head, cases: d.cases, header })
                    })
                    .collect()
            }
        }
    }

    /// The purged cases version `version` of `name` held (see `casebook purge`), which reads of
    /// it leave out. The server does not say yet: none there.
    pub fn purged_in(
        &self,
        runtime: &tokio::runtime::Runtime,
        name: &str,
        version: u64,
    ) -> anyhow::Result<Vec<casebook_store::PurgedCase>> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.purged_in(name, version))?),
            Source::Server(_) => Ok(Vec::new()),
        }
    }

    /// Warns on stderr (a JSON line with `--format json`) that version `version` of `name` held
    /// purged cases, which a read of it leaves out.
    pub fn warn_purged(
        &self,
        settings: &Global,
        runtime: &tokio::runtime::Runtime,
        name: &str,
        version: u64,
    ) -> anyhow::Result<Vec<casebook_store::PurgedCase>> {
        let purged = self.purged_in(runtime, name, version)?;
        if let (Some(text), false) = (casebook_store::purged_warning(name, version, &purged), settings.quiet) {
            if settings.json {
                stderr!("{}", serde_json::json!({"level": "warning", "code": "W-purged", "message": text}));
            } else {
                stderr!("warning: {text}");
            }
        }
        Ok(purged)
    }

    /// The versions of dataset `name`, oldest first.
    pub fn versions(&self, runtime: &tokio::runtime::Runtime, name: &str) -> anyhow::Result<Vec<VersionInfo>> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.versions(name))?),
            Source::Server(remote) => {
                let log: casebook_server::api::Log =
                    runtime.block_on(remote.get_json(&remote.dataset_path(name, "/versions")))?;
                Ok(log.versions.into_iter().map(|v| v.into_info(name)).collect())
            }
        }
    }

    /// The version `reference` names.
    pub fn resolve(
        &self,
        runtime: &tokio::runtime::Runtime,
        name: &str,
        reference: &Ref,
    ) -> anyhow::Result<VersionInfo> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.resolve(name, reference))?),
            Source::Server(remote) => {
                let path = remote.dataset_path(name, &format!("/versions/{}", segment(&reference.to_string())));
                let v: casebook_server::api::Version = runtime.block_on(remote.get_json(&path))?;
                Ok(v.into_info(name))
            }
        }
    }

    /// Case `id` as version `number` has it, if it does.
    pub fn case(
        &self,
        runtime: &tokio::runtime::Runtime,
        name: &str,
        number: u64,
        id: &str,
    ) -> anyhow::Result<Option<Case>> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.case(name, number, id))?),
            Source::Server(remote) => {
                let path = remote.dataset_path(name, &format!("/versions/v{number}/cases/{}", segment(id)));
                match runtime.block_on(remote.get_json(&path)) {
                    Ok(case) => Ok(Some(case)),
                    // The version exists (it was resolved): a 404 is the case's absence.
                    Err(RemoteError::Refused(404, _)) => Ok(None),
                    Err(err) => Err(err.into()),
                }
            }
        }
    }

    pub fn header(&self, runtime: &tokio::runtime::Runtime, name: &str) -> anyhow::Result<DatasetHeader> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.header(name))?),
            Source::Server(remote) => {
                let dataset: casebook_server::api::Dataset =
                    runtime.block_on(remote.get_json(&remote.dataset_path(name, "")))?;
                Ok(serde_json::from_value(dataset.header)
                    .map_err(|e| anyhow::anyhow!("the server's dataset header is not casebook's: {e}"))?)
            }
        }
    }

    /// The contents case `id` has had, oldest first (none if it never was in the dataset).
    pub fn history(&self, runtime: &tokio::runtime::Runtime, name: &str, id: &str) -> anyhow::Result<Vec<Revision>> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.history(name, id))?),
            Source::Server(remote) => {
                let path = remote.dataset_path(name, &format!("/cases/{}/history", segment(id)));
                let history: casebook_server::api::History = match runtime.block_on(remote.get_json(&path)) {
                    Ok(history) => history,
                    // The dataset exists and the case never was in it: as the store says it.
                    Err(RemoteError::Refused(404, e)) if e.message.contains("never had a case") => {
                        return Ok(Vec::new());
                    }
                    Err(err) => return Err(err.into()),
                };
                Ok(history
                    .revisions
                    .into_iter()
                    .map(|r| Revision {
                        from_version: r.from_version,
                        to_version: r.to_version,
                        content_id: r.content_id,
                    })
                    .collect())
            }
        }
    }

    /// What changed from version `from` to version `to`.
    pub fn diff(&self, runtime: &tokio::runtime::Runtime, name: &str, from: u64, to: u64) -> anyhow::Result<Diff> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.diff(name, from, to))?),
            Source::Server(remote) => {
                let request = remote
                    .request(reqwest::Method::GET, &remote.dataset_path(name, "/diff"))
                    .query(&[("from", format!("v{from}")), ("to", format!("v{to}"))]);
                let out: casebook_server::api::DiffOut = runtime.block_on(remote.json(request))?;
                // Field changes read as they were written: an `old` of `null` is a value, an
                // absent one is no value.
                let modified = out
                    .modified
                    .iter()
                    .map(|m| ModifiedCase {
                        id: m["id"].as_str().unwrap_or_default().to_owned(),
                        changes: m["changes"]
                            .as_array()
                            .map(|changes| {
                                changes
                                    .iter()
                                    .map(|c| FieldChange {
                                        pointer: c["pointer"].as_str().unwrap_or_default().to_owned(),
                                        old: c.get("old").cloned(),
                                        new: c.get("new").cloned(),
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                    })
                    .collect();
                Ok(Diff { added: out.added, removed: out.removed, modified, moved: out.moved })
            }
        }
    }

    /// How many cases of version `number` `select` picks.
    pub fn count(
        &self,
        runtime: &tokio::runtime::Runtime,
        name: &str,
        number: u64,
        select: &Select,
    ) -> anyhow::Result<u64> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.count(name, number, select))?),
            Source::Server(remote) => {
                let mut request = remote
                    .request(reqwest::Method::GET, &remote.dataset_path(name, &format!("/versions/v{number}/count")));
                if let Some(filter) = &select.filter {
                    request = request.query(&[("where", filter.to_string())]);
                }
                let count: casebook_server::api::Count = runtime.block_on(remote.json(request))?;
                Ok(select.limit.map_or(count.count, |limit| count.count.min(limit)))
            }
        }
    }

    /// The native JSON of the cases of version `number` that `select` picks, in order, in
    /// batches to `each` (which returns `false` to stop); how many were passed on.
    pub fn bodies(
        &self,
        runtime: &tokio::runtime::Runtime,
        name: &str,
        number: u64,
        select: &Select,
        batch: usize,
        each: &mut dyn FnMut(Vec<String>) -> bool,
    ) -> anyhow::Result<u64> {
        match self {
            Source::Store(store) => Ok(runtime.block_on(store.bodies(name, number, select, batch, each))?),
            Source::Server(remote) => {
                let filter = select.filter.as_ref().map(ToString::to_string);
                let mut left = select.limit;
                let mut total = 0u64;
                remote.each_page(
                    runtime,
                    name,
                    number,
                    filter.as_deref(),
                    batch.min(SERVER_PAGE),
                    &mut |mut bodies| {
                        if let Some(left) = &mut left {
                            bodies.truncate(usize::try_from(*left).unwrap_or(usize::MAX));
                            *left -= bodies.len() as u64;
                        }
                        total += bodies.len() as u64;
                        Ok(!bodies.is_empty() && each(bodies) && left != Some(0))
                    },
                )?;
                Ok(total)
            }
        }
    }

    /// [`Source::bodies`] read into cases.
    pub fn cases(
        &self,
        runtime: &tokio::runtime::Runtime,
        name: &str,
        number: u64,
        select: &Select,
        batch: usize,
        each: &mut dyn FnMut(Vec<Case>) -> bool,
    ) -> anyhow::Result<u64> {
        if let Source::Store(store) = self {
            return Ok(runtime.block_on(store.cases(name, number, select, batch, each))?);
        }
        let mut failed = None;
        let total = self.bodies(runtime, name, number, select, batch, &mut |bodies| match bodies
            .iter()
            .map(|b| serde_json::from_str(b))
            .collect::<Result<Vec<Case>, _>>()
        {
            Ok(cases) => each(cases),
            Err(err) => {
                failed = Some(err);
                false
            }
        })?;
        match failed {
            Some(err) => Err(anyhow::anyhow!("the server sent a case that is not casebook's: {err}")),
            None => Ok(total),
        }
    }
}
