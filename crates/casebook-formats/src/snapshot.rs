//! Reading a tool's world snapshot (`responses` and `default`, see
//! [`casebook_model::snapshot`]) node by node, so that every problem names its file, line and
//! column: wrong types and unknown keys here, and what [`Snapshot::compile`] finds (bad patterns,
//! `result` with `error`, query templates, timeouts) at the node its pointer leads to. A
//! snapshot file a tool names is read with the dataset, as seed files are, and kept in the case
//! as [`Responses::File`].

use casebook_model::snapshot::{FallbackKeyword, Query, Response, Strings, When};
use casebook_model::{Code, Fallback, Map, Responses, Snapshot, Tool};

use crate::node::{Node, NodeValue};
use crate::parts::{self, unknown_fields};
use crate::pointer::Ptr;
use crate::source::{Cx, Fields};

const RESPONSE_FIELDS: &[&str] = &["when", "result", "error", "query"];
const WHEN_FIELDS: &[&str] = &["arguments", "includes", "matches"];
const QUERY_FIELDS: &[&str] = &["url", "headers", "command", "timeout_secs", "frozen_at"];
const DEFAULT_FIELDS: &[&str] = &["result", "error"];

/// A tool's `responses`: an inline list, a path to a snapshot file (read here, relative to the
/// dataset file), or the `{file, content}` form a casebook file writes for a file it carries.
pub fn responses(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Responses> {
    match &node.value {
        NodeValue::Array(_) => response_list(cx, node, ptr).map(Responses::Inline),
        NodeValue::String(path) => match cx.base_dir {
            // Read from standard input: there is no folder to find the file in.
            None => Some(Responses::Path(path.to_string())),
            Some(_) => {
                let content = match cx.snapshot_files.get(path.as_ref()) {
                    Some(Some(content)) => content.clone(),
                    Some(None) => {
                        let message = format!(
                            "the snapshot file `{}` has problems, reported where it was first named",
                            casebook_model::excerpt(path)
                        );
                        cx.report(Code::SnapshotPathMissing, node.offset, ptr, message);
                        return None;
                    }
                    None => {
                        let content = parts::read_beside(cx, node, ptr, path, &SNAPSHOT_FILE, |cx, root| {
                            response_list(cx, root, &Ptr::ROOT);
                        });
                        cx.snapshot_files.insert(path.to_string(), content.clone());
                        content?
                    }
                };
                Some(Responses::File { file: path.to_string(), content })
            }
        },
        NodeValue::Object(_) if node.get("file").is_some() => {
            let (file, content) = parts::carried_file(cx, node, ptr, &SNAPSHOT_FILE, |cx, n, p| {
                response_list(cx, n, p);
            })?;
            Some(Responses::File { file, content })
        }
        _ => {
            cx.wrong_type(node, ptr, "a list of responses or a path to a snapshot file");
            None
        }
    }
}

/// How problems with a snapshot file a dataset names are told.
pub(crate) static SNAPSHOT_FILE: parts::FileKind =
    parts::FileKind { what: "snapshot file", missing: Code::SnapshotPathMissing, escapes: Code::SnapshotPathEscapes };

/// A list of responses, checked as [`Snapshot::compile`] checks them once every item reads.
fn response_list(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Vec<Response>> {
    let list = parts::list(cx, node, ptr, response)?;
    let probe = probe(Some(Responses::Inline(list)), None);
    report_checks(cx, &probe, "/tools/0/responses", node, ptr);
    match probe.responses {
        Some(Responses::Inline(list)) => Some(list),
        _ => None,
    }
}

/// A tool's `default`: `empty`, `{result}` or `{error}`.
pub fn default(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Fallback> {
    let fallback = match &node.value {
        NodeValue::String(s) if s == "empty" => Fallback::Keyword(FallbackKeyword::Empty),
        NodeValue::String(s) => {
            let d = cx.report(
                Code::InvalidValue,
                node.offset,
                ptr,
                format!("unknown default `{}`", casebook_model::excerpt(s)),
            );
            d.hint = Some("a default is `empty`, `{result: …}` or `{error: …}`".into());
            return None;
        }
        NodeValue::Object(entries) => {
            let mut f = Fields::new(cx, entries, ptr);
            let result = f.take("result").and_then(|n| present(n)).and_then(|n| cx.json(n, &ptr.key("result")));
            let error = f.take("error").and_then(|n| cx.opt_string(n, &ptr.key("error")));
            unknown_fields(cx, &f, ptr, DEFAULT_FIELDS);
            Fallback::Answer { result, error }
        }
        _ => {
            cx.wrong_type(node, ptr, "`empty`, `{result}` or `{error}`");
            return None;
        }
    };
    let probe = probe(None, Some(fallback));
    report_checks(cx, &probe, "/tools/0/default", node, ptr);
    probe.default
}

fn response(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Response> {
    let entries = cx.object(node, ptr)?;
    let errors = cx.diags.len();
    let mut f = Fields::new(cx, entries, ptr);
    let when = f.take("when").and_then(|n| present(n)).and_then(|n| when(cx, n, &ptr.key("when")));
    let result = f.take("result").and_then(|n| present(n)).and_then(|n| cx.json(n, &ptr.key("result")));
    let error = f.take("error").and_then(|n| cx.opt_string(n, &ptr.key("error")));
    let query_node = f.take("query").and_then(|n| present(n));
    let query = query_node.and_then(|n| query(cx, n, &ptr.key("query")));
    unknown_fields(cx, &f, ptr, RESPONSE_FIELDS);
    if cx.diags[errors..].iter().any(|d| d.is_error()) {
        return None;
    }
    if let (Some(n), None, None) = (query_node, &result, &error) {
        let d = cx.report(Code::UnfrozenQuery, n.offset, &ptr.key("query"), "this query was never run");
        d.hint =
            Some("`casebook freeze` runs it and records its answer; until then a call it matches gets an error".into());
    }
    Some(Response { when, result, error, query })
}

fn when(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<When> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let arguments = f.take("arguments").and_then(|n| present(n)).and_then(|n| cx.json(n, &ptr.key("arguments")));
    let includes = f.take("includes").and_then(|n| present(n)).and_then(|n| cx.map(n, &ptr.key("includes")));
    let matches = f.take("matches").and_then(|n| present(n)).and_then(|n| strings_by_key(cx, n, &ptr.key("matches")));
    unknown_fields(cx, &f, ptr, WHEN_FIELDS);
    Some(When { arguments, includes, matches })
}

fn query(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Query> {
    let entries = cx.object(node, ptr)?;
    let mut f = Fields::new(cx, entries, ptr);
    let url = f.take("url").and_then(|n| cx.opt_string(n, &ptr.key("url")));
    let headers = f.take("headers").and_then(|n| present(n)).and_then(|n| strings_by_key(cx, n, &ptr.key("headers")));
    let command = f.take("command").and_then(|n| present(n)).and_then(|n| cx.strings(n, &ptr.key("command")));
    let timeout_secs = f.take("timeout_secs").and_then(|n| present(n)).and_then(|n| match &n.value {
        NodeValue::Number(text) => text.parse::<f64>().ok(),
        _ => {
            cx.wrong_type(n, &ptr.key("timeout_secs"), "a number of seconds");
            None
        }
    });
    let frozen_at = f.take("frozen_at").and_then(|n| cx.opt_string(n, &ptr.key("frozen_at")));
    unknown_fields(cx, &f, ptr, QUERY_FIELDS);
    Some(Query { url, headers, command, timeout_secs, frozen_at })
}

/// An object whose values are strings (`matches`, `headers`).
/// Keys stay in the order written (a key given twice is an error, reported here).
fn strings_by_key(cx: &mut Cx<'_>, node: &Node, ptr: &Ptr<'_>) -> Option<Strings> {
    let entries = cx.object(node, ptr)?;
    cx.check_duplicate_keys(entries, ptr);
    let mut out = Vec::with_capacity(entries.len());
    let mut ok = true;
    for entry in entries {
        match cx.string(&entry.value, &ptr.key(&entry.key)) {
            Some(s) => out.push((entry.key.to_string(), s)),
            None => ok = false,
        }
    }
    ok.then(|| Strings::from_pairs(out))
}

/// `None` for `null`, which the model reads as an absent optional field.
fn present<'n, 's>(node: &'n Node<'s>) -> Option<&'n Node<'s>> {
    (!node.is_null()).then_some(node)
}

/// A tool holding only what is to be checked, for [`Snapshot::compile`].
fn probe(responses: Option<Responses>, default: Option<Fallback>) -> Tool {
    Tool { name: String::new(), description: None, parameters: None, responses, default, extra: Map::new() }
}

/// Reports what [`Snapshot::compile`] finds in `tool`, each problem at its node: `node` (at
/// `ptr` in the file) is what the pointer `prefix` of the compiled one-tool list stands for.
fn report_checks(cx: &mut Cx<'_>, tool: &Tool, prefix: &str, node: &Node, ptr: &Ptr<'_>) {
    let Err(problems) = Snapshot::compile(std::slice::from_ref(tool)) else { return };
    for problem in problems {
        let rest = problem.pointer.strip_prefix(prefix).unwrap_or("");
        let at = node_at(node, rest);
        let diagnostic = cx.src.diagnostic(Code::InvalidValue, at.offset, format!("{ptr}{rest}"), problem.message);
        cx.diags.push(diagnostic);
    }
}

/// The node `pointer` (RFC 6901, relative to `node`) leads to, or the last one found on its way.
fn node_at<'n, 's>(node: &'n Node<'s>, pointer: &str) -> &'n Node<'s> {
    let mut at = node;
    for segment in pointer.split('/').skip(1) {
        let key = segment.replace("~1", "/").replace("~0", "~");
        let next = match &at.value {
            NodeValue::Object(_) => at.get(&key),
            NodeValue::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        match next {
            Some(n) => at = n,
            None => break,
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_lead_to_their_node_or_the_last_one_found() {
        let text = r#"{"a": [{"m/n": "x"}, 2]}"#;
        let root = crate::json::parse(text).expect("json");
        assert_eq!(node_at(&root, "/a/0/m~1n").offset, text.find("\"x\"").unwrap());
        assert_eq!(node_at(&root, "/a/1/zz").offset, text.find('2').unwrap());
        assert_eq!(node_at(&root, "").offset, 0);
    }
}
