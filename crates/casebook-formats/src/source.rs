//! Where a piece of text sits in its file, and the context that turns a problem found in it
//! into a located [`Diagnostic`].

use std::cell::Cell;
use std::path::Path;

use casebook_model::{Code, Diagnostic, Map};
use serde_json::Value;

use crate::node::{Entry, Node, NodeValue, ValueError};
use crate::pointer::Ptr;

/// A span of source text: a whole document, or one JSONL line or CSV cell.
pub struct Source<'a> {
    /// The file as the user named it.
    pub file: &'a str,
    pub text: &'a str,
    /// 1-based line of the first character of `text` in the file.
    pub first_line: u64,
    /// 1-based column of the first character of `text` on that line.
    pub first_column: u64,
    /// Byte offset of `text` in the file.
    pub file_offset: u64,
    /// Byte offset in the file of the line `text` starts on (`file_offset` unless `text`
    /// starts within a line, as an item cut out of a long document does).
    first_line_offset: u64,
    /// The last place located: its byte offset, the line breaks before it, where its line
    /// starts and its column there. Locations are mostly asked for in increasing order, so
    /// counting goes on from the last one, and a document on one line costs no more than many.
    cursor: Cell<(usize, u64, usize, u64)>,
}

impl<'a> Source<'a> {
    pub fn new(file: &'a str, text: &'a str, first_line: u64, file_offset: u64) -> Self {
        Self::within_line(file, text, (first_line, 1), file_offset, file_offset)
    }

    /// A text that starts at `(line, column)` of the file, at byte `file_offset`, on a line
    /// that starts at byte `line_offset`.
    pub fn within_line(file: &'a str, text: &'a str, at: (u64, u64), file_offset: u64, line_offset: u64) -> Self {
        Self {
            file,
            text,
            first_line: at.0,
            first_column: at.1,
            file_offset,
            first_line_offset: line_offset,
            cursor: Cell::new((0, 0, 0, 0)),
        }
    }

    /// `(line, column, byte offset of the line in the file)` of a byte offset into `text`.
    pub fn locate(&self, offset: usize) -> (u64, u64, u64) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let bytes = self.text.as_bytes();
        let (mut at, mut lines, mut line_start, mut chars) = self.cursor.get();
        if offset < at {
            (at, lines, line_start, chars) = (0, 0, 0, 0);
        }
        let skipped = &bytes[at..offset];
        match memchr::memrchr(b'\n', skipped) {
            Some(last) => {
                lines += memchr::memchr_iter(b'\n', skipped).count() as u64;
                line_start = at + last + 1;
                chars = self.text[line_start..offset].chars().count() as u64;
            }
            None => chars += self.text[at..offset].chars().count() as u64,
        }
        self.cursor.set((offset, lines, line_start, chars));
        if lines == 0 {
            (self.first_line, self.first_column + chars, self.first_line_offset)
        } else {
            (self.first_line + lines, chars + 1, self.file_offset + line_start as u64)
        }
    }

    pub fn diagnostic(&self, code: Code, offset: usize, pointer: String, message: String) -> Diagnostic {
        let (line, column, line_offset) = self.locate(offset);
        Diagnostic {
            severity: code.severity(),
            code,
            message,
            file: self.file.to_owned(),
            line,
            column,
            pointer: Some(pointer),
            path: None,
            hint: None,
            case: None,
            line_offset: Some(line_offset),
        }
    }
}

/// What a format mapper works with: the source it reads and the diagnostics it finds.
pub struct Cx<'a> {
    pub src: &'a Source<'a>,
    /// Folder of the dataset file, for resolving relative paths in it.
    pub base_dir: Option<&'a Path>,
    pub diags: Vec<Diagnostic>,
    /// Seed files read so far, by the path cases name them with (`None`: it had problems,
    /// reported where it was first named), so that a file many cases share is read once.
    pub seed_files: std::collections::HashMap<String, Option<serde_json::Value>>,
    /// Snapshot files read so far, kept as [`seed_files`](Self::seed_files) are.
    pub snapshot_files: std::collections::HashMap<String, Option<serde_json::Value>>,
    /// The files beside the dataset that this whole read has read (shared by the rows of a
    /// JSONL file, each of which has a `Cx` of its own), when the reader keeps them.
    pub files: Option<&'a FileCache>,
}

