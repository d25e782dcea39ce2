//! Multiple choice: the options a task offers, kept as one context item
//! `{type: custom, source: choices, content: ["Paris", "Berlin", …]}` (Inspect's `choices`), and
//! the letters that name them.
//!
//! Options are lettered as Inspect letters them (`answer_character`): `A` to `Z` for the first
//! 26, then `1`, `2`, … for the ones after. An agent is shown them as `A) Paris`, one a line.

use serde_json::Value;

use crate::{ContextItem, Task};

/// The `source` of the context item that holds a task's choices.
pub const CHOICES_SOURCE: &str = "choices";
/// The `type` of that item.
pub const CHOICES_KIND: &str = "custom";

/// Whether a context item is a task's choices (a list of strings).
pub fn is_choices(item: &ContextItem) -> bool {
    item.kind.as_deref() == Some(CHOICES_KIND)
        && item.source.as_deref() == Some(CHOICES_SOURCE)
        && item.content.as_array().is_some_and(|list| list.iter().all(Value::is_string))
}

/// The choices a task offers, in order, if it offers any (its first choices context item).
pub fn of(task: &Task) -> Option<Vec<&str>> {
    let item = task.context.as_ref()?.iter().find(|item| is_choices(item))?;
    item.content.as_array().map(|list| list.iter().filter_map(Value::as_str).collect())
}

/// The label of the option at `index` (0-based): `A`…`Z`, then `1`, `2`, ….
pub fn letter(index: usize) -> String {
    match u8::try_from(index) {
        Ok(i) if i < 26 => char::from(b'A' + i).to_string(),
        _ => (index - 25).to_string(),
    }
}

/// The index an option label names (`A` → 0, `1` → 26), if it is one.
pub fn index_of(label: &str) -> Option<usize> {
    let mut chars = label.chars();
    match (chars.next(), chars.next()) {
        (Some(c @ 'A'..='Z'), None) => Some(c as usize - 'A' as usize),
        _ if !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit()) && !label.starts_with('0') => {
            label.parse::<usize>().ok().and_then(|n| n.checked_add(25))
        }
        _ => None,
    }
}

/// One option as an agent is shown it: `A) Paris`.
pub fn lettered(index: usize, choice: &str) -> String {
    format!("{}) {choice}", letter(index))
}

/// The options as an agent is shown them: one `A) …` line each.
pub fn lettered_lines(choices: &[&str]) -> String {
    choices.iter().enumerate().map(|(i, c)| lettered(i, c)).collect::<Vec<_>>().join("\n")
}

/// The labels of `n` options, joined by commas: `A,B,C`.
pub fn letters(n: usize) -> String {
    (0..n).map(letter).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_lettered_as_inspect_letters_them() {
        assert_eq!(
            (letter(0), letter(2), letter(25), letter(26), letter(30)),
            ("A".into(), "C".into(), "Z".into(), "1".into(), "5".into())
        );
        for i in [0, 1, 25, 26, 27, 100] {
            assert_eq!(index_of(&letter(i)), Some(i));
        }
        assert_eq!(
            (index_of("a"), index_of("AB"), index_of(""), index_of("0"), index_of("01")),
            (None, None, None, None, None)
        );
        assert_eq!(lettered_lines(&["Paris", "Berlin"]), "A) Paris\nB) Berlin");
        assert_eq!(letters(3), "A,B,C");
    }
}
