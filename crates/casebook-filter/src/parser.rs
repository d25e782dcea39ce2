//! Recursive-descent parser from text to [`Expr`] (the grammar is in the crate documentation),
//! type-checking each test against the shape of its field as it goes (see `schema.rs`). Every
//! error carries the span to point at and, for the mistakes people make coming from other
//! languages, a hint.

use std::ops::Range;

use regex::RegexBuilder;

use crate::ast::{Atom, Expr, Lit, Path, Pattern, Root, Seg, Subject, Test};
use crate::error::FilterError;
use crate::lexer::{Lexer, Tok, Token};
use crate::schema::{Problem, Shape, Where, did_you_mean, root_shape};

/// Deepest nesting of parentheses and `not`; keeps recursion (here, in evaluation and in SQL)
/// far from any stack or SQLite expression-depth limit.
const MAX_DEPTH: usize = 64;
/// Most tests and list values in one filter. In SQL a test binds up to 16 values, and SQLite
/// takes at most 32,766 in a statement (the store binds a few of its own). Checked here so that
/// a filter too large for a store is refused for a file too, with its place.
pub(crate) const MAX_TERMS: usize = 2000;
/// Compiled-size limit of a `matches` regex (the regex crate's default is 10 MiB).
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Nesting limit of a `matches` regex; below the regex crate's default (250) that SQLite's
/// `regexp` function compiles with, so whatever parses here also compiles there.
const REGEX_NEST_LIMIT: u32 = 100;
/// Largest array index; SQLite reads indexes as 32-bit numbers.
const MAX_INDEX: i64 = i32::MAX as i64;
/// Longest filter, in bytes: 2,000 tests of 60 bytes each fit. A server parses what a client
/// sends, so the work a filter costs is bounded before it starts.
pub(crate) const MAX_LENGTH: usize = 128 << 10;
/// Most steps (`.key`, `[i]`) in one path. Case files are read at most 128 levels deep
/// (`casebook_formats::json::MAX_DEPTH`), so a longer path can never reach a value.
pub(crate) const MAX_STEPS: usize = 128;

const KEYWORDS: &[&str] = &["and", "or", "not", "in", "contains", "matches", "exists", "len", "true", "false", "null"];

pub(crate) fn parse(src: &str) -> Result<Expr, FilterError> {
    check_length(src, "filter")?;
    if src.trim().is_empty() {
        return Err(FilterError::new(src, 0..src.len(), "the filter is empty")
            .with_hint("write a condition, e.g. `labels contains \"math\"`"));
    }
    let mut parser = Parser { src, lexer: Lexer::new(src), peeked: None, depth: 0, terms: 0 };
    let expr = parser.or()?;
    let tok = parser.next()?;
    match tok.tok {
        Tok::Eof => Ok(expr),
        Tok::RParen => Err(parser.error(tok.span, "unmatched `)`").with_hint("remove it, or add a `(` before it")),
        _ => Err(parser.unexpected(&tok, "`and`, `or` or the end of the filter")),
    }
}

/// A path alone (`casebook cases --group-by PATH`).
pub(crate) fn parse_path(src: &str) -> Result<Path, FilterError> {
    check_length(src, "path")?;
    if src.trim().is_empty() {
        return Err(FilterError::new(src, 0..src.len(), "the path is empty")
            .with_hint("name a field, e.g. `metadata.difficulty` or `label.category`"));
    }
    let mut parser = Parser { src, lexer: Lexer::new(src), peeked: None, depth: 0, terms: 0 };
    let (path, _, _) = parser.path()?;
    let tok = parser.next()?;
    match tok.tok {
        Tok::Eof => Ok(path),
        _ => Err(parser.unexpected(&tok, "the end of the path")),
    }
}

/// Refuses a text longer than [`MAX_LENGTH`] before reading any of it, pointing at the first
/// character past the limit.
fn check_length(src: &str, what: &str) -> Result<(), FilterError> {
    if src.len() <= MAX_LENGTH {
        return Ok(());
    }
    let mut at = MAX_LENGTH;
    while !src.is_char_boundary(at) {
        at -= 1;
    }
    let next = src[at..].chars().next().map_or(0, char::len_utf8);
    Err(FilterError::new(
        src,
        at..at + next,
        format!("the {what} is too long: {} bytes, at most {MAX_LENGTH} ({} KiB)", src.len(), MAX_LENGTH >> 10),
    )
    .with_hint("split it into several filters, or select the cases by a label or a `metadata` key"))
}

struct Parser<'s> {
    src: &'s str,
    lexer: Lexer<'s>,
    peeked: Option<Token>,
    depth: usize,
    /// Tests and list values read so far (see [`MAX_TERMS`]).
    terms: usize,
}

impl<'s> Parser<'s> {
    fn peek(&mut self) -> Result<&Token, FilterError> {
        let tok = match self.peeked.take() {
            Some(tok) => tok,
            None => self.lexer.next_token()?,
        };
        Ok(self.peeked.insert(tok))
    }

    fn next(&mut self) -> Result<Token, FilterError> {
        match self.peeked.take() {
            Some(tok) => Ok(tok),
            None => self.lexer.next_token(),
        }
    }

