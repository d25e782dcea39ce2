//! Translation to a PostgreSQL `WHERE` condition over a case's JSON, with the same meaning as
//! in-memory evaluation (and as the SQLite translation in `sql.rs`, whose structure this
//! follows). Every value and path key is a bound `$n` parameter.
//!
//! The JSON is PostgreSQL's `json` type (JSON text), not `jsonb`: `jsonb` keeps a number as a
//! decimal and forgets how it was written, and whether a number was written as an integer or as
//! a double decides how it compares. A case's JSON is always written by serde_json, so a value's
//! JSON text is canonical: strings, `true`, `false` and `null` are compared as JSON text, which
//! needs no unescaping. Every test is `true` or `false`, never NULL, so `NOT` keeps the
//! "missing field" rules.
//!
//! `matches` is not translated: PostgreSQL's regular expressions are not Rust's. Nor are paths
//! into `memory_seeds` or a tool's `responses`: the store keeps a seed or snapshot file's
//! document apart from the body. A filter with either is evaluated in memory by the store ([`crate::Filter::to_postgres`] returns
//! `None`).
//!
//! PostgreSQL's JSON functions refuse a document with `\u0000` in a string, so a query whose
//! filter reads such a case fails (with PostgreSQL's message) rather than answer wrongly.

use crate::ast::{Atom, CmpOp, Expr, Lit, Num, Path, Root, Seg, Subject, Test};
use crate::exact::Window;
use crate::sql::{SqlFragment, SqlParam};

/// Where the case's JSON is in the query the fragment goes into.
#[derive(Debug, Clone, Copy)]
pub struct PgContext<'a> {
    /// The SQL expression of the case's JSON body, as text (`json` or `text`), e.g. `"b.body"`.
    pub body: &'a str,
    /// The SQL expression of the body's row id, the `blob` of the label table
    /// `case_labels(label bytea, blob bigint)`, e.g. `"m.blob"`.
    pub blob: &'a str,
    /// The SQL expression of the case's facets (`json`, see [`crate::facets_json`]): paths into
    /// the facet fields are read there.
    pub facets: &'a str,
}

/// The parts of [`to_postgres_parts`] joined: the whole condition.
pub(crate) fn to_postgres(expr: &Expr, ctx: &PgContext<'_>, first: usize) -> Option<SqlFragment> {
    let PgParts { plain, json, params, .. } = to_postgres_parts(expr, ctx, first)?;
    let sql = match (plain, json) {
        (Some(plain), Some(json)) => format!("{plain} AND {json}"),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => "true".to_owned(),
    };
    Some(SqlFragment { sql, params })
}

/// A filter's PostgreSQL condition as two parts to be joined by `AND`, from the conjuncts of a
/// filter that is an `and` (or the filter whole): those that read no JSON (labels, say), and
/// those that read the case's JSON body or facets. A store that must keep some cases' JSON from
/// PostgreSQL (see the module's note on `\u0000`) guards the second part only, and leaves the
/// first where the planner can use it to find the rows (a label's cases through its index, not
/// every case of the version tested one by one).
#[derive(Debug, Clone, PartialEq)]
pub struct PgParts {
    /// The conjuncts that read no JSON, if any.
    pub plain: Option<String>,
    /// The conjuncts that read JSON, if any.
    pub json: Option<String>,
    /// The parameters of both, numbered from the `first` given: those of `plain` first, so that
    /// a statement with `plain` alone binds the first `plain_params` of them.
    pub params: Vec<SqlParam>,
    pub plain_params: usize,
    /// The labels every selected case has (the conjuncts `labels contains "…"`), in the
    /// filter's order: a store can find the cases through one of them.
    pub labels: Vec<String>,
}

pub(crate) fn to_postgres_parts(expr: &Expr, ctx: &PgContext<'_>, first: usize) -> Option<PgParts> {
    if in_memory(expr) {
        return None;
    }
    let items = match expr {
        Expr::And(items) => items.as_slice(),
        other => std::slice::from_ref(other),
    };
    let reads_json = |item: &Expr| {
        let mut pg = Pg { ctx: *ctx, text: String::new(), params: Vec::new(), first, reads_json: false };
        pg.expr(item);
        pg.reads_json
    };
    let (json_items, plain_items): (Vec<&Expr>, Vec<&Expr>) = items.iter().partition(|item| reads_json(item));
    let mut pg = Pg { ctx: *ctx, text: String::new(), params: Vec::new(), first, reads_json: false };
    let plain = pg.conjunction(&plain_items);
    let plain_params = pg.params.len();
    let json = pg.conjunction(&json_items);
    let labels = plain_items.iter().filter_map(|item| required_label(item)).collect();
    Some(PgParts { plain, json, params: pg.params, plain_params, labels })
}

