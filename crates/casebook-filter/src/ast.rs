//! The parsed form of a filter and its printing back into the language. Printing is normalised
//! (double quotes, a literal written first moved to the right, `not (x in L)` as `x not in L`) and
//! parses back to the same tree.

use std::cmp::Ordering;
use std::fmt;

use regex::Regex;

/// A condition tree. `And`/`Or` are n-ary so long chains do not nest.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Const(bool),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Atom(Atom),
}

/// One test on one field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Atom {
    pub subject: Subject,
    pub test: Test,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Subject {
    Path(Path),
    /// `len(path)`; only compared with numbers.
    Len(Path),
}

impl Subject {
    pub fn path(&self) -> &Path {
        match self {
            Subject::Path(p) | Subject::Len(p) => p,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Test {
    Cmp(CmpOp, Lit),
    In(Vec<Lit>),
    Contains(Lit),
    Matches(Pattern),
    Exists,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    /// The SQL spelling.
    pub fn sql(self) -> &'static str {
        match self {
            CmpOp::Ne => "<>",
            CmpOp::Eq => "=",
            other => other.as_str(),
        }
    }

    /// The operator that keeps the meaning when the operands swap sides (`1 < x` is `x > 1`).
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            same => same,
        }
    }

    pub fn is_ordering(self) -> bool {
        !matches!(self, CmpOp::Eq | CmpOp::Ne)
    }

    /// Whether `ord` (left compared with right) satisfies the operator.
    pub fn holds(self, ord: Ordering) -> bool {
        match self {
            CmpOp::Eq => ord == Ordering::Equal,
            CmpOp::Ne => ord != Ordering::Equal,
            CmpOp::Lt => ord == Ordering::Less,
            CmpOp::Le => ord != Ordering::Greater,
            CmpOp::Gt => ord == Ordering::Greater,
            CmpOp::Ge => ord != Ordering::Less,
        }
    }
}

/// A literal value of the language.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    Null,
    Bool(bool),
    Num(Num),
    Str(String),
}

/// A number as SQLite holds it: a 64-bit integer or a double. JSON integers outside the `i64`
/// range become doubles, as SQLite's JSON functions make them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Real(f64),
}

impl Num {
    pub fn of_json(n: &serde_json::Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            // u64 above i64::MAX, or a float; never NaN or infinite in serde_json.
            None => Num::Real(n.as_f64().unwrap_or(0.0)),
        }
    }

    /// Compares like SQLite: integers and doubles exactly, with no rounding of either side
    /// (`sqlite3IntFloatCompare`), so 9007199254740993 > 9007199254740992.0.
    pub fn compare(self, other: Num) -> Ordering {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a.cmp(&b),
            (Num::Real(a), Num::Real(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
            (Num::Int(i), Num::Real(r)) => int_real_cmp(i, r),
            (Num::Real(r), Num::Int(i)) => int_real_cmp(i, r).reverse(),
        }
    }
}

/// An exact comparison of an integer with a double, the way SQLite does it.
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
fn int_real_cmp(i: i64, r: f64) -> Ordering {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if r < -TWO_63 {
        return Ordering::Greater;
    }
    if r >= TWO_63 {
        return Ordering::Less;
    }
    // In range, so the truncation is exact in its integer part; ties are settled on the fraction.
    let truncated = r as i64;
    match i.cmp(&truncated) {
        Ordering::Equal => (i as f64).partial_cmp(&r).unwrap_or(Ordering::Equal),
        other => other,
    }
}

/// A regex with the text it was compiled from (the text is what SQL binds).
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    pub source: String,
    pub regex: Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

/// A field of the case and the way down into it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Path {
    pub root: Root,
    pub segs: Vec<Seg>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// The top-level fields of a case's JSON form, plus `label.KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Root {
    Id,
    Name,
    Description,
    Labels,
    /// The values of `KEY:value` labels; holds the key.
    Label(String),
    Input,
    Turns,
    Context,
    Tools,
    MemorySeeds,
    SessionId,
    AgentArgs,
    Expected,
    Metadata,
    Confidence,
    Review,
    Provenance,
}

impl Root {
    /// Every field name, in the order of the case model.
    pub const FIELDS: [Root; 16] = [
        Root::Id,
        Root::Name,
        Root::Description,
        Root::Labels,
        Root::Input,
        Root::Turns,
        Root::Context,
        Root::Tools,
        Root::MemorySeeds,
        Root::SessionId,
        Root::AgentArgs,
        Root::Expected,
        Root::Metadata,
        Root::Confidence,
        Root::Review,
        Root::Provenance,
    ];

    /// The key in the case's JSON form (`labels` for `label.KEY`).
    pub fn json_key(&self) -> &'static str {
        match self {
            Root::Id => "id",
            Root::Name => "name",
            Root::Description => "description",
            Root::Labels | Root::Label(_) => "labels",
            Root::Input => "input",
            Root::Turns => "turns",
            Root::Context => "context",
            Root::Tools => "tools",
            Root::MemorySeeds => "memory_seeds",
            Root::SessionId => "session_id",
            Root::AgentArgs => "agent_args",
            Root::Expected => "expected",
            Root::Metadata => "metadata",
            Root::Confidence => "confidence",
            Root::Review => "review",
            Root::Provenance => "provenance",
        }
    }
}

