//! Whole-document formats (JSON and YAML files): finding the list of cases in the document,
//! reading the dataset header around it, and remembering the rest of the document so that the
//! same format's writer can reproduce it.

use casebook_model::{Case, Code, DatasetHeader, Map, excerpt};
use serde_json::{Value, json};

use crate::format::Format;
use crate::node::{Node, NodeValue};
use crate::pointer::Ptr;
use crate::source::{Cx, Fields};
use crate::{agenthealth, inspect, layout, maslab, native, promptfoo, voltagent};

/// A case and the byte offset of its id (or of the case) in the document.
pub type Located = (Case, usize);

/// Reads every case of a document; errors are in `cx`. `streamed` is the number of cases that
/// were read as the document was parsed (see [`crate::yaml::parse_streaming`]); their list is
/// empty in `root`.
pub fn read(
    cx: &mut Cx<'_>,
    root: &Node,
    format: Format,
    stem: &str,
    streamed: Option<usize>,
) -> (DatasetHeader, Vec<Located>) {
    let mut header = DatasetHeader::default();
    let mut doc_layout = Map::new();
    let root_ptr = Ptr::ROOT;
    // The list of cases, where it is (a path of keys), and its offset.
    let items: Option<(&[Node], &'static [&'static str], usize)>;
    // A promptfoo configuration's `defaultTest`, applied to each test.
    let mut defaults = None;
    // A promptfoo configuration's tests in the file its `tests` names (`None`: not followed),
    // and where it names it.
    let mut standalone: Option<(Option<Vec<Case>>, usize)> = None;
    match format {
        Format::Casebook => match &root.value {
            NodeValue::Array(list) => items = Some((list, &[], root.offset)),
            _ => {
                header = native::read_header(cx, root);
                items = match root.get("cases") {
                    Some(n) => cx.array(n, &root_ptr.key("cases")).map(|i| (i, &["cases"][..], n.offset)),
                    None => {
                        if matches!(root.value, NodeValue::Object(_)) {
                            cx.missing(
                                root,
                                &root_ptr,
                                "cases",
                                Some("a casebook dataset is `{name, cases: [...]}`".into()),
                            );
                        }
                        None
                    }
                };
            }
        },
        Format::AgentHealth => match &root.value {
            NodeValue::Array(list) => items = Some((list, &[], root.offset)),
            NodeValue::Object(_) => {
                doc_layout.insert("single_object".into(), Value::Bool(true));
                items = Some((std::slice::from_ref(root), &[], root.offset));
            }
            _ => {
                cx.wrong_type(root, &root_ptr, "an array of test cases or one test case");
                items = None;
            }
        },
        Format::Voltagent => {
            items = match cx.object(root, &root_ptr) {
                None => None,
                Some(entries) => {
                    let mut f = Fields::new(cx, entries, &root_ptr);
                    header.name = f.take("name").and_then(|n| cx.string(n, &root_ptr.key("name")));
                    header.description =
                        f.take("description").and_then(|n| cx.opt_string(n, &root_ptr.key("description")));
                    header.labels = f.take("tags").and_then(|n| cx.strings(n, &root_ptr.key("tags")));
                    header.metadata = f.take("metadata").and_then(|n| cx.map(n, &root_ptr.key("metadata")));
                    let data = f.take("data");
                    keep_rest(cx, &f, &root_ptr, &mut doc_layout, "data");
                    match data {
                        Some(n) => cx.array(n, &root_ptr.key("data")).map(|i| (i, &["data"][..], n.offset)),
                        None => {
                            cx.missing(
                                root,
                                &root_ptr,
                                "data",
                                Some("a VoltAgent dataset lists its items in `data`".into()),
                            );
                            None
                        }
                    }
                }
            };
        }
        Format::Maslab => {
            items = match cx.object(root, &root_ptr) {
                None => None,
                Some(entries) => {
                    let manifest =
                        root.get("kind").is_some() || root.get("apiVersion").is_some() || root.get("spec").is_some();
                    if manifest {
                        read_manifest_header(cx, root, entries, &mut header, &mut doc_layout)
                    } else {
                        doc_layout.insert("shape".into(), json!("flat"));
                        let mut f = Fields::new(cx, entries, &root_ptr);
                        header.name = f.take("name").and_then(|n| cx.string(n, &root_ptr.key("name")));
                        if header.name.is_none() {
                            // mas-lab's JSON benchmarks name themselves with `dataset`.
                            header.name = f.take("dataset").and_then(|n| cx.string(n, &root_ptr.key("dataset")));
                            if header.name.is_some() {
                                doc_layout.insert("name_key".into(), json!("dataset"));
                            }
                        }
                        header.description =
                            f.take("description").and_then(|n| cx.opt_string(n, &root_ptr.key("description")));
                        header.labels = f.take("tags").and_then(|n| cx.strings(n, &root_ptr.key("tags")));
                        let list = f.take("items");
                        keep_rest(cx, &f, &root_ptr, &mut doc_layout, "items");
                        match list {
                            Some(n) => cx.array(n, &root_ptr.key("items")).map(|i| (i, &["items"][..], n.offset)),
                            None => {
                                cx.missing(
                                    root,
                                    &root_ptr,
                                    "items",
                                    Some(
                                        "a mas-lab dataset is a `kind: Dataset` manifest or `{name, items: [...]}`"
                                            .into(),
                                    ),
                                );
                                None
                            }
                        }
                    }
                }
            };
        }
        Format::Inspect => match &root.value {
            NodeValue::Array(list) => items = Some((list, &[], root.offset)),
            _ => {
                cx.wrong_type(root, &root_ptr, "an array of samples");
                items = None;
            }
        },
        Format::Promptfoo => match &root.value {
            NodeValue::Array(list) => items = Some((list, &[], root.offset)),
            NodeValue::Object(entries) => {
                // A configuration with its tests inline: the rest of it is kept as it is.
                let mut f = Fields::new(cx, entries, &root_ptr);
                header.description = f.take("description").and_then(|n| cx.opt_string(n, &root_ptr.key("description")));
                let tests = f.take("tests");
                defaults = promptfoo::defaults(cx, root);
                let rest = kept(cx, &f, &root_ptr, "tests");
                doc_layout.insert("document".into(), Value::Object(rest));
                let p = root_ptr.key("tests");
                items = match tests {
                    Some(n) if matches!(n.value, NodeValue::String(_)) => {
                        // `tests: file://tests.csv`: the tests are those of the file.
                        standalone = Some((promptfoo::standalone_tests(cx, n, &p, defaults), n.offset));
                        None
                    }
                    Some(n) => cx.array(n, &p).map(|i| (i, &["tests"][..], n.offset)),
                    None => {
                        cx.missing(root, &root_ptr, "tests", Some("a promptfoo test file is a list of tests".into()));
                        None
                    }
                };
            }
            _ => {
                cx.wrong_type(root, &root_ptr, "a list of tests, or a configuration with `tests`");
                items = None;
            }
        },
        Format::Letta | Format::OpenaiEvals | Format::Csv => {
            unreachable!("letta, OpenAI evals and csv are read row by row")
        }
    }
    if header.name.is_none() {
        header.name = Some(stem.to_owned());
        doc_layout.insert("name_derived".into(), Value::Bool(true));
    }
    // A native document keeps the provenance it records (that of the file it came from).
    if format != Format::Casebook {
        header.provenance = layout::provenance(format.name(), false, doc_layout);
    }
    if let Some((read, offset)) = standalone {
        let cases: Vec<Located> = read.into_iter().flatten().map(|case| (case, offset)).collect();
        if cases.is_empty() {
            let message = "the file the configuration's `tests` names gives no tests";
            cx.report(Code::EmptyDataset, offset, &root_ptr.key("tests"), message).hint =
                Some("name a YAML, JSON, JSONL or CSV file of tests beside the configuration".into());
        }
        return (header, cases);
    }
    let Some((list, list_ptr, list_offset)) = items else {
        return (header, Vec::new());
    };
    let read_one = item_reader(format);
    let mut cases: Vec<Located> = Vec::with_capacity(list.len());
    let mut tests = promptfoo::TestsList::default();
    for (i, item) in list.iter().enumerate() {
        with_ptr(list_ptr, |p| {
            let item_ptr = p.index(i);
            let offset = item.get("id").map_or(item.offset, |n| n.offset);
            if format == Format::Promptfoo {
                cases.extend(tests.item(cx, item, &item_ptr, defaults).into_iter().map(|case| (case, offset)));
            } else if let Some(case) = read_one(cx, item, &item_ptr) {
                cases.push((case, offset));
            }
        });
    }
    let mut kept = Vec::new();
    with_ptr(list_ptr, |p| kept = tests.finish(cx, cases.last_mut().map(|(case, _)| case), list_offset, p, true));
    if let (false, Some(provenance)) = (kept.is_empty(), header.provenance.as_mut()) {
        provenance.layout.insert(promptfoo::KEPT_REFS.into(), Value::Array(kept));
    }
    if list.is_empty() && streamed.unwrap_or(0) == 0 {
        let (code, message, hint) = match format {
            Format::AgentHealth => (
                Code::EmptyDatasetAccepted,
                "the dataset has no test cases".to_owned(),
                Some("Agent Health's importer rejects an empty array"),
            ),
            Format::Casebook => (Code::EmptyDatasetAccepted, "the dataset has no cases".to_owned(), None),
            _ => (
                Code::EmptyDataset,
                format!("the {} dataset has no cases", format.name()),
                Some("add at least one case"),
            ),
        };
        with_ptr(list_ptr, |p| cx.report(code, list_offset, p, message).hint = hint.map(Into::into));
    }
    (header, cases)
}

