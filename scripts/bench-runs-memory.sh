#!/usr/bin/env bash
# The runner's memory in the number of runs (issue 34): the generator's realistic letta rows
# (CASES, 200,000 by default) imported into a fresh embedded store, then `casebook run` with
# `target: builtin:echo`, `graders: [{kind: contains}]` and `n_runs` 1 and 5 (200,000 and
# 1,000,000 runs), each in a fresh store. Prints wall time, runs/s and peak RSS; then reads the
# 200,000-result run back (`results` as text and as Markdown, and `compare` with a second run of
# the same experiment, which reuses the first one's outputs), with their wall time and peak RSS.
#
#   scripts/bench-runs-memory.sh
#   CASES=50000 scripts/bench-runs-memory.sh   # quicker
#   NO_BUILD=1 scripts/bench-runs-memory.sh     # the release binary already built
#
# Needs GNU time (/usr/bin/time). Timed commands take /tmp/bench.lock (flock).
set -euo pipefail
cd "$(dirname "$0")/.."

CASES=${CASES:-200000}
TARGET=${CARGO_TARGET_DIR:-target}
DATA=$TARGET/bench-data
WORK=$DATA/runs-memory
mkdir -p "$DATA"
if [[ -z ${NO_BUILD:-} ]]; then # NO_BUILD=1: use the binary already built
  nice -n 5 cargo build --release -q -p casebook-cli
fi
BIN=$TARGET/release/casebook

JSONL=$DATA/letta-realistic-$CASES.jsonl
[[ -f $JSONL ]] || "$BIN" generate --kind letta-realistic --cases "$CASES" -q -o "$JSONL"

reads=()
echo "| runs | wall | rate | peak RSS |"
echo "|---|---|---|---|"
for n_runs in 1 5; do
  dir=$WORK/n$n_runs
  rm -rf "$dir" && mkdir -p "$dir"
  export CASEBOOK_STORE=$dir/.casebook
  "$BIN" init -q >/dev/null
  "$BIN" import "$JSONL" --dataset d -q >/dev/null
  cat >"$dir/e.yaml" <<YAML
name: memory
dataset: d
target: builtin:echo
n_runs: $n_runs
threshold: 0
graders:
  - {kind: contains}
YAML
  flock /tmp/bench.lock /usr/bin/time -f "%e %M" -o "$dir/time" "$BIN" run "$dir/e.yaml" -q >/dev/null
  read -r secs kib <"$dir/time"
  runs=$((CASES * n_runs))
  printf '| %s (%s cases × %s) | %s s | %s runs/s | %s MiB |\n' "$runs" "$CASES" "$n_runs" "$secs" \
    "$(awk -v s="$secs" -v n="$runs" 'BEGIN { printf "%.0f", n / s }')" "$((kib / 1024))"
  [[ $n_runs == 1 ]] || continue
  # A second run of the same experiment (its outputs reused), then the stored runs read back.
  "$BIN" run "$dir/e.yaml" -q >/dev/null || true
  read_back=(
    "results:results previous"
    "results --format markdown:results previous --format markdown"
    "compare:compare previous latest"
    "compare --format json:compare previous latest --format json"
  )
  reads+=("| command, $runs results | wall | peak RSS |" "|---|---|---|")
  for entry in "${read_back[@]}"; do
    label=${entry%%:*}
    read -ra words <<<"${entry#*:}"
    flock /tmp/bench.lock /usr/bin/time -f "%e %M" -o "$dir/time" "$BIN" "${words[@]}" >/dev/null || true
    read -r secs kib <"$dir/time"
    reads+=("| \`$label\` | $secs s | $((kib / 1024)) MiB |")
  done
done
echo
printf '%s\n' "${reads[@]}"
