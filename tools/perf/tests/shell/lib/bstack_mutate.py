#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Mutated and truncated variants of a perf.data file, for bstack_fuzz.py.

Kinds, of the events: a bit flipped in an event, in a bstack payload, or
in the header features after the data (the build-id table among them); a
file cut at an event boundary (or just after one), or anywhere; an event
header size that lies; a payload frame count or size that lies.  Kinds,
of the whole file: a field of the file header that lies; bits of the
feature bitmap set or flipped, those of features this perf does not know
among them; the attributes (and their id sections) flipped or lying; an
entry of the feature section table that lies; a run of bytes overwritten
anywhere.  The variants of one seed are always the same.
"""
import struct


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


LIES = (0, 1, 7, 8, 0xffffffff, 1 << 32, 1 << 40, (1 << 64) - 1)


class Layout:
    """Where the parts of a perf.data file are, as far as its header says."""

    def __init__(self, b):
        self.size = len(b)
        self.attr_off, self.attr_size = struct.unpack_from("<QQ", b, 24)
        self.data_off, self.data_size = struct.unpack_from("<QQ", b, 40)
        self.feat_off = self.data_off + self.data_size
        words = struct.unpack_from("<4Q", b, 72)
        self.nr_feat = sum(bin(w).count("1") for w in words)
        self.evs = events(b, self.data_off, self.data_size)
        self.pls = [p + self.data_off for p in
                    payloads(b[self.data_off:self.data_off + self.data_size])]

    def lie(self, rng):
        return rng.choice(LIES + (self.size, self.size * 2, rng.randrange(self.size)))


def mutate_file(rng, b, lay):
    """Damage the file outside its events: header, attributes, features."""
    kind = rng.randrange(6)
    if kind == 0:                               # a file header field lies
        struct.pack_into("<Q", b, 8 * rng.randrange(1, 9), lay.lie(rng))
    elif kind == 1:                             # feature bits, known or not
        bit = rng.randrange(256)
        if rng.randrange(2):
            b[72 + bit // 8] ^= 1 << bit % 8
        else:
            pos = 72 + rng.randrange(32)
            n = min(4, 104 - pos)
            b[pos:pos + n] = bytes(rng.choice((0xff, rng.randrange(256))) for _ in range(n))
    elif kind == 2 and lay.attr_size:           # the attributes and their ids
        pos = lay.attr_off + rng.randrange(min(lay.attr_size, 1 << 16))
        if pos + 8 <= len(b):
            if rng.randrange(2):
                b[pos] ^= 1 << rng.randrange(8)
            else:
                struct.pack_into("<Q", b, pos & ~7, lay.lie(rng))
    elif kind == 3 and lay.nr_feat:             # a feature section entry lies
        pos = lay.feat_off + 16 * rng.randrange(lay.nr_feat) + 8 * rng.randrange(2)
        if pos + 8 <= len(b):
            struct.pack_into("<Q", b, pos, lay.lie(rng))
    elif kind == 4:                             # a run of bytes anywhere
        pos, n = rng.randrange(len(b)), rng.randrange(1, 33)
        fill = rng.choice((0, 0xff, None))
        b[pos:pos + n] = bytes(rng.randrange(256) if fill is None else fill
                               for _ in range(min(n, len(b) - pos)))
    else:                                       # a bit flip anywhere
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def variant(rng, orig, lay):
    """One damaged copy: half of the kinds hit the events, half the rest"""
    if rng.randrange(2):
        return mutate(rng, orig, lay.evs, lay.pls, lay.feat_off)
    return mutate_file(rng, bytearray(orig), lay)

