//! Reviewing a case from its page: review state, label confidence and labels set in one action,
//! as a new version built on the version the page shows (`casebook_store::review`, as
//! `casebook review` does). A page made stale by a later commit is applied on the new head when
//! the case itself did not change since (as the queue does), and refused naming the version that
//! changed it when it did.

use axum::http::StatusCode;
use casebook_model::{Case, Review};
use casebook_store::{ReviewRequest, StoreError};
use serde::Deserialize;

use super::browse::CasePath;
use super::page::{Failure, PageResult, case_url, see_other};
use super::session::Viewer;
use crate::extract::{Form, Path};

/// The review form of a case page, for a write key.
pub struct ReviewForm {
    pub url: String,
    pub csrf: String,
    /// The version the page shows, which the review builds on.
    pub base: u64,
    /// `draft`, `reviewed`, `rejected`, or empty (none set).
    pub state: String,
    pub confidence: String,
    /// The labels, comma-separated.
    pub labels: String,
    /// The filter the page was reached through and the case's place in it, which the page
    /// after the review keeps (so "next unreviewed" goes on from there).
    pub filter: String,
    pub pos: String,
    pub of: String,
}

impl ReviewForm {
    pub fn new(viewer: &Viewer, path: &CasePath, version: u64, case: &Case, nav: [&str; 3]) -> Option<Self> {
        viewer.can_write().then(|| Self {
            url: format!("{}/review", case_url(&path.project, &path.dataset, version, &case.id)),
            csrf: viewer.csrf.clone(),
            base: version,
            state: case.review.map(|r| state_name(r).to_owned()).unwrap_or_default(),
            confidence: case.confidence.map(|c| c.to_string()).unwrap_or_default(),
            labels: case.labels.as_deref().unwrap_or_default().join(", "),
            filter: nav[0].to_owned(),
            pos: nav[1].to_owned(),
            of: nav[2].to_owned(),
        })
    }
}

pub(super) fn state_name(review: Review) -> &'static str {
    match review {
        Review::Draft => "draft",
        Review::Reviewed => "reviewed",
        Review::Rejected => "rejected",
    }
}

#[derive(Deserialize)]
pub struct ReviewFields {
    csrf: String,
    /// `draft`, `reviewed`, `rejected`, or empty to leave it.
    #[serde(default)]
    state: String,
    /// From 0 to 1, or empty to leave it.
    #[serde(default)]
    confidence: String,
    /// Comma-separated; the case's labels become these.
    #[serde(default)]
    labels: String,
    #[serde(default)]
    message: String,
    #[serde(rename = "where", default)]
    filter: String,
    #[serde(default)]
    pos: String,
    #[serde(default)]
    of: String,
}

