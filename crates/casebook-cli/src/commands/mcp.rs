//! `casebook mcp`: an MCP server on standard input and output (rmcp, as the runner's per-session
//! server) that lets coding agents and IDEs read datasets: list datasets and versions, search a
//! version's cases with a filter, show a case, diff two versions, lint a version. Read only; it
//! reads where the other commands read (`Source`: the store here, or the server `CASEBOOK_URL`
//! names).
//!
//! The source is opened at the first call, and again after a failure: a server that is down or
//! refuses the key makes each call a tool error naming the server and its reason (an IDE shows
//! tool errors; it hides a server's standard error), and the session goes on once it is fixed.
//!
//! Every answer is bounded ([`MAX_ANSWER`]): lists are cut with a count of what was left out and
//! how to see it. A caller's mistake (an unknown dataset, a bad filter) is a tool error the agent
//! reads, never a protocol error.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context;
use casebook_filter::Filter;
use casebook_lint::{Facts, Linter, Options, Place};
use casebook_store::{Ref, Select};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::Outcome;
use crate::args::McpArgs;
use crate::remote::{RemoteError, configured_url, saved_credentials};
use crate::settings::Global;
use crate::source::Source;
use crate::stores;

/// The most text one answer holds, in bytes.
const MAX_ANSWER: usize = 64 * 1024;
/// Cases a search gives by default, and at most.
const SEARCH_DEFAULT: u64 = 20;
const SEARCH_MAX: u64 = 100;
/// Characters of one case's JSON a search shows; `show_case` shows it whole (within `MAX_ANSWER`).
const CASE_SHOWN: usize = 2000;
/// Ids of each kind a diff lists, and diagnostics a lint lists.
const LISTED: usize = 100;

pub fn run(settings: &Global, _args: McpArgs) -> anyhow::Result<Outcome> {
    let runtime = Arc::new(stores::runtime()?);
    let source = Arc::new(Mutex::new(None));
    let tools = DatasetTools { settings: Arc::new(settings.clone()), source: source.clone(), runtime: runtime.clone() };
    // The protocol runs on a runtime of its own; each call reads the source on a blocking
    // thread, through the source's runtime (its calls block).
    let protocol = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    protocol.block_on(async move {
        let service = tools.serve(rmcp::transport::stdio()).await.context("cannot start the MCP session")?;
        service.waiting().await.context("the MCP session failed")?;
        Ok::<_, anyhow::Error>(())
    })?;
    protocol.shutdown_background();
    let opened = source.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(source) = opened.and_then(|source| Arc::try_unwrap(source).ok()) {
        source.close(&runtime);
    }
    Ok(Outcome::Ok)
}

/// The tools, over one source, opened at the first call that finds it missing.
#[derive(Clone)]
struct DatasetTools {
    settings: Arc<Global>,
    source: Arc<Mutex<Option<Arc<Source>>>>,
    runtime: Arc<tokio::runtime::Runtime>,
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else { unreachable!("tool schemas are objects") };
    Tool::new_with_raw(name, Some(description.into()), schema)
}

