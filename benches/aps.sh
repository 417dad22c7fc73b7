#!/usr/bin/env bash
# aps.sh - benchmark profconv's APS conversion against `cat` of the same file.
#
#   benches/aps.sh                       # 5.5 M records from 20 000 stacks: 308 MB
#   RECORDS=19e6 DISTINCT=50000 benches/aps.sh
#   DEPTH=16 BIG=1 benches/aps.sh        # another call depth, big-endian records
#
# 1. Generates (benches/aps_gen.py, seeded) an APS sample file of $RECORDS records (default
#    5.5e6, 308 MB with the reporter's call depth 5) drawn from $DISTINCT distinct stacks
#    (default 20000) under $WORK (default target/bench/aps); with SMALL set (e.g. 1e6), also
#    a small file from the same stacks.  A file of the right size is reused.
# 2. Builds profconv (cargo build --release).
# 3. Reads each file once to warm the page cache, then measures with benches/measure.py, in
#    one run:  profconv FILE -o out.pb.gz  against  cat FILE > /dev/null
#    time, MB/s and peak RSS of both; floor, on CPU time: profconv reads at least 1/8 of
#    cat's rate (its CPU time at most 8x cat's); -j 2's wall time is printed beside.  Peak
#    memory of profconv should be about the same for both files: it follows the distinct
#    stacks, not the records.
# 4. Deletes the files unless KEEP=1.
#
# Environment: RECORDS, DISTINCT, SMALL, DEPTH (call depth D, default 5: the reporter's;
# D <= 11 takes the fixed-size-key path, deeper ones the record-by-record one), BIG=1
# (big-endian file: every key is byte-swapped once at the end), RUNS (default 3), WORK, KEEP,
# RESULTS (rows for run_all.sh), CARGO_TARGET_DIR, PROFCONV (a binary to measure instead of
# building one, e.g. an older release build).  Needs: python3, GNU time (Debian `time`), cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
export LC_ALL=C

RECORDS=${RECORDS:-5.5e6}
SMALL=${SMALL:-}
DISTINCT=${DISTINCT:-20000}
DEPTH=${DEPTH:-5}
BIG=${BIG:-0}
RUNS=${RUNS:-3}
KEEP=${KEEP:-0}
WORK=$(realpath -m "${WORK:-$ROOT/target/bench/aps}")
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROFCONV=${PROFCONV:-$TARGET/release/profconv}

command -v /usr/bin/time > /dev/null || { echo "GNU time is missing: apt-get install time" >&2; exit 2; }
mkdir -p "$WORK"

# Record count → file size (head 56, records of 36 + 4·D bytes, tables of the generator).
size_of() {
    python3 -c "import sys; n=int(float(sys.argv[1])); d=int(sys.argv[2]); print(56 + (36+4*d)*n + 8 + 8*(8+256) + 8 + 120*(16+256))" "$1" "$DEPTH"
}
gen_flags=(--depth "$DEPTH")
[ "$BIG" = 1 ] && gen_flags+=(--big-endian)
variant=""
[ "$DEPTH" = 5 ] || variant+=", D = $DEPTH"
[ "$BIG" = 1 ] && variant+=", big-endian"

generate() { # records file
    local want
    want=$(size_of "$1")
    if [ -f "$2" ] && [ "$(stat -c %s "$2")" = "$want" ] && [ "$(head -c1 "$2" | od -An -tx1 | tr -d ' ')" = "$([ "$BIG" = 1 ] && echo 12 || echo 21)" ]; then
        echo "== reusing $2"
    else
        echo "== generating $2"
        python3 "$ROOT/benches/aps_gen.py" "$2" --records "$1" --distinct "$DISTINCT" "${gen_flags[@]}"
    fi
}

BIG=$WORK/big/sample_cpu_0_20150716_130220
LITTLE=$WORK/small/sample_cpu_0_20150716_130220
mkdir -p "$WORK/big"
generate "$RECORDS" "$BIG"
files=("$BIG") counts=("$RECORDS")
if [ -n "$SMALL" ]; then
    mkdir -p "$WORK/small"
    generate "$SMALL" "$LITTLE"
    files+=("$LITTLE") counts+=("$SMALL")
fi

[ "$PROFCONV" != "$TARGET/release/profconv" ] || cargo build --release --quiet

for i in "${!files[@]}"; do
    f=${files[$i]}
    cat "$f" > /dev/null # warm the page cache
    records=$(python3 -c "print('%g M' % (float('${counts[$i]}') / 1e6))")
    python3 "$ROOT/benches/measure.py" --runs "$RUNS" ${RESULTS:+--results "$RESULTS"} \
        --case "APS, $records records, $DISTINCT stacks$variant → .pb.gz" --bytes "$(stat -c %s "$f")" \
        --goal-cpu-ratio 0.125 --fresh "$WORK/out.pb.gz" \
        --profconv "$PROFCONV $f -o $WORK/out.pb.gz" --reference cat "cat $f" \
        --beside "-j 2" "$PROFCONV -j 2 $f -o $WORK/out.pb.gz"
    "$PROFCONV" info "$f" | sed -n '/records:/p;/samples:/p' | sed 's/^/   /'
done
[ "$KEEP" = 1 ] || rm -rf "$WORK"
