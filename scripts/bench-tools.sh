#!/usr/bin/env bash
# Served tool calls (issue 34's speed section): CASES cases (10,000 by default), each with a
# tool whose recorded answers match `service: db`, run against a fake investigating agent on
# 127.0.0.1 that makes CALLS calls (5) before it answers, in three ways
# (`crates/casebook-runner/examples/fake_investigator.rs`): a chat-completions model whose calls
# casebook's tool loop answers, an HTTP protocol agent replying `tool_calls`, and an HTTP agent
# calling the run's MCP server with rmcp's client. Each in a fresh store (so nothing is reused),
# concurrency 64, grader `contains`. Prints wall time, served calls/s and peak RSS; then the
# same model run with a fifth of the cases (memory flat in the number of cases); then the
# latency probes of one served call (release build).
#
#   scripts/bench-tools.sh                 # CASES=10000 CALLS=5
#   CASES=2000 scripts/bench-tools.sh      # quicker
#
# Needs GNU time (/usr/bin/time). Timed commands take /tmp/bench.lock (flock) so that two
# benchmarks do not share the machine.
set -euo pipefail
cd "$(dirname "$0")/.."

CASES=${CASES:-10000}
CALLS=${CALLS:-5}
TARGET=$(realpath -m "${CARGO_TARGET_DIR:-target}")
DATA=$TARGET/bench-data
WORK=$DATA/tools
mkdir -p "$DATA"
if [[ -z ${NO_BUILD:-} ]]; then # NO_BUILD=1: use the binaries already built
  nice -n 5 cargo build --release -q -p casebook-cli
  nice -n 5 cargo build --release -q -p casebook-runner --example fake_investigator
fi
BIN=$TARGET/release/casebook
FAKE=$TARGET/release/examples/fake_investigator

# Native JSONL: an incident per line whose `logs` tool answers `service: db` (the shape of
# examples/investigation/incidents.yaml, one tool).
dataset() { # cases, file
  awk -v n="$1" 'BEGIN {
    for (i = 0; i < n; i++)
      printf "{\"id\":\"inc-%06d\",\"input\":\"Why does service %d time out since 14:%02d?\",\"tools\":[{\"name\":\"logs\",\"description\":\"Recent log lines of a service\",\"parameters\":{\"type\":\"object\",\"properties\":{\"service\":{\"type\":\"string\"},\"step\":{\"type\":\"integer\"}},\"required\":[\"service\"]},\"responses\":[{\"when\":{\"includes\":{\"service\":\"db\"}},\"result\":[\"14:%02d:12 ERROR db: connection pool exhausted (50/50 in use)\",\"14:%02d:13 WARN api-%d: retrying after upstream timeout\"]},{\"when\":{\"matches\":{\"service\":\"^web\"}},\"result\":\"healthy\"}],\"default\":\"empty\"}],\"expected\":{\"output\":\"pool exhausted\"}}\n", i, i, i % 60, i % 60, i % 60, i
  }' >"$2"
}

TIME="$WORK/time"
timed() { # label, cases, stdout file, command...
  local label=$1 cases=$2 out=$3; shift 3
  flock /tmp/bench.lock /usr/bin/time -f "%e %U %S %M" -o "$TIME" "$@" >"$out"
  read -r secs user sys kib <"$TIME"
  local calls=$((cases * CALLS))
  local rate=$(awk -v s="$secs" -v n="$calls" 'BEGIN { printf "%.0f", n / s }')
  local cpu=$(awk -v u="$user" -v y="$sys" -v n="$calls" 'BEGIN { printf "%.0f", (u + y) * 1e6 / n }')
  printf '| %s | %s | %s s | %s calls/s | %s MiB | %s µs |\n' "$label" "$calls" "$secs" "$rate" "$((kib / 1024))" "$cpu"
}

agent=
trap '[[ -n $agent ]] && kill $agent 2>/dev/null' EXIT
run_mode() { # mode, cases
  local mode=$1 cases=$2 dir="$WORK/$1-$2"
  rm -rf "$dir" && mkdir -p "$dir"
  [[ -f $DATA/tools-$cases.jsonl ]] || dataset "$cases" "$DATA/tools-$cases.jsonl"
  cp "$DATA/tools-$cases.jsonl" "$dir/cases.jsonl"
  "$FAKE" "$mode" "$CALLS" >"$dir/agent.url" &
  agent=$!
  for _ in $(seq 50); do [[ -s $dir/agent.url ]] && break; sleep 0.1; done
  cat >"$dir/e.yaml" <<YAML
name: tools-$mode
dataset: cases.jsonl
target: '$(cat "$dir/agent.url")'
concurrency: 64
threshold: 0
graders:
  - {kind: contains}
YAML
  (cd "$dir" && CASEBOOK_STORE=.casebook "$BIN" init -q >/dev/null)
  CASEBOOK_STORE=$dir/.casebook timed "$mode, $cases cases × $CALLS calls" "$cases" "$dir/summary.json" \
    "$BIN" run "$dir/e.yaml" -q --format json
  # Every run passed: each got its answers (a run whose calls were not answered says `empty`).
  jq -e --argjson n "$cases" '.totals.passed == $n and .totals.errors == 0' "$dir/summary.json" >/dev/null ||
    echo "warning: not every $mode run passed: $(jq -c .totals "$dir/summary.json")" >&2
  kill $agent 2>/dev/null; wait $agent 2>/dev/null || true; agent=
}

mkdir -p "$WORK"
echo "| agent | served calls | wall | rate | peak RSS | casebook CPU a call |"
echo "|---|---|---|---|---|---|"
for mode in ${MODES:-model protocol mcp}; do run_mode $mode "$CASES"; done
[[ -n ${NO_FIFTH:-} ]] || run_mode model $((CASES / 5))
[[ -n ${NO_PROBES:-} ]] && exit 0 # NO_PROBES=1: skip the latency probes (a release test build)
echo
echo "One served call over loopback (release):"
flock /tmp/bench.lock nice -n 0 cargo nextest run --release -p casebook-runner --run-ignored only \
  -E 'test(/served_call_latency|server_side_latency/)' --no-capture 2>&1 | grep -E 'p50 .* p99' || true
