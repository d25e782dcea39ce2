//! Writing from the console: a case edited (or added) in a JSON editor, checked as it is typed
//! with the reader's own diagnostics, saved as a new version on the version it was edited from;
//! and a new dataset made from its first case. When someone else moved the head meanwhile, the
//! three-way rule (`casebook_store::Changes`) decides: commits that touched other cases only,
//! the edit is applied on the new head (and the diff page says so); commits that changed the
//! edited case too, nothing is written and the editor shows theirs and mine, to keep theirs,
//! edit again from theirs, or save mine over theirs, which needs a confirmation naming the head
//! it overrides (the form keeps the version it started from, so saving it again as it is never
//! overwrites).

use crate::extract::Form;
use crate::extract::Json;
use crate::extract::{Path, Query};
use askama::Template;
use axum::http::StatusCode;
use casebook_formats::{Batch, Consumer, Flow, Format, Input, ReadOptions, Start, Syntax};
use casebook_model::{Case, DatasetHeader, Diagnostic};
use casebook_store::{Changes, Choice, CommitMode, CommitOutcome, CommitRequest, Exceptions, Ref, Store, StoreError};
use serde::{Deserialize, Serialize};

use super::browse::DatasetPath;
use super::page::{Chrome, Failure, PageResult, case_url, dataset_url, html, project_url, see_other};
use super::session::Viewer;

/// What a new case starts as.
const NEW_CASE: &str = "{\n  \"id\": \"\",\n  \"input\": \"\",\n  \"expected\": {\n    \"output\": \"\"\n  }\n}";
/// The name the editor's text has in diagnostics.
const SHOWN: &str = "case.json";

/// A problem in the editor's text, where the editor shows it.
#[derive(Serialize)]
pub struct Problem {
    pub line: u64,
    pub column: u64,
    pub severity: &'static str,
    pub message: String,
    pub pointer: String,
    pub hint: String,
}

impl Problem {
    fn new(line: u64, column: u64, message: impl Into<String>) -> Self {
        Self { line, column, severity: "error", message: message.into(), pointer: String::new(), hint: String::new() }
    }
}

struct Collect {
    cases: Vec<Case>,
    diagnostics: Vec<Diagnostic>,
}

impl Consumer<()> for Collect {
    fn start(&mut self, _: &Start) -> Flow {
        Flow::Continue
    }
    fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
        self.cases.append(&mut batch.cases);
        self.diagnostics.append(&mut batch.diagnostics);
        Flow::Continue
    }
}

/// Reads the editor's text as one case of casebook's own format, with the diagnostics the CLI
/// gives, located in the text. (The text is read as the one item of a JSON list: the `[`
/// before it is taken back out of the columns of its first line and of the pointers.)
fn check(text: &str) -> Result<(Option<Case>, Vec<Problem>), Failure> {
    let folder = tempfile::tempdir().map_err(Failure::internal)?;
    let file = folder.path().join(SHOWN);
    fs_err::write(&file, format!("[{text}\n]")).map_err(Failure::internal)?;
    let input = Input { path: Some(file), display: SHOWN.into() };
    let options = ReadOptions {
        format: Some(Format::Casebook),
        syntax: Some(Syntax::Json),
        threads: 1,
        column_map: None,
        stream_from: None,
    };
    let mut collect = Collect { cases: Vec::new(), diagnostics: Vec::new() };
    casebook_formats::read(&input, &options, &|_| (), &mut collect).map_err(|e| Failure::bad_request(e.to_string()))?;
    let lines = text.lines().count().max(1) as u64;
    let mut problems: Vec<Problem> = collect
        .diagnostics
        .into_iter()
        .map(|d| Problem {
            // The closing `]` is on a line of its own after the text: a problem there is at the
            // text's end.
            line: d.line.min(lines),
            column: if d.line == 1 { d.column.saturating_sub(1).max(1) } else { d.column },
            severity: if d.is_error() { "error" } else { "warning" },
            pointer: d.pointer.as_deref().map(|p| p.strip_prefix("/0").unwrap_or(p).to_owned()).unwrap_or_default(),
            hint: d.hint.unwrap_or_default(),
            message: d.message,
        })
        .collect();
    let errors = problems.iter().any(|p| p.severity == "error");
    let case = match collect.cases.len() {
        _ if errors => None,
        1 => collect.cases.pop(),
        0 => {
            problems.push(Problem::new(1, 1, "the editor holds no case: write one JSON object"));
            None
        }
        n => {
            problems.push(Problem::new(1, 1, format!("the editor holds {n} cases: write one JSON object")));
            None
        }
    };
    if let Some(case) = &case {
        if case.id.trim().is_empty() {
            problems.push(Problem::new(1, 1, "the case needs an `id`"));
            return Ok((None, problems));
        }
    }
    Ok((case, problems))
}

