//! casebook-filter's integration tests: the filter agrees with SQLite and PostgreSQL and uses the label index, and the
//! language as users meet it (the help text, rendered errors).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agreement;
mod language;
mod plan;
