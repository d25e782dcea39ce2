//! Dataset hygiene (the warnings of SPEC §4), for `casebook lint`: the same task twice, the same
//! task with conflicting expectations, ground truth leaked into what the agent sees, labels that
//! look like typos of other labels, cases without expectations, low label confidence, rejected
//! cases, and inputs shared with another dataset.
//!
//! Cases come in order, each with its [`Facts`] (made from the case alone, so a reader can make
//! them on its worker threads), and a [`Linter`] keeps what later cases are compared with:
//! 64-bit fingerprints and the ids of first occurrences, never the cases' bodies. Label typos
//! need every label counted, so they come at [`Linter::finish`].

mod claims;
mod fingerprint;
mod labels;
mod leaks;
mod text;

use std::collections::HashMap;

use casebook_model::{Case, Code, Diagnostic, Review, excerpt};

use crate::claims::Claims;

pub use labels::{MAX_GROUP, MAX_LABELS};
pub use leaks::Leak;
pub use text::{contains_token, normalize};

/// Thresholds of the checks.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// A case whose `confidence` is below this is reported.
    pub min_confidence: f64,
}

impl Default for Options {
    fn default() -> Self {
        Self { min_confidence: 0.5 }
    }
}

/// Where a case is in its source: 1-based line and column of its id (or of the case), and where
/// that line starts; all 0 / `None` for a stored version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Place {
    pub line: u64,
    pub column: u64,
    pub line_offset: Option<u64>,
}

/// What the checks need of one case, made from the case alone.
#[derive(Debug, Clone)]
pub struct Facts {
    task: u64,
    task_normal: u64,
    question: u64,
    question_normal: u64,
    /// The expectations' fingerprint; `None` when the case has none.
    expected: Option<u64>,
    /// What they say of the answer, to tell whether two cases' can both hold.
    claims: Claims,
    leaks: Vec<Leak>,
}

impl Facts {
    pub fn of(case: &Case) -> Facts {
        let answers = leaks::answers(&case.expected, &case.task);
        let task = fingerprint::walk(&case.task, &answers);
        Facts {
            task: task.task,
            task_normal: task.task_normal,
            question: task.question,
            question_normal: task.question_normal,
            expected: fingerprint::expected(&case.expected),
            claims: Claims::of(&case.expected),
            leaks: task.leaks,
        }
    }
}

/// Ids kept end to end in one string.
#[derive(Debug, Default)]
struct Ids {
    text: String,
    ends: Vec<usize>,
}

impl Ids {
    fn push(&mut self, id: &str) -> u32 {
        self.text.push_str(id);
        self.ends.push(self.text.len());
        (self.ends.len() - 1) as u32
    }

    fn get(&self, i: u32) -> &str {
        let i = i as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }
}

/// The inputs of another dataset (`--against`), by fingerprint.
#[derive(Debug)]
pub struct Against {
    name: String,
    exact: HashMap<u64, u32>,
    normal: HashMap<u64, u32>,
    ids: Ids,
}

impl Against {
    /// `name` is how diagnostics name the other dataset (a file, `NAME@v3`).
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), exact: HashMap::new(), normal: HashMap::new(), ids: Ids::default() }
    }

    pub fn add(&mut self, case: &Case, facts: &Facts) {
        if self.exact.contains_key(&facts.question) && self.normal.contains_key(&facts.question_normal) {
            return;
        }
        let id = self.ids.push(&case.id);
        self.exact.entry(facts.question).or_insert(id);
        self.normal.entry(facts.question_normal).or_insert(id);
    }

    /// Cases read.
    pub fn len(&self) -> usize {
        self.normal.len()
    }

    pub fn is_empty(&self) -> bool {
        self.normal.is_empty()
    }
}

/// The first case with a task.
#[derive(Debug)]
struct First {
    id: u32,
    line: u64,
    expected: Option<u64>,
    claims: Claims,
}

/// The first case with a label, and the label's place in its list (with its pointer in the
/// source, when the linter has one).
#[derive(Debug, Clone)]
struct LabelAt {
    file: String,
    case: String,
    place: Place,
    index: usize,
    pointer: Option<String>,
}

/// How a case's places are named in the record it was read from: the JSON Pointer into the
/// source record for a casebook path (`/ground_truth` for `/expected/output` of a letta row),
/// `None` where it is not known. (`casebook_formats::source_pointer` for a file's format.)
pub type SourcePointer<'a> = Box<dyn Fn(&Case, &str) -> Option<String> + 'a>;

