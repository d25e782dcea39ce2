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
/// The variable a text input goes in when the case does not say.
const DEFAULT_VAR: &str = "input";

/// Maps one test onto a case. `None` when it has errors (they are in `cx`).
pub fn read_test(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Case> {
    read_test_from(cx, node, ptr, &[])
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
/// their order, then the test's others), its asserts before the test's, and its `threshold`
/// and `provider` where the test has none. What came from it is noted in the case's layout
/// (`defaults`), so that a configuration written with the same `defaultTest` leaves it out of
/// each test again ([`strip_defaults`]).
pub fn read_test_with(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, defaults: &Node) -> Option<Case> {
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
        if !matches!(key, "vars" | "options" | "metadata" | ASSERT | THRESHOLD | "provider") || own(key).is_some() {
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
        if let Some(provenance) = case.provenance.as_mut() {
            provenance.layout.insert("defaults".into(), Value::Object(notes));
        }
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
    for key in [THRESHOLD, "provider"] {
        if notes.contains_key(key) && test.get(key).is_some() && test.get(key) == defaults.get(key) {
            test.shift_remove(key);
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
    let mut case = read_test(cx, &node, &Ptr::ROOT)?;
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
