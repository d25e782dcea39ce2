//! The server's tests: real servers on `127.0.0.1:0` over a real store of each backend (SQLite
//! in a temporary folder, and the PostgreSQL that `scripts/test.sh` starts), and the console in
//! a real headless Chromium.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bad_requests;
mod browser;
mod capture;
mod console;
mod console_authors;
mod console_conflicts;
mod console_frame;
mod console_queue;
mod console_review;
mod console_runs;
mod console_tables;
mod diffs;
mod error_schema;
mod harness;
mod import_preview;
mod isolation;
mod load;
mod names;
mod otel_node;
mod otel_python;
mod otlp;
mod purge;
mod reads;
mod runs;
mod transfer;
