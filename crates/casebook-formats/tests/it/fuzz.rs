//! Mutation fuzzing of every reader and of `convert`: the corpus datasets and the repository's
//! examples, mutated by a seeded deterministic generator (bytes, structure, sizes; YAML
//! indentation, tabs, anchors and aliases; CSV quotes and cells), read with no format hint and
//! with the file's own, and converted to every format and syntax casebook writes.
//!
//! For every mutant it asserts what a user would notice:
//! - no panic, in the reader or in `convert`;
//! - every diagnostic names the file, a line ≥ 1 and a column ≥ 1 (an empty file is reported at
//!   1:1 too), and has a non-empty message of at most [`MAX_MESSAGE`] bytes, even when the mutant
//!   holds a value of several megabytes;
//! - the error count `convert` returns (which the CLI uses to decide whether to keep the output)
//!   matches the error diagnostics it reported, and an output without errors reads back without
//!   errors, with as many cases as were written;
//! - output and diagnostics stay proportional to the input, each mutant takes at most
//!   [`MAX_MUTANT_TIME`] (of wall time and of the process's CPU time both, so that neither a
//!   loaded machine nor other tests of the same process fail it), and the process's peak memory (Linux `VmHWM`) stays under a bound
//!   relative to the largest mutant.
//!
//! A failing mutant is written under `target/tmp/fuzz/` with its number and mutations in the
//! failure message, so it can be reproduced with `casebook convert` (documents are also read as
//! they are parsed, as files of 16 MiB and more are, for a third of the JSON and YAML mutants:
//! the message says `stream_from Some(0)` then). The run prints its slowest mutant and its peak
//! memory.
//!
//! The default run is small enough for CI ([`DEFAULT_MUTANTS`] mutants, 15 to 25 seconds in a
//! debug build on two cores). For longer local runs set `CASEBOOK_FUZZ_MUTANTS` (number of
//! mutants) and `CASEBOOK_FUZZ_SEED` (the generator's seed, a decimal number); 1,000 mutants
//! take one to one and a half minutes:
//!
//! ```text
//! CASEBOOK_FUZZ_MUTANTS=20000 CASEBOOK_FUZZ_SEED=7 cargo nextest run -p casebook-formats fuzz
//! ```
//!
//! The bugs it found have tests at the end of this file.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use casebook_formats::{
    Batch, ColumnMap, Consumer, ConvertSummary, Flow, Format, Input, ReadError, ReadOptions, SeedFiles, Start, Syntax,
    Target, convert, csv_columns, read,
};
use casebook_model::{Code, Diagnostic};

use crate::harness::corpus;

/// Mutants in the default run.
const DEFAULT_MUTANTS: usize = 300;
const DEFAULT_SEED: u64 = 0x0C45_EB00_C0FF_EE12;
/// The longest diagnostic message (or hint) allowed, whatever the input holds.
const MAX_MESSAGE: usize = 1000;
/// The longest time one mutant may take, every hint and target included (debug build).
const MAX_MUTANT_TIME: Duration = Duration::from_secs(10);
/// Mutants larger than this go through fewer conversions (see [`run_mutant`]).
const BIG: usize = 256 << 10;

/// SplitMix64: small, seeded, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        let mut rng = Rng(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        rng.next();
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A file the mutants start from.
struct SeedFile {
    /// Its path under `corpus/` or the repository, for messages.
    name: String,
    bytes: Vec<u8>,
    syntax: Syntax,
    format: Format,
    /// The column map its format needs (generic CSV).
    map: Option<ColumnMap>,
}

/// The corpus datasets (accepted by their system or not) and the repository's example datasets.
fn seed_files() -> Vec<SeedFile> {
    let mut files: Vec<(PathBuf, String, Format, Syntax, Option<ColumnMap>)> = Vec::new();
    // The real-file corpus when it is there (`CASEBOOK_CORPUS`); the examples always.
    if cfg!(corpus) {
        files.extend(
            crate::corpus::ACCEPTED
                .iter()
                .map(|(rel, format, syntax)| (corpus().join(rel), format!("corpus/{rel}"), *format, *syntax, None)),
        );
        let invalid = "agent-health/invalid-import-test-cases.json";
        files.push((corpus().join(invalid), format!("corpus/{invalid}"), Format::AgentHealth, Syntax::Json, None));
    }
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let map: ColumnMap = "id=qid,input=question,expected.output=answer,metadata.topic=topic".parse().unwrap();
    for (rel, format, syntax, map) in [
        ("agenthealth/rca.json", Format::AgentHealth, Syntax::Json, None),
        ("casebook/incidents.yaml", Format::Casebook, Syntax::Yaml, None),
        ("letta/support.jsonl", Format::Letta, Syntax::Jsonl, None),
        ("maslab/trip-planner.yaml", Format::Maslab, Syntax::Yaml, None),
        ("spreadsheet/questions.csv", Format::Csv, Syntax::Csv, Some(map)),
        ("voltagent/geography.json", Format::Voltagent, Syntax::Json, None),
    ] {
        files.push((examples.join(rel), format!("examples/{rel}"), format, syntax, map));
    }
    for (rel, format, syntax) in crate::examples::EXAMPLES {
        files.push((examples.join(rel), format!("examples/{rel}"), *format, *syntax, None));
    }
    files
        .into_iter()
        .map(|(path, name, format, syntax, map)| SeedFile {
            bytes: fs_err::read(&path).expect("seed file"),
            name,
            syntax,
            format,
            map,
        })
        .collect()
}

