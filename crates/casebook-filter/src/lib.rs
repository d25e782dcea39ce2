//! casebook's filter language (SPEC §6): parse an expression, check it against the shape of a
//! case, evaluate it in memory on a [`Case`] or on a case's JSON form, and translate it to an
//! SQLite condition with the same meaning.
//!
//! ```
//! use casebook_filter::{Filter, SqlContext};
//! use casebook_model::Case;
//!
//! let filter = Filter::parse(r#"labels contains "math" and label.level in ["hard", "medium"]"#)?;
//! let mut case: Case = serde_json::from_value(serde_json::json!({"id": "q1", "input": "2+2?"}))?;
//! assert!(!filter.matches(&case));
//! case.labels = Some(vec!["math".into(), "level:hard".into()]);
//! assert!(filter.matches(&case));
//! assert!(filter.matches_json(&serde_json::to_value(&case)?));
//!
//! let sql = filter.to_sqlite(&SqlContext { body: "b.body", labels: None, facets: None, seeds: None, tools: None });
//! assert!(!sql.sql.contains("math")); // values are bound, never spliced
//! assert_eq!(sql.sql.matches('?').count(), sql.params.len());
//!
//! let error = Filter::parse("inptu == 'x'").unwrap_err();
//! assert_eq!(error.render("inptu == 'x'"), "\
//! error: unknown field `inptu` at column 1
//!   inptu == 'x'
//!   ^^^^^
//!   hint: did you mean `input`?");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The language
//!
//! This is [`HELP`], the text `casebook help filter` prints:
//!
//! ```text
#![doc = include_str!("help.txt")]
//! ```
//!
//! # Grammar
//!
//! ```text
//! filter    = or EOF
//! or        = and { "or" and }
//! and       = unary { "and" unary }
//! unary     = "not" unary | primary
//! primary   = "(" or ")" | "exists" "(" path ")" | "true" | "false"
//!           | subject test | literal cmp-op subject
//! subject   = path | "len" "(" path ")"
//! test      = cmp-op literal | "in" list | "not" "in" list
//!           | "contains" literal | "matches" string
//! cmp-op    = "==" | "!=" | "<" | "<=" | ">" | ">="
//! list      = "[" [ literal { "," literal } [ "," ] ] "]"
//! literal   = string | number | "true" | "false" | "null"
//! path      = ( field | "label" "." key ) { "." key | "[" index "]" }
//! key       = identifier | string
//! field     = "id" | "name" | "description" | "labels" | "input" | "turns" | "context"
//!           | "tools" | "memory_seeds" | "session_id" | "agent_args" | "expected"
//!           | "metadata" | "confidence" | "review" | "provenance"
//! ```
//!
//! Strings take double or single quotes and JSON escapes (plus `\'`); numbers are JSON numbers;
//! identifiers are `[A-Za-z_][A-Za-z0-9_]*`; an index is a non-negative integer. `len(...)` is
//! compared with numbers only. Fields whose type the case model fixes are checked: a test that
//! could never hold (`confidence == "high"`, `labels == "x"`, `review == "aproved"`,
//! `turns[0].rol`) is an error with a hint, not an empty result.
//!
//! # Semantics, in memory and in SQL
//!
//! - A path that reaches nothing (a missing key, an index past the end, a key of a non-object)
//!   makes every test false, `!=` included. `not` negates the result, so `not (x == 1)` and
//!   `x not in [...]` hold when `x` is missing.
//! - `==`/`!=` are JSON equality with the literal: numbers by value, a string never equal to a
//!   number, a list or object never equal to a literal (so `!=` holds), `x == null` only for a
//!   present JSON `null`. `in [...]` is "equal to one of them"; `in []` is false.
//! - `< <= > >=` hold between two numbers or two strings only; anything else is false.
//! - `contains`: a list with an element equal to the literal, or a string with the literal
//!   string in it (`""` is in every string); false for anything else.
//! - `matches`: a string matching the regex anywhere (use `^...$` to anchor), Rust `regex`
//!   syntax; false for non-strings. Regexes are compiled once, at parse time, with a 1 MiB size
//!   limit, and match in linear time.
//! - `exists(path)`: the path reaches a value, `null` included.
//! - Numbers are 64-bit integers or doubles, as SQLite holds them; integers outside the `i64`
//!   range are doubles. An integer and a double compare exactly, without rounding either (as
//!   SQLite's `sqlite3IntFloatCompare`), so `9007199254740993 > 9007199254740992.0`. A number
//!   written in a filter or a dataset is the nearest double (`1e-400` is 0); one beyond the
//!   largest double (`1e400`) is an error in both. SQLite reads some reals a few doubles off
//!   (`1.5e+308`); near a literal, SQL tells a real by its text instead (`exact.rs`), so the
//!   results are the same.
//! - A filter holds at most 2,000 tests and list values: in SQL each binds up to 16 values and
//!   SQLite takes 32,766 in a statement. `and`/`or` chains become balanced trees in SQL, well
//!   within SQLite's expression depth of 1,000.
//! - A filter is at most 128 KiB of text and a path at most 128 steps (no case is deeper);
//!   parsing takes time linear in the text, so a server can parse what any client sends.
//! - Strings order by bytes (SQLite's `BINARY` collation, Rust's `str` order).
//! - `len` counts array elements, object keys, or the characters of a string up to its first
//!   U+0000 (SQLite's `length()` stops there; the rare string with U+0000 in it counts the same
//!   in memory).
//! - `label.KEY` reads labels `KEY:value` (split at the first `:`); a test on it holds if it
//!   holds for any such label (`label.KEY != "v"` holds if some `KEY` label is not `v`).
//!   Keys cannot contain `:`.
//! - A literal written first is moved to the right, flipping the operator (`0.8 <= confidence`
//!   is `confidence >= 0.8`).
//! - Keywords are lower-case only; `AND`, `Or`... are errors whose hint names the keyword.
//! - Object keys containing U+0000 cannot be named in a path (SQLite's JSON paths stop there).
//! - A confidence that is NaN or infinite is `null`, as serde_json writes it.

