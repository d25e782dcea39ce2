#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit and integration tests, doc tests.
# This is the README's second command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi

# The YAML emitter's tests load its output with PyYAML, the reader mas-lab uses.
if ! python3 -c 'import yaml' 2>/dev/null; then
  python3 -m pip install --quiet pyyaml || python3 -m pip install --quiet --user --break-system-packages pyyaml
fi

# The MCP tests drive casebook's per-session MCP server with the official Python SDK too, from a
# virtual environment of its own under target/.
mcp_python=target/py-mcp/bin/python
if ! "$mcp_python" -c 'import mcp.client.streamable_http' 2>/dev/null; then
  echo "installing the Python MCP SDK into target/py-mcp for the MCP tests" >&2
  if ! python3 -m venv target/py-mcp >&2; then
    # Debian ships venv's pip bootstrap apart.
    sudo=()
    [[ $(id -u) -ne 0 ]] && sudo=(sudo)
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq python3-venv >&2
    python3 -m venv target/py-mcp
  fi
  "$mcp_python" -m pip install --quiet 'mcp>=1.10' >&2
fi
export CASEBOOK_TEST_MCP_PYTHON="$PWD/$mcp_python"

# The OTLP receiver's tests send traces with the OpenTelemetry Python SDK's OTLP/HTTP exporter,
# from a virtual environment of their own (made as the MCP one is; kept when it works).
otel_python=target/py-otel/bin/python
if ! "$otel_python" -c 'import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http' 2>/dev/null; then
  echo "installing the OpenTelemetry Python SDK and OTLP/HTTP exporter into target/py-otel" >&2
  python3 -m venv target/py-otel >&2
  "$otel_python" -m pip install --quiet 'opentelemetry-sdk>=1.30' 'opentelemetry-exporter-otlp-proto-http>=1.30' >&2
fi
export CASEBOOK_TEST_OTEL_PYTHON="$PWD/$otel_python"

# And with the OpenTelemetry JS SDK's OTLP/HTTP protobuf exporter, from npm into target/node-otel
# (kept when it works; skipped without Node.js: those tests then say they did not run).
node_otel=target/node-otel
if command -v npm >/dev/null && ! NODE_PATH="$node_otel/node_modules" node -e "require('@opentelemetry/sdk-trace-node'); require('@opentelemetry/exporter-trace-otlp-proto')" 2>/dev/null; then
  echo "installing the OpenTelemetry JS SDK and OTLP/HTTP protobuf exporter into $node_otel" >&2
  mkdir -p "$node_otel"
  npm install --prefix "$node_otel" --no-audit --no-fund --silent @opentelemetry/api@1.9 \
    @opentelemetry/sdk-trace-node@2 @opentelemetry/resources@2 @opentelemetry/exporter-trace-otlp-proto@0.223 >&2
fi
export CASEBOOK_TEST_OTEL_NODE_MODULES="$PWD/$node_otel/node_modules"

# pandas, pyarrow and Hugging Face `datasets`, for the tests that read casebook's Parquet tables
# the way users do (and write tables casebook reads back).
parquet_python=target/py-parquet/bin/python
if ! "$parquet_python" -c 'import pandas, pyarrow, datasets' 2>/dev/null; then
  echo "installing pandas, pyarrow and datasets into target/py-parquet for the Parquet tests" >&2
  python3 -m venv target/py-parquet >&2
  "$parquet_python" -m pip install --quiet pandas pyarrow datasets >&2
fi
export CASEBOOK_TEST_PARQUET_PYTHON="$PWD/$parquet_python"

# The console's browser tests drive Debian's headless Chromium through its WebDriver server.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "installing Debian's chromium and chromium-driver for the console's browser tests" >&2
  sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium chromium-driver >&2
fi

# A throwaway PostgreSQL server for the shared store's tests (installed first if missing), stopped
# however the run ends. The tests fail, never skip, without it.
postgres=$(scripts/postgres.sh start)
eval "$postgres"
trap 'scripts/postgres.sh stop "$CASEBOOK_TEST_PGDATA"' EXIT

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --doc --workspace --locked
# `--status-level skip` names each test not run: those that need the real-file corpus when it
# is not there (`CASEBOOK_CORPUS`, see the README).
cargo nextest run --workspace --locked --no-fail-fast --status-level skip

# The Python package: the wheel built from the debug build the Rust tests just made (maturin's
# `--profile dev` into the same target folder), installed into a fresh virtual environment as a
# user would, and its pytest suite against a real `casebook serve` (SQLite and the PostgreSQL above);
# with `datasets` for `to_hf()`, and uv for `uvx --from WHEEL casebook …` (offline, a fresh cache).
wheel=$(realpath "$(scripts/wheel.sh --dev)")
rm -rf target/py-wheel
python3 -m venv target/py-wheel >&2
target/py-wheel/bin/python -m pip install --quiet "$wheel" pytest pandas datasets uv >&2
(cd python/tests && CASEBOOK_TEST_WHEEL=$wheel ../../target/py-wheel/bin/python -m pytest -q -p no:cacheprovider)

# The npm packages, built from the debug binary the tests above used, installed into a fresh
# folder as a user would, and the TypeScript client's tests against a real `casebook serve`.
if command -v node >/dev/null && command -v npm >/dev/null; then
  scripts/npm.sh "${CARGO_TARGET_DIR:-target}/debug/casebook" target/npm
  scripts/npm-test.sh target/npm
else
  echo "error: the npm package's tests need Node.js 20 and npm (apt-get install nodejs npm)" >&2
  exit 1
fi
