//! Values read the way each system reads them, and versions that hold everything they need:
//! mas-lab manifests with their items in another file, seed files kept with the version, letta
//! CSV cells as letta reads them, and the row each case had in its file.

use serde_json::{Value, json};

use crate::cli::{Folder, Loc, at, casebook, cb, jsonl, run, to_native, validate};

fn ok(cmd: &mut assert_cmd::Command) -> String {
    let out = run(cmd);
    assert_eq!(out.status, Some(0), "{out:?}");
    out.stdout
}

const MANIFEST: &str = "apiVersion: lab/v1
kind: Dataset
metadata:
  name: trips
spec:
  path: benchmark.json
  format: json
";

const ITEMS: &str = r#"{
  "dataset": "trip-planner-benchmark",
  "groups": {"easy": "short trips"},
  "count": 2,
  "items": [
    {"id": 1, "inputs": {"user": [{"role": "user", "content": "Plan a day in Paris"}], "memory_seeds": "./seeds/bob.yaml"}, "group": "easy"},
    {"id": 2, "inputs": {"user": [{"role": "user", "content": "Zürich → 東京, 12:45?"}]}, "group": "easy"}
  ]
}
"#;

const SEEDS: &str = "apiVersion: memory-seed/v1
kind: MemorySeed
entries:
  - key: preference
    content: Bob likes night trains
";

/// A mas-lab manifest whose items are in `benchmark.json`, with a seed file.
fn trips(dir: &Folder, folder: &str) -> std::path::PathBuf {
    dir.file(&format!("{folder}/benchmark.json"), ITEMS);
    dir.file(&format!("{folder}/seeds/bob.yaml"), SEEDS);
    dir.file(&format!("{folder}/manifest.yaml"), MANIFEST)
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&fs_err::read_to_string(path).expect("the file")).expect("JSON")
}

#[test]
fn a_manifest_reads_its_items_from_spec_path_and_is_written_back_as_two_files() {
    let dir = Folder::new();
    let manifest = trips(&dir, "in");
    validate(&manifest).expect_status(0);
    let (_, cases) = to_native(&manifest);
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[1]["input"], "Zürich → 東京, 12:45?");
    assert_eq!(cases[0]["labels"], json!(["group:easy"]));

    // Written elsewhere: the manifest still names its items file, which is written beside it.
    fs_err::create_dir_all(dir.join("out")).expect("a folder");
    ok(cb(&dir).args(["convert", "in/manifest.yaml", "--to", "maslab", "-o", "out/manifest.yaml"]));
    let written = fs_err::read_to_string(dir.join("out/manifest.yaml")).expect("the manifest");
    assert!(written.contains("path: benchmark.json"), "{written}");
    assert!(!written.contains("items"), "{written}");
    let items = read_json(&dir.join("out/benchmark.json"));
    let original: Value = serde_json::from_str(ITEMS).expect("JSON");
    // The items file keeps its own keys (its `dataset` name, `groups`, `count`) and its items;
    // the seed file is outside the output's folder, so its seeds are now inline.
    for key in ["dataset", "groups", "count"] {
        assert_eq!(items[key], original[key], "{key}");
    }
    assert_eq!(items["items"][1], original["items"][1]);
    assert_eq!(items["items"][0]["inputs"]["memory_seeds"][0]["content"], "Bob likes night trains");
    let (_, back) = to_native(&dir.join("out/manifest.yaml"));
    assert_eq!(back[1], cases[1]);
}

