#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Damage one bstack record of a perf.data file, as a test needs it.

  bstack_edit.py IN OUT header TYPE VERSION [GROW]
        the first payload record of TYPE gets that version, and says it
        is GROW bytes longer than it is
  bstack_edit.py IN OUT huge-count
        the first count of the first COUNTS record becomes 1 << 19, as
        one flipped bit makes it: the record grows, and the sample, the
        data section and the feature offsets after it move with it

  bstack_edit.py IN OUT many-binaries N
        the first user stacks get 1,000 frames each, N in all, each in a
        binary of its own build-id: a fleet's worth of binaries

Exits 1 when the file has no such record.
"""
import hashlib
import struct
import sys

SAMPLE = 9
STACK = 1
COUNTS = 6
STACK_USER = 1
BUILD_ID_VALID = 1
FRAMES_PER_STACK = 1000
# the bstack event's samples: IDENTIFIER, IP, TID, TIME, CPU, PERIOD, RAW
RAW_SIZE_AT = 8 + 6 * 8


def samples(b):
    """(offset, size) of each PERF_RECORD_SAMPLE of the data section"""
    off, size = struct.unpack_from("<QQ", b, 40)
    end = off + size
    while off + 8 <= end:
        typ, _, sz = struct.unpack_from("<IHH", b, off)
        if sz < 8:
            return
        if typ == SAMPLE and sz >= RAW_SIZE_AT + 12:
            yield off, sz
        off += sz


def find_payload(b, rtype):
    """offset of the first sample whose payload is a version 1 record of rtype"""
    for off, _ in samples(b):
        version, t = struct.unpack_from("<HH", b, off + RAW_SIZE_AT + 4)
        if version == 1 and t == rtype:
            return off
    return None


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7f | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def skip_varint(b, i):
    while b[i] & 0x80:
        i += 1
    return i + 1


def grow_sample(b, off, new_payload):
    """the sample at off with new_payload, the file's offsets moved after it"""
    _, _, sz = struct.unpack_from("<IHH", b, off)
    raw = off + RAW_SIZE_AT
    raw_size = len(new_payload) + 4	# as the kernel pads it, to 8 with its size
    sample = bytearray(b[off:raw]) + struct.pack("<I", raw_size) + new_payload + bytes(4)
    struct.pack_into("<H", sample, 6, len(sample))
    delta = len(sample) - sz
    data_off, data_size = struct.unpack_from("<QQ", b, 40)
    feat = data_off + data_size
    out = bytearray(b[:off]) + sample + b[off + sz:]
    struct.pack_into("<Q", out, 48, data_size + delta)
    # the feature table after the data holds absolute offsets
    nr_feat = bin(int.from_bytes(b[72:104], "little")).count("1")
    for i in range(nr_feat):
        pos = feat + delta + 16 * i
        struct.pack_into("<Q", out, pos, struct.unpack_from("<Q", out, pos)[0] + delta)
    return out


def huge_count(b):
    off = find_payload(b, COUNTS)
    if off is None:
        return None
    rec = off + RAW_SIZE_AT + 4
    size, nr = struct.unpack_from("<II", b, rec + 4)
    payload = bytearray(b[rec:rec + size])
    first = 24 + 16 * nr			# the count column, its first varint
    end = skip_varint(payload, first)
    body = payload[:first] + varint(1 << 19) + payload[end:]
    while body and not body[-1]:
        body.pop()			# the last comm's NUL and the padding
    body += b"\0" * (8 - len(body) % 8)
    struct.pack_into("<I", body, 4, len(body))
    return grow_sample(b, off, bytes(body))


def many_binaries(b, n):
    """user stacks whose frames lie in n binaries, each of its own build-id"""
    stacks = []
    for off, _ in samples(b):
        rec = off + RAW_SIZE_AT + 4
        version, t = struct.unpack_from("<HH", b, rec)
        if version == 1 and t == STACK and struct.unpack_from("<I", b, rec + 16)[0] == STACK_USER:
            stacks.append(off)
    if len(stacks) * FRAMES_PER_STACK < n:
        return None
    # from the last, so that the offsets of those before stay as they are
    for i in reversed(range((n + FRAMES_PER_STACK - 1) // FRAMES_PER_STACK)):
        off = stacks[i]
        rec = off + RAW_SIZE_AT + 4
        first = i * FRAMES_PER_STACK
        nr = min(FRAMES_PER_STACK, n - first)
        body = bytearray(b[rec:rec + 24])
        struct.pack_into("<I", body, 20, nr)
        for j in range(first, first + nr):
            bid = hashlib.sha1(b"binary %d" % j).digest()
            body += struct.pack("<i20sQ", BUILD_ID_VALID, bid, 0x1000 + j % 4096)
        struct.pack_into("<I", body, 4, len(body))
        b = grow_sample(b, off, bytes(body))
    return b


def main():
    src, dst, what = sys.argv[1:4]
    b = bytearray(open(src, "rb").read())
    if what == "header":
        rtype, version = int(sys.argv[4]), int(sys.argv[5])
        grow = int(sys.argv[6]) if len(sys.argv) > 6 else 0
        off = find_payload(b, rtype)
        if off is None:
            sys.exit(1)
        rec = off + RAW_SIZE_AT + 4
        size = struct.unpack_from("<I", b, rec + 4)[0] + grow
        struct.pack_into("<HHI", b, rec, version, rtype, size)
    elif what == "many-binaries":
        b = many_binaries(b, int(sys.argv[4]))
        if b is None:
            sys.exit(1)
    else:
        b = huge_count(b)
        if b is None:
            sys.exit(1)
    open(dst, "wb").write(b)


if __name__ == "__main__":
    main()
