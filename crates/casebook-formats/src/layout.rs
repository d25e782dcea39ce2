//! Round-trip bookkeeping shared by the format mappers: unknown keys of a source record are
//! lifted into the case's `metadata` (so they are kept and filterable), and the record's
//! `provenance.layout` remembers which keys those were, so that the same format's writer puts
//! them back where they came from.

use casebook_model::{Case, Code, Map, Provenance};
use serde_json::Value;

use crate::pointer::Ptr;
use crate::source::{Cx, Fields, did_you_mean};

/// Layout keys used by every format.
const TOP_LEVEL: &str = "top_level";
const METADATA_ABSENT: &str = "metadata_absent";

/// Moves the keys no mapper took into `metadata`, recording them in `layout`.
///
/// A key that looks like a misspelt `known` one gets a warning: it was probably meant as that.
pub fn lift_unknown(
    cx: &mut Cx<'_>,
    fields: &Fields<'_, '_>,
    ptr: &Ptr<'_>,
    metadata: &mut Option<Map>,
    layout: &mut Map,
    known: &[&str],
) {
    for entry in fields.rest() {
        if let Some(k) = did_you_mean(&entry.key, known) {
            cx.report(
                Code::SuspiciousField,
                entry.key_offset,
                &ptr.key(&entry.key),
                format!("unknown field `{}` is kept in `metadata`", casebook_model::excerpt(&entry.key)),
            )
            .hint = Some(format!("did you mean `{k}`?"));
        }
    }
    lift(cx, fields.rest(), ptr, metadata, layout, TOP_LEVEL);
}

/// Moves `entries` into `metadata`, recording their keys under `layout[layout_key]`.
pub fn lift<'e, 's: 'e>(
    cx: &mut Cx<'_>,
    entries: impl Iterator<Item = &'e crate::node::Entry<'s>>,
    ptr: &Ptr<'_>,
    metadata: &mut Option<Map>,
    layout: &mut Map,
    layout_key: &str,
) {
    let mut lifted = Vec::new();
    for entry in entries {
        let entry_ptr = ptr.key(&entry.key);
        let Some(value) = cx.json(&entry.value, &entry_ptr) else { continue };
        let target = metadata.get_or_insert_with(|| {
            layout.insert(METADATA_ABSENT.into(), Value::Bool(true));
            Map::new()
        });
        if target.contains_key(entry.key.as_ref()) {
            let d = cx.report(
                Code::FieldConflict,
                entry.key_offset,
                &entry_ptr,
                format!(
                    "key `{}` is both a top-level field and a key of `metadata`",
                    casebook_model::excerpt(&entry.key)
                ),
            );
            d.hint = Some("rename one of them: unknown top-level fields are kept in `metadata`".into());
            continue;
        }
        target.insert(entry.key.to_string(), value);
        lifted.push(Value::String(entry.key.to_string()));
    }
    if !lifted.is_empty() {
        layout.insert(layout_key.into(), Value::Array(lifted));
    }
}

/// The layout a writer of `format` may use: only one recorded by a reader of that format.
pub fn layout_for<'c>(case: &'c Case, format: &str) -> Option<&'c Map> {
    let provenance = case.provenance.as_ref()?;
    (provenance.format.as_deref() == Some(format)).then_some(&provenance.layout)
}

/// Puts metadata keys back at the top level of a written object, where the reader lifted them
/// from; a key the format itself uses (`known`) or one already written is lost instead.
pub fn put_back(out: &mut Map, keys: impl IntoIterator<Item = (String, Value)>, known: &[&str], lost: &mut Lost) {
    for (key, value) in keys {
        if known.contains(&key.as_str()) || out.contains_key(&key) {
            lost.push(format!("metadata.{key}"));
        } else {
            out.insert(key, value);
        }
    }
}

/// Splits a case's metadata back into the lifted top-level keys and the rest.
pub fn unlift(metadata: Option<&Map>, layout: Option<&Map>) -> (Vec<(String, Value)>, Option<Map>) {
    let (top, _, rest) = unlift_two(metadata, layout, "");
    (top, rest)
}