/// Seed and snapshot files one read has read without any problem, by their resolved path, so
/// that a file every row of a JSONL file names is read and parsed once, not once a row. Shared
/// by the read's worker threads. Bounded: once the files kept reach [`FileCache::BUDGET`] bytes
/// of text, the others are read each time they are named. A file with problems (or warnings) is
/// never kept, so each row naming it reports them as before.
#[derive(Debug, Default)]
pub struct FileCache {
    files: std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, serde_json::Value>>,
    /// One lock per file being read, so that workers naming the same file at once wait for the
    /// first one's read instead of each reading it.
    reading: std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, std::sync::Arc<std::sync::Mutex<()>>>>,
    /// Bytes of text of the files kept.
    kept: std::sync::atomic::AtomicUsize,
    /// Bytes of files beside the dataset this read has read from disk ([`read_file_beside`]).
    read: std::sync::atomic::AtomicU64,
}

/// The most bytes casebook reads of one file a dataset names beside it (seed, snapshot and
/// promptfoo test and variable files): a larger one is refused, not read.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// The most bytes of such files one read of a dataset reads in all.
pub const MAX_FILES_BYTES: u64 = 1 << 30;

/// Why a file beside the dataset was not read ([`read_file_beside`]).
#[derive(Debug)]
pub enum BesideError {
    Io(std::io::Error),
    /// The file holds more than [`MAX_FILE_BYTES`] (its size, or what was read of it).
    TooLarge(u64),
    /// Reading it would take the read's files past [`MAX_FILES_BYTES`].
    OverTotal,
}

impl BesideError {
    /// The message and hint for the place that names the file shown as `shown`.
    pub fn explain(&self, shown: &str) -> (String, String) {
        let mib = |bytes: u64| bytes >> 20;
        match self {
            Self::Io(err) => {
                (format!("`{shown}` cannot be read: {}", err.kind()), "check the path and its permissions".into())
            }
            Self::TooLarge(size) => (
                format!("`{shown}` is too large to read ({} MiB or more)", mib(*size).max(1)),
                format!(
                    "casebook reads at most {} MiB of a file a dataset names; split it into smaller files",
                    mib(MAX_FILE_BYTES)
                ),
            ),
            Self::OverTotal => (
                format!("`{shown}` is not read: the files this dataset names hold more than casebook reads at once"),
                format!(
                    "casebook reads at most {} MiB of the files one dataset names; name fewer or smaller files, or split the dataset",
                    mib(MAX_FILES_BYTES)
                ),
            ),
        }
    }
}

/// Reads a file a dataset names beside it, bounded: one larger than [`MAX_FILE_BYTES`] is
/// refused before it is read (and a file that grows while read, past it), and `files` (the
/// read's) counts the bytes read against [`MAX_FILES_BYTES`] for the whole read.
pub fn read_file_beside(files: Option<&FileCache>, path: &Path) -> Result<Vec<u8>, BesideError> {
    use std::io::Read as _;
    use std::sync::atomic::Ordering;
    let file = fs_err::File::open(path).map_err(BesideError::Io)?;
    let size = file.metadata().map_err(BesideError::Io)?.len();
    if size > MAX_FILE_BYTES {
        return Err(BesideError::TooLarge(size));
    }
    let spend = |bytes: u64| match files {
        Some(files) if files.read.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes) > MAX_FILES_BYTES => {
            Err(BesideError::OverTotal)
        }
        _ => Ok(()),
    };
    spend(size)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(BesideError::Io)?;
    let len = bytes.len() as u64;
    if len > MAX_FILE_BYTES {
        return Err(BesideError::TooLarge(len));
    }
    // A file that grew since its size was taken (a file without a size: a pipe).
    spend(len.saturating_sub(size))?;
    Ok(bytes)
}

