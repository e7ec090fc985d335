#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Bytes per second of always-on recording, plain and compressed (-z).

  python3 bench/volume.py [--seconds 60] [--smoke] [--out bench/RESULTS.md]

The always-on mode of bench/stress.py (perf bstack record -a -F 999
--no-mmap-tracking --interval 1000) over the same fork/exec and dlopen
churn, with recorders that watch the same run side by side: one writing
plain records, one with -z (zstd level 1) and one with -z 3.  Each
recorder's samples are its own, so "samples" shows that they saw about
as much; "perf CPU s" is the recorder's own CPU time (the compression is
in it).  Writes the "## Always-on volume" section of RESULTS.md.

The recorder packs the counts of a drain into COUNTS records; the row
"a record per count" is the plain file as it would be with a COUNT
record (a 144-byte sample) for each count instead, the bytes the issue's
target is set against: the plain file's own, with its COUNTS samples
replaced.
"""
import argparse
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

from run import BUILD, CHURN_LOOP, PERF, TOP, write_section, build_workloads, sh

RECORDERS = {
    "plain": [],
    "-z (level 1)": ["-z"],
    "-z 3": ["-z3"],
}


def cpu_seconds(pid):
    """utime + stime of a process and its reaped children, in seconds."""
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")


COUNT_SAMPLE = 144	# header, 6 sample fields, raw size, 80-byte COUNT record, pad
REC_COUNTS = 6


def packed_counts(data):
    """(bytes of the COUNTS samples of a plain file, counts in them)"""
    b = open(data, "rb").read()
    off, size = struct.unpack_from("<QQ", b, 40)
    end, nbytes, nr = off + size, 0, 0
    while off + 8 <= end:
        typ, _, sz = struct.unpack_from("<IHH", b, off)
        if sz < 8:
            break
        # PERF_RECORD_SAMPLE of the bstack event: 6 fields, raw size, payload
        if typ == 9 and sz >= 80 and struct.unpack_from("<HH", b, off + 60) == (1, REC_COUNTS):
            nbytes += sz
            nr += struct.unpack_from("<I", b, off + 68)[0]
        off += sz
    return nbytes, nr


def samples_of(data):
    r = sh([PERF, "bstack", "report", "--stdio", "-i", data])
    m = re.search(r"# bstack: (\d+) samples in (\d+) counts", r.stdout + r.stderr)
    if not m:
        sys.exit("bench: no summary in the report of %s:\n%s" % (data, r.stderr[-2000:]))
    return int(m.group(1)), int(m.group(2))


def write_results(path, seconds, rows):
    def per_sample(r):
        return r["bytes"] / r["samples"] if r["samples"] else 0

    base = rows["a record per count"]["bytes"] / seconds
    base_ps = per_sample(rows["a record per count"])
    w = ["## Always-on volume\n",
         "`python3 bench/volume.py --seconds %d`: `perf bstack record -a -F 999 "
         "--no-mmap-tracking --interval 1000` over the churn of bench/stress.py, the "
         "recorders side by side on the same run (each takes its own samples, hence "
         "bytes per sample too). Target of issue 22: at most 1/10 of the plain "
         "recorder's bytes/s with a record per count, nothing lost.\n" % seconds,
         "| recorder | bytes/s | vs a record per count | bytes/sample | vs a record per "
         "count | samples | counts | perf CPU s |",
         "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        bps = r["bytes"] / seconds
        w.append("| %s | %.0f | %.3f× | %.1f | %.3f× | %d | %d | %.2f |" % (
            name, bps, bps / base if base else 0, per_sample(r),
            per_sample(r) / base_ps if base_ps else 0, r["samples"], r["counts"], r["cpu"]))
    w.append("")
    write_section(path, "## Always-on volume", "\n".join(w) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--smoke", action="store_true", help="a 10 s run")
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS.md"))
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF, -a)")
    seconds = 10 if opts.smoke else opts.seconds
    build_workloads()

    tmp = tempfile.mkdtemp(prefix="perf-bstack-volume.")
    recs = {}
    try:
        for name, extra in RECORDERS.items():
            data = os.path.join(tmp, "%d.data" % len(recs))
            cmd = [PERF, "bstack", "record", "-q", "-a", "-F", "999", "--no-mmap-tracking",
                   "--interval", "1000", "-o", data] + extra
            recs[name] = (subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True), data)
        time.sleep(3)	# loaded and attached
        churn = subprocess.Popen(CHURN_LOOP)
        time.sleep(seconds)
        churn.kill()
        sh(["pkill", "-f", BUILD + "/bench_work"])
        rows = {}
        for name, (p, data) in recs.items():
            if p.poll() is not None:
                sys.exit("bench: %s recorder died: %s" % (name, p.stderr.read()[-2000:]))
            cpu = cpu_seconds(p.pid)
            p.send_signal(signal.SIGINT)
            p.communicate()
            samples, counts = samples_of(data)
            if name == "plain":
                nbytes, nr = packed_counts(data)
                rows["a record per count"] = {
                    "bytes": os.path.getsize(data) - nbytes + nr * COUNT_SAMPLE,
                    "samples": samples, "counts": counts, "cpu": float("nan")}
            rows[name] = {"bytes": os.path.getsize(data), "samples": samples,
                          "counts": counts, "cpu": cpu}
        write_results(opts.out, seconds, rows)
    finally:
        for p, _ in recs.values():
            if p.poll() is None:
                p.kill()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
