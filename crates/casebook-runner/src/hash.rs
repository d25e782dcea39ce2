//! The run hash (SPEC §8): the content id of everything that decides what an agent is asked in a
//! run — the target's configuration (without secrets), the effective memory seeds, the task half
//! of the case without its session id, the case id and the run index:
//!
//! `content_id(Run, {"case_id", "run", "seeds", "target", "task"})`
//!
//! Graders are not part of it: re-grading reuses the stored output. A golden vector in
//! `casebook-canon/tests/vectors.json` pins the definition.

use casebook_canon::{Kind, content_id};
use casebook_model::{Seed, Task};
use serde_json::{Value, json};

use crate::record::Failure;

pub fn run_hash(target: &Value, seeds: &[Seed], task: &Task, case_id: &str, run: u32) -> Result<String, Failure> {
    let mut task = serde_json::to_value(task).map_err(|e| Failure::new("config", e.to_string()))?;
    if let Value::Object(map) = &mut task {
        map.remove("session_id");
    }
    let input = json!({"target": target, "seeds": seeds, "task": task, "case_id": case_id, "run": run});
    content_id(Kind::Run, &input).map_err(|e| Failure::new("config", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
