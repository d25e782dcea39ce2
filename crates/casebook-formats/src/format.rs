//! The formats casebook reads and writes, their file syntaxes, and detection from a file's
//! extension and first bytes.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Casebook,
    AgentHealth,
    Maslab,
    Voltagent,
    Letta,
    /// OpenAI evals samples (JSONL).
    OpenaiEvals,
    /// Inspect AI samples (JSON array, JSONL, CSV).
    Inspect,
    /// promptfoo test cases (YAML, JSON, JSONL, CSV).
    Promptfoo,
    Csv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syntax {
    Json,
    Jsonl,
    Yaml,
    Csv,
    /// A Parquet table of casebook's cases (binary; see `parquet.rs`).
    Parquet,
}

impl Format {
    pub const ALL: [Format; 9] = [
        Format::Casebook,
        Format::AgentHealth,
        Format::Maslab,
        Format::Voltagent,
        Format::Letta,
        Format::OpenaiEvals,
        Format::Inspect,
        Format::Promptfoo,
        Format::Csv,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Casebook => "casebook",
            Format::AgentHealth => "agenthealth",
            Format::Maslab => "maslab",
            Format::Voltagent => "voltagent",
            Format::Letta => "letta",
            Format::OpenaiEvals => crate::openai_evals::NAME,
            Format::Inspect => crate::inspect::NAME,
            Format::Promptfoo => crate::promptfoo::NAME,
            Format::Csv => "csv",
        }
    }

    /// The syntaxes this format can be written in, the default first.
    pub fn syntaxes(self) -> &'static [Syntax] {
        match self {
            Format::Casebook => &[Syntax::Jsonl, Syntax::Yaml, Syntax::Json, Syntax::Parquet],
            Format::AgentHealth | Format::Voltagent => &[Syntax::Json],
            Format::Maslab => &[Syntax::Yaml, Syntax::Json],
            Format::Letta => &[Syntax::Jsonl, Syntax::Csv],
            Format::OpenaiEvals => &[Syntax::Jsonl],
            Format::Inspect => &[Syntax::Jsonl, Syntax::Json, Syntax::Csv],
            Format::Promptfoo => &[Syntax::Yaml, Syntax::Json, Syntax::Jsonl, Syntax::Csv],
            Format::Csv => &[Syntax::Csv],
        }
    }

    /// Whether a file of this format must hold at least one case: casebook's readers refuse an
    /// empty letta, mas-lab, VoltAgent or CSV file (letta-evals and mas-lab run the cases of a
    /// file, and a CSV file without rows has no columns either); a casebook document and an
    /// Agent Health array may be empty (with a warning).
    pub fn needs_cases(self) -> bool {
        !matches!(self, Format::Casebook | Format::AgentHealth)
    }

    /// The syntax to write: the one the output path's extension names, if this format has it.
    pub fn syntax_for(self, path: Option<&Path>) -> Syntax {
        let wanted = path.and_then(Syntax::from_path);
        match wanted {
            Some(s) if self.syntaxes().contains(&s) => s,
            _ => self.syntaxes()[0],
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Format names as users type them, aliases included.
///
/// ```
/// use casebook_formats::Format;
///
/// assert_eq!("mas-lab".parse::<Format>(), Ok(Format::Maslab));
/// assert_eq!("native".parse::<Format>(), Ok(Format::Casebook));
/// assert!("excel".parse::<Format>().unwrap_err().contains("`letta`"));
/// ```
impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        let alias = match lower.as_str() {
            "native" => "casebook",
            "agent-health" | "agent_health" => "agenthealth",
            "mas-lab" | "mas_lab" => "maslab",
            "letta-evals" | "letta_evals" => "letta",
            "inspect-ai" | "inspect_ai" => "inspect",
            other => other,
        };
        Format::ALL.into_iter().find(|f| f.name() == alias).ok_or_else(|| {
            format!(
                "unknown format `{s}`; use one of {}",
                Format::ALL.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
            )
        })
    }
}

impl Syntax {
    pub fn from_path(path: &Path) -> Option<Syntax> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "json" => Syntax::Json,
            "jsonl" | "ndjson" => Syntax::Jsonl,
            "yaml" | "yml" => Syntax::Yaml,
            "csv" => Syntax::Csv,
            "parquet" => Syntax::Parquet,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Syntax::Json => "json",
            Syntax::Jsonl => "jsonl",
            Syntax::Yaml => "yaml",
            Syntax::Csv => "csv",
            Syntax::Parquet => "parquet",
        }
    }
}

/// Guesses the syntax of text whose file name says nothing.
pub fn sniff_syntax(head: &[u8]) -> Syntax {
    let text = String::from_utf8_lossy(head);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    if text.starts_with('[') {
        return Syntax::Json;
    }
    if text.starts_with('{') {
        // JSONL if the first line is a whole value and another value starts on a later line.
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let first = lines.next().unwrap_or("");
        if crate::json::parse(first).is_ok() && lines.next().is_some_and(|l| l.trim_start().starts_with('{')) {
            return Syntax::Jsonl;
        }
        if crate::json::parse(first).is_ok() {
            return Syntax::Jsonl;
        }
        return Syntax::Json;
    }
    let first_line = text.lines().next().unwrap_or("");
    if first_line.contains(',') && !first_line.contains(": ") && !first_line.starts_with('#') {
        return Syntax::Csv;
    }
    Syntax::Yaml
}

