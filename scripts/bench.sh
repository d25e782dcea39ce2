#!/usr/bin/env bash
# Whole-command benchmarks of `casebook validate` and `casebook convert`, against the targets of
# the formats issue, with `jq -c .` on the same JSONL file as the yardstick. BENCHMARKS.md
# records a run of this script; rerun it to reproduce the figures.
#
#   scripts/bench.sh            # everything: 1M-row letta JSONL (realistic rows and the all-id
#                               # rows), CSV, 100k-item mas-lab YAML
#   ONLY=realistic scripts/bench.sh  # the realistic letta JSONL only (100k and 1M rows)
#   RUNS=5 scripts/bench.sh     # more runs per figure (default 3; the median is reported)
#   CASEBOOK=path/to/casebook scripts/bench.sh  # measure that binary instead of building one
#   ROWS=100000 scripts/bench.sh  # a smaller, quicker run (its data goes to other files)
#   BENCH_OUT=dir scripts/bench.sh  # where converted files go (default: tmpfs, see below)
#
# What it does:
#   1. builds the release binary and copies it to target/bench-data/bin/, so that a rebuild
#      while the benchmark runs cannot swap the binary under it;
#   2. generates the data sets under target/bench-data/ with the hidden `casebook generate`
#      (deterministic; skipped when the file is already there);
#   3. runs every command RUNS times under `/usr/bin/time` with the input in the page cache and
#      reports the median wall time (as MB/s of input, 1 MB = 10^6 bytes) and the largest peak
#      RSS of the runs. Converted files go to /dev/shm (tmpfs) when it has room, so the figures
#      are casebook's rather than the disk's; one extra `convert` row per letta file writes to
#      target/bench-data/out/ on the disk, for comparison;
#   4. checks that `convert` writes byte-identical output with 1 and 2 threads (and the default);
#   5. prints a table with the target and whether it was met, and writes it to
#      target/bench-data/results.md.
#
# Needs: jq (`apt-get install -y jq`) and GNU time at /usr/bin/time (`apt-get install -y time`);
# about 1.3 GB of disk for the data and up to 4 GB of tmpfs. Takes about 10 minutes on 2 cores.
# The machine should be otherwise idle: other work on the cores shows up directly in the figures.
# So each command starts only once the machine has been idle for 2 s, and a run during which
# other processes used more than a tenth of a core is thrown away and run again (up to
# 3 × RUNS attempts; the count of runs thrown away is in the results).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
ROWS=${ROWS:-1000000}
YAML_ITEMS=${YAML_ITEMS:-$((ROWS / 10))}
DATA=target/bench-data
# Converted files go to memory (tmpfs) when there is room, so that the figures measure casebook
# rather than this machine's disk; one extra row per file measures writing to the disk too.
if [[ -z ${BENCH_OUT:-} ]] && [[ -d /dev/shm && -w /dev/shm ]] &&
  (($(df -Pk /dev/shm | awk 'NR == 2 { print $4 }') > 4 * 1024 * 1024)); then
  BENCH_OUT=/dev/shm/casebook-bench
fi
OUT=${BENCH_OUT:-$DATA/out}
DISK_OUT=$DATA/out
BIN=$DATA/bin/casebook
RESULTS=$DATA/results.md
# Targets (from the issue): MB/s with both cores, and peak RSS.
VALIDATE_MBS=300
CONVERT_MBS=150
RSS_MIB=96

for tool in jq /usr/bin/time; do
  command -v "$tool" >/dev/null || {
    echo "bench.sh: $tool is missing (apt-get install -y jq time)" >&2
    exit 2
  }
done

mkdir -p "$DATA/bin" "$OUT" "$DISK_OUT"
if [[ -n ${CASEBOOK:-} ]]; then
  echo "== binary: $CASEBOOK (CASEBOOK is set: not building)"
  cp "$CASEBOOK" "$BIN.new" && mv "$BIN.new" "$BIN"
else
  echo "== build"
  cargo build --release -p casebook-cli
  cp target/release/casebook "$BIN.new" && mv "$BIN.new" "$BIN"
fi