/// The file a mas-lab manifest keeps its items in (`spec: {path, format}`), as the manifest
/// names it, with the format it gives.
pub fn items_file(header: &DatasetHeader) -> Option<(&str, Option<&str>)> {
    let spec = header.provenance.as_ref()?.layout.get("document")?.get("spec")?;
    if spec.get("items").is_some() {
        return None;
    }
    Some((spec.get("path")?.as_str()?, spec.get("format").and_then(Value::as_str)))
}

/// Reads the items of a manifest's items file: a list, `{items: [...]}` or
/// `{spec: {items: [...]}}`. The rest of the document goes into the header's layout
/// (`items_document`, with `null` where the list was), so the writer gives the file back.
pub fn read_items_document(cx: &mut Cx<'_>, root: &Node, header: &mut DatasetHeader) -> Vec<Located> {
    let root_ptr = Ptr::ROOT;
    let mut document = None;
    let found: Option<(&[Node], &[&str], usize)> = match &root.value {
        NodeValue::Array(list) => Some((list, &[], root.offset)),
        NodeValue::Object(entries) if root.get("items").is_some() => {
            let mut f = Fields::new(cx, entries, &root_ptr);
            let list = f.take("items");
            document = Some(kept(cx, &f, &root_ptr, "items"));
            list.and_then(|n| cx.array(n, &root_ptr.key("items")).map(|l| (l, &["items"][..], n.offset)))
        }
        NodeValue::Object(entries) if root.get("spec").and_then(|s| s.get("items")).is_some() => {
            let mut f = Fields::new(cx, entries, &root_ptr);
            let spec = f.take("spec");
            let mut doc = kept(cx, &f, &root_ptr, "spec");
            let spec_ptr = root_ptr.key("spec");
            let list = spec.and_then(|spec| {
                let entries = cx.object(spec, &spec_ptr)?;
                let mut sf = Fields::new(cx, entries, &spec_ptr);
                let list = sf.take("items");
                doc.insert("spec".into(), Value::Object(kept(cx, &sf, &spec_ptr, "items")));
                list
            });
            document = Some(doc);
            list.and_then(|n| cx.array(n, &spec_ptr.key("items")).map(|l| (l, &["spec", "items"][..], n.offset)))
        }
        _ => {
            cx.wrong_type(root, &root_ptr, "a list of items, or a mapping with `items`");
            None
        }
    };
    if let Some(document) = document {
        if let Some(p) = header.provenance.as_mut() {
            p.layout.insert("items_document".into(), Value::Object(document));
        }
    }
    let Some((list, list_ptr, list_offset)) = found else { return Vec::new() };
    let mut cases = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        with_ptr(list_ptr, |p| {
            if let Some(case) = maslab::read_item(cx, item, &p.index(i)) {
                cases.push((case, item.get("id").map_or(item.offset, |n| n.offset)));
            }
        });
    }
    if list.is_empty() {
        with_ptr(list_ptr, |p| {
            cx.report(Code::EmptyDataset, list_offset, p, "the items file has no items").hint =
                Some("add at least one item".into());
        });
    }
    cases
}

