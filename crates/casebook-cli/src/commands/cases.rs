//! `casebook cases`: the cases of a file or of a stored version that a filter selects, listed,
//! counted, or counted per value of a path (`--group-by`). On a store (or the server
//! `CASEBOOK_URL` names) the filter runs in SQL; on a file it runs on the reader's worker
//! threads.

use std::io::Write as _;
use std::path::Path;

use casebook_filter::{FieldPath, Groups};
use casebook_formats::{Batch, Consumer, Flow, Start, read};
use casebook_model::Case;
use casebook_store::Select;
use serde_json::{Value, json};

use crate::Outcome;
use crate::args::CasesArgs;
use crate::report::Reporter;
use crate::settings::{self, Global};
use crate::source::Source;
use crate::stores;

pub fn run(settings: &Global, args: CasesArgs) -> anyhow::Result<Outcome> {
    let select = settings::selection(&args.select)?;
    let mode = match &args.group_by {
        Some(path) => Mode::Group(Groups::new(
            FieldPath::parse(path).map_err(|err| settings::expression_error("--group-by", path, &err))?,
        )),
        None if args.count => Mode::Count,
        None => Mode::List,
    };
    let mut sink = Sink { settings, mode, out: std::io::BufWriter::new(std::io::stdout().lock()), selected: 0 };
    let file = Path::new(&args.source);
    let (total, outcome) = if args.source == "-" || file.is_file() {
        from_file(settings, &args, &select, &mut sink)?
    } else {
        from_store(settings, &args, &select, &mut sink)?
    };
    sink.finish(total)?;
    Ok(outcome)
}

/// What the command prints.
enum Mode {
    List,
    Count,
    /// Selected cases per value of the path.
    Group(Groups),
}

struct Sink<'a> {
    settings: &'a Global,
    mode: Mode,
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    selected: u64,
}

impl Sink<'_> {
    fn case(&mut self, case: &Case) -> std::io::Result<()> {
        self.selected += 1;
        match &mut self.mode {
            Mode::List if self.settings.json => {
                serde_json::to_writer(&mut self.out, case)?;
                self.out.write_all(b"\n")
            }
            Mode::List => writeln!(self.out, "{}", summary_line(case)),
            Mode::Count => Ok(()),
            Mode::Group(groups) => {
                groups.add(case);
                Ok(())
            }
        }
    }

    /// A stored body, already the case's native JSON line.
    fn body(&mut self, body: &str) -> std::io::Result<()> {
        self.selected += 1;
        self.out.write_all(body.as_bytes())?;
        self.out.write_all(b"\n")
    }

    fn finish(mut self, total: Option<u64>) -> std::io::Result<()> {
        let json = self.settings.json;
        let counted = matches!(self.mode, Mode::Count);
        match std::mem::replace(&mut self.mode, Mode::Count) {
            Mode::List => {}
            Mode::Count if json => writeln!(self.out, "{}", json!({"count": self.selected, "of": total}))?,
            Mode::Count => writeln!(self.out, "{}", self.selected)?,
            Mode::Group(groups) => {
                let path = groups.path().to_string();
                let groups = groups.sorted();
                if json {
                    // One line a group, as the lines people see (the total goes to stderr for them).
                    for (value, n) in &groups {
                        let line = match value {
                            Some(value) => json!({"value": value, "count": n}),
                            None => json!({"missing": true, "count": n}),
                        };
                        writeln!(self.out, "{line}")?;
                    }
                } else {
                    let label = |value: &Option<Value>| match value {
                        None => format!("(no {path})"),
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                    };
                    let width = groups.iter().map(|(v, _)| label(v).chars().count()).max().unwrap_or(0);
                    let digits = groups.iter().map(|g| g.1.to_string().len()).max().unwrap_or(1);
                    for (value, n) in &groups {
                        writeln!(self.out, "{:<width$}  {n:>digits$}", label(value))?;
                    }
                }
            }
        }
        self.out.flush()?;
        if !self.settings.quiet && !json && !counted {
            let of = total.map_or(String::new(), |t| format!(" of {t}"));
            stderr!("{} case{}{of} selected", self.selected, if self.selected == 1 { "" } else { "s" });
        }
        Ok(())
    }
}

