#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Does perf bstack record -- CMD see every sample of CMD's tasks?

  python3 bench/same_run.py [--smoke] [--repeats N] [--out bench/RESULTS-same-run.md]

Both profilers watch the *same* run: perf record -a (cpu-clock, 999 Hz)
records the whole machine while perf bstack record -F 999 -- WORKLOAD
runs inside it.  perf record's samples of the workload's processes (the
processes forked from perf bstack record, and theirs, found in its FORK
records) are what bstack must count too: both take a sample every
1/999 s of the CPU time those tasks use, so the two counts differ only by
where each timer fell, about the square root of the count.  Separate
runs would add the noise of this machine to that.  churn (fork+exec of
short-lived children) is where samples of tasks starting and dying
could be missed.
"""
import argparse
import collections
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import (PERF, SIZES, SMOKE_SIZES, TOP, build_workloads,  # noqa: E402
                 bstack_workload_samples, machine, sh, workload)

FORK_RE = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
SAMPLE_RE = re.compile(r"^\s*(\d+)/(\d+)\s*$")


def target_samples(outer, root):
    """perf record -a's samples of the processes forked from pid root, and theirs."""
    r = sh([PERF, "script", "-i", outer, "--show-task-events", "-F", "pid,tid"])
    if r.returncode:
        sys.exit("same_run: perf script failed:\n" + r.stderr)
    children = collections.defaultdict(set)
    per_pid = collections.Counter()
    for line in r.stdout.splitlines():
        m = FORK_RE.search(line)
        if m:
            child, parent = int(m.group(1)), int(m.group(3))
            if child != parent:		# a process, not a thread
                children[parent].add(child)
            continue
        m = SAMPLE_RE.match(line)
        if m:
            per_pid[int(m.group(1))] += 1
    todo, tree = [root], set()
    while todo:
        for child in children[todo.pop()]:
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return sum(per_pid[p] for p in tree)


def run_once(mode, sizes, tmp, bstack_opts):
    outer = os.path.join(tmp, "outer.data")
    inner = os.path.join(tmp, "inner.data")
    pidfile = os.path.join(tmp, "pid")
    # the shell execs perf bstack record: its pid is the root of the workload's tree
    inner_cmd = "echo $$ > %s; exec %s bstack record -q -F 999 %s -o %s -- %s" % (
        pidfile, PERF, bstack_opts, inner, " ".join(workload(mode, sizes)))
    r = sh([PERF, "record", "-q", "-a", "-e", "cpu-clock", "-F", "999", "-o", outer,
            "--", "sh", "-c", inner_cmd])
    if r.returncode:
        sys.exit("same_run: %s failed:\n%s" % (mode, r.stderr))
    root = int(open(pidfile).read())
    # every task bstack followed: the tree perf's count is of
    return target_samples(outer, root), bstack_workload_samples(inner, comms=None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS-same-run.md"))
    ap.add_argument("--bstack-opts", default="", help="more options of perf bstack record")
    ap.add_argument("--workloads", default=",".join(SIZES), help="comma-separated")
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("same_run: needs root (BPF, system-wide perf)")
    sizes = {k: v for k, v in (SMOKE_SIZES if opts.smoke else SIZES).items()
             if k in opts.workloads.split(",")}
    repeats = 1 if opts.smoke else opts.repeats
    build_workloads()
    rows = collections.defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="perf-bstack-same-run.") as tmp:
        for _ in range(repeats):
            for mode in sizes:
                rows[mode].append(run_once(mode, sizes, tmp, opts.bstack_opts))
    out = ["# perf bstack record -- CMD against perf record -a, on the same run", "",
           "Machine: %s." % machine(), "",
           "Samples of the workload's tasks (`bench/workloads/bench_work MODE N`, sizes %s)"
           % ", ".join("%s %d" % kv for kv in sizes.items()),
           "counted by `perf record -a -e cpu-clock -F 999` around `perf bstack record -F 999 "
           "%s-- WORKLOAD`, %d repeat(s).  `bench/same_run.py` writes this file."
           % (opts.bstack_opts + " " if opts.bstack_opts else "", repeats), "",
           "| workload | perf record -a | perf bstack | bstack / perf |", "|---|---|---|---|"]
    for mode, vals in rows.items():
        for perf_n, bstack_n in vals:
            out.append("| %s | %d | %d | %.3f |" % (mode, perf_n, bstack_n,
                                                   bstack_n / perf_n if perf_n else 0))
        perf_t = sum(v[0] for v in vals)
        bstack_t = sum(v[1] for v in vals)
        out.append("| %s, all repeats | %d | %d | **%.3f** |" % (
            mode, perf_t, bstack_t, bstack_t / perf_t if perf_t else 0))
    with open(opts.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
