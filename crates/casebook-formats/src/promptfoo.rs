//! promptfoo test cases: a YAML or JSON list of tests, JSON Lines, a `promptfooconfig` document
//! whose `tests` list holds them, or promptfoo's CSV form.
//!
//! - `vars`, the variables promptfoo fills its prompt templates with, are what the agent is
//!   given: the case's `input`. One variable holding text is the input as that text (its name is
//!   remembered, `vars.input` when there is none to remember); any other set of variables is the
//!   input as an object. A test without `vars` has the input `{}`.
//! - `assert`, the test's checks (`{type, value, threshold, weight, metric, …}`), and its pass
//!   `threshold` are ground truth: they are kept as they are under `expected.assert` and
//!   `expected.threshold`, never sent to the agent. `casebook run` grades a case by them when
//!   the experiment lists no graders (see the runner's `grade::asserts`).
//! - `description` is the case's `description`, `metadata` its metadata; an `id` key (which
//!   promptfoo ignores) is read when there is one. Other keys (`options`, `provider`, …) are kept
//!   in `metadata` and written back at the top level.
//! - A configuration's `defaultTest` is applied to each of its tests as promptfoo applies it, so
//!   that a case is the test promptfoo runs ([`read_test_with`]); a configuration written back
//!   with it leaves out of each test what it gives ([`strip_defaults`]).
//! - A variable promptfoo reads from a file when it runs (`file://…`) is kept as that
//!   reference, with a warning where it is (`W-file-var`): casebook does not read the file.
//! - Tests and variables in other files are read as promptfoo reads them, relative to the file
//!   that names them, patterns included ([`TestsList`], [`standalone_tests`]): their content is
//!   the cases', so a changed file changes the dataset. Written back, variables that still are
//!   what their files hold are the reference again; tests read from another file are written
//!   inline (casebook writes one file; promptfoo reads the same tests), which the writer tells
//!   ([`read_from`]) but does not refuse. References casebook does not
//!   follow are kept unread, with a warning, and written back in their place.
//!
//! In CSV (promptfoo's `testCaseFromCsvRow`), every column is a variable except the special
//! ones: `__expected`, `__expected1`… hold asserts written as text (`contains: Paris`,
//! `similar(0.8):hello`, plain text for `equals`), and `__description`, `__metric`,
//! `__threshold`, `__prefix`, `__suffix`, `__providerOutput`, `__metadata:KEY`
//! (`__metadata:KEY[]` a comma-separated list) and `__config:__expectedN:threshold` set the rest.
//! The cells of the special columns are kept as they were, and written back when they still say
//! what the case holds.

use casebook_model::{Case, Code, Expectations, Map, Task};
use serde_json::{Value, json};

use crate::csvtext::Field;
use crate::layout::{self, Lost, Part};
use crate::node::{Entry, Node, NodeValue};
use crate::pointer::Ptr;
use crate::source::{Cx, Fields};
use crate::{parts, tabular};

pub const NAME: &str = "promptfoo";

/// The keys of a test that have a place in the case.
const KNOWN: &[&str] = &["id", "description", "vars", "assert", "threshold", "metadata"];
/// Where a case keeps its asserts and their pass threshold, in `expected`.
pub const ASSERT: &str = "assert";
pub const THRESHOLD: &str = "threshold";
/// The function that makes a test's score of its asserts' (`file://score.py:fn`), which a
/// configuration's `defaultTest` may give every test that names none.
const SCORING: &str = "assertScoringFunction";
/// The variable a text input goes in when the case does not say.
const DEFAULT_VAR: &str = "input";

