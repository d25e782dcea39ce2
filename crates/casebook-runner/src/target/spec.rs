//! What a scenario's `target:` says (SPEC §8): the string forms, the object form with options, the
//! API key looked up by the caller, and the secret-free description that goes into run hashes.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use reqwest::Url;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use casebook_model::Map;

use crate::record::Failure;

/// The forms a target string may take, for error messages.
const FORMS: &str = "`http://…` or `https://…` (casebook's agent protocol), `openai+http://…/v1?model=NAME` or \
                     `openai+https://…/v1?model=NAME` (a chat-completions endpoint), `cmd:PROGRAM ARGS…` (a \
                     subprocess speaking JSON lines), `builtin:echo` or `builtin:scripted`";

/// How to reach an agent: parsed from a string such as `https://agent.example/turn` or
/// `cmd:python3 agent.py`, or deserialized from a scenario's `target:` (that string, or an object
/// with `url`, `program` or `builtin` plus options).
///
/// The API key is never part of the spec as written: `api_key_env` names a variable, and the
/// caller (the CLI) looks it up with [`TargetSpec::resolve_env`], because libraries do not read
/// the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetSpec {
    pub kind: TargetKind,
    /// Extra HTTP headers sent with every request (`http` and `openai` targets).
    pub headers: BTreeMap<String, String>,
    /// The environment variable that holds the API key, sent as `Authorization: Bearer …`.
    pub api_key_env: Option<String>,
    /// Per-call timeout; overrides the [`CallPolicy`](super::CallPolicy) default.
    pub timeout: Option<Duration>,
    /// Retries after the first attempt; overrides the [`CallPolicy`](super::CallPolicy) default.
    pub retries: Option<u32>,
    api_key: KeyState,
}

/// What became of `api_key_env`.
#[derive(Debug, Clone, PartialEq)]
enum KeyState {
    Unresolved,
    Missing,
    Resolved(ApiKey),
}

/// The kind of agent and where it is.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetKind {
    /// casebook's JSON agent protocol: each turn is a POST of an [`AgentRequest`](crate::protocol::AgentRequest).
    Http { url: Url },
    /// A chat-completions endpoint; `base` is the API root (`…/v1`), requests go to
    /// `{base}/chat/completions`.
    OpenAi { base: Url, model: String },
    /// A subprocess speaking JSON lines on stdin and stdout.
    Command { program: String, args: Vec<String> },
    /// Replies with the content of the last message.
    Echo,
    /// Replies from a script given in the spec (never from the case's expectations).
    Scripted { replies: Script },
}

/// The replies of a `builtin:scripted` agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Script {
    /// Turn `i` gets `replies[i % len]`.
    InTurn(Vec<Value>),
    /// The reply to each input text (the last message's content).
    ByInput(Map),
}

/// A target string or object that casebook cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TargetSpecError(String);

impl From<TargetSpecError> for Failure {
    fn from(error: TargetSpecError) -> Self {
        Failure::new("config", error.0)
    }
}

