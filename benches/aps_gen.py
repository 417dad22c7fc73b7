#!/usr/bin/env python3
"""aps_gen.py - write a large synthetic APS sample file (spec aps.md §3) for benchmarks.

    benches/aps_gen.py OUT [--records N] [--distinct K] [--depth D] [--path-len P] [--big-endian]

The file holds N records (default 19,000,000: about 1 GB with D = 5) drawn with a skewed
distribution from K distinct (mode, pid, tid, event, pc, call stack) records (default 50,000),
so that a converter's memory should follow K, not N. There are 40 processes of 4 threads,
each with three vmas (executable, libc, libm; the executables of all processes overlap), and a
kernel of vmlinux plus six modules. Records are written in chunks, so the generator itself
needs little memory.
"""

import argparse
import random
import struct
import sys

FILE_MAGIC = 0x12344321
MODULE_MAGIC = 0x8746ABCD
VMA_MAGIC = 0xBCDF9283


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--records", type=float, default=19e6)
    ap.add_argument("--distinct", type=int, default=50_000)
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument("--path-len", type=int, default=256)
    ap.add_argument("--big-endian", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    n = int(args.records)
    d = args.depth
    p = args.path_len
    e = ">" if args.big_endian else "<"
    rng = random.Random(args.seed)

    pids = [1000 + 7 * i for i in range(40)]
    vmas = []
    for i, pid in enumerate(pids):
        vmas.append((pid, 0x00008000, 0x0007FFFF, f"/usr/bin/app{i}"))
        vmas.append((pid, 0x40000000, 0x4012FFFF, "/lib/libc.so.6"))
        vmas.append((pid, 0x40200000, 0x4027FFFF, "/lib/libm.so.6"))
    modules = [(0xC0008000, 0xC04FFFFF, "vmlinux"), (0xC0500000, 0xC05FFFFF, "vmlinux")]
    for i, name in enumerate(["ext4", "jbd2", "usbcore", "ehci_hcd", "mmc_core", "g_ether"]):
        modules.append((0xBF000000 + i * 0x40000, 0xBF03FFFF + i * 0x40000, name))

    def user_pc(r):
        start, end = rng.choice([(0x8000, 0x7FFFF), (0x40000000, 0x4012FFFF), (0x40200000, 0x4027FFFF)])
        return r.randrange(start, end, 2)

    def kernel_pc(r):
        start, end, _ = r.choice(modules)
        return r.randrange(start, end, 4)

    rec = struct.Struct(e + "9i" + f"{d}I")
    pool = []
    for _ in range(args.distinct):
        pid = rng.choice(pids) if rng.random() < 0.95 else 0
        is_user = pid != 0 and rng.random() < 0.7
        tid = pid + rng.randrange(4) if pid else 0
        event = 17 if rng.random() < 0.8 else 3
        pick = user_pc if is_user else kernel_pc
        layer = rng.randrange(d + 1)
        cs = [pick(rng) for _ in range(layer)] + [0] * (d - layer)
        # user, pid, tid, time_diff, pmc_index, cs_layer, event (as int), unitmask, pc (as int)
        fields = [int(is_user), pid, tid, rng.randrange(60), 0, layer, event, 0, 0]
        pc = pick(rng)
        packed = bytearray(rec.pack(*fields, *cs))
        struct.pack_into(e + "I", packed, 32, pc)
        pool.append(bytes(packed))
    # A skewed (Zipf-like) choice: a few stacks are hot, most are rare.
    weights = [1.0 / (k + 1) for k in range(len(pool))]
    cum = []
    total = 0.0
    for w in weights:
        total += w
        cum.append(total)

    with open(args.out, "wb") as f:
        f.write(struct.pack(e + "2I4i3Q2I", FILE_MAGIC, n, 1437051740, 0, 1437051800, 0, 1, 2, 100000, 0, 0))
        left = n
        while left:
            k = min(left, 200_000)
            f.write(b"".join(rng.choices(pool, cum_weights=cum, k=k)))
            left -= k
        f.write(struct.pack(e + "2I", MODULE_MAGIC, len(modules)))
        for start, end, name in modules:
            f.write(struct.pack(e + "2I", start, end) + name.encode().ljust(p, b"\0"))
        f.write(struct.pack(e + "2I", VMA_MAGIC, len(vmas)))
        for pid, start, end, name in vmas:
            f.write(struct.pack(e + "2i2I", pid, 0, start, end) + name.encode().ljust(p, b"\0"))
    print(f"{args.out}: {n} records, {len(pool)} distinct", file=sys.stderr)


if __name__ == "__main__":
    main()
