#!/usr/bin/env bash
# run_all.sh - every input of docs/benchmarks.md's table, each measured against its reference in the
# same run, then one table of the results with the machine's core count.
#
#   benches/run_all.sh            # ~10 min on 2 cores (+ ~5 min the first time, to build the
#                                 # gcc programs), ~1 GB of disk at a time
#   ONLY="aps dcpi" benches/run_all.sh
#   GPROF_RUNS=20 DCPI_RUNS=5 benches/run_all.sh   # runs per case (defaults: gprof 10,
#                                 # DCPI 3)
#   PROFCONV=path/to/profconv benches/run_all.sh  # measures that binary as it is
#
# Cases (ONLY picks some: gprof3k gprof20k gprof100k gprof20k-cycles aps dcpi):
#   gprof3k   gmon.out of a 3000-function gcc -pg program + its binary → .pb.gz vs gprof -b
#   gprof20k  the same with 20 000 functions (acyclic: benches/gprof_gen.py's shape)
#   gprof100k the same with 100 000 functions (building it takes ~15 min the first time)
#   gprof20k-cycles  20 000 functions with --cycles 10 --recursive 10: back edges that fold
#             thousands of functions into one gprof cycle (a stress case for stack synthesis)
#   aps       308 MB APS sample file, 5.5 M records, 20 000 stacks → .pb.gz vs cat
#   dcpi      383 MiB databases of 200 images x 500 000 instructions, 10 % and 57 % sampled
#             → .pb.gz vs gzip -1 of the same message (under prlimit --as, CAP_MB), and
#             profconv info
# Floors are judged on CPU time, profconv at its default of one thread of work; each row
# also gives the wall time of the same conversion with -j 2, not judged.
# Generated data lives under target/bench/ (gitignored); the big APS and DCPI files are
# deleted after their case (KEEP=1 keeps them), the gprof programs are kept and reused.
# Before and after the cases, benches/probe.c (fixed work: a loop, random memory loads,
# page faults) runs pinned to each CPU and its times head the table: how fast the machine
# ran at the time (a loaded host slows them, and the rows with them).
#
# Needs: python3, gcc, GNU gprof, GNU time (Debian `time`), prlimit, cargo; taskset
# (util-linux) to pin the probe.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ONLY=${ONLY:-gprof3k gprof20k gprof100k gprof20k-cycles aps dcpi}
mkdir -p target/bench
export RESULTS=$ROOT/target/bench/results.tsv
: > "$RESULTS"

want() { [[ " $ONLY " == *" $1 "* ]]; }

# probe: benches/probe.c pinned to each CPU in turn (unpinned without taskset), e.g.
# "cpu0: loop 134.0 ms, memory 442.1 ms, faults 23.5 ms; cpu1: ...".
PROBE=$ROOT/target/bench/probe
probe() {
    local out=() cpu
    for cpu in $(seq 0 $(($(nproc) - 1))); do
        if command -v taskset > /dev/null; then
            out+=("cpu$cpu: $(taskset -c "$cpu" "$PROBE")")
        else
            out+=("$("$PROBE")")
        fi
    done
    local IFS=';'
    echo "${out[*]}" | sed 's/;/; /g'
}

BUILD=release
if [ -n "${PROFCONV:-}" ]; then
    export PROFCONV
    BUILD="$PROFCONV"
else
    cargo build --release --quiet
fi
gcc -O2 -o "$PROBE" benches/probe.c
PROBE_BEFORE=$(probe)
echo "host probe before: $PROBE_BEFORE"
if want gprof3k; then N=3000 RUNS=${GPROF_RUNS:-10} benches/gprof.sh; fi
if want gprof20k; then N=20000 RUNS=${GPROF_RUNS:-10} benches/gprof.sh; fi
if want gprof100k; then N=100000 RUNS=${GPROF_RUNS:-10} benches/gprof.sh; fi
if want gprof20k-cycles; then
    N=20000 RUNS=${GPROF_RUNS:-10} GEN_ARGS="--cycles 10 --recursive 10" benches/gprof.sh
fi
if want aps; then benches/aps.sh; fi
if want dcpi; then RUNS=${DCPI_RUNS:-3} benches/dcpi.sh; fi

PROBE_AFTER=$(probe)

echo
python3 - "$RESULTS" "$(nproc)" "$(git rev-parse --short HEAD)" "$PROBE_BEFORE" "$PROBE_AFTER" "$BUILD" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
head = ["input", "MB", "profconv s (median wall, CPU; -j 2 wall)", "MB/s", "peak RSS MiB", "reference (median wall, CPU, peak RSS)",
        "ratio ref/profconv (wall, CPU)", "goal", "result"]
print("profconv benchmarks: %s cores, profconv %s (%s)" % (sys.argv[2], sys.argv[3], sys.argv[6]))
print("host probe (benches/probe.c pinned to each CPU) before: %s" % sys.argv[4])
print("host probe after: %s" % sys.argv[5])
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for r in rows:
    print("| " + " | ".join(r) + " |")
EOF
