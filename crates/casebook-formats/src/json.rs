//! A JSON parser (RFC 8259) that builds [`Node`]s carrying byte offsets. It refuses nesting
//! deeper than [`MAX_DEPTH`] instead of overflowing the stack, and keeps numbers as written so
//! integers stay integers and out-of-range ones can be reported with their location.

use std::borrow::Cow;

use crate::node::{Entry, Node, NodeValue, Streamed};

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
    run(Parser { bytes: text.as_bytes(), text, pos: 0, depth: 0, stream: None })
}

/// Parses like [`parse`], handing the items of an array at one of `paths` (keys from the root
/// object; the empty path is a root array) to `on` one by one instead of keeping them. In the
/// returned document that array is empty. `on` returns `false` to stop.
pub fn parse_streaming<'a>(
    text: &'a str,
    paths: &[&'static [&'static str]],
    on: &mut dyn FnMut(Streamed<'a>) -> bool,
) -> Result<Node<'a>, SyntaxError> {
    let stream = Stream { paths: paths.to_vec(), open: Vec::new(), on };
    run(Parser { bytes: text.as_bytes(), text, pos: 0, depth: 0, stream: Some(stream) })
}

/// An object being built while streaming: its entries so far and the key whose value is read.
type OpenObject<'a> = (Vec<Entry<'a>>, Option<(Cow<'a, str>, usize)>);

/// The containers being built while streaming, outermost first: objects, or `None` for arrays.
struct Stream<'a, 'b> {
    paths: Vec<&'static [&'static str]>,
    open: Vec<Option<OpenObject<'a>>>,
    on: &'b mut dyn FnMut(Streamed<'a>) -> bool,
}

impl<'a> Stream<'a, '_> {
    /// The streamed path an array starting now is at, if every open container is an object.
    fn path(&self) -> Option<&'static [&'static str]> {
        let mut keys = Vec::with_capacity(self.open.len());
        for open in &self.open {
            match open {
                Some((_, Some((key, _)))) => keys.push(key.as_ref()),
                _ => return None,
            }
        }
        self.paths.iter().copied().find(|p| *p == keys.as_slice())
    }

    /// The document so far, with the array that starts at `offset` present and empty.
    fn snapshot(&self, offset: usize) -> Node<'a> {
        let mut inner = Node { offset, value: NodeValue::Array(Vec::new()) };
        for (entries, pending) in self.open.iter().rev().flatten() {
            if let Some((key, key_offset)) = pending {
                let mut entries = entries.clone();
                entries.push(Entry { key: key.clone(), key_offset: *key_offset, value: inner });
                let first = entries.first().map_or(*key_offset, |e| e.key_offset);
                inner = Node { offset: first, value: NodeValue::Object(entries) };
            }
        }
        inner
    }
}

fn run<'a>(mut parser: Parser<'a, '_>) -> Result<Node<'a>, SyntaxError> {
    parser.skip_ws();
    let node = parser.value()?;
    parser.skip_ws();
    if parser.pos < parser.bytes.len() {
        return Err(parser.error("unexpected text after the JSON value"));
    }
    Ok(node)
}

