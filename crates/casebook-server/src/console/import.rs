//! Bulk import from the console: a file pasted or uploaded is read as `casebook import` reads
//! it, and the page shows its detected format, every diagnostic with its line and column, and
//! the cases it would add, change and remove, before anything is written. Confirming commits
//! the file that was previewed (kept on the server under a random token) on the version the
//! preview was made against.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::extract::Form;
use crate::extract::Path;
use askama::Template;
use axum::extract::{Multipart, State};
use axum::http::StatusCode;
use casebook_formats::{Batch, Consumer, Flow, Format, Input, ReadOptions, Start, Syntax};
use casebook_model::Case;
use casebook_store::{AnyStore, CommitMode, CommitOutcome, IngestEvent, IngestRequest, Parent, Ref, Select, Store};
use serde::Deserialize;

use super::browse::DatasetPath;
use super::page::{Chrome, Failure, PageResult, case_url, dataset_url, html, see_other};
use super::session::{Viewer, random_hex};
use crate::AppState;

/// How long a previewed file waits for its confirmation.
const KEPT: Duration = Duration::from_secs(3600);
/// Previewed files one key keeps at most; a preview beyond it forgets that key's oldest. Per
/// key and per project, so one project's previews never forget another's (one server-wide cap
/// let 64 previews by project b make a's confirmation answer 410).
const MOST_KEPT_PER_KEY: usize = 16;
/// Previewed files one project keeps at most, all its keys together.
const MOST_KEPT_PER_PROJECT: usize = 64;
/// Diagnostics and ids a preview lists.
const SHOWN: usize = 200;

/// Files previewed and not yet confirmed, by token.
#[derive(Default)]
pub struct Uploads {
    kept: Mutex<HashMap<String, Upload>>,
}

struct Upload {
    folder: Arc<tempfile::TempDir>,
    file: std::path::PathBuf,
    shown: String,
    key: String,
    project: String,
    dataset: String,
    at: Instant,
}

impl Uploads {
    fn keep(&self, upload: Upload) -> Result<String, Failure> {
        let token = random_hex().map_err(Failure::internal)?;
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|_, u| u.at.elapsed() < KEPT);
        let (key, project) = (upload.key.clone(), upload.project.clone());
        for (most, same) in [
            (MOST_KEPT_PER_KEY, &(|u: &Upload| u.key == key) as &dyn Fn(&Upload) -> bool),
            (MOST_KEPT_PER_PROJECT, &|u: &Upload| u.project == project),
        ] {
            if kept.values().filter(|u| same(u)).count() >= most {
                let oldest = kept.iter().filter(|(_, u)| same(u)).min_by_key(|(_, u)| u.at).map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    kept.remove(&oldest);
                }
            }
        }
        kept.insert(token.clone(), upload);
        Ok(token)
    }

    /// The upload `token` names, if this key made it for this dataset.
    fn take(&self, token: &str, key: &str, dataset: &str) -> Option<Upload> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let upload = kept.get(token)?;
        if upload.key != key || upload.dataset != dataset || upload.at.elapsed() >= KEPT {
            return None;
        }
        kept.remove(token)
    }
}

#[derive(Template)]
#[template(path = "import.html")]
struct ImportPage {
    chrome: Chrome,
    action: String,
    dataset: String,
    csrf: String,
    formats: Vec<&'static str>,
    /// After a preview:
    preview: Option<Preview>,
    error: String,
}

struct Problem {
    place: String,
    severity: &'static str,
    message: String,
    hint: String,
}

struct Preview {
    shown: String,
    format: String,
    syntax: String,
    cases: u64,
    errors: u64,
    warnings: u64,
    /// How many ids were made for rows without one ([`casebook_formats::Summary::derived_ids_note`]).
    ids_note: String,
    problems: Vec<Problem>,
    mode: &'static str,
    head: u64,
    added: Vec<(String, String)>,
    changed: Vec<(String, String)>,
    removed: Vec<(String, String)>,
    counts: (u64, u64, u64),
    token: String,
}