/// A resolved API key; its `Debug` does not show it.
#[derive(Clone, PartialEq)]
struct ApiKey(String);

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl TargetSpec {
    /// A spec of `kind` with no options.
    pub fn new(kind: TargetKind) -> Self {
        Self {
            kind,
            headers: BTreeMap::new(),
            api_key_env: None,
            timeout: None,
            retries: None,
            api_key: KeyState::Unresolved,
        }
    }

    /// Looks up the variable named by `api_key_env` with `get` (the CLI passes `std::env::var`).
    /// Without `api_key_env` this does nothing; an unset or empty variable makes
    /// [`TargetSpec::connect`] fail with a message that names it.
    pub fn resolve_env(&mut self, get: impl Fn(&str) -> Option<String>) {
        if let Some(name) = &self.api_key_env {
            self.api_key = match get(name) {
                Some(key) if !key.is_empty() => KeyState::Resolved(ApiKey(key)),
                _ => KeyState::Missing,
            };
        }
    }

    /// Whether an API key has been resolved.
    pub fn has_api_key(&self) -> bool {
        matches!(self.api_key, KeyState::Resolved(_))
    }

    /// The key to send, if any; an error when `api_key_env` names a variable that could not be had.
    pub(crate) fn api_key(&self) -> Result<Option<&str>, TargetSpecError> {
        match (&self.api_key_env, &self.api_key) {
            (None, _) => Ok(None),
            (Some(_), KeyState::Resolved(key)) => Ok(Some(key.0.as_str())),
            (Some(name), KeyState::Missing) => {
                Err(TargetSpecError(format!("the target's `api_key_env` names `{name}`, which is not set")))
            }
            (Some(name), KeyState::Unresolved) => Err(TargetSpecError(format!(
                "the target's `api_key_env` names `{name}`, but nothing looked it up (`TargetSpec::resolve_env`)"
            ))),
        }
    }

    /// The target as JSON without secrets: what goes into run hashes and reports.
    ///
    /// It says what the agent is (kind, address, model, headers, script); how it is called
    /// (timeout, retries, which variable holds the key) is left out, so changing those does not
    /// invalidate cached runs. Passwords in URLs, secret-looking query parameters and header
    /// values are replaced by `redacted`; the API key never appears.
    pub fn describe(&self) -> Value {
        let mut out = match &self.kind {
            TargetKind::Http { url } => json!({ "kind": "http", "url": redact_url(url) }),
            TargetKind::OpenAi { base, model } => json!({ "kind": "openai", "url": redact_url(base), "model": model }),
            TargetKind::Command { program, args } => json!({ "kind": "command", "program": program, "args": args }),
            TargetKind::Echo => json!({ "kind": "echo" }),
            TargetKind::Scripted { replies } => json!({ "kind": "scripted", "replies": replies }),
        };
        if !self.headers.is_empty() {
            let headers: Map = self
                .headers
                .iter()
                .map(|(name, value)| {
                    let shown = if is_secret_name(name) { REDACTED } else { value.as_str() };
                    (name.clone(), Value::String(shown.to_owned()))
                })
                .collect();
            if let Value::Object(map) = &mut out {
                map.insert("headers".to_owned(), Value::Object(headers));
            }
        }
        out
    }

    /// A short name for messages: the redacted URL, the program, or the builtin.
    pub fn display_name(&self) -> String {
        match &self.kind {
            TargetKind::Http { url } => redact_url(url),
            TargetKind::OpenAi { base, .. } => redact_url(base),
            TargetKind::Command { program, .. } => format!("`{program}`"),
            TargetKind::Echo => "builtin:echo".to_owned(),
            TargetKind::Scripted { .. } => "builtin:scripted".to_owned(),
        }
    }

    fn from_object(object: TargetObject) -> Result<Self, TargetSpecError> {
        let TargetObject { url, program, args, builtin, headers, model, api_key_env, timeout_secs, retries, replies } =
            object;
        let has_args = args.is_some();
        let mut kind = match (url, program, builtin) {
            (Some(url), None, None) => parse_kind(&url)?,
            (None, Some(program), None) => match args {
                Some(args) => TargetKind::Command { program, args },
                None => parse_command(&program)?,
            },
            (None, None, Some(builtin)) => parse_kind(&format!("builtin:{builtin}"))?,
            (None, None, None) => {
                return Err(TargetSpecError(format!("a target object needs `url`, `program` or `builtin`: {FORMS}")));
            }
            _ => return Err(TargetSpecError("a target object takes one of `url`, `program` and `builtin`".to_owned())),
        };
        if has_args && !matches!(kind, TargetKind::Command { .. }) {
            return Err(TargetSpecError("`args` applies to `program` targets only".to_owned()));
        }
        if let Some(given) = model {
            match &mut kind {
                TargetKind::OpenAi { model, .. } if model.is_empty() || *model == given => *model = given,
                TargetKind::OpenAi { model, .. } => {
                    return Err(TargetSpecError(format!(
                        "the target gives two models: `{model}` in its URL and `{given}` in `model`"
                    )));
                }
                _ => return Err(TargetSpecError("`model` applies to `openai+http(s)://` targets only".to_owned())),
            }
        }
        if let Some(script) = replies {
            match &mut kind {
                TargetKind::Scripted { replies } => *replies = script,
                _ => return Err(TargetSpecError("`replies` applies to `builtin:scripted` targets only".to_owned())),
            }
        }
        if !headers.is_empty() && !matches!(kind, TargetKind::Http { .. } | TargetKind::OpenAi { .. }) {
            return Err(TargetSpecError("`headers` apply to `http` and `openai` targets only".to_owned()));
        }
        if api_key_env.is_some() && !matches!(kind, TargetKind::Http { .. } | TargetKind::OpenAi { .. }) {
            return Err(TargetSpecError("`api_key_env` applies to `http` and `openai` targets only".to_owned()));
        }
        let timeout = match timeout_secs {
            None => None,
            Some(secs) => match Duration::try_from_secs_f64(secs) {
                Ok(timeout) if !timeout.is_zero() => Some(timeout),
                _ => return Err(TargetSpecError(format!("`timeout_secs` must be a positive number, not {secs}"))),
            },
        };
        let spec = Self { kind, headers, api_key_env, timeout, retries, api_key: KeyState::Unresolved };
        spec.check()?;
        Ok(spec)
    }

    /// What a complete spec needs that a partial one may lack.
    fn check(&self) -> Result<(), TargetSpecError> {
        match &self.kind {
            TargetKind::OpenAi { model, .. } if model.is_empty() => Err(TargetSpecError(
                "an `openai` target needs a model: `openai+https://…/v1?model=NAME`, or `model:` beside `url:`"
                    .to_owned(),
            )),
            TargetKind::Scripted { replies } if replies.is_empty() => Err(TargetSpecError(
                "`builtin:scripted` needs replies: `{url: \"builtin:scripted\", replies: [\"first\", \"second\"]}` \
                 or a map from input to reply"
                    .to_owned(),
            )),
            _ => {
                for (name, value) in &self.headers {
                    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                        return Err(TargetSpecError(format!("`{name}` is not a valid HTTP header name")));
                    }
                    if reqwest::header::HeaderValue::from_str(value).is_err() {
                        return Err(TargetSpecError(format!("the value of header `{name}` is not valid in HTTP")));
                    }
                }
                Ok(())
            }
        }
    }
}