#[test]
fn items_file_problems_are_located_in_the_file_they_are_in() {
    let dir = Folder::new();
    dir.file("bad/benchmark.json", "{\"items\": [\n  {\"id\": \"a\", \"inputs\": {\"user\": \"not a list\"}}\n]}\n");
    let manifest = dir.file("bad/manifest.yaml", MANIFEST);
    let out = validate(&manifest);
    out.expect_status(1);
    let diagnostics = out.diagnostics();
    assert_eq!(out.locations(), [at("E-wrong-type", 2, 34, "/items/0/inputs/user")], "{diagnostics:?}");
    assert!(diagnostics[0]["file"].as_str().is_some_and(|f| f.ends_with("bad/benchmark.json")), "{diagnostics:?}");

    // A path that leaves the manifest's folder, and one that names no file.
    let escaping = dir.file("esc/manifest.yaml", MANIFEST.replace("benchmark.json", "../in/benchmark.json"));
    validate(&escaping).expect_status(1);
    assert_eq!(validate(&escaping).locations(), [at("E-items-path-escapes", 6, 9, "/spec/path")]);
    let missing = dir.file("missing/manifest.yaml", MANIFEST);
    assert_eq!(validate(&missing).locations(), [at("E-items-path-missing", 6, 9, "/spec/path")]);
    // A format casebook does not read items in is reported on `format`.
    dir.file("csv/benchmark.json", ITEMS);
    let csv = dir.file("csv/manifest.yaml", MANIFEST.replace("format: json", "format: csv"));
    let out = validate(&csv);
    assert_eq!(out.locations(), [at("E-invalid-value", 7, 11, "/spec/format")]);
    assert_eq!(out.diagnostics()[0]["message"], "casebook cannot read items files in `csv`");
}

#[test]
fn a_carried_seed_file_may_not_name_a_path_outside_the_dataset_folder() {
    let dir = Folder::new();
    let file = dir.file(
        "cases.jsonl",
        "{\"id\": \"a\", \"input\": \"hi\", \"memory_seeds\": {\"file\": \"../../etc/seeds.yaml\", \"content\": []}}\n",
    );
    let out = validate(&file);
    out.expect_status(1);
    assert_eq!(out.locations(), [at("E-seed-path-escapes", 1, 53, "/memory_seeds/file")]);
}

