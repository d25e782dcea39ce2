//! Dataset names, tags and version references on the command line: names no new dataset or tag
//! may have are refused with the reason, look-alike spellings are one name, and a reference
//! that is neither a version nor a tag is refused with what was probably meant.
// The functions `on_both!` makes tests of are tests too.
#![allow(clippy::unwrap_used)]

use crate::cli::{Backend, Folder, run};
use crate::remote::{PROJECT, Server, one_error, push};

on_both!(
    names_and_tags_that_would_mislead_are_refused,
    names_in_either_normal_form_are_one_dataset,
    a_number_or_a_short_prefix_is_not_a_version,
    a_tag_is_deleted_by_its_name_and_the_log_says_so,
    pull_by_id_passes_over_names_no_url_can_carry,
    a_store_copy_copies_what_the_name_rules_allow_and_names_the_rest,
);

fn ok(cmd: &mut assert_cmd::Command) -> String {
    let out = run(cmd);
    assert_eq!(out.status, Some(0), "{out:?}");
    out.stdout
}

const CASES: &str = "{\"id\": \"a\", \"input\": \"Où est la gare ?\", \"ground_truth\": \"à gauche\"}\n";

fn names_and_tags_that_would_mislead_are_refused(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file("qa.jsonl", CASES);
    let refusals = [
        (
            "a/b",
            "dataset name `a/b` is not allowed: it holds `/`, which separates the parts of paths and URLs: use `-` or `_`",
        ),
        ("..", "dataset name `..` is not allowed: `.` and `..` stand for folders in paths and URLs"),
        (
            "qa\u{202E}lmth",
            "dataset name `qa\\u{202e}lmth` is not allowed: it holds U+202E, a bidirectional control, which changes how the text around it is shown",
        ),
        ("qa\u{7}", "dataset name `qa\\u{0007}` is not allowed: it holds U+0007, a control character"),
    ];
    for (name, message) in refusals {
        let out = run(b.cb(&dir).args(["import", "--dataset", name]).arg(&file));
        assert_eq!(one_error(&out, 2), format!("error: {message}"), "{name:?}");
    }
    let long = "q".repeat(200);
    let out = run(b.cb(&dir).args(["import", "--dataset", &long]).arg(&file));
    assert_eq!(
        one_error(&out, 2),
        format!(
            "error: dataset name `{}…` is not allowed: it is 200 bytes long, and names are at most 128 bytes (UTF-8)",
            "q".repeat(40)
        )
    );
    assert_eq!(ok(b.cb(&dir).args(["datasets", "--format", "json"])), "");

    ok(b.cb(&dir).args(["import", "--dataset", "qa"]).arg(&file));
    let log = crate::cli::log_versions(&ok(b.cb(&dir).args(["log", "qa", "--format", "json"])));
    let id = log[0]["id"].as_str().unwrap().to_owned();
    for (tag, why) in [
        ("v2", "`v2` always means version 2"),
        ("latest", "`latest` always means the newest version"),
        ("3", "a number reads as a version: version 3 is written `v3`"),
        (&id[..8], "8 or more hexadecimal digits read as a content id (or the start of one)"),
    ] {
        let out = run(b.cb(&dir).args(["tag", "qa@v1", tag]));
        assert_eq!(one_error(&out, 2), format!("error: tag `{tag}` is not allowed: {why}"), "{tag}");
    }
    let out = run(b.cb(&dir).args(["tag", "qa@v1", &id]));
    assert_eq!(
        one_error(&out, 2),
        format!(
            "error: tag `{}…` is not allowed: 8 or more hexadecimal digits read as a content id (or the start of one)",
            &id[..40]
        )
    );
    let log = ok(b.cb(&dir).args(["log", "qa"]));
    assert!(!log.contains("tag"), "{log}");
}

