#!/usr/bin/env bash
# `casebook store gc` over a store of a million case bodies (issue 39: < 30 s, ≤ 256 MiB), on
# the embedded store and on PostgreSQL, beside `jq -c .` over the same file in the same run.
#
# The store: the realistic 1M-row letta file imported as `big`; a second version of it that drops
# a tenth of its rows (those stay named by v1: not garbage); a dataset `scratch` of a tenth as many
# other rows whose rows are then deleted with SQL, as a purge of all its cases leaves its bodies
# (`casebook purge` did not exist yet); and an import killed half-way (on PostgreSQL it leaves the
# bodies it wrote; on SQLite nothing). Then `store check`'s count, `gc --dry-run`, `gc`, and on
# SQLite `gc --vacuum` (the file rewritten).
#
#   scripts/bench-gc.sh                 # ROWS=1000000
#   ROWS=200000 scripts/bench-gc.sh     # quicker
#   BENCH_DATA=/tmp/bench scripts/bench-gc.sh
#
# Timed commands run under `flock /tmp/bench.lock` (the machine may be shared). Needs GNU time,
# jq, python3 (for the embedded store's SQL) and psql.
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-1000000}
DATA=${BENCH_DATA:-target/bench-data}
WORK=$DATA/gc
BIN=$DATA/bin/casebook-gc-bench
mkdir -p "$DATA/bin"
flock /tmp/release.lock nice -n 5 cargo build --release -q -p casebook-cli
cp "$(scripts/release-binary.sh)" "$BIN"

REALISTIC=$DATA/letta-realistic-$ROWS.jsonl
OTHER=$DATA/letta-realistic-$ROWS-seed2.jsonl
[[ -f $REALISTIC ]] || "$BIN" generate --kind letta-realistic --cases "$ROWS" -o "$REALISTIC"
[[ -f $OTHER ]] || "$BIN" generate --kind letta-realistic --cases "$ROWS" --seed 2 -o "$OTHER"
rm -rf "$WORK" && mkdir -p "$WORK"
head -n $((ROWS * 9 / 10)) "$REALISTIC" >"$WORK/nine-tenths.jsonl"
head -n $((ROWS / 10)) "$OTHER" >"$WORK/scratch.jsonl"
tail -n $((ROWS / 5)) "$OTHER" >"$WORK/killed.jsonl"
export CASEBOOK_AUTHOR=bench

postgres=$(scripts/postgres.sh start)
eval "$postgres"
trap 'scripts/postgres.sh stop "$CASEBOOK_TEST_PGDATA"' EXIT
URL=${CASEBOOK_TEST_POSTGRES%/*}/bench

timed() { # label, command...
  local label=$1
  shift
  flock /tmp/bench.lock /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >"$WORK/out"
  read -r secs kib <"$WORK/time"
  printf '| %s | %s s | %s MiB | %s |\n' "$label" "$secs" "$((kib / 1024))" "$(head -c 160 "$WORK/out" | tr '\n' ' ')"
}

forget_scratch() { # the store
  local of="(SELECT id FROM datasets WHERE name = 'scratch')"
  local sql="DELETE FROM members WHERE dataset = $of; DELETE FROM versions WHERE dataset = $of;
             DELETE FROM events WHERE dataset = $of; DELETE FROM datasets WHERE name = 'scratch';"
  if [[ $1 == postgres* ]]; then
    psql -q "$1" -c "$sql"
  else
    python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()' \
      "$1/store.db" "$sql"
  fi
}

echo "| command | wall | peak RSS | answer |"
echo "|---|---|---|---|"
timed "reference: jq -c . over the 1M-row file" jq -c . "$REALISTIC"
for store in "$WORK/.casebook" "$URL"; do
  name=sqlite
  [[ $store == postgres* ]] && name=postgres
  export CASEBOOK_STORE=$store
  "$BIN" init -q >/dev/null
  "$BIN" import "$REALISTIC" --dataset big -q
  "$BIN" import "$WORK/nine-tenths.jsonl" --dataset big -q
  "$BIN" import "$WORK/scratch.jsonl" --dataset scratch -q
  forget_scratch "$store"
  # An import killed half-way through.
  "$BIN" import "$WORK/killed.jsonl" --dataset killed -q &
  pid=$!
  sleep 4
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [[ $name == sqlite ]] && du -h "$store/store.db" | sed 's/^/store file before gc: /'
  timed "$name: gc --dry-run" "$BIN" store gc --dry-run --format json
  timed "$name: gc" "$BIN" store gc --format json
  timed "$name: gc again (nothing to remove)" "$BIN" store gc --format json
  if [[ $name == sqlite ]]; then
    timed "$name: gc --vacuum (rewrites the file)" "$BIN" store gc --vacuum --format json
    du -h "$store/store.db" | sed 's/^/store file after vacuum: /'
  fi
done
