#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Long run of perf bstack record --interval (always-on mode) over churn.

  python3 bench/stress.py [--seconds 600] [--out bench/RESULTS.md]

Samples perf's RSS and the memory of its BPF maps (memlock in the maps'
fdinfo) every few seconds, and fails if either grows past its bound after
the warm-up (the first fifth of the run).  The samples go into the
"## Stress" section of bench/RESULTS.md.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

from run import BUILD, CHURN_LOOP, PERF, TOP
# growth allowed after warm-up: 20% plus a little slack for allocator noise
GROWTH = 1.2
SLACK_KB = 4096


def rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def bpf_maps_kb(pid):
    """memlock of every BPF map the process holds, in KiB."""
    total = 0
    fddir = "/proc/%d/fd" % pid
    for fd in os.listdir(fddir):
        try:
            if os.readlink(os.path.join(fddir, fd)) != "anon_inode:bpf-map":
                continue
            for line in open("/proc/%d/fdinfo/%s" % (pid, fd)):
                if line.startswith("memlock:"):
                    total += int(line.split()[1]) // 1024
        except OSError:
            continue
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("STRESS_SECONDS", 600)))
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS.md"))
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("stress: needs root")
    r = subprocess.run(["make", "-s", "-C", os.path.join(TOP, "bench", "workloads"),
                        "OUT=" + BUILD])
    if r.returncode:
        sys.exit("stress: building the workloads failed")

    tmp = tempfile.mkdtemp(prefix="perf-bstack-stress.")
    data = os.path.join(tmp, "stress.data")
    rec = subprocess.Popen([PERF, "bstack", "record", "-q", "-a", "-F", "999",
                            "--no-mmap-tracking",
                            "--interval", str(opts.interval_ms), "-o", data],
                           stderr=subprocess.PIPE, text=True)
    churn = subprocess.Popen(CHURN_LOOP)
    samples = []
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < opts.seconds:
            time.sleep(min(5, max(opts.seconds / 20, 1)))
            if rec.poll() is not None:
                sys.exit("stress: perf bstack record died: " + rec.stderr.read())
            samples.append((time.monotonic() - t0, rss_kb(rec.pid), bpf_maps_kb(rec.pid),
                            os.path.getsize(data)))
    finally:
        churn.kill()
        subprocess.run(["pkill", "-f", BUILD + "/bench_work"])
        rec.send_signal(signal.SIGINT)
        err = rec.communicate()[1]
    subprocess.run(["rm", "-rf", tmp])

    warm = [s for s in samples if s[0] <= opts.seconds / 5] or samples[:1]
    late = [s for s in samples if s[0] > opts.seconds / 5] or samples[-1:]
    bound_rss = max(s[1] for s in warm) * GROWTH + SLACK_KB
    bound_maps = max(s[2] for s in warm) * GROWTH + SLACK_KB
    ok_rss = max(s[1] for s in late) <= bound_rss
    ok_maps = max(s[2] for s in late) <= bound_maps

    lines = ["## Stress\n",
             "`python3 bench/stress.py --seconds %d`: `perf bstack record -a -F 999 "
             "--no-mmap-tracking --interval %d` (the always-on mode) over a loop of fork/exec and dlopen churn. Bounds after the "
             "warm-up (first fifth): %.0f%% of the warm-up maximum + %d KiB.\n" % (
                 opts.seconds, opts.interval_ms, 100 * GROWTH, SLACK_KB // 1024 * 1024),
             "| time s | perf RSS KiB | BPF maps KiB | perf.data bytes |",
             "|---|---|---|---|"]
    for t, rss, maps, size in samples:
        lines.append("| %.0f | %d | %d | %d |" % (t, rss, maps, size))
    lines.append("")
    lines.append("RSS: warm-up max %d KiB, later max %d KiB, bound %d: %s. "
                 "BPF maps: warm-up max %d KiB, later max %d KiB, bound %d: %s." % (
                     max(s[1] for s in warm), max(s[1] for s in late), bound_rss,
                     "ok" if ok_rss else "GREW", max(s[2] for s in warm),
                     max(s[2] for s in late), bound_maps, "ok" if ok_maps else "GREW"))
    for line in err.splitlines():
        if line.startswith("[ perf bstack:"):
            lines.append("\n`%s`" % line.strip("[] "))
    lines.append("")

    old = open(opts.out).read() if os.path.exists(opts.out) else ""
    if "## Stress" in old:
        old = old[:old.index("## Stress")]
    open(opts.out, "w").write(old.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n")
    print("stress: %s, wrote %s" % ("ok" if ok_rss and ok_maps else "FAILED", opts.out))
    sys.exit(0 if ok_rss and ok_maps else 1)


if __name__ == "__main__":
    main()
