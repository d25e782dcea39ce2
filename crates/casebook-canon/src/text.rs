//! RFC 8785 canonical JSON straight from JSON text, without building a `serde_json::Value`.
//!
//! Storing a case needs both its JSON text (the stored body) and its canonical form (for its
//! content id). Going through `serde` twice costs six times more than writing the body once; this
//! module re-orders the body instead. The tree it builds borrows from the text: scalars that are
//! already canonical (strings without escapes, short integers, `true`/`false`/`null`) are copied
//! as they are, and only objects allocate (to sort their members).

use std::cmp::Ordering;

use crate::CanonError;

/// How deep arrays and objects may nest.
const MAX_DEPTH: usize = 512;

/// The canonical form of the JSON text `text`.
pub fn canonicalize(text: &str) -> Result<String, CanonError> {
    let mut parser = Parser { text, pos: 0 };
    let value = parser.value(0)?;
    parser.skip_ws();
    if parser.pos != text.len() {
        return Err(parser.error("text after the JSON value"));
    }
    let mut out = String::with_capacity(text.len());
    value.write(&mut out);
    Ok(out)
}

enum Node<'a> {
    /// Text that is already canonical.
    Raw(&'a str),
    /// A scalar rewritten in canonical form.
    Owned(String),
    Array(Vec<Node<'a>>),
    Object(Vec<(Key<'a>, Node<'a>)>),
}

/// An object key: its canonical text (with quotes) and what it sorts by.
struct Key<'a> {
    text: Node<'a>,
    /// `None` when the UTF-8 bytes of the raw text sort the same as its UTF-16 code units (no
    /// escapes, no characters beyond U+FFFF); otherwise the UTF-16 code units.
    utf16: Option<Vec<u16>>,
    raw: &'a str,
}

impl Key<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        match (&self.utf16, &other.utf16) {
            (None, None) => self.raw.as_bytes().cmp(other.raw.as_bytes()),
            _ => self.units().cmp(&other.units()),
        }
    }

    fn units(&self) -> Vec<u16> {
        match &self.utf16 {
            Some(units) => units.clone(),
            None => self.raw.encode_utf16().collect(),
        }
    }
}

impl Node<'_> {
    fn write(&self, out: &mut String) {
        match self {
            Node::Raw(text) => out.push_str(text),
            Node::Owned(text) => out.push_str(text),
            Node::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Node::Object(members) => {
                out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    key.text.write(out);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, what: &str) -> CanonError {
        CanonError(format!("{what} at byte {}", self.pos))
    }

    fn skip_ws(&mut self) {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && matches!(bytes[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), CanonError> {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected `{}`", byte as char)))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node<'a>, CanonError> {
        if depth > MAX_DEPTH {
            return Err(self.error("JSON nested too deeply"));
        }
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(self.string(false)?.0),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error("expected a JSON value")),
        }
    }

    fn literal(&mut self, word: &'static str) -> Result<Node<'a>, CanonError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(Node::Raw(word))
        } else {
            Err(self.error("expected a JSON value"))
        }
    }

    fn array(&mut self, depth: usize) -> Result<Node<'a>, CanonError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Node::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Node::Array(items));
                }
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Node<'a>, CanonError> {
        self.pos += 1;
        let mut members: Vec<(Key<'a>, Node<'a>)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Node::Object(members));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a key"));
            }
            let (text, decoded) = self.string(true)?;
            let raw = match &text {
                Node::Raw(raw) => &raw[1..raw.len() - 1],
                _ => "",
            };
            let utf16 = match decoded {
                Some(decoded) => Some(decoded.encode_utf16().collect()),
                // Four-byte UTF-8 sequences (beyond U+FFFF) sort differently in UTF-16.
                None if raw.bytes().any(|b| b >= 0xF0) => Some(raw.encode_utf16().collect()),
                None => None,
            };
            let key = Key { text, utf16, raw };
            self.expect(b':')?;
            let value = self.value(depth + 1)?;
            members.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
        members.sort_by(|a, b| a.0.cmp(&b.0));
        if members.windows(2).any(|w| w[0].0.cmp(&w[1].0) == Ordering::Equal) {
            return Err(self.error("an object has the same key twice"));
        }
        Ok(Node::Object(members))
    }

    /// A string at the cursor: its canonical text with quotes, and its decoded content when it
    /// had escapes (otherwise the raw text is the content).
    fn string(&mut self, key: bool) -> Result<(Node<'a>, Option<String>), CanonError> {
        let start = self.pos;
        self.pos += 1;
        let bytes = self.text.as_bytes();
        let mut escaped = false;
        loop {
            self.pos = crate::scan::string_special(bytes, self.pos);
            match bytes.get(self.pos) {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    self.pos += 2;
                }
                Some(_) => return Err(self.error("control character in a string")),
            }
        }
        self.pos += 1;
        let raw = self.text.get(start..self.pos).ok_or_else(|| self.error("unterminated string"))?;
        // Text written by serde_json (every stored body) escapes strings the canonical way
        // already; only keys need their content, to sort by.
        if !escaped || (!key && canonical_escapes(raw.as_bytes())) {
            return Ok((Node::Raw(raw), None));
        }
        let decoded = unescape(&raw[1..raw.len() - 1]).ok_or_else(|| self.error("invalid escape in a string"))?;
        let mut text = String::with_capacity(decoded.len() + 2);
        escape_into(&decoded, &mut text);
        Ok((Node::Owned(text), Some(decoded)))
    }

    fn number(&mut self) -> Result<Node<'a>, CanonError> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let mut plain_integer = true;
        while let Some(&b) = bytes.get(self.pos) {
            match b {
                b'0'..=b'9' | b'-' => {}
                b'.' | b'e' | b'E' | b'+' => plain_integer = false,
                _ => break,
            }
            self.pos += 1;
        }
        let text = &self.text[start..self.pos];
        let digits = text.strip_prefix('-').unwrap_or(text);
        if digits.len() > 1 && digits.starts_with('0') && digits.as_bytes()[1].is_ascii_digit() {
            return Err(self.error("invalid number"));
        }
        // Integers of up to 15 digits print the same as the double they denote ("-0" does not).
        if plain_integer
            && !digits.is_empty()
            && digits.len() <= 15
            && digits.bytes().all(|b| b.is_ascii_digit())
            && text != "-0"
        {
            return Ok(Node::Raw(text));
        }
        let value: f64 = text.parse().map_err(|_| self.error("invalid number"))?;
        if !value.is_finite() {
            return Err(self.error("number out of range"));
        }
        Ok(Node::Owned(ryu_js::Buffer::new().format_finite(value).to_owned()))
    }
}

