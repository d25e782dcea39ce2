//! Experiment files (YAML or JSON): which dataset, which cases, against which targets, how many
//! times, graded how. Every problem names the file, line and column of the key or value at
//! fault.
//!
//! ```yaml
//! name: support-smoke
//! dataset: support.jsonl          # a file (relative to this one), or NAME@REF in the store
//! filter: 'labels contains "refunds"'
//! memory_seeds: [{source: profile, content: "prefers email"}]
//! scenarios:
//!   - {name: echo, target: "builtin:echo"}
//! n_runs: 3
//! graders:
//!   - {kind: contains, weight: 2}
//!   - {kind: exact_match}
//! min_confidence: 0.7             # leave out cases whose label confidence is below 0.7
//! include_rejected: false         # cases reviewed as `rejected` are left out unless true
//! threshold: 0.8                  # pass rate the experiment needs (exit 1 below it)
//! exclude_ungraded: false         # true: ungraded results are left out of the pass rate
//! judge: {endpoint: "http://127.0.0.1:8000/v1", model: m}   # for cases' `llm-rubric` asserts
//! concurrency: 8
//! timeout_secs: 60
//! retries: 2
//! noise: {from: cases, items: 3, similar_by: label.service, seed: 7}
//! mcp: true                       # serve the cases' recorded tool answers over MCP (default)
//! max_steps: 10                   # calls of the agent per turn while it calls tools
//! ```
//!
//! `max_steps` bounds a turn's tool loop (see [`crate::environment::tool_loop`]): the agent is
//! called at most that many times in one turn (default 10); one still calling tools then makes
//! the run an error of kind `max-steps`. A scenario's own `max_steps` replaces it there. It is
//! part of the run hash of cases with recorded tool answers when it is not the default.
//!
//! `noise` widens each case's context with unrelated items (see [`crate::noise`]): `from` is
//! `cases` (the context items of the other selected cases; the default) or a file of context
//! items (YAML or JSON list, or JSONL) relative to this one; `items` how many per case (at least
//! 1); `similar_by` a field path (`label.service`, `metadata.team`) whose shared values put those
//! cases' items first; `seed` a whole number (default 0); `tools: {entries: N, defaults: R}`
//! noise in the tools' recorded answers instead of (or besides) the context (`items` may then be
//! left out). Given at the top it applies to every
//! scenario; a scenario's own `noise` replaces it there, and `noise: false` (or `null`) turns it
//! off. A scenario with noise beside one without gives a robustness figure in the summary.
//!
//! `mcp` (default `true`) serves the tools of each run whose case has recorded answers as an MCP
//! server (see [`crate::mcp`]) to agents that can be told its address (`http` and `command`
//! targets; a chat-completions model is answered by the tool loop instead); a scenario's own
//! `mcp` replaces the top-level one.
//!
//! Without `graders`, each case is graded by the checks it carries (promptfoo asserts, see
//! [`crate::grade::asserts`]); `judge` gives the chat-completions endpoint and model (the options
//! of an `llm_judge` grader) their `llm-rubric` asserts are judged by.
//!
//! letta-evals suite files are accepted too: [`crate::letta_suite`] recognises them and maps
//! them onto the same [`Experiment`].

use std::path::Path;

use casebook_formats::node::{Node, NodeValue};
use casebook_formats::pointer::Ptr;
use casebook_model::Seed;
use serde_json::Value;

use crate::noise::NoiseSpec;

/// A parsed experiment, its parts still as JSON where other modules give them meaning (targets,
/// graders), each with where it was in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub name: String,
    pub description: Option<String>,
    /// A file path (relative to the experiment file) or `NAME@REF`.
    pub dataset: String,
    pub filter: Option<String>,
    /// letta's `sample_tags`: cases with all of them.
    pub tags: Vec<String>,
    /// letta's `max_samples`.
    pub limit: Option<u64>,
    /// Cases whose `confidence` is below this are left out; cases without one are kept.
    pub min_confidence: Option<f64>,
    /// Run cases reviewed as `rejected` too (they are left out otherwise).
    pub include_rejected: bool,
    pub memory_seeds: Vec<Seed>,
    pub scenarios: Vec<Scenario>,
    pub n_runs: u32,
    pub graders: Vec<Located<Value>>,
    /// The `llm_judge` options cases' `llm-rubric` asserts are judged with (`judge:`).
    pub judge: Option<Located<Value>>,
    pub threshold: f64,
    /// Leave ungraded results out of the pass rate rather than count them as not passed.
    pub exclude_ungraded: bool,
    pub concurrency: usize,
    pub timeout_secs: f64,
    pub retries: u32,
    /// A target the file names but casebook cannot start (a letta suite's Letta agent), as the
    /// located error naming its key. `scenarios` is then empty: a target given on the command
    /// line replaces it, and without one this error is what to report (see
    /// [`Experiment::missing_target`]).
    pub unsupported_target: Option<ExperimentError>,
    /// The top-level `noise`: what every scenario without its own `noise` key has.
    pub noise: Option<NoiseSpec>,
    /// The top-level `mcp` (default true): what every scenario without its own `mcp` key has.
    pub mcp: bool,
    /// The top-level `max_steps`: what every scenario without its own has.
    pub max_steps: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    /// A target string (`http://…`, `builtin:echo`…) or an object.
    pub target: Located<Value>,
    /// The noise this scenario's cases get (its own `noise`, else the experiment's).
    pub noise: Option<NoiseSpec>,
    /// Whether the runs of cases with recorded tool answers serve them as an MCP server, when the
    /// target can be told its address (`http` and `command` agents; its own `mcp`, else the
    /// experiment's, default true).
    pub mcp: bool,
    /// The most calls of the agent per turn (its own `max_steps`, else the experiment's; `None`:
    /// the default, [`crate::environment::DEFAULT_MAX_STEPS`]).
    pub max_steps: Option<u32>,
}

