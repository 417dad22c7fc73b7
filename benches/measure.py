#!/usr/bin/env python3
"""measure.py - time profconv against its reference tool in one run, with peak memory.

    benches/measure.py --case LABEL [--bytes N] [--runs 3] [--warmup 1] [--results FILE]
                       [--goal-cpu-ratio R] [--goal-rss-vs-ref] [--goal-mbps M]
                       [--goal-seconds S] [--goal-rss-mb MB] [--fresh FILE]
                       --profconv 'CMD ...' [--reference NAME 'CMD ...']
                       [--beside NAME 'CMD ...']

Runs each command (split like a shell would, run without a shell, stdout to /dev/null)
--warmup times (at least once) under `/usr/bin/time -v`, whose "Maximum resident set size"
is the peak RSS reported, then --runs times interleaved (profconv, reference, profconv, ...)
without it, so that noise from other work on the machine hits both alike; the wall time is
taken here from a monotonic clock.  (Why two kinds of run: GNU time's clock has 10 ms steps
and its fork adds ~3 ms; and a child forked from this Python process would report Python's
own peak, which Linux keeps across exec, so the RSS must come from small GNU time.)  A command
may start with `prlimit --as=N` to run under an address-space cap: prlimit execs the tool in
the same process, so the numbers are the tool's.

Prints the median wall time (and CPU time, user + sys from wait4, steadier than wall time
on a shared machine), throughput (--bytes / median time) and the highest peak RSS of
each command, the ratios reference/profconv (> 1: profconv is faster; wall and CPU) and whether
the goals hold.  Speed goals (--goal-cpu-ratio) are judged on CPU time, which threads cannot
hide and a loaded machine changes least; wall time is printed beside.  --beside runs one more
command the same way (profconv with -j 2, say) whose wall time is printed, not judged; it
writes the same --fresh file.  A failed run (non-zero exit or signal) is reported with its status and stderr's last
line, and counts as a missed goal.  --fresh FILE (profconv's output) is removed before every
run of profconv, outside the timing: each run writes a new file, as a first conversion does and
as the references, writing to /dev/null, never replace one.  (Replacing a file adds the file
system's work to profconv's rename: ext4 writes the new file out and deletes the old one there,
and on this machine, mounted with `discard`, that is 60-100 ms for a 124 MB output.)  With --results, appends one tab-separated row for
benches/run_all.sh's table.
"""

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


GNU_TIME = "/usr/bin/time"