echo "== data ($DATA)"
JSONL=$DATA/letta-$ROWS.jsonl
CSV=$DATA/letta-$ROWS.csv
# Rows like users' files (`generate --kind letta-realistic`): 30 % without an id, repeated
# prompts, escapes, mostly non-ASCII. The tenth-size file shows whether the cost per row is flat.
REALISTIC=$DATA/letta-realistic-$ROWS.jsonl
REALISTIC_SMALL=$DATA/letta-realistic-$((ROWS / 10)).jsonl
YAML=$DATA/maslab-$YAML_ITEMS.yaml
gen() { # kind cases file: generate unless present; a partial file never takes the final name
  if [[ -s $3 ]]; then
    echo "   $3: present"
  else
    "$BIN" generate --kind "$1" --cases "$2" --overwrite -o "$3.tmp" && mv "$3.tmp" "$3"
    echo "   $3: generated"
  fi
}
gen letta-realistic "$ROWS" "$REALISTIC"
gen letta-realistic "$((ROWS / 10))" "$REALISTIC_SMALL"
INPUTS=("$REALISTIC")
if [[ ${ONLY:-} != realistic ]]; then
  gen letta-jsonl "$ROWS" "$JSONL"
  gen letta-csv "$ROWS" "$CSV"
  gen maslab-yaml "$YAML_ITEMS" "$YAML"
  INPUTS+=("$JSONL" "$CSV" "$YAML")
fi
cat "${INPUTS[@]}" >/dev/null # into the page cache: the figures are CPU, not disk

bytes() { stat -c %s "$1"; }
mbs() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", (s > 0 ? b / 1e6 / s : 0) }'; }

# The machine may be shared (another build, a test run): busy CPU time not spent by the command
# under test shows up in its figures. busy_ticks reads the machine's busy time from /proc/stat.
HZ=$(getconf CLK_TCK)
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# wait_idle: waits (up to IDLE_WAIT seconds, default 900) until the machine was idle for 2 s.
wait_idle() {
  local waited=0 before after
  while :; do
    before=$(busy_ticks)
    sleep 2
    after=$(busy_ticks)
    # less than a tenth of a core busy
    if ((after - before < HZ * 2 / 10)); then
      return
    fi
    if ((waited == 0)); then
      echo "   (waiting for the machine to be idle: something else is using $(((after - before) * 100 / (2 * HZ)))% of a core)"
    fi
    waited=$((waited + 2))
    if ((waited >= ${IDLE_WAIT:-900})); then
      echo "   (still busy after ${IDLE_WAIT:-900} s: measuring anyway)"
      return
    fi
  done
}