fn page(viewer: &Viewer, path: &DatasetPath) -> ImportPage {
    let url = dataset_url(&path.project, &path.dataset);
    ImportPage {
        chrome: Chrome::new(viewer, format!("{} · import", path.dataset))
            .at(path.dataset.clone(), url.clone())
            .at("import", ""),
        action: format!("{url}/import"),
        dataset: path.dataset.clone(),
        csrf: viewer.csrf.clone(),
        formats: Format::ALL.iter().map(|f| f.name()).collect(),
        preview: None,
        error: String::new(),
    }
}

pub async fn form(viewer: Viewer, Path(path): Path<DatasetPath>) -> PageResult {
    viewer.require_write()?;
    Ok(html(&page(&viewer, &path)))
}

/// What a preview form sends.
#[derive(Default)]
struct Sent {
    csrf: String,
    text: String,
    file: Vec<u8>,
    filename: String,
    format: String,
    syntax: String,
    mode: String,
}

async fn fields(mut multipart: Multipart) -> Result<Sent, Failure> {
    let mut sent = Sent::default();
    let bad =
        |e: axum::extract::multipart::MultipartError| Failure::bad_request(format!("the form could not be read: {e}"));
    while let Some(field) = multipart.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "file" {
            sent.filename = field.file_name().unwrap_or_default().to_owned();
            sent.file = field.bytes().await.map_err(bad)?.to_vec();
            continue;
        }
        let value = field.text().await.map_err(bad)?;
        match name.as_str() {
            "csrf" => sent.csrf = value,
            "text" => sent.text = value,
            "format" => sent.format = value,
            "syntax" => sent.syntax = value,
            "mode" => sent.mode = value,
            _ => {}
        }
    }
    Ok(sent)
}

/// A syntax for pasted text the form did not name: JSON lines when every line is an object,
/// JSON when it starts as JSON, YAML otherwise.
fn guess_syntax(text: &str) -> Syntax {
    let trimmed = text.trim_start();
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.len() > 1 && lines.iter().all(|l| l.starts_with('{') && l.ends_with('}')) {
        Syntax::Jsonl
    } else if trimmed.starts_with('{') || trimmed.starts_with('[') {
        Syntax::Json
    } else {
        Syntax::Yaml
    }
}

struct Read {
    start: Option<(Format, Syntax)>,
    ids: HashMap<String, [u8; 32]>,
    order: Vec<String>,
    problems: Vec<Problem>,
    errors: u64,
    warnings: u64,
}

impl Consumer<Vec<Option<[u8; 32]>>> for Read {
    fn start(&mut self, start: &Start) -> Flow {
        self.start = Some((start.format, start.syntax));
        Flow::Continue
    }
    fn batch(&mut self, batch: &mut Batch, content: &mut Vec<Option<[u8; 32]>>) -> Flow {
        for d in batch.diagnostics.drain(..) {
            if d.is_error() {
                self.errors += 1;
            } else {
                self.warnings += 1;
            }
            if self.problems.len() < SHOWN {
                self.problems.push(Problem {
                    place: d.place(),
                    severity: if d.is_error() { "error" } else { "warning" },
                    message: d.message,
                    hint: d.hint.unwrap_or_default(),
                });
            }
        }
        for (case, cid) in batch.cases.iter().zip(content.iter()) {
            if let Some(cid) = cid {
                self.order.push(case.id.clone());
                self.ids.insert(case.id.clone(), *cid);
            }
        }
        Flow::Continue
    }
}

fn content_id(case: &Case) -> Option<[u8; 32]> {
    casebook_store::prepare(case).ok().map(|p| p.content_id)
}