def run_timed(argv):
    """Runs argv; returns (seconds, cpu seconds, status, the telling line of its stderr)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - t0
        proc.returncode = 0  # reaped here; keeps Popen from waiting again
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        code = "killed by signal %d" % -code
    return seconds, usage.ru_utime + usage.ru_stime, code, first_message(lines)


def first_message(lines):
    """The line of a failed run's stderr worth showing (Rust's abort adds lines after it)."""
    for line in lines:
        if "memory allocation" in line or "error" in line.lower():
            return line
    return lines[-1] if lines else ""


def run_rss(argv):
    """Runs argv under GNU time; returns (seconds, cpu seconds, max_rss_kb, status, the telling
    line of its stderr)."""
    with tempfile.NamedTemporaryFile() as log, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        subprocess.run([GNU_TIME, "-v", "-o", log.name] + argv, stdout=subprocess.DEVNULL, stderr=err)
        seconds = time.monotonic() - t0
        report = open(log.name).read()
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    rss, code, cpu = 0, 0, 0.0
    for line in report.splitlines():
        line = line.strip()
        if line.startswith(("User time (seconds):", "System time (seconds):")):
            cpu += float(line.rsplit(":", 1)[1])
        elif line.startswith("Maximum resident set size (kbytes):"):
            rss = int(line.rsplit(":", 1)[1])
        elif line.startswith("Command terminated by signal"):
            code = "killed by signal %s" % line.rsplit(" ", 1)[1]
        elif line.startswith("Exit status:") and code == 0:
            code = int(line.rsplit(":", 1)[1])
    return seconds, cpu, rss, code, first_message(lines)


def measure(commands, runs, warmup, fresh=None):
    """{name: {"times": [...], "rss": max KB, "failed": (status, message) or None}};
    fresh: {name: a file removed before each run of that command}"""
    out = {name: {"times": [], "cpu": [], "rss": 0, "failed": None} for name, _ in commands}
    for i in range(max(1, warmup) + runs):
        for name, argv in commands:
            r = out[name]
            if r["failed"]:
                continue
            if fresh and fresh.get(name) and os.path.lexists(fresh[name]):
                os.remove(fresh[name])
            if i < max(1, warmup):
                seconds, cpu, rss, code, message = run_rss(argv)
                r["rss"] = max(r["rss"], rss)
            else:
                seconds, cpu, code, message = run_timed(argv)
                r["cpu"].append(cpu)
            if code != 0:
                # The failed run is the one measured: how long and how big until it failed.
                r["failed"] = (code, message)
                r["times"].append(seconds)
                if i < max(1, warmup):
                    r["cpu"].append(cpu)
            elif i >= max(1, warmup):
                r["times"].append(seconds)
    return out


def fraction(r):
    """A CPU-ratio goal as the floors say it: 2 -> "1/2", 0.125 -> "8x"."""
    return "1/%g" % r if r >= 1 else "%gx" % (1 / r)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", required=True)
    ap.add_argument("--bytes", type=int, default=0, help="input size, for MB/s")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--results", help="append a TSV row here")
    ap.add_argument("--profconv", required=True, help="the command measured")
    ap.add_argument("--name", default="profconv", help="its name in the output")
    ap.add_argument("--reference", nargs=2, metavar=("NAME", "CMD"))
    ap.add_argument("--beside", nargs=2, metavar=("NAME", "CMD"),
                    help="measured and printed (wall time), not judged")
    ap.add_argument("--goal-cpu-ratio", type=float,
                    help="reference CPU time / profconv CPU time at least this")
    ap.add_argument("--goal-rss-vs-ref", action="store_true")
    ap.add_argument("--goal-mbps", type=float)
    ap.add_argument("--goal-seconds", type=float)
    ap.add_argument("--goal-rss-mb", type=float, help="peak RSS bound, MiB (as all RSS here)")
    ap.add_argument("--fresh", metavar="FILE", help="profconv's output, removed before each run")
    args = ap.parse_args()
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit("measure.py: GNU time is missing: apt-get install time")

    commands = [(args.name, shlex.split(args.profconv))]
    ref_name = None
    if args.reference:
        ref_name = args.reference[0]
        commands.append((ref_name, shlex.split(args.reference[1])))
    beside = None
    if args.beside:
        beside = args.beside[0]
        commands.append((beside, shlex.split(args.beside[1])))
    res = measure(commands, args.runs, args.warmup, {args.name: args.fresh, beside: args.fresh})

    mb = args.bytes / 1e6
    def summary(name):
        r = res[name]
        t = statistics.median(r["times"]) if r["times"] else float("nan")
        cpu = statistics.median(r["cpu"]) if r["cpu"] else float("nan")
        rate = mb / t if mb and t > 0 else float("nan")
        return t, rate, r["rss"] / 1024, cpu

    size = "" if not mb else " (%.0f MB)" % mb if mb >= 10 else " (%.2f MB)" % mb
    print("== %s%s, %d runs each (median wall time; peak RSS of the warm-up runs under GNU time)"
          % (args.case, size, args.runs))
    rows = {}
    for name, argv in commands:
        t, rate, rss, cpu = summary(name)
        rows[name] = (t, rate, rss, cpu)
        failed = res[name]["failed"]
        note = "  FAILED: %s: %s" % failed if failed else ""
        print("   %-9s %9.4f s (CPU %7.4f s)  %9.1f MB/s  peak RSS %8.1f MiB%s"
              % (name, t, cpu, rate, rss, note))

    pt, prate, prss, pcpu = rows[args.name]
    ratio = cpu_ratio = float("nan")
    if ref_name:
        rt, _, rrss, rcpu = rows[ref_name]
        ratio = rt / pt if pt > 0 else float("nan")
        cpu_ratio = rcpu / pcpu if pcpu > 0 else float("nan")
        print("   ratio %s/%s: %.2fx (wall), %.2fx (CPU); %s RSS / %s RSS: %.2f"
              % (ref_name, args.name, ratio, cpu_ratio, args.name, ref_name,
                 prss / rrss if rrss else float("nan")))
    goals, met = [], True
    if res[args.name]["failed"]:
        met = False
    if args.goal_cpu_ratio is not None:
        goals.append("CPU ≤ %s of %s's" % (fraction(args.goal_cpu_ratio), ref_name))
        met &= cpu_ratio >= args.goal_cpu_ratio
    if args.goal_rss_vs_ref:
        goals.append("RSS ≤ %s's" % ref_name)
        met &= prss <= rows[ref_name][2]
    if args.goal_mbps is not None:
        goals.append("≥ %g MB/s" % args.goal_mbps)
        met &= prate >= args.goal_mbps
    if args.goal_seconds is not None:
        goals.append("≤ %g s" % args.goal_seconds)
        met &= pt <= args.goal_seconds
    if args.goal_rss_mb is not None:
        goals.append("RSS ≤ %g MiB" % args.goal_rss_mb)
        met &= prss <= args.goal_rss_mb
    goal = ", ".join(goals) or "-"
    print("   goal: %s: %s" % (goal, "met" if met else "NOT met"))

    if args.results:
        failed = res[args.name]["failed"]
        status = "FAILED (%s)" % failed[0] if failed else "ok"
        ref = "-"
        if ref_name:
            rt, _, rrss, rcpu = rows[ref_name]
            ref = "%s %.3f s (CPU %.3f), %.0f MiB" % (ref_name, rt, rcpu, rrss)
        mine = "%.3f (CPU %.3f)" % (pt, pcpu)
        if beside:
            mine += "; %s %.3f" % (beside, rows[beside][0])
        with open(args.results, "a") as f:
            f.write("\t".join([
                args.case, ("%.0f" % mb if mb >= 10 else "%.2f" % mb) if mb else "-", mine,
                "%.0f" % prate if mb else "-", "%.0f" % prss, ref,
                "%.2fx (CPU %.2fx)" % (ratio, cpu_ratio) if ref_name else "-", goal,
                ("met" if met else "not met") + ("" if status == "ok" else "; " + status),
            ]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
