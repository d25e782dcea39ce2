//! The cases table of a version page: the cases a filter (or a bare-word search of the input)
//! selects, a page at a time by cursor in either direction with their position ("1,451–1,500 of
//! 100,000"), chosen columns, counts per value of a path that link to their cases, and, for a
//! write key, checkboxes for the bulk actions of [`super::bulk`].

use askama::Template;
use casebook_filter::{FieldPath, Groups};
use casebook_model::Case;
use casebook_store::{AnyStore, Cursor, Select, Sort, Store};
use serde::Deserialize;
use serde_json::Value;

use super::browse::{VersionPath, VersionRow, case_nav_url, resolve};
use super::page::{Chrome, Failure, PageResult, case_url, dataset_url, html, query, thousands};
use super::session::Viewer;
use super::view::{preview, show};
use crate::cursor::{self, Place};
use crate::extract::{Path, Query};

/// Cases a page of the console shows.
const PAGE: usize = 50;
/// Messages of a list input that a bare-word search reads (`input[0].content` to `input[7]…`).
const SEARCHED_MESSAGES: usize = 8;
/// Characters of a message, or of a column's value, a row shows.
const CELL: usize = 120;

#[derive(Deserialize, Default)]
pub struct CasesQuery {
    #[serde(rename = "where", default)]
    pub(super) filter: String,
    #[serde(default)]
    cursor: String,
    #[serde(default)]
    group_by: String,
    /// Paths shown as columns besides the usual ones, comma-separated (`metadata.team,review`).
    #[serde(default)]
    columns: String,
    /// The order of the table: `id`, a path (`metadata.difficulty`), `-` before for descending;
    /// empty for the version's order.
    #[serde(default)]
    sort: String,
}

pub struct CaseRow {
    pub id: String,
    pub url: String,
    /// The input: the text, or one line per message (`user: …`).
    pub input: Vec<String>,
    pub expected: String,
    /// The chosen columns' values, in their order.
    pub extra: Vec<String>,
    pub labels: String,
    pub review: String,
}

/// A value of the count by path, with a link to the table of its cases.
pub struct GroupRow {
    pub value: String,
    pub count: String,
    /// Empty for a value no filter can name (a list or an object).
    pub url: String,
}

/// What the bulk form of the page needs (a write key only).
pub struct BulkForm {
    pub url: String,
    pub csrf: String,
    pub base: u64,
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
    /// The words a bare-word search looked for in the input (empty for a filter).
    searched: String,
    rows: Vec<CaseRow>,
    /// Cases the filter selects (all of the version's without one).
    selected: u64,
    /// "1,451–1,500 of 100,000" (empty on an empty selection).
    position: String,
    next_url: String,
    previous_url: String,
    first_url: String,
    group_by: String,
    group_error: String,
    groups: Vec<GroupRow>,
    columns: String,
    column_names: Vec<String>,
    column_error: String,
    /// The sort the table is in (empty: the version's order).
    sort: String,
    formats: Vec<&'static str>,
    bulk: Option<BulkForm>,
    /// The dataset's review queue, with this page's filter.
    queue_url: String,
}

impl VersionPage {
    fn selected_text(&self) -> String {
        thousands(self.selected)
    }

    fn total(&self) -> String {
        thousands(self.version.cases)
    }
}

/// The page's address with its settings and a cursor.
struct Links<'a> {
    base: &'a str,
    filter: &'a str,
    group_by: &'a str,
    columns: &'a str,
    sort: &'a str,
}

impl Links<'_> {
    fn at(&self, filter: &str, cursor: &str) -> String {
        let mut parts = Vec::new();
        for (name, value) in [
            ("where", filter),
            ("group_by", self.group_by),
            ("columns", self.columns),
            ("sort", self.sort),
            ("cursor", cursor),
        ] {
            if !value.is_empty() {
                parts.push(format!("{name}={}", query(value)));
            }
        }
        if parts.is_empty() { self.base.to_owned() } else { format!("{}?{}", self.base, parts.join("&")) }
    }

    fn page(&self, cursor: &str) -> String {
        self.at(self.filter, cursor)
    }
}

