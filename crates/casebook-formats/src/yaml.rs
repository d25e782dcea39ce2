//! YAML to [`Node`], on saphyr-parser's event stream. Scalars are resolved with the YAML 1.2 core
//! schema, strictly: only `true`/`false` (any case) are booleans, so `yes`, `on` and `no` stay
//! strings, and numbers with leading zeros (`007`) stay strings rather than turning into 7.

use std::borrow::Cow;
use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use crate::json::MAX_DEPTH;
use crate::node::{Entry, Node, NodeValue, Streamed};

#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    pub offset: usize,
    pub message: String,
    pub too_deep: bool,
}

/// Parses the single YAML document in `text`. An empty document is `null`.
pub fn parse(text: &str) -> Result<Node<'_>, YamlError> {
    parse_streaming(text, &[], &mut |_| true)
}

/// Parses like [`parse`], but the items of a list at one of `paths` (keys from the root
/// mapping) are handed to `on` one by one instead of being kept, so a document with a million
/// items never holds them all. In the returned document that list is empty. `on` returns
/// `false` to stop.
pub fn parse_streaming<'a>(
    text: &'a str,
    paths: &[&'static [&'static str]],
    on: &mut dyn FnMut(Streamed<'a>) -> bool,
) -> Result<Node<'a>, YamlError> {
    if let Some((offset, c)) = forbidden_char(text) {
        let name = match c {
            '\u{7}' => " (bell)",
            '\u{1b}' => " (escape)",
            '\u{0}' => " (NUL)",
            '\u{7f}' => " (delete)",
            _ => "",
        };
        return Err(YamlError {
            offset,
            message: format!(
                "YAML does not allow the control character U+{:04X}{name} in a file; write it as an escape \
                 (`\\u{:04X}`) in a double-quoted string",
                c as u32, c as u32
            ),
            too_deep: false,
        });
    }
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
        offsets: Offsets::new(text),
        anchors: HashMap::new(),
        depth: 0,
        values: 0,
        alias_bytes: 0,
        open: Vec::new(),
        paths: paths.to_vec(),
        on,
    };
    builder.document()
}

/// The first character a YAML stream may not hold, with its byte offset: C0 controls other than
/// tab and line breaks, DEL, C1 controls other than NEL, and U+FFFE/U+FFFF (YAML 1.2
/// `c-printable`; JSON refuses the same controls in strings).
fn forbidden_char(text: &str) -> Option<(usize, char)> {
    let bytes = text.as_bytes();
    let at = bytes.iter().enumerate().position(|(i, &b)| match b {
        b'\t' | b'\n' | b'\r' => false,
        0x00..=0x1F | 0x7F => true,
        0xC2 => matches!(bytes.get(i + 1), Some(0x80..=0x84 | 0x86..=0x9F)),
        0xEF => bytes.get(i + 1) == Some(&0xBF) && matches!(bytes.get(i + 2), Some(0xBE | 0xBF)),
        _ => false,
    })?;
    text[at..].chars().next().map(|c| (at, c))
}

/// A container being built: a mapping's entries so far and the key being read, or a sequence.
enum Open<'a> {
    Map(Vec<Entry<'a>>, Option<(Cow<'a, str>, usize)>),
    Seq,
}

/// Turns saphyr's character indexes into byte offsets, going on from the last one asked for
/// (they come in increasing order), so no table of the whole text is kept.
struct Offsets<'a> {
    text: &'a str,
    ascii: bool,
    /// A character index and its byte offset.
    cursor: std::cell::Cell<(usize, usize)>,
}

impl<'a> Offsets<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, ascii: text.is_ascii(), cursor: std::cell::Cell::new((0, 0)) }
    }

    /// Byte offset of the character at `index`.
    fn of_index(&self, index: usize) -> usize {
        if self.ascii {
            return index.min(self.text.len());
        }
        let (mut chars, mut byte) = self.cursor.get();
        if index < chars {
            (chars, byte) = (0, 0);
        }
        let rest = &self.text[byte..];
        let byte = rest.char_indices().nth(index - chars).map_or(self.text.len(), |(i, _)| byte + i);
        self.cursor.set((index, byte));
        byte
    }

    fn start(&self, span: &Span) -> usize {
        self.of_index(span.start.index())
    }
}

struct Builder<'a, 'b> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    offsets: Offsets<'a>,
    /// Anchored nodes, and how many values and bytes of text each holds ([`Size`]).
    anchors: HashMap<usize, (Node<'a>, Size)>,
    depth: usize,
    /// Values produced so far, aliases counted in full, against [`MAX_VALUES`].
    values: usize,
    /// Bytes of text (strings, keys, numbers) aliases have added, against [`MAX_ALIAS_BYTES`].
    alias_bytes: usize,
    /// The containers being built, outermost first.
    open: Vec<Open<'a>>,
    paths: Vec<&'static [&'static str]>,
    on: &'b mut dyn FnMut(Streamed<'a>) -> bool,
}

