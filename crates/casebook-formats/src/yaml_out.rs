//! A small YAML emitter for JSON values, in block style. Strings are written plain when that
//! reads back as the same string, as literal blocks when they span lines, and double-quoted
//! otherwise, so every value reads back unchanged.
//!
//! "The same string" means under every reader the output may meet: casebook's own, YAML 1.1 as
//! its type repository defines it and as PyYAML implements it (mas-lab reads manifests with
//! PyYAML), the YAML 1.2 core schema (editors), and the extra forms of common readers (yaml.v3
//! behind `yq`, ruamel.yaml, Ruby's Psych). A string any of them would read as a boolean, null,
//! number, timestamp or merge key is quoted.

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

/// Longest key, in bytes as written, given as an implicit `key: value`. YAML allows such a key
/// 1024 characters and PyYAML and casebook's reader refuse longer ones; beyond this a key takes
/// the explicit form, `? key` and `: value` on the next line.
const IMPLICIT_KEY_MAX: usize = 1000;

/// Writes the entries of a mapping, each line at `indent`.
pub fn mapping(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    for (i, (key, value)) in map.iter().enumerate() {
        // The first key of a sequence item follows its `- ` on the same line.
        if i > 0 || !out.ends_with("- ") {
            pad(out, indent);
        }
        let start = out.len();
        string(out, key);
        if out.len() - start > IMPLICIT_KEY_MAX {
            out.insert_str(start, "? ");
            out.push('\n');
            pad(out, indent);
        }
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
        Value::Number(n) => number(out, n),
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

/// A number in a spelling every reader takes for that number. serde_json writes `1e-7` and
/// `1e300`; YAML 1.1 (and PyYAML) read a float only with a dot and a signed exponent, so those
/// would come back as strings there. `1.0e-7` and `1.0e+300` read as floats everywhere.
fn number(out: &mut String, n: &serde_json::Number) {
    let text = n.to_string();
    let Some(e) = text.find(['e', 'E']) else {
        out.push_str(&text);
        return;
    };
    let (mantissa, exponent) = (&text[..e], &text[e + 1..]);
    out.push_str(mantissa);
    if !mantissa.contains('.') {
        out.push_str(".0");
    }
    out.push('e');
    if !exponent.starts_with(['+', '-']) {
        out.push('+');
    }
    out.push_str(exponent);
}

/// Whether `s` can be written as a plain scalar (a mapping key or a value on one line) and read
/// back as this same string by every reader. Runs for every string written, so it allocates
/// nothing and makes a single pass over the characters (the type check looks at a few bytes).
fn plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else { return false };
    // Indicators that start something else (`- ` items, `? ` keys, anchors, tags, quotes,
    // comments, directives, flow collections, block scalars, reserved `@` and backtick).
    if first.is_whitespace() || "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    // Readers drop trailing blanks, and a final `:` would end a key.
    if s.ends_with([' ', '\t', ':']) {
        return false;
    }
    // `...` at the start of a line ends the document (keys of the top mapping start there).
    if s.starts_with("...") && matches!(s.as_bytes().get(3), None | Some(b' ')) {
        return false;
    }
    let mut previous = first;
    for c in s.chars() {
        // `: ` ends a key, ` #` starts a comment, and a plain scalar holds no line break, tab
        // or character that must be escaped.
        if !printable(c) || c == '\n' || c == '\t' || (previous == ':' && c == ' ') || (previous == ' ' && c == '#') {
            return false;
        }
        previous = c;
    }
    !implicitly_typed(s)
}

/// Whether some reader resolves the plain scalar `s` to something other than this string: a
/// YAML 1.1 type (null, bool, int in base 2, 8, 10, 16 or 60 with `_`, float including base 60
/// and `.inf`/`.nan`, timestamp, merge `<<`, value `=`) by the spec's patterns or PyYAML's, a
/// YAML 1.2 core type, a type of yaml.v3 (`yq`) or ruamel.yaml, or a value of casebook's
/// reader. Where the readers differ (PyYAML's float needs a dot, the spec's allows `1.2.3`)
/// the union is taken, and letter case is ignored: quoting a string that did not need it
/// changes nothing, missing one changes data.
fn implicitly_typed(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(&first) = b.first() else { return true };
    match first {
        b'0'..=b'9' | b'+' | b'-' | b'.' => number_like(b) || timestamp_like(b),
        b'y' | b'Y' | b'n' | b'N' | b'o' | b'O' | b't' | b'T' | b'f' | b'F' => {
            b.len() <= 5 && WORDS.iter().any(|w| w.eq_ignore_ascii_case(s))
        }
        b'~' => b.len() == 1,
        b'<' => s == "<<",
        b'=' => s == "=",
        _ => false,
    }
}

/// Booleans of YAML 1.1 and 1.2, and null: read case-insensitively by [`implicitly_typed`].
const WORDS: [&str; 9] = ["y", "n", "yes", "no", "on", "off", "true", "false", "null"];

/// An int or float of some reader, with an optional sign. Every `_` and `,` is passed over, as
/// if absent: YAML 1.1 and PyYAML allow `_` between digits, yaml.v3 (`yq`) deletes every `_`
/// before reading a number, ruamel.yaml reads `+_` as an int, and Ruby's Psych still takes
/// `,` between digits.
fn number_like(b: &[u8]) -> bool {
    let body = match b {
        [b'+' | b'-', rest @ ..] => rest,
        _ => b,
    };
    if body.eq_ignore_ascii_case(b".inf") || body.eq_ignore_ascii_case(b".nan") {
        return true;
    }
    let whole = body.first().is_some_and(|c| c.is_ascii_digit() || *c == b'_');
    let mut d = Digits { b: body, i: 0 };
    if d.eat(|c| c == b'0') {
        // A base prefix, in either case (Go reads `0X1F`).
        let allowed: Option<fn(u8) -> bool> = match d.peek().map(|c| c.to_ascii_lowercase()) {
            Some(b'b') => Some(|c| matches!(c, b'0' | b'1')),
            Some(b'o') => Some(|c| matches!(c, b'0'..=b'7')),
            Some(b'x') => Some(|c| c.is_ascii_hexdigit()),
            _ => None,
        };
        if let Some(allowed) = allowed {
            d.i += 1;
            let start = d.i;
            // casebook's reader parses the digits with `from_str_radix`, which takes a sign.
            d.eat(|c| matches!(c, b'+' | b'-'));
            d.eat_all(allowed);
            // Something must follow the prefix, if only `_` (YAML 1.1 reads `0x_` as an int).
            return d.done() && d.i > start;
        }
    }
    decimal_like(d, whole)
}

/// The bytes of a number, read past any `_` and `,` (see [`number_like`]).
struct Digits<'a> {
    b: &'a [u8],
    i: usize,
}