pub async fn version(viewer: Viewer, Path(path): Path<VersionPath>, Query(q): Query<CasesQuery>) -> PageResult {
    let store = &viewer.store;
    let sort = Sort::parse(&q.sort).map_err(Failure::bad_request)?;
    let sort_text = sort.as_ref().map(Sort::text).unwrap_or_default();
    let (place, sorted_place) = match (q.cursor.as_str(), &sort) {
        ("", _) => (None, None),
        (text, None) => (Some(cursor::decode_place_for(store, &path.dataset, text).await?), None),
        (text, Some(_)) => (None, Some(cursor::decode_sorted_for(store, &path.dataset, &sort_text, text).await?)),
    };
    let number = match (&place, &sorted_place) {
        (Some(place), _) => place.version,
        (_, Some(place)) => place.version,
        _ => resolve(store, &path.dataset, &path.version).await?.number,
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
        searched: String::new(),
        rows: Vec::new(),
        selected: version.cases,
        position: String::new(),
        next_url: String::new(),
        previous_url: String::new(),
        first_url: String::new(),
        group_by: q.group_by.trim().to_owned(),
        group_error: String::new(),
        groups: Vec::new(),
        columns: q.columns.trim().to_owned(),
        column_names: Vec::new(),
        column_error: String::new(),
        sort: sort_text.clone(),
        formats: casebook_formats::Format::ALL.iter().map(|f| f.name()).collect(),
        queue_url: match filter.as_str() {
            "" => format!("{}/queue", dataset_url(&path.project, &path.dataset)),
            text => format!("{}/queue?where={}", dataset_url(&path.project, &path.dataset), query(text)),
        },
        bulk: viewer.can_write().then(|| BulkForm {
            url: format!("{}/bulk", version.url),
            csrf: viewer.csrf.clone(),
            base: number,
        }),
        version,
    };
    let mut columns = Vec::new();
    for name in page.columns.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        match FieldPath::parse(name) {
            Ok(path) => {
                page.column_names.push(path.to_string());
                columns.push(path);
            }
            Err(err) => {
                page.column_error = format!("column `{name}`:\n{}", err.render(name));
                break;
            }
        }
    }
    let select = match selection(&filter).await? {
        Ok((select, words)) => {
            page.searched = words;
            select
        }
        Err(rendered) => {
            page.filter_error = rendered;
            let mut response = html(&page);
            *response.status_mut() = axum::http::StatusCode::BAD_REQUEST;
            return Ok(response);
        }
    };
    if select.filter.is_some() {
        page.selected = store.count(&path.dataset, number, &select).await?;
    }
    let links = Links {
        base: &page.version.url,
        filter: &filter,
        group_by: &page.group_by,
        columns: &page.columns,
        sort: &sort_text,
    };
    let (bodies, start) = match &sort {
        Some(sort) => {
            let seek = sorted_place.as_ref().map(|p| &p.seek);
            let found = store.page_sorted(&path.dataset, number, &select, sort, seek, PAGE).await?;
            let shown = found.bodies.len() as u64;
            let start = match &sorted_place {
                None => Some(0),
                Some(p) if p.seek.backward => p.position.map(|n| n.saturating_sub(shown)),
                Some(p) => p.position,
            };
            let start = if found.previous.is_none() { Some(0) } else { start };
            let at = |key: &casebook_store::SortKey, backward: bool, position: Option<u64>| {
                let seek = casebook_store::SortSeek { key: key.clone(), backward };
                let place = cursor::SortedPlace { version: number, sort: sort_text.clone(), seek, position };
                links.page(&cursor::encode_sorted(&place))
            };
            if let Some(next) = &found.next {
                page.next_url = at(next, false, start.map(|s| s + shown));
            }
            if let Some(previous) = &found.previous {
                page.previous_url = at(previous, true, start);
                page.first_url = links.page("");
            }
            (found.bodies, start)
        }
        None => {
            let found = match &place {
                Some(Place { backward: true, at, .. }) => {
                    store.page_before(&path.dataset, number, &select, at, PAGE).await?
                }
                Some(Place { at, .. }) => store.page(&path.dataset, number, &select, Some(at), PAGE).await?,
                None => store.page(&path.dataset, number, &select, None, PAGE).await?,
            };
            // Cases of the selection before the page: a cursor this console made says.
            let shown = found.bodies.len() as u64;
            let start = match &place {
                None => Some(0),
                Some(Place { backward: true, position, .. }) => position.map(|n| n.saturating_sub(shown)),
                Some(Place { position, .. }) => *position,
            };
            // A page with nothing before it starts the selection, whatever the cursor said.
            let start = if found.previous.is_none() { Some(0) } else { start };
            if let Some(next) = &found.next {
                let place =
                    Place { version: number, at: next.clone(), backward: false, position: start.map(|s| s + shown) };
                page.next_url = links.page(&cursor::encode_place(&place));
            }
            if let Some(previous) = &found.previous {
                let place = Place { version: number, at: previous.clone(), backward: true, position: start };
                page.previous_url = links.page(&cursor::encode_place(&place));
                page.first_url = links.page("");
            }
            (found.bodies, start)
        }
    };
    let shown = bodies.len() as u64;
    // The case pages go on through what the table shows (a search as the filter it makes), with
    // each case's position when the page's is known.
    let nav_filter = match page.searched.is_empty() {
        true => filter.clone(),
        false => select.filter.as_ref().map(|f| f.to_string()).unwrap_or_default(),
    };
    for (i, body) in bodies.iter().enumerate() {
        let case: Case = serde_json::from_str(body).map_err(Failure::internal)?;
        let mut row = row(&path, number, &case, &columns);
        row.url = case_nav_url(&row.url, &nav_filter, start.map(|s| s + i as u64 + 1), Some(page.selected));
        if !sort_text.is_empty() {
            // The case page goes on through the table in its sort.
            let sep = if row.url.contains('?') { '&' } else { '?' };
            row.url = format!("{}{sep}sort={}", row.url, query(&sort_text));
        }
        page.rows.push(row);
    }
    if shown > 0 {
        page.position = match start {
            Some(start) => {
                format!("{}–{} of {}", thousands(start + 1), thousands(start + shown), thousands(page.selected))
            }
            None => format!("{} cases of {}", shown, thousands(page.selected)),
        };
    }
    if !page.group_by.is_empty() {
        match FieldPath::parse(&page.group_by) {
            Err(err) => page.group_error = err.render(&page.group_by),
            Ok(by) => {
                // A group narrows what the table shows now: the filter, or the search's.
                let shown_filter = match page.searched.is_empty() {
                    true => filter.clone(),
                    false => select.filter.as_ref().map(|f| f.to_string()).unwrap_or_default(),
                };
                let by_name = by.to_string();
                for (value, n) in group(store, &path.dataset, number, &select, by).await? {
                    let url = match group_test(&by_name, value.as_ref()) {
                        Some(test) if shown_filter.is_empty() => links.at(&test, ""),
                        Some(test) => links.at(&format!("({shown_filter}) and {test}"), ""),
                        None => String::new(),
                    };
                    let value = value.as_ref().map_or_else(|| format!("(no {by_name})"), show);
                    page.groups.push(GroupRow { value, count: thousands(n), url });
                }
            }
        }
    }
    Ok(html(&page))
}