/// Aliases can make a small file expand exponentially ("billion laughs"): refuse beyond this.
const MAX_VALUES: usize = 2_000_000;
/// Aliases of long strings expand a small file to gigabytes in few values: the text they add
/// is capped too.
const MAX_ALIAS_BYTES: usize = 64 << 20;

impl<'a> Builder<'a, '_> {
    fn next(&mut self) -> Result<(Event<'a>, Span), YamlError> {
        match self.parser.next_event() {
            Some(Ok(event)) => Ok(event),
            Some(Err(err)) => {
                let m = err.marker();
                // saphyr-parser stops deep nesting itself; it is the same problem as ours.
                let too_deep = err.info().contains("recursion limit");
                let message =
                    if too_deep { format!("nesting deeper than {MAX_DEPTH} levels") } else { err.info().to_owned() };
                Err(YamlError { offset: self.offsets.of_index(m.index()), message, too_deep })
            }
            None => Err(YamlError {
                offset: self.offsets.text.len(),
                message: "unexpected end of YAML".into(),
                too_deep: false,
            }),
        }
    }

    fn document(&mut self) -> Result<Node<'a>, YamlError> {
        let mut root = None;
        loop {
            let (event, span) = self.next()?;
            match event {
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
                Event::DocumentStart(_) => {
                    if root.is_some() {
                        return Err(YamlError {
                            offset: self.offsets.start(&span),
                            message: "a dataset file holds one YAML document; found a second `---`".into(),
                            too_deep: false,
                        });
                    }
                    let (event, span) = self.next()?;
                    if let Event::DocumentEnd = event {
                        root = Some(Node { offset: 0, value: NodeValue::Null });
                    } else {
                        root = Some(self.node(event, span)?);
                    }
                }
                Event::StreamEnd => return Ok(root.unwrap_or(Node { offset: 0, value: NodeValue::Null })),
                _ => {
                    return Err(YamlError {
                        offset: self.offsets.start(&span),
                        message: "unexpected YAML event outside a document".into(),
                        too_deep: false,
                    });
                }
            }
        }
    }

    fn node(&mut self, event: Event<'a>, span: Span) -> Result<Node<'a>, YamlError> {
        let offset = self.offsets.start(&span);
        let (node, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let tag = tag.map(|t| t.suffix.clone());
                let value = resolve_scalar(text, style, tag.as_deref()).map_err(|message| YamlError {
                    offset,
                    message,
                    too_deep: false,
                })?;
                (Node { offset, value }, anchor)
            }
            Event::Alias(id) => {
                let Some((node, size)) = self.anchors.get(&id) else {
                    return Err(YamlError { offset, message: "alias to an unknown anchor".into(), too_deep: false });
                };
                self.values = self.values.saturating_add(size.values);
                self.alias_bytes = self.alias_bytes.saturating_add(size.bytes);
                if self.values > MAX_VALUES {
                    return Err(YamlError {
                        offset,
                        message: format!(
                            "aliases expand this document beyond {MAX_VALUES} values: write fewer aliases, or the values themselves"
                        ),
                        too_deep: false,
                    });
                }
                if self.alias_bytes > MAX_ALIAS_BYTES {
                    return Err(YamlError {
                        offset,
                        message: format!(
                            "aliases expand this document by more than {} MiB of text: write fewer aliases, or the values themselves",
                            MAX_ALIAS_BYTES >> 20
                        ),
                        too_deep: false,
                    });
                }
                return Ok(Node { offset, ..node.clone() });
            }
            Event::SequenceStart(anchor, _) => {
                self.enter(offset)?;
                let streamed = self.streamed_path();
                let mut go_on = true;
                if let Some(path) = streamed {
                    let root = self.snapshot(offset);
                    go_on = (self.on)(Streamed::Begin { path, root, offset });
                }
                self.open.push(Open::Seq);
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if let Event::SequenceEnd = event {
                        break;
                    }
                    let item = self.node(event, span)?;
                    if streamed.is_none() {
                        items.push(item);
                    } else if go_on {
                        go_on = (self.on)(Streamed::Item(item));
                    }
                }
                self.open.pop();
                self.depth -= 1;
                (Node { offset, value: NodeValue::Array(items) }, anchor)
            }
            Event::MappingStart(anchor, _) => {
                self.enter(offset)?;
                self.open.push(Open::Map(Vec::new(), None));
                loop {
                    let (event, span) = self.next()?;
                    if let Event::MappingEnd = event {
                        break;
                    }
                    let key_offset = self.offsets.start(&span);
                    let key = match event {
                        Event::Scalar(text, ..) => text,
                        _ => {
                            return Err(YamlError {
                                offset: key_offset,
                                message: "mapping keys must be plain strings".into(),
                                too_deep: false,
                            });
                        }
                    };
                    if let Some(Open::Map(_, pending)) = self.open.last_mut() {
                        *pending = Some((key.clone(), key_offset));
                    }
                    let (event, span) = self.next()?;
                    let value = self.node(event, span)?;
                    if let Some(Open::Map(entries, pending)) = self.open.last_mut() {
                        *pending = None;
                        entries.push(Entry { key, key_offset, value });
                    }
                }
                let entries = match self.open.pop() {
                    Some(Open::Map(entries, _)) => entries,
                    _ => Vec::new(),
                };
                self.depth -= 1;
                (Node { offset, value: NodeValue::Object(entries) }, anchor)
            }
            _ => {
                return Err(YamlError { offset, message: "unexpected YAML event".into(), too_deep: false });
            }
        };
        self.values += 1;
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), size(&node)));
        }
        Ok(node)
    }

    /// The streamed path a sequence starting here is at, if any: every open container is a
    /// mapping and their keys being read spell the path.
    fn streamed_path(&self) -> Option<&'static [&'static str]> {
        if self.paths.is_empty() || self.open.len() != self.open.iter().filter(|o| matches!(o, Open::Map(..))).count() {
            return None;
        }
        let keys: Vec<&str> = self
            .open
            .iter()
            .filter_map(|o| match o {
                Open::Map(_, Some((key, _))) => Some(key.as_ref()),
                _ => None,
            })
            .collect();
        if keys.len() != self.open.len() {
            return None;
        }
        self.paths.iter().copied().find(|p| *p == keys.as_slice())
    }

    /// The document so far, with the list that starts at `offset` present and empty.
    fn snapshot(&self, offset: usize) -> Node<'a> {
        let mut inner = Node { offset, value: NodeValue::Array(Vec::new()) };
        for open in self.open.iter().rev() {
            if let Open::Map(entries, Some((key, key_offset))) = open {
                let mut entries = entries.clone();
                entries.push(Entry { key: key.clone(), key_offset: *key_offset, value: inner });
                let first = entries.first().map_or(*key_offset, |e| e.key_offset);
                inner = Node { offset: first, value: NodeValue::Object(entries) };
            }
        }
        inner
    }

    fn enter(&mut self, offset: usize) -> Result<(), YamlError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(YamlError {
                offset,
                message: format!("nesting deeper than {MAX_DEPTH} levels"),
                too_deep: true,
            });
        }
        Ok(())
    }
}

