//! Splits an expression into tokens, one at a time as the parser asks, so that the first error
//! reported is the leftmost one. Operators of other languages (`=`, `&&`, `||`, `!`, `<>`) are
//! tokens of their own that carry the hint the parser shows when it meets them.

use std::ops::Range;

use crate::ast::Num;
use crate::error::FilterError;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// An identifier or keyword; its text is the token's span.
    Ident,
    Str(String),
    Num(Num),
    Dot,
    Comma,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Op(crate::ast::CmpOp),
    /// An operator of another language, with the hint that names ours.
    Foreign(&'static str),
    Eof,
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Range<usize>,
}

pub(crate) struct Lexer<'s> {
    src: &'s str,
    pos: usize,
}

impl<'s> Lexer<'s> {
    pub fn new(src: &'s str) -> Self {
        Self { src, pos: 0 }
    }

    fn peek_byte(&self, ahead: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + ahead).copied()
    }

    fn error(&self, span: Range<usize>, message: impl Into<String>) -> FilterError {
        FilterError::new(self.src, span, message)
    }

    pub fn next_token(&mut self) -> Result<Token, FilterError> {
        while self.peek_byte(0).is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
        let start = self.pos;
        let Some(b) = self.peek_byte(0) else {
            return Ok(Token { tok: Tok::Eof, span: start..start });
        };
        let two = |lexer: &Self, second: u8| lexer.peek_byte(1) == Some(second);
        use crate::ast::CmpOp;
        let (tok, len) = match b {
            b'.' => (Tok::Dot, 1),
            b',' => (Tok::Comma, 1),
            b'(' => (Tok::LParen, 1),
            b')' => (Tok::RParen, 1),
            b'[' => (Tok::LBracket, 1),
            b']' => (Tok::RBracket, 1),
            b'=' if two(self, b'=') && self.peek_byte(2) == Some(b'=') => (Tok::Foreign("did you mean `==`?"), 3),
            b'=' if two(self, b'=') => (Tok::Op(CmpOp::Eq), 2),
            b'=' => (Tok::Foreign("did you mean `==`?"), 1),
            b'!' if two(self, b'=') => (Tok::Op(CmpOp::Ne), 2),
            b'!' => (Tok::Foreign("use `not`, e.g. `not exists(metadata.flaky)`"), 1),
            b'<' if two(self, b'=') => (Tok::Op(CmpOp::Le), 2),
            b'<' if two(self, b'>') => (Tok::Foreign("did you mean `!=`?"), 2),
            b'<' => (Tok::Op(CmpOp::Lt), 1),
            b'>' if two(self, b'=') => (Tok::Op(CmpOp::Ge), 2),
            b'>' => (Tok::Op(CmpOp::Gt), 1),
            b'&' => (Tok::Foreign("use `and`"), if two(self, b'&') { 2 } else { 1 }),
            b'|' => (Tok::Foreign("use `or`"), if two(self, b'|') { 2 } else { 1 }),
            b'"' | b'\'' => return self.string(b),
            b'-' | b'0'..=b'9' => return self.number(),
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let len = self.src[start..].bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count();
                (Tok::Ident, len)
            }
            _ => {
                let c = self.src[start..].chars().next().unwrap_or('\u{fffd}');
                return Err(self.error(start..start + c.len_utf8(), format!("unexpected character `{c}`")));
            }
        };
        self.pos += len;
        Ok(Token { tok, span: start..self.pos })
    }

    /// A JSON number; integers that fit become `Int`, everything else a double.
    fn number(&mut self) -> Result<Token, FilterError> {
        let start = self.pos;
        let bytes = self.src.as_bytes();
        let digits = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
        let mut end = start;
        if bytes[end] == b'-' {
            end += 1;
        }
        let int_digits = digits(end);
        if int_digits == 0 {
            return Err(self.error(start..end, "expected a number after `-`"));
        }
        if bytes[end] == b'0' && int_digits > 1 {
            return Err(self
                .error(start..end + int_digits, "a number cannot start with `0`")
                .with_hint("write it without leading zeros, or in quotes if it is text"));
        }
        end += int_digits;
        let mut integer = true;
        if bytes.get(end) == Some(&b'.') {
            let frac = digits(end + 1);
            if frac == 0 {
                return Err(self.error(start..end + 1, "expected digits after the decimal point"));
            }
            end += 1 + frac;
            integer = false;
        }
        if matches!(bytes.get(end), Some(b'e' | b'E')) {
            let mut exp = end + 1;
            if matches!(bytes.get(exp), Some(b'+' | b'-')) {
                exp += 1;
            }
            let exp_digits = digits(exp);
            if exp_digits == 0 {
                return Err(self.error(start..exp, "expected digits in the exponent"));
            }
            end = exp + exp_digits;
            integer = false;
        }
        let text = &self.src[start..end];
        self.pos = end;
        let span = start..end;
        if integer {
            if let Ok(i) = text.parse::<i64>() {
                return Ok(Token { tok: Tok::Num(Num::Int(i)), span });
            }
        }
        match text.parse::<f64>() {
            Ok(r) if r.is_finite() => Ok(Token { tok: Tok::Num(Num::Real(r)), span }),
            // Beyond ±1.7976931348623157e308 (a dataset cannot hold such a number either); a
            // number too small for a double has been rounded to the nearest one (0) above.
            _ => Err(self
                .error(span, format!("number `{text}` is beyond the largest number, 1.7976931348623157e308"))
                .with_hint("datasets cannot hold larger numbers, so no case has one")),
        }
    }

    /// A string in double or single quotes with JSON escapes (`\'` too).
    fn string(&mut self, quote: u8) -> Result<Token, FilterError> {
        let start = self.pos;
        let mut out = String::new();
        let mut i = start + 1;
        let unclosed = || {
            let q = char::from(quote);
            self.error(start..start + 1, "unclosed string").with_hint(format!("add a closing `{q}` after the text"))
        };
        loop {
            let Some(c) = self.src[i..].chars().next() else {
                return Err(unclosed());
            };
            if c == char::from(quote) {
                i += 1;
                break;
            }
            if c != '\\' {
                out.push(c);
                i += c.len_utf8();
                continue;
            }
            let esc = self.src[i + 1..].chars().next();
            let decoded = match esc {
                Some('"') => '"',
                Some('\'') => '\'',
                Some('\\') => '\\',
                Some('/') => '/',
                Some('b') => '\u{8}',
                Some('f') => '\u{c}',
                Some('n') => '\n',
                Some('r') => '\r',
                Some('t') => '\t',
                Some('u') => {
                    let (c, len) = self.unicode_escape(i)?;
                    out.push(c);
                    i += len;
                    continue;
                }
                Some(other) => {
                    return Err(self
                        .error(i..i + 1 + other.len_utf8(), format!("unknown escape `\\{other}` in a string"))
                        .with_hint(r#"write a backslash as `\\`, e.g. `input matches "\\d+"`"#));
                }
                None => return Err(unclosed()),
            };
            out.push(decoded);
            i += 2;
        }
        self.pos = i;
        Ok(Token { tok: Tok::Str(out), span: start..i })
    }

    /// `\uXXXX`, or a surrogate pair `\uD83D\uDE00`, starting at the backslash at `at`.
    fn unicode_escape(&self, at: usize) -> Result<(char, usize), FilterError> {
        let hex = |from: usize| {
            self.src
                .get(from..from + 4)
                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
        };
        let bad = |len: usize| {
            self.error(at..(at + len).min(self.src.len()), "invalid `\\u` escape")
                .with_hint("write four hex digits, e.g. `\\u00e9`")
        };
        let high = hex(at + 2).ok_or_else(|| bad(2))?;
        if (0xD800..0xDC00).contains(&high) {
            let low = (self.src.get(at + 6..at + 8) == Some("\\u")).then(|| hex(at + 8)).flatten();
            match low {
                Some(low) if (0xDC00..0xE000).contains(&low) => {
                    let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    char::from_u32(c).map(|c| (c, 12)).ok_or_else(|| bad(12))
                }
                _ => Err(bad(6)),
            }
        } else {
            char::from_u32(high).map(|c| (c, 6)).ok_or_else(|| bad(6))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::CmpOp;

    fn tokens(src: &str) -> Result<Vec<Tok>, FilterError> {
        let mut lexer = Lexer::new(src);
        let mut out = Vec::new();
        loop {
            let t = lexer.next_token()?;
            if t.tok == Tok::Eof {
                return Ok(out);
            }
            out.push(t.tok);
        }
    }

    #[test]
    fn numbers_follow_json() {
        assert_eq!(
            tokens("0 -3 2.5 1e3 -1.5E-2").unwrap(),
            [
                Tok::Num(Num::Int(0)),
                Tok::Num(Num::Int(-3)),
                Tok::Num(Num::Real(2.5)),
                Tok::Num(Num::Real(1000.0)),
                Tok::Num(Num::Real(-0.015)),
            ]
        );
        assert_eq!(tokens("99999999999999999999").unwrap(), [Tok::Num(Num::Real(1e20))]);
        assert_eq!(tokens("01").unwrap_err().message, "a number cannot start with `0`");
        assert_eq!(tokens("1.").unwrap_err().message, "expected digits after the decimal point");
        assert_eq!(tokens("- 1").unwrap_err().message, "expected a number after `-`");
        assert_eq!(
            tokens("-1e400").unwrap_err().message,
            "number `-1e400` is beyond the largest number, 1.7976931348623157e308"
        );
        // Too small for a double: the nearest one, as a dataset reads it.
        assert_eq!(tokens("1e-400 -2.5e-324").unwrap(), [Tok::Num(Num::Real(0.0)), Tok::Num(Num::Real(-5e-324))]);
    }

    #[test]
    fn strings_take_either_quote_and_json_escapes() {
        assert_eq!(
            tokens(r#""a\"b" 'c\'d' "\u00e9\n\ud83d\ude00" 'say "hi"'"#).unwrap(),
            [Tok::Str("a\"b".into()), Tok::Str("c'd".into()), Tok::Str("é\n😀".into()), Tok::Str("say \"hi\"".into()),]
        );
    }

    #[test]
    fn string_errors_point_at_the_problem() {
        let e = tokens(r#"input matches "\d+""#).unwrap_err();
        assert_eq!((e.column, e.message.as_str()), (16, "unknown escape `\\d` in a string"));
        let e = tokens(r#"name == "abc"#).unwrap_err();
        assert_eq!(
            (e.column, e.message.as_str(), e.hint.as_deref()),
            (9, "unclosed string", Some("add a closing `\"` after the text"))
        );
        assert_eq!(tokens(r#""\ud83d""#).unwrap_err().message, "invalid `\\u` escape");
        assert_eq!(tokens(r#""\u12""#).unwrap_err().message, "invalid `\\u` escape");
    }

    #[test]
    fn operators_and_foreign_operators() {
        assert_eq!(
            tokens("== != < <= > >=").unwrap(),
            [
                Tok::Op(CmpOp::Eq),
                Tok::Op(CmpOp::Ne),
                Tok::Op(CmpOp::Lt),
                Tok::Op(CmpOp::Le),
                Tok::Op(CmpOp::Gt),
                Tok::Op(CmpOp::Ge),
            ]
        );
        assert_eq!(
            tokens("= && || ! <>").unwrap(),
            [
                Tok::Foreign("did you mean `==`?"),
                Tok::Foreign("use `and`"),
                Tok::Foreign("use `or`"),
                Tok::Foreign("use `not`, e.g. `not exists(metadata.flaky)`"),
                Tok::Foreign("did you mean `!=`?"),
            ]
        );
        let e = tokens("a # b").unwrap_err();
        assert_eq!((e.column, e.message.as_str()), (3, "unexpected character `#`"));
    }
}