/// What the table's filter text selects: every case (empty), the filter, or the search of the
/// input that bare words make (with the words searched); `Err` holds the filter's error as the
/// CLI shows it. The table and the bulk actions over the whole filter read a text alike.
pub(super) async fn selection(text: &str) -> Result<Result<(Select, String), String>, Failure> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Ok((Select::all(), String::new())));
    }
    match crate::routes::parse_filter(text.to_owned()).await.map_err(Failure::internal)? {
        Ok(filter) => Ok(Ok((Select { filter: Some(filter), limit: None }, String::new()))),
        Err(err) => match bare_words(text) {
            Some(words) => {
                let search = search_filter(&words);
                let parsed = crate::routes::parse_filter(search).await.map_err(Failure::internal)?;
                Ok(Ok((Select { filter: Some(parsed.map_err(Failure::internal)?), limit: None }, words)))
            }
            None => Ok(Err(err.render(text))),
        },
    }
}

fn row(path: &VersionPath, number: u64, case: &Case, columns: &[FieldPath]) -> CaseRow {
    CaseRow {
        url: case_url(&path.project, &path.dataset, number, &case.id),
        input: input_lines(&case.task.input),
        expected: case.expected.output.as_ref().map(|v| preview(v, CELL)).unwrap_or_default(),
        extra: columns
            .iter()
            .map(|c| c.values(case).iter().map(|v| preview(v, CELL)).collect::<Vec<_>>().join(", "))
            .collect(),
        labels: case.labels.as_deref().unwrap_or_default().join(", "),
        review: case.review.as_ref().map(|r| show(&serde_json::to_value(r).unwrap_or_default())).unwrap_or_default(),
        id: case.id.clone(),
    }
}

/// An input as the table shows it: its text, or each message as `role: text`, each cut short.
fn input_lines(input: &Value) -> Vec<String> {
    match input {
        Value::Array(messages) if messages.iter().all(|m| m.get("content").is_some()) => messages
            .iter()
            .map(|m| {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("message");
                let content = m.get("content").map(|c| preview(c, CELL)).unwrap_or_default();
                format!("{role}: {content}")
            })
            .collect(),
        other => vec![preview(other, CELL * 2)],
    }
}

