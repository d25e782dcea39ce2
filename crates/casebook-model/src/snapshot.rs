//! The world snapshot a case's tools answer from (SPEC §2, §8 "investigation environment").
//!
//! A [`Tool`](crate::Tool) may carry recorded answers: an ordered list of [`Response`]s, each
//! saying which calls it answers ([`When`]) and what they get ([`Answer`]), and a [`Fallback`]
//! for any other call. The first response whose `when` holds answers the call. A response may
//! hold a [`Query`] instead of a result: how to find the signal at its source, which
//! `casebook freeze` runs once and records as the result.
//!
//! [`Snapshot::compile`] checks a case's tools once (patterns compile, templates name only
//! arguments the response fixes) and [`Snapshot::serve`] answers one call. Both are pure: no
//! I/O, so the runner, the MCP server and `validate` share one definition of what matches.

use std::collections::BTreeSet;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Map, Tool};

/// A tool's recorded answers: inline, or a shared snapshot file read with the dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Responses {
    /// Responses given in the case.
    Inline(Vec<Response>),
    /// A snapshot file as it was when the dataset was read: its path as the dataset names it
    /// (relative to the dataset file) and its document (a list of responses) as JSON. A stored
    /// version keeps the document once however many cases share it, as it does seed files.
    File { file: String, content: Value },
    /// A snapshot file that was not read (a dataset read from standard input).
    Path(String),
}

/// One recorded answer and the calls it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Response {
    /// Which calls get this answer; absent: every call (a catch-all, so put it last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// The result the agent gets (any JSON; a string is sent as it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// An error the agent gets instead of a result (a tool that fails is part of the world).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How to find the signal at its source. Without `result` or `error` it has not been run
    /// yet (`casebook freeze` runs it); with one, it records where the result came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<Query>,
}

/// Conditions on a call's arguments; all that are given must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The arguments, exactly (as JSON values: key order and number spelling do not matter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// A subset of the arguments: each key given has this value (objects compared as subsets
    /// too; other values exactly). Other keys of the call may be anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub includes: Option<Map>,
    /// Patterns (regular expressions, unanchored) that string arguments must match, by argument
    /// name, or by JSON pointer (`/filter/service`) for a nested one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<std::collections::BTreeMap<String, String>>")]
    pub matches: Option<Strings>,
}

/// An object of strings by key (`matches`, `headers`), its keys in the order written, so a case
/// is written back as it was read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Strings(Vec<(String, String)>);

