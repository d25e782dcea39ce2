#!/usr/bin/env bash
# Whole-command benchmarks of `casebook run` (the runner issue): 100,000 runs against a local
# fake HTTP agent that answers at once, concurrency 64, three deterministic graders; then
# `--regrade` of the stored results. Prints wall time, runs/s, peak RSS and CPU per run.
#
#   scripts/bench-run.sh               # CASES=100000 by default
#   CASES=20000 scripts/bench-run.sh   # quicker
#
# Needs GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."

CASES=${CASES:-100000}
DATA=target/bench-data
WORK=$DATA/run
mkdir -p "$DATA"
cargo build --release -q -p casebook-cli
cargo build --release -q -p casebook-runner --example fake_agent
BIN=target/release/casebook

JSONL=$DATA/letta-$CASES.jsonl
[[ -f $JSONL ]] || "$BIN" generate --kind letta-jsonl --cases "$CASES" -o "$JSONL"
rm -rf "$WORK" && mkdir -p "$WORK"
cp "$JSONL" "$WORK/cases.jsonl"

target/release/examples/fake_agent >"$WORK/agent.url" &
agent=$!
trap 'kill $agent 2>/dev/null' EXIT
for _ in $(seq 50); do [[ -s $WORK/agent.url ]] && break; sleep 0.1; done
url=$(cat "$WORK/agent.url")

cat >"$WORK/bench.yaml" <<YAML
name: bench
dataset: cases.jsonl
target: '$url'
concurrency: 64
threshold: 0
graders:
  - {kind: exact_match}
  - {kind: contains}
  - {kind: similarity}
YAML

export CASEBOOK_STORE=$WORK/.casebook
"$BIN" init -q >/dev/null
timed() { # label, command...
  local label=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$@" >/dev/null
  read -r secs user sys kib <"$WORK/time"
  local per=$(awk -v s="$secs" -v n="$CASES" 'BEGIN { printf "%.0f", n / s }')
  local cpu=$(awk -v u="$user" -v y="$sys" -v n="$CASES" 'BEGIN { printf "%.0f", (u + y) * 1e6 / n }')
  printf '| %s | %s s | %s runs/s | %s MiB | %s µs CPU a run |\n' "$label" "$secs" "$per" "$((kib / 1024))" "$cpu"
}
echo "| command | wall | rate | peak RSS | casebook CPU |"
echo "|---|---|---|---|---|"
timed "run $CASES cases, concurrency 64, 3 graders" "$BIN" run "$WORK/bench.yaml" -q
timed "run again (every output stored)" "$BIN" run "$WORK/bench.yaml" -q
timed "--regrade $CASES stored results" "$BIN" run "$WORK/bench.yaml" --regrade -q