/// The words to search the input for, when a text that is not a filter reads as words rather
/// than as a filter gone wrong: one quoted phrase (`"refund policy"`), or words with none of the
/// language's operators, brackets, quotes, test keywords or paths into a case's fields.
fn bare_words(text: &str) -> Option<String> {
    let text = text.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(quote).and_then(|t| t.strip_suffix(quote)) {
            let inner = inner.trim();
            return (!inner.is_empty() && !inner.contains(quote)).then(|| inner.to_owned());
        }
    }
    if text.is_empty() || text.contains(['=', '!', '<', '>', '(', ')', '[', ']', '"', '\'']) {
        return None;
    }
    let filter_like = text.split_whitespace().any(|word| {
        matches!(word, "contains" | "matches" | "exists")
            || word
                .split_once('.')
                .is_some_and(|(root, _)| casebook_model::CASE_FIELDS.contains(&root) || matches!(root, "label" | "len"))
    });
    (!filter_like).then(|| text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The filter of a bare-word search: the input's text, or the content of one of its first
/// messages, holds the words, letter case ignored.
fn search_filter(words: &str) -> String {
    let pattern = Value::String(format!("(?i){}", regex_escape(words))).to_string();
    let mut tests = vec![format!("input matches {pattern}")];
    tests.extend((0..SEARCHED_MESSAGES).map(|i| format!("input[{i}].content matches {pattern}")));
    tests.join(" or ")
}

/// `text` as a regex that matches it literally (Rust regex syntax).
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The test that selects the cases of one group of a count by `path`: equal to the value, or
/// without the field; `None` for a list or an object, which no test equals.
fn group_test(path: &str, value: Option<&Value>) -> Option<String> {
    match value {
        None => Some(format!("not exists({path})")),
        Some(Value::Array(_) | Value::Object(_)) => None,
        Some(scalar) => Some(format!("{path} == {scalar}")),
    }
}

/// Selected cases counted per value of a path: in the database where the store can
/// (`Store::group_counts`), else read page by page (a store's callback reads are not `Send`).
async fn group(
    store: &AnyStore,
    dataset: &str,
    version: u64,
    select: &Select,
    path: FieldPath,
) -> Result<Vec<(Option<Value>, u64)>, Failure> {
    if let Some(groups) = store.group_counts(dataset, version, select, &path).await? {
        return Ok(groups);
    }
    let mut groups = Groups::new(path);
    let mut after: Option<Cursor> = None;
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
    Ok(groups.sorted())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_searched_and_filters_gone_wrong_are_not() {
        assert_eq!(bare_words("ticket").as_deref(), Some("ticket"));
        assert_eq!(bare_words("  refund   policy ").as_deref(), Some("refund policy"));
        assert_eq!(bare_words("\"refund policy\"").as_deref(), Some("refund policy"));
        assert_eq!(bare_words("'a.b'").as_deref(), Some("a.b"));
        assert_eq!(bare_words("labels contains"), None);
        assert_eq!(bare_words("metadata.difficulty"), None);
        assert_eq!(bare_words("confidence >= "), None);
        assert_eq!(bare_words("(ticket"), None);
        assert_eq!(bare_words("\"\""), None);
    }

    #[test]
    fn a_search_is_a_filter_that_parses() {
        let text = search_filter("a.b (c)? \"d\"");
        let filter = casebook_filter::Filter::parse(&text).unwrap();
        let case: Case =
            serde_json::from_value(serde_json::json!({"id": "x", "input": "see A.B (C)? \"D\" here"})).unwrap();
        assert!(filter.matches(&case));
        let other: Case = serde_json::from_value(serde_json::json!({"id": "y", "input": "a b c d"})).unwrap();
        assert!(!filter.matches(&other));
    }

    #[test]
    fn group_tests_name_their_value() {
        assert_eq!(
            group_test("metadata.team", Some(&Value::String("a \"b\"".into()))).unwrap(),
            r#"metadata.team == "a \"b\"""#
        );
        assert_eq!(group_test("label.category", None).unwrap(), "not exists(label.category)");
        assert_eq!(group_test("metadata.n", Some(&serde_json::json!(3))).unwrap(), "metadata.n == 3");
        assert_eq!(group_test("tools", Some(&serde_json::json!([]))), None);
    }
}