pub async fn preview(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(path): Path<DatasetPath>,
    multipart: Multipart,
) -> PageResult {
    let sent = fields(multipart).await?;
    viewer.check_write(&sent.csrf)?;
    // A name no new dataset may have is refused before the file is read, not at confirmation.
    casebook_store::check_commit_name(&viewer.store, &path.dataset).await?;
    let mut shown_page = page(&viewer, &path);
    let (bytes, shown) = match (sent.file.is_empty(), sent.text.trim().is_empty()) {
        (false, _) => {
            let name = crate::spool::upload_name("the file's name", Some(&sent.filename), "upload")?;
            (sent.file, name)
        }
        (true, false) => {
            let syntax = match sent.syntax.as_str() {
                "" => guess_syntax(&sent.text),
                other => Syntax::from_path(std::path::Path::new(&format!("x.{other}"))).unwrap_or(Syntax::Jsonl),
            };
            (sent.text.into_bytes(), format!("pasted.{}", syntax.name()))
        }
        (true, true) => {
            shown_page.error = "paste a dataset or pick a file to import".into();
            let mut response = html(&shown_page);
            *response.status_mut() = StatusCode::BAD_REQUEST;
            return Ok(response);
        }
    };
    let folder = Arc::new(state.spool.folder()?);
    let file = folder.path().join(&shown);
    fs_err::write(&file, &bytes).map_err(Failure::internal)?;
    drop(bytes);
    let format = match sent.format.as_str() {
        "" | "auto" => None,
        name => Some(name.parse::<Format>().map_err(Failure::bad_request)?),
    };
    let input = Input { path: Some(file.clone()), display: shown.clone() };
    let options = ReadOptions { format, syntax: None, threads: 0, column_map: None, stream_from: None };
    let read = tokio::task::spawn_blocking(move || {
        let mut read =
            Read { start: None, ids: HashMap::new(), order: Vec::new(), problems: Vec::new(), errors: 0, warnings: 0 };
        let work = |batch: &Batch| batch.cases.iter().map(content_id).collect::<Vec<_>>();
        casebook_formats::read(&input, &options, &work, &mut read).map(|summary| (read, summary))
    })
    .await
    .map_err(Failure::internal)?;
    let (read, summary) = match read {
        Ok(read) => read,
        Err(err) => {
            shown_page.error = format!("`{shown}` cannot be read: {err}");
            let mut response = html(&shown_page);
            *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            return Ok(response);
        }
    };
    let mode = if sent.mode == "upsert" { "upsert" } else { "replace" };
    let head = match viewer.store.resolve(&path.dataset, &Ref::Latest).await {
        Ok(v) => v.number,
        Err(casebook_store::StoreError::NoDataset(..) | casebook_store::StoreError::NoVersion { .. }) => 0,
        Err(err) => return Err(err.into()),
    };
    let (added, changed, removed, counts) = compare(&viewer.store, &path, head, &read, mode == "replace").await?;
    let token = if read.errors == 0 {
        let upload = Upload {
            folder,
            file,
            shown: shown.clone(),
            key: viewer.access.key.clone(),
            project: viewer.access.project.clone(),
            dataset: path.dataset.clone(),
            at: Instant::now(),
        };
        state.console.uploads.keep(upload)?
    } else {
        String::new()
    };
    let (format, syntax) = read.start.map_or(("?", "?"), |(f, s)| (f.name(), s.name()));
    shown_page.preview = Some(Preview {
        shown,
        format: format.into(),
        syntax: syntax.into(),
        cases: read.order.len() as u64,
        errors: read.errors,
        warnings: read.warnings,
        ids_note: summary.derived_ids_note().unwrap_or_default(),
        problems: read.problems,
        mode,
        head,
        added,
        changed,
        removed,
        counts,
        token,
    });
    let failed = shown_page.preview.as_ref().is_some_and(|p| p.errors > 0);
    let mut response = html(&shown_page);
    if failed {
        *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
    }
    Ok(response)
}

type Listed = Vec<(String, String)>;

