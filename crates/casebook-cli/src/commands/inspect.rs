//! `casebook inspect`: what a dataset holds: format, case count, fields used, labels, turns,
//! tools' recorded answers.

use std::collections::BTreeMap;

use casebook_formats::{Batch, Consumer, Flow, Start, read};
use casebook_model::{Case, Responses, Role};
use serde::Serialize;

use crate::Outcome;
use crate::args::InspectArgs;
use crate::progress::Progress;
use crate::report::Reporter;
use crate::settings::Global;

#[derive(Debug, Default, Serialize)]
struct Report {
    file: String,
    format: String,
    syntax: String,
    name: Option<String>,
    cases: u64,
    errors: u64,
    warnings: u64,
    /// Cases whose id casebook derived from their content.
    derived_ids: u64,
    /// Of those, the ones wholly identical to an earlier row, told apart by their place in the
    /// file only (`-2`, `-3`, …): their ids change if rows before them are added or removed.
    positional_ids: u64,
    /// Of those, Inspect samples without an id, named `1`, `2`, … by their place among the
    /// samples: Inspect's own ids for them (its eval numbers them so, and its logs use them).
    #[serde(skip_serializing_if = "is_zero")]
    inspect_numbered: u64,
    /// Those cases by their 0-based row in the file, which is how letta names the results of
    /// a row without an id: join them with letta's result files through this list.
    derived: Vec<DerivedId>,
    /// How many cases use each field.
    fields: BTreeMap<String, u64>,
    /// How many cases carry each label.
    labels: BTreeMap<String, u64>,
    /// How many cases send each number of messages (input plus turns).
    messages: BTreeMap<usize, u64>,
    hitl_turns: u64,
    /// Tools with recorded answers or a default (the world snapshot the run serves), their
    /// recorded responses, and those whose query was never run (`casebook freeze` runs them).
    #[serde(skip_serializing_if = "is_zero")]
    recorded_tools: u64,
    #[serde(skip_serializing_if = "is_zero")]
    responses: u64,
    #[serde(skip_serializing_if = "is_zero")]
    unfrozen_queries: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Serialize)]
struct DerivedId {
    row: Option<u64>,
    id: String,
}

/// Derived ids the human report lists (all of them are in `--format json`).
const DERIVED_SHOWN: usize = 10;

struct Inspector<'a> {
    report: Report,
    /// The file is Inspect's: samples without an id are numbered as Inspect numbers them.
    inspect: bool,
    reporter: &'a mut Reporter,
    progress: &'a Progress,
}

impl Consumer<()> for Inspector<'_> {
    fn start(&mut self, start: &Start) -> Flow {
        self.report.format = start.format.to_string();
        self.inspect = start.format == casebook_formats::Format::Inspect;
        self.report.syntax = start.syntax.name().into();
        self.report.name = start.header.name.clone();
        Flow::Continue
    }

    fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
        for d in &batch.diagnostics {
            if d.is_error() {
                self.report.errors += 1;
            } else {
                self.report.warnings += 1;
            }
            self.reporter.emit(d);
        }
        for case in &batch.cases {
            self.count(case);
        }
        self.progress.set(batch.end_offset, self.report.cases);
        Flow::Continue
    }
}

impl Inspector<'_> {
    fn count(&mut self, case: &Case) {
        let inspect = self.inspect;
        let r = &mut self.report;
        r.cases += 1;
        if let Some(p) = case.provenance.as_ref().filter(|p| p.id_derived) {
            r.derived_ids += 1;
            if inspect {
                r.inspect_numbered += 1;
            }
            r.derived.push(DerivedId { row: p.row, id: case.id.clone() });
        }
        if let Ok(serde_json::Value::Object(map)) = serde_json::to_value(case) {
            for (key, value) in &map {
                if key == "provenance" {
                    continue;
                }
                if let (true, serde_json::Value::Object(inner)) = (key == "expected", value) {
                    for k in inner.keys() {
                        *r.fields.entry(format!("expected.{k}")).or_default() += 1;
                    }
                } else {
                    *r.fields.entry(key.clone()).or_default() += 1;
                }
            }
        }
        for label in case.labels.iter().flatten() {
            *r.labels.entry(label.clone()).or_default() += 1;
        }
        let turns = case.task.turns.as_deref().unwrap_or_default();
        *r.messages.entry(1 + turns.len()).or_default() += 1;
        r.hitl_turns += turns.iter().filter(|t| t.role == Role::Hitl).count() as u64;
        for tool in case.task.tools.iter().flatten().filter(|t| t.is_recorded()) {
            r.recorded_tools += 1;
            let unfrozen = |answered: bool, query: bool| !answered && query;
            match &tool.responses {
                Some(Responses::Inline(list)) => {
                    r.responses += list.len() as u64;
                    r.unfrozen_queries += list
                        .iter()
                        .filter(|x| unfrozen(x.result.is_some() || x.error.is_some(), x.query.is_some()))
                        .count() as u64;
                }
                Some(Responses::File { content: serde_json::Value::Array(list), .. }) => {
                    r.responses += list.len() as u64;
                    r.unfrozen_queries += list
                        .iter()
                        .filter(|x| {
                            unfrozen(x.get("result").is_some() || x.get("error").is_some(), x.get("query").is_some())
                        })
                        .count() as u64;
                }
                _ => {}
            }
        }
    }
}

