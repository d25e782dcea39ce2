//! Downloading a version (or the cases a filter selects) in a format. A format that cannot hold
//! some fields answers a page in the frame that lists them, each with how many cases hold it
//! (what the CLI's refusal without `--lossy` lists case by case), with a link that downloads
//! anyway dropping them and the formats that hold everything; a filter that does not parse
//! answers the version's page with the filter's located error and the form kept.

use std::collections::BTreeMap;

use crate::extract::{Path, Query};
use askama::Template;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use casebook_formats::{ExportSettings, Exporter, Format, SeedFiles};
use casebook_model::{Case, Code};
use casebook_store::{AnyStore, Select, Store};
use serde::Deserialize;

use super::browse::VersionPath;
use super::page::{Chrome, Failure, dataset_url, filters, html, query, version_url};
use super::session::Viewer;
use super::table::CasesQuery;

/// Cases read at a time when looking for what the formats would drop.
const PAGE: usize = 500;

#[derive(Deserialize)]
pub struct DownloadQuery {
    #[serde(default)]
    format: String,
    #[serde(rename = "where", default)]
    filter: String,
    /// `1`: drop what the format cannot hold.
    #[serde(default)]
    lossy: String,
}

/// A field the format cannot hold, and how many of the cases downloaded hold it.
pub struct Dropped {
    pub field: String,
    pub cases: u64,
}

