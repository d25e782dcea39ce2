//! What is known of a case's shape before seeing one (SPEC §2): which top-level fields exist,
//! which are strings, numbers, lists or objects, and which hold free JSON. The parser walks a path
//! through these shapes and checks each test against the shape it reaches, so that a filter that
//! could never match (`confidence == "high"`, `labels == "x"`) is an error, not an empty result.

use crate::ast::{CmpOp, Lit, Path, Root, Subject, Test};

#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// Free JSON: anything goes.
    Any,
    /// A string, optionally from a closed set of values.
    Str(Option<&'static [&'static str]>),
    Num,
    Bool,
    StrList,
    List(&'static Shape),
    /// An object with free keys.
    Map,
    Record(&'static Record),
}

#[derive(Debug)]
pub(crate) struct Record {
    /// How messages name one, e.g. "a turn".
    what: &'static str,
    fields: &'static [(&'static str, Shape)],
    /// Whether other keys may appear (flattened `extra` maps).
    open: bool,
}

static ANY: Shape = Shape::Any;
static ROLES: &[&str] = &["user", "hitl", "system"];
static REVIEWS: &[&str] = &["draft", "reviewed", "rejected"];
static TURN: Shape = Shape::Record(&Record {
    what: "a turn",
    fields: &[("role", Shape::Str(Some(ROLES))), ("content", Shape::Str(None))],
    open: false,
});
static CONTEXT_ITEM: Shape = Shape::Record(&Record {
    what: "a context item",
    fields: &[
        ("type", Shape::Str(None)),
        ("source", Shape::Str(None)),
        ("content", Shape::Any),
        ("metadata", Shape::Map),
    ],
    open: false,
});
static TOOL: Shape = Shape::Record(&Record {
    what: "a tool",
    // `responses` is a list inline or a snapshot file's `{file, content}`; `default` is `empty`
    // or an object: free JSON to a filter (`len(tools[0].responses) > 2`).
    fields: &[
        ("name", Shape::Str(None)),
        ("description", Shape::Str(None)),
        ("parameters", Shape::Any),
        ("responses", Shape::Any),
        ("default", Shape::Any),
    ],
    open: true,
});
static EXPECTED: Record = Record {
    what: "`expected`",
    fields: &[
        ("output", Shape::Any),
        ("per_turn", Shape::List(&ANY)),
        ("outcomes", Shape::List(&ANY)),
        ("acceptable", Shape::List(&ANY)),
        ("rubric", Shape::Str(None)),
        ("rubric_path", Shape::Str(None)),
        ("rubric_vars", Shape::Map),
        ("trajectory", Shape::Any),
        ("tool_calls", Shape::Any),
        ("governance", Shape::Any),
    ],
    open: true,
};
static PROVENANCE: Record = Record {
    what: "`provenance`",
    fields: &[("format", Shape::Str(None)), ("id_derived", Shape::Bool), ("layout", Shape::Map)],
    open: true,
};

pub(crate) fn root_shape(root: &Root) -> Shape {
    match root {
        Root::Id | Root::Name | Root::Description | Root::SessionId | Root::Label(_) => Shape::Str(None),
        Root::Review => Shape::Str(Some(REVIEWS)),
        Root::Labels => Shape::StrList,
        Root::Input | Root::MemorySeeds => Shape::Any,
        Root::Turns => Shape::List(&TURN),
        Root::Context => Shape::List(&CONTEXT_ITEM),
        Root::Tools => Shape::List(&TOOL),
        Root::AgentArgs | Root::Metadata => Shape::Map,
        Root::Expected => Shape::Record(&EXPECTED),
        Root::Provenance => Shape::Record(&PROVENANCE),
        Root::Confidence => Shape::Num,
    }
}

/// A reason a filter can never match, and where to point.
#[derive(Debug)]
pub(crate) struct Problem {
    pub at: Where,
    pub message: String,
    pub hint: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Where {
    Path,
    Operator,
    /// The n-th literal of the test (0 for a single one).
    Literal(usize),
}

fn problem(at: Where, message: String) -> Problem {
    Problem { at, message, hint: None }
}

impl Problem {
    fn hint(mut self, hint: impl Into<String>) -> Problem {
        self.hint = Some(hint.into());
        self
    }
}

impl Shape {
    fn describe(self) -> &'static str {
        match self {
            Shape::Any => "any value",
            Shape::Str(_) => "a string",
            Shape::Num => "a number",
            Shape::Bool => "true or false",
            Shape::StrList | Shape::List(_) => "a list",
            Shape::Map | Shape::Record(_) => "an object",
        }
    }

