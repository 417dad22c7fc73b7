#!/usr/bin/env bash
# compare_outputs.sh OLD_BINARY NEW_BINARY [WORKDIR]
#
# Converts every fixture (and small generated APS and DCPI inputs) to every
# output format, and runs `info` on each, with two profconv binaries; then
# compares the results byte for byte. Used while restructuring the code:
# "behaviour must not change" means this script prints no difference. A
# gzip output whose bytes differ but which decompresses to the same bytes
# (another compressor, or members cut elsewhere) is counted apart, not reported.
#
# Also checks that standard input, a FIFO and a gzip-compressed copy give the
# same bytes as the plain file (new binary only; the old one read pipes as
# empty).
set -euo pipefail
old=$(realpath "$1")
new=$(realpath "$2")
# Two copies of one binary agree on everything: such a run proves nothing.
if cmp -s "$old" "$new"; then
    echo "compare_outputs: $1 and $2 are the same binary: build the new one first" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d)}
mkdir -p "$work"
fx="$root/tests/fixtures"
gen="$work/gen"
mkdir -p "$gen"

# Generated inputs: small, deterministic.
if [ ! -e "$gen/aps-le.data" ]; then
    python3 "$root/benches/aps_gen.py" "$gen/aps-le.data" --records 20000 --distinct 400 2>/dev/null
    python3 "$root/benches/aps_gen.py" "$gen/aps-be.data" --records 5000 --distinct 100 \
        --depth 3 --path-len 64 --big-endian --seed 7 2>/dev/null
    mkdir -p "$gen/capture"
    cp "$gen/aps-le.data" "$gen/capture/sample_cpu_0_20240101_000000"
    cp "$gen/aps-be.data" "$gen/capture/sample_cpu_1_20240101_000000"
    python3 "$root/benches/dcpi_gen.py" "$gen/dcpidb" 1 >/dev/null 2>&1
    # Two images of the 32 are enough (and keep the debug binary quick).
    find "$gen/dcpidb" -type f ! -name 'lib00.*' ! -name 'lib01.*' -delete
fi

g="$fx/gprof"
# name | arguments (inputs and read options)
cases=(
    "nopie|$g/callgraph-nopie.gmon --binary $g/callgraph-nopie"
    "nopie-flat|$g/callgraph-nopie.gmon --binary $g/callgraph-nopie --gprof-stacks flat"
    "nopie-nobinary|$g/callgraph-nopie.gmon"
    "nopie-nosyms|$g/callgraph-nopie.gmon --binary $g/callgraph-nopie.nosyms"
    "nopie-stripped|$g/callgraph-nopie.gmon --binary $g/callgraph-nopie.stripped-debug"
    "pie|$g/callgraph-pie.gmon --binary $g/callgraph-pie"
    "m32|$g/callgraph-m32.gmon --binary $g/callgraph-m32"
    "run1+2|$g/callgraph-run1.gmon $g/callgraph-run2.gmon --binary $g/callgraph-nopie"
    "sum|$g/callgraph-sum.gmon --binary $g/callgraph-nopie"
    "cplusplus|$g/cplusplus.gmon --binary $g/cplusplus"
    "inlined|$g/inlined.gmon --binary $g/inlined"
    "recursion|$g/recursion.gmon --binary $g/recursion"
    "recursion-flat|$g/recursion.gmon --binary $g/recursion --gprof-stacks flat"
    "mpatrol|$fx/mpatrol/linux-x86_64/mpatrol.out"
    "mpatrol-classes|$fx/mpatrol/linux-x86_64/mpatrol.out --mpatrol-size-classes"
    "mpatrol-twice|$fx/mpatrol/linux-x86_64/mpatrol.out $fx/mpatrol/linux-x86_64/mpatrol.out"
    "dcpicat|$fx/dcpi/dcpicat-manpage.txt"
    "dcpidb|$gen/dcpidb"
    "dcpidb-latest|$gen/dcpidb --epoch latest"
    "aps-le|$gen/aps-le.data"
    "aps-be|$gen/aps-be.data"
    "aps-capture|$gen/capture --group-by pid,tid"
    "aps-idle|$gen/capture --drop-idle"
)
formats=(pprof pprof-raw folded svg speedscope)

