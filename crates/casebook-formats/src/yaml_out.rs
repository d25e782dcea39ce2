//! A small YAML emitter for JSON values, in block style. Strings are written plain when that
//! reads back as the same string, as literal blocks when they span lines, and double-quoted
//! otherwise, so every value reads back unchanged.

use serde_json::Value;

/// Writes `value` as the value of a mapping key (after `key:`), at `indent`.
pub fn after_key(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            mapping(out, map, indent + 2);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            sequence(out, items, indent);
        }
        Value::String(s) if block_safe(s) => {
            out.push(' ');
            literal(out, s, indent + 2);
        }
        _ => {
            out.push(' ');
            scalar(out, value);
            out.push('\n');
        }
    }
}

/// Writes the entries of a mapping, each line at `indent`.
pub fn mapping(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    for (i, (key, value)) in map.iter().enumerate() {
        // The first key of a sequence item follows its `- ` on the same line.
        if i > 0 || !out.ends_with("- ") {
            pad(out, indent);
        }
        string(out, key);
        out.push(':');
        after_key(out, value, indent);
    }
}

/// Writes the items of a sequence, each `- ` at `indent`.
pub fn sequence(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        pad(out, indent);
        out.push_str("- ");
        match item {
            Value::Object(map) if !map.is_empty() => mapping(out, map, indent + 2),
            Value::Array(inner) if !inner.is_empty() => {
                out.pop();
                out.push('\n');
                sequence(out, inner, indent + 2);
            }
            Value::String(s) if block_safe(s) => literal(out, s, indent + 2),
            _ => {
                scalar(out, item);
                out.push('\n');
            }
        }
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn scalar(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => string(out, s),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

fn printable(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\u{20}'..='\u{7E}' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
        && c != '\u{FEFF}'
        && c != '\u{2028}'
        && c != '\u{2029}'
}

/// A string as a plain or double-quoted scalar.
fn string(out: &mut String, s: &str) {
    if plain_safe(s) {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if printable(c) => out.push(c),
            c if (c as u32) <= 0xFFFF => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
}

fn plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else { return false };
    if first.is_whitespace() || s.ends_with([' ', '\t']) || s.ends_with(':') {
        return false;
    }
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if s.contains(": ") || s.contains(" #") || s.chars().any(|c| !printable(c) || c == '\n' || c == '\t') {
        return false;
    }
    // It must not read back as anything but this string.
    matches!(crate::yaml::parse(s).map(|n| n.value), Ok(crate::node::NodeValue::String(ref t)) if t == s)
}

/// Whether a multi-line string can be a literal block scalar.
fn block_safe(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\t', '\n'])
        && s.chars().all(|c| c != '\r' && printable(c))
        && !s.lines().any(|l| !l.is_empty() && l.trim().is_empty())
}

fn literal(out: &mut String, s: &str, indent: usize) {
    let trailing = s.len() - s.trim_end_matches('\n').len();
    out.push_str(match trailing {
        0 => "|-",
        1 => "|",
        _ => "|+",
    });
    out.push('\n');
    let body = s.strip_suffix('\n').unwrap_or(s);
    for line in body.split('\n') {
        if !line.is_empty() {
            pad(out, indent);
            out.push_str(line);
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: Value) {
        let mut out = String::new();
        match &value {
            Value::Object(map) => mapping(&mut out, map, 0),
            _ => panic!("test with objects"),
        }
        let node = crate::yaml::parse(&out).unwrap_or_else(|e| panic!("{e:?} in\n{out}"));
        let back = node.to_value(&crate::pointer::Ptr::ROOT).unwrap();
        assert_eq!(back, value, "YAML was:\n{out}");
    }

    #[test]
    fn strings_read_back_unchanged() {
        round_trip(json!({
            "plain": "hello world",
            "number_like": "007",
            "bool_like": "true",
            "yes": "yes",
            "colon": "a: b",
            "hash": "a #b",
            "multi": "line one\nline two\n",
            "multi_keep": "a\n\n",
            "multi_strip": "a\nb",
            "indented": "  lead\nx",
            "blank_line": "a\n  \nb",
            "quote": "\"q\" and 'q'",
            "unicode": "— é ✓ \u{2028} \u{7f}",
            "empty": "",
            "dash": "- item",
            "nested": {"a": [1, 2.5, {"b": null, "c": [true]}], "e": {}, "f": []},
            "list_of_lists": [[1, 2], ["x"]],
            "key with: colon": 1
        }));
    }
}
