//! Reading pages: a project's datasets, a dataset's versions, the cases of a version (filter,
//! paging, counts per value), one case with its history, the diff of two versions; tagging a
//! version (downloading one is [`super::download`]).

use crate::extract::Form;
use crate::extract::{Path, Query};
use askama::Template;
use casebook_model::Case;
use casebook_store::{AnyStore, FieldChange, Ref, Select, Store, VersionInfo};
use serde::Deserialize;

use super::page::{
    Chrome, Failure, PageResult, case_url, dataset_url, filters, html, query, see_other, thousands, version_url,
};
use super::session::Viewer;
use super::view::{CaseView, show};

/// Cases a diff page lists of each kind at a time.
const DIFF_PAGE: usize = 100;
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
    pub(super) fn new(project: &str, v: VersionInfo, tags: &[(String, u64)]) -> Self {
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

pub(super) async fn resolve(store: &AnyStore, dataset: &str, text: &str) -> Result<VersionInfo, Failure> {
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
    /// The whole content id (which the restore button compares with the head's).
    pub full_id: String,
    pub current: bool,
    /// `added`, `changed`, or `removed` (a revision after a gap).
    pub what: String,
    /// Who made the version that made this content, in the one form of an author.
    pub author: String,
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
    /// "Restore this content" on the history's other contents, for a write key.
    restore: Option<super::restore::RestoreForm>,
    /// The head's number.
    head: u64,
    nav: Nav,
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

/// Where a case page was reached from: the cases table's filter, and the case's place in it
/// (the links of the table and of the case page carry them).
#[derive(Deserialize, Default)]
pub struct CaseQuery {
    #[serde(rename = "where", default)]
    filter: String,
    /// The case's 1-based position among the cases the filter selects, when the link knew it.
    #[serde(default)]
    pos: String,
    /// How many cases the filter selects.
    #[serde(default)]
    of: String,
    /// The sort of the table the page was reached from (see [`casebook_store::Sort`]).
    #[serde(default)]
    sort: String,
}

/// The links from a case page through the filter it was reached from.
#[derive(Default)]
pub struct Nav {
    pub filter: String,
    /// "case 3 of 120", when known.
    pub position: String,
    pub previous_url: String,
    pub next_url: String,
    pub next_unreviewed_url: String,
    /// The cases table with the filter.
    pub list_url: String,
    /// The filter's error, when it does not parse.
    pub error: String,
}

/// The cases a review has still to look at (SPEC's review field: draft, or none).
pub(super) const UNREVIEWED: &str = r#"review == "draft" or not exists(review)"#;

/// A case page's address with the filter and place it is reached through.
pub fn case_nav_url(case_url: &str, filter: &str, pos: Option<u64>, of: Option<u64>) -> String {
    let mut parts = Vec::new();
    if !filter.is_empty() {
        parts.push(format!("where={}", query(filter)));
    }
    if let Some(pos) = pos {
        parts.push(format!("pos={pos}"));
    }
    if let Some(of) = of {
        parts.push(format!("of={of}"));
    }
    if parts.is_empty() { case_url.to_owned() } else { format!("{case_url}?{}", parts.join("&")) }
}

/// The case after `at` among those `select` picks in version `version`, by a page of one.
async fn case_after(
    store: &AnyStore,
    dataset: &str,
    version: u64,
    select: &Select,
    at: &casebook_store::Cursor,
) -> Result<Option<String>, Failure> {
    let page = store.page(dataset, version, select, Some(at), 1).await?;
    let Some(body) = page.bodies.first() else { return Ok(None) };
    let value: serde_json::Value = serde_json::from_str(body).map_err(Failure::internal)?;
    Ok(value.get("id").and_then(|id| id.as_str()).map(str::to_owned))
}

/// Previous, next and next unreviewed through the filter, from the case's place in the version's order
/// (a page of one after it each: no scan from the start).
async fn nav(store: &AnyStore, path: &CasePath, version: u64, q: &CaseQuery) -> Result<Nav, Failure> {
    let filter_text = q.filter.trim().to_owned();
    let mut nav = Nav {
        list_url: match filter_text.as_str() {
            "" => version_url(&path.project, &path.dataset, version),
            text => format!("{}?where={}", version_url(&path.project, &path.dataset, version), query(text)),
        },
        filter: filter_text.clone(),
        ..Nav::default()
    };
    let filter = match filter_text.as_str() {
        "" => None,
        text => match crate::routes::parse_filter(text.to_owned()).await.map_err(Failure::internal)? {
            Ok(filter) => Some(filter),
            Err(err) => {
                nav.error = err.render(text);
                return Ok(nav);
            }
        },
    };
    let sort = casebook_store::Sort::parse(&q.sort).map_err(Failure::bad_request)?;
    if let Some(sort) = sort {
        return sorted_nav(store, path, version, q, nav, filter, &sort).await;
    }
    let Some(at) = store.place(&path.dataset, version, &path.case).await? else { return Ok(nav) };
    let pos = q.pos.trim().parse::<u64>().ok();
    let of = q.of.trim().parse::<u64>().ok();
    nav.position = match (pos, of) {
        (Some(pos), Some(of)) => format!("case {pos} of {of}"),
        (None, Some(of)) => format!("{of} cases"),
        _ => String::new(),
    };
    let link = |id: &str, pos: Option<u64>| {
        case_nav_url(&case_url(&path.project, &path.dataset, version, id), &filter_text, pos, of)
    };
    let select = Select { filter: filter.clone(), limit: None };
    let before = store.page_before(&path.dataset, version, &select, &at, 1).await?;
    if let Some(body) = before.bodies.first() {
        let value: serde_json::Value = serde_json::from_str(body).map_err(Failure::internal)?;
        if let Some(id) = value.get("id").and_then(|id| id.as_str()) {
            nav.previous_url = link(id, pos.and_then(|p| p.checked_sub(1)).filter(|p| *p > 0));
        }
    }
    if let Some(next) = case_after(store, &path.dataset, version, &select, &at).await? {
        nav.next_url = link(&next, pos.map(|p| p + 1));
    }
    let unreviewed = casebook_filter::Filter::parse(UNREVIEWED).map_err(|e| Failure::internal(e.render(UNREVIEWED)))?;
    let only = Select { filter: Some(filter.map_or(unreviewed.clone(), |f| f.and(unreviewed))), limit: None };
    if let Some(next) = case_after(store, &path.dataset, version, &only, &at).await? {
        nav.next_unreviewed_url = link(&next, None);
    }
    Ok(nav)
}

/// [`nav`] through the filter in the order of `sort`: the cases just before and after the
/// case's key (a sorted page of one each way), the links keeping the sort.
async fn sorted_nav(
    store: &AnyStore,
    path: &CasePath,
    version: u64,
    q: &CaseQuery,
    mut nav: Nav,
    filter: Option<casebook_filter::Filter>,
    sort: &casebook_store::Sort,
) -> Result<Nav, Failure> {
    use casebook_store::SortSeek;
    let sort_text = sort.text();
    let with_sort = |url: String| {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}sort={}", query(&sort_text))
    };
    nav.list_url = with_sort(nav.list_url);
    let Some(key) = store.sort_key(&path.dataset, version, sort, &path.case).await? else { return Ok(nav) };
    let pos = q.pos.trim().parse::<u64>().ok();
    let of = q.of.trim().parse::<u64>().ok();
    nav.position = match (pos, of) {
        (Some(pos), Some(of)) => format!("case {pos} of {of}"),
        (None, Some(of)) => format!("{of} cases"),
        _ => String::new(),
    };
    let filter_text = nav.filter.clone();
    let link = |id: &str, pos: Option<u64>| {
        with_sort(case_nav_url(&case_url(&path.project, &path.dataset, version, id), &filter_text, pos, of))
    };
    let first_id = |bodies: &[String]| -> Result<Option<String>, Failure> {
        let Some(body) = bodies.first() else { return Ok(None) };
        let value: serde_json::Value = serde_json::from_str(body).map_err(Failure::internal)?;
        Ok(value.get("id").and_then(|id| id.as_str()).map(str::to_owned))
    };
    let select = Select { filter: filter.clone(), limit: None };
    let before = SortSeek { key: key.clone(), backward: true };
    let page = store.page_sorted(&path.dataset, version, &select, sort, Some(&before), 1).await?;
    if let Some(id) = first_id(&page.bodies)? {
        nav.previous_url = link(&id, pos.and_then(|p| p.checked_sub(1)).filter(|p| *p > 0));
    }
    let after = SortSeek { key, backward: false };
    let page = store.page_sorted(&path.dataset, version, &select, sort, Some(&after), 1).await?;
    if let Some(id) = first_id(&page.bodies)? {
        nav.next_url = link(&id, pos.map(|p| p + 1));
    }
    let unreviewed = casebook_filter::Filter::parse(UNREVIEWED).map_err(|e| Failure::internal(e.render(UNREVIEWED)))?;
    let only = Select { filter: Some(filter.map_or(unreviewed.clone(), |f| f.and(unreviewed))), limit: None };
    let page = store.page_sorted(&path.dataset, version, &only, sort, Some(&after), 1).await?;
    if let Some(id) = first_id(&page.bodies)? {
        nav.next_unreviewed_url = link(&id, None);
    }
    Ok(nav)
}

pub async fn case(viewer: Viewer, Path(path): Path<CasePath>, Query(q): Query<CaseQuery>) -> PageResult {
    let store = &viewer.store;
    let (version, case) = case_at(store, &path).await?;
    let nav = nav(store, &path, version.number, &q).await?;
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
            full_id: revision.content_id.clone(),
            current: (revision.from_version..revision.to_version.unwrap_or(u64::MAX)).contains(&version.number),
            what: what.into(),
            author: super::page::shown_author(
                &store.resolve(&path.dataset, &Ref::Number(revision.from_version)).await?.author,
            ),
            changes,
        });
        if let Some(content) = content {
            before = Some((content, revision.to_version));
        }
    }
    history.reverse();
    let head = store.resolve(&path.dataset, &Ref::Latest).await?.number;
    // An old version's page edits that version's content (saved onto the head by the editor's
    // three-way rule).
    let edit_url = match (viewer.can_write(), version.number == head) {
        (false, _) => String::new(),
        (true, true) => format!("{}/edit?case={}", dataset_url(&path.project, &path.dataset), query(&path.case)),
        (true, false) => format!(
            "{}/edit?case={}&from=v{}",
            dataset_url(&path.project, &path.dataset),
            query(&path.case),
            version.number
        ),
    };
    let head_content =
        revisions.last().filter(|r| r.to_version.is_none()).map(|r| r.content_id.clone()).unwrap_or_default();
    let restore = super::restore::RestoreForm::new(&viewer, &path, version.number, head, head_content);
    let view = CaseView::new(&case);
    let review =
        super::review::ReviewForm::new(&viewer, &path, version.number, &case, [q.filter.trim(), &q.pos, &q.of]);
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
        restore,
        head,
        nav,
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
    /// One list paged alone (`added`, `removed`, `modified`, `moved`); all four, their first
    /// pages, without it.
    #[serde(default)]
    list: String,
    /// The list's page starts just after this case id …
    #[serde(default)]
    after: String,
    /// … or ends just before this one.
    #[serde(default)]
    before: String,
    /// The place of the page's first case in its list (0-based), for the position shown.
    #[serde(default)]
    at: u64,
    /// The diff's totals as the page that links here counted them, `added.removed.modified.moved`:
    /// the versions of a diff never change, so a list's later pages do not count them again (a
    /// total sent back is only shown, as `at` is).
    #[serde(default)]
    totals: String,
}