/// What an alias of a node adds to the document.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    /// Values, the node included.
    values: usize,
    /// Bytes of text: strings, numbers and keys.
    bytes: usize,
}

fn size(node: &Node<'_>) -> Size {
    let mut size = Size { values: 1, bytes: 0 };
    let mut add = |s: Size| {
        size.values = size.values.saturating_add(s.values);
        size.bytes = size.bytes.saturating_add(s.bytes);
    };
    match &node.value {
        NodeValue::Array(items) => items.iter().for_each(|item| add(self::size(item))),
        NodeValue::Object(entries) => {
            for e in entries {
                add(Size { values: 0, bytes: e.key.len() });
                add(self::size(&e.value));
            }
        }
        NodeValue::String(s) | NodeValue::Number(s) => add(Size { values: 0, bytes: s.len() }),
        NodeValue::Null | NodeValue::Bool(_) => {}
    }
    size
}

/// Resolves a scalar to a typed value (YAML 1.2 core schema, strict).
fn resolve_scalar<'a>(text: Cow<'a, str>, style: ScalarStyle, tag: Option<&str>) -> Result<NodeValue<'a>, String> {
    match tag {
        Some("str") => return Ok(NodeValue::String(text)),
        Some("null") => return Ok(NodeValue::Null),
        _ => {}
    }
    if style != ScalarStyle::Plain {
        return Ok(NodeValue::String(text));
    }
    Ok(match text.as_ref() {
        "" | "~" | "null" | "Null" | "NULL" => NodeValue::Null,
        "true" | "True" | "TRUE" => NodeValue::Bool(true),
        "false" | "False" | "FALSE" => NodeValue::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF" | ".nan" | ".NaN"
        | ".NAN" => {
            return Err(format!(
                "`{}` is not a number JSON can hold; quote it to keep it as text",
                casebook_model::excerpt(&text)
            ));
        }
        t => match number(t) {
            Some(number) => NodeValue::Number(Cow::Owned(number)),
            None => NodeValue::String(text),
        },
    })
}

