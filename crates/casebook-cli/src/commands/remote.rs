//! `casebook login`, `logout`, `push` and `pull`: the VoltAgent flow against a casebook server.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use casebook_formats::{Format, SeedFiles, Syntax, Target};
use serde_json::json;

use crate::Outcome;
use crate::args::{LoginArgs, LogoutArgs, PullArgs, PushArgs};
use crate::output::Output;
use crate::progress::Progress;
use crate::pulled::Pulled;
use crate::remote::{Credentials, Remote, save_credentials};
use crate::report::Reporter;
use crate::settings::Global;

pub fn login(settings: &Global, args: LoginArgs) -> anyhow::Result<Outcome> {
    let Some(url) = args.url else {
        anyhow::bail!("name the server: `casebook login http://HOST:PORT` (or set `CASEBOOK_URL`)");
    };
    let token = if args.token_stdin {
        let mut text = String::new();
        std::io::stdin().read_line(&mut text).context("cannot read the key from standard input")?;
        text.trim().to_owned()
    } else if let Ok(token) = std::env::var("CASEBOOK_TOKEN") {
        token
    } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        dialoguer::Password::new()
            .with_prompt(format!("API key for {url}"))
            .interact()
            .context("cannot read the key")?
    } else {
        anyhow::bail!("no API key: pass it on standard input with `--token-stdin`, or set `CASEBOOK_TOKEN`");
    };
    let runtime = crate::stores::runtime()?;
    let remote = runtime.block_on(Remote::with(url.clone(), token.clone()))?;
    let path = save_credentials(&Credentials { url: remote.url.clone(), token })?;
    crate::write_stdout(&if settings.json {
        format!("{}\n", json!({"url": remote.url, "project": remote.project, "saved": path}))
    } else {
        format!("logged in to {} (project `{}`); the key is saved in {}\n", remote.url, remote.project, path.display())
    })?;
    Ok(Outcome::Ok)
}

/// `casebook logout [URL]`: forgets the server and key `login` saved. With a URL, only when the
/// key saved is for that server. Nothing saved is not an error.
pub fn logout(settings: &Global, args: LogoutArgs) -> anyhow::Result<Outcome> {
    let path = crate::remote::credentials_path()?;
    let saved = crate::remote::saved_credentials();
    let asked = args.url.as_deref().map(|url| url.trim_end_matches('/'));
    let message = match (&saved, asked) {
        (Some(saved), Some(asked)) if saved.url.trim_end_matches('/') != asked => {
            let message = format!(
                "no key saved for {asked}: the one saved is for {}; nothing removed (`casebook logout` forgets it)",
                saved.url
            );
            return say(settings, json!({"forgot": null, "saved": saved.url}), message);
        }
        (Some(saved), _) => {
            crate::remote::forget_credentials()?;
            (
                json!({"forgot": saved.url, "removed": path}),
                format!("logged out of {}: removed {}", saved.url, path.display()),
            )
        }
        // A file casebook cannot read is still what `login` would replace: remove it.
        (None, _) if crate::remote::forget_credentials()?.is_some() => (
            json!({"forgot": null, "removed": path}),
            format!("removed {} (it held no server casebook could read)", path.display()),
        ),
        (None, _) => (json!({"forgot": null}), format!("not logged in: no key is saved in {}", path.display())),
    };
    say(settings, message.0, message.1)
}

/// Prints `human` on stdout, or `json` with `--format json`.
fn say(settings: &Global, json: serde_json::Value, human: String) -> anyhow::Result<Outcome> {
    crate::write_stdout(&if settings.json { format!("{json}\n") } else { format!("{human}\n") })?;
    Ok(Outcome::Ok)
}

