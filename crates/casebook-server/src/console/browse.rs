//! Reading pages: a project's datasets, a dataset's versions, the cases of a version (filter,
//! paging, counts per value), one case with its history, the diff of two versions; tagging a
//! version (downloading one is [`super::download`]).

use crate::extract::Form;
use crate::extract::{Path, Query};
use askama::Template;
use casebook_filter::{FieldPath, Groups};
use casebook_model::Case;
use casebook_store::{AnyStore, FieldChange, Ref, Select, Store, VersionInfo};
use serde::Deserialize;

use super::page::{Chrome, Failure, PageResult, case_url, dataset_url, filters, html, query, see_other, version_url};
use super::session::Viewer;
use super::view::{CaseView, preview, show};
use crate::cursor;

/// Cases a page of the console shows.
const PAGE: usize = 50;
/// Ids a diff page lists of each kind before saying how many more there are.
const DIFF_SHOWN: usize = 500;
/// Revisions of a case whose changes the case page shows.
const HISTORY_SHOWN: usize = 50;

/// A version as the pages list it.
pub struct VersionRow {
    pub number: u64,
    pub url: String,
    pub id: String,
    pub short_id: String,
    pub author: String,
    pub time: String,
    pub message: String,
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    pub cases: u64,
    pub tags: Vec<String>,
}

impl VersionRow {
    fn new(project: &str, v: VersionInfo, tags: &[(String, u64)]) -> Self {
        Self {
            url: version_url(project, &v.dataset, v.number),
            short_id: v.id.chars().take(12).collect(),
            tags: tags.iter().filter(|(_, n)| *n == v.number).map(|(t, _)| t.clone()).collect(),
            number: v.number,
            id: v.id,
            author: super::page::shown_author(&v.author),
            time: v.time,
            message: v.message,
            added: v.added,
            removed: v.removed,
            modified: v.modified,
            cases: v.cases,
        }
    }
}

async fn resolve(store: &AnyStore, dataset: &str, text: &str) -> Result<VersionInfo, Failure> {
    let reference: Ref = text.parse().map_err(Failure::bad_request)?;
    Ok(store.resolve(dataset, &reference).await?)
}

pub struct DatasetRow {
    pub name: String,
    pub url: String,
    pub head: u64,
    pub cases: u64,
    pub changed: String,
    pub tags: Vec<String>,
}

#[derive(Template)]
#[template(path = "project.html")]
struct ProjectPage {
    chrome: Chrome,
    project: String,
    datasets: Vec<DatasetRow>,
    can_write: bool,
}

pub async fn project(viewer: Viewer, Path(project): Path<String>) -> PageResult {
    let store = &viewer.store;
    let mut datasets = Vec::new();
    for info in store.datasets().await? {
        let changed = match info.head {
            0 => String::new(),
            _ => store.resolve(&info.name, &Ref::Latest).await.map(|v| v.time).unwrap_or_default(),
        };
        let tags = store.tags(&info.name).await?.into_iter().map(|(t, n)| format!("{t} → v{n}")).collect();
        datasets.push(DatasetRow {
            url: dataset_url(&project, &info.name),
            name: info.name,
            head: info.head,
            cases: info.cases,
            changed,
            tags,
        });
    }
    Ok(html(&ProjectPage {
        chrome: Chrome::new(&viewer, format!("{project} · datasets")),
        project,
        datasets,
        can_write: viewer.can_write(),
    }))
}

#[derive(Deserialize)]
pub struct DatasetPath {
    pub project: String,
    pub dataset: String,
}

#[derive(Template)]
#[template(path = "dataset.html")]
struct DatasetPage {
    chrome: Chrome,
    name: String,
    url: String,
    description: String,
    /// Newest first.
    versions: Vec<VersionRow>,
    /// Newest first.
    events: Vec<casebook_store::Event>,
    /// What the last action changed, or that it changed nothing.
    notice: String,
    can_write: bool,
    csrf: String,
}

