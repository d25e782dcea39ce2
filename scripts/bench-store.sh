#!/usr/bin/env bash
# Whole-command benchmarks of the embedded store, against the targets of the store issue:
# import and export of a 1M-case letta JSONL, a one-case `put` (time and bytes written), a diff
# of versions 10 cases apart, and `show` of one case in a 100-version history.
#
#   scripts/bench-store.sh              # ROWS=1000000 by default
#   ROWS=200000 scripts/bench-store.sh  # quicker
#   ONLY=realistic scripts/bench-store.sh  # the imports of realistic rows only
#
# Imports are timed first on realistic rows (`generate --kind letta-realistic`: 30 % without an
# id, repeated prompts, escapes, mostly non-ASCII): a tenth of ROWS and ROWS into empty stores,
# then ROWS again as a second dataset into the store that holds the first (the path through the
# write-ahead log). The rest runs on the generator's all-id rows.
#
# Needs GNU time (/usr/bin/time) and sqlite3 (to empty the WAL before measuring growth).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-1000000}
DATA=target/bench-data
WORK=$DATA/store
BIN=$DATA/bin/casebook-store-bench
mkdir -p "$DATA/bin"
cargo build --release -q -p casebook-cli
cp "$(scripts/release-binary.sh)" "$BIN"

JSONL=$DATA/letta-$ROWS.jsonl
REALISTIC=$DATA/letta-realistic-$ROWS.jsonl
REALISTIC_SMALL=$DATA/letta-realistic-$((ROWS / 10)).jsonl
# The second dataset: other rows of the same kind (another seed), so its bodies are new too.
REALISTIC_2=$DATA/letta-realistic-$ROWS-seed2.jsonl
[[ -f $REALISTIC_2 ]] || "$BIN" generate --kind letta-realistic --cases "$ROWS" --seed 2 -o "$REALISTIC_2"
[[ -f $REALISTIC ]] || "$BIN" generate --kind letta-realistic --cases "$ROWS" -o "$REALISTIC"
[[ -f $REALISTIC_SMALL ]] || "$BIN" generate --kind letta-realistic --cases "$((ROWS / 10))" -o "$REALISTIC_SMALL"
rm -rf "$WORK" && mkdir -p "$WORK"
export CASEBOOK_AUTHOR=bench

# shellcheck source=settle.sh
source scripts/settle.sh
timed() { # label, command...
  local label=$1; shift
  settle
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >/dev/null
  read -r secs kib <"$WORK/time"
  printf '| %s | %s s | %s MiB |\n' "$label" "$secs" "$((kib / 1024))"
}
bytes() { du -cb "$WORK/.casebook" | tail -1 | cut -f1; }
checkpoint() { sqlite3 "$WORK/.casebook/store.db" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null; }

echo "| command | wall | peak RSS |"
echo "|---|---|---|"
cat "$REALISTIC" "$REALISTIC_SMALL" "$REALISTIC_2" >/dev/null
for input in "$REALISTIC_SMALL" "$REALISTIC"; do
  rm -rf "$WORK/.casebook" && CASEBOOK_STORE=$WORK/.casebook "$BIN" init -q >/dev/null
  CASEBOOK_STORE=$WORK/.casebook timed "import $(basename "$input") (empty store)" "$BIN" import "$input" --dataset first -q
done
CASEBOOK_STORE=$WORK/.casebook timed "import $(basename "$REALISTIC_2") as a second dataset" \
  "$BIN" import "$REALISTIC_2" --dataset second -q
rm -rf "$WORK/.casebook"
[[ ${ONLY:-} == realistic ]] && exit 0

[[ -f $JSONL ]] || "$BIN" generate --kind letta-jsonl --cases "$ROWS" -o "$JSONL"
export CASEBOOK_STORE=$WORK/.casebook
"$BIN" init -q >/dev/null
timed "import $ROWS cases" "$BIN" import "$JSONL" --dataset big -q
timed "export to casebook JSONL" "$BIN" export big --to casebook --overwrite -o "$WORK/out.jsonl" -q
timed "export to letta JSONL" "$BIN" export big --to letta --overwrite -o "$WORK/out-letta.jsonl" -q
cmp -s "$WORK/out-letta.jsonl" "$JSONL" && echo "(the letta export is byte-identical to the imported file)"

# One edited case.
head -1 "$JSONL" | sed 's/"ground_truth":"/"ground_truth":"edited /' >"$WORK/one.jsonl"
checkpoint
before=$(bytes)
timed "put one case" "$BIN" put big "$WORK/one.jsonl" -q
after=$(bytes)
echo "(growth of the store files, WAL included: $((after - before)) bytes)"

# Ten edited cases, then the diff between the two versions.
head -10 "$JSONL" | sed 's/"ground_truth":"/"ground_truth":"again /' >"$WORK/ten.jsonl"
"$BIN" put big "$WORK/ten.jsonl" -q >/dev/null
timed "diff of versions 10 cases apart" "$BIN" diff big@v2 big@v3

# A 100-version history of a small dataset, then one case of v1.
head -100 "$JSONL" >"$WORK/small.jsonl"
"$BIN" import "$WORK/small.jsonl" --dataset hist -q >/dev/null
for i in $(seq 1 99); do
  head -1 "$JSONL" | sed "s/\"ground_truth\":\"/\"ground_truth\":\"v$i /" >"$WORK/edit.jsonl"
  "$BIN" put hist "$WORK/edit.jsonl" -q >/dev/null
done
timed "show hist@v1 0 (100 versions)" "$BIN" show hist@v1 0

# Filters (the filter issue): pushed down to SQL on the stored 1M-case version, and in memory
# on the JSONL file beside `validate` of the same file.
LABEL_META='labels contains "math" and metadata.difficulty == "hard"'
timed "count: labels contains \"math\"" "$BIN" cases big --where 'labels contains "math"' --count
timed "count: $LABEL_META" "$BIN" cases big --where "$LABEL_META" --count
timed "list (JSON lines): $LABEL_META" "$BIN" cases big --where "$LABEL_META" --format json
timed "count: metadata.batch == 7 (every facet read)" "$BIN" cases big --where 'metadata.batch == 7' --count
timed "validate the JSONL file" "$BIN" validate "$JSONL" -q
timed "validate --where '$LABEL_META'" "$BIN" validate "$JSONL" -q --where "$LABEL_META"
timed "cases FILE --where '$LABEL_META' --count" "$BIN" cases "$JSONL" --where "$LABEL_META" --count
