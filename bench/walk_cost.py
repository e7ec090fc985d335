#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What a sample costs in BPF: on_sample's ns a run by kernel bpf_stats.

  python3 bench/walk_cost.py [--perf [LABEL=]PATH]... [--repeats N] [--files N] [--write]

perf bstack record -a -F 499 of a parallel compile (make -j2 of generated C
files with gcc -O2: cc1's deep stacks, new processes all along) and of
bench's cpu workload.  Given several perf binaries (--perf, e.g. two builds
of the tree), their runs alternate, so that the machine's noise falls on
each alike.  Per run: on_sample's ns a run and the share of cc1's (or
bench_work's) samples whose user stack reaches the process's first frames.
With --write the figures go into the "## Walk cost" section of
bench/RESULTS.md.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

from run import (BUILD, PERF, TOP, bpf_stats_enabled, build_workloads, whole_by_comm,
                 write_section)

FUNC = """
int f%(i)d_%(j)d(int *a, int n)
{
	int s = 0;

	for (int k = 0; k < n; k++) {
		switch (a[k] %% 5) {
		case 0: s += a[k] * %(j)d; break;
		case 1: s ^= a[k] << (k & 7); break;
		case 2: s -= a[(k + %(j)d) %% n]; break;
		case 3: s += f%(i)d_%(p)d(a + 1, n / 2); break;
		default: s |= k;
		}
	}
	return s;
}
"""


def make_sources(tmp, files):
    """files C files of 60 functions each, and a Makefile over them"""
    objs = []
    for i in range(files):
        with open(os.path.join(tmp, "g%d.c" % i), "w") as f:
            f.write("int f%d_0(int *a, int n) { return n ? a[0] : 0; }\n" % i)
            for j in range(1, 60):
                f.write(FUNC % {"i": i, "j": j, "p": j - 1})
        objs.append("g%d.o" % i)
    with open(os.path.join(tmp, "Makefile"), "w") as f:
        f.write("all: %s\n%%.o: %%.c\n\tgcc -O2 -c -o $@ $<\n" % " ".join(objs))


def workloads(tmp, files):
    make_sources(tmp, files)
    return {
        "compile": (["make", "-s", "-j2", "-C", tmp], "cc1"),
        "cpu": ([os.path.join(BUILD, "bench_work"), "cpu", "8000"], "bench_work"),
    }


def whole_share(data, comm):
    ok, tot = whole_by_comm(data).get(comm, (0, 0))
    return 100.0 * ok / tot if tot else 0.0


def run_once(perf, argv, comm, tmp, system_wide=True):
    data = os.path.join(tmp, "walk.data")
    for f in os.listdir(tmp):
        if f.endswith(".o"):
            os.unlink(os.path.join(tmp, f))
    rec = [perf, "bstack", "record"] + (["-a"] if system_wide else []) + ["-F", "499"]
    r = subprocess.run(rec + ["-o", data, "--"] + argv,
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit("walk_cost: %s failed:\n%s" % (perf, r.stderr[-2000:]))
    m = re.search(r"BPF program on_sample ran (\d+) times, (\d+) ns per run", r.stderr)
    if not m:
        sys.exit("walk_cost: no BPF figures from %s:\n%s" % (perf, r.stderr[-2000:]))
    return int(m.group(2)), int(m.group(1)), whole_share(data, comm)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", action="append",
                    help="perf binaries to compare, as [LABEL=]PATH (default ./perf)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--only", choices=("compile", "cpu"))
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--no-system-wide", action="store_true",
                    help="the workload's processes only: other work on the machine unsampled")
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("walk_cost: needs root")
    perfs = [p.split("=", 1) if "=" in p else (p, p) for p in opts.perf or [PERF]]
    build_workloads()
    tmp = tempfile.mkdtemp(prefix="perf-bstack-walk.")
    runs = {}
    with bpf_stats_enabled():
        for name, (argv, comm) in workloads(tmp, opts.files).items():
            if opts.only and name != opts.only:
                continue
            for rep in range(opts.repeats):
                for label, perf in perfs:
                    ns, cnt, whole = run_once(perf, argv, comm, tmp,
                                              not opts.no_system_wide)
                    runs.setdefault((name, label), []).append((ns, cnt, whole))
                    print("%-8s %-30s %6d ns a run  %6d runs  %5.1f %% of %s whole" %
                          (name, label, ns, cnt, whole, comm), flush=True)
    if opts.write:
        lines = ["## Walk cost", "",
                 "`python3 bench/walk_cost.py --repeats %d --files %d`: on_sample's ns a run "
                 "(kernel bpf_stats) under `perf bstack record %s-F 499`, of `make -j2` over "
                 "%d generated C files with gcc -O2 (whole: the share of cc1's samples whose "
                 "user stack reaches its first frames) and of bench's cpu workload "
                 "(bench_work's); the perf builds' runs alternate." %
                 (opts.repeats, opts.files, "" if opts.no_system_wide else "-a ", opts.files),
                 "",
                 "| workload | perf | ns a run (each run) | median | whole |",
                 "|---|---|---|---|---|"]
        for (name, label), vals in runs.items():
            lines.append("| %s | %s | %s | %d | %s |" % (
                name, label, ", ".join("{:,}".format(v[0]) for v in vals),
                statistics.median(v[0] for v in vals),
                ", ".join("%.1f %%" % v[2] for v in vals)))
        write_section(os.path.join(TOP, "bench", "RESULTS.md"), "## Walk cost",
                      "\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
