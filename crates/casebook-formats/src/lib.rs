//! Readers and writers for every dataset format casebook speaks, format detection, and the
//! source locations that turn problems into located diagnostics.
//!
//! Reading goes file → [`node::Node`] (a JSON or YAML value that remembers offsets) → a format
//! mapper → [`casebook_model::Case`]. Writing goes the other way through each format's encoder.

mod agenthealth;
pub mod capture;
mod convert;
mod csvtext;
mod documents;
mod export;
mod format;
mod glob;
mod ids;
mod inspect;
pub mod json;
mod layout;
mod letta;
mod maslab;
mod native;
pub mod node;
mod openai_evals;
mod parquet;
mod parts;
pub mod pointer;
pub mod promptfoo;
mod read;
mod shape;
mod snapshot;
mod source;
mod source_pointer;
pub mod spill;
pub mod synthetic;
mod tabular;
mod voltagent;
mod write;
pub mod yaml;
mod yaml_out;

pub use convert::{ConvertSummary, Progress, Target, convert, csv_columns};
pub use export::{CsvColumns, ExportError, ExportSettings, Exported, Exporter, OTHER_FIELDS};
pub use format::{Format, Syntax};
pub use read::{Batch, Consumer, Flow, Input, Loc, ReadError, ReadOptions, Start, Summary, read};
pub use source_pointer::source_pointer;
pub use tabular::ColumnMap;
pub use write::{Beside, Drafts, Encoded, Encoder, Required, SeedFiles, Writer, empty_refusal, refusal};