/// Maps one test onto a case. `None` when it has errors (they are in `cx`).
pub fn read_test(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Case> {
    match with_vars_files(cx, node, ptr).ok()? {
        None => read_test_from(cx, node, ptr, &[]),
        Some((node, notes)) => {
            let mut case = read_test_from(cx, &node, ptr, &[])?;
            for (key, value) in notes {
                note(&mut case, &key, value);
            }
            Some(case)
        }
    }
}

/// [`read_test`] of a test whose variables `inherited` come from its configuration's
/// `defaultTest` (whose problems [`defaults`] reports, once).
fn read_test_from(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, inherited: &[String]) -> Option<Case> {
    let entries = cx.object(node, ptr)?;
    let errors_before = cx.diags.len();
    let mut f = Fields::new(cx, entries, ptr);
    let mut layout = Map::new();

    let id = f.take("id").and_then(|n| parts::sample_id(cx, n, &ptr.key("id"), &mut layout));
    let description = f.take("description").and_then(|n| cx.opt_string(n, &ptr.key("description")));
    let vars = f.take("vars");
    if let Some(vars) = vars {
        warn_of_combinations(cx, node, vars, &ptr.key("vars"));
        warn_of_file_vars(cx, vars, &ptr.key("vars"), inherited);
    }
    let input = match vars {
        None => {
            layout.insert("no_vars".into(), Value::Bool(true));
            Some(Value::Object(Map::new()))
        }
        Some(n) => match &n.value {
            NodeValue::Object(_) => cx.map(n, &ptr.key("vars")).map(|vars| match vars.iter().next() {
                Some((name, Value::String(text))) if vars.len() == 1 => {
                    layout.insert("var".into(), Value::String(name.clone()));
                    Value::String(text.clone())
                }
                _ => Value::Object(vars),
            }),
            _ => {
                cx.wrong_type(n, &ptr.key("vars"), "an object of variables");
                None
            }
        },
    };
    let mut expected = Expectations::default();
    if let Some(n) = f.take(ASSERT) {
        if check_asserts(cx, n, &ptr.key(ASSERT)) {
            if let Some(list) = cx.json(n, &ptr.key(ASSERT)) {
                expected.extra.insert(ASSERT.into(), list);
            }
        }
    }
    if let Some(n) = f.take(THRESHOLD) {
        match &n.value {
            NodeValue::Number(_) => {
                if let Some(v) = cx.value(n, &ptr.key(THRESHOLD)) {
                    expected.extra.insert(THRESHOLD.into(), v);
                }
            }
            _ => cx.wrong_type(n, &ptr.key(THRESHOLD), "a number (the weighted score the test needs)"),
        }
    }
    let mut metadata = f.take("metadata").and_then(|n| cx.map(n, &ptr.key("metadata")));
    layout::lift_unknown(cx, &f, ptr, &mut metadata, &mut layout, KNOWN);
    if cx.diags[errors_before..].iter().any(|d| d.is_error()) {
        return None;
    }
    let task = Task::new(input?);
    let (id, derived) = layout::id_or_derived(id, &task)?;
    Some(Case {
        id,
        name: None,
        description,
        labels: None,
        task,
        expected,
        metadata,
        confidence: None,
        review: None,
        provenance: layout::provenance(NAME, derived, layout),
    })
}

/// Says when promptfoo would run a test once for each combination of its list variables (a
/// variable whose value is a list starting with a string; `options.disableVarExpansion` turns
/// that off), which casebook reads as one case whose variables are the lists.
fn warn_of_combinations(cx: &mut Cx<'_>, test: &Node, vars: &Node, ptr: &Ptr<'_>) {
    let NodeValue::Object(entries) = &vars.value else { return };
    let disabled = test.get("options").and_then(|o| o.get("disableVarExpansion"));
    if disabled.is_some_and(|d| d.value == NodeValue::Bool(true)) {
        return;
    }
    let lists: Vec<(&str, usize)> = entries
        .iter()
        .filter_map(|e| match &e.value.value {
            NodeValue::Array(items) if matches!(items.first().map(|i| &i.value), Some(NodeValue::String(_))) => {
                Some((e.key.as_ref(), items.len()))
            }
            _ => None,
        })
        .collect();
    if lists.is_empty() {
        return;
    }
    let runs: usize = lists.iter().map(|(_, n)| *n).product();
    let named: Vec<String> = lists.iter().map(|(name, n)| format!("`{name}` ({n})")).collect();
    cx.report(
        Code::Unexpanded,
        vars.offset,
        ptr,
        format!(
            "promptfoo runs this test once for each combination of its list variables {}, {runs} times; \
             casebook reads it as one case whose variables are the lists",
            named.join(", ")
        ),
    )
    .hint = Some(
        "write each combination as a test of its own, or set `options.disableVarExpansion: true` to run it once".into(),
    );
}

/// Says which variables promptfoo reads from a file when it runs the test (a value
/// `file://PATH`: the file's text, a YAML or JSON file's data, a script's result, an image as
/// base64), which casebook keeps as the reference: the case's input holds the path, and so does
/// what a run of it sends. `inherited`: variables not to speak of here.
fn warn_of_file_vars(cx: &mut Cx<'_>, vars: &Node, ptr: &Ptr<'_>, inherited: &[String]) {
    let NodeValue::Object(entries) = &vars.value else { return };
    for entry in entries {
        let NodeValue::String(value) = &entry.value.value else { continue };
        let Some(path) = value.strip_prefix("file://") else { continue };
        if inherited.iter().any(|name| *name == entry.key) {
            continue;
        }
        let message = format!(
            "promptfoo reads the variable `{}` from the file `{}` when it runs the test; casebook keeps \
             `{}` itself as the value, so the case's input (and what `casebook run` sends) is the reference, \
             not the file's content",
            entry.key,
            casebook_model::excerpt(path),
            casebook_model::excerpt(value),
        );
        cx.report(Code::FileVar, entry.value.offset, &ptr.key(&entry.key), message).hint = Some(
            "to keep and run the content with casebook, write it into the test; the reference is written back as it is"
                .into(),
        );
    }
}

/// A configuration's `defaultTest` when it can be applied to its tests ([`read_test_with`]):
/// an object whose `vars`, `options` and `metadata` are objects and whose asserts check out.
/// Its problems are reported (a `defaultTest` in another file is read by no one here: a
/// warning says its tests are read without it).
pub fn defaults<'n, 's>(cx: &mut Cx<'_>, root: &'n Node<'s>) -> Option<&'n Node<'s>> {
    let node = root.get("defaultTest")?;
    let ptr = Ptr::ROOT.key("defaultTest");
    if let NodeValue::String(_) = node.value {
        cx.report(
            Code::Dropped,
            node.offset,
            &ptr,
            "the tests are read without their `defaultTest`, which is in another file",
        )
        .hint = Some("put the defaults inline in the configuration to have them applied".into());
        return None;
    }
    cx.object(node, &ptr)?;
    let mut ok = true;
    for key in ["vars", "options", "metadata"] {
        if let Some(n) = node.get(key).filter(|n| !matches!(n.value, NodeValue::Object(_))) {
            cx.wrong_type(n, &ptr.key(key), "an object");
            ok = false;
        }
    }
    if let Some(vars) = node.get("vars") {
        warn_of_file_vars(cx, vars, &ptr.key("vars"), &[]);
    }
    if let Some(n) = node.get(ASSERT) {
        ok &= check_asserts(cx, n, &ptr.key(ASSERT));
    }
    if let Some(n) = node.get(THRESHOLD).filter(|n| !matches!(n.value, NodeValue::Number(_))) {
        cx.wrong_type(n, &ptr.key(THRESHOLD), "a number (the weighted score the tests need)");
        ok = false;
    }
    ok.then_some(node)
}

/// The configuration's `defaultTest` as promptfoo applies it to each test: `vars`, `options`
/// and `metadata` under the test's own (`{...defaults, ...test}`: the defaults' keys first, in
/// their order, then the test's others), its asserts before the test's, and its `threshold`,
/// `provider` and `assertScoringFunction` where the test has none (promptfoo's
/// `assertScoringFunction: test.assertScoringFunction ?? defaultTest.assertScoringFunction`). What came from it is noted in the case's layout
/// (`defaults`), so that a configuration written with the same `defaultTest` leaves it out of
/// each test again ([`strip_defaults`]).
pub fn read_test_with(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, defaults: &Node) -> Option<Case> {
    // Variables from files are read first; the defaults' go under them.
    let (read, vars_notes) = match with_vars_files(cx, node, ptr).ok()? {
        Some((read, notes)) => (Some(read), notes),
        None => (None, Map::new()),
    };
    let node = read.as_ref().unwrap_or(node);
    let (NodeValue::Object(entries), NodeValue::Object(default_entries)) = (&node.value, &defaults.value) else {
        return read_test(cx, node, ptr);
    };
    let own = |key: &str| entries.iter().find(|e| e.key == key);
    let mut merged: Vec<Entry> = Vec::with_capacity(entries.len() + 4);
    let mut notes = Map::new();
    for entry in entries {
        let default = default_entries.iter().find(|d| d.key == entry.key).map(|d| &d.value);
        match (entry.key.as_ref(), default) {
            ("vars" | "options" | "metadata", Some(default)) => {
                let (value, taken) = spread(default, &entry.value);
                notes.insert(entry.key.to_string(), json!(taken));
                merged.push(Entry { value, ..entry.clone() });
            }
            (ASSERT, Some(default)) => match (&default.value, &entry.value.value) {
                (NodeValue::Array(first), NodeValue::Array(then)) if !first.is_empty() => {
                    notes.insert(ASSERT.into(), json!(first.len()));
                    let list = first.iter().chain(then).cloned().collect();
                    merged.push(Entry {
                        value: Node { offset: entry.value.offset, value: NodeValue::Array(list) },
                        ..entry.clone()
                    });
                }
                _ => merged.push(entry.clone()),
            },
            _ => merged.push(entry.clone()),
        }
    }
    // What the test does not have at all comes whole from the defaults.
    for default in default_entries {
        let key = default.key.as_ref();
        if !matches!(key, "vars" | "options" | "metadata" | ASSERT | THRESHOLD | "provider" | SCORING)
            || own(key).is_some()
        {
            continue;
        }
        let taken = match &default.value.value {
            NodeValue::Object(map) => json!(map.iter().map(|e| e.key.as_ref()).collect::<Vec<_>>()),
            NodeValue::Array(list) if key == ASSERT => json!(list.len()),
            _ => json!(true),
        };
        notes.insert(key.to_owned(), taken);
        notes.insert(format!("{key}_absent"), json!(true));
        merged.push(default.clone());
    }
    let merged = Node { offset: node.offset, value: NodeValue::Object(merged) };
    let inherited: Vec<String> = match notes.get("vars") {
        Some(Value::Array(names)) => names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    };
    let mut case = read_test_from(cx, &merged, ptr, &inherited)?;
    if !notes.is_empty() {
        note(&mut case, "defaults", Value::Object(notes));
    }
    for (key, value) in vars_notes {
        note(&mut case, &key, value);
    }
    Some(case)
}

/// `{...defaults, ...own}` for two objects, and the keys taken from `defaults`; `own` as it is
/// when either is not an object.
fn spread<'s>(defaults: &Node<'s>, own: &Node<'s>) -> (Node<'s>, Vec<String>) {
    let (NodeValue::Object(first), NodeValue::Object(then)) = (&defaults.value, &own.value) else {
        return (own.clone(), Vec::new());
    };
    let mut taken = Vec::new();
    let mut entries: Vec<Entry> = first
        .iter()
        .map(|d| match then.iter().find(|e| e.key == d.key) {
            Some(e) => e.clone(),
            None => {
                taken.push(d.key.to_string());
                d.clone()
            }
        })
        .collect();
    entries.extend(then.iter().filter(|e| !first.iter().any(|d| d.key == e.key)).cloned());
    (Node { offset: own.offset, value: NodeValue::Object(entries) }, taken)
}

