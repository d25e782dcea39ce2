#!/usr/bin/env bash
# Prints where `cargo build --release -p casebook-cli` puts the `casebook` binary, as cargo
# itself says (it honours CARGO_TARGET_DIR and `build.target-dir` in cargo's configuration).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(cargo metadata --format-version 1 --no-deps | grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)
echo "$dir/release/casebook"
