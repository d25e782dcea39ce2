//! In-memory evaluation, on a typed [`Case`] or on a case's JSON form. Both resolve a path to
//! borrowed [`Kind`]s and share the tests, so they cannot drift apart. The typed side reads plain
//! fields directly (no allocation for ids, labels, metadata, confidence, `expected.output`) and
//! serialises only a typed sub-struct an expression looks inside (a context item, a tool).

use std::cmp::Ordering;

use casebook_model::{Case, Expectations, MemorySeeds, Outcome, Review, Turn};
use serde_json::Value;

use crate::ast::{Atom, CmpOp, Expr, Lit, Num, Path, Root, Seg, Subject, Test};

/// What a path points at, as far as the tests care.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind<'a> {
    Null,
    Bool(bool),
    Num(Num),
    Str(&'a str),
    Array(Elems<'a>),
    /// An object and its number of keys.
    Object(usize),
}

/// The elements of a list, in whichever form the case holds them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Elems<'a> {
    Json(&'a [Value]),
    Strs(&'a [String]),
    Outcomes(&'a [Outcome]),
    /// A list of `n` objects (turns, context items, tools, seeds): only its length matters, as
    /// an object never equals a literal.
    Objects(usize),
}

impl Elems<'_> {
    fn len(self) -> usize {
        match self {
            Elems::Json(items) => items.len(),
            Elems::Strs(items) => items.len(),
            Elems::Outcomes(items) => items.len(),
            Elems::Objects(n) => n,
        }
    }

    fn any(self, mut f: impl FnMut(Kind<'_>) -> bool) -> bool {
        match self {
            Elems::Json(items) => items.iter().any(|v| f(Kind::of(v))),
            Elems::Strs(items) => items.iter().any(|s| f(Kind::Str(s))),
            Elems::Outcomes(items) => items.iter().any(|o| match o {
                Outcome::Text(s) => f(Kind::Str(s)),
                Outcome::Detailed { .. } => f(Kind::Object(2)),
            }),
            Elems::Objects(n) => (0..n).any(|_| f(Kind::Object(0))),
        }
    }
}

impl<'a> Kind<'a> {
    fn of(value: &'a Value) -> Kind<'a> {
        match value {
            Value::Null => Kind::Null,
            Value::Bool(b) => Kind::Bool(*b),
            Value::Number(n) => Kind::Num(Num::of_json(n)),
            Value::String(s) => Kind::Str(s),
            Value::Array(items) => Kind::Array(Elems::Json(items)),
            Value::Object(map) => Kind::Object(map.len()),
        }
    }
}

pub(crate) fn eval_case(expr: &Expr, case: &Case) -> bool {
    eval(expr, &CaseView(case))
}

pub(crate) fn eval_json(expr: &Expr, value: &Value) -> bool {
    eval(expr, &JsonView(value))
}

/// Finds the values at a path and says whether any satisfies `f`. A path reaches at most one
/// value, except `label.KEY`, which reaches every `KEY:value` label.
trait Resolve {
    fn any(&self, path: &Path, f: &mut dyn FnMut(Kind<'_>) -> bool) -> bool;
}

fn eval(expr: &Expr, source: &impl Resolve) -> bool {
    match expr {
        Expr::Const(b) => *b,
        Expr::Not(inner) => !eval(inner, source),
        Expr::And(items) => items.iter().all(|e| eval(e, source)),
        Expr::Or(items) => items.iter().any(|e| eval(e, source)),
        Expr::Atom(atom) => source.any(atom.subject.path(), &mut |kind| holds(atom, kind)),
    }
}

fn holds(atom: &Atom, kind: Kind<'_>) -> bool {
    match atom.subject {
        Subject::Path(_) => test_holds(&atom.test, kind),
        Subject::Len(_) => {
            let Some(n) = len_of(kind) else { return false };
            let n = Num::Int(n);
            match &atom.test {
                Test::Cmp(op, Lit::Num(lit)) => op.holds(n.compare(*lit)),
                Test::In(list) => list.iter().any(|lit| matches!(lit, Lit::Num(l) if n.compare(*l) == Ordering::Equal)),
                _ => false,
            }
        }
    }
}

/// Elements of a list, keys of an object, characters of a string. A string is counted up to its
/// first U+0000, as SQLite's `length()` counts it.
fn len_of(kind: Kind<'_>) -> Option<i64> {
    let n = match kind {
        Kind::Array(items) => items.len(),
        Kind::Object(n) => n,
        Kind::Str(s) => s.chars().take_while(|c| *c != '\0').count(),
        _ => return None,
    };
    i64::try_from(n).ok()
}

fn test_holds(test: &Test, kind: Kind<'_>) -> bool {
    match test {
        Test::Exists => true,
        Test::Cmp(CmpOp::Eq, lit) => equals(kind, lit),
        Test::Cmp(CmpOp::Ne, lit) => !equals(kind, lit),
        Test::Cmp(op, lit) => match (kind, lit) {
            (Kind::Num(a), Lit::Num(b)) => op.holds(a.compare(*b)),
            (Kind::Str(a), Lit::Str(b)) => op.holds(a.cmp(b.as_str())),
            _ => false,
        },
        Test::In(list) => list.iter().any(|lit| equals(kind, lit)),
        Test::Contains(lit) => match (kind, lit) {
            (Kind::Array(items), lit) => items.any(|item| equals(item, lit)),
            (Kind::Str(s), Lit::Str(part)) => s.contains(part.as_str()),
            _ => false,
        },
        Test::Matches(pattern) => matches!(kind, Kind::Str(s) if pattern.regex.is_match(s)),
    }
}

/// JSON equality with a literal: numbers by value, nothing equal across types.
fn equals(kind: Kind<'_>, lit: &Lit) -> bool {
    match (kind, lit) {
        (Kind::Null, Lit::Null) => true,
        (Kind::Bool(a), Lit::Bool(b)) => a == *b,
        (Kind::Num(a), Lit::Num(b)) => a.compare(*b) == Ordering::Equal,
        (Kind::Str(a), Lit::Str(b)) => a == b,
        _ => false,
    }
}

/// The value of a `KEY:value` label for `key` (which never contains `:`).
fn label_value<'l>(label: &'l str, key: &str) -> Option<&'l str> {
    label.strip_prefix(key)?.strip_prefix(':')
}

/// A place inside a case that a path step can start from.
#[derive(Clone, Copy)]
enum Node<'a> {
    Val(&'a Value),
    Map(&'a casebook_model::Map),
    Slice(&'a [Value]),
    Strs(&'a [String]),
    Str(&'a str),
}

impl<'a> Node<'a> {
    fn step(self, seg: &Seg) -> Option<Node<'a>> {
        match (self, seg) {
            (Node::Val(Value::Object(map)) | Node::Map(map), Seg::Key(key)) => map.get(key).map(Node::Val),
            (Node::Val(Value::Array(items)), Seg::Index(i)) => items.get(*i).map(Node::Val),
            (Node::Slice(items), Seg::Index(i)) => items.get(*i).map(Node::Val),
            (Node::Strs(items), Seg::Index(i)) => items.get(*i).map(|s| Node::Str(s)),
            _ => None,
        }
    }

    fn kind(self) -> Kind<'a> {
        match self {
            Node::Val(value) => Kind::of(value),
            Node::Map(map) => Kind::Object(map.len()),
            Node::Slice(items) => Kind::Array(Elems::Json(items)),
            Node::Strs(items) => Kind::Array(Elems::Strs(items)),
            Node::Str(s) => Kind::Str(s),
        }
    }
}

/// Walks `segs` down from `node` and tests what is there.
fn at(node: Option<Node<'_>>, segs: &[Seg], f: &mut dyn FnMut(Kind<'_>) -> bool) -> bool {
    let mut node = match node {
        Some(node) => node,
        None => return false,
    };
    for seg in segs {
        match node.step(seg) {
            Some(next) => node = next,
            None => return false,
        }
    }
    f(node.kind())
}

/// Walks `segs` in the JSON form of a typed sub-struct (`json` serialises it).
fn via_json(json: Result<Value, serde_json::Error>, segs: &[Seg], f: &mut dyn FnMut(Kind<'_>) -> bool) -> bool {
    json.is_ok_and(|json| at(Some(Node::Val(&json)), segs, f))
}

/// A list of typed objects: its length without serialising, an element through its JSON form.
fn objects<T>(
    items: Option<&[T]>,
    segs: &[Seg],
    f: &mut dyn FnMut(Kind<'_>) -> bool,
    json: fn(&T) -> Result<Value, serde_json::Error>,
) -> bool {
    let Some(items) = items else { return false };
    match segs.split_first() {
        None => f(Kind::Array(Elems::Objects(items.len()))),
        Some((Seg::Index(i), rest)) => items.get(*i).is_some_and(|item| via_json(json(item), rest, f)),
        Some((Seg::Key(_), _)) => false,
    }
}

fn turns(turns: &[Turn], segs: &[Seg], f: &mut dyn FnMut(Kind<'_>) -> bool) -> bool {
    match segs {
        [] => f(Kind::Array(Elems::Objects(turns.len()))),
        [Seg::Index(i), rest @ ..] => {
            let Some(turn) = turns.get(*i) else { return false };
            match rest {
                [] => f(Kind::Object(2)),
                [Seg::Key(key), rest @ ..] => match key.as_str() {
                    "role" => at(Some(Node::Str(turn.role.as_str())), rest, f),
                    "content" => at(Some(Node::Str(&turn.content)), rest, f),
                    _ => false,
                },
                [Seg::Index(_), ..] => false,
            }
        }
        [Seg::Key(_), ..] => false,
    }
}

fn outcomes(items: &[Outcome], segs: &[Seg], f: &mut dyn FnMut(Kind<'_>) -> bool) -> bool {
    match segs {
        [] => f(Kind::Array(Elems::Outcomes(items))),
        [Seg::Index(i), rest @ ..] => match items.get(*i) {
            Some(Outcome::Text(text)) => at(Some(Node::Str(text)), rest, f),
            Some(detailed) => via_json(serde_json::to_value(detailed), rest, f),
            None => false,
        },
        [Seg::Key(_), ..] => false,
    }
}

/// `expected`, whose named fields are typed and whose other keys are in `extra`. (An `extra` key
/// that repeats a named field has no single JSON form; deserialising never produces one.)
fn expected(e: &Expectations, segs: &[Seg], f: &mut dyn FnMut(Kind<'_>) -> bool) -> bool {
    let (key, rest) = match segs {
        [] => {
            if e.is_empty() {
                return false;
            }
            let named = [
                e.output.is_some(),
                e.per_turn.is_some(),
                e.outcomes.is_some(),
                e.acceptable.is_some(),
                e.rubric.is_some(),
                e.rubric_path.is_some(),
                e.rubric_vars.is_some(),
                e.trajectory.is_some(),
                e.tool_calls.is_some(),
                e.governance.is_some(),
            ];
            let keys = named.iter().filter(|present| **present).count() + e.extra.len();
            return f(Kind::Object(keys));
        }
        [Seg::Key(key), rest @ ..] => (key.as_str(), rest),
        [Seg::Index(_), ..] => return false,
    };
    let node = match key {
        "output" => e.output.as_ref().map(Node::Val),
        "per_turn" => e.per_turn.as_deref().map(Node::Slice),
        "acceptable" => e.acceptable.as_deref().map(Node::Slice),
        "outcomes" => return e.outcomes.as_deref().is_some_and(|items| outcomes(items, rest, f)),
        "rubric" => e.rubric.as_deref().map(Node::Str),
        "rubric_path" => e.rubric_path.as_deref().map(Node::Str),
        "rubric_vars" => e.rubric_vars.as_ref().map(Node::Map),
        "trajectory" => e.trajectory.as_ref().map(Node::Val),
        "tool_calls" => e.tool_calls.as_ref().map(Node::Val),
        "governance" => e.governance.as_ref().map(Node::Val),
        other => e.extra.get(other).map(Node::Val),
    };
    at(node, rest, f)
}

fn review_str(review: Review) -> &'static str {
    match review {
        Review::Draft => "draft",
        Review::Reviewed => "reviewed",
        Review::Rejected => "rejected",
    }
}

struct CaseView<'a>(&'a Case);

impl Resolve for CaseView<'_> {
    fn any(&self, path: &Path, f: &mut dyn FnMut(Kind<'_>) -> bool) -> bool {
        let case = self.0;
        let task = &case.task;
        let segs = path.segs.as_slice();
        match &path.root {
            Root::Id => at(Some(Node::Str(&case.id)), segs, f),
            Root::Name => at(case.name.as_deref().map(Node::Str), segs, f),
            Root::Description => at(case.description.as_deref().map(Node::Str), segs, f),
            Root::SessionId => at(task.session_id.as_deref().map(Node::Str), segs, f),
            Root::Labels => at(case.labels.as_deref().map(Node::Strs), segs, f),
            Root::Label(key) => {
                segs.is_empty()
                    && case.labels.iter().flatten().filter_map(|l| label_value(l, key)).any(|v| f(Kind::Str(v)))
            }
            Root::Input => at(Some(Node::Val(&task.input)), segs, f),
            Root::Turns => task.turns.as_deref().is_some_and(|items| turns(items, segs, f)),
            Root::Context => objects(task.context.as_deref(), segs, f, |item| serde_json::to_value(item)),
            Root::Tools => objects(task.tools.as_deref(), segs, f, |item| serde_json::to_value(item)),
            Root::MemorySeeds => match &task.memory_seeds {
                None => false,
                Some(MemorySeeds::Path(file)) => at(Some(Node::Str(file)), segs, f),
                Some(MemorySeeds::Inline(seeds)) => objects(Some(seeds), segs, f, |item| serde_json::to_value(item)),
                Some(seeds @ MemorySeeds::File { .. }) => via_json(serde_json::to_value(seeds), segs, f),
            },
            Root::AgentArgs => at(task.agent_args.as_ref().map(Node::Map), segs, f),
            Root::Expected => expected(&case.expected, segs, f),
            Root::Metadata => at(case.metadata.as_ref().map(Node::Map), segs, f),
            Root::Confidence => match case.confidence {
                None => false,
                // serde_json writes a NaN or infinite double as `null`.
                Some(c) => segs.is_empty() && f(if c.is_finite() { Kind::Num(Num::Real(c)) } else { Kind::Null }),
            },
            Root::Review => at(case.review.map(|r| Node::Str(review_str(r))), segs, f),
            Root::Provenance => case.provenance.as_ref().is_some_and(|p| via_json(serde_json::to_value(p), segs, f)),
        }
    }
}

struct JsonView<'a>(&'a Value);

impl Resolve for JsonView<'_> {
    fn any(&self, path: &Path, f: &mut dyn FnMut(Kind<'_>) -> bool) -> bool {
        let Some(object) = self.0.as_object() else { return false };
        match &path.root {
            Root::Label(key) => {
                path.segs.is_empty()
                    && match object.get("labels") {
                        Some(Value::Array(items)) => items
                            .iter()
                            .filter_map(Value::as_str)
                            .filter_map(|l| label_value(l, key))
                            .any(|v| f(Kind::Str(v))),
                        _ => false,
                    }
            }
            root => at(object.get(root.json_key()).map(Node::Val), &path.segs, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::Filter;

    fn full() -> serde_json::Value {
        json!({
            "id": "c1",
            "name": "Refund request",
            "labels": ["math", "category:RCA", "category:perf", "level:hard", "a:b:c"],
            "input": "Please REFUND me",
            "turns": [{"role": "user", "content": "hi"}, {"role": "hitl", "content": "é日本"}],
            "context": [{"type": "log", "content": "boom"}],
            "expected": {
                "output": {"answer": 4, "list": [1, "1", null]},
                "outcomes": ["should ask", {"outcome": "gate one", "role": "gate"}],
                "metrics": {"f1": 0.5}
            },
            "metadata": {
                "difficulty": "hard", "n": 1, "r": 1.0, "flag": true, "nil": null, "list": [1, 2.5, "x"],
                "obj": {"a": 1}, "odd key": {"x": 1}, "uni": "é日本", "empty": ""
            },
            "confidence": 0.8,
            "review": "reviewed"
        })
    }

    fn minimal() -> serde_json::Value {
        json!({"id": "c2", "input": {"q": 1}})
    }

    /// Each expression's result on the full case and on the minimal one, typed and as JSON.
    fn check(table: &[(&str, bool, bool)]) {
        let cases = [full(), minimal()];
        let typed: Vec<casebook_model::Case> =
            cases.iter().map(|c| serde_json::from_value(c.clone()).unwrap()).collect();
        for (src, on_full, on_minimal) in table {
            let filter = Filter::parse(src).unwrap_or_else(|e| panic!("{}", e.render(src)));
            for ((json, case), expected) in cases.iter().zip(&typed).zip([on_full, on_minimal]) {
                assert_eq!(filter.matches(case), *expected, "{src} on {}", case.id);
                assert_eq!(filter.matches_json(json), *expected, "{src} on {} as JSON", case.id);
            }
        }
    }

    #[test]
    fn a_missing_field_fails_every_test_until_negated() {
        check(&[
            ("metadata.nope == 1", false, false),
            ("metadata.nope != 1", false, false),
            ("not (metadata.nope == 1)", true, true),
            ("metadata.nope in [1]", false, false),
            ("metadata.nope not in [1]", true, true),
            ("confidence != 0.5", true, false),
            ("name != \"x\"", true, false),
            ("review != \"draft\"", true, false),
            ("len(metadata.nope) == 0", false, false),
            ("not (len(metadata.nope) > 0)", true, true),
            ("metadata.nope contains 1", false, false),
            ("metadata.nope matches \"\"", false, false),
            ("input.q.deeper == 1", false, false),
            ("metadata.list.x == 1", false, false),
            ("metadata.obj[0] == 1", false, false),
            ("turns[5].role == \"user\"", false, false),
        ]);
    }

    #[test]
    fn equality_is_json_equality() {
        check(&[
            ("metadata.n == 1.0", true, false),
            ("metadata.r == 1", true, false),
            ("metadata.n in [1.0, \"x\"]", true, false),
            ("metadata.n == \"1\"", false, false),
            ("metadata.n != \"1\"", true, false),
            ("metadata.list == 1", false, false),
            ("metadata.list != 1", true, false),
            ("metadata.obj != \"a\"", true, false),
            ("metadata.nil == null", true, false),
            ("metadata.nil != null", false, false),
            ("metadata.nil != 1", true, false),
            ("exists(metadata.nil)", true, false),
            ("metadata.flag == true", true, false),
            ("metadata.flag == 1", false, false),
            ("metadata.flag != 1", true, false),
            ("metadata.n == true", false, false),
            ("metadata.\"odd key\".x == 1", true, false),
            ("input.q == 1", false, true),
            ("review == \"reviewed\"", true, false),
            ("id in [\"c2\", \"c3\"]", false, true),
        ]);
    }

    #[test]
    fn ordering_needs_two_numbers_or_two_strings() {
        check(&[
            ("metadata.difficulty > \"abc\"", true, false),
            ("metadata.difficulty < 3", false, false),
            ("metadata.n < \"a\"", false, false),
            ("metadata.uni > \"z\"", true, false),
            ("confidence >= 0.8", true, false),
            ("0.8 <= confidence", true, false),
            ("confidence > 0.8", false, false),
            ("metadata.list > 0", false, false),
            ("metadata.flag > 0", false, false),
            ("metadata.nil < 1", false, false),
        ]);
    }

    #[test]
    fn contains_looks_in_lists_and_strings() {
        check(&[
            ("name contains \"Refund\"", true, false),
            ("name contains \"refund\"", false, false),
            ("metadata.difficulty contains \"\"", true, false),
            ("metadata.list contains \"x\"", true, false),
            ("metadata.list contains 2.5", true, false),
            ("expected.output.list contains \"1\"", true, false),
            ("expected.output.list contains 1.0", true, false),
            ("expected.output.list contains null", true, false),
            ("expected.output.list contains true", false, false),
            ("metadata.obj contains \"a\"", false, false),
            ("metadata.n contains 1", false, false),
            ("labels contains \"math\"", true, false),
            ("labels contains \"category\"", false, false),
            ("expected.outcomes contains \"should ask\"", true, false),
        ]);
    }

    #[test]
    fn matches_applies_to_strings_only() {
        check(&[
            ("input matches \"(?i)refund\"", true, false),
            ("input matches \"^refund\"", false, false),
            ("metadata.n matches \"1\"", false, false),
            ("metadata.list matches \"x\"", false, false),
            ("turns[1].content matches \"^é.本$\"", true, false),
        ]);
    }

    #[test]
    fn label_key_passes_if_any_of_its_labels_does() {
        check(&[
            ("label.category == \"RCA\"", true, false),
            ("label.category == \"perf\"", true, false),
            ("label.category != \"RCA\"", true, false),
            ("label.level != \"hard\"", false, false),
            ("label.category in [\"x\", \"perf\"]", true, false),
            ("label.category not in [\"RCA\"]", false, true),
            ("label.a == \"b:c\"", true, false),
            ("label.category < \"Q\"", false, false),
            ("label.category > \"Q\"", true, false),
            ("label.math == \"\"", false, false),
            ("exists(label.category)", true, false),
            ("exists(label.missing)", false, false),
            ("label.missing not in [\"x\"]", true, true),
            ("len(label.category) == 4", true, false),
            ("len(label.category) == 3", true, false),
            ("len(label.category) == 5", false, false),
            ("label.category matches \"^p\"", true, false),
            ("label.category contains \"CA\"", true, false),
        ]);
    }

    #[test]
    fn len_counts_elements_keys_and_characters() {
        check(&[
            ("len(turns) >= 2", true, false),
            ("len(turns) == 2", true, false),
            ("len(metadata.uni) == 3", true, false),
            ("len(metadata.obj) == 1", true, false),
            ("len(metadata.list) == 3", true, false),
            ("len(metadata.n) == 1", false, false),
            ("len(metadata.empty) == 0", true, false),
            ("len(expected) == 3", true, false),
            ("len(labels) == 5", true, false),
            ("len(input) in [1, 16]", true, true),
            ("len(context) == 1.0", true, false),
            ("len(metadata) > 9", true, false),
        ]);
    }

    #[test]
    fn typed_parts_read_like_their_json() {
        check(&[
            ("turns[1].role == \"hitl\"", true, false),
            ("turns[1].content == \"é日本\"", true, false),
            ("exists(turns[1])", true, false),
            ("context[0].type == \"log\"", true, false),
            ("context[0].content == \"boom\"", true, false),
            ("expected.outcomes[1].role == \"gate\"", true, false),
            ("expected.outcomes[1].outcome matches \"gate\"", true, false),
            ("expected.outcomes[0] == \"should ask\"", true, false),
            ("expected.metrics.f1 == 0.5", true, false),
            ("expected.output.answer == 4", true, false),
            ("exists(expected)", true, false),
            ("exists(input)", true, true),
            ("true", true, true),
            ("false", false, false),
        ]);
    }

    #[test]
    fn a_non_finite_confidence_is_null_as_in_its_json() {
        let mut case: casebook_model::Case = serde_json::from_value(minimal()).unwrap();
        case.confidence = Some(f64::NAN);
        let json = serde_json::to_value(&case).unwrap();
        for (src, expected) in
            [("confidence >= 0 or confidence < 0", false), ("confidence != 1", true), ("exists(confidence)", true)]
        {
            let filter = Filter::parse(src).unwrap();
            assert_eq!(filter.matches(&case), expected, "{src}");
            assert_eq!(filter.matches_json(&json), expected, "{src} as JSON");
        }
    }
}
