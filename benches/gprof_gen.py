#!/usr/bin/env python3
"""Generate a large C program for the gprof benchmark (benches/gprof.sh).

    python3 benches/gprof_gen.py OUTDIR [--functions 3000] [--files 12] [--seed 1]
                                        [--iterations 2500000000] [--main-calls 200]
                                        [--cycles 0] [--recursive 0]

Writes OUTDIR/gen.h and OUTDIR/gen_NN.c (functions split evenly across --files files so
gcc compiles them quickly and in parallel).

Shape of the program
- Functions fn_00000 .. fn_{N-1}. main calls fn_00000 --main-calls times.
- Every function except the last calls 1-3 functions with larger indices, so the call
  graph is acyclic.  Each fn_j (j > 0) gets one "tree" parent: usually a function a few
  indices before it (long chains: a deep graph, hundreds of frames), sometimes any earlier
  function (wide fan-out); then some functions get an extra cross edge to a later function,
  so many functions have several callers.
- Call counts would explode along a DAG (3^depth), so each call site is guarded by its own
  counter: `if (++site_k % P == 0) callee();`.  P is chosen per site from the exact number of
  times the caller runs (computed here in topological order), keeping every arc between a
  few and a few hundred traversals and every function at most a few thousand calls.
- Each function spins a loop on a volatile accumulator; loop lengths are sized from the
  exact call counts so the whole run does about --iterations loop iterations (default: a few
  seconds at -O1), with self time spread unevenly (log-normal weights) over all functions.

- --cycles K adds K back edges: fn_i calls one of its tree ancestors (1-4 levels up), which
  makes a cycle of the call graph (gprof's <cycle N>); --recursive K makes K functions call
  themselves.  Each such site fires 2-5 times over the whole run and is guarded by a flag so
  that it is never re-entered while active: recursion stays one level deep and the run stays
  short.  These few extra traversals are not counted into the loop sizing above.

Deterministic for a given seed and parameters.  Prints a one-line summary to stderr.
"""
import argparse
import math
import os
import random
import sys


def build_graph(n, rng):
    """Forward call sites of each function (larger indices only) and each one's tree parent."""
    children = [[] for _ in range(n)]
    parent = [None] * n
    for j in range(1, n):
        if rng.random() < 0.75:
            lo = max(0, j - 8)  # chain-like: deep
        else:
            lo = 0  # anywhere earlier: wide
        # prefer a parent that still has room for another callee
        for _ in range(20):
            p = rng.randint(lo, j - 1)
            if len(children[p]) < 3:
                break
        else:
            p = next((q for q in range(j - 1, -1, -1) if len(children[q]) < 3), None)
            if p is None:
                raise SystemExit("cannot place function %d" % j)
        children[p].append(j)
        parent[j] = p
    for i in range(n - 1):
        # every function but the last calls at least one function
        if not children[i]:
            children[i].append(rng.randint(i + 1, min(n - 1, i + 20)))
        # cross edges: several callers per function
        if len(children[i]) < 3 and rng.random() < 0.35:
            j = rng.randint(i + 1, n - 1)
            if j not in children[i]:
                children[i].append(j)
    return children, parent


