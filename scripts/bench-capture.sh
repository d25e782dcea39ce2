#!/usr/bin/env bash
# Capture's memory and speed in the number of invocations (issue 36): the generator's OTLP
# traces (`casebook generate --kind otlp`: GenAI agents with model calls and tools, flattened
# and OpenInference forms, conversations, repeated prompts, non-ASCII text, some without content;
# batches of 200 spans, some agent spans three batches after their children) as JSON lines and
# as one document (`--kind otlp-document`, one line), for each of SIZES invocations:
# `casebook capture --dry-run` and a capture into a fresh embedded store, with `jq -c .` on the
# same file beside them. Prints wall time, invocations/s and peak RSS.
#
#   scripts/bench-capture.sh
#   SIZES="10000 100000" scripts/bench-capture.sh   # quicker
#   NO_BUILD=1 scripts/bench-capture.sh             # the release binary already built
#
# Needs GNU time (/usr/bin/time) and jq. Timed commands take /tmp/bench.lock (flock).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-10000 100000 1000000}
TARGET=${CARGO_TARGET_DIR:-target}
DATA=$TARGET/bench-data
WORK=$DATA/capture
mkdir -p "$DATA" "$WORK"
if [[ -z ${NO_BUILD:-} ]]; then # NO_BUILD=1: use the binary already built
  flock /tmp/release.lock nice -n 5 cargo build --release -q -p casebook-cli
fi
BIN=$TARGET/release/casebook

timed() { # label invocations command…: one row of the table
  local label=$1 n=$2
  shift 2
  flock /tmp/bench.lock /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >/dev/null 2>&1
  read -r secs kib <"$WORK/time"
  printf '| %s | %s | %s s | %s inv/s | %s MiB |\n' "$label" "$n" "$secs" \
    "$(awk -v s="$secs" -v n="$n" 'BEGIN { printf "%.0f", n / s }')" "$((kib / 1024))"
}

echo "| what | invocations | wall | rate | peak RSS |"
echo "|---|---|---|---|---|"
for n in $SIZES; do
  for kind in otlp otlp-document; do
    ext=$([[ $kind == otlp ]] && echo jsonl || echo json)
    file=$DATA/$kind-$n.$ext
    [[ -f $file ]] || "$BIN" generate --kind "$kind" --cases "$n" -q -o "$file"
    size=$(du -m "$file" | cut -f1)
    timed "\`jq -c .\` ($ext, $size MB)" "$n" jq -c . "$file"
    timed "capture --dry-run ($ext)" "$n" "$BIN" capture --dry-run -q "$file"
    store=$WORK/store-$kind-$n
    rm -rf "$store"
    "$BIN" --store "$store" init -q >/dev/null
    timed "capture into a fresh store ($ext)" "$n" "$BIN" --store "$store" capture -q --dataset prod "$file"
    rm -rf "$store"
  done
done