/// Takes out of a written test what its configuration's `defaultTest` gives it back (see
/// [`read_test_with`]): what the case took from the defaults and still holds as they have it.
pub fn strip_defaults(test: &mut Map, case: &Case, defaults: &Map) {
    let Some(notes) = layout::layout_for(case, NAME).and_then(|l| l.get("defaults")).and_then(Value::as_object) else {
        return;
    };
    let absent = |key: &str| layout::flag(Some(notes), &format!("{key}_absent"));
    for key in ["vars", "options", "metadata"] {
        let (Some(Value::Object(default)), Some(taken)) = (defaults.get(key), notes.get(key)) else { continue };
        let Some(Value::Object(own)) = test.get_mut(key) else { continue };
        for name in taken.as_array().into_iter().flatten().filter_map(Value::as_str) {
            if own.get(name).is_some() && own.get(name) == default.get(name) {
                own.shift_remove(name);
            }
        }
        if own.is_empty() && absent(key) {
            test.shift_remove(key);
        }
    }
    if let (Some(Value::Array(default)), Some(n)) = (defaults.get(ASSERT), notes.get(ASSERT).and_then(Value::as_u64)) {
        if let Some(Value::Array(own)) = test.get_mut(ASSERT) {
            if default.len() as u64 == n && own.starts_with(default) {
                own.drain(..default.len());
                if own.is_empty() && absent(ASSERT) {
                    test.shift_remove(ASSERT);
                }
            }
        }
    }
    for key in [THRESHOLD, "provider", SCORING] {
        if notes.contains_key(key) && test.get(key).is_some() && test.get(key) == defaults.get(key) {
            test.shift_remove(key);
        }
    }
    // Variables read from files, some from the defaults: the files' reference once those are
    // taken out again (see [`write_test`]).
    if notes.contains_key("vars") {
        if let Some(Ok(reference)) = vars_reference(layout::layout_for(case, NAME), test.get("vars")) {
            test.insert("vars".into(), reference);
        }
    }
}

/// Whether `assert` is a list of asserts promptfoo can read: each an object with a `type` (or an
/// `assert-set` of them, or a `$ref` to a template), numbers for `threshold` and `weight`, text
/// for `metric`. Problems are reported.
fn check_asserts(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> bool {
    let Some(items) = cx.array(node, ptr) else { return false };
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let p = ptr.index(i);
        if cx.object(item, &p).is_none() {
            ok = false;
            continue;
        }
        match item.get("type") {
            None if item.get("$ref").is_some() => {}
            None => {
                cx.missing(
                    item,
                    &p,
                    "type",
                    Some("an assert names its `type`: `equals`, `contains`, `regex`, `llm-rubric`, …".into()),
                );
                ok = false;
            }
            Some(t) => match t.as_str() {
                Some("assert-set") => {
                    if let Some(inner) = item.get(ASSERT) {
                        ok &= check_asserts(cx, inner, &p.key(ASSERT));
                    }
                }
                Some(_) => {}
                None => {
                    cx.wrong_type(t, &p.key("type"), "a string");
                    ok = false;
                }
            },
        }
        for key in ["threshold", "weight"] {
            if let Some(n) = item.get(key).filter(|n| !matches!(n.value, NodeValue::Number(_))) {
                cx.wrong_type(n, &p.key(key), "a number");
                ok = false;
            }
        }
        if let Some(n) = item.get("metric").filter(|n| !matches!(n.value, NodeValue::String(_))) {
            cx.wrong_type(n, &p.key("metric"), "a string");
            ok = false;
        }
    }
    ok
}

/// The test for a case (its JSON form), and what a test cannot hold.
pub fn write_test(case: &Case) -> (Map, Lost) {
    let layout = layout::layout_for(case, NAME);
    let mut out = Map::new();
    let mut lost = Lost::default();
    let derived = case.provenance.as_ref().is_some_and(|p| p.id_derived);
    if !derived {
        out.insert("id".into(), parts::sample_id_value(case, layout));
    }
    if let Some(description) = &case.description {
        out.insert("description".into(), json!(description));
    }
    match &case.task.input {
        Value::String(text) => {
            let var = layout::text(layout, "var").unwrap_or(DEFAULT_VAR);
            out.insert("vars".into(), json!({ var: text }));
        }
        Value::Object(vars) if vars.is_empty() && layout::flag(layout, "no_vars") => {}
        Value::Object(vars) => {
            if vars.len() == 1 && vars.values().all(Value::is_string) {
                lost.push("input (promptfoo's one variable of text is read back as that text)");
            }
            out.insert("vars".into(), Value::Object(vars.clone()));
        }
        other => {
            lost.push("input (promptfoo's variables are named: it is read back as `vars.input`)");
            out.insert("vars".into(), json!({ DEFAULT_VAR: other }));
        }
    }
    // Variables read from files are written as the reference to them while they are what the
    // files hold (with variables from `defaultTest`, [`strip_defaults`] decides).
    let from_defaults = layout.and_then(|l| l.get("defaults")).is_some_and(|d| d.get("vars").is_some());
    match vars_reference(layout, out.get("vars")) {
        Some(Ok(reference)) if !from_defaults => {
            out.insert("vars".into(), reference);
        }
        Some(Err(reference)) if !from_defaults => lost.push(format!(
            "input (its variables were read from the files {reference} and have changed: they are written inline)"
        )),
        _ => {}
    }
    for (key, value) in &case.expected.extra {
        match (key.as_str(), value) {
            (ASSERT, Value::Array(_)) | (THRESHOLD, Value::Number(_)) => {
                out.insert(key.clone(), value.clone());
            }
            _ => lost.push(format!("expected.{key}")),
        }
    }
    let (top, rest) = layout::unlift(case.metadata.as_ref(), layout);
    if let Some(rest) = rest {
        out.insert("metadata".into(), Value::Object(rest));
    }
    layout::put_back(&mut out, top, KNOWN, &mut lost);
    lost.check("labels", &case.labels);
    lost.parts(
        case,
        &[
            Part::Name,
            Part::Turns,
            Part::Context,
            Part::Tools,
            Part::MemorySeeds,
            Part::SessionId,
            Part::AgentArgs,
            Part::Output,
            Part::PerTurn,
            Part::Outcomes,
            Part::Acceptable,
            Part::Rubric,
            Part::RubricPath,
            Part::RubricVars,
            Part::Trajectory,
            Part::ToolCalls,
            Part::Governance,
            Part::Confidence,
            Part::Review,
        ],
    );
    (out, lost)
}

// ---------------------------------------------------------------------------------------------
// CSV

/// The assert types promptfoo recognises in a CSV cell (`BaseAssertionTypesSchema`), in its
/// order: the first that fits a cell is the one it reads.
const ASSERT_TYPES: &[&str] = &[
    "answer-relevance",
    "bleu",
    "classifier",
    "contains",
    "contains-all",
    "contains-any",
    "contains-html",
    "contains-json",
    "contains-sql",
    "contains-xml",
    "context-faithfulness",
    "context-recall",
    "context-relevance",
    "conversation-relevance",
    "cost",
    "equals",
    "factuality",
    "finish-reason",
    "g-eval",
    "gleu",
    "guardrails",
    "icontains",
    "icontains-all",
    "icontains-any",
    "is-html",
    "is-json",
    "is-refusal",
    "is-sql",
    "is-valid-function-call",
    "is-valid-openai-function-call",
    "is-valid-openai-tools-call",
    "is-xml",
    "javascript",
    "latency",
    "levenshtein",
    "llm-rubric",
    "pi",
    "meteor",
    "model-graded-closedqa",
    "model-graded-factuality",
    "moderation",
    "perplexity",
    "perplexity-score",
    "python",
    "regex",
    "rouge-n",
    "ruby",
    "similar",
    "starts-with",
    "webhook",
    "word-count",
];
/// Types whose CSV value is a comma-separated list.
const LIST_TYPES: &[&str] = &["contains-all", "contains-any", "icontains-all", "icontains-any"];
/// Types whose CSV value is taken as it is, not trimmed.
const RAW_TYPES: &[&str] = &["contains-json", "is-json"];
/// Types that get a threshold in CSV (`type(0.8):value`, else a default).
const THRESHOLD_TYPES: &[&str] = &[
    "answer-relevance",
    "classifier",
    "context-faithfulness",
    "context-recall",
    "context-relevance",
    "cost",
    "latency",
    "levenshtein",
    "perplexity-score",
    "perplexity",
    "rouge-n",
    "similar",
    "starts-with",
];