thread_local! {
    /// Where [`Parser::string`] decodes strings with escapes.
    static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The largest scratch buffer kept between strings.
const SCRATCH_KEPT: usize = 1 << 16;

/// The value of each byte as a hex digit, or 0xFF.
const HEX: [u8; 256] = {
    let mut table = [0xFF; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

struct Parser<'a, 'b> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    depth: usize,
    stream: Option<Stream<'a, 'b>>,
}

impl<'a> Parser<'a, '_> {
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
        if let Some(stream) = &mut self.stream {
            stream.open.push(Some((Vec::new(), None)));
        }
        loop {
            let (key, key_offset) = self.key()?;
            if self.stream.is_none() {
                let value = self.value()?;
                entries.push(Entry { key, key_offset, value });
            } else {
                // Streaming: the entries so far live on the stream, for its snapshots.
                self.open_map(|_, pending| *pending = Some((key.clone(), key_offset)));
                let value = self.value()?;
                self.open_map(move |so_far, pending| {
                    *pending = None;
                    so_far.push(Entry { key, key_offset, value });
                });
            }
            if !self.more(b'}', "object value")? {
                break;
            }
        }
        if let Some(stream) = &mut self.stream {
            if let Some(Some((so_far, _))) = stream.open.pop() {
                entries = so_far;
            }
        }
        self.depth -= 1;
        Ok(NodeValue::Object(entries))
    }

    /// Works on the innermost object being built while streaming.
    #[allow(clippy::type_complexity)]
    fn open_map(&mut self, f: impl FnOnce(&mut Vec<Entry<'a>>, &mut Option<(Cow<'a, str>, usize)>)) {
        if let Some(Some((so_far, pending))) = self.stream.as_mut().and_then(|s| s.open.last_mut()) {
            f(so_far, pending);
        }
    }

    /// An object key and the `:` after it.
    fn key(&mut self) -> Result<(Cow<'a, str>, usize), SyntaxError> {
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
        Ok((key, key_offset))
    }

    /// After a value in a container closed by `close`: whether another one follows.
    fn more(&mut self, close: u8, what: &str) -> Result<bool, SyntaxError> {
        self.skip_ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Ok(false)
            }
            None => Err(self.error(format!("unexpected end of input, expected `,` or `{}`", close as char))),
            Some(_) => Err(self.error(format!("expected `,` or `{}` after the {what}", close as char))),
        }
    }

    fn array(&mut self) -> Result<NodeValue<'a>, SyntaxError> {
        let offset = self.pos;
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        // Whether this array's items go to the stream instead of into the tree.
        let mut streamed = false;
        let mut go_on = true;
        if let Some(stream) = &mut self.stream {
            if let Some(path) = stream.path() {
                streamed = true;
                let root = stream.snapshot(offset);
                go_on = (stream.on)(Streamed::Begin { path, root, offset });
            }
            stream.open.push(None);
        }
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                if self.peek() == Some(b']') {
                    return Err(self.error("trailing comma before `]`"));
                }
                let item = self.value()?;
                match &mut self.stream {
                    Some(stream) if streamed => {
                        if go_on {
                            go_on = (stream.on)(Streamed::Item(item));
                        }
                    }
                    _ => items.push(item),
                }
                if !self.more(b']', "array item")? {
                    break;
                }
            }
        }
        if let Some(stream) = &mut self.stream {
            stream.open.pop();
        }
        self.depth -= 1;
        Ok(NodeValue::Array(items))
    }

    fn string(&mut self) -> Result<Cow<'a, str>, SyntaxError> {
        self.pos += 1; // opening quote
        let start = self.pos;
        // Fast path: no escapes.
        self.pos = casebook_canon::scan::string_special(self.bytes, self.pos);
        match self.peek() {
            None => return Err(self.error("unexpected end of input inside a string")),
            Some(b'"') => {
                let s = &self.text[start..self.pos];
                self.pos += 1;
                return Ok(Cow::Borrowed(s));
            }
            Some(b'\\') => {}
            Some(b) => return Err(self.control_error(b)),
        }
        // Decoded in this thread's scratch buffer and copied out once at its exact size: growing a
        // new string run by run reallocated (and copied) it several times.
        SCRATCH.with_borrow_mut(|out| {
            out.clear();
            out.push_str(&self.text[start..self.pos]);
            let decoded = self.unescape(out).map(|()| Cow::Owned(out.as_str().to_owned()));
            // A huge string's buffer is not kept for the rest of the thread's life.
            if out.capacity() > SCRATCH_KEPT {
                *out = String::new();
            }
            decoded
        })
    }

    /// Decodes the rest of a string whose body so far is in `out`, from the backslash at `pos`
    /// to the closing quote. Text in scripts other than Latin is often written all in `\u`
    /// escapes, one after the other: those are decoded in a loop of their own, with a table for
    /// the hex digits, and the scan for the next special byte is skipped between two escapes.
    fn unescape(&mut self, out: &mut String) -> Result<(), SyntaxError> {
        loop {
            // At a backslash.
            match self.bytes.get(self.pos + 1) {
                Some(b'u') => self.unicode_escapes(out)?,
                Some(&b) => {
                    let c = match b {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        _ => {
                            self.pos += 1;
                            return Err(self.error("invalid escape sequence"));
                        }
                    };
                    out.push(c);
                    self.pos += 2;
                }
                None => {
                    self.pos += 1;
                    return Err(self.error("unexpected end of input inside a string"));
                }
            }
            match self.peek() {
                Some(b'\\') => continue,
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {}
            }
            let run = self.pos;
            self.pos = casebook_canon::scan::string_special(self.bytes, self.pos);
            out.push_str(&self.text[run..self.pos]);
            match self.peek() {
                None => return Err(self.error("unexpected end of input inside a string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {}
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

    /// Decodes the `\u` escape at `pos` and every one right after it. Text written all in
    /// escapes (a fifth of realistic rows) spends most of its parse here: each well-formed escape
    /// of the run is read as six bytes at once and its character pushed without a call or a
    /// `Result`; anything else (a surrogate pair, an error) goes by [`Self::unicode_escape`],
    /// which locates the problem.
    fn unicode_escapes(&mut self, out: &mut String) -> Result<(), SyntaxError> {
        loop {
            if let Some(&[b'\\', b'u', a, b, c, d]) = self.bytes.get(self.pos..self.pos + 6) {
                let digits = [HEX[usize::from(a)], HEX[usize::from(b)], HEX[usize::from(c)], HEX[usize::from(d)]];
                if (digits[0] | digits[1] | digits[2] | digits[3]) & 0x80 == 0 {
                    let code = u32::from(digits[0]) << 12
                        | u32::from(digits[1]) << 8
                        | u32::from(digits[2]) << 4
                        | u32::from(digits[3]);
                    // `None` for the surrogates, which take the slow path below.
                    if let Some(c) = char::from_u32(code) {
                        out.push(c);
                        self.pos += 6;
                        continue;
                    }
                }
            }
            if !self.bytes[self.pos..].starts_with(b"\\u") {
                return Ok(());
            }
            self.pos += 2;
            let c = self.unicode_escape()?;
            out.push(c);
        }
    }

    /// The character of a `\u` escape whose four digits start at `pos` (with the second half of
    /// a surrogate pair when it is one).
    fn unicode_escape(&mut self) -> Result<char, SyntaxError> {
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
        char::from_u32(c).ok_or_else(|| self.error("unpaired surrogate in `\\u` escape"))
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let Some(&[a, b, c, d]) = self.bytes.get(self.pos..self.pos + 4) else {
            return Err(self.error("truncated `\\u` escape"));
        };
        let digits = [HEX[usize::from(a)], HEX[usize::from(b)], HEX[usize::from(c)], HEX[usize::from(d)]];
        if (digits[0] | digits[1] | digits[2] | digits[3]) & 0x80 != 0 {
            return Err(self.error("invalid `\\u` escape"));
        }
        self.pos += 4;
        Ok(digits.iter().fold(0, |value, &digit| value << 4 | u32::from(digit)))
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

    #[test]
    fn escapes_decode_as_serde_json_decodes_them() {
        for text in [
            r#""\u0627\u0644\u0639\u0645\u064a\u0644 \ud83d\ude42 \u0644""#,
            r#""\"quoted\" C:\\Users\\data \/ \b\f\n\r\t end""#,
            r#""\u00e9\u00E9\u4e2d\uFFFF\u0000\u001f""#,
            r#""plain then \n then plain""#,
            r#""\\\\\\""#,
            r#""a\u0041""#,
        ] {
            let expected: String = serde_json::from_str(text).unwrap();
            assert_eq!(parse(text).unwrap().value, NodeValue::String(expected.into()), "{text}");
        }
    }

    proptest::proptest! {
        /// Any string, each character written as itself or as a `\u` escape (a surrogate pair
        /// beyond U+FFFF), with the escapes JSON requires: it reads back as it was.
        #[test]
        fn any_mix_of_escapes_reads_back(chars in proptest::collection::vec((proptest::char::any(), 0u8..3), 0..40)) {
            let mut text = String::from("\"");
            for (c, how) in &chars {
                match (c, how) {
                    ('"', _) => text.push_str("\\\""),
                    ('\\', _) => text.push_str("\\\\"),
                    (c, 0) if u32::from(*c) >= 0x20 => text.push(*c),
                    (c, _) => {
                        let mut units = [0u16; 2];
                        for unit in c.encode_utf16(&mut units) {
                            text.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                }
            }
            text.push('"');
            let expected: String = chars.iter().map(|(c, _)| c).collect();
            proptest::prop_assert_eq!(parse(&text).unwrap().value, NodeValue::String(expected.into()));
        }
    }

    #[test]
    fn runs_of_escapes_decode_next_to_anything() {
        // A run of `\u` escapes (as Python's `json.dumps` writes non-ASCII text) ended by each
        // thing that can follow it: the closing quote, a short escape, plain text, a surrogate
        // pair, an escaped NUL, and a run that is cut by a space and goes on.
        let run = r"\u0627\u0644\u0639\u0645\u064a\u0644";
        for text in [
            format!(r#""{run}""#),
            format!(r#""{run}\n{run}\"\\""#),
            format!(r#""{run} plain {run}x""#),
            format!(r#""{run}\ud83d\ude42{run}\uD83D\uDE00""#),
            format!(r#""\u0000{run}\u0000\u0041\u007f\u0080\u07ff\u0800\uffff""#),
            format!(r#""a{run} {run} {run}\/""#),
        ] {
            let expected: String = serde_json::from_str(&text).unwrap();
            assert_eq!(parse(&text).unwrap().value, NodeValue::String(expected.into()), "{text}");
        }
    }

    #[test]
    fn a_long_run_of_escapes_reads_whole() {
        // Far longer than the scratch buffer kept between strings.
        let chars: String = (0..100_000u32).map(|i| char::from_u32(0x4e00 + i % 0x5000).unwrap()).collect();
        let mut text = String::from("\"");
        for c in chars.chars() {
            text.push_str(&format!("\\u{:04x}", u32::from(c)));
        }
        text.push('"');
        assert_eq!(parse(&text).unwrap().value, NodeValue::String(chars.into()));
        // The thread's next string is decoded right after it.
        assert_eq!(parse(r#""\u00e9""#).unwrap().value, NodeValue::String("é".into()));
    }

    #[test]
    fn errors_inside_a_run_of_escapes_are_located() {
        for (text, offset, message) in [
            (r#""\u0627\u0644\ud83d x""#, 19, "unpaired surrogate in `\\u` escape"),
            (r#""\u0627\u0644\ude00\u0644""#, 19, "unpaired surrogate in `\\u` escape"),
            (r#""\u0627\u0644\ud83d\u0644""#, 25, "unpaired surrogate in `\\u` escape"),
            (r#""\u0627\u06g4\u0644""#, 9, "invalid `\\u` escape"),
            (r#""\u0627\u064"#, 9, "truncated `\\u` escape"),
            (r#""\u0627\u0644"#, 13, "unexpected end of input inside a string"),
            (r#""\u0627\u0644\x""#, 14, "invalid escape sequence"),
            ("\"\\u0627\\u0644\n\"", 13, "unterminated string: a line break inside a string must be written `\\n`"),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!((err.offset, err.message.as_str()), (offset, message), "{text}");
        }
    }

    #[test]
    fn escape_errors_are_located() {
        for (text, offset, message) in [
            (r#""ab\x""#, 4, "invalid escape sequence"),
            (r#""\u12"#, 3, "truncated `\\u` escape"),
            (r#""\u12g4""#, 3, "invalid `\\u` escape"),
            (r#""\ud83d x""#, 7, "unpaired surrogate in `\\u` escape"),
            (r#""\ud83d\u0041""#, 13, "unpaired surrogate in `\\u` escape"),
            (r#""\ud83d\u00""#, 9, "truncated `\\u` escape"),
            (r#""\ude00""#, 7, "unpaired surrogate in `\\u` escape"),
            ("\"ab\\", 4, "unexpected end of input inside a string"),
            ("\"\\u0041", 7, "unexpected end of input inside a string"),
            ("\"\\n\\u0041\nx\"", 9, "unterminated string: a line break inside a string must be written `\\n`"),
            ("\"\\t\u{1}\"", 3, "control character U+0001 must be escaped inside a string"),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!((err.offset, err.message.as_str()), (offset, message), "{text}");
        }
    }
}
