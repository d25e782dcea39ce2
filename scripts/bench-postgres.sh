#!/usr/bin/env bash
# Whole-command benchmarks of the shared PostgreSQL store against the targets of the PostgreSQL
# issue, each beside the same command on the embedded store:
# - import of the realistic 1M-row letta file (client RSS), and export of the version;
# - one-case `put`, `diff` of versions 10 cases apart, `show` of a case in an old version, and the
#   label filter, on the 1M-case version.
#
#   scripts/bench-postgres.sh               # ROWS=1000000 by default
#   ROWS=200000 scripts/bench-postgres.sh   # quicker
#   BENCH_DATA=/tmp/bench scripts/bench-postgres.sh   # data and work files there, not in target/bench-data
#
# The PostgreSQL server is a new cluster (scripts/postgres.sh) with its durability settings on
# (fsync, synchronous commit, full-page writes), unlike the test suite's, on this machine:
# client and server share its 2 cores. Needs GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-1000000}
DATA=${BENCH_DATA:-target/bench-data}
WORK=$DATA/postgres
BIN=$DATA/bin/casebook-pg-bench
mkdir -p "$DATA/bin"
cargo build --release -q -p casebook-cli
cp "$(scripts/release-binary.sh)" "$BIN"

REALISTIC=$DATA/letta-realistic-$ROWS.jsonl
[[ -f $REALISTIC ]] || "$BIN" generate --kind letta-realistic --cases "$ROWS" -o "$REALISTIC"
rm -rf "$WORK" && mkdir -p "$WORK"
export CASEBOOK_AUTHOR=bench

postgres=$(CASEBOOK_PG_DURABLE=1 scripts/postgres.sh start)
eval "$postgres"
trap 'scripts/postgres.sh stop "$CASEBOOK_TEST_PGDATA"' EXIT
URL=${CASEBOOK_TEST_POSTGRES%/*}/bench

# shellcheck source=settle.sh
source scripts/settle.sh
timed() { # label, command...
  local label=$1
  shift
  settle
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >/dev/null
  read -r secs kib <"$WORK/time"
  printf '| %s | %s s | %s MiB |\n' "$label" "$secs" "$((kib / 1024))"
}

echo "| command | wall | client peak RSS |"
echo "|---|---|---|"
cat "$REALISTIC" >/dev/null
for store in "$WORK/.casebook" "$URL"; do
  name=sqlite
  [[ $store == postgres* ]] && name=postgres
  export CASEBOOK_STORE=$store
  "$BIN" init -q >/dev/null
  timed "$name: import $(basename "$REALISTIC") (empty store)" "$BIN" import "$REALISTIC" --dataset big -q
  timed "$name: export to casebook JSONL" "$BIN" export big --to casebook --overwrite -o "$WORK/out-$name.jsonl" -q
  # One edited case (a row with an id and a text answer), then ten, and the diff between them.
  edit='"id".*"ground_truth":"'
  grep -m 1 "$edit" "$REALISTIC" | sed 's/"ground_truth":"/"ground_truth":"edited /' >"$WORK/one.jsonl"
  timed "$name: put one case" "$BIN" put big "$WORK/one.jsonl" -q
  grep -m 10 "$edit" "$REALISTIC" | sed 's/"ground_truth":"/"ground_truth":"again /' >"$WORK/ten.jsonl"
  "$BIN" put big "$WORK/ten.jsonl" -q >/dev/null
  timed "$name: diff of versions 10 cases apart" "$BIN" diff big@v2 big@v3
  id=$(grep -o '"id":[^,}]*' "$WORK/one.jsonl" | head -1 | sed 's/"id"://; s/"//g')
  timed "$name: show big@v1 $id" "$BIN" show big@v1 "$id"
  timed "$name: count labels contains \"math\"" "$BIN" cases big --where 'labels contains "math"' --count
  timed "$name: count label and metadata" "$BIN" cases big \
    --where 'labels contains "math" and metadata.difficulty == "hard"' --count
done
cmp -s "$WORK/out-sqlite.jsonl" "$WORK/out-postgres.jsonl" && echo "(both exports are byte-identical)"
