//! `casebook login`, `push` and `pull`: the VoltAgent flow against a casebook server.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use casebook_formats::{Format, SeedFiles, Syntax, Target};
use serde_json::json;

use crate::Outcome;
use crate::args::{LoginArgs, PullArgs, PushArgs};
use crate::output::Output;
use crate::progress::Progress;
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
        [] => anyhow::bail!("no file `{stem}.jsonl` (or .json, .yaml, .yml, .csv) here: name it with `--file PATH`"),
        many => anyhow::bail!(
            "several files could be dataset `{name}`: {}; name one with `--file PATH`",
            many.iter().map(|p| format!("`{}`", p.display())).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A dataset name as a file name: `/` and other separators become `_`.
fn file_stem(name: &str) -> String {
    name.chars().map(|c| if c == '/' || c == '\\' || c == '\0' { '_' } else { c }).collect()
}

/// The dataset a command works on: `--name` (or `CASEBOOK_DATASET`), else picked on a terminal.
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
        return Err(anyhow::Error::msg("name the dataset with `--name NAME` (or `CASEBOOK_DATASET`)"));
    }
    let datasets: Vec<casebook_server::api::Dataset> = runtime
        .block_on(remote.get_json(&format!("/api/v1/projects/{}/datasets", crate::remote::segment(&remote.project))))?;
    if datasets.is_empty() {
        anyhow::bail!(
            "project `{}` has no datasets yet: `casebook push --name NAME --file FILE` adds one",
            remote.project
        );
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
    let (name, _) = dataset_name(settings, &runtime, &remote, args.name)?;
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
    // The push builds on the head as it is now: if someone pushes meanwhile, it is refused.
    let head = match runtime
        .block_on(remote.get_json::<casebook_server::api::Version>(&remote.dataset_path(&name, "/versions/latest")))
    {
        Ok(v) => v.number,
        Err(crate::remote::RemoteError::Refused(404, _)) => 0,
        Err(e) => return Err(e.into()),
    };
    let message = args.message.unwrap_or_else(|| format!("push {}", file.display()));
    let stem = file.file_stem().unwrap_or_default().to_string_lossy().into_owned();
    let shown = format!("{}.{}", file_stem(&stem), syntax.name());
    let size = fs_err::metadata(&send)?.len();
    let report: casebook_server::api::ImportReport = runtime.block_on(async {
        let body = tokio::fs::File::open(&send).await?;
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
        let request = remote
            .request(reqwest::Method::POST, &remote.dataset_path(&name, "/import"))
            .query(&[
                ("format", format.name()),
                ("syntax", syntax.name()),
                ("filename", shown.as_str()),
                ("parent", format!("v{head}").as_str()),
                ("message", message.as_str()),
            ])
            .header("x-casebook-author", &settings.author)
            .header(reqwest::header::CONTENT_LENGTH, size)
            .body(reqwest::Body::wrap_stream(stream));
        let response = remote.send(request).await.map_err(|e| push_error(e, &name, head));
        bar.finish();
        let response = response?;
        response.json().await.context("the server's report is not JSON")
    })?;
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
    Ok(Outcome::Ok)
}

/// A refused push, said for this command.
fn push_error(err: crate::remote::RemoteError, name: &str, parent: u64) -> anyhow::Error {
    use crate::remote::RemoteError;
    match err {
        RemoteError::Refused(409, e) => anyhow::anyhow!(
            "dataset `{name}` moved on while this push was prepared: the server's head is v{}, the push was made on v{parent}; pull it (`casebook pull --name {name}`), merge, and push again",
            e.head.map_or("?".to_owned(), |h| h.to_string())
        ),
        RemoteError::Refused(413, e) => anyhow::anyhow!("the server refused the push as too large: {}", e.message),
        RemoteError::Refused(422, e) => {
            anyhow::anyhow!("the server refused the push: {} (request {})", e.message, e.request_id)
        }
        other => other.into(),
    }
}

