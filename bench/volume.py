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
"""
import argparse
import os
import re
import signal
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


def samples_of(data):
    r = sh([PERF, "bstack", "report", "--stdio", "-i", data])
    m = re.search(r"# bstack: (\d+) samples in (\d+) counts", r.stdout + r.stderr)
    if not m:
        sys.exit("bench: no summary in the report of %s:\n%s" % (data, r.stderr[-2000:]))
    return int(m.group(1)), int(m.group(2))


def write_results(path, seconds, rows):
    def per_sample(r):
        return r["bytes"] / r["samples"] if r["samples"] else 0

    base = rows["plain"]["bytes"] / seconds
    base_ps = per_sample(rows["plain"])
    w = ["## Always-on volume\n",
         "`python3 bench/volume.py --seconds %d`: `perf bstack record -a -F 999 "
         "--no-mmap-tracking --interval 1000` over the churn of bench/stress.py, the "
         "recorders side by side on the same run (each takes its own samples, hence "
         "bytes per sample too). Target of issue 22: at most 1/10 of the plain "
         "recorder's bytes/s, nothing lost.\n" % seconds,
         "| recorder | bytes/s | vs plain | bytes/sample | vs plain | samples | counts "
         "| perf CPU s |",
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
