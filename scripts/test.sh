#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit and integration tests, doc tests.
# This is the README's second command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --doc --workspace --locked
cargo nextest run --workspace --locked --no-fail-fast