/// The label a conjunct `labels contains "…"` requires.
fn required_label(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Atom(Atom { subject: Subject::Path(path), test: Test::Contains(Lit::Str(label)) })
            if path.root == Root::Labels && path.segs.is_empty() =>
        {
            Some(label.clone())
        }
        _ => None,
    }
}

/// Whether a filter is left to memory: it has `matches`, or reads `memory_seeds` or a tool's
/// `responses` (whose seed or snapshot file's document the store keeps apart from the body).
fn in_memory(expr: &Expr) -> bool {
    match expr {
        Expr::Const(_) => false,
        Expr::Not(inner) => in_memory(inner),
        Expr::And(items) | Expr::Or(items) => items.iter().any(in_memory),
        Expr::Atom(atom) => {
            let path = atom.subject.path();
            matches!(atom.test, Test::Matches(_)) || path.root == Root::MemorySeeds || reads_responses(atom)
        }
    }
}

/// Whether a test may read a tool's `responses`: a path through it, or a test of a whole tool
/// or of the list (their length and existence do not depend on what the responses hold).
fn reads_responses(atom: &Atom) -> bool {
    let path = atom.subject.path();
    if path.root != Root::Tools {
        return false;
    }
    match path.segs.as_slice() {
        [_, Seg::Key(key), ..] => key == "responses",
        [] | [_] => !matches!(atom.subject, Subject::Len(_)) && !matches!(atom.test, Test::Exists),
        _ => false,
    }
}

struct Pg<'a> {
    ctx: PgContext<'a>,
    text: String,
    params: Vec<SqlParam>,
    /// The number of the first parameter.
    first: usize,
    /// Whether the text written reads the case's JSON.
    reads_json: bool,
}

impl<'a> Pg<'a> {
    fn push(&mut self, sql: &str) {
        self.text.push_str(sql);
    }

    /// Binds a parameter and returns its placeholder (which may be written several times),
    /// cast to the parameter's type: the SQL text then says the types, and a statement prepared
    /// for one filter is never reused for another whose values have other types.
    fn bind(&mut self, param: SqlParam) -> String {
        let cast = match param {
            SqlParam::Integer(_) => "bigint",
            SqlParam::Real(_) => "double precision",
            SqlParam::Text(_) => "text",
            SqlParam::Bytes(_) => "bytea",
        };
        self.params.push(param);
        format!("(${}::{cast})", self.first + self.params.len() - 1)
    }

    /// `(a) AND (b) …` of `items`, each written on its own; `None` for none.
    fn conjunction(&mut self, items: &[&Expr]) -> Option<String> {
        let sql: Vec<String> = items
            .iter()
            .map(|item| {
                self.expr(item);
                std::mem::take(&mut self.text)
            })
            .collect();
        (!sql.is_empty()).then(|| format!("({})", sql.join(") AND (")))
    }

    fn balanced(&mut self, n: usize, joiner: &str, item: &mut dyn FnMut(&mut Self, usize)) {
        if n == 0 {
            return self.push(if joiner == " AND " { "true" } else { "false" });
        }
        crate::sql::balanced(self, 0..n, joiner, &mut |pg, text| pg.push(text), item);
    }

    fn expr(&mut self, expr: &Expr) {
        match expr {
            Expr::Const(b) => self.push(if *b { "true" } else { "false" }),
            Expr::Not(inner) => {
                self.push("NOT (");
                self.expr(inner);
                self.push(")");
            }
            Expr::And(items) | Expr::Or(items) => {
                let joiner = if matches!(expr, Expr::And(_)) { " AND " } else { " OR " };
                self.balanced(items.len(), joiner, &mut |pg, i| pg.expr(&items[i]));
            }
            Expr::Atom(atom) => self.atom(atom),
        }
    }

