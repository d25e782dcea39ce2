//! Parquet tables of cases: what they hold, across row groups, and what is said of a table
//! that casebook did not write or that is damaged.

use std::sync::Arc;

use casebook_formats::{Format, Syntax};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::{Value, json};

use crate::harness::{cases_of, convert_file, errors, temp_file};

/// 70,000 cases of the shapes users have (ids, repeated prompts, non-ASCII, message lists, no
/// labels and empty labels), with a dataset header: more than one row group, read back whole.
#[test]
fn a_large_dataset_with_its_header_survives_across_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let mut jsonl = String::from(
        "{\"$dataset\":{\"name\":\"support\",\"description\":\"Tickets — ünïcødé\",\"metadata\":{\"owner\":\"qa\"}}}\n",
    );
    for i in 0..70_000 {
        let case = match i % 5 {
            0 => json!({"id": format!("t-{i}"), "input": "Où est ma commande ?", "expected": {"output": "suivi"}}),
            1 => {
                json!({"id": format!("t-{i}"), "input": [{"role": "system", "content": "be brief"}, {"role": "user", "content": format!("question {i} 🚀")}], "labels": []})
            }
            2 => {
                json!({"id": format!("t-{i}"), "input": "{\"looks\": \"like json\"}", "labels": ["a", "team:b"], "metadata": {"n": i, "tags": [1, "x", null]}})
            }
            3 => {
                json!({"id": format!("t-{i}"), "input": "", "confidence": 0.25, "review": "draft", "expected": {"output": ["x", 2]}})
            }
            _ => {
                json!({"id": format!("t-{i}"), "input": "same prompt", "turns": [{"role": "user", "content": "next"}], "session_id": "s-1"})
            }
        };
        jsonl.push_str(&format!("{case}\n"));
    }
    let source = temp_file(&dir, "source.jsonl", jsonl.as_bytes());
    let (table, diags) = convert_file(&source, Some(Format::Casebook), Format::Casebook, Syntax::Parquet, None);
    assert!(errors(&diags).is_empty(), "{:?}", errors(&diags));
    assert!(table.starts_with(b"PAR1") && table.ends_with(b"PAR1"));
    let written = temp_file(&dir, "cases.parquet", &table);
    // Read back without saying what it is: the file's first bytes say.
    let (back, diags) = convert_file(&written, None, Format::Casebook, Syntax::Jsonl, None);
    assert!(errors(&diags).is_empty(), "{:?}", errors(&diags));
    let text = String::from_utf8(back.clone()).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["$dataset"]["description"], "Tickets — ünïcødé");
    assert_eq!(header["$dataset"]["metadata"]["owner"], "qa");
    assert_eq!(cases_of(&back), cases_of(jsonl.as_bytes()));
}

/// Writes a table of another tool's making: `columns` are (name, values) of optional text,
/// and an `id` column of numbers; `header`, a dataset header in the file's metadata.
fn foreign_table(path: &std::path::Path, columns: &[(&str, Vec<Option<&str>>)], header: Option<&str>) {
    let mut schema = String::from("message other { required int64 id;");
    for (name, _) in columns {
        schema.push_str(&format!(" optional binary {name} (STRING);"));
    }
    schema.push('}');
    let schema = Arc::new(parse_message_type(&schema).unwrap());
    let file = fs_err::File::create(path).unwrap().into_parts().0;
    let kv = header.map(|h| vec![KeyValue::new("casebook.dataset".to_owned(), h.to_owned())]);
    let props = WriterProperties::builder().set_key_value_metadata(kv).build();
    let mut writer = SerializedFileWriter::new(file, schema, Arc::new(props)).unwrap();
    let mut group = writer.next_row_group().unwrap();
    let rows = columns[0].1.len() as i64;
    let mut column = group.next_column().unwrap().unwrap();
    column.typed::<Int64Type>().write_batch(&(1..=rows).collect::<Vec<_>>(), None, None).unwrap();
    column.close().unwrap();
    for (_, values) in columns {
        let mut column = group.next_column().unwrap().unwrap();
        let present: Vec<ByteArray> = values.iter().flatten().map(|v| ByteArray::from(*v)).collect();
        let levels: Vec<i16> = values.iter().map(|v| i16::from(v.is_some())).collect();
        column.typed::<ByteArrayType>().write_batch(&present, Some(&levels), None).unwrap();
        column.close().unwrap();
    }
    group.close().unwrap();
    writer.close().unwrap();
}

/// A table made elsewhere: numeric ids read as text, a column that is no field is an error
/// naming it, a cell that is not JSON is an error at its row and column, and a row without an
/// input is the native reader's error, at its row; the same with a dataset header.
#[test]
fn a_table_made_elsewhere_is_read_with_each_problem_at_its_row() {
    for header in [None, Some("{\"name\":\"other\",\"description\":\"made elsewhere\"}")] {
        table_made_elsewhere(header);
    }
}

fn table_made_elsewhere(header: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.parquet");
    foreign_table(
        &path,
        &[
            ("input", vec![Some("first"), None, None, Some("fourth")]),
            ("input_json", vec![None, Some("{\"role\": 1"), None, None]),
            ("expected", vec![Some("{\"output\": \"x\"}"), None, None, Some("{\"output\": 4}")]),
            ("score", vec![Some("1"), None, None, None]),
        ],
        header,
    );
    let (out, diags) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
    let found: Vec<(u64, u64, String, Option<String>)> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| (d.line, d.column, d.message.clone(), d.pointer.clone()))
        .collect();
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_eq!(
        found[0],
        (0, 0, "column `score` is not a field of casebook's cases: it was not read".to_owned(), Some("/score".into()))
    );
    assert_eq!((found[1].0, found[1].1, found[1].3.as_deref()), (2, 0, Some("/input_json")));
    assert!(found[1].2.starts_with("row 2: column `input_json` is not JSON: "), "{}", found[1].2);
    assert_eq!((found[2].0, found[2].1), (3, 0));
    assert!(found[2].2.starts_with("row 3: ") && found[2].2.contains("input"), "{}", found[2].2);
    // The rows that were whole: ids as text, in order.
    let cases = cases_of(&out);
    let ids: Vec<&str> = cases.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["1", "4"]);
    assert_eq!(cases[1]["expected"]["output"], 4);
    let first: Value = serde_json::from_str(std::str::from_utf8(&out).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(first["$dataset"]["description"].as_str(), header.map(|_| "made elsewhere"));
}

/// A file cut short, and a text file named `.parquet`: one error for the file, nothing read.
#[test]
fn a_damaged_table_is_one_error_for_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let source = temp_file(&dir, "s.jsonl", b"{\"id\":\"a\",\"input\":\"q\"}\n{\"id\":\"b\",\"input\":\"r\"}\n");
    let (table, _) = convert_file(&source, Some(Format::Casebook), Format::Casebook, Syntax::Parquet, None);
    let cut = temp_file(&dir, "cut.parquet", &table[..table.len() - 10]);
    let named = temp_file(&dir, "named.parquet", b"{\"id\":\"a\",\"input\":\"q\"}\n");
    for path in [cut, named] {
        let (out, diags) = convert_file(&path, None, Format::Casebook, Syntax::Jsonl, None);
        let errors = errors(&diags);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let shown = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            diags[0].message.starts_with(&format!("`{}` is not a Parquet file casebook can read: ", path.display())),
            "{shown}: {}",
            diags[0].message
        );
        assert_eq!((diags[0].line, diags[0].code.to_string()), (0, "E-invalid-value".to_owned()));
        assert!(cases_of(&out).as_array().unwrap().is_empty());
    }
}