/// Keys only a promptfoo test has.
const PROMPTFOO: &[&str] = &["vars", "assert"];

/// Keys only an Inspect AI sample has (`input` alone says nothing: letta rows have it too).
const INSPECT: &[&str] = &["target", "choices", "sandbox", "setup", "files"];

/// Which format a JSONL row looks like.
pub fn sniff_jsonl_row(row: &crate::node::Node) -> Format {
    const LETTA: &[&str] = &[
        "ground_truth",
        "prompt",
        "sample_id",
        "rubric_vars",
        "rubric_path",
        "extra_vars",
        "rubric",
        "tags",
        "agent_args",
    ];
    const NATIVE: &[&str] =
        &["expected", "turns", "labels", "context", "provenance", "tools", "memory_seeds", "review", "confidence"];
    if NATIVE.iter().any(|k| row.get(k).is_some()) || crate::native::header_record(row).is_some() {
        return Format::Casebook;
    }
    if PROMPTFOO.iter().any(|k| row.get(k).is_some()) {
        return Format::Promptfoo;
    }
    if INSPECT.iter().any(|k| row.get(k).is_some()) {
        return Format::Inspect;
    }
    if row.get("ideal").is_some() || row.get("messages").is_some() {
        return Format::OpenaiEvals;
    }
    if LETTA.iter().any(|k| row.get(k).is_some()) {
        return Format::Letta;
    }
    if matches!(row.get("input").map(|n| &n.value), Some(crate::node::NodeValue::Array(_))) {
        return Format::Letta;
    }
    Format::Letta
}

/// Which format a document whose root is a list of cases is, from its first item: Agent Health's
/// test cases unless the item has keys of another format.
pub fn sniff_list_item(item: &crate::node::Node) -> Format {
    if PROMPTFOO.iter().any(|k| item.get(k).is_some()) && item.get("initialPrompt").is_none() {
        Format::Promptfoo
    } else if INSPECT.iter().any(|k| item.get(k).is_some()) && item.get("initialPrompt").is_none() {
        Format::Inspect
    } else {
        Format::AgentHealth
    }
}

/// Which format a CSV file is, from its header: letta's unless the columns are another format's.
pub fn sniff_csv_header(columns: &[String]) -> Format {
    if crate::promptfoo::is_csv_header(columns) {
        Format::Promptfoo
    } else if columns.iter().any(|c| INSPECT.contains(&c.as_str())) && columns.iter().any(|c| c == "input") {
        Format::Inspect
    } else {
        Format::Letta
    }
}

/// Whether a document is a mas-lab seed file rather than a dataset: a list of seeds (each with
/// `content` and `source` or `target_agent`, and nothing a case has), or an object whose only key
/// is `seeds` or `memory_seeds`, as mas-lab's manifest reference describes them. Such a file is
/// read through the dataset that names it; read alone it would pass for Agent Health's.
pub fn is_seed_file(root: &crate::node::Node) -> bool {
    use crate::node::NodeValue;
    let seed = |item: &crate::node::Node| match &item.value {
        NodeValue::Object(fields) => {
            item.get("content").is_some()
                && (item.get("source").is_some() || item.get("target_agent").is_some())
                && fields.len() <= 4
                && item.get("initialPrompt").is_none()
                && item.get("input").is_none()
        }
        _ => false,
    };
    match &root.value {
        NodeValue::Array(items) => !items.is_empty() && items.iter().all(seed),
        NodeValue::Object(fields) => {
            fields.len() == 1
                && ["seeds", "memory_seeds"].iter().any(|key| {
                    matches!(root.get(key).map(|n| &n.value), Some(NodeValue::Array(items)) if items.iter().all(seed))
                })
        }
        _ => false,
    }
}

pub fn sniff_document(root: &crate::node::Node) -> Option<Format> {
    use crate::node::NodeValue;
    match &root.value {
        NodeValue::Array(items) => Some(items.first().map_or(Format::AgentHealth, sniff_list_item)),
        NodeValue::Object(_) => {
            if root.get("kind").is_some() || root.get("apiVersion").is_some() || root.get("items").is_some() {
                Some(Format::Maslab)
            } else if root.get("data").is_some() {
                Some(Format::Voltagent)
            } else if root.get("cases").is_some() {
                Some(Format::Casebook)
            } else if root.get("initialPrompt").is_some() || root.get("expectedOutcomes").is_some() {
                Some(Format::AgentHealth)
            } else if root.get("tests").is_some() {
                // A promptfoo configuration with its tests inline.
                Some(Format::Promptfoo)
            } else {
                None
            }
        }
        _ => None,
    }
}