/// Like [`unlift`], also splitting out the keys recorded under `layout[second_key]`.
#[allow(clippy::type_complexity)]
pub fn unlift_two(
    metadata: Option<&Map>,
    layout: Option<&Map>,
    second_key: &str,
) -> (Vec<(String, Value)>, Vec<(String, Value)>, Option<Map>) {
    let Some(metadata) = metadata else { return (Vec::new(), Vec::new(), None) };
    let keys = |name: &str| -> Vec<&str> {
        layout
            .and_then(|l| l.get(name))
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let lifted = keys(TOP_LEVEL);
    let second = keys(second_key);
    if lifted.is_empty() && second.is_empty() {
        return (Vec::new(), Vec::new(), Some(metadata.clone()));
    }
    let mut top = Vec::new();
    let mut other = Vec::new();
    let mut rest = Map::new();
    for (key, value) in metadata {
        if lifted.contains(&key.as_str()) {
            top.push((key.clone(), value.clone()));
        } else if second.contains(&key.as_str()) {
            other.push((key.clone(), value.clone()));
        } else {
            rest.insert(key.clone(), value.clone());
        }
    }
    let absent = layout.and_then(|l| l.get(METADATA_ABSENT)).is_some_and(|v| v == &Value::Bool(true));
    let rest = if rest.is_empty() && absent { None } else { Some(rest) };
    (top, other, rest)
}

pub fn flag(layout: Option<&Map>, key: &str) -> bool {
    layout.and_then(|l| l.get(key)).is_some_and(|v| v == &Value::Bool(true))
}

pub fn text<'l>(layout: Option<&'l Map>, key: &str) -> Option<&'l str> {
    layout.and_then(|l| l.get(key)).and_then(Value::as_str)
}

/// The case's id: the one the source gives, else one derived from its task (`true`: derived,
/// never written back to a format whose rows had none).
pub fn id_or_derived(id: Option<String>, task: &casebook_model::Task) -> Option<(String, bool)> {
    match id {
        Some(id) => Some((id, false)),
        None => Some((derived_id(task)?, true)),
    }
}

/// The id derived from a task ([`casebook_canon::derived_case_id`]), by the shortcut for a task
/// that is only a string input when it is one.
pub fn derived_id(task: &casebook_model::Task) -> Option<String> {
    // Every field is named: a new one must be considered here.
    if let casebook_model::Task {
        input: Value::String(input),
        turns: None,
        context: None,
        tools: None,
        memory_seeds: None,
        session_id: None,
        agent_args: None,
    } = task
    {
        return Some(input_ids::derived(input));
    }
    casebook_canon::derived_case_id(task).ok()
}

/// The derived ids of the inputs this thread met lately. Datasets repeat their popular prompts
/// (a third of a realistic file's rows), and an id is a pure function of the input: a repeated
/// one is looked up instead of hashed again. The cache is per thread (no lock), direct-mapped
/// (an input takes the place of the one before it in its slot) and bounded: [`SLOTS`] inputs of
/// at most [`LONGEST`] bytes each.
///
/// [`SLOTS`]: input_ids::SLOTS
/// [`LONGEST`]: input_ids::LONGEST
mod input_ids {
    use std::cell::RefCell;
    use std::hash::{BuildHasher, Hasher};

    pub const SLOTS: usize = 4096;
    pub const LONGEST: usize = 2048;

    /// An input and its derived id.
    type Known = Option<(Box<str>, String)>;

    thread_local! {
        static SEEN: RefCell<Vec<Known>> = const { RefCell::new(Vec::new()) };
    }

    /// [`casebook_canon::derived_case_id_of_input`] of `input`.
    pub fn derived(input: &str) -> String {
        if input.len() > LONGEST {
            return casebook_canon::derived_case_id_of_input(input);
        }
        let mut hasher = foldhash::fast::FixedState::with_seed(0x696e_7075_7469_6473).build_hasher();
        hasher.write(input.as_bytes());
        // The high bits of the hash pick the slot (the low ones are the weaker in foldhash's
        // fast hash).
        let slot = (hasher.finish() >> 52) as usize % SLOTS;
        SEEN.with_borrow_mut(|seen| {
            if seen.is_empty() {
                seen.resize(SLOTS, None);
            }
            match &mut seen[slot] {
                Some((known, id)) if **known == *input => id.clone(),
                entry => {
                    let id = casebook_canon::derived_case_id_of_input(input);
                    *entry = Some((input.into(), id.clone()));
                    id
                }
            }
        })
    }
}

/// The fields of [`Case`] that tell apart the cases of one task whose rows have no id: the case
/// without its id, its task and its provenance (where it came from and how it was written is not
/// what it is, so a file's JSON lines, CSV and JSON document give one id). Named and skipped as
/// `Case` names and skips them.
#[derive(serde::Serialize)]
struct Rest<'c> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'c String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'c String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<&'c Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<&'c casebook_model::Expectations>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'c Map>,
    #[serde(skip_serializing_if = "Option::is_none")]
    confidence: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    review: Option<casebook_model::Review>,
}

impl<'c> Rest<'c> {
    fn of(case: &'c Case) -> Self {
        // Every field is named: a new one must be considered here.
        let Case { id: _, name, description, labels, task: _, expected, metadata, confidence, review, provenance: _ } =
            case;
        Rest {
            name: name.as_ref(),
            description: description.as_ref(),
            labels: labels.as_ref(),
            expected: (!expected.is_empty()).then_some(expected),
            metadata: metadata.as_ref(),
            confidence: *confidence,
            review: *review,
        }
    }
}

