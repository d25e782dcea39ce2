//! What a dataset name and a tag may be, and what the text of a version reference means.
//!
//! The one place these rules live. The stores apply them where a dataset or a tag is made
//! ([`dataset_name`], [`tag_name`]), so the command line, the API and the console refuse the
//! same names in the same words; [`Ref`]'s parsing says what a reference is, on every command
//! and route that takes one. Names made before these rules stay readable: only new ones are
//! checked, and a reference that reads as a version number or a content id means that version
//! even where an older store has a tag of that text.
//!
//! Names are compared in Unicode NFC: a new name is stored in that form, and a name given in
//! another form finds the one stored, so `café` written with a combining accent and `café`
//! written with `é` are one dataset (or one tag), never two that look alike.

use std::borrow::Cow;

use unicode_normalization::{UnicodeNormalization, is_nfc_quick};

/// The longest dataset name or tag, in bytes of UTF-8 (after NFC). A name is part of URLs, of
/// PostgreSQL index keys and of the file name `pull` writes (`NAME.jsonl`, which must fit the
/// 255 bytes a file name may have), so it is kept well below each of those.
pub const MAX_NAME_BYTES: usize = 128;

/// The fewest hexadecimal digits a content-id prefix may have. Versions are shown with 12
/// digits; 8 digits (32 bits) is as long as a prefix someone copied, but longer than anything
/// typed by mistake in its place (`9`, a short word such as `cafe`), which would otherwise name
/// whichever version's id happens to start with it. (git abbreviates to 7 by default, and takes
/// any 4 or more.)
pub const MIN_PREFIX: usize = 8;

/// Which version: `v3`, `latest`, a content id or a prefix of one, or a tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref {
    Number(u64),
    Latest,
    /// A content id or a prefix of one: [`MIN_PREFIX`] or more hexadecimal digits, in lower case.
    Id(String),
    /// Anything else: a tag (or, when no tag has this name, a mistake the resolver explains).
    Name(String),
}

impl std::str::FromStr for Ref {
    type Err = String;
    /// `latest`, `vN` and content ids first: a tag can never be written like one of them
    /// ([`tag_name`]), so each of these always means the same version.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err("empty version reference: write `v3`, `latest`, a tag or a content id".into());
        }
        if s == "latest" {
            return Ok(Ref::Latest);
        }
        if let Some(n) = version_number(s) {
            return Ok(Ref::Number(n));
        }
        if s.len() >= MIN_PREFIX && is_hex(s) {
            return Ok(Ref::Id(s.to_ascii_lowercase()));
        }
        Ok(Ref::Name(s.to_owned()))
    }
}

impl std::fmt::Display for Ref {
    /// The reference as the user wrote it (a content id in lower case).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ref::Number(n) => write!(f, "v{n}"),
            Ref::Latest => f.write_str("latest"),
            Ref::Id(text) | Ref::Name(text) => f.write_str(text),
        }
    }
}

/// `N` of `vN`.
fn version_number(text: &str) -> Option<u64> {
    let digits = text.strip_prefix('v')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn is_hex(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A name refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {shown} is not allowed: {why}")]
pub struct NameError {
    /// `dataset name` or `tag`.
    pub what: &'static str,
    /// The name as messages show it: in backticks, invisible characters escaped, cut if long.
    pub shown: String,
    pub why: String,
}

/// A new dataset's name, in NFC, or why it cannot be one: 1 to [`MAX_NAME_BYTES`] bytes, not
/// `.` or `..`, without `/`, `@`, control, bidirectional or invisible characters, and not
/// starting or ending with white space.
pub fn dataset_name(text: &str) -> Result<String, NameError> {
    let name = nfc(text).into_owned();
    let refuse = |why: String| Err(NameError { what: "dataset name", shown: shown(&name), why });
    if let Some(why) = common_fault(&name) {
        return refuse(why);
    }
    if name == "." || name == ".." {
        return refuse("`.` and `..` stand for folders in paths and URLs".into());
    }
    if name.contains('/') {
        return refuse("it holds `/`, which separates the parts of paths and URLs: use `-` or `_`".into());
    }
    if name.contains('@') {
        return refuse("it holds `@`, which separates a dataset from its version (`NAME@v3`)".into());
    }
    Ok(name)
}

/// A new tag, in NFC, or why it cannot be one: what a dataset name may be, and nothing a
/// reference reads as something else: `latest`, `vN`, a number, or [`MIN_PREFIX`] or more
/// hexadecimal digits (a content id or a prefix of one).
pub fn tag_name(text: &str) -> Result<String, NameError> {
    let name = match dataset_name(text) {
        Ok(name) => name,
        Err(err) => return Err(NameError { what: "tag", ..err }),
    };
    let refuse = |why: String| Err(NameError { what: "tag", shown: shown(&name), why });
    let lower = name.to_ascii_lowercase();
    if lower == "latest" {
        return refuse("`latest` always means the newest version".into());
    }
    if let Some(n) = lower.strip_prefix('v').filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) {
        return refuse(format!("`v{n}` always means version {n}"));
    }
    if name.bytes().all(|b| b.is_ascii_digit()) {
        return refuse(format!("a number reads as a version: version {name} is written `v{name}`"));
    }
    if name.len() >= MIN_PREFIX && is_hex(&name) {
        return refuse(format!("{MIN_PREFIX} or more hexadecimal digits read as a content id (or the start of one)"));
    }
    Ok(name)
}

/// What no name may be, dataset or tag.
fn common_fault(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("a name needs at least one character".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Some(format!(
            "it is {} bytes long, and names are at most {MAX_NAME_BYTES} bytes (UTF-8)",
            thousands(name.len())
        ));
    }
    if let Some((c, kind)) = name.chars().find_map(|c| hidden(c).map(|kind| (c, kind))) {
        return Some(format!("it holds U+{:04X}, {kind}", c as u32));
    }
    if name.starts_with(char::is_whitespace) || name.ends_with(char::is_whitespace) {
        return Some("it starts or ends with white space".into());
    }
    None
}

/// What `c` is, if it is a character that is not seen as itself: controls, the characters that
/// reorder text around them (a name could then read as another), invisible ones and line
/// separators (two names could then look the same).
fn hidden(c: char) -> Option<&'static str> {
    match c {
        _ if c.is_control() => Some("a control character"),
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => {
            Some("a bidirectional control, which changes how the text around it is shown")
        }
        '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200D}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' => {
            Some("an invisible character")
        }
        '\u{2028}' | '\u{2029}' => Some("a line separator"),
        _ => None,
    }
}