    /// The SQL expression of the JSON value at `path` (NULL where the path reaches nothing).
    fn value(&mut self, path: &Path) -> String {
        self.reads_json = true;
        let source = if crate::facets::in_facets(&path.root) {
            self.ctx.facets.to_owned()
        } else {
            format!("{}::json", self.ctx.body)
        };
        let mut out = format!("({source} -> {}", self.bind(SqlParam::Text(path.root.json_key().to_owned())));
        for seg in &path.segs {
            match seg {
                Seg::Key(key) => {
                    let p = self.bind(SqlParam::Text(key.clone()));
                    out.push_str(&format!(" -> {p}"));
                }
                // An index beyond PostgreSQL's `integer` reaches nothing (no list is that long).
                Seg::Index(i) => match i32::try_from(*i) {
                    Ok(i) => {
                        let p = self.bind(SqlParam::Integer(i64::from(i)));
                        out.push_str(&format!(" -> {p}::integer"));
                    }
                    Err(_) => return "NULL::json".to_owned(),
                },
            }
        }
        out.push(')');
        out
    }

    fn atom(&mut self, atom: &Atom) {
        let (params, text) = (self.params.len(), self.text.len());
        self.atom_sql(atom);
        // A test that can never hold binds nothing (a parameter the SQL does not name would
        // change the statement's parameter types).
        if &self.text[text..] == "false" {
            self.params.truncate(params);
        }
    }

    fn atom_sql(&mut self, atom: &Atom) {
        let path = atom.subject.path();
        if let Root::Label(key) = &path.root {
            return self.label(key, atom);
        }
        if let (Root::Labels, [], Subject::Path(_), Test::Contains(Lit::Str(label))) =
            (&path.root, path.segs.as_slice(), &atom.subject, &atom.test)
        {
            let p = self.bind(SqlParam::Bytes(label.clone().into_bytes()));
            let blob = self.ctx.blob;
            return self.push(&format!("({blob} IN (SELECT blob FROM case_labels WHERE label = {p}))"));
        }
        let v = self.value(path);
        match &atom.subject {
            Subject::Path(_) => self.test(&v, &atom.test),
            Subject::Len(_) => self.len(&v, &atom.test),
        }
    }

    fn test(&mut self, v: &str, test: &Test) {
        match test {
            Test::Exists => self.push(&format!("(json_typeof({v}) IS NOT NULL)")),
            Test::Cmp(CmpOp::Eq, lit) => self.equals(v, lit),
            Test::Cmp(CmpOp::Ne, lit) => {
                self.push(&format!("(json_typeof({v}) IS NOT NULL AND NOT "));
                self.equals(v, lit);
                self.push(")");
            }
            Test::Cmp(op, Lit::Num(n)) => self.number(v, &[(*op, *n)]),
            Test::Cmp(op, Lit::Str(s)) => {
                // Unescaped text as bytes, in byte order (the literal may hold a U+0000, which
                // `text` cannot).
                let p = self.bind(SqlParam::Bytes(s.clone().into_bytes()));
                self.push(&format!(
                    "(CASE WHEN json_typeof({v}) = 'string' THEN convert_to({v} #>> '{{}}', 'UTF8') {} {p} ELSE false END)",
                    op.sql()
                ));
            }
            // Booleans and null never order.
            Test::Cmp(_, Lit::Null | Lit::Bool(_)) => self.push("false"),
            Test::In(list) => self.in_list(v, list),
            Test::Contains(lit) => {
                self.push(&format!(
                    "(CASE json_typeof({v}) WHEN 'array' THEN EXISTS (SELECT 1 FROM json_array_elements({v}) AS e (v) WHERE "
                ));
                self.equals("e.v", lit);
                self.push(")");
                // (A string PostgreSQL reads holds no U+0000, so a literal with one is not in it.)
                if let Lit::Str(s) = lit.clone().filter_nul() {
                    let p = self.bind(SqlParam::Text(s));
                    self.push(&format!(" WHEN 'string' THEN strpos({v} #>> '{{}}', {p}) > 0"));
                }
                self.push(" ELSE false END)");
            }
            // Filters with `matches` are not translated (see `to_postgres`).
            Test::Matches(_) => self.push("false"),
        }
    }

    /// JSON equality with a literal: strings, booleans and null as canonical JSON text.
    fn equals(&mut self, v: &str, lit: &Lit) {
        let text = match lit {
            Lit::Num(n) => return self.number(v, &[(CmpOp::Eq, *n)]),
            Lit::Null => "null".to_owned(),
            Lit::Bool(b) => b.to_string(),
            Lit::Str(s) => serde_json::Value::from(s.as_str()).to_string(),
        };
        let p = self.bind(SqlParam::Text(text));
        self.push(&format!("coalesce({v}::text = {p}, false)"));
    }

