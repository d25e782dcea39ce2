//! Integration tests of the formats crate: the real corpus of every system, round trips, and
//! generated cases in every format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod beside_limits;
mod capture_bigcap;
mod capture_libraries;
mod capture_logs;
mod capture_receiver;
mod corpus;
mod derived_ids;
mod escapes;
mod examples;
mod export;
mod fuzz;
mod harness;
mod own_shapes;
mod parquet;
mod promptfoo_files;
mod roundtrip;
mod snapshots;
