//! letta-evals suite files (`suite.yaml`) read as experiments.
//!
//! A file is a suite when it has what only letta writes: `num_runs`, `max_samples`,
//! `sample_tags`, `max_concurrent`, `reward`, `setup_script`, `sandbox` or `gate`; a `target`
//! that is a Letta agent; or `graders` named in a mapping whose `kind` is `tool`, `model_judge`,
//! `rubric` or `letta_judge`. It maps onto [`Experiment`] like this:
//!
//! | letta | casebook |
//! |---|---|
//! | `name`, `description`, `dataset` (relative to the suite) | the same |
//! | `num_runs`, `max_samples`, `max_concurrent` | `n_runs`, `limit`, `concurrency` |
//! | `sample_tags` (cases with all of them) | `tags` |
//! | `target.timeout`, `target.max_retries` | `timeout_secs`, `retries` |
//! | `target` (a Letta agent) | no scenario: [`Experiment::unsupported_target`] |
//! | `graders.NAME: {kind: tool, function: exact_match}` | `{kind: exact_match, name: NAME}` |
//! | `function: contains` | `{kind: contains, ignore_case: true}` (letta lowercases both) |
//! | `function: regex_match` | `{kind: regex_match}` (the case's `expected.output` is the pattern) |
//! | `function: ascii_printable_only` | `{kind: regex_match, pattern: …}` (printable ASCII, line breaks) |
//! | `kind: model_judge` (or legacy `rubric`) | `{kind: llm_judge, model, template, api_key_env, timeout_secs}` |
//! | judge `provider` (`openai`, `anthropic`, `google`) | `api_key_env` (`OPENAI_API_KEY`, …), as letta reads |
//! | judge `timeout` | `timeout_secs` |
//! | judge `temperature` | `temperature` |
//! | `reward: {kind: metric, metric_key: K}` | grader `K` keeps weight 1, the others get weight 0 |
//! | `output`, `cleanup`, `display_name`, judge `max_retries` | nothing (no effect here) |
//! | `extractor: last_assistant` | nothing: graders read the last answer |
//!
//! The judge's `endpoint` is not in a suite, so it is left unset: building the grader then says
//! it is missing. The prompt file's `{input}`, `{submission}` and `{ground_truth}` become the
//! template's `input`, `output` and `expected`, and any other `{name}` a variable of the case's
//! `rubric_vars` (a missing one is an error when judging, not an empty string). A case's own
//! `rubric` replaces the suite's prompt, as letta's per-sample rubrics do.
//!
//! A suite may also carry casebook's `scenarios`, `threshold`, `filter` and `memory_seeds`.
//!
//! Not the same: letta grades each turn when a sample's `ground_truth` is a list; here a tool
//! grader reads `expected.output` (the suite alone does not say which samples are per turn), so
//! such cases need a `per_turn` grader.
//!
//! What casebook cannot do — Python graders, extractors and reward composers, setup scripts,
//! sandboxes — is an error naming the key and saying what to do instead. A Letta agent target
//! is not an error by itself: it is kept as [`Experiment::unsupported_target`], so that a target
//! given on the command line can stand in for it.

use std::path::Path;

use casebook_formats::node::{Entry, Node, NodeValue};
use serde_json::{Value, json};

use crate::experiment::{self, Experiment, ExperimentError, Located, Reader, Scenario};

/// Top-level keys that only letta suites have.
const SUITE_ONLY: &[&str] =
    &["num_runs", "max_samples", "sample_tags", "max_concurrent", "reward", "setup_script", "sandbox", "gate"];

/// Every top-level key a suite may have: letta's, then the casebook keys letta has no word for.
const SUITE_KEYS: &[&str] = &[
    "name",
    "description",
    "dataset",
    "target",
    "graders",
    "reward",
    "num_runs",
    "max_samples",
    "sample_tags",
    "max_concurrent",
    "output",
    "cleanup",
    "setup_script",
    "sandbox",
    "gate",
    "scenarios",
    "threshold",
    "filter",
    "memory_seeds",
];

/// casebook keys that a suite spells the letta way.
const LETTA_SPELLING: &[(&str, &str)] = &[
    ("n_runs", "num_runs"),
    ("limit", "max_samples"),
    ("tags", "sample_tags"),
    ("concurrency", "max_concurrent"),
    ("timeout_secs", "target.timeout"),
    ("retries", "target.max_retries"),
];

/// The target kinds of letta (`agent` is the name older versions used).
const TARGET_KINDS: &[&str] = &["letta_code", "letta_agent", "agent"];

/// The keys of a letta target, over its versions.
const TARGET_KEYS: &[&str] = &[
    "kind",
    "base_url",
    "api_key",
    "project_id",
    "timeout",
    "max_retries",
    "model_handles",
    "model_configs",
    "agent_file",
    "agent_id",
    "agent_script",
    "flags",
    "permission_mode",
    "memory_workspace",
    "memory_dir",
];

/// The grader kinds of letta (`rubric` is the older name of `model_judge`).
const GRADER_KINDS: &[&str] = &["tool", "model_judge", "rubric", "letta_judge"];

const COMMON_GRADER_KEYS: &[&str] = &["kind", "display_name", "extractor", "extractor_config"];
const TOOL_KEYS: &[&str] = &["function"];
const JUDGE_KEYS: &[&str] = &[
    "prompt",
    "prompt_path",
    "model",
    "temperature",
    "provider",
    "max_retries",
    "timeout",
    "system_prompt",
    "rubric_vars",
];

/// letta's built-in tool graders (`letta_evals/graders/builtin.py`).
const BUILT_IN: &str = "`exact_match`, `contains`, `regex_match`, `ascii_printable_only`";

/// letta's `ascii_printable_only`: every character but line breaks is printable ASCII (32..=126),
/// and there is at least one (letta scores an empty answer 0).
pub const ASCII_PRINTABLE: &str = r"\A[\x20-\x7E\r\n]+\z";

/// letta's default judge model (`ModelJudgeGraderSpec.model`).
const DEFAULT_JUDGE_MODEL: &str = "gpt-4o-mini";

/// The targets casebook can start, for hints.
const CASEBOOK_TARGETS: &str = "casebook starts agents through `http`, `openai`, `command` and `builtin` targets";

/// Whether `root` is a letta suite rather than a casebook experiment.
pub(crate) fn is_suite(root: &Node) -> bool {
    let NodeValue::Object(entries) = &root.value else { return false };
    let letta_grader = |entry: &Entry| kind_of(&entry.value).is_some_and(|kind| GRADER_KINDS.contains(&kind));
    entries.iter().any(|entry| SUITE_ONLY.contains(&entry.key.as_ref()))
        || root.get("target").is_some_and(is_letta_target)
        || root.get("graders").is_some_and(|graders| match &graders.value {
            NodeValue::Object(named) => named.iter().any(letta_grader),
            _ => false,
        })
}

