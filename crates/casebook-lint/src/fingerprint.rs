//! One pass over a case's task: 64-bit fingerprints of what the agent is asked, exact and
//! normalised, so that duplicates are found by hashes kept in memory, never by the cases'
//! bodies; and the places where the case's answers appear ([`crate::leaks`]).
//!
//! The pass feeds hashers (foldhash's quality hash: the fingerprints never outlive one lint) a tag and a length before every value, so that different
//! shapes never feed the same bytes; object keys are taken in sorted order, so that the order a
//! file wrote them in does not matter. The normalised hasher gets every string value as
//! [`crate::text::normalize`] makes it (keys stay as they are: they are structure, not text);
//! each string is normalised once, for that hasher and for the answers' search.

use std::hash::{BuildHasher, Hasher as _};

use casebook_model::{Expectations, Fallback, MemorySeeds, Outcome, Responses, Seed, Task, Tool};
use serde_json::Value;

use crate::leaks::{Answer, Leak, MAX_PER_CASE, push_token};
use crate::text::normalize_into;

struct Hasher(foldhash::quality::FoldHasher<'static>);

impl Hasher {
    fn new() -> Self {
        Self(foldhash::quality::FixedState::with_seed(0x6361_7365_626f_6f6b).build_hasher())
    }

    fn tag(&mut self, tag: u8) {
        self.0.write_u8(tag);
    }

    fn count(&mut self, n: usize) {
        self.0.write_u64(n as u64);
    }

    fn bytes(&mut self, tag: u8, bytes: &[u8]) {
        self.tag(tag);
        self.count(bytes.len());
        self.0.write(bytes);
    }

    fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// What one pass over a task gives: the fingerprints of its conversation (input and turns, what
/// `--against` compares) and of all of it, exact and normalised, and the answers found in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskFacts {
    pub(crate) question: u64,
    pub(crate) question_normal: u64,
    pub(crate) task: u64,
    pub(crate) task_normal: u64,
    pub(crate) leaks: Vec<Leak>,
}

/// The pass: two hashers fed the same structure, one the strings as written and one normalised;
/// each string is normalised once, and the answers are looked for in that form.
struct Walk<'a> {
    exact: Hasher,
    normal: Hasher,
    scratch: String,
    /// The JSON Pointer of the value being walked.
    pointer: String,
    answers: &'a [Answer],
    /// Whether the normalised hasher and the search run (not for the expectations).
    normalise: bool,
    /// The message being walked, and the conversation's last (see [`Answer::sees`]).
    message: Option<usize>,
    last: usize,
    /// Whether the value walked is the task's choices (where an option's text is no leak).
    in_choices: bool,
    leaks: Vec<Leak>,
}