    fn in_list(&mut self, v: &str, list: &[Lit]) {
        let texts: Vec<String> = list
            .iter()
            .filter_map(|l| match l {
                Lit::Null => Some("null".to_owned()),
                Lit::Bool(b) => Some(b.to_string()),
                Lit::Str(s) => Some(serde_json::Value::from(s.as_str()).to_string()),
                Lit::Num(_) => None,
            })
            .collect();
        let nums: Vec<(CmpOp, Num)> =
            list.iter().filter_map(|l| if let Lit::Num(n) = l { Some((CmpOp::Eq, *n)) } else { None }).collect();
        if texts.is_empty() && nums.is_empty() {
            return self.push("false");
        }
        self.push("(");
        if !texts.is_empty() {
            let marks: Vec<String> = texts.into_iter().map(|t| self.bind(SqlParam::Text(t))).collect();
            self.push(&format!("coalesce({v}::text IN ({}), false)", marks.join(", ")));
            if !nums.is_empty() {
                self.push(" OR ");
            }
        }
        if !nums.is_empty() {
            self.number(v, &nums);
        }
        self.push(")");
    }

    /// A number at `v` compared with literals: true if it holds for any of `tests`, false if
    /// none does or the value is not a number.
    fn number(&mut self, v: &str, tests: &[(CmpOp, Num)]) {
        self.push(&format!("(CASE WHEN json_typeof({v}) = 'number' THEN "));
        let v = v.to_owned();
        self.balanced(tests.len(), " OR ", &mut |pg, i| {
            let (op, n) = tests[i];
            pg.num_cmp(&v, op, n);
        });
        self.push(" ELSE false END)");
    }

    /// `value op n` for a JSON number `v`. One written as an integer within `i64` compares as
    /// an exact decimal with the literal's exact value (a double's decimal expansion is finite);
    /// others are doubles (PostgreSQL reads them correctly rounded) compared as doubles when far
    /// from the literal, and by their text near it, as in SQLite (see `exact.rs`).
    fn num_cmp(&mut self, v: &str, op: CmpOp, n: Num) {
        let window = Window::of(n);
        let exact = match n {
            Num::Int(i) => i.to_string(),
            Num::Real(r) => exact_decimal(r),
        };
        let exact = self.bind(SqlParam::Text(exact));
        let text = format!("{v}::text");
        let sql = op.sql();
        // Far from the literal (where this is used), the double nearest an integer literal is
        // on the same side of every value as the integer.
        #[allow(clippy::cast_precision_loss)]
        let literal = self.bind(SqlParam::Real(match n {
            Num::Int(i) => i as f64,
            Num::Real(r) => r,
        }));
        // An integer beyond `i64` (serde_json writes those up to `u64::MAX`) is the double
        // nearest it, at least 2^63: above any `i64` literal, compared as a double with a double.
        let beyond = match n {
            Num::Int(_) => format!(
                "CASE WHEN {text}::numeric > 0 THEN {} ELSE {text}::double precision {sql} {literal} END",
                op.holds(std::cmp::Ordering::Greater)
            ),
            Num::Real(_) => format!("{text}::double precision {sql} {literal}"),
        };
        self.push(&format!(
            "(CASE WHEN {text} ~ '^-?[0-9]+$' THEN (CASE WHEN {text}::numeric BETWEEN -9223372036854775808 AND \
             9223372036854775807 THEN {text}::numeric {sql} {exact}::numeric ELSE {beyond} END) "
        ));
        let low = self.bind(SqlParam::Real(window.low));
        let high = self.bind(SqlParam::Real(window.high));
        self.push(&format!(
            "WHEN NOT ({text}::double precision BETWEEN {low} AND {high}) THEN {text}::double precision {sql} {literal} "
        ));
        let texts = window.texts(|d| op.holds(d.compare(n)));
        if texts.is_empty() {
            self.push("ELSE false END)");
            return;
        }
        let marks: Vec<String> = texts.into_iter().map(|t| self.bind(SqlParam::Text(t))).collect();
        self.push(&format!("ELSE replace({text}, '+', '') IN ({}) END)", marks.join(", ")));
    }