impl FileCache {
    /// The most text (bytes) of files kept at once.
    pub const BUDGET: usize = 64 << 20;

    /// The lock a worker holds while it looks for the file at `path` and reads it: a second
    /// worker naming the file meanwhile then finds it kept.
    pub fn gate(&self, path: &Path) -> std::sync::Arc<std::sync::Mutex<()>> {
        let mut reading = self.reading.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        reading.entry(path.to_owned()).or_default().clone()
    }

    /// The document of the file at `path`, if it was kept.
    pub fn get(&self, path: &Path) -> Option<serde_json::Value> {
        self.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(path).cloned()
    }

    /// Keeps the document of a file of `len` bytes of text, if the budget allows.
    pub fn keep(&self, path: &Path, len: usize, document: &serde_json::Value) {
        use std::sync::atomic::Ordering;
        let kept = self.kept.fetch_add(len, Ordering::Relaxed);
        if kept.saturating_add(len) > Self::BUDGET {
            self.kept.fetch_sub(len, Ordering::Relaxed);
            return;
        }
        let mut files = self.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if files.insert(path.to_owned(), document.clone()).is_some() {
            // Another worker kept it first.
            self.kept.fetch_sub(len, Ordering::Relaxed);
        }
    }
}

impl<'a> Cx<'a> {
    pub fn new(src: &'a Source<'a>, base_dir: Option<&'a Path>) -> Self {
        Self {
            src,
            base_dir,
            diags: Vec::new(),
            seed_files: std::collections::HashMap::new(),
            snapshot_files: std::collections::HashMap::new(),
            files: None,
        }
    }

    pub fn report(&mut self, code: Code, offset: usize, ptr: &Ptr<'_>, message: impl Into<String>) -> &mut Diagnostic {
        self.diags.push(self.src.diagnostic(code, offset, ptr.to_string(), message.into()));
        self.diags.last_mut().expect("just pushed")
    }

    pub fn wrong_type(&mut self, node: &Node, ptr: &Ptr<'_>, expected: &str) {
        let found = node.value.kind();
        self.report(Code::WrongType, node.offset, ptr, format!("expected {expected}, found {found}"));
    }

    pub fn missing(&mut self, node: &Node, ptr: &Ptr<'_>, field: &str, hint: Option<String>) {
        let d = self.report(Code::MissingField, node.offset, ptr, format!("missing required field `{field}`"));
        d.hint = hint;
    }

    pub fn string(&mut self, node: &Node, ptr: &Ptr<'_>) -> Option<String> {
        match &node.value {
            NodeValue::String(s) => Some(s.to_string()),
            _ => {
                self.wrong_type(node, ptr, "a string");
                None
            }
        }
    }

    /// A string, or `None` without complaint for `null`.
    pub fn opt_string(&mut self, node: &Node, ptr: &Ptr<'_>) -> Option<String> {
        if node.is_null() { None } else { self.string(node, ptr) }
    }

    pub fn value(&mut self, node: &Node, ptr: &Ptr<'_>) -> Option<Value> {
        match node.to_value(ptr) {
            Ok(value) => Some(value),
            Err(ValueError::IntegerRange { offset, pointer, text }) => {
                self.diags.push(self.src.diagnostic(
                    Code::IntegerRange,
                    offset,
                    pointer,
                    format!("integer {text} is beyond ±2^53 and cannot be read exactly everywhere"),
                ));
                let d = self.diags.last_mut().expect("just pushed");
                d.hint = Some("write it as a string".into());
                None
            }
            Err(ValueError::NotFinite { offset, pointer, text }) => {
                self.diags.push(self.src.diagnostic(
                    Code::InvalidValue,
                    offset,
                    pointer,
                    format!("number {text} cannot be represented in JSON"),
                ));
                None
            }
        }
    }

