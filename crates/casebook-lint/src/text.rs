//! Text as hygiene checks compare it: letter case folded, runs of whitespace made one space, and
//! answers found only as whole tokens (`4` is not in `40` nor in `4.5`).

/// Appends `text` to `out` in lower case, each run of whitespace one space, without leading or
/// trailing whitespace. Runs of ASCII are copied and lower-cased in place, a run at a time.
pub fn normalize_into(text: &str, out: &mut String) {
    let start = out.len();
    let bytes = text.as_bytes();
    let ascii_space = |b: u8| matches!(b, b' ' | b'\t'..=b'\r');
    let mut space = false;
    let mut i = 0;
    out.reserve(text.len());
    while i < bytes.len() {
        let b = bytes[i];
        let (c, len) = if b < 0x80 {
            (char::from(b), 1)
        } else {
            match text[i..].chars().next() {
                Some(c) => (c, c.len_utf8()),
                None => break,
            }
        };
        if if b < 0x80 { ascii_space(b) } else { c.is_whitespace() } {
            space = out.len() > start;
            i += len;
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        if b < 0x80 {
            let end = bytes[i..].iter().position(|&b| b >= 0x80 || ascii_space(b)).map_or(bytes.len(), |p| i + p);
            let from = out.len();
            out.push_str(&text[i..end]);
            out.as_mut_str()[from..].make_ascii_lowercase();
            i = end;
            continue;
        }
        if caseless(c) {
            out.push(c);
        } else {
            out.extend(c.to_lowercase());
        }
        i += len;
    }
}

/// Whether `c` is in a block whose characters have no letter case (CJK, kana, Hangul, Yi,
/// emoji and the other symbols above U+1F000), so it lower-cases to itself without a look-up
/// in Unicode's tables (the largest cost of normalising text in those scripts).
fn caseless(c: char) -> bool {
    let u = u32::from(c);
    u >= 0x1_F000 || (0x2E80..0xA640).contains(&u) || (0xAC00..0xD7A4).contains(&u)
}

pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    normalize_into(text, &mut out);
    out
}

/// Whether `c` continues a token: a letter, a digit or `_`.
fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether the character before byte `at` of `text` joins a token that starts at `at`: a word
/// character, or a `.`/`,` between a digit or letter and `at` (`4.5`, `1,000`).
fn joined_before(text: &str, at: usize) -> bool {
    let mut before = text[..at].chars().rev();
    match before.next() {
        Some(c) if word_char(c) => true,
        Some('.' | ',') => before.next().is_some_and(word_char),
        _ => false,
    }
}

/// Whether the character at byte `at` of `text` joins a token that ends at `at`.
fn joined_after(text: &str, at: usize) -> bool {
    let mut after = text[at..].chars();
    match after.next() {
        Some(c) if word_char(c) => true,
        Some('.' | ',') => after.next().is_some_and(word_char),
        _ => false,
    }
}

/// A text looked for as whole tokens, its searcher made once.
#[derive(Debug, Clone)]
pub struct Token {
    needle: String,
    /// Made the first time a text is long enough to hold the needle (most are not, and making
    /// one costs as much as a search).
    finder: std::cell::OnceCell<memchr::memmem::Finder<'static>>,
    len: usize,
    starts_word: bool,
    ends_word: bool,
}

impl Token {
    /// `needle` is expected normalised.
    pub fn new(needle: &str) -> Self {
        Self {
            needle: needle.to_owned(),
            finder: std::cell::OnceCell::new(),
            len: needle.len(),
            starts_word: needle.chars().next().is_some_and(word_char),
            ends_word: needle.chars().next_back().is_some_and(word_char),
        }
    }

    /// Whether the token occurs in `haystack` (normalised) as whole tokens: not continuing a
    /// word or number on either side (where the token itself starts or ends with a word
    /// character).
    pub fn is_in(&self, haystack: &str) -> bool {
        if self.len == 0 || self.len > haystack.len() {
            return false;
        }
        let finder = self.finder.get_or_init(|| memchr::memmem::Finder::new(self.needle.as_bytes()).into_owned());
        finder.find_iter(haystack.as_bytes()).any(|at| {
            let end = at + self.len;
            // A match found by bytes always starts and ends on character boundaries, as both
            // texts are valid UTF-8 and the needle starts with a leading byte.
            let glued =
                (self.starts_word && joined_before(haystack, at)) || (self.ends_word && joined_after(haystack, end));
            !glued
        })
    }
}

/// Whether `needle` occurs in `haystack` as whole tokens (see [`Token::is_in`]); both normalised.
pub fn contains_token(haystack: &str, needle: &str) -> bool {
    Token::new(needle).is_in(haystack)
}

/// Whether `text` has a letter or a digit (an answer without one, such as `.`, is not looked for).
pub fn has_word(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalising_folds_case_and_whitespace() {
        assert_eq!(normalize("  What IS\t\n 2 + 2?  "), "what is 2 + 2?");
        assert_eq!(normalize("ÉCOLE Straße"), "école straße");
        assert_eq!(normalize("MiXeD\u{00A0}spaces\u{3000}和 ЖУК\r\n\x0bEnd🙂"), "mixed spaces 和 жук end🙂");
        // The same as folding character by character.
        let text = "  Ça VA?\tÖl\n\nÜBER  ";
        let by_char: Vec<String> =
            text.split_whitespace().map(|w| w.chars().flat_map(char::to_lowercase).collect()).collect();
        assert_eq!(normalize(text), by_char.join(" "));
        assert_eq!(normalize(""), "");
        let mut out = "kept ".to_owned();
        normalize_into("  A  b ", &mut out);
        assert_eq!(out, "kept a b");
    }

    #[test]
    fn answers_are_found_as_whole_tokens() {
        assert!(contains_token("the answer is 4.", "4"));
        assert!(contains_token("4", "4"));
        assert!(contains_token("(4)", "4"));
        assert!(!contains_token("there are 40 apples", "4"));
        assert!(!contains_token("pi is 3.14", "14"));
        assert!(!contains_token("4.5 litres", "4"));
        assert!(!contains_token("1,000 rows", "000"));
        assert!(contains_token("answer yes, or no", "yes"));
        assert!(!contains_token("yesterday", "yes"));
        assert!(!contains_token("eyes", "yes"));
        assert!(!contains_token("snake_case", "case"));
        // An occurrence later in the text counts when the first is part of a word.
        assert!(contains_token("parisian cafés in paris", "paris"));
        assert!(contains_token("city: paris", "city: paris"));
        // Non-ASCII neighbours are letters too.
        assert!(!contains_token("éparis", "paris"));
        assert!(contains_token("«paris»", "paris"));
        assert!(!contains_token("", "paris"));
        assert!(!contains_token("paris", ""));
    }

    #[test]
    fn caseless_blocks_are_only_where_nothing_lower_cases() {
        // Every character the shortcut keeps as it is lower-cases to itself.
        for u in (0x2E80..0xA640).chain(0xAC00..0xD7A4).chain(0x1_F000..0x2_0000).chain(0xE_0000..0xE_0080) {
            if let Some(c) = char::from_u32(u) {
                assert!(caseless(c));
                assert_eq!(c.to_lowercase().collect::<String>(), c.to_string(), "U+{u:04X}");
            }
        }
        assert!(!caseless('É') && !caseless('Ж') && !caseless('Ⰰ'));
    }
}
