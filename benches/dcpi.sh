#!/usr/bin/env bash
# dcpi.sh - benchmark the DCPI reader on generated profile databases, against `gzip -1`
# compressing the same profile message, with time, throughput and peak RSS of both.
#
#   benches/dcpi.sh                      # sparse (10 %) and dense (57 %) databases
#   SAMPLED=0.10 benches/dcpi.sh         # only the sparse one
#   SIZE_MB=1024 benches/dcpi.sh         # instead: a many-epoch database of 1 GiB
#
# 1. Generates each database once with benches/dcpi_gen.py (seeded; reused while complete):
#    by default IMAGES=200 images of INSNS=500000 instructions, one epoch, the whole text
#    covered by chunks (383 MiB), a fraction SAMPLED of the instructions with samples:
#    0.10 (about 10 M distinct addresses) and 0.57 (about 57 M).
# 2. Writes the database's profile message once (`--to pprof-raw`, the uncompressed bytes
#    that .pb.gz compresses), warms the page cache, then measures with benches/measure.py, in
#    one run:
#      profconv DB -o out.pb.gz   against   gzip -1 -c message.pb (> /dev/null)
#        floors: CPU time at most 1/2 of gzip -1's (reading, converting and compressing
#        in less than half the time gzip's fastest level takes to compress the result), and
#        peak RSS <= the database's size; -j 2's wall time is printed beside
#      profconv DB -o out.folded (and .svg, .speedscope.json, .callgrind, .firefox.json.gz,
#        all four of the issue at once) against profconv DB --to pprof -o /dev/null: floors
#        1/3 of the .pb.gz's CPU time (SVG 1/5, the four together 1/6), peak RSS <= the
#        database's size
#      profconv DB --granularity addresses -o out.folded (and .svg, .speedscope.json,
#        .callgrind, .firefox.json.gz): peak RSS <= the database's size (the time against
#        the .pb.gz's is printed, not judged)
#      profconv info DB
#        goal: <= 0.4 s, peak RSS <= 64 MiB (RSS in MiB throughout)
#    profconv runs under `prlimit --as=CAP_MB MiB` (default 8192): a run that would need
#    more memory fails (allocation failure, abort) instead of taking the shared machine's
#    memory; the failure is reported as such.
# 3. Deletes each database afterwards unless KEEP=1.
#
# Environment: IMAGES, INSNS, SAMPLED (space-separated list), SIZE_MB, CAP_MB, RUNS
# (default 1), WORK (default target/bench/dcpi), KEEP, RESULTS (rows for run_all.sh),
# CARGO_TARGET_DIR, PROFCONV (a profconv binary to measure instead of building one),
# OLD (another profconv binary, e.g. a build of an older commit, measured on the same
# databases before the current one: before/after in one run).
# Needs: python3, GNU time (Debian `time`), prlimit (util-linux), cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export LC_ALL=C

IMAGES=${IMAGES:-200}
INSNS=${INSNS:-500000}
SAMPLED=${SAMPLED:-0.10 0.57}
CAP_MB=${CAP_MB:-8192}
RUNS=${RUNS:-1}
KEEP=${KEEP:-0}
WORK=$(realpath -m "${WORK:-$ROOT/target/bench/dcpi}")
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROFCONV=${PROFCONV:-}
OLD=${OLD:-}
MEASURE=(python3 "$ROOT/benches/measure.py" --runs "$RUNS" ${RESULTS:+--results "$RESULTS"})

for tool in python3 /usr/bin/time prlimit; do
    command -v "$tool" > /dev/null || { echo "error: $tool not found" >&2; exit 1; }
done
if [ -z "$PROFCONV" ]; then
    cargo build --release --quiet
    PROFCONV=$TARGET/release/profconv
fi
mkdir -p "$WORK"

# generate DB LABEL GEN-ARGS...: the database, unless a complete one made alike is there.
generate() {
    local db=$1; shift
    local stamp="$* $(md5sum < benches/dcpi_gen.py)"
    if [ "$(cat "$db/.complete" 2>/dev/null)" = "$stamp" ]; then
        echo "== reusing $db"
        return
    fi
    rm -rf "$db"
    mkdir -p "$db"
    echo "== generating $db"
    python3 benches/dcpi_gen.py "$db" "$@" | sed 's/^/   /'
    # Written out before measuring: not competing with the kernel's writeback.
    sync
    echo "$stamp" > "$db/.complete"
}