pub fn with_ptr(segments: &[&str], f: impl FnOnce(&Ptr<'_>)) {
    fn go(segments: &[&str], ptr: &Ptr<'_>, f: impl FnOnce(&Ptr<'_>)) {
        match segments.split_first() {
            None => f(ptr),
            Some((first, rest)) => go(rest, &ptr.key(first), f),
        }
    }
    go(segments, &Ptr::ROOT, f);
}

/// The mapper of one list item of a document format.
pub fn item_reader(format: Format) -> fn(&mut Cx<'_>, &Node, &Ptr<'_>) -> Option<Case> {
    match format {
        Format::Casebook => native::read_case,
        Format::AgentHealth => agenthealth::read_case,
        Format::Voltagent => voltagent::read_item,
        Format::Maslab => maslab::read_item,
        Format::Inspect => inspect::read_sample,
        Format::Promptfoo => promptfoo::read_test,
        Format::Letta | Format::OpenaiEvals | Format::Csv => |_, _, _| None,
    }
}

/// Keeps the document keys no reader took, for the writer of the same format.
fn keep_rest(cx: &mut Cx<'_>, f: &Fields<'_, '_>, ptr: &Ptr<'_>, doc_layout: &mut Map, list_key: &str) {
    let rest = kept(cx, f, ptr, list_key);
    if rest.keys().any(|k| k != list_key) {
        doc_layout.insert("document".into(), Value::Object(rest));
    }
}

