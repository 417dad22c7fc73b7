#!/usr/bin/env bash
# gprof.sh - benchmark profconv's gmon.out conversion against GNU gprof on a large program.
#
#   benches/gprof.sh [--gprof-only]
#
# 1. Generates a C program with N functions in a deep, wide, acyclic call graph
#    (benches/gprof_gen.py), builds it with gcc -O1 -g -pg (non-PIE) and runs it once
#    (a few seconds) to get gmon.out.  Everything goes to $WORK (default target/bench/gprof).
# 2. Builds profconv (cargo build --release) unless --gprof-only.
# 3. Times, in the same run,
#      (a) target/release/profconv gmon.out --binary PROG -o out.pb.gz
#      (b) gprof -b PROG gmon.out > /dev/null
#    $RUNS times each (hyperfine when installed, else a date +%s.%N loop) and prints both
#    median times and the ratio gprof/profconv (> 1 means profconv is faster).
#
# Environment: N (functions, default 3000), RUNS (default 10), WORK (work directory),
#              GEN_ARGS (extra arguments for gprof_gen.py, e.g. "--iterations 5e9"),
#              JOBS (parallel gcc jobs, default 2).
# Needs: python3, gcc with glibc -pg support, GNU gprof, cargo; hyperfine optional.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
export LC_ALL=C

GPROF_ONLY=0
for arg in "$@"; do
    case $arg in
        --gprof-only) GPROF_ONLY=1 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done

N=${N:-3000}
RUNS=${RUNS:-10}
JOBS=${JOBS:-2}
WORK=${WORK:-$ROOT/target/bench/gprof}
PROG=$WORK/prog
PROFCONV=$ROOT/target/release/profconv

for tool in python3 gcc gprof; do
    command -v "$tool" > /dev/null || { echo "error: $tool not found" >&2; exit 1; }
done

echo "== generating $N functions in $WORK/src"
mkdir -p "$WORK/src" "$WORK/obj"
# shellcheck disable=SC2086
python3 benches/gprof_gen.py "$WORK/src" --functions "$N" ${GEN_ARGS:-}

echo "== building $PROG (gcc -O1 -g -pg, non-PIE, $JOBS jobs)"
rm -f "$WORK"/obj/*.o
t0=$(date +%s.%N)
printf '%s\n' "$WORK"/src/gen_*.c | xargs -P "$JOBS" -I{} sh -c \
    'gcc -O1 -g -pg -fno-pie -c "$1" -o "$2/obj/$(basename "$1" .c).o"' _ {} "$WORK"
gcc -O1 -g -pg -no-pie -fno-pie "$WORK"/obj/*.o -o "$PROG"
t1=$(date +%s.%N)
echo "   build: $(python3 -c "print('%.1f s' % ($t1 - $t0))")"

echo "== running it to make gmon.out"
cd "$WORK"
rm -f gmon.out
t0=$(date +%s.%N)
"$PROG"
t1=$(date +%s.%N)
[ -s gmon.out ] || { echo "error: $PROG wrote no gmon.out" >&2; exit 1; }
echo "   run: $(python3 -c "print('%.2f s' % ($t1 - $t0))"), gmon.out $(wc -c < gmon.out) bytes," \
     "text $(size -A "$PROG" | awk '$1 == ".text" {print $2}') bytes"

if [ "$GPROF_ONLY" = 0 ]; then
    echo "== cargo build --release"
    (cd "$ROOT" && cargo build --release --quiet)
    [ -x "$PROFCONV" ] || { echo "error: $PROFCONV not built" >&2; exit 1; }
    # Fail early (and visibly) if the conversion itself fails.
    "$PROFCONV" gmon.out --binary "$PROG" -o out.pb.gz
fi

CMD_PROFCONV="$PROFCONV gmon.out --binary $PROG -o out.pb.gz"
CMD_GPROF="gprof -b $PROG gmon.out > /dev/null"

# median_of FILE: median of the numbers in FILE, one per line.
median_of() {
    python3 -c 'import statistics, sys; print(statistics.median(float(l) for l in open(sys.argv[1]) if l.strip()))' "$1"
}

# time_loop NAME CMD: run CMD $RUNS times (after one warm-up), print the median in seconds.
time_loop() {
    local name=$1 cmd=$2 i t0 t1
    : > "times.$name"
    sh -c "$cmd" > /dev/null
    for ((i = 0; i < RUNS; i++)); do
        t0=$(date +%s.%N)
        sh -c "$cmd" > /dev/null
        t1=$(date +%s.%N)
        python3 -c "print($t1 - $t0)" >> "times.$name"
    done
    median_of "times.$name"
}

echo "== timing ($RUNS runs each)"
if command -v hyperfine > /dev/null; then
    names=() cmds=()
    if [ "$GPROF_ONLY" = 0 ]; then names+=(profconv); cmds+=("$CMD_PROFCONV"); fi
    names+=(gprof); cmds+=("$CMD_GPROF")
    args=()
    for i in "${!names[@]}"; do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
    hyperfine --style basic --warmup 1 --runs "$RUNS" --export-json hyperfine.json "${args[@]}"
    read -r T_PROFCONV T_GPROF < <(python3 - <<'EOF'
import json
r = {x["command"]: x for x in json.load(open("hyperfine.json"))["results"]}
print(r["profconv"]["median"] if "profconv" in r else "nan", r["gprof"]["median"])
EOF
)
else
    T_PROFCONV=nan
    [ "$GPROF_ONLY" = 0 ] && T_PROFCONV=$(time_loop profconv "$CMD_PROFCONV")
    T_GPROF=$(time_loop gprof "$CMD_GPROF")
fi

echo
echo "== result ($N functions, gmon.out $(wc -c < gmon.out) bytes)"
python3 - "$T_PROFCONV" "$T_GPROF" <<'EOF'
import math, sys
p, g = float(sys.argv[1]), float(sys.argv[2])
if not math.isnan(p):
    print("profconv median: %8.4f s" % p)
print("gprof    median: %8.4f s" % g)
if not math.isnan(p) and p > 0:
    print("ratio gprof/profconv: %.2f" % (g / p))
EOF
