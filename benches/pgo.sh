#!/usr/bin/env bash
# pgo.sh - build profconv with profile-guided optimization: the release binary to ship, and
# the one `PGO=1 benches/run_all.sh` measures beside the plain `cargo build --release`.
#
#   benches/pgo.sh              # -> target/pgo/profconv (~10 min on 2 cores)
#
# 1. Finds llvm-profdata (rustup component llvm-tools, added if missing; or Debian's llvm-19).
# 2. Builds profconv instrumented (-Cprofile-generate) in target/pgo/gen.
# 3. Trains it: every reader and writer once, on the fixtures and on generated inputs of the
#    benchmarks' shapes (gprof 3000 functions, acyclic and with cycles, weighted three to one
#    by repetition; APS and DCPI smaller than the benchmarks' files; mpatrol; an archive).
# 4. Merges the counts (target/pgo/profconv.profdata) and builds with them (-Cprofile-use)
#    in target/pgo/use, copied to target/pgo/profconv.
# 5. Runs the training again with the optimized binary and checks that every output is the
#    same bytes as the instrumented build's: the counts change how the code is laid out and
#    inlined, never what it writes.
#
# The build uses --target (the host's triple), so that RUSTFLAGS reach only profconv and its
# dependencies, not the build scripts and procedural macros run by the compiler.
# Environment: CARGO_TARGET_DIR (the target/ above). Needs: llvm-profdata (above), python3,
# gcc with glibc -pg support, GNU gprof.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export LC_ALL=C
case ${1:-} in -h|--help) sed -n '2,21p' "$0"; exit 0 ;; esac

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=$TARGET/pgo
HOST=$(rustc -vV | sed -n 's/^host: //p')
# llvm-profdata: rustc's own (rustup component llvm-tools), added if rustup can; else the
# newest Debian llvm-profdata-N from rustc's LLVM down to 19 (19 reads the raw counts of
# rustc 1.95's LLVM 22, and rustc reads what it merges: checked in session 29; a newer
# LLVM's merged counts might not be readable by rustc's).
PROFDATA=$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata
if [ ! -x "$PROFDATA" ] && command -v rustup > /dev/null; then
    echo "== rustup component add llvm-tools (llvm-profdata of rustc's LLVM)"
    rustup component add llvm-tools || true
fi
if [ ! -x "$PROFDATA" ]; then
    LLVM=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
    for v in $(seq "${LLVM:-19}" -1 19); do
        if command -v "llvm-profdata-$v" > /dev/null; then PROFDATA=$(command -v "llvm-profdata-$v"); break; fi
    done
fi
[ -x "$PROFDATA" ] || {
    echo "error: no llvm-profdata: rustup component add llvm-tools, or apt-get install llvm-19" >&2
    exit 1
}
echo "== $PROFDATA"

build() { # TARGET_DIR RUSTFLAGS
    echo "== cargo build --release --target $HOST, RUSTFLAGS=$2"
    RUSTFLAGS=$2 cargo build --release --locked --quiet --target "$HOST" --target-dir "$1"
}

# Inputs: the gprof benchmark's programs (kept in target/bench/ and reused), an APS file and
# a DCPI database generated here, the fixtures, and an archive of copies of them.
G3K=$TARGET/bench/gprof-3000
G3KC=$TARGET/bench/gprof-3000-cycles-10-recursive-10
N=3000 WORK=$G3K benches/gprof.sh --prepare
N=3000 WORK=$G3KC GEN_ARGS="--cycles 10 --recursive 10" benches/gprof.sh --prepare
IN=$OUT/inputs
mkdir -p "$IN"
[ -s "$IN/aps.aps" ] || python3 benches/aps_gen.py "$IN/aps.aps" --records 200000 --distinct 5000
[ -f "$IN/dcpi/.complete" ] || {
    rm -rf "$IN/dcpi"
    python3 benches/dcpi_gen.py "$IN/dcpi" --images 20 --insns 100000 --sampled 0.10
    touch "$IN/dcpi/.complete"
}
FIX=$ROOT/tests/fixtures
rm -rf "$IN/archive"
for i in 1 2 3 4 5 6 7 8; do
    mkdir -p "$IN/archive/run$i"
    cp "$FIX/gprof/callgraph-nopie.gmon" "$IN/archive/run$i/gmon.out"
    cp "$FIX/mpatrol/linux-x86_64/mpatrol.out" "$IN/archive/run$i/mpatrol.out"