pub fn run(settings: &Global, args: InspectArgs) -> anyhow::Result<Outcome> {
    super::check_exists(&args.file)?;
    let input = super::input(&args.file);
    let opts = super::read_options(&args.read);
    let mut reporter = Reporter::new(settings, true);
    let progress = Progress::for_file(settings, input.path.as_deref());
    let mut inspector = Inspector {
        report: Report { file: input.display.clone(), ..Report::default() },
        inspect: false,
        reporter: &mut reporter,
        progress: &progress,
    };
    let summary = read(&input, &opts, &|_: &Batch| (), &mut inspector)?;
    progress.finish();
    let mut r = inspector.report;
    r.positional_ids = summary.positional_ids;
    let text = if settings.json { serde_json::to_string(&r)? + "\n" } else { human(&r) };
    crate::write_stdout(&text)?;
    Ok(if r.errors > 0 { Outcome::Invalid } else { Outcome::Ok })
}

fn human(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "file      {}", r.file);
    let _ = writeln!(out, "format    {} ({})", r.format, r.syntax);
    if let Some(name) = &r.name {
        let _ = writeln!(out, "name      {name}");
    }
    let _ = writeln!(
        out,
        "cases     {}{}",
        r.cases,
        match (r.derived_ids, r.positional_ids) {
            (0, _) => String::new(),
            (n, _) if r.inspect_numbered == n =>
                format!(" ({n} without an id, numbered 1..n by place as Inspect numbers them)"),
            (n, 0) => format!(" ({n} with derived ids)"),
            (n, p) => format!(" ({n} with derived ids, {p} of them numbered by position)"),
        }
    );
    if r.errors + r.warnings > 0 {
        let _ = writeln!(out, "problems  {} errors, {} warnings", r.errors, r.warnings);
    }
    if !r.derived.is_empty() {
        let _ = if r.inspect_numbered == r.derived_ids {
            writeln!(out, "ids by place, as Inspect's logs name them (row in the file → id)")
        } else {
            writeln!(out, "derived ids (row in the file → id)")
        };
        for d in r.derived.iter().take(DERIVED_SHOWN) {
            let row = d.row.map_or_else(|| "?".to_owned(), |r| r.to_string());
            let _ = writeln!(out, "  {row:>8} → {}", d.id);
        }
        if r.derived.len() > DERIVED_SHOWN {
            let _ =
                writeln!(out, "  … and {} more (all of them with `--format json`)", r.derived.len() - DERIVED_SHOWN);
        }
    }
    // "4 cases send 1 message, 1 case sends 3 messages"
    let messages: Vec<String> = r
        .messages
        .iter()
        .map(|(n, c)| {
            let (cases, send) = if *c == 1 { ("case", "sends") } else { ("cases", "send") };
            format!("{c} {cases} {send} {n} message{}", if *n == 1 { "" } else { "s" })
        })
        .collect();
    let _ = writeln!(
        out,
        "messages  {}{}",
        messages.join(", "),
        if r.hitl_turns > 0 { format!(" ({} of them hitl turns)", r.hitl_turns) } else { String::new() }
    );
    if r.recorded_tools > 0 {
        let _ = writeln!(
            out,
            "snapshot  {} tool{} with recorded answers, {} response{}{}",
            r.recorded_tools,
            if r.recorded_tools == 1 { "" } else { "s" },
            r.responses,
            if r.responses == 1 { "" } else { "s" },
            if r.unfrozen_queries > 0 {
                format!(" ({} queries not run yet: `casebook freeze` records them)", r.unfrozen_queries)
            } else {
                String::new()
            }
        );
    }
    let _ = writeln!(out, "fields");
    for (field, count) in &r.fields {
        let _ = writeln!(out, "  {field:<22} {count}");
    }
    if !r.labels.is_empty() {
        let _ = writeln!(out, "labels");
        let mut labels: Vec<_> = r.labels.iter().collect();
        labels.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (label, count) in labels.iter().take(30) {
            let _ = writeln!(out, "  {label:<22} {count}");
        }
        if labels.len() > 30 {
            let _ = writeln!(out, "  … and {} more (all of them with `--format json`)", labels.len() - 30);
        }
    }
    out
}