/// The totals a link carries (see [`DiffQuery::totals`]); `None` when it carries none or
/// something else.
fn carried_totals(text: &str) -> Option<casebook_store::DiffTotals> {
    let mut numbers = text.split('.').map(|n| n.parse::<u64>().ok());
    let totals = casebook_store::DiffTotals {
        added: numbers.next()??,
        removed: numbers.next()??,
        modified: numbers.next()??,
        moved: numbers.next()??,
    };
    numbers.next().is_none().then_some(totals)
}

pub struct Modified {
    pub id: String,
    pub url: String,
    pub changes: Vec<Change>,
}

/// One list of a diff as a page shows it: a page of its cases and the links around it.
pub struct DiffSection {
    /// `added`, `removed`, `modified`, `moved` (the HTML id and class of the list).
    pub list: &'static str,
    pub title: &'static str,
    pub cases: Vec<Modified>,
    /// "1–100 of 1,000".
    pub position: String,
    pub previous_url: String,
    pub next_url: String,
    /// The list paged alone, from its start (empty when the page shows it alone).
    pub all_url: String,
}

#[derive(Template)]
#[template(path = "diff.html")]
struct DiffPage {
    chrome: Chrome,
    dataset: String,
    from: u64,
    to: u64,
    numbers: Vec<u64>,
    /// "+500 added · −20 removed · ~1,000 modified" (and moved, when any).
    totals: String,
    sections: Vec<DiffSection>,
    /// The whole diff's URL when the page shows one list alone.
    whole_url: String,
    same: bool,
    /// What a console edit applied on a newer head than it started from says (empty otherwise).
    applied: String,
}