/// One change to a file.
#[derive(Debug, Clone)]
enum Mutation {
    FlipBit {
        at: usize,
        bit: u8,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Delete {
        at: usize,
        len: usize,
    },
    Truncate {
        at: usize,
    },
    DuplicateLine {
        line: usize,
        times: usize,
    },
    DeleteLine {
        line: usize,
    },
    /// One of `[]{}"':,` and YAML's indicators replaced by another.
    Swap {
        at: usize,
        by: u8,
    },
    /// A copy of `len` bytes from `from` inserted at `at`.
    Splice {
        from: usize,
        len: usize,
        at: usize,
    },
    /// `depth` opening brackets (closed or not) inserted at `at`.
    Nest {
        at: usize,
        open: &'static str,
        close: &'static str,
        depth: usize,
    },
    /// `size` bytes of one character inserted at `at` (after a quote or a colon when there is one).
    BlowUp {
        at: usize,
        fill: char,
        size: usize,
    },
    Indent {
        line: usize,
        delta: isize,
    },
    Tab {
        line: usize,
    },
    /// `&name` put before the value of one line and `*name` as the value of another.
    Alias {
        anchor_line: usize,
        alias_line: usize,
        name: &'static str,
    },
    /// Levels of aliases, each holding ten of the previous one, appended to the document.
    Laughs {
        levels: usize,
    },
    QuoteImbalance {
        at: usize,
    },
    ExtraCells {
        line: usize,
        cells: usize,
    },
}

impl fmt::Display for Mutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mutation::Insert { at, bytes } if bytes.len() > 16 => {
                write!(f, "Insert {{ at: {at}, bytes: {} bytes }}", bytes.len())
            }
            other => write!(f, "{other:?}"),
        }
    }
}

const PUNCT: &[u8] = b"[]{}\"',:";
const YAML_PUNCT: &[u8] = b"-?|>&*!%@`#";

fn line_starts(bytes: &[u8]) -> Vec<usize> {
    std::iter::once(0).chain(memchr_all(b'\n', bytes).map(|i| i + 1)).filter(|i| *i <= bytes.len()).collect()
}

fn memchr_all(byte: u8, bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes.iter().enumerate().filter(move |(_, b)| **b == byte).map(|(i, _)| i)
}

/// The byte range of line `line` (0-based), without its line break.
fn line_range(bytes: &[u8], line: usize) -> Option<(usize, usize)> {
    let start = *line_starts(bytes).get(line)?;
    let end = bytes[start..].iter().position(|b| *b == b'\n').map_or(bytes.len(), |i| start + i);
    Some((start, end))
}

/// Offsets just after one of `needles`, or anywhere when there is none.
fn after_any(rng: &mut Rng, bytes: &[u8], needles: &[&[u8]]) -> usize {
    let spots: Vec<usize> = (0..bytes.len())
        .filter(|i| needles.iter().any(|n| bytes[*i..].starts_with(n)))
        .map(|i| i + needles.iter().find(|n| bytes[i..].starts_with(n)).map_or(0, |n| n.len()))
        .collect();
    if spots.is_empty() { rng.below(bytes.len() + 1) } else { *rng.pick(&spots) }
}