done

# train BINARY OUTPUT_DIR: the runs whose counts guide the build (RUNS counts them).
train() {
    local o=$2 name
    BIN=$1
    RUNS=0
    rm -rf "$o"
    mkdir -p "$o"
    for i in 1 2 3; do
        run "$G3K/gmon.out" --binary "$G3K/prog" -o "$o/g3k-$i.pb.gz"
    done
    run "$G3KC/gmon.out" --binary "$G3KC/prog" -o "$o/g3k-cycles.pb.gz"
    all g3k "$G3K/gmon.out" --binary "$G3K/prog"
    for name in callgraph-nopie callgraph-pie callgraph-m32 recursion inlined cplusplus; do
        all "$name" "$FIX/gprof/$name.gmon" --binary "$FIX/gprof/$name"
    done
    all sum "$FIX/gprof/callgraph-run1.gmon" "$FIX/gprof/callgraph-run2.gmon" \
        --binary "$FIX/gprof/callgraph-nopie"
    all mpatrol "$FIX/mpatrol/linux-x86_64/mpatrol.out"
    all aps "$IN/aps.aps"
    run "$IN/dcpi" -o "$o/dcpi.pb.gz" -o "$o/dcpi.folded"
    run info "$IN/aps.aps" > "$o/info-aps.txt"
    run info "$IN/dcpi" > "$o/info-dcpi.txt"
    run info "$G3K/gmon.out" > "$o/info-gprof.txt"
    run convert "$IN/archive" -o "$o/archive" --to pprof --to svg --quiet
}
run() { # ARGUMENTS...: one run of BIN, its counts (when instrumented) in raw/run-N.profraw
    RUNS=$((RUNS + 1))
    LLVM_PROFILE_FILE="$OUT/raw/run-$RUNS.profraw" "$BIN" "$@"
}
all() { # NAME INPUTS...: every output format from one reading, into train's $o
    local name=$1
    shift
    run "$@" -o "$o/$name.pb.gz" -o "$o/$name.svg" -o "$o/$name.speedscope.json" \
        -o "$o/$name.callgrind" -o "$o/$name.folded"
}

rm -rf "$OUT/raw"
build "$OUT/gen" "-Cprofile-generate=$OUT/raw"
echo "== training"
train "$OUT/gen/$HOST/release/profconv" "$OUT/out-gen"
# main ends with _exit, which skips the instrumentation's atexit handler: every run must
# have written its counts itself (src/main.rs, write_pgo_counts).
COUNTED=$(find "$OUT/raw" -name '*.profraw' | wc -l)
[ "$COUNTED" = "$RUNS" ] || { echo "error: $RUNS runs, $COUNTED count files" >&2; exit 1; }
"$PROFDATA" merge -o "$OUT/profconv.profdata" "$OUT/raw"
echo "   $RUNS runs, $(wc -c < "$OUT/profconv.profdata") bytes of counts"

build "$OUT/use" "-Cprofile-use=$OUT/profconv.profdata"
cp "$OUT/use/$HOST/release/profconv" "$OUT/profconv.new"
mv "$OUT/profconv.new" "$OUT/profconv"

echo "== checking the optimized binary's outputs against the instrumented one's"
train "$OUT/profconv" "$OUT/out-use"
diff -r "$OUT/out-gen" "$OUT/out-use"
echo "   $(find "$OUT/out-use" -type f | wc -l) outputs, the same bytes"
echo "== $OUT/profconv: $("$OUT/profconv" --version)"