    pub fn object<'n, 's>(&mut self, node: &'n Node<'s>, ptr: &Ptr<'_>) -> Option<&'n [Entry<'s>]> {
        match &node.value {
            NodeValue::Object(entries) => Some(entries),
            _ => {
                self.wrong_type(node, ptr, "an object");
                None
            }
        }
    }

    pub fn array<'n, 's>(&mut self, node: &'n Node<'s>, ptr: &Ptr<'_>) -> Option<&'n [Node<'s>]> {
        match &node.value {
            NodeValue::Array(items) => Some(items),
            _ => {
                self.wrong_type(node, ptr, "an array");
                None
            }
        }
    }

    /// An object as a JSON map.
    pub fn map(&mut self, node: &Node, ptr: &Ptr<'_>) -> Option<Map> {
        self.object(node, ptr)?;
        self.check_duplicate_keys_deep(node, ptr);
        match self.value(node, ptr)? {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    pub fn strings(&mut self, node: &Node, ptr: &Ptr<'_>) -> Option<Vec<String>> {
        let items = self.array(node, ptr)?;
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.string(item, &ptr.index(i)) {
                Some(s) => out.push(s),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// Any JSON value; duplicate keys anywhere inside are reported.
    pub fn json(&mut self, node: &Node, ptr: &Ptr<'_>) -> Option<Value> {
        self.check_duplicate_keys_deep(node, ptr);
        self.value(node, ptr)
    }

    pub fn check_duplicate_keys(&mut self, entries: &[Entry], ptr: &Ptr<'_>) {
        if entries.len() < 2 {
            return;
        }
        if entries.len() > 32 {
            // Many keys: look for a repeat in a set before the quadratic search that names it.
            let mut seen = std::collections::HashSet::with_capacity(entries.len());
            if entries.iter().all(|e| seen.insert(e.key.as_ref())) {
                return;
            }
        }
        for (i, entry) in entries.iter().enumerate().skip(1) {
            if let Some(first) = entries[..i].iter().find(|e| e.key == entry.key) {
                let (line, column, _) = self.src.locate(first.key_offset);
                let d = self.report(
                    Code::DuplicateKey,
                    entry.key_offset,
                    &ptr.key(&entry.key),
                    format!(
                        "duplicate key `{}` (first at line {line}, column {column})",
                        casebook_model::excerpt(&entry.key)
                    ),
                );
                d.hint = Some("remove one of them: readers disagree on which one wins".into());
            }
        }
    }

    fn check_duplicate_keys_deep(&mut self, node: &Node, ptr: &Ptr<'_>) {
        match &node.value {
            NodeValue::Object(entries) => {
                self.check_duplicate_keys(entries, ptr);
                for entry in entries {
                    self.check_duplicate_keys_deep(&entry.value, &ptr.key(&entry.key));
                }
            }
            NodeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.check_duplicate_keys_deep(item, &ptr.index(i));
                }
            }
            _ => {}
        }
    }
}

/// The keys of one object, taken one by one by a mapper; what is left are the unknown ones.
pub struct Fields<'n, 's> {
    entries: &'n [Entry<'s>],
    /// Which entries were taken: a bit mask, or a list for objects of more than 64 keys.
    taken: u64,
    taken_more: Vec<bool>,
}

impl<'n, 's> Fields<'n, 's> {
    pub fn new(cx: &mut Cx<'_>, entries: &'n [Entry<'s>], ptr: &Ptr<'_>) -> Self {
        cx.check_duplicate_keys(entries, ptr);
        let taken_more = if entries.len() > 64 { vec![false; entries.len()] } else { Vec::new() };
        Self { entries, taken: 0, taken_more }
    }

    /// The value of `key` (the first one if it is repeated), marking it as known.
    pub fn take(&mut self, key: &str) -> Option<&'n Node<'s>> {
        let mut found = None;
        for (i, entry) in self.entries.iter().enumerate() {
            if entry.key == key {
                self.mark(i);
                found.get_or_insert(&entry.value);
            }
        }
        found
    }

    pub fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|e| e.key == key)
    }

    fn mark(&mut self, i: usize) {
        if self.taken_more.is_empty() {
            self.taken |= 1 << i;
        } else {
            self.taken_more[i] = true;
        }
    }

    fn is_taken(&self, i: usize) -> bool {
        if self.taken_more.is_empty() { self.taken & (1 << i) != 0 } else { self.taken_more[i] }
    }

    /// Entries no `take` asked for and the entry `key`, in source order.
    pub fn rest_and<'k>(&'k self, key: &'k str) -> impl Iterator<Item = &'n Entry<'s>> + 'k {
        self.entries.iter().enumerate().filter(move |(i, e)| !self.is_taken(*i) || e.key == key).map(|(_, e)| e)
    }

    /// Entries no `take` asked for, in source order.
    pub fn rest(&self) -> impl Iterator<Item = &'n Entry<'s>> + '_ {
        self.entries.iter().enumerate().filter(|(i, _)| !self.is_taken(*i)).map(|(_, e)| e)
    }
}

/// Suggests the closest known key for a misspelt one.
pub use casebook_model::did_you_mean;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_counts_characters_and_lines() {
        let src = Source::new("f.json", "ab\n é x\n", 10, 100);
        assert_eq!(src.locate(0), (10, 1, 100));
        assert_eq!(src.locate(7), (11, 4, 103));
        // Backwards, then forwards again on one long line.
        assert_eq!(src.locate(1), (10, 2, 100));
        assert_eq!(src.locate(6), (11, 3, 103));
        // Within a character: at its start.
        assert_eq!(src.locate(5), (11, 2, 103));
        // A text cut out of the middle of a line.
        let item = Source::within_line("f.json", "{\"a\": \"é\",\n \"b\": 1}", (3, 40), 500, 460);
        assert_eq!(item.locate(0), (3, 40, 460));
        assert_eq!(item.locate(11), (3, 50, 460));
        assert_eq!(item.locate(13), (4, 2, 512));
    }

