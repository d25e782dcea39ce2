//! The command line acts where the user thinks it does: every local command that writes says on
//! stderr which store it wrote to (its folder, or its PostgreSQL URL with the password masked),
//! and with `CASEBOOK_URL` set the commands that read a dataset (`show`, `diff`, `history`,
//! `export`, `cases NAME@REF`) read it on the server, printing exactly what they print on the
//! server's own store. A real `casebook serve` on either backend, the real client.
#![allow(clippy::unwrap_used)]

use crate::cli::{Backend, Folder, cb, run};
use crate::remote::{PROJECT, Server, ok, owner, push};

on_both!(every_local_write_names_the_store_it_wrote_to, reading_commands_read_the_server_as_they_read_its_store,);

/// `store FOLDER` or `store URL` (password masked), as the commands name a store.
fn store_named(b: &Backend, dir: &Folder) -> String {
    match b {
        Backend::Embedded => format!("store {}", dir.join(".casebook").display()),
        Backend::Postgres(url) => {
            let masked = casebook_store::redact(url);
            assert!(!masked.contains(&url_password(url)), "{masked}");
            format!("store {masked}")
        }
    }
}

/// The password of a URL `postgres://user:password@host/db`.
fn url_password(url: &str) -> String {
    let userinfo = url.split_once("://").unwrap().1.rsplit_once('@').unwrap().0;
    userinfo.split_once(':').unwrap().1.to_owned()
}

/// `import`, `commit`, `put`, `rm`, `review`, `tag` and `capture`, each on the store as a user
/// names it: stdout as it was, and one more line on stderr naming the version (or tag) written
/// and the store; nothing said when nothing was written; `--quiet` says nothing.
fn every_local_write_names_the_store_it_wrote_to(b: &Backend) {
    let dir = Folder::new();
    ok(b.cb(&dir).arg("init"));
    let store = store_named(b, &dir);
    let file = dir.file(
        "support.jsonl",
        "{\"id\": \"a\", \"input\": \"¿Dónde está mi pedido?\", \"expected\": {\"output\": \"en camino\"}}\n\
         {\"input\": \"払い戻しの期限は?\"}\n{\"input\": \"払い戻しの期限は?\"}\n",
    );
    let stderr_of = |args: &[&str]| {
        let out = run(b.cb(&dir).args(args));
        out.expect_status(0);
        out.stderr
    };
    let file = file.to_str().unwrap();
    let imported = stderr_of(&["import", file, "--dataset", "support"]);
    assert!(imported.ends_with(&format!("wrote support@v1 to {store}\n")), "{imported}");
    let again = stderr_of(&["import", file, "--dataset", "support"]);
    assert!(!again.contains("wrote"), "no version, nothing written: {again}");
    let edited = dir.file("edited.jsonl", "{\"id\": \"a\", \"input\": \"¿Dónde está mi pedido ahora?\"}\n");
    let edited = edited.to_str().unwrap();
    assert_eq!(stderr_of(&["commit", "support", edited]), format!("wrote support@v2 to {store}\n"));
    let more = dir.file("more.jsonl", "{\"id\": \"b\", \"input\": \"Où est ma commande ?\"}\n");
    assert_eq!(stderr_of(&["put", "support", more.to_str().unwrap()]), format!("wrote support@v3 to {store}\n"));
    assert_eq!(stderr_of(&["rm", "support", "b"]), format!("wrote support@v4 to {store}\n"));
    assert_eq!(stderr_of(&["review", "support", "a", "--state", "reviewed"]), format!("wrote support@v5 to {store}\n"));
    assert_eq!(stderr_of(&["tag", "support@v1", "prod"]), format!("wrote tag support@prod to {store}\n"));
    let out = run(b.cb(&dir).args(["-q", "put", "support", more.to_str().unwrap()]));
    assert_eq!((out.status, out.stderr.as_str()), (Some(0), ""), "{out:?}");

    // A capture into the store, in another project: the project is named too.
    let traces = crate::remote::example("traces/genai-agent.json");
    let out = run(b.cb(&dir).args(["--project", "shop", "capture", "--dataset", "prod"]).arg(&traces));
    out.expect_status(0);
    assert!(out.stderr.ends_with(&format!("wrote prod@v1 to {store}, project `shop`\n")), "{out:?}");
}

