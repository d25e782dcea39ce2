#!/usr/bin/env bash
# Whole-command benchmarks of the team server against the targets of the server issue, on each
# store backend, over loopback:
# - `casebook push` of the realistic 1M-row letta file, and `casebook pull` of the version as
#   native JSON lines and as letta (wall time, client peak RSS; the server's peak RSS after each);
# - `GET` one page of 200 cases at random cursors near the start and near the end of the
#   version, from 32 clients at once (`crates/casebook-server/examples/page_load.rs`).
#
#   scripts/bench-server.sh                # ROWS=1000000 by default
#   ROWS=200000 scripts/bench-server.sh    # quicker
#   BENCH_DATA=/tmp/bench scripts/bench-server.sh    # data and work files there, not in target/bench-data
#
# Client, server and PostgreSQL share this machine's 2 cores. Needs GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-1000000}
DATA=${BENCH_DATA:-target/bench-data}
WORK=$DATA/server
BIN=$DATA/bin/casebook-server-bench
mkdir -p "$DATA/bin"
cargo build --release -q -p casebook-cli
cargo build --release -q -p casebook-server --example page_load
cp "$(scripts/release-binary.sh)" "$BIN"
LOAD=$(dirname "$(scripts/release-binary.sh)")/examples/page_load

REALISTIC=$DATA/letta-realistic-$ROWS.jsonl
[[ -f $REALISTIC ]] || "$BIN" generate --kind letta-realistic --cases "$ROWS" -o "$REALISTIC"
rm -rf "$WORK" && mkdir -p "$WORK"
export CASEBOOK_AUTHOR=bench

postgres=$(CASEBOOK_PG_DURABLE=1 scripts/postgres.sh start)
eval "$postgres"
SERVER=
trap '[[ -n $SERVER ]] && kill $SERVER; scripts/postgres.sh stop "$CASEBOOK_TEST_PGDATA"' EXIT
URL=${CASEBOOK_TEST_POSTGRES%/*}/serverbench

# shellcheck source=settle.sh
source scripts/settle.sh
timed() { # label, cases, command...
  local label=$1 cases=$2
  shift 2
  settle
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >/dev/null
  read -r secs kib <"$WORK/time"
  local server_kib
  server_kib=$(awk '/VmHWM/ {print $2}' "/proc/$SERVER/status")
  printf '| %s | %s s | %s cases/s | %s MiB | %s MiB |\n' "$label" "$secs" \
    "$(awk -v n="$cases" -v s="$secs" 'BEGIN {printf "%d", n / s}')" "$((kib / 1024))" "$((server_kib / 1024))"
}

start_server() {
  "$BIN" serve --listen 127.0.0.1:0 -q >"$WORK/url" 2>"$WORK/serve.log" &
  SERVER=$!
  for _ in $(seq 50); do [[ -s $WORK/url ]] && break; sleep 0.1; done
  CASEBOOK_URL=$(head -1 "$WORK/url")
  export CASEBOOK_URL
  : >"$WORK/url"
}

stop_server() {
  kill "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  SERVER=
}

cat "$REALISTIC" >/dev/null
for store in "$WORK/.casebook" "$URL"; do
  name=sqlite
  [[ $store == postgres* ]] && name=postgres
  export CASEBOOK_STORE=$store
  "$BIN" init -q >/dev/null
  CASEBOOK_TOKEN=$("$BIN" keys create --project bench --scope write -q)
  export CASEBOOK_TOKEN
  echo
  echo "$name (the server's peak RSS is of a server started for the push, and another for the pulls):"
  echo
  echo "| command | wall | rate | client peak RSS | server peak RSS |"
  echo "|---|---|---|---|---|"
  start_server
  timed "push $(basename "$REALISTIC")" "$ROWS" "$BIN" push "$REALISTIC" --dataset big -q
  stop_server
  start_server
  timed "pull as casebook JSONL" "$ROWS" "$BIN" pull --dataset big --to casebook --overwrite -o "$WORK/pulled-$name.jsonl" -q
  timed "pull as letta JSONL" "$ROWS" "$BIN" pull --dataset big --overwrite -o "$WORK/pulled-$name-letta.jsonl" -q
  echo
  settle
  "$LOAD" "$CASEBOOK_URL" "$CASEBOOK_TOKEN" /api/v1/projects/bench/datasets/big/versions/v1 32 6400 200
  stop_server
  unset CASEBOOK_URL CASEBOOK_TOKEN
done
cmp -s "$WORK/pulled-sqlite.jsonl" "$WORK/pulled-postgres.jsonl" && echo "(both native pulls are byte-identical)"
rm -f "$WORK"/pulled-*.jsonl