#[test]
fn convert_never_writes_over_the_items_file_it_reads() {
    let dir = Folder::new();
    trips(&dir, "in");
    let out = run(cb(&dir).args(["convert", "in/manifest.yaml", "--to", "maslab", "-o", "in/copy.yaml"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("would be written over the input's own"), "{}", out.stderr);
    assert_eq!(fs_err::read_to_string(dir.join("in/benchmark.json")).expect("the items"), ITEMS);
    assert!(!dir.join("in/copy.yaml").exists());
}

#[test]
fn a_maslab_json_dataset_is_named_by_its_dataset_key() {
    let dir = Folder::new();
    let file = dir.file(
        "bench.json",
        r#"{"dataset": "gsm-small", "count": 1, "items": [{"id": "q1", "inputs": {"user": [{"role": "user", "content": "2+2?"}]}}]}"#,
    );
    let out = run(cb(&dir).args(["inspect", "--format", "json"]).arg(&file));
    assert_eq!(out.status, Some(0), "{out:?}");
    let report: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(report["name"], "gsm-small");
    ok(cb(&dir).args(["convert", "bench.json", "--to", "maslab", "-o", "again.json"]));
    let again = read_json(&dir.join("again.json"));
    assert_eq!(again, read_json(&file));
}

#[test]
fn a_version_holds_its_seed_files() {
    let dir = Folder::new();
    trips(&dir, "in");
    ok(cb(&dir).arg("init"));
    ok(cb(&dir).args(["import", "in/manifest.yaml", "--dataset", "trips"]));
    // A changed seed file is a new version, and the diff says what changed in it.
    dir.file("in/seeds/bob.yaml", SEEDS.replace("night trains", "early flights"));
    let out = ok(cb(&dir).args(["commit", "trips", "in/manifest.yaml"]));
    assert!(out.contains("~1"), "{out}");
    let diff = ok(cb(&dir).args(["diff", "trips@v1", "trips@v2"]));
    assert!(
        diff.contains(
            "/memory_seeds/content/entries/0/content: \"Bob likes night trains\" → \"Bob likes early flights\""
        ),
        "{diff}"
    );
    let history = ok(cb(&dir).args(["history", "trips", "1"]));
    assert!(history.contains("/memory_seeds/content/entries/0/content"), "{history}");
    assert!(history.contains("Bob likes early flights"), "{history}");
    // The files on disk are gone: the store still has everything.
    fs_err::remove_dir_all(dir.join("in")).expect("remove the input");
    for folder in ["v1", "v2"] {
        fs_err::create_dir_all(dir.join(folder)).expect("a folder");
    }
    ok(cb(&dir).args(["export", "trips@v1", "--to", "maslab", "-o", "v1/manifest.yaml"]));
    let seeds = fs_err::read_to_string(dir.join("v1/seeds/bob.yaml")).expect("the seed file is written back");
    assert!(seeds.contains("Bob likes night trains"), "{seeds}");
    validate(&dir.join("v1/manifest.yaml")).expect_status(0);
    let (_, exported) = to_native(&dir.join("v1/manifest.yaml"));
    assert_eq!(exported[0]["memory_seeds"]["file"], "./seeds/bob.yaml");

    // Another version's seed file is not written over the one already there.
    let out = run(cb(&dir).args(["export", "trips@v2", "--to", "maslab", "--overwrite", "-o", "v1/manifest.yaml"]));
    assert_eq!(out.status, Some(2), "{out:?}");
    assert!(out.stderr.contains("is already there with other content"), "{}", out.stderr);
    assert!(fs_err::read_to_string(dir.join("v1/seeds/bob.yaml")).expect("kept").contains("night trains"));
    // ... unless the seeds go inline.
    ok(cb(&dir).args(["export", "trips@v2", "--to", "maslab", "--inline-seeds", "-o", "v2/manifest.yaml"]));
    assert!(!dir.join("v2/seeds").exists());
    let items = read_json(&dir.join("v2/benchmark.json"));
    assert_eq!(items["items"][0]["inputs"]["memory_seeds"][0]["content"], "Bob likes early flights");
}

#[test]
fn convert_names_seed_files_from_where_the_output_lands() {
    let dir = Folder::new();
    dir.file("data/sub/seeds/bob.yaml", SEEDS);
    dir.file(
        "data/sub/trips.yaml",
        "name: trips\nitems:\n  - id: a\n    prompt: hello\n    memory_seeds: ./seeds/bob.yaml\n",
    );
    // Same folder: the path as it was. A parent folder: the path from there. Elsewhere: inline.
    for (output, expected) in [
        ("data/sub/copy.yaml", json!("./seeds/bob.yaml")),
        ("data/copy.yaml", json!("sub/seeds/bob.yaml")),
        (
            "other/copy.yaml",
            json!([{"source": "preference", "content": "Bob likes night trains", "key": "preference"}]),
        ),
    ] {
        fs_err::create_dir_all(dir.join(output).parent().expect("a folder")).expect("a folder");
        ok(cb(&dir).args(["convert", "data/sub/trips.yaml", "--to", "maslab", "-o", output]));
        validate(&dir.join(output)).expect_status(0);
        let text = fs_err::read_to_string(dir.join(output)).expect("the output");
        let node = casebook_formats::yaml::parse(&text).expect("YAML");
        let value = node.to_value(&casebook_formats::pointer::Ptr::ROOT).expect("JSON");
        assert_eq!(value["items"][0]["memory_seeds"], expected, "{output}:\n{text}");
    }
}

#[test]
fn letta_csv_cells_are_stripped_as_letta_does_and_written_back_as_they_were() {
    let dir = Folder::new();
    let text = "input,ground_truth\n\"  What is 2+2?\n\",\" 4 \"\nplain,answer\n";
    let file = dir.file("qa.csv", text);
    let (_, cases) = to_native(&file);
    assert_eq!(cases[0]["input"], "What is 2+2?");
    assert_eq!(cases[0]["expected"]["output"], "4");
    ok(cb(&dir).args(["convert", "qa.csv", "--to", "letta", "-o", "back.csv"]));
    assert_eq!(fs_err::read_to_string(dir.join("back.csv")).expect("the output"), text);
}

#[test]
fn values_letta_csv_cannot_give_back_are_refused_or_dropped_with_a_warning() {
    let dir = Folder::new();
    dir.file(
        "rows.jsonl",
        "{\"input\": \" padded \", \"ground_truth\": \"4\"}\n{\"input\": \"q\", \"ground_truth\": \"4\", \"extra\": {\"a\": 1}}\n{\"input\": \"q2\", \"ground_truth\": null}\n",
    );
    let out = run(cb(&dir).args(["--format", "json", "convert", "rows.jsonl", "--to", "letta", "-o", "rows.csv"]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let diagnostics = out.stderr_diagnostics();
    let messages: Vec<String> = diagnostics.iter().map(|d| d["message"].as_str().unwrap_or("").to_owned()).collect();
    assert!(messages[0].contains("input (letta strips the whitespace around it)"), "{messages:?}");
    assert!(messages[1].contains("extra (letta reads this column back as text)"), "{messages:?}");
    assert!(messages[2].contains("expected.output (an empty cell reads back as missing, not null)"), "{messages:?}");
    assert_eq!(diagnostics.iter().map(|d| d["line"].as_u64().unwrap_or(0)).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(!dir.join("rows.csv").exists());

    let out = run(cb(&dir).args(["convert", "rows.jsonl", "--to", "letta", "--lossy", "-o", "rows.csv"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert_eq!(
        fs_err::read_to_string(dir.join("rows.csv")).expect("the output"),
        "input,ground_truth\npadded,4\nq,4\nq2,\n"
    );
}

#[test]
fn rows_without_ids_can_be_joined_with_letta_results_by_their_row() {
    let dir = Folder::new();
    let file = dir.file(
        "qa.jsonl",
        "{\"input\": \"hi\", \"ground_truth\": \"hi\"}\n{\"id\": 7, \"input\": \"yo\", \"ground_truth\": \"yo\"}\n{\"input\": \"hi\", \"ground_truth\": \"hi\"}\n",
    );
    let out = run(cb(&dir).args(["inspect", "--format", "json"]).arg(&file));
    let report: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let rows: Vec<(u64, String)> = report["derived"]
        .as_array()
        .expect("derived ids")
        .iter()
        .map(|d| (d["row"].as_u64().expect("a row"), d["id"].as_str().expect("an id").to_owned()))
        .collect();
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 2]);
    // The third row is wholly identical to the first: numbered as its second copy.
    let rest = casebook_canon::Variant::of(&serde_json::json!({"expected": {"output": "hi"}})).unwrap();
    assert_eq!(rows[1].1, rest.id(&rows[0].1, 2));
    let human = ok(cb(&dir).arg("inspect").arg(&file));
    assert!(human.contains(&format!("       2 → {}", rows[1].1)), "{human}");

    ok(cb(&dir)
        .args(["run", "--dataset", "qa.jsonl", "--target", "builtin:echo", "--grader", "contains"])
        .args(["--report", "jsonl=results.jsonl"]));
    let results = jsonl(&fs_err::read_to_string(dir.join("results.jsonl")).expect("the results"));
    let mut by_row: Vec<(Option<u64>, String)> =
        results.iter().map(|r| (r["row"].as_u64(), r["case_id"].as_str().unwrap_or("").to_owned())).collect();
    by_row.sort();
    let derived = |i: usize| rows[i].1.clone();
    assert_eq!(by_row, [(Some(0), derived(0)), (Some(1), "7".to_owned()), (Some(2), derived(1))]);
}

#[test]
#[cfg_attr(
    not(corpus),
    ignore = "needs the real-file corpus: set CASEBOOK_CORPUS to its folder (../shared/corpus by default)"
)]
fn agent_health_legacy_cases_validate_with_a_warning_each() {
    let corpus = std::path::Path::new(env!("CASEBOOK_CORPUS_DIR")).join("agent-health/rca.json");
    let out = validate(&corpus);
    out.expect_status(0);
    let codes: Vec<Value> = out.diagnostics().iter().map(|d| d["code"].clone()).collect();
    assert_eq!(codes, [json!("W-missing-outcomes"), json!("W-missing-outcomes"), json!("W-missing-outcomes")]);
    // The summary counts what was printed.
    let human = run(casebook().arg("validate").arg(&corpus));
    assert!(human.stderr.contains("0 errors, 3 warnings"), "{}", human.stderr);
}

/// Legacy Agent Health cases (an `expectedTrajectory` and no `expectedOutcomes`), in a file of
/// our own: valid, with one warning per case.
#[test]
fn legacy_agent_health_cases_of_our_own_validate_with_a_warning_each() {
    let dir = Folder::new();
    let case = |id: &str, prompt: &str| {
        json!({"id": id, "name": format!("Incident {id}"), "description": "legacy shape",
               "category": "RCA", "difficulty": "Medium", "initialPrompt": prompt,
               "context": [{"description": "logs", "value": "{\"level\":\"error\",\"msg\":\"pool exhausted\"}"}],
               "expectedTrajectory": [{"step": 1, "description": "query pool metrics", "requiredTools": ["metrics_query"]}]})
    };
    let cases = json!([
        case("tc-1", "Why is checkout slow?"),
        case("tc-2", "¿Por qué falla el pago?"),
        case("tc-3", "Why is checkout slow?"),
    ]);
    let file = dir.file("legacy.json", serde_json::to_string_pretty(&cases).unwrap());
    let out = validate(&file);
    out.expect_status(0);
    let codes: Vec<Value> = out.diagnostics().iter().map(|d| d["code"].clone()).collect();
    assert_eq!(codes, [json!("W-missing-outcomes"), json!("W-missing-outcomes"), json!("W-missing-outcomes")]);
    let human = run(casebook().arg("validate").arg(&file));
    assert!(human.stderr.contains("0 errors, 3 warnings"), "{}", human.stderr);
}

#[test]
fn a_seed_file_many_items_share_is_read_once_and_its_problems_reported_once() {
    let dir = Folder::new();
    dir.file("seeds/shared.yaml", "- source: catalogue\n  content: [not, text]\n");
    let file = dir.file(
        "trips.yaml",
        "name: trips\nitems:\n  - id: a\n    prompt: one\n    memory_seeds: seeds/shared.yaml\n  - id: b\n    prompt: two\n    memory_seeds: seeds/shared.yaml\n",
    );
    let out = validate(&file);
    out.expect_status(1);
    let diagnostics = out.diagnostics();
    assert_eq!(diagnostics.len(), 2, "{diagnostics:?}");
    assert!(diagnostics[0]["file"].as_str().is_some_and(|f| f.ends_with("seeds/shared.yaml")), "{diagnostics:?}");
    assert_eq!((diagnostics[0]["line"].as_u64(), diagnostics[0]["column"].as_u64()), (Some(2), Some(12)));
    assert_eq!(Loc::of(&diagnostics[1]), at("E-seed-path-missing", 8, 19, "/items/1/memory_seeds"));

    // A path written with `./` names the file without it.
    let dotted = dir.file(
        "dotted.yaml",
        "name: trips\nitems:\n  - id: a\n    prompt: one\n    memory_seeds: ./seeds/shared.yaml\n",
    );
    let diagnostics = validate(&dotted).diagnostics();
    assert_eq!(diagnostics[0]["file"].as_str(), dir.join("seeds/shared.yaml").to_str(), "{diagnostics:?}");
}

#[test]
fn a_version_is_never_made_from_a_seed_path_it_could_not_read() {
    let dir = Folder::new();
    ok(cb(&dir).arg("init"));
    let out = run(cb(&dir)
        .args(["import", "-", "--from", "maslab", "--dataset", "trips"])
        .write_stdin("name: trips\nitems:\n  - id: a\n    prompt: one\n    memory_seeds: seeds/bob.yaml\n"));
    assert_ne!(out.status, Some(0), "{out:?}");
    assert!(out.stderr.contains("names the seed file `seeds/bob.yaml`, which was not read"), "{}", out.stderr);
    assert!(!ok(cb(&dir).arg("datasets")).contains("trips"), "nothing was committed");
}

#[test]
fn a_spreadsheet_is_never_written_with_values_it_would_give_back_changed() {
    let dir = Folder::new();
    dir.file(
        "cases.jsonl",
        "{\"id\": \"a\", \"input\": \"q\", \"expected\": {\"output\": \"4\"}, \"metadata\": {\"topic\": \"math\"}}\n\
         {\"id\": \"b\", \"input\": \"q\", \"turns\": [{\"role\": \"user\", \"content\": \"more\"}], \"expected\": {\"output\": 4}, \"metadata\": {\"n\": 5}}\n",
    );
    let map = "id=qid,input=question,expected.output=answer";
    let out = run(cb(&dir).args([
        "--format",
        "json",
        "convert",
        "cases.jsonl",
        "--from",
        "casebook",
        "--to",
        "csv",
        "--map",
        map,
        "-o",
        "out.csv",
    ]));
    assert_eq!(out.status, Some(1), "{out:?}");
    let diagnostics = out.stderr_diagnostics();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let message = diagnostics[0]["message"].as_str().unwrap_or_default();
    for field in
        ["turns (no column of the map holds it)", "expected.output (the `answer` column", "metadata.n (the `n` column"]
    {
        assert!(message.contains(field), "{field}: {message}");
    }
    assert_eq!(diagnostics[0]["line"], 2);
    // The input's format is found as usual: `--map` shapes the output here.
    let out = run(cb(&dir).args(["convert", "cases.jsonl", "--to", "csv", "--map", map, "--lossy", "-o", "out.csv"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert_eq!(
        fs_err::read_to_string(dir.join("out.csv")).expect("written"),
        "qid,question,answer,topic\na,q,4,math\nb,q,,\n"
    );
}

/// Items that share a seed file: the store keeps its document once, `store check` checks it,
/// and the stored dataset filters, exports and converts back as the files do.
#[test]
fn a_seed_file_many_stored_cases_share_is_kept_once() {
    let dir = Folder::new();
    let items: Vec<Value> = (0..300)
        .map(|i| {
            let seeds = if i % 3 == 2 { json!("./seeds/ann.yaml") } else { json!("./seeds/bob.yaml") };
            json!({"id": i, "inputs": {"user": [{"role": "user", "content": format!("trip {i}")}], "memory_seeds": seeds}})
        })
        .collect();
    dir.file("in/benchmark.json", json!({"items": items}).to_string());
    dir.file("in/seeds/bob.yaml", SEEDS);
    dir.file("in/seeds/ann.yaml", SEEDS.replace("Bob likes night trains", "Ann likes ferries"));
    dir.file("in/manifest.yaml", MANIFEST);
    ok(cb(&dir).arg("init"));
    ok(cb(&dir).args(["import", "in/manifest.yaml", "--dataset", "trips"]));
    let out = run(cb(&dir).args(["store", "check"]));
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("sound: 300 case bodies, 2 seed documents and 1 versions checked, 0 problems"),
        "{}",
        out.stderr
    );
    let filter = r#"memory_seeds.content.entries[0].content matches "ferries""#;
    for source in ["in/manifest.yaml", "trips"] {
        assert_eq!(ok(cb(&dir).args(["cases", source, "--where", filter, "--count"])), "100\n", "{source}");
    }
    // The stored version gives the same cases as the files.
    ok(cb(&dir).args(["export", "trips", "--to", "native", "-o", "stored.jsonl"]));
    ok(cb(&dir).args(["convert", "in/manifest.yaml", "--to", "native", "-o", "file.jsonl"]));
    let stored = fs_err::read_to_string(dir.join("stored.jsonl")).expect("export");
    let file = fs_err::read_to_string(dir.join("file.jsonl")).expect("convert");
    let lines = |text: &str| -> Vec<Value> {
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
            .filter(|v| v.get("$dataset").is_none())
            .collect()
    };
    let (stored, file) = (lines(&stored), lines(&file));
    assert_eq!(stored.len(), 300);
    assert_eq!(stored, file);
    assert_eq!(stored[2]["memory_seeds"]["content"]["entries"][0]["content"], "Ann likes ferries");
}