run_all() { # BINARY OUTDIR
    local bin=$1 out=$2
    mkdir -p "$out"
    for c in "${cases[@]}"; do
        local name=${c%%|*} args=${c#*|}
        # shellcheck disable=SC2086
        "$bin" info ${args%% --group-by*} >"$out/$name.info" 2>"$out/$name.info.err" || echo "exit $?" >>"$out/$name.info.err"
        for f in "${formats[@]}"; do
            # shellcheck disable=SC2086
            "$bin" $args --to "$f" -o "$out/$name.$f" 2>"$out/$name.$f.err" || echo "exit $?" >>"$out/$name.$f.err"
        done
        # Folded output of every sample type.
        for t in cpu calls samples alloc_space alloc_objects cycles_samples CPU_CYCLES; do
            # shellcheck disable=SC2086
            "$bin" $args --to folded --sample-type "$t" -o "$out/$name.folded-$t" \
                2>"$out/$name.folded-$t.err" || echo "exit $?" >>"$out/$name.folded-$t.err"
        done
    done
}

# The old binary's outputs are kept between runs while it stays the same.
stamp=$(cat "$old" "$0" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$work/old/.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$work/old"
    run_all "$old" "$work/old"
    echo "$stamp" >"$work/old/.stamp"
fi
rm -rf "$work/new" "$work/pipes"
run_all "$new" "$work/new"
status=0
# A .pb.gz whose bytes differ but that decompresses to the old message is
# the same profile compressed another way (e.g. by an older binary that
# compressed with another library): counted apart, not a difference.
recompressed=0
: >"$work/diff.txt"
while IFS= read -r -d '' file; do
    rel=${file#"$work/new/"}
    [ "$rel" = .stamp ] && continue
    before="$work/old/$rel"
    if [ ! -e "$before" ]; then
        echo "only in new: $rel" >>"$work/diff.txt"
    elif ! cmp -s "$before" "$file"; then
        if [ "$(head -c 2 "$file" | od -An -tx1 | tr -d ' ')" = 1f8b ] &&
            cmp -s <(gzip -dc "$before") <(gzip -dc "$file"); then
            recompressed=$((recompressed + 1))
        else
            echo "differs: $rel" >>"$work/diff.txt"
        fi
    fi
done < <(find "$work/new" -type f -print0)
while IFS= read -r -d '' file; do
    rel=${file#"$work/old/"}
    [ "$rel" = .stamp ] || [ -e "$work/new/$rel" ] || echo "only in old: $rel" >>"$work/diff.txt"
done < <(find "$work/old" -type f -print0)
if [ ! -s "$work/diff.txt" ]; then
    total=$(find "$work/new" -type f | wc -l)
    echo "compare_outputs: $((total - recompressed)) outputs identical, $recompressed the same message compressed differently"
else
    echo "compare_outputs: DIFFERENCES (see $work/diff.txt)"
    head -40 "$work/diff.txt"
    status=1
fi

# Pipes and standard input (new binary): the same bytes as from the file.
# (A pipe has no modification time, so gprof is compared as folded stacks,
# its pprof carrying the gmon.out's time.)
if "$new" --help | grep -q -- '--max-input-size'; then
    p="$work/pipes"
    mkdir -p "$p"
    in="$g/callgraph-nopie.gmon"
    bin="$g/callgraph-nopie"
    mp="$fx/mpatrol/linux-x86_64/mpatrol.out"
    gzip -c "$in" >"$p/in.gmon.gz"
    "$new" "$in" --binary "$bin" -o "$p/file.folded"
    "$new" - --binary "$bin" -o "$p/stdin.folded" <"$in"
    "$new" - --binary "$bin" -o "$p/stdin-gz.folded" <"$p/in.gmon.gz"
    "$new" <(cat "$in") --binary "$bin" -o "$p/devfd.folded"
    "$new" "$mp" -o "$p/file.pb.gz"
    "$new" - -o "$p/stdin.pb.gz" <"$mp"
    "$new" <(cat "$mp") -o "$p/devfd.pb.gz"
    for f in stdin.folded stdin-gz.folded devfd.folded stdin.pb.gz devfd.pb.gz; do
        if ! cmp -s "$p/file.${f#*.}" "$p/$f"; then
            echo "compare_outputs: $f differs from the file"
            status=1
        fi
    done
    [ $status -ne 0 ] || echo "compare_outputs: standard input and pipes give the file's bytes"
fi
exit $status
