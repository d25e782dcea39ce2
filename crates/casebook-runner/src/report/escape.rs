//! Escaping text for XML 1.0 and HTML, for element content and attribute values alike.
//!
//! `& < > " '` become references. Characters XML 1.0 does not allow (C0 controls other than tab,
//! line feed and carriage return) and those HTML calls parse errors (DEL, C1 controls,
//! noncharacters) cannot be escaped as references, so they are written visibly as `\u{1b}`:
//! a report shows that an agent answered with control characters instead of breaking.

/// `text` for element content: line feeds and tabs stay, a carriage return becomes `&#13;` (an
/// XML parser would otherwise turn it into a line feed).
pub(super) fn text(text: &str) -> String {
    escape(text, false)
}

/// `text` for a quoted attribute value: tabs and line breaks become references too, which
/// attribute normalisation would otherwise turn into spaces.
pub(super) fn attribute(text: &str) -> String {
    escape(text, true)
}

fn escape(text: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\r' => out.push_str("&#13;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' | '\t' => out.push(c),
            c if not_allowed(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

fn not_allowed(c: char) -> bool {
    let code = u32::from(c);
    c.is_control() || (0xFDD0..=0xFDEF).contains(&code) || code & 0xFFFE == 0xFFFE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_characters_become_references() {
        assert_eq!(text(r#"a < b && c > "d" 'e'"#), "a &lt; b &amp;&amp; c &gt; &quot;d&quot; &#39;e&#39;");
    }

    #[test]
    fn line_breaks_survive_in_text_and_attributes() {
        assert_eq!(text("a\nb\tc\r\n"), "a\nb\tc&#13;\n");
        assert_eq!(attribute("a\nb\tc\r"), "a&#10;b&#9;c&#13;");
    }

    #[test]
    fn characters_illegal_in_xml_are_shown_not_written() {
        assert_eq!(text("bell\u{7}esc\u{1b}nul\u{0}"), "bell\\u{7}esc\\u{1b}nul\\u{0}");
        assert_eq!(text("del\u{7f}c1\u{85}"), "del\\u{7f}c1\\u{85}");
        assert_eq!(text("\u{fffe}\u{ffff}\u{1fffe}"), "\\u{fffe}\\u{ffff}\\u{1fffe}");
        assert_eq!(text("émoji 🦀 ok"), "émoji 🦀 ok");
    }
}