/// The file `push` sends when none is named: the one `NAME.{jsonl,json,yaml,yml,csv}` here.
fn default_file(name: &str) -> anyhow::Result<PathBuf> {
    let stem = file_stem(name);
    let found: Vec<PathBuf> = ["jsonl", "json", "yaml", "yml", "csv"]
        .iter()
        .map(|ext| PathBuf::from(format!("{stem}.{ext}")))
        .filter(|p| p.is_file())
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => anyhow::bail!("no file `{stem}.jsonl` (or .json, .yaml, .yml, .csv) here: name it: `casebook push FILE`"),
        many => anyhow::bail!(
            "several files could be dataset `{name}`: {}; name one: `casebook push FILE`",
            many.iter().map(|p| format!("`{}`", p.display())).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A dataset name as a file name: `/` and other separators become `_`.
fn file_stem(name: &str) -> String {
    name.chars().map(|c| if c == '/' || c == '\\' || c == '\0' { '_' } else { c }).collect()
}

/// The dataset a command works on: `--dataset` (or `CASEBOOK_DATASET`), else picked on a terminal.
fn dataset_name(
    settings: &Global,
    runtime: &tokio::runtime::Runtime,
    remote: &Remote,
    name: Option<String>,
) -> anyhow::Result<(String, bool)> {
    if let Some(name) = name {
        return Ok((name, false));
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) || settings.json {
        return Err(anyhow::Error::msg("name the dataset with `--dataset NAME` (or `CASEBOOK_DATASET`)"));
    }
    let datasets: Vec<casebook_server::api::Dataset> = runtime
        .block_on(remote.get_json(&format!("/api/v1/projects/{}/datasets", crate::remote::segment(&remote.project))))?;
    if datasets.is_empty() {
        anyhow::bail!("project `{}` has no datasets yet: `casebook push FILE --dataset NAME` adds one", remote.project);
    }
    let items: Vec<String> = datasets
        .iter()
        .map(|d| format!("{}  ({}, {})", d.name, crate::plural(d.head, "version"), crate::plural(d.cases, "case")))
        .collect();
    let at = dialoguer::Select::new()
        .with_prompt(format!("dataset of project `{}`", remote.project))
        .items(&items)
        .default(0)
        .interact()
        .context("no dataset picked")?;
    Ok((datasets[at].name.clone(), true))
}

/// Reads a file to check it, telling its problems.
struct Check {
    start: Option<(Format, Syntax)>,
    reporter: Reporter,
    progress: Progress,
    cases: u64,
}

impl casebook_formats::Consumer<()> for Check {
    fn start(&mut self, start: &casebook_formats::Start) -> casebook_formats::Flow {
        self.start = Some((start.format, start.syntax));
        casebook_formats::Flow::Continue
    }

    fn batch(&mut self, batch: &mut casebook_formats::Batch, _: &mut ()) -> casebook_formats::Flow {
        for d in &batch.diagnostics {
            self.reporter.emit(d);
        }
        self.cases += batch.cases.len() as u64;
        self.progress.set(batch.end_offset, self.cases);
        casebook_formats::Flow::Continue
    }
}

pub fn push(settings: &Global, args: PushArgs) -> anyhow::Result<Outcome> {
    let runtime = crate::stores::runtime()?;
    let remote = runtime.block_on(Remote::connect())?;
    let (name, _) = dataset_name(settings, &runtime, &remote, args.dataset)?;
    let file = match args.file {
        Some(file) => file,
        None => default_file(&name)?,
    };
    super::check_exists(&file)?;
    // The file is checked here first: its problems are told against it, and nothing is sent.
    let input = super::input(&file);
    let opts = super::read_options(&args.read);
    let mut check = Check {
        start: None,
        reporter: Reporter::new(settings, true),
        progress: Progress::for_file(settings, input.path.as_deref()),
        cases: 0,
    };
    let summary = casebook_formats::read(&input, &opts, &|_: &casebook_formats::Batch| (), &mut check)
        .with_context(|| format!("cannot read `{}`", file.display()))?;
    check.progress.finish();
    if summary.errors > 0 {
        if !settings.quiet {
            let n = summary.errors;
            stderr!("nothing was pushed: `{}` has {n} error{}", file.display(), if n == 1 { "" } else { "s" });
        }
        return Ok(Outcome::Invalid);
    }
    let Some((format, syntax)) = check.start else { anyhow::bail!("cannot read `{}`", file.display()) };
    // The server reads what is sent as `casebook import` reads the file here. A mas-lab
    // manifest may name other files (its items, seed files), which the server cannot see: it
    // goes as native JSON lines with those files inside, and so does a file read through a
    // column map. Any other file goes as it is.
    let spool;
    let (send, format, syntax) = if format == Format::Maslab || args.read.map.is_some() {
        let target = Target {
            format: Format::Casebook,
            syntax: Syntax::Jsonl,
            lossy: false,
            column_map: args.read.map.clone(),
            seed_files: SeedFiles::Keep,
            // Native JSONL holds `review`.
            confirm_drafts: false,
        };
        spool = tempfile::NamedTempFile::new().context("cannot make a temporary file for the push")?;
        let out = spool.reopen().context("cannot make a temporary file for the push")?;
        casebook_formats::convert(
            &input,
            &opts,
            &target,
            Vec::new(),
            Box::new(std::io::BufWriter::with_capacity(1 << 20, out)),
            None,
            &mut |_, _| {},
        )
        .with_context(|| format!("cannot read `{}`", file.display()))?;
        (spool.path().to_owned(), Format::Casebook, Syntax::Jsonl)
    } else {
        (file.clone(), format, syntax)
    };
    // A file that `pull` wrote is merged onto the head by the server from the version it
    // holds: what changed on the server since is kept. Any other file, or with `--force`,
    // replaces the head as it is now: if someone pushes meanwhile, it is refused.
    let recorded = match Pulled::load(&file) {
        Some(r) if r.is_of(&remote.url, &remote.project, &name) => Some(r),
        Some(r) => {
            if !settings.quiet {
                stderr!(
                    "note: `{}` was pulled from dataset `{}` of project `{}` on {}: it replaces the head of `{name}` as a whole",
                    file.display(),
                    r.dataset,
                    r.project,
                    r.server
                );
            }
            None
        }
        None => None,
    };
    let base = recorded.clone().filter(|_| !args.force);
    let head = match &base {
        Some(_) => None,
        None => match runtime
            .block_on(remote.get_json::<casebook_server::api::Version>(&remote.dataset_path(&name, "/versions/latest")))
        {
            Ok(v) => Some(v.number),
            Err(crate::remote::RemoteError::Refused(404, _)) => Some(0),
            Err(e) => return Err(e.into()),
        },
    };
    let message = args.message.unwrap_or_else(|| format!("push {}", file.display()));
    let stem = file.file_stem().unwrap_or_default().to_string_lossy().into_owned();
    let shown = format!("{}.{}", file_stem(&stem), syntax.name());
    let onto = match (&base, head) {
        (Some(base), _) => Onto::Base(base.id.clone()),
        (None, head) => Onto::Parent(head.unwrap_or(0)),
    };
    let except = match base.as_ref().filter(|b| !b.except.is_empty()) {
        Some(base) => Some(serde_json::to_string(&base.except)?),
        None => None,
    };
    let sending = Sending {
        file: &send,
        format,
        syntax,
        shown: &shown,
        onto,
        except: except.as_deref(),
        upsert: false,
        message: &message,
    };
    let report = match send_import(settings, &runtime, &remote, &name, &sending)? {
        Ok(report) => report,
        Err(crate::remote::RemoteError::Refused(409, e)) if e.code == "merge-conflict" => {
            return merge_conflict(settings, &name, &file, base.as_ref(), e);
        }
        Err(e) => return Err(push_error(e, &name, head, base.as_ref(), &file)),
    };
    // A pulled file is now the version made (or the head that had its content), except for the
    // cases kept from the head, which it holds as it had them: its next push builds on that
    // version with those exceptions. (A file never pulled gets no record: a push writes nothing
    // beside the file it sends.) An older server does not list the cases it kept.
    let mut stale = false;
    if let (Some(v), Some(_)) = (&report.version, &recorded) {
        let listed = report.kept_cases.len() as u64 == report.kept;
        if listed && serde_json::to_string(&report.kept_cases)?.len() <= MOST_EXCEPTIONS {
            Pulled::of(&remote, &name, v, report.kept_cases.clone()).save_or_warn(&file, settings.quiet);
        } else {
            stale = true;
        }
    }
    let text = match (&report.version, report.created) {
        _ if settings.json => format!("{}\n", serde_json::to_string(&report)?),
        (Some(v), true) => format!(
            "pushed {name} v{} ({}) to {}: {}, +{} -{} ~{}\n",
            v.number,
            &v.id[..12.min(v.id.len())],
            remote.url,
            crate::plural(v.cases, "case"),
            v.added,
            v.removed,
            v.modified
        ),
        (Some(v), false) => {
            format!("up to date: {name} v{} on {} already has this content; no version made\n", v.number, remote.url)
        }
        (None, _) => "up to date: no version made\n".to_owned(),
    };
    crate::write_stdout(&text)?;
    let ids = casebook_formats::Summary {
        derived_ids: report.derived_ids,
        positional_ids: report.positional_ids,
        ..casebook_formats::Summary::default()
    };
    if let (Some(note), false) = (ids.derived_ids_note(), settings.quiet) {
        stderr!("note: {note}");
    }
    if let (Some(base), false, n @ 1..) = (&base, settings.quiet, report.kept) {
        stderr!(
            "kept {} changed on the server since v{} that `{}` does not have: `casebook pull --dataset {name} --overwrite` brings {} into the file",
            crate::plural(n, "case"),
            base.version,
            file.display(),
            if n == 1 { "it" } else { "them" }
        );
        if stale {
            stderr!(
                "note: the cases kept are not recorded beside `{}` (too many, or the server does not list them): its next push merges from v{} again, where the cases pushed now count as changed on both sides; pull before editing them again",
                file.display(),
                base.version
            );
        }
    }
    Ok(Outcome::Ok)
}

/// What a sent file builds on: the version it was made from (a content id), merged onto the
/// head (what changed there since is kept, or is a conflict); or the version that must still be
/// the head when it commits (`v0` for a new dataset).
pub(crate) enum Onto {
    Base(String),
    Parent(u64),
}

/// A file to send to a dataset's import on the server.
pub(crate) struct Sending<'a> {
    pub file: &'a std::path::Path,
    pub format: Format,
    pub syntax: Syntax,
    /// The name the server's diagnostics give the file.
    pub shown: &'a str,
    pub onto: Onto,
    /// With `Onto::Base`: the cases the file holds otherwise than that version (id → the
    /// content id it holds, or null when it lacks the case), as JSON ([`Pulled::except`]).
    pub except: Option<&'a str>,
    /// Whether the file's cases are added to the version or replace those with their ids
    /// (`true`), or the file is the whole next version.
    pub upsert: bool,
    pub message: &'a str,
}

/// Sends a file to the import of dataset `name` (with a progress bar), as `push` does and
/// `freeze` on a server: the server's report, or its refusal (a `merge-conflict` among them)
/// for the caller to tell in its own words.
pub(crate) fn send_import(
    settings: &Global,
    runtime: &tokio::runtime::Runtime,
    remote: &Remote,
    name: &str,
    sending: &Sending<'_>,
) -> anyhow::Result<Result<casebook_server::api::ImportReport, crate::remote::RemoteError>> {
    let size = fs_err::metadata(sending.file)?.len();
    runtime.block_on(async {
        let body = tokio::fs::File::open(sending.file).await?;
        let bar = Progress::counting(settings, size, true, "sending");
        let sent = bar.clone();
        let stream = futures_util::stream::try_unfold(body, move |mut body| {
            let sent = sent.clone();
            async move {
                use tokio::io::AsyncReadExt;
                let mut chunk = vec![0u8; 1 << 20];
                let n = body.read(&mut chunk).await?;
                if n == 0 {
                    return Ok::<_, std::io::Error>(None);
                }
                chunk.truncate(n);
                sent.add(n as u64);
                Ok(Some((chunk, body)))
            }
        });
        let on = match &sending.onto {
            Onto::Base(id) => ("base", id.clone()),
            Onto::Parent(head) => ("parent", format!("v{head}")),
        };
        let mut query = vec![
            ("format", sending.format.name()),
            ("syntax", sending.syntax.name()),
            ("filename", sending.shown),
            (on.0, on.1.as_str()),
            ("mode", if sending.upsert { "upsert" } else { "replace" }),
            ("message", sending.message),
        ];
        if let Some(except) = sending.except {
            query.push(("base_except", except));
        }
        let request = remote
            .request(reqwest::Method::POST, &remote.dataset_path(name, "/import"))
            .query(&query)
            .header("x-casebook-author", &settings.author)
            .header(reqwest::header::CONTENT_LENGTH, size)
            .body(reqwest::Body::wrap_stream(stream));
        let response = remote.send(request).await;
        bar.finish();
        match response {
            Ok(response) => Ok(Ok(response.json().await.context("the server's report is not JSON")?)),
            Err(e) => Ok(Err(e)),
        }
    })
}

/// The most text (JSON) of cases a record keeps as held otherwise by the file than its version
/// ([`Pulled::except`]): the next push sends them in its URL, percent-encoded (at most three
/// times as long), and a server reads request heads of a few hundred KiB.
const MOST_EXCEPTIONS: usize = 64 * 1024;

/// Cases changed both in the file and on the server since the version the file was pulled at:
/// nothing was pushed (exit 1), and the ids are told.
fn merge_conflict(
    settings: &Global,
    name: &str,
    file: &std::path::Path,
    base: Option<&Pulled>,
    conflict: crate::remote::ServerError,
) -> anyhow::Result<Outcome> {
    let head = conflict.head.map_or("?".to_owned(), |h| h.to_string());
    let since = base.map_or("?".to_owned(), |b| b.version.to_string());
    if settings.json {
        crate::write_stdout(&format!(
            "{}\n",
            json!({"pushed": false, "conflicts": conflict.conflicts, "base": base.map(|b| b.version), "head": conflict.head})
        ))?;
    }
    if !settings.quiet {
        let n = conflict.conflicts.len();
        let shown: Vec<String> =
            conflict.conflicts.iter().take(20).map(|id| format!("`{}`", casebook_model::excerpt(id))).collect();
        let more = if n > 20 { format!(" and {} more", n - 20) } else { String::new() };
        // A file that holds some cases older than its version (kept from the server by its
        // last push) started from that older content for them.
        let since = match base {
            Some(b) if !b.except.is_empty() => "the file last had the server's content for them".to_owned(),
            _ => format!("v{since}, the version the file was pulled at"),
        };
        stderr!(
            "nothing was pushed: `{}` and {name}@v{head} both changed {} {}{more} since {since}",
            file.display(),
            if n == 1 { "case" } else { "cases" },
            shown.join(", ")
        );
        stderr!(
            "hint: `casebook pull --dataset {name} --save-as-new` writes v{head} beside the file; merge it by hand, then `casebook push --force` replaces the head with the file"
        );
    }
    Ok(Outcome::Invalid)
}

/// A refused push, said for this command: made on version `parent` (read before sending) or
/// merging from `base` (the record beside `file`).
fn push_error(
    err: crate::remote::RemoteError,
    name: &str,
    parent: Option<u64>,
    base: Option<&Pulled>,
    file: &std::path::Path,
) -> anyhow::Error {
    use crate::remote::RemoteError;
    let made_on = parent.map_or_else(|| "the head the server read".to_owned(), |p| format!("v{p}"));
    match err {
        RemoteError::Refused(409, e) => anyhow::anyhow!(
            "dataset `{name}` moved on while this push was prepared: the server's head is v{}, the push was made on {made_on}; pull it (`casebook pull --dataset {name}`), merge, and push again",
            e.head.map_or("?".to_owned(), |h| h.to_string())
        ),
        RemoteError::Refused(404, e) if base.is_some() && e.message.starts_with("`base`") => anyhow::anyhow!(
            "the server has no version {} of `{name}`, which `{}` was pulled at ({}): push with `--force` to replace the head with the file",
            base.map_or(String::new(), |b| format!("v{}", b.version)),
            file.display(),
            crate::pulled::Pulled::path_for(file).display()
        ),
        RemoteError::Refused(413, e) => anyhow::anyhow!("the server refused the push as too large: {}", e.message),
        RemoteError::Refused(422, e) => {
            anyhow::anyhow!("the server refused the push: {} (request {})", e.message, e.request_id)
        }
        other => other.into(),
    }
}

/// The dataset and version whose content id starts with `id` (at least
/// [`casebook_store::names::MIN_PREFIX`] digits, as every reference), in whichever dataset it
/// is. Datasets whose names no URL path can carry (`.`, `..`, made by an older casebook) are
/// passed over, so that they do not stop the search in the others.
async fn find_by_id(remote: &Remote, id: &str) -> anyhow::Result<(String, casebook_server::api::Version)> {
    let id = match id.parse::<casebook_store::Ref>() {
        Ok(casebook_store::Ref::Id(id)) => id,
        _ => {
            return Err(anyhow::Error::msg(format!(
                "`{id}` is not a content id: `--id` takes a version's id, or at least its first {} hexadecimal digits",
                casebook_store::names::MIN_PREFIX
            )));
        }
    };
    let datasets: Vec<casebook_server::api::Dataset> =
        remote.get_json(&format!("/api/v1/projects/{}/datasets", crate::remote::segment(&remote.project))).await?;
    let mut found = Vec::new();
    let mut unreachable = Vec::new();
    for d in datasets {
        if !casebook_server::path_can_carry(&d.name) {
            unreachable.push(format!("`{}`", d.name));
            continue;
        }
        let log: casebook_server::api::Log = remote.get_json(&remote.dataset_path(&d.name, "/versions")).await?;
        found.extend(log.versions.into_iter().filter(|v| v.id.starts_with(&id)).map(|v| (d.name.clone(), v)));
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 if unreachable.is_empty() => Err(anyhow::Error::msg(format!(
            "no version of project `{}` has an id starting with `{id}`",
            remote.project
        ))),
        0 => Err(anyhow::Error::msg(format!(
            "no version of project `{}` has an id starting with `{id}` (not searched: the datasets {}, whose names cannot be part of a URL; `casebook export` reads them in the server's store)",
            remote.project,
            unreachable.join(", ")
        ))),
        _ => Err(anyhow::Error::msg(format!(
            "`{id}` names several versions: {}; give more of the id",
            found.iter().map(|(n, v)| format!("{n}@v{}", v.number)).collect::<Vec<_>>().join(", ")
        ))),
    }
}

pub fn pull(settings: &Global, args: PullArgs) -> anyhow::Result<Outcome> {
    use casebook_server::api::{CasePage, Dataset, Log, Version};
    let runtime = crate::stores::runtime()?;
    let remote = runtime.block_on(Remote::connect())?;
    if args.page_size == 0 {
        return Err(anyhow::Error::msg("`--page-size` must be at least 1"));
    }
    let (name, version) = match &args.id {
        Some(id) => runtime.block_on(find_by_id(&remote, id))?,
        None => {
            // `NAME@REF`: the REF goes to the server as written (names hold no `@`).
            let (named, reference) = match args.dataset.as_deref().map(|d| d.rsplit_once('@')) {
                Some(Some((name, reference))) => (Some(name.to_owned()), Some(reference.to_owned())),
                _ => (args.dataset.clone(), args.version.clone()),
            };
            if named.as_deref() == Some("") {
                anyhow::bail!(
                    "`--dataset {}` names no dataset: write `NAME@REF`, e.g. `support@v3`",
                    args.dataset.as_deref().unwrap_or_default()
                );
            }
            let (name, picked) = dataset_name(settings, &runtime, &remote, named)?;
            let reference = match reference {
                Some(v) => v,
                None if picked => {
                    let log: Log = runtime.block_on(remote.get_json(&remote.dataset_path(&name, "/versions")))?;
                    let items: Vec<String> = log
                        .versions
                        .iter()
                        .rev()
                        .map(|v| {
                            format!("v{}  {}  {}  {}", v.number, crate::plural(v.cases, "case"), v.time, v.message)
                        })
                        .collect();
                    let at = dialoguer::Select::new()
                        .with_prompt(format!("version of `{name}`"))
                        .items(&items)
                        .default(0)
                        .interact()
                        .context("no version picked")?;
                    format!("v{}", log.versions[log.versions.len() - 1 - at].number)
                }
                None => "latest".to_owned(),
            };
            let path = remote.dataset_path(&name, &format!("/versions/{}", crate::remote::segment(&reference)));
            let version: Version = runtime.block_on(remote.get_json(&path))?;
            (name, version)
        }
    };
    let dataset: Dataset = runtime.block_on(remote.get_json(&remote.dataset_path(&name, "")))?;
    let header: casebook_model::DatasetHeader =
        serde_json::from_value(dataset.header).context("the server's dataset header is not casebook's")?;
    // The format: asked for, else the one the dataset came in (its header's, or for formats
    // without a header its first case's), else casebook's.
    let first_case_format = || -> Option<Format> {
        let path = remote.dataset_path(&name, &format!("/versions/v{}/cases?limit=1", version.number));
        let page: CasePage = runtime.block_on(remote.get_json(&path)).ok()?;
        let case: serde_json::Value = serde_json::from_str(page.cases.first()?.get()).ok()?;
        case["provenance"]["format"].as_str()?.parse().ok()
    };
    let format = args
        .to
        .map(|to| to.format)
        .or_else(|| header.provenance.as_ref()?.format.as_deref()?.parse().ok())
        .or_else(first_case_format)
        .unwrap_or(Format::Casebook);
    let syntax =
        args.to.and_then(|to| to.syntax).or_else(|| args.output.as_deref().and_then(Syntax::from_path)).unwrap_or_else(
            || {
                let source = header.provenance.as_ref().and_then(|p| p.layout.get("syntax")).and_then(|s| s.as_str());
                source
                    .and_then(|s| Syntax::from_path(std::path::Path::new(&format!("x.{s}"))))
                    .filter(|s| format.syntaxes().contains(s))
                    .unwrap_or_else(|| format.syntax_for(None))
            },
        );
    if !format.syntaxes().contains(&syntax) {
        return Err(anyhow::Error::msg(format!("`{format}` cannot be written as {}", syntax.name())));
    }
    let output =
        args.output.clone().unwrap_or_else(|| PathBuf::from(format!("{}.{}", file_stem(&name), syntax.name())));
    let settings_out = casebook_formats::ExportSettings {
        format,
        syntax,
        column_map: args.map.clone(),
        lossy: args.lossy,
        // Seed files are written beside the output; one there with other content is an error
        // that names `--inline-seeds`.
        seed_files: if args.inline_seeds { SeedFiles::Inline } else { SeedFiles::Write },
        place: format!("{name}@v{}", version.number),
        confirm_drafts: args.confirm_drafts,
    };
    // Pages of the version, as native JSON lines.
    let pages = |each: &mut dyn FnMut(Vec<String>) -> anyhow::Result<()>| -> anyhow::Result<()> {
        remote
            .each_page(&runtime, &name, version.number, None, args.page_size, &mut |bodies| each(bodies).map(|()| true))
    };
    let mut columns = Vec::new();
    if settings_out.needs_columns() {
        let mut scan = casebook_formats::CsvColumns::new(&settings_out);
        pages(&mut |bodies| {
            let cases = bodies.iter().map(|b| serde_json::from_str(b)).collect::<Result<Vec<_>, _>>()?;
            scan.add(&cases);
            Ok(())
        })?;
        columns = scan.ordered(&header);
    }
    crate::output::remove_on_signals();
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs_err::create_dir_all(dir)?;
    }
    let (file, out) = Output::create(Some(&output))?;
    let mut exporter = casebook_formats::Exporter::new(settings_out, &header, columns, out, file.beside())?;
    exporter.begin()?;
    let mut reporter = Reporter::new(settings, true);
    let mut errors = 0u64;
    let bar = Progress::counting(settings, version.cases, false, "fetching");
    pages(&mut |bodies| {
        bar.add(bodies.len() as u64);
        for d in exporter.bodies(&bodies)? {
            errors += u64::from(d.is_error());
            reporter.emit(&d);
        }
        Ok(())
    })?;
    bar.finish();
    let exported = exporter.finish()?;
    for d in &exported.diagnostics {
        errors += u64::from(d.is_error());
        reporter.emit(d);
    }
    let place = format!("{name}@v{}", version.number);
    if errors > 0 {
        if !settings.quiet {
            stderr!("nothing was written: {place} cannot be written as `{format}` ({errors} errors)");
        }
        return Ok(Outcome::Invalid);
    }
    let report = |what: &str, path: &std::path::Path| {
        if settings.json {
            format!("{}\n", json!({"dataset": name, "version": version, "output": path, "result": what}))
        } else if what == "up to date" {
            format!("up to date: `{}` is {place}\n", path.display())
        } else {
            format!("{what} `{}`: {place}, {} ({format})\n", path.display(), crate::plural(exported.cases, "case"))
        }
    };
    let record = Pulled::of(&remote, &name, &version, Default::default());
    let text = if !output.exists() {
        file.keep()?;
        record.save_or_warn(&output, settings.quiet);
        report("wrote", &output)
    } else if holds_version(&output, &record, &file, format, syntax, args.map.as_ref())? {
        // The file is left as it is; the record says which version it holds.
        record.save_or_warn(&output, settings.quiet);
        report("up to date", &output)
    } else {
        // The writers' rule (`output::may_write`), after what only `pull` can tell: a file that
        // holds the version already, and the other ways out of a file that differs.
        let choice = if args.save_as_new {
            1
        } else if args.cancel_on_conflict {
            2
        } else if args.overwrite || !crate::output::ask(settings) {
            let others = format!(
                " (or `--save-as-new` to write `{}` beside it, or `--cancel-on-conflict` to write nothing)",
                remote_name(&output).display()
            );
            let state = format!("exists and differs from {place}");
            crate::output::may_replace(settings, &output, &[], args.overwrite, &state, &others)?;
            0
        } else {
            dialoguer::Select::new()
                .with_prompt(format!("`{}` differs from {place}", output.display()))
                .items(["overwrite it", &format!("save as `{}`", remote_name(&output).display()), "cancel"])
                .default(2)
                .interact()
                .context("nothing picked")?
        };
        match choice {
            0 => {
                file.keep()?;
                record.save_or_warn(&output, settings.quiet);
                report("overwrote", &output)
            }
            1 => {
                let other = remote_name(&output);
                file.keep_as(&other)?;
                record.save_or_warn(&other, settings.quiet);
                report("wrote", &other)
            }
            _ => {
                if !settings.quiet {
                    stderr!("cancelled: `{}` differs from {place} and was left as it is", output.display());
                }
                return Ok(Outcome::Invalid);
            }
        }
    };
    crate::write_stdout(&text)?;
    Ok(Outcome::Ok)
}

