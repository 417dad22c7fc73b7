#!/usr/bin/env python3
"""Generates a DCPI profile database for the throughput benchmarks.

Layout (spec dcpi §3): DB/<epoch>/<host>/<image>.<event>, one binary
pdb-0.07 profile (§2.3) per image, event and epoch.

Usage:
  dcpi_gen.py OUT_DIR SIZE_MB
      Many epochs of 32 images of 32 Ki instructions until SIZE_MB: each file
      covers about 60% of its image's text in chunks of 32-1024 instructions
      whose positions change from epoch to epoch, with about 1 count in 8 zero.
  dcpi_gen.py OUT_DIR --images 200 --insns 500000 --sampled 0.10 [--seed 42]
      One epoch, one event (cycles): each of the images' text is covered
      whole by back-to-back chunks of 32-1024 instructions (so the database
      is about images x insns x 4 bytes: 383 MiB for the defaults), and a
      fraction --sampled of the instructions has a non-zero count, so about
      images x insns x sampled distinct addresses have samples (the
      sparse database: 0.10, 10 M addresses; dense: 0.57, 57 M).
"""
import argparse
import os
import random
import struct
import sys
from array import array

IMAGES = 32
TEXT_INSNS = 32 * 1024  # 128 KiB of text per image
EVENTS = [("cycles", 63488), ("imiss", 4096)]


def header(image, epoch, event, period, insns=TEXT_INSNS):
    lines = [
        "version pdb-0.07",
        "image %s" % image["id"],
        "path %s" % image["path"],
        "epoch %s" % epoch,
        "platform benchhost",
        "event %s" % event,
        "period %d" % period,
        "tstart %x" % image["tstart"],
        "tsize %d" % (insns * 4),
        "cpuspeed 667",
        "cpuimplv 2",
        "cpucount 4",
    ]
    text = "\n".join(lines) + "\nsamples"
    text += " " * ((-(len(text) + 1)) % 4)
    return (text + "\n").encode()


def count_pool(rng, sampled):
    """A million counts, a fraction `sampled` of them non-zero, and their little-endian bytes."""
    pool = array("I", (rng.randint(1, 50) if rng.random() < sampled else 0 for _ in range(1 << 20)))
    if sys.byteorder != "little":
        pool.byteswap()
    pool_bytes = pool.tobytes()
    if sys.byteorder != "little":
        pool.byteswap()
    return pool, pool_bytes


def shaped(out, n_images, insns, sampled, seed):
    """One epoch of n_images images whose whole text (insns instructions) is covered."""
    rng = random.Random(seed)
    pool, pool_bytes = count_pool(rng, sampled)
    epoch = "202601010000"
    host_dir = os.path.join(out, epoch, "benchhost")
    os.makedirs(host_dir, exist_ok=True)
    written = nonzero_all = 0
    for i in range(n_images):
        image = {
            "id": "20261122%06d%06x" % (i, 0xABC000 + i),
            "path": "/usr/bench/lib%03d.so" % i,
            "tstart": 0x3FF00000000 + i * 0x1000000,
        }
        parts = [header(image, epoch, "cycles", 63488, insns)]
        insn = nonzero = total = 0
        while insn < insns:
            n = min(rng.randint(32, 1024), insns - insn)
            at = rng.randrange(0, len(pool) - n)
            parts.append(struct.pack("<II", insn * 4, n))
            parts.append(pool_bytes[at * 4:(at + n) * 4])
            chunk = pool[at:at + n]
            total += sum(chunk)
            nonzero += n - chunk.count(0)
            insn += n
        parts.append(struct.pack("<II", nonzero, total & 0xFFFFFFFF))
        data = b"".join(parts)
        with open(os.path.join(host_dir, "lib%03d.so.cycles" % i), "wb") as f:
            f.write(data)
        written += len(data)
        nonzero_all += nonzero
    print("generated %d bytes: %d images x %d instructions, %d addresses with samples"
          % (written, n_images, insns, nonzero_all))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("size_mb", nargs="?", type=int)
    ap.add_argument("--images", type=int)
    ap.add_argument("--insns", type=int, default=500_000)
    ap.add_argument("--sampled", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    if args.images:
        shaped(args.out, args.images, args.insns, args.sampled, args.seed)
    elif args.size_mb:
        epochs(args.out, args.size_mb)
    else:
        ap.error("give SIZE_MB or --images")


def epochs(out, size_mb):
    target = size_mb * 1024 * 1024
    rng = random.Random(42)
    pool = array("I", (0 if rng.random() < 0.125 else rng.randint(1, 50) for _ in range(1 << 20)))
    if sys.byteorder != "little":
        pool.byteswap()
    pool_bytes = pool.tobytes()
    if sys.byteorder != "little":
        pool.byteswap()
    images = [
        {
            "id": "20261122%06d%06x" % (i, 0xABC000 + i),
            "path": "/usr/bench/lib%02d.so" % i,
            "tstart": 0x3FF00000000 + i * 0x1000000,
        }
        for i in range(IMAGES)
    ]
    written = 0
    epoch_index = 0
    while written < target:
        # One epoch every 15 minutes from 2026-01-01 00:00.
        minutes = epoch_index * 15
        day, minute_of_day = divmod(minutes, 24 * 60)
        epoch = "2026%02d%02d%02d%02d" % (1 + day // 28 % 12, 1 + day % 28, minute_of_day // 60, minute_of_day % 60)
        host_dir = os.path.join(out, epoch, "benchhost")
        os.makedirs(host_dir, exist_ok=True)
        for image in images:
            for event, period in EVENTS:
                parts = [header(image, epoch, event, period)]
                insn = rng.randint(0, 64)
                nonzero = 0
                total = 0
                while True:
                    n = rng.randint(32, 1024)
                    if insn + n > TEXT_INSNS:
                        break
                    at = rng.randrange(0, len(pool) - n)
                    parts.append(struct.pack("<II", insn * 4, n))
                    parts.append(pool_bytes[at * 4:(at + n) * 4])
                    chunk = pool[at:at + n]
                    total += sum(chunk)
                    nonzero += n - chunk.count(0)
                    insn += n + rng.randint(1, n * 2 // 3 + 1)
                parts.append(struct.pack("<II", nonzero, total & 0xFFFFFFFF))
                data = b"".join(parts)
                name = "%s.%s" % (os.path.basename(image["path"]), event)
                with open(os.path.join(host_dir, name), "wb") as f:
                    f.write(data)
                written += len(data)
        epoch_index += 1
    print("generated %d bytes in %d epochs" % (written, epoch_index))


if __name__ == "__main__":
    main()
