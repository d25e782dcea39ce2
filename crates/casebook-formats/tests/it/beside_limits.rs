//! Files a dataset names beside it are read bounded: one over 64 MiB is refused before it is
//! read, and one read takes at most 1 GiB of such files in all; each refusal is located where
//! the dataset names the file, with the limit and what to do. The oversized files are sparse
//! (`File::set_len`), made here, never committed. The datasets are of our own: a casebook JSONL
//! row naming its seed file (the shape of `examples/casebook`), and promptfoo configurations
//! naming variables and tests files (promptfoo's "Import tests from separate files" guide).

use casebook_formats::{Format, Syntax};

use crate::harness::{convert_with, temp_file};

/// A sparse file of `len` bytes (zeros) at `name` in `dir`.
fn sparse(dir: &tempfile::TempDir, name: &str, len: u64) {
    let file = fs_err::File::create(dir.path().join(name)).unwrap();
    file.set_len(len).unwrap();
}

const MIB: u64 = 1 << 20;

#[test]
fn a_seed_file_over_the_limit_is_refused_where_the_row_names_it() {
    let dir = tempfile::tempdir().unwrap();
    sparse(&dir, "seeds.yaml", 64 * MIB + 1);
    let file = temp_file(
        &dir,
        "cases.jsonl",
        b"{\"id\": \"ok\", \"input\": \"hi\"}\n{\"id\": \"c1\", \"input\": \"hi\", \"memory_seeds\": \"seeds.yaml\"}\n",
    );
    let ((_, diags), _) = convert_with(&file, Some(Format::Casebook), Format::Casebook, Syntax::Jsonl, None, None);
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(
        (d.line, d.column, d.code.as_str(), d.pointer.as_deref().unwrap_or_default()),
        (2, 45, "E-invalid-value", "/memory_seeds")
    );
    assert!(d.file.ends_with("cases.jsonl"), "{d:?}");
    assert_eq!(d.message, "seed file `seeds.yaml` is too large to read (64 MiB or more)");
    assert_eq!(
        d.hint.as_deref(),
        Some("casebook reads at most 64 MiB of a file a dataset names; split it into smaller files")
    );
}

#[test]
fn a_promptfoo_variables_file_over_the_limit_is_refused_where_the_test_names_it() {
    let dir = tempfile::tempdir().unwrap();
    sparse(&dir, "big.yaml", 64 * MIB + 1);
    let config = temp_file(&dir, "promptfooconfig.yaml", b"tests:\n  - vars: {q: fine}\n  - vars: big.yaml\n");
    let ((_, diags), _) = convert_with(&config, Some(Format::Promptfoo), Format::Casebook, Syntax::Jsonl, None, None);
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(
        (d.line, d.column, d.code.as_str(), d.pointer.as_deref().unwrap_or_default()),
        (3, 11, "E-invalid-value", "/tests/1/vars")
    );
    assert!(d.message.ends_with("big.yaml` is too large to read (64 MiB or more)"), "{d:?}");
    assert!(d.hint.as_deref().unwrap().contains("at most 64 MiB"), "{d:?}");
}

/// Sixteen files of exactly 64 MiB are read (1 GiB in all, the total); the seventeenth the
/// pattern names is refused at the pattern, unread.
#[test]
fn the_files_of_one_read_are_refused_past_the_total() {
    let dir = tempfile::tempdir().unwrap();
    fs_err::create_dir_all(dir.path().join("t")).unwrap();
    for i in 0..17 {
        // JSON, whose parser stops at the first zero byte: the test reads, it does not parse.
        sparse(&dir, &format!("t/{i:02}.json"), 64 * MIB);
    }
    let config = temp_file(&dir, "promptfooconfig.yaml", b"tests:\n  - file://t/*.json\n");
    let ((_, diags), _) = convert_with(&config, Some(Format::Promptfoo), Format::Casebook, Syntax::Jsonl, None, None);
    let refused: Vec<_> = diags.iter().filter(|d| d.file.ends_with("promptfooconfig.yaml")).collect();
    assert_eq!(refused.len(), 1, "{diags:?}");
    let d = refused[0];
    assert_eq!(
        (d.line, d.column, d.code.as_str(), d.pointer.as_deref().unwrap_or_default()),
        (2, 5, "E-invalid-value", "/tests/0")
    );
    assert!(
        d.message.ends_with("16.json` is not read: the files this dataset names hold more than casebook reads at once"),
        "{d:?}"
    );
    assert_eq!(
        d.hint.as_deref(),
        Some(
            "casebook reads at most 1024 MiB of the files one dataset names; name fewer or smaller files, or split the dataset"
        )
    );
    // The sixteen read are each reported in themselves (zeros are no JSON).
    assert_eq!(diags.iter().filter(|d| d.code.as_str() == "E-json-syntax").count(), 16, "{diags:?}");
}