impl Script {
    fn is_empty(&self) -> bool {
        match self {
            Script::InTurn(replies) => replies.is_empty(),
            Script::ByInput(replies) => replies.is_empty(),
        }
    }
}

impl FromStr for TargetSpec {
    type Err = TargetSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let spec = Self::new(parse_kind(text)?);
        spec.check()?;
        Ok(spec)
    }
}

/// Parses a string form; an `openai` model and a script may still be missing.
fn parse_kind(text: &str) -> Result<TargetKind, TargetSpecError> {
    let text = text.trim();
    let bad = |why: &str| TargetSpecError(format!("`{text}` is not a target ({why}); a target is {FORMS}"));
    if let Some(command) = text.strip_prefix("cmd:") {
        return parse_command(command);
    }
    if let Some(name) = text.strip_prefix("builtin:") {
        return match name {
            "echo" => Ok(TargetKind::Echo),
            "scripted" => Ok(TargetKind::Scripted { replies: Script::InTurn(Vec::new()) }),
            _ => Err(bad("the built-in agents are `echo` and `scripted`")),
        };
    }
    let (openai, address) = match text.strip_prefix("openai+") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut url = Url::parse(address).map_err(|error| bad(&error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(&format!("unknown scheme `{}`", url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if !openai {
        return Ok(TargetKind::Http { url });
    }
    let mut model = String::new();
    let mut rest = Vec::new();
    for (key, value) in url.query_pairs() {
        if key == "model" {
            model = value.into_owned();
        } else {
            rest.push((key.into_owned(), value.into_owned()));
        }
    }
    if rest.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(rest);
    }
    Ok(TargetKind::OpenAi { base: url, model })
}

/// Splits `PROGRAM ARGS…` on whitespace; single and double quotes group words, a backslash
/// outside single quotes takes the next character as it is.
fn parse_command(text: &str) -> Result<TargetKind, TargetSpecError> {
    let mut words: Vec<String> = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let current = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => current.push(c),
                        None => return Err(TargetSpecError(format!("`cmd:{text}` has an unclosed `'`"))),
                    }
                }
            }
            '"' => {
                let current = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => current.push(c),
                            None => return Err(TargetSpecError(format!("`cmd:{text}` has an unclosed `\"`"))),
                        },
                        Some(c) => current.push(c),
                        None => return Err(TargetSpecError(format!("`cmd:{text}` has an unclosed `\"`"))),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err(TargetSpecError(format!("`cmd:{text}` ends with a lone `\\`"))),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    let mut words = words.into_iter();
    match words.next() {
        Some(program) => Ok(TargetKind::Command { program, args: words.collect() }),
        None => Err(TargetSpecError("`cmd:` needs a program: `cmd:python3 agent.py`".to_owned())),
    }
}

