#!/usr/bin/env bash
# The review queue and the case page's navigation (issue 37) over the realistic 1M-row letta
# file in an embedded store: `big` (v1, no case has a review state: the queue's draft part reads
# every case and finds none) and `drafts` (v2 marks the 2,922 cases with `metadata.batch >= 990`
# draft; the first is row 990,003). Each page is fetched 5 times with a signed-in session; the
# median time to first byte (curl's `time_starttransfer`) is printed. `BIN=path` measures that
# binary instead of building one; `CASEBOOK_BENCH_POSTGRES=URL` (a database URL) measures a
# PostgreSQL store there instead of an embedded one.
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${ROWS:-1000000}
data=${BENCH_DATA:-target/bench-data}
bin=${BIN:-}
if [[ -z $bin ]]; then
  flock /tmp/release.lock nice -n 5 cargo build --release -q -p casebook-cli
  bin=$(scripts/release-binary.sh)
fi
file=$data/letta-realistic-$rows.jsonl
[[ -f $file ]] || "$bin" generate --kind letta-realistic --cases "$rows" -o "$file" -q
dir=${QUEUE_DIR:-$data/queue}
rm -rf "$dir" && mkdir -p "$dir"
export CASEBOOK_STORE=${CASEBOOK_BENCH_POSTGRES:-$dir/.casebook} CASEBOOK_AUTHOR=bench
"$bin" init -q
"$bin" import "$file" --dataset big -q
"$bin" import "$file" --dataset drafts -q
"$bin" review drafts --state draft --where "metadata.batch >= $((rows / 1000 - 10))" -q
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
    times+=("$(flock /tmp/bench.lock curl -s -o /dev/null -w '%{http_code} %{time_starttransfer}' -b "$cookie" "$base$url")")
  done
  printf '%s\n' "${times[@]}" | sort -k2 -n | sed -n 3p
}
d=/projects/default/datasets
hard='where=metadata.difficulty%20%3D%3D%20%22hard%22'
first=$(curl -s -b "$cookie" "$base$d/big/versions/v1" | grep -o '/cases/[^"?]*' | head -1)
last=/cases/$(tail -1 "$file" | python3 -c 'import json,sys,urllib.parse; print(urllib.parse.quote(json.loads(sys.stdin.read())["id"], safe=""))')
printf '%-52s %s\n' "page" "status seconds to first byte (median of 5)"
printf '%-52s %s\n' "queue, no drafts (reads all 1M), 20 unreviewed" "$(median "$d/big/queue")"
printf '%-52s %s\n' "queue, drafts from row 990,003" "$(median "$d/drafts/queue")"
printf '%-52s %s\n' "queue, filter difficulty == hard" "$(median "$d/big/queue?$hard")"
printf '%-52s %s\n' "queue, next page (cursor)" "$(median "$(curl -s -b "$cookie" "$base$d/big/queue" | grep -o '/projects/[^"]*cursor=[^"]*' | head -1 | sed 's/&amp;/\&/g')")"
printf '%-52s %s\n' "case page, first case, next / next unreviewed" "$(median "$d/big/versions/v1$first?$hard")"
printf '%-52s %s\n' "case page, last case (nothing after it)" "$(median "$d/big/versions/v1$last?$hard")"
printf '%-52s %s\n' "case page, next draft 990k rows on (filter review)" "$(median "$d/drafts/versions/v2$first?where=review%20%3D%3D%20%22draft%22")"
