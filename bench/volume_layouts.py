#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What other layouts of COUNT records would weigh, compressed.

  python3 bench/volume_layouts.py PLAIN.data [Z3.data]

PLAIN.data: an always-on recording without -z, as bench/volume.py's
"plain" recorder makes one (perf bstack record -a -F 999
--no-mmap-tracking --interval 1000 over the churn); Z3.data, optional, the
same run recorded with -z3, for the bytes perf record's zstd stream
really takes.  The records are read back from perf script's dump of the
payload, written again in each layout as perf.data samples (the sample
fields of the bstack event: IDENTIFIER, IP, TID, TIME, CPU, PERIOD, RAW),
and compressed whole by the zstd program.  Each layout keeps every field
of today's COUNT records (but where its name says otherwise): it is an
estimate of what a packed record type would save, not a file perf reads.
It is how the layout of COUNTS records (patch 0060) was chosen, and it
reads COUNT records: recordings of a perf bstack from before that patch.

Layouts:
  today              a sample per COUNT record (the file as written)
  packed rows        the COUNT records of a drain in samples of 600
  packed columns     the same, each field a column (stack ids, counts,
                     times, pids, ...), times relative to the drain
  sorted varints     columns sorted by first time; counts, first times
                     (each from the one before), last - first, pid and
                     tid - pid as LEB128 varints; nanoseconds or, where
                     said, microseconds
  no times           packed columns without the first and last times
"""
import os
import re
import struct
import subprocess
import sys

from run import PERF

COUNT = struct.Struct("<HHIQQQQQIIII16s")	# struct bpf_bstack_rec_count
REC_COUNT = 2
PER_SAMPLE = 600


def payloads(data):
    """[(sample time in ns, raw payload bytes)] of perf script's dump"""
    out = subprocess.run([PERF, "script", "-i", data], capture_output=True, text=True,
                         errors="replace").stdout
    recs, cur, t = [], None, 0
    for line in out.splitlines():
        m = re.match(r"\s*\S*\s+-?\d+ \[(\d+)\] (\d+)\.(\d+):", line)
        if m and "bstack" in line:
            if cur is not None:
                recs.append((t, bytes(cur)))
            cur, t = bytearray(), int(m.group(2)) * 10**9 + int(m.group(3)) * 1000
            continue
        m = re.match(r"\s*(?:BPF output: )?[0-9a-f]{4}: ((?:[0-9a-f]{2} ?)+)", line)
        if m and cur is not None:
            cur += bytes.fromhex(m.group(1).replace(" ", ""))
    if cur is not None:
        recs.append((t, bytes(cur)))
    return recs


def zsize(blob, level=3):
    return len(subprocess.run(["zstd", "-q", "-c", "-%d" % level], input=blob,
                              capture_output=True).stdout)


def sample(raw, t):
    body = struct.pack("<QQiiQIIQI", 1, 0, -1, -1, t, 0, 0, 1, len(raw)) + raw
    body += b"\0" * (-(len(body) + 8) % 8)
    return struct.pack("<IHH", 9, 0, len(body) + 8) + body


def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7f, v >> 7
        out.append(b | 0x80 if v else b)
        if not v:
            return bytes(out)


def zigzag(v):
    return v * 2 if v >= 0 else -v * 2 - 1


def rows(t, cs):
    return b"".join(COUNT.pack(*c) for c in cs)


def columns(t, cs, times=True):
    f = list(zip(*cs))
    us, ks, n, first, last, pid, tid, cpu, ev, comm = f[3:13]
    q = lambda v: struct.pack("<%dQ" % len(v), *v)
    b = q(us) + q(ks) + q(n)
    if times:
        b += q([t - x for x in first]) + q([y - x for x, y in zip(first, last)])
    b += struct.pack("<%dI" % len(cs), *pid) + struct.pack("<%dI" % len(cs), *tid)
    b += struct.pack("<%dH" % len(cs), *cpu) + bytes(ev) + b"".join(comm)
    return b


def sorted_varints(unit):
    def enc(t, cs):
        cs = sorted(cs, key=lambda c: c[6])
        f = list(zip(*cs))
        us, ks, n, first, last, pid, tid, cpu, ev, comm = f[3:13]
        b = struct.pack("<%dQ" % len(cs), *us) + struct.pack("<%dQ" % len(cs), *ks)
        b += b"".join(varint(x) for x in n)
        prev = first[0] // unit
        for x in first:
            b += varint(x // unit - prev)
            prev = x // unit
        b += b"".join(varint((y - x) // unit) for x, y in zip(first, last))
        b += b"".join(varint(x) for x in pid)
        b += b"".join(varint(zigzag(y - x)) for x, y in zip(pid, tid))
        return b + bytes(cpu) + bytes(ev) + b"".join(comm)
    return enc


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    recs = payloads(sys.argv[1])
    is_count = [len(r) >= COUNT.size and struct.unpack("<H", r[2:4])[0] == REC_COUNT
                for _, r in recs]
    others = b"".join(sample(r, t) for (t, r), c in zip(recs, is_count) if not c)
    drains = {}
    for (t, r), c in zip(recs, is_count):
        if c:
            drains.setdefault(t, []).append(COUNT.unpack(r[:COUNT.size]))

    def packed(enc):
        out = others
        for t, cs in drains.items():
            for i in range(0, len(cs), PER_SAMPLE):
                out += sample(enc(t, cs[i:i + PER_SAMPLE]), t)
        return out

    layouts = [
        ("today", b"".join(sample(r, t) for t, r in recs), (3,)),
        ("packed rows", packed(rows), (3,)),
        ("packed columns", packed(columns), (3,)),
        ("sorted varints, ns", packed(sorted_varints(1)), (3, 9)),
        ("sorted varints, us", packed(sorted_varints(1000)), (3, 9)),
        ("no times", packed(lambda t, cs: columns(t, cs, False)), (3,)),
    ]
    nr = sum(is_count)
    if not nr:
        sys.exit("bench: %s has no COUNT records (a recording with COUNTS records, "
                 "already packed?)" % sys.argv[1])
    print("%d records, %d COUNT, in %d drains" % (len(recs), nr, len(drains)))
    base = zsize(layouts[0][1])
    plain = os.path.getsize(sys.argv[1])
    z3 = os.path.getsize(sys.argv[2]) if len(sys.argv) > 2 else 0
    print("| layout | zstd level | bytes | x today's | est. x plain file |")
    print("|---|---|---|---|---|")
    for name, blob, levels in layouts:
        for level in levels:
            z = zsize(blob, level)
            est = "%.3f" % (z3 * z / base / plain) if z3 else "-"
            print("| %s | %d | %d | %.3f | %s |" % (name, level, z, z / base, est))
    if z3:
        print("\nplain file %d B, -z3 file %d B (%.3f x plain); estimates scale the -z3 file "
              "by each layout's ratio" % (plain, z3, z3 / plain))


if __name__ == "__main__":
    main()