#[derive(Template)]
#[template(path = "download.html")]
struct LossyPage {
    chrome: Chrome,
    dataset: String,
    version: u64,
    format: &'static str,
    filter: String,
    /// Cases the download would write.
    selected: u64,
    dropped: Vec<Dropped>,
    /// Why the format refuses besides the fields (drafts it would confirm, a required field):
    /// then there is no downloading anyway.
    other: String,
    anyway_url: String,
    /// The formats that hold every case, with their download links.
    whole: Vec<(&'static str, String)>,
    back_url: String,
}

fn download_url(base: &str, format: &str, filter: &str, lossy: bool) -> String {
    let mut url = format!("{base}/export?format={}", query(format));
    if !filter.is_empty() {
        url.push_str(&format!("&where={}", query(filter)));
    }
    if lossy {
        url.push_str("&lossy=1");
    }
    url
}

pub async fn export(viewer: Viewer, Path(path): Path<VersionPath>, Query(q): Query<DownloadQuery>) -> Response {
    let filter = q.filter.trim().to_owned();
    if !filter.is_empty() {
        match crate::routes::parse_filter(filter.clone()).await {
            Err(err) => return Failure::internal(err).into_response(),
            // The version's page says where the filter is wrong, with the filter in its box.
            Ok(Err(_)) => {
                let mut cases = CasesQuery::default();
                cases.filter = filter;
                return super::table::version(viewer, Path(path), Query(cases)).await.into_response();
            }
            Ok(Ok(_)) => {}
        }
    }
    let lossy = matches!(q.lossy.as_str(), "1" | "true");
    let format = q.format.trim().to_owned();
    let settings = crate::routes::ExportQuery {
        format: (!format.is_empty()).then(|| format.clone()),
        syntax: None,
        filter: (!filter.is_empty()).then(|| filter.clone()),
        lossy: Some(lossy),
        confirm_drafts: None,
    };
    let err =
        match crate::routes::export_version(viewer.store.clone(), &path.dataset, &path.version, settings, true).await {
            Ok(response) => return response,
            Err(err) => err,
        };
    let unrepresentable = err.body.diagnostics.iter().any(|d| d.code == Code::Unrepresentable);
    let chosen = Format::ALL.into_iter().find(|f| f.name() == format);
    match (err.status, unrepresentable, chosen) {
        (StatusCode::UNPROCESSABLE_ENTITY, true, Some(chosen)) if !lossy => {
            lossy_page(&viewer, &path, chosen, filter).await.unwrap_or_else(IntoResponse::into_response)
        }
        _ => Failure::from(err).into_response(),
    }
}

/// What each format would do with the selected cases: the fields it cannot hold (with the cases
/// holding each), and the first other refusal (empty when none).
struct Verdict {
    format: Format,
    dropped: BTreeMap<String, u64>,
    refusal: String,
}

async fn lossy_page(viewer: &Viewer, path: &VersionPath, chosen: Format, filter: String) -> Result<Response, Failure> {
    let store = &viewer.store;
    let reference: casebook_store::Ref = path.version.parse().map_err(Failure::bad_request)?;
    let version = store.resolve(&path.dataset, &reference).await?;
    let select = crate::routes::select((!filter.is_empty()).then(|| filter.clone())).await?;
    let (verdicts, selected) = try_formats(store, &path.dataset, version.number, &select).await?;
    let base = version_url(&path.project, &path.dataset, version.number);
    let mut page = LossyPage {
        chrome: Chrome::new(viewer, format!("{} v{}: download as {}", path.dataset, version.number, chosen.name()))
            .at(path.dataset.clone(), dataset_url(&path.project, &path.dataset))
            .at(format!("v{}", version.number), base.clone()),
        dataset: path.dataset.clone(),
        version: version.number,
        format: chosen.name(),
        selected,
        dropped: Vec::new(),
        other: String::new(),
        anyway_url: download_url(&base, chosen.name(), &filter, true),
        whole: Vec::new(),
        back_url: match filter.as_str() {
            "" => base.clone(),
            text => format!("{base}?where={}", query(text)),
        },
        filter,
    };
    for verdict in verdicts {
        if verdict.format == chosen {
            let mut dropped: Vec<Dropped> =
                verdict.dropped.into_iter().map(|(field, cases)| Dropped { field, cases }).collect();
            dropped.sort_by(|a, b| b.cases.cmp(&a.cases).then_with(|| a.field.cmp(&b.field)));
            page.dropped = dropped;
            page.other = verdict.refusal;
        } else if verdict.dropped.is_empty() && verdict.refusal.is_empty() {
            let name = verdict.format.name();
            page.whole.push((name, download_url(&base, name, &page.filter, false)));
        }
    }
    let mut response = html(&page);
    *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
    Ok(response)
}

/// Writes the selected cases in every format but `csv` (which needs a column map) to nowhere,
/// page by page, and says what each would drop or refuse, and how many cases were selected.
async fn try_formats(
    store: &AnyStore,
    dataset: &str,
    version: u64,
    select: &Select,
) -> Result<(Vec<Verdict>, u64), Failure> {
    let header = store.header(dataset).await?;
    let mut exporters = Vec::new();
    for format in Format::ALL.into_iter().filter(|f| *f != Format::Csv) {
        let settings = ExportSettings {
            format,
            syntax: format.syntax_for(None),
            column_map: None,
            lossy: true,
            seed_files: SeedFiles::Inline,
            place: format!("{dataset}@v{version}"),
            confirm_drafts: false,
        };
        let mut exporter =
            Exporter::new(settings, &header, Vec::new(), Box::new(std::io::sink()), None).map_err(Failure::internal)?;
        exporter.begin().map_err(Failure::internal)?;
        exporters.push((format, exporter, String::new()));
    }
    let (mut after, mut selected) = (None, 0u64);
    loop {
        // (Page by page: a store's callback reads are not `Send`.)
        let page = store.page(dataset, version, select, after.as_ref(), PAGE).await?;
        let cases = page
            .bodies
            .iter()
            .map(|b| serde_json::from_str::<Case>(b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Failure::internal)?;
        selected += cases.len() as u64;
        for (_, exporter, refusal) in &mut exporters {
            let diagnostics = exporter.cases(&cases).map_err(Failure::internal)?;
            if let Some(error) = diagnostics.iter().find(|d| d.is_error()).filter(|_| refusal.is_empty()) {
                *refusal = error.message.clone();
            }
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let mut verdicts = Vec::new();
    for (format, exporter, mut refusal) in exporters {
        let dropped = exporter.lost_fields().clone();
        let exported = exporter.finish().map_err(Failure::internal)?;
        if let Some(error) = exported.diagnostics.iter().find(|d| d.is_error()).filter(|_| refusal.is_empty()) {
            refusal = error.message.clone();
        }
        verdicts.push(Verdict { format, dropped, refusal });
    }
    Ok((verdicts, selected))
}
