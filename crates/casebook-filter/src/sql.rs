//! Translation to an SQLite `WHERE` condition over a case's JSON body, with the same meaning as
//! in-memory evaluation. Every value and JSON path is a bound `?` parameter; the SQL text holds
//! only the caller's column expressions and fixed SQL.
//!
//! Each test becomes an expression that is exactly 0 or 1, never NULL, so `NOT` keeps the
//! "missing field" rules: a value's JSON type is checked with `json_type` before `json_extract`
//! reads it (which turns `true` into 1 and a missing path into NULL).

use crate::ast::{Atom, CmpOp, Expr, Lit, Num, Path, Root, Seg, Subject, Test};
use crate::exact::Window;

/// Where the case bodies are in the query the fragment goes into.
#[derive(Debug, Clone, Copy)]
pub struct SqlContext<'a> {
    /// The SQL expression of the case's JSON body (text), e.g. `"b.body"`.
    pub body: &'a str,
    /// The label table, if the query may use it; without it labels are read from the body.
    pub labels: Option<LabelIndex<'a>>,
    /// The SQL expression of the case's facets (see [`crate::facets_json`]), if the query has
    /// them: paths into the facet fields are read there instead of in the (larger) body.
    pub facets: Option<&'a str>,
    /// The SQL expression of a JSON object whose `memory_seeds` is the case's as a [`Case`]
    /// serialises it, if the stored body keeps a seed file's document elsewhere (the stores
    /// keep each document once and leave a reference in the body): paths into `memory_seeds`
    /// are read there instead of in the body. `None` when the body holds them.
    ///
    /// [`Case`]: casebook_model::Case
    pub seeds: Option<&'a str>,
    /// The SQL expression of a JSON object whose `tools` is the case's as a [`Case`]
    /// serialises it, if the stored body keeps a tool's snapshot file's document elsewhere (as
    /// seed files'): paths into `tools` are read there, so that they see the recorded answers,
    /// not the reference. `None` when the body holds them.
    ///
    /// [`Case`]: casebook_model::Case
    pub tools: Option<&'a str>,
}

/// A table `case_labels(label TEXT, blob INTEGER, PRIMARY KEY (label, blob)) WITHOUT ROWID`
/// holding one row per distinct label string of each body.
#[derive(Debug, Clone, Copy)]
pub struct LabelIndex<'a> {
    /// The SQL expression of the body's row id, the `blob` of `case_labels`, e.g. `"m.blob"`.
    pub blob_expr: &'a str,
}

/// An SQL condition and its parameters, in the order of the `?` placeholders.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlFragment {
    pub sql: String,
    pub params: Vec<SqlParam>,
}

/// A value bound to a `?`.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlParam {
    Integer(i64),
    Real(f64),
    Text(String),
    /// Bytes (`bytea`; the PostgreSQL translation binds labels so).
    Bytes(Vec<u8>),
}

impl From<Num> for SqlParam {
    fn from(n: Num) -> Self {
        match n {
            Num::Int(i) => SqlParam::Integer(i),
            Num::Real(r) => SqlParam::Real(r),
        }
    }
}

pub(crate) fn to_sqlite(expr: &Expr, ctx: &SqlContext<'_>) -> SqlFragment {
    let mut sql = Sql { ctx: *ctx, source: ctx.body, text: String::new(), params: Vec::new() };
    sql.expr(expr);
    SqlFragment { sql: sql.text, params: sql.params }
}