impl Walk<'_> {
    fn tag(&mut self, tag: u8) {
        self.exact.tag(tag);
        self.normal.tag(tag);
    }

    fn count(&mut self, n: usize) {
        self.exact.count(n);
        self.normal.count(n);
    }

    /// A structural name (a field, an object key): never normalised.
    fn name(&mut self, name: &str) {
        self.exact.bytes(b'k', name.as_bytes());
        self.normal.bytes(b'k', name.as_bytes());
    }

    fn at(&mut self, pointer: &str) {
        self.pointer.clear();
        self.pointer.push_str(pointer);
    }

    fn text(&mut self, text: &str) {
        self.exact.bytes(b's', text.as_bytes());
        if !self.normalise {
            return;
        }
        self.scratch.clear();
        normalize_into(text, &mut self.scratch);
        self.normal.bytes(b's', self.scratch.as_bytes());
        // Answers that are an option's text are looked for outside the lines listing options.
        let outside = if self.answers.iter().any(|a| a.option) {
            crate::leaks::without_options(text).map(|rest| {
                let mut normal = String::new();
                normalize_into(&rest, &mut normal);
                normal
            })
        } else {
            None
        };
        self.search(outside.as_deref());
    }

    /// Looks for the answers in `scratch` (those that are an option's text in `outside`, when the
    /// text lists options), found at `pointer`.
    fn search(&mut self, outside: Option<&str>) {
        for answer in self.answers {
            let within = match (answer.option, outside) {
                (true, _) if self.in_choices => continue,
                (true, Some(outside)) => outside,
                _ => self.scratch.as_str(),
            };
            if self.leaks.len() <= MAX_PER_CASE && answer.sees(self.message, self.last) && answer.is_in(within) {
                self.leaks.push(answer.leak(&self.pointer));
            }
        }
    }

    fn optional_text(&mut self, field: &str, text: Option<&str>) {
        match text {
            Some(text) => {
                let len = self.pointer.len();
                push_token(&mut self.pointer, field);
                self.text(text);
                self.pointer.truncate(len);
            }
            None => self.tag(b'-'),
        }
    }

    /// A JSON value; with `keys`, object keys are looked for answers too (a tool's parameter can
    /// be named after the answer).
    fn value(&mut self, value: &Value, keys: bool) {
        match value {
            Value::Null => self.tag(b'n'),
            Value::Bool(b) => self.tag(if *b { b't' } else { b'f' }),
            Value::Number(n) => {
                let text = n.to_string();
                self.exact.bytes(b'd', text.as_bytes());
                self.normal.bytes(b'd', text.as_bytes());
            }
            Value::String(s) => self.text(s),
            Value::Array(items) => {
                self.tag(b'[');
                self.count(items.len());
                for (i, item) in items.iter().enumerate() {
                    let len = self.pointer.len();
                    push_token(&mut self.pointer, &i.to_string());
                    self.value(item, keys);
                    self.pointer.truncate(len);
                }
            }
            Value::Object(map) => self.map(map, keys),
        }
    }

    fn map(&mut self, map: &serde_json::Map<String, Value>, keys: bool) {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        self.tag(b'{');
        self.count(entries.len());
        for (key, value) in entries {
            let len = self.pointer.len();
            push_token(&mut self.pointer, key);
            self.name(key);
            if keys && self.normalise {
                self.scratch.clear();
                normalize_into(key, &mut self.scratch);
                self.search(None);
            }
            self.value(value, keys);
            self.pointer.truncate(len);
        }
    }

    fn optional_map(&mut self, field: &str, map: Option<&serde_json::Map<String, Value>>) {
        match map {
            Some(map) => {
                let len = self.pointer.len();
                push_token(&mut self.pointer, field);
                self.map(map, false);
                self.pointer.truncate(len);
            }
            None => self.tag(b'-'),
        }
    }

    /// A tool's recorded answers and default. Their results and errors are what the agent is
    /// given when it calls the tool, so answers are looked for there (a leak it can fetch);
    /// the conditions and queries are only fingerprinted.
    fn snapshot(&mut self, i: usize, tool: &Tool) {
        match &tool.responses {
            None => self.tag(b'-'),
            Some(Responses::Path(path)) => {
                self.name("responses_path");
                self.exact.bytes(b's', path.as_bytes());
                self.normal.bytes(b's', path.as_bytes());
            }
            Some(Responses::Inline(list)) => {
                self.name("responses");
                self.count(list.len());
                for (r, response) in list.iter().enumerate() {
                    let value = serde_json::to_value(response).unwrap_or(Value::Null);
                    self.response(&format!("/tools/{i}/responses/{r}"), &value);
                }
            }
            Some(Responses::File { file: _, content }) => {
                // The responses a file holds, whatever the file is called.
                self.name("responses");
                match content {
                    Value::Array(list) => {
                        self.count(list.len());
                        for (r, response) in list.iter().enumerate() {
                            self.response(&format!("/tools/{i}/responses/content/{r}"), response);
                        }
                    }
                    other => self.value(other, false),
                }
            }
        }
        match &tool.default {
            None => self.tag(b'-'),
            Some(Fallback::Keyword(_)) => self.name("default_empty"),
            Some(Fallback::Answer { result, error }) => {
                self.name("default");
                self.at(&format!("/tools/{i}/default"));
                self.answered(result.as_ref(), error.as_deref());
            }
        }
    }

    /// One recorded response (as JSON) at `pointer`.
    fn response(&mut self, pointer: &str, response: &Value) {
        self.at(pointer);
        let Value::Object(map) = response else { return self.value(response, false) };
        let hidden: serde_json::Map<String, Value> = map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "result" | "error"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let answers = std::mem::take(&mut self.answers);
        self.map(&hidden, false);
        self.answers = answers;
        self.at(pointer);
        self.answered(map.get("result"), map.get("error").and_then(Value::as_str));
    }

    /// A result and an error the agent is given, at the current pointer.
    fn answered(&mut self, result: Option<&Value>, error: Option<&str>) {
        match result {
            Some(result) => {
                let len = self.pointer.len();
                push_token(&mut self.pointer, "result");
                self.name("result");
                self.value(result, false);
                self.pointer.truncate(len);
            }
            None => self.tag(b'-'),
        }
        self.optional_text("error", error);
    }

    fn seed(&mut self, seed: &Seed) {
        let Seed { source, content, target_agent, metadata, extra } = seed;
        self.optional_text("source", Some(source));
        self.optional_text("content", Some(content));
        self.optional_text("target_agent", target_agent.as_deref());
        self.optional_map("metadata", metadata.as_ref());
        self.map(extra, false);
    }
}