fn names_in_either_normal_form_are_one_dataset(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file("qa.jsonl", CASES);
    let more = dir.file("more.jsonl", format!("{CASES}{{\"id\": \"b\", \"input\": \"Und jetzt?\"}}\n"));
    ok(b.cb(&dir).args(["import", "--dataset", "cafe\u{301}"]).arg(&file));
    let out = ok(b.cb(&dir).args(["import", "--dataset", "caf\u{e9}"]).arg(&more));
    assert!(out.starts_with("created caf\u{e9} v2 "), "{out}");
    let listed = ok(b.cb(&dir).args(["datasets", "--format", "json"]));
    let names: Vec<String> = listed
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["caf\u{e9}"]);
    ok(b.cb(&dir).args(["tag", "cafe\u{301}@v1", "pre\u{301}"]));
    ok(b.cb(&dir).args(["tag", "caf\u{e9}@v2", "pr\u{e9}"]));
    let out = ok(b.cb(&dir).args(["show", "cafe\u{301}@pre\u{301}"]));
    assert!(out.contains("v2"), "{out}");
}

fn a_tag_is_deleted_by_its_name_and_the_log_says_so(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let file = dir.file("v1.jsonl", CASES);
    ok(b.cb(&dir).args(["import", "--dataset", "support"]).arg(&file));
    ok(b.cb(&dir).args(["tag", "support@v1", "pr\u{e9}"]));
    // The same tag on the same version again: said, and nothing logged.
    let out = ok(b.cb(&dir).args(["tag", "support@v1", "pr\u{e9}"]));
    assert!(out.starts_with("support@pr\u{e9} is already v1 (") && out.ends_with("): nothing changed\n"), "{out}");
    assert_eq!(ok(b.cb(&dir).args(["log", "support"])).matches("pr\u{e9}: v1").count(), 1);
    // Named in either normal form, as the tag was.
    let out = run(b.cb(&dir).args(["tag", "--delete", "support", "pre\u{301}"]));
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (Some(0), "deleted tag support@pre\u{301} (it named v1)\n"),
        "{out:?}"
    );
    assert!(ok(b.cb(&dir).args(["log", "support"])).contains("pr\u{e9}: v1 → deleted"));
    let out = run(b.cb(&dir).args(["show", "support@pr\u{e9}"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    // A tag the dataset does not have, and a version where the dataset is wanted.
    let out = run(b.cb(&dir).args(["tag", "--delete", "support", "prod"]));
    assert_eq!(one_error(&out, 2), "error: dataset `support` has no version `prod` (it has no tags)");
    let out = run(b.cb(&dir).args(["tag", "--delete", "support@v1", "prod"]));
    assert_eq!(
        one_error(&out, 2),
        "error: `tag --delete` names a dataset, not a version: `casebook tag --delete support prod` (the tag names v1)"
    );
    let out = run(b.cb(&dir).args(["tag", "--delete", "support", "prod", "--format", "json"]));
    assert_eq!(out.status, Some(2), "{out:?}");
}

fn a_number_or_a_short_prefix_is_not_a_version(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    for n in 1..=3 {
        let file = dir.file(&format!("v{n}.jsonl"), CASES.replace("gauche", &format!("gauche {n}")));
        ok(b.cb(&dir).args(["import", "--dataset", "support"]).arg(&file));
    }
    let out = run(b.cb(&dir).args(["show", "support@3"]));
    assert_eq!(
        one_error(&out, 2),
        "error: dataset `support` has no version `3`; did you mean `v3`? (a number alone is not a version, and a content-id prefix needs at least 8 hexadecimal digits)"
    );
    let out = run(b.cb(&dir).args(["show", "support@9"]));
    assert_eq!(
        one_error(&out, 2),
        "error: dataset `support` has no version `9`; a version is written `v9`, and its versions are v1 to v3 (a content-id prefix needs at least 8 hexadecimal digits)"
    );
    // The same on every command that takes a reference.
    for args in [
        &["export", "support@9", "--to", "casebook"][..],
        &["diff", "support@9", "support@v3"],
        &["cases", "support@9"],
        &["tag", "support@9", "prod"],
    ] {
        let out = run(b.cb(&dir).args(args));
        assert!(
            one_error(&out, 2).starts_with("error: dataset `support` has no version `9`; a version is written `v9`"),
            "{args:?}: {out:?}"
        );
    }
    let log = crate::cli::log_versions(&ok(b.cb(&dir).args(["log", "support", "--format", "json"])));
    let id = log[1]["id"].as_str().unwrap().to_owned();
    let out = ok(b.cb(&dir).args(["show", &format!("support@{}", &id[..8]), "--format", "json"]));
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["number"], 2, "{out}");
}

/// Runs SQL on the test's store, as an older casebook would have written it.
fn raw_sql(b: &Backend, dir: &Folder, statements: &[&str]) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        use sqlx::Connection;
        match b {
            Backend::Embedded => {
                let url = format!("sqlite://{}", dir.join(".casebook/store.db").display());
                let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
                for sql in statements {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(*sql)).execute(&mut conn).await.unwrap();
                }
            }
            Backend::Postgres(url) => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                for sql in statements {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(*sql)).execute(&mut conn).await.unwrap();
                }
            }
        }
    });
}

