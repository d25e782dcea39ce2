//! A file pulled earlier and pushed later never undoes what the server got meanwhile: `pull`
//! keeps a record of the version it wrote beside the file, and `push` of that file is merged
//! onto the head by the three-way rule (cases changed only on the server are kept, cases
//! changed on both sides are a conflict listed by id, `--force` replaces). And a `pull` over a
//! file that holds the version's values, laid out otherwise, says it is up to date. A real
//! `casebook serve` on either backend, the real client.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::Value;

use crate::cli::{Backend, Folder, run};
use crate::remote::{PROJECT, Server, example, ok, owner, push, versions};

on_both!(
    a_pulled_file_pushed_later_keeps_what_the_server_got_meanwhile,
    a_pulled_letta_file_is_merged_too,
    a_pull_after_a_push_or_a_reformat_is_up_to_date,
    a_file_pushed_again_builds_on_the_version_its_last_push_made,
    too_many_kept_cases_are_not_recorded_and_the_next_push_refuses,
);

/// The cases of a version as the store gives them (native JSON), by id.
fn exported(b: &Backend, dir: &Folder, name: &str) -> Vec<Value> {
    ok(owner(b, dir).args(["export", name, "--to", "casebook", "-q"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `(id, input)` of each case, in order.
fn inputs(cases: &[Value]) -> Vec<(String, String)> {
    cases
        .iter()
        .filter(|c| c.get("$dataset").is_none())
        .map(|c| (c["id"].as_str().unwrap().to_owned(), c["input"].to_string()))
        .collect()
}

/// Replaces `from` (which must be there once) with `to` in the file.
#[track_caller]
fn edit(path: &Path, from: &str, to: &str) {
    let text = fs_err::read_to_string(path).unwrap();
    assert_eq!(text.matches(from).count(), 1, "`{from}` in {text}");
    fs_err::write(path, text.replace(from, to)).unwrap();
}

const CASES: &str = "\
{\"id\": \"1\", \"input\": \"Wie lange dauert eine Erstattung?\", \"expected\": {\"output\": \"5 Werktage\"}}
{\"id\": \"2\", \"input\": \"Où est ma commande ?\", \"expected\": {\"output\": \"en route\"}}
{\"id\": \"3\", \"input\": \"払い戻しの期限は?\", \"expected\": {\"output\": \"30日\"}}
{\"id\": \"4\", \"input\": \"Où est ma commande ?\", \"expected\": {\"output\": \"livrée\"}}
";

/// The scenario: pulled at v2; the server changes case 1, removes case 4 and adds case
/// 5 (v3); the file's case 3 is edited and pushed: v4 has case 3's edit and every change of v3.
/// Then case 1 edited in the file too: a conflict naming `1`, exit 1, nothing written; with
/// `--force` the file replaces the head.
fn a_pulled_file_pushed_later_keeps_what_the_server_got_meanwhile(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    let first = dir.file("setup/support.jsonl", CASES);
    push(&server, &dir, &token, "support", &first);
    let second = dir.file("setup/second.jsonl", CASES.replace("en route", "en route (colis 4411)"));
    push(&server, &dir, &token, "support", &second);

    // Bob pulls v2.
    let bob = dir.join("bob");
    fs_err::create_dir_all(&bob).unwrap();
    let said = ok(server.client(&dir, &token).current_dir(&bob).args(["pull", "--dataset", "support"]));
    assert_eq!(said, "wrote `support.jsonl`: support@v2, 4 cases (casebook)\n");
    let file = bob.join("support.jsonl");
    let record: Value =
        serde_json::from_str(&fs_err::read_to_string(bob.join(".support.jsonl.casebook-pull")).unwrap()).unwrap();
    assert_eq!((&record["dataset"], &record["version"]), (&Value::from("support"), &Value::from(2)), "{record}");

    // Meanwhile, straight into the store: case 1 changed, case 4 removed, case 5 added (v3).
    let change = dir.file(
        "setup/change.jsonl",
        "{\"id\": \"1\", \"input\": \"Wie lange dauert eine Erstattung genau?\", \"expected\": {\"output\": \"5 Werktage\"}}\n\
         {\"id\": \"5\", \"input\": \"Où est ma commande ?\", \"expected\": {\"output\": \"perdue\"}}\n",
    );
    ok(owner(b, &dir).args(["put", "support"]).arg(&change));
    ok(owner(b, &dir).args(["rm", "support", "4"]));
    assert_eq!(versions(b, &dir, "support").len(), 4);

    // Bob edits case 3 and pushes: v5 keeps every change made on the server since v2.
    edit(&file, "30日", "30日以内");
    let out = run(server.client(&dir, &token).current_dir(&bob).args(["push", "--dataset", "support"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("pushed support v5 ("), "{out:?}");
    assert!(out.stdout.ends_with(": 4 cases, +0 -0 ~1\n"), "{out:?}");
    assert_eq!(
        out.stderr,
        "kept 3 cases changed on the server since v2 that `support.jsonl` does not have: `casebook pull --dataset support --overwrite` brings them into the file\n"
    );
    let v5 = exported(b, &dir, "support");
    assert_eq!(
        inputs(&v5),
        [
            ("1", "\"Wie lange dauert eine Erstattung genau?\""),
            ("2", "\"Où est ma commande ?\""),
            ("3", "\"払い戻しの期限は?\""),
            ("5", "\"Où est ma commande ?\""),
        ]
        .map(|(id, input)| (id.to_owned(), input.to_owned()))
    );
    assert_eq!(v5[1]["expected"]["output"], "en route (colis 4411)");
    assert_eq!(v5[2]["expected"]["output"], "30日以内");

    // Case 1 edited in the file as well: changed on both sides since v2 (the file still holds
    // v2's case 1, which v5 is recorded to lack).
    edit(&file, "Wie lange dauert eine Erstattung?", "Wie lange dauert die Erstattung?");
    let out = run(server.client(&dir, &token).current_dir(&bob).args(["push", "--dataset", "support"]));
    out.expect_status(1);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "nothing was pushed: `support.jsonl` and support@v5 both changed case `1` since the file last had the server's content for them\n\
         hint: `casebook pull --dataset support --save-as-new` writes v5 beside the file; merge it by hand, then `casebook push --force` replaces the head with the file\n"
    );
    assert_eq!(versions(b, &dir, "support").len(), 5);
    assert_eq!(exported(b, &dir, "support"), v5);
    // The server's answer names the ids, for programs.
    let out =
        run(server.client(&dir, &token).current_dir(&bob).args(["push", "--dataset", "support", "--format", "json"]));
    out.expect_status(1);
    let said: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(said, serde_json::json!({"pushed": false, "conflicts": ["1"], "base": 5, "head": 5}));

    // `--force`: the file is the new head, whatever the server had.
    let out = run(server.client(&dir, &token).current_dir(&bob).args(["push", "--dataset", "support", "--force"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("pushed support v6 ("), "{out:?}");
    let v6 = exported(b, &dir, "support");
    assert_eq!(inputs(&v6).into_iter().map(|(id, _)| id).collect::<Vec<_>>(), ["1", "2", "3", "4"], "{v6:?}");
    assert_eq!(v6[0]["input"], "Wie lange dauert die Erstattung?");
    // And the file now holds v6: the next push of it builds on v6.
    let record: Value =
        serde_json::from_str(&fs_err::read_to_string(bob.join(".support.jsonl.casebook-pull")).unwrap()).unwrap();
    assert_eq!(record["version"], 6, "{record}");
}

/// The record works for any format: a letta file pulled, edited and pushed keeps a case the
/// server changed meanwhile (so the letta file read back gives the stored cases' content).
fn a_pulled_letta_file_is_merged_too(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    push(&server, &dir, &token, "support", &example("letta/support.jsonl"));
    let bob = dir.join("bob");
    fs_err::create_dir_all(&bob).unwrap();
    ok(server.client(&dir, &token).current_dir(&bob).args(["pull", "--dataset", "support"]));
    let file = bob.join("support.jsonl");
    let pulled = fs_err::read_to_string(&file).unwrap();

    // Unchanged, it is the head: no version.
    let out = ok(server.client(&dir, &token).current_dir(&bob).args(["push", "--dataset", "support"]));
    assert!(out.starts_with("up to date: support v1 on "), "{out}");

    // The server changes case 4's queue; Bob changes case 1's answer.
    let change = dir.file(
        "change.jsonl",
        "{\"id\": 4, \"input\": \"Create a ticket for a damaged parcel.\", \"agent_args\": {\"queue\": \"returns\", \"priority\": \"high\"}, \"ground_truth\": \"ticket created\", \"tags\": [\"tool_usage\"]}\n",
    );
    ok(owner(b, &dir).args(["put", "support", "--from", "letta"]).arg(&change));
    edit(&file, "5 business days", "five business days");
    let out = run(server.client(&dir, &token).current_dir(&bob).args(["push", "--dataset", "support"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("pushed support v3 ("), "{out:?}");
    assert!(out.stdout.ends_with(": 4 cases, +0 -0 ~1\n"), "{out:?}");
    let letta = ok(owner(b, &dir).args(["export", "support", "--to", "letta", "-q"]));
    assert!(letta.contains("\"queue\": \"returns\"") || letta.contains("\"queue\":\"returns\""), "{letta}");
    assert!(letta.contains("five business days"), "{letta}");

    // The server's case 1 changed after Bob's push; his file still has what he pushed: the
    // server's is kept (his own push is not a change of his to merge again).
    let change = dir.file("change.jsonl", pulled.lines().next().unwrap().replace("5 business days", "5 days"));
    ok(owner(b, &dir).args(["put", "support", "--from", "letta"]).arg(&change));
    let out = run(server.client(&dir, &token).current_dir(&bob).args(["push", "--dataset", "support"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("up to date: support v4 on "), "{out:?}");
    assert!(out.stderr.starts_with("kept 2 cases changed on the server since v3 "), "{out:?}");
    // Bob edits case 1 again, never having seen the server's change: a conflict.
    edit(&file, "five business days", "five working days");
    let out = run(server.client(&dir, &token).current_dir(&bob).args(["push", "--dataset", "support"]));
    out.expect_status(1);
    assert!(
        out.stderr
            .starts_with("nothing was pushed: `support.jsonl` and support@v4 both changed case `1` since the file"),
        "{out:?}"
    );
    assert_eq!(versions(b, &dir, "support").len(), 4);
}

/// `pull` over the file just pushed, or over the same values laid out otherwise, leaves the
/// file alone and says it is up to date; other values still need an answer.
fn a_pull_after_a_push_or_a_reformat_is_up_to_date(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    let file = dir.file("geography.json", fs_err::read_to_string(example("voltagent/geography.json")).unwrap());
    push(&server, &dir, &token, "geography", &file);
    let pull = || run(server.client(&dir, &token).args(["pull", "--dataset", "geography"]));

    // Right after the push, in the same folder: the file's layout is its author's, not pull's.
    let out = pull();
    out.expect_status(0);
    assert_eq!(out.stdout, "up to date: `geography.json` is geography@v1\n");
    assert_eq!(
        fs_err::read_to_string(&file).unwrap(),
        fs_err::read_to_string(example("voltagent/geography.json")).unwrap()
    );

    // Re-indented, keys reordered in a case: the same values.
    let value: Value = serde_json::from_str(&fs_err::read_to_string(&file).unwrap()).unwrap();
    let mut text = serde_json::to_string(&value).unwrap();
    text = text.replace(
        "{\"name\":\"canada\",\"input\":\"What is the capital of Canada?\"",
        "{\"input\":\"What is the capital of Canada?\",\"name\":\"canada\"",
    );
    assert!(text.contains("{\"input\":\"What is the capital of Canada?\",\"name\":\"canada\""), "{text}");
    fs_err::write(&file, &text).unwrap();
    let out = pull();
    out.expect_status(0);
    assert_eq!(out.stdout, "up to date: `geography.json` is geography@v1\n");
    assert_eq!(fs_err::read_to_string(&file).unwrap(), text);

    // Another value: the usual question.
    fs_err::write(&file, text.replace("Ottawa, Ontario", "Ottawa (Ontario)")).unwrap();
    let out = pull();
    out.expect_status(2);
    assert_eq!(
        out.stderr,
        "error: `geography.json` exists and differs from geography@v1: pass `--overwrite` to replace it (or `--save-as-new` to write `geography-remote.json` beside it, or `--cancel-on-conflict` to write nothing)\n"
    );

    // A file that does not read is not up to date either.
    fs_err::write(&file, "{\"data\": [").unwrap();
    pull().expect_status(2);
}

/// The API's `base`: a whole content id of a version of the dataset, not with `parent`.
#[test]
fn a_base_that_names_no_version_is_refused_and_nothing_is_written() {
    let b = Backend::Embedded;
    let dir = Folder::new();
    let server = Server::start(&b, &dir, &[]);
    let token = Server::key(&b, &dir, PROJECT, "write");
    let file = dir.file("support.jsonl", CASES);
    push(&server, &dir, &token, "support", &file);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let import = |query: &str| {
        runtime.block_on(async {
            let response = reqwest::Client::new()
                .post(format!("{}/api/v1/projects/{PROJECT}/datasets/support/import?{query}", server.url))
                .bearer_auth(&token)
                .body(CASES.replace("5 Werktage", "fünf Werktage"))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
    };
    let zeros = "0".repeat(64);
    assert_eq!(
        import(&format!("base={zeros}&parent=v1")),
        (400, "`parent` and `base` cannot both be given: `base` merges onto the head, `parent` replaces it".into())
    );
    assert_eq!(import("base=v1"), (400, "`base`: `v1` is not a version's content id (64 hexadecimal digits)".into()));
    assert_eq!(
        import(&format!("base={zeros}")),
        (404, "`base`: dataset `support` has no version with content id `000000000000`".into())
    );
    // `base_except`: with `base` only, a JSON object of content ids (or nulls) by case id.
    assert_eq!(
        import("base_except=%7B%7D"),
        (400, "`base_except` needs `base`: it names the cases the file holds otherwise".into())
    );
    let (status, message) = import(&format!("base={zeros}&base_except=%5B1%5D"));
    assert_eq!(status, 400);
    assert!(message.starts_with("`base_except`: invalid type: sequence, expected a map"), "{message}");
    assert_eq!(
        import(&format!("base={zeros}&base_except=%7B%221%22%3A%22%2Babc%22%7D")),
        (400, "`base_except`: case `1`: `+abc` is not a content id (64 hexadecimal digits)".into())
    );
    assert_eq!(versions(&b, &dir, "support").len(), 1);
}

/// Upserts `cases` (native JSON lines) through the API, as a console edit or another client
/// would: a new version on the head.
fn api_upsert(server: &Server, token: &str, name: &str, cases: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (status, report) = runtime.block_on(async {
        let response = reqwest::Client::new()
            .post(format!(
                "{}/api/v1/projects/{PROJECT}/datasets/{name}/import?mode=upsert&filename=edit.jsonl",
                server.url
            ))
            .bearer_auth(token)
            .body(cases.to_owned())
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json::<Value>().await.unwrap())
    });
    assert_eq!(status, 201, "{report}");
}

/// The record beside a pulled file.
fn record(file: &Path) -> Value {
    let name = file.file_name().unwrap().to_string_lossy();
    serde_json::from_str(&fs_err::read_to_string(file.with_file_name(format!(".{name}.casebook-pull"))).unwrap())
        .unwrap()
}

/// Pulled at v2; case 1 edited through the API (v3); the file pushed with case 2 edited (v4
/// keeps v3's case 1, which the file still holds as at v2); case 2 edited again and pushed: v5,
/// no conflict (the push that made v4 is not a change made on the server), case 1 still as in
/// v3. The server changing case 1 again meanwhile is kept too; the server changing case 2 while
/// the file does is still a conflict. A pull then brings the file to the head.
fn a_file_pushed_again_builds_on_the_version_its_last_push_made(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    push(&server, &dir, &token, "support", &dir.file("setup/support.jsonl", CASES));
    let second = dir.file("setup/second.jsonl", CASES.replace("en route", "en route (colis 4411)"));
    push(&server, &dir, &token, "support", &second);
    let bob = dir.join("bob");
    fs_err::create_dir_all(&bob).unwrap();
    let client = || {
        let mut cmd = server.client(&dir, &token);
        cmd.current_dir(&bob);
        cmd
    };
    ok(client().args(["pull", "--dataset", "support"]));
    let file = bob.join("support.jsonl");

    // v3: case 1 edited through the API.
    let one = "{\"id\": \"1\", \"input\": \"Wie lange dauert eine Erstattung genau?\", \"expected\": {\"output\": \"5 Werktage\"}}\n";
    api_upsert(&server, &token, "support", one);

    // v4: Bob's case 2 edit, with v3's case 1 kept.
    edit(&file, "en route (colis 4411)", "en route (colis 4411, Lyon)");
    let out = run(client().args(["push", "--dataset", "support"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("pushed support v4 ("), "{out:?}");
    assert_eq!(
        out.stderr,
        "kept 1 case changed on the server since v2 that `support.jsonl` does not have: `casebook pull --dataset support --overwrite` brings it into the file\n"
    );
    let v4 = exported(b, &dir, "support");
    assert_eq!(v4[0]["input"], "Wie lange dauert eine Erstattung genau?");
    // The record: v4, except case 1, which the file holds as v2 had it.
    let said = record(&file);
    let v2_case_1 = &versions_cases(b, &dir, 2)["1"];
    assert_eq!(said["version"], 4, "{said}");
    assert_eq!(said["except"], serde_json::json!({"1": v2_case_1}), "{said}");

    // Case 2 edited again: v5, no conflict, case 1 still v3's.
    edit(&file, "en route (colis 4411, Lyon)", "en route (colis 4411, Lyon, demain)");
    let out = run(client().args(["push", "--dataset", "support"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("pushed support v5 ("), "{out:?}");
    assert!(out.stdout.ends_with(": 4 cases, +0 -0 ~1\n"), "{out:?}");
    assert_eq!(
        out.stderr,
        "kept 1 case changed on the server since v4 that `support.jsonl` does not have: `casebook pull --dataset support --overwrite` brings it into the file\n"
    );
    let v5 = exported(b, &dir, "support");
    assert_eq!(v5[0]["input"], "Wie lange dauert eine Erstattung genau?");
    assert_eq!(v5[1]["expected"]["output"], "en route (colis 4411, Lyon, demain)");
    assert_eq!(inputs(&v5)[2..], inputs(&v4)[2..]);
    assert_eq!(record(&file)["version"], 5);

    // The file does not hold v5 (its case 1 is older): a pull does not call it up to date.
    let out = run(client().args(["pull", "--dataset", "support"]));
    out.expect_status(2);
    assert!(out.stderr.contains("exists and differs from support@v5"), "{out:?}");

    // The server changes case 1 again (v6) and Bob case 3: v7 keeps the server's case 1.
    api_upsert(&server, &token, "support", &one.replace("genau?", "genau, bitte?"));
    edit(&file, "30日", "30日以内");
    let out = run(client().args(["push", "--dataset", "support"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("pushed support v7 ("), "{out:?}");
    let v7 = exported(b, &dir, "support");
    assert_eq!(v7[0]["input"], "Wie lange dauert eine Erstattung genau, bitte?");
    assert_eq!(v7[2]["expected"]["output"], "30日以内");

    // A real conflict: the server changes case 2 (v8) while Bob edits it too.
    api_upsert(
        &server,
        &token,
        "support",
        "{\"id\": \"2\", \"input\": \"Où est ma commande ?\", \"expected\": {\"output\": \"livrée hier\"}}\n",
    );
    edit(&file, "en route (colis 4411, Lyon, demain)", "en route (colis 4411, Lyon, lundi)");
    let out = run(client().args(["push", "--dataset", "support"]));
    out.expect_status(1);
    assert!(
        out.stderr.starts_with(
            "nothing was pushed: `support.jsonl` and support@v8 both changed case `2` since the file last had the server's content for them\n"
        ),
        "{out:?}"
    );
    assert_eq!(versions(b, &dir, "support").len(), 8);

    // A pull over the file: the head, and a record without exceptions.
    ok(client().args(["pull", "--dataset", "support", "--overwrite"]));
    let said = record(&file);
    assert_eq!((said["version"].as_u64(), said.get("except")), (Some(8), None), "{said}");
    let out = run(client().args(["push", "--dataset", "support"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("up to date: support v8 on "), "{out:?}");
}

/// Case id → content id (hex) of each case of `support` at `version`, from the store.
fn versions_cases(b: &Backend, dir: &Folder, version: u64) -> serde_json::Map<String, Value> {
    ok(owner(b, dir).args(["export", &format!("support@v{version}"), "--to", "casebook", "-q"]))
        .lines()
        .filter(|l| !l.starts_with("{\"$dataset\""))
        .map(|l| {
            let case: Value = serde_json::from_str(l).unwrap();
            let cid = casebook_canon::content_id_of_json(casebook_canon::Kind::Case, l).unwrap();
            (case["id"].as_str().unwrap().to_owned(), Value::from(cid))
        })
        .collect()
}

/// A push that keeps more server changes than a record holds (over 64 KiB of them: here 300
/// cases with 200-character ids) says the record was not kept, and leaves the pull's record as
/// it was: the next push merges from the pulled version again, where the case that push changed
/// now counts as changed on both sides, a conflict; nothing is pushed and the head stays. The
/// dataset is native JSONL, one case a line, in the shape of the README's `data.jsonl`.
fn too_many_kept_cases_are_not_recorded_and_the_next_push_refuses(b: &Backend) {
    let dir = Folder::new();
    let server = Server::start(b, &dir, &[]);
    let token = Server::key(b, &dir, PROJECT, "write");
    let id = |i: usize| format!("{i:03}-{}", "x".repeat(196));
    let case = |i: usize, input: &str| format!("{{\"id\": \"{}\", \"input\": \"{input}\"}}\n", id(i));
    let all: String = (0..300).map(|i| case(i, "as pulled")).chain([case(999, "mine")]).collect();
    push(&server, &dir, &token, "big", &dir.file("setup/big.jsonl", &all));
    let bob = dir.join("bob");
    fs_err::create_dir_all(&bob).unwrap();
    let client = || {
        let mut cmd = server.client(&dir, &token);
        cmd.current_dir(&bob);
        cmd
    };
    ok(client().args(["pull", "--dataset", "big"]));
    let file = bob.join("big.jsonl");
    let pulled = record(&file);
    assert_eq!(pulled["version"], 1);

    // v2: the 300 cases changed on the server; Bob changes his own case (v3 keeps the 300).
    api_upsert(&server, &token, "big", &(0..300).map(|i| case(i, "changed there")).collect::<String>());
    edit(&file, "\"mine\"", "\"mine, edited\"");
    let out = run(client().args(["push", "--dataset", "big"]));
    out.expect_status(0);
    assert!(out.stdout.starts_with("pushed big v3 ("), "{out:?}");
    assert_eq!(
        out.stderr,
        "kept 300 cases changed on the server since v1 that `big.jsonl` does not have: `casebook pull --dataset big \
--overwrite` brings them into the file\nnote: the cases kept are not recorded beside `big.jsonl` (too many, or the \
server does not list them): its next push merges from v1 again, where the cases pushed now count as changed on both \
sides; pull before editing them again\n"
    );
    let kept = record(&file);
    assert_eq!((&kept["version"], &kept["id"], kept.get("except")), (&pulled["version"], &pulled["id"], None));
    let v3 = exported(b, &dir, "big");
    assert_eq!(v3.iter().filter(|c| c["input"] == "changed there").count(), 300);

    // Bob edits his case again: it changed on both sides since v1, so nothing is pushed.
    edit(&file, "\"mine, edited\"", "\"mine, edited twice\"");
    let out = run(client().args(["push", "--dataset", "big"]));
    out.expect_status(1);
    assert!(
        out.stderr.starts_with(&format!(
            // A long id is quoted by its first 60 characters and its size.
            "nothing was pushed: `big.jsonl` and big@v3 both changed case `999-{}… (200 bytes)` since v1, the version the \
file was pulled at\n",
            "x".repeat(56)
        )),
        "{out:?}"
    );
    assert_eq!(versions(b, &dir, "big").len(), 3);
    assert_eq!(exported(b, &dir, "big"), v3);
}
