//! Diagnostics (SPEC §4): every problem casebook reports about a user's input, with a stable code,
//! a 1-based location in the source file, a JSON Pointer into the case, and a hint.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// Stable diagnostic codes. The string form (`E-json-syntax`) is part of casebook's interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    JsonSyntax,
    YamlSyntax,
    CsvSyntax,
    InvalidUtf8,
    TooDeep,
    DuplicateKey,
    MissingField,
    WrongType,
    InvalidValue,
    UnknownField,
    DuplicateId,
    UnknownRole,
    PerTurnLength,
    SeedPathMissing,
    SeedPathEscapes,
    /// A mas-lab manifest's `spec.path` names a file that cannot be read.
    ItemsPathMissing,
    /// A mas-lab manifest's `spec.path` leaves the manifest's folder.
    ItemsPathEscapes,
    /// A tool's `responses` names a snapshot file that cannot be read.
    SnapshotPathMissing,
    /// A tool's `responses` names a snapshot file outside the dataset's folder.
    SnapshotPathEscapes,
    RubricConflict,
    IntegerRange,
    EmptyDataset,
    MixedShape,
    FieldConflict,
    UnknownFormat,
    /// A value the target format cannot hold (convert only).
    Unrepresentable,
    /// Cases whose expectations are drafts (`review: draft`), which the target format would
    /// write as confirmed ones: it has no place for `review`.
    UnconfirmedDrafts,
    Bom,
    Dropped,
    SuspiciousField,
    /// A promptfoo test with list variables, which promptfoo runs once per combination and
    /// casebook reads as one case.
    Unexpanded,
    /// A promptfoo variable whose value promptfoo reads from a file (`file://…`) when it runs
    /// the test, which casebook keeps as the reference.
    FileVar,
    /// What the source read from another file is written inline (promptfoo tests read from
    /// `file://tests/*.yaml`): the output means the same to the tool, in one file.
    Inlined,
    EmptyDatasetAccepted,
    /// An Agent Health test case without `expectedOutcomes` (its legacy shape), which Agent
    /// Health's importer refuses.
    MissingOutcomes,
    /// An OpenAI evals `ideal` (or one of its answers) that is a number, which evals' `Match`
    /// refuses: it compares the sampled text with answers in text.
    NumberIdeal,
    /// A recorded response whose query was never run (`casebook freeze` records its answer).
    UnfrozenQuery,
    /// A trace did not record the message content a case needs (`casebook capture`).
    NoContent,
    /// A span attribute that cannot be read the way its convention says (`casebook capture`).
    TraceAttribute,
    // Hygiene (`casebook lint`).
    /// Two cases whose tasks are the same: the agent is asked the same thing twice.
    DuplicateInput,
    /// Two cases whose tasks differ only in whitespace and letter case.
    NearDuplicateInput,
    /// The same task with different expectations: at most one of them can be right.
    ConflictingExpectations,
    /// Expectation text found in the task half, which the agent sees.
    LeakedGroundTruth,
    /// A label that looks like a misspelling of a more common one.
    LabelTypo,
    NoExpectations,
    LowConfidence,
    /// A case whose review rejected its label, still in the dataset.
    RejectedCase,
    /// A case whose input is also in the dataset given with `--against`.
    OverlappingInput,
}