fn kind_of<'n>(node: &'n Node) -> Option<&'n str> {
    node.get("kind").and_then(Node::as_str)
}

/// A `target` mapping that describes a Letta agent: a letta `kind`, or no `kind` and letta's keys
/// (letta's default kind is `letta_code`). casebook's own target objects have neither.
fn is_letta_target(node: &Node) -> bool {
    let NodeValue::Object(fields) = &node.value else { return false };
    match node.get("kind") {
        Some(kind) => kind.as_str().is_some_and(|kind| TARGET_KINDS.contains(&kind)),
        None => fields.iter().any(|field| TARGET_KEYS.contains(&field.key.as_ref())),
    }
}

/// What the suite says, gathered key by key.
#[derive(Default)]
struct Suite {
    scenarios: Option<Vec<Scenario>>,
    /// casebook's own `target`, and where it is.
    casebook_target: Option<(Scenario, usize)>,
    unsupported_target: Option<ExperimentError>,
    graders: Vec<(String, Located<Value>)>,
    /// `reward.metric_key`, and where its value is.
    metric_key: Option<(String, usize)>,
    n_runs: Option<u32>,
    limit: Option<u64>,
    tags: Vec<String>,
    concurrency: Option<usize>,
    timeout_secs: Option<f64>,
    retries: Option<u32>,
    threshold: Option<f64>,
    filter: Option<String>,
    memory_seeds: Vec<casebook_model::Seed>,
}

/// Maps a suite (already known to be one, see [`is_suite`]) onto an experiment.
pub(crate) fn parse(r: &Reader<'_>, file: &Path, root: &Node) -> Result<Experiment, ExperimentError> {
    let NodeValue::Object(entries) = &root.value else {
        return Err(r.error(root.offset, format!("a suite must be a mapping, not {}", root.value.kind())));
    };
    let base = file.parent().unwrap_or(Path::new(""));
    let mut suite = Suite::default();
    for entry in entries {
        let node = &entry.value;
        let key = entry.key.as_ref();
        // letta's optional keys may be written `null`.
        if node.is_null() && !matches!(key, "name" | "dataset") {
            continue;
        }
        match key {
            "name" | "description" | "output" | "cleanup" => {}
            "dataset" => check_dataset(r, node)?,
            "target" => target(r, node, &mut suite)?,
            "graders" => suite.graders = graders(r, base, node)?,
            "reward" => suite.metric_key = reward(r, node)?,
            "num_runs" => suite.n_runs = Some(r.count(node, key, 1.0)? as u32),
            "max_samples" => suite.limit = Some(r.count(node, key, 1.0)? as u64),
            "sample_tags" => suite.tags = r.strings(node, key)?,
            "max_concurrent" => suite.concurrency = Some(r.count(node, key, 1.0)? as usize),
            "setup_script" => {
                return Err(r.hinted(
                    entry.key_offset,
                    format!("`setup_script: {}` is a Python setup step, which casebook cannot run", text(node)),
                    "do what it prepares before `casebook run`, then leave the key out of a copy of the suite",
                ));
            }
            "sandbox" => {
                return Err(r.hinted(
                    entry.key_offset,
                    "`sandbox` runs every sample in a Modal sandbox, which casebook cannot provide",
                    "start the agent where it needs to run and pass it with `--target URL`, then leave the key \
                     out of a copy of the suite",
                ));
            }
            "gate" => {
                return Err(r.hinted(
                    entry.key_offset,
                    "`gate` is letta's old pass rule, which letta-evals replaced by `reward`",
                    "casebook's `threshold:` is the pass rate the run needs",
                ));
            }
            "scenarios" => suite.scenarios = Some(experiment::scenarios(r, node)?),
            "threshold" => suite.threshold = Some(experiment::threshold(r, node)?),
            "filter" => suite.filter = Some(r.string(node, key)?),
            "memory_seeds" => suite.memory_seeds = experiment::memory_seeds(r, file, node)?,
            other => return Err(unknown_key(r, entry, other)),
        }
    }
    let dataset = experiment::dataset(r, root)?;
    let scenarios = match (suite.scenarios, suite.casebook_target) {
        (Some(_), Some((_, offset))) => {
            return Err(r.error(offset, "give either `target` or `scenarios`, not both"));
        }
        // `scenarios` stand in for a Letta agent target.
        (Some(scenarios), None) => {
            suite.unsupported_target = None;
            scenarios
        }
        (None, Some((target, _))) => vec![target],
        (None, None) if suite.unsupported_target.is_some() => Vec::new(),
        (None, None) => return Err(experiment::no_target(r, root)),
    };
    let mut graders = suite.graders;
    if let Some((metric, at)) = &suite.metric_key {
        if !graders.iter().any(|(name, _)| name == metric) {
            let names: Vec<String> = graders.iter().map(|(name, _)| format!("`{name}`")).collect();
            return Err(r.hinted(
                *at,
                format!("`reward.metric_key: {metric}` names no grader of the suite"),
                if names.is_empty() {
                    "the suite has no `graders`".to_owned()
                } else {
                    format!("its graders: {}", names.join(", "))
                },
            ));
        }
        // The reward is that grader's score: the others are graded and reported, but weigh nothing.
        for (name, grader) in &mut graders {
            if name != metric {
                if let Value::Object(fields) = &mut grader.value {
                    fields.insert("weight".into(), json!(0));
                }
            }
        }
    }
    Ok(Experiment {
        name: experiment::name(r, root, file)?,
        description: root
            .get("description")
            .filter(|n| !n.is_null())
            .map(|n| r.string(n, "description"))
            .transpose()?,
        dataset,
        filter: suite.filter,
        tags: suite.tags,
        limit: suite.limit,
        min_confidence: None,
        include_rejected: false,
        memory_seeds: suite.memory_seeds,
        scenarios,
        n_runs: suite.n_runs.unwrap_or(1),
        graders: graders.into_iter().map(|(_, grader)| grader).collect(),
        judge: None,
        threshold: suite.threshold.unwrap_or(1.0),
        exclude_ungraded: false,
        concurrency: suite.concurrency.unwrap_or(8),
        timeout_secs: suite.timeout_secs.unwrap_or(60.0),
        retries: suite.retries.unwrap_or(2),
        unsupported_target: suite.unsupported_target,
        noise: None,
        mcp: true,
        max_steps: None,
    })
}

