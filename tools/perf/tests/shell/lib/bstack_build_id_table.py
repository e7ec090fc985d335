#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Write a copy of a perf.data file whose build-id table lies.

  bstack_build_id_table.py KIND INPUT OUTPUT [NAME]

The table of the HEADER_BUILD_ID feature is taken from INPUT, one of its
entries is made hostile and the new table is appended to the file, where
the feature's section now points.  Kinds:

  long-name     an entry size of 0xffff: a name longer than PATH_MAX
  short-entry   an entry size smaller than the entry's own header
  id-size       a build-id size of 255 (PERF_RECORD_MISC_BUILD_ID_SIZE)
  unterminated  a name of 64 bytes that fills its entry with no NUL
  rename        the first user binary's entry renamed to NAME
"""
import struct
import sys

HEADER_BUILD_ID = 2
MISC_BUILD_ID_SIZE = 1 << 15
MISC_USER = 2
ENTRY = struct.Struct("<IHHi20sBBH")    # perf_record_header_build_id


def feature_sections(b):
    """Offset of each feature's perf_file_section, by feature bit."""
    data_off, data_size = struct.unpack_from("<QQ", b, 40)
    bits = int.from_bytes(b[72:104], "little")
    out, pos = {}, data_off + data_size
    for feat in range(1, 256):
        if bits >> feat & 1:
            out[feat] = pos
            pos += 16
    return out


def entries(table):
    """(header fields, name) of each entry of a build-id table."""
    out, off = [], 0
    while off + ENTRY.size <= len(table):
        fields = ENTRY.unpack_from(table, off)
        size = fields[2]
        if size < ENTRY.size:
            break
        out.append((fields, table[off + ENTRY.size:off + size]))
        off += size
    return out


def pack(fields, name):
    fields = list(fields)
    fields[2] = ENTRY.size + len(name)
    return ENTRY.pack(*fields) + name


def padded(name):
    name += b"\0"
    return name + b"\0" * (-len(name) % 64)


def hostile(kind, ents, new_name):
    user = next(i for i, (f, _) in enumerate(ents) if f[1] & 7 == MISC_USER)
    fields, name = ents[user]
    if kind == "long-name":
        entry = pack(fields, b"A" * (0xffff - ENTRY.size))
    elif kind == "short-entry":
        f = list(fields)
        f[2] = 8
        entry = ENTRY.pack(*f) + name
    elif kind == "id-size":
        f = list(fields)
        f[1] |= MISC_BUILD_ID_SIZE
        f[5] = 0xff
        entry = pack(f, name)
    elif kind == "unterminated":
        entry = pack(fields, b"/" + b"A" * 63)
    elif kind == "rename":
        entry = pack(fields, padded(new_name.encode()))
    else:
        sys.exit("unknown kind " + kind)
    rest = [pack(f, n) for i, (f, n) in enumerate(ents) if i != user]
    return entry + b"".join(rest)


def main():
    kind, src, dst = sys.argv[1:4]
    new_name = sys.argv[4] if len(sys.argv) > 4 else ""
    b = bytearray(open(src, "rb").read())
    sec = feature_sections(b)[HEADER_BUILD_ID]
    off, size = struct.unpack_from("<QQ", b, sec)
    table = hostile(kind, entries(bytes(b[off:off + size])), new_name)
    struct.pack_into("<QQ", b, sec, len(b), len(table))
    open(dst, "wb").write(bytes(b) + table)


if __name__ == "__main__":
    main()