/// A value and where it starts in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Located<T> {
    pub value: T,
    pub at: Place,
}

/// A line and column (1-based) in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    pub line: u64,
    pub column: u64,
}

/// A problem with an experiment file, located.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}", line = at.line, column = at.column)]
pub struct ExperimentError {
    pub file: String,
    pub at: Place,
    /// Where the line of `at` starts in the file, in bytes (to show the line).
    pub line_offset: u64,
    pub message: String,
    pub hint: Option<String>,
    /// Further problems of the same file, in order (every one is reported, not only the first).
    pub more: Vec<ExperimentError>,
}

/// Keeps `result`'s value, or its error among `problems`.
fn keep<T>(problems: &mut Vec<ExperimentError>, result: Result<T, ExperimentError>) -> Option<T> {
    result.map_err(|e| problems.push(e)).ok()
}

const KEYS: &[&str] = &[
    "name",
    "description",
    "dataset",
    "filter",
    "tags",
    "limit",
    "min_confidence",
    "include_rejected",
    "memory_seeds",
    "scenarios",
    "target",
    "n_runs",
    "graders",
    "judge",
    "threshold",
    "exclude_ungraded",
    "concurrency",
    "timeout_secs",
    "retries",
    "noise",
    "mcp",
    "max_steps",
];

/// Turns byte offsets of the file into places and located errors.
pub(crate) struct Reader<'t> {
    pub(crate) file: &'t str,
    pub(crate) text: &'t str,
}

impl Reader<'_> {
    pub(crate) fn place(&self, offset: usize) -> Place {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() as u64 + 1;
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        Place { line, column: before[start..].chars().count() as u64 + 1 }
    }

    pub(crate) fn error(&self, offset: usize, message: impl Into<String>) -> ExperimentError {
        let offset = offset.min(self.text.len());
        let line_offset = self.text[..offset].rfind('\n').map_or(0, |i| i + 1) as u64;
        ExperimentError {
            file: self.file.to_owned(),
            at: self.place(offset),
            line_offset,
            message: message.into(),
            hint: None,
            more: Vec::new(),
        }
    }

    pub(crate) fn hinted(&self, offset: usize, message: impl Into<String>, hint: impl Into<String>) -> ExperimentError {
        ExperimentError { hint: Some(hint.into()), ..self.error(offset, message) }
    }

    pub(crate) fn value(&self, node: &Node, key: &str) -> Result<Value, ExperimentError> {
        node.to_value(&Ptr::ROOT.key(key))
            .map_err(|_| self.error(node.offset, format!("`{key}` holds a number JSON cannot represent")))
    }

    pub(crate) fn string(&self, node: &Node, key: &str) -> Result<String, ExperimentError> {
        match &node.value {
            NodeValue::String(s) => Ok(s.to_string()),
            other => Err(self.error(node.offset, format!("`{key}` must be text, not {}", other.kind()))),
        }
    }

    pub(crate) fn number(&self, node: &Node, key: &str) -> Result<f64, ExperimentError> {
        match &node.value {
            NodeValue::Number(text) => {
                text.parse().map_err(|_| self.error(node.offset, format!("`{key}` is not a number")))
            }
            other => Err(self.error(node.offset, format!("`{key}` must be a number, not {}", other.kind()))),
        }
    }

    pub(crate) fn boolean(&self, node: &Node, key: &str) -> Result<bool, ExperimentError> {
        match &node.value {
            NodeValue::Bool(b) => Ok(*b),
            other => Err(self.error(node.offset, format!("`{key}` must be `true` or `false`, not {}", other.kind()))),
        }
    }

    pub(crate) fn count(&self, node: &Node, key: &str, min: f64) -> Result<f64, ExperimentError> {
        let n = self.number(node, key)?;
        if n.fract() != 0.0 || n < min || n > f64::from(u32::MAX) {
            return Err(self.error(node.offset, format!("`{key}` must be a whole number of at least {min}")));
        }
        Ok(n)
    }

    pub(crate) fn strings(&self, node: &Node, key: &str) -> Result<Vec<String>, ExperimentError> {
        match &node.value {
            NodeValue::Array(items) => items.iter().map(|item| self.string(item, key)).collect(),
            other => Err(self.error(node.offset, format!("`{key}` must be a list of text, not {}", other.kind()))),
        }
    }
}

