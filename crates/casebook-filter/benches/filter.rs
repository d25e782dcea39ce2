//! Cost of `Filter::matches` on 10,000 synthetic cases (labels, metadata, turns, a string input)
//! for a tag test, a label-metadata-confidence conjunction and a length-and-regex test, with
//! `matches_json` on the same cases for comparison. Criterion reports elements (cases) per second;
//! the time per iteration divided by 10,000 is the cost per case.
//!
//! `cargo bench -p casebook-filter --bench filter` (about half a minute).

use std::hint::black_box;
use std::time::Duration;

use casebook_filter::Filter;
use casebook_model::{Case, Review, Role, Task, Turn};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

const CASES: usize = 10_000;

const EXPRESSIONS: [(&str, &str); 3] = [
    ("tag", r#"labels contains "math""#),
    (
        "label_meta_confidence",
        r#"label.category == "RCA" and metadata.difficulty in ["hard", "medium"] and confidence >= 0.8"#,
    ),
    ("len_regex", r#"len(turns) >= 2 and not (input matches "(?i)refund")"#),
];

/// A small deterministic generator, so every run measures the same cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[usize::try_from(self.next()).unwrap_or(0) % items.len()]
    }
}

fn synthetic_case(rng: &mut Rng, i: usize) -> Case {
    let tags = ["math", "code", "writing", "reasoning", "tools"];
    let categories = ["RCA", "perf", "billing", "auth"];
    let difficulties = ["easy", "medium", "hard"];
    let mut labels = vec![rng.pick(&tags).to_owned(), format!("category:{}", rng.pick(&categories))];
    if rng.next().is_multiple_of(2) {
        labels.push(rng.pick(&tags).to_owned());
    }
    let turns = (0..rng.next() % 4)
        .map(|t| Turn {
            role: if t % 2 == 0 { Role::User } else { Role::Hitl },
            content: format!("turn {t} of case {i}"),
        })
        .collect();
    let input = if rng.next().is_multiple_of(5) {
        format!("Case {i}: the customer asks for a refund after the outage, see the attached logs")
    } else {
        format!("Case {i}: find the root cause of the latency spike in the checkout service logs")
    };
    let metadata = json!({
        "difficulty": rng.pick(&difficulties),
        "source": "synthetic",
        "tokens": rng.next() % 4000,
        "flaky": rng.next().is_multiple_of(7),
    });
    let Value::Object(metadata) = metadata else { unreachable!("an object literal") };
    #[allow(clippy::cast_precision_loss)]
    let confidence = (rng.next() % 101) as f64 / 100.0;
    let mut task = Task::new(Value::String(input));
    task.turns = Some(turns);
    Case {
        id: format!("case-{i:05}"),
        name: Some(format!("synthetic case {i}")),
        description: None,
        labels: Some(labels),
        task,
        expected: casebook_model::Expectations { output: Some(json!({"answer": i})), ..Default::default() },
        metadata: Some(metadata),
        confidence: Some(confidence),
        review: Some(Review::Reviewed),
        provenance: None,
    }
}

fn bench(c: &mut Criterion) {
    let mut rng = Rng(7);
    let cases: Vec<Case> = (0..CASES).map(|i| synthetic_case(&mut rng, i)).collect();
    let json: Vec<Value> = cases.iter().map(|c| serde_json::to_value(c).expect("a case serialises")).collect();
    let mut group = c.benchmark_group("filter");
    group.throughput(Throughput::Elements(CASES as u64));
    group.measurement_time(Duration::from_secs(3));
    for (name, src) in EXPRESSIONS {
        let filter = Filter::parse(src).expect("a valid expression");
        let selected = cases.iter().filter(|c| filter.matches(c)).count();
        assert!(selected > 0 && selected < CASES, "{name} selects {selected} of {CASES}");
        group.bench_with_input(BenchmarkId::new("matches", name), &cases, |b, cases| {
            b.iter(|| black_box(cases).iter().filter(|c| filter.matches(c)).count());
        });
        group.bench_with_input(BenchmarkId::new("matches_json", name), &json, |b, json| {
            b.iter(|| black_box(json).iter().filter(|c| filter.matches_json(c)).count());
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