mod ast;
mod error;
mod eval;
mod exact;
mod facets;
mod lexer;
mod parser;
mod path;
mod pg;
mod schema;
mod shorthand;
mod sql;

use std::fmt;
use std::str::FromStr;

use casebook_model::Case;

pub use error::{FilterError, ShorthandError};
pub use facets::{FACET_FIELDS, OTHER_FIELDS, facets_json};
pub use path::{FieldPath, Groups};
pub use pg::{PgContext, PgParts};
pub use sql::{LabelIndex, SqlContext, SqlFragment, SqlParam};

/// The language reference: grammar, tests, paths and rules with examples, plain text of at most
/// 80 columns.
pub const HELP: &str = include_str!("help.txt");

/// A parsed, type-checked filter. Print it with `Display` to get it back in the language
/// (normalised: double quotes, a literal written first moved to the right).
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    expr: ast::Expr,
}

impl Filter {
    /// Parses and checks an expression; see [`HELP`] for the language.
    pub fn parse(src: &str) -> Result<Filter, FilterError> {
        parser::parse(src).map(|expr| Filter { expr })
    }

    /// A filter that selects every case (prints as `true`).
    pub fn everything() -> Filter {
        Filter { expr: ast::Expr::Const(true) }
    }

    /// Both filters must hold.
    #[must_use]
    pub fn and(self, other: Filter) -> Filter {
        let mut items = Vec::new();
        for expr in [self.expr, other.expr] {
            match expr {
                ast::Expr::Const(true) => {}
                ast::Expr::And(more) => items.extend(more),
                expr => items.push(expr),
            }
        }
        Filter {
            expr: match items.len() {
                0 => ast::Expr::Const(true),
                1 => items.pop().unwrap_or(ast::Expr::Const(true)),
                _ => ast::Expr::And(items),
            },
        }
    }

