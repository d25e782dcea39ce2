#!/usr/bin/env bash
# The console's cases table over the realistic letta file (issues 16 and 37), on the embedded
# store and, with BACKENDS including postgres, on a PostgreSQL store of the cluster
# scripts/postgres.sh starts: time to first byte (curl's %{time_starttransfer}, median of 5 with
# a signed-in session over loopback) of the version page's first 50 cases, a page deep in the
# version (half way, by a cursor made from the API's) and the page before it, the last page, a
# label filter, a bare-word search, a count by `label.kind`, one case, the dataset page; and
# `jq -c .` over the same file as the reference of the run.
#
#   scripts/bench-console.sh                          # ROWS=1000000, BACKENDS="sqlite postgres"
#   ROWS=100000 BACKENDS=sqlite scripts/bench-console.sh
#   NO_BUILD=1 scripts/bench-console.sh               # the release binary already built
#
# Release build under /tmp/release.lock, timed requests under /tmp/bench.lock (flock).
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${ROWS:-1000000}
backends=${BACKENDS:-sqlite postgres}
data=${BENCH_DATA:-${CARGO_TARGET_DIR:-target}/bench-data}
if [[ -z ${NO_BUILD:-} ]]; then
  flock /tmp/release.lock nice -n 5 cargo build --release -q -p casebook-cli
fi
bin=$(scripts/release-binary.sh)
file=$data/letta-realistic-$rows.jsonl
[[ -f $file ]] || "$bin" generate --kind letta-realistic --cases "$rows" -o "$file" -q
dir=$data/console-$rows
rm -rf "$dir" && mkdir -p "$dir"
export CASEBOOK_AUTHOR=bench

ttfb() { # url: "status seconds", the median of 5 times to first byte
  local url=$1 times=()
  for _ in 1 2 3 4 5; do
    times+=("$(flock /tmp/bench.lock curl -s -o /dev/null -w '%{http_code} %{time_starttransfer}' -b "$cookie" "$base$url")")
  done
  printf '%s\n' "${times[@]}" | sort -k2 -n | sed -n 3p
}
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$(ttfb "$3")"; }

echo "| backend | page | status, time to first byte (median of 5) |"
echo "|---|---|---|"
reference=$( { flock /tmp/bench.lock /usr/bin/time -f %e jq -c . "$file" >/dev/null; } 2>&1)
echo "| reference | \`jq -c .\` over the $rows-row file | ${reference} s |"
for backend in $backends; do
  if [[ $backend == postgres ]]; then
    postgres=$(scripts/postgres.sh start)
    eval "$postgres"
    export CASEBOOK_STORE=${CASEBOOK_TEST_POSTGRES%/*}/console
  else
    export CASEBOOK_STORE=$dir/.casebook
  fi
  "$bin" init -q >/dev/null
  "$bin" import "$file" --dataset big -q
  key=$("$bin" keys create --project default --scope read 2>/dev/null)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$bin" serve --listen "127.0.0.1:$port" -q &
  server=$!
  base=http://127.0.0.1:$port
  until curl -sf "$base/healthz" >/dev/null; do sleep 0.1; done
  cookie=$(curl -s -o /dev/null -D - -X POST --data-urlencode "key=$key" "$base/signin" |
    sed -n 's/^set-cookie: \(casebook_session=[^;]*\).*/\1/ip')
  v=/projects/default/datasets/big/versions/v1
  api=/api/v1/projects/default/datasets/big/versions/v1/cases
  # Half way: the API's cursor after 1,000-case pages, with the position the console shows.
  cursor=
  for _ in $(seq 1 $((rows / 2000))); do
    cursor=$(curl -s -H "authorization: Bearer $key" "$base$api?limit=1000${cursor:+&cursor=$cursor}" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["next_cursor"])')
  done
  deep=$(python3 - "$cursor" "$((rows / 2))" <<'EOF'
import base64, json, sys
token = json.loads(base64.urlsafe_b64decode(sys.argv[1] + "=" * (-len(sys.argv[1]) % 4)))
token["n"] = int(sys.argv[2])
print(base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode().rstrip("="))
EOF
)
  previous=$(curl -s -b "$cookie" "$base$v?cursor=$deep" | grep -o 'href="[^"]*" rel="prev"' | cut -d'"' -f2 | sed 's/&amp;/\&/g')
  id=$(curl -s -b "$cookie" "$base$v" | grep -o '/cases/[^"]*' | head -1)
  row "$backend" "version page, first 50 of $rows" "$v"
  row "$backend" "a page half way (cursor), 50 cases" "$v?cursor=$deep"
  row "$backend" "the page before it (previous)" "$previous"
  row "$backend" "filter \`labels contains \"math\"\` (count and first 50)" "$v?where=labels%20contains%20%22math%22"
  row "$backend" "bare-word search \`refund\` (count and first 50)" "$v?where=refund"
  row "$backend" "count by \`label.kind\` under \`labels contains \"math\"\`" "$v?where=labels%20contains%20%22math%22&group_by=label.kind"
  row "$backend" "one case with its history" "$v$id"
  row "$backend" "dataset page" /projects/default/datasets/big
  # Sorted (issue 37): by id and by a field, first page and half way (a cursor of the sort made
  # here from the case half way: by id its id; by \`-metadata.batch\` the batch half way).
  sorted_deep() { # sort, rank, number, text: the console's cursor of that key, position rows/2
    python3 - "$1" "$2" "$3" "$4" "$((rows / 2))" <<'EOF2'
import base64, json, sys
sort, rank, num, text, n = sys.argv[1:]
token = {"v": 1, "s": sort, "r": int(rank), "x": float(num), "t": text, "i": text, "n": int(n)}
print(base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode().rstrip("="))
EOF2
  }
  mid=$(python3 -c 'import base64,json,sys; t=sys.argv[1]; print(json.loads(base64.urlsafe_b64decode(t+"="*(-len(t)%4)))["i"])' "$cursor")
  row "$backend" "sorted by \`id\`, first 50" "$v?sort=id"
  row "$backend" "sorted by \`id\`, a page half way (cursor)" "$v?sort=id&cursor=$(sorted_deep id 0 0 "$mid")"
  row "$backend" "sorted by \`-metadata.batch\`, first 50" "$v?sort=-metadata.batch"
  row "$backend" "sorted by \`-metadata.batch\`, a page half way (cursor)" "$v?sort=-metadata.batch&cursor=$(sorted_deep -metadata.batch 0 $((rows / 2000)) '')"
  row "$backend" "sorted by \`-metadata.batch\` under \`labels contains \"math\"\`" "$v?sort=-metadata.batch&where=labels%20contains%20%22math%22"
  kill "$server"
  wait "$server" 2>/dev/null || true
  if [[ $backend == postgres ]]; then scripts/postgres.sh stop "$CASEBOOK_TEST_PGDATA"; fi
done