/// A dataset an older casebook let be named `..` (which no URL can carry) does not stop
/// `pull --id` from finding versions of the others; one named `a/b` is pulled as any other.
fn pull_by_id_passes_over_names_no_url_can_carry(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let key = Server::key(b, &dir, PROJECT, "write");
    let id_of = |name: &str, text: &str| {
        let file = dir.file(&format!("{name}.jsonl"), text);
        push(&server, &dir, &key, name, &file)["version"]["id"].as_str().unwrap().to_owned()
    };
    let support = id_of("support", CASES);
    let dots = id_of("dots", &CASES.replace("gare", "gare du Nord"));
    let slash = id_of("slash", &CASES.replace("gare", "gare de Lyon"));
    raw_sql(
        b,
        &dir,
        &[
            "UPDATE datasets SET name = '..' WHERE name = 'dots'",
            "UPDATE datasets SET name = 'a/b' WHERE name = 'slash'",
        ],
    );

    ok(server.client(&dir, &key).args(["pull", "--id", &support[..12], "-o", "support-out.jsonl"]));
    assert!(fs_err::read_to_string(dir.join("support-out.jsonl")).unwrap().contains("Où est la gare ?"));
    ok(server.client(&dir, &key).args(["pull", "--id", &slash[..12], "-o", "slash-out.jsonl"]));
    assert!(fs_err::read_to_string(dir.join("slash-out.jsonl")).unwrap().contains("gare de Lyon"));
    let out = run(server.client(&dir, &key).args(["pull", "--id", &dots[..12], "-o", "dots-out.jsonl"]));
    assert_eq!(
        one_error(&out, 2),
        format!(
            "error: no version of project `{PROJECT}` has an id starting with `{}` (not searched: the datasets `..`, whose names cannot be part of a URL; `casebook export` reads them in the server's store)",
            &dots[..12]
        )
    );
    // An id too short to be deliberate, or a number, is refused before anything is fetched.
    for id in ["3", &support[..4]] {
        let out = run(server.client(&dir, &key).args(["pull", "--id", id, "-o", "x.jsonl"]));
        assert_eq!(
            one_error(&out, 2),
            format!(
                "error: `{id}` is not a content id: `--id` takes a version's id, or at least its first 8 hexadecimal digits"
            )
        );
    }
    let out = run(server.client(&dir, &key).args(["pull", "--dataset", "support@1", "-o", "x.jsonl"]));
    let line = one_error(&out, 2);
    assert!(line.contains("dataset `support` has no version `1`; did you mean `v1`?"), "{line}");
    assert!(!dir.join("x.jsonl").exists());
}