    /// Whether the case passes. Reads the typed case directly; only a typed sub-struct the
    /// expression looks inside (a context item, a tool, an outcome object, provenance) is
    /// serialised. Agrees with [`Filter::matches_json`] on the case's JSON form.
    pub fn matches(&self, case: &Case) -> bool {
        eval::eval_case(&self.expr, case)
    }

    /// Whether a case in its JSON form (`serde_json::to_value(&case)`, what the store keeps)
    /// passes.
    pub fn matches_json(&self, case: &serde_json::Value) -> bool {
        eval::eval_json(&self.expr, case)
    }

    /// An SQLite condition selecting the same cases, for a `WHERE` clause. It uses the JSON
    /// functions on `ctx.body`, `REGEXP` for `matches` (register it: sqlx's
    /// `SqliteConnectOptions::with_regexp()`), and the `case_labels` table for
    /// `labels contains "x"` and `label.KEY` tests when `ctx.labels` is given.
    pub fn to_sqlite(&self, ctx: &SqlContext<'_>) -> SqlFragment {
        sql::to_sqlite(&self.expr, ctx)
    }

    /// A PostgreSQL condition selecting the same cases, its parameters numbered from `$first`;
    /// `None` for a filter PostgreSQL cannot evaluate as memory does (one with `matches`),
    /// which the store evaluates on each case instead. See `pg.rs`.
    pub fn to_postgres(&self, ctx: &PgContext<'_>, first: usize) -> Option<SqlFragment> {
        pg::to_postgres(&self.expr, ctx, first)
    }

    /// [`Filter::to_postgres`] as the conjuncts that read no JSON and those that do (see
    /// [`PgParts`]); `None` as there.
    pub fn to_postgres_parts(&self, ctx: &PgContext<'_>, first: usize) -> Option<PgParts> {
        pg::to_postgres_parts(&self.expr, ctx, first)
    }

    /// The review states of which every case the filter selects has one, when the filter says
    /// so by a `review == "…"` or `review in [...]` (strings) test that must hold (one of its
    /// top-level `and`): a store may then find the cases through an index of the review state
    /// instead of reading the version. `None` when the filter does not require a state.
    pub fn review_states(&self) -> Option<Vec<String>> {
        review_states(&self.expr)
    }
}

/// See [`Filter::review_states`].
fn review_states(expr: &ast::Expr) -> Option<Vec<String>> {
    use ast::{CmpOp, Expr, Lit, Root, Subject, Test};
    match expr {
        Expr::And(items) => items.iter().find_map(review_states),
        Expr::Atom(atom) => {
            let Subject::Path(path) = &atom.subject else { return None };
            if path.root != Root::Review || !path.segs.is_empty() {
                return None;
            }
            let strings = |lits: &[Lit]| -> Option<Vec<String>> {
                lits.iter().map(|l| if let Lit::Str(s) = l { Some(s.clone()) } else { None }).collect()
            };
            match &atom.test {
                Test::Cmp(CmpOp::Eq, lit) => strings(std::slice::from_ref(lit)),
                Test::In(list) => strings(list),
                _ => None,
            }
        }
        Expr::Const(_) | Expr::Not(_) | Expr::Or(_) => None,
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.expr.fmt(f)
    }
}

impl FromStr for Filter {
    type Err = FilterError;

    fn from_str(src: &str) -> Result<Self, Self::Err> {
        Filter::parse(src)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_review_states_a_filter_requires() {
        let states = |src: &str| super::Filter::parse(src).unwrap().review_states();
        let strings = |list: &[&str]| Some(list.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(states(r#"review == "draft""#), strings(&["draft"]));
        assert_eq!(
            states(r#"metadata.x == 1 and (labels contains "a" and review in ["draft", "rejected"])"#),
            strings(&["draft", "rejected"])
        );
        assert_eq!(states(r#"review == "draft" or metadata.x == 1"#), None);
        assert_eq!(states(r#"not (review == "draft")"#), None);
        assert_eq!(states(r#"review != "draft""#), None);
        assert_eq!(states("exists(review)"), None);
        assert_eq!(states("true"), None);
    }

    #[test]
    fn a_filter_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<super::Filter>();
    }
}