/// Whether a key can be written without quotes.
pub(crate) fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn write_key(f: &mut fmt::Formatter<'_>, key: &str) -> fmt::Result {
    if is_identifier(key) { f.write_str(key) } else { write_str_lit(f, key) }
}

/// A string in double quotes with JSON escapes, which the lexer reads back unchanged.
fn write_str_lit(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str(&serde_json::Value::from(s).to_string())
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.root {
            Root::Label(key) => {
                f.write_str("label.")?;
                write_key(f, key)?;
            }
            root => f.write_str(root.json_key())?,
        }
        for seg in &self.segs {
            match seg {
                Seg::Key(key) => {
                    f.write_str(".")?;
                    write_key(f, key)?;
                }
                Seg::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Lit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lit::Null => f.write_str("null"),
            Lit::Bool(b) => write!(f, "{b}"),
            Lit::Num(n) => write!(f, "{n}"),
            Lit::Str(s) => write_str_lit(f, s),
        }
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            // Debug keeps the `.0` of whole doubles and uses exponents for huge and tiny ones,
            // both valid JSON number syntax, so a double prints back as the same double.
            Num::Real(r) => write!(f, "{r:?}"),
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let subject = |f: &mut fmt::Formatter<'_>| match &self.subject {
            Subject::Path(p) => write!(f, "{p}"),
            Subject::Len(p) => write!(f, "len({p})"),
        };
        match &self.test {
            Test::Exists => write!(f, "exists({})", self.subject.path()),
            Test::Cmp(op, lit) => {
                subject(f)?;
                write!(f, " {} {lit}", op.as_str())
            }
            Test::In(list) => {
                subject(f)?;
                f.write_str(" in ")?;
                write_list(f, list)
            }
            Test::Contains(lit) => {
                subject(f)?;
                write!(f, " contains {lit}")
            }
            Test::Matches(p) => {
                subject(f)?;
                f.write_str(" matches ")?;
                write_str_lit(f, &p.source)
            }
        }
    }
}

fn write_list(f: &mut fmt::Formatter<'_>, list: &[Lit]) -> fmt::Result {
    f.write_str("[")?;
    for (i, lit) in list.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{lit}")?;
    }
    f.write_str("]")
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Const(b) => write!(f, "{b}"),
            Expr::Atom(atom) => write!(f, "{atom}"),
            Expr::Not(inner) => match &**inner {
                Expr::Atom(Atom { subject, test: Test::In(list) }) => {
                    match subject {
                        Subject::Path(p) => write!(f, "{p}")?,
                        Subject::Len(p) => write!(f, "len({p})")?,
                    }
                    f.write_str(" not in ")?;
                    write_list(f, list)
                }
                inner @ (Expr::Atom(Atom { test: Test::Exists, .. }) | Expr::Const(_)) => write!(f, "not {inner}"),
                inner => write!(f, "not ({inner})"),
            },
            Expr::And(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" and ")?;
                    }
                    match item {
                        Expr::Or(_) | Expr::And(_) => write!(f, "({item})")?,
                        item => write!(f, "{item}")?,
                    }
                }
                Ok(())
            }
            Expr::Or(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" or ")?;
                    }
                    match item {
                        Expr::Or(_) => write!(f, "({item})")?,
                        item => write!(f, "{item}")?,
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_doubles_compare_exactly_like_sqlite() {
        assert_eq!(Num::Int(1).compare(Num::Real(1.0)), Ordering::Equal);
        assert_eq!(Num::Int(9_007_199_254_740_993).compare(Num::Real(9_007_199_254_740_992.0)), Ordering::Greater);
        assert_eq!(Num::Int(i64::MAX).compare(Num::Real(9_223_372_036_854_775_808.0)), Ordering::Less);
        assert_eq!(Num::Int(i64::MIN).compare(Num::Real(-9_223_372_036_854_775_808.0)), Ordering::Equal);
        assert_eq!(Num::Real(-0.5).compare(Num::Int(0)), Ordering::Less);
        assert_eq!(Num::Real(2.5).compare(Num::Int(2)), Ordering::Greater);
        assert_eq!(Num::Real(-2.5).compare(Num::Int(-2)), Ordering::Less);
    }

    #[test]
    fn big_unsigned_json_integers_become_doubles() {
        let n: serde_json::Number = serde_json::from_str("18446744073709551615").unwrap();
        assert_eq!(Num::of_json(&n), Num::Real(18_446_744_073_709_551_615.0));
    }

    #[test]
    fn doubles_print_so_they_read_back_as_doubles() {
        assert_eq!(Num::Real(2.0).to_string(), "2.0");
        assert_eq!(Num::Real(1e300).to_string(), "1e300");
        assert_eq!(Num::Real(-0.000_001).to_string(), "-1e-6");
    }
}
