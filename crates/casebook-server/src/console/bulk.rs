//! Bulk actions on the cases ticked in a version page's table, or on all the cases its filter
//! selects (confirmed by the count and the filter the page showed): set their review state, add
//! or remove a label, or remove them, as one new version with the author and a message. The
//! review goes through `casebook_store::review`, labels and removal through
//! `casebook_store::commit_prepared` (the store's path for cases in hand), each with the version
//! it builds on as parent, so a commit made meanwhile is refused rather than overwritten.
//!
//! A page shows a version; when the head has moved since, the action is refused if the versions
//! between changed any of the ticked (or matching) cases (the page showed them otherwise than
//! they are), and applied on the head if not.

use std::collections::HashSet;

use axum::http::StatusCode;
use casebook_model::{Case, Review};
use casebook_store::{CommitMode, CommitOutcome, CommitRequest, Ref, ReviewRequest, Store, StoreError};

use super::browse::VersionPath;
use super::page::{Failure, PageResult, query, see_other, version_url};
use super::session::Viewer;
use crate::extract::{Form, Path};

/// Cases one action may name (a page shows 50; a form of more was not made by the console).
const MOST: usize = 1000;
/// Cases one action over the whole filter may change: they are held in memory until the commit,
/// as `casebook review --where` holds them.
const MOST_MATCHING: u64 = 100_000;
/// Cases read from the store at a time for an action over the whole filter.
const READ: usize = 2000;

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
    /// `all`: the action is on every case the filter selects in the base version, not on the
    /// ticked ones.
    scope: String,
    /// For `scope=all`: the number of cases the page said the filter selects, and `yes` when
    /// the user confirmed the action on all of them.
    count: String,
    confirm: String,
    /// The table's settings, kept in the address the action returns to.
    filter: String,
    group_by: String,
    columns: String,
    sort: String,
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
                "scope" => out.scope = value,
                "count" => out.count = value,
                "confirm" => out.confirm = value,
                "group_by" => out.group_by = value,
                "columns" => out.columns = value,
                "sort" => out.sort = value,
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

    /// Sets what the action sets on `case` (a review state or a label; nothing for a removal).
    fn apply(&self, case: &mut Case) {
        match self {
            Action::Review(state) => case.review = Some(*state),
            Action::Label(label) => {
                let labels = case.labels.get_or_insert_with(Vec::new);
                if !labels.contains(label) {
                    labels.push(label.clone());
                }
            }
            Action::Unlabel(label) => {
                if let Some(labels) = &mut case.labels {
                    labels.retain(|l| l != label);
                }
                if case.labels.as_ref().is_some_and(Vec::is_empty) {
                    case.labels = None;
                }
            }
            Action::Remove => {}
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
    let base: u64 =
        fields.base.trim().parse().map_err(|_| {
            Failure::bad_request("the form does not say which version it showed (`base`): reload the page")
        })?;
    let store = &viewer.store;
    let dataset = &path.dataset;
    // The cases acted on: those ticked, or all the filter selects in the base version (read
    // here, whole, so that they are what the page counted).
    let (ids, matching) = match fields.scope.as_str() {
        "all" => {
            let cases = matching(store, dataset, base, &fields).await?;
            (cases.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), Some(cases))
        }
        _ if fields.ids.is_empty() => {
            return Err(Failure::bad_request(
                "no case is selected: tick the cases to change, or apply to all the matching cases, then apply",
            ));
        }
        _ if fields.ids.len() > MOST => {
            return Err(Failure::bad_request(format!(
                "at most {MOST} cases at a time; {} were sent",
                fields.ids.len()
            )));
        }
        _ => (fields.ids.clone(), None),
    };
    let head = store.resolve(dataset, &Ref::Latest).await?.number;
    if head != base {
        // The versions since the page: do they change a case acted on?
        let chosen: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let touched: Vec<String> = store
            .changed(dataset, base, head)
            .await?
            .into_iter()
            .filter(|c| chosen.contains(c.id.as_str()))
            .map(|c| format!("`{}`", casebook_model::excerpt(&c.id)))
            .collect();
        if !touched.is_empty() {
            return Err(moved_on(&path, base, head, &touched));
        }
    }
    let message = match fields.message.as_str() {
        "" => action.message(ids.len()),
        text => text.to_owned(),
    };
    let author = crate::routes::author_of(None, &viewer.access.key);
    let time = crate::routes::now();
    let outcome = match (&action, matching) {
        (Action::Review(state), None) => {
            let request = ReviewRequest {
                dataset: dataset.clone(),
                base: Ref::Number(head),
                ids: ids.clone(),
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
        (Action::Remove, _) => {
            let known = store.holding(dataset, head, &ids).await?;
            let missing: Vec<String> = ids.iter().filter(|id| !known.contains(*id)).cloned().collect();
            if !missing.is_empty() {
                return Err(casebook_store::no_such_cases(store, dataset, head, &missing).await.into());
            }
            let request = CommitRequest {
                dataset: dataset.clone(),
                header: None,
                mode: CommitMode::Remove(ids.clone()),
                parent: Some(head),
                author,
                time,
                message,
            };
            casebook_store::commit_prepared(store, request, Vec::new()).await
        }
        (_, matching) => {
            // The cases as they are on the head: those read for the filter (no version since
            // the base changed them), or the ticked ones read again.
            let cases = match matching {
                Some(cases) => cases,
                None => {
                    let mut cases = Vec::with_capacity(ids.len());
                    let mut missing = Vec::new();
                    for id in &ids {
                        match store.case(dataset, head, id).await? {
                            Some(case) => cases.push(case),
                            None => missing.push(id.clone()),
                        }
                    }
                    if !missing.is_empty() {
                        return Err(casebook_store::no_such_cases(store, dataset, head, &missing).await.into());
                    }
                    cases
                }
            };
            let mut prepared = Vec::with_capacity(cases.len());
            for mut case in cases {
                action.apply(&mut case);
                prepared.push(casebook_store::prepare(&case)?);
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
    let settings: Vec<String> = [
        ("where", &fields.filter),
        ("group_by", &fields.group_by),
        ("columns", &fields.columns),
        ("sort", &fields.sort),
    ]
    .into_iter()
    .filter(|(_, v)| !v.trim().is_empty())
    .map(|(name, value)| format!("{name}={}", query(value.trim())))
    .collect();
    if !settings.is_empty() {
        back = format!("{back}?{}", settings.join("&"));
    }
    Ok(see_other(&back))
}

/// Every case the form's filter selects in version `base`, once the form confirmed the action on
/// as many as there are: the count the page showed, with `confirm=yes`.
async fn matching(
    store: &casebook_store::AnyStore,
    dataset: &str,
    base: u64,
    fields: &BulkFields,
) -> Result<Vec<Case>, Failure> {
    let filter = fields.filter.trim();
    let select = match super::table::selection(filter).await? {
        Ok((select, _)) => select,
        Err(rendered) => return Err(Failure::bad_request(format!("the filter is not one:\n{rendered}"))),
    };
    let named = match filter {
        "" => format!("of v{base}"),
        text => format!("matching `{}` in v{base}", casebook_model::excerpt(text)),
    };
    let n = store.count(dataset, base, &select).await?;
    if n == 0 {
        return Err(Failure::bad_request(format!("no case {named}: nothing to apply the action to")));
    }
    if fields.confirm.trim() != "yes" || fields.count.trim().parse::<u64>().ok() != Some(n) {
        return Err(Failure::bad_request(format!(
            "confirm the action on all {} cases {named}: tick \"yes, all {}\" beside the button, then apply",
            super::page::thousands(n),
            super::page::thousands(n)
        )));
    }
    if n > MOST_MATCHING {
        return Err(Failure::bad_request(format!(
            "{} cases {named}: at most {} at a time from the console; narrow the filter, or use `casebook review \
             --where` for more",
            super::page::thousands(n),
            super::page::thousands(MOST_MATCHING)
        )));
    }
    let mut cases = Vec::new();
    let mut after = None;
    loop {
        let page = store.page(dataset, base, &select, after.as_ref(), READ).await?;
        for body in &page.bodies {
            cases.push(serde_json::from_str::<Case>(body).map_err(Failure::internal)?);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    Ok(cases)
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
