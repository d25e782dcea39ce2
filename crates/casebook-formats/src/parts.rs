//! Readers for the parts of a case that several formats share: turns, memory seeds, context
//! items, tools and expected outcomes.

use std::path::{Component, Path, PathBuf};

use casebook_model::{
    Code, ContextItem, Map, MemorySeeds, Outcome, OutcomeRole, Role, SEED_LIST_KEYS, Seed, Tool, Turn,
};
use serde_json::Value;

use crate::node::{Node, NodeValue};
use crate::pointer::Ptr;
use crate::source::{Cx, Fields, Source, did_you_mean};

pub fn role(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Role> {
    let text = cx.string(node, ptr)?;
    let role = Role::parse(&text);
    if role.is_none() {
        let d = cx.report(
            Code::UnknownRole,
            node.offset,
            ptr,
            format!("unknown turn role `{}`", casebook_model::excerpt(&text)),
        );
        let suggestion =
            (text.len() <= 64).then(|| did_you_mean(&text.to_lowercase(), &["user", "hitl", "system"])).flatten();
        d.hint = Some(match suggestion {
            Some(s) => format!("did you mean `{s}`? roles are `user`, `hitl` and `system`"),
            None => "roles are `user`, `hitl` (an operator stepping in) and `system`".into(),
        });
    }
    role
}

/// One `{role, content}` message; `default_role` applies when `role` is absent.
pub fn turn(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, default_role: Option<Role>) -> Option<Turn> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let role = match f.take("role") {
        Some(n) => role(cx, n, &ptr.key("role")),
        None => {
            if default_role.is_none() {
                cx.missing(node, ptr, "role", Some("add `role: user`, `hitl` or `system`".into()));
            }
            default_role
        }
    };
    let content = match f.take("content") {
        Some(n) => cx.string(n, &ptr.key("content")),
        None => {
            cx.missing(node, ptr, "content", None);
            None
        }
    };
    unknown_fields(cx, &f, ptr, &["role", "content"]);
    Some(Turn { role: role?, content: content? })
}