#[derive(Deserialize, Default)]
pub struct DatasetQuery {
    /// A tag just set again on the version it named (the tag form leads here with it).
    #[serde(default)]
    already: String,
}

pub async fn dataset(viewer: Viewer, Path(path): Path<DatasetPath>, Query(q): Query<DatasetQuery>) -> PageResult {
    let store = &viewer.store;
    let header = store.header(&path.dataset).await?;
    let tags = store.tags(&path.dataset).await?;
    let notice = match tags.iter().find(|(t, _)| !q.already.is_empty() && *t == q.already) {
        Some((t, n)) => format!("{t} is already v{n}: nothing changed"),
        None => String::new(),
    };
    let mut versions: Vec<VersionRow> =
        store.versions(&path.dataset).await?.into_iter().map(|v| VersionRow::new(&path.project, v, &tags)).collect();
    versions.reverse();
    let events = store.events(&path.dataset).await?.into_iter().rev().collect();
    let url = dataset_url(&path.project, &path.dataset);
    Ok(html(&DatasetPage {
        chrome: Chrome::new(&viewer, path.dataset.clone()).at(path.dataset.clone(), url.clone()),
        description: header.description.clone().unwrap_or_default(),
        name: path.dataset,
        url,
        versions,
        events,
        notice,
        can_write: viewer.can_write(),
        csrf: viewer.csrf.clone(),
    }))
}

#[derive(Deserialize)]
pub struct TagForm {
    #[serde(default)]
    csrf: String,
    version: String,
    tag: String,
}

pub async fn tag(viewer: Viewer, Path(path): Path<DatasetPath>, Form(form): Form<TagForm>) -> PageResult {
    viewer.check_write(&form.csrf)?;
    let tag = form.tag.trim();
    if tag.is_empty() {
        return Err(Failure::bad_request("a tag needs a name (`prod`)"));
    }
    // The name first: a refused tag is refused whatever version it would name.
    let tag = casebook_store::names::tag_name(tag).map_err(|err| Failure::bad_request(err.to_string()))?;
    let version = resolve(&viewer.store, &path.dataset, form.version.trim()).await?;
    let author = crate::routes::author_of(None, &viewer.access.key);
    let tagged = viewer.store.tag(&path.dataset, version.number, &tag, &author, &crate::routes::now()).await?;
    let mut to = dataset_url(&path.project, &path.dataset);
    if tagged == casebook_store::Tagged::Already {
        to = format!("{to}?already={}", query(&tag));
    }
    Ok(see_other(&to))
}

#[derive(Deserialize)]
pub struct VersionPath {
    pub project: String,
    pub dataset: String,
    pub version: String,
}

#[derive(Deserialize, Default)]
pub struct CasesQuery {
    #[serde(rename = "where", default)]
    pub(super) filter: String,
    #[serde(default)]
    cursor: String,
    #[serde(default)]
    group_by: String,
}

pub struct CaseRow {
    pub id: String,
    pub url: String,
    pub input: String,
    pub labels: String,
    pub review: String,
}

#[derive(Template)]
#[template(path = "version.html")]
struct VersionPage {
    chrome: Chrome,
    dataset: String,
    version: VersionRow,
    filter: String,
    /// The filter's error, marked under the expression as the CLI shows it.
    filter_error: String,
    rows: Vec<CaseRow>,
    /// Cases the filter selects (all of the version's without one).
    selected: u64,
    next_url: String,
    first_url: String,
    group_by: String,
    group_error: String,
    groups: Vec<(String, u64)>,
    formats: Vec<&'static str>,
}

fn cases_url(base: &str, filter: &str, cursor: &str, group_by: &str) -> String {
    let mut parts = Vec::new();
    if !filter.is_empty() {
        parts.push(format!("where={}", query(filter)));
    }
    if !group_by.is_empty() {
        parts.push(format!("group_by={}", query(group_by)));
    }
    if !cursor.is_empty() {
        parts.push(format!("cursor={}", query(cursor)));
    }
    if parts.is_empty() { base.to_owned() } else { format!("{base}?{}", parts.join("&")) }
}

