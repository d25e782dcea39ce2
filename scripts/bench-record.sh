#!/usr/bin/env bash
# `casebook record`'s memory in the size of the version (issue 38): the generator's realistic
# letta rows imported into a fresh embedded store, at each size of SIZES (20,000 and 200,000
# cases by default), then a run recorded as the Python client's `casebook.run` records it (a
# result line per case on standard input, then `{"finish": true}`), logging 1,000 results and
# then every case's. Prints wall time and peak RSS of each: flat in the version's size is the
# point (the version's cases are looked up in a temporary file, not held).
#
#   scripts/bench-record.sh
#   SIZES="20000 200000" NO_BUILD=1 scripts/bench-record.sh   # the release binary already built
#
# Needs GNU time (/usr/bin/time). Timed commands take /tmp/bench.lock (flock).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-20000 200000}
TARGET=${CARGO_TARGET_DIR:-target}
DATA=$TARGET/bench-data
WORK=$DATA/record-memory
mkdir -p "$DATA"
if [[ -z ${NO_BUILD:-} ]]; then # NO_BUILD=1: use the binary already built
  flock /tmp/release.lock nice -n 5 cargo build --release -q -p casebook-cli
fi
BIN=${BIN:-$TARGET/release/casebook} # BIN=…: another build (a figure from before a change)

echo "| version | results logged | wall | peak RSS |"
echo "|---|---|---|---|"
for cases in $SIZES; do
  jsonl=$DATA/letta-realistic-$cases.jsonl
  [[ -f $jsonl ]] || "$BIN" generate --kind letta-realistic --cases "$cases" -q -o "$jsonl"
  dir=$WORK/c$cases
  rm -rf "$dir" && mkdir -p "$dir"
  export CASEBOOK_STORE=$dir/.casebook
  "$BIN" init -q >/dev/null
  "$BIN" import "$jsonl" --dataset d -q >/dev/null
  # The ids as the store has them, and a result line for each (a pass on every third case).
  "$BIN" export d --to casebook -q | python3 -c '
import json, sys
ids = [row["id"] for row in map(json.loads, sys.stdin) if "$dataset" not in row]
out = open(sys.argv[1], "w")
for n, case in enumerate(ids):
    out.write(json.dumps({"case": case, "output": "an answer of a few words", "scores": {"exact": n % 3 == 0}, "millis": 12}) + "\n")
' "$dir/all.jsonl"
  for logged in 1000 all; do
    lines=$dir/lines-$logged.jsonl
    if [[ $logged == all ]]; then cp "$dir/all.jsonl" "$lines"; else head -n "$logged" "$dir/all.jsonl" >"$lines"; fi
    echo '{"finish": true}' >>"$lines"
    flock /tmp/bench.lock /usr/bin/time -f "%e %M" -o "$dir/time" \
      "$BIN" record d --experiment "bench-$logged" --threshold 0 <"$lines" >"$dir/out-$logged.jsonl"
    read -r secs kib <"$dir/time"
    n=$(($(wc -l <"$lines") - 1))
    printf '| %s cases | %s | %s s | %s MiB |\n' "$cases" "$n" "$secs" "$((kib / 1024))"
  done
done
