//! Bulk actions on the cases ticked in a version page's table: set their review state, add or
//! remove a label, or remove them, as one new version with the author and a message. The
//! review goes through `casebook_store::review`, labels and removal through
//! `casebook_store::commit_prepared` (the store's path for cases in hand), each with the version
//! it builds on as parent, so a commit made meanwhile is refused rather than overwritten.
//!
//! A page shows a version; when the head has moved since, the action is refused if the versions
//! between changed any of the ticked cases (the page showed them otherwise than they are), and
//! applied on the head if not.

use std::collections::HashSet;

use axum::http::StatusCode;
use casebook_model::Review;
use casebook_store::{CommitMode, CommitOutcome, CommitRequest, Ref, ReviewRequest, Store, StoreError};

use super::browse::VersionPath;
use super::page::{Failure, PageResult, query, see_other, version_url};
use super::session::Viewer;
use crate::extract::{Form, Path};

/// Cases one action may name (a page shows 50; a form of more was not made by the console).
const MOST: usize = 1000;

/// The fields of the bulk form, read from its pairs (`id` is repeated, one per ticked case).
#[derive(Default)]
struct BulkFields {
    csrf: String,
    base: String,
    action: String,
    state: String,
    label: String,
    message: String,
    ids: Vec<String>,
    /// The table's settings, kept in the address the action returns to.
    filter: String,
    group_by: String,
    columns: String,
}

impl BulkFields {
    fn read(pairs: Vec<(String, String)>) -> Self {
        let mut out = Self::default();
        let mut seen = HashSet::new();
        for (name, value) in pairs {
            match name.as_str() {
                "id" if seen.insert(value.clone()) => out.ids.push(value),
                "csrf" => out.csrf = value,
                "base" => out.base = value,
                "action" => out.action = value,
                "state" => out.state = value,
                "label" => out.label = value.trim().to_owned(),
                "message" => out.message = value.trim().to_owned(),
                "where" => out.filter = value,
                "group_by" => out.group_by = value,
                "columns" => out.columns = value,
                _ => {}
            }
        }
        out
    }
}

enum Action {
    Review(Review),
    Label(String),
    Unlabel(String),
    Remove,
}

impl Action {
    fn of(fields: &BulkFields) -> Result<Self, Failure> {
        let label = || match fields.label.as_str() {
            "" => Err(Failure::bad_request("name the label to add or remove (`category:billing`)")),
            label => Ok(label.to_owned()),
        };
        match fields.action.as_str() {
            "review" => match fields.state.trim() {
                "draft" => Ok(Action::Review(Review::Draft)),
                "reviewed" => Ok(Action::Review(Review::Reviewed)),
                "rejected" => Ok(Action::Review(Review::Rejected)),
                other => Err(Failure::bad_request(format!(
                    "`{}` is not a review state: draft, reviewed or rejected",
                    casebook_model::excerpt(other)
                ))),
            },
            "label" => Ok(Action::Label(label()?)),
            "unlabel" => Ok(Action::Unlabel(label()?)),
            "remove" => Ok(Action::Remove),
            other => Err(Failure::bad_request(format!(
                "`{}` is not a bulk action: review, label, unlabel or remove",
                casebook_model::excerpt(other)
            ))),
        }
    }

    /// The version's message when the form gives none.
    fn message(&self, count: usize) -> String {
        let cases = if count == 1 { "1 case".to_owned() } else { format!("{count} cases") };
        match self {
            Action::Review(state) => format!(
                "review: {cases} {}",
                match state {
                    Review::Draft => "draft",
                    Review::Reviewed => "reviewed",
                    Review::Rejected => "rejected",
                }
            ),
            Action::Label(label) => format!("label `{label}` added to {cases}"),
            Action::Unlabel(label) => format!("label `{label}` removed from {cases}"),
            Action::Remove => format!("removed {cases}"),
        }
    }
}