#[derive(Template)]
#[template(path = "edit.html")]
struct EditPage {
    chrome: Chrome,
    /// Where the form goes.
    action: String,
    /// Empty when editing a case of an existing dataset.
    new_dataset: bool,
    dataset: String,
    /// The version the edit builds on (`v0` for a new dataset).
    parent: String,
    /// The case's id before the edit (empty for a new case).
    original: String,
    text: String,
    message: String,
    problems: Vec<Problem>,
    /// Someone else's version came first: what happened and what saving now does.
    conflict: String,
    /// The diff between the version the edit started from and the head that came first.
    conflict_url: String,
    /// When the head changed the edited case too: the head (`v5`), which "save mine over
    /// theirs" must name; empty otherwise.
    head: String,
    /// The head's case as pretty JSON (empty when the head removed it).
    theirs: String,
    /// The head's case page, and the editor opened on it.
    theirs_url: String,
    again_url: String,
    check_url: String,
    csrf: String,
    /// When the editor opened an older version's content: the head then (`v5`), which saving
    /// puts the content on.
    head_then: String,
}

#[derive(Deserialize)]
pub struct EditQuery {
    #[serde(default)]
    case: String,
    /// The version whose content of the case the editor opens (`v2`); the head's by default.
    /// Saving builds on that version, so the three-way rule decides against the head.
    #[serde(default)]
    from: String,
}

pub async fn editor(viewer: Viewer, Path(path): Path<DatasetPath>, Query(q): Query<EditQuery>) -> PageResult {
    viewer.require_write()?;
    let store = &viewer.store;
    let head = store.resolve(&path.dataset, &Ref::Latest).await?;
    let from = match q.from.trim() {
        "" => head.number,
        _ if q.case.is_empty() => {
            return Err(Failure::bad_request("`from` opens a case of a version: name the `case`"));
        }
        text => {
            let reference: Ref = text.parse().map_err(Failure::bad_request)?;
            store.resolve(&path.dataset, &reference).await?.number
        }
    };
    let text = match q.case.as_str() {
        "" => NEW_CASE.to_owned(),
        id => match store.case(&path.dataset, from, id).await? {
            Some(case) => serde_json::to_string_pretty(&case).map_err(Failure::internal)?,
            None => {
                return Err(Failure::not_found(format!(
                    "`{}` v{} has no case `{}`",
                    path.dataset,
                    from,
                    casebook_model::excerpt(id)
                )));
            }
        },
    };
    let title = if q.case.is_empty() { "add a case".to_owned() } else { format!("edit {}", q.case) };
    let url = dataset_url(&path.project, &path.dataset);
    Ok(html(&EditPage {
        chrome: Chrome::new(&viewer, format!("{} · {title}", path.dataset))
            .at(path.dataset.clone(), url.clone())
            .at(title, ""),
        action: format!("{url}/edit"),
        new_dataset: false,
        parent: format!("v{from}"),
        head_then: if from == head.number { String::new() } else { format!("v{}", head.number) },
        original: q.case,
        text,
        message: String::new(),
        problems: Vec::new(),
        conflict: String::new(),
        conflict_url: String::new(),
        head: String::new(),
        theirs: String::new(),
        theirs_url: String::new(),
        again_url: String::new(),
        check_url: format!("{}/check", project_url(&path.project)),
        csrf: viewer.csrf.clone(),
        dataset: path.dataset,
    }))
}

#[derive(Deserialize)]
pub struct CheckForm {
    #[serde(default)]
    text: String,
}

