#!/usr/bin/env bash
# archive.sh - benchmark `profconv convert` over an archive of many small files.
#
#   benches/archive.sh            (N=10000 files by default)
#
# Generates N small gmon.out files (copies of the real fixture
# tests/fixtures/gprof/callgraph-nopie.gmon, 100 per directory) under $WORK,
# builds profconv in release, then converts the whole archive to pprof with
# -j 1 and -j 2 (fresh output directory each time, RUNS runs each, the best
# kept) and prints files/s for both, the scaling -j2/-j1 and the per-file
# time. A second pass with --binary measures the same with symbolization.
#
# The archive and outputs live on tmpfs (/dev/shm) when there is one: on the
# ext4 disk of these machines, creating 10 000 files right after deleting
# 10 000 costs ~1 ms each in the kernel (`cp -r` of the archive alone takes
# seconds), which would measure the file system, not profconv. `cp -r` of the
# same archive is timed as the baseline for per-file cost.
#
# Environment: N (files), RUNS (default 3), PROFCONV (a binary to measure
# instead of building one), WORK (default /dev/shm/profconv-bench-archive,
# else target/bench/archive).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
N=${N:-10000}
RUNS=${RUNS:-3}
if [ -z "${WORK:-}" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then WORK=/dev/shm/profconv-bench-archive; else WORK=$ROOT/target/bench/archive; fi
fi
PROFCONV=${PROFCONV:-$ROOT/target/release/profconv}
GMON=$ROOT/tests/fixtures/gprof/callgraph-nopie.gmon
BIN=$ROOT/tests/fixtures/gprof/callgraph-nopie

echo "== generating $N files in $WORK/archive"
rm -rf "$WORK"
mkdir -p "$WORK/archive"
python3 - "$WORK/archive" "$N" "$GMON" <<'PY'
import os, sys, shutil
root, n, gmon = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = open(gmon, "rb").read()
for i in range(n):
    d = os.path.join(root, "run%03d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "gmon.%05d.out" % i), "wb") as f:
        f.write(data)
PY
du -sh "$WORK/archive" | sed 's/^/   /'

if [ "$PROFCONV" = "$ROOT/target/release/profconv" ]; then
    echo "== cargo build --release"
    cargo build --release --quiet
fi

best_time() { # args: jobs extra...
    local jobs=$1; shift
    local best=""
    for _ in $(seq "$RUNS"); do
        rm -rf "$WORK/out"
        local t0 t1
        t0=$(date +%s.%N)
        "$PROFCONV" convert "$WORK/archive" -o "$WORK/out" --to pprof -j "$jobs" --quiet "$@" 2>/dev/null
        t1=$(date +%s.%N)
        best=$(python3 -c "import sys; t=$t1-$t0; b='$best'; print(t if not b or t < float(b) else b)")
    done
    echo "$best"
}

report() { # args: label extra...
    local label=$1; shift
    local t1 t2
    t1=$(best_time 1 "$@")
    t2=$(best_time 2 "$@")
    python3 - "$label" "$N" "$t1" "$t2" <<'PY'
import sys
label, n, t1, t2 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print(f"== {label}")
print(f"   -j 1: {t1:.2f} s, {n / t1:,.0f} files/s, {t1 / n * 1e6:.0f} µs per file")
print(f"   -j 2: {t2:.2f} s, {n / t2:,.0f} files/s, {t2 / n * 1e6:.0f} µs per file")
print(f"   scaling -j2/-j1: {t1 / t2:.2f}x")
PY
}

t0=$(date +%s.%N); cp -r "$WORK/archive" "$WORK/copy"; t1=$(date +%s.%N); rm -rf "$WORK/copy"
python3 -c "print('== baseline: cp -r of the archive: %.2f s, %.0f µs per file' % ($t1 - $t0, ($t1 - $t0) / $N * 1e6))"

report "unsymbolized ($N files)"
report "with --binary ($N files)" --binary "$BIN"
echo "   outputs: $(find "$WORK/out" -type f | wc -l) files"
rm -rf "$WORK"