fn tools() -> Vec<Tool> {
    let dataset = json!({"type": "string", "description": "`NAME@REF`: REF is `v3`, `latest`, a tag or a content id (prefix); `NAME` alone is the head"});
    vec![
        tool(
            "list_datasets",
            "The datasets: name, head version, cases, description.",
            json!({"type": "object", "properties": {}}),
        ),
        tool(
            "list_versions",
            "The versions of a dataset, newest first: number, content id, author, time, message, cases and changes.",
            json!({"type": "object", "properties": {"dataset": {"type": "string", "description": "The dataset's name"}}, "required": ["dataset"]}),
        ),
        tool(
            "search_cases",
            "The cases of a version that a filter selects, in order, a page at a time (each case's JSON cut to 2,000 characters; `show_case` shows one whole). Filter language: `labels contains \"math\" and metadata.difficulty in [\"hard\"]`, `len(turns) >= 2`, `input matches \"(?i)refund\"`, `exists(expected.output)`.",
            json!({"type": "object", "properties": {
                "dataset": dataset,
                "where": {"type": "string", "description": "A filter; all cases when absent"},
                "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX, "description": "Cases in the page (default 20)"},
                "skip": {"type": "integer", "minimum": 0, "description": "Selected cases to skip: the `next_skip` of the page before"}
            }, "required": ["dataset"]}),
        ),
        tool(
            "show_case",
            "One case of a version, whole, as native casebook JSON.",
            json!({"type": "object", "properties": {"dataset": dataset, "id": {"type": "string", "description": "The case's id"}}, "required": ["dataset", "id"]}),
        ),
        tool(
            "diff_versions",
            "What changed between two versions of a dataset: cases added, removed, moved, and modified with the fields that changed.",
            json!({"type": "object", "properties": {
                "dataset": {"type": "string", "description": "The dataset's name"},
                "from": {"type": "string", "description": "The older version: `v3`, a tag, a content id"},
                "to": {"type": "string", "description": "The newer version (default `latest`)"}
            }, "required": ["dataset", "from"]}),
        ),
        tool(
            "lint_version",
            "Hygiene warnings of a version, as `casebook lint NAME@REF` gives them: duplicates, conflicting or leaked ground truth, label typos, weak labels.",
            json!({"type": "object", "properties": {"dataset": dataset}, "required": ["dataset"]}),
        ),
    ]
}

impl ServerHandler for DatasetTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("casebook", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Read-only access to casebook datasets (agent-evaluation cases, versioned like git). \
                 Start with list_datasets; name versions as NAME@REF.",
            )
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|tool| tool.name == name)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let this = self.clone();
        let arguments = request.arguments.unwrap_or_default();
        let name = request.name.to_string();
        let answer = tokio::task::spawn_blocking(move || this.call(&name, &arguments))
            .await
            .map_err(|e| ErrorData::internal_error(format!("the tool stopped: {e}"), None))?;
        let result = match answer {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(bounded(text))]),
            Err(err) => CallToolResult::error(vec![ContentBlock::text(format!("{err:#}"))]),
        };
        Ok(result.into())
    }
}

impl DatasetTools {
    /// The source, opened now if it is not yet; a failure names the server it was to be.
    fn source(&self) -> anyhow::Result<Arc<Source>> {
        let mut slot = self.source.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(source) = &*slot {
            return Ok(source.clone());
        }
        let opened = Source::open(&self.settings, &self.runtime).map_err(|err| {
            match configured_url(saved_credentials().as_ref()).filter(|_| self.settings.on_server()) {
                Some(url) => naming_server(err, &url),
                None => err,
            }
        })?;
        let opened = Arc::new(opened);
        *slot = Some(opened.clone());
        Ok(opened)
    }

    fn call(&self, name: &str, arguments: &JsonObject) -> anyhow::Result<String> {
        let source = self.source()?;
        self.answer(&source, name, arguments).map_err(|err| match &*source {
            Source::Server(remote) => naming_server(err, &remote.url),
            Source::Store(_) => err,
        })
    }