/// The editor's problems as it is typed (for `console.js`).
pub async fn check_text(_signed_in: Viewer, Form(form): Form<CheckForm>) -> Result<Json<Vec<Problem>>, Failure> {
    let (_, problems) = tokio::task::spawn_blocking(move || check(&form.text)).await.map_err(Failure::internal)??;
    Ok(Json(problems))
}

#[derive(Deserialize)]
pub struct SaveForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    dataset: String,
    #[serde(default)]
    parent: String,
    #[serde(default)]
    original: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    message: String,
    /// "Save mine over theirs": the head (`v5`) whose change to the case is overridden.
    #[serde(default)]
    overrides: String,
}

pub async fn save(viewer: Viewer, Path(path): Path<DatasetPath>, Form(form): Form<SaveForm>) -> PageResult {
    viewer.check_write(&form.csrf)?;
    let url = dataset_url(&path.project, &path.dataset);
    let page = EditPage {
        chrome: Chrome::new(&viewer, format!("{} · edit", path.dataset)).at(path.dataset.clone(), url.clone()),
        action: format!("{url}/edit"),
        new_dataset: false,
        dataset: path.dataset.clone(),
        parent: form.parent.clone(),
        original: form.original.clone(),
        text: form.text.clone(),
        message: form.message.clone(),
        problems: Vec::new(),
        conflict: String::new(),
        conflict_url: String::new(),
        head: String::new(),
        theirs: String::new(),
        theirs_url: String::new(),
        again_url: String::new(),
        check_url: format!("{}/check", project_url(&path.project)),
        csrf: viewer.csrf.clone(),
        head_then: String::new(),
    };
    commit_edit(&viewer, &path.project, page, &form).await
}

/// The new-dataset page: a name and its first case.
pub async fn new_dataset(viewer: Viewer, Path(project): Path<String>) -> PageResult {
    viewer.require_write()?;
    Ok(html(&new_page(&viewer, &project, String::new(), NEW_CASE.to_owned(), String::new())))
}

fn new_page(viewer: &Viewer, project: &str, dataset: String, text: String, message: String) -> EditPage {
    EditPage {
        chrome: Chrome::new(viewer, "new dataset").at("new dataset", ""),
        action: format!("{}/new", project_url(project)),
        new_dataset: true,
        dataset,
        parent: "v0".into(),
        original: String::new(),
        text,
        message,
        problems: Vec::new(),
        conflict: String::new(),
        conflict_url: String::new(),
        head: String::new(),
        theirs: String::new(),
        theirs_url: String::new(),
        again_url: String::new(),
        check_url: format!("{}/check", project_url(project)),
        csrf: viewer.csrf.clone(),
        head_then: String::new(),
    }
}

pub async fn create(viewer: Viewer, Path(project): Path<String>, Form(form): Form<SaveForm>) -> PageResult {
    viewer.check_write(&form.csrf)?;
    // The store's rules for a new name (`casebook_store::names`), said before the case is read.
    let name = casebook_store::names::dataset_name(form.dataset.trim());
    let shown = name.clone().unwrap_or_else(|_| form.dataset.trim().to_owned());
    let mut page = new_page(&viewer, &project, shown, form.text.clone(), form.message.clone());
    if let Err(err) = name {
        page.problems.push(Problem::new(0, 0, err.to_string()));
        return Ok(unprocessable(&page));
    }
    commit_edit(&viewer, &project, page, &form).await
}

fn unprocessable(page: &EditPage) -> axum::response::Response {
    let mut response = html(page);
    *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
    response
}