/// A number as JavaScript writes it into JSON: an integer when it is one.
fn js_number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// JavaScript's `Number.parseFloat`: the number at the start of `text`, if there is one.
fn parse_float(text: &str) -> Option<f64> {
    let text = text.trim_start();
    let bytes = text.as_bytes();
    let mut end = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let digits = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let whole = digits(end);
    end += whole;
    let mut fraction = 0;
    if bytes.get(end) == Some(&b'.') {
        fraction = digits(end + 1);
        if whole + fraction > 0 {
            end += 1 + fraction;
        }
    }
    if whole + fraction == 0 {
        return None;
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        let exponent = digits(end + 1 + sign);
        if exponent > 0 {
            end += 1 + sign + exponent;
        }
    }
    text[..end].parse().ok().filter(|n: &f64| n.is_finite())
}

/// Whether `text` is a threshold as promptfoo's CSV syntax writes it: digits, and a fraction.
fn is_threshold_text(text: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match text.split_once('.') {
        Some((whole, fraction)) => digits(whole) && digits(fraction),
        None => digits(text),
    }
}

/// Whether a `file://` path names a JavaScript or TypeScript file (a function in it may follow a
/// colon).
fn is_script_file(path: &str) -> bool {
    let file = path.split(':').next().unwrap_or(path);
    [".js", ".cjs", ".mjs", ".ts", ".cts", ".mts", ".jsx", ".tsx"].iter().any(|ext| file.ends_with(ext))
}

/// An assert as promptfoo reads it from the text of an `__expected` cell (`assertionFromString`).
pub fn assertion_from_string(expected: &str) -> Map {
    let assert = |t: &str, value: Option<Value>| {
        let mut a = Map::new();
        a.insert("type".into(), json!(t));
        if let Some(value) = value {
            a.insert("value".into(), value);
        }
        a
    };
    for prefix in ["javascript:", "fn:", "eval:"] {
        if let Some(rest) = expected.strip_prefix(prefix) {
            return assert("javascript", Some(json!(rest.trim())));
        }
    }
    if let Some(rest) = expected.strip_prefix("file://").filter(|r| is_script_file(r)) {
        return assert("javascript", Some(json!(rest.trim())));
    }
    for prefix in ["grade:", "llm-rubric:"] {
        if let Some(rest) = expected.strip_prefix(prefix) {
            return assert("llm-rubric", Some(json!(rest)));
        }
    }
    if let Some(rest) = expected.strip_prefix("python:") {
        return assert("python", Some(json!(rest.trim())));
    }
    if let Some(rest) = expected.strip_prefix("file://").filter(|r| r.ends_with(".py") || r.contains(".py:")) {
        return assert("python", Some(json!(rest.trim())));
    }
    let (negated, body) = match expected.strip_prefix("not-") {
        Some(rest) => (true, rest),
        None => (false, expected),
    };
    for t in ASSERT_TYPES {
        let Some(rest) = body.strip_prefix(t) else { continue };
        // `(threshold)`: digits, optionally a fraction.
        let (threshold, rest) = match rest.strip_prefix('(').and_then(|r| r.split_once(')')) {
            Some((number, rest)) if is_threshold_text(number) => (parse_float(number), rest),
            _ => (None, rest),
        };
        let value = match rest.strip_prefix(':') {
            Some(value) => Some(value),
            None if rest.is_empty() => None,
            None => continue,
        };
        let full = if negated { format!("not-{t}") } else { (*t).to_owned() };
        return if LIST_TYPES.contains(t) {
            let value = value.map(|v| {
                if v.is_empty() { json!(v) } else { Value::Array(v.split(',').map(|s| json!(s.trim())).collect()) }
            });
            assert(&full, value)
        } else if RAW_TYPES.contains(t) {
            assert(&full, value.map(|v| json!(v)))
        } else if THRESHOLD_TYPES.contains(t) {
            let mut a = assert(&full, value.map(|v| json!(v.trim())));
            let default = if *t == "similar" { 0.8 } else { 0.75 };
            a.insert("threshold".into(), js_number(threshold.unwrap_or(default)));
            a
        } else {
            assert(&full, value.map(|v| json!(v.trim())))
        };
    }
    assert("equals", Some(json!(expected)))
}

/// A problem with one cell of a promptfoo CSV record: the cell's place and the message.
pub struct CellProblem {
    pub cell: usize,
    pub message: String,
}

/// Whether a column of a promptfoo CSV file is one of its special columns (not a variable).
fn is_special(column: &str) -> bool {
    column.starts_with("__expected")
        || column.starts_with("__metadata:")
        || column.starts_with("__config:")
        || matches!(
            column,
            "__prefix" | "__suffix" | "__description" | "__providerOutput" | "__metric" | "__threshold" | "__metadata"
        )
}

/// Whether a CSV header is promptfoo's: it has one of promptfoo's special columns.
pub fn is_csv_header(columns: &[String]) -> bool {
    columns.iter().any(|c| is_special(c))
}

/// The test promptfoo makes of one CSV record (`testCaseFromCsvRow`), given as `(column, cell)`
/// pairs, columns trimmed. An empty `assert` list and empty `options` are left out.
pub fn test_from_csv(cells: &[(&str, &str)]) -> Result<Map, CellProblem> {
    let mut vars = Map::new();
    let mut asserts: Vec<Map> = Vec::new();
    let mut options = Map::new();
    let mut metadata = Map::new();
    let mut configs: std::collections::BTreeMap<usize, Map> = std::collections::BTreeMap::new();
    let (mut description, mut provider_output, mut metric, mut threshold) = (None, None, None, None);
    for (i, (column, value)) in cells.iter().enumerate() {
        let problem = |message: String| CellProblem { cell: i, message };
        if column.starts_with("__expected") {
            if !value.trim().is_empty() {
                asserts.push(assertion_from_string(value.trim()));
            }
        } else if *column == "__prefix" || *column == "__suffix" {
            options.insert(column[2..].to_owned(), json!(value));
        } else if *column == "__description" {
            description = Some(*value);
        } else if *column == "__providerOutput" {
            provider_output = Some(*value);
        } else if *column == "__metric" {
            metric = Some(*value);
        } else if *column == "__threshold" {
            threshold = parse_float(value);
        } else if *column == "__metadata" {
            // promptfoo warns and ignores a metadata column without a key.
        } else if let Some(key) = column.strip_prefix("__metadata:") {
            if value.trim().is_empty() {
                continue;
            }
            match key.strip_suffix("[]") {
                Some(key) => {
                    metadata.insert(key.to_owned(), Value::Array(split_unescaped(value)));
                }
                None => {
                    metadata.insert(key.to_owned(), json!(value));
                }
            }
        } else if let Some(config) = column.strip_prefix("__config:") {
            let parts: Vec<&str> = config.split(':').collect();
            let [target, key] = parts[..] else { continue }; // promptfoo warns and ignores it
            let index = match target.strip_prefix("__expected") {
                Some("") => 0,
                Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => n
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| n.checked_sub(1))
                    .ok_or_else(|| problem(format!("`{column}` names `{target}`: asserts are numbered from 1")))?,
                _ => {
                    return Err(problem(format!("`{column}` names `{target}`, not `__expected` or `__expected<N>`")));
                }
            };
            if key != "threshold" {
                return Err(problem(format!("`{column}` sets `{key}`: the only setting is `threshold`")));
            }
            let number = parse_float(value).ok_or_else(|| {
                problem(format!("`{column}` needs a number, not `{}`", casebook_model::excerpt(value)))
            })?;
            configs.entry(index).or_default().insert(key.to_owned(), js_number(number));
        } else {
            vars.insert((*column).to_owned(), json!(value));
        }
    }
    for (i, assert) in asserts.iter_mut().enumerate() {
        if let Some(metric) = metric {
            assert.insert("metric".into(), json!(metric));
        }
        for (key, value) in configs.get(&i).into_iter().flatten() {
            assert.insert(key.clone(), value.clone());
            metadata.insert(key.clone(), value.clone());
        }
    }
    let mut test = Map::new();
    if let Some(d) = description.filter(|d| !d.is_empty()) {
        test.insert("description".into(), json!(d));
    }
    test.insert("vars".into(), Value::Object(vars));
    if !asserts.is_empty() {
        test.insert(ASSERT.into(), Value::Array(asserts.into_iter().map(Value::Object).collect()));
    }
    if !options.is_empty() {
        test.insert("options".into(), Value::Object(options));
    }
    if let Some(t) = threshold.filter(|t| *t != 0.0) {
        test.insert(THRESHOLD.into(), js_number(t));
    }
    if !metadata.is_empty() {
        test.insert("metadata".into(), Value::Object(metadata));
    }
    if let Some(p) = provider_output.filter(|p| !p.is_empty()) {
        test.insert("providerOutput".into(), json!(p));
    }
    Ok(test)
}

