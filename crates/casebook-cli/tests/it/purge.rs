//! `casebook purge` end to end on the embedded store: refused without `--yes` when nothing can
//! ask, then the case is gone from every version and from the store's files, while the log,
//! `export`, `diff`, `show` and `store check` each say what happened.

use crate::cli::{Folder, cb, run};

/// Rows in the native JSONL shape `casebook export --to casebook` writes.
const V1: &str = "{\"id\":\"a\",\"input\":\"secret-7c1e one\"}\n{\"id\":\"b\",\"input\":\"bee\"}\n";
const V2: &str = "{\"id\":\"a\",\"input\":\"secret-7c1e two\"}\n{\"id\":\"b\",\"input\":\"bee\"}\n{\"id\":\"c\",\"input\":\"cee\"}\n";

fn ok(cmd: &mut assert_cmd::Command) -> crate::cli::Run {
    let out = run(cmd);
    assert_eq!(out.status, Some(0), "{out:?}");
    out
}

#[test]
fn a_purge_erases_a_case_from_every_version_and_each_reader_names_it() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let v1 = dir.file("qa.jsonl", V1);
    ok(cb(&dir).args(["import", "--dataset", "qa"]).arg(&v1));
    let v2 = dir.file("qa.jsonl", V2);
    ok(cb(&dir).args(["commit", "qa"]).arg(&v2));

    let out = run(cb(&dir).args(["purge", "qa", "a", "--reason", "erasure #12"]));
    assert_ne!(out.status, Some(0), "{out:?}");
    assert!(out.stderr.contains("there is no terminal to ask: add `--yes` to purge 1 case (`a`) of `qa`"), "{out:?}");
    assert!(!ok(cb(&dir).args(["log", "qa"])).stdout.contains("purge"), "nothing was purged");

    let out = ok(cb(&dir).args(["purge", "qa", "a", "--reason", "erasure #12", "--yes", "--format", "json"]));
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(report["purge"]["cases"], serde_json::json!(["a"]));
    assert_eq!((report["purge"]["versions"].as_u64(), report["bodies"].as_u64()), (Some(2), Some(2)));
    assert_eq!(report["erased"], true);

    let log = ok(cb(&dir).args(["log", "qa"])).stdout;
    assert!(
        log.contains("purge tester  2026-11-23T10:00:00Z  1 case purged from 2 versions (0 results of runs deleted): `a`; reason: erasure #12"),
        "{log}"
    );
    let export = ok(cb(&dir).args(["export", "qa@v1", "--to", "casebook"]));
    assert_eq!(export.stdout.lines().count(), 1, "{export:?}");
    assert!(export.stdout.contains("\"id\":\"b\""), "{export:?}");
    assert!(
        export.stderr.contains(
            "warning: qa v1 held 1 case that was purged and is left out: `a` (purge #1 on 2026-11-23T10:00:00Z by tester (erasure #12))"
        ),
        "{export:?}"
    );
    let export = ok(cb(&dir).args(["export", "qa@v1", "--to", "casebook", "--format", "json"]));
    assert!(export.stderr.contains("\"code\":\"W-purged\""), "{export:?}");
    let diff = ok(cb(&dir).args(["diff", "qa@v1", "qa@v2"])).stdout;
    assert_eq!(diff, "qa v1 → v2\n+ c\n! a (purged on 2026-11-23T10:00:00Z by tester: erasure #12)\n");
    let show = run(cb(&dir).args(["show", "qa@v2", "a"]));
    assert!(show.stderr.contains("case `a` was purged on 2026-11-23T10:00:00Z by tester (erasure #12)"), "{show:?}");
    let check = ok(cb(&dir).args(["store", "check", "--format", "json"])).stdout;
    let check: serde_json::Value = serde_json::from_str(check.trim()).unwrap();
    assert_eq!((check["problems"].as_array().map(Vec::len), check["versions"].as_u64()), (Some(0), Some(2)));

    // Not a byte of the text is left in the store's files.
    for entry in fs_err::read_dir(dir.join(".casebook")).unwrap() {
        let path = entry.unwrap().path();
        let bytes = fs_err::read(&path).unwrap();
        assert!(!bytes.windows(11).any(|w| w == b"secret-7c1e"), "{} holds the purged text", path.display());
    }
}