/// An older store holding datasets named `a/b` and `..` and a tag named like a content id (each
/// written straight into the database, as casebook wrote them before the name rules): `store
/// copy` copies every other dataset whole, copies the tag under its old name with a warning,
/// and names each dataset it could not copy with the reason and how to copy it by hand (exit
/// 1); nothing is dropped without a word, and a second copy does the same.
fn a_store_copy_copies_what_the_name_rules_allow_and_names_the_rest(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let import = |name: &str, text: &str| {
        let file = dir.file(&format!("{name}.jsonl"), text);
        ok(b.cb(&dir).args(["import", "--dataset", name]).arg(&file));
    };
    import("support", CASES);
    import("support", &CASES.replace("gare", "gare du Nord"));
    import("slash", &CASES.replace("gare", "gare de Lyon"));
    import("dots", "{\"input\": \"¿Dónde está la estación?\"}\n");
    ok(b.cb(&dir).args(["tag", "support@v1", "prod"]));
    raw_sql(
        b,
        &dir,
        &[
            "UPDATE datasets SET name = '..' WHERE name = 'dots'",
            "UPDATE datasets SET name = 'a/b' WHERE name = 'slash'",
            "UPDATE tags SET name = 'deadbeef' WHERE name = 'prod'",
        ],
    );
    let from = match b {
        Backend::Embedded => ".".to_owned(),
        Backend::Postgres(url) => url.clone(),
    };
    let shown_from = match b {
        // (As it was named: `.`, the folder holding the store.)
        Backend::Embedded => "./.casebook".to_owned(),
        Backend::Postgres(url) => casebook_store::redact(url),
    };
    let target = dir.join("copy");
    let target = target.to_str().unwrap();
    for round in 0..2 {
        let out = run(crate::cli::cb(&dir).args(["store", "copy", &from, target]));
        assert_eq!(out.status, Some(1), "round {round}: {out:?}");
        let copied = if round == 0 { "copied 2 versions (2 cases)" } else { "copied 0 versions (0 cases)" };
        assert!(out.stdout.starts_with(copied), "round {round}: {out:?}");
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(
            lines,
            [
                "warning: tag `support@deadbeef` was copied under its old name, which a new tag may not have now: \
                 8 or more hexadecimal digits read as a content id (or the start of one); `casebook tag` can give its \
                 version a name the rules allow"
                    .to_owned(),
                format!(
                    "error: dataset `..` was not copied: a new dataset may not have its name now (`.` and `..` stand \
                     for folders in paths and URLs); it is still in `{shown_from}`: `casebook export '..@latest' \
                     --store {shown_from} --to casebook -o FILE` then `casebook import FILE --dataset NEW_NAME --store \
                     {target}` copies its head under an allowed name"
                ),
                format!(
                    "error: dataset `a/b` was not copied: a new dataset may not have its name now (it holds `/`, \
                     which separates the parts of paths and URLs: use `-` or `_`); it is still in `{shown_from}`: \
                     `casebook export 'a/b@latest' --store {shown_from} --to casebook -o FILE` then `casebook import \
                     FILE --dataset NEW_NAME --store {target}` copies its head under an allowed name"
                ),
            ],
            "round {round}"
        );
    }
    // What was copied is whole: both versions of `support`, and its tag on v1.
    let log = ok(crate::cli::cb(&dir).args(["log", "support", "--store", target]));
    assert_eq!(log.lines().filter(|l| l.starts_with('v')).count(), 2, "{log}");
    let tagged = ok(crate::cli::cb(&dir).args(["show", "support@deadbeef", "--store", target, "--format", "json"]));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&tagged).unwrap()["number"], 1, "{tagged}");
    let listed = ok(crate::cli::cb(&dir).args(["datasets", "--store", target, "--format", "json"]));
    assert_eq!(listed.lines().count(), 1, "{listed}");
    // The way out works: the head of `a/b` under an allowed name.
    let file = dir.join("slash-head.jsonl");
    ok(crate::cli::cb(&dir)
        .args(["export", "a/b@latest", "--store", &from, "--to", "casebook", "-q", "-o"])
        .arg(&file));
    ok(crate::cli::cb(&dir).args(["import", "--dataset", "a-b", "--store", target]).arg(&file));
}