pub async fn version(viewer: Viewer, Path(path): Path<VersionPath>, Query(q): Query<CasesQuery>) -> PageResult {
    let store = &viewer.store;
    let (number, after) = match q.cursor.as_str() {
        "" => (resolve(store, &path.dataset, &path.version).await?.number, None),
        text => {
            let (v, at) = cursor::decode_for(store, &path.dataset, text).await?;
            (v, Some(at))
        }
    };
    let info = resolve(store, &path.dataset, &format!("v{number}")).await?;
    let tags = store.tags(&path.dataset).await?;
    let version = VersionRow::new(&path.project, info, &tags);
    let filter = q.filter.trim().to_owned();
    let mut page = VersionPage {
        chrome: Chrome::new(&viewer, format!("{} v{number}", path.dataset))
            .at(path.dataset.clone(), dataset_url(&path.project, &path.dataset))
            .at(format!("v{number}"), version.url.clone()),
        dataset: path.dataset.clone(),
        filter: filter.clone(),
        filter_error: String::new(),
        rows: Vec::new(),
        selected: version.cases,
        next_url: String::new(),
        first_url: String::new(),
        group_by: q.group_by.trim().to_owned(),
        group_error: String::new(),
        groups: Vec::new(),
        formats: casebook_formats::Format::ALL.iter().map(|f| f.name()).collect(),
        version,
    };
    let select = match filter.as_str() {
        "" => Select::all(),
        text => match crate::routes::parse_filter(text.to_owned()).await.map_err(Failure::internal)? {
            Ok(filter) => Select { filter: Some(filter), limit: None },
            Err(err) => {
                page.filter_error = err.render(text);
                let mut response = html(&page);
                *response.status_mut() = axum::http::StatusCode::BAD_REQUEST;
                return Ok(response);
            }
        },
    };
    if select.filter.is_some() {
        page.selected = store.count(&path.dataset, number, &select).await?;
    }
    let found = store.page(&path.dataset, number, &select, after.as_ref(), PAGE).await?;
    for body in &found.bodies {
        let case: Case = serde_json::from_str(body).map_err(Failure::internal)?;
        page.rows.push(CaseRow {
            url: case_url(&path.project, &path.dataset, number, &case.id),
            input: preview(&case.task.input, 160),
            labels: case.labels.as_deref().unwrap_or_default().join(", "),
            review: case
                .review
                .as_ref()
                .map(|r| show(&serde_json::to_value(r).unwrap_or_default()))
                .unwrap_or_default(),
            id: case.id,
        });
    }
    let base = page.version.url.clone();
    if let Some(next) = &found.next {
        page.next_url = cases_url(&base, &filter, &cursor::encode(number, next), &page.group_by);
    }
    if after.is_some() {
        page.first_url = cases_url(&base, &filter, "", &page.group_by);
    }
    if !page.group_by.is_empty() {
        match FieldPath::parse(&page.group_by) {
            Err(err) => page.group_error = err.render(&page.group_by),
            Ok(path_of) => page.groups = group(store, &path.dataset, number, &select, path_of).await?,
        }
    }
    Ok(html(&page))
}