# measure NAME INPUT CMD...: runs CMD RUNS times; sets SECS (median wall), KIB (max peak RSS) and
# NOISY (runs thrown away). A run during which other processes used more than 5% of the machine
# is retried, up to 3 × RUNS attempts.
measure() {
  local name=$1 input=$2
  shift 2
  local times=() rsss=() rss=0 attempts=0 status before after wall kib cpu foreign
  NOISY=0
  cat "$input" >/dev/null # back into the page cache, if the kernel dropped it since
  wait_idle
  while ((${#times[@]} < RUNS)); do
    attempts=$((attempts + 1))
    status=0
    before=$(busy_ticks)
    /usr/bin/time -f '%e %M %U %S' -o "$OUT/time.txt" "$@" || status=$?
    after=$(busy_ticks)
    if ((status != 0)); then
      echo "bench.sh: \`$*\` exited with $status" >&2
      exit 1
    fi
    read -r wall kib cpu foreign < <(tail -n 1 "$OUT/time.txt" | awk '{ print $1, $2, $3 + $4 }')
    # CPU seconds the machine was busy with something other than this command
    foreign=$(awk -v b="$((after - before))" -v hz="$HZ" -v c="$cpu" 'BEGIN { f = b / hz - c; print (f > 0 ? f : 0) }')
    if awk -v f="$foreign" -v w="$wall" 'BEGIN { exit !(f > 0.1 * w + 0.05) }' && ((attempts < 3 * RUNS)); then
      NOISY=$((NOISY + 1))
      DISCARDED=$((DISCARDED + 1))
      echo "   (run discarded: other processes used ${foreign} CPU s during ${wall} s)"
      wait_idle
      continue
    fi
    times+=("$wall")
    rsss+=("$(((kib + 512) / 1024))")
    ((kib > rss)) && rss=$kib
  done
  SECS=$(printf '%s\n' "${times[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  KIB=$rss
  printf '   %-34s %6.2f s  %7.1f MB/s  %6.0f MiB   (runs: %s s; %s MiB)\n' \
    "$name" "$SECS" "$(mbs "$(bytes "$input")" "$SECS")" "$(awk -v k="$KIB" 'BEGIN { print k / 1024 }')" \
    "${times[*]}" "${rsss[*]}"
}

DISCARDED=0
ROWS_MD=()
# row WORKLOAD COMMAND THREADS INPUT TARGET_MBS JQ_MBS: appends a table row from SECS/KIB.
row() {
  local speed rss_mib verdict ratio
  speed=$(mbs "$(bytes "$4")" "$SECS")
  rss_mib=$(awk -v k="$KIB" 'BEGIN { printf "%.0f", k / 1024 }')
  ratio=$([[ $6 == - ]] && echo "n/a" || awk -v a="$speed" -v b="$6" 'BEGIN { printf "%.1f×", a / b }')
  if [[ $5 == - ]]; then
    verdict="(no target)"
  else
    local fast ok
    fast=$(awk -v a="$speed" -v t="$5" 'BEGIN { print (a >= t) ? "yes" : "no" }')
    ok=$(awk -v r="$rss_mib" -v t="$RSS_MIB" 'BEGIN { print (r <= t) ? "yes" : "no" }')
    verdict="speed ≥ $5 MB/s: **$fast**; RSS ≤ $RSS_MIB MiB: **$ok**"
  fi
  ROWS_MD+=("| $1 | \`$2\` | $3 | $SECS | $speed | $rss_mib | $ratio | $verdict |")
}

echo "== machine"
echo "   $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== timings (median of $RUNS runs, largest peak RSS)"

measure "jq -c . (realistic JSONL)" "$REALISTIC" sh -c "jq -c . '$REALISTIC' >/dev/null"
JQ_REALISTIC_MBS=$(mbs "$(bytes "$REALISTIC")" "$SECS")
row "letta JSONL, realistic" "jq -c . $REALISTIC > /dev/null" 1 "$REALISTIC" - "$JQ_REALISTIC_MBS"
measure "validate $(basename "$REALISTIC_SMALL") -t2" "$REALISTIC_SMALL" \
  "$BIN" validate "$REALISTIC_SMALL" --threads 2 -q
row "letta JSONL, realistic, a tenth" "casebook validate $REALISTIC_SMALL --threads 2 -q" 2 "$REALISTIC_SMALL" \
  "$VALIDATE_MBS" "$JQ_REALISTIC_MBS"
if [[ ${ONLY:-} != realistic ]]; then
  measure "jq -c . (JSONL)" "$JSONL" sh -c "jq -c . '$JSONL' >/dev/null"
  JQ_MBS=$(mbs "$(bytes "$JSONL")" "$SECS")
  row "letta JSONL" "jq -c . $JSONL > /dev/null" 1 "$JSONL" - "$JQ_MBS"
fi

for input in "${INPUTS[@]}"; do
  case $input in
    *realistic*) workload="letta JSONL, realistic" ;;
    *.jsonl) workload="letta JSONL" ;;
    *.csv) workload="letta CSV" ;;
    *) workload="mas-lab YAML" ;;
  esac
  # jq reads JSON only: the ratio is given for the JSONL file, where both read the same bytes.
  case $input in
    *realistic*) ratio_base=$JQ_REALISTIC_MBS ;;
    *.jsonl) ratio_base=$JQ_MBS ;;
    *) ratio_base=- ;;
  esac
  for threads in 2 1; do
    measure "validate $(basename "$input") -t$threads" "$input" "$BIN" validate "$input" --threads "$threads" -q
    target=$([[ $threads == 2 ]] && echo "$VALIDATE_MBS" || echo -)
    row "$workload" "casebook validate $input --threads $threads -q" "$threads" "$input" "$target" "$ratio_base"
  done
  for threads in 2 1; do
    out=$OUT/$(basename "$input").t$threads.jsonl
    measure "convert $(basename "$input") -t$threads" "$input" \
      "$BIN" convert "$input" --to casebook --overwrite -o "$out" --threads "$threads" -q
    target=$([[ $threads == 2 ]] && echo "$CONVERT_MBS" || echo -)
    row "$workload" "casebook convert $input --to casebook --overwrite -o $out --threads $threads -q" "$threads" "$input" \
      "$target" "$ratio_base"
  done
  if [[ $OUT != "$DISK_OUT" && $input != *.yaml ]]; then
    out=$DISK_OUT/$(basename "$input").disk.jsonl
    measure "convert $(basename "$input") -t2 to disk" "$input" \
      "$BIN" convert "$input" --to casebook --overwrite -o "$out" --threads 2 -q
    row "$workload" "casebook convert $input --to casebook --overwrite -o $out --threads 2 -q" "2 (disk)" "$input" - "$ratio_base"
    rm -f "$out"
  fi
