#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What a sample costs in BPF: on_sample's ns a run by kernel bpf_stats.

  python3 bench/walk_cost.py [--perf [LABEL=]PATH]... [--repeats N] [--files N] [--parts]
                             [--write]

perf bstack record -a -F 499 of a parallel compile (make -j2 of generated C
files with gcc -O2: cc1's deep stacks, new processes all along) and of
bench's cpu workload.  Given several perf binaries (--perf, e.g. two builds
of the tree), their runs alternate, so that the machine's noise falls on
each alike.  Per run: on_sample's ns a run and the share of cc1's (or
bench_work's) samples whose user stack reaches the process's first frames.
With --parts, the recordings time each part of a sample (--walk-cost: the
clock reads add a few hundred ns) and the table says where the ns go.  With
--write the figures go into the "## Walk cost" section of bench/RESULTS.md.
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


PARTS_RE = re.compile(r"ns per sample by part: (.*); ([\d.]+) user frames a sample")


def parse_parts(err):
    """{part: ns a sample} and user frames a sample, of perf bstack record --walk-cost"""
    m = PARTS_RE.search(err)
    if not m:
        return {}, 0.0
    parts = {}
    for item in m.group(1).split(", "):
        name, ns = item.rsplit(" ", 1)
        parts[name] = int(ns)
    return parts, float(m.group(2))


def run_once(perf, argv, comm, tmp, system_wide=True, parts=False):
    data = os.path.join(tmp, "walk.data")
    for f in os.listdir(tmp):
        if f.endswith(".o"):
            os.unlink(os.path.join(tmp, f))
    rec = [perf, "bstack", "record", "-v"] + (["-a"] if system_wide else []) + ["-F", "499"]
    rec += ["--walk-cost"] if parts else []
    r = subprocess.run(rec + ["-o", data, "--"] + argv,
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit("walk_cost: %s failed:\n%s" % (perf, r.stderr[-2000:]))
    m = re.search(r"BPF program on_sample ran (\d+) times, (\d+) ns per run, "
                  r"(\d+) ns per sample taken", r.stderr)
    if not m:
        sys.exit("walk_cost: no BPF figures from %s:\n%s" % (perf, r.stderr[-2000:]))
    # runs the program ended early (another task, filtered) count in the second
    return ((int(m.group(2)), int(m.group(1)), whole_share(data, comm)) +
            parse_parts(r.stderr) + (int(m.group(3)),))


def parts_table(runs):
    """Markdown lines: the median ns of each part of a sample, per workload and perf"""
    names = []
    for vals in runs.values():
        for v in vals:
            names += [n for n in v[3] if n not in names]
    lines = ["", "Where a sample's ns go (`--parts`: perf bstack record --walk-cost, "
             "medians of the runs; the clock reads are in the parts):", "",
             "| workload | perf | " + " | ".join(names) + " | user frames | walk a frame |",
             "|---|---|" + "---|" * (len(names) + 2)]
    for (name, label), vals in runs.items():
        med = {n: statistics.median(v[3].get(n, 0) for v in vals) for n in names}
        frames = statistics.median(v[4] for v in vals)
        lines.append("| %s | %s | %s | %.1f | %d |" % (
            name, label, " | ".join("{:,}".format(int(med[n])) for n in names), frames,
            med.get("walk", 0) / frames if frames else 0))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", action="append",
                    help="perf binaries to compare, as [LABEL=]PATH (default ./perf)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--only", choices=("compile", "cpu"))
    ap.add_argument("--parts", action="store_true",
                    help="time each part of a sample, and say where the ns go")
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
                    run = run_once(perf, argv, comm, tmp, not opts.no_system_wide,
                                   opts.parts)
                    runs.setdefault((name, label), []).append(run)
                    print("%-8s %-24s %6d ns a run  %6d runs  %6d ns a sample taken  "
                          "%5.1f %% of %s whole" %
                          (name, label, run[0], run[1], run[5], run[2], comm), flush=True)
                    if run[3]:
                        print("         parts: %s; %.1f user frames" % (
                            ", ".join("%s %d" % kv for kv in run[3].items()), run[4]),
                            flush=True)
    if opts.write:
        lines = ["## Walk cost", "",
                 "`python3 bench/walk_cost.py --repeats %d --files %d`: on_sample's ns a run "
                 "(kernel bpf_stats) and a sample taken (all runs' time over the samples that "
                 "passed the filters) under `perf bstack record %s-F 499`, of `make -j2` over "
                 "%d generated C files with gcc -O2 (whole: the share of cc1's samples whose "
                 "user stack reaches its first frames) and of bench's cpu workload "
                 "(bench_work's); the perf builds' runs alternate." %
                 (opts.repeats, opts.files, "" if opts.no_system_wide else "-a ", opts.files),
                 "",
                 "| workload | perf | ns a run (each run) | median | ns a sample taken, median "
                 "| whole |",
                 "|---|---|---|---|---|---|"]
        for (name, label), vals in runs.items():
            lines.append("| %s | %s | %s | %d | %d | %s |" % (
                name, label, ", ".join("{:,}".format(v[0]) for v in vals),
                statistics.median(v[0] for v in vals),
                statistics.median(v[5] for v in vals),
                ", ".join("%.1f %%" % v[2] for v in vals)))
        if opts.parts:
            lines += parts_table(runs)
        write_section(os.path.join(TOP, "bench", "RESULTS.md"), "## Walk cost",
                      "\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
