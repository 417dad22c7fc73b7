#!/usr/bin/env bash
# make.sh - remakes the example inputs in this folder: small files of every format profconv
# reads, to try it on. Needs python3. The DCPI database, the dcpicat dump and the APS file
# come from the project's generators (seeded: the same bytes every time); the gmon.out and
# the mpatrol.out are real files from tests/fixtures (made by gcc -pg and mpatrol 1.5.1).
set -euo pipefail
cd "$(dirname "$0")"

rm -rf gprof mpatrol dcpi aps
mkdir -p gprof mpatrol dcpi aps

cp ../tests/fixtures/gprof/callgraph-nopie gprof/prog
cp ../tests/fixtures/gprof/callgraph-nopie.gmon gprof/gmon.out
cp ../tests/fixtures/mpatrol/linux-x86_64/mpatrol.out mpatrol/mpatrol.out

# A DCPI profile database: one epoch, 4 images of 4000 instructions, a quarter of them sampled.
python3 ../benches/dcpi_gen.py dcpi/db --images 4 --insns 4000 --sampled 0.25 --seed 7 > /dev/null

# A dcpicat dump (the text `dcpicat` prints on the Alpha host) of one image, two events.
python3 - > dcpi/xemacs.dcpicat.txt <<'PY'
import random
rng = random.Random(11)
rows = []
for i in range(400):
    if rng.random() < 0.3:
        cycles = int(rng.lognormvariate(2.5, 1.2))
        rows.append((0x12006c000 + 4 * i, cycles, int(cycles * rng.random() * 0.3)))
print("name        xemacs")
print("image       19970328081403c0c18b")
print("path        /usr/local/bin/xemacs")
print("epoch       199805191724")
print("platform    walnut")
print("text_start  0x000120000000")
print("text_size   0x000000800000")
print("event       %d cycles:63488:10000" % sum(r[1] for r in rows))
print("event       %d imiss:4096:10000" % sum(r[2] for r in rows))
for addr, cycles, imiss in rows:
    print("0x%012x  %d  %d" % (addr, cycles, imiss))
PY

# An APS sample file of CPU 0: 3000 records from 60 distinct stacks.
python3 ../benches/aps_gen.py aps/sample_cpu_0_20150716_130220 --records 3000 --distinct 60 --seed 3 > /dev/null