    /// The shape one step down, or why that step can never find anything. `path` is the path so
    /// far, for messages: printed only for one, so a walk down a long path stays linear.
    pub fn step_key(self, key: &str, path: &Path) -> Result<Shape, Problem> {
        match self {
            Shape::Any => Ok(Shape::Any),
            Shape::Map => Ok(Shape::Any),
            Shape::Record(record) => match record.fields.iter().find(|(name, _)| *name == key) {
                Some((_, shape)) => Ok(*shape),
                None if record.open => Ok(Shape::Any),
                None => {
                    let names: Vec<&str> = record.fields.iter().map(|(name, _)| *name).collect();
                    let p = problem(Where::Path, format!("unknown field `{key}` in {}", record.what));
                    Err(match did_you_mean(key, &names) {
                        Some(near) => p.hint(format!("did you mean `{near}`?")),
                        None => p.hint(format!("its fields are {}", backticked(&names))),
                    })
                }
            },
            Shape::StrList | Shape::List(_) => {
                Err(problem(Where::Path, format!("`{path}` is a list, it has no field `{key}`"))
                    .hint(format!("pick an element first, e.g. `{path}[0]`")))
            }
            other => Err(problem(Where::Path, format!("`{path}` is {}, it has no field `{key}`", other.describe()))),
        }
    }

    pub fn step_index(self, path: &Path) -> Result<Shape, Problem> {
        match self {
            Shape::Any => Ok(Shape::Any),
            Shape::StrList => Ok(Shape::Str(None)),
            Shape::List(elem) => Ok(*elem),
            Shape::Map => Err(problem(Where::Path, format!("`{path}` is an object, not a list"))
                .hint(format!("use a key, e.g. `{path}.name` or `{path}.\"0\"`"))),
            other => Err(problem(Where::Path, format!("`{path}` is {}, not a list", other.describe()))),
        }
    }

    /// Whether the test can ever hold on a value of this shape. `path` is the subject's path as
    /// written (without `len(...)`).
    pub fn check(self, subject: &Subject, test: &Test, path: &str) -> Result<(), Problem> {
        if let Subject::Len(_) = subject {
            return self.check_len(test, path);
        }
        match test {
            Test::Exists => Ok(()),
            Test::Cmp(op, lit) => {
                if op.is_ordering() && matches!(lit, Lit::Bool(_) | Lit::Null) {
                    return Err(
                        problem(Where::Literal(0), format!("`{}` cannot be ordered", lit)).hint("use `==` or `!=`")
                    );
                }
                self.check_whole(path, Some(lit), *op)?;
                self.check_literal(lit, 0, *op, path)
            }
            Test::In(list) => {
                self.check_whole(path, list.first(), CmpOp::Eq)?;
                list.iter().enumerate().try_for_each(|(i, lit)| self.check_literal(lit, i, CmpOp::Eq, path))
            }
            Test::Contains(lit) => self.check_contains(lit, path),
            Test::Matches(_) => match self {
                Shape::Any | Shape::Str(_) => Ok(()),
                other => Err(problem(
                    Where::Operator,
                    format!("`matches` needs a string, but `{path}` is {}", other.describe()),
                )),
            },
        }
    }

    /// Lists and objects are never equal to, or ordered against, a single value.
    fn check_whole(self, path: &str, lit: Option<&Lit>, op: CmpOp) -> Result<(), Problem> {
        let what = match self {
            Shape::StrList | Shape::List(_) => "a list",
            Shape::Map | Shape::Record(_) => "an object",
            _ => return Ok(()),
        };
        let p = problem(Where::Operator, format!("`{path}` is {what}, never {} a single value", relation(op)));
        Err(match (self, lit) {
            (Shape::StrList, Some(lit @ Lit::Str(_))) => p.hint(format!("use `{path} contains {lit}`")),
            (Shape::StrList | Shape::List(_), _) => {
                p.hint(format!("compare `len({path})` or an element, e.g. `{path}[0]`"))
            }
            (Shape::Record(record), _) => match record.fields.first() {
                Some((field, _)) => p.hint(format!("compare one of its fields, e.g. `{path}.{field}`")),
                None => p,
            },
            _ => p.hint(format!("compare one of its keys, e.g. `{path}.KEY`")),
        })
    }

