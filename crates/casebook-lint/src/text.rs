//! Text as hygiene checks compare it: letter case folded, runs of whitespace made one space, and
//! answers found only as whole tokens (`4` is not in `40` nor in `4.5`).

/// Appends `text` to `out` in lower case, each run of whitespace one space, without leading or
/// trailing whitespace.
pub fn normalize_into(text: &str, out: &mut String) {
    let mut space = false;
    let start = out.len();
    for c in text.chars() {
        if c.is_whitespace() {
            space = out.len() > start;
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
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

/// Whether `needle` occurs in `haystack` as whole tokens: not continuing a word or number on
/// either side (where `needle` itself starts or ends with a word character). Both are expected
/// normalised.
pub fn contains_token(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() || needle.len() > haystack.len() {
        return false;
    }
    let starts_word = needle.chars().next().is_some_and(word_char);
    let ends_word = needle.chars().next_back().is_some_and(word_char);
    memchr::memmem::find_iter(haystack.as_bytes(), needle.as_bytes()).any(|at| {
        let end = at + needle.len();
        // A match found by bytes always starts and ends on character boundaries, as both texts
        // are valid UTF-8 and the needle starts with a leading byte.
        let glued = (starts_word && joined_before(haystack, at)) || (ends_word && joined_after(haystack, end));
        !glued
    })
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
}