/// A `__metadata:KEY[]` cell: split on commas not preceded by a backslash, each item trimmed and
/// its first `\,` made a comma (as promptfoo does).
fn split_unescaped(value: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut start = 0;
    let bytes = value.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b',' && (i == 0 || bytes[i - 1] != b'\\') {
            items.push(&value[start..i]);
            start = i + 1;
        }
    }
    items.push(&value[start..]);
    items.into_iter().map(|item| json!(item.trim().replacen("\\,", ",", 1))).collect()
}

/// A value's nodes, all at `offset` (values made from one CSV cell).
fn node_at(value: &Value, offset: usize) -> Node<'static> {
    let value = match value {
        Value::Null => NodeValue::Null,
        Value::Bool(b) => NodeValue::Bool(*b),
        Value::Number(n) => NodeValue::Number(n.to_string().into()),
        Value::String(s) => NodeValue::String(s.clone().into()),
        Value::Array(items) => NodeValue::Array(items.iter().map(|v| node_at(v, offset)).collect()),
        Value::Object(map) => NodeValue::Object(
            map.iter()
                .map(|(k, v)| Entry { key: k.clone().into(), key_offset: offset, value: node_at(v, offset) })
                .collect(),
        ),
    };
    Node { offset, value }
}

/// A promptfoo CSV record as a case, and the offset of the record.
pub fn csv_record(cx: &mut Cx<'_>, columns: &[String], fields: &[Field], record_start: usize) -> Option<(Case, usize)> {
    csv_record_with(cx, columns, fields, record_start, None)
}

/// [`csv_record`] of a CSV file a configuration names, with its `defaultTest`.
fn csv_record_with(
    cx: &mut Cx<'_>,
    columns: &[String],
    fields: &[Field],
    record_start: usize,
    defaults: Option<&Node>,
) -> Option<(Case, usize)> {
    if !tabular::check_width(cx, fields, columns, record_start) {
        return None;
    }
    let values: Vec<String> = fields.iter().map(|f| f.value(cx.src.text).into_owned()).collect();
    let cells: Vec<(&str, &str)> = columns.iter().map(String::as_str).zip(values.iter().map(String::as_str)).collect();
    let test = match test_from_csv(&cells) {
        Ok(test) => test,
        Err(problem) => {
            let field = fields[problem.cell];
            cx.report(
                Code::InvalidValue,
                field.content_offset(),
                &Ptr::ROOT.key(&columns[problem.cell]),
                problem.message,
            );
            return None;
        }
    };
    // Variables are found at their cells; the rest of the test at the record.
    let entries = test
        .iter()
        .map(|(key, value)| {
            let node = match (key.as_str(), value) {
                ("vars", Value::Object(vars)) => Node {
                    offset: record_start,
                    value: NodeValue::Object(
                        vars.iter()
                            .map(|(name, v)| {
                                let at = columns
                                    .iter()
                                    .position(|c| c == name)
                                    .map_or(record_start, |i| fields[i].content_offset());
                                Entry { key: name.clone().into(), key_offset: at, value: node_at(v, at) }
                            })
                            .collect(),
                    ),
                },
                _ => node_at(value, record_start),
            };
            Entry { key: key.clone().into(), key_offset: record_start, value: node }
        })
        .collect();
    let node = Node { offset: record_start, value: NodeValue::Object(entries) };
    let mut case = match defaults {
        Some(defaults) => read_test_with(cx, &node, &Ptr::ROOT, defaults)?,
        None => read_test(cx, &node, &Ptr::ROOT)?,
    };
    // The special cells as they were, for the CSV writer.
    let raw: Map = cells
        .iter()
        .filter(|(column, value)| is_special(column) && !value.is_empty())
        .map(|(column, value)| ((*column).to_owned(), json!(value)))
        .collect();
    if let (false, Some(p)) = (raw.is_empty(), case.provenance.as_mut()) {
        p.layout.insert("csv".into(), Value::Object(raw));
    }
    Some((case, record_start))
}

/// The text of an `__expected` cell promptfoo reads back as `assert` (its `metric` aside), if
/// there is one.
fn assertion_text(assert: &Map) -> Option<String> {
    let t = assert.get("type")?.as_str()?;
    let value = assert.get("value");
    let threshold = assert.get("threshold");
    if assert.keys().any(|k| !matches!(k.as_str(), "type" | "value" | "threshold" | "metric")) {
        return None;
    }
    let value_text = match value {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(items)) => {
            Some(items.iter().map(|i| i.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>()?.join(","))
        }
        Some(_) => return None,
    };
    let mut candidates = Vec::new();
    if let (Some(v), None) = (&value_text, threshold) {
        match t {
            "equals" => candidates.push(v.clone()),
            "llm-rubric" | "javascript" | "python" => candidates.push(format!("{t}:{v}")),
            _ => {}
        }
    }
    let threshold_text = match threshold {
        None => String::new(),
        Some(Value::Number(n)) => format!("({n})"),
        Some(_) => return None,
    };
    candidates.push(match &value_text {
        Some(v) => format!("{t}{threshold_text}:{v}"),
        None => format!("{t}{threshold_text}"),
    });
    let mut want = assert.clone();
    want.shift_remove("metric");
    candidates.into_iter().find(|text| text.trim() == text && assertion_from_string(text) == want)
}

