//! A dataset's review queue: the head's cases still to review, drafts first, then those with no
//! review state, narrowed by a filter, a page at a time by cursor. Each case has a form to mark
//! it reviewed or rejected (one version each, through `casebook_store::review`); `console.js`
//! adds the keys (`j`/`k`, `a`, `r`, `/`, `?`). A page made stale by a later commit is applied
//! on the new head when the case itself did not change, else refused naming the version.

use axum::http::StatusCode;
use casebook_filter::Filter;
use casebook_model::Case;
use casebook_store::{AnyStore, Cursor, Ref, ReviewRequest, Select, Store};
use serde::Deserialize;

use super::browse::DatasetPath;
use super::page::{Chrome, Failure, PageResult, case_url, dataset_url, html, query, see_other};
use super::review::{Applied, on_head, parse_state};
use super::session::Viewer;
use super::view::CaseView;
use crate::cursor;
use crate::extract::{Form, Path, Query};

/// Cases a queue page shows.
const QUEUE_PAGE: usize = 20;
/// The two parts of the queue, in the order they are worked through.
const DRAFTS: &str = r#"review == "draft""#;
const UNREVIEWED: &str = "not exists(review)";

#[derive(Deserialize, Default)]
pub struct QueueQuery {
    #[serde(rename = "where", default)]
    filter: String,
    /// Where the page starts: `d.TOKEN` (among drafts), `u.TOKEN` (among the unreviewed) or `u`
    /// (at the first unreviewed case).
    #[serde(default)]
    cursor: String,
    /// After an action: the case marked, its new state and the version made.
    #[serde(default)]
    done: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    v: String,
}

/// Which part of the queue a page starts in, and after which case.
#[derive(Debug, Clone, PartialEq)]
enum Place {
    Drafts(Option<Cursor>),
    Unreviewed(Option<Cursor>),
}

impl Place {
    fn parse(text: &str) -> Result<Self, Failure> {
        let bad =
            || Failure::bad_request("`cursor` is not a place in the queue this server gave: start again without it");
        let token = |t: &str| cursor::decode_place(t).map(|place| place.at).map_err(|_| bad());
        match text.split_once('.') {
            _ if text.is_empty() => Ok(Place::Drafts(None)),
            _ if text == "u" => Ok(Place::Unreviewed(None)),
            Some(("d", t)) => Ok(Place::Drafts(Some(token(t)?))),
            Some(("u", t)) => Ok(Place::Unreviewed(Some(token(t)?))),
            _ => Err(bad()),
        }
    }

    fn text(&self, version: u64) -> String {
        let token = |at: &Cursor| {
            cursor::encode_place(&cursor::Place { version, at: at.clone(), backward: false, position: None })
        };
        match self {
            Place::Drafts(None) => String::new(),
            Place::Drafts(Some(at)) => format!("d.{}", token(at)),
            Place::Unreviewed(None) => "u".into(),
            Place::Unreviewed(Some(at)) => format!("u.{}", token(at)),
        }
    }
}

/// One case of the queue, with its form.
pub struct QueueItem {
    pub id: String,
    pub url: String,
    /// `draft`, or empty (no review state).
    pub state: String,
    pub view: CaseView,
}

#[derive(askama::Template)]
#[template(path = "queue.html")]
struct QueuePage {
    chrome: Chrome,
    dataset: String,
    url: String,
    /// The head the page shows, which actions build on.
    version: u64,
    filter: String,
    filter_error: String,
    items: Vec<QueueItem>,
    /// This page's place, which an action comes back to.
    cursor: String,
    next_url: String,
    first_url: String,
    /// What the last action did.
    done: String,
    can_write: bool,
    csrf: String,
}