bench() { # DB LABEL
    local db=$1 label=$2 bytes files
    bytes=$(find "$db" -type f ! -name .complete -printf '%s\n' | awk '{s += $1} END {print s}')
    files=$(find "$db" -type f ! -name .complete | wc -l)
    echo "   $files files, $bytes bytes ($((bytes / 1048576)) MiB), df: $(df -h --output=avail "$WORK" | tail -1)"
    local message=$WORK/message.pb
    "$PROFCONV" "$db" --to pprof-raw -o "$message"
    local gzip_message="gzip -1 -c $message"
    sh -c "find '$db' -type f ! -name .complete -print0 | xargs -0 cat > /dev/null" # warm the cache
    if [ -n "$OLD" ]; then
        "${MEASURE[@]}" --case "DCPI $label → .pb.gz (OLD)" --name old --bytes "$bytes" \
            --goal-cpu-ratio 2 --goal-rss-mb "$((bytes / 1048576))" --fresh "$WORK/old.pb.gz" \
            --profconv "prlimit --as=$((CAP_MB * 1048576)) $OLD $db -o $WORK/old.pb.gz" \
            --reference "gzip -1" "$gzip_message" || true
        rm -f "$WORK/old.pb.gz"
    fi
    "${MEASURE[@]}" --case "DCPI $label → .pb.gz" --bytes "$bytes" \
        --goal-cpu-ratio 2 --goal-rss-mb "$((bytes / 1048576))" --fresh "$WORK/out.pb.gz" \
        --profconv "prlimit --as=$((CAP_MB * 1048576)) $PROFCONV $db -o $WORK/out.pb.gz" \
        --reference "gzip -1" "$gzip_message" \
        --beside "-j 2" "prlimit --as=$((CAP_MB * 1048576)) $PROFCONV -j 2 $db -o $WORK/out.pb.gz"
    echo "   message: $(stat -c %s "$message") bytes"
    rm -f "$message"
    [ -f "$WORK/out.pb.gz" ] && echo "   output: $(stat -c %s "$WORK/out.pb.gz") bytes" && rm -f "$WORK/out.pb.gz"
    # Every other output, at its default granularity, against the .pb.gz of the same
    # database (written to /dev/null, as the outputs here are fresh files): floors 1/3 of
    # the .pb.gz's CPU time for each (1/5 for SVG, 1/6 for all four in one run), peak RSS
    # at most the database's size.
    local cap="prlimit --as=$((CAP_MB * 1048576))" pb="$PROFCONV $db --to pprof -o /dev/null"
    local fmt goal outs what
    for fmt in folded svg speedscope.json callgrind firefox.json.gz all; do
        what=.$fmt
        case $fmt in
            svg) goal=0.2 outs="-o $WORK/out.svg" ;;
            all) goal=0.166666666667 what=".folded + .svg + .speedscope.json + .callgrind"
                 outs="-o $WORK/out.folded -o $WORK/out.svg -o $WORK/out.speedscope.json -o $WORK/out.callgrind" ;;
            *) goal=0.333333333333 outs="-o $WORK/out.$fmt" ;;
        esac
        "${MEASURE[@]}" --case "DCPI $label → $what" \
            --bytes "$bytes" --goal-cpu-ratio "$goal" --goal-rss-mb "$((bytes / 1048576))" \
            --profconv "$cap $PROFCONV $db $outs" --reference ".pb.gz" "$cap $pb"
        ls -l $WORK/out.* 2>/dev/null | awk '{print "   output: " $NF ", " $5 " bytes"}'
        rm -f "$WORK"/out.*
    done
    # At --granularity addresses (a frame per sampled address, ten million distinct stacks),
    # folded, SVG, speedscope, callgrind and the Firefox Profiler's document are written from
    # runs spilled to disk: goal, peak RSS at most the database's size; the time against the
    # .pb.gz's is printed, not judged.
    for fmt in folded svg speedscope.json callgrind firefox.json.gz; do
        "${MEASURE[@]}" --case "DCPI $label → .$fmt at --granularity addresses" \
            --bytes "$bytes" --goal-rss-mb "$((bytes / 1048576))" --fresh "$WORK/out.$fmt" \
            --profconv "$cap $PROFCONV $db --granularity addresses -o $WORK/out.$fmt" \
            --reference ".pb.gz" "$cap $pb"
        ls -l $WORK/out.* 2>/dev/null | awk '{print "   output: " $NF ", " $5 " bytes"}'
        rm -f "$WORK"/out.*
    done
    "${MEASURE[@]}" --case "DCPI $label: profconv info" --bytes "$bytes" \
        --goal-seconds 0.4 --goal-rss-mb 64 \
        --profconv "prlimit --as=$((CAP_MB * 1048576)) $PROFCONV info $db"
}

if [ -n "${SIZE_MB:-}" ]; then
    db=$WORK/epochs-$SIZE_MB
    generate "$db" "$SIZE_MB"
    bench "$db" "$SIZE_MB MiB, many epochs"
    [ "$KEEP" = 1 ] || rm -rf "$db"
    exit 0
fi
for s in $SAMPLED; do
    db=$WORK/db-$IMAGES-$INSNS-$s
    generate "$db" --images "$IMAGES" --insns "$INSNS" --sampled "$s"
    pct=$(python3 -c "print('%g %%' % (100 * $s))")
    bench "$db" "$IMAGES images x $INSNS insns, $pct sampled"
    [ "$KEEP" = 1 ] || rm -rf "$db"
done