/// The dataset and version whose content id starts with `id`, in whichever dataset it is.
async fn find_by_id(remote: &Remote, id: &str) -> anyhow::Result<(String, casebook_server::api::Version)> {
    let id = id.to_ascii_lowercase();
    let datasets: Vec<casebook_server::api::Dataset> =
        remote.get_json(&format!("/api/v1/projects/{}/datasets", crate::remote::segment(&remote.project))).await?;
    let mut found = Vec::new();
    for d in datasets {
        let log: casebook_server::api::Log = remote.get_json(&remote.dataset_path(&d.name, "/versions")).await?;
        found.extend(log.versions.into_iter().filter(|v| v.id.starts_with(&id)).map(|v| (d.name.clone(), v)));
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(anyhow::Error::msg(format!(
            "no version of project `{}` has an id starting with `{id}`",
            remote.project
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
            let (name, picked) = dataset_name(settings, &runtime, &remote, args.name.clone())?;
            let reference = match &args.version {
                Some(v) => v.clone(),
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
        .or_else(|| header.provenance.as_ref()?.format.as_deref()?.parse().ok())
        .or_else(first_case_format)
        .unwrap_or(Format::Casebook);
    let syntax = args.output.as_deref().and_then(Syntax::from_path).unwrap_or_else(|| {
        let source = header.provenance.as_ref().and_then(|p| p.layout.get("syntax")).and_then(|s| s.as_str());
        source
            .and_then(|s| Syntax::from_path(std::path::Path::new(&format!("x.{s}"))))
            .filter(|s| format.syntaxes().contains(s))
            .unwrap_or_else(|| format.syntax_for(None))
    });
    if !format.syntaxes().contains(&syntax) {
        return Err(anyhow::Error::msg(format!("`{format}` cannot be written as {}", syntax.name())));
    }
    let output =
        args.output.clone().unwrap_or_else(|| PathBuf::from(format!("{}.{}", file_stem(&name), syntax.name())));
    let settings_out = casebook_formats::ExportSettings {
        format,
        syntax,
        column_map: args.map.clone(),
        lossy: false,
        // Seed files are written beside the output; one there with other content is an error
        // that names `--inline-seeds`.
        seed_files: if args.inline_seeds { SeedFiles::Inline } else { SeedFiles::Write },
        place: format!("{name}@v{}", version.number),
        confirm_drafts: args.confirm_drafts,
    };
    // Pages of the version, as native JSON lines (checked to be one line each).
    let pages = |each: &mut dyn FnMut(Vec<String>) -> anyhow::Result<()>| -> anyhow::Result<()> {
        let mut cursor: Option<String> = None;
        loop {
            let mut path =
                remote.dataset_path(&name, &format!("/versions/v{}/cases?limit={}", version.number, args.page_size));
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let page: CasePage = runtime.block_on(remote.get_json(&path))?;
            let bodies: Vec<String> = page.cases.iter().map(|c| c.get().to_owned()).collect();
            if bodies.iter().any(|b| memchr::memchr2(b'\n', b'\r', b.as_bytes()).is_some()) {
                anyhow::bail!("the server sent a case that is not one line of JSON: nothing was written");
            }
            each(bodies)?;
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
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
    let text = if !output.exists() {
        file.keep()?;
        report("wrote", &output)
    } else if file.same_as(&output)? {
        report("up to date", &output)
    } else {
        let choice = if args.overwrite {
            0
        } else if args.save_as_new {
            1
        } else if args.cancel_on_conflict {
            2
        } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() && !settings.json {
            dialoguer::Select::new()
                .with_prompt(format!("`{}` differs from {place}", output.display()))
                .items(["overwrite it", &format!("save as `{}`", remote_name(&output).display()), "cancel"])
                .default(2)
                .interact()
                .context("nothing picked")?
        } else {
            return Err(anyhow::Error::msg(format!(
                "`{}` exists and differs from {place}: pass `--overwrite`, `--save-as-new` or `--cancel-on-conflict`",
                output.display()
            )));
        };
        match choice {
            0 => {
                file.keep()?;
                report("overwrote", &output)
            }
            1 => {
                let other = remote_name(&output);
                file.keep_as(&other)?;
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

/// `NAME-remote.EXT` beside `path`.
fn remote_name(path: &std::path::Path) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-remote.{}", ext.to_string_lossy()),
        None => format!("{stem}-remote"),
    };
    path.with_file_name(name)
}