/// Draws one mutation for `bytes` of `syntax`.
fn draw(rng: &mut Rng, bytes: &[u8], syntax: Syntax) -> Mutation {
    let len = bytes.len();
    let lines = line_starts(bytes).len();
    let anywhere = |rng: &mut Rng| rng.below(len + 1);
    let value_spot: &[&[u8]] = match syntax {
        Syntax::Json | Syntax::Jsonl => &[b"\": ", b"\":", b"[", b", "],
        Syntax::Yaml => &[b": ", b"- "],
        Syntax::Csv => &[b",", b"\n"],
        // Binary: mutated anywhere.
        Syntax::Parquet => &[],
    };
    let kind = rng.below(100);
    match (kind, syntax) {
        (0..=9, _) => Mutation::FlipBit { at: rng.below(len.max(1)), bit: rng.below(8) as u8 },
        (10..=21, _) => {
            let bytes: Vec<u8> = match rng.below(9) {
                0 => vec![rng.below(256) as u8],
                1 => rng.pick::<&[u8]>(&[b"\xFF", b"\xC3", b"\xED\xA0\x80", b"\xF4\x90\x80\x80", b"\xE2\x82"]).to_vec(),
                2 => b"\xEF\xBB\xBF".to_vec(),
                3 => vec![0],
                4 => rng.pick::<&[u8]>(&[b"\r", b"\t", b"\x0B", b"\x0C", b"\x1B", b"\x7F"]).to_vec(),
                5 => rng
                    .pick(&["\u{85}", "\u{2028}", "\u{FEFF}", "\u{FFFE}", "\u{1F600}", "\u{301}"])
                    .as_bytes()
                    .to_vec(),
                6 => rng.pick::<&[u8]>(&[b"\n", b"\r\n", b"\n\n\n"]).to_vec(),
                7 => rng
                    .pick::<&[u8]>(&[b"null", b"true", b"1e999", b"-0", b"9007199254740993", b"NaN", b"\"\""])
                    .to_vec(),
                _ => vec![*rng.pick(PUNCT)],
            };
            let at = if rng.chance(20) { 0 } else { anywhere(rng) };
            Mutation::Insert { at, bytes }
        }
        (22..=29, _) => {
            let most = if rng.chance(20) { 200 } else { 4 };
            Mutation::Delete { at: rng.below(len.max(1)), len: 1 + rng.below(most) }
        }
        (30..=35, _) => Mutation::Truncate { at: rng.below(len.max(1)) },
        (36..=42, _) => {
            // Now and then thousands of copies of a line (identical rows without ids).
            let times = if rng.chance(25) { 100 + rng.below(3000) } else { 1 + rng.below(3) };
            Mutation::DuplicateLine { line: rng.below(lines), times }
        }
        (43..=48, _) => Mutation::DeleteLine { line: rng.below(lines) },
        (49..=58, _) => {
            let set: Vec<usize> =
                (0..len).filter(|i| PUNCT.contains(&bytes[*i]) || YAML_PUNCT.contains(&bytes[*i])).collect();
            let at = if set.is_empty() { rng.below(len.max(1)) } else { *rng.pick(&set) };
            let by = if syntax == Syntax::Yaml && rng.chance(40) { *rng.pick(YAML_PUNCT) } else { *rng.pick(PUNCT) };
            Mutation::Swap { at, by }
        }
        (59..=62, _) => {
            let from = rng.below(len.max(1));
            Mutation::Splice { from, len: 1 + rng.below(400), at: anywhere(rng) }
        }
        (63..=68, _) => {
            let (open, close) = match syntax {
                Syntax::Yaml if rng.chance(50) => ("- ", ""),
                _ if rng.chance(50) => ("{\"k\": ", "}"),
                _ => ("[", "]"),
            };
            let depth = *rng.pick(&[20, 127, 128, 129, 300, 5000, 100_000]);
            Mutation::Nest {
                at: after_any(rng, bytes, value_spot),
                open,
                close: if rng.chance(50) { close } else { "" },
                depth,
            }
        }
        (69..=70, _) => {
            let fill = *rng.pick(&['x', 'é', '"', ' ', '\\', '9']);
            let mut size = (1 + rng.below(3)) << 20;
            if fill == '"' && syntax == Syntax::Csv {
                // Smaller: megabytes of doubled quotes in one CSV record read about half as fast
                // as letters (see `a_long_csv_cell_of_doubled_quotes_is_read_about_as_fast_as_one_of_letters`),
                // and each mutant is converted to every format, which the fuzz run cannot afford.
                size >>= 6;
            }
            let at = if rng.chance(70) { after_any(rng, bytes, &[b"\"", b": ", b","]) } else { anywhere(rng) };
            Mutation::BlowUp { at, fill, size }
        }
        (71..=79, Syntax::Yaml) => {
            let delta = *rng.pick(&[-4isize, -2, -1, 1, 2, 3]);
            Mutation::Indent { line: rng.below(lines), delta }
        }
        (80..=85, Syntax::Yaml) => Mutation::Tab { line: rng.below(lines) },
        (86..=95, Syntax::Yaml) => Mutation::Alias {
            anchor_line: rng.below(lines),
            alias_line: rng.below(lines),
            name: rng.pick::<&str>(&["a", "b", "x y", "a"]),
        },
        // Up to 10^4 values, or beyond the cap of 2 million that the reader must refuse.
        (96..=99, Syntax::Yaml) => Mutation::Laughs { levels: *rng.pick(&[2, 3, 4, 7]) },
        (71..=85, Syntax::Csv) => {
            let quotes: Vec<usize> = memchr_all(b'"', bytes).collect();
            let at = if quotes.is_empty() || rng.chance(30) { anywhere(rng) } else { *rng.pick(&quotes) };
            Mutation::QuoteImbalance { at }
        }
        (86..=99, Syntax::Csv) => Mutation::ExtraCells { line: rng.below(lines), cells: 1 + rng.below(3) },
        _ => Mutation::Insert { at: anywhere(rng), bytes: vec![*rng.pick(PUNCT)] },
    }
}

