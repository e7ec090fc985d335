#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Write each 'BPF output:' hex dump of perf script -F bpf-output to a file."""
import os
import re
import sys

out = sys.argv[1]
records, cur = [], None
for line in sys.stdin:
    m = re.match(r"\s*(?:BPF output: )?([0-9a-f]{4}): ((?:[0-9a-f]{2} ?)+)", line)
    if not m:
        continue
    if m.group(1) == "0000":
        cur = bytearray()
        records.append(cur)
    if cur is not None:
        cur.extend(bytes.fromhex(m.group(2).replace(" ", "")))
for i, rec in enumerate(records):
    with open(os.path.join(out, "seed-%04d" % i), "wb") as f:
        f.write(rec)
print("%d seeds" % len(records))