impl Strings {
    /// The pairs in order; a key given twice keeps its last value, in its first place. Linear
    /// in the number of pairs (a reader hands over what a user wrote).
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Self {
        let mut first: std::collections::HashMap<String, usize> = std::collections::HashMap::with_capacity(pairs.len());
        let mut out: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            match first.get(&k) {
                Some(&i) => out[i].1 = v,
                None => {
                    first.insert(k.clone(), out.len());
                    out.push((k, v));
                }
            }
        }
        Strings(out)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Keys and values in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> IntoIterator for &'a Strings {
    type Item = (&'a String, &'a String);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (String, String)>, fn(&'a (String, String)) -> (&'a String, &'a String)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Strings {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(items: I) -> Self {
        Strings::from_pairs(items.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }
}

impl Serialize for Strings {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Strings;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of strings")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Strings, A::Error> {
                let mut pairs = Vec::new();
                while let Some(pair) = map.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                Ok(Strings::from_pairs(pairs))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// What a call that no response answers gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Fallback {
    /// `empty`: an empty result (`""`).
    Keyword(FallbackKeyword),
    /// `{result: …}` or `{error: …}`.
    Answer {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FallbackKeyword {
    Empty,
}

/// A query that finds a signal at its source: an HTTP GET or a command. `{name}` in the URL or
/// in an argument of the command is replaced by the call argument `name`, which the response's
/// `when` must fix (by `arguments` or `includes`) so that the query can be run before any call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// A URL template for an HTTP GET.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Header values for the GET; `${VAR}` is read from the environment of `casebook freeze`,
    /// so secrets stay out of the dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<std::collections::BTreeMap<String, String>>")]
    pub headers: Option<Strings>,
    /// A program and its arguments (not run through a shell); its standard output is the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// How long the query may take; default 30 seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
    /// When `casebook freeze` ran it (RFC 3339), set with the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen_at: Option<String>,
}

/// A problem with a case's tools, at a JSON pointer relative to the case (`/tools/0/responses/1/when/matches/service`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotError {
    pub pointer: String,
    pub message: String,
}

/// A case's tools, checked and ready to answer calls.
#[derive(Debug, Clone)]
pub struct Snapshot {
    tools: Vec<CompiledTool>,
}

#[derive(Debug, Clone)]
struct CompiledTool {
    name: String,
    responses: Vec<CompiledResponse>,
    fallback: Option<Fallback>,
}

#[derive(Debug, Clone)]
struct CompiledResponse {
    response: Response,
    matcher: CallMatcher,
}

/// A `when`, compiled: which arguments a call must have. What a recorded response answers, and
/// what the trajectory graders look for in a run's calls: one definition of matching for both.
#[derive(Debug, Clone, Default)]
pub struct CallMatcher {
    when: Option<When>,
    /// Patterns by the pointer they apply to.
    patterns: Vec<(String, Regex)>,
}

impl CallMatcher {
    /// Compiles `when` (`None`: every call matches). Errors point inside the `when`
    /// (`/matches/service`); a `when` without conditions is accepted here (a response refuses it).
    pub fn compile(when: Option<When>) -> Result<CallMatcher, Vec<SnapshotError>> {
        let mut errors = Vec::new();
        let mut patterns = Vec::new();
        for (key, pattern) in when.as_ref().and_then(|w| w.matches.as_ref()).into_iter().flatten() {
            match Regex::new(pattern) {
                Ok(regex) => patterns.push((pointer_of(key), regex)),
                Err(e) => errors.push(SnapshotError {
                    pointer: format!("/matches/{}", escape_pointer(key)),
                    message: format!("`{pattern}` is not a valid pattern: {}", first_line(&e.to_string())),
                }),
            }
        }
        if errors.is_empty() { Ok(CallMatcher { when, patterns }) } else { Err(errors) }
    }

    /// The conditions as written.
    pub fn when(&self) -> Option<&When> {
        self.when.as_ref()
    }

    /// Whether a call with `arguments` meets every condition.
    pub fn holds(&self, arguments: &Value) -> bool {
        let Some(when) = &self.when else { return true };
        if let Some(exact) = &when.arguments {
            if !same_json(exact, arguments) {
                return false;
            }
        }
        if let Some(includes) = &when.includes {
            let Value::Object(given) = arguments else { return false };
            if !includes.iter().all(|(k, v)| given.get(k).is_some_and(|g| is_subset(v, g))) {
                return false;
            }
        }
        self.patterns
            .iter()
            .all(|(pointer, regex)| matches!(arguments.pointer(pointer), Some(Value::String(s)) if regex.is_match(s)))
    }
}

/// How a call was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Served {
    /// A recorded response matched.
    Matched,
    /// No response matched; the tool's `default` answered.
    Default,
    /// No response matched and the tool has no default: the agent got an error saying so.
    Unmatched,
    /// The case has no tool of that name.
    UnknownTool,
    /// The matching response is a query that was never frozen: the agent got an error.
    Unfrozen,
}

impl Served {
    /// Whether the call was asked outside the snapshot (counted per case).
    pub fn is_outside(self) -> bool {
        matches!(self, Served::Unmatched | Served::UnknownTool)
    }
}

/// The answer to one call, as the agent gets it and as the trajectory records it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    pub served: Served,
    /// The index of the response that answered, in the tool's `responses`.
    pub entry: Option<usize>,
    /// The result, or the error text when `is_error`.
    pub content: Value,
    pub is_error: bool,
}