def back_edges(n, parent, cycles, recursive, rng):
    """{caller: [callees]} of the back edges: to a tree ancestor (a cycle) or to itself."""
    back = {}
    for i in rng.sample(range(1, n), min(cycles, n - 1)):
        a = i
        for _ in range(rng.randint(1, 4)):
            if parent[a] is None:
                break
            a = parent[a]
        back.setdefault(i, []).append(a)
    for i in rng.sample(range(n), min(recursive, n)):
        back.setdefault(i, []).append(i)
    return back


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--functions", type=int, default=3000)
    ap.add_argument("--files", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--iterations", type=float, default=2.5e9,
                    help="total loop iterations over the whole run (default 2.5e9)")
    ap.add_argument("--main-calls", type=int, default=200)
    ap.add_argument("--cycles", type=int, default=0,
                    help="back edges to a tree ancestor, each making a call-graph cycle")
    ap.add_argument("--recursive", type=int, default=0,
                    help="functions that call themselves (direct recursion)")
    args = ap.parse_args()
    n = args.functions
    if n < 2:
        ap.error("--functions must be at least 2")
    nfiles = max(1, min(args.files, n))
    rng = random.Random(args.seed)

    children, parent = build_graph(n, rng)
    # Drawn from their own generator so that the forward graph and loop sizes stay those of
    # the same seed without --cycles/--recursive.
    back = back_edges(n, parent, args.cycles, args.recursive, random.Random(args.seed + 7919))

    # Exact call counts, in index order (a topological order: edges go to larger indices).
    calls = [0] * n
    calls[0] = args.main_calls
    period = {}  # (i, k) -> P for the k-th call site of fn_i
    for i in range(n):
        for k, j in enumerate(children[i]):
            target = rng.randint(3, 300)
            p = max(1, calls[i] // target)
            period[(i, k)] = p
            calls[j] += calls[i] // p  # counter pre-incremented, fires when ++c % p == 0
    assert all(c >= 1 for c in calls), "unreachable function"

    weights = [rng.lognormvariate(0.0, 1.0) for _ in range(n)]
    wsum = sum(weights)
    spins = [max(1, int(round(args.iterations * w / wsum / c))) for w, c in zip(weights, calls)]
    total_iters = sum(s * c for s, c in zip(spins, calls))
    total_calls = sum(calls)
    narcs = sum(len(c) for c in children)

    os.makedirs(args.outdir, exist_ok=True)
    for name in os.listdir(args.outdir):
        if name.startswith("gen_") and name.endswith(".c"):
            os.remove(os.path.join(args.outdir, name))
    with open(os.path.join(args.outdir, "gen.h"), "w") as h:
        h.write("/* generated by benches/gprof_gen.py: do not edit */\n")
        h.write("#ifndef GEN_H\n#define GEN_H\n")
        h.write("extern volatile unsigned long gen_sink;\n")
        for i in range(n):
            h.write("void fn_%05d(void);\n" % i)
        h.write("#endif\n")

    per_file = int(math.ceil(n / nfiles))
    for f in range(nfiles):
        lo, hi = f * per_file, min(n, (f + 1) * per_file)
        if lo >= hi:
            break
        with open(os.path.join(args.outdir, "gen_%02d.c" % f), "w") as out:
            out.write("/* generated by benches/gprof_gen.py: do not edit */\n")
            out.write('#include "gen.h"\n\n')
            if f == 0:
                out.write("volatile unsigned long gen_sink;\n\n")
                out.write("int main(void)\n{\n    int k;\n")
                out.write("    for (k = 0; k < %d; k++)\n        fn_00000();\n" % args.main_calls)
                out.write("    return 0;\n}\n\n")
            for i in range(lo, hi):
                out.write("/* calls: %d */\nvoid fn_%05d(void)\n{\n" % (calls[i], i))
                for k in range(len(children[i])):
                    if period[(i, k)] > 1:
                        out.write("    static unsigned long site%d;\n" % k)
                for k in range(len(back.get(i, []))):
                    out.write("    static unsigned long back%d;\n    static int active%d;\n" % (k, k))
                out.write("    long i;\n")
                out.write("    for (i = 0; i < %dL; i++)\n" % spins[i])
                out.write("        gen_sink += (unsigned long)i ^ %du;\n" % (i * 2654435761 % 4294967291))
                for k, j in enumerate(children[i]):
                    p = period[(i, k)]
                    if p > 1:
                        out.write("    if (++site%d %% %dul == 0)\n        fn_%05d();\n" % (k, p, j))
                    else:
                        out.write("    fn_%05d();\n" % j)
                for k, j in enumerate(back.get(i, [])):
                    p = max(1, calls[i] // (2 + (i + j) % 4))
                    out.write("    if (!active%d && ++back%d %% %dul == 0) {\n" % (k, k, p))
                    out.write("        active%d = 1;\n        fn_%05d();\n        active%d = 0;\n    }\n"
                              % (k, j, k))
                out.write("}\n\n")

    # depth of the call graph (longest path from fn_00000), for the summary
    depth = [0] * n
    for i in range(n - 1, -1, -1):
        depth[i] = 1 + max((depth[j] for j in children[i]), default=0)
    nback = sum(len(v) for v in back.values())
    print("gprof_gen: %d functions in %d files, %d arcs (call sites) + %d back edges, %d calls in "
          "total, max %d calls of one function, longest call chain %d, %.3g loop iterations"
          % (n, nfiles, narcs, nback, total_calls, max(calls), depth[0], total_iters),
          file=sys.stderr)


if __name__ == "__main__":
    main()