/// What tells apart the cases of one task whose rows have no id ([`casebook_canon::Variant`]).
pub fn derived_variant(case: &Case) -> casebook_canon::Variant {
    // A rest with no canonical form (a number out of range: such a case cannot be stored
    // either) is the default variant: such rows of a task are numbered, and ids stay unique.
    casebook_canon::Variant::of(&Rest::of(case)).unwrap_or_default()
}

/// A number that tells wholly identical rows of a task apart from the others: a hash of the
/// rest of the case, equal exactly when `serde_json` writes the same text for it
/// ([`crate::shape`]), without the canonical form (which only the rows of a repeated task need,
/// for their ids). Two rows equal but for the order of their keys get different numbers; they
/// then take different variant-derived ids all the same, so ids stay unique. `buf` is scratch
/// space, reused from one case to the next by the caller: the shape is written whole and hashed
/// in one call. The hash is an in-memory one ([`crate::ids::Hash64::Rest`]), never stored.
pub fn rest_key(case: &Case, buf: &mut Vec<u8>) -> u64 {
    use std::hash::Hasher;
    crate::shape::write(&Rest::of(case), buf);
    let mut hasher = crate::ids::Hash64::Rest.hasher();
    hasher.write(buf);
    hasher.finish()
}

pub fn provenance(format: &str, id_derived: bool, layout: Map) -> Option<Provenance> {
    Some(Provenance {
        format: Some(format.into()),
        id_derived,
        layout,
        extra: Map::new(),
        row: None,
        id_made: id_derived,
    })
}

/// Collects what a writer could not express in its format.
#[derive(Debug, Default)]
pub struct Lost(pub Vec<std::borrow::Cow<'static, str>>);

impl Lost {
    pub fn push(&mut self, field: impl Into<std::borrow::Cow<'static, str>>) {
        self.0.push(field.into());
    }

    pub fn check<T>(&mut self, field: &'static str, value: &Option<T>) {
        if value.is_some() {
            self.push(field);
        }
    }

    /// Notes each of `parts` the case has: the writer's format has no place for them.
    pub fn parts(&mut self, case: &Case, parts: &[Part]) {
        for part in parts {
            if *part == Part::ExpectedExtra {
                // Named one by one: `expected.assert`, `expected.metrics`.
                for key in case.expected.extra.keys() {
                    self.push(format!("expected.{key}"));
                }
            } else if part.present(case) {
                self.push(part.name());
            }
        }
    }
}

/// The parts of a case a format may have no place for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Name,
    Description,
    Turns,
    Context,
    Tools,
    MemorySeeds,
    SessionId,
    AgentArgs,
    Output,
    PerTurn,
    Outcomes,
    Acceptable,
    Rubric,
    RubricPath,
    RubricVars,
    Trajectory,
    ToolCalls,
    Governance,
    /// Expectation keys without a field of their own.
    ExpectedExtra,
    Confidence,
    Review,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Name => "name",
            Part::Description => "description",
            Part::Turns => "turns",
            Part::Context => "context",
            Part::Tools => "tools",
            Part::MemorySeeds => "memory_seeds",
            Part::SessionId => "session_id",
            Part::AgentArgs => "agent_args",
            Part::Output => "expected.output",
            Part::PerTurn => "expected.per_turn",
            Part::Outcomes => "expected.outcomes",
            Part::Acceptable => "expected.acceptable",
            Part::Rubric => "expected.rubric",
            Part::RubricPath => "expected.rubric_path",
            Part::RubricVars => "expected.rubric_vars",
            Part::Trajectory => "expected.trajectory",
            Part::ToolCalls => "expected.tool_calls",
            Part::Governance => "expected.governance",
            Part::ExpectedExtra => "expected (other keys)",
            Part::Confidence => "confidence",
            Part::Review => "review",
        }
    }

    fn present(self, case: &Case) -> bool {
        let (t, e) = (&case.task, &case.expected);
        match self {
            Part::Name => case.name.is_some(),
            Part::Description => case.description.is_some(),
            Part::Turns => t.turns.is_some(),
            Part::Context => t.context.is_some(),
            Part::Tools => t.tools.is_some(),
            Part::MemorySeeds => t.memory_seeds.is_some(),
            Part::SessionId => t.session_id.is_some(),
            Part::AgentArgs => t.agent_args.is_some(),
            Part::Output => e.output.is_some(),
            Part::PerTurn => e.per_turn.is_some(),
            Part::Outcomes => e.outcomes.is_some(),
            Part::Acceptable => e.acceptable.is_some(),
            Part::Rubric => e.rubric.is_some(),
            Part::RubricPath => e.rubric_path.is_some(),
            Part::RubricVars => e.rubric_vars.is_some(),
            Part::Trajectory => e.trajectory.is_some(),
            Part::ToolCalls => e.tool_calls.is_some(),
            Part::Governance => e.governance.is_some(),
            Part::ExpectedExtra => !e.extra.is_empty(),
            Part::Confidence => case.confidence.is_some(),
            Part::Review => case.review.is_some(),
        }
    }
}
