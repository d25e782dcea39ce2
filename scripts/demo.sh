#!/usr/bin/env bash
# The README's first command: builds casebook and runs it on the bundled examples — validates
# every dataset, lints two, summarises and converts a mas-lab manifest, keeps versions of a
# dataset in an embedded store (in a temporary folder), shows their log and diff, reviews a case
# and lints the stored version, captures production traces as cases, filters cases (and reads
# them from Python, through the `casebook` module), runs the example experiment against the
# built-in agents, and lets two agents investigate incidents with tools whose answers come from
# each case's recorded telemetry.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -q -p casebook-cli
bin=$(scripts/release-binary.sh)
casebook() { "$bin" "$@"; }

echo "== validate every example dataset"
casebook validate examples/agenthealth/rca.json examples/casebook/incidents.yaml examples/letta/support.jsonl \
  examples/maslab/trip-planner.yaml examples/voltagent/geography.json examples/investigation/incidents.yaml
casebook validate --from csv --map id=qid,input=question,expected.output=answer examples/spreadsheet/questions.csv

echo; echo "== hygiene: duplicates, leaked ground truth, label typos, weak labels (warnings, exit 0)"
casebook lint examples/letta/support.jsonl examples/maslab/trip-planner.yaml

echo; echo "== inspect a mas-lab manifest"
casebook inspect examples/maslab/trip-planner.yaml

echo; echo "== the same manifest in casebook's own format"
casebook convert examples/maslab/trip-planner.yaml --to casebook --syntax yaml -q | head -25

store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
export CASEBOOK_STORE=$store/.casebook CASEBOOK_AUTHOR=demo
echo; echo "== a store in $store"
casebook init
casebook import examples/letta/support.jsonl --dataset support -m "first cut"
sed 's/5 business days/7 business days/' examples/letta/support.jsonl >"$store/support-v2.jsonl"
casebook commit support "$store/support-v2.jsonl" -m "refunds take longer now"
casebook log support
casebook diff support@v1 support@latest
casebook review support 1 --state reviewed --confidence 0.9 -m "checked against the refund policy"
casebook lint support@latest --deny warnings
echo; echo "== production traces become cases with draft expectations (captured twice: added once)"
casebook capture examples/traces/genai-agent.json examples/traces/openinference.json --dataset from-prod
casebook capture examples/traces/genai-agent.json --dataset from-prod
echo; echo "== choosing cases: the same filter on the store (in SQL) and on the file"
casebook cases support --where 'labels contains "refunds" or len(turns) >= 1'
casebook cases examples/letta/support.jsonl --where 'labels contains "refunds" or len(turns) >= 1'
casebook cases support --group-by label.category
echo; echo "== from Python: the casebook module (python/casebook, the standard library only) on the same store"
CASEBOOK_BIN=$bin PYTHONPATH=python python3 -c '
import casebook
ds = casebook.dataset("support@latest", where="labels contains \"refunds\"")
print(f"{ds.version} ({ds.version.id[:12]}): {len(ds)} of {ds.version.cases} cases about refunds:", [case.id for case in ds])'
echo; echo "== running the dataset against built-in agents, graded; results kept in the store"
casebook run examples/experiments/support.yaml --report markdown="$store/report.md" --overwrite || true
casebook results --list
echo; echo "== agents investigate: tool calls answered from each case's world snapshot (python3 runs one of them)"
casebook run examples/experiments/investigation.yaml --report markdown="$store/investigation.md" --overwrite || true
sed -n '/^## Tool calls/,$p' "$store/investigation.md" | head -12