    /// `len(path)`: elements of an array, keys of an object, characters of a string.
    fn len(&mut self, v: &str, test: &Test) {
        let (op, nums): (Option<CmpOp>, Vec<Num>) = match test {
            Test::Cmp(op, Lit::Num(n)) => (Some(*op), vec![*n]),
            Test::In(list) => {
                (None, list.iter().filter_map(|l| if let Lit::Num(n) = l { Some(*n) } else { None }).collect())
            }
            _ => (None, Vec::new()),
        };
        if nums.is_empty() {
            return self.push("false");
        }
        let length = format!(
            "(CASE json_typeof({v}) WHEN 'array' THEN json_array_length({v}) \
             WHEN 'object' THEN (SELECT count(*) FROM json_object_keys({v})) \
             WHEN 'string' THEN length({v} #>> '{{}}') END)"
        );
        let marks: Vec<String> = nums.into_iter().map(|n| self.bind(num_param(n))).collect();
        match op {
            Some(op) => self.push(&format!("coalesce({length} {} {}, false)", op.sql(), marks[0])),
            None => self.push(&format!("coalesce({length} IN ({}), false)", marks.join(", "))),
        }
    }

    /// `label.KEY`: some label `KEY:value` passes the test; labels are bytes in the label
    /// table, ordered as bytes, so a key's labels are those from `KEY:` up to `KEY;`.
    fn label(&mut self, key: &str, atom: &Atom) {
        let prefix = format!("{key}:");
        let bytes = |s: String| SqlParam::Bytes(s.into_bytes());
        let range = |pg: &mut Self| {
            let lo = pg.bind(bytes(prefix.clone()));
            let hi = pg.bind(bytes(format!("{key};")));
            format!("label >= {lo} AND label < {hi}")
        };
        let prefix_chars = i64::try_from(prefix.chars().count()).unwrap_or(i64::MAX);
        let cond = match (&atom.subject, &atom.test) {
            (Subject::Path(_), Test::Exists) => range(self),
            (Subject::Path(_), Test::Cmp(CmpOp::Eq, Lit::Str(s))) => {
                format!("label = {}", self.bind(bytes(format!("{prefix}{s}"))))
            }
            (Subject::Path(_), Test::Cmp(op, Lit::Str(s))) => {
                let range = range(self);
                format!("{range} AND label {} {}", op.sql(), self.bind(bytes(format!("{prefix}{s}"))))
            }
            (Subject::Path(_), Test::In(list)) => {
                let values: Vec<String> = list
                    .iter()
                    .filter_map(|l| if let Lit::Str(s) = l { Some(format!("{prefix}{s}")) } else { None })
                    .collect();
                if values.is_empty() {
                    return self.push("false");
                }
                let marks: Vec<String> = values.into_iter().map(|s| self.bind(bytes(s))).collect();
                format!("label IN ({})", marks.join(", "))
            }
            (Subject::Path(_), Test::Contains(Lit::Str(s))) => {
                let range = range(self);
                let needle = self.bind(bytes(s.clone()));
                let from = self.bind(SqlParam::Integer(i64::try_from(prefix.len()).unwrap_or(i64::MAX) + 1));
                format!("{range} AND position({needle} IN substring(label FROM {from}::integer)) > 0")
            }
            (Subject::Len(_), Test::Cmp(_, Lit::Num(_)) | Test::In(_)) => {
                let range = range(self);
                let chars = self.bind(SqlParam::Integer(prefix_chars));
                // Characters up to the first U+0000, as the language counts them.
                let length = format!(
                    "length(convert_from(CASE WHEN position('\\x00'::bytea IN label) > 0 \
                     THEN substring(label FROM 1 FOR position('\\x00'::bytea IN label) - 1) ELSE label END, 'UTF8')) - {chars}"
                );
                let (op, nums): (&str, Vec<Num>) = match &atom.test {
                    Test::Cmp(op, Lit::Num(n)) => (op.sql(), vec![*n]),
                    Test::In(list) => {
                        ("IN", list.iter().filter_map(|l| if let Lit::Num(n) = l { Some(*n) } else { None }).collect())
                    }
                    _ => ("IN", Vec::new()),
                };
                if nums.is_empty() {
                    return self.push("false");
                }
                let marks: Vec<String> = nums.into_iter().map(|n| self.bind(num_param(n))).collect();
                if op == "IN" {
                    format!("{range} AND {length} IN ({})", marks.join(", "))
                } else {
                    format!("{range} AND {length} {op} {}", marks[0])
                }
            }
            // Label values are strings: other literals never match (and do not parse).
            _ => return self.push("false"),
        };
        let blob = self.ctx.blob;
        self.push(&format!("({blob} IN (SELECT blob FROM case_labels WHERE {cond}))"));
    }
}

