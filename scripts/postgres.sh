#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server for the tests and prints the URL of a superuser on it.
#
#   eval "$(scripts/postgres.sh start)"   # sets CASEBOOK_TEST_POSTGRES and CASEBOOK_TEST_PGDATA
#   scripts/postgres.sh stop "$CASEBOOK_TEST_PGDATA"
#
# The cluster lives in a new temporary folder, listens on 127.0.0.1 only, on a free port, and
# asks for a password (SCRAM), so the tests also see a wrong password refused. Debian's
# `postgresql` package is installed first when no PostgreSQL binaries are found. `initdb` refuses
# to run as root: as root, the cluster belongs to the `postgres` user (made if missing).
# Failing to start is an error, never a skip.
set -euo pipefail

fail() {
  echo "scripts/postgres.sh: $*" >&2
  exit 1
}

bindir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -z "$dir" ]] && command -v pg_ctl >/dev/null 2>&1; then
    dir=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
  fi
  echo "$dir"
}

start() {
  local bin
  bin=$(bindir)
  if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
    echo "installing Debian's postgresql package (no PostgreSQL binaries found)" >&2
    local sudo=()
    [[ $(id -u) -ne 0 ]] && sudo=(sudo)
    "${sudo[@]}" apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq postgresql >&2
    bin=$(bindir)
    [[ -n "$bin" && -x "$bin/initdb" ]] || fail "the postgresql package installed no initdb"
  fi

  local data run=()
  data=$(mktemp -d "${TMPDIR:-/tmp}/casebook-pg.XXXXXX")
  if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$data"
    run=(runuser -u postgres --)
  fi
  local password
  password="test-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
  printf '%s\n' "$password" >"$data/pwfile"
  [[ ${#run[@]} -gt 0 ]] && chown postgres "$data/pwfile"
  "${run[@]}" "$bin/initdb" -D "$data/cluster" -U casebook --pwfile="$data/pwfile" -A scram-sha-256 \
    -E UTF8 --locale=C --no-sync >"$data/initdb.log" 2>&1 || {
    cat "$data/initdb.log" >&2
    fail "initdb failed"
  }

  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # fsync off: a test cluster is thrown away (CASEBOOK_PG_DURABLE=1 keeps PostgreSQL's defaults,
  # for benchmarks); connections enough for parallel test processes.
  local durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  [[ -n ${CASEBOOK_PG_DURABLE:-} ]] && durability=""
  "${run[@]}" "$bin/pg_ctl" -D "$data/cluster" -l "$data/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $data $durability -c max_connections=300 -c shared_buffers=128MB" \
    start >/dev/null 2>&1 || {
    cat "$data/server.log" >&2
    fail "the PostgreSQL server did not start"
  }
  echo "export CASEBOOK_TEST_POSTGRES='postgres://casebook:$password@127.0.0.1:$port/postgres'"
  echo "export CASEBOOK_TEST_PGDATA='$data'"
}

stop() {
  local data=${1:?the folder printed by start}
  local bin run=()
  bin=$(bindir)
  [[ $(id -u) -eq 0 ]] && run=(runuser -u postgres --)
  "${run[@]}" "$bin/pg_ctl" -D "$data/cluster" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$data"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) fail "usage: scripts/postgres.sh start | stop FOLDER" ;;
esac
