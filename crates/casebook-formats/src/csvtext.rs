//! CSV (RFC 4180) records with the raw position of every field, so that a problem in a cell can
//! be reported at its line and column. Cells keep their text exactly: `007`, `0.30`, `NA` and
//! `null` are strings like any other.

use std::borrow::Cow;

/// Bytes looked at one by one before a search is handed to `memchr`: a `memchr` call has a
/// setup cost that dominates when the bytes looked for are dense (a cell of doubled quotes),
/// so dense runs are walked and sparse ones searched; either way a scan stays linear and fast.
const NEAR: usize = 16;

/// Position of the first `a` at or after `from`.
fn find(a: u8, bytes: &[u8], from: usize) -> Option<usize> {
    let near = bytes.len().min(from + NEAR);
    if let Some(i) = bytes.get(from..near)?.iter().position(|&b| b == a) {
        return Some(from + i);
    }
    memchr::memchr(a, &bytes[near..]).map(|i| near + i)
}

/// How many quotes follow one another from `at`.
fn quote_run(bytes: &[u8], at: usize) -> usize {
    let mut end = at;
    while bytes.get(end) == Some(&b'"') {
        end += 1;
    }
    end - at
}

/// Position of the first `a` or `b` at or after `from`.
fn find2(a: u8, b: u8, bytes: &[u8], from: usize) -> Option<usize> {
    let near = bytes.len().min(from + NEAR);
    if let Some(i) = bytes.get(from..near)?.iter().position(|&c| c == a || c == b) {
        return Some(from + i);
    }
    memchr::memchr2(a, b, &bytes[near..]).map(|i| near + i)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Byte range of the field in the text, quotes included.
    pub start: usize,
    pub end: usize,
    pub quoted: bool,
}

impl Field {
    /// The cell's value: quotes removed and `""` turned into `"`.
    pub fn value<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let raw = &text[self.start..self.end];
        if !self.quoted {
            return Cow::Borrowed(raw);
        }
        let inner = &raw[1..raw.len() - 1];
        // Inside a quoted cell every quote is doubled: keep one of each pair.
        let bytes = inner.as_bytes();
        let Some(mut at) = find(b'"', bytes, 0) else { return Cow::Borrowed(inner) };
        let mut out = String::with_capacity(inner.len());
        let mut done = 0;
        loop {
            // A run of quotes stands for half as many (a run is whole pairs in a valid cell).
            let run = quote_run(bytes, at);
            out.push_str(&inner[done..at]);
            for _ in 0..run.div_ceil(2) {
                out.push('"');
            }
            done = (at + run.div_ceil(2) * 2).min(inner.len());
            match find(b'"', bytes, done) {
                Some(next) => at = next,
                None => break,
            }
        }
        out.push_str(&inner[done..]);
        Cow::Owned(out)
    }

    /// Where the bytes of the cell's value are in the text (see [`Offsets`]).
    pub fn offsets(&self, text: &str) -> Offsets {
        let mut pairs = Vec::new();
        if self.quoted {
            let inner = &text.as_bytes()[self.start + 1..self.end.saturating_sub(1).max(self.start + 1)];
            let mut i = 0;
            while let Some(q) = find(b'"', inner, i) {
                // Position in the value of the quote this pair stands for.
                pairs.push(q - pairs.len());
                i = q + 2;
            }
        }
        Offsets { start: self.content_offset(), pairs }
    }

    /// Byte offset of the cell's first character of content.
    pub fn content_offset(&self) -> usize {
        self.start + usize::from(self.quoted)
    }
}

/// Maps byte offsets in a cell's value to the text: past the opening quote, and past every `""`
/// before them.
pub struct Offsets {
    start: usize,
    /// Offsets in the value of the quotes that are written `""`.
    pairs: Vec<usize>,
}

