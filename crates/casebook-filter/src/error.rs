//! The errors of this crate: [`FilterError`], a problem located in the text of an expression, with
//! its terminal rendering; and [`ShorthandError`], a bad value in a shorthand of another system.

use std::fmt;
use std::ops::Range;

/// Characters of a long line shown on each side of the marked text.
const WINDOW: usize = 60;

/// A problem with a filter expression, located in its text.
///
/// The message starts lowercase, has no trailing period and puts literals in backticks; the hint,
/// when there is one, says what to write instead. [`FilterError::render`] shows both under the
/// offending line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// 0-based byte range of the offending text in the expression (empty at the end of input).
    pub span: Range<usize>,
    /// 1-based line of `span.start` (expressions are usually one line).
    pub line: usize,
    /// 1-based column of `span.start`, counted in characters from the start of its line.
    pub column: usize,
    pub message: String,
    pub hint: Option<String>,
}

impl FilterError {
    pub(crate) fn new(src: &str, span: Range<usize>, message: impl Into<String>) -> Self {
        let before = &src[..span.start];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Self { span, line, column, message: message.into(), hint: None }
    }

    pub(crate) fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Renders the error for a terminal, the offending line quoted and marked:
    ///
    /// ```text
    /// error: expected `and`, `or` or the end of the filter, found `=` at column 21
    ///   labels contains "a" = 3
    ///                       ^
    ///   hint: did you mean `==`?
    /// ```
    ///
    /// `src` must be the expression the error came from. No colour, no trailing newline.
    pub fn render(&self, src: &str) -> String {
        let start = self.span.start.min(src.len());
        let mut line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
        let mut line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
        // A long line (a generated filter of thousands of tests) is cut to a window around the
        // mark, with `...` where it was cut.
        let (mut before, mut after) = ("", "");
        if src[line_start..start].chars().count() > WINDOW {
            line_start = src[..start].char_indices().rev().nth(WINDOW - 1).map_or(line_start, |(i, _)| i);
            before = "...";
        }
        let end = self.span.end.clamp(start, line_end);
        if src[end..line_end].chars().count() > WINDOW {
            line_end = src[end..].char_indices().nth(WINDOW).map_or(line_end, |(i, _)| end + i);
            after = "...";
        }
        let line = &src[line_start..line_end];
        // Tabs stay tabs in the padding so the caret lines up however the terminal shows them.
        let pad: String =
            before.chars().chain(src[line_start..start].chars()).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
        let width = src[start..end].chars().count().max(1);
        let mut out = format!("error: {self}\n  {before}{line}{after}\n  {pad}{}", "^".repeat(width));
        if let Some(hint) = &self.hint {
            out.push_str("\n  hint: ");
            out.push_str(hint);
        }
        out
    }
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 1 {
            write!(f, "{} at column {}", self.message, self.column)
        } else {
            write!(f, "{} at line {}, column {}", self.message, self.line, self.column)
        }
    }
}

impl std::error::Error for FilterError {}

/// A shorthand of another system (mas-lab's `dataset.filter`) that has no filter equivalent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ShorthandError {
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_not_bytes() {
        let src = "name == \"é\" = 1";
        let at = src.rfind('=').unwrap();
        let e = FilterError::new(src, at..at + 1, "x");
        assert_eq!((e.line, e.column), (1, 13));
    }

    #[test]
    fn render_marks_the_span_and_shows_the_hint() {
        let src = "labels contains \"a\" = 3";
        let e = FilterError::new(src, 20..21, "unexpected `=`").with_hint("did you mean `==`?");
        assert_eq!(
            e.render(src),
            "error: unexpected `=` at column 21\n  labels contains \"a\" = 3\n                      ^\n  hint: did you mean `==`?"
        );
    }

    #[test]
    fn render_of_a_later_line_shows_that_line() {
        let src = "id == \"a\"\n  and nme == \"b\"";
        let at = src.find("nme").unwrap();
        let e = FilterError::new(src, at..at + 3, "unknown field `nme`");
        assert_eq!(e.to_string(), "unknown field `nme` at line 2, column 7");
        assert_eq!(e.render(src), "error: unknown field `nme` at line 2, column 7\n    and nme == \"b\"\n        ^^^");
    }

    #[test]
    fn a_long_line_is_cut_around_the_mark() {
        let src = format!("{}id == 1 {}", "x ".repeat(100), "y ".repeat(100));
        let at = src.find("id").unwrap();
        let e = FilterError::new(&src, at..at + 2, "x");
        let rendered = e.render(&src);
        let lines: Vec<&str> = rendered.lines().collect();
        // 60 characters on each side of `id`.
        assert_eq!(lines[1], format!("  ...{}id == 1 {}...", "x ".repeat(30), &"y ".repeat(27)));
        assert_eq!(lines[2], format!("  {}^^", " ".repeat(63)));
    }

    #[test]
    fn render_at_the_end_of_input_points_past_the_last_character() {
        let src = "(id == \"a\"";
        let e = FilterError::new(src, src.len()..src.len(), "x");
        assert!(e.render(src).ends_with("\n  (id == \"a\"\n            ^"));
    }
}
