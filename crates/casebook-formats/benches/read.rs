//! Throughput of the reader on a letta JSONL file (the shape `casebook generate --kind
//! letta-jsonl` writes, about 600 bytes a row): the whole `read` pipeline with 1 and 2 worker
//! threads, `convert` to native JSONL into a sink, and `json::parse` of one row.
//!
//! `cargo bench -p casebook-formats --bench read` (about half a minute). Whole-command figures,
//! with peak memory, come from `scripts/bench.sh`; see BENCHMARKS.md.

use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

use casebook_formats::synthetic::{Rng, letta_row};
use casebook_formats::{Batch, Consumer, Flow, Format, Input, ReadOptions, Start, Syntax, Target, convert, json, read};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// The allocator of the `casebook` binary, so that the figures are the ones it gets.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Rows in the generated file (about 12 MB): many read chunks, and quick.
const ROWS: u64 = 20_000;

/// Writes the letta JSONL file; it is deleted when the returned handle drops.
fn letta_file() -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new().suffix(".jsonl").tempfile().expect("a temporary file");
    let mut rng = Rng(1);
    let mut out = std::io::BufWriter::new(file.as_file_mut());
    for i in 0..ROWS {
        writeln!(out, "{}", letta_row(&mut rng, i)).expect("writing the temporary file");
    }
    out.flush().expect("writing the temporary file");
    drop(out);
    file
}

/// Counts what `read` delivers, as `casebook validate` does, and drops the rest.
#[derive(Default)]
struct Count {
    cases: u64,
    errors: u64,
}

impl Consumer<()> for Count {
    fn start(&mut self, _: &Start) -> Flow {
        Flow::Continue
    }

    fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
        self.cases += batch.cases.len() as u64;
        self.errors += batch.diagnostics.iter().filter(|d| d.is_error()).count() as u64;
        Flow::Continue
    }
}

fn read_letta_jsonl(c: &mut Criterion) {
    let file = letta_file();
    let input = Input::path(file.path());
    let bytes = file.as_file().metadata().expect("the temporary file's size").len();

    let mut group = c.benchmark_group("read_letta_jsonl");
    group.throughput(Throughput::Bytes(bytes));
    for threads in [1, 2] {
        let opts = ReadOptions { threads, ..ReadOptions::default() };
        group.bench_with_input(BenchmarkId::new("threads", threads), &opts, |b, opts| {
            b.iter(|| {
                let mut count = Count::default();
                let summary = read(&input, opts, &|_: &Batch| (), &mut count).expect("reading the file");
                assert_eq!((count.cases, count.errors), (ROWS, 0), "every generated row is a valid case");
                black_box(summary)
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group("convert_letta_jsonl_to_casebook");
    group.throughput(Throughput::Bytes(bytes));
    let target = Target {
        format: Format::Casebook,
        syntax: Syntax::Jsonl,
        lossy: false,
        column_map: None,
        seed_files: Default::default(),
        confirm_drafts: false,
    };
    for threads in [1, 2] {
        let opts = ReadOptions { threads, ..ReadOptions::default() };
        group.bench_with_input(BenchmarkId::new("threads", threads), &opts, |b, opts| {
            b.iter(|| {
                let summary =
                    convert(&input, opts, &target, Vec::new(), Box::new(std::io::sink()), None, &mut |_, _| {})
                        .expect("converting the file");
                assert_eq!((summary.written, summary.errors), (ROWS, 0), "every generated row converts");
                black_box(summary)
            });
        });
    }
    group.finish();
}

fn parse_row(c: &mut Criterion) {
    let row = letta_row(&mut Rng(1), 0).to_string();
    let mut group = c.benchmark_group("json_parse");
    group.throughput(Throughput::Bytes(row.len() as u64));
    group.bench_function("letta_row", |b| b.iter(|| json::parse(black_box(&row)).is_ok()));
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = read_letta_jsonl, parse_row
}
criterion_main!(benches);