/// Sets what the form says on the case, as a new version on the one the page showed, and goes
/// to the case in that version.
pub async fn save(viewer: Viewer, Path(path): Path<CasePath>, Form(form): Form<ReviewFields>) -> PageResult {
    viewer.check_write(&form.csrf)?;
    let review = parse_state(&form.state)?;
    let confidence = match form.confidence.trim() {
        "" => None,
        text => match text.parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Some(x),
            _ => {
                return Err(Failure::bad_request(format!(
                    "`{}` is not a confidence: a number from 0 to 1",
                    casebook_model::excerpt(text)
                )));
            }
        },
    };
    let mut labels: Vec<String> = Vec::new();
    for label in form.labels.split(',').map(str::trim).filter(|l| !l.is_empty()) {
        if !labels.iter().any(|l| l == label) {
            labels.push(label.to_owned());
        }
    }
    let store = &viewer.store;
    let (version, case) = super::browse::case_at(store, &path).await?;
    // Labels only when they change: the form always sends them.
    let labels = (labels != case.labels.clone().unwrap_or_default()).then_some(labels);
    if review.is_none() && confidence.is_none() && labels.is_none() {
        return Err(Failure::bad_request("nothing to change: pick a review state, a confidence or labels"));
    }
    let author = crate::routes::author_of(None, &viewer.access.key);
    let time = crate::routes::now();
    let message = Some(form.message.trim().to_owned()).filter(|m| !m.is_empty());
    // A page made stale by a later commit is applied on the head when the case did not change
    // since, as the queue does; otherwise it is refused naming the version that changed it.
    let applied = on_head(store, &path.dataset, &case.id, version.number, |on| {
        let request = ReviewRequest {
            dataset: path.dataset.clone(),
            base: casebook_store::Ref::Number(on),
            ids: vec![case.id.clone()],
            select: None,
            review,
            confidence,
            labels: labels.clone(),
            author: author.clone(),
            time: time.clone(),
            message: message.clone(),
        };
        casebook_store::review(store, request)
    })
    .await?;
    let number = match applied {
        Applied::Done { value, on } => match &value.outcome {
            casebook_store::CommitOutcome::Created(v) => v.number,
            casebook_store::CommitOutcome::Unchanged(v) => v.as_ref().map_or(on, |v| v.number),
        },
        Applied::Changed { by, head } => {
            let head_url = case_url(&path.project, &path.dataset, head, &case.id);
            return Err(Failure::new(
                StatusCode::CONFLICT,
                format!(
                    "v{by} changed `{}` after this page was shown (it showed v{}; the head is v{head}): nothing was \
                     written. Review the case again on the head: {head_url}",
                    casebook_model::excerpt(&case.id),
                    version.number
                ),
            ));
        }
    };
    let to = super::browse::case_nav_url(
        &case_url(&path.project, &path.dataset, number, &case.id),
        form.filter.trim(),
        form.pos.trim().parse().ok(),
        form.of.trim().parse().ok(),
    );
    Ok(see_other(&to))
}

/// Where a write built on a version that may no longer be the head landed.
pub(super) enum Applied<T> {
    /// Written (or found already so) on version `on`: the base, or a newer head on which the
    /// case was as on the base.
    Done { value: T, on: u64 },
    /// Version `by` (after the base, up to the head `head`) changed the case: nothing written.
    Changed { by: u64, head: u64 },
}

/// Runs `write` on version `base`; when the head moved meanwhile (a conflict), runs it again
/// on the new head if no version since `base` changed case `id` (the write reads the case
/// there, as it was on the base), and otherwise says which version changed it. The rule of a
/// stale page for one case: the queue's review and a restore.
pub(super) async fn on_head<T, F, Fut>(
    store: &casebook_store::AnyStore,
    dataset: &str,
    id: &str,
    base: u64,
    mut write: F,
) -> Result<Applied<T>, Failure>
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut on = base;
    // A commit landing between the check and the write is met again; a few rounds at most.
    for _ in 0..4 {
        match write(on).await {
            Ok(value) => return Ok(Applied::Done { value, on }),
            Err(StoreError::Conflict { head, .. }) => match changed_since(store, dataset, id, on, head).await? {
                None => on = head,
                Some(by) => return Ok(Applied::Changed { by, head }),
            },
            Err(err) => return Err(err.into()),
        }
    }
    Err(Failure::internal("the dataset's head kept moving while the change was saved"))
}

/// The first version after `base`, up to `head`, that added, changed or removed case `id`
/// (read from its history, one indexed read), or `None`.
pub(super) async fn changed_since(
    store: &casebook_store::AnyStore,
    dataset: &str,
    id: &str,
    base: u64,
    head: u64,
) -> Result<Option<u64>, Failure> {
    use casebook_store::Store;
    let revisions = store.history(dataset, id).await?;
    Ok(revisions
        .iter()
        .flat_map(|r| [Some(r.from_version), r.to_version])
        .flatten()
        .filter(|v| (base + 1..=head).contains(v))
        .min())
}

/// The review state a form names: `None` for empty (leave it).
pub(super) fn parse_state(text: &str) -> Result<Option<Review>, Failure> {
    match text.trim() {
        "" => Ok(None),
        "draft" => Ok(Some(Review::Draft)),
        "reviewed" => Ok(Some(Review::Reviewed)),
        "rejected" => Ok(Some(Review::Rejected)),
        other => Err(Failure::bad_request(format!(
            "`{}` is not a review state: draft, reviewed or rejected",
            casebook_model::excerpt(other)
        ))),
    }
}