/// A case as the cells of a promptfoo CSV record (column → text), and what CSV cannot hold of
/// it. The special cells it was read with are written back when they still say the same.
/// `columns` are the file's columns, when known: promptfoo reads the record's empty cells too
/// (an empty variable), and its asserts in the order of the columns.
pub fn csv_cells(case: &Case, columns: &[String]) -> (Map, Lost) {
    let (mut test, mut lost) = write_test(case);
    if test.shift_remove("id").is_some() {
        lost.push("id (a promptfoo CSV file has no place for it)");
    }
    let mut cells: Vec<(String, String)> = Vec::new();
    if let Some(Value::Object(vars)) = test.get("vars") {
        for (name, value) in vars {
            match value {
                Value::String(text) if !is_special(name) => cells.push((name.clone(), text.clone())),
                _ => lost.push(format!("input (variable `{name}` reads back from CSV as text)")),
            }
        }
    }
    let vars_only = cells.clone();
    let layout = layout::layout_for(case, NAME);
    let raw: Vec<(String, String)> = layout
        .and_then(|l| l.get("csv"))
        .and_then(Value::as_object)
        .map(|raw| raw.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    // The record as the file will hold it.
    let reads_back = |cells: &[(String, String)]| -> Option<Map> {
        let mut pairs: Vec<(&str, &str)> = columns
            .iter()
            .map(|c| (c.as_str(), cells.iter().find(|(k, _)| k == c).map_or("", |(_, v)| v.as_str())))
            .collect();
        pairs.extend(cells.iter().filter(|(k, _)| !columns.contains(k)).map(|(c, v)| (c.as_str(), v.as_str())));
        test_from_csv(&pairs).ok()
    };
    let mut with_raw = vars_only.clone();
    with_raw.extend(raw.iter().cloned());
    if !raw.is_empty() && reads_back(&with_raw).as_ref() == Some(&test) {
        cells = with_raw;
    } else {
        special_cells(&test, &mut cells);
        match reads_back(&cells) {
            Some(back) if back == test => {}
            back => {
                let back = back.unwrap_or_default();
                let keys: std::collections::BTreeSet<&String> = test.keys().chain(back.keys()).collect();
                for key in keys {
                    if test.get(key) != back.get(key) {
                        lost.push(match key.as_str() {
                            "vars" => {
                                "input (its variables read back from CSV as others: each column is one)".to_owned()
                            }
                            ASSERT | THRESHOLD => format!("expected.{key} (it reads back from CSV as something else)"),
                            "description" => "description".to_owned(),
                            "metadata" => "metadata (it reads back from CSV as something else)".to_owned(),
                            other => format!("metadata.{other} (a promptfoo CSV file has no place for it)"),
                        });
                    }
                }
            }
        }
    }
    (cells.into_iter().map(|(c, v)| (c, Value::String(v))).collect(), lost)
}

/// Writes a test's special CSV cells (everything but its variables) as promptfoo reads them.
fn special_cells(test: &Map, cells: &mut Vec<(String, String)>) {
    if let Some(Value::String(d)) = test.get("description") {
        cells.push(("__description".into(), d.clone()));
    }
    if let Some(Value::Array(asserts)) = test.get(ASSERT) {
        let metrics: Vec<Option<&Value>> =
            asserts.iter().map(|a| a.as_object().and_then(|a| a.get("metric"))).collect();
        for (i, assert) in asserts.iter().enumerate() {
            let column = if asserts.len() == 1 { "__expected".to_owned() } else { format!("__expected{}", i + 1) };
            if let Some(text) = assert.as_object().and_then(assertion_text) {
                cells.push((column, text));
            }
        }
        if let Some(Some(Value::String(metric))) = metrics.first() {
            cells.push(("__metric".into(), metric.clone()));
        }
    }
    if let Some(Value::Object(options)) = test.get("options") {
        for key in ["prefix", "suffix"] {
            if let Some(Value::String(v)) = options.get(key) {
                cells.push((format!("__{key}"), v.clone()));
            }
        }
    }
    if let Some(Value::Number(t)) = test.get(THRESHOLD) {
        cells.push(("__threshold".into(), t.to_string()));
    }
    if let Some(Value::Object(metadata)) = test.get("metadata") {
        for (key, value) in metadata {
            match value {
                Value::String(v) => cells.push((format!("__metadata:{key}"), v.clone())),
                Value::Array(items) => {
                    if let Some(items) = items.iter().map(Value::as_str).collect::<Option<Vec<_>>>() {
                        let text = items.iter().map(|i| i.replace(',', "\\,")).collect::<Vec<_>>().join(",");
                        cells.push((format!("__metadata:{key}[]"), text));
                    }
                }
                _ => {}
            }
        }
    }
    if let Some(Value::String(p)) = test.get("providerOutput") {
        cells.push(("__providerOutput".into(), p.clone()));
    }
}

// ---------------------------------------------------------------------------------------------
// Files a configuration names

/// How many files one path pattern may name.
const MAX_FILES: usize = 10_000;
/// Where a case notes the test file (the reference as the configuration writes it) it was read
/// from, in its layout.
const FROM: &str = "from";
/// Where a case notes the files its `vars` were read from (the reference as the test writes
/// it), and a hash of the variables they held.
const VARS_FROM: &str = "vars_from";
const VARS_READ: &str = "vars_read";
/// Where a case notes the references casebook kept, unread, just before it (or after it, for
/// those at the end of the list) in the configuration's `tests`.
const REFS_BEFORE: &str = "refs_before";
/// Where a configuration's layout keeps every reference casebook kept unread in its `tests`, in
/// order: those whose neighbouring case is not written (filtered out, removed) are written at
/// the end of `tests` ([`unwritten_references`]).
pub const KEPT_REFS: &str = "kept_refs";
const REFS_AFTER: &str = "refs_after";

/// The items of a configuration's `tests` list, read in order. An item is a test or a string
/// naming files of tests (`file://tests/*.yaml`, `tests.csv`), which promptfoo's
/// `loadTestsFromGlob` reads: relative to the configuration, globs included (files in sorted
/// order), YAML, JSON, JSONL and CSV. A reference casebook does not follow (a script, a remote
/// source, no file matching) is kept, with a warning, in the layout of the next case read, so
/// that the configuration is written back with it in place.
#[derive(Default)]
pub struct TestsList {
    pending: Vec<Value>,
    /// Every reference kept, in order: the dataset keeps them too ([`KEPT_REFS`]), so that
    /// one whose neighbouring case is filtered out or removed is still written.
    all: Vec<Value>,
}

impl TestsList {
    /// The cases of one item of `tests` (`ptr` is its place).
    pub fn item(&mut self, cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, defaults: Option<&Node>) -> Vec<Case> {
        // `{path, config}`: a standalone tests file (a script's `config` aside).
        let path = match &node.value {
            NodeValue::Object(_) => {
                node.get("path").filter(|_| node.get("vars").is_none() && node.get(ASSERT).is_none())
            }
            _ => None,
        };
        let mut cases = match (&node.value, path.map(|p| &p.value)) {
            (NodeValue::String(reference), _) => match tests_files(cx, node, ptr, reference, defaults, false) {
                Some(cases) => cases,
                None => {
                    self.pending.push(json!(reference));
                    self.all.push(json!(reference));
                    Vec::new()
                }
            },
            (_, Some(NodeValue::String(reference))) => {
                match path.and_then(|p| tests_files(cx, p, &ptr.key("path"), reference, defaults, true)) {
                    Some(cases) => cases,
                    None => {
                        let kept = cx.json(node, ptr);
                        self.all.extend(kept.clone());
                        self.pending.extend(kept);
                        Vec::new()
                    }
                }
            }
            _ => match defaults {
                Some(defaults) => read_test_with(cx, node, ptr, defaults),
                None => read_test(cx, node, ptr),
            }
            .into_iter()
            .collect(),
        };
        if let (Some(first), false) = (cases.first_mut(), self.pending.is_empty()) {
            note(first, REFS_BEFORE, Value::Array(std::mem::take(&mut self.pending)));
        }
        cases
    }

    /// Ends the list: references after its last case are kept with that case, when there is
    /// one to keep them (else they are told to be left out of what is written). Returns every
    /// reference kept, for the dataset's layout ([`KEPT_REFS`]).
    /// `dataset_keeps`: the caller keeps them in the dataset's layout (a whole document read at
    /// once; a long one read as it goes has written its header already).
    pub fn finish(
        self,
        cx: &mut Cx<'_>,
        last: Option<&mut Case>,
        at: usize,
        ptr: &Ptr<'_>,
        dataset_keeps: bool,
    ) -> Vec<Value> {
        if self.pending.is_empty() {
            return self.all;
        }
        match last {
            Some(case) => note(case, REFS_AFTER, Value::Array(self.pending)),
            None if dataset_keeps => {}
            None => {
                cx.report(
                    Code::Dropped,
                    at,
                    ptr,
                    "the test files casebook kept unread at the end of `tests` are left out of what is written",
                )
                .hint = Some("put a test after them, or write them into the configuration".into());
            }
        }
        self.all
    }
}

/// Adds a note to a case's layout.
fn note(case: &mut Case, key: &str, value: Value) {
    if let Some(provenance) = case.provenance.as_mut() {
        provenance.layout.insert(key.into(), value);
    }
}

/// The tests of a configuration whose `tests` is one string (`tests: file://tests.csv`), read
/// as promptfoo's `readTests` reads it: a YAML file (or pattern) as a list of tests, a CSV,
/// JSON or JSONL file as a standalone tests file (whose tests are described `Row #N` when they
/// are not). `None` when casebook does not follow it (a warning says why).
pub fn standalone_tests(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, defaults: Option<&Node>) -> Option<Vec<Case>> {
    let NodeValue::String(reference) = &node.value else { return None };
    let yaml = reference.ends_with("yaml") || reference.ends_with("yml");
    tests_files(cx, node, ptr, reference, defaults, !yaml)
}

/// What kind of tests file a path names, by its extension.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TestsFile {
    Yaml,
    Json,
    Jsonl,
    Csv,
}

impl TestsFile {
    fn of(path: &std::path::Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?;
        Some(match ext {
            "yaml" | "yml" => Self::Yaml,
            "json" => Self::Json,
            "jsonl" => Self::Jsonl,
            "csv" => Self::Csv,
            _ => return None,
        })
    }
}