impl Offsets {
    pub fn raw(&self, offset: usize) -> usize {
        self.start + offset + self.pairs.partition_point(|&p| p < offset)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CsvError {
    pub offset: usize,
    pub message: String,
}

/// Splits `text` into records. Each record is its start offset and its fields.
pub struct Records<'t> {
    text: &'t str,
    pos: usize,
}

pub fn records(text: &str) -> Records<'_> {
    Records { text, pos: 0 }
}

impl Iterator for Records<'_> {
    type Item = Result<(usize, Vec<Field>), CsvError>;

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        // Blank lines between records are skipped.
        while self.pos < bytes.len() && (bytes[self.pos] == b'\n' || bytes[self.pos] == b'\r') {
            self.pos += 1;
        }
        if self.pos >= bytes.len() {
            return None;
        }
        let start = self.pos;
        let mut fields = Vec::new();
        loop {
            let field_start = self.pos;
            if bytes.get(self.pos) == Some(&b'"') {
                let mut i = self.pos + 1;
                loop {
                    match find(b'"', bytes, i) {
                        None => {
                            self.pos = bytes.len();
                            return Some(Err(CsvError {
                                offset: field_start,
                                message: "quoted field is never closed".into(),
                            }));
                        }
                        Some(q) => {
                            // Quotes pair up from the left: an even run is all doubled quotes,
                            // an odd one ends with the closing quote.
                            let run = quote_run(bytes, q);
                            i = q + run;
                            if run % 2 == 1 {
                                i -= 1;
                                break;
                            }
                        }
                    }
                }
                self.pos = i + 1;
                fields.push(Field { start: field_start, end: self.pos, quoted: true });
                match bytes.get(self.pos) {
                    None => return Some(Ok((start, fields))),
                    Some(b',') => self.pos += 1,
                    Some(b'\n') => {
                        self.pos += 1;
                        return Some(Ok((start, fields)));
                    }
                    Some(b'\r') if bytes.get(self.pos + 1) == Some(&b'\n') => {
                        self.pos += 2;
                        return Some(Ok((start, fields)));
                    }
                    Some(_) => {
                        let offset = self.pos;
                        // Skip to the end of the line to resynchronise.
                        self.pos = memchr::memchr(b'\n', &bytes[self.pos..]).map_or(bytes.len(), |n| self.pos + n + 1);
                        return Some(Err(CsvError { offset, message: "unexpected text after a closing quote".into() }));
                    }
                }
            } else {
                let end = memchr::memchr3(b',', b'\n', b'\r', &bytes[self.pos..]).map_or(bytes.len(), |n| self.pos + n);
                // A lone `\r` inside an unquoted field is kept as text.
                let mut end = end;
                while bytes.get(end) == Some(&b'\r') && bytes.get(end + 1) != Some(&b'\n') {
                    end = memchr::memchr3(b',', b'\n', b'\r', &bytes[end + 1..]).map_or(bytes.len(), |n| end + 1 + n);
                }
                fields.push(Field { start: field_start, end, quoted: false });
                self.pos = end;
                match bytes.get(self.pos) {
                    None => return Some(Ok((start, fields))),
                    Some(b',') => self.pos += 1,
                    Some(b'\r') => {
                        self.pos += 2;
                        return Some(Ok((start, fields)));
                    }
                    _ => {
                        self.pos += 1;
                        return Some(Ok((start, fields)));
                    }
                }
            }
        }
    }
}

/// End of the first record (its line break included), if `text` holds all of it.
pub fn first_record_end(text: &str) -> Option<usize> {
    let mut it = records(text);
    match it.next()? {
        Ok(_) if it.pos < text.len() || text.ends_with('\n') => Some(it.pos),
        _ => None,
    }
}