/// A described target ([`TargetSpec::describe`], or [`recorded`]) as a scenario would write it:
/// the URL (`openai+URL?model=NAME` for a chat-completions endpoint), `cmd:PROGRAM ARGS…`,
/// `builtin:echo` or `builtin:scripted`; with ` (no MCP)` when its runs were not served the
/// cases' tools. For messages; secrets were redacted when it was described.
pub fn described_label(described: &Value) -> String {
    let text = |key: &str| described.get(key).and_then(Value::as_str).unwrap_or_default();
    let label = match text("kind") {
        "http" => text("url").to_owned(),
        "openai" => format!("openai+{}?model={}", text("url"), text("model")),
        "command" => {
            let args = described.get("args").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let words: Vec<&str> =
                std::iter::once(text("program")).chain(args.iter().filter_map(Value::as_str)).collect();
            format!("cmd:{}", words.join(" "))
        }
        "echo" => "builtin:echo".to_owned(),
        "scripted" => "builtin:scripted".to_owned(),
        _ => described.to_string(),
    };
    if described.get("mcp") == Some(&Value::Bool(false)) { format!("{label} (no MCP)") } else { label }
}

/// What a run records of a scenario's target (`RunMeta::targets`): its description
/// ([`TargetSpec::describe`], with what the caller added, such as `mcp`) without headers, which
/// may say who calls rather than what is called, and whose values a description only redacts
/// when their names look secret.
pub fn recorded(described: &Value) -> Value {
    let mut kept = described.clone();
    if let Some(fields) = kept.as_object_mut() {
        fields.remove("headers");
    }
    kept
}

const REDACTED: &str = "redacted";

/// Whether a header or query parameter name suggests a secret value.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "password", "cookie", "signature", "credential"]
        .iter()
        .any(|word| name.contains(word))
}