/// Selected cases counted per value of a path, read page by page (a store's callback reads are
/// not `Send`).
async fn group(
    store: &AnyStore,
    dataset: &str,
    version: u64,
    select: &Select,
    path: FieldPath,
) -> Result<Vec<(String, u64)>, Failure> {
    let name = path.to_string();
    let mut groups = Groups::new(path);
    let mut after = None;
    loop {
        let page = store.page(dataset, version, select, after.as_ref(), 2000).await?;
        for body in &page.bodies {
            groups.add(&serde_json::from_str::<Case>(body).map_err(Failure::internal)?);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    Ok(groups
        .sorted()
        .into_iter()
        .map(|(value, n)| (value.as_ref().map_or_else(|| format!("(no {name})"), show), n))
        .collect())
}

#[derive(Deserialize)]
pub struct CasePath {
    pub project: String,
    pub dataset: String,
    pub version: String,
    pub case: String,
}

pub struct Change {
    pub pointer: String,
    pub old: String,
    pub new: String,
}

pub struct RevisionRow {
    pub from: u64,
    pub url: String,
    pub until: String,
    pub content_id: String,
    pub current: bool,
    /// `added`, `changed`, or `removed` (a revision after a gap).
    pub what: String,
    pub changes: Vec<Change>,
}

#[derive(Template)]
#[template(path = "case.html")]
struct CasePage {
    chrome: Chrome,
    dataset: String,
    version: u64,
    id: String,
    view: CaseView,
    permalink: String,
    json: String,
    history: Vec<RevisionRow>,
    older: usize,
    /// The editor for this case on the head, for a write key.
    edit_url: String,
    /// Review state, confidence and labels in one action, for a write key.
    review: Option<super::review::ReviewForm>,
}

impl From<&FieldChange> for Change {
    fn from(c: &FieldChange) -> Self {
        let text = |v: &Option<serde_json::Value>| v.as_ref().map_or_else(|| "(absent)".into(), show);
        Change { pointer: c.pointer.clone(), old: text(&c.old), new: text(&c.new) }
    }
}

fn changes(old: &Case, new: &Case) -> Vec<Change> {
    let (old, new) = (serde_json::to_value(old).unwrap_or_default(), serde_json::to_value(new).unwrap_or_default());
    casebook_store::field_changes(&old, &new).iter().map(Change::from).collect()
}

/// The version a case page names and the case in it, or the page's 404.
pub(super) async fn case_at(store: &AnyStore, path: &CasePath) -> Result<(VersionInfo, Case), Failure> {
    let version = resolve(store, &path.dataset, &path.version).await?;
    match store.case(&path.dataset, version.number, &path.case).await? {
        Some(case) => Ok((version, case)),
        None => Err(Failure::not_found(format!(
            "`{}` v{} has no case `{}`",
            path.dataset,
            version.number,
            casebook_model::excerpt(&path.case)
        ))),
    }
}

pub async fn case(viewer: Viewer, Path(path): Path<CasePath>) -> PageResult {
    let store = &viewer.store;
    let (version, case) = case_at(store, &path).await?;
    let revisions = store.history(&path.dataset, &path.case).await?;
    let older = revisions.len().saturating_sub(HISTORY_SHOWN);
    let mut history = Vec::new();
    let mut before: Option<(Case, Option<u64>)> = None;
    for revision in &revisions[older..] {
        let content = store.case(&path.dataset, revision.from_version, &path.case).await?;
        let (what, changes) = match (&before, &content) {
            (Some((old, Some(to))), Some(new)) if *to == revision.from_version => ("changed", changes(old, new)),
            (Some(_), Some(_)) => ("added again", Vec::new()),
            _ => ("added", Vec::new()),
        };
        history.push(RevisionRow {
            from: revision.from_version,
            url: case_url(&path.project, &path.dataset, revision.from_version, &path.case),
            until: revision.to_version.map_or_else(String::new, |t| format!("v{t}")),
            content_id: revision.content_id.chars().take(12).collect(),
            current: (revision.from_version..revision.to_version.unwrap_or(u64::MAX)).contains(&version.number),
            what: what.into(),
            changes,
        });
        if let Some(content) = content {
            before = Some((content, revision.to_version));
        }
    }
    history.reverse();
    let edit_url = match viewer.can_write() {
        true => format!("{}/edit?case={}", dataset_url(&path.project, &path.dataset), query(&path.case)),
        false => String::new(),
    };
    let view = CaseView::new(&case);
    let review = super::review::ReviewForm::new(&viewer, &path, version.number, &case);
    let json = serde_json::to_string_pretty(&case).unwrap_or_default();
    let title = format!("{} · {}", path.dataset, casebook_model::excerpt(&case.id));
    Ok(html(&CasePage {
        chrome: Chrome::new(&viewer, title)
            .at(path.dataset.clone(), dataset_url(&path.project, &path.dataset))
            .at(format!("v{}", version.number), version_url(&path.project, &path.dataset, version.number))
            .at(case.id.clone(), case_url(&path.project, &path.dataset, version.number, &case.id)),
        permalink: case_url(&path.project, &path.dataset, version.number, &case.id),
        dataset: path.dataset,
        version: version.number,
        id: case.id,
        view,
        json,
        history,
        older,
        edit_url,
        review,
    }))
}

#[derive(Deserialize)]
pub struct DiffQuery {
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    /// After a console edit applied on a head it did not start from: the version it started
    /// from, which the page names.
    #[serde(default)]
    started: String,
}

pub struct Link {
    pub text: String,
    pub url: String,
}

pub struct Modified {
    pub id: String,
    pub url: String,
    pub changes: Vec<Change>,
}

#[derive(Template)]
#[template(path = "diff.html")]
struct DiffPage {
    chrome: Chrome,
    dataset: String,
    from: u64,
    to: u64,
    numbers: Vec<u64>,
    added: Vec<Link>,
    removed: Vec<Link>,
    modified: Vec<Modified>,
    moved: Vec<Link>,
    /// Added, removed, modified, moved: all of them, listed or not.
    counts: (usize, usize, usize, usize),
    more: Vec<String>,
    /// What a console edit applied on a newer head than it started from says (empty otherwise).
    applied: String,
}

pub async fn diff(viewer: Viewer, Path(path): Path<DatasetPath>, Query(q): Query<DiffQuery>) -> PageResult {
    let store = &viewer.store;
    let versions = store.versions(&path.dataset).await?;
    let head = versions.last().map_or(0, |v| v.number);
    let to = match q.to.trim() {
        "" => head,
        text => resolve(store, &path.dataset, text).await?.number,
    };
    let from = match q.from.trim() {
        "" => to.saturating_sub(1).max(1),
        text => resolve(store, &path.dataset, text).await?.number,
    };
    let diff = store.diff(&path.dataset, from, to).await?;
    let link = |id: &String, v: u64| Link { text: id.clone(), url: case_url(&path.project, &path.dataset, v, id) };
    let mut more = Vec::new();
    let mut count = |what: &str, n: usize| {
        if n > DIFF_SHOWN {
            more.push(format!("{} more {what} cases are not listed", n - DIFF_SHOWN));
        }
    };
    count("added", diff.added.len());
    count("removed", diff.removed.len());
    count("modified", diff.modified.len());
    count("moved", diff.moved.len());
    let counts = (diff.added.len(), diff.removed.len(), diff.modified.len(), diff.moved.len());
    let applied = match q.started.trim().strip_prefix('v').and_then(|n| n.parse::<u64>().ok()) {
        Some(started) if started < from => format!(
            "Your edit started from v{started}; v{from} was committed meanwhile and changed other cases only: \
             your edit was applied on v{from}."
        ),
        _ => String::new(),
    };
    let page = DiffPage {
        applied,
        counts,
        chrome: Chrome::new(&viewer, format!("{}: v{from} → v{to}", path.dataset))
            .at(path.dataset.clone(), dataset_url(&path.project, &path.dataset))
            .at(
                format!("v{from} → v{to}"),
                format!("{}/diff?from=v{from}&to=v{to}", dataset_url(&path.project, &path.dataset)),
            ),
        added: diff.added.iter().take(DIFF_SHOWN).map(|id| link(id, to)).collect(),
        removed: diff.removed.iter().take(DIFF_SHOWN).map(|id| link(id, from)).collect(),
        moved: diff.moved.iter().take(DIFF_SHOWN).map(|id| link(id, to)).collect(),
        modified: diff
            .modified
            .iter()
            .take(DIFF_SHOWN)
            .map(|m| Modified {
                id: m.id.clone(),
                url: case_url(&path.project, &path.dataset, to, &m.id),
                changes: m.changes.iter().map(Change::from).collect(),
            })
            .collect(),
        numbers: versions.iter().rev().map(|v| v.number).collect(),
        dataset: path.dataset,
        from,
        to,
        more,
    };
    Ok(html(&page))
}
