#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Seeds are the fixtures of tests/fixtures and small files built here after
the generators of tests/gprof_formats.rs, tests/dcpi.rs and tests/aps.rs.
The reader targets take a control byte (their options, see fuzz/harness.rs)
before the file; the pipeline target takes the bare files.

Usage: python3 fuzz/seed.py   (from anywhere; rewrites the seed files only,
the corpus the fuzzer grew beside them is kept)
"""

import gzip
import struct
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
FIXTURES = FUZZ.parent / "tests" / "fixtures"
CORPUS = FUZZ / "corpus"


def pack(big, fmt, *values):
    return struct.pack((">" if big else "<") + fmt, *values)


def word(big, size, v):
    return pack(big, "I" if size == 4 else "Q", v & ((1 << (8 * size)) - 1))


# --- gprof (spec gprof.md §1-§2) ---------------------------------------------

def gmon_gnu(big, size, hists, arcs, bbs):
    out = b"gmon" + pack(big, "I", 1) + bytes(12)
    for low, high, rate, bins in hists:
        out += b"\x00" + word(big, size, low) + word(big, size, high)
        out += pack(big, "II", len(bins), rate) + b"seconds".ljust(15, b"\0") + b"s"
        out += b"".join(pack(big, "H", b) for b in bins)
    for frm, to, count in arcs:
        out += b"\x01" + word(big, size, frm) + word(big, size, to) + pack(big, "I", count)
    if bbs:
        out += b"\x02" + pack(big, "I", len(bbs))
        for addr, count in bbs:
            out += word(big, size, addr) + word(big, size, count)
    return out


def gmon_bsd(big, size, bsd44, low, high, rate, bins, arcs, counter=0):
    if bsd44:
        header = 40 if size == 8 else 32
    else:
        header = 24 if size == 8 else 12
    width = {0: 2, 8: 1, 16: 2, 32: 4, 64: 8}[abs(counter)]
    out = word(big, size, low) + word(big, size, high)
    out += pack(big, "I", header + width * len(bins))
    if bsd44:
        out += pack(big, "IIi", 0x00051879, rate, counter) + bytes(8)
    out = out.ljust(header, b"\0")
    code = {1: "B", 2: "H", 4: "I", 8: "Q"}[width]
    out += b"".join(pack(big, code, b) for b in bins)
    for frm, to, count in arcs:
        out += word(big, size, frm) + word(big, size, to) + word(big, size, count)
    return out


BINS = [0, 3, 0, 0, 7, 0, 1, 65535]
ARCS = [(0x1004, 0x1010, 5), (0x1014, 0x1000, 1), (0x1010, 0x1010, 2)]


def gprof_seeds():
    gnu = {p.name: p.read_bytes() for p in sorted((FIXTURES / "gprof").glob("*.gmon"))}
    for big in (False, True):
        for size in (4, 8):
            gnu[f"gnu-{'be' if big else 'le'}{size * 8}"] = gmon_gnu(
                big, size,
                [(0x1000, 0x1020, 100, BINS), (0x2000, 0x2010, 100, [1, 2, 3, 4])],
                [(0x1004, 0x1010, 5), (0x2000, 0x1000, 7)],
                [(0x1000, 3), (0x1010, 9)])
    bsd = {}
    for big in (False, True):
        for size in (4, 8):
            e = f"{'be' if big else 'le'}{size * 8}"
            bsd[f"bsd44-{e}"] = gmon_bsd(big, size, True, 0x1000, 0x1020, 100, BINS, ARCS)
            bsd[f"bsd43-{e}"] = gmon_bsd(big, size, False, 0x1000, 0x1020, 0, BINS, ARCS)
    bsd["bsd44-le64-c32"] = gmon_bsd(False, 8, True, 0x1000, 0x1020, 1000, [1, 2, 3, 4, 5, 6, 7, 8], ARCS, 32)
    bsd["bsd44-le64-c-8"] = gmon_bsd(False, 8, True, 0x1000, 0x1020, 1000, BINS[:4] * 2, ARCS, -8)
    return gnu, bsd


# --- mpatrol -------------------------------------------------------------------

def mpatrol_seeds():
    return {p.name: p.read_bytes() for p in sorted((FIXTURES / "mpatrol").rglob("*.out"))}


# --- DCPI (spec dcpi.md §2.3, §2.5) --------------------------------------------

def dcpi_profile(header, chunks, pad=True, footer=None):
    out = "".join(line + "\n" for line in header).encode() + b"samples"
    if pad:
        while (len(out) + 1) % 4:
            out += b" "
    out += b"\n"
    for offset, counts in chunks:
        out += struct.pack("<II", offset, len(counts))
        out += b"".join(struct.pack("<I", c) for c in counts)
    flat = [c for _, counts in chunks for c in counts]
    offsets, samples = footer or (sum(1 for c in flat if c), sum(flat))
    return out + struct.pack("<II", offsets, samples)


def dcpi_header(image, path, tstart, tsize, event, period):
    return ["version pdb-0.07", f"image {image}", f"path {path}", "epoch 199805191724",
            "platform walnut", f"event {event}", f"period {period}", f"tstart {tstart:x}",
            f"tsize {tsize}", "cpuspeed 500", "cpuimplv 2", "cpucount 4"]


def dcpi_seeds():
    app = ("19980519000000aaaaaa", "/usr/bin/app", 0x120000000, 0x1000)
    seeds = {
        "one-chunk": dcpi_profile(dcpi_header(*app, "cycles", 63488), [(0, [1, 0, 5, 2])]),
        "gaps": dcpi_profile(dcpi_header(*app, "imiss", 4096),
                             [(0, [1, 2]), (64, [0, 0, 9]), (400, [3])]),
        "unpadded": dcpi_profile(dcpi_header(*app, "cycles", 1), [(8, [7])], pad=False),
        "old-variant": dcpi_profile(["image 19970101000000bbbbbb", "path /usr/shlib/libc.so",
                                     "epoch 199701010000", "event cycles", "period 4096",
                                     "tsize 8192"], [(0, [4, 4])]),
        "bad-footer": dcpi_profile(dcpi_header(*app, "cycles", 2), [(0, [1])], footer=(5, 5)),
    }
    dump = (FIXTURES / "dcpi" / "dcpicat-manpage.txt").read_bytes()
    rows = "".join(f"0x{0x12006cbb8 + 4 * i:012x}  {i}  {i % 3}\n" for i in range(6))
    dumps = {
        "manpage": dump,
        "rows": (b"name        app\nimage       19980519000000aaaaaa\npath        /usr/bin/app\n"
                 b"epoch       199805191724\nplatform    walnut\ntext_start  0x000120000000\n"
                 b"text_size   0x000000800000\nevent       15 cycles:63488:10000\n"
                 b"event       5 pm:retired:4096:5000\n" + rows.encode()),
    }
    return seeds, dumps


# --- APS (spec aps.md) -----------------------------------------------------------

def aps_file(records, modules, vmas, big=False, depth=5, path_len=256):
    out = pack(big, "IIiiii", 0x12344321, len(records), 1437051740, 250000, 1437051752, 750000)
    out += pack(big, "QQQII", 0x100000001, 0x200000002, 1000, 7, 0xdeadbeef)
    for user, pid, tid, event, pc, cs in records:
        out += pack(big, "IiiIIiIII", int(user), pid, tid, 3, 1, len(cs), event, 0, pc)
        out += b"".join(pack(big, "I", cs[i] if i < len(cs) else 0x0bad0bad) for i in range(depth))

    def name(s):
        return (s.encode() + b"\0").ljust(path_len, b"J")[:path_len]

    out += pack(big, "II", 0x8746abcd, len(modules))
    for start, end, mod in modules:
        out += pack(big, "II", start, end) + name(mod)
    out += pack(big, "II", 0xbcdf9283, len(vmas))
    for pid, sre, start, end, path in vmas:
        out += pack(big, "iIII", pid, sre, start, end) + name(path)
    return out


def aps_seeds():
    records = [(True, 100, 100, 17, 0x8010, [0x40000104, 0x8200])] * 3
    records += [(True, 100, 101, 17, 0x40000050, []), (True, 200, 200, 17, 0x8300, [])]
    records += [(False, 100, 100, 17, 0xc0400010, [0xbf000020])]
    records += [(False, 0, 0, 17, 0xc0008000, [])] * 2
    records += [(True, 100, 100, 3, 0x8010, []), (True, 200, 201, 99, 0x9000, [])]
    modules = [(0xc0008000, 0xc03fffff, "vmlinux"), (0xbf000000, 0xbf00ffff, "ext4"),
               (0xc0400000, 0xc04fffff, "vmlinux")]
    vmas = [(100, 0, 0x40000000, 0x400fffff, "/lib/libc.so.6"),
            (100, 0, 0x8000, 0x17fff, "/usr/bin/app"),
            (200, 1, 0x8000, 0x17fff, "/usr/bin/other")]
    return {
        "board-le": aps_file(records, modules, vmas),
        "board-be": aps_file(records, modules, vmas, big=True),
        "board-depth3-path64": aps_file(records, modules, vmas, depth=3, path_len=64),
        "empty": aps_file([], [], []),
        "no-modules": aps_file(records[:4], [], vmas),
    }


def write(target, control_bytes, seeds):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in seeds.items():
        for c in control_bytes:
            suffix = "" if c is None else f".c{c:02x}"
            prefix = b"" if c is None else bytes([c])
            (folder / f"seed-{name}{suffix}").write_bytes(prefix + data)


def main():
    gnu, bsd = gprof_seeds()
    mpatrol = mpatrol_seeds()
    dcpi, dumps = dcpi_seeds()
    aps = aps_seeds()
    # gprof: detect, 4, 8 × binaries × flat; rates for BSD.
    write("gprof_gnu", [0x00, 0x04, 0x08, 0x0a, 0x11, 0x18], gnu)
    write("gprof_bsd", [0x00, 0x01, 0x02, 0x08, 0x64, 0x84], bsd)
    write("mpatrol", [0x00, 0x01], mpatrol)
    write("dcpi", [0x00, 0x02], dcpi)
    write("dcpicat", [0x00, 0x03], dumps)
    write("aps", [0x00, 0x02, 0x16, 0x20], aps)
    everything = {}
    for group in (gnu, bsd, mpatrol, dcpi, dumps, aps):
        everything.update(group)
    # A gzip-compressed copy of each: the pipeline decompresses as for files.
    everything.update({f"{n}.gz": gzip.compress(d, mtime=0) for n, d in list(everything.items())})
    write("pipeline", [None], everything)


if __name__ == "__main__":
    main()
