//! A JSON parser (RFC 8259) that builds [`Node`]s carrying byte offsets. It refuses nesting
//! deeper than [`MAX_DEPTH`] instead of overflowing the stack, and keeps numbers as written so
//! integers stay integers and out-of-range ones can be reported with their location.

use std::borrow::Cow;

use crate::node::{Entry, Node, NodeValue};

/// Deeper documents are refused: no dataset needs it, and recursion must stay bounded.
pub const MAX_DEPTH: usize = 128;

#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    /// Byte offset of the problem, relative to the start of the parsed text.
    pub offset: usize,
    pub message: String,
    pub too_deep: bool,
}

/// Parses one JSON value that must fill `text` (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Node<'_>, SyntaxError> {
    let mut parser = Parser { bytes: text.as_bytes(), text, pos: 0, depth: 0 };
    parser.skip_ws();
    let node = parser.value()?;
    parser.skip_ws();
    if parser.pos < parser.bytes.len() {
        return Err(parser.error("unexpected text after the JSON value"));
    }
    Ok(node)
}

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, message: impl Into<String>) -> SyntaxError {
        SyntaxError { offset: self.pos, message: message.into(), too_deep: false }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Result<Node<'a>, SyntaxError> {
        let offset = self.pos;
        let value = match self.peek() {
            None => return Err(self.error("unexpected end of input, expected a value")),
            Some(b'{') => self.object()?,
            Some(b'[') => self.array()?,
            Some(b'"') => NodeValue::String(self.string()?),
            Some(b't') => self.literal("true", NodeValue::Bool(true))?,
            Some(b'f') => self.literal("false", NodeValue::Bool(false))?,
            Some(b'n') => self.literal("null", NodeValue::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(_) => {
                let found = self.text[self.pos..].chars().next().unwrap_or(' ');
                return Err(self.error(format!("expected a JSON value, found `{found}`")));
            }
        };
        Ok(Node { offset, value })
    }

    fn literal(&mut self, word: &str, value: NodeValue<'a>) -> Result<NodeValue<'a>, SyntaxError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error(format!("invalid literal, expected `{word}`")))
        }
    }

    fn enter(&mut self) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let mut err = self.error(format!("nesting deeper than {MAX_DEPTH} levels"));
            err.too_deep = true;
            return Err(err);
        }
        Ok(())
    }

    fn object(&mut self) -> Result<NodeValue<'a>, SyntaxError> {
        self.enter()?;
        self.pos += 1;
        let mut entries = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(NodeValue::Object(entries));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(match self.peek() {
                    None => self.error("unexpected end of input inside an object"),
                    Some(b'}') => self.error("trailing comma before `}`"),
                    Some(_) => self.error("expected a string key in double quotes"),
                });
            }
            let key_offset = self.pos;
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error("expected `:` after the object key"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value()?;
            entries.push(Entry { key, key_offset, value });
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.error("unexpected end of input, expected `,` or `}`")),
                Some(_) => return Err(self.error("expected `,` or `}` after the object value")),
            }
        }
        self.depth -= 1;
        Ok(NodeValue::Object(entries))
    }

    fn array(&mut self) -> Result<NodeValue<'a>, SyntaxError> {
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(NodeValue::Array(items));
        }
        loop {
            self.skip_ws();
            if self.peek() == Some(b']') {
                return Err(self.error("trailing comma before `]`"));
            }
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.error("unexpected end of input, expected `,` or `]`")),
                Some(_) => return Err(self.error("expected `,` or `]` after the array item")),
            }
        }
        self.depth -= 1;
        Ok(NodeValue::Array(items))
    }

    fn string(&mut self) -> Result<Cow<'a, str>, SyntaxError> {
        self.pos += 1; // opening quote
        let start = self.pos;
        // Fast path: no escapes.
        loop {
            match self.peek() {
                None => return Err(self.error("unexpected end of input inside a string")),
                Some(b'"') => {
                    let s = &self.text[start..self.pos];
                    self.pos += 1;
                    return Ok(Cow::Borrowed(s));
                }
                Some(b'\\') => break,
                Some(b) if b < 0x20 => return Err(self.control_error(b)),
                Some(_) => self.pos += 1,
            }
        }
        let mut out = String::with_capacity(self.pos - start + 16);
        out.push_str(&self.text[start..self.pos]);
        loop {
            let run = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run..self.pos]);
            match self.peek() {
                None => return Err(self.error("unexpected end of input inside a string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => self.escape(&mut out)?,
                Some(b) => return Err(self.control_error(b)),
            }
        }
    }

    fn control_error(&self, b: u8) -> SyntaxError {
        if b == b'\n' {
            self.error("unterminated string: a line break inside a string must be written `\\n`")
        } else {
            self.error(format!("control character U+{b:04X} must be escaped inside a string"))
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), SyntaxError> {
        self.pos += 1; // backslash
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                let first = self.hex4()?;
                let c = if (0xD800..0xDC00).contains(&first) {
                    if !self.bytes[self.pos..].starts_with(b"\\u") {
                        return Err(self.error("unpaired surrogate in `\\u` escape"));
                    }
                    self.pos += 2;
                    let second = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&second) {
                        return Err(self.error("unpaired surrogate in `\\u` escape"));
                    }
                    0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                } else {
                    first
                };
                let c = char::from_u32(c).ok_or_else(|| self.error("unpaired surrogate in `\\u` escape"))?;
                out.push(c);
                return Ok(());
            }
            None => return Err(self.error("unexpected end of input inside a string")),
            Some(_) => return Err(self.error("invalid escape sequence")),
        };
        out.push(c);
        self.pos += 1;
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or_else(|| self.error("truncated `\\u` escape"))?;
        let mut value = 0;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or_else(|| self.error("invalid `\\u` escape"))?;
            value = value * 16 + v;
        }
        self.pos += 4;
        Ok(value)
    }

    fn number(&mut self) -> Result<NodeValue<'a>, SyntaxError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.error("numbers cannot have leading zeros"));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("expected a digit")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("expected a digit after the decimal point"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.error("expected a digit in the exponent"));
            }
            self.digits();
        }
        Ok(NodeValue::Number(Cow::Borrowed(&self.text[start..self.pos])))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_offsets_and_number_text() {
        let node = parse(r#" {"a": [1, 2.50, "x\u00e9"], "b": null}"#).unwrap();
        assert_eq!(node.offset, 1);
        let NodeValue::Object(entries) = &node.value else { panic!() };
        assert_eq!(entries[0].key_offset, 2);
        let NodeValue::Array(items) = &entries[0].value.value else { panic!() };
        assert_eq!(items[1].value, NodeValue::Number("2.50".into()));
        assert_eq!(items[2].value, NodeValue::String("xé".into()));
        assert_eq!(items[2].offset, 17);
    }

    #[test]
    fn reports_position_of_errors() {
        let err = parse(r#"{"a": 1,}"#).unwrap_err();
        assert_eq!((err.offset, err.message.as_str()), (8, "trailing comma before `}`"));
        let err = parse(r#"{"a": tru}"#).unwrap_err();
        assert_eq!(err.offset, 6);
        let err = parse("[1, 2").unwrap_err();
        assert_eq!(err.offset, 5);
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = "[".repeat(100_000);
        let err = parse(&text).unwrap_err();
        assert!(err.too_deep);
        assert_eq!(err.offset, MAX_DEPTH);
    }

    #[test]
    fn surrogate_pairs() {
        let node = parse(r#""\ud83d\ude00""#).unwrap();
        assert_eq!(node.value, NodeValue::String("😀".into()));
        assert!(parse(r#""\ud83d""#).is_err());
    }
}