/// The address of a queue page.
fn queue_url(base: &str, filter: &str, cursor: &str) -> String {
    let mut parts = Vec::new();
    if !filter.is_empty() {
        parts.push(format!("where={}", query(filter)));
    }
    if !cursor.is_empty() {
        parts.push(format!("cursor={}", query(cursor)));
    }
    if parts.is_empty() { base.to_owned() } else { format!("{base}?{}", parts.join("&")) }
}

fn part(part: &str, filter: Option<&Filter>) -> Result<Select, Failure> {
    let mut only = Filter::parse(part).map_err(|e| Failure::internal(e.render(part)))?;
    if let Some(filter) = filter {
        only = filter.clone().and(only);
    }
    Ok(Select { filter: Some(only), limit: None })
}

/// Up to `size` cases of the queue of version `version` from `place`, and the place after them.
async fn read(
    store: &AnyStore,
    dataset: &str,
    version: u64,
    filter: Option<&Filter>,
    place: Place,
    size: usize,
) -> Result<(Vec<Case>, Option<Place>), Failure> {
    let mut cases = Vec::new();
    let after = match place {
        Place::Drafts(after) => {
            let page = store.page(dataset, version, &part(DRAFTS, filter)?, after.as_ref(), size).await?;
            for body in &page.bodies {
                cases.push(serde_json::from_str::<Case>(body).map_err(Failure::internal)?);
            }
            if let Some(next) = page.next {
                return Ok((cases, Some(Place::Drafts(Some(next)))));
            }
            None
        }
        Place::Unreviewed(after) => after,
    };
    if cases.len() == size {
        return Ok((cases, Some(Place::Unreviewed(None))));
    }
    let page = store.page(dataset, version, &part(UNREVIEWED, filter)?, after.as_ref(), size - cases.len()).await?;
    for body in &page.bodies {
        cases.push(serde_json::from_str::<Case>(body).map_err(Failure::internal)?);
    }
    Ok((cases, page.next.map(|next| Place::Unreviewed(Some(next)))))
}

pub async fn queue(viewer: Viewer, Path(path): Path<DatasetPath>, Query(q): Query<QueueQuery>) -> PageResult {
    let store = &viewer.store;
    let head = store.resolve(&path.dataset, &Ref::Latest).await?.number;
    let url = format!("{}/queue", dataset_url(&path.project, &path.dataset));
    let filter_text = q.filter.trim().to_owned();
    let place = Place::parse(q.cursor.trim())?;
    let done = match (q.done.as_str(), q.state.as_str(), q.v.as_str()) {
        ("", _, _) => String::new(),
        (id, state, "") => format!("`{id}` is {state} already: no version was made"),
        (id, state, v) => format!("`{id}` marked {state} in v{v}"),
    };
    let mut page = QueuePage {
        chrome: Chrome::new(&viewer, format!("{} · review queue", path.dataset))
            .at(path.dataset.clone(), dataset_url(&path.project, &path.dataset))
            .at("review queue", url.clone()),
        dataset: path.dataset.clone(),
        url: url.clone(),
        version: head,
        filter: filter_text.clone(),
        filter_error: String::new(),
        items: Vec::new(),
        cursor: place.text(head),
        next_url: String::new(),
        first_url: String::new(),
        done,
        can_write: viewer.can_write(),
        csrf: viewer.csrf.clone(),
    };
    let filter = match filter_text.as_str() {
        "" => None,
        text => match crate::routes::parse_filter(text.to_owned()).await.map_err(Failure::internal)? {
            Ok(filter) => Some(filter),
            Err(err) => {
                page.filter_error = err.render(text);
                let mut response = html(&page);
                *response.status_mut() = StatusCode::BAD_REQUEST;
                return Ok(response);
            }
        },
    };
    if place != Place::Drafts(None) {
        page.first_url = queue_url(&url, &filter_text, "");
    }
    if head == 0 {
        return Ok(html(&page));
    }
    let (cases, next) = read(store, &path.dataset, head, filter.as_ref(), place, QUEUE_PAGE).await?;
    if let Some(next) = next {
        page.next_url = queue_url(&url, &filter_text, &next.text(head));
    }
    page.items = cases
        .iter()
        .map(|case| QueueItem {
            id: case.id.clone(),
            url: case_url(&path.project, &path.dataset, head, &case.id),
            state: case.review.map(|r| super::review::state_name(r).to_owned()).unwrap_or_default(),
            view: CaseView::new(case),
        })
        .collect();
    Ok(html(&page))
}

