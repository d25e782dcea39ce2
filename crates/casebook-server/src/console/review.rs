//! Reviewing a case from its page: review state, label confidence and labels set in one action,
//! as a new version built on the version the page shows (`casebook_store::review`, as
//! `casebook review` does), so a commit made meanwhile is refused, not overwritten.

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
}

impl ReviewForm {
    pub fn new(viewer: &Viewer, path: &CasePath, version: u64, case: &Case) -> Option<Self> {
        viewer.can_write().then(|| Self {
            url: format!("{}/review", case_url(&path.project, &path.dataset, version, &case.id)),
            csrf: viewer.csrf.clone(),
            base: version,
            state: case.review.map(|r| state_name(r).to_owned()).unwrap_or_default(),
            confidence: case.confidence.map(|c| c.to_string()).unwrap_or_default(),
            labels: case.labels.as_deref().unwrap_or_default().join(", "),
        })
    }
}

fn state_name(review: Review) -> &'static str {
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
}

/// Sets what the form says on the case, as a new version on the one the page showed, and goes
/// to the case in that version.
pub async fn save(viewer: Viewer, Path(path): Path<CasePath>, Form(form): Form<ReviewFields>) -> PageResult {
    viewer.check_write(&form.csrf)?;
    let review = match form.state.trim() {
        "" => None,
        "draft" => Some(Review::Draft),
        "reviewed" => Some(Review::Reviewed),
        "rejected" => Some(Review::Rejected),
        other => {
            return Err(Failure::bad_request(format!(
                "`{}` is not a review state: draft, reviewed or rejected",
                casebook_model::excerpt(other)
            )));
        }
    };
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
    let request = ReviewRequest {
        dataset: path.dataset.clone(),
        base: casebook_store::Ref::Number(version.number),
        ids: vec![case.id.clone()],
        select: None,
        review,
        confidence,
        labels,
        author: crate::routes::author_of(None, &viewer.access.key),
        time: crate::routes::now(),
        message: Some(form.message.trim().to_owned()).filter(|m| !m.is_empty()),
    };
    let reviewed = match casebook_store::review(store, request).await {
        Ok(reviewed) => reviewed,
        Err(StoreError::Conflict { head, .. }) => {
            let head_url = case_url(&path.project, &path.dataset, head, &case.id);
            return Err(Failure::new(
                StatusCode::CONFLICT,
                format!(
                    "{} moved on: this page showed v{}, the head is v{head}; nothing was written. \
                     Review the case again on the head: {head_url}",
                    path.dataset, version.number
                ),
            ));
        }
        Err(err) => return Err(err.into()),
    };
    let number = match &reviewed.outcome {
        casebook_store::CommitOutcome::Created(v) => v.number,
        casebook_store::CommitOutcome::Unchanged(v) => v.as_ref().map_or(version.number, |v| v.number),
    };
    Ok(see_other(&case_url(&path.project, &path.dataset, number, &case.id)))
}