impl Snapshot {
    /// Checks `tools` and compiles their patterns. Errors name the place in the case.
    pub fn compile(tools: &[Tool]) -> Result<Snapshot, Vec<SnapshotError>> {
        let mut errors = Vec::new();
        let mut compiled = Vec::with_capacity(tools.len());
        for (t, tool) in tools.iter().enumerate() {
            let base = format!("/tools/{t}");
            let list = match &tool.responses {
                None => Vec::new(),
                Some(Responses::Inline(list)) => list.clone(),
                Some(Responses::File { file, content }) => {
                    match serde_json::from_value::<Vec<Response>>(content.clone()) {
                        Ok(list) => list,
                        Err(e) => {
                            errors.push(SnapshotError {
                                pointer: format!("{base}/responses"),
                                message: format!("snapshot file `{file}` is not a list of responses: {e}"),
                            });
                            Vec::new()
                        }
                    }
                }
                Some(Responses::Path(file)) => {
                    errors.push(SnapshotError {
                        pointer: format!("{base}/responses"),
                        message: format!("the snapshot file `{file}` was not read with the dataset"),
                    });
                    Vec::new()
                }
            };
            let mut responses = Vec::with_capacity(list.len());
            for (r, response) in list.into_iter().enumerate() {
                let at = format!("{base}/responses/{r}");
                check_response(&response, &at, &mut errors);
                let matcher = CallMatcher::compile(response.when.clone()).unwrap_or_else(|inside| {
                    errors.extend(
                        inside
                            .into_iter()
                            .map(|e| SnapshotError { pointer: format!("{at}/when{}", e.pointer), message: e.message }),
                    );
                    CallMatcher::default()
                });
                responses.push(CompiledResponse { response, matcher });
            }
            if let Some(Fallback::Answer { result, error }) = &tool.default {
                if result.is_some() == error.is_some() {
                    errors.push(SnapshotError {
                        pointer: format!("{base}/default"),
                        message: "a default holds exactly one of `result` and `error` (or is `empty`)".into(),
                    });
                }
            }
            compiled.push(CompiledTool { name: tool.name.clone(), responses, fallback: tool.default.clone() });
        }
        if errors.is_empty() { Ok(Snapshot { tools: compiled }) } else { Err(errors) }
    }

    /// Whether any tool has recorded answers or a default (a case without them declares tools
    /// the agent must bring itself).
    pub fn is_recorded(&self) -> bool {
        self.tools.iter().any(|t| !t.responses.is_empty() || t.fallback.is_some())
    }

    /// Answers a call of `name` with `arguments` (a call whose arguments are not JSON is given
    /// them as a string, which only a catch-all response matches).
    pub fn serve(&self, name: &str, arguments: &Value) -> ToolAnswer {
        let Some(tool) = self.tools.iter().find(|t| t.name == name) else {
            let known: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
            return ToolAnswer {
                served: Served::UnknownTool,
                entry: None,
                content: Value::String(format!("there is no tool `{name}`; the tools are: {}", known.join(", "))),
                is_error: true,
            };
        };
        for (i, compiled) in tool.responses.iter().enumerate() {
            if !compiled.matcher.holds(arguments) {
                continue;
            }
            let response = &compiled.response;
            return match (&response.result, &response.error) {
                (Some(result), _) => {
                    ToolAnswer { served: Served::Matched, entry: Some(i), content: result.clone(), is_error: false }
                }
                (None, Some(error)) => ToolAnswer {
                    served: Served::Matched,
                    entry: Some(i),
                    content: Value::String(error.clone()),
                    is_error: true,
                },
                (None, None) => ToolAnswer {
                    served: Served::Unfrozen,
                    entry: Some(i),
                    content: Value::String(format!(
                        "the answer to this call of `{name}` was never recorded (its query was not frozen)"
                    )),
                    is_error: true,
                },
            };
        }
        match &tool.fallback {
            Some(Fallback::Keyword(FallbackKeyword::Empty)) => ToolAnswer {
                served: Served::Default,
                entry: None,
                content: Value::String(String::new()),
                is_error: false,
            },
            Some(Fallback::Answer { result: Some(result), .. }) => {
                ToolAnswer { served: Served::Default, entry: None, content: result.clone(), is_error: false }
            }
            Some(Fallback::Answer { result: None, error }) => ToolAnswer {
                served: Served::Default,
                entry: None,
                content: Value::String(error.clone().unwrap_or_default()),
                is_error: true,
            },
            None => ToolAnswer {
                served: Served::Unmatched,
                entry: None,
                content: Value::String(format!("no recorded answer for this call of `{name}`")),
                is_error: true,
            },
        }
    }
}