/// The totals of a diff in one line: `+500 added · −20 removed · ~1,000 modified`.
pub fn diff_totals_text(totals: &casebook_store::DiffTotals) -> String {
    let mut text = format!(
        "+{} added · −{} removed · ~{} modified",
        thousands(totals.added),
        thousands(totals.removed),
        thousands(totals.modified)
    );
    if totals.moved > 0 {
        text.push_str(&format!(" · {} moved", thousands(totals.moved)));
    }
    text
}

pub async fn diff(viewer: Viewer, Path(path): Path<DatasetPath>, Query(q): Query<DiffQuery>) -> PageResult {
    use casebook_store::{DiffFrom, DiffList};
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
    let alone = match q.list.trim() {
        "" => None,
        text => Some(DiffList::parse(text).ok_or_else(|| {
            Failure::bad_request(format!(
                "`list` is `{}`: say `added`, `removed`, `modified` or `moved`",
                casebook_model::excerpt(text)
            ))
        })?),
    };
    let totals = match carried_totals(&q.totals) {
        Some(totals) if alone.is_some() => totals,
        _ => store.diff_totals(&path.dataset, from, to).await?,
    };
    let carried = format!("{}.{}.{}.{}", totals.added, totals.removed, totals.modified, totals.moved);
    let base = format!("{}/diff?from=v{from}&to=v{to}", dataset_url(&path.project, &path.dataset));
    let mut sections = Vec::new();
    for list in DiffList::ALL {
        let total = totals.of(list);
        if alone.is_some_and(|a| a != list) || total == 0 {
            continue;
        }
        let (start, at) = match alone {
            Some(_) if !q.after.is_empty() => (DiffFrom::After(q.after.as_str()), q.at),
            Some(_) if !q.before.is_empty() => (DiffFrom::Before(q.before.as_str()), q.at),
            _ => (DiffFrom::Start, 0),
        };
        let page = store.diff_page(&path.dataset, from, to, list, start, DIFF_PAGE).await?;
        // A position sent back by a link is only shown; it cannot place the page beyond its list.
        let at = match start {
            DiffFrom::Start => 0,
            // A page read backwards that reaches the list's start is its first page.
            DiffFrom::Before(_) if page.more.is_none() => 0,
            _ => at.min(total.saturating_sub(page.cases.len() as u64)),
        };
        let shown = page.cases.len() as u64;
        let more_after = match start {
            DiffFrom::Before(_) => at + shown < total,
            _ => page.more.is_some(),
        };
        let more_before = match start {
            DiffFrom::Start => false,
            DiffFrom::After(_) => true,
            DiffFrom::Before(_) => page.more.is_some(),
        };
        let version = if list == DiffList::Removed { from } else { to };
        let list_url = format!("{base}&list={}&totals={carried}", list.as_str());
        let next_url = match page.cases.last() {
            Some(last) if more_after => format!("{list_url}&after={}&at={}", query(&last.id), at + shown),
            _ => String::new(),
        };
        let previous_url = match page.cases.first() {
            Some(first) if more_before => {
                format!("{list_url}&before={}&at={}", query(&first.id), at.saturating_sub(DIFF_PAGE as u64))
            }
            _ => String::new(),
        };
        sections.push(DiffSection {
            list: list.as_str(),
            title: match list {
                DiffList::Added => "Added",
                DiffList::Removed => "Removed",
                DiffList::Modified => "Modified",
                DiffList::Moved => "Moved",
            },
            position: match shown {
                0 => format!("none of {}", thousands(total)),
                _ => format!("{}–{} of {}", thousands(at + 1), thousands(at + shown), thousands(total)),
            },
            all_url: if alone.is_some() || total <= shown { String::new() } else { list_url },
            previous_url,
            next_url,
            cases: page
                .cases
                .into_iter()
                .map(|m| Modified {
                    url: case_url(&path.project, &path.dataset, version, &m.id),
                    changes: m.changes.iter().map(Change::from).collect(),
                    id: m.id,
                })
                .collect(),
        });
    }
    let applied = match q.started.trim().strip_prefix('v').and_then(|n| n.parse::<u64>().ok()) {
        Some(started) if started < from => format!(
            "Your edit started from v{started}; v{from} was committed meanwhile and changed other cases only: \
             your edit was applied on v{from}."
        ),
        _ => String::new(),
    };
    let page = DiffPage {
        applied,
        same: totals == casebook_store::DiffTotals::default(),
        totals: diff_totals_text(&totals),
        whole_url: if alone.is_some() { base.clone() } else { String::new() },
        chrome: Chrome::new(&viewer, format!("{}: v{from} → v{to}", path.dataset))
            .at(path.dataset.clone(), dataset_url(&path.project, &path.dataset))
            .at(format!("v{from} → v{to}"), base),
        sections,
        numbers: versions.iter().rev().map(|v| v.number).collect(),
        dataset: path.dataset,
        from,
        to,
    };
    Ok(html(&page))
}
