//! Deterministic synthetic datasets for benchmarks (`casebook generate`, the criterion
//! benches): the same bytes on every machine, with the non-ASCII text and nested objects that
//! real datasets have.

use serde_json::{Value, json};

/// A small deterministic generator (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next_u64() % items.len() as u64) as usize]
    }

    /// `words` words of the generator's vocabulary.
    pub fn sentence(&mut self, words: usize) -> String {
        (0..words).map(|_| self.pick(WORDS)).collect::<Vec<_>>().join(" ")
    }

    pub fn tag(&mut self) -> &'static str {
        self.pick(TAGS)
    }
}

const WORDS: &[&str] = &[
    "agent",
    "invoice",
    "refund",
    "latency",
    "cluster",
    "memory",
    "customer",
    "policy",
    "budget",
    "schedule",
    "Celestia",
    "Verdantia",
    "train",
    "ticket",
    "database",
    "timeout",
    "résumé",
    "naïve",
    "café",
    "→",
];
const TAGS: &[&str] = &["math", "memory", "recall", "tool_usage", "search", "reasoning", "multi_step", "easy", "hard"];

/// Sample `i` of a letta dataset: about 600 bytes as JSON.
pub fn letta_row(rng: &mut Rng, i: u64) -> Value {
    json!({
        "id": i,
        "input": format!("Question {i}: {}?", rng.sentence(24)),
        "ground_truth": rng.sentence(14),
        "tags": [rng.tag(), rng.tag()],
        "metadata": {"difficulty": rng.pick(&["easy", "medium", "hard"]), "source": "generator", "batch": i / 1000},
        "agent_args": {"temperature": 0.2, "persona": rng.sentence(6)},
        "rubric_vars": {"reference": rng.sentence(8)}
    })
}
