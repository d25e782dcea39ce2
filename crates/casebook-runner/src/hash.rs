//! The run hash (SPEC §8): the content id of everything that decides what an agent is asked in a
//! run — the target's configuration (without secrets), the effective memory seeds, the task half
//! of the case without its session id, the case id and the run index:
//!
//! `content_id(Run, {"case_id", "run", "seeds", "target", "task"})`
//!
//! Graders are not part of it: re-grading reuses the stored output. A golden vector in
//! `casebook-canon/tests/vectors.json` pins the definition. An experiment hashes many runs of
//! each case, so the canonical JSON of a case's parts ([`CaseKey`]) and of a target is made once
//! and each run's canonical text is put together from them (the keys are in canonical order).

use casebook_canon::{Kind, canonical_json_text};
use casebook_model::{MemorySeeds, Seed, Task};
use serde_json::Value;

use crate::record::Failure;

/// The canonical JSON of what a case brings to its runs' hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseKey {
    case_id: String,
    seeds: String,
    task: String,
}

fn canonical<T: serde::Serialize>(value: &T) -> Result<String, Failure> {
    let text = serde_json::to_string(value).map_err(|e| Failure::new("config", e.to_string()))?;
    canonical_json_text(&text).map_err(|e| Failure::new("config", e.to_string()))
}

impl CaseKey {
    pub fn new(seeds: &[Seed], task: &Task, case_id: &str) -> Result<CaseKey, Failure> {
        Ok(CaseKey { case_id: canonical(&case_id)?, seeds: canonical(&seeds)?, task: canonical(&HashedTask(task))? })
    }
}

/// A task as its runs' hashes see it: without its session id.
struct HashedTask<'a>(&'a Task);

impl serde::Serialize for HashedTask<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // Every field named, so that a new one cannot be left out of the hash unnoticed.
        let Task { input, turns, context, tools, memory_seeds, session_id: _, agent_args } = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("input", input)?;
        if let Some(turns) = turns {
            map.serialize_entry("turns", turns)?;
        }
        if let Some(context) = context {
            map.serialize_entry("context", context)?;
        }
        if let Some(tools) = tools {
            map.serialize_entry("tools", tools)?;
        }
        match memory_seeds {
            // Seeds read from a file hash as the list they hold, as when they are given inline.
            Some(file @ MemorySeeds::File { .. }) => {
                let seeds = file.seeds().map_err(serde::ser::Error::custom)?;
                map.serialize_entry("memory_seeds", &seeds)?;
            }
            Some(seeds) => map.serialize_entry("memory_seeds", seeds)?,
            None => {}
        }
        if let Some(args) = agent_args {
            map.serialize_entry("agent_args", args)?;
        }
        map.end()
    }
}

/// The canonical JSON of a target's configuration, for [`run_hash_of`].
pub fn target_key(target: &Value) -> Result<String, Failure> {
    canonical(target)
}

/// The run hash of run `run` of the case `key` on the target `target` (from [`target_key`]).
pub fn run_hash_of(key: &CaseKey, target: &str, run: u32) -> String {
    casebook_canon::id_hex(&run_hash_bytes(key, target, run))
}

/// [`run_hash_of`] as bytes.
pub fn run_hash_bytes(key: &CaseKey, target: &str, run: u32) -> [u8; 32] {
    let text = format!(
        "{{\"case_id\":{},\"run\":{run},\"seeds\":{},\"target\":{target},\"task\":{}}}",
        key.case_id, key.seeds, key.task
    );
    let mut hasher = blake3::Hasher::new();
    hasher.update(Kind::Run.domain().as_bytes());
    hasher.update(&[0]);
    hasher.update(text.as_bytes());
    *hasher.finalize().as_bytes()
}

pub fn run_hash(target: &Value, seeds: &[Seed], task: &Task, case_id: &str, run: u32) -> Result<String, Failure> {
    Ok(run_hash_of(&CaseKey::new(seeds, task, case_id)?, &target_key(target)?, run))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_hashed_task_is_the_task_without_its_session_id() {
        let task: Task = serde_json::from_value(json!({
            "input": [{"role": "user", "content": "hi"}],
            "turns": [{"role": "user", "content": "and?"}],
            "context": [{"type": "log", "content": "x"}],
            "tools": [{"name": "search", "extra": 1}],
            "memory_seeds": "seeds.json",
            "session_id": "s-1",
            "agent_args": {"model": "m"}
        }))
        .unwrap();
        let mut whole = serde_json::to_value(&task).unwrap();
        whole.as_object_mut().unwrap().remove("session_id");
        assert_eq!(serde_json::to_value(HashedTask(&task)).unwrap(), whole);
        let bare = Task::new(json!("hi"));
        assert_eq!(serde_json::to_value(HashedTask(&bare)).unwrap(), serde_json::to_value(&bare).unwrap());
    }

    #[test]
    fn matches_the_golden_vector() {
        let task: Task = serde_json::from_value(json!({
            "input": "Où est la gare?", "turns": [{"role": "hitl", "content": "stop"}], "session_id": "ignored"
        }))
        .unwrap();
        let seeds: Vec<Seed> =
            serde_json::from_value(json!([{"source": "user_history", "content": "likes tea"}])).unwrap();
        let target = json!({"kind": "http", "url": "http://127.0.0.1:9000/agent"});
        // `casebook-canon/tests/vectors.json`, "a run: …".
        assert_eq!(
            run_hash(&target, &seeds, &task, "tc-1", 2).unwrap(),
            "0d0fa5004eca34cbdecf9c99af2ab10be9da932322c6210eacc7b1cb01f01ca0"
        );
        assert_ne!(
            run_hash(&target, &seeds, &task, "tc-1", 3).unwrap(),
            run_hash(&target, &seeds, &task, "tc-1", 2).unwrap()
        );
        // The same through the general content id.
        let whole = json!({"target": target, "seeds": seeds, "task": {"input": "Où est la gare?", "turns": [{"role": "hitl", "content": "stop"}]}, "case_id": "tc-1", "run": 2});
        assert_eq!(
            casebook_canon::content_id(Kind::Run, &whole).unwrap(),
            run_hash(&target, &seeds, &task, "tc-1", 2).unwrap()
        );
    }
}