/// Walks `task` once: its fingerprints, and where `answers` are in it (at most
/// [`MAX_PER_CASE`] + 1 places: one more says there are more). The session id is left out: it
/// names a conversation rather than saying anything to the agent.
pub(crate) fn walk(task: &Task, answers: &[Answer]) -> TaskFacts {
    // Every field named, so that a new one cannot be left out unnoticed.
    let Task { input, turns, context, tools, memory_seeds, session_id: _, agent_args } = task;
    let mut w = Walk {
        exact: Hasher::new(),
        normal: Hasher::new(),
        scratch: String::new(),
        pointer: String::new(),
        answers,
        normalise: true,
        message: Some(0),
        last: turns.as_ref().map_or(0, Vec::len),
        in_choices: false,
        leaks: Vec::new(),
    };
    w.name("input");
    w.at("/input");
    w.value(input, false);
    if let Some(turns) = turns {
        w.name("turns");
        for (j, turn) in turns.iter().enumerate() {
            w.message = Some(j + 1);
            w.name(turn.role.as_str());
            w.at(&format!("/turns/{j}/content"));
            w.text(&turn.content);
        }
    }
    let (question, question_normal) = (w.exact.finish(), w.normal.finish());
    w.message = None;
    if let Some(context) = context {
        w.name("context");
        for (i, item) in context.iter().enumerate() {
            w.at(&format!("/context/{i}"));
            w.optional_text("type", item.kind.as_deref());
            w.optional_text("source", item.source.as_deref());
            w.at(&format!("/context/{i}/content"));
            w.in_choices = casebook_model::choices::is_choices(item);
            w.value(&item.content, false);
            w.in_choices = false;
            w.at(&format!("/context/{i}"));
            w.optional_map("metadata", item.metadata.as_ref());
        }
    }
    if let Some(tools) = tools {
        w.name("tools");
        for (i, tool) in tools.iter().enumerate() {
            w.at(&format!("/tools/{i}"));
            w.optional_text("name", Some(&tool.name));
            w.optional_text("description", tool.description.as_deref());
            match &tool.parameters {
                Some(parameters) => {
                    w.at(&format!("/tools/{i}/parameters"));
                    w.value(parameters, true);
                }
                None => w.tag(b'-'),
            }
            w.at(&format!("/tools/{i}"));
            w.map(&tool.extra, false);
            w.snapshot(i, tool);
        }
    }
    match memory_seeds {
        Some(MemorySeeds::Inline(seeds)) => {
            w.name("memory_seeds");
            for (i, seed) in seeds.iter().enumerate() {
                w.at(&format!("/memory_seeds/{i}"));
                w.seed(seed);
            }
        }
        Some(MemorySeeds::File { file: _, content }) => {
            // The seeds a file holds, whatever the file is called.
            w.name("memory_seeds");
            w.at("/memory_seeds/content");
            w.value(content, false);
        }
        Some(MemorySeeds::Path(path)) => {
            w.name("memory_seeds_path");
            w.exact.bytes(b's', path.as_bytes());
            w.normal.bytes(b's', path.as_bytes());
        }
        None => {}
    }
    if let Some(args) = agent_args {
        w.name("agent_args");
        w.at("/agent_args");
        w.map(args, false);
    }
    TaskFacts { question, question_normal, task: w.exact.finish(), task_normal: w.normal.finish(), leaks: w.leaks }
}