/// The URL with its password and secret-looking query values replaced.
pub(crate) fn redact_url(url: &Url) -> String {
    let mut url = url.clone();
    if url.password().is_some() {
        // Cannot fail for http(s) URLs with a host, which are the only ones parsed here.
        let _ = url.set_password(Some(REDACTED));
    }
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(key, value)| {
                let value = if is_secret_name(&key) { REDACTED.to_owned() } else { value.into_owned() };
                (key.into_owned(), value)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// The object form of a target.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetObject {
    url: Option<String>,
    program: Option<String>,
    args: Option<Vec<String>>,
    builtin: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    model: Option<String>,
    api_key_env: Option<String>,
    timeout_secs: Option<f64>,
    retries: Option<u32>,
    replies: Option<Script>,
}

impl<'de> Deserialize<'de> for TargetSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpecVisitor;

        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = TargetSpec;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a target: {FORMS}, or an object with `url`, `program` or `builtin` and options")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<TargetSpec, E> {
                text.parse().map_err(E::custom)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TargetSpec, A::Error> {
                let object = TargetObject::deserialize(de::value::MapAccessDeserializer::new(map))?;
                TargetSpec::from_object(object).map_err(de::Error::custom)
            }
        }

        deserializer.deserialize_any(SpecVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> TargetSpec {
        text.parse().unwrap()
    }

    #[test]
    fn string_forms() {
        assert_eq!(
            parse("http://127.0.0.1:8080/turn").describe(),
            json!({"kind": "http", "url": "http://127.0.0.1:8080/turn"})
        );
        assert_eq!(
            parse("openai+https://api.example/v1?model=gpt-x").describe(),
            json!({"kind": "openai", "url": "https://api.example/v1", "model": "gpt-x"})
        );
        assert_eq!(
            parse("cmd:python3 -c 'print(\"a b\")' --flag \"x y\" a\\ b").kind,
            TargetKind::Command {
                program: "python3".into(),
                args: vec!["-c".into(), "print(\"a b\")".into(), "--flag".into(), "x y".into(), "a b".into()]
            }
        );
        assert_eq!(parse("builtin:echo").kind, TargetKind::Echo);
    }

    #[test]
    fn bad_strings_say_what_forms_exist() {
        for text in ["ftp://x", "agent.example", "builtin:parrot", "http://"] {
            let error = text.parse::<TargetSpec>().unwrap_err().to_string();
            assert!(error.contains(&format!("`{text}` is not a target")), "{error}");
            assert!(error.contains("`cmd:PROGRAM ARGS…`") && error.contains("`builtin:echo`"), "{error}");
        }
        let error = "cmd:python3 'oops".parse::<TargetSpec>().unwrap_err().to_string();
        assert_eq!(error, "`cmd:python3 'oops` has an unclosed `'`");
        let error = "openai+https://api.example/v1".parse::<TargetSpec>().unwrap_err().to_string();
        assert!(error.contains("needs a model"), "{error}");
        let error = "builtin:scripted".parse::<TargetSpec>().unwrap_err().to_string();
        assert!(error.contains("needs replies"), "{error}");
    }

    #[test]
    fn object_form_with_options() {
        let spec: TargetSpec = serde_json::from_value(json!({
            "url": "openai+https://api.example/v1",
            "model": "m",
            "headers": {"X-Team": "evals", "X-Api-Key": "hunter2"},
            "api_key_env": "AGENT_KEY",
            "timeout_secs": 2.5,
            "retries": 4,
        }))
        .unwrap();
        assert_eq!(spec.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(spec.retries, Some(4));
        assert_eq!(
            spec.describe(),
            json!({"kind": "openai", "url": "https://api.example/v1", "model": "m",
                   "headers": {"X-Api-Key": "redacted", "X-Team": "evals"}})
        );

        let spec: TargetSpec =
            serde_json::from_value(json!({"program": "python3", "args": ["agent.py", "--fast mode"]})).unwrap();
        assert_eq!(
            spec.kind,
            TargetKind::Command { program: "python3".into(), args: vec!["agent.py".into(), "--fast mode".into()] }
        );
        let spec: TargetSpec =
            serde_json::from_value(json!({"builtin": "scripted", "replies": {"hi": "hello"}})).unwrap();
        assert!(matches!(spec.kind, TargetKind::Scripted { replies: Script::ByInput(_) }));
        let spec: TargetSpec = serde_json::from_value(json!("builtin:echo")).unwrap();
        assert_eq!(spec.kind, TargetKind::Echo);
    }

    #[test]
    fn object_form_errors() {
        let error = |value: Value| serde_json::from_value::<TargetSpec>(value).unwrap_err().to_string();
        assert!(error(json!({"url": "builtin:echo", "model": "m"})).contains("`model` applies to"));
        assert!(error(json!({"url": "http://a", "program": "b"})).contains("one of `url`, `program`"));
        assert!(error(json!({"url": "http://a", "timeout": 3})).contains("unknown field `timeout`"));
        assert!(error(json!({"url": "http://a", "timeout_secs": 0})).contains("positive"));
        assert!(error(json!({"url": "openai+http://a/v1?model=x", "model": "y"})).contains("two models"));
        assert!(error(json!({"url": "http://a", "headers": {"bad name": "v"}})).contains("header name"));
        assert!(error(json!(7)).contains("a target: `http://…`"));
    }

    #[test]
    fn api_key_is_looked_up_by_the_caller_and_never_described() {
        let mut spec: TargetSpec = serde_json::from_value(
            json!({"url": "https://u:pw@agent.example/?token=abc&mode=fast", "api_key_env": "K"}),
        )
        .unwrap();
        assert!(spec.api_key().unwrap_err().to_string().contains("nothing looked it up"));
        spec.resolve_env(|_| None);
        assert_eq!(spec.api_key().unwrap_err().to_string(), "the target's `api_key_env` names `K`, which is not set");
        spec.resolve_env(|name| (name == "K").then(|| "sk-secret".to_owned()));
        assert_eq!(spec.api_key(), Ok(Some("sk-secret")));
        assert!(spec.has_api_key());
        let described = spec.describe().to_string();
        assert!(!described.contains("sk-secret") && !described.contains("pw") && !described.contains("abc"));
        assert!(described.contains("mode=fast"), "{described}");
        assert!(!format!("{spec:?}").contains("sk-secret"));
    }
}