/// A scalar as written, for messages.
fn text(node: &Node) -> String {
    match &node.value {
        NodeValue::String(s) => s.to_string(),
        NodeValue::Number(n) => n.to_string(),
        NodeValue::Bool(b) => b.to_string(),
        NodeValue::Null => "null".into(),
        other => other.kind().to_owned(),
    }
}

fn unknown_key(r: &Reader<'_>, entry: &Entry, key: &str) -> ExperimentError {
    if let Some((_, letta)) = LETTA_SPELLING.iter().find(|(casebook, _)| *casebook == key) {
        return r.hinted(
            entry.key_offset,
            format!("`{key}` is casebook's name for letta's `{letta}`"),
            format!("in a letta suite, write `{letta}`"),
        );
    }
    r.hinted(entry.key_offset, format!("unknown key `{key}` in a letta suite"), did_you_mean(key, SUITE_KEYS))
}

fn did_you_mean(key: &str, keys: &[&str]) -> String {
    match casebook_model::did_you_mean(key, keys) {
        Some(k) => format!("did you mean `{k}`?"),
        None => format!(
            "the keys casebook reads here: {}",
            keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn check_dataset(r: &Reader<'_>, node: &Node) -> Result<(), ExperimentError> {
    let dataset = r.string(node, "dataset")?;
    if dataset.starts_with("https://") || dataset.starts_with("http://") {
        return Err(r.hinted(
            node.offset,
            format!("`dataset: {dataset}` is a URL, which casebook does not download"),
            "download the file beside the suite and name it, or import it (`casebook import`) and write \
             `dataset: NAME@REF`",
        ));
    }
    Ok(())
}

/// `target`: a Letta agent becomes `suite.unsupported_target`; casebook's own target forms (a
/// string, or an object without letta's keys) become the default scenario.
fn target(r: &Reader<'_>, node: &Node, suite: &mut Suite) -> Result<(), ExperimentError> {
    let NodeValue::Object(fields) = &node.value else {
        suite.casebook_target = Some((experiment::default_scenario(r, node)?, node.offset));
        return Ok(());
    };
    if let Some(kind) = node.get("kind") {
        let name = r.string(kind, "target.kind")?;
        if !TARGET_KINDS.contains(&name.as_str()) {
            return Err(r.hinted(
                kind.offset,
                format!("`target.kind: {name}` is not a letta target"),
                format!("letta's targets are `letta_code` and `letta_agent`; {CASEBOOK_TARGETS}"),
            ));
        }
    } else if !is_letta_target(node) {
        suite.casebook_target = Some((experiment::default_scenario(r, node)?, node.offset));
        return Ok(());
    }
    let mut agent_script = None;
    let mut handles = Vec::new();
    for field in fields {
        let value = &field.value;
        let key = format!("target.{}", field.key);
        if value.is_null() {
            continue;
        }
        match field.key.as_ref() {
            "timeout" => suite.timeout_secs = Some(experiment::seconds(r, value, &key)?),
            "max_retries" => suite.retries = Some(r.count(value, &key, 0.0)? as u32),
            "model_handles" => handles = r.strings(value, &key)?,
            "agent_script" => agent_script = Some((field.key_offset, r.string(value, &key)?)),
            known if TARGET_KEYS.contains(&known) => {}
            other => {
                return Err(r.hinted(
                    field.key_offset,
                    format!("unknown key `target.{other}` in a letta target"),
                    did_you_mean(other, TARGET_KEYS),
                ));
            }
        }
    }
    let kind = node.get("kind").and_then(Node::as_str);
    let (offset, what) = match (&agent_script, kind) {
        (Some((offset, script)), _) => (
            *offset,
            format!("`target.agent_script: {script}` creates the agent with Python, which casebook cannot run"),
        ),
        (None, Some(kind)) => {
            let offset = node.get("kind").map_or(node.offset, |k| k.offset);
            let agent = if kind == "letta_code" { "a Letta Code agent" } else { "an agent on a Letta server" };
            (offset, format!("`target.kind: {kind}` runs {agent}, which casebook cannot start"))
        }
        (None, None) => (
            node.offset,
            "`target` is a Letta Code agent (letta's default `kind: letta_code`), which casebook cannot start"
                .to_owned(),
        ),
    };
    let mut message =
        format!("{what}: give a target with `--target URL` (casebook's http protocol) or add `scenarios:`");
    let hint = if handles.len() > 1 {
        let names: Vec<String> = handles.iter().map(|h| format!("`{h}`")).collect();
        message.push_str(&format!(
            "; its {} `model_handles` ({}) would each be a scenario",
            handles.len(),
            names.join(", ")
        ));
        format!("{CASEBOOK_TARGETS}; to compare models, list one `{{name, target}}` per model under `scenarios:`")
    } else {
        format!("{CASEBOOK_TARGETS}: serve the agent behind one of them")
    };
    suite.unsupported_target = Some(r.hinted(offset, message, hint));
    Ok(())
}

/// `graders`: a mapping from names to letta graders, each as a casebook grader.
fn graders(r: &Reader<'_>, base: &Path, node: &Node) -> Result<Vec<(String, Located<Value>)>, ExperimentError> {
    let NodeValue::Object(named) = &node.value else {
        return Err(r.hinted(
            node.offset,
            format!("`graders` must be a mapping from names to graders, not {}", node.value.kind()),
            "a letta suite writes `graders: {NAME: {kind: tool, function: exact_match}}`",
        ));
    };
    named
        .iter()
        .map(|entry| {
            let value = grader(r, base, &entry.key, &entry.value)?;
            Ok((entry.key.to_string(), Located { value, at: r.place(entry.value.offset) }))
        })
        .collect()
}

/// One letta grader as casebook's grader JSON (`kind`, `name` and options).
fn grader(r: &Reader<'_>, base: &Path, name: &str, node: &Node) -> Result<Value, ExperimentError> {
    let path = |key: &str| format!("graders.{name}.{key}");
    let NodeValue::Object(fields) = &node.value else {
        return Err(r.error(node.offset, format!("`graders.{name}` must be a mapping, not {}", node.value.kind())));
    };
    let Some(kind_node) = node.get("kind") else {
        return Err(r.hinted(
            node.offset,
            format!("`graders.{name}` has no `kind`"),
            "letta's grader kinds: `tool` (a built-in check) and `model_judge` (an LLM judge)",
        ));
    };
    let kind = r.string(kind_node, &path("kind"))?;
    let own_keys = match kind.as_str() {
        "tool" => TOOL_KEYS,
        "model_judge" | "rubric" => JUDGE_KEYS,
        "letta_judge" => {
            return Err(r.hinted(
                kind_node.offset,
                format!("`graders.{name}.kind: letta_judge` grades with a Letta agent, which casebook cannot start"),
                "use `kind: model_judge` (a chat-completions judge)",
            ));
        }
        other => {
            return Err(r.hinted(
                kind_node.offset,
                format!("`graders.{name}.kind: {other}` is not a letta grader kind"),
                "letta's grader kinds: `tool` and `model_judge`",
            ));
        }
    };
    let mut mapped = None;
    for field in fields {
        let key = field.key.as_ref();
        let value = &field.value;
        if !COMMON_GRADER_KEYS.contains(&key) && !own_keys.contains(&key) {
            let keys: Vec<&str> = COMMON_GRADER_KEYS.iter().chain(own_keys).copied().collect();
            return Err(r.hinted(
                field.key_offset,
                format!("unknown key `{}` in a `{kind}` grader", path(key)),
                did_you_mean(key, &keys),
            ));
        }
        if value.is_null() {
            continue;
        }
        match key {
            "extractor" => {
                let extractor = r.string(value, &path(key))?;
                if extractor != "last_assistant" {
                    let what = if extractor.contains(':') {
                        "is a Python extractor, which casebook cannot run".to_owned()
                    } else {
                        "grades something other than the agent's last answer, which casebook's graders do not read"
                            .to_owned()
                    };
                    return Err(r.hinted(value.offset, format!("`{}: {extractor}` {what}", path(key)), EXTRACTOR_HINT));
                }
            }
            "extractor_config" => {
                return Err(r.hinted(
                    field.key_offset,
                    format!("`{}` configures an extractor, which casebook does not have", path(key)),
                    EXTRACTOR_HINT,
                ));
            }
            "system_prompt" => {
                return Err(r.hinted(
                    field.key_offset,
                    format!("`{}` replaces the judge's system prompt, which casebook's judge keeps", path(key)),
                    "put the text at the top of the rubric (`prompt` or `prompt_path`)",
                ));
            }
            // Mapped here so that problems are reported in the order of the file.
            "function" => mapped = Some(tool_grader(r, name, value)?),
            "display_name" | "prompt" | "prompt_path" | "model" | "provider" => {
                r.string(value, &path(key))?;
            }
            "temperature" | "timeout" => {
                r.number(value, &path(key))?;
            }
            "max_retries" => {
                r.count(value, &path(key), 0.0)?;
            }
            "rubric_vars" => {
                r.strings(value, &path(key))?;
            }
            _ => {}
        }
    }
    let present = |key: &str| node.get(key).filter(|n| !n.is_null());
    if kind == "tool" {
        return mapped.ok_or_else(|| {
            r.hinted(
                node.offset,
                format!("`graders.{name}` (a `tool` grader) has no `function`"),
                format!("letta's built-in functions: {BUILT_IN}"),
            )
        });
    }
    let prompt = match (present("prompt"), present("prompt_path")) {
        (Some(_), Some(second)) => {
            return Err(r.error(
                second.offset,
                format!("give either `graders.{name}.prompt` or `graders.{name}.prompt_path`, not both"),
            ));
        }
        (Some(prompt), None) => r.string(prompt, &path("prompt"))?,
        (None, Some(prompt_path)) => {
            let file = base.join(r.string(prompt_path, &path("prompt_path"))?);
            fs_err::read_to_string(&file)
                .map_err(|e| r.error(prompt_path.offset, format!("cannot read `graders.{name}.prompt_path`: {e}")))?
        }
        (None, None) => {
            return Err(r.hinted(
                node.offset,
                format!("`graders.{name}` (a `{kind}` grader) has neither `prompt` nor `prompt_path`"),
                "give the rubric inline (`prompt`) or as a file relative to the suite (`prompt_path`)",
            ));
        }
    };
    let api_key_env = match present("provider").map(|p| (p, p.as_str().unwrap_or_default())) {
        None | Some((_, "openai")) => "OPENAI_API_KEY",
        Some((_, "anthropic")) => "ANTHROPIC_API_KEY",
        Some((_, "google")) => "GOOGLE_API_KEY",
        Some((node, other)) => {
            return Err(r.hinted(
                node.offset,
                format!("`graders.{name}.provider: {other}` is not a letta judge provider"),
                "letta's providers: `openai`, `anthropic`, `google`",
            ));
        }
    };
    let mut judge = json!({
        "kind": "llm_judge",
        "name": name,
        "model": present("model").and_then(Node::as_str).unwrap_or(DEFAULT_JUDGE_MODEL),
        "api_key_env": api_key_env,
        "template": judge_template(&prompt),
    });
    if let Some(timeout) = present("timeout") {
        judge["timeout_secs"] = json!(experiment::seconds(r, timeout, &path("timeout"))?);
    }
    if let Some(temperature) = present("temperature") {
        judge["temperature"] = json!(r.number(temperature, &path("temperature"))?);
    }
    Ok(judge)
}

const EXTRACTOR_HINT: &str = "casebook grades the agent's last answer (letta's `extractor: last_assistant`); for tool \
                              calls, use a trajectory grader (`tool_called`, `tool_call_count`, `tool_order`) in a \
                              casebook experiment";

/// A letta `tool` grader's `function` as a casebook grader.
fn tool_grader(r: &Reader<'_>, name: &str, function: &Node) -> Result<Value, ExperimentError> {
    let text = r.string(function, &format!("graders.{name}.function"))?;
    Ok(match text.as_str() {
        // letta strips both sides, as casebook's `trim` (on by default) does.
        "exact_match" => json!({"kind": "exact_match", "name": name}),
        // letta lowercases both sides.
        "contains" => json!({"kind": "contains", "name": name, "ignore_case": true}),
        "regex_match" => json!({"kind": "regex_match", "name": name}),
        "ascii_printable_only" => json!({"kind": "regex_match", "name": name, "pattern": ASCII_PRINTABLE}),
        custom if custom.contains(':') => {
            return Err(r.hinted(
                function.offset,
                format!("`graders.{name}.function: {custom}` is a Python grader, which casebook cannot run"),
                format!(
                    "rewrite it as a `command` grader (a program that reads the case and the run as JSON on stdin \
                     and prints a verdict) in a casebook experiment, or use one of letta's built-in functions: \
                     {BUILT_IN}"
                ),
            ));
        }
        other => {
            return Err(r.hinted(
                function.offset,
                format!("`graders.{name}.function: {other}` is not one of letta's built-in graders"),
                format!("the built-in functions: {BUILT_IN}"),
            ));
        }
    })
}

/// `reward`: the grader whose score is the reward (`metric_key`, with where its value is), or
/// nothing.
fn reward(r: &Reader<'_>, node: &Node) -> Result<Option<(String, usize)>, ExperimentError> {
    const KEYS: &[&str] = &["kind", "metric_key", "function"];
    let NodeValue::Object(fields) = &node.value else {
        return Err(r.error(node.offset, format!("`reward` must be a mapping, not {}", node.value.kind())));
    };
    if let Some(extra) = fields.iter().find(|f| !KEYS.contains(&f.key.as_ref())) {
        return Err(r.hinted(
            extra.key_offset,
            format!("unknown key `reward.{}`", extra.key),
            did_you_mean(&extra.key, KEYS),
        ));
    }
    let Some(kind_node) = node.get("kind") else {
        return Err(r.hinted(
            node.offset,
            "`reward` has no `kind`",
            "write `reward: {kind: metric, metric_key: NAME}`",
        ));
    };
    match r.string(kind_node, "reward.kind")?.as_str() {
        "metric" => {
            let Some(key) = node.get("metric_key") else {
                return Err(r.hinted(
                    node.offset,
                    "`reward` (`kind: metric`) has no `metric_key`",
                    "name the grader whose score is the reward: `metric_key: NAME`",
                ));
            };
            Ok(Some((r.string(key, "reward.metric_key")?, key.offset)))
        }
        "custom" => {
            let hint = "casebook scores a run as the weighted mean of its graders (`weight:`) and passes it when \
                        every grader passes; to score by one grader, write `reward: {kind: metric, metric_key: NAME}`";
            Err(match node.get("function") {
                Some(function) => r.hinted(
                    function.offset,
                    format!(
                        "`reward.function: {}` is a Python reward composer, which casebook cannot run",
                        text(function)
                    ),
                    hint,
                ),
                None => r.hinted(
                    kind_node.offset,
                    "`reward.kind: custom` needs a Python reward composer, which casebook cannot run",
                    hint,
                ),
            })
        }
        other => Err(r.hinted(
            kind_node.offset,
            format!("`reward.kind: {other}` is not a letta reward kind"),
            "letta's reward kinds: `metric` and `custom`",
        )),
    }
}

/// Which of letta's own placeholders a prompt places itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placed {
    pub input: bool,
    pub submission: bool,
    pub ground_truth: bool,
}

/// Names a letta rubric variable cannot take as a template variable of its own: casebook's
/// judge variables and minijinja's words. Such a `{name}` is read from `rubric_vars`.
const TAKEN: &[&str] = &[
    "output",
    "expected",
    "outcomes",
    "rubric",
    "rubric_vars",
    "trajectory",
    "turns",
    "steps",
    "tool_calls",
    "true",
    "false",
    "none",
    "True",
    "False",
    "None",
    "and",
    "or",
    "not",
    "in",
    "is",
    "if",
    "else",
    "loop",
    "self",
    "super",
    "range",
    "dict",
    "namespace",
    "debug",
    "caller",
    "varargs",
    "kwargs",
];

/// letta's prompt text as a minijinja template: each `{name}` (a name of letters, digits and
/// `_`) becomes an expression — `{input}` → `{{ input }}`, `{submission}` → `{{ output }}`,
/// `{ground_truth}` → `{{ expected }}`, any other name a `rubric_vars` variable — and all other
/// text stays literal (a `{` that would open minijinja syntax is written as an expression).
pub fn convert_placeholders(prompt: &str) -> (String, Placed) {
    let mut out = String::with_capacity(prompt.len() + 64);
    let mut placed = Placed::default();
    let mut rest = prompt;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name = after.find('}').map(|close| &after[..close]).filter(|name| is_name(name));
        match name {
            Some(name) => {
                match name {
                    "input" => {
                        placed.input = true;
                        out.push_str("{{ input }}");
                    }
                    "submission" => {
                        placed.submission = true;
                        out.push_str("{{ output }}");
                    }
                    "ground_truth" => {
                        placed.ground_truth = true;
                        out.push_str("{{ expected }}");
                    }
                    taken if TAKEN.contains(&taken) => out.push_str(&format!("{{{{ rubric_vars[\"{taken}\"] }}}}")),
                    var => out.push_str(&format!("{{{{ {var} }}}}")),
                }
                rest = &after[name.len() + 1..];
            }
            None => {
                if after.starts_with(['{', '%', '#']) {
                    out.push_str("{{ \"{\" }}");
                } else {
                    out.push('{');
                }
                rest = after;
            }
        }
    }
    out.push_str(rest);
    (out, placed)
}

fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What letta shows the judge beside the rubric when the rubric does not place it itself.
const TASK_SECTION: &str = "\n\n## The task given to the agent\n{{ input }}";
const EXPECTED_SECTION: &str = "{% if expected %}\n\n## The expected answer\n{{ expected }}{% endif %}";
const ANSWER_SECTION: &str = "\n\n## The agent's answer (what you are grading)\n{{ output }}";

/// letta's judge prompt as an `llm_judge` template. A case's own `rubric` (letta's per-sample
/// `rubric`/`rubric_path`) replaces the prompt, its placeholders filled the same way; the task,
/// the expected answer and the agent's answer are added after a rubric that does not place them.
pub fn judge_template(prompt: &str) -> String {
    let (converted, placed) = convert_placeholders(prompt);
    let mut template = String::from(
        "{% if rubric %}{{ rubric | replace(\"{input}\", input | string) | replace(\"{submission}\", output | string) \
         | replace(\"{ground_truth}\", \"\" if expected is none else expected | string) }}",
    );
    for (placeholder, section) in
        [("{input}", TASK_SECTION), ("{ground_truth}", EXPECTED_SECTION), ("{submission}", ANSWER_SECTION)]
    {
        template.push_str(&format!("{{% if \"{placeholder}\" not in rubric %}}{section}{{% endif %}}"));
    }
    template.push_str("{% else %}");
    template.push_str(&converted);
    for (done, section) in
        [(placed.input, TASK_SECTION), (placed.ground_truth, EXPECTED_SECTION), (placed.submission, ANSWER_SECTION)]
    {
        if !done {
            template.push_str(section);
        }
    }
    template.push_str("{% endif %}");
    template
}

#[cfg(test)]
mod tests {
    use minijinja::{Environment, UndefinedBehavior, context};

    use super::*;
    use crate::experiment::Place;
    use crate::grade::{GraderOptions, GraderSpec};

    fn parse(text: &str) -> Result<Experiment, ExperimentError> {
        Experiment::parse(Path::new("suite.yaml"), text)
    }

    /// A suite with a target casebook can start, so only the part under test varies.
    fn suite(rest: &str) -> Result<Experiment, ExperimentError> {
        parse(&format!("name: s\ndataset: d.jsonl\ntarget: 'builtin:echo'\n{rest}"))
    }

    fn err(result: Result<Experiment, ExperimentError>) -> (Place, String) {
        let e = result.unwrap_err();
        (e.at, e.message)
    }

    fn render(template: &str, rubric: Option<&str>, expected: Option<&str>) -> String {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.add_template("t", template).unwrap();
        let vars = context! { reference => "REF" };
        env.get_template("t")
            .unwrap()
            .render(context! {
                input => "TASK", output => "ANSWER", expected => expected, rubric => rubric,
                rubric_vars => vars, reference => "REF", outcomes => Vec::<String>::new(),
            })
            .unwrap()
    }

    #[test]
    fn placeholders_become_the_judges_variables() {
        let (template, placed) =
            convert_placeholders("Q: {input}\nA: {submission}\nRef: {ground_truth}\nExample: {reference_ascii}");
        assert_eq!(template, "Q: {{ input }}\nA: {{ output }}\nRef: {{ expected }}\nExample: {{ reference_ascii }}");
        assert_eq!(placed, Placed { input: true, submission: true, ground_truth: true });
    }

    #[test]
    fn names_the_judge_already_uses_are_read_from_rubric_vars() {
        let (template, placed) = convert_placeholders("{output} {rubric} {loop} {steps}");
        assert_eq!(
            template,
            "{{ rubric_vars[\"output\"] }} {{ rubric_vars[\"rubric\"] }} {{ rubric_vars[\"loop\"] }} \
             {{ rubric_vars[\"steps\"] }}"
        );
        assert_eq!(placed, Placed::default());
    }

    #[test]
    fn other_braces_stay_literal_and_cannot_open_template_syntax() {
        let prompt = "Reply {\"score\": 1} or ```{YOUR ART}```; {{input}} {% raw %} {# x #} {} {1a} {";
        let (template, placed) = convert_placeholders(prompt);
        assert!(placed.input, "{{input}} still holds the placeholder {{input}}");
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.add_template("t", &template).unwrap();
        let text = env.get_template("t").unwrap().render(context! { input => "TASK" }).unwrap();
        assert_eq!(text, "Reply {\"score\": 1} or ```{YOUR ART}```; {TASK} {% raw %} {# x #} {} {1a} {");
    }

    #[test]
    fn template_adds_what_the_rubric_does_not_place() {
        let full = judge_template("Grade {submission} for {input} against {ground_truth}.");
        assert_eq!(render(&full, None, Some("GT")), "Grade ANSWER for TASK against GT.");
        let bare = judge_template("Be strict. Compare with {reference}.");
        assert_eq!(
            render(&bare, None, Some("GT")),
            "Be strict. Compare with REF.\n\n## The task given to the agent\nTASK\n\n## The expected answer\nGT\n\n\
             ## The agent's answer (what you are grading)\nANSWER"
        );
        assert!(!render(&bare, None, None).contains("expected answer"), "no expected answer, no section");
    }

    #[test]
    fn a_cases_own_rubric_replaces_the_suites() {
        let template = judge_template("Suite rubric for {input}: {submission}");
        let text = render(&template, Some("Case rubric: {input} / {submission}"), None);
        assert_eq!(text, "Case rubric: TASK / ANSWER");
        let text = render(&template, Some("Just be fair."), Some("GT"));
        assert_eq!(
            text,
            "Just be fair.\n\n## The task given to the agent\nTASK\n\n## The expected answer\nGT\n\n\
             ## The agent's answer (what you are grading)\nANSWER"
        );
    }

    #[test]
    fn a_missing_rubric_var_is_an_error_not_an_empty_string() {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        let template = judge_template("Compare with {reference_code}.");
        env.add_template("t", &template).unwrap();
        let rendered = env.get_template("t").unwrap().render(context! {
            input => "TASK", output => "ANSWER", expected => (), rubric => (),
        });
        assert!(rendered.is_err());
    }

    #[test]
    fn recognises_suites_and_leaves_experiments_alone() {
        let node = |text: &str| casebook_formats::yaml::parse(text).unwrap().into_owned();
        assert!(is_suite(&node("dataset: d\nnum_runs: 2\n")));
        assert!(is_suite(&node("dataset: d\ntarget: {kind: letta_agent, agent_file: a.af}\n")));
        assert!(is_suite(&node("dataset: d\ntarget: {base_url: 'http://x'}\n")), "letta's default kind");
        assert!(is_suite(&node("dataset: d\ngraders: {g: {kind: tool, function: contains}}\n")));
        assert!(!is_suite(&node("dataset: d\ntarget: x\ngraders: {quality: {kind: contains}}\n")));
        assert!(!is_suite(&node("dataset: d\ntarget: {url: 'http://x'}\nn_runs: 2\n")));
    }

    #[test]
    fn maps_counts_tags_and_target_settings() {
        let e = parse(
            "name: s\ndescription: d\ndataset: data.csv\nnum_runs: 3\nmax_samples: 10\nsample_tags: [math, easy]\n\
             max_concurrent: 4\noutput: results/\ncleanup: true\n\
             target: {kind: letta_agent, agent_file: a.af, base_url: 'http://localhost:8283', timeout: 30, \
             max_retries: 1}\n",
        )
        .unwrap();
        assert_eq!(
            (e.name.as_str(), e.description.as_deref(), e.dataset.as_str(), e.n_runs, e.limit, e.concurrency),
            ("s", Some("d"), "data.csv", 3, Some(10), 4)
        );
        assert_eq!(e.tags, ["math", "easy"]);
        assert_eq!((e.timeout_secs, e.retries), (30.0, 1));
        assert!(e.scenarios.is_empty());
        let target = e.unsupported_target.as_ref().unwrap();
        assert_eq!(target.at, Place { line: 10, column: 16 });
        assert!(target.message.starts_with("`target.kind: letta_agent` runs an agent on a Letta server"));
        assert_eq!(e.missing_target(), Some(target));
    }

    #[test]
    fn optional_keys_may_be_null() {
        let e =
            suite("num_runs: null\nmax_samples: null\nsample_tags: null\ngraders: null\ndescription: null\n").unwrap();
        assert_eq!((e.n_runs, e.limit, e.tags.len(), e.graders.len(), e.description), (1, None, 0, 0, None));
    }

    #[test]
    fn a_casebook_target_or_scenarios_make_a_suite_runnable() {
        let e = suite("num_runs: 2\n").unwrap();
        assert_eq!((e.scenarios.len(), e.unsupported_target.is_none()), (1, true));
        let e = parse(
            "dataset: d\ntarget: {kind: letta_code, timeout: 5}\nscenarios:\n  - {name: a, target: 'builtin:echo'}\n",
        )
        .unwrap();
        assert_eq!((e.scenarios[0].name.as_str(), e.timeout_secs, e.missing_target()), ("a", 5.0, None));
        assert_eq!(
            err(parse("dataset: d\nnum_runs: 1\ntarget: 'builtin:echo'\nscenarios: [{target: x}]\n")),
            (Place { line: 3, column: 9 }, "give either `target` or `scenarios`, not both".into())
        );
        assert!(err(parse("dataset: d\nnum_runs: 1\n")).1.contains("names no target"));
    }

    #[test]
    fn several_model_handles_would_each_be_a_scenario() {
        let e = parse("dataset: d\ntarget:\n  kind: letta_code\n  model_handles: [a/m1, b/m2]\n").unwrap();
        let target = e.unsupported_target.unwrap();
        assert!(target.message.ends_with("; its 2 `model_handles` (`a/m1`, `b/m2`) would each be a scenario"));
        assert!(target.hint.unwrap().contains("one `{name, target}` per model under `scenarios:`"));
    }

    #[test]
    fn agent_script_is_named_as_the_reason_the_target_cannot_start() {
        let e = parse("dataset: d\ntarget:\n  kind: letta_code\n  agent_script: make.py:build\n").unwrap();
        let target = e.unsupported_target.unwrap();
        assert_eq!(target.at, Place { line: 4, column: 3 });
        assert!(target.message.starts_with("`target.agent_script: make.py:build` creates the agent with Python"));
    }

    #[test]
    fn target_without_kind_is_letta_code() {
        let e = parse("dataset: d\ntarget:\n  base_url: 'http://localhost:8283'\n").unwrap();
        let target = e.unsupported_target.unwrap();
        assert_eq!(target.at, Place { line: 3, column: 3 });
        assert!(target.message.starts_with("`target` is a Letta Code agent"));
    }

    #[test]
    fn unknown_target_keys_and_kinds_are_errors() {
        assert_eq!(
            err(parse("dataset: d\ntarget:\n  kind: letta_code\n  base_ulr: x\n")),
            (Place { line: 4, column: 3 }, "unknown key `target.base_ulr` in a letta target".into())
        );
        assert_eq!(
            err(parse("dataset: d\nnum_runs: 1\ntarget: {kind: docker}\n")),
            (Place { line: 3, column: 16 }, "`target.kind: docker` is not a letta target".into())
        );
    }

    fn grader_of(yaml: &str) -> Value {
        let e = suite(&format!("graders:\n  g:\n{yaml}")).unwrap();
        assert_eq!(e.graders[0].at, Place { line: 6, column: 5 });
        e.graders[0].value.clone()
    }

    #[test]
    fn builtin_tool_graders_map_to_casebook_kinds() {
        let tool = |function: &str| grader_of(&format!("    kind: tool\n    function: {function}\n"));
        assert_eq!(tool("exact_match"), json!({"kind": "exact_match", "name": "g"}));
        assert_eq!(tool("contains"), json!({"kind": "contains", "name": "g", "ignore_case": true}));
        assert_eq!(tool("regex_match"), json!({"kind": "regex_match", "name": "g"}));
        assert_eq!(
            tool("ascii_printable_only"),
            json!({"kind": "regex_match", "name": "g", "pattern": ASCII_PRINTABLE})
        );
        let with_extractor = grader_of(
            "    kind: tool\n    function: exact_match\n    extractor: last_assistant\n    display_name: X\n",
        );
        assert_eq!(with_extractor, json!({"kind": "exact_match", "name": "g"}));
        for function in ["exact_match", "contains", "regex_match", "ascii_printable_only"] {
            let spec: GraderSpec = serde_json::from_value(tool(function)).unwrap();
            spec.build().unwrap();
        }
    }

    #[test]
    fn ascii_printable_only_matches_what_letta_accepts() {
        let regex = regex::Regex::new(ASCII_PRINTABLE).unwrap();
        assert!(regex.is_match(" /\\_/\\\n( o.o )\r\n > ^ <"));
        assert!(!regex.is_match("cat 🐱"));
        assert!(!regex.is_match("tab\there"));
        assert!(!regex.is_match(""), "letta scores an empty answer 0");
    }

    #[test]
    fn tool_graders_casebook_cannot_run_are_located_errors() {
        let at = |yaml: &str| err(suite(&format!("graders:\n  g:\n{yaml}")));
        assert_eq!(
            at("    kind: tool\n    function: my.py:grade\n"),
            (
                Place { line: 7, column: 15 },
                "`graders.g.function: my.py:grade` is a Python grader, which casebook cannot run".into()
            )
        );
        assert_eq!(
            at("    kind: tool\n    function: fuzzy\n"),
            (
                Place { line: 7, column: 15 },
                "`graders.g.function: fuzzy` is not one of letta's built-in graders".into()
            )
        );
        assert_eq!(
            at("    kind: tool\n    function: contains\n    extractor: tool_output\n").1,
            "`graders.g.extractor: tool_output` grades something other than the agent's last answer, which \
             casebook's graders do not read"
        );
        assert_eq!(
            at("    kind: tool\n    function: contains\n    extractor: x.py:pick\n").1,
            "`graders.g.extractor: x.py:pick` is a Python extractor, which casebook cannot run"
        );
        assert_eq!(
            at("    kind: tool\n    function: contains\n    extractor_config: {tool_name: t}\n"),
            (
                Place { line: 8, column: 5 },
                "`graders.g.extractor_config` configures an extractor, which casebook does not have".into()
            )
        );
        assert_eq!(
            at("    kind: tool\n    functoin: contains\n"),
            (Place { line: 7, column: 5 }, "unknown key `graders.g.functoin` in a `tool` grader".into())
        );
        assert_eq!(at("    kind: tool\n").1, "`graders.g` (a `tool` grader) has no `function`");
        assert_eq!(
            at("    kind: letta_judge\n").1,
            "`graders.g.kind: letta_judge` grades with a Letta agent, which casebook cannot start"
        );
        let fancy = err(suite("num_runs: 1\ngraders:\n  g:\n    kind: fancy\n"));
        assert_eq!(fancy.1, "`graders.g.kind: fancy` is not a letta grader kind");
    }

    #[test]
    fn model_judge_maps_to_llm_judge() {
        let judge = grader_of(
            "    kind: model_judge\n    prompt: 'Grade {submission}'\n    model: m1\n    provider: anthropic\n    \
             temperature: 0.0\n    max_retries: 3\n    timeout: 90\n",
        );
        assert_eq!(
            judge,
            json!({"kind": "llm_judge", "name": "g", "model": "m1", "api_key_env": "ANTHROPIC_API_KEY",
                   "template": judge_template("Grade {submission}"), "timeout_secs": 90.0, "temperature": 0.0})
        );
        let legacy = grader_of("    kind: rubric\n    prompt: p\n");
        assert_eq!(
            (legacy["model"].as_str(), legacy["api_key_env"].as_str()),
            (Some("gpt-4o-mini"), Some("OPENAI_API_KEY"))
        );
        // With an endpoint (which no suite has) the mapped judge builds: its template parses.
        let mut with_endpoint = judge.clone();
        with_endpoint["endpoint"] = json!("http://127.0.0.1:9/v1");
        with_endpoint["api_key_env"] = Value::Null;
        let spec: GraderSpec = serde_json::from_value(with_endpoint).unwrap();
        assert!(matches!(spec.options, GraderOptions::LlmJudge(_)));
        spec.build().unwrap();
        // Without one, building it says what is missing, naming the grader.
        let err = serde_json::from_value::<GraderSpec>(judge).unwrap_err().to_string();
        assert!(err.contains("grader `g`: missing field `endpoint`"), "{err}");
    }

    #[test]
    fn judge_prompt_problems_are_located_errors() {
        let at = |yaml: &str| err(suite(&format!("graders:\n  g:\n{yaml}")));
        assert_eq!(
            at("    kind: model_judge\n    prompt: a\n    prompt_path: b.txt\n"),
            (
                Place { line: 8, column: 18 },
                "give either `graders.g.prompt` or `graders.g.prompt_path`, not both".into()
            )
        );
        assert_eq!(
            at("    kind: model_judge\n").1,
            "`graders.g` (a `model_judge` grader) has neither `prompt` nor `prompt_path`"
        );
        let (place, message) = at("    kind: model_judge\n    prompt_path: no-such-rubric.txt\n");
        assert_eq!(place, Place { line: 7, column: 18 });
        assert!(message.starts_with("cannot read `graders.g.prompt_path`: "), "{message}");
        assert!(message.contains("no-such-rubric.txt"), "the path is named: {message}");
        assert_eq!(
            at("    kind: model_judge\n    prompt: p\n    provider: mistral\n"),
            (Place { line: 8, column: 15 }, "`graders.g.provider: mistral` is not a letta judge provider".into())
        );
        assert_eq!(
            at("    kind: model_judge\n    prompt: p\n    system_prompt: be nice\n").1,
            "`graders.g.system_prompt` replaces the judge's system prompt, which casebook's judge keeps"
        );
    }

    #[test]
    fn prompt_path_is_read_relative_to_the_suite() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::write(dir.path().join("rubric.txt"), "Is {submission} right?").unwrap();
        let file = dir.path().join("suite.yaml");
        let text = "dataset: d\ntarget: 'builtin:echo'\ngraders:\n  q: {kind: model_judge, prompt_path: rubric.txt}\n";
        let e = Experiment::parse(&file, text).unwrap();
        assert_eq!(e.graders[0].value["template"], json!(judge_template("Is {submission} right?")));
    }

    #[test]
    fn metric_reward_weighs_only_its_grader() {
        let e = suite(
            "graders:\n  a: {kind: tool, function: contains}\n  b: {kind: tool, function: exact_match}\n\
             reward: {kind: metric, metric_key: b}\n",
        )
        .unwrap();
        assert_eq!(e.graders[0].value["weight"], json!(0));
        assert_eq!(e.graders[1].value.get("weight"), None, "the reward's grader keeps weight 1");
        let spec: GraderSpec = serde_json::from_value(e.graders[0].value.clone()).unwrap();
        assert_eq!(spec.weight, 0.0);
    }

    #[test]
    fn reward_problems_are_located_errors() {
        assert_eq!(
            err(suite("graders:\n  a: {kind: tool, function: contains}\nreward: {kind: metric, metric_key: b}\n")),
            (Place { line: 6, column: 36 }, "`reward.metric_key: b` names no grader of the suite".into())
        );
        assert_eq!(
            err(suite("reward:\n  kind: custom\n  function: rewards.py:compose\n")),
            (
                Place { line: 6, column: 13 },
                "`reward.function: rewards.py:compose` is a Python reward composer, which casebook cannot run".into()
            )
        );
        assert_eq!(
            err(suite("reward: {kind: best}\n")),
            (Place { line: 4, column: 16 }, "`reward.kind: best` is not a letta reward kind".into())
        );
        assert_eq!(err(suite("reward: {kind: metric, metrc_key: a}\n")).1, "unknown key `reward.metrc_key`");
    }

    #[test]
    fn code_and_infrastructure_are_located_errors() {
        assert_eq!(
            err(suite("setup_script: setup.py:prepare\n")),
            (
                Place { line: 4, column: 1 },
                "`setup_script: setup.py:prepare` is a Python setup step, which casebook cannot run".into()
            )
        );
        assert_eq!(
            err(suite("sandbox:\n  kind: modal\n")),
            (
                Place { line: 4, column: 1 },
                "`sandbox` runs every sample in a Modal sandbox, which casebook cannot provide".into()
            )
        );
        assert_eq!(err(suite("gate: {metric_key: a}\n")).0, Place { line: 4, column: 1 });
    }

    #[test]
    fn unknown_and_casebook_spelled_keys_are_errors() {
        let e = suite("num_runs: 1\nnum_run: 2\n").unwrap_err();
        assert_eq!(
            (e.at, e.message.as_str(), e.hint.as_deref()),
            (Place { line: 5, column: 1 }, "unknown key `num_run` in a letta suite", Some("did you mean `num_runs`?"))
        );
        let e = suite("num_runs: 1\nn_runs: 2\n").unwrap_err();
        assert_eq!(
            (e.at, e.message.as_str(), e.hint.as_deref()),
            (
                Place { line: 5, column: 1 },
                "`n_runs` is casebook's name for letta's `num_runs`",
                Some("in a letta suite, write `num_runs`")
            )
        );
    }

    #[test]
    fn dataset_urls_are_not_downloaded() {
        assert_eq!(
            err(parse("dataset: 'https://huggingface.co/datasets/o/r/resolve/main/d.jsonl'\nnum_runs: 1\n")),
            (
                Place { line: 1, column: 10 },
                "`dataset: https://huggingface.co/datasets/o/r/resolve/main/d.jsonl` is a URL, which casebook does \
                 not download"
                    .into()
            )
        );
    }

    #[test]
    fn casebook_keys_letta_lacks_are_read() {
        let e =
            suite("num_runs: 1\nthreshold: 0.5\nfilter: 'len(turns) > 0'\nmemory_seeds: [{source: s, content: c}]\n")
                .unwrap();
        assert_eq!((e.threshold, e.filter.as_deref(), e.memory_seeds.len()), (0.5, Some("len(turns) > 0"), 1));
    }
}