impl Digits<'_> {
    fn peek(&mut self) -> Option<u8> {
        while matches!(self.b.get(self.i), Some(b'_' | b',')) {
            self.i += 1;
        }
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, wanted: impl Fn(u8) -> bool) -> bool {
        let hit = self.peek().is_some_and(wanted);
        self.i += usize::from(hit);
        hit
    }

    /// How many bytes in a row are `wanted`.
    fn eat_all(&mut self, wanted: impl Fn(u8) -> bool) -> usize {
        let mut n = 0;
        while self.eat(&wanted) {
            n += 1;
        }
        n
    }

    fn done(&mut self) -> bool {
        self.peek().is_none()
    }
}

/// After the sign: digits with base-60 parts `:digits`, then `.` and digits or dots, then
/// `[eE][-+]?digits`, each optional but with digits or a dot before any exponent. This is the
/// union of the decimal and base-60 ints and floats of the readers, and a bit more (`1:234`,
/// `1.2.3`); `whole` says the text after the sign began with a digit or `_`.
fn decimal_like(mut d: Digits<'_>, whole: bool) -> bool {
    let digit = |c: u8| c.is_ascii_digit();
    d.eat_all(digit);
    if whole {
        while d.eat(|c| c == b':') {
            if d.eat_all(digit) == 0 {
                return false;
            }
        }
    }
    let dot = d.eat(|c| c == b'.');
    if dot {
        d.eat_all(|c| c.is_ascii_digit() || c == b'.');
    }
    if !whole && !dot {
        return false;
    }
    if d.eat(|c| matches!(c, b'e' | b'E')) {
        d.eat(|c| matches!(c, b'+' | b'-'));
        if d.eat_all(digit) == 0 {
            return false;
        }
    }
    d.done()
}

/// A YAML 1.1 timestamp, loosely: `YYYY-M-D`, alone or followed by `T`, `t` or a space and
/// only time characters (digits, `:`, `.`, spaces, signs, `Z`). One-digit months and days and
/// times without seconds are included (other 1.1 readers take them), which the spec's pattern
/// does not need.
fn timestamp_like(b: &[u8]) -> bool {
    let digits =
        |from: usize, most: usize| b[from.min(b.len())..].iter().take(most).take_while(|c| c.is_ascii_digit()).count();
    if digits(0, 4) != 4 || b.get(4) != Some(&b'-') {
        return false;
    }
    let month = digits(5, 2);
    if month == 0 || b.get(5 + month) != Some(&b'-') {
        return false;
    }
    let day = digits(6 + month, 2);
    if day == 0 {
        return false;
    }
    match b.get(6 + month + day..) {
        Some([]) | None => true,
        Some([b'T' | b't' | b' ', time @ ..]) => {
            time.iter().all(|c| matches!(c, b'0'..=b'9' | b':' | b'.' | b' ' | b'+' | b'-' | b'Z' | b'z'))
        }
        Some(_) => false,
    }
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
mod tests;
