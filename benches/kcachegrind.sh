#!/usr/bin/env bash
# kcachegrind.sh - how much memory and time KCachegrind takes to open callgrind files of
# growing size, the measurement behind profconv's warning past 128 MiB
# (src/write/limits.rs, KCACHEGRIND_HEAVY_BYTES).
#
#   benches/kcachegrind.sh                 # DCPI databases of 5, 20 and 50 images
#   IMAGES="5 20 50 200" benches/kcachegrind.sh
#
# 1. Generates DCPI databases of IMAGES images x 500 000 instructions, 10 % sampled
#    (benches/dcpi_gen.py, seeded), and converts each at `--granularity addresses` to
#    callgrind: one `instr` cost line per sampled address, the largest files profconv writes.
# 2. Opens each file in KCachegrind without a display (QT_QPA_PLATFORM=offscreen, in its
#    own D-Bus session), waits until its CPU time stops growing for 3 s (the file is
#    loaded and drawn), then prints the file's size, the wall and CPU time taken and
#    KCachegrind's peak RSS, and closes it.
# 3. Deletes everything it made under WORK unless KEEP=1.
#
# Environment: IMAGES, WORK (default target/bench/kcachegrind), KEEP, PROFCONV.
# Needs: kcachegrind (Debian `kcachegrind`), dbus-run-session (Debian `dbus`), python3, cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
IMAGES=${IMAGES:-5 20 50}
WORK=$(realpath -m "${WORK:-$ROOT/target/bench/kcachegrind}")
PROFCONV=${PROFCONV:-}
for tool in kcachegrind dbus-run-session python3; do
    command -v "$tool" > /dev/null || { echo "error: $tool not found" >&2; exit 1; }
done
if [ -z "$PROFCONV" ]; then
    cargo build --release --quiet
    PROFCONV=${CARGO_TARGET_DIR:-$ROOT/target}/release/profconv
fi
mkdir -p "$WORK"

# cpu_ticks PID: user + system time of PID in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# open_in_kcachegrind FILE: prints "wall_s cpu_s peak_rss_kb" once FILE is loaded.
open_in_kcachegrind() {
    local start now pid last=-1 idle=0 ticks hwm
    start=$(date +%s.%N)
    QT_QPA_PLATFORM=offscreen dbus-run-session -- kcachegrind "$1" > "$WORK/kcachegrind.log" 2>&1 &
    local session=$!
    pid=
    while [ -z "$pid" ]; do
        sleep 0.2
        pid=$(pgrep -n -x kcachegrind || true)
        kill -0 "$session" 2> /dev/null || { echo "error: kcachegrind exited" >&2; return 1; }
    done
    while [ "$idle" -lt 6 ]; do
        sleep 0.5
        ticks=$(cpu_ticks "$pid")
        if [ "$ticks" = "$last" ]; then idle=$((idle + 1)); else idle=0; fi
        last=$ticks
    done
    now=$(date +%s.%N)
    hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
    kill "$pid"
    wait "$session" 2> /dev/null || true
    python3 -c "print('%.1f %.1f %d' % ($now - $start - 3, $last / $(getconf CLK_TCK), $hwm))"
}

printf '%-28s %10s %10s %10s %12s %14s\n' file MB wall_s cpu_s peak_MiB MiB_per_MB
for n in $IMAGES; do
    db=$WORK/db-$n
    file=$WORK/db-$n.callgrind
    [ -d "$db" ] || python3 benches/dcpi_gen.py "$db" --images "$n" --insns 500000 \
        --sampled 0.10 > /dev/null
    "$PROFCONV" "$db" --granularity addresses -o "$file" 2> /dev/null
    read -r wall cpu hwm < <(open_in_kcachegrind "$file")
    bytes=$(stat -c %s "$file")
    python3 -c "
mb = $bytes / 1e6
print('%-28s %10.1f %10s %10s %12.0f %14.1f' % ('db-$n.callgrind', mb, '$wall', '$cpu',
      $hwm / 1024, ($hwm / 1024 - 45) / mb))"
done
[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
