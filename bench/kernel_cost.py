#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The BPF cost of build-id stacks against plain IP stacks, on this kernel.

  python3 bench/kernel_cost.py [--repeats N] [--scale F] [--user-stack-only] [--out FILE]

Runs bench/'s workloads under perf bstack record --no-cfi (user stacks
walked by the kernel, with build-ids) and under the same BPF program
without build-ids (--ip-stacks), interleaved, after a round of warm-up
runs, with kernel.bpf_stats_enabled=1, and prints for each workload the median BPF
ns per sample of both, the median ratio of the two in a repeat, and the
share of user frames the kernel gave as IPs.  make kernel-check runs it inside
the guest of the patched and of the unpatched kernel, and puts the two
side by side: under QEMU's TCG only ratios taken within one boot mean
anything.  --user-stack-only takes user stacks alone, in both: kernel
frames as build-ids (BPF_F_KERNEL_BUILD_ID) are a cost of their own, which
only a patched kernel pays.  The workloads must be built (bench/workloads)
beforehand.
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

from run import BUILD, PROFILERS, SMOKE_SIZES, bpf_stats_enabled, run_once, sh

# The kernel's build-id walk is what the kernel series changes: --no-cfi
# keeps it, where perf bstack would walk user stacks with unwind tables.
PROFILERS["bstack --no-cfi"] = PROFILERS["bstack"] + ["--no-cfi"]
COMPARED = ("bstack --no-cfi", "bstack --ip-stacks")


def ip_frames_pct(err):
    """The share of user frames the kernel gave as IPs, not build-ids"""
    m = re.search(r"([\d.]+)% of \d+ user frames without build-id", err)
    return float(m.group(1)) if m else None


def clocksource():
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def measure(sizes, repeats, tmp, extra):
    """{(workload, profiler): [(BPF ns per sample, % IP frames) of each run]}"""
    for prof in COMPARED:
        PROFILERS[prof + extra] = PROFILERS[prof] + extra.split()
    runs = {}
    # a first round, not counted: the first run of a workload in a fresh
    # guest reads its files and fills the caches, and there the plain
    # program took more per sample than the build-id one (ratios 0.6-0.8)
    for rep in range(repeats + 1):
        for mode in sizes:
            for prof in COMPARED:
                data = os.path.join(tmp, "cost.data")
                res = run_once(prof + extra, mode, sizes, data)
                os.unlink(data)
                run = (res.get("bpf_ns"), ip_frames_pct(res["err"]))
                print("run %s %s: %s ns, %s%% IP frames%s" % (
                    mode, prof.replace(" ", ""), *run, "" if rep else " (warm-up)"),
                    flush=True)
                if rep:
                    runs.setdefault((mode, prof), []).append(run)
    return runs


def median(vals):
    vals = [v for v in vals if v]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="work per run, times bench/'s smoke sizes")
    ap.add_argument("--user-stack-only", action="store_true",
                    help="user stacks alone, no kernel stacks")
    ap.add_argument("--out", help="also write the table here")
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("kernel_cost: needs root (BPF)")
    if not os.path.exists(os.path.join(BUILD, "bench_work")):
        sys.exit("kernel_cost: build bench/workloads into %s first" % BUILD)
    assert all(p in PROFILERS for p in COMPARED)
    sizes = {m: max(int(n * opts.scale), 1) for m, n in SMOKE_SIZES.items()}

    tmp = tempfile.mkdtemp(prefix="perf-bstack-cost.")
    try:
        with bpf_stats_enabled():
            runs = measure(sizes, opts.repeats, tmp,
                           " --user-stack-only" if opts.user_stack_only else "")
    finally:
        sh(["rm", "-rf", tmp])
    clock = clocksource()
    print("clocksource %s" % clock, flush=True)
    if not any(ns for r in runs.values() for ns, _ in r):
        # BPF run times come from sched_clock(), which counts jiffies when
        # the TSC is found unstable (a loaded host under TCG)
        sys.exit("kernel_cost: every BPF run took 0 ns: sched_clock() did not advance "
                 "(clocksource %s)" % clock)

    lines = ["| workload | build-id ns/sample | plain ns/sample | ratio | user frames as IPs |",
             "|---|---|---|---|---|"]
    for mode in sizes:
        bid_runs, ip_runs = runs[(mode, COMPARED[0])], runs[(mode, COMPARED[1])]
        bid = median([ns for ns, _ in bid_runs])
        ip = median([ns for ns, _ in ip_runs])
        pcts = [p for _, p in bid_runs if p is not None]
        pct = statistics.median(pcts) if pcts else None  # 0.0% is a share too
        # the median of the ratios of runs taken one after the other, which
        # share the state of a noisy machine, rather than of the medians
        ratio = median([b[0] / i[0] for b, i in zip(bid_runs, ip_runs) if b[0] and i[0]])
        ratio = "%.2f" % ratio if ratio else "n/a"
        pct = "n/a" if pct is None else "%.1f%%" % pct
        lines.append("| %s | %s | %s | %s | %s |" % (mode, bid or "n/a", ip or "n/a", ratio, pct))
        # for make kernel-check to collect
        print("cost %s %d %d %s %s" % (mode, bid or 0, ip or 0, ratio, pct), flush=True)
    table = "\n".join(lines) + "\n"
    sys.stdout.write(table)
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