/// The cases the file would add, change and remove on the head (listed up to [`SHOWN`], and
/// counted), read page by page.
async fn compare(
    store: &AnyStore,
    path: &DatasetPath,
    head: u64,
    read: &Read,
    replace: bool,
) -> Result<(Listed, Listed, Listed, (u64, u64, u64)), Failure> {
    let link = |id: &str, v: u64| {
        (id.to_owned(), if v == 0 { String::new() } else { case_url(&path.project, &path.dataset, v, id) })
    };
    let (mut changed, mut removed) = (Vec::new(), Vec::new());
    let (mut n_changed, mut n_removed) = (0u64, 0u64);
    let mut in_head = std::collections::HashSet::new();
    if head > 0 {
        let mut after = None;
        loop {
            let page = store.page(&path.dataset, head, &Select::all(), after.as_ref(), 2000).await?;
            for body in &page.bodies {
                let case: Case = serde_json::from_str(body).map_err(Failure::internal)?;
                match read.ids.get(&case.id) {
                    Some(cid) if Some(*cid) == content_id(&case) => {}
                    Some(_) => {
                        n_changed += 1;
                        if changed.len() < SHOWN {
                            changed.push(link(&case.id, head));
                        }
                    }
                    None if replace => {
                        n_removed += 1;
                        if removed.len() < SHOWN {
                            removed.push(link(&case.id, head));
                        }
                    }
                    None => {}
                }
                in_head.insert(case.id);
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    let fresh: Vec<&String> = read.order.iter().filter(|id| !in_head.contains(*id)).collect();
    let added = fresh.iter().take(SHOWN).map(|id| link(id, 0)).collect();
    Ok((added, changed, removed, (fresh.len() as u64, n_changed, n_removed)))
}

#[derive(Deserialize)]
pub struct ConfirmForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    head: u64,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    message: String,
}

pub async fn confirm(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(path): Path<DatasetPath>,
    Form(form): Form<ConfirmForm>,
) -> PageResult {
    viewer.check_write(&form.csrf)?;
    let Some(upload) = state.console.uploads.take(&form.token, &viewer.access.key, &path.dataset) else {
        return Err(Failure::new(
            StatusCode::GONE,
            "this preview has expired or was already imported: preview the file again",
        ));
    };
    let request = IngestRequest {
        input: Input { path: Some(upload.file.clone()), display: upload.shown.clone() },
        options: ReadOptions { format: None, syntax: None, threads: 0, column_map: None, stream_from: None },
        dataset: Some(path.dataset.clone()),
        mode: if form.mode == "upsert" { CommitMode::Upsert } else { CommitMode::Replace },
        parent: Parent::Given(Ref::Number(form.head)),
        author: crate::routes::author_of(None, &viewer.access.key),
        time: crate::routes::now(),
        message: match form.message.trim() {
            "" => format!("import {}", upload.shown),
            text => text.to_owned(),
        },
    };
    let result = casebook_store::ingest(&viewer.store, request, Box::new(|_: IngestEvent| {})).await;
    drop(upload.folder);
    let url = dataset_url(&path.project, &path.dataset);
    match result {
        Ok(ingested) => match ingested.outcome {
            Some(CommitOutcome::Created(v)) if form.head == 0 => {
                Ok(see_other(&format!("{url}/versions/v{}", v.number)))
            }
            Some(CommitOutcome::Created(v)) => {
                Ok(see_other(&format!("{url}/diff?from=v{}&to=v{}", form.head, v.number)))
            }
            Some(CommitOutcome::Unchanged(_)) => Ok(see_other(&url)),
            None => Err(Failure::new(StatusCode::UNPROCESSABLE_ENTITY, "the file has errors: nothing was imported")),
        },
        Err(casebook_store::IngestError::Store(casebook_store::StoreError::Conflict { head, .. })) => {
            Err(Failure::new(
                StatusCode::CONFLICT,
                format!(
                    "v{head} was committed after the preview (made on v{}): nothing was written; preview the file again to see what it changes now",
                    form.head
                ),
            ))
        }
        Err(err) => Err(Failure::bad_request(format!("nothing was imported: {err}"))),
    }
}
