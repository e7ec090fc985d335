#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""bstack_time_order.py FILE: are the records of perf.data FILE in time
order, as written (perf report -D shows them sorted)?  Exits 1 and says
where time goes back; reads the first attribute's sample format, which
perf bstack's conversions give every event."""
import struct
import sys

SAMPLE, MMAP, COMM, MMAP2 = 9, 1, 3, 10
IP, TID, TIME, ID, CPU, STREAM_ID, IDENTIFIER = 1, 2, 4, 64, 128, 512, 1 << 16


def main(path):
    d = open(path, "rb").read()
    if d[:8] != b"PERFILE2":
        sys.exit("%s: not a perf.data file in this byte order" % path)
    attrs, _ = struct.unpack_from("<QQ", d, 24)
    start, size = struct.unpack_from("<QQ", d, 40)
    sample_type, = struct.unpack_from("<Q", d, attrs + 24)
    flags, = struct.unpack_from("<Q", d, attrs + 40)
    id_all = flags & (1 << 18)
    if not sample_type & TIME:
        sys.exit("%s: samples have no time" % path)
    # the time's place in a sample, and from the end of another record
    in_sample = 8 + 8 * sum(bool(sample_type & f) for f in (IDENTIFIER, IP, TID))
    from_end = 8 + 8 * sum(bool(sample_type & f) for f in (ID, STREAM_ID, CPU, IDENTIFIER))
    last, pos, n = 0, start, 0
    while pos + 8 <= start + size:
        typ, _, sz = struct.unpack_from("<IHH", d, pos)
        if sz < 8:
            sys.exit("%s: a record of size %d at %#x" % (path, sz, pos))
        t = None
        if typ == SAMPLE:
            t, = struct.unpack_from("<Q", d, pos + in_sample)
        elif typ in (MMAP, COMM, MMAP2) and id_all:
            t, = struct.unpack_from("<Q", d, pos + sz - from_end)
        if t is not None:
            if t < last:
                print("record %d at %#x (type %d): time %d after %d" % (n, pos, typ, t, last))
                return 1
            last = t
        pos += sz
        n += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