impl Experiment {
    /// Reads an experiment from the text of `file` (YAML, which JSON is part of). A letta-evals
    /// suite is recognised and mapped (see [`crate::letta_suite`]).
    pub fn parse(file: &Path, text: &str) -> Result<Experiment, ExperimentError> {
        let display = file.display().to_string();
        let r = Reader { file: &display, text };
        let root = casebook_formats::yaml::parse(text).map_err(|err| {
            let mut e = r.error(err.offset, err.message);
            e.hint = Some("an experiment is a YAML (or JSON) mapping".into());
            e
        })?;
        let NodeValue::Object(entries) = &root.value else {
            return Err(r.error(root.offset, format!("an experiment must be a mapping, not {}", root.value.kind())));
        };
        if crate::letta_suite::is_suite(&root) {
            return crate::letta_suite::parse(&r, file, &root);
        }
        let mut problems = Vec::new();
        for entry in entries {
            if !KEYS.contains(&entry.key.as_ref()) {
                let mut e = r.error(entry.key_offset, format!("unknown key `{}`", entry.key));
                e.hint = Some(match casebook_model::did_you_mean(&entry.key, KEYS) {
                    Some(k) => format!("did you mean `{k}`?"),
                    None => format!("the keys of an experiment: {}", KEYS.join(", ")),
                });
                problems.push(e);
            }
        }
        let p = &mut problems;
        let get = |key: &str| root.get(key);
        let dataset = keep(p, dataset(&r, &root));
        let scenarios = match (get("scenarios"), get("target")) {
            (Some(_), Some(target)) => {
                keep(p, Err(r.error(target.offset, "give either `target` or `scenarios`, not both")))
            }
            (None, Some(target)) => keep(p, default_scenario(&r, target)).map(|s| vec![s]),
            (Some(node), None) => keep(p, scenarios(&r, node)),
            (None, None) => keep(p, Err(no_target(&r, &root))),
        };
        let graders = match get("graders") {
            None => Some(Vec::new()),
            Some(node) => keep(
                p,
                match &node.value {
                    NodeValue::Array(items) => items
                        .iter()
                        .map(|item| Ok(Located { value: r.value(item, "graders")?, at: r.place(item.offset) }))
                        .collect::<Result<_, _>>(),
                    // letta style: a mapping from names to graders.
                    NodeValue::Object(named) => named
                        .iter()
                        .map(|entry| {
                            let mut value = r.value(&entry.value, "graders")?;
                            if let Value::Object(map) = &mut value {
                                map.entry("name").or_insert_with(|| Value::String(entry.key.to_string()));
                            }
                            Ok(Located { value, at: r.place(entry.value.offset) })
                        })
                        .collect::<Result<_, _>>(),
                    other => Err(r.error(node.offset, format!("`graders` must be a list, not {}", other.kind()))),
                },
            ),
        };
        let judge = keep(
            p,
            get("judge")
                .map(|n| match &n.value {
                    NodeValue::Object(_) => Ok(Located { value: r.value(n, "judge")?, at: r.place(n.offset) }),
                    other => Err(r.hinted(
                        n.offset,
                        format!("`judge` must be a mapping, not {}", other.kind()),
                        "give the judge's `endpoint` and `model` (the options of an `llm_judge` grader)",
                    )),
                })
                .transpose(),
        );
        let timeout_secs = get("timeout_secs").map_or(Some(60.0), |n| keep(p, seconds(&r, n, "timeout_secs")));
        let name = keep(p, name(&r, &root, file));
        let description = keep(p, get("description").map(|n| r.string(n, "description")).transpose());
        let filter = keep(p, get("filter").map(|n| r.string(n, "filter")).transpose());
        let tags = keep(p, get("tags").map(|n| r.strings(n, "tags")).transpose());
        let limit = keep(p, get("limit").map(|n| r.count(n, "limit", 1.0)).transpose());
        let min_confidence = keep(p, get("min_confidence").map(|n| min_confidence(&r, n)).transpose());
        let include_rejected = keep(p, get("include_rejected").map(|n| r.boolean(n, "include_rejected")).transpose());
        let memory_seeds = keep(p, get("memory_seeds").map(|n| memory_seeds(&r, file, n)).transpose());
        let n_runs = keep(p, get("n_runs").map(|n| r.count(n, "n_runs", 1.0)).transpose());
        let threshold = keep(p, get("threshold").map(|n| threshold(&r, n)).transpose());
        let exclude_ungraded = keep(p, get("exclude_ungraded").map(|n| r.boolean(n, "exclude_ungraded")).transpose());
        let concurrency = keep(p, get("concurrency").map(|n| r.count(n, "concurrency", 1.0)).transpose());
        let retries = keep(p, get("retries").map(|n| r.count(n, "retries", 0.0)).transpose());
        let noise = keep(p, get("noise").map(|n| crate::noise::parse(&r, n)).transpose()).flatten().flatten();
        let mcp = keep(p, get("mcp").map(|n| r.boolean(n, "mcp")).transpose()).flatten().unwrap_or(true);
        let max_steps = keep(p, get("max_steps").map(|n| r.count(n, "max_steps", 1.0)).transpose()).flatten();
        if !problems.is_empty() {
            // In the order of the file.
            problems.sort_by_key(|e| (e.at.line, e.at.column));
            let mut first = problems.remove(0);
            first.more = problems;
            return Err(first);
        }
        // Every value is there: a missing one left a problem behind.
        let missing = || r.error(0, "the experiment could not be read");
        let mut scenarios = scenarios.ok_or_else(missing)?;
        inherit_noise(&mut scenarios, get("scenarios"), noise.as_ref());
        inherit_mcp(&mut scenarios, get("scenarios"), mcp);
        let max_steps = max_steps.map(|n| n as u32);
        for scenario in &mut scenarios {
            scenario.max_steps = scenario.max_steps.or(max_steps);
        }
        Ok(Experiment {
            name: name.ok_or_else(missing)?,
            description: description.flatten(),
            dataset: dataset.ok_or_else(missing)?,
            filter: filter.flatten(),
            tags: tags.flatten().unwrap_or_default(),
            limit: limit.flatten().map(|n| n as u64),
            min_confidence: min_confidence.flatten(),
            include_rejected: include_rejected.flatten().unwrap_or(false),
            memory_seeds: memory_seeds.flatten().unwrap_or_default(),
            scenarios,
            n_runs: n_runs.flatten().map_or(1, |n| n as u32),
            graders: graders.ok_or_else(missing)?,
            judge: judge.flatten(),
            threshold: threshold.flatten().unwrap_or(1.0),
            exclude_ungraded: exclude_ungraded.flatten().unwrap_or(false),
            concurrency: concurrency.flatten().map_or(8, |n| n as usize),
            timeout_secs: timeout_secs.ok_or_else(missing)?,
            retries: retries.flatten().map_or(2, |n| n as u32),
            unsupported_target: None,
            noise,
            mcp,
            max_steps,
        })
    }