/// The JSON spelling of a YAML core-schema number, or `None` if `text` is not one.
fn number(text: &str) -> Option<String> {
    let (sign, body) = match text.as_bytes().first()? {
        b'-' => ("-", &text[1..]),
        b'+' => ("", &text[1..]),
        _ => ("", text),
    };
    // Hexadecimal and octal integers take no sign in the core schema (`-0x1F` is text).
    if let Some(hex) = text.strip_prefix("0x") {
        return (!hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u128::from_str_radix(hex, 16).ok().map(|v| v.to_string()))
            .flatten();
    }
    if let Some(oct) = text.strip_prefix("0o") {
        return (!oct.is_empty() && oct.bytes().all(|b| (b'0'..=b'7').contains(&b)))
            .then(|| u128::from_str_radix(oct, 8).ok().map(|v| v.to_string()))
            .flatten();
    }
    let bytes = body.as_bytes();
    if !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit) {
        if bytes.len() > 1 && bytes[0] == b'0' {
            return None; // `007` stays a string
        }
        let digits = body.trim_start_matches('0');
        return Some(format!("{sign}{}", if digits.is_empty() { "0" } else { digits }));
    }
    // Float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], Some(&mantissa[i + 1..])),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let valid_mantissa = digits(int_part)
        && frac_part.is_none_or(digits)
        && (!int_part.is_empty() || frac_part.is_some_and(|f| !f.is_empty()));
    let valid_exponent = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    if !valid_mantissa || !valid_exponent || (frac_part.is_none() && exponent.is_none()) {
        return None;
    }
    if int_part.len() > 1 && int_part.starts_with('0') {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    serde_json::Number::from_f64(value).map(|n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(text: &str) -> NodeValue<'_> {
        parse(text).unwrap().value
    }

    #[test]
    fn control_characters_are_refused_where_they_are() {
        for (text, offset, code) in [
            ("a: b\u{1}c\n", 4, 0x1),
            ("a: |\n  bell\u{7}\n", 11, 0x7),
            ("k: \"esc\u{1b}\"\n", 7, 0x1b),
            ("- x\n- y\u{7f}\n", 7, 0x7f),
            ("c1: \u{85}ok\u{9b}\n", 8, 0x9b),
            ("nc: \u{fffe}\n", 4, 0xfffe),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.offset, offset, "{text:?}");
            assert!(err.message.contains(&format!("U+{code:04X}")), "{}", err.message);
        }
        // Tabs, line breaks, NEL and the byte order mark are allowed.
        assert!(parse("a: \"tab\there\"\r\nb: nel\u{85}\n").is_ok());
    }

    #[test]
    fn core_schema_strict() {
        assert_eq!(scalar("1"), NodeValue::Number("1".into()));
        assert_eq!(scalar("'1'"), NodeValue::String("1".into()));
        assert_eq!(scalar("007"), NodeValue::String("007".into()));
        assert_eq!(scalar("yes"), NodeValue::String("yes".into()));
        assert_eq!(scalar("True"), NodeValue::Bool(true));
        assert_eq!(scalar("1.0"), NodeValue::Number("1.0".into()));
        assert_eq!(scalar("0.30"), NodeValue::Number("0.3".into()));
        assert_eq!(scalar("1e3"), NodeValue::Number("1000.0".into()));
        assert_eq!(scalar("~"), NodeValue::Null);
        assert_eq!(scalar("1.2.3"), NodeValue::String("1.2.3".into()));
        assert_eq!(scalar("!!str 12"), NodeValue::String("12".into()));
        assert!(parse(".inf").is_err());
        assert!(parse("+.Inf").is_err() && parse("+.INF").is_err());
        let value = |text: &str| parse(text).unwrap().to_value(&crate::pointer::Ptr::ROOT).unwrap();
        // The core schema's hexadecimal and octal forms have no sign and only their own digits.
        assert_eq!(value("0x1F"), serde_json::json!(31));
        assert_eq!(value("0o17"), serde_json::json!(15));
        for text in ["0x+1", "0o+7", "-0x1F", "+0o7", "0x", "0o8", "0xG"] {
            assert_eq!(value(text), serde_json::json!(text), "{text}");
        }
    }

    #[test]
    fn offsets_are_bytes_even_after_non_ascii() {
        let text = "a: é\nb: [x, y]\n";
        let node = parse(text).unwrap();
        let NodeValue::Object(entries) = &node.value else { panic!() };
        assert_eq!(entries[1].key_offset, text.find('b').unwrap());
        let NodeValue::Array(items) = &entries[1].value.value else { panic!() };
        assert_eq!(items[1].offset, text.find('y').unwrap());
    }

    #[test]
    fn syntax_error_location() {
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.offset > 0, "{err:?}");
    }
}