/// The checks over one dataset (a file, or a stored version).
pub struct Linter<'a> {
    file: String,
    options: Options,
    against: Option<&'a Against>,
    ids: Ids,
    firsts: Vec<First>,
    exact: HashMap<u64, u32>,
    normal: HashMap<u64, u32>,
    labels: labels::Labels<LabelAt>,
    /// `None` for a stored version: its diagnostics give casebook paths only.
    source: Option<SourcePointer<'a>>,
}

impl<'a> Linter<'a> {
    /// Names the file the next cases come from (a mas-lab manifest's items file).
    pub fn set_file(&mut self, file: &str) {
        if self.file != file {
            file.clone_into(&mut self.file);
        }
    }

    /// `file` names the dataset in diagnostics (the file as the user named it, or `NAME@v3`).
    pub fn new(file: impl Into<String>, options: Options, against: Option<&'a Against>) -> Self {
        Self {
            file: file.into(),
            options,
            against,
            ids: Ids::default(),
            firsts: Vec::new(),
            exact: HashMap::new(),
            normal: HashMap::new(),
            labels: labels::Labels::default(),
            source: None,
        }
    }

    /// Says how the next cases' places are named in their source records (a file's format), so
    /// diagnostics give the pointer into the record beside the casebook path. Without it (a
    /// stored version) they give the casebook path only.
    pub fn set_source(&mut self, source: Option<SourcePointer<'a>>) {
        self.source = source;
    }

    /// The pointer into `case`'s source record for the casebook path `path`.
    fn pointer(&self, case: &Case, path: &str) -> Option<String> {
        self.source.as_ref().and_then(|source| source(case, path))
    }

    /// `path` as a message names it: by the source's name when there is one.
    fn named(&self, case: &Case, path: &str) -> String {
        self.pointer(case, path).filter(|p| !p.is_empty()).unwrap_or_else(|| path.to_owned())
    }

    /// A diagnostic about `case` at the casebook path `path`, and at `pointer` in its source.
    fn diagnostic(
        &self,
        code: Code,
        place: Place,
        case: &str,
        (path, pointer): (String, Option<String>),
        message: String,
        hint: &str,
    ) -> Diagnostic {
        Diagnostic {
            severity: code.severity(),
            code,
            message,
            file: self.file.clone(),
            line: place.line,
            column: place.column,
            pointer,
            path: Some(path),
            hint: Some(hint.to_owned()),
            case: Some(case.to_owned()),
            line_offset: place.line_offset,
        }
    }

    /// A casebook path of `case` with its pointer in the source.
    fn at(&self, case: &Case, path: &str) -> (String, Option<String>) {
        (path.to_owned(), self.pointer(case, path))
    }

    /// `case `a`` with its line, when it has one.
    fn name_first(&self, first: &First) -> String {
        let id = self.ids.get(first.id);
        if first.line > 0 { format!("case `{id}` (line {})", first.line) } else { format!("case `{id}`") }
    }

    /// Checks the next case, appending what it finds to `out`.
    pub fn add(&mut self, case: &Case, facts: Facts, place: Place, out: &mut Vec<Diagnostic>) {
        let id = case.id.as_str();
        self.duplicates(case, &facts, place, out);
        if let Some(against) = self.against {
            let hit = against.exact.get(&facts.question).or_else(|| against.normal.get(&facts.question_normal));
            if let Some(other) = hit {
                let message = format!(
                    "the input of case `{id}` is also in `{}` (case `{}`)",
                    against.name,
                    against.ids.get(*other)
                );
                out.push(self.diagnostic(
                    Code::OverlappingInput,
                    place,
                    id,
                    self.at(case, "/input"),
                    message,
                    "a case the agent was shown (few-shot examples, training data) measures recall, not skill: remove it from one of the two",
                ));
            }
        }
        let total = facts.leaks.len();
        for leak in facts.leaks.into_iter().take(leaks::MAX_PER_CASE) {
            let message = format!(
                "the expectation at {} (`{}`) is in what the agent sees, at {}",
                self.named(case, &leak.answer_at),
                leak.answer,
                self.named(case, &leak.found_at)
            );
            let at = self.at(case, &leak.found_at);
            out.push(self.diagnostic(
                Code::LeakedGroundTruth,
                place,
                id,
                at,
                message,
                "the agent is given the answer: take it out of the task, or fix the expectation",
            ));
        }
        if total > leaks::MAX_PER_CASE {
            let message =
                format!("case `{id}` leaks more expectation text than the {} places above", leaks::MAX_PER_CASE);
            out.push(self.diagnostic(
                Code::LeakedGroundTruth,
                place,
                id,
                self.at(case, ""),
                message,
                "the agent is given the answer: take it out of the task, or fix the expectation",
            ));
        }
        if facts.expected.is_none() {
            out.push(self.diagnostic(
                Code::NoExpectations,
                place,
                id,
                self.at(case, "/expected"),
                format!("case `{id}` has no expectations: no expected output, outcomes, answers or rubric"),
                "add what a right answer is, or remove the case: graders have nothing to compare with",
            ));
        }
        if let Some(confidence) = case.confidence.filter(|c| *c < self.options.min_confidence) {
            out.push(self.diagnostic(
                Code::LowConfidence,
                place,
                id,
                self.at(case, "/confidence"),
                format!("case `{id}` has label confidence {confidence}, below {}", self.options.min_confidence),
                "review its expectations (`casebook review`), or leave such cases out of runs with `--min-confidence`",
            ));
        }
        if case.review == Some(Review::Rejected) {
            out.push(self.diagnostic(
                Code::RejectedCase,
                place,
                id,
                self.at(case, "/review"),
                format!("case `{id}` was rejected in review but is still in the dataset"),
                "fix its expectations and review it again, or remove it (`casebook rm`)",
            ));
        }
        for (index, label) in case.labels.iter().flatten().enumerate() {
            let (file, source) = (&self.file, &self.source);
            self.labels.add(label, || LabelAt {
                file: file.clone(),
                case: id.to_owned(),
                place,
                index,
                pointer: source.as_ref().and_then(|source| source(case, &format!("/labels/{index}"))),
            });
        }
    }