/// The server's dataset, read through the server with `CASEBOOK_URL` set and read by the store's
/// owner on the store itself: the same stdout for every reading command, text and JSON, with
/// filters, tags and limits; the server named on stderr (except with `--format json`).
fn reading_commands_read_the_server_as_they_read_its_store(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "read");
    let writer = Server::key(b, &dir, PROJECT, "write");
    let v1 = dir.file(
        "setup/v1.jsonl",
        "{\"id\": \"ñandú\", \"input\": \"¿Dónde está mi pedido?\", \"labels\": [\"envío\"], \"metadata\": {\"tier\": null}}\n\
         {\"id\": \"a/b c\", \"input\": \"Où est ma commande ?\", \"labels\": [\"envío\", \"fr\"]}\n\
         {\"input\": \"払い戻しの期限は?\"}\n{\"input\": \"払い戻しの期限は?\"}\n",
    );
    push(&server, &dir, &writer, "support", &v1);
    let v2 = dir.file(
        "setup/v2.jsonl",
        "{\"id\": \"ñandú\", \"input\": \"¿Dónde está mi pedido ahora?\", \"labels\": [\"envío\"], \"metadata\": {\"tier\": \"gold\"}}\n\
         {\"id\": \"a/b c\", \"input\": \"Où est ma commande ?\", \"labels\": [\"envío\", \"fr\"]}\n\
         {\"id\": \"nuevo\", \"input\": \"x\"}\n",
    );
    push(&server, &dir, &writer, "support", &v2);
    // v3 puts `ñandú` back as it was in v1 and removes `nuevo`.
    push(&server, &dir, &writer, "support", &v1);

    // The user's folder has a store of its own, with a dataset of the same name: never read.
    let home = Folder::new();
    ok(cb(&home).arg("init"));
    let local = home.file("local.jsonl", "{\"id\": \"z\", \"input\": \"local\"}\n");
    ok(cb(&home).args(["import", "--dataset", "support"]).arg(&local));
    let on_server = format!("(on the server at {}, project `{PROJECT}`)\n", server.url);

    let reads: &[&[&str]] = &[
        &["show", "support"],
        &["show", "support@v1", "--format", "json"],
        &["show", "support@v2", "ñandú"],
        &["diff", "support@v1", "support@v2"],
        &["diff", "support@v2", "support@v3", "--format", "json"],
        &["history", "support", "ñandú"],
        &["history", "support", "nuevo", "--format", "json"],
        &["export", "support@v2", "--to", "casebook"],
        &["export", "support", "--to", "letta", "--where", "labels contains \"fr\""],
        &["export", "support@v1", "--to", "casebook", "--syntax", "yaml", "--tag", "envío", "--limit", "1"],
        &["cases", "support"],
        &["cases", "support@v1", "--format", "json", "--tag", "fr"],
        &["cases", "support", "--count", "--where", "input contains \"?\""],
        &["cases", "support@v1", "--count", "--format", "json", "--limit", "2"],
        &["cases", "support", "--group-by", "labels", "--limit", "3"],
    ];
    for args in reads {
        let there = run(owner(b, &dir).args(*args));
        there.expect_status(0);
        let out = run(server.client(&home, &token).args(*args));
        out.expect_status(0);
        assert_eq!(out.stdout, there.stdout, "{args:?}: {out:?}");
        let json = args.contains(&"json");
        let said = if json { String::new() } else { on_server.clone() };
        // What the command says on stderr besides (`cases`' count, `export`'s line) is the same too.
        assert_eq!(out.stderr, format!("{said}{}", there.stderr), "{args:?}");
        assert!(!out.stdout.contains("local"), "{args:?}: the store here was read");
    }

    // What is missing on the server is said as the store says it; exit 2.
    for (args, said) in [
        (&["show", "support@v9"][..], "error: dataset `support` has no version `v9`"),
        (&["show", "support@v1", "nuevo"], "error: `support` v1 has no case `nuevo`"),
        (&["history", "support", "zz"], "error: `support` never had a case `zz`"),
        (&["cases", "nothing@v1"], "error: no dataset named `nothing`; the datasets are `support`\n"),
    ] {
        let out = run(server.client(&home, &token).args(args));
        out.expect_status(2);
        assert!(out.stderr.starts_with(said), "{args:?}: {out:?}");
    }

    // A command that cannot work on a server still refuses, and names `--store`.
    let out = run(server.client(&home, &token).args(["store", "check"]));
    out.expect_status(2);
    assert!(out.stderr.contains("`CASEBOOK_URL` is set, and `casebook store` does not work on a server"), "{out:?}");

    // A file is still read as a file.
    let out = run(server.client(&home, &token).args(["cases", "local.jsonl", "--count"]));
    assert_eq!((out.status, out.stdout.as_str()), (Some(0), "1\n"), "{out:?}");
}
