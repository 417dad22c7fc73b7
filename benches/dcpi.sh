#!/bin/sh
# Throughput of the DCPI reader on a generated ~1 GB profile database,
# against `cat` of the same files.
#
#   benches/dcpi.sh            # 1024 MB in /tmp/profconv-dcpi-bench
#   SIZE_MB=64 benches/dcpi.sh # smaller
#
# Builds profconv in release mode (CARGO_TARGET_DIR is respected), generates
# the database once (kept between runs), warms the page cache with one `cat`,
# then times `cat`, `profconv info` (reading only) and a conversion to pprof.
set -eu
cd "$(dirname "$0")/.."
SIZE_MB=${SIZE_MB:-1024}
WORK=${WORK:-/tmp/profconv-dcpi-bench}
DB=$WORK/db-$SIZE_MB
TARGET=${CARGO_TARGET_DIR:-target}

cargo build --release --quiet
PROFCONV=$TARGET/release/profconv

if [ ! -f "$DB/.complete" ]; then
    rm -rf "$DB"
    mkdir -p "$DB"
    python3 benches/dcpi_gen.py "$DB" "$SIZE_MB"
    touch "$DB/.complete"
fi

BYTES=$(find "$DB" -type f ! -name .complete -printf '%s\n' | awk '{s += $1} END {print s}')
FILES=$(find "$DB" -type f ! -name .complete | wc -l)

now() { date +%s.%N; }
catall() { find "$DB" -type f ! -name .complete -print0 | xargs -0 cat > /dev/null; }

catall # warm the page cache
t0=$(now); catall; t1=$(now)
"$PROFCONV" info "$DB" > "$WORK/info.txt"
t2=$(now); "$PROFCONV" info "$DB" > "$WORK/info.txt"; t3=$(now)
t4=$(now); /usr/bin/time -f "%M" -o "$WORK/rss.txt" "$PROFCONV" "$DB" -o "$WORK/out.pb.gz"; t5=$(now)

awk -v b="$BYTES" -v f="$FILES" -v c="$t0 $t1" -v i="$t2 $t3" -v p="$t4 $t5" -v rss="$(tail -1 "$WORK/rss.txt")" 'BEGIN {
    split(c, C, " "); split(i, I, " "); split(p, P, " ")
    mb = b / 1048576
    tc = C[2] - C[1]; ti = I[2] - I[1]; tp = P[2] - P[1]
    printf "database: %.0f MB in %d files\n", mb, f
    printf "cat:               %6.2f s  %8.1f MB/s\n", tc, mb / tc
    printf "profconv info:     %6.2f s  %8.1f MB/s  (%.2fx the time of cat)\n", ti, mb / ti, ti / tc
    printf "profconv -> pprof: %6.2f s  %8.1f MB/s  (%.2fx the time of cat), peak RSS %.0f MB\n", tp, mb / tp, tp / tc, rss / 1024
}'
ls -l "$WORK/out.pb.gz" | awk '{printf "pprof output: %d bytes\n", $5}'