/// Checks the editor's case and commits it on the version the editor started from; shows the
/// editor again with the problems, or with the conflict, when nothing was written.
async fn commit_edit(viewer: &Viewer, project: &str, mut page: EditPage, form: &SaveForm) -> PageResult {
    let text = form.text.clone();
    let (case, problems) = tokio::task::spawn_blocking(move || check(&text)).await.map_err(Failure::internal)??;
    page.problems = problems;
    let Some(case) = case else { return Ok(unprocessable(&page)) };
    let parent = match form.parent.trim().strip_prefix('v').and_then(|n| n.parse::<u64>().ok()) {
        Some(n) => n,
        None => return Err(Failure::bad_request("the form names no version to build on: open the editor again")),
    };
    let dataset = page.dataset.clone();
    let prepared = casebook_store::prepare(&case)?;
    let message = match form.message.trim() {
        "" if page.new_dataset => format!("new dataset with `{}`", case.id),
        "" if form.original.is_empty() => format!("add `{}`", case.id),
        "" => format!("edit `{}`", case.id),
        text => text.to_owned(),
    };
    // Saving mine over theirs builds on the head that was shown and confirmed: only what was
    // committed after it can still conflict.
    let base = match form.overrides.trim() {
        "" => parent,
        text => match text.strip_prefix('v').and_then(|n| n.parse::<u64>().ok()) {
            Some(n) if n >= parent => n,
            _ => return Err(Failure::bad_request("the form names no version to override: open the editor again")),
        },
    };
    let mut on = base;
    // A commit landing between the rule and the write is met again; a few rounds at most.
    for _ in 0..4 {
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        let _ = sender.send(Ok(vec![prepared.clone()])).await;
        drop(sender);
        let request = CommitRequest {
            dataset: dataset.clone(),
            header: page.new_dataset.then(|| DatasetHeader { name: Some(dataset.clone()), ..DatasetHeader::default() }),
            mode: CommitMode::Upsert,
            parent: Some(on),
            author: crate::routes::author_of(None, &viewer.access.key),
            time: crate::routes::now(),
            message: message.clone(),
        };
        let head = match viewer.store.commit(request, receiver).await {
            Ok(CommitOutcome::Created(version)) => {
                let mut to = format!("{}/diff?from=v{on}&to=v{}", dataset_url(project, &dataset), version.number);
                if on != parent {
                    // Applied on a head the editor did not start from: the diff page says so.
                    to.push_str(&format!("&started=v{parent}"));
                }
                if page.new_dataset {
                    to = case_url(project, &dataset, version.number, &case.id);
                }
                return Ok(see_other(&to));
            }
            Ok(CommitOutcome::Unchanged(_)) => return Ok(see_other(&case_url(project, &dataset, on, &case.id))),
            Err(StoreError::Conflict { head, .. }) if page.new_dataset => {
                page.conflict =
                    format!("a dataset named `{dataset}` already exists (its head is v{head}): pick another name");
                return Ok(unprocessable(&page));
            }
            Err(StoreError::Conflict { head, .. }) => head,
            Err(err) => return Err(err.into()),
        };
        let changes = Changes::between(&viewer.store, &dataset, base, head, &Exceptions::new()).await?;
        match changes.choose(&case.id, Some(&prepared.content_id)) {
            // Their commits touched other cases only (or made this one what the edit makes it).
            Choice::Incoming => on = head,
            // The editor's case is the one it started from: nothing of the edit to save.
            Choice::Head(_) => return Ok(see_other(&case_url(project, &dataset, head, &case.id))),
            Choice::Conflict => {
                let theirs = match viewer.store.case(&dataset, head, &case.id).await? {
                    Some(theirs) => serde_json::to_string_pretty(&theirs).map_err(Failure::internal)?,
                    None => String::new(),
                };
                let id = casebook_model::excerpt(&case.id);
                page.conflict = if theirs.is_empty() {
                    format!(
                        "v{head} was committed while you edited (you started from v{parent}) and removed `{id}`: nothing was written. \
                         Keep theirs, or save yours to add it back."
                    )
                } else {
                    format!(
                        "v{head} was committed while you edited (you started from v{parent}) and changed `{id}` too: nothing was written. \
                         Compare theirs and yours, then keep theirs, edit again from theirs, or save yours over theirs."
                    )
                };
                page.conflict_url = format!("{}/diff?from=v{parent}&to=v{head}", dataset_url(project, &dataset));
                page.head = format!("v{head}");
                page.theirs = theirs;
                page.theirs_url = if page.theirs.is_empty() {
                    format!("{}/versions/v{head}", dataset_url(project, &dataset))
                } else {
                    case_url(project, &dataset, head, &case.id)
                };
                page.again_url =
                    format!("{}/edit?case={}", dataset_url(project, &dataset), crate::path_segment(&case.id));
                let mut response = html(&page);
                *response.status_mut() = StatusCode::CONFLICT;
                return Ok(response);
            }
        }
    }
    Err(Failure::internal("the dataset's head kept moving while the edit was saved"))
}