    fn text(&self, tok: &Token) -> &'s str {
        &self.src[tok.span.clone()]
    }

    fn peek_is_keyword(&mut self, keyword: &str) -> Result<bool, FilterError> {
        let src = self.src;
        let tok = self.peek()?;
        Ok(tok.tok == Tok::Ident && &src[tok.span.clone()] == keyword)
    }

    fn error(&self, span: Range<usize>, message: impl Into<String>) -> FilterError {
        FilterError::new(self.src, span, message)
    }

    /// "expected X, found Y", with the hint a foreign operator or an upper-case keyword calls for.
    fn unexpected(&self, tok: &Token, expected: &str) -> FilterError {
        let e = self.error(tok.span.clone(), format!("expected {expected}, found {}", self.describe(tok)));
        match &tok.tok {
            Tok::Foreign(hint) => e.with_hint(*hint),
            Tok::Ident => match lowercase_keyword(self.text(tok)) {
                Some(kw) => e.with_hint(format!("keywords are lower-case: `{kw}`")),
                None => e,
            },
            _ => e,
        }
    }

    fn describe(&self, tok: &Token) -> String {
        if tok.tok == Tok::Eof {
            return "the end of the filter".into();
        }
        let text = self.text(tok);
        if text.chars().count() > 24 {
            let short: String = text.chars().take(20).collect();
            format!("`{short}...`")
        } else {
            format!("`{text}`")
        }
    }

    fn deeper(&mut self, at: Range<usize>) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(at, format!("the filter is nested too deeply (more than {MAX_DEPTH} levels)")));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let first = self.and()?;
        if !self.peek_is_keyword("or")? {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.peek_is_keyword("or")? {
            self.next()?;
            items.push(self.and()?);
        }
        Ok(Expr::Or(items))
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let first = self.unary()?;
        if !self.peek_is_keyword("and")? {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.peek_is_keyword("and")? {
            self.next()?;
            items.push(self.unary()?);
        }
        Ok(Expr::And(items))
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        if self.peek_is_keyword("not")? {
            let tok = self.next()?;
            self.deeper(tok.span)?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, FilterError> {
        let tok = self.next()?;
        match &tok.tok {
            Tok::LParen => {
                self.deeper(tok.span.clone())?;
                let inner = self.or()?;
                self.depth -= 1;
                let close = self.next()?;
                match close.tok {
                    Tok::RParen => Ok(inner),
                    Tok::Eof => Err(self.error(tok.span, "unclosed `(`").with_hint("add a `)` where the group ends")),
                    _ => Err(self.unexpected(&close, "`and`, `or` or `)`")),
                }
            }
            Tok::Str(_) | Tok::Num(_) => self.literal_first(tok),
            Tok::Ident => match self.text(&tok) {
                "exists" if self.peek()?.tok == Tok::LParen => {
                    let open = self.next()?;
                    let (path, _, span) = self.path()?;
                    self.close_call("exists", tok.span.start..open.span.end)?;
                    self.count(&Test::Exists, &(tok.span.start..span.end), &[])?;
                    Ok(Expr::Atom(Atom { subject: Subject::Path(path), test: Test::Exists }))
                }
                "len" if self.peek()?.tok == Tok::LParen => {
                    let open = self.next()?;
                    let (path, shape, span) = self.path()?;
                    self.close_call("len", tok.span.start..open.span.end)?;
                    let span = tok.span.start..span.end + 1;
                    self.test(Subject::Len(path), shape, span)
                }
                "true" | "false" | "null" if matches!(self.peek()?.tok, Tok::Op(_)) => self.literal_first(tok),
                "true" => Ok(Expr::Const(true)),
                "false" => Ok(Expr::Const(false)),
                "null" => Err(self
                    .error(tok.span, "`null` is not a condition")
                    .with_hint("compare a field with it, e.g. `metadata.note == null`")),
                "and" | "or" | "in" | "contains" | "matches" => Err(self.unexpected(&tok, "a condition")),
                _ => {
                    let (path, shape, span) = self.path_from(tok)?;
                    self.test(Subject::Path(path), shape, span)
                }
            },
            _ => Err(self.unexpected(&tok, "a condition")),
        }
    }

    /// The `)` of `exists(...)` or `len(...)`; `call` is the span of `name(`.
    fn close_call(&mut self, name: &str, call: Range<usize>) -> Result<(), FilterError> {
        let tok = self.next()?;
        match tok.tok {
            Tok::RParen => Ok(()),
            Tok::Eof => Err(self.error(call, format!("unclosed `{name}(`")).with_hint("add a `)` after the path")),
            _ => Err(self.unexpected(&tok, "`)`")),
        }
    }

    /// `0.8 <= confidence`: a literal, an operator, then the subject; stored the other way round.
    fn literal_first(&mut self, tok: Token) -> Result<Expr, FilterError> {
        let lit_span = tok.span.clone();
        let lit = self.literal_of(tok)?;
        let op_tok = self.next()?;
        let op = match op_tok.tok {
            Tok::Op(op) => op,
            Tok::Ident if matches!(self.text(&op_tok), "in" | "contains" | "matches") => {
                let word = self.text(&op_tok);
                return Err(self.error(op_tok.span, format!("a value cannot come before `{word}`")).with_hint(
                    if word == "in" {
                        format!("to look for a value in a list field, write `FIELD contains {lit}`")
                    } else {
                        format!("write the field first: `FIELD {word} ...`")
                    },
                ));
            }
            _ => return Err(self.unexpected(&op_tok, "a comparison operator after the value")),
        };
        let first = self.next()?;
        let is_len = first.tok == Tok::Ident && self.text(&first) == "len" && self.peek()?.tok == Tok::LParen;
        let (subject, shape, span) = if is_len {
            let open = self.next()?;
            let (path, shape, span) = self.path()?;
            self.close_call("len", first.span.start..open.span.end)?;
            (Subject::Len(path), shape, first.span.start..span.end + 1)
        } else if first.tok == Tok::Ident {
            let (path, shape, span) = self.path_from(first)?;
            (Subject::Path(path), shape, span)
        } else {
            return Err(self.unexpected(&first, "a field after the comparison"));
        };
        let test = Test::Cmp(op.flipped(), lit);
        self.checked(subject, test, shape, span, op_tok.span, vec![lit_span])
    }

    /// Reads a path starting at the next token.
    fn path(&mut self) -> Result<(Path, Shape, Range<usize>), FilterError> {
        let first = self.next()?;
        self.path_from(first)
    }

    /// Reads a path whose first token has been read; returns it with its shape and span.
    fn path_from(&mut self, first: Token) -> Result<(Path, Shape, Range<usize>), FilterError> {
        if first.tok != Tok::Ident {
            return Err(self.unexpected(&first, "a field name"));
        }
        let name = self.text(&first);
        let root = match name {
            "label" => {
                let dot = self.next()?;
                let key_tok = self.next()?;
                let key = match (&dot.tok, &key_tok.tok) {
                    (Tok::Dot, Tok::Ident) => self.text(&key_tok).to_owned(),
                    (Tok::Dot, Tok::Str(s)) => s.clone(),
                    _ => {
                        return Err(self.error(first.span, "`label` needs a key").with_hint(
                            "write `label.KEY` for the values of `KEY:value` labels, e.g. `label.category`",
                        ));
                    }
                };
                if key.contains(':') {
                    return Err(self
                        .error(key_tok.span, "a label key cannot contain `:`")
                        .with_hint("`label.KEY` looks at labels `KEY:value`, split at the first `:`"));
                }
                self.check_key(&key, key_tok.span.clone())?;
                Root::Label(key)
            }
            _ => match Root::FIELDS.iter().find(|root| root.json_key() == name) {
                Some(root) => root.clone(),
                None => return Err(self.unknown_field(name, first.span)),
            },
        };
        let mut shape = root_shape(&root);
        let mut path = Path { root, segs: Vec::new() };
        let mut end = first.span.end;
        loop {
            let step = self.peek()?;
            if matches!(step.tok, Tok::Dot | Tok::LBracket) && path.segs.len() == MAX_STEPS {
                let at = step.span.clone();
                return Err(self
                    .error(at, format!("the path is too long: more than {MAX_STEPS} steps"))
                    .with_hint(format!("no case holds a value deeper than {MAX_STEPS} levels: shorten the path")));
            }
            match self.peek()?.tok {
                Tok::Dot => {
                    self.next()?;
                    let tok = self.next()?;
                    let key = match &tok.tok {
                        Tok::Ident => self.text(&tok).to_owned(),
                        Tok::Str(s) => s.clone(),
                        _ => {
                            return Err(self
                                .unexpected(&tok, "a field name after `.`")
                                .with_hint("quote unusual keys, e.g. `metadata.\"my key\"`"));
                        }
                    };
                    self.check_key(&key, tok.span.clone())?;
                    shape = shape.step_key(&key, &path).map_err(|p| self.problem(p, tok.span.clone(), 0..0, &[]))?;
                    path.segs.push(Seg::Key(key));
                    end = tok.span.end;
                }
                Tok::LBracket => {
                    let open = self.next()?;
                    let tok = self.next()?;
                    let index = match tok.tok {
                        Tok::Num(crate::ast::Num::Int(i)) if (0..=MAX_INDEX).contains(&i) => {
                            usize::try_from(i).unwrap_or(0)
                        }
                        Tok::Num(crate::ast::Num::Int(i)) if i < 0 => {
                            return Err(self
                                .error(tok.span, "array indexes start at 0")
                                .with_hint("counting from the end is not supported"));
                        }
                        Tok::Num(crate::ast::Num::Int(_)) => {
                            return Err(self.error(tok.span, format!("array index is larger than {MAX_INDEX}")));
                        }
                        _ => return Err(self.unexpected(&tok, "an array index (0, 1, ...)")),
                    };
                    let close = self.next()?;
                    if close.tok != Tok::RBracket {
                        return Err(self.unexpected(&close, "`]`"));
                    }
                    shape = shape
                        .step_index(&path)
                        .map_err(|p| self.problem(p, open.span.start..close.span.end, 0..0, &[]))?;
                    path.segs.push(Seg::Index(index));
                    end = close.span.end;
                }
                _ => break,
            }
        }
        Ok((path, shape, first.span.start..end))
    }

    /// SQLite's JSON paths cannot name a key with U+0000 in it reliably.
    fn check_key(&self, key: &str, span: Range<usize>) -> Result<(), FilterError> {
        if key.contains('\0') {
            return Err(self.error(span, "keys containing U+0000 are not supported"));
        }
        Ok(())
    }

    fn unknown_field(&self, name: &str, span: Range<usize>) -> FilterError {
        let mut names: Vec<&str> = Root::FIELDS.iter().map(Root::json_key).collect();
        names.push("label");
        let e = self.error(span, format!("unknown field `{name}`"));
        if let Some(kw) = lowercase_keyword(name) {
            return e.with_hint(format!("keywords are lower-case: `{kw}`"));
        }
        if let Some(near) = did_you_mean(name, &names) {
            return e.with_hint(format!("did you mean `{near}`?"));
        }
        match name {
            "tags" | "tag" => e.with_hint("tags are `labels`, e.g. `labels contains \"math\"`"),
            "expected_output" | "output" | "ground_truth" => e.with_hint("did you mean `expected.output`?"),
            _ => e.with_hint(format!(
                "use `metadata.{name}` for a metadata key, or `label.{name}` for `{name}:value` labels"
            )),
        }
    }

    /// Reads the test after a subject.
    fn test(&mut self, subject: Subject, shape: Shape, span: Range<usize>) -> Result<Expr, FilterError> {
        let tok = self.next()?;
        let is_len = matches!(subject, Subject::Len(_));
        let written = match &subject {
            Subject::Path(p) => p.to_string(),
            Subject::Len(p) => format!("len({p})"),
        };
        let mut negate = false;
        let (test, lit_spans) = match &tok.tok {
            Tok::Op(op) => {
                let lit_tok = self.next()?;
                let lit_span = lit_tok.span.clone();
                (Test::Cmp(*op, self.literal_of(lit_tok)?), vec![lit_span])
            }
            Tok::Ident => match self.text(&tok) {
                "in" => {
                    let (list, spans) = self.list()?;
                    (Test::In(list), spans)
                }
                "not" => {
                    if !self.peek_is_keyword("in")? {
                        let next = self.next()?;
                        return Err(self
                            .unexpected(&next, "`in` after `not`")
                            .with_hint(format!("to negate a test, write `not ({written} ...)`")));
                    }
                    self.next()?;
                    negate = true;
                    let (list, spans) = self.list()?;
                    (Test::In(list), spans)
                }
                word @ ("contains" | "matches") if is_len => {
                    return Err(self
                        .error(tok.span.clone(), format!("`{written}` is a number, `{word}` does not apply"))
                        .with_hint("compare it with `==`, `!=`, `<`, `<=`, `>` or `>=`"));
                }
                "contains" => {
                    let lit_tok = self.next()?;
                    let lit_span = lit_tok.span.clone();
                    (Test::Contains(self.literal_of(lit_tok)?), vec![lit_span])
                }
                "matches" => {
                    let lit_tok = self.next()?;
                    let Tok::Str(source) = &lit_tok.tok else {
                        return Err(self.unexpected(&lit_tok, "a regex in quotes after `matches`"));
                    };
                    let regex = compile_regex(source).map_err(|(message, hint)| {
                        let e = self.error(lit_tok.span.clone(), message);
                        match hint {
                            Some(h) => e.with_hint(h),
                            None => e,
                        }
                    })?;
                    (Test::Matches(Pattern { source: source.clone(), regex }), vec![lit_tok.span.clone()])
                }
                "and" | "or" => return Err(self.not_a_condition(&written, is_len, span)),
                other => {
                    let e = self
                        .error(tok.span.clone(), format!("expected a comparison after `{written}`, found `{other}`"));
                    return Err(match other {
                        "is" => e.with_hint("use `==`, e.g. `metadata.note == null`"),
                        "like" | "LIKE" => e.with_hint("use `matches` with a regex, e.g. `name matches \"^abc\"`"),
                        "eq" | "equals" => e.with_hint("use `==`"),
                        other => match lowercase_keyword(other) {
                            Some(kw) => e.with_hint(format!("keywords are lower-case: `{kw}`")),
                            None => e,
                        },
                    });
                }
            },
            Tok::Eof | Tok::RParen => return Err(self.not_a_condition(&written, is_len, span)),
            _ => return Err(self.unexpected(&tok, &format!("a comparison operator after `{written}`"))),
        };
        let expr = self.checked(subject, test, shape, span, tok.span, lit_spans)?;
        Ok(if negate { Expr::Not(Box::new(expr)) } else { expr })
    }

    fn not_a_condition(&self, written: &str, is_len: bool, span: Range<usize>) -> FilterError {
        let e = self.error(span, format!("`{written}` is not a condition"));
        if is_len {
            e.with_hint(format!("compare it, e.g. `{written} > 0`"))
        } else {
            e.with_hint(format!("compare it, e.g. `{written} == true`, or use `exists({written})`"))
        }
    }

    /// Counts a test towards [`MAX_TERMS`]: once, or once per value of its list. The error points
    /// at the first test or value past the limit.
    fn count(&mut self, test: &Test, path_span: &Range<usize>, lit_spans: &[Range<usize>]) -> Result<(), FilterError> {
        let (count, over) = match test {
            Test::In(list) if !list.is_empty() => {
                let room = MAX_TERMS.saturating_sub(self.terms);
                (list.len(), lit_spans.get(room).cloned())
            }
            _ => (1, (self.terms >= MAX_TERMS).then(|| path_span.clone())),
        };
        if let Some(span) = over {
            return Err(self
                .error(span, format!("the filter is too long: more than {MAX_TERMS} tests and list values"))
                .with_hint("split it into several filters, or select the cases by a label or a `metadata` key"));
        }
        self.terms += count;
        Ok(())
    }

    /// Type-checks a finished atom.
    fn checked(
        &mut self,
        subject: Subject,
        test: Test,
        shape: Shape,
        path_span: Range<usize>,
        op_span: Range<usize>,
        lit_spans: Vec<Range<usize>>,
    ) -> Result<Expr, FilterError> {
        self.count(&test, &path_span, &lit_spans)?;
        let written = subject.path().to_string();
        shape.check(&subject, &test, &written).map_err(|p| self.problem(p, path_span, op_span, &lit_spans))?;
        Ok(Expr::Atom(Atom { subject, test }))
    }

    fn problem(&self, problem: Problem, path: Range<usize>, op: Range<usize>, lits: &[Range<usize>]) -> FilterError {
        let span = match problem.at {
            Where::Path => path,
            Where::Operator => op,
            Where::Literal(i) => lits.get(i).cloned().unwrap_or(op),
        };
        let e = self.error(span, problem.message);
        match problem.hint {
            Some(h) => e.with_hint(h),
            None => e,
        }
    }

    fn literal_of(&self, tok: Token) -> Result<Lit, FilterError> {
        match tok.tok {
            Tok::Str(s) => Ok(Lit::Str(s)),
            Tok::Num(n) => Ok(Lit::Num(n)),
            Tok::Ident => match self.text(&tok) {
                "true" => Ok(Lit::Bool(true)),
                "false" => Ok(Lit::Bool(false)),
                "null" => Ok(Lit::Null),
                word => {
                    let e = self.error(
                        tok.span.clone(),
                        format!(
                            "expected a value (text in quotes, a number, `true`, `false` or `null`), found `{word}`"
                        ),
                    );
                    let is_field = word == "label" || Root::FIELDS.iter().any(|r| r.json_key() == word);
                    Err(if is_field {
                        e.with_hint("a field can only be compared with a value, not with another field")
                    } else if let Some(kw) = ["TRUE", "FALSE", "NULL", "True", "False", "Null", "None"]
                        .iter()
                        .position(|w| *w == word)
                        .map(|i| ["true", "false", "null", "true", "false", "null", "null"][i])
                    {
                        e.with_hint(format!("write `{kw}`"))
                    } else {
                        e.with_hint(format!("put text in quotes: `\"{word}\"`"))
                    })
                }
            },
            Tok::LBracket => {
                Err(self.error(tok.span, "a list of values needs `in`").with_hint("write `FIELD in [\"a\", \"b\"]`"))
            }
            _ => Err(self.unexpected(&tok, "a value (text in quotes, a number, `true`, `false` or `null`)")),
        }
    }

    /// `[lit, ...]`, with an optional trailing comma; returns the literals and their spans.
    fn list(&mut self) -> Result<(Vec<Lit>, Vec<Range<usize>>), FilterError> {
        let open = self.next()?;
        if open.tok != Tok::LBracket {
            let e = self.unexpected(&open, "a list like `[\"a\", \"b\"]`");
            return Err(if open.tok == Tok::Ident {
                e.with_hint("to look for a value in a list field, write `FIELD contains VALUE`")
            } else {
                e
            });
        }
        let mut lits = Vec::new();
        let mut spans = Vec::new();
        loop {
            if self.peek()?.tok == Tok::RBracket {
                self.next()?;
                return Ok((lits, spans));
            }
            let tok = self.next()?;
            if tok.tok == Tok::Eof {
                return Err(self.error(open.span, "unclosed `[`").with_hint("add a `]` after the last value"));
            }
            spans.push(tok.span.clone());
            lits.push(self.literal_of(tok)?);
            let sep = self.next()?;
            match sep.tok {
                Tok::Comma => {}
                Tok::RBracket => return Ok((lits, spans)),
                Tok::Eof => {
                    return Err(self.error(open.span, "unclosed `[`").with_hint("add a `]` after the last value"));
                }
                _ => return Err(self.unexpected(&sep, "`,` or `]`")),
            }
        }
    }
}

/// The lower-case keyword an upper- or mixed-case word spells, if any.
fn lowercase_keyword(word: &str) -> Option<&'static str> {
    KEYWORDS.iter().copied().find(|kw| *kw != word && kw.eq_ignore_ascii_case(word))
}

/// Compiles a `matches` regex with this crate's limits; the error is a message and maybe a hint.
pub(crate) fn compile_regex(source: &str) -> Result<regex::Regex, (String, Option<String>)> {
    RegexBuilder::new(source).size_limit(REGEX_SIZE_LIMIT).nest_limit(REGEX_NEST_LIMIT).build().map_err(|e| match e {
        regex::Error::CompiledTooBig(_) => (
            format!("the regex is too big (compiled, it exceeds {} KiB)", REGEX_SIZE_LIMIT / 1024),
            Some("simplify it; large repetitions like `{1000}` and Unicode classes like `\\w` are costly".into()),
        ),
        other => {
            // The regex crate's message quotes the pattern with its own caret; keep its last line.
            let text = other.to_string();
            let reason = text.lines().rev().find_map(|l| l.strip_prefix("error: ")).unwrap_or(&text).to_owned();
            (format!("invalid regex: {reason}"), None)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{CmpOp, Num, is_identifier};

    fn printed(src: &str) -> String {
        parse(src).unwrap_or_else(|e| panic!("{}", e.render(src))).to_string()
    }

    fn err(src: &str) -> FilterError {
        parse(src).expect_err(src)
    }

    /// Column, message and hint of the error for `src`.
    fn error_of(src: &str) -> (usize, String, Option<String>) {
        let e = err(src);
        (e.column, e.message, e.hint)
    }

    fn exists(root: Root) -> Expr {
        Expr::Atom(Atom { subject: Subject::Path(Path { root, segs: Vec::new() }), test: Test::Exists })
    }

    #[test]
    fn every_test_parses_and_prints_back() {
        for (src, expected) in [
            ("id == \"a\"", "id == \"a\""),
            ("id != 'a'", "id != \"a\""),
            ("confidence < 0.5", "confidence < 0.5"),
            ("confidence <= 1", "confidence <= 1"),
            ("confidence > -2.5e-1", "confidence > -0.25"),
            ("confidence >= 1.0", "confidence >= 1.0"),
            ("metadata.x == null", "metadata.x == null"),
            ("metadata.x != true", "metadata.x != true"),
            (
                "metadata.d in [\"hard\", 'medium', 3, null, false,]",
                "metadata.d in [\"hard\", \"medium\", 3, null, false]",
            ),
            ("metadata.d in []", "metadata.d in []"),
            ("metadata.d not in [1]", "metadata.d not in [1]"),
            ("labels contains \"math\"", "labels contains \"math\""),
            ("input matches \"(?i)refund\"", "input matches \"(?i)refund\""),
            ("exists( expected.output )", "exists(expected.output)"),
            ("len(turns) >= 2", "len(turns) >= 2"),
            ("len(name) in [1, 2]", "len(name) in [1, 2]"),
            ("len(labels) not in [0]", "len(labels) not in [0]"),
            ("true", "true"),
            ("false or true", "false or true"),
        ] {
            assert_eq!(printed(src), expected, "{src}");
            assert_eq!(printed(expected), expected, "{expected} prints back as itself");
        }
    }

    #[test]
    fn a_value_written_first_moves_to_the_right() {
        assert_eq!(printed("0.8 <= confidence"), "confidence >= 0.8");
        assert_eq!(printed("1 > confidence"), "confidence < 1");
        assert_eq!(printed("\"x\" == id"), "id == \"x\"");
        assert_eq!(printed("2 != len(turns)"), "len(turns) != 2");
        assert_eq!(printed("null == metadata.x"), "metadata.x == null");
        assert_eq!(printed("true == metadata.x"), "metadata.x == true");
    }

    #[test]
    fn not_binds_tighter_than_and_which_binds_tighter_than_or() {
        let (id, name, labels) = (exists(Root::Id), exists(Root::Name), exists(Root::Labels));
        assert_eq!(
            parse("exists(id) or exists(name) and not exists(labels)").unwrap(),
            Expr::Or(vec![id.clone(), Expr::And(vec![name.clone(), Expr::Not(Box::new(labels.clone()))])])
        );
        assert_eq!(
            parse("not exists(id) and exists(name) or exists(labels)").unwrap(),
            Expr::Or(vec![Expr::And(vec![Expr::Not(Box::new(id.clone())), name.clone()]), labels.clone()])
        );
        assert_eq!(
            parse("(exists(id) or exists(name)) and not (exists(labels) or exists(id))").unwrap(),
            Expr::And(vec![
                Expr::Or(vec![id.clone(), name.clone()]),
                Expr::Not(Box::new(Expr::Or(vec![labels.clone(), id.clone()]))),
            ])
        );
        // `not` applies to the whole comparison after it.
        assert_eq!(printed("not id == \"a\""), "not (id == \"a\")");
        assert_eq!(printed("not not exists(id)"), "not (not exists(id))");
        assert_eq!(
            printed("(exists(id) or exists(name)) and exists(labels)"),
            "(exists(id) or exists(name)) and exists(labels)"
        );
        assert_eq!(printed("not (exists(id) and exists(name))"), "not (exists(id) and exists(name))");
    }

    #[test]
    fn paths_take_keys_quoted_keys_and_indexes() {
        let Expr::Atom(atom) = parse(r#"metadata."odd key".x[2]."a\"b" == 1"#).unwrap() else { panic!() };
        assert_eq!(atom.subject.path().root, Root::Metadata);
        assert_eq!(
            atom.subject.path().segs,
            [Seg::Key("odd key".into()), Seg::Key("x".into()), Seg::Index(2), Seg::Key("a\"b".into()),]
        );
        assert_eq!(atom.test, Test::Cmp(CmpOp::Eq, Lit::Num(Num::Int(1))));
        assert_eq!(printed(r#"metadata.'odd key'.x[2]."a\"b" == 1"#), r#"metadata."odd key".x[2]."a\"b" == 1"#);
        assert_eq!(printed("turns[0].role == \"hitl\""), "turns[0].role == \"hitl\"");
        assert_eq!(printed("label.category == \"RCA\""), "label.category == \"RCA\"");
        assert_eq!(printed("label.\"odd key\" == \"x\""), "label.\"odd key\" == \"x\"");
        // Keywords are plain keys after a dot; keys print quoted only when they must be.
        assert_eq!(printed("metadata.in == 1 and metadata.\"not\" == 2"), "metadata.in == 1 and metadata.not == 2");
        assert_eq!(printed("metadata.\"1x\" == 1"), "metadata.\"1x\" == 1");
        assert_eq!(
            printed("expected.output[0].x == 1 and expected.metrics.f1 > 0.5"),
            "expected.output[0].x == 1 and expected.metrics.f1 > 0.5"
        );
    }

    #[test]
    fn strings_print_with_json_escapes() {
        assert_eq!(printed(r#"name == 'it\'s "q" \\ é \u0001'"#), r#"name == "it's \"q\" \\ é \u0001""#);
        assert_eq!(printed("name == \"tab\there\""), r#"name == "tab\there""#);
    }

    #[test]
    fn operators_of_other_languages_are_errors_with_the_right_hint() {
        assert_eq!(
            error_of(r#"labels contains "a" = 3"#),
            (21, "expected `and`, `or` or the end of the filter, found `=`".into(), Some("did you mean `==`?".into()))
        );
        assert_eq!(
            error_of("metadata.x = 3"),
            (
                12,
                "expected a comparison operator after `metadata.x`, found `=`".into(),
                Some("did you mean `==`?".into())
            )
        );
        assert_eq!(error_of(r#"id == "a" && name == "b""#).2.as_deref(), Some("use `and`"));
        assert_eq!(error_of(r#"id == "a" || name == "b""#).2.as_deref(), Some("use `or`"));
        assert_eq!(
            error_of("!exists(name)"),
            (1, "expected a condition, found `!`".into(), Some("use `not`, e.g. `not exists(metadata.flaky)`".into()))
        );
        assert_eq!(
            error_of(r#"id <> "a""#),
            (4, "expected a comparison operator after `id`, found `<>`".into(), Some("did you mean `!=`?".into()))
        );
        assert_eq!(error_of(r#"id === "a""#).2.as_deref(), Some("did you mean `==`?"));
        assert_eq!(error_of("metadata.x is null").2.as_deref(), Some("use `==`, e.g. `metadata.note == null`"));
        assert_eq!(
            error_of("name like \"a%\"").2.as_deref(),
            Some("use `matches` with a regex, e.g. `name matches \"^abc\"`")
        );
        assert_eq!(error_of("metadata.x == True").2.as_deref(), Some("write `true`"));
        assert_eq!(
            error_of(r#"id == 'a' OR id == 'b'"#),
            (
                11,
                "expected `and`, `or` or the end of the filter, found `OR`".into(),
                Some("keywords are lower-case: `or`".into())
            )
        );
        assert_eq!(error_of(r#"metadata.x IN [1]"#).2.as_deref(), Some("keywords are lower-case: `in`"));
    }

    #[test]
    fn unclosed_and_unmatched_brackets_point_at_the_opening_one() {
        assert_eq!(
            error_of(r#"(id == "a""#),
            (1, "unclosed `(`".into(), Some("add a `)` where the group ends".into()))
        );
        assert_eq!(
            error_of(r#"id == "a")"#),
            (10, "unmatched `)`".into(), Some("remove it, or add a `(` before it".into()))
        );
        assert_eq!(
            error_of(r#"name == "abc"#),
            (9, "unclosed string".into(), Some("add a closing `\"` after the text".into()))
        );
        assert_eq!(
            error_of("name == 'abc"),
            (9, "unclosed string".into(), Some("add a closing `'` after the text".into()))
        );
        assert_eq!(
            error_of(r#"metadata.x in ["a", "b""#),
            (15, "unclosed `[`".into(), Some("add a `]` after the last value".into()))
        );
        assert_eq!(error_of("exists(name"), (1, "unclosed `exists(`".into(), Some("add a `)` after the path".into())));
        assert_eq!(error_of("(id == \"a\" = 1)").1, "expected `and`, `or` or `)`, found `=`");
    }

    #[test]
    fn incomplete_and_trailing_input() {
        assert_eq!(
            error_of(r#"id == "a" and"#),
            (14, "expected a condition, found the end of the filter".into(), None)
        );
        assert_eq!(
            error_of(r#"id == "a" id == "b""#),
            (11, "expected `and`, `or` or the end of the filter, found `id`".into(), None)
        );
        assert_eq!(
            error_of("   "),
            (1, "the filter is empty".into(), Some("write a condition, e.g. `labels contains \"math\"`".into()))
        );
        assert_eq!(
            error_of("id =="),
            (
                6,
                "expected a value (text in quotes, a number, `true`, `false` or `null`), found the end of the filter"
                    .into(),
                None
            )
        );
        assert_eq!(error_of(r#"metadata.x in ["a" "b"]"#), (20, "expected `,` or `]`, found `\"b\"`".into(), None));
        assert_eq!(
            error_of("metadata. == 1"),
            (
                11,
                "expected a field name after `.`, found `==`".into(),
                Some("quote unusual keys, e.g. `metadata.\"my key\"`".into())
            )
        );
    }

    #[test]
    fn bare_paths_are_not_conditions() {
        assert_eq!(
            error_of("metadata.flaky and id == \"a\""),
            (
                1,
                "`metadata.flaky` is not a condition".into(),
                Some("compare it, e.g. `metadata.flaky == true`, or use `exists(metadata.flaky)`".into())
            )
        );
        assert_eq!(error_of("(metadata.flaky)").1, "`metadata.flaky` is not a condition");
        assert_eq!(
            error_of("len(turns)"),
            (1, "`len(turns)` is not a condition".into(), Some("compare it, e.g. `len(turns) > 0`".into()))
        );
        assert_eq!(error_of("null").1, "`null` is not a condition");
    }

    #[test]
    fn unknown_fields_get_a_suggestion() {
        assert_eq!(
            error_of("inptu == \"x\""),
            (1, "unknown field `inptu`".into(), Some("did you mean `input`?".into()))
        );
        assert_eq!(error_of("metdata.x == 1").2.as_deref(), Some("did you mean `metadata`?"));
        assert_eq!(error_of("lable.category == \"x\"").2.as_deref(), Some("did you mean `label`?"));
        assert_eq!(
            error_of("tags contains \"x\"").2.as_deref(),
            Some("tags are `labels`, e.g. `labels contains \"math\"`")
        );
        assert_eq!(error_of("expected_output == 1").2.as_deref(), Some("did you mean `expected.output`?"));
        assert_eq!(
            error_of("difficulty == \"hard\"").2.as_deref(),
            Some("use `metadata.difficulty` for a metadata key, or `label.difficulty` for `difficulty:value` labels")
        );
        assert_eq!(
            error_of("turns[0].rol == \"user\""),
            (10, "unknown field `rol` in a turn".into(), Some("did you mean `role`?".into()))
        );
        assert_eq!(
            error_of("context[0].kind == \"log\""),
            (
                12,
                "unknown field `kind` in a context item".into(),
                Some("its fields are `type`, `source`, `content` or `metadata`".into())
            )
        );
        // Open records and free objects take any key.
        assert!(parse("tools[0].x_extra == 1 and expected.metrics.f1 > 0.5 and provenance.source == \"t\"").is_ok());
        assert!(parse("metadata.anything.at.all[3] == 1 and agent_args.model == \"m\" and input.x == 1").is_ok());
    }

    #[test]
    fn labels_need_a_key_without_colon() {
        assert_eq!(error_of("label == \"x\"").1, "`label` needs a key");
        assert_eq!(error_of("label.\"a:b\" == \"x\"").1, "a label key cannot contain `:`");
        assert_eq!(error_of("label.category.x == \"x\"").1, "`label.category` is a string, it has no field `x`");
        assert_eq!(error_of(r#"metadata."a\u0000b" == 1"#).1, "keys containing U+0000 are not supported");
    }

    #[test]
    fn tests_that_can_never_hold_are_type_errors() {
        assert_eq!(error_of("confidence == \"high\""), (15, "`confidence` is a number, never a string".into(), None));
        assert_eq!(error_of("confidence == \"0.8\"").2.as_deref(), Some("write the number without quotes: `0.8`"));
        assert_eq!(
            error_of("confidence matches \"x\""),
            (12, "`matches` needs a string, but `confidence` is a number".into(), None)
        );
        assert_eq!(
            error_of("confidence contains 1").1,
            "`contains` needs a list or a string, but `confidence` is a number"
        );
        assert_eq!(error_of("confidence in [1, \"a\"]"), (19, "`confidence` is a number, never a string".into(), None));
        assert_eq!(
            error_of("labels contains 3"),
            (17, "`labels` holds strings, never a number".into(), Some("write it in quotes: `\"3\"`".into()))
        );
        assert_eq!(
            error_of("labels == \"x\""),
            (8, "`labels` is a list, never equal to a single value".into(), Some("use `labels contains \"x\"`".into()))
        );
        assert_eq!(error_of("labels in [\"x\"]").2.as_deref(), Some("use `labels contains \"x\"`"));
        assert_eq!(error_of("labels matches \"x\"").1, "`matches` needs a string, but `labels` is a list");
        assert_eq!(error_of("turns == 2").2.as_deref(), Some("compare `len(turns)` or an element, e.g. `turns[0]`"));
        assert_eq!(error_of("turns contains \"x\"").2.as_deref(), Some("compare a field of one, e.g. `turns[0].role`"));
        assert_eq!(error_of("metadata == 1").2.as_deref(), Some("compare one of its keys, e.g. `metadata.KEY`"));
        assert_eq!(
            error_of("metadata contains \"x\"").2.as_deref(),
            Some("to test for a key, use `exists(metadata.KEY)`")
        );
        assert_eq!(error_of("expected > 1").2.as_deref(), Some("compare one of its fields, e.g. `expected.output`"));
        assert_eq!(
            error_of("metadata[0] == 1"),
            (
                9,
                "`metadata` is an object, not a list".into(),
                Some("use a key, e.g. `metadata.name` or `metadata.\"0\"`".into())
            )
        );
        assert_eq!(error_of("turns.role == \"user\"").2.as_deref(), Some("pick an element first, e.g. `turns[0]`"));
        assert_eq!(error_of("id[0] == \"a\"").1, "`id` is a string, not a list");
        assert_eq!(error_of("label.category == 3").2.as_deref(), Some("write it in quotes: `\"3\"`"));
        assert_eq!(
            error_of("name == null"),
            (
                9,
                "`name` is a string, never `null`".into(),
                Some("to select cases without it, use `not exists(name)`".into())
            )
        );
        assert_eq!(error_of("provenance.id_derived == \"true\"").2.as_deref(), Some("write it without quotes: `true`"));
        assert_eq!(
            error_of("review == \"aproved\""),
            (11, "`review` is never `aproved`".into(), Some("it is one of `draft`, `reviewed` or `rejected`".into()))
        );
        assert_eq!(error_of("review != \"reviwed\"").2.as_deref(), Some("did you mean `reviewed`?"));
        assert_eq!(error_of("turns[0].role in [\"user\", \"agent\"]").1, "`turns[0].role` is never `agent`");
        assert_eq!(
            error_of("len(confidence) > 1"),
            (1, "`len` needs a list, an object or a string, but `confidence` is a number".into(), None)
        );
        assert_eq!(error_of("len(turns) == \"2\""), (15, "`len(turns)` is a number, never a string".into(), None));
        assert_eq!(error_of("len(turns) contains 2").1, "`len(turns)` is a number, `contains` does not apply");
        // Booleans and null have no order, whatever the field.
        assert_eq!(
            error_of("confidence < true"),
            (14, "`true` cannot be ordered".into(), Some("use `==` or `!=`".into()))
        );
        assert_eq!(error_of("metadata.x >= null").1, "`null` cannot be ordered");
        // Free JSON takes any literal, and ordering of an enumerated string any string.
        assert!(
            parse("input == 3 and metadata.x contains null and expected.output != \"a\" and review < \"m\"").is_ok()
        );
    }

    #[test]
    fn values_and_lists_in_the_wrong_place() {
        assert_eq!(
            error_of("label.category == RCA"),
            (
                19,
                "expected a value (text in quotes, a number, `true`, `false` or `null`), found `RCA`".into(),
                Some("put text in quotes: `\"RCA\"`".into())
            )
        );
        assert_eq!(
            error_of("metadata.x == name").2.as_deref(),
            Some("a field can only be compared with a value, not with another field")
        );
        assert_eq!(
            error_of("metadata.x == [1]"),
            (15, "a list of values needs `in`".into(), Some("write `FIELD in [\"a\", \"b\"]`".into()))
        );
        assert_eq!(
            error_of("\"math\" in labels"),
            (
                8,
                "a value cannot come before `in`".into(),
                Some("to look for a value in a list field, write `FIELD contains \"math\"`".into())
            )
        );
        assert_eq!(
            error_of("metadata.x in labels").2.as_deref(),
            Some("to look for a value in a list field, write `FIELD contains VALUE`")
        );
        assert_eq!(
            error_of("metadata.x not contains \"a\""),
            (
                16,
                "expected `in` after `not`, found `contains`".into(),
                Some("to negate a test, write `not (metadata.x ...)`".into())
            )
        );
        assert_eq!(error_of("input matches 3").1, "expected a regex in quotes after `matches`, found `3`");
        assert_eq!(
            error_of("turns[-1].role == \"user\""),
            (7, "array indexes start at 0".into(), Some("counting from the end is not supported".into()))
        );
        assert_eq!(error_of("turns[99999999999].role == \"user\"").1, "array index is larger than 2147483647");
        assert_eq!(error_of("turns[1.5].role == \"user\"").1, "expected an array index (0, 1, ...), found `1.5`");
    }

    #[test]
    fn keys_are_identifiers_or_strings() {
        assert!(is_identifier("odd_key1"));
        assert!(!is_identifier("odd key"));
        assert!(!is_identifier("1x"));
        assert!(!is_identifier(""));
    }

    #[test]
    fn uppercase_keywords_are_hinted() {
        let e = err(r#"id == "a" AND name == "b""#);
        assert_eq!(e.message, "expected `and`, `or` or the end of the filter, found `AND`");
        assert_eq!(e.hint.as_deref(), Some("keywords are lower-case: `and`"));
        let e = err(r#"NOT exists(name)"#);
        assert_eq!(e.message, "unknown field `NOT`");
        assert_eq!(e.hint.as_deref(), Some("keywords are lower-case: `not`"));
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}id == \"a\"{}", "(".repeat(70), ")".repeat(70));
        assert!(err(&deep).message.starts_with("the filter is nested too deeply"));
        let nots = format!("{}exists(id)", "not ".repeat(70));
        assert!(err(&nots).message.starts_with("the filter is nested too deeply"));
        let fine = format!("{}id == \"a\"{}", "(".repeat(60), ")".repeat(60));
        assert!(parse(&fine).is_ok());
    }

    #[test]
    fn regex_errors_keep_the_reason() {
        let e = err(r#"input matches "(?i)[""#);
        assert_eq!((e.column, e.message.as_str()), (15, "invalid regex: unclosed character class"));
        let e = err(r#"input matches "\\w{1000}""#);
        assert_eq!(e.message, "the regex is too big (compiled, it exceeds 1024 KiB)");
        let nested = format!("input matches \"{}a{}\"", "(".repeat(120), ")".repeat(120));
        assert!(err(&nested).message.starts_with("invalid regex: "));
    }
}