pub fn turns(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, default_role: Option<Role>) -> Option<Vec<Turn>> {
    let items = cx.array(node, ptr)?;
    let mut out = Vec::with_capacity(items.len());
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match turn(cx, item, &ptr.index(i), default_role) {
            Some(t) => out.push(t),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// Reports every key no mapper took as an unknown field, with a suggestion.
pub fn unknown_fields(cx: &mut Cx<'_>, f: &Fields<'_, '_>, ptr: &Ptr<'_>, known: &[&str]) {
    for entry in f.rest() {
        let d = cx.report(
            Code::UnknownField,
            entry.key_offset,
            &ptr.key(&entry.key),
            format!("unknown field `{}`", casebook_model::excerpt(&entry.key)),
        );
        d.hint = Some(match did_you_mean(&entry.key, known) {
            Some(s) => format!("did you mean `{s}`?"),
            None => {
                format!("known fields here: {}", known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "))
            }
        });
    }
}

fn seed(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Seed> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let source = f.take("source").and_then(|n| cx.string(n, &ptr.key("source")));
    let content = match f.take("content") {
        Some(n) => cx.string(n, &ptr.key("content")),
        None => {
            cx.missing(node, ptr, "content", Some("a seed is `{source, content, target_agent?, metadata?}`".into()));
            None
        }
    };
    if source.is_none() && !f.has("source") {
        cx.missing(
            node,
            ptr,
            "source",
            Some("name where the knowledge comes from, e.g. `source: user_history`".into()),
        );
    }
    let target_agent = f.take("target_agent").and_then(|n| cx.opt_string(n, &ptr.key("target_agent")));
    let metadata = f.take("metadata").and_then(|n| cx.map(n, &ptr.key("metadata")));
    let mut extra = Map::new();
    for entry in f.rest() {
        if let Some(v) = cx.json(&entry.value, &ptr.key(&entry.key)) {
            extra.insert(entry.key.to_string(), v);
        }
    }
    Some(Seed { source: source?, content: content?, target_agent, metadata, extra })
}

/// `memory_seeds`: an inline list, a path to a seed file (resolved against the dataset's folder,
/// loaded and validated here, and kept with the case as [`MemorySeeds::File`]), or the
/// `{file, content}` form a casebook file writes for a seed file it carries.
pub fn memory_seeds(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<MemorySeeds> {
    match &node.value {
        NodeValue::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            let mut ok = true;
            for (i, item) in items.iter().enumerate() {
                match seed(cx, item, &ptr.index(i)) {
                    Some(s) => out.push(s),
                    None => ok = false,
                }
            }
            ok.then_some(MemorySeeds::Inline(out))
        }
        NodeValue::String(path) => match cx.base_dir {
            // Read from standard input: there is no folder to find the file in.
            None => Some(MemorySeeds::Path(path.to_string())),
            Some(_) => {
                let content = match cx.seed_files.get(path.as_ref()) {
                    Some(Some(content)) => content.clone(),
                    Some(None) => {
                        let message = format!(
                            "the seed file `{}` has problems, reported where it was first named",
                            casebook_model::excerpt(path)
                        );
                        cx.report(Code::SeedPathMissing, node.offset, ptr, message);
                        return None;
                    }
                    None => {
                        let content = read_beside(cx, node, ptr, path, &SEED_FILE, |cx, root| {
                            seed_document(cx, root, &Ptr::ROOT);
                        });
                        cx.seed_files.insert(path.to_string(), content.clone());
                        content?
                    }
                };
                Some(MemorySeeds::File { file: path.to_string(), content })
            }
        },
        NodeValue::Object(_) if node.get("file").is_some() => {
            let (file, content) = carried_file(cx, node, ptr, &SEED_FILE, seed_document)?;
            Some(MemorySeeds::File { file, content })
        }
        _ => {
            cx.wrong_type(node, ptr, "a list of seeds or a path to a seed file");
            None
        }
    }
}

/// What kind of file a dataset names beside it (seed file, snapshot file), for messages.
pub(crate) struct FileKind {
    pub what: &'static str,
    pub missing: Code,
    pub escapes: Code,
}

static SEED_FILE: FileKind =
    FileKind { what: "seed file", missing: Code::SeedPathMissing, escapes: Code::SeedPathEscapes };

/// Reads the file `path` names (relative to the dataset file), checks its document with
/// `check`, and returns it as JSON. Problems inside the file are reported at their place in
/// it, with a hint naming where the dataset names it.
pub(crate) fn read_beside(
    cx: &mut Cx<'_>,
    node: &Node,
    ptr: &Ptr<'_>,
    path: &str,
    kind: &FileKind,
    check: impl FnOnce(&mut Cx<'_>, &Node),
) -> Option<Value> {
    let base = cx.base_dir?;
    let what = kind.what;
    let Some(resolved) = inside(base, path) else {
        let d = cx.report(
            kind.escapes,
            node.offset,
            ptr,
            format!("{what} path `{}` leaves the dataset's folder", casebook_model::excerpt(path)),
        );
        d.hint = Some(format!("keep {what}s in the dataset's folder or below it"));
        return None;
    };
    let gate = cx.files.map(|files| files.gate(&resolved));
    let _reading = gate.as_ref().map(|gate| gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    if let Some(content) = cx.files.and_then(|files| files.get(&resolved)) {
        return Some(content);
    }
    #[cfg(test)]
    tests::FILES_READ.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(resolved.clone());
    let read = crate::source::read_file_beside(cx.files, &resolved).and_then(|bytes| {
        String::from_utf8(bytes).map_err(|_| {
            crate::source::BesideError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
        })
    });
    let text = match read {
        Ok(text) => text,
        Err(too_much @ (crate::source::BesideError::TooLarge(_) | crate::source::BesideError::OverTotal)) => {
            let (message, hint) = too_much.explain(&casebook_model::excerpt(path));
            cx.report(Code::InvalidValue, node.offset, ptr, format!("{what} {message}")).hint = Some(hint);
            return None;
        }
        Err(crate::source::BesideError::Io(err)) => {
            let d = cx.report(
                kind.missing,
                node.offset,
                ptr,
                format!("{what} `{}` cannot be read: {}", casebook_model::excerpt(path), err.kind()),
            );
            let looked = resolved.display().to_string();
            d.hint = Some(format!(
                "looked for {}; paths are relative to the dataset file",
                casebook_model::excerpt(&looked)
            ));
            return None;
        }
    };
    let file = resolved.display().to_string();
    let src = Source::new(&file, &text, 1, 0);
    let mut inner = Cx::new(&src, None);
    let content = match crate::yaml::parse(&text) {
        Err(err) => {
            inner.report(Code::YamlSyntax, err.offset, &Ptr::ROOT, err.message);
            None
        }
        Ok(root) => {
            check(&mut inner, &root);
            inner.json(&root, &Ptr::ROOT)
        }
    };
    let ok = !inner.diags.iter().any(|d| d.is_error());
    if !inner.diags.is_empty() {
        // Say which case named the file: its problems are located in the file itself.
        let (line, column, _) = cx.src.locate(node.offset);
        let named = format!("the {what} is named at {}:{line}:{column} ({ptr})", cx.src.file);
        for d in &mut inner.diags {
            d.hint = Some(match d.hint.take() {
                Some(hint) => format!("{hint}; {named}"),
                None => named.clone(),
            });
        }
    }
    if let (Some(files), Some(content), true) = (cx.files, &content, inner.diags.is_empty()) {
        files.keep(&resolved, text.len(), content);
    }
    cx.diags.extend(inner.diags);
    content.filter(|_| ok)
}

/// The `{file, content}` form a casebook file writes for a file it carries: the path must stay
/// in the dataset's folder, and `check` checks the document where it stands.
pub(crate) fn carried_file(
    cx: &mut Cx<'_>,
    node: &Node,
    ptr: &Ptr<'_>,
    kind: &FileKind,
    check: impl FnOnce(&mut Cx<'_>, &Node, &Ptr<'_>),
) -> Option<(String, Value)> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let what = kind.what;
    let file = f.take("file").and_then(|n| {
        let file = cx.string(n, &ptr.key("file"))?;
        if !stays_inside(&file) {
            cx.report(
                kind.escapes,
                n.offset,
                &ptr.key("file"),
                format!("{what} path `{}` leaves the dataset's folder", casebook_model::excerpt(&file)),
            )
            .hint = Some(format!("a {what}'s path is relative to the dataset file and stays in its folder"));
            return None;
        }
        Some(file)
    });
    let content = match f.take("content") {
        Some(n) => {
            let errors = cx.diags.iter().filter(|d| d.is_error()).count();
            check(cx, n, &ptr.key("content"));
            let value = cx.json(n, &ptr.key("content"));
            value.filter(|_| cx.diags.iter().filter(|d| d.is_error()).count() == errors)
        }
        None => {
            cx.missing(node, ptr, "content", Some(format!("a carried {what} is `{{file, content}}`")));
            None
        }
    };
    unknown_fields(cx, &f, ptr, &["file", "content"]);
    Some((file?, content?))
}

/// Checks a seed file's document: a list of seeds, or a mapping with the list under one of
/// [`SEED_LIST_KEYS`].
fn seed_document(cx: &mut Cx<'_>, root: &Node, at: &Ptr<'_>) {
    let list = match &root.value {
        NodeValue::Array(_) => Some((root, *at)),
        NodeValue::Object(_) => SEED_LIST_KEYS.iter().find_map(|k| root.get(k).map(|n| (n, at.key(k)))),
        _ => None,
    };
    match list {
        None => {
            cx.report(
                Code::WrongType,
                root.offset,
                at,
                "a seed file holds a list, or a mapping with `seeds`, `items`, `memory_seeds` or `entries`",
            );
        }
        Some((list, p)) => {
            if let Some(items) = cx.array(list, &p) {
                for (i, item) in items.iter().enumerate() {
                    seed_file_entry(cx, item, &p.index(i));
                }
            }
        }
    }
}

/// A seed file entry: a seed, or a `MemorySeed` entry `{key, content}`.
fn seed_file_entry(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) {
    if node.get("key").is_some() && node.get("source").is_none() {
        let Some(entries) = cx.object(node, ptr) else { return };
        let mut f = Fields::new(cx, entries, ptr);
        if let Some(n) = f.take("key") {
            cx.string(n, &ptr.key("key"));
        }
        match f.take("content").or_else(|| f.take("text")) {
            Some(n) => {
                cx.string(n, &ptr.key("content"));
            }
            None => cx.missing(node, ptr, "content", None),
        }
    } else {
        seed(cx, node, ptr);
    }
}

/// Whether the relative path `path` stays inside the folder it starts from (as written; links
/// are not followed).
fn stays_inside(path: &str) -> bool {
    let mut depth = 0usize;
    for component in Path::new(path).components() {
        match component {
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    depth > 0
}

/// `base.join(path)` if it stays inside `base` (lexically and after resolving links).
pub(crate) fn inside(base: &Path, path: &str) -> Option<PathBuf> {
    if !stays_inside(path) {
        return None;
    }
    // Without `./` steps, so that diagnostics name `ds/seeds/bob.yaml`, not `ds/./seeds/bob.yaml`.
    let relative: PathBuf = Path::new(path).components().filter(|c| !matches!(c, Component::CurDir)).collect();
    // A dataset named without a folder lives in the current one.
    let base = if base.as_os_str().is_empty() { Path::new(".") } else { base };
    let joined = base.join(relative);
    // Links must not lead out either. A file that does not exist is reported by the caller.
    if let Ok(real) = joined.canonicalize() {
        let real_base = base.canonicalize().ok()?;
        if !real.starts_with(real_base) {
            return None;
        }
    }
    Some(joined)
}

pub fn context_item(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<ContextItem> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let kind = f.take("type").and_then(|n| cx.string(n, &ptr.key("type")));
    let source = f.take("source").and_then(|n| cx.string(n, &ptr.key("source")));
    let content = match f.take("content") {
        Some(n) => cx.json(n, &ptr.key("content")),
        None => {
            cx.missing(node, ptr, "content", None);
            None
        }
    };
    let metadata = f.take("metadata").and_then(|n| cx.map(n, &ptr.key("metadata")));
    unknown_fields(cx, &f, ptr, &["type", "source", "content", "metadata"]);
    Some(ContextItem { kind, source, content: content?, metadata })
}

pub fn tool(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Tool> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let name = match f.take("name") {
        Some(n) => cx.string(n, &ptr.key("name")),
        None => {
            cx.missing(node, ptr, "name", None);
            None
        }
    };
    let description = f.take("description").and_then(|n| cx.string(n, &ptr.key("description")));
    let parameters = f.take("parameters").and_then(|n| cx.json(n, &ptr.key("parameters")));
    let responses = f.take("responses").and_then(|n| crate::snapshot::responses(cx, n, &ptr.key("responses")));
    let default = f.take("default").and_then(|n| crate::snapshot::default(cx, n, &ptr.key("default")));
    let mut extra = Map::new();
    for entry in f.rest() {
        if let Some(v) = cx.json(&entry.value, &ptr.key(&entry.key)) {
            extra.insert(entry.key.to_string(), v);
        }
    }
    Some(Tool { name: name?, description, parameters, responses, default, extra })
}

pub fn outcome(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Outcome> {
    match &node.value {
        NodeValue::String(s) => Some(Outcome::Text(s.to_string())),
        NodeValue::Object(entries) => {
            let mut f = Fields::new(cx, entries, ptr);
            let outcome = match f.take("outcome") {
                Some(n) => cx.string(n, &ptr.key("outcome")),
                None => {
                    cx.missing(node, ptr, "outcome", None);
                    None
                }
            };
            let role = match f.take("role") {
                Some(n) => match cx.string(n, &ptr.key("role")).as_deref() {
                    Some("gate") => Some(OutcomeRole::Gate),
                    Some("observe") => Some(OutcomeRole::Observe),
                    Some(other) => {
                        let d = cx.report(
                            Code::InvalidValue,
                            n.offset,
                            &ptr.key("role"),
                            format!("unknown outcome role `{}`", casebook_model::excerpt(other)),
                        );
                        d.hint = Some("use `gate` (must hold) or `observe` (reported only)".into());
                        None
                    }
                    None => None,
                },
                None => {
                    cx.missing(node, ptr, "role", Some("use `gate` or `observe`".into()));
                    None
                }
            };
            unknown_fields(cx, &f, ptr, &["outcome", "role"]);
            Some(Outcome::Detailed { outcome: outcome?, role: role? })
        }
        _ => {
            cx.wrong_type(node, ptr, "a string or `{outcome, role}`");
            None
        }
    }
}

/// Reads each item of an array with `read`, keeping the list only if every item is valid.
pub fn list<T>(
    cx: &mut Cx<'_>,
    node: &Node,
    ptr: &Ptr<'_>,
    read: impl Fn(&mut Cx<'_>, &Node, &Ptr<'_>) -> Option<T>,
) -> Option<Vec<T>> {
    let items = cx.array(node, ptr)?;
    let mut out = Vec::with_capacity(items.len());
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match read(cx, item, &ptr.index(i)) {
            Some(v) => out.push(v),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// A sample's id where a format takes a non-empty string or an integer (Inspect, promptfoo): an
/// integer is remembered in `layout` (`id_int`), to be written back as one.
pub fn sample_id(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>, layout: &mut Map) -> Option<String> {
    match &node.value {
        NodeValue::String(s) if !s.is_empty() => Some(s.to_string()),
        NodeValue::String(_) => {
            cx.report(Code::InvalidValue, node.offset, ptr, "the id is empty");
            None
        }
        NodeValue::Number(text) if crate::node::is_integer(text) => {
            // Out-of-range integers are reported by `value`.
            cx.value(node, ptr)?;
            layout.insert("id_int".into(), Value::Bool(true));
            Some(text.to_string())
        }
        _ => {
            cx.wrong_type(node, ptr, "a string or an integer");
            None
        }
    }
}

/// A case's id as [`sample_id`] read it: an integer again when it was one.
pub fn sample_id_value(case: &casebook_model::Case, layout: Option<&Map>) -> Value {
    if crate::layout::flag(layout, "id_int") {
        if let Ok(n) = case.id.parse::<i64>() {
            return Value::from(n);
        }
    }
    Value::String(case.id.clone())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Mutex;

    use crate::{Batch, Consumer, Flow, Input, ReadOptions, Start};

    /// Every file [`super::read_beside`] read from disk (tests running at once each look for
    /// their own folder's).
    pub(super) static FILES_READ: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

    /// The shape of the corpus's incident datasets: many JSONL rows naming one snapshot file
    /// and one seed file beside them.
    #[test]
    fn rows_sharing_a_file_read_it_once_per_read() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("incident.yaml");
        let seeds = dir.path().join("seeds.json");
        fs_err::write(&snapshot, "- when: {includes: {service: db}}\n  result: [\"timeout after 30s\"]\n").unwrap();
        fs_err::write(&seeds, r#"[{"source": "runbook", "content": "restart the pool"}]"#).unwrap();
        // Enough rows for several chunks, so several workers name the files.
        let rows: String = (0..6000)
            .map(|i| {
                format!(
                    "{{\"id\":\"c{i}\",\"input\":\"why is checkout slow, take {i}?\",\"memory_seeds\":\"seeds.json\",\
                     \"tools\":[{{\"name\":\"logs\",\"responses\":\"incident.yaml\"}}]}}\n"
                )
            })
            .collect();
        let data = dir.path().join("data.jsonl");
        fs_err::write(&data, rows).unwrap();
        struct Count(usize, usize);
        impl Consumer<()> for Count {
            fn start(&mut self, _: &Start) -> Flow {
                Flow::Continue
            }
            fn batch(&mut self, batch: &mut Batch, _: &mut ()) -> Flow {
                self.0 += batch.cases.len();
                self.1 += batch.diagnostics.len();
                for case in &batch.cases {
                    let tools = case.task.tools.as_deref().unwrap();
                    assert!(
                        matches!(&tools[0].responses, Some(casebook_model::Responses::File { content, .. }) if content[0]["result"][0] == "timeout after 30s")
                    );
                }
                Flow::Continue
            }
        }
        let mut count = Count(0, 0);
        let opts = ReadOptions { threads: 4, ..ReadOptions::default() };
        crate::read(&Input::path(&data), &opts, &|_: &Batch| (), &mut count).unwrap();
        assert_eq!((count.0, count.1), (6000, 0));
        let read = FILES_READ.lock().unwrap();
        let times = |path: &PathBuf| read.iter().filter(|p| *p == path).count();
        assert_eq!((times(&snapshot), times(&seeds)), (1, 1), "{read:?}");
    }
}
