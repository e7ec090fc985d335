#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Write mutated and truncated variants of a perf.data file.

  bstack_mutate.py SEED COUNT INPUT OUTDIR

Kinds: a bit flipped in an event, in a bstack payload, in the file
header or in the header features after the data (the build-id table
among them); a file cut at an event boundary (or just after one); an
event header size that lies; a payload frame count or size that lies.
The variants of one seed are always the same.
"""
import os
import random
import struct
import sys


def events(b, off, size):
    """(offset, size) of each event of the data section, as far as it parses."""
    out, end = [], min(off + size, len(b))
    while off + 8 <= end:
        _, _, sz = struct.unpack_from("<IHH", b, off)
        if sz < 8:
            break
        out.append((off, sz))
        off += sz
    return out


def payloads(b):
    """Offsets of bstack payload headers (version 1, a known type)."""
    out, i = [], 0
    while True:
        i = b.find(b"\x01\x00", i)
        if i < 0 or i + 8 > len(b):
            return out
        t = struct.unpack_from("<H", b, i + 2)[0]
        if t in (1, 2, 3, 6) and i % 4 == 0:
            out.append(i)
        i += 2


def mutate(rng, orig, evs, pls, feat):
    b = bytearray(orig)
    kind = rng.randrange(8)
    if kind == 0 and evs:                       # bit flip inside an event
        off, sz = rng.choice(evs)
        pos = off + rng.randrange(sz)
        b[pos] ^= 1 << rng.randrange(8)
    elif kind == 1 and pls:                     # bit flip in a payload
        pl = rng.choice(pls)
        size = struct.unpack_from("<I", b, pl + 4)[0] if pl + 8 <= len(b) else 64
        pos = pl + rng.randrange(max(8, min(size, 1 << 16)))
        if pos < len(b):
            b[pos] ^= 1 << rng.randrange(8)
    elif kind == 2 and evs:                     # cut at an event boundary
        off, _ = rng.choice(evs)
        b = b[:off + rng.choice((0, 0, 1, 4, 8))]
    elif kind == 3 and evs:                     # an event size that lies
        off, sz = rng.choice(evs)
        struct.pack_into("<H", b, off + 6,
                         rng.choice((0, 1, 7, 8, max(sz - 8, 0), sz + 8, 0xffff)))
    elif kind == 4 and pls:                     # a payload count or size that lies
        pos = rng.choice(pls)
        field = rng.choice((4, 20, 24, 8))
        if pos + field + 4 <= len(b):
            struct.pack_into("<I", b, pos + field,
                             rng.choice((0, 1, 0x7fffffff, 0xffffffff, 128, 1025)))
    elif kind == 5:                             # the file header lies
        pos = rng.choice((16, 24, 32, 40, 48, 56))
        struct.pack_into("<Q", b, pos, rng.choice(
            (0, 1, len(b), len(b) * 2, 1 << 40, rng.randrange(len(b)))))
    elif kind == 6 and feat < len(b):           # a bit flip in the features
        pos = rng.randrange(feat, len(b))
        b[pos] ^= 1 << rng.randrange(8)
    else:                                       # cut anywhere
        b = b[:rng.randrange(len(b))]
    return bytes(b)


def main():
    seed, count, src, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    orig = open(src, "rb").read()
    data_off, data_size = struct.unpack_from("<QQ", orig, 40)
    evs = events(orig, data_off, data_size)
    pls = payloads(orig[data_off:data_off + data_size])
    pls = [p + data_off for p in pls]
    rng = random.Random(seed)
    for i in range(count):
        with open(os.path.join(out, "m%05d.data" % i), "wb") as f:
            f.write(mutate(rng, orig, evs, pls, data_off + data_size))


if __name__ == "__main__":
    main()