/// Equality of JSON values where numbers compare by value (`1` and `1.0` are the same).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || (x.as_f64().is_some() && x.as_f64() == y.as_f64()),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Whether `want` is contained in `given`: objects key by key (recursively), other values equal.
fn is_subset(want: &Value, given: &Value) -> bool {
    match (want, given) {
        (Value::Object(w), Value::Object(g)) => w.iter().all(|(k, v)| g.get(k).is_some_and(|h| is_subset(v, h))),
        _ => same_json(want, given),
    }
}

fn check_response(response: &Response, at: &str, errors: &mut Vec<SnapshotError>) {
    let mut push = |pointer: String, message: String| errors.push(SnapshotError { pointer, message });
    if response.result.is_some() && response.error.is_some() {
        push(at.to_owned(), "a response holds `result` or `error`, not both".into());
    }
    if response.result.is_none() && response.error.is_none() && response.query.is_none() {
        push(at.to_owned(), "a response needs `result`, `error` or a `query` to freeze".into());
    }
    if let Some(when) = &response.when {
        if when.arguments.is_none() && when.includes.is_none() && when.matches.is_none() {
            push(
                format!("{at}/when"),
                "`when` needs `arguments`, `includes` or `matches`; leave it out to answer every call".into(),
            );
        }
    }
    let Some(query) = &response.query else { return };
    let qat = format!("{at}/query");
    match (&query.url, &query.command) {
        (Some(_), Some(_)) => push(qat.clone(), "a query is a `url` or a `command`, not both".into()),
        (None, None) => push(qat.clone(), "a query needs a `url` or a `command`".into()),
        (None, Some(command)) if command.is_empty() => {
            push(format!("{qat}/command"), "the command is empty; give the program and its arguments".into())
        }
        _ => {}
    }
    if query.timeout_secs.is_some_and(|t| !(t.is_finite() && t > 0.0)) {
        push(format!("{qat}/timeout_secs"), "the timeout is a positive number of seconds".into());
    }
    let fixed = fixed_arguments(response.when.as_ref());
    let mut check = |template: &str, pointer: String| {
        for name in placeholders(template) {
            if !fixed.contains(name) {
                push(
                    pointer.clone(),
                    format!(
                        "`{{{name}}}` is not an argument this response's `when` fixes (by `arguments` or `includes`)"
                    ),
                );
            }
        }
    };
    if let Some(url) = &query.url {
        check(url, format!("{qat}/url"));
    }
    for (i, arg) in query.command.iter().flatten().enumerate() {
        check(arg, format!("{qat}/command/{i}"));
    }
}

/// The argument names whose value a `when` fixes, for filling query templates.
fn fixed_arguments(when: Option<&When>) -> BTreeSet<&str> {
    let mut names = BTreeSet::new();
    if let Some(when) = when {
        if let Some(Value::Object(map)) = &when.arguments {
            names.extend(map.keys().map(String::as_str));
        }
        if let Some(map) = &when.includes {
            names.extend(map.keys().map(String::as_str));
        }
    }
    names
}

