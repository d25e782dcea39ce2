//! Integration tests of the `casebook` binary: what a user sees when they run it on their files.
//! Every test writes its input into a temporary folder, runs the real binary with `NO_COLOR=1`
//! and checks the exit status and the diagnostics, down to the line and column they name.

#[macro_use]
mod cli;
/// The command line's definition, for tests that walk it (`vocabulary.rs`).
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/args.rs"]
mod args;
mod capture;
mod capture_bigcap;
mod capture_libraries;
mod capture_logs;
mod compare_pairs;
mod console_links;

mod convert;
mod csv_cells;
mod derived_ids;
mod exit_codes;
mod failing;
mod fidelity;
mod filter;
mod freeze;
mod help_topics;
mod human;
mod inspect;
mod inspect_ai;
mod interrupts;
mod json_shapes;
mod key_order;
mod lint;
mod mcp;
mod memory;
mod names;
mod newcomer;
mod openai_evals;
mod otlp_serve;
mod parquet;
mod pipes;
mod preview;
mod promptfoo;
mod purge;
mod push_merge;
mod readme_tour;
mod record;
mod remote;
mod remote_review;
mod remote_runs;
mod review;
mod run;
mod schema;
mod store;
mod store_gc;
mod stored_runs;
mod terminal;
mod threshold;
mod typos;
mod unusual_input;
mod validate_fields;
mod validate_syntax;
mod vocabulary;
mod waits;
mod where_acted;