/// Reports a reference casebook keeps unread, at the reference.
fn kept_reference(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, message: String, hint: String) {
    cx.report(Code::FileVar, node.offset, ptr, message).hint = Some(hint);
}

/// Whether promptfoo runs or fetches what `reference` names rather than reading a file of tests
/// or variables: a script (`tests.py`, `gen.js:make`), a remote or special source.
fn is_script_or_remote(reference: &str) -> bool {
    let path = reference.strip_prefix("file://").unwrap_or(reference);
    let function = path.rfind(':').is_some_and(|i| i > 1);
    reference.contains("://") && !reference.starts_with("file://")
        || reference.starts_with("https:")
        || function
        || is_script_file(path)
        || path.ends_with(".py")
        || path.ends_with(".xlsx")
        || path.ends_with(".xls")
}

/// The files a reference names, relative to the file that names it, sorted; reported and `None`
/// when there are none to read.
fn named_files(
    cx: &mut Cx<'_>,
    node: &Node,
    ptr: &Ptr<'_>,
    reference: &str,
    what: &str,
) -> Option<Vec<std::path::PathBuf>> {
    let shown = casebook_model::excerpt(reference);
    if is_script_or_remote(reference) {
        let message = format!(
            "promptfoo gets the {what} `{shown}` by running a script or fetching them; casebook keeps the reference unread"
        );
        kept_reference(
            cx,
            node,
            ptr,
            message,
            "to read them with casebook, write them into a YAML, JSON, JSONL or CSV file".into(),
        );
        return None;
    }
    let Some(base) = cx.base_dir else {
        let message =
            format!("the {what} `{shown}` cannot be found from standard input; casebook keeps the reference unread");
        kept_reference(
            cx,
            node,
            ptr,
            message,
            "give the configuration's path, so that the files it names are found beside it".into(),
        );
        return None;
    };
    let path = reference.strip_prefix("file://").unwrap_or(reference);
    let files = if crate::glob::is_pattern(path) {
        crate::glob::files(base, path, MAX_FILES)
    } else {
        let file = base.join(path);
        if file.is_file() { vec![file] } else { Vec::new() }
    };
    if files.is_empty() {
        let message =
            format!("no file matches `{shown}`: promptfoo reads no {what} from it; casebook keeps the reference");
        let looked = base.join(path).display().to_string();
        let hint =
            format!("looked for {}; paths are relative to the file that names them", casebook_model::excerpt(&looked));
        kept_reference(cx, node, ptr, message, hint);
        return None;
    }
    Some(files)
}

/// Reads a file named at `node`, and hands its text to `read` with a context located in it;
/// the problems found there are reported in the file, with a hint naming where it is named.
/// `None` (reported) when it cannot be read.
fn in_named_file<T>(
    cx: &mut Cx<'_>,
    node: &Node,
    ptr: &Ptr<'_>,
    file: &std::path::Path,
    read: impl FnOnce(&mut Cx<'_>) -> T,
) -> Option<T> {
    let display = file.display().to_string();
    let text = match crate::source::read_file_beside(cx.files, file).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => {
            let message = format!("`{}` is not UTF-8 text", casebook_model::excerpt(&display));
            cx.report(Code::InvalidUtf8, node.offset, ptr, message).hint = Some("save it as UTF-8".into());
            return None;
        }
        Err(err) => {
            let (message, hint) = err.explain(&casebook_model::excerpt(&display));
            cx.report(Code::InvalidValue, node.offset, ptr, message).hint = Some(hint);
            return None;
        }
    };
    let src = crate::source::Source::new(&display, &text, 1, 0);
    let mut inner = Cx::new(&src, file.parent());
    inner.files = cx.files;
    let result = read(&mut inner);
    if !inner.diags.is_empty() {
        let (line, column, _) = cx.src.locate(node.offset);
        let named = format!("the file is named at {}:{line}:{column} ({ptr})", cx.src.file);
        for d in &mut inner.diags {
            d.hint = Some(match d.hint.take() {
                Some(hint) => format!("{hint}; {named}"),
                None => named.clone(),
            });
        }
    }
    cx.diags.extend(inner.diags);
    Some(result)
}

/// The tests in the files `reference` names (`standalone`: read as promptfoo reads a
/// standalone tests file, whose tests are described `Row #N` when they are not). `None` when
/// the reference is kept unread.
fn tests_files(
    cx: &mut Cx<'_>,
    node: &Node,
    ptr: &Ptr<'_>,
    reference: &str,
    defaults: Option<&Node>,
    standalone: bool,
) -> Option<Vec<Case>> {
    let files = named_files(cx, node, ptr, reference, "tests")?;
    if let Some(other) = files.iter().find(|f| TestsFile::of(f).is_none()) {
        let message = format!(
            "promptfoo cannot read tests from `{}` (it reads YAML, JSON, JSONL and CSV test files); casebook keeps the reference unread",
            casebook_model::excerpt(&other.display().to_string())
        );
        kept_reference(cx, node, ptr, message, "name only test files with the pattern".into());
        return None;
    }
    let mut cases = Vec::new();
    for file in &files {
        let kind = TestsFile::of(file)?;
        let read = in_named_file(cx, node, ptr, file, |inner| tests_in_file(inner, kind, defaults, standalone));
        cases.extend(read.into_iter().flatten());
    }
    for case in &mut cases {
        note(case, FROM, json!(reference));
    }
    Some(cases)
}

/// The tests of one file of tests, read in `cx` (whose source is the file).
fn tests_in_file(cx: &mut Cx<'_>, kind: TestsFile, defaults: Option<&Node>, standalone: bool) -> Vec<Case> {
    let text = cx.src.text;
    let mut cases = Vec::new();
    let one = |cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>| -> Option<Case> {
        if let NodeValue::String(path) = &node.value {
            let message = format!(
                "promptfoo reads the test in `{}` here; casebook does not follow a test file named inside a test file",
                casebook_model::excerpt(path)
            );
            cx.report(Code::Dropped, node.offset, ptr, message).hint =
                Some("name that file in the configuration's `tests` instead".into());
            return None;
        }
        match defaults {
            Some(defaults) => read_test_with(cx, node, ptr, defaults),
            None => read_test(cx, node, ptr),
        }
    };
    match kind {
        TestsFile::Yaml | TestsFile::Json => {
            let parsed = if kind == TestsFile::Json {
                crate::json::parse(text).map_err(|e| (e.offset, e.message, Code::JsonSyntax))
            } else {
                crate::yaml::parse(text).map_err(|e| (e.offset, e.message, Code::YamlSyntax))
            };
            match parsed {
                Err((offset, message, code)) => {
                    cx.report(code, offset, &Ptr::ROOT, message);
                }
                Ok(root) => match &root.value {
                    NodeValue::Null => {}
                    NodeValue::Array(items) => {
                        for (i, item) in items.iter().enumerate() {
                            cases.extend(one(cx, item, &Ptr::ROOT.index(i)));
                        }
                    }
                    NodeValue::Object(_) => cases.extend(one(cx, &root, &Ptr::ROOT)),
                    _ => cx.wrong_type(&root, &Ptr::ROOT, "a list of tests or one test"),
                },
            }
            if standalone && kind == TestsFile::Json {
                describe_rows(&mut cases, false);
            }
        }
        TestsFile::Jsonl => {
            let mut offset = 0;
            for (i, line) in text.split_inclusive('\n').enumerate() {
                let start = offset;
                offset += line.len();
                if line.trim().is_empty() {
                    continue;
                }
                match crate::json::parse(line) {
                    Err(e) => {
                        cx.report(Code::JsonSyntax, start + e.offset, &Ptr::ROOT, e.message).hint =
                            Some(format!("line {} of a JSON Lines file is one test", i + 1))
                    }
                    Ok(node) => {
                        let node = shifted(&node, start);
                        cases.extend(one(cx, &node, &Ptr::ROOT));
                    }
                }
            }
            if standalone {
                describe_rows(&mut cases, true);
            }
        }
        TestsFile::Csv => {
            let mut records = crate::csvtext::records(text);
            let columns: Vec<String> = match records.next() {
                Some(Ok((_, fields))) => {
                    fields.iter().map(|f| f.value(text).trim_start_matches('\u{feff}').trim().to_owned()).collect()
                }
                Some(Err(e)) => {
                    cx.report(Code::CsvSyntax, e.offset, &Ptr::ROOT, e.message.clone());
                    return cases;
                }
                None => return cases,
            };
            for record in records {
                match record {
                    Err(e) => {
                        cx.report(Code::CsvSyntax, e.offset, &Ptr::ROOT, e.message.clone());
                        break;
                    }
                    Ok((start, fields)) => {
                        cases.extend(csv_record_with(cx, &columns, &fields, start, defaults).map(|(c, _)| c))
                    }
                }
            }
            // A CSV file is always read as a standalone tests file.
            describe_rows(&mut cases, false);
        }
    }
    cases
}

