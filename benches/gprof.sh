#!/usr/bin/env bash
# gprof.sh - benchmark profconv's gmon.out conversion against GNU gprof on a large program.
#
#   benches/gprof.sh [--gprof-only | --prepare]
#   N=20000 GEN_ARGS="--cycles 20 --recursive 20" benches/gprof.sh
#
# 1. Generates a C program with N functions in a deep, wide call graph (benches/gprof_gen.py,
#    seeded: the same program every time; GEN_ARGS can add cycles and recursion), builds it
#    with gcc -O1 -g -pg (non-PIE) and runs it once (a few seconds) to get gmon.out.
#    Everything goes to $WORK (default target/bench/gprof-N-GEN-ARGS).  A program built from the same
#    generator arguments is reused (delete $WORK to force a rebuild).
#    --prepare stops here.
# 2. Builds profconv (cargo build --release) unless --gprof-only or PROFCONV names a binary.
# 3. Measures in the same run with benches/measure.py (RUNS interleaved runs each, after a
#    warm-up under /usr/bin/time -v for the peak RSS)
#      (a) target/release/profconv gmon.out --binary PROG -o out.pb.gz
#      (b) gprof -b PROG gmon.out > /dev/null
#      (c) the same as (a) with -j 2 (wall time printed, not judged)
#    and prints median wall and CPU times, peak RSS and the ratios gprof/profconv (> 1:
#    profconv is faster) against the floors of docs/benchmarks.md, on CPU time: profconv at
#    most 1/2 of gprof -b's below 20 000 functions and 1/3 from 20 000 on, peak RSS <= gprof's.
#
# Environment: N (functions, default 3000), RUNS (default 10), WORK (work directory),
#              GEN_ARGS (extra arguments for gprof_gen.py, e.g. "--cycles 20"),
#              JOBS (parallel gcc jobs, default 2), RESULTS (append a row for run_all.sh),
#              PROFCONV (a binary to measure instead of building one).
# Needs: python3, gcc with glibc -pg support, GNU gprof, GNU time (Debian `time`), cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
export LC_ALL=C

GPROF_ONLY=0
PREPARE=0
for arg in "$@"; do
    case $arg in
        --gprof-only) GPROF_ONLY=1 ;;
        --prepare) PREPARE=1 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done

N=${N:-3000}
RUNS=${RUNS:-10}
JOBS=${JOBS:-2}
# One directory per program shape, e.g. target/bench/gprof-20000-cycles-10-recursive-10.
SHAPE=$(printf '%s' "${GEN_ARGS:-}" | tr -cs 'a-z0-9' '-' | sed 's/-*$//')
WORK=$(realpath -m "${WORK:-$ROOT/target/bench/gprof-$N$SHAPE}")
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROG=$WORK/prog
PROFCONV=${PROFCONV:-$TARGET/release/profconv}

tools=(python3 gcc gprof)
[ "$PREPARE" = 1 ] || tools+=(/usr/bin/time)
for tool in "${tools[@]}"; do
    command -v "$tool" > /dev/null || { echo "error: $tool not found" >&2; exit 1; }
done

STAMP="functions $N; ${GEN_ARGS:-}; $(md5sum < benches/gprof_gen.py)"
if [ -x "$PROG" ] && [ -s "$WORK/gmon.out" ] && [ "$(cat "$WORK/stamp" 2>/dev/null)" = "$STAMP" ]; then
    echo "== reusing $PROG and its gmon.out"
else
    echo "== generating $N functions in $WORK/src"
    rm -rf "$WORK/src" "$WORK/obj" "$WORK/stamp"
    mkdir -p "$WORK/src" "$WORK/obj"
    # shellcheck disable=SC2086
    python3 benches/gprof_gen.py "$WORK/src" --functions "$N" ${GEN_ARGS:-}

    echo "== building $PROG (gcc -O1 -g -pg, non-PIE, $JOBS jobs)"
    t0=$(date +%s.%N)
    printf '%s\n' "$WORK"/src/gen_*.c | xargs -P "$JOBS" -I{} sh -c \
        'gcc -O1 -g -pg -fno-pie -c "$1" -o "$2/obj/$(basename "$1" .c).o"' _ {} "$WORK"
    gcc -O1 -g -pg -no-pie -fno-pie "$WORK"/obj/*.o -o "$PROG"
    t1=$(date +%s.%N)
    echo "   build: $(python3 -c "print('%.1f s' % ($t1 - $t0))")"

    echo "== running it to make gmon.out"
    rm -f "$WORK/gmon.out"
    t0=$(date +%s.%N)
    (cd "$WORK" && "$PROG")
    t1=$(date +%s.%N)
    [ -s "$WORK/gmon.out" ] || { echo "error: $PROG wrote no gmon.out" >&2; exit 1; }
    echo "   run: $(python3 -c "print('%.2f s' % ($t1 - $t0))")"
    echo "$STAMP" > "$WORK/stamp"
fi
[ "$PREPARE" = 0 ] || exit 0
cd "$WORK"
echo "   gmon.out $(wc -c < gmon.out) bytes, binary $(wc -c < "$PROG") bytes," \
     "text $(size -A "$PROG" | awk '$1 == ".text" {print $2}') bytes"

if [ "$GPROF_ONLY" = 0 ]; then
    if [ "$PROFCONV" = "$TARGET/release/profconv" ]; then
        echo "== cargo build --release"
        (cd "$ROOT" && cargo build --release --quiet)
    fi
    [ -x "$PROFCONV" ] || { echo "error: $PROFCONV not built" >&2; exit 1; }
    # Fail early (and visibly) if the conversion itself fails.
    "$PROFCONV" gmon.out --binary "$PROG" -o out.pb.gz
fi

# Fail early (and visibly) if gprof cannot read it either.
gprof -b "$PROG" gmon.out > gprof.txt
echo "   gprof -b: $(grep -c '<cycle' gprof.txt || true) lines naming a cycle"

CMD_GPROF="gprof -b $PROG gmon.out"
if [ "$GPROF_ONLY" = 1 ]; then
    python3 "$ROOT/benches/measure.py" --case "gprof -b, $N functions" --runs "$RUNS" \
        --name gprof --profconv "$CMD_GPROF"
    exit 0
fi
# Floors on CPU time, one thread of work (-j 1, the default): at most 1/2 of gprof -b's
# below 20 000 functions, 1/3 from 20 000 on; peak RSS no more than gprof's.  -j 2's wall
# time is printed beside, not judged.
CPU_GOAL=2
[ "$N" -lt 20000 ] || CPU_GOAL=3
python3 "$ROOT/benches/measure.py" --case "gmon.out, $N functions${GEN_ARGS:+ $GEN_ARGS} → .pb.gz" --runs "$RUNS" \
    --bytes "$(wc -c < gmon.out)" ${RESULTS:+--results "$RESULTS"} --goal-cpu-ratio "$CPU_GOAL" --goal-rss-vs-ref \
    --fresh out.pb.gz --profconv "$PROFCONV gmon.out --binary $PROG -o out.pb.gz" --reference gprof "$CMD_GPROF" \
    --beside "-j 2" "$PROFCONV -j 2 gmon.out --binary $PROG -o out.pb.gz"
