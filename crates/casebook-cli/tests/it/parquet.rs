//! Parquet tables of cases from the command line: `convert`/`export`/`pull` write them, every
//! reading command reads them, and pandas and Hugging Face `datasets` read what casebook wrote
//! (and casebook reads what pandas wrote back).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use serde_json::{Value, json};

use crate::cli::{Backend, Folder, casebook, cb, jsonl, run};
use crate::remote::{PROJECT, Server, ok, push};

/// Cases of the shapes users have: a plain prompt, a message list, text that looks like JSON,
/// non-ASCII, no labels and empty labels, a draft with a confidence, metadata of mixed types.
const CASES: &str = r#"{"$dataset": {"name": "support", "description": "tickets — ünïcødé"}}
{"id": "t-1", "input": "Où est ma commande ?", "expected": {"output": "suivi"}, "labels": ["fr", "team:ops"], "metadata": {"n": 1, "tags": ["a", 2, null]}}
{"id": "t-2", "input": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "🚀 launch?"}], "labels": []}
{"id": "t-3", "input": "[1, 2]", "expected": {"output": ["x", 2]}, "confidence": 0.25, "review": "draft"}
{"id": "t-4", "input": "Où est ma commande ?", "turns": [{"role": "user", "content": "et maintenant ?"}]}
"#;

fn native(dir: &Folder, file: &Path) -> Vec<Value> {
    let out = run(cb(dir).arg("convert").arg(file).args(["--to", "casebook", "-q"]));
    out.expect_status(0);
    jsonl(&out.stdout)
}

#[test]
fn convert_export_and_import_go_through_parquet_unchanged() {
    let dir = Folder::new();
    let source = dir.file("support.jsonl", CASES);
    let want = native(&dir, &source);

    // `--to parquet` to a file, and to standard output: the same bytes.
    let table = dir.join("support.parquet");
    run(cb(&dir).arg("convert").arg(&source).args(["--to", "parquet", "-o"]).arg(&table)).expect_status(0);
    let piped = casebook().arg("convert").arg(&source).args(["--to", "parquet", "-q"]).output().unwrap();
    assert!(piped.status.success(), "{piped:?}");
    assert_eq!(piped.stdout, fs_err::read(&table).unwrap());
    assert_eq!(native(&dir, &table), want);

    // Read from standard input: by its first bytes, or named with `--from parquet`.
    for from in [&[][..], &["--from", "parquet"][..]] {
        let out =
            run(casebook().args(["convert", "-", "--to", "casebook", "-q"]).args(from).pipe_stdin(&table).unwrap());
        out.expect_status(0);
        assert_eq!(jsonl(&out.stdout), want);
    }

    // Into a store and out again, by the output's extension.
    ok(cb(&dir).arg("init"));
    ok(cb(&dir).arg("import").arg(&table).args(["--dataset", "support"]));
    let exported = dir.join("out.parquet");
    ok(cb(&dir).args(["export", "support", "--to", "casebook", "-o"]).arg(&exported));
    // The cases and the dataset header (its description in the table's metadata).
    assert_eq!(native(&dir, &exported), want);
}