    /// Why this experiment cannot run as it stands: it has no scenario because its target is one
    /// casebook cannot start. Callers ask after a command-line target has replaced the scenarios,
    /// and report the error (it names the key at fault) when there is one.
    pub fn missing_target(&self) -> Option<&ExperimentError> {
        if self.scenarios.is_empty() { self.unsupported_target.as_ref() } else { None }
    }

    /// An experiment made on the command line: one dataset, one target, graders by kind.
    pub fn ad_hoc(dataset: &str, target: &str, graders: &[String]) -> Experiment {
        Experiment {
            name: "ad-hoc".into(),
            description: None,
            dataset: dataset.to_owned(),
            filter: None,
            tags: Vec::new(),
            limit: None,
            min_confidence: None,
            include_rejected: false,
            memory_seeds: Vec::new(),
            scenarios: vec![Scenario {
                name: "default".into(),
                target: Located { value: Value::String(target.to_owned()), at: Place::default() },
                noise: None,
                mcp: true,
                max_steps: None,
            }],
            n_runs: 1,
            graders: graders
                .iter()
                .map(|kind| Located { value: serde_json::json!({"kind": kind}), at: Place::default() })
                .collect(),
            judge: None,
            threshold: 1.0,
            exclude_ungraded: false,
            concurrency: 8,
            timeout_secs: 60.0,
            retries: 2,
            unsupported_target: None,
            noise: None,
            mcp: true,
            max_steps: None,
        }
    }
}

/// The `name`, else the file's stem.
pub(crate) fn name(r: &Reader<'_>, root: &Node, file: &Path) -> Result<String, ExperimentError> {
    match root.get("name") {
        Some(node) => r.string(node, "name"),
        None => Ok(file.file_stem().map_or_else(|| "experiment".to_owned(), |s| s.to_string_lossy().into_owned())),
    }
}

/// The `dataset`, which every experiment names.
pub(crate) fn dataset(r: &Reader<'_>, root: &Node) -> Result<String, ExperimentError> {
    match root.get("dataset") {
        Some(node) => r.string(node, "dataset"),
        None => Err(r.hinted(
            root.offset,
            "the experiment names no `dataset`",
            "add `dataset: FILE` (relative to the experiment) or `dataset: NAME@REF`",
        )),
    }
}