impl Lit {
    /// The literal, or `Null` for a string holding a U+0000.
    fn filter_nul(self) -> Lit {
        match self {
            Lit::Str(s) if s.contains('\0') => Lit::Null,
            other => other,
        }
    }
}

fn num_param(n: Num) -> SqlParam {
    match n {
        Num::Int(i) => SqlParam::Integer(i),
        Num::Real(r) => SqlParam::Real(r),
    }
}

/// The exact value of a double in decimal (every double has a finite one: at most 1,074 digits
/// after the point).
fn exact_decimal(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".to_owned();
    }
    let text = format!("{x:.1074}");
    let text = text.trim_end_matches('0');
    text.strip_suffix('.').unwrap_or(text).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_double_is_written_as_its_exact_decimal() {
        assert_eq!(exact_decimal(0.5), "0.5");
        assert_eq!(exact_decimal(-2.0), "-2");
        assert_eq!(exact_decimal(0.1), "0.1000000000000000055511151231257827021181583404541015625");
        assert_eq!(exact_decimal(1e18 + 128.0), "1000000000000000128");
        let tiny = exact_decimal(5e-324);
        assert!(tiny.starts_with("0.000") && tiny.ends_with("5") && tiny.len() == "0.".len() + 1074, "{tiny}");
    }

    #[test]
    fn a_filter_with_matches_is_left_to_memory() {
        let filter = crate::Filter::parse(r#"input matches "^a" or id == "x""#).unwrap();
        let ctx = PgContext { body: "b.body", blob: "m.blob", facets: "f.facets" };
        assert!(filter.to_postgres(&ctx, 1).is_none());
        let filter = crate::Filter::parse(r#"id == "x" and labels contains "m""#).unwrap();
        let fragment = filter.to_postgres(&ctx, 3).unwrap();
        assert_eq!(
            fragment.sql,
            "((m.blob IN (SELECT blob FROM case_labels WHERE label = ($3::bytea)))) AND \
             (coalesce((f.facets -> ($4::text))::text = ($5::text), false))"
        );
        assert_eq!(
            fragment.params,
            [SqlParam::Bytes(b"m".to_vec()), SqlParam::Text("id".into()), SqlParam::Text("\"x\"".into())]
        );
    }

    #[test]
    fn the_conjuncts_that_read_no_json_are_kept_apart() {
        let ctx = PgContext { body: "b.body", blob: "m.blob", facets: "f.facets" };
        // Labels read no JSON; `id` reads the facets, `input` the body.
        let filter =
            crate::Filter::parse(r#"labels contains "m" and id == "x" and input == "q" and labels contains "n""#)
                .unwrap();
        let parts = filter.to_postgres_parts(&ctx, 1).unwrap();
        // Their parameters come first, so that a statement with them alone binds a prefix.
        assert_eq!(
            parts.plain.as_deref(),
            Some(
                "((m.blob IN (SELECT blob FROM case_labels WHERE label = ($1::bytea)))) AND \
                 ((m.blob IN (SELECT blob FROM case_labels WHERE label = ($2::bytea))))"
            )
        );
        assert_eq!(parts.plain_params, 2);
        assert_eq!(parts.labels, ["m", "n"]);
        let json = parts.json.unwrap();
        assert!(json.contains("f.facets -> ($3::text)") && json.contains("b.body::json -> ($5::text)"), "{json}");
        assert_eq!(parts.params.len(), 6);
        assert_eq!(parts.params[..2], [SqlParam::Bytes(b"m".to_vec()), SqlParam::Bytes(b"n".to_vec())]);
        // An `or` is one conjunct: it reads JSON if any of its sides does.
        let filter = crate::Filter::parse(r#"labels contains "m" or id == "x""#).unwrap();
        let parts = filter.to_postgres_parts(&ctx, 1).unwrap();
        assert_eq!(parts.plain, None);
        assert!(parts.json.is_some());
        // Nor does a label under `not` or in an `or` require it.
        assert!(parts.labels.is_empty());
        let filter = crate::Filter::parse(r#"not labels contains "m" and id == "x""#).unwrap();
        assert!(filter.to_postgres_parts(&ctx, 1).unwrap().labels.is_empty());
        let parts = crate::Filter::parse(r#"labels contains "m""#).unwrap().to_postgres_parts(&ctx, 1).unwrap();
        assert_eq!(parts.json, None);
        assert_eq!(parts.labels, ["m"]);
    }
}