/// A Python with pandas, pyarrow and `datasets`: `CASEBOOK_TEST_PARQUET_PYTHON`, else the one
/// `scripts/test.sh` installs into `target/py-parquet`.
fn python() -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = std::env::var_os("CASEBOOK_TEST_PARQUET_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace.join("target/py-parquet/bin/python")]);
    for candidate in candidates {
        let has = Process::new(&candidate)
            .args(["-c", "import pandas, pyarrow, datasets"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if has {
            return Some(candidate);
        }
    }
    eprintln!(
        "not run: no Python with pandas, pyarrow and datasets: `scripts/test.sh` installs them into target/py-parquet, or set CASEBOOK_TEST_PARQUET_PYTHON"
    );
    None
}

fn python_run(python: &Path, dir: &Folder, script: &str) -> String {
    let out = Process::new(python)
        .arg("-c")
        .arg(script)
        .current_dir(dir.join(""))
        .env("HF_DATASETS_OFFLINE", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What users do next: `pandas.read_parquet` and `datasets.load_dataset("parquet", …)` on an
/// exported table, pandas' own `to_parquet` read back by casebook, and a table edited in pandas
/// with mistakes, each told at its row.
#[test]
fn pandas_and_datasets_read_the_table_and_casebook_reads_theirs() {
    let Some(python) = python() else { return };
    let dir = Folder::new();
    let source = dir.file("support.jsonl", CASES);
    let want = native(&dir, &source);
    ok(cb(&dir).arg("init"));
    ok(cb(&dir).arg("import").arg(&source).args(["--dataset", "support"]));
    ok(cb(&dir).args(["export", "support", "--to", "parquet", "-o", "support.parquet"]));
    let seen = python_run(
        &python,
        &dir,
        r#"
import json, pandas, datasets
df = pandas.read_parquet("support.parquet")
ds = datasets.load_dataset("parquet", data_files="support.parquet", split="train")
print(json.dumps({
    "rows": len(df), "ids": list(df["id"]), "input": df["input"][0], "labels": list(df["labels"][0]),
    "empty_labels": list(df["labels"][1]), "messages": json.loads(df["input_json"][1]),
    "confidence": float(df["confidence"][2]), "expected": json.loads(df["expected"][0]),
    "hf_rows": ds.num_rows, "hf_input": ds[0]["input"], "hf_labels": ds[0]["labels"],
}))
df.to_parquet("from-pandas.parquet")
bad = df.copy()
bad.loc[1, "id"] = "t-1"
bad.loc[2, "expected"] = "{not json"
bad.to_parquet("edited.parquet")
"#,
    );
    let seen: Value = serde_json::from_str(seen.trim()).unwrap();
    assert_eq!(
        seen,
        json!({
            "rows": 4, "ids": ["t-1", "t-2", "t-3", "t-4"], "input": "Où est ma commande ?",
            "labels": ["fr", "team:ops"], "empty_labels": [],
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "🚀 launch?"}],
            "confidence": 0.25, "expected": {"output": "suivi"},
            "hf_rows": 4, "hf_input": "Où est ma commande ?", "hf_labels": ["fr", "team:ops"],
        })
    );
    // pandas' table (its index column left aside) holds the same cases; the dataset header,
    // kept in the file's metadata, is not carried by pandas.
    let cases = |rows: Vec<Value>| rows.into_iter().filter(|r| r.get("$dataset").is_none()).collect::<Vec<_>>();
    assert_eq!(cases(native(&dir, &dir.join("from-pandas.parquet"))), cases(want));
    // The edited table: a repeated id at row 2, a cell that is not JSON at row 3.
    let r = run(cb(&dir).args(["validate", "edited.parquet", "--format", "json"]));
    r.expect_status(1);
    // Located by row: no column within a row.
    let found: Vec<Value> = r
        .diagnostics()
        .iter()
        .filter(|d| d.get("code").is_some())
        .map(|d| json!([d["code"], d["line"], d.get("column"), d["pointer"], d["message"].as_str().unwrap()[..6]]))
        .collect();
    assert_eq!(
        found,
        [json!(["E-wrong-type", 3, null, "/expected", "row 3:"]), json!(["E-duplicate-id", 2, null, "/id", "row 2:"])],
        "{r:?}"
    );
}

/// A table pushed to a server and pulled back as a table.
#[test]
fn a_table_is_pushed_and_pulled() {
    let b = Backend::Embedded;
    let dir = Folder::new();
    let source = dir.file("support.jsonl", CASES);
    let want = native(&dir, &source);
    let table = dir.join("support.parquet");
    run(cb(&dir).arg("convert").arg(&source).args(["--to", "parquet", "-q", "-o"]).arg(&table)).expect_status(0);
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    let report = push(&server, &dir, &token, "support", &table);
    assert_eq!(report["version"]["cases"], 4, "{report}");
    let pulled = dir.join("pulled.parquet");
    ok(server.client(&dir, &token).args(["pull", "--dataset", "support", "-o"]).arg(&pulled));
    assert!(fs_err::read(&pulled).unwrap().starts_with(b"PAR1"));
    assert_eq!(native(&dir, &pulled), want);
}

/// A table of another tool's (written by pyarrow, in the shape of a Hugging Face QA dataset's
/// Parquet files: `question`, `answer`, `tags`, a conversation as a list of structs, a number)
/// read with `--map`, the CSV reader's syntax: each mapped column to its case path, the others
/// to `metadata`; and a mapped column the table lacks, told with the columns it has.
#[test]
fn a_foreign_table_is_read_through_a_column_map() {
    let Some(python) = python() else { return };
    let dir = Folder::new();
    python_run(
        &python,
        &dir,
        r#"
import pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({
    "qid": [7, 8],
    "question": ["What is 2+2?", "Capital of France?"],
    "answer": ["4", "Paris"],
    "tags": [["math", "easy"], ["geo"]],
    "chat": [[{"role": "user", "content": "hi"}], None],
    "difficulty": [0.5, None],
}), "qa.parquet")
"#,
    );
    let map = "id=qid,input=question,expected.output=answer,labels=tags";
    let out = run(cb(&dir).args(["convert", "qa.parquet", "--map", map, "--to", "casebook", "-q"]));
    out.expect_status(0);
    let cases: Vec<Value> = jsonl(&out.stdout).into_iter().filter(|r| r.get("$dataset").is_none()).collect();
    assert_eq!(
        cases,
        [
            json!({"id": "7", "input": "What is 2+2?", "expected": {"output": "4"}, "labels": ["math", "easy"],
                "metadata": {"chat": [{"content": "hi", "role": "user"}], "difficulty": 0.5}}),
            json!({"id": "8", "input": "Capital of France?", "expected": {"output": "Paris"}, "labels": ["geo"]}),
        ]
    );
    // The same map imports it into a store.
    ok(cb(&dir).arg("init"));
    ok(cb(&dir).args(["import", "qa.parquet", "--dataset", "qa", "--map", map]));
    let counted: Value =
        serde_json::from_str(&ok(cb(&dir).args(["cases", "qa", "--count", "--format", "json"]))).unwrap();
    assert_eq!(counted["count"], 2);

    // Without the map, the columns are not casebook's: each is named, and no case has an input.
    let r = run(cb(&dir).args(["validate", "qa.parquet", "--format", "json"]));
    r.expect_status(1);
    // A mapped column that is not there.
    let r = run(cb(&dir).args([
        "validate",
        "qa.parquet",
        "--map",
        "input=question,expected.output=response",
        "--format",
        "json",
    ]));
    r.expect_status(1);
    let found: Vec<Value> = r.diagnostics().into_iter().filter(|d| d.get("code").is_some()).collect();
    assert_eq!(found.len(), 1, "{r:?}");
    assert_eq!(
        (&found[0]["code"], &found[0]["file"], &found[0]["line"], &found[0]["message"], &found[0]["hint"]),
        (
            &json!("E-missing-field"),
            &json!("qa.parquet"),
            // The whole file: no row.
            &Value::Null,
            &json!("`--map expected.output=response` names column `response`, which the table does not have"),
            &json!("the table's columns: `qid`, `question`, `answer`, `tags`, `chat`, `difficulty`"),
        ),
        "{r:?}"
    );
}
