#!/usr/bin/env bash
# Issue 37's diff and compare pages at size, on an embedded store (and on PostgreSQL when
# CASEBOOK_BENCH_POSTGRES names a database URL): the realistic letta file imported as v1, one
# case changed (`casebook put`) as v2, ROWS/10 cases changed as v3 (a whole import). Each page is
# fetched 5 times with a signed-in session; the median of curl's time to first byte and total
# is printed, and the server's peak memory (VmHWM) after all of them.
#   ROWS=100000 scripts/bench-diff.sh      ROWS=1000000 scripts/bench-diff.sh
#   NO_BUILD=1 BIN=path scripts/bench-diff.sh   # a release binary already built
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${ROWS:-100000}
data=${BENCH_DATA:-target/bench-data}
if [[ -z ${NO_BUILD:-} ]]; then
  flock /tmp/release.lock nice -n 5 cargo build --release -q -p casebook-cli
fi
bin=${BIN:-$(scripts/release-binary.sh)}
file=$data/letta-realistic-$rows.jsonl
[[ -f $file ]] || "$bin" generate --kind letta-realistic --cases "$rows" -o "$file" -q
dir=$data/diff-$rows
rm -rf "$dir" && mkdir -p "$dir"
if [[ -n ${CASEBOOK_BENCH_POSTGRES:-} ]]; then
  export CASEBOOK_STORE=$CASEBOOK_BENCH_POSTGRES
else
  export CASEBOOK_STORE=$dir/.casebook
fi
export CASEBOOK_AUTHOR=bench
"$bin" init -q
"$bin" import "$file" --dataset big -q
# v2: one case changed.
first=$(head -1 "$file" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r.get("id") or "")')
"$bin" export big --to casebook -q | head -1 |
  python3 -c 'import json,sys; c=json.load(sys.stdin); c["input"]=str(c.get("input"))+" (edited)"; print(json.dumps(c))' \
  >"$dir/one.jsonl"
"$bin" put big "$dir/one.jsonl" -q
# v3: every tenth case changed (the rest the same).
"$bin" export big --to casebook -q |
  python3 -c '
import json, sys
for i, line in enumerate(sys.stdin):
    c = json.loads(line)
    if i % 10 == 0:
        c["input"] = str(c.get("input")) + " (v3)"
    print(json.dumps(c))' >"$dir/tenth.jsonl"
"$bin" import "$dir/tenth.jsonl" --dataset big -q
key=$("$bin" keys create --project default --scope read 2>/dev/null)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve --listen "127.0.0.1:$port" -q &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
base=http://127.0.0.1:$port
until curl -sf "$base/healthz" >/dev/null; do sleep 0.1; done
cookie=$(curl -s -o /dev/null -D - -X POST --data-urlencode "key=$key" "$base/signin" |
  sed -n 's/^set-cookie: \(casebook_session=[^;]*\).*/\1/ip')
median() {
  local url=$1 times=()
  for _ in 1 2 3 4 5; do
    times+=("$(flock /tmp/bench.lock curl -s -o /dev/null -w '%{http_code} %{time_starttransfer} %{time_total} %{size_download}' \
      -b "$cookie" -H "authorization: Bearer $key" "$base$url")")
  done
  printf '%s\n' "${times[@]}" | sort -k2 -n | sed -n 3p
}
d=/projects/default/datasets/big/diff
printf '%-46s %s\n' "page ($rows cases)" "status first-byte total bytes (median of 5)"
printf '%-46s %s\n' "diff page, one case changed (v1 → v2)" "$(median "$d?from=v1&to=v2")"
printf '%-46s %s\n' "diff page, $((rows / 10)) changed (v2 → v3)" "$(median "$d?from=v2&to=v3")"
next=$(curl -s -b "$cookie" "$base$d?from=v2&to=v3" | grep -o 'href="[^"]*list=modified&amp;[^"]*after=[^"]*' | head -1 |
  sed 's/^href="//; s/&amp;/\&/g')
printf '%-46s %s\n' "its modified list, second page (cursor)" "$(median "$next")"
printf '%-46s %s\n' "API diff, one case, limit=100" \
  "$(median "/api/v1/projects/default/datasets/big/diff?from=v1&to=v2&limit=100")"
grep VmHWM "/proc/$server/status"