impl Code {
    /// The hygiene warnings of `casebook lint`.
    pub const HYGIENE: [Code; 9] = [
        Code::DuplicateInput,
        Code::NearDuplicateInput,
        Code::ConflictingExpectations,
        Code::LeakedGroundTruth,
        Code::LabelTypo,
        Code::NoExpectations,
        Code::LowConfidence,
        Code::RejectedCase,
        Code::OverlappingInput,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Code::JsonSyntax => "E-json-syntax",
            Code::YamlSyntax => "E-yaml-syntax",
            Code::CsvSyntax => "E-csv-syntax",
            Code::InvalidUtf8 => "E-invalid-utf8",
            Code::TooDeep => "E-too-deep",
            Code::DuplicateKey => "E-duplicate-key",
            Code::MissingField => "E-missing-field",
            Code::WrongType => "E-wrong-type",
            Code::InvalidValue => "E-invalid-value",
            Code::UnknownField => "E-unknown-field",
            Code::DuplicateId => "E-duplicate-id",
            Code::UnknownRole => "E-unknown-role",
            Code::PerTurnLength => "E-per-turn-length",
            Code::SeedPathMissing => "E-seed-path-missing",
            Code::SeedPathEscapes => "E-seed-path-escapes",
            Code::ItemsPathMissing => "E-items-path-missing",
            Code::ItemsPathEscapes => "E-items-path-escapes",
            Code::SnapshotPathMissing => "E-snapshot-path-missing",
            Code::SnapshotPathEscapes => "E-snapshot-path-escapes",
            Code::RubricConflict => "E-rubric-conflict",
            Code::IntegerRange => "E-integer-range",
            Code::EmptyDataset => "E-empty-dataset",
            Code::MixedShape => "E-mixed-shape",
            Code::FieldConflict => "E-field-conflict",
            Code::UnknownFormat => "E-unknown-format",
            Code::Unrepresentable => "E-unrepresentable",
            Code::UnconfirmedDrafts => "E-unconfirmed-drafts",
            Code::Bom => "W-bom",
            Code::Dropped => "W-dropped",
            Code::SuspiciousField => "W-unknown-field",
            Code::Unexpanded => "W-unexpanded-vars",
            Code::FileVar => "W-file-var",
            Code::Inlined => "W-inlined",
            Code::EmptyDatasetAccepted => "W-empty-dataset",
            Code::MissingOutcomes => "W-missing-outcomes",
            Code::NumberIdeal => "W-number-ideal",
            Code::UnfrozenQuery => "W-unfrozen-query",
            Code::NoContent => "W-no-content",
            Code::TraceAttribute => "W-trace-attribute",
            Code::DuplicateInput => "W-duplicate-input",
            Code::NearDuplicateInput => "W-near-duplicate-input",
            Code::ConflictingExpectations => "W-conflicting-expectations",
            Code::LeakedGroundTruth => "W-leaked-ground-truth",
            Code::LabelTypo => "W-label-typo",
            Code::NoExpectations => "W-no-expectations",
            Code::LowConfidence => "W-low-confidence",
            Code::RejectedCase => "W-rejected-case",
            Code::OverlappingInput => "W-overlapping-input",
        }
    }

    pub fn severity(self) -> Severity {
        if self.as_str().starts_with("W-") { Severity::Warning } else { Severity::Error }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A value as a diagnostic quotes it: whole when short, else its first characters and its size,
/// so that a 50 MB value never ends up in a message.
pub fn excerpt(value: &str) -> std::borrow::Cow<'_, str> {
    const SHOWN: usize = 60;
    if value.len() <= SHOWN + 20 {
        return value.into();
    }
    match value.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}… ({} bytes)", &value[..end], value.len()).into(),
        None => value.into(),
    }
}

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: Code,
    pub message: String,
    /// The file, as the user named it.
    pub file: String,
    /// 1-based line; 0 when it is not known (the problem concerns the file as a whole, or a
    /// stored version, which has no lines): then neither it nor `column` is serialised.
    #[serde(skip_serializing_if = "is_zero")]
    pub line: u64,
    /// 1-based column, in characters; 0 when it is not known, as `line`.
    #[serde(skip_serializing_if = "is_zero")]
    pub column: u64,
    /// JSON Pointer into the source record (the row, test or item as the file has it) the
    /// problem is in; `""` is the record itself. `None` when there is no source record (a
    /// stored version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// The same place as a casebook path (`/expected/output` where a letta row says
    /// `/ground_truth`), for problems found in cases rather than in the source text (lint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The case the problem is about, when it is about one (hygiene warnings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    /// Byte offset of the start of `line` in the file, so a renderer can show the source line.
    #[serde(skip)]
    pub line_offset: Option<u64>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Where the problem is for people: `file:line:column`, or the file alone when the line is
    /// not known.
    pub fn place(&self) -> String {
        if self.line == 0 { self.file.clone() } else { format!("{}:{}:{}", self.file, self.line, self.column) }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.place(), self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_keep_short_values_and_cut_long_ones_on_a_character() {
        assert_eq!(excerpt("user"), "user");
        let long = "é".repeat(1000);
        assert_eq!(excerpt(&long), format!("{}… (2000 bytes)", "é".repeat(60)));
    }
}
