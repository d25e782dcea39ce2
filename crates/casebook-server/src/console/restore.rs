//! Restoring an old content of a case from its page's history: that content committed as a new
//! version on the head the page showed. When the head moved meanwhile, the content is put on
//! the new head if no version since changed the case, else nothing is written and the page
//! names the version that did (as the editor refuses to overwrite a colleague's change).

use axum::http::StatusCode;
use casebook_store::{CommitMode, CommitOutcome, CommitRequest, Store};
use serde::Deserialize;

use super::browse::CasePath;
use super::page::{Failure, PageResult, case_url, see_other};
use super::review::{Applied, on_head};
use super::session::Viewer;
use crate::extract::{Form, Path};

/// The restore buttons of a case page's history, for a write key.
pub struct RestoreForm {
    pub url: String,
    pub csrf: String,
    /// The head the page showed, which the restore builds on.
    pub base: u64,
    /// The head's content id of the case (empty when the head lacks it): that content has no
    /// button.
    pub head_content: String,
}

impl RestoreForm {
    pub fn new(viewer: &Viewer, path: &CasePath, shown: u64, head: u64, head_content: String) -> Option<Self> {
        viewer.can_write().then(|| Self {
            url: format!("{}/restore", case_url(&path.project, &path.dataset, shown, &path.case)),
            csrf: viewer.csrf.clone(),
            base: head,
            head_content,
        })
    }
}

#[derive(Deserialize)]
pub struct RestoreFields {
    #[serde(default)]
    csrf: String,
    /// The version whose content of the case is restored (`v2`).
    #[serde(default)]
    content: String,
    /// The head the page showed (`v5`).
    #[serde(default)]
    base: String,
    #[serde(default)]
    message: String,
    /// `yes` when the person ticked the confirmation.
    #[serde(default)]
    confirm: String,
}

fn version_number(text: &str, what: &str) -> Result<u64, Failure> {
    text.trim().strip_prefix('v').and_then(|n| n.parse::<u64>().ok()).ok_or_else(|| {
        Failure::bad_request(format!("the form names no {what} version (`v2`): open the case page again"))
    })
}

/// Commits the case as it was in `content` on the head, and goes to the case in the new version.
pub async fn restore(viewer: Viewer, Path(path): Path<CasePath>, Form(form): Form<RestoreFields>) -> PageResult {
    viewer.check_write(&form.csrf)?;
    let content = version_number(&form.content, "restored")?;
    let base = version_number(&form.base, "base")?;
    if form.confirm != "yes" {
        return Err(Failure::bad_request(format!(
            "tick the confirmation to restore `{}` as it was in v{content}: nothing was written",
            casebook_model::excerpt(&path.case)
        )));
    }
    let store = &viewer.store;
    let Some(case) = store.case(&path.dataset, content, &path.case).await? else {
        return Err(Failure::not_found(format!(
            "`{}` v{content} has no case `{}`",
            path.dataset,
            casebook_model::excerpt(&path.case)
        )));
    };
    let prepared = casebook_store::prepare(&case)?;
    let message = match form.message.trim() {
        "" => format!("restore `{}` as it was in v{content}", case.id),
        text => text.to_owned(),
    };
    let author = crate::routes::author_of(None, &viewer.access.key);
    let time = crate::routes::now();
    let applied = on_head(store, &path.dataset, &case.id, base, |on| {
        let request = CommitRequest {
            dataset: path.dataset.clone(),
            header: None,
            mode: CommitMode::Upsert,
            parent: Some(on),
            author: author.clone(),
            time: time.clone(),
            message: message.clone(),
        };
        casebook_store::commit_prepared(store, request, vec![prepared.clone()])
    })
    .await?;
    match applied {
        Applied::Done { value: CommitOutcome::Created(version), .. } => {
            Ok(see_other(&case_url(&path.project, &path.dataset, version.number, &case.id)))
        }
        Applied::Done { value: CommitOutcome::Unchanged(_), on } => {
            Ok(see_other(&case_url(&path.project, &path.dataset, on, &case.id)))
        }
        Applied::Changed { by, head } => {
            // Changed since the page was shown, maybe to this very content: then there is
            // nothing to write.
            let now = store.case(&path.dataset, head, &case.id).await?;
            if now.as_ref().map(casebook_store::prepare).transpose()?.map(|p| p.content_id) == Some(prepared.content_id)
            {
                return Ok(see_other(&case_url(&path.project, &path.dataset, head, &case.id)));
            }
            Err(Failure::new(
                StatusCode::CONFLICT,
                format!(
                    "v{by} changed `{}` after this page was shown (it showed the head v{base}; the head is v{head}): \
                     nothing was written. Look at the case on the head, then restore again: {}",
                    casebook_model::excerpt(&case.id),
                    case_url(&path.project, &path.dataset, head, &case.id)
                ),
            ))
        }
    }
}
