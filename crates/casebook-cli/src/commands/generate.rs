//! `casebook generate` (hidden): deterministic synthetic datasets for benchmarks.

use std::io::{BufWriter, Write};

use anyhow::bail;

use casebook_formats::synthetic::{Rng, letta_realistic_row, letta_row, otlp_invocation};

use crate::Outcome;
use crate::args::GenerateArgs;
use crate::output::Output;

pub fn run(settings: &crate::settings::Global, args: GenerateArgs) -> anyhow::Result<Outcome> {
    // A file is written beside its place and moved there at the end, as every writer does.
    let (file, out): (Option<Output>, Box<dyn Write>) = match &args.output {
        Some(path) => {
            crate::output::may_write(settings, path, &[], args.overwrite.overwrite)?;
            crate::output::remove_on_signals();
            let (file, out) = Output::create(Some(path))?;
            (Some(file), Box::new(out))
        }
        None => (None, Box::new(std::io::stdout().lock())),
    };
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut rng = Rng(args.seed);
    match args.kind.as_str() {
        "letta-jsonl" => {
            for i in 0..args.cases {
                serde_json::to_writer(&mut out, &letta_row(&mut rng, i))?;
                out.write_all(b"\n")?;
            }
        }
        "letta-realistic" => {
            let mut row = Vec::with_capacity(4096);
            for i in 0..args.cases {
                row.clear();
                letta_realistic_row(&mut rng, i, &mut row);
                out.write_all(&row)?;
            }
        }
        "letta-csv" => {
            writeln!(out, "id,input,ground_truth,tags,agent_args,rubric_vars")?;
            for i in 0..args.cases {
                let input = format!("Question {i}: {}, please?", rng.sentence(26));
                let gt = rng.sentence(16);
                let tags = serde_json::json!([rng.tag(), rng.tag()]).to_string().replace('"', "\"\"");
                let args_json = serde_json::json!({"temperature": 0.2, "persona": rng.sentence(8)})
                    .to_string()
                    .replace('"', "\"\"");
                let vars = serde_json::json!({"reference": rng.sentence(12)}).to_string().replace('"', "\"\"");
                writeln!(out, "{i},\"{input}\",{gt},\"{tags}\",\"{args_json}\",\"{vars}\"")?;
            }
        }
        "otlp" | "otlp-document" => {
            // Batches of 200 spans, as a collector's file exporter cuts them: the spans of one
            // trace may be in two batches, and the agent span of one invocation in seven comes
            // three batches later (it ends last). JSON lines of one `ExportTraceServiceRequest`
            // each, or one document of all the batches.
            let document = args.kind == "otlp-document";
            let mut batches = 0u64;
            let mut spans = Vec::with_capacity(256);
            let mut later: std::collections::VecDeque<(u64, serde_json::Value)> = Default::default();
            let flush = |spans: &mut Vec<serde_json::Value>, out: &mut BufWriter<Box<dyn Write>>, batches: &mut u64| {
                let item = serde_json::json!({"resource": {"attributes": [
                    {"key": "service.name", "value": {"stringValue": "support"}}]},
                    "scopeSpans": [{"scope": {"name": "generated"}, "spans": spans}]});
                spans.clear();
                let head: &[u8] = match (document, *batches) {
                    (true, 0) => b"{\"resourceSpans\":[",
                    (true, _) => b",",
                    (false, _) => b"{\"resourceSpans\":[",
                };
                *batches += 1;
                out.write_all(head)?;
                serde_json::to_writer(&mut *out, &item)?;
                out.write_all(if document { b"" } else { b"]}\n" })
            };
            for i in 0..args.cases {
                let mut invocation = otlp_invocation(&mut rng, i);
                if i % 7 == 3 && invocation.len() > 1 {
                    later.push_back((batches + 3, invocation.remove(0)));
                }
                spans.extend(invocation);
                while later.front().is_some_and(|(due, _)| *due <= batches) {
                    spans.extend(later.pop_front().map(|(_, span)| span));
                }
                if spans.len() >= 200 {
                    flush(&mut spans, &mut out, &mut batches)?;
                }
            }
            spans.extend(later.drain(..).map(|(_, span)| span));
            if !spans.is_empty() {
                flush(&mut spans, &mut out, &mut batches)?;
            }
            if document {
                out.write_all(if batches == 0 { b"{\"resourceSpans\":[]}\n" } else { b"]}\n" })?;
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
                    rng.sentence(20)
                )?;
                writeln!(out, "      - role: user\n        content: {}", rng.sentence(8))?;
                writeln!(out, "    expectations:\n      ground_truth: \"{}\"", rng.sentence(12))?;
                writeln!(out, "    tags:\n    - {}\n    group: k{}", rng.tag(), i % 4)?;
            }
        }
        other => bail!(
            "unknown kind `{other}`: use letta-jsonl, letta-realistic, letta-csv, maslab-yaml, otlp or otlp-document"
        ),
    }
    out.flush()?;
    drop(out);
    if let Some(file) = file {
        file.keep()?;
    }
    Ok(Outcome::Ok)
}