/// `id  [labels]  input`, the input cut to one short line.
fn summary_line(case: &Case) -> String {
    let labels = case.labels.as_deref().map_or(String::new(), |l| format!("[{}]", l.join(", ")));
    let input = match &case.task.input {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let input: String = input.split_whitespace().collect::<Vec<_>>().join(" ");
    let short: String = input.chars().take(72).collect();
    let more = if short.len() < input.len() { "…" } else { "" };
    format!("{:<12} {labels:<24} {short}{more}", case.id)
}

/// Whether `source`, which names no existing file, was meant as one: it has a folder or a file
/// extension and no `@REF`, so "no dataset named `nosuch.jsonl`" would mislead.
fn looks_like_file(source: &str) -> bool {
    !source.contains('@')
        && (source.contains(std::path::MAIN_SEPARATOR)
            || source.contains('/')
            || Path::new(source).extension().is_some())
}

fn from_store(
    settings: &Global,
    args: &CasesArgs,
    select: &Select,
    sink: &mut Sink<'_>,
) -> anyhow::Result<(Option<u64>, Outcome)> {
    let runtime = stores::runtime()?;
    let source = Source::open(settings, &runtime)
        .map_err(|err| err.context(format!("`{}` is neither a file nor a dataset in a store", args.source)))?;
    let (name, reference) = stores::target(&args.source)?;
    let version = source.resolve(&runtime, &name, &reference).map_err(|err| {
        if looks_like_file(&args.source) {
            anyhow::anyhow!(
                "no file `{}` (and no dataset of that name): check the path, or name a stored version as `NAME@REF`",
                args.source
            )
        } else {
            err
        }
    })?;
    let mut failed = None;
    let (counting, raw) = (matches!(sink.mode, Mode::Count), matches!(sink.mode, Mode::List) && settings.json);
    match () {
        () if counting => sink.selected = source.count(&runtime, &name, version.number, select)?,
        () if raw => {
            source.bodies(&runtime, &name, version.number, select, 1024, &mut |bodies| {
                bodies.iter().try_for_each(|b| sink.body(b)).map_err(|e| failed = Some(e)).is_ok()
            })?;
        }
        _ => {
            source.cases(&runtime, &name, version.number, select, 1024, &mut |cases| {
                cases.iter().try_for_each(|c| sink.case(c)).map_err(|e| failed = Some(e)).is_ok()
            })?;
        }
    }
    if let Some(err) = failed {
        return Err(err.into());
    }
    source.tell(settings);
    source.close(&runtime);
    Ok((Some(version.cases), Outcome::Ok))
}

/// Reads a file, evaluating the filter on the worker threads.
struct FileCases<'a, 'b> {
    sink: &'a mut Sink<'b>,
    reporter: Reporter,
    limit: Option<u64>,
    errors: u64,
    failed: Option<std::io::Error>,
}

impl Consumer<Vec<bool>> for FileCases<'_, '_> {
    fn start(&mut self, _start: &Start) -> Flow {
        Flow::Continue
    }

    fn batch(&mut self, batch: &mut Batch, keep: &mut Vec<bool>) -> Flow {
        for d in batch.diagnostics.iter().filter(|d| d.is_error()) {
            self.errors += 1;
            self.reporter.emit(d);
        }
        for (case, keep) in batch.cases.iter().zip(keep.iter()) {
            if self.limit.is_some_and(|limit| self.sink.selected >= limit) {
                return Flow::Stop;
            }
            if *keep {
                if let Err(err) = self.sink.case(case) {
                    self.failed = Some(err);
                    return Flow::Stop;
                }
            }
        }
        if self.limit.is_some_and(|limit| self.sink.selected >= limit) { Flow::Stop } else { Flow::Continue }
    }
}

fn from_file(
    settings: &Global,
    args: &CasesArgs,
    select: &Select,
    sink: &mut Sink<'_>,
) -> anyhow::Result<(Option<u64>, Outcome)> {
    let file = Path::new(&args.source);
    let input = super::input(file);
    let opts = super::read_options(&args.read);
    let filter = select.filter.as_ref();
    let work =
        |batch: &Batch| -> Vec<bool> { batch.cases.iter().map(|c| filter.is_none_or(|f| f.matches(c))).collect() };
    let mut consumer =
        FileCases { sink, reporter: Reporter::new(settings, true), limit: select.limit, errors: 0, failed: None };
    let summary = read(&input, &opts, &work, &mut consumer)?;
    if let Some(err) = consumer.failed {
        return Err(err.into());
    }
    let total = (!summary.stopped).then_some(summary.cases);
    Ok((total, if consumer.errors > 0 { Outcome::Invalid } else { Outcome::Ok }))
}