/// The fingerprint of the expectations half, exact; `None` when it is empty.
pub(crate) fn expected(expected: &Expectations) -> Option<u64> {
    if expected.is_empty() {
        return None;
    }
    let Expectations {
        output,
        per_turn,
        outcomes,
        acceptable,
        rubric,
        rubric_path,
        rubric_vars,
        trajectory,
        tool_calls,
        governance,
        extra,
    } = expected;
    let mut w = Walk {
        exact: Hasher::new(),
        normal: Hasher::new(),
        scratch: String::new(),
        pointer: String::new(),
        answers: &[],
        normalise: false,
        message: None,
        last: 0,
        in_choices: false,
        leaks: Vec::new(),
    };
    let values = |w: &mut Walk<'_>, name: &str, value: Option<&Value>| {
        w.name(name);
        match value {
            Some(value) => w.value(value, false),
            None => w.tag(b'-'),
        }
    };
    values(&mut w, "output", output.as_ref());
    values(&mut w, "trajectory", trajectory.as_ref());
    values(&mut w, "tool_calls", tool_calls.as_ref());
    values(&mut w, "governance", governance.as_ref());
    for (name, list) in [("per_turn", per_turn), ("acceptable", acceptable)] {
        w.name(name);
        match list {
            Some(list) => {
                w.count(list.len());
                list.iter().for_each(|value| w.value(value, false));
            }
            None => w.tag(b'-'),
        }
    }
    w.name("outcomes");
    for outcome in outcomes.iter().flatten() {
        match outcome {
            Outcome::Text(text) => w.optional_text("text", Some(text)),
            Outcome::Detailed { outcome, role } => {
                w.optional_text("outcome", Some(outcome));
                w.name(&format!("{role:?}"));
            }
        }
    }
    w.optional_text("rubric", rubric.as_deref());
    w.optional_text("rubric_path", rubric_path.as_deref());
    w.optional_map("rubric_vars", rubric_vars.as_ref());
    w.map(extra, false);
    Some(w.exact.finish())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn task_of(value: Value) -> Task {
        serde_json::from_value(value).unwrap()
    }

    fn task(task: &Task, normalise: bool) -> u64 {
        let facts = walk(task, &[]);
        if normalise { facts.task_normal } else { facts.task }
    }

    fn question(task: &Task, normalise: bool) -> u64 {
        let facts = walk(task, &[]);
        if normalise { facts.question_normal } else { facts.question }
    }

    #[test]
    fn key_order_and_session_do_not_count_content_does() {
        let a = task_of(json!({"input": {"q": "x", "lang": "en"}, "session_id": "s1"}));
        let b = task_of(json!({"input": {"lang": "en", "q": "x"}, "session_id": "s2"}));
        assert_eq!(task(&a, false), task(&b, false));
        let c = task_of(json!({"input": {"lang": "en", "q": "y"}}));
        assert_ne!(task(&a, false), task(&c, false));
        // A different world snapshot around the same question is another task, the same question.
        let d = task_of(json!({"input": {"q": "x", "lang": "en"}, "context": [{"content": "log"}]}));
        assert_ne!(task(&a, false), task(&d, false));
        assert_eq!(question(&a, false), question(&d, false));
    }

    #[test]
    fn normalised_fingerprints_ignore_case_and_spacing_only() {
        let a = task_of(json!({"input": "What is  2+2?\n"}));
        let b = task_of(json!({"input": "what is 2+2?"}));
        assert_ne!(task(&a, false), task(&b, false));
        assert_eq!(task(&a, true), task(&b, true));
        let c = task_of(json!({"input": "what is 2+3?"}));
        assert_ne!(task(&b, true), task(&c, true));
        // Shapes never collide: a string and a one-item list of it differ.
        let d = task_of(json!({"input": ["what is 2+2?"]}));
        assert_ne!(task(&b, true), task(&d, true));
        // A number and the string of it differ too.
        assert_ne!(task(&task_of(json!({"input": 4})), false), task(&task_of(json!({"input": "4"})), false));
    }

    #[test]
    fn expectations_differ_by_any_field() {
        let e = |value: Value| serde_json::from_value::<Expectations>(value).unwrap();
        assert_eq!(expected(&e(json!({}))), None);
        let a = expected(&e(json!({"output": "x", "rubric_vars": {"a": 1, "b": 2}})));
        assert_eq!(a, expected(&e(json!({"rubric_vars": {"b": 2, "a": 1}, "output": "x"}))));
        assert_ne!(a, expected(&e(json!({"output": "X", "rubric_vars": {"a": 1, "b": 2}}))));
        assert_ne!(expected(&e(json!({"output": "x"}))), expected(&e(json!({"acceptable": ["x"]}))));
        assert_ne!(
            expected(&e(json!({"outcomes": [{"outcome": "o", "role": "gate"}]}))),
            expected(&e(json!({"outcomes": [{"outcome": "o", "role": "observe"}]})))
        );
    }
}