    fn answer(&self, source: &Source, name: &str, arguments: &JsonObject) -> anyhow::Result<String> {
        let runtime = &*self.runtime;
        match name {
            "list_datasets" => {
                let list = source.datasets(runtime)?;
                if list.is_empty() {
                    return Ok("no datasets yet".to_owned());
                }
                Ok(lines(list.iter().map(|d| {
                    json!({"name": d.name, "head": format!("v{}", d.head), "cases": d.cases, "description": d.header.description})
                })))
            }
            "list_versions" => {
                let dataset = text(arguments, "dataset")?.context("`dataset` is required")?;
                let versions = source.versions(runtime, dataset)?;
                Ok(lines(versions.iter().rev().map(|v| {
                    json!({"version": format!("v{}", v.number), "id": v.id, "parent": v.parent.map(|p| format!("v{p}")),
                        "author": v.author, "time": v.time, "message": v.message, "cases": v.cases,
                        "added": v.added, "removed": v.removed, "modified": v.modified})
                })))
            }
            "search_cases" => self.search(source, arguments),
            "show_case" => {
                let (dataset, reference) = target(arguments)?;
                let id = text(arguments, "id")?.context("`id` is required")?;
                let version = source.resolve(runtime, &dataset, &reference)?;
                match source.case(runtime, &dataset, version.number, id)? {
                    Some(case) => Ok(serde_json::to_string_pretty(&case)?),
                    None => {
                        anyhow::bail!("{dataset}@v{} has no case `{id}`: find ids with `search_cases`", version.number)
                    }
                }
            }
            "diff_versions" => {
                let dataset = text(arguments, "dataset")?.context("`dataset` is required")?;
                let from: Ref = reference(text(arguments, "from")?.context("`from` is required")?)?;
                let to: Ref = reference(text(arguments, "to")?.unwrap_or("latest"))?;
                let (a, b) = (source.resolve(runtime, dataset, &from)?, source.resolve(runtime, dataset, &to)?);
                let diff = source.diff(runtime, dataset, a.number, b.number)?;
                let cut = |ids: &[String]| ids.iter().take(LISTED).cloned().collect::<Vec<_>>();
                let modified: Vec<Value> = diff
                    .modified
                    .iter()
                    .take(LISTED)
                    .map(|m| json!({"id": m.id, "fields": m.changes.iter().map(|c| c.pointer.as_str()).collect::<Vec<_>>()}))
                    .collect();
                Ok(serde_json::to_string_pretty(&json!({
                    "from": format!("v{}", a.number), "to": format!("v{}", b.number),
                    "counts": {"added": diff.added.len(), "removed": diff.removed.len(), "modified": diff.modified.len(), "moved": diff.moved.len()},
                    "added": cut(&diff.added), "removed": cut(&diff.removed), "moved": cut(&diff.moved), "modified": modified,
                    "note": format!("each list shows at most {LISTED} ids; `casebook diff {dataset}@v{} {dataset}@v{}` shows all", a.number, b.number),
                }))?)
            }
            "lint_version" => self.lint(source, arguments),
            other => anyhow::bail!(
                "no tool `{other}`: the tools are list_datasets, list_versions, search_cases, show_case, diff_versions, lint_version"
            ),
        }
    }

    fn search(&self, source: &Source, arguments: &JsonObject) -> anyhow::Result<String> {
        let runtime = &*self.runtime;
        let (dataset, reference) = target(arguments)?;
        let filter = match text(arguments, "where")? {
            Some(text) => Some(Filter::parse(text).map_err(|err| {
                let rendered = err.render(text);
                anyhow::anyhow!("invalid `where`: {}", rendered.strip_prefix("error: ").unwrap_or(&rendered))
            })?),
            None => None,
        };
        let limit = number(arguments, "limit")?.unwrap_or(SEARCH_DEFAULT);
        if !(1..=SEARCH_MAX).contains(&limit) {
            anyhow::bail!("`limit` must be 1 to {SEARCH_MAX}, not {limit}");
        }
        let skip = number(arguments, "skip")?.unwrap_or(0);
        let version = source.resolve(runtime, &dataset, &reference)?;
        let mut select = Select { filter, limit: None };
        let total = source.count(runtime, &dataset, version.number, &select)?;
        // The cases skipped are read and dropped: memory holds a batch, never the version.
        select.limit = Some(skip.saturating_add(limit));
        let (mut seen, mut shown) = (0u64, Vec::new());
        source.bodies(runtime, &dataset, version.number, &select, 500, &mut |bodies| {
            for body in bodies {
                if seen >= skip {
                    shown.push(cut(&body, CASE_SHOWN));
                }
                seen += 1;
            }
            true
        })?;
        let next = skip + shown.len() as u64;
        let mut out = format!(
            "{dataset}@v{}: {total} case{} selected; {} shown from {}",
            version.number,
            if total == 1 { "" } else { "s" },
            shown.len(),
            skip + 1
        );
        if next < total {
            let _ = write!(out, "; next page: skip {next}");
        }
        out.push('\n');
        for body in shown {
            out.push_str(&body);
            out.push('\n');
        }
        Ok(out)
    }