    #[test]
    fn fields_find_keys_of_every_length() {
        let long = "k".repeat(70);
        let text = format!(r#"{{"id": 1, "{}": 2, "{}": 3, "{long}": 4, "": 5}}"#, "x".repeat(63), "y".repeat(64));
        let node = crate::json::parse(&text).unwrap();
        let src = Source::new("f.json", &text, 1, 0);
        let mut cx = Cx::new(&src, None);
        let NodeValue::Object(entries) = &node.value else { panic!() };
        let mut fields = Fields::new(&mut cx, entries, &Ptr::ROOT);
        for (key, value) in [("id", "1"), (&"x".repeat(63), "2"), (&"y".repeat(64), "3"), (&long, "4"), ("", "5")] {
            assert!(fields.has(key), "{key}");
            assert_eq!(fields.take(key).map(|n| n.value.clone()), Some(NodeValue::Number(value.into())), "{key}");
        }
        // Absent keys, of a length some key has and of one none has.
        for key in ["ix", "input", &"z".repeat(63), &"z".repeat(80)] {
            assert!(!fields.has(key), "{key}");
            assert!(fields.take(key).is_none(), "{key}");
        }
        assert_eq!(fields.rest().count(), 0);
    }

    #[test]
    fn suggestions() {
        assert_eq!(did_you_mean("ground_trth", &["ground_truth", "input"]), Some("ground_truth"));
        assert_eq!(did_you_mean("zzz", &["ground_truth", "input"]), None);
    }
}
