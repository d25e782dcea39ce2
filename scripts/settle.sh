# Sourced by the bench scripts: `settle` runs before each timed command, so that a figure is the
# command's own and not the leftovers of the one before it. It writes out the page cache's dirty
# pages (a benchmark that has just written a 1 GB store or file leaves them to the kernel, whose
# writeback then competes with the next command's own writes and fsyncs: 3 s of a 16 s PostgreSQL
# push, measured) and waits (up to 5 minutes) for 2 s during which the machine used less than a
# tenth of a core: it may be shared, and other work shows up directly in the figures.
HZ=$(getconf CLK_TCK)
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
settle() {
  local i before
  sync
  for i in $(seq 150); do
    before=$(busy_ticks)
    sleep 2
    (($(busy_ticks) - before < HZ / 5)) && return
  done
}