/// The keys no reader took, with `null` where the list of cases (`list_key`) was, so that a
/// writer puts the cases back between the same keys.
fn kept(cx: &mut Cx<'_>, f: &Fields<'_, '_>, ptr: &Ptr<'_>, list_key: &str) -> Map {
    let mut rest = Map::new();
    for entry in f.rest_and(list_key) {
        if entry.key == list_key {
            rest.insert(entry.key.to_string(), Value::Null);
        } else if let Some(v) = cx.json(&entry.value, &ptr.key(&entry.key)) {
            rest.insert(entry.key.to_string(), v);
        }
    }
    rest
}

fn read_manifest_header<'n, 's>(
    cx: &mut Cx<'_>,
    root: &'n Node<'s>,
    entries: &'n [crate::node::Entry<'s>],
    header: &mut DatasetHeader,
    doc_layout: &mut Map,
) -> Option<(&'n [Node<'s>], &'static [&'static str], usize)> {
    let root_ptr = Ptr::ROOT;
    let mut f = Fields::new(cx, entries, &root_ptr);
    let mut document = Map::new();
    for key in ["apiVersion", "kind"] {
        match f.take(key) {
            Some(n) => {
                if let Some(v) = cx.string(n, &root_ptr.key(key)) {
                    if key == "kind" && v != "Dataset" {
                        let d = cx.report(
                            Code::InvalidValue,
                            n.offset,
                            &root_ptr.key(key),
                            format!("expected `kind: Dataset`, found `{}`", excerpt(&v)),
                        );
                        d.hint = Some("this file is not a mas-lab dataset manifest".into());
                    }
                    document.insert(key.into(), json!(v));
                }
            }
            None => {
                cx.missing(
                    root,
                    &root_ptr,
                    key,
                    Some("a mas-lab manifest starts with `apiVersion: lab/v1` and `kind: Dataset`".into()),
                );
            }
        }
    }
    if let Some(meta) = f.take("metadata") {
        let p = root_ptr.key("metadata");
        if let Some(meta_entries) = cx.object(meta, &p) {
            let mut mf = Fields::new(cx, meta_entries, &p);
            header.name = mf.take("name").and_then(|n| cx.string(n, &p.key("name")));
            header.description = mf.take("description").and_then(|n| cx.opt_string(n, &p.key("description")));
            header.labels = mf.take("tags").and_then(|n| cx.strings(n, &p.key("tags")));
            let mut rest = Map::new();
            for entry in mf.rest() {
                if let Some(v) = cx.json(&entry.value, &p.key(&entry.key)) {
                    rest.insert(entry.key.to_string(), v);
                }
            }
            if !rest.is_empty() {
                header.metadata = Some(rest);
            }
        }
        document.insert("metadata".into(), json!({}));
    }
    let spec = f.take("spec");
    let mut other = Map::new();
    for entry in f.rest() {
        if let Some(v) = cx.json(&entry.value, &root_ptr.key(&entry.key)) {
            other.insert(entry.key.to_string(), v);
        }
    }
    let Some(spec) = spec else {
        cx.missing(root, &root_ptr, "spec", Some("the items go in `spec.items`".into()));
        return None;
    };
    let spec_ptr = root_ptr.key("spec");
    let spec_entries = cx.object(spec, &spec_ptr)?;
    let mut sf = Fields::new(cx, spec_entries, &spec_ptr);
    let list = sf.take("items");
    document.insert("spec".into(), Value::Object(kept(cx, &sf, &spec_ptr, "items")));
    for (k, v) in other {
        document.insert(k, v);
    }
    doc_layout.insert("document".into(), Value::Object(document));
    match list {
        Some(n) => {
            let items = cx.array(n, &spec_ptr.key("items"))?;
            Some((items, &["spec", "items"][..], n.offset))
        }
        // The items are in another file, which the caller reads (see [`items_file`]).
        None if spec.get("path").is_some_and(|p| matches!(p.value, NodeValue::String(_))) => None,
        None => {
            let d = cx.report(Code::MissingField, spec.offset, &spec_ptr, "missing required field `items`");
            d.hint =
                Some("list the dataset's items in `spec.items`, or name a file that holds them in `spec.path`".into());
            None
        }
    }
}
