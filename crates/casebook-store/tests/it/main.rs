//! The store conformance suite, run on every backend.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;
mod gc;
mod ingest;
mod pending;
mod postgres;
mod sqlite;
