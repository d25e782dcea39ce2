//! The exporter: what it writes reads back as the cases it was given, and what a format cannot
//! hold or an empty dataset is said, naming the exported version.

use std::path::Path;

use casebook_formats::{
    Batch, Consumer, CsvColumns, ExportError, ExportSettings, Exported, Exporter, Flow, Format, Input, ReadOptions,
    SeedFiles, Start, Syntax, read,
};
use casebook_model::{Case, Code, DatasetHeader, Diagnostic};
use serde_json::{Value, json};

const LETTA: &str = concat!(
    r#"{"id": "capital", "input": "What is the capital of France?", "ground_truth": "Paris", "tags": ["geo"]}"#,
    "\n",
    r#"{"id": "sum", "input": "2 + 2?", "ground_truth": "4", "metadata": {"level": 1}}"#,
    "\n",
    r#"{"id": "quote", "input": "Say \"hi\", then a comma, please", "ground_truth": "hi, there"}"#,
    "\n",
);

/// What reading a file gives: its header, its cases and its diagnostics.
struct Collected {
    header: DatasetHeader,
    cases: Vec<Case>,
    diagnostics: Vec<Diagnostic>,
}

impl Consumer<()> for Collected {
    fn start(&mut self, start: &Start) -> Flow {
        self.header = start.header.clone();
        Flow::Continue
    }

    fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
        self.cases.append(&mut batch.cases);
        self.diagnostics.append(&mut batch.diagnostics);
        Flow::Continue
    }
}

fn read_file(path: &Path) -> Collected {
    let mut collected = Collected { header: DatasetHeader::default(), cases: Vec::new(), diagnostics: Vec::new() };
    read(&Input::path(path), &ReadOptions::default(), &|_: &Batch| (), &mut collected).expect("read");
    collected
}

/// Writes `text` to `name` in a fresh folder and reads it.
fn read_text(name: &str, text: &[u8]) -> Collected {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs_err::write(&path, text).unwrap();
    read_file(&path)
}

fn settings(format: Format, syntax: Syntax) -> ExportSettings {
    ExportSettings {
        format,
        syntax,
        column_map: None,
        lossy: false,
        seed_files: SeedFiles::Inline,
        place: "qa@v3".into(),
        confirm_drafts: false,
    }
}

/// Exports `cases` in batches of two, as a store would hand them over (bodies for native JSONL).
fn export(settings: ExportSettings, header: &DatasetHeader, cases: &[Case]) -> (Vec<u8>, Vec<Diagnostic>, Exported) {
    let columns = if settings.needs_columns() {
        let mut scan = CsvColumns::new(&settings);
        for batch in cases.chunks(2) {
            scan.add(batch);
        }
        scan.ordered(header)
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    let mut diagnostics = Vec::new();
    let exported = {
        let mut exporter = Exporter::new(settings, header, columns, Box::new(&mut out), None).unwrap();
        exporter.begin().unwrap();
        for batch in cases.chunks(2) {
            if exporter.takes_bodies() {
                let bodies: Vec<String> = batch.iter().map(|c| serde_json::to_string(c).unwrap()).collect();
                diagnostics.extend(exporter.bodies(&bodies).unwrap());
            } else {
                diagnostics.extend(exporter.cases(batch).unwrap());
            }
        }
        exporter.finish().unwrap()
    };
    (out, diagnostics, exported)
}

/// The cases as JSON, without where they were read from (format, row).
fn content(cases: &[Case]) -> Vec<Value> {
    cases
        .iter()
        .map(|c| {
            let mut value = serde_json::to_value(c).unwrap();
            value.as_object_mut().unwrap().remove("provenance");
            value
        })
        .collect()
}

#[test]
fn native_jsonl_is_the_bodies_one_a_line_and_reads_back_as_the_same_cases() {
    let source = read_text("qa.jsonl", LETTA.as_bytes());
    assert_eq!(source.cases.len(), 3);
    let (out, diagnostics, exported) = export(settings(Format::Casebook, Syntax::Jsonl), &source.header, &source.cases);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!((exported.cases, exported.written, exported.errors), (3, 3, 0));
    let text = String::from_utf8(out.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let bodies: Vec<String> = source.cases.iter().map(|c| serde_json::to_string(c).unwrap()).collect();
    assert_eq!(lines, bodies);
    let back = read_text("out.jsonl", &out);
    assert!(back.diagnostics.is_empty(), "{:?}", back.diagnostics);
    let ids: Vec<&str> = back.cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["capital", "sum", "quote"]);
    assert_eq!(serde_json::to_value(&back.cases).unwrap(), serde_json::to_value(&source.cases).unwrap());
}

#[test]
fn letta_csv_has_a_header_row_and_reads_back_as_the_same_cases() {
    let source = read_text("qa.jsonl", LETTA.as_bytes());
    let (out, diagnostics, exported) = export(settings(Format::Letta, Syntax::Csv), &source.header, &source.cases);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!((exported.written, exported.errors), (3, 0));
    let text = String::from_utf8(out.clone()).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.split(',').any(|c| c == "input") && first.split(',').any(|c| c == "ground_truth"), "{first}");
    let back = read_text("out.csv", &out);
    assert!(back.diagnostics.is_empty(), "{:?}", back.diagnostics);
    assert_eq!(content(&back.cases), content(&source.cases));
}