/// Length of the longest prefix of `bytes` that ends on a record boundary (after a newline that
/// is not inside quotes), or `None` if there is none.
/// The line breaks in that prefix are counted in the same pass, so the reader thread scans each
/// chunk once.
pub fn complete_prefix_lines(bytes: &[u8]) -> Option<(usize, u64)> {
    let mut in_quotes = false;
    let mut last = None;
    let mut lines = 0;
    let mut from = 0;
    while let Some(i) = find2(b'"', b'\n', bytes, from) {
        from = i + 1;
        if bytes[i] == b'"' {
            let run = quote_run(bytes, i);
            from = i + run;
            in_quotes ^= run % 2 == 1;
            continue;
        }
        lines += 1;
        if !in_quotes {
            last = Some((i + 1, lines));
        }
    }
    last
}

/// Quotes a cell for writing when it needs it.
pub fn write_cell(out: &mut Vec<u8>, cell: &str) {
    let needs =
        cell.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')) || cell.starts_with(' ') || cell.ends_with(' ');
    if needs {
        out.push(b'"');
        for part in cell.split('"').enumerate() {
            if part.0 > 0 {
                out.extend_from_slice(b"\"\"");
            }
            out.extend_from_slice(part.1.as_bytes());
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(cell.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(text: &str) -> Vec<Vec<String>> {
        records(text).map(|r| r.unwrap().1.iter().map(|f| f.value(text).into_owned()).collect()).collect()
    }

    #[test]
    fn quoted_and_plain_cells_keep_their_text() {
        let text = "a,b,c\r\n\"x, \"\"y\"\"\",007,{4}\n\n\"multi\nline\",NA,";
        assert_eq!(
            cells(text),
            vec![vec!["a", "b", "c"], vec!["x, \"y\"", "007", "{4}"], vec!["multi\nline", "NA", ""],]
        );
    }

    #[test]
    fn field_positions() {
        let text = "id,input\n1,\"hi\"\n";
        let recs: Vec<_> = records(text).map(Result::unwrap).collect();
        assert_eq!(recs[1].0, 9);
        assert_eq!(recs[1].1[1], Field { start: 11, end: 15, quoted: true });
        assert_eq!(recs[1].1[1].content_offset(), 12);
    }

    #[test]
    fn unclosed_quote_is_an_error() {
        let err = records("a\n\"abc").nth(1).unwrap().unwrap_err();
        assert_eq!(err.offset, 2);
    }

    #[test]
    fn offsets_skip_doubled_quotes() {
        let text = r#"a,"{""k"": 1}""#;
        let field = records(text).next().unwrap().unwrap().1[1];
        assert_eq!(field.value(text), r#"{"k": 1}"#);
        let offsets = field.offsets(text);
        // `1` is at 6 in the value and at 11 in the text.
        assert_eq!((offsets.raw(0), offsets.raw(1), offsets.raw(6)), (3, 4, 11));
        assert_eq!(&text[11..12], "1");
    }

    #[test]
    fn runs_of_quotes_pair_up_from_the_left() {
        let text = "\"a\"\"\"\"b\",\"\"\"\",\"\",\"\"\"\"\"\"\"\"\"\"\"\"\"\"\nx\n";
        assert_eq!(cells(text), vec![vec!["a\"\"b", "\"", "", "\"\"\"\"\"\""], vec!["x"]]);
        let field = records(text).next().unwrap().unwrap().1[0];
        // `b` is at 3 in the value and at 6 in the text.
        assert_eq!(field.offsets(text).raw(3), 6);
        assert_eq!(complete_prefix_lines(text.as_bytes()), Some((text.len(), 2)));
        assert_eq!(complete_prefix_lines(b"\"\"\"\n\"\"\"\"\n"), None);
    }

    #[test]
    fn prefix_stops_outside_quotes() {
        assert_eq!(complete_prefix_lines(b"a,b\n\"x\ny\",z\n\"open\n"), Some((12, 3)));
    }

    #[test]
    fn writing_round_trips() {
        let mut out = Vec::new();
        write_cell(&mut out, "say \"hi\", then\nleave");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(cells(&text), vec![vec!["say \"hi\", then\nleave"]]);
    }
}