/// Applies `m` to `bytes`.
fn apply(m: &Mutation, bytes: &mut Vec<u8>) {
    let len = bytes.len();
    match m {
        Mutation::FlipBit { at, bit } => {
            if let Some(b) = bytes.get_mut(*at) {
                *b ^= 1 << bit;
            }
        }
        Mutation::Insert { at, bytes: new } => {
            bytes.splice((*at).min(len)..(*at).min(len), new.iter().copied());
        }
        Mutation::Delete { at, len: n } => {
            let at = (*at).min(len);
            bytes.drain(at..(at + n).min(len));
        }
        Mutation::Truncate { at } => bytes.truncate(*at),
        Mutation::DuplicateLine { line, times } => {
            if let Some((start, end)) = line_range(bytes, *line) {
                let mut copy = bytes[start..end].to_vec();
                copy.push(b'\n');
                let insert: Vec<u8> = copy.repeat(*times);
                bytes.splice(start..start, insert);
            }
        }
        Mutation::DeleteLine { line } => {
            if let Some((start, end)) = line_range(bytes, *line) {
                bytes.drain(start..(end + 1).min(len));
            }
        }
        Mutation::Swap { at, by } => {
            if let Some(b) = bytes.get_mut(*at) {
                *b = *by;
            }
        }
        Mutation::Splice { from, len: n, at } => {
            let from = (*from).min(len);
            let copy = bytes[from..(from + n).min(len)].to_vec();
            bytes.splice((*at).min(len)..(*at).min(len), copy);
        }
        Mutation::Nest { at, open, close, depth } => {
            let mut new = open.repeat(*depth);
            new.push('1');
            new.push_str(&close.repeat(*depth));
            bytes.splice((*at).min(len)..(*at).min(len), new.into_bytes());
        }
        Mutation::BlowUp { at, fill, size } => {
            let new = fill.to_string().repeat(size / fill.len_utf8());
            bytes.splice((*at).min(len)..(*at).min(len), new.into_bytes());
        }
        Mutation::Indent { line, delta } => {
            if let Some((start, end)) = line_range(bytes, *line) {
                if *delta > 0 {
                    bytes.splice(start..start, std::iter::repeat_n(b' ', delta.unsigned_abs()));
                } else {
                    let spaces = bytes[start..end].iter().take_while(|b| **b == b' ').count();
                    bytes.drain(start..start + spaces.min(delta.unsigned_abs()));
                }
            }
        }
        Mutation::Tab { line } => {
            if let Some((start, end)) = line_range(bytes, *line) {
                match bytes[start..end].iter().position(|b| *b == b' ') {
                    Some(i) => bytes[start + i] = b'\t',
                    None => bytes.insert(start, b'\t'),
                }
            }
        }
        Mutation::Alias { anchor_line, alias_line, name } => {
            let value_at = |bytes: &[u8], line: usize| {
                let (start, end) = line_range(bytes, line)?;
                let text = &bytes[start..end];
                let i = text
                    .windows(2)
                    .position(|w| w == b": ")
                    .map(|i| i + 2)
                    .or_else(|| text.windows(2).position(|w| w == b"- ").map(|i| i + 2))?;
                Some((start + i, end))
            };
            // The alias first (it may come after the anchor), then the anchor.
            let alias = value_at(bytes, *alias_line);
            let anchor = value_at(bytes, *anchor_line);
            let (alias, anchor) = (alias.map(|(s, e)| (s, e, true)), anchor.map(|(s, _)| (s, s, false)));
            let mut edits: Vec<(usize, usize, bool)> = alias.into_iter().chain(anchor).collect();
            edits.sort_by_key(|e| std::cmp::Reverse(e.0));
            for (start, end, is_alias) in edits {
                let new = if is_alias { format!("*{name}") } else { format!("&{name} ") };
                bytes.splice(start..end.max(start), new.into_bytes());
            }
        }
        Mutation::Laughs { levels } => {
            let mut text = String::from("\nlaughs:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
            for level in 1..*levels {
                let prev = format!("*l{}", level - 1);
                text.push_str(&format!("  l{level}: &l{level} [{}]\n", vec![prev; 10].join(", ")));
            }
            bytes.extend_from_slice(text.as_bytes());
        }
        Mutation::QuoteImbalance { at } => bytes.insert((*at).min(len), b'"'),
        Mutation::ExtraCells { line, cells } => {
            if let Some((_, end)) = line_range(bytes, *line) {
                let end = if end > 0 && bytes[end - 1] == b'\r' { end - 1 } else { end };
                bytes.splice(end..end, ",extra".repeat(*cells).into_bytes());
            }
        }
    }
}

/// A located, short diagnostic, or what is wrong with it.
/// `file` is the mutant; a diagnostic about a file it names (an items file) is in `dir`.
fn check_diagnostic(d: &Diagnostic, file: &str, dir: &Path) -> Result<(), String> {
    let short = |s: &str| s.len() <= MAX_MESSAGE;
    if d.file != file && !Path::new(&d.file).starts_with(dir) {
        return Err(format!("names file `{}`, not `{file}`", d.file));
    }
    if d.file.is_empty() || d.line == 0 || d.column == 0 {
        return Err("has no location".into());
    }
    if d.message.trim().is_empty() {
        return Err("has an empty message".into());
    }
    if !short(&d.message) || !d.hint.as_deref().is_none_or(short) {
        return Err(format!(
            "is too long: message {} bytes, hint {} bytes",
            d.message.len(),
            d.hint.as_ref().map_or(0, String::len)
        ));
    }
    Ok(())
}

/// Collects what `read` reports.
#[derive(Default)]
struct Collect {
    diagnostics: Vec<Diagnostic>,
    cases: u64,
}

impl Consumer<()> for Collect {
    fn start(&mut self, _: &Start) -> Flow {
        Flow::Continue
    }
    fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
        self.cases += batch.cases.len() as u64;
        self.diagnostics.append(&mut batch.diagnostics);
        Flow::Continue
    }
}

fn read_file(path: &Path, opts: &ReadOptions) -> Result<(casebook_formats::Summary, Collect), ReadError> {
    let mut collect = Collect::default();
    let summary = read(&Input::path(path), opts, &|_: &Batch| (), &mut collect)?;
    Ok((summary, collect))
}

/// Every format and syntax casebook writes.
fn targets() -> Vec<(Format, Syntax)> {
    Format::ALL.iter().flat_map(|f| f.syntaxes().iter().map(move |s| (*f, *s))).collect()
}

fn convert_to(
    path: &Path,
    opts: &ReadOptions,
    format: Format,
    syntax: Syntax,
    map: Option<ColumnMap>,
) -> Result<(Vec<u8>, Vec<Diagnostic>, ConvertSummary), ReadError> {
    let input = Input::path(path);
    let target =
        Target { format, syntax, lossy: false, column_map: map, seed_files: SeedFiles::Keep, confirm_drafts: false };
    let columns = if syntax == Syntax::Csv { csv_columns(&input, opts, &target)? } else { Vec::new() };
    let mut out = Vec::new();
    let mut diagnostics = Vec::new();
    let summary = {
        let mut on_batch = |d: &[Diagnostic], _: &casebook_formats::Progress| diagnostics.extend_from_slice(d);
        convert(&input, opts, &target, columns, Box::new(&mut out), None, &mut on_batch)?
    };
    Ok((out, diagnostics, summary))
}

fn extension(syntax: Syntax) -> &'static str {
    syntax.name()
}

/// Whether a mutant is costly to read: large, or YAML whose aliases expand to about the
/// parser's cap of two million values.
fn is_big(bytes: &[u8], applied: &[Mutation]) -> bool {
    bytes.len() > BIG || applied.iter().any(|m| matches!(m, Mutation::Laughs { levels } if *levels >= 6))
}