#[test]
fn csv_columns_keep_the_source_files_order() {
    let source = read_text("qa.csv", b"ground_truth,id,input\nParis,capital,Capital of France?\n4,sum,2 + 2?\n");
    let (out, _, exported) = export(settings(Format::Letta, Syntax::Csv), &source.header, &source.cases);
    assert_eq!(exported.errors, 0);
    assert_eq!(String::from_utf8(out).unwrap().lines().next(), Some("ground_truth,id,input"));
}

#[test]
fn bodies_are_read_into_cases_for_other_formats() {
    let source = read_text("qa.jsonl", LETTA.as_bytes());
    let bodies: Vec<String> = source.cases.iter().map(|c| serde_json::to_string(c).unwrap()).collect();
    let mut out = Vec::new();
    {
        let mut exporter =
            Exporter::new(settings(Format::Letta, Syntax::Jsonl), &source.header, Vec::new(), Box::new(&mut out), None)
                .unwrap();
        assert!(!exporter.takes_bodies());
        exporter.begin().unwrap();
        assert!(exporter.bodies(&bodies).unwrap().is_empty());
        let err = exporter.bodies(&["{\"id\": ".to_owned()]).unwrap_err();
        assert!(matches!(err, ExportError::Body(_)), "{err}");
        assert_eq!(exporter.finish().unwrap().written, 3);
    }
    assert_eq!(content(&read_text("out.jsonl", &out).cases), content(&source.cases));
}

#[test]
fn what_a_format_cannot_hold_is_an_error_or_with_lossy_a_warning_naming_the_version() {
    let native = concat!(
        r#"{"id": "plain", "input": "q", "expected": {"output": "a"}}"#,
        "\n",
        r#"{"id": "structured", "input": "q", "expected": {"output": {"answer": 42}}}"#,
        "\n"
    );
    let source = read_text("qa.jsonl", native.as_bytes());
    assert!(source.diagnostics.is_empty(), "{:?}", source.diagnostics);
    let (out, diagnostics, exported) = export(settings(Format::Letta, Syntax::Jsonl), &source.header, &source.cases);
    assert_eq!((exported.cases, exported.written, exported.errors), (2, 1, 1));
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let d = &diagnostics[0];
    assert_eq!((d.code, d.file.as_str()), (Code::Unrepresentable, "qa@v3"));
    assert!(d.message.starts_with("case `structured` has what `letta` cannot hold: expected.output"), "{}", d.message);
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1, "the case is not written");

    let lossy = ExportSettings { lossy: true, ..settings(Format::Letta, Syntax::Jsonl) };
    let (out, diagnostics, exported) = export(lossy, &source.header, &source.cases);
    assert_eq!((exported.written, exported.errors, exported.warnings), (2, 0, 1));
    assert_eq!(diagnostics[0].code, Code::Dropped);
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 2);
}

#[test]
fn an_empty_version_is_refused_in_a_format_that_needs_cases_and_kept_in_native() {
    let header = DatasetHeader { name: Some("qa".into()), ..DatasetHeader::default() };
    let (_, _, exported) = export(settings(Format::Letta, Syntax::Jsonl), &header, &[]);
    assert_eq!(exported.errors, 1);
    let d = &exported.diagnostics[0];
    assert_eq!((d.code, d.file.as_str()), (Code::EmptyDataset, "qa@v3"));
    assert!(d.message.starts_with("`qa@v3` has no cases"), "{}", d.message);

    let (out, _, exported) = export(settings(Format::Casebook, Syntax::Jsonl), &header, &[]);
    assert_eq!((exported.errors, exported.diagnostics.len()), (0, 0));
    // An empty native file says what it is: the header record.
    let line: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(line["$dataset"]["name"], json!("qa"));
}

#[test]
fn settings_a_format_cannot_be_written_with_are_refused() {
    let header = DatasetHeader::default();
    let csv = Exporter::new(settings(Format::Csv, Syntax::Csv), &header, Vec::new(), Box::new(std::io::sink()), None);
    assert!(matches!(csv, Err(ExportError::NoColumnMap)));
    let yaml =
        Exporter::new(settings(Format::Letta, Syntax::Yaml), &header, Vec::new(), Box::new(std::io::sink()), None);
    let err = yaml.err().unwrap();
    assert_eq!(err.to_string(), "`letta` cannot be written as yaml: it uses jsonl, csv");
}

#[test]
fn an_exporter_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<Exporter<'static>>();
}