/// Applies the action to the ticked cases and goes to the version it made, with the table's
/// settings.
pub async fn apply(
    viewer: Viewer,
    Path(path): Path<VersionPath>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> PageResult {
    let fields = BulkFields::read(pairs);
    viewer.check_write(&fields.csrf)?;
    let action = Action::of(&fields)?;
    if fields.ids.is_empty() {
        return Err(Failure::bad_request("no case is selected: tick the cases to change, then apply"));
    }
    if fields.ids.len() > MOST {
        return Err(Failure::bad_request(format!("at most {MOST} cases at a time; {} were sent", fields.ids.len())));
    }
    let base: u64 =
        fields.base.trim().parse().map_err(|_| {
            Failure::bad_request("the form does not say which version it showed (`base`): reload the page")
        })?;
    let store = &viewer.store;
    let dataset = &path.dataset;
    let head = store.resolve(dataset, &Ref::Latest).await?.number;
    if head != base {
        // The versions since the page: do they change a ticked case?
        let ticked: HashSet<&str> = fields.ids.iter().map(String::as_str).collect();
        let touched: Vec<String> = store
            .changed(dataset, base, head)
            .await?
            .into_iter()
            .filter(|c| ticked.contains(c.id.as_str()))
            .map(|c| format!("`{}`", casebook_model::excerpt(&c.id)))
            .collect();
        if !touched.is_empty() {
            return Err(moved_on(&path, base, head, &touched));
        }
    }
    let message = match fields.message.as_str() {
        "" => action.message(fields.ids.len()),
        text => text.to_owned(),
    };
    let author = format!("key:{}", viewer.access.key);
    let time = crate::routes::now();
    let outcome = match &action {
        Action::Review(state) => {
            let request = ReviewRequest {
                dataset: dataset.clone(),
                base: Ref::Number(head),
                ids: fields.ids.clone(),
                select: None,
                review: Some(*state),
                confidence: None,
                labels: None,
                author,
                time,
                message: Some(message),
            };
            casebook_store::review(store, request).await.map(|r| r.outcome)
        }
        Action::Label(_) | Action::Unlabel(_) => {
            let mut prepared = Vec::with_capacity(fields.ids.len());
            let mut missing = Vec::new();
            for id in &fields.ids {
                let Some(mut case) = store.case(dataset, head, id).await? else {
                    missing.push(id.clone());
                    continue;
                };
                let mut labels = case.labels.take().unwrap_or_default();
                match &action {
                    Action::Label(label) if !labels.contains(label) => labels.push(label.clone()),
                    Action::Unlabel(label) => labels.retain(|l| l != label),
                    _ => {}
                }
                case.labels = (!labels.is_empty()).then_some(labels);
                prepared.push(casebook_store::prepare(&case)?);
            }
            if !missing.is_empty() {
                return Err(casebook_store::no_such_cases(store, dataset, head, &missing).await.into());
            }
            let request = CommitRequest {
                dataset: dataset.clone(),
                header: None,
                mode: CommitMode::Upsert,
                parent: Some(head),
                author,
                time,
                message,
            };
            casebook_store::commit_prepared(store, request, prepared).await
        }
        Action::Remove => {
            let known = store.holding(dataset, head, &fields.ids).await?;
            let missing: Vec<String> = fields.ids.iter().filter(|id| !known.contains(*id)).cloned().collect();
            if !missing.is_empty() {
                return Err(casebook_store::no_such_cases(store, dataset, head, &missing).await.into());
            }
            let request = CommitRequest {
                dataset: dataset.clone(),
                header: None,
                mode: CommitMode::Remove(fields.ids.clone()),
                parent: Some(head),
                author,
                time,
                message,
            };
            casebook_store::commit_prepared(store, request, Vec::new()).await
        }
    };
    let number = match outcome {
        Ok(CommitOutcome::Created(v)) => v.number,
        Ok(CommitOutcome::Unchanged(v)) => v.map_or(head, |v| v.number),
        // Committed meanwhile, between the check and the commit.
        Err(StoreError::Conflict { head: now, .. }) => {
            return Err(Failure::new(
                StatusCode::CONFLICT,
                format!(
                    "{dataset} moved on while this action ran: the head is v{now}; nothing was written. \
                     Select the cases again on the head: {}",
                    version_url(&path.project, dataset, now)
                ),
            ));
        }
        Err(err) => return Err(err.into()),
    };
    let mut back = version_url(&path.project, dataset, number);
    let settings: Vec<String> =
        [("where", &fields.filter), ("group_by", &fields.group_by), ("columns", &fields.columns)]
            .into_iter()
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(name, value)| format!("{name}={}", query(value.trim())))
            .collect();
    if !settings.is_empty() {
        back = format!("{back}?{}", settings.join("&"));
    }
    Ok(see_other(&back))
}

/// The refusal of an action on a page that the head has moved past, in ways that touch the
/// ticked cases.
fn moved_on(path: &VersionPath, base: u64, head: u64, touched: &[String]) -> Failure {
    let shown: Vec<&str> = touched.iter().take(10).map(String::as_str).collect();
    let more = touched.len().saturating_sub(shown.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    let head_url = version_url(&path.project, &path.dataset, head);
    Failure::new(
        StatusCode::CONFLICT,
        format!(
            "{} moved on: this page showed v{base}, the head is v{head}, and the versions since changed the selected cases {}{more}; \
             nothing was written. Select the cases again on the head: {head_url}",
            path.dataset,
            shown.join(", ")
        ),
    )
}