/// The values a query's templates are filled with: the arguments its response's `when` fixes.
pub fn template_values(when: Option<&When>) -> Map {
    let mut values = Map::new();
    if let Some(when) = when {
        if let Some(map) = &when.includes {
            values.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if let Some(Value::Object(map)) = &when.arguments {
            values.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    values
}

/// `template` with each `{name}` replaced by `values[name]` (a string as it is, other JSON as
/// JSON text), through `encode` (percent-encoding for a URL, nothing for a command argument).
/// `{{` and `}}` stand for braces. A name without a value stays as written.
pub fn fill_template(template: &str, values: &Map, encode: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('{') {
            if let Some(end) = tail.find('}') {
                let name = &tail[1..end];
                if let Some(value) = values.get(name) {
                    let text = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    out.push_str(&encode(&text));
                    rest = &tail[end + 1..];
                    continue;
                }
            }
        }
        out.push_str(&tail[..1]);
        rest = &tail[1..];
    }
    out.push_str(rest);
    out
}

/// The names between single braces of a template.
fn placeholders(template: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('{') {
            if let Some(end) = tail.find('}') {
                names.push(&tail[1..end]);
                rest = &tail[end + 1..];
                continue;
            }
        }
        rest = &tail[1..];
    }
    names
}

/// An argument name as a JSON pointer (a name starting with `/` already is one).
fn pointer_of(key: &str) -> String {
    if key.starts_with('/') { key.to_owned() } else { format!("/{}", escape_pointer(key)) }
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or(text).trim()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tools(value: Value) -> Vec<Tool> {
        serde_json::from_value(value).expect("tools")
    }

    fn incident() -> Snapshot {
        Snapshot::compile(&tools(json!([
            {"name": "metrics_query", "responses": [
                {"when": {"arguments": {"metric": "db.pool.active", "service": "checkout"}}, "result": {"max": 100}},
                {"when": {"includes": {"metric": "db.pool.wait"}}, "result": "p99 2.1 s"},
                {"when": {"matches": {"service": "^pay", "/window/unit": "^m"}}, "error": "rate limited"},
                {"when": {"includes": {"metric": "cpu"}}, "query": {"url": "http://m/q?m={metric}"}}
            ], "default": {"result": []}},
            {"name": "log_fetcher", "responses": [{"result": ["ERROR pool exhausted"]}]},
            {"name": "ping"}
        ])))
        .expect("compiles")
    }

    #[test]
    fn exact_arguments_compare_values_not_spelling() {
        let s = incident();
        let a = s.serve("metrics_query", &json!({"service": "checkout", "metric": "db.pool.active"}));
        assert_eq!((a.served, a.entry, a.content, a.is_error), (Served::Matched, Some(0), json!({"max": 100}), false));
        let extra = s.serve("metrics_query", &json!({"service": "checkout", "metric": "db.pool.active", "x": 1}));
        assert_eq!((extra.served, extra.content), (Served::Default, json!([])));
    }

    #[test]
    fn subsets_patterns_errors_and_unfrozen_queries() {
        let s = incident();
        let sub = s.serve("metrics_query", &json!({"metric": "db.pool.wait", "window": "5m"}));
        assert_eq!((sub.entry, sub.content), (Some(1), json!("p99 2.1 s")));
        let pat = s.serve("metrics_query", &json!({"service": "payments", "window": {"unit": "min"}}));
        assert_eq!((pat.entry, pat.is_error, pat.content), (Some(2), true, json!("rate limited")));
        let nested_miss = s.serve("metrics_query", &json!({"service": "payments", "window": {"unit": 5}}));
        assert_eq!(nested_miss.served, Served::Default);
        let unfrozen = s.serve("metrics_query", &json!({"metric": "cpu"}));
        assert_eq!((unfrozen.served, unfrozen.entry, unfrozen.is_error), (Served::Unfrozen, Some(3), true));
    }

    #[test]
    fn catch_all_unmatched_and_unknown_tools() {
        let s = incident();
        assert_eq!(s.serve("log_fetcher", &json!("not json {")).content, json!(["ERROR pool exhausted"]));
        let none = s.serve("ping", &json!({}));
        assert_eq!((none.served, none.is_error), (Served::Unmatched, true));
        let unknown = s.serve("heap_dump", &json!({}));
        assert_eq!(unknown.served, Served::UnknownTool);
        assert!(unknown.content.as_str().unwrap().contains("metrics_query, log_fetcher, ping"));
        assert!(none.served.is_outside() && unknown.served.is_outside() && !Served::Default.is_outside());
    }

    #[test]
    fn errors_name_their_place() {
        let errors = Snapshot::compile(&tools(json!([
            {"name": "a", "responses": [
                {"when": {"matches": {"q": "(unclosed"}}, "result": 1},
                {"result": 1, "error": "x"},
                {"when": {}},
                {"when": {"includes": {"m": "cpu"}}, "query": {"url": "http://h/{m}/{host}", "timeout_secs": 0}}
            ], "default": {}}
        ])))
        .unwrap_err();
        let got: Vec<(&str, &str)> = errors.iter().map(|e| (e.pointer.as_str(), e.message.as_str())).collect();
        assert_eq!(got.len(), 7, "{got:#?}");
        assert!(
            got[0].0 == "/tools/0/responses/0/when/matches/q"
                && got[0].1.starts_with("`(unclosed` is not a valid pattern")
        );
        assert_eq!(got[1], ("/tools/0/responses/1", "a response holds `result` or `error`, not both"));
        assert_eq!(got[2].0, "/tools/0/responses/2");
        assert_eq!(got[3].0, "/tools/0/responses/2/when");
        assert_eq!(got[4].0, "/tools/0/responses/3/query/timeout_secs");
        assert_eq!(
            got[5],
            (
                "/tools/0/responses/3/query/url",
                "`{host}` is not an argument this response's `when` fixes (by `arguments` or `includes`)"
            )
        );
        assert_eq!(got[6].0, "/tools/0/default");
    }

    #[test]
    fn a_call_matcher_matches_as_a_response_does_and_points_inside_its_when() {
        let when: When = serde_json::from_value(json!({
            "includes": {"service": "caisse-épicerie"}, "matches": {"requête": "^délai", "/filtre/hôte": "東京"}
        }))
        .unwrap();
        let matcher = CallMatcher::compile(Some(when)).unwrap();
        let call = json!({"service": "caisse-épicerie", "requête": "délai p99", "filtre": {"hôte": "db-東京-1"}});
        assert!(matcher.holds(&call));
        assert!(
            !matcher.holds(&json!({"service": "caisse-épicerie", "requête": "erreurs", "filtre": {"hôte": "東京"}}))
        );
        assert!(CallMatcher::compile(None).unwrap().holds(&json!("not even an object")));
        let bad: When = serde_json::from_value(json!({"matches": {"a/b": "(", "ok": "x"}})).unwrap();
        let errors = CallMatcher::compile(Some(bad)).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].pointer, "/matches/a~1b");
        assert!(errors[0].message.starts_with("`(` is not a valid pattern"), "{}", errors[0].message);
    }

    #[test]
    fn templates_fill_from_fixed_arguments() {
        let when: When = serde_json::from_value(json!({"includes": {"m": "db pool", "n": 3}})).unwrap();
        let values = template_values(Some(&when));
        let url = fill_template("http://h/q?m={m}&n={n}&lit={{x}}&miss={zz}", &values, |s| s.replace(' ', "%20"));
        assert_eq!(url, "http://h/q?m=db%20pool&n=3&lit={x}&miss={zz}");
    }

    #[test]
    fn fallback_forms_read_and_write_back() {
        for text in [r#""empty""#, r#"{"result":[]}"#, r#"{"error":"no such metric"}"#] {
            let fallback: Fallback = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&fallback).unwrap(), text);
        }
    }
}
