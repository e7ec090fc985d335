#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The BPF cost of build-id stacks against plain IP stacks, on this kernel.

  python3 bench/kernel_cost.py [--repeats N] [--scale F] [--user-stack-only] [--out FILE]

Runs bench/'s workloads under perf bstack record --no-cfi --walk-cost,
after a round of warm-up runs, with kernel.bpf_stats_enabled=1: the
kernel walks each user stack twice, with build-ids and as plain IPs, and
the BPF program times both walks.  Its run time less one walk or the
other is what it would cost with that walk alone, on the same samples:
no second run whose samples land elsewhere (a churn or dlopen run takes
its samples in other places each time, and the ratio of two runs moved
by a quarter between boots).  It prints for each workload the median BPF
ns per sample of both, the median ratio of the two in a run, and the
share of user frames the kernel gave as IPs.  make kernel-check runs it
inside the guest of the patched and of the unpatched kernel, and puts the
two side by side: under QEMU's TCG only ratios taken within one boot mean
anything.  --user-stack-only takes user stacks alone: kernel frames as
build-ids (BPF_F_KERNEL_BUILD_ID) are a cost of their own, which only a
patched kernel pays.  The workloads must be built (bench/workloads)
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
PROFILER = "bstack --walk-cost"
PROFILERS[PROFILER] = PROFILERS["bstack"] + ["--no-cfi", "--walk-cost"]


def ip_frames_pct(err):
    """The share of user frames the kernel gave as IPs, not build-ids"""
    m = re.search(r"([\d.]+)% of \d+ user frames without build-id", err)
    return float(m.group(1)) if m else None


def walk_costs(err):
    """BPF ns per sample with the build-id walk alone, and with the IP walk"""
    m = re.search(r"one walk each: (\d+) ns per sample with build-ids, (\d+) ns with IPs", err)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def clocksource():
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def measure(sizes, repeats, tmp, extra):
    """{workload: [(build-id ns per sample, IP ns per sample, % IP frames) of each run]}"""
    PROFILERS[PROFILER + extra] = PROFILERS[PROFILER] + extra.split()
    runs = {}
    # a first round, not counted: the first run of a workload in a fresh
    # guest reads its files and fills the caches
    for rep in range(repeats + 1):
        for mode in sizes:
            data = os.path.join(tmp, "cost.data")
            res = run_once(PROFILER + extra, mode, sizes, data)
            os.unlink(data)
            run = (*walk_costs(res["err"]), ip_frames_pct(res["err"]))
            print("run %s: %s ns with build-ids, %s ns with IPs, %s%% IP frames%s" % (
                mode, *run, "" if rep else " (warm-up)"), flush=True)
            if rep:
                runs.setdefault(mode, []).append(run)
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
    if not any(ns for r in runs.values() for ns, _, _ in r):
        # BPF run times come from sched_clock(), which counts jiffies when
        # the TSC is found unstable (a loaded host under TCG)
        sys.exit("kernel_cost: every BPF run took 0 ns: sched_clock() did not advance "
                 "(clocksource %s)" % clock)

    lines = ["| workload | build-id ns/sample | plain ns/sample | ratio | user frames as IPs |",
             "|---|---|---|---|---|"]
    for mode in sizes:
        mode_runs = runs[mode]
        bid = median([b for b, _, _ in mode_runs])
        ip = median([i for _, i, _ in mode_runs])
        pcts = [p for _, _, p in mode_runs if p is not None]
        pct = statistics.median(pcts) if pcts else None  # 0.0% is a share too
        # the median of the ratios within a run, on the same samples
        ratio = median([b / i for b, i, _ in mode_runs if b and i])
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
