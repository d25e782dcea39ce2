//! `casebook generate` (hidden): deterministic synthetic datasets for benchmarks.

use std::io::{BufWriter, Write};

use anyhow::bail;

use crate::Outcome;
use crate::args::GenerateArgs;

/// A small deterministic generator (SplitMix64), so files are the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
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

fn sentence(rng: &mut Rng, words: usize) -> String {
    let mut s = String::new();
    for i in 0..words {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(rng.pick(WORDS));
    }
    s
}

pub fn run(args: GenerateArgs) -> anyhow::Result<Outcome> {
    let out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(fs_err::File::create(path)?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut rng = Rng(args.seed);
    match args.kind.as_str() {
        "letta-jsonl" => {
            for i in 0..args.cases {
                let row = serde_json::json!({
                    "id": i,
                    "input": format!("Question {i}: {}?", sentence(&mut rng, 24)),
                    "ground_truth": sentence(&mut rng, 14),
                    "tags": [rng.pick(TAGS), rng.pick(TAGS)],
                    "metadata": {"difficulty": rng.pick(&["easy", "medium", "hard"]), "source": "generator", "batch": i / 1000},
                    "agent_args": {"temperature": 0.2, "persona": sentence(&mut rng, 6)},
                    "rubric_vars": {"reference": sentence(&mut rng, 8)}
                });
                serde_json::to_writer(&mut out, &row)?;
                out.write_all(b"\n")?;
            }
        }
        "letta-csv" => {
            writeln!(out, "id,input,ground_truth,tags,agent_args,rubric_vars")?;
            for i in 0..args.cases {
                let input = format!("Question {i}: {}, please?", sentence(&mut rng, 26));
                let gt = sentence(&mut rng, 16);
                let tags = serde_json::json!([rng.pick(TAGS), rng.pick(TAGS)]).to_string().replace('"', "\"\"");
                let args_json = serde_json::json!({"temperature": 0.2, "persona": sentence(&mut rng, 8)})
                    .to_string()
                    .replace('"', "\"\"");
                let vars = serde_json::json!({"reference": sentence(&mut rng, 12)}).to_string().replace('"', "\"\"");
                writeln!(out, "{i},\"{input}\",{gt},\"{tags}\",\"{args_json}\",\"{vars}\"")?;
            }
        }
        "maslab-yaml" => {
            writeln!(
                out,
                "apiVersion: lab/v1\nkind: Dataset\nmetadata:\n  name: generated\n  version: '1.0'\nspec:\n  items:"
            )?;
            for i in 0..args.cases {
                writeln!(out, "  - id: item-{i}")?;
                writeln!(
                    out,
                    "    inputs:\n      user:\n      - role: user\n        content: 'Question {i}: {}?'",
                    sentence(&mut rng, 20)
                )?;
                writeln!(out, "      - role: user\n        content: {}", sentence(&mut rng, 8))?;
                writeln!(out, "    expectations:\n      ground_truth: \"{}\"", sentence(&mut rng, 12))?;
                writeln!(out, "    tags:\n    - {}\n    group: k{}", rng.pick(TAGS), i % 4)?;
            }
        }
        other => bail!("unknown kind `{other}`: use letta-jsonl, letta-csv or maslab-yaml"),
    }
    out.flush()?;
    Ok(Outcome::Ok)
}
