//! 64-bit fingerprints of what an agent is asked, exact or normalised, so that duplicates are
//! found by hashes kept in memory, never by the cases' bodies.
//!
//! The walk feeds a BLAKE3 hasher a tag and a length before every value, so that different
//! shapes never feed the same bytes; object keys are taken in sorted order, so that the order a
//! file wrote them in does not matter. In normalised mode every string value is compared as
//! [`crate::text::normalize`] makes it (keys stay as they are: they are structure, not text).

use casebook_model::{MemorySeeds, Seed, Task};
use serde_json::Value;

use crate::text::normalize_into;

struct Hasher {
    inner: blake3::Hasher,
    normalise: bool,
    scratch: String,
}

impl Hasher {
    fn new(normalise: bool) -> Self {
        Self { inner: blake3::Hasher::new(), normalise, scratch: String::new() }
    }

    fn tag(&mut self, tag: u8) {
        self.inner.update(&[tag]);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.inner.update(&(bytes.len() as u64).to_le_bytes());
        self.inner.update(bytes);
    }

    /// A structural name (a field, an object key): never normalised.
    fn name(&mut self, name: &str) {
        self.tag(b'k');
        self.bytes(name.as_bytes());
    }

    fn text(&mut self, text: &str) {
        self.tag(b's');
        if self.normalise {
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            normalize_into(text, &mut scratch);
            self.bytes(scratch.as_bytes());
            self.scratch = scratch;
        } else {
            self.bytes(text.as_bytes());
        }
    }

    fn optional_text(&mut self, text: Option<&str>) {
        match text {
            Some(text) => self.text(text),
            None => self.tag(b'-'),
        }
    }

    fn value(&mut self, value: &Value) {
        match value {
            Value::Null => self.tag(b'n'),
            Value::Bool(b) => self.tag(if *b { b't' } else { b'f' }),
            Value::Number(n) => {
                self.tag(b'd');
                self.bytes(n.to_string().as_bytes());
            }
            Value::String(s) => self.text(s),
            Value::Array(items) => {
                self.tag(b'[');
                self.inner.update(&(items.len() as u64).to_le_bytes());
                items.iter().for_each(|item| self.value(item));
            }
            Value::Object(map) => self.map(map),
        }
    }

    fn map(&mut self, map: &serde_json::Map<String, Value>) {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        self.tag(b'{');
        self.inner.update(&(entries.len() as u64).to_le_bytes());
        for (key, value) in entries {
            self.name(key);
            self.value(value);
        }
    }

    fn optional_map(&mut self, map: Option<&serde_json::Map<String, Value>>) {
        match map {
            Some(map) => self.map(map),
            None => self.tag(b'-'),
        }
    }

    fn seed(&mut self, seed: &Seed) {
        let Seed { source, content, target_agent, metadata, extra } = seed;
        self.text(source);
        self.text(content);
        self.optional_text(target_agent.as_deref());
        self.optional_map(metadata.as_ref());
        self.map(extra);
    }

    fn finish(&self) -> u64 {
        let hash = self.inner.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&hash.as_bytes()[..8]);
        u64::from_le_bytes(first)
    }
}

/// The conversation a task starts: its input and later turns.
fn conversation(h: &mut Hasher, task: &Task) {
    h.name("input");
    h.value(&task.input);
    if let Some(turns) = &task.turns {
        h.name("turns");
        for turn in turns {
            h.name(turn.role.as_str());
            h.text(&turn.content);
        }
    }
}

/// The fingerprint of everything the agent is given (the task half without its session id,
/// which names a conversation rather than saying anything to the agent).
pub fn task(task: &Task, normalise: bool) -> u64 {
    // Every field named, so that a new one cannot be left out unnoticed.
    let Task { input: _, turns: _, context, tools, memory_seeds, session_id: _, agent_args } = task;
    let mut h = Hasher::new(normalise);
    conversation(&mut h, task);
    if let Some(context) = context {
        h.name("context");
        for item in context {
            h.optional_text(item.kind.as_deref());
            h.optional_text(item.source.as_deref());
            h.value(&item.content);
            h.optional_map(item.metadata.as_ref());
        }
    }
    if let Some(tools) = tools {
        h.name("tools");
        for tool in tools {
            h.text(&tool.name);
            h.optional_text(tool.description.as_deref());
            match &tool.parameters {
                Some(parameters) => h.value(parameters),
                None => h.tag(b'-'),
            }
            h.map(&tool.extra);
        }
    }
    match memory_seeds {
        Some(MemorySeeds::Inline(seeds)) => {
            h.name("memory_seeds");
            seeds.iter().for_each(|seed| h.seed(seed));
        }
        Some(MemorySeeds::File { file: _, content }) => {
            // The seeds a file holds, whatever the file is called.
            h.name("memory_seeds");
            h.value(content);
        }
        Some(MemorySeeds::Path(path)) => {
            h.name("memory_seeds_path");
            h.text(path);
        }
        None => {}
    }
    if let Some(args) = agent_args {
        h.name("agent_args");
        h.map(args);
    }
    h.finish()
}

/// The fingerprint of the conversation only (input and turns): what `--against` compares, as
/// another dataset (a few-shot or training set) rarely gives the same world snapshot around the
/// same question.
pub fn question(task: &Task, normalise: bool) -> u64 {
    let mut h = Hasher::new(normalise);
    conversation(&mut h, task);
    h.finish()
}

/// The fingerprint of a JSON value (the expectations half, serialised), exact.
pub fn value(value: &Value) -> u64 {
    let mut h = Hasher::new(false);
    h.value(value);
    h.finish()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn task_of(value: Value) -> Task {
        serde_json::from_value(value).unwrap()
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
}