    fn lint(&self, source: &Source, arguments: &JsonObject) -> anyhow::Result<String> {
        let runtime = &*self.runtime;
        let (dataset, reference) = target(arguments)?;
        let version = source.resolve(runtime, &dataset, &reference)?;
        let shown_as = format!("{dataset}@v{}", version.number);
        let mut linter = Linter::new(shown_as.clone(), Options::default(), None);
        let (mut found, mut kept, mut total) = (Vec::new(), Vec::new(), 0u64);
        let mut by_code = std::collections::BTreeMap::<String, u64>::new();
        let mut keep = |found: &mut Vec<casebook_model::Diagnostic>| {
            for d in found.drain(..) {
                total += 1;
                *by_code.entry(d.code.as_str().to_owned()).or_default() += 1;
                if kept.len() < LISTED {
                    kept.push(d);
                }
            }
        };
        source.cases(runtime, &dataset, version.number, &Select::all(), 1024, &mut |cases| {
            for case in &cases {
                linter.add(case, Facts::of(case), Place::default(), &mut found);
                keep(&mut found);
            }
            true
        })?;
        let notes = linter.finish(&mut found);
        keep(&mut found);
        let mut out =
            format!("{shown_as}: {} case{}, {total} warning{}", version.cases, plural(version.cases), plural(total));
        if !by_code.is_empty() {
            let codes: Vec<String> = by_code.iter().map(|(code, n)| format!("{code} {n}")).collect();
            let _ = write!(out, " ({})", codes.join(", "));
        }
        out.push('\n');
        for d in &kept {
            out.push_str(&serde_json::to_string(d)?);
            out.push('\n');
        }
        if total > kept.len() as u64 {
            let _ = writeln!(out, "… {} more: `casebook lint {shown_as}` lists all", total - kept.len() as u64);
        }
        for note in notes {
            let _ = writeln!(out, "note: {note}");
        }
        Ok(out)
    }
}

/// A failure to talk to the server at `url` (its refusal of the key, an answer that is not
/// casebook's) said with the server's address, which the command's own message leaves to the
/// shell's context; the server's answers to the call itself (a missing dataset) are left as
/// they are.
fn naming_server(err: anyhow::Error, url: &str) -> anyhow::Error {
    let about_server = err
        .downcast_ref::<RemoteError>()
        .is_some_and(|e| matches!(e, RemoteError::Unauthorized { .. } | RemoteError::Garbled(..)));
    if about_server && !format!("{err:#}").contains(url) { err.context(format!("the server at {url}")) } else { err }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A string argument, if given.
fn text<'a>(arguments: &'a JsonObject, key: &str) -> anyhow::Result<Option<&'a str>> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => anyhow::bail!("`{key}` must be a string, not {other}"),
    }
}

/// A whole-number argument, if given.
fn number(arguments: &JsonObject, key: &str) -> anyhow::Result<Option<u64>> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_u64().map(Some).with_context(|| format!("`{key}` must be a whole number, not {value}")),
    }
}

fn reference(text: &str) -> anyhow::Result<Ref> {
    text.parse().map_err(|e: String| anyhow::anyhow!(e))
}

/// The `dataset` argument as `NAME@REF`.
fn target(arguments: &JsonObject) -> anyhow::Result<(String, Ref)> {
    stores::target(text(arguments, "dataset")?.context("`dataset` is required")?)
}

/// One JSON value a line.
fn lines(values: impl Iterator<Item = Value>) -> String {
    values.map(|v| v.to_string() + "\n").collect()
}

/// `text` cut to `max` characters, saying so.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}… (cut: {} bytes in all)", &text[..end], text.len()),
        None => text.to_owned(),
    }
}

/// An answer within [`MAX_ANSWER`] bytes, cut at a line when it is longer.
fn bounded(text: String) -> String {
    if text.len() <= MAX_ANSWER {
        return text;
    }
    let mut end = MAX_ANSWER;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let end = text[..end].rfind('\n').map_or(end, |n| n + 1);
    format!("{}… (answer cut at {MAX_ANSWER} bytes: ask for less, with `limit` or `where`)\n", &text[..end])
}