    fn check_literal(self, lit: &Lit, i: usize, op: CmpOp, path: &str) -> Result<(), Problem> {
        let expected = match (self, lit) {
            (Shape::Any, _)
            | (Shape::Str(_), Lit::Str(_))
            | (Shape::Num, Lit::Num(_))
            | (Shape::Bool, Lit::Bool(_))
            | (Shape::StrList | Shape::List(_) | Shape::Map | Shape::Record(_), _) => None,
            (expected, _) => Some(expected),
        };
        if let Some(expected) = expected {
            let p = problem(Where::Literal(i), format!("`{path}` is {}, never {}", expected.describe(), lit_kind(lit)));
            return Err(match (expected, lit) {
                (_, Lit::Null) => p.hint(format!("to select cases without it, use `not exists({path})`")),
                (Shape::Str(_), lit) => p.hint(format!("write it in quotes: `\"{lit}\"`")),
                (Shape::Num, Lit::Str(s)) if s.trim().parse::<f64>().is_ok() => {
                    p.hint(format!("write the number without quotes: `{}`", s.trim()))
                }
                (Shape::Bool, Lit::Str(s)) if s == "true" || s == "false" => {
                    p.hint(format!("write it without quotes: `{s}`"))
                }
                _ => p,
            });
        }
        if let (Shape::Str(Some(values)), Lit::Str(s), CmpOp::Eq | CmpOp::Ne) = (self, lit, op) {
            if !values.contains(&s.as_str()) {
                let p = problem(Where::Literal(i), format!("`{path}` is never `{s}`"));
                return Err(match did_you_mean(s, values) {
                    Some(near) => p.hint(format!("did you mean `{near}`?")),
                    None => p.hint(format!("it is one of {}", backticked(values))),
                });
            }
        }
        Ok(())
    }

    fn check_contains(self, lit: &Lit, path: &str) -> Result<(), Problem> {
        match (self, lit) {
            (Shape::Any, _) | (Shape::Str(_) | Shape::StrList, Lit::Str(_)) => Ok(()),
            (Shape::Str(_), lit) => Err(problem(
                Where::Literal(0),
                format!("`{path}` is a string, so `contains` looks for text, never {}", lit_kind(lit)),
            )
            .hint(format!("write it in quotes: `\"{lit}\"`"))),
            (Shape::StrList, lit) => {
                let p = problem(Where::Literal(0), format!("`{path}` holds strings, never {}", lit_kind(lit)));
                Err(if matches!(lit, Lit::Null) { p } else { p.hint(format!("write it in quotes: `\"{lit}\"`")) })
            }
            (Shape::List(elem), _) => match elem {
                Shape::Record(record) => {
                    let field = record.fields.first().map_or("KEY", |(name, _)| name);
                    Err(problem(
                        Where::Operator,
                        format!("the elements of `{path}` are objects, never equal to a single value"),
                    )
                    .hint(format!("compare a field of one, e.g. `{path}[0].{field}`")))
                }
                _ => Ok(()),
            },
            (Shape::Map | Shape::Record(_), _) => {
                Err(problem(Where::Operator, format!("`contains` needs a list or a string, but `{path}` is an object"))
                    .hint(format!("to test for a key, use `exists({path}.KEY)`")))
            }
            (other, _) => Err(problem(
                Where::Operator,
                format!("`contains` needs a list or a string, but `{path}` is {}", other.describe()),
            )),
        }
    }

    fn check_len(self, test: &Test, path: &str) -> Result<(), Problem> {
        if let Shape::Num | Shape::Bool = self {
            return Err(problem(
                Where::Path,
                format!("`len` needs a list, an object or a string, but `{path}` is {}", self.describe()),
            ));
        }
        let lits: &[Lit] = match test {
            Test::Cmp(_, lit) => std::slice::from_ref(lit),
            Test::In(list) => list,
            // The parser accepts only comparisons and `in` after `len(...)`.
            _ => &[],
        };
        for (i, lit) in lits.iter().enumerate() {
            if !matches!(lit, Lit::Num(_)) {
                return Err(problem(Where::Literal(i), format!("`len({path})` is a number, never {}", lit_kind(lit))));
            }
        }
        Ok(())
    }
}

fn relation(op: CmpOp) -> &'static str {
    if op.is_ordering() { "ordered against" } else { "equal to" }
}

fn lit_kind(lit: &Lit) -> String {
    match lit {
        Lit::Null => "`null`".into(),
        Lit::Bool(b) => format!("`{b}`"),
        Lit::Num(_) => "a number".into(),
        Lit::Str(_) => "a string".into(),
    }
}

pub(crate) fn backticked(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

/// The closest of `known` to `word`, if it is close enough to be a likely typo.
pub(crate) use casebook_model::did_you_mean;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_finds_typos_only() {
        let fields = ["input", "id", "turns", "metadata"];
        assert_eq!(did_you_mean("inptu", &fields), Some("input"));
        assert_eq!(did_you_mean("metdata", &fields), Some("metadata"));
        assert_eq!(did_you_mean("aproved", &["draft", "reviewed", "rejected"]), None);
        assert_eq!(did_you_mean("reviwed", &["draft", "reviewed", "rejected"]), Some("reviewed"));
        assert_eq!(did_you_mean("xyz", &fields), None);
        assert_eq!(did_you_mean("id", &fields), None);
    }

    #[test]
    fn lists_of_names_read_as_a_sentence() {
        assert_eq!(backticked(&["a"]), "`a`");
        assert_eq!(backticked(&["a", "b", "c"]), "`a`, `b` or `c`");
    }
}