/// Whether every escape of a string (with its quotes) is the one RFC 8785 writes: `\"`, `\\`,
/// the short forms, and `\u00xx` in lowercase for the other control characters.
fn canonical_escapes(raw: &[u8]) -> bool {
    let mut i = 0;
    while let Some(at) = raw[i..].iter().position(|&b| b == b'\\') {
        let k = i + at;
        match raw.get(k + 1) {
            Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => i = k + 2,
            Some(b'u') => {
                let lower_hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
                match raw.get(k + 2..k + 6) {
                    Some([b'0', b'0', high @ (b'0' | b'1'), low]) if lower_hex(low) => {
                        let unit = (high - b'0') * 16 + if low.is_ascii_digit() { low - b'0' } else { low - b'a' + 10 };
                        if matches!(unit, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                            return false;
                        }
                        i = k + 6;
                    }
                    _ => return false,
                }
            }
            _ => return false,
        }
    }
    true
}

/// The content of a JSON string body with escapes, or `None` when an escape is invalid.
fn unescape(body: &str) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let c = match chars.next()? {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let unit = hex4(&mut chars)?;
                if (0xD800..0xDC00).contains(&unit) {
                    if chars.next()? != '\\' || chars.next()? != 'u' {
                        return None;
                    }
                    let low = hex4(&mut chars)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?
                } else {
                    char::from_u32(unit)?
                }
            }
            _ => return None,
        };
        out.push(c);
    }
    Some(out)
}

fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
    let mut unit = 0;
    for _ in 0..4 {
        unit = unit * 16 + chars.next()?.to_digit(16)?;
    }
    Some(unit)
}

/// `text` as an RFC 8785 string: quotes, `\"`, `\\`, the short escapes and `\u00xx` for the
/// other control characters; everything else as it is.
fn escape_into(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_is_not_json() {
        for bad in ["", "{", "[1,]", "{\"a\" 1}", "\"\\q\"", "1 2", "{\"a\":1,\"a\":2}", "1e999"] {
            assert!(canonicalize(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn rewrites_escapes_numbers_and_order() {
        let text = r#"{ "b\u00e9": [1.50, -0.0, 1E3, 12345678901234567890], "a": "\/\u0001\ud83d\ude00" }"#;
        assert_eq!(canonicalize(text).unwrap(), "{\"a\":\"/\\u0001😀\",\"bé\":[1.5,0,1000,12345678901234567000]}");
    }

    #[test]
    fn canonical_escapes_are_kept_and_others_rewritten() {
        let kept = r#"["a\"b\\c\n\t\b\f\r\u0001\u001f é"]"#;
        assert_eq!(canonicalize(kept).unwrap(), kept);
        for (text, canonical) in [
            (r#"["\u0041"]"#, r#"["A"]"#),
            (r#"["\u001F"]"#, r#"["\u001f"]"#),
            (r#"["\u000a"]"#, r#"["\n"]"#),
            (r#"["\/"]"#, r#"["/"]"#),
            (r#"["\u00e9\ud83d\ude00"]"#, r#"["é😀"]"#),
        ] {
            assert_eq!(canonicalize(text).unwrap(), canonical, "{text}");
        }
        assert!(canonicalize(r#"["\u00"]"#).is_err());
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+1F600 is D83D DE00 in UTF-16, before U+FB01 (EF AC 81 in UTF-8 sorts before F0…).
        assert_eq!(canonicalize(r#"{"ﬁ":1,"😀":2}"#).unwrap(), r#"{"😀":2,"ﬁ":1}"#);
    }
}