/// What one mutant did wrong, if anything.
///
/// A debug build reads a few MB a second: a `big` mutant (see [`is_big`]) is read with its own
/// format only and converted to casebook JSONL and to its own format, which reaches the readers
/// and writers its big value goes through while keeping the run short.
fn run_mutant(
    dir: &Path,
    seed: &SeedFile,
    bytes: &[u8],
    stream_from: Option<usize>,
    big: bool,
) -> Result<(), Vec<String>> {
    let path = dir.join(format!("mutant.{}", extension(seed.syntax)));
    fs_err::write(&path, bytes).unwrap();
    let file = path.display().to_string();
    let mut problems = Vec::new();
    let out_bound = 64 * bytes.len() + (1 << 20);
    let lines = bytes.iter().filter(|b| **b == b'\n').count() + 1;
    let diag_bound = 8 * lines + 64;
    let csv_map: ColumnMap = "id=id,input=input,expected.output=expected".parse().unwrap();
    // No hint (what detection finds), and the file's own format.
    let mut hints: Vec<(Option<Format>, Option<ColumnMap>)> = vec![
        (None, if seed.format == Format::Csv { None } else { seed.map.clone() }),
        (Some(seed.format), seed.map.clone()),
    ];
    let mut targets = targets();
    if big {
        hints.remove(0);
        targets.retain(|t| *t == (Format::Casebook, Syntax::Jsonl) || *t == (seed.format, seed.format.syntaxes()[0]));
    }
    for (hint, map) in hints {
        let opts = ReadOptions { format: hint, column_map: map, threads: 2, stream_from, ..ReadOptions::default() };
        let how = format!("--from {}", hint.map_or("(detected)".into(), |f| f.to_string()));
        let check_all = |what: &str, diags: &[Diagnostic], problems: &mut Vec<String>| {
            if diags.len() > diag_bound {
                problems.push(format!("{how} {what}: {} diagnostics for {lines} lines", diags.len()));
            }
            for d in diags {
                if let Err(e) = check_diagnostic(d, &file, dir) {
                    let message: String = d.message.chars().take(200).collect();
                    problems.push(format!(
                        "{how} {what}: diagnostic {e}: {}:{}:{} {}: {message}",
                        d.file, d.line, d.column, d.code
                    ));
                }
            }
        };
        let usage_ok = |e: &ReadError| match e {
            ReadError::Usage(m) if !m.is_empty() && m.len() <= MAX_MESSAGE => Ok(()),
            other => Err(format!("{other}")),
        };
        // The reader alone.
        match catch_unwind(AssertUnwindSafe(|| read_file(&path, &opts))) {
            Err(panic) => problems.push(format!("{how} read: panicked: {}", panic_message(&panic))),
            Ok(Err(e)) => {
                if let Err(e) = usage_ok(&e) {
                    problems.push(format!("{how} read: failed: {e}"));
                }
            }
            Ok(Ok((summary, collect))) => {
                check_all("read", &collect.diagnostics, &mut problems);
                let errors = collect.diagnostics.iter().filter(|d| d.is_error()).count() as u64;
                if summary.errors != errors || summary.cases != collect.cases {
                    problems.push(format!(
                        "{how} read: summary {summary:?} but {errors} errors and {} cases delivered",
                        collect.cases
                    ));
                }
            }
        }
        // Conversion to every target.
        for &(format, syntax) in &targets {
            let target_map = (format == Format::Csv).then(|| csv_map.clone());
            let what = format!("convert --to {format} --syntax {}", syntax.name());
            let result =
                catch_unwind(AssertUnwindSafe(|| convert_to(&path, &opts, format, syntax, target_map.clone())));
            let (out, diags, summary) = match result {
                Err(panic) => {
                    problems.push(format!("{how} {what}: panicked: {}", panic_message(&panic)));
                    continue;
                }
                Ok(Err(e)) => {
                    if let Err(e) = usage_ok(&e) {
                        problems.push(format!("{how} {what}: failed: {e}"));
                    }
                    continue;
                }
                Ok(Ok(r)) => r,
            };
            check_all(&what, &diags, &mut problems);
            let errors = diags.iter().filter(|d| d.is_error()).count() as u64;
            if summary.errors != errors {
                problems.push(format!("{how} {what}: summary says {} errors, {errors} reported", summary.errors));
            }
            if out.len() > out_bound {
                problems.push(format!(
                    "{how} {what}: {} bytes of output for {} bytes of input",
                    out.len(),
                    bytes.len()
                ));
            }
            if summary.errors > 0 {
                // The CLI keeps no output then: nothing more to check.
                continue;
            }
            // A conversion without errors gives a file that reads back without errors.
            let back = dir.join(format!("back.{}", syntax.name()));
            fs_err::write(&back, &out).unwrap();
            let back_opts =
                ReadOptions { format: Some(format), column_map: target_map, threads: 2, ..ReadOptions::default() };
            match catch_unwind(AssertUnwindSafe(|| read_file(&back, &back_opts))) {
                Err(panic) => problems.push(format!("{how} {what}, read back: panicked: {}", panic_message(&panic))),
                Ok(Err(e)) => problems.push(format!("{how} {what}, read back: failed: {e}")),
                Ok(Ok((_, collect))) => {
                    let errors: Vec<String> =
                        collect.diagnostics.iter().filter(|d| d.is_error()).take(3).map(ToString::to_string).collect();
                    if !errors.is_empty() {
                        problems.push(format!("{how} {what}: the output reads back with errors: {errors:?}"));
                    } else if collect.cases != summary.written {
                        problems.push(format!(
                            "{how} {what}: {} cases written, {} read back",
                            summary.written, collect.cases
                        ));
                    }
                }
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(no message)".into())
}

/// CPU time this process has used, user and system (Linux only).
fn cpu_time() -> Option<Duration> {
    let stat = fs_err::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces: utime and
    // stime are the 12th and 13th, in clock ticks (USER_HZ, 100 a second on Linux).
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let ticks: u64 = fields.next()?.parse::<u64>().ok()? + fields.next()?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Peak resident memory of this process in bytes (Linux only).
fn peak_rss() -> Option<u64> {
    let status = fs_err::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.trim().parse().unwrap_or_else(|_| panic!("{name} must be a number: {v}")))
}

#[test]
fn mutants_of_every_dataset_read_and_convert_without_panics_and_with_located_short_diagnostics() {
    let mutants = env_number("CASEBOOK_FUZZ_MUTANTS").map_or(DEFAULT_MUTANTS, |n| n as usize);
    let rng_seed = env_number("CASEBOOK_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let seeds = seed_files();
    let dir = tempfile::tempdir().unwrap();
    // The seed file trip-planner names, beside every mutant.
    let seeds_dir = dir.path().join("seeds");
    fs_err::create_dir_all(&seeds_dir).unwrap();
    let bob = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/maslab/seeds/bob.yaml");
    fs_err::copy(&bob, seeds_dir.join("bob.yaml")).unwrap();
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz");

    let started = Instant::now();
    let (mut slowest, mut slowest_at) = (Duration::ZERO, String::new());
    let (mut largest, mut bigs) = (0, 0);
    let mut failures = Vec::new();
    for n in 0..mutants {
        let seed = &seeds[n % seeds.len()];
        let mut rng = Rng::new(rng_seed, n as u64);
        let mut bytes = seed.bytes.clone();
        let count = 1 + rng.below(3);
        let mut applied = Vec::new();
        for _ in 0..count {
            let m = draw(&mut rng, &bytes, seed.syntax);
            let laughs = |m: &Mutation| matches!(m, Mutation::Laughs { .. });
            let blow_up = |m: &Mutation| matches!(m, Mutation::BlowUp { .. });
            if (laughs(&m) && applied.iter().any(blow_up)) || (blow_up(&m) && applied.iter().any(laughs)) {
                // Aliases of a long string may add up to 64 MiB of text before they are refused
                // (see `aliases_of_long_strings_are_refused_before_they_expand_to_gigabytes`):
                // out of proportion with the mutant, and more than a debug build reads quickly.
                continue;
            }
            apply(&m, &mut bytes);
            applied.push(m);
        }
        largest = largest.max(bytes.len());
        let stream_from = (matches!(seed.syntax, Syntax::Json | Syntax::Yaml) && rng.chance(30)).then_some(0);
        let (t, cpu) = (Instant::now(), cpu_time());
        let big = is_big(&bytes, &applied);
        bigs += usize::from(big);
        let result = run_mutant(dir.path(), seed, &bytes, stream_from, big);
        let took = t.elapsed();
        let cpu = cpu.zip(cpu_time()).map(|(before, after)| after.saturating_sub(before));
        let describe = || {
            let list: Vec<String> = applied.iter().map(ToString::to_string).collect();
            format!("mutant {n} of {} with {}", seed.name, list.join(", "))
        };
        if took > slowest {
            (slowest, slowest_at) = (took, describe());
        }
        let mut problems = result.err().unwrap_or_default();
        if took > MAX_MUTANT_TIME && cpu.is_none_or(|cpu| cpu > MAX_MUTANT_TIME) {
            problems.push(format!("took {took:?} ({cpu:?} of CPU)"));
        }
        if !problems.is_empty() {
            fs_err::create_dir_all(&keep).unwrap();
            let kept = keep.join(format!("{n}-{}", seed.name.replace('/', "_")));
            fs_err::write(&kept, &bytes).unwrap();
            problems.sort();
            problems.dedup();
            failures.push(format!(
                "{} (CASEBOOK_FUZZ_SEED={rng_seed}, stream_from {stream_from:?}), kept as {}:\n  {}",
                describe(),
                kept.display(),
                problems.join("\n  ")
            ));
        }
    }
    let peak = peak_rss();
    eprintln!(
        "{mutants} mutants ({bigs} big) in {:?}; slowest: {slowest_at} in {slowest:?}; largest mutant {} bytes; peak RSS {} MB",
        started.elapsed(),
        largest,
        peak.map_or("?".into(), |p| (p >> 20).to_string())
    );
    if let Some(peak) = peak {
        let bound = (256 << 20) + 40 * largest as u64;
        assert!(peak < bound, "peak RSS {} MB for a largest mutant of {} bytes", peak >> 20, largest);
    }
    assert!(failures.is_empty(), "{} failing mutants:\n{}", failures.len(), failures.join("\n\n"));
}

/// Converts `text` (a file named `name`) to `format` and reads the output back with that format;
/// returns the conversion's error count and the read-back's errors.
fn convert_and_read_back(name: &str, text: &str, format: Format) -> (u64, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs_err::write(&path, text).unwrap();
    let syntax = format.syntaxes()[0];
    let opts = ReadOptions { threads: 2, ..ReadOptions::default() };
    let (out, _, summary) = convert_to(&path, &opts, format, syntax, None).unwrap();
    let back = dir.path().join(format!("back.{}", syntax.name()));
    fs_err::write(&back, &out).unwrap();
    let back_opts = ReadOptions { format: Some(format), threads: 2, ..ReadOptions::default() };
    let (_, collect) = read_file(&back, &back_opts).unwrap();
    (summary.errors, collect.diagnostics.iter().filter(|d| d.is_error()).map(ToString::to_string).collect())
}

#[test]
fn a_streamed_document_with_its_list_of_cases_twice_reports_the_duplicate_key() {
    // Found by the fuzz test: read as it is parsed (documents of 16 MiB and more), the second
    // `cases:` started the output again, which stopped the conversion without a word, and the
    // output kept no case.
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("twice.yaml", "name: x\ncases:\n- id: a\n  input: hi\ncases:\n- id: b\n  input: ho\n"),
        ("twice.json", "{\"name\": \"x\", \"cases\": [{\"id\": \"a\", \"input\": \"hi\"}],\n\"cases\": []}"),
    ] {
        let path = dir.path().join(name);
        fs_err::write(&path, text).unwrap();
        for stream_from in [None, Some(0)] {
            let opts = ReadOptions { threads: 2, stream_from, ..ReadOptions::default() };
            let (_, diags, summary) = convert_to(&path, &opts, Format::Casebook, Syntax::Jsonl, None).unwrap();
            let found: Vec<(u64, u64, &str)> =
                diags.iter().filter(|d| d.is_error()).map(|d| (d.line, d.column, d.message.as_str())).collect();
            let expected = if name.ends_with("yaml") {
                vec![(5, 1, "duplicate key `cases` (first at line 2, column 1)")]
            } else {
                vec![(2, 1, "duplicate key `cases` (first at line 1, column 15)")]
            };
            assert_eq!(found, expected, "{name}, stream_from {stream_from:?}");
            assert_eq!(summary.errors, 1);
        }
    }
}

#[test]
fn an_agent_health_context_item_without_description_is_written_without_one() {
    // Found by the fuzz test: it was written `"description": null`, which the reader refuses.
    let text = r#"[{"name": "a", "category": "RCA", "difficulty": "Easy", "initialPrompt": "why?",
  "context": [{"description": "logs", "value": "x"}, {"value": "y"}], "expectedOutcomes": ["it says"]}]"#;
    let (errors, back) = convert_and_read_back("cases.json", text, Format::AgentHealth);
    assert_eq!((errors, back), (0, Vec::<String>::new()));
    let dir = tempfile::tempdir().unwrap();
    let path = crate::harness::temp_file(&dir, "cases.json", text.as_bytes());
    let (out, _) = crate::harness::convert_file(&path, None, Format::AgentHealth, Syntax::Json, None);
    let written = crate::harness::value_of(&out, Syntax::Json);
    assert_eq!(written, crate::harness::value_of(text.as_bytes(), Syntax::Json));
}

#[test]
fn diagnostics_quote_long_values_as_excerpts() {
    // Found by the fuzz test: a 2 MB seed path and a CSV header with a long column were quoted
    // whole in the message or the hint; the others are the same mistake, found by reading.
    let long = "k".repeat(100_000);
    let files = [
        (
            "dup.json",
            format!(
                r#"{{"name": "x", "cases": [{{"id": "a", "input": "hi", "metadata": {{"{long}": 1, "{long}": 2}}}}]}}"#
            ),
        ),
        ("header.csv", format!("{long},other\nq,a\n")),
        (
            "seeds.yaml",
            format!(
                "apiVersion: lab/v1\nkind: Dataset\nmetadata:\n  name: x\nspec:\n  items:\n  - id: a\n    inputs:\n      \
                 user:\n      - role: user\n        content: hi\n      memory_seeds: {long}.yaml\n"
            ),
        ),
        (
            "items.yaml",
            format!("apiVersion: lab/v1\nkind: Dataset\nmetadata:\n  name: x\nspec:\n  path: {long}.yaml\n"),
        ),
        (
            "escapes.yaml",
            format!("apiVersion: lab/v1\nkind: Dataset\nmetadata:\n  name: x\nspec:\n  path: ../{long}.yaml\n"),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        fs_err::write(&path, text).unwrap();
        let (_, collect) = read_file(&path, &ReadOptions { threads: 2, ..ReadOptions::default() }).unwrap();
        assert!(collect.diagnostics.iter().any(Diagnostic::is_error), "{name}: no error");
        for d in &collect.diagnostics {
            check_diagnostic(d, &path.display().to_string(), dir.path())
                .unwrap_or_else(|e| panic!("{name}: diagnostic {e}: {}", d.code));
        }
    }
}

#[test]
fn a_long_csv_cell_of_doubled_quotes_is_read_about_as_fast_as_one_of_letters() {
    // Found by the fuzz test: `casebook validate` of a letta CSV whose cell held 4 MB of `"`
    // took 21.7 s, then 5 s, in a debug build (the same size of `x`: 0.3 s), as every quote
    // cost a `memchr` call, once to find where the record ends and again to read the cell.
    // Timed against the same size of letters on the same machine, so a busy machine slows both.
    let dir = tempfile::tempdir().unwrap();
    let time = |name: &str, fill: &str| {
        let text = format!("input,ground_truth\n\"{}\",x\nq2,a2\n", fill.repeat(2 << 20));
        let path = dir.path().join(name);
        fs_err::write(&path, text).unwrap();
        let started = Instant::now();
        let (summary, collect) = read_file(&path, &ReadOptions { threads: 2, ..ReadOptions::default() }).unwrap();
        assert_eq!((summary.cases, summary.errors), (2, 0), "{name}: {:?}", collect.diagnostics);
        started.elapsed()
    };
    let letters = time("letters.csv", "x");
    let quotes = time("quotes.csv", "\"");
    assert!(
        quotes < letters * 5 + Duration::from_millis(200),
        "2 MB of doubled quotes took {quotes:?}, as many letters {letters:?}"
    );
}

#[test]
fn agenthealth_output_holds_the_fields_agent_health_requires() {
    // Found by the fuzz test: corpus/mas-lab/tests/fixtures/lab-smoke/dataset.yaml converted
    // with no error to `[{"id": "1", "name": "1", "initialPrompt": "What is 2+2? ..."}]`, which
    // `casebook validate` (and Agent Health's importer) refuse with three errors.
    let dir = tempfile::tempdir().unwrap();
    let smoke = "apiVersion: lab/v1\nkind: Dataset\nmetadata:\n  name: smoke\nspec:\n  items:\n  - id: 1\n    \
                 inputs:\n      user:\n      - role: user\n        content: What is 2+2?\n";
    let path = crate::harness::temp_file(&dir, "smoke.yaml", smoke.as_bytes());
    let opts = ReadOptions { threads: 2, ..ReadOptions::default() };
    for lossy in [false, true] {
        let input = Input::path(&path);
        let target = Target {
            format: Format::AgentHealth,
            syntax: Syntax::Json,
            lossy,
            column_map: None,
            seed_files: SeedFiles::Keep,
            confirm_drafts: false,
        };
        let mut diagnostics = Vec::new();
        let summary = convert(&input, &opts, &target, Vec::new(), Box::new(std::io::sink()), None, &mut |d, _| {
            diagnostics.extend_from_slice(d)
        })
        .unwrap();
        assert_eq!((summary.errors, summary.written), (1, 0), "lossy {lossy}: {diagnostics:#?}");
        let d = &diagnostics[0];
        assert_eq!((d.code, d.line, d.column), (Code::MissingField, 7, 9), "lossy {lossy}");
        assert_eq!(
            d.message,
            "case `1` lacks what `agenthealth` requires: `category`, `difficulty`, `expectedOutcomes`"
        );
        assert_eq!(
            d.hint.as_deref(),
            Some(
                "give the case a `category:…` label (e.g. `category:RCA`), a `difficulty:…` label (`Easy`, `Medium` or \
                 `Hard`) and expected outcomes (`expected.outcomes`: what the agent should do), or convert to another \
                 format"
            )
        );
    }
    // With those, it converts, and the output reads back without error.
    let complete = r#"{"id": "1", "input": "What is 2+2?", "labels": ["category:Query", "difficulty:Easy"], "expected": {"outcomes": ["says 4"]}}"#;
    let (errors, back) = convert_and_read_back("complete.jsonl", complete, Format::AgentHealth);
    assert_eq!((errors, back), (0, Vec::<String>::new()));
    // A difficulty Agent Health does not know is refused too.
    let text = complete.replace("difficulty:Easy", "difficulty:trivial");
    let (errors, _) = convert_and_read_back("trivial.jsonl", &text, Format::AgentHealth);
    assert_eq!(errors, 1);
}

#[test]
fn an_empty_dataset_is_not_converted_to_a_format_that_needs_cases() {
    // Found by the fuzz test: corpus/agent-health/conversational_queries.json (`[]`, accepted
    // with a warning) converted to an empty letta JSONL file, which `casebook validate` refuses:
    // "the file holds no cases". So do casebook's mas-lab, VoltAgent and CSV readers.
    let dir = tempfile::tempdir().unwrap();
    let path = crate::harness::temp_file(&dir, "empty.json", b"[\n]\n");
    let opts = ReadOptions { threads: 2, ..ReadOptions::default() };
    for (format, syntax) in targets() {
        let map = (format == Format::Csv).then(|| "id=id,input=input".parse().unwrap());
        let (_, diagnostics, summary) = convert_to(&path, &opts, format, syntax, map).unwrap();
        let errors: Vec<(Code, u64, u64, &str)> = diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| (d.code, d.line, d.column, d.message.as_str()))
            .collect();
        if format.needs_cases() {
            let message = format!("the dataset has no cases, and a `{format}` file must hold at least one");
            assert_eq!(errors, [(Code::EmptyDataset, 1, 1, message.as_str())], "{format} {syntax:?}");
            assert_eq!(summary.errors, 1);
        } else {
            // Casebook files and Agent Health arrays may be empty: the output reads back.
            assert_eq!(errors, Vec::<(Code, u64, u64, &str)>::new(), "{format} {syntax:?}");
            let (out, _, _) = convert_to(&path, &opts, format, syntax, None).unwrap();
            let back = crate::harness::temp_file(&dir, &format!("back.{}", syntax.name()), &out);
            let (_, collect) = read_file(&back, &ReadOptions { format: Some(format), ..opts.clone() }).unwrap();
            let errors: Vec<String> =
                collect.diagnostics.iter().filter(|d| d.is_error()).map(ToString::to_string).collect();
            assert_eq!(errors, Vec::<String>::new(), "{format} {syntax:?}");
        }
    }
}

#[test]
fn aliases_of_long_strings_are_refused_before_they_expand_to_gigabytes() {
    // Found by the fuzz test: a 3 MB mas-lab file (a 2 MB string under three levels of ten
    // aliases) whose conversion took 8 minutes and 1.1 GB; the cap on aliases counted values,
    // not bytes. Here: 1 MB, 100 copies, 100 MB once read; the text aliases add is capped at
    // 64 MiB, which the sixth `*l1` (10 MiB each) goes beyond.
    let dir = tempfile::tempdir().unwrap();
    let l1 = ["*l0"; 10].join(", ");
    let l2 = ["*l1"; 10].join(", ");
    let text = format!(
        "name: x\nlaughs:\n  l0: &l0 [{}]\n  l1: &l1 [{l1}]\n  l2: [{l2}]\ncases:\n- id: a\n  input: hi\n",
        "x".repeat(1 << 20)
    );
    let path = dir.path().join("laughs.yaml");
    fs_err::write(&path, text).unwrap();
    let started = Instant::now();
    let (_, collect) = read_file(&path, &ReadOptions { threads: 2, ..ReadOptions::default() }).unwrap();
    let errors: Vec<(u64, u64, &str)> =
        collect.diagnostics.iter().filter(|d| d.is_error()).map(|d| (d.line, d.column, d.message.as_str())).collect();
    assert_eq!(
        errors,
        [(
            5,
            33,
            "aliases expand this document by more than 64 MiB of text: write fewer aliases, or the values themselves"
        )],
        "a 1 MB file whose aliases expand to 100 MB"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}
