//! Setting the review state and label confidence of chosen cases (`casebook review`, the
//! server's review route, the console's case page): the cases are read from a version and
//! committed changed on top of it, so a commit made meanwhile is a conflict, not an update lost.

use std::collections::HashSet;

use casebook_model::{Case, Review};

use crate::{
    AnyStore, CommitMode, CommitOutcome, CommitRequest, Ref, Select, Store, StoreError, commit_prepared, parse_body,
    prepare,
};

/// Cases read, and handed to the commit, at a time.
const BATCH: usize = 4096;

/// Which cases to change, and how.
#[derive(Debug, Clone)]
pub struct ReviewRequest {
    pub dataset: String,
    /// The version the change builds on.
    pub base: Ref,
    /// Cases named by id; each must be in the base version.
    pub ids: Vec<String>,
    /// Cases a filter selects (at most `limit` of them), besides those named; `None` for none.
    pub select: Option<Select>,
    pub review: Option<Review>,
    pub confidence: Option<f64>,
    /// The cases' labels, replacing those they have.
    pub labels: Option<Vec<String>>,
    pub author: String,
    pub time: String,
    /// The version's message; by default what changed (`review: 3 cases reviewed`).
    pub message: Option<String>,
}

/// What the review wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Reviewed {
    pub outcome: CommitOutcome,
    /// The number of cases chosen (changed or already as asked).
    pub cases: usize,
    /// The version the change was built on.
    pub base: u64,
}

/// Reads the chosen cases of the base version, sets what `request` asks on each, and commits
/// them on that version. An id the version lacks, or a selection of nothing, writes nothing.
pub async fn review(store: &AnyStore, request: ReviewRequest) -> Result<Reviewed, StoreError> {
    let version = store.resolve(&request.dataset, &request.base).await?;
    let mut cases: Vec<Case> = Vec::new();
    let mut seen = HashSet::new();
    if let Some(select) = &request.select {
        // Page by page (a callback held across the reads would keep the future from being `Send`).
        let limit = select.limit.unwrap_or(u64::MAX);
        let all = Select { filter: select.filter.clone(), limit: None };
        let mut after = None;
        'pages: loop {
            let page = store.page(&request.dataset, version.number, &all, after.as_ref(), BATCH).await?;
            for body in &page.bodies {
                if cases.len() as u64 >= limit {
                    break 'pages;
                }
                let case = parse_body(body)?;
                if seen.insert(case.id.clone()) {
                    cases.push(case);
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    let mut missing = Vec::new();
    for id in &request.ids {
        if seen.contains(id) {
            continue;
        }
        match store.case(&request.dataset, version.number, id).await? {
            Some(case) => {
                seen.insert(id.clone());
                cases.push(case);
            }
            None if !missing.contains(id) => missing.push(id.clone()),
            None => {}
        }
    }
    if !missing.is_empty() {
        return Err(no_such_cases(store, &request.dataset, version.number, &missing).await);
    }
    if cases.is_empty() {
        return Err(StoreError::NoneSelected { dataset: request.dataset, number: version.number });
    }
    let count = cases.len();
    let mut prepared = Vec::with_capacity(count);
    for mut case in cases {
        if request.review.is_some() {
            case.review = request.review;
        }
        if request.confidence.is_some() {
            case.confidence = request.confidence;
        }
        if let Some(labels) = &request.labels {
            case.labels = (!labels.is_empty()).then(|| labels.clone());
        }
        prepared.push(prepare(&case)?);
    }
    let message = request
        .message
        .unwrap_or_else(|| review_message(count, request.review, request.confidence, request.labels.is_some()));
    let commit = CommitRequest {
        dataset: request.dataset,
        header: None,
        mode: CommitMode::Upsert,
        parent: Some(version.number),
        author: request.author,
        time: request.time,
        message,
    };
    let outcome = commit_prepared(store, commit, prepared).await?;
    Ok(Reviewed { outcome, cases: count, base: version.number })
}

/// [`StoreError::NoCase`] for the ids version `number` of `dataset` lacks, with the id the first
/// may be a typo of.
pub async fn no_such_cases(store: &AnyStore, dataset: &str, number: u64, missing: &[String]) -> StoreError {
    // The ids there are, read only to say which one was meant.
    let mut known = Vec::new();
    let mut after = None;
    loop {
        let page = match store.page(dataset, number, &Select::all(), after.as_ref(), BATCH).await {
            Ok(page) => page,
            Err(err) => return err,
        };
        known.extend(
            page.bodies.iter().filter_map(|b| {
                serde_json::from_str::<serde_json::Value>(b).ok()?.get("id")?.as_str().map(str::to_owned)
            }),
        );
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let refs: Vec<&str> = known.iter().map(String::as_str).collect();
    let hint = missing
        .first()
        .and_then(|first| casebook_model::did_you_mean(first, &refs))
        .map_or_else(String::new, |near| format!("; did you mean `{near}`?"));
    let named: Vec<String> = missing.iter().map(|id| format!("`{id}`")).collect();
    StoreError::NoCase { dataset: dataset.to_owned(), number, cases: named.join(", "), hint }
}

/// `review: 3 cases reviewed (confidence 0.9)`, `…, labels set` when the labels were given.
fn review_message(count: usize, review: Option<Review>, confidence: Option<f64>, labels: bool) -> String {
    let cases = if count == 1 { "1 case".to_owned() } else { format!("{count} cases") };
    let state = review.map(|r| match r {
        Review::Draft => "draft",
        Review::Reviewed => "reviewed",
        Review::Rejected => "rejected",
    });
    let message = match (state, confidence) {
        (Some(state), Some(c)) => format!("review: {cases} {state} (confidence {c})"),
        (Some(state), None) => format!("review: {cases} {state}"),
        (None, Some(c)) => format!("review: confidence {c} on {cases}"),
        (None, None) if labels => format!("review: labels of {cases} set"),
        (None, None) => format!("review: {cases}"),
    };
    if labels && (state.is_some() || confidence.is_some()) { format!("{message}, labels set") } else { message }
}