/// A name as messages show it: in backticks, with the characters [`hidden`] would hide
/// written as `\u{…}`, and cut after 40 characters.
pub fn shown(name: &str) -> String {
    let mut out = String::from("`");
    for (at, c) in name.chars().enumerate() {
        if at == 40 {
            out.push('…');
            break;
        }
        match hidden(c) {
            Some(_) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            None => out.push(c),
        }
    }
    out.push('`');
    out
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (at, c) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` in NFC (borrowed when it is already).
pub fn nfc(text: &str) -> Cow<'_, str> {
    match is_nfc_quick(text.chars()) {
        unicode_normalization::IsNormalized::Yes => Cow::Borrowed(text),
        _ => Cow::Owned(text.nfc().collect()),
    }
}

/// The one of `known` that is `wanted`: the same text, else the same text in NFC (a name
/// stored in another form by an older casebook, or asked for in another form).
pub fn find<'a>(known: impl IntoIterator<Item = &'a str> + Clone, wanted: &str) -> Option<&'a str> {
    if let Some(same) = known.clone().into_iter().find(|k| *k == wanted) {
        return Some(same);
    }
    let wanted = nfc(wanted);
    known.into_iter().find(|k| nfc(k) == wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_read_as_numbers_and_ids_before_tags() {
        assert_eq!("v3".parse(), Ok(Ref::Number(3)));
        assert_eq!("latest".parse(), Ok(Ref::Latest));
        assert_eq!("DEADBEEF".parse(), Ok(Ref::Id("deadbeef".into())));
        // Too short for a prefix: a tag, or a mistake the resolver explains.
        assert_eq!("9".parse(), Ok(Ref::Name("9".into())));
        assert_eq!("cafe".parse(), Ok(Ref::Name("cafe".into())));
        assert_eq!("v".parse(), Ok(Ref::Name("v".into())));
        assert_eq!("v+3".parse(), Ok(Ref::Name("v+3".into())));
        assert!("".parse::<Ref>().is_err());
    }

    #[test]
    fn names_are_refused_with_the_reason() {
        let why = |text: &str| dataset_name(text).unwrap_err().to_string();
        assert_eq!(why(".."), "dataset name `..` is not allowed: `.` and `..` stand for folders in paths and URLs");
        assert_eq!(why(""), "dataset name `` is not allowed: a name needs at least one character");
        assert_eq!(
            why("a\u{202E}b"),
            "dataset name `a\\u{202e}b` is not allowed: it holds U+202E, a bidirectional control, which changes how the text around it is shown"
        );
        assert_eq!(why("a\0b"), "dataset name `a\\u{0000}b` is not allowed: it holds U+0000, a control character");
        assert_eq!(
            why(&"é".repeat(1500)),
            format!(
                "dataset name `{}…` is not allowed: it is 3,000 bytes long, and names are at most 128 bytes (UTF-8)",
                "é".repeat(40)
            )
        );
        assert_eq!(dataset_name("support-2026 é"), Ok("support-2026 é".into()));
        assert_eq!(dataset_name("cafe\u{301}"), Ok("caf\u{e9}".into()));
    }

    #[test]
    fn tags_that_read_as_references_are_refused() {
        let why = |text: &str| tag_name(text).unwrap_err().to_string();
        assert_eq!(why("V3"), "tag `V3` is not allowed: `v3` always means version 3");
        assert_eq!(why("Latest"), "tag `Latest` is not allowed: `latest` always means the newest version");
        assert_eq!(why("42"), "tag `42` is not allowed: a number reads as a version: version 42 is written `v42`");
        assert_eq!(
            why("DeadBeef"),
            "tag `DeadBeef` is not allowed: 8 or more hexadecimal digits read as a content id (or the start of one)"
        );
        assert_eq!(
            why("a/b"),
            "tag `a/b` is not allowed: it holds `/`, which separates the parts of paths and URLs: use `-` or `_`"
        );
        assert_eq!(tag_name("prod"), Ok("prod".into()));
        assert_eq!(tag_name("cafe"), Ok("cafe".into()));
        assert_eq!(tag_name("v3-rc"), Ok("v3-rc".into()));
    }

    #[test]
    fn names_are_found_in_any_normal_form() {
        let known = ["caf\u{e9}", "support"];
        assert_eq!(find(known, "cafe\u{301}"), Some("caf\u{e9}"));
        assert_eq!(find(["cafe\u{301}"], "caf\u{e9}"), Some("cafe\u{301}"));
        assert_eq!(find(known, "cafe"), None);
    }
}