    fn duplicates(&mut self, case: &Case, facts: &Facts, place: Place, out: &mut Vec<Diagnostic>) {
        let id = case.id.as_str();
        let (first, normalised) = match self.exact.get(&facts.task) {
            Some(&first) => (first, false),
            None => {
                let index = self.firsts.len() as u32;
                self.firsts.push(First {
                    id: self.ids.push(id),
                    line: place.line,
                    expected: facts.expected,
                    claims: facts.claims.clone(),
                });
                self.exact.insert(facts.task, index);
                match self.normal.get(&facts.task_normal) {
                    Some(&first) => (first, true),
                    None => {
                        self.normal.insert(facts.task_normal, index);
                        return;
                    }
                }
            }
        };
        let first = &self.firsts[first as usize];
        let named = self.name_first(first);
        let how = if normalised { " (ignoring letter case and spacing)" } else { "" };
        // Expectations that differ but can both hold check two things of one answer.
        let conflict = first.claims.conflict(&facts.claims);
        let differ = first.expected != facts.expected;
        let (code, message, hint) = match (conflict, normalised) {
            (true, _) => (
                Code::ConflictingExpectations,
                format!("case `{id}` asks the agent the same as {named}{how} but expects something else"),
                "at most one of the two expectations is right: fix the wrong one, or make the tasks differ",
            ),
            (false, false) => (
                Code::DuplicateInput,
                format!("case `{id}` asks the agent exactly the same as {named}"),
                "remove one of them: a duplicate counts twice in every pass rate",
            ),
            (false, true) => (
                Code::NearDuplicateInput,
                format!("case `{id}` asks the agent the same as {named}{how}"),
                "remove one of them: a duplicate counts twice in every pass rate",
            ),
        };
        let hint = if !conflict && differ {
            "the two check different things of the same answer: put their expectations in one case, or make the tasks differ"
        } else {
            hint
        };
        out.push(self.diagnostic(code, place, id, self.at(case, "/input"), message, hint));
    }

    /// The checks that need every case: label typos. Also returns what was left unchecked.
    pub fn finish(mut self, out: &mut Vec<Diagnostic>) -> Vec<String> {
        let (typos, mut skipped) = self.labels.typos();
        for (typo, at) in typos {
            let cases = |n: u64| if n == 1 { "1 case".to_owned() } else { format!("{n} cases") };
            let what = if typo.key { "label key" } else { "label" };
            let how = if typo.case_only { "differs only in letter case from" } else { "looks like a misspelling of" };
            let message = format!(
                "{what} `{}` ({}) {how} `{}` ({})",
                excerpt(&typo.label),
                cases(typo.count),
                excerpt(&typo.suggestion),
                cases(typo.suggestion_count)
            );
            let hint = format!("if they mean the same, use `{}` everywhere", excerpt(&typo.suggestion));
            self.file = at.file;
            out.push(self.diagnostic(
                Code::LabelTypo,
                at.place,
                &at.case,
                (format!("/labels/{}", at.index), at.pointer),
                message,
                &hint,
            ));
        }
        skipped = skipped.into_iter().map(|what| format!("label typos were not looked for among {what}")).collect();
        if self.labels.capped {
            skipped.push(format!("label typos were looked for among the first {MAX_LABELS} distinct labels only"));
        }
        skipped
    }
}
