#!/usr/bin/env bash
# The console's pages over the realistic 1M-row letta file in an embedded store: the version
# page (its first 50 cases), a page deep in it by cursor, a label filter, a case, the dataset
# and project pages. Each is fetched 5 times with a signed-in session; the median of curl's
# total time is printed (loopback: the server's time to answer, plus a few tenths of a ms).
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${ROWS:-1000000}
data=${BENCH_DATA:-target/bench-data}
cargo build --release -q -p casebook-cli
bin=$(scripts/release-binary.sh)
file=$data/letta-realistic-$rows.jsonl
[[ -f $file ]] || "$bin" generate --kind letta-realistic --rows "$rows" -o "$file" -q
dir=$data/console
rm -rf "$dir" && mkdir -p "$dir"
export CASEBOOK_STORE=$dir/.casebook CASEBOOK_AUTHOR=bench
"$bin" init -q
"$bin" import "$file" --dataset big -q
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
    times+=("$(curl -s -o /dev/null -w '%{http_code} %{time_total}' -b "$cookie" "$base$url")")
  done
  printf '%s\n' "${times[@]}" | sort -k2 -n | sed -n 3p
}
v=/projects/default/datasets/big/versions/v1
deep=$(curl -s -b "$cookie" "$base$v" | grep -o 'cursor=[^"]*' | head -1)
id=$(curl -s -b "$cookie" "$base$v" | grep -o '/cases/[^"]*' | head -1)
printf '%-40s %s\n' "page" "status seconds (median of 5)"
printf '%-40s %s\n' "version page, first 50 cases" "$(median "$v")"
printf '%-40s %s\n' "version page, next 50 (cursor)" "$(median "$v?$deep")"
printf '%-40s %s\n' "filter: labels contains \"math\"" "$(median "$v?where=labels%20contains%20%22math%22")"
printf '%-40s %s\n' "filter, a label no case has" "$(median "$v?where=labels%20contains%20%22nothing%22")"
printf '%-40s %s\n' "one case with its history" "$(median "$v$id")"
printf '%-40s %s\n' "dataset page (versions)" "$(median /projects/default/datasets/big)"
printf '%-40s %s\n' "project page (datasets)" "$(median /projects/default)"
