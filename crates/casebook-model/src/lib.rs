//! casebook's data model: the case with its task and expectations halves, the dataset header,
//! and the diagnostic every user-facing problem becomes. Pure data and serde; no I/O.

mod case;
pub mod choices;
mod dataset;
mod diagnostic;
pub mod snapshot;
mod suggest;

pub use case::{
    CASE_FIELDS, Case, ContextItem, Expectations, MemorySeeds, Outcome, OutcomeRole, Provenance, Review, Role,
    SEED_LIST_KEYS, Seed, Task, Tool, Turn, seed_list,
};
pub use dataset::DatasetHeader;
pub use diagnostic::{Code, Diagnostic, Severity, excerpt};
pub use snapshot::{Fallback, Responses, Snapshot};
pub use suggest::{did_you_mean, edit_distance};

/// A JSON object with its keys in source order.
pub type Map = serde_json::Map<String, serde_json::Value>;