/// promptfoo's descriptions of a standalone file's tests: `Row #N` where there is none (or for
/// every test, `always`, as for JSON Lines).
fn describe_rows(cases: &mut [Case], always: bool) {
    for (i, case) in cases.iter_mut().enumerate() {
        if always || case.description.as_deref().is_none_or(str::is_empty) {
            case.description = Some(format!("Row #{}", i + 1));
        }
    }
}

/// A node with every offset moved by `by` (a line's nodes, in its file).
fn shifted<'s>(node: &Node<'s>, by: usize) -> Node<'s> {
    let value = match &node.value {
        NodeValue::Array(items) => NodeValue::Array(items.iter().map(|i| shifted(i, by)).collect()),
        NodeValue::Object(entries) => NodeValue::Object(
            entries
                .iter()
                .map(|e| Entry { key: e.key.clone(), key_offset: e.key_offset + by, value: shifted(&e.value, by) })
                .collect(),
        ),
        other => other.clone(),
    };
    Node { offset: node.offset + by, value }
}

/// A test whose `vars` name files of variables (`vars: vars/*.yaml`, or a list of such), with
/// the variables promptfoo's `readTestFiles` reads from them in their place: each file's
/// mapping in turn, a later file's variable replacing an earlier one's. `Ok(None)` when its
/// `vars` name no files; `Err` when a file had errors (reported). The notes for the case's
/// layout (`vars_from`, the reference, and `vars_read`, a hash of what was read) come with it.
fn with_vars_files<'s>(cx: &mut Cx<'_>, test: &Node<'s>, ptr: &Ptr<'_>) -> Result<Option<(Node<'s>, Map)>, ()> {
    let NodeValue::Object(entries) = &test.value else { return Ok(None) };
    let Some(at) = entries.iter().position(|e| e.key == "vars") else { return Ok(None) };
    let vars = &entries[at].value;
    let vars_ptr = ptr.key("vars");
    // Each reference with its node and place.
    let references: Vec<(&str, &Node, Ptr<'_>)> = match &vars.value {
        NodeValue::String(s) => vec![(s.as_ref(), vars, vars_ptr)],
        NodeValue::Array(items) if !items.is_empty() => {
            let mut list = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let Some(s) = item.as_str() else { return Ok(None) };
                list.push((s, item, vars_ptr.index(i)));
            }
            list
        }
        _ => return Ok(None),
    };
    let errors_before = cx.diags.iter().filter(|d| d.is_error()).count();
    let mut merged = Map::new();
    for (reference, node, at_ptr) in &references {
        if reference.starts_with("file://") {
            // promptfoo's `readTestFiles` resolves the reference as written, prefix included
            // (`path.resolve(base, "file://x.yaml")` is `base/file:/x.yaml`): it finds no file
            // and the test runs without these variables.
            let message = format!(
                "promptfoo reads `vars` files by their path as written, and `{}` names no file \
                 (the `file://` prefix is not taken off here): the test runs without these variables; \
                 casebook keeps the reference",
                casebook_model::excerpt(reference)
            );
            let hint = "write the path without `file://` (`vars: vars/x.yaml`), as promptfoo reads `vars` files".into();
            kept_reference(cx, node, at_ptr, message, hint);
            continue;
        }
        let Some(files) = named_files(cx, node, at_ptr, reference, "variables") else { continue };
        for file in files {
            let read = in_named_file(cx, node, at_ptr, &file, |inner| {
                let root = match crate::yaml::parse(inner.src.text) {
                    Ok(root) => root,
                    Err(e) => {
                        inner.report(Code::YamlSyntax, e.offset, &Ptr::ROOT, e.message);
                        return None;
                    }
                };
                match root.value {
                    NodeValue::Null => Some(Map::new()),
                    _ => inner.map(&root, &Ptr::ROOT),
                }
            });
            for (name, value) in read.flatten().into_iter().flatten() {
                merged.insert(name, value);
            }
        }
    }
    if cx.diags.iter().filter(|d| d.is_error()).count() > errors_before {
        return Err(());
    }
    let mut notes = Map::new();
    notes.insert(VARS_FROM.into(), cx.json(vars, &vars_ptr).unwrap_or(Value::Null));
    notes.insert(VARS_READ.into(), json!(vars_hash(&merged)));
    let mut entries = entries.clone();
    entries[at].value = node_at(&Value::Object(merged), vars.offset);
    Ok(Some((Node { offset: test.offset, value: NodeValue::Object(entries) }, notes)))
}

/// A short hash of a test's variables, to tell whether they are still those read from files
/// (their canonical JSON: the order of their keys does not count).
fn vars_hash(vars: &Map) -> String {
    let text = casebook_canon::canonical_json(vars).unwrap_or_default();
    blake3::hash(text.as_bytes()).to_hex()[..16].to_owned()
}

/// The `vars` reference a written test keeps: its files' when its variables (`vars`, those the
/// test writes itself) are still what was read from them. `Err` when they changed.
fn vars_reference(layout: Option<&Map>, vars: Option<&Value>) -> Option<Result<Value, String>> {
    let reference = layout?.get(VARS_FROM)?;
    let read = layout?.get(VARS_READ).and_then(Value::as_str);
    let own = match vars {
        Some(Value::Object(vars)) => vars.clone(),
        None => Map::new(),
        Some(_) => return Some(Err(reference.to_string())),
    };
    Some(if read == Some(vars_hash(&own).as_str()) { Ok(reference.clone()) } else { Err(reference.to_string()) })
}

/// The reference (as the configuration wrote it) to the file of tests a case was read from,
/// which a written configuration does not keep: the test is written inline, which gives
/// promptfoo the same test (the writer tells it, [`crate::Encoded::inlined`]).
pub fn read_from(case: &Case) -> Option<String> {
    match layout::layout_for(case, NAME)?.get(FROM)? {
        Value::String(reference) => Some(reference.clone()),
        other => Some(other.to_string()),
    }
}

/// The references casebook kept unread before (`before`) or after a case, to write beside its
/// test.
pub fn kept_references(case: &Case, before: bool) -> Vec<Value> {
    let key = if before { REFS_BEFORE } else { REFS_AFTER };
    match layout::layout_for(case, NAME).and_then(|l| l.get(key)) {
        Some(Value::Array(list)) => list.clone(),
        _ => Vec::new(),
    }
}

/// The references of a configuration's layout ([`KEPT_REFS`]) that no written case carried
/// beside it (`written`, in the order they were written), in their order.
pub fn unwritten_references(layout: Option<&Map>, written: &[Value]) -> Vec<Value> {
    let Some(Value::Array(all)) = layout.and_then(|l| l.get(KEPT_REFS)) else { return Vec::new() };
    let mut written: Vec<&Value> = written.iter().collect();
    all.iter()
        .filter(|reference| match written.iter().position(|w| w == reference) {
            Some(i) => {
                written.remove(i);
                false
            }
            None => true,
        })
        .cloned()
        .collect()
}

/// Notes the references kept beside a case as lost, for a file that is a list of tests alone
/// (JSON Lines, CSV), which has no place for them.
pub fn no_place_for_references(case: &Case, lost: &mut Lost) {
    for reference in kept_references(case, true).into_iter().chain(kept_references(case, false)) {
        lost.push(format!(
            "the test file reference {reference} kept beside this test (a list of tests has no place for it)"
        ));
    }
}