/// The error for a file with neither `target` nor `scenarios`.
pub(crate) fn no_target(r: &Reader<'_>, root: &Node) -> ExperimentError {
    r.hinted(
        root.offset,
        "the experiment names no target",
        "add `target: http://…` (or `scenarios:`), or pass `--target`",
    )
}

/// The one scenario of a `target:` key.
pub(crate) fn default_scenario(r: &Reader<'_>, target: &Node) -> Result<Scenario, ExperimentError> {
    Ok(Scenario {
        name: "default".into(),
        target: Located { value: r.value(target, "target")?, at: r.place(target.offset) },
        noise: None,
        mcp: true,
        max_steps: None,
    })
}

/// Gives the experiment's `noise` to the scenarios (items of `node`) that have no `noise` key.
fn inherit_noise(scenarios: &mut [Scenario], node: Option<&Node>, noise: Option<&NoiseSpec>) {
    let items = match node.map(|n| &n.value) {
        Some(NodeValue::Array(items)) => items.as_slice(),
        _ => &[],
    };
    for (i, scenario) in scenarios.iter_mut().enumerate() {
        if items.get(i).is_none_or(|item| item.get("noise").is_none()) {
            scenario.noise = noise.cloned();
        }
    }
}

/// Gives the experiment's `mcp` to the scenarios (items of `node`) that have no `mcp` key.
fn inherit_mcp(scenarios: &mut [Scenario], node: Option<&Node>, mcp: bool) {
    let items = match node.map(|n| &n.value) {
        Some(NodeValue::Array(items)) => items.as_slice(),
        _ => &[],
    };
    for (i, scenario) in scenarios.iter_mut().enumerate() {
        if items.get(i).is_none_or(|item| item.get("mcp").is_none()) {
            scenario.mcp = mcp;
        }
    }
}

/// A `scenarios:` list of `{name, target}`.
pub(crate) fn scenarios(r: &Reader<'_>, node: &Node) -> Result<Vec<Scenario>, ExperimentError> {
    let NodeValue::Array(items) = &node.value else {
        return Err(r.error(node.offset, "`scenarios` must be a list of `{name, target}`"));
    };
    let mut scenarios: Vec<Scenario> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let NodeValue::Object(fields) = &item.value else {
            return Err(r.error(item.offset, "a scenario is a mapping `{name, target}`"));
        };
        if let Some(extra) =
            fields.iter().find(|f| !["name", "target", "noise", "mcp", "max_steps"].contains(&f.key.as_ref()))
        {
            return Err(r.hinted(
                extra.key_offset,
                format!("unknown key `{}` in a scenario", extra.key),
                "a scenario has a `name`, a `target` and, if it needs them, `noise` and `max_steps`; `mcp: false` \
                 keeps its agents from being served the cases' tools over MCP",
            ));
        }
        let name = match item.get("name") {
            Some(n) => r.string(n, "name")?,
            None => format!("scenario-{}", i + 1),
        };
        if scenarios.iter().any(|s| s.name == name) {
            return Err(r.error(item.offset, format!("two scenarios are named `{name}`")));
        }
        let Some(target) = item.get("target") else {
            return Err(r.error(item.offset, format!("scenario `{name}` has no `target`")));
        };
        let noise = item.get("noise").map(|n| crate::noise::parse(r, n)).transpose()?.flatten();
        let mcp = item.get("mcp").map(|n| r.boolean(n, "mcp")).transpose()?.unwrap_or(true);
        let max_steps = item.get("max_steps").map(|n| r.count(n, "max_steps", 1.0)).transpose()?.map(|n| n as u32);
        scenarios.push(Scenario { name, noise, mcp, max_steps, ..default_scenario(r, target)? });
    }
    if scenarios.is_empty() {
        return Err(r.error(node.offset, "`scenarios` is empty"));
    }
    Ok(scenarios)
}

/// `memory_seeds`: a list of seeds, or a seed file relative to the experiment.
pub(crate) fn memory_seeds(r: &Reader<'_>, file: &Path, node: &Node) -> Result<Vec<Seed>, ExperimentError> {
    match &node.value {
        NodeValue::String(path) => {
            let base = file.parent().unwrap_or(Path::new(""));
            crate::seeds::load_seed_file(&base.join(path.as_ref())).map_err(|e| r.error(node.offset, e))
        }
        _ => serde_json::from_value(r.value(node, "memory_seeds")?).map_err(|err| {
            r.hinted(
                node.offset,
                format!("`memory_seeds`: {err}"),
                "each seed is `{source, content, target_agent?, metadata?}`",
            )
        }),
    }
}