done

echo "== determinism: convert output with --threads 1, 2 and the default"
DET=()
for input in "${INPUTS[@]}"; do
  one=$OUT/$(basename "$input").t1.jsonl
  two=$OUT/$(basename "$input").t2.jsonl
  dflt=$OUT/$(basename "$input").t0.jsonl
  "$BIN" convert "$input" --to casebook --overwrite -o "$dflt" -q
  if cmp -s "$one" "$two" && cmp -s "$one" "$dflt"; then
    verdict="identical ($(bytes "$one") bytes, sha256 $(sha256sum "$one" | cut -c1-16)…)"
  else
    verdict="**DIFFERENT** (cmp: $(cmp "$one" "$two" 2>&1 | head -n 1))"
  fi
  echo "   $(basename "$input"): $verdict"
  DET+=("- \`$(basename "$input")\` → casebook JSONL, threads 1 / 2 / default: $verdict")
  rm -f "$two" "$dflt"
done
# The letta writer too, on the realistic JSONL file (letta → letta).
"$BIN" convert "$REALISTIC" --to letta --overwrite -o "$OUT/letta.t1.jsonl" --threads 1 -q
"$BIN" convert "$REALISTIC" --to letta --overwrite -o "$OUT/letta.t2.jsonl" --threads 2 -q
if cmp -s "$OUT/letta.t1.jsonl" "$OUT/letta.t2.jsonl"; then
  verdict="identical ($(bytes "$OUT/letta.t1.jsonl") bytes)"
else
  verdict="**DIFFERENT**"
fi
echo "   $(basename "$REALISTIC") → letta: $verdict"
DET+=("- \`$(basename "$REALISTIC")\` → letta JSONL, threads 1 / 2: $verdict")
rm -f "$OUT"/*.jsonl "$OUT/time.txt"
[[ $OUT == /dev/shm/* ]] && rmdir "$OUT" 2>/dev/null

{
  if [[ -n ${CASEBOOK:-} ]]; then
    built="binary \`$CASEBOOK\` (CASEBOOK set)"
  else
    built="commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]] && built+=" plus uncommitted changes"
  fi
  echo "Run of \`scripts/bench.sh\` (RUNS=$RUNS) on $(date -u '+%Y-%m-%d %H:%M UTC'), $built."
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(free -g | awk '/^Mem/ { print $2 }') GiB RAM; $(rustc --version)."
  echo
  echo "Runs thrown away because other processes were busy: $DISCARDED."
  echo
  echo "Converted files written to \`$OUT\`$([[ $OUT == /dev/shm/* ]] && echo " (tmpfs), except the rows marked disk")."
  echo
  echo "Inputs: \`$REALISTIC_SMALL\` $(bytes "$REALISTIC_SMALL") bytes$(for f in "${INPUTS[@]}"; do printf ', `%s` %s bytes' "$f" "$(bytes "$f")"; done)."
  echo
  echo "| workload | command | threads | median s | MB/s | peak RSS MiB | vs jq | target met? |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${ROWS_MD[@]}"
  echo
  echo "Determinism:"
  echo
  printf '%s\n' "${DET[@]}"
} >"$RESULTS"
echo
cat "$RESULTS"
echo
echo "(written to $RESULTS)"