/// The JSON path of a filter path, keys always quoted (`$."metadata"."odd key"[0]`).
pub(crate) fn json_path(path: &Path) -> String {
    let mut out = String::from("$");
    push_key(&mut out, path.root.json_key());
    for seg in &path.segs {
        match seg {
            Seg::Key(key) => push_key(&mut out, key),
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// SQLite reads a quoted path key with JSON escapes, so a JSON string literal is one.
fn push_key(out: &mut String, key: &str) {
    out.push('.');
    out.push_str(&serde_json::Value::from(key).to_string());
}

struct Sql<'a> {
    ctx: SqlContext<'a>,
    /// Where the JSON functions of the current test read: the body or the facets.
    source: &'a str,
    text: String,
    params: Vec<SqlParam>,
}

impl<'a> Sql<'a> {
    fn push(&mut self, sql: &str) {
        self.text.push_str(sql);
    }

    fn param(&mut self, param: SqlParam) {
        self.text.push('?');
        self.params.push(param);
    }

    fn params_list(&mut self, params: impl IntoIterator<Item = SqlParam>) {
        self.push("(");
        for (i, param) in params.into_iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.param(param);
        }
        self.push(")");
    }

    /// `name(<source>, ?)` with the path bound: the source is the facets when the current
    /// test's path is in them, else the body.
    fn json_fn(&mut self, name: &str, path: &str) {
        self.push(name);
        self.push("(");
        self.text.push_str(self.source);
        self.push(", ");
        self.param(SqlParam::Text(path.to_owned()));
        self.push(")");
    }

    /// `<source> -> ?`: the JSON text at the path, a number exactly as written in the source.
    fn json_text(&mut self, path: &str) {
        self.text.push_str(self.source);
        self.push(" -> ");
        self.param(SqlParam::Text(path.to_owned()));
    }

    fn balanced(&mut self, n: usize, joiner: &str, item: &mut dyn FnMut(&mut Self, usize)) {
        if n == 0 {
            return self.push(if joiner == " AND " { "1" } else { "0" });
        }
        balanced(self, 0..n, joiner, &mut |sql, text| sql.push(text), item);
    }

    fn expr(&mut self, expr: &Expr) {
        match expr {
            Expr::Const(b) => self.push(if *b { "1" } else { "0" }),
            Expr::Not(inner) => {
                self.push("NOT (");
                self.expr(inner);
                self.push(")");
            }
            Expr::And(items) | Expr::Or(items) => {
                let joiner = if matches!(expr, Expr::And(_)) { " AND " } else { " OR " };
                self.balanced(items.len(), joiner, &mut |sql, i| sql.expr(&items[i]));
            }
            Expr::Atom(atom) => self.atom(atom),
        }
    }

    fn atom(&mut self, atom: &Atom) {
        let path = atom.subject.path();
        self.source = match (self.ctx.facets, self.ctx.seeds, self.ctx.tools) {
            (Some(facets), _, _) if crate::facets::in_facets(&path.root) => facets,
            (_, Some(seeds), _) if path.root == Root::MemorySeeds => seeds,
            (_, _, Some(tools)) if path.root == Root::Tools => tools,
            _ => self.ctx.body,
        };
        if let Root::Label(key) = &path.root {
            return self.label(key, atom);
        }
        if let (Some(index), Root::Labels, [], Subject::Path(_), Test::Contains(Lit::Str(label))) =
            (self.ctx.labels, &path.root, path.segs.as_slice(), &atom.subject, &atom.test)
        {
            self.push("(");
            self.push(index.blob_expr);
            self.push(" IN (SELECT blob FROM case_labels WHERE label = ");
            self.param(SqlParam::Text(label.clone()));
            self.push("))");
            return;
        }
        let jp = json_path(path);
        match &atom.subject {
            Subject::Path(_) => self.test(&jp, &atom.test),
            Subject::Len(_) => self.len(&jp, &atom.test),
        }
    }

    fn test(&mut self, jp: &str, test: &Test) {
        match test {
            Test::Exists => {
                self.push("(");
                self.json_fn("json_type", jp);
                self.push(" IS NOT NULL)");
            }
            Test::Cmp(CmpOp::Eq, lit) => self.equals(jp, lit),
            Test::Cmp(CmpOp::Ne, lit) => {
                self.push("(");
                self.json_fn("json_type", jp);
                self.push(" IS NOT NULL AND NOT ");
                self.equals(jp, lit);
                self.push(")");
            }
            Test::Cmp(op, Lit::Num(n)) => self.number(jp, &[(*op, *n)]),
            Test::Cmp(op, lit) => self.typed(jp, lit, &|sql: &mut Self, lit: &Lit| {
                sql.push(" ");
                sql.push(op.sql());
                sql.push(" ");
                sql.param(scalar(lit));
            }),
            Test::In(list) => self.in_list(jp, list),
            Test::Contains(lit) => {
                self.push("(CASE ");
                self.json_fn("json_type", jp);
                self.push(" WHEN 'array' THEN EXISTS (SELECT 1 FROM ");
                self.json_fn("json_each", jp);
                self.push(" AS e WHERE ");
                match lit {
                    Lit::Null => self.push("e.type = 'null'"),
                    Lit::Bool(true) => self.push("e.type = 'true'"),
                    Lit::Bool(false) => self.push("e.type = 'false'"),
                    Lit::Num(n) => {
                        self.push("e.type IN ('integer', 'real') AND ");
                        let source = self.source;
                        self.num_cmp(
                            &|sql: &mut Self| sql.push("e.type = 'integer'"),
                            &|sql: &mut Self| sql.push("e.value"),
                            &|sql: &mut Self| {
                                sql.push(source);
                                sql.push(" -> e.fullkey");
                            },
                            CmpOp::Eq,
                            *n,
                        );
                    }
                    Lit::Str(s) => {
                        self.push("e.type = 'text' AND e.value = ");
                        self.param(SqlParam::Text(s.clone()));
                    }
                }
                self.push(")");
                if let Lit::Str(s) = lit {
                    self.push(" WHEN 'text' THEN instr(");
                    self.json_fn("json_extract", jp);
                    self.push(", ");
                    self.param(SqlParam::Text(s.clone()));
                    self.push(") > 0");
                }
                self.push(" ELSE 0 END)");
            }
            Test::Matches(pattern) => {
                self.push("(CASE ");
                self.json_fn("json_type", jp);
                self.push(" WHEN 'text' THEN ");
                self.json_fn("json_extract", jp);
                self.push(" REGEXP ");
                self.param(SqlParam::Text(pattern.source.clone()));
                self.push(" ELSE 0 END)");
            }
        }
    }

    /// JSON equality with a literal.
    fn equals(&mut self, jp: &str, lit: &Lit) {
        let json_type = match lit {
            Lit::Null => "null",
            Lit::Bool(true) => "true",
            Lit::Bool(false) => "false",
            Lit::Num(n) => return self.number(jp, &[(CmpOp::Eq, *n)]),
            Lit::Str(_) => {
                return self.typed(jp, lit, &|sql: &mut Self, lit: &Lit| {
                    sql.push(" = ");
                    sql.param(scalar(lit));
                });
            }
        };
        self.push("(");
        self.json_fn("json_type", jp);
        self.push(" IS '");
        self.push(json_type);
        self.push("')");
    }

    /// `CASE` on the value's JSON type: if it is of the literal's type (a number or a string),
    /// `json_extract(...)` followed by what `rest` writes, else 0. Booleans and null never order.
    fn typed(&mut self, jp: &str, lit: &Lit, rest: &dyn Fn(&mut Self, &Lit)) {
        match lit {
            Lit::Num(_) => {
                self.push("(CASE WHEN ");
                self.json_fn("json_type", jp);
                self.push(" IN ('integer', 'real') THEN ");
            }
            Lit::Str(_) => {
                self.push("(CASE ");
                self.json_fn("json_type", jp);
                self.push(" WHEN 'text' THEN ");
            }
            Lit::Null | Lit::Bool(_) => return self.push("0"),
        }
        self.json_fn("json_extract", jp);
        rest(self, lit);
        self.push(" ELSE 0 END)");
    }

    fn in_list(&mut self, jp: &str, list: &[Lit]) {
        let strs: Vec<SqlParam> = list
            .iter()
            .filter_map(|l| if let Lit::Str(s) = l { Some(SqlParam::Text(s.clone())) } else { None })
            .collect();
        let nums: Vec<(CmpOp, Num)> =
            list.iter().filter_map(|l| if let Lit::Num(n) = l { Some((CmpOp::Eq, *n)) } else { None }).collect();
        let mut types: Vec<&str> = Vec::new();
        for (lit, json_type) in [(Lit::Null, "null"), (Lit::Bool(true), "true"), (Lit::Bool(false), "false")] {
            if list.contains(&lit) {
                types.push(json_type);
            }
        }
        if strs.is_empty() && nums.is_empty() && types.is_empty() {
            return self.push("0");
        }
        self.push("(");
        let mut first = true;
        let mut or = |sql: &mut Self| {
            if !std::mem::take(&mut first) {
                sql.push(" OR ");
            }
        };
        if !strs.is_empty() {
            or(self);
            self.push("CASE ");
            self.json_fn("json_type", jp);
            self.push(" WHEN 'text' THEN ");
            self.json_fn("json_extract", jp);
            self.push(" IN ");
            self.params_list(strs);
            self.push(" ELSE 0 END");
        }
        if !nums.is_empty() {
            or(self);
            self.number(jp, &nums);
        }
        for json_type in types {
            or(self);
            self.json_fn("json_type", jp);
            self.push(" IS '");
            self.push(json_type);
            self.push("'");
        }
        self.push(")");
    }

    /// A number at `jp` compared with literals: 1 if it holds for any of `tests`, 0 if none does
    /// or the value is not a number.
    fn number(&mut self, jp: &str, tests: &[(CmpOp, Num)]) {
        self.push("(CASE WHEN ");
        self.json_fn("json_type", jp);
        self.push(" IN ('integer', 'real') THEN ");
        self.balanced(tests.len(), " OR ", &mut |sql, i| {
            let (op, n) = tests[i];
            sql.num_cmp(
                &|sql: &mut Self| {
                    sql.json_fn("json_type", jp);
                    sql.push(" = 'integer'");
                },
                &|sql: &mut Self| sql.json_fn("json_extract", jp),
                &|sql: &mut Self| sql.json_text(jp),
                op,
                n,
            );
        });
        self.push(" ELSE 0 END)");
    }

    /// `value op n` for a number that `is_integer` says is written as an integer, whose SQL value
    /// `value` writes and whose JSON text `text` writes. Integers (which SQLite reads exactly up
    /// to 2^63) and reals SQLite reads far from `n` compare as SQL values; a real near `n` is
    /// told by its text (see `exact.rs`).
    fn num_cmp(
        &mut self,
        is_integer: &dyn Fn(&mut Self),
        value: &dyn Fn(&mut Self),
        text: &dyn Fn(&mut Self),
        op: CmpOp,
        n: Num,
    ) {
        let window = Window::of(n);
        self.push("(CASE WHEN ");
        is_integer(self);
        self.push(" OR NOT (");
        value(self);
        self.push(" BETWEEN ");
        self.param(SqlParam::Real(window.low));
        self.push(" AND ");
        self.param(SqlParam::Real(window.high));
        self.push(") THEN ");
        value(self);
        self.push(" ");
        self.push(op.sql());
        self.push(" ");
        self.param(n.into());
        let texts = window.texts(|d| op.holds(d.compare(n)));
        if texts.is_empty() {
            self.push(" ELSE 0 END)");
            return;
        }
        self.push(" ELSE replace(");
        text(self);
        self.push(", '+', '') IN ");
        self.params_list(texts.into_iter().map(SqlParam::Text));
        self.push(" END)");
    }

    /// `len(path)`: elements of an array, keys of an object, characters of a string.
    fn len(&mut self, jp: &str, test: &Test) {
        let nums = |lits: &[Lit]| -> Vec<SqlParam> {
            lits.iter().filter_map(|l| if let Lit::Num(n) = l { Some((*n).into()) } else { None }).collect()
        };
        let (op, params) = match test {
            Test::Cmp(op, lit @ Lit::Num(_)) => (Some(*op), nums(std::slice::from_ref(lit))),
            Test::In(list) => (None, nums(list)),
            _ => (None, Vec::new()),
        };
        if params.is_empty() {
            return self.push("0");
        }
        self.push("IFNULL((CASE ");
        self.json_fn("json_type", jp);
        self.push(" WHEN 'array' THEN ");
        self.json_fn("json_array_length", jp);
        self.push(" WHEN 'object' THEN (SELECT count(*) FROM ");
        self.json_fn("json_each", jp);
        self.push(") WHEN 'text' THEN length(");
        self.json_fn("json_extract", jp);
        self.push(") END)");
        match op {
            Some(op) => {
                self.push(" ");
                self.push(op.sql());
                self.push(" ");
                self.params.extend(params);
                self.text.push('?');
            }
            None => {
                self.push(" IN ");
                self.params_list(params);
            }
        }
        self.push(", 0)");
    }

    /// `label.KEY`: some label `KEY:value` passes the test. Labels of a key are the strings from
    /// `KEY:` (inclusive) to `KEY;` (exclusive) in byte order, and comparing `KEY:a` with `KEY:b`
    /// orders like `a` with `b`, so every test is a condition on whole label strings, which the
    /// label table's primary key serves.
    fn label(&mut self, key: &str, atom: &Atom) {
        let prefix = format!("{key}:");
        let with_prefix = |s: &str| SqlParam::Text(format!("{prefix}{s}"));
        let range = vec![SqlParam::Text(prefix.clone()), SqlParam::Text(format!("{key};"))];
        // `@` stands for the label column until the table is known.
        let in_range = "@ >= ? AND @ < ?";
        let prefix_bytes = i64::try_from(prefix.len()).unwrap_or(i64::MAX);
        let prefix_chars = i64::try_from(prefix.chars().count()).unwrap_or(i64::MAX);
        let (cond, params): (String, Vec<SqlParam>) = match (&atom.subject, &atom.test) {
            (Subject::Path(_), Test::Exists) => (in_range.into(), range),
            (Subject::Path(_), Test::Cmp(CmpOp::Eq, Lit::Str(s))) => ("@ = ?".into(), vec![with_prefix(s)]),
            (Subject::Path(_), Test::Cmp(op, Lit::Str(s))) => {
                (format!("{in_range} AND @ {} ?", op.sql()), [range, vec![with_prefix(s)]].concat())
            }
            (Subject::Path(_), Test::In(list)) => {
                let values: Vec<SqlParam> =
                    list.iter().filter_map(|l| if let Lit::Str(s) = l { Some(with_prefix(s)) } else { None }).collect();
                if values.is_empty() {
                    return self.push("0");
                }
                (format!("@ IN ({})", vec!["?"; values.len()].join(", ")), values)
            }
            (Subject::Path(_), Test::Contains(Lit::Str(s))) => (
                format!("{in_range} AND instr(substr(CAST(@ AS BLOB), ?), CAST(? AS BLOB)) > 0"),
                [range, vec![SqlParam::Integer(prefix_bytes + 1), SqlParam::Text(s.clone())]].concat(),
            ),
            (Subject::Path(_), Test::Matches(pattern)) => (
                format!("{in_range} AND CAST(substr(CAST(@ AS BLOB), ?) AS TEXT) REGEXP ?"),
                [range, vec![SqlParam::Integer(prefix_bytes + 1), SqlParam::Text(pattern.source.clone())]].concat(),
            ),
            (Subject::Len(_), Test::Cmp(op, Lit::Num(n))) => (
                format!("{in_range} AND length(@) - ? {} ?", op.sql()),
                [range, vec![SqlParam::Integer(prefix_chars), (*n).into()]].concat(),
            ),
            (Subject::Len(_), Test::In(list)) => {
                let values: Vec<SqlParam> =
                    list.iter().filter_map(|l| if let Lit::Num(n) = l { Some((*n).into()) } else { None }).collect();
                if values.is_empty() {
                    return self.push("0");
                }
                let placeholders = vec!["?"; values.len()].join(", ");
                (
                    format!("{in_range} AND length(@) - ? IN ({placeholders})"),
                    [range, vec![SqlParam::Integer(prefix_chars)], values].concat(),
                )
            }
            // Label values are strings: other literals never match (and do not parse).
            _ => return self.push("0"),
        };
        match self.ctx.labels {
            Some(index) => {
                self.push("(");
                self.push(index.blob_expr);
                self.push(" IN (SELECT blob FROM case_labels WHERE ");
                self.push(&cond.replace('@', "label"));
            }
            None => {
                let jp = json_path(&Path { root: Root::Labels, segs: Vec::new() });
                self.push("(");
                self.json_fn("json_type", &jp);
                self.push(" IS 'array' AND EXISTS (SELECT 1 FROM ");
                self.json_fn("json_each", &jp);
                self.push(" AS e WHERE e.type = 'text' AND ");
                self.push(&cond.replace('@', "e.value"));
            }
        }
        self.params.extend(params);
        self.push("))");
    }
}

/// Items `range` joined by `joiner` as a balanced tree of parentheses, written into `out` by
/// `push` and `item`: a chain of thousands of terms stays a few dozen levels deep, far below
/// SQLite's expression-depth limit (1000) and PostgreSQL's stack. `range` is not empty.
pub(crate) fn balanced<W>(
    out: &mut W,
    range: std::ops::Range<usize>,
    joiner: &str,
    push: &mut dyn FnMut(&mut W, &str),
    item: &mut dyn FnMut(&mut W, usize),
) {
    if range.len() == 1 {
        return item(out, range.start);
    }
    let mid = range.start + range.len() / 2;
    push(out, "(");
    balanced(out, range.start..mid, joiner, push, item);
    push(out, joiner);
    balanced(out, mid..range.end, joiner, push, item);
    push(out, ")");
}

/// The parameter of a number or string literal.
fn scalar(lit: &Lit) -> SqlParam {
    match lit {
        Lit::Num(n) => (*n).into(),
        Lit::Str(s) => SqlParam::Text(s.clone()),
        // Callers only pass numbers and strings.
        Lit::Null | Lit::Bool(_) => SqlParam::Integer(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Filter;

    const PLAIN: SqlContext<'static> =
        SqlContext { body: "b.body", labels: None, facets: None, seeds: None, tools: None };
    const INDEXED: SqlContext<'static> = SqlContext {
        body: "b.body",
        labels: Some(LabelIndex { blob_expr: "m.blob" }),
        facets: None,
        seeds: None,
        tools: None,
    };

    fn sql(src: &str, ctx: &SqlContext<'_>) -> SqlFragment {
        let fragment = Filter::parse(src).unwrap().to_sqlite(ctx);
        assert_eq!(fragment.sql.matches('?').count(), fragment.params.len(), "{}", fragment.sql);
        fragment
    }

    fn text(s: &str) -> SqlParam {
        SqlParam::Text(s.to_owned())
    }

    #[test]
    fn paths_into_memory_seeds_read_the_seeds_expression_and_only_those() {
        let ctx = SqlContext { seeds: Some("seeds(b.body)"), facets: Some("f.facets"), ..PLAIN };
        assert_eq!(
            sql(r#"memory_seeds.content.owner == "bob""#, &ctx).sql,
            "(CASE json_type(seeds(b.body), ?) WHEN 'text' THEN json_extract(seeds(b.body), ?) = ? ELSE 0 END)"
        );
        let other = sql(r#"input == "x" and metadata.k == 1"#, &ctx).sql;
        assert!(!other.contains("seeds("), "{other}");
        assert!(other.contains("f.facets") && other.contains("b.body"), "{other}");
    }

    #[test]
    fn labels_use_the_label_table_when_there_is_one() {
        assert_eq!(
            sql(r#"labels contains "math""#, &INDEXED),
            SqlFragment {
                sql: "(m.blob IN (SELECT blob FROM case_labels WHERE label = ?))".into(),
                params: vec![text("math")],
            }
        );
        assert_eq!(
            sql(r#"label.category == "RCA""#, &INDEXED),
            SqlFragment {
                sql: "(m.blob IN (SELECT blob FROM case_labels WHERE label = ?))".into(),
                params: vec![text("category:RCA")],
            }
        );
        assert_eq!(
            sql(r#"label.category in ["RCA", "perf"]"#, &INDEXED),
            SqlFragment {
                sql: "(m.blob IN (SELECT blob FROM case_labels WHERE label IN (?, ?)))".into(),
                params: vec![text("category:RCA"), text("category:perf")],
            }
        );
        assert_eq!(
            sql(r#"exists(label.category)"#, &INDEXED),
            SqlFragment {
                sql: "(m.blob IN (SELECT blob FROM case_labels WHERE label >= ? AND label < ?))".into(),
                params: vec![text("category:"), text("category;")],
            }
        );
    }

    #[test]
    fn labels_are_read_from_the_body_without_the_table() {
        assert_eq!(
            sql(r#"label.category == "RCA""#, &PLAIN),
            SqlFragment {
                sql: "(json_type(b.body, ?) IS 'array' AND EXISTS (SELECT 1 FROM json_each(b.body, ?) AS e \
                  WHERE e.type = 'text' AND e.value = ?))"
                    .into(),
                params: vec![text("$.\"labels\""), text("$.\"labels\""), text("category:RCA")],
            }
        );
        assert_eq!(
            sql(r#"labels contains "math""#, &PLAIN).params,
            [text("$.\"labels\""), text("$.\"labels\""), text("math"), text("$.\"labels\""), text("math"),]
        );
    }

    #[test]
    fn types_are_checked_before_values_are_read() {
        let confidence = sql("confidence >= 0.8", &PLAIN);
        assert!(
            confidence.sql.starts_with(
                "(CASE WHEN json_type(b.body, ?) IN ('integer', 'real') THEN (CASE WHEN json_type(b.body, ?) = \
                 'integer' OR NOT (json_extract(b.body, ?) BETWEEN ? AND ?) THEN json_extract(b.body, ?) >= ? \
                 ELSE replace(b.body -> ?, '+', '') IN (?, "
            ),
            "{}",
            confidence.sql
        );
        // Near the literal, a real is told by its text: 0.8 and the doubles above it.
        assert!(confidence.params.contains(&text("0.8")) && confidence.params.contains(&text("0.8000000000000002")));
        assert!(!confidence.params.contains(&text("0.7999999999999999")));
        assert_eq!(
            sql("metadata.flag == true", &PLAIN),
            SqlFragment {
                sql: "(json_type(b.body, ?) IS 'true')".into(),
                params: vec![text("$.\"metadata\".\"flag\"")],
            }
        );
        assert!(
            sql("not (metadata.x != 1)", &PLAIN)
                .sql
                .starts_with("NOT ((json_type(b.body, ?) IS NOT NULL AND NOT (CASE")
        );
        assert_eq!(sql("metadata.x in []", &PLAIN).sql, "0");
        assert_eq!(sql("true and false", &PLAIN).sql, "(1 AND 0)");
    }

    #[test]
    fn long_chains_are_balanced_trees() {
        let src = (0..8).map(|i| format!("id == \"{i}\"")).collect::<Vec<_>>().join(" or ");
        let sql = sql(&src, &PLAIN).sql;
        // Three levels of parentheses around eight tests (each test has two of its own), where a
        // chain would nest seven.
        let depth = sql.chars().scan(0i32, |d, c| {
            *d += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            Some(*d)
        });
        assert_eq!(depth.max(), Some(3 + 2), "{sql}");
        assert_eq!(sql.matches(" OR ").count(), 7);
    }

    #[test]
    fn paths_and_values_are_bound_never_spliced() {
        let src = r#"metadata."x'); DROP TABLE blobs; --".y[3] == "'; DELETE FROM blobs; --" or name matches "'""#;
        let fragment = sql(src, &PLAIN);
        assert!(!fragment.sql.contains("DROP") && !fragment.sql.contains("DELETE") && !fragment.sql.contains('"'));
        assert!(fragment.params.contains(&text(r#"$."metadata"."x'); DROP TABLE blobs; --"."y"[3]"#)));
        assert!(fragment.params.contains(&text("'; DELETE FROM blobs; --")));
        // SQLite reads a quoted path key with JSON escapes.
        assert_eq!(
            json_path(&Path { root: Root::Input, segs: vec![Seg::Key("a\"b\\c\nd".into()), Seg::Index(0)] }),
            r#"$."input"."a\"b\\c\nd"[0]"#
        );
    }
}
