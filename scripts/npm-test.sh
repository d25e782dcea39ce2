#!/usr/bin/env bash
# Installs the npm tarballs that scripts/npm.sh built into a fresh folder, offline, as a user
# would (`npm install ./casebook-*.tgz ./casebook-cli-linux-x64-*.tgz`), runs `npx casebook
# --version`, the client's `node --test` suite against a real `casebook serve` (over SQLite, and
# over PostgreSQL too when `CASEBOOK_TEST_POSTGRES` is set), and the vitest example. Called by
# scripts/test.sh.
#
#   scripts/npm-test.sh [OUT]   # the tarballs' folder (default target/npm)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$(realpath "${1:-target/npm}")
tools=$root/target/node-tools
folder=$(mktemp -d "${TMPDIR:-/tmp}/casebook-npm-XXXXXX")
trap 'rm -rf "$folder"' EXIT

cd "$folder"
echo '{"name": "casebook-npm-test", "private": true, "type": "module"}' >package.json
npm install --offline --no-audit --no-fund --silent "$out"/casebook-[0-9]*.tgz "$out"/casebook-cli-linux-x64-*.tgz
npx --offline casebook --version

cp "$root"/npm/casebook/test/*.test.mjs .
node --test --test-reporter=spec ./*.test.mjs
# Again on PostgreSQL when the test command's server is there (`CASEBOOK_TEST_POSTGRES`, as the
# Python suite reads it): the server on a database of its own, which `casebook init` creates.
if [[ -n ${CASEBOOK_TEST_POSTGRES:-} ]]; then
  database="npm_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  CASEBOOK_TEST_STORE="${CASEBOOK_TEST_POSTGRES%/*}/$database" node --test --test-reporter=spec ./*.test.mjs
fi

# The vitest example, with the vitest of target/node-tools, against a server of its own.
mkdir example && cd example
export HOME=$folder/example NO_COLOR=1
casebook=$folder/node_modules/.bin/casebook
"$casebook" init >/dev/null
key=$("$casebook" keys create --project evals --scope write | grep -o 'cb_[A-Za-z0-9_]*')
"$casebook" serve --listen 127.0.0.1:0 --quiet >server.out &
server=$!
trap 'kill "$server" 2>/dev/null; rm -rf "$folder"' EXIT
for _ in $(seq 100); do [[ -s server.out ]] && break; sleep 0.1; done
export CASEBOOK_URL=$(head -1 server.out) CASEBOOK_TOKEN=$key
for k in 1 2 3 4 5; do echo "{\"id\": \"q$k\", \"input\": \"Question $k?\", \"ground_truth\": \"answer $k\", \"tags\": [\"$( ((k % 2)) && echo odd || echo even)\"]}"; done >support.jsonl
"$casebook" push support.jsonl --dataset support >/dev/null 2>&1
cp "$root"/npm/casebook/examples/vitest/*.ts .
ln -s "$folder/node_modules" node_modules
"$tools/node_modules/.bin/vitest" run --root . 2>&1 | tee vitest.out
grep -q 'Tests  3 passed (3)' vitest.out