/// `threshold`: the pass rate the experiment needs.
pub(crate) fn threshold(r: &Reader<'_>, node: &Node) -> Result<f64, ExperimentError> {
    let t = r.number(node, "threshold")?;
    if !(0.0..=1.0).contains(&t) {
        return Err(r.error(node.offset, "`threshold` is a pass rate between 0 and 1"));
    }
    Ok(t)
}

/// `min_confidence`: a label confidence, 0..1.
pub(crate) fn min_confidence(r: &Reader<'_>, node: &Node) -> Result<f64, ExperimentError> {
    let c = r.number(node, "min_confidence")?;
    if !(0.0..=1.0).contains(&c) {
        return Err(r.hinted(
            node.offset,
            "`min_confidence` is a label confidence between 0 and 1",
            "cases whose `confidence` is below it are left out; cases without one are kept",
        ));
    }
    Ok(c)
}

/// A time limit in seconds, more than 0.
pub(crate) fn seconds(r: &Reader<'_>, node: &Node, key: &str) -> Result<f64, ExperimentError> {
    let t = r.number(node, key)?;
    if t <= 0.0 || !t.is_finite() {
        return Err(r.error(node.offset, format!("`{key}` must be more than 0")));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Experiment, ExperimentError> {
        Experiment::parse(Path::new("exp.yaml"), text)
    }

    #[test]
    fn reads_every_key() {
        let e = parse(
            "name: smoke\ndataset: data.jsonl\nfilter: 'len(turns) > 0'\ntags: [a]\nlimit: 5\n\
             memory_seeds: [{source: s, content: c}]\nscenarios:\n  - {name: one, target: 'builtin:echo'}\n  \
             - name: two\n    target: {url: 'http://127.0.0.1:1/a'}\nn_runs: 3\ngraders:\n  - {kind: contains, weight: 2}\n\
             threshold: 0.5\nexclude_ungraded: true\nconcurrency: 4\ntimeout_secs: 1.5\nretries: 0\n",
        )
        .unwrap();
        assert!(e.exclude_ungraded);
        assert!(!parse("dataset: d.jsonl\ntarget: 'builtin:echo'\n").unwrap().exclude_ungraded, "counted by default");
        let err = parse("dataset: d.jsonl\ntarget: 'builtin:echo'\nexclude_ungraded: maybe\n").unwrap_err();
        assert_eq!((err.at.line, err.at.column), (3, 19), "{err}");
        assert_eq!(
            (e.name.as_str(), e.dataset.as_str(), e.n_runs, e.concurrency, e.retries),
            ("smoke", "data.jsonl", 3, 4, 0)
        );
        assert_eq!(e.scenarios[1].name, "two");
        assert_eq!(e.scenarios[1].target.at, Place { line: 10, column: 13 });
        assert_eq!(e.graders[0].value["weight"], 2);
        assert_eq!(e.memory_seeds[0].content, "c");
        assert_eq!((e.threshold, e.timeout_secs, e.limit), (0.5, 1.5, Some(5)));
    }

    #[test]
    fn max_steps_is_read_at_the_top_and_per_scenario_and_checked() {
        let e = parse(
            "dataset: d.jsonl\nmax_steps: 4\nscenarios:\n  - {name: inherits, target: x}\n  \
             - {name: own, target: x, max_steps: 2}\n",
        )
        .unwrap();
        assert_eq!((e.max_steps, e.scenarios[0].max_steps, e.scenarios[1].max_steps), (Some(4), Some(4), Some(2)));
        assert_eq!(parse("dataset: d.jsonl\ntarget: x\n").unwrap().scenarios[0].max_steps, None);
        let e = parse("dataset: d.jsonl\ntarget: x\nmax_steps: 0\n").unwrap_err();
        assert_eq!(
            (e.at, e.message.as_str()),
            (Place { line: 3, column: 12 }, "`max_steps` must be a whole number of at least 1")
        );
        let e = parse("dataset: d.jsonl\nscenarios:\n  - {name: a, target: x, max_steps: many}\n").unwrap_err();
        assert_eq!(
            (e.at, e.message.as_str()),
            (Place { line: 3, column: 37 }, "`max_steps` must be a number, not a string")
        );
    }

    #[test]
    fn problems_are_located() {
        let e = parse("dataset: d.jsonl\ntarget: 'builtin:echo'\nn_rusn: 3\n").unwrap_err();
        assert_eq!(
            (e.at, e.message.as_str(), e.hint.as_deref()),
            (Place { line: 3, column: 1 }, "unknown key `n_rusn`", Some("did you mean `n_runs`?"))
        );
        let e = parse("dataset: d.jsonl\ntarget: 'builtin:echo'\nn_runs: 0\n").unwrap_err();
        assert_eq!(e.at, Place { line: 3, column: 9 });
        let e = parse("dataset: d.jsonl\nscenarios:\n  - {name: a, targte: x}\n").unwrap_err();
        assert_eq!((e.at, e.message.as_str()), (Place { line: 3, column: 15 }, "unknown key `targte` in a scenario"));
        let e = parse("target: 'builtin:echo'\n").unwrap_err();
        assert!(e.message.contains("no `dataset`"));
    }

    #[test]
    fn min_confidence_and_include_rejected_are_read_and_checked() {
        let e = parse("dataset: d.jsonl\ntarget: x\nmin_confidence: 0.7\ninclude_rejected: true\n").unwrap();
        assert_eq!((e.min_confidence, e.include_rejected), (Some(0.7), true));
        let e = parse("dataset: d.jsonl\ntarget: x\n").unwrap();
        assert_eq!((e.min_confidence, e.include_rejected), (None, false));
        let e = parse("dataset: d.jsonl\ntarget: x\nmin_confidence: 1.5\n").unwrap_err();
        assert_eq!(
            (e.at, e.message.as_str()),
            (Place { line: 3, column: 17 }, "`min_confidence` is a label confidence between 0 and 1")
        );
        let e = parse("dataset: d.jsonl\ntarget: x\nmin_confidence: high\n").unwrap_err();
        assert_eq!(
            (e.at, e.message.as_str()),
            (Place { line: 3, column: 17 }, "`min_confidence` must be a number, not a string")
        );
        let e = parse("dataset: d.jsonl\ntarget: x\ninclude_rejected: 1\n").unwrap_err();
        assert_eq!(e.at, Place { line: 3, column: 19 });
    }

    #[test]
    fn letta_style_named_graders_keep_their_names() {
        let e = parse("dataset: d.jsonl\ntarget: x\ngraders:\n  quality: {kind: contains}\n").unwrap();
        assert_eq!(e.graders[0].value["name"], "quality");
        assert_eq!(e.graders[0].at, Place { line: 4, column: 12 });
    }

    #[test]
    fn noise_is_read_at_the_top_and_per_scenario() {
        use crate::noise::NoiseSource;
        let e = parse(
            "dataset: d.jsonl\nnoise: {from: cases, items: 3, similar_by: label.service, seed: -7}\nscenarios:\n  \
             - {name: inherits, target: x}\n  - {name: own, target: x, noise: {items: 1}}\n  \
             - {name: off, target: x, noise: false}\n  - {name: null-off, target: x, noise: null}\n",
        )
        .unwrap();
        let top = e.noise.clone().unwrap();
        assert_eq!((top.from.clone(), top.items, top.seed), (NoiseSource::Cases, 3, -7));
        assert_eq!(top.similar_by.as_ref().map(|s| s.text.as_str()), Some("label.service"));
        assert_eq!(e.scenarios[0].noise.as_ref(), Some(&top));
        let own = e.scenarios[1].noise.as_ref().unwrap();
        assert_eq!((own.items, own.seed, own.similar_by.is_none()), (1, 0, true));
        assert_eq!((e.scenarios[2].noise.as_ref(), e.scenarios[3].noise.as_ref()), (None, None));
        // `target:` alone: its one scenario has the top-level noise.
        let e = parse("dataset: d.jsonl\ntarget: x\nnoise: {items: 2}\n").unwrap();
        assert_eq!(e.scenarios[0].noise.as_ref().map(|n| n.items), Some(2));
    }

    #[test]
    fn mcp_is_on_unless_the_experiment_or_a_scenario_turns_it_off() {
        let e = parse("dataset: d.jsonl\ntarget: x\n").unwrap();
        assert!(e.mcp && e.scenarios[0].mcp);
        let e = parse(
            "dataset: d.jsonl\nmcp: false\nscenarios:\n  - {name: inherits, target: x}\n  - {name: own, target: x, mcp: true}\n",
        )
        .unwrap();
        assert_eq!(e.scenarios.iter().map(|s| s.mcp).collect::<Vec<_>>(), [false, true]);
        let e =
            parse("dataset: d.jsonl\nscenarios:\n  - {name: off, target: x, mcp: false}\n  - {name: on, target: x}\n")
                .unwrap();
        assert_eq!(e.scenarios.iter().map(|s| s.mcp).collect::<Vec<_>>(), [false, true]);
        let e = parse("dataset: d.jsonl\ntarget: x\nmcp: \"non\"\n").unwrap_err();
        assert_eq!(
            (e.at.line, e.at.column, e.message.as_str()),
            (3, 6, "`mcp` must be `true` or `false`, not a string")
        );
        let e = parse("dataset: d.jsonl\nscenarios:\n  - {name: a, target: x, mcp: 1}\n").unwrap_err();
        assert_eq!(
            (e.at.line, e.at.column, e.message.as_str()),
            (3, 31, "`mcp` must be `true` or `false`, not an integer")
        );
    }

    #[test]
    fn noise_mistakes_are_located() {
        let at = |text: &str| {
            let e = parse(text).unwrap_err();
            (e.at.line, e.at.column, e.message, e.hint)
        };
        let (line, column, message, hint) = at("dataset: d.jsonl\ntarget: x\nnoise: {itmes: 3}\n");
        assert_eq!((line, column, message.as_str()), (3, 9, "unknown key `itmes` in `noise`"));
        assert_eq!(hint.as_deref(), Some("did you mean `items`?"));
        let (line, column, message, _) = at("dataset: d.jsonl\ntarget: x\nnoise: {items: 0}\n");
        assert_eq!((line, column, message.as_str()), (3, 16, "`items` must be a whole number of at least 1"));
        let (line, column, message, _) = at("dataset: d.jsonl\ntarget: x\nnoise:\n  items: 2\n  seed: 1.5\n");
        assert_eq!((line, column, message.as_str()), (5, 9, "`seed` must be a whole number (64-bit)"));
        let (line, column, message, _) = at("dataset: d.jsonl\ntarget: x\nnoise: {items: 2, seed: abc}\n");
        assert_eq!((line, column, message.as_str()), (3, 25, "`seed` must be a whole number, not a string"));
        let (line, column, message, _) = at("dataset: d.jsonl\ntarget: x\nnoise: {items: 2, similar_by: 'label.'}\n");
        assert_eq!((line, column), (3, 31), "{message}");
        assert!(message.starts_with("`similar_by` is not a field path"), "{message}");
        let (line, column, message, _) = at("dataset: d.jsonl\ntarget: x\nnoise: {items: 2, from: missing.yaml}\n");
        assert_eq!((line, column), (3, 25));
        assert!(message.starts_with("cannot read the noise file `missing.yaml`"), "{message}");
        let (line, column, message, _) = at("dataset: d.jsonl\ntarget: x\nnoise: true\n");
        assert_eq!((line, column, message.as_str()), (3, 8, "`noise` must be a mapping, not a boolean"));
        let (line, column, message, _) =
            at("dataset: d.jsonl\nscenarios:\n  - {name: a, target: x, noise: {items: 1, sed: 2}}\n");
        assert_eq!((line, column, message.as_str()), (3, 44, "unknown key `sed` in `noise`"));
        let (line, column, message, _) = at("dataset: d.jsonl\ntarget: x\nnoise: {seed: 2}\n");
        assert_eq!((line, column, message.as_str()), (3, 8, "`noise` says no number of `items`"));
    }

    #[test]
    fn noise_files_are_read_with_the_experiment_and_located() {
        let dir = tempfile::tempdir().unwrap();
        let exp = dir.path().join("exp.yaml");
        let parse_in = |text: &str| Experiment::parse(&exp, text);
        fs_err::write(
            dir.path().join("noise.yaml"),
            "- {type: log, source: db, content: 'pool exhausted'}\n- content: {cpu: 93}\n  metadata: {host: a}\n",
        )
        .unwrap();
        let e = parse_in("dataset: d.jsonl\ntarget: x\nnoise: {from: noise.yaml, items: 1}\n").unwrap();
        let Some(crate::noise::NoiseSource::File { name, items }) = e.noise.map(|n| n.from) else { panic!() };
        assert_eq!((name.as_str(), items.len(), items[1].content["cpu"].as_u64()), ("noise.yaml", 2, Some(93)));
        fs_err::write(
            dir.path().join("noise.jsonl"),
            "{\"content\": \"a\"}\n\n{\"kind\": \"log\", \"content\": \"b\"}\n",
        )
        .unwrap();
        let e = parse_in("dataset: d.jsonl\ntarget: x\nnoise: {from: noise.jsonl, items: 1}\n").unwrap_err();
        assert_eq!(
            (e.file.ends_with("noise.jsonl"), e.at, e.message.as_str()),
            (true, Place { line: 3, column: 2 }, "unknown key `kind` in a context item")
        );
        fs_err::write(dir.path().join("bad.yaml"), "- {content: a}\n- {type: 3, content: b}\n- {source: s}\n").unwrap();
        let e = parse_in("dataset: d.jsonl\ntarget: x\nnoise: {from: bad.yaml, items: 1}\n").unwrap_err();
        assert_eq!((e.at, e.message.as_str()), (Place { line: 2, column: 10 }, "`type` must be text, not an integer"));
        fs_err::write(dir.path().join("bad.yaml"), "- {content: a}\n- {source: s}\n").unwrap();
        let e = parse_in("dataset: d.jsonl\ntarget: x\nnoise: {from: bad.yaml, items: 1}\n").unwrap_err();
        assert_eq!((e.at, e.message.as_str()), (Place { line: 2, column: 3 }, "a context item needs `content`"));
        let e = parse_in("dataset: d.jsonl\ntarget: x\nnoise: {from: noise.yaml, items: 1, similar_by: label.x}\n")
            .unwrap_err();
        assert_eq!((e.at, e.message.as_str()), (Place { line: 3, column: 49 }, "`similar_by` needs `from: cases`"));
    }
}
