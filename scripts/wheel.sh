#!/usr/bin/env bash
# Builds the Python wheel (`casebook` command + `casebook` Python package) into target/wheels/.
#   scripts/wheel.sh            a release build, as a user would install it
#   scripts/wheel.sh --dev      from the debug build (`--profile dev`) in the same target folder,
#                               which the Rust tests have just built: what the test command uses
# maturin comes from a virtual environment of its own (target/py-maturin), made when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=(--release)
if [[ ${1:-} == --dev ]]; then
  profile=(--profile dev)
fi
maturin=target/py-maturin/bin/maturin
if ! "$maturin" --version >/dev/null 2>&1; then
  echo "installing maturin into target/py-maturin" >&2
  python3 -m venv target/py-maturin >&2
  target/py-maturin/bin/python -m pip install --quiet 'maturin>=1.9,<2' >&2
fi
# `--compatibility linux` skips manylinux's audit, which would refuse a debug build's size for
# nothing: the wheel is for this machine (a published one is built per platform in CI).
"$maturin" build "${profile[@]}" --locked --out target/wheels --compatibility linux --auditwheel skip >&2
ls -t target/wheels/casebook-*.whl | head -1