#[derive(Deserialize)]
pub struct QueueAction {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    case: String,
    /// The head the queue showed (`v5`).
    #[serde(default)]
    base: String,
    /// `reviewed` or `rejected` (or `draft`).
    #[serde(default)]
    state: String,
    #[serde(default)]
    message: String,
    #[serde(rename = "where", default)]
    filter: String,
    #[serde(default)]
    cursor: String,
}

/// Marks one case of the queue, as a new version on the head the queue showed, and goes back
/// to the queue where it was (the case marked has left it, so the next one is first).
pub async fn act(viewer: Viewer, Path(path): Path<DatasetPath>, Form(form): Form<QueueAction>) -> PageResult {
    viewer.check_write(&form.csrf)?;
    let Some(state) = parse_state(&form.state)? else {
        return Err(Failure::bad_request("pick a review state: reviewed or rejected"));
    };
    let base = form.base.trim().strip_prefix('v').and_then(|n| n.parse::<u64>().ok());
    let Some(base) = base else {
        return Err(Failure::bad_request("the form names no version to build on: open the queue again"));
    };
    let id = form.case.trim();
    if id.is_empty() {
        return Err(Failure::bad_request("the form names no case: open the queue again"));
    }
    Place::parse(form.cursor.trim())?;
    let store = &viewer.store;
    let author = crate::routes::author_of(None, &viewer.access.key);
    let time = crate::routes::now();
    let message = Some(form.message.trim().to_owned()).filter(|m| !m.is_empty());
    let applied = on_head(store, &path.dataset, id, base, |on| {
        let request = ReviewRequest {
            dataset: path.dataset.clone(),
            base: Ref::Number(on),
            ids: vec![id.to_owned()],
            select: None,
            review: Some(state),
            confidence: None,
            labels: None,
            author: author.clone(),
            time: time.clone(),
            message: message.clone(),
        };
        casebook_store::review(store, request)
    })
    .await?;
    let url = format!("{}/queue", dataset_url(&path.project, &path.dataset));
    let back = queue_url(&url, form.filter.trim(), form.cursor.trim());
    let state = super::review::state_name(state);
    match applied {
        Applied::Done { value, .. } => {
            let made = match value.outcome {
                casebook_store::CommitOutcome::Created(v) => v.number.to_string(),
                casebook_store::CommitOutcome::Unchanged(_) => String::new(),
            };
            let sep = if back.contains('?') { '&' } else { '?' };
            Ok(see_other(&format!("{back}{sep}done={}&state={state}&v={made}", query(id))))
        }
        Applied::Changed { by, head } => Err(Failure::new(
            StatusCode::CONFLICT,
            format!(
                "v{by} changed `{}` after the queue was shown (it showed v{base}; the head is v{head}): nothing was \
                 written. Look at the case again in the queue: {back}",
                casebook_model::excerpt(id)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_of_the_queue_are_filters() {
        assert!(Filter::parse(DRAFTS).is_ok());
        assert!(Filter::parse(UNREVIEWED).is_ok());
    }

    #[test]
    fn places_read_back() {
        let at = Cursor { ord: 3.5, id: "c/1".into() };
        for place in
            [Place::Drafts(None), Place::Drafts(Some(at.clone())), Place::Unreviewed(None), Place::Unreviewed(Some(at))]
        {
            assert_eq!(Place::parse(&place.text(4)).unwrap(), place);
        }
        assert!(Place::parse("x.abc").is_err());
    }
}
