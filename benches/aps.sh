#!/usr/bin/env bash
# aps.sh - benchmark profconv's APS conversion against `cat` of the same file.
#
#   benches/aps.sh
#
# 1. Generates (benches/aps_gen.py) an APS sample file of $RECORDS records (default 19e6,
#    about 1 GB with the reporter's call depth 5) drawn from $DISTINCT distinct stacks
#    (default 50000), and a small one of $SMALL records (default 1e6) from the same stacks,
#    under $WORK (default /tmp/aps-bench). Existing files of the right size are reused.
# 2. Builds profconv (cargo build --release).
# 3. Reads each file once to warm the page cache, then measures with /usr/bin/time -v:
#      cat FILE > /dev/null
#      profconv FILE -o out.pb.gz
#    and prints wall time, throughput and peak resident memory of each. Peak memory of
#    profconv should be about the same for both files: it follows the distinct stacks,
#    not the records.
#
# Environment: RECORDS, SMALL, DISTINCT, WORK, CARGO_TARGET_DIR.
# Needs: python3, GNU time (/usr/bin/time, Debian package `time`), cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
export LC_ALL=C

RECORDS=${RECORDS:-19e6}
SMALL=${SMALL:-1e6}
DISTINCT=${DISTINCT:-50000}
WORK=${WORK:-/tmp/aps-bench}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROFCONV=$TARGET/release/profconv
TIME=/usr/bin/time

if [ ! -x "$TIME" ]; then
    echo "GNU time is missing: apt-get install time" >&2
    exit 2
fi
mkdir -p "$WORK"

# Record count → file size (head 56, records of 56 bytes, tables of the generator).
size_of() {
    python3 -c "import sys; n=int(float(sys.argv[1])); print(56 + 56*n + 8 + 8*(8+256) + 8 + 120*(16+256))" "$1"
}

generate() { # records file
    local want
    want=$(size_of "$1")
    if [ -f "$2" ] && [ "$(stat -c %s "$2")" = "$want" ]; then
        echo "reusing $2"
    else
        python3 "$ROOT/benches/aps_gen.py" "$2" --records "$1" --distinct "$DISTINCT"
    fi
}

BIG=$WORK/sample_cpu_0_20150716_130220
LITTLE=$WORK/small/sample_cpu_0_20150716_130220
mkdir -p "$WORK/small"
generate "$RECORDS" "$BIG"
generate "$SMALL" "$LITTLE"

cargo build --release --quiet

# Runs a command under /usr/bin/time -v; prints "seconds max_rss_kb".
measure() {
    local log=$WORK/time.log
    "$TIME" -v "$@" > /dev/null 2> "$log"
    awk -F': ' '
        /Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i] }
        /Maximum resident set size/ { rss = $2 }
        END { printf "%.2f %d\n", s, rss }' "$log"
}

report() { # label file seconds rss
    local bytes
    bytes=$(stat -c %s "$2")
    awk -v l="$1" -v b="$bytes" -v s="$3" -v r="$4" 'BEGIN {
        rate = (s > 0) ? sprintf("%8.0f MB/s", b / 1e6 / s) : "   < 0.01 s "
        printf "%-44s %6.0f MB  %6.2f s  %s  peak %6.1f MB\n", l, b / 1e6, s, rate, r / 1024 }'
}

for f in "$BIG" "$LITTLE"; do
    cat "$f" > /dev/null
    read -r s rss < <(measure cat "$f")
    report "cat $(basename "$(dirname "$f")")/$(basename "$f")" "$f" "$s" "$rss"
    read -r s rss < <(measure "$PROFCONV" "$f" -o "$WORK/out.pb.gz")
    report "profconv -o out.pb.gz" "$f" "$s" "$rss"
done
"$PROFCONV" info "$BIG" | sed -n '/records:/p;/samples:/p'
