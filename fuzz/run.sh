#!/bin/sh
# Runs one fuzz target with the project's limits; the log (with libFuzzer's
# execution counts) goes to fuzz/logs/TARGET.log.
#   fuzz/run.sh TARGET [SECONDS [RUNS]]      e.g. fuzz/run.sh aps 1800
# FORK=1 keeps going past crashes, hangs and OOMs (one child at a time),
# writing each to fuzz/artifacts/TARGET/: for a target with a known bug.
# Needs `cargo install cargo-fuzz`; runs on stable Rust (-s none: no sanitizer).
set -eu
cd "$(dirname "$0")"
target=$1
seconds=${2:-1800}
runs=${3:-10000000}
case $target in
    gprof_gnu | gprof_bsd) dict=gprof max_len=16384 ;;
    mpatrol) dict=mpatrol max_len=32768 ;;
    dcpi | dcpicat) dict=dcpi max_len=8192 ;;
    aps) dict=aps max_len=32768 ;;
    pipeline) dict=pipeline max_len=32768 ;;
    names) dict=pipeline max_len=4096 ;;
    *) echo "unknown target $target" >&2; exit 2 ;;
esac
[ -d "corpus/$target" ] || python3 seed.py
mkdir -p logs "artifacts/$target" "corpus/$target"
fork=
[ -z "${FORK:-}" ] || fork="-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1"
cargo fuzz run -s none "$target" "corpus/$target" -- \
    -dict="dict/$dict.dict" -max_len="$max_len" \
    -rss_limit_mb=2048 -timeout=10 \
    -runs="$runs" -max_total_time="$seconds" -print_final_stats=1 -close_fd_mask=2 $fork \
    2>&1 | tee -a "logs/$target.log"