/// Whether the file at `path` holds the version `record` names, as the file just written for it
/// (`written`) does: unedited since a pull of that version recorded its hash, byte for byte the
/// same, or the same cases with the same values laid out otherwise (re-indented, keys
/// reordered, another line ending).
fn holds_version(
    path: &std::path::Path,
    record: &Pulled,
    written: &Output,
    format: Format,
    syntax: Syntax,
    map: Option<&casebook_formats::ColumnMap>,
) -> anyhow::Result<bool> {
    let recorded = Pulled::load(path).filter(|r| r.is_of(&record.server, &record.project, &record.dataset));
    // A file recorded with exceptions holds other cases than its version.
    let unedited = |r: Pulled| r.except.is_empty() && crate::pulled::file_hash(path).ok() == Some(r.file_hash);
    if recorded.is_some_and(|r| r.id == record.id && unedited(r)) {
        return Ok(true);
    }
    if written.same_as(path)? {
        return Ok(true);
    }
    let Some(new) = written.written() else { return Ok(false) };
    let options = casebook_formats::ReadOptions { column_map: map.cloned(), ..Default::default() };
    let theirs = crate::pulled::cases_digest(new, format, syntax, &options);
    Ok(theirs.is_some() && theirs == crate::pulled::cases_digest(path, format, syntax, &options))
}

/// `NAME-remote.EXT` beside `path`.
fn remote_name(path: &std::path::Path) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-remote.{}", ext.to_string_lossy()),
        None => format!("{stem}-remote"),
    };
    path.with_file_name(name)
}
