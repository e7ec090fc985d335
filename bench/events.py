#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""perf bstack at tracepoints and uprobes: cost per event and events kept.

  python3 bench/events.py [--smoke] [--repeats N] [--events N] [--out bench/RESULTS.md]

The workload (`bench_work events N`) calls bench_event() N times, each
call a getppid() system call: N uprobe hits, N sys_enter_getppid hits.
Profilers, interleaved: none; perf record -g on the tracepoint and on a
uprobe of bench_event made by perf probe (perf's own stacks, through the
ring buffer); perf bstack record -e the tracepoint, and --uprobe
bench_event, each with build-id stacks and with --ip-stacks (the same
program with a plain stack of IPs).  The uprobe rows again on
bench_event_nop5 (`bench_work events-nop5 N`), whose first instruction is
a 5-byte nop: Linux 6.18 turns a uprobe there into a call instead of an
int3 trap, for both recorders.  Measured:
the BPF program's ns per event (kernel.bpf_stats_enabled), the slowdown
of the workload, how many of the N events each recorder kept, and the
size of what it wrote.
Writes the "## Events" section of RESULTS.md and keeps the others.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

from run import BUILD, PERF, TOP, write_section, bpf_stats_enabled, build_workloads, sh

TP = "syscalls:sys_enter_getppid"
# the uprobe events perf probe makes of bench_event and bench_event_nop5,
# for perf record's own rows
PROBE = "probe_bench_work:bench_event"
PROBE_NOP5 = "probe_bench_work:bench_event_nop5"
NOP5 = "uprobe at a 5-byte nop"
# the run without a profiler each row's added time is measured from
BASE = {"events": "none", "events-nop5": "none, 5-byte nop"}


def profilers():
    """name -> (perf's arguments, the workload's mode)"""
    uprobe = "%s/bench_work:bench_event" % BUILD
    nop5 = "%s/bench_work:bench_event_nop5" % BUILD
    return {
        "none": (None, "events"),
        "record -g, tracepoint": (["record", "-e", TP, "-g"], "events"),
        "bstack, tracepoint": (["bstack", "record", "-v", "-e", TP], "events"),
        "bstack --ip-stacks, tracepoint":
            (["bstack", "record", "-v", "-e", TP, "--ip-stacks"], "events"),
        "record -g, uprobe": (["record", "-e", PROBE, "-g"], "events"),
        "bstack, uprobe": (["bstack", "record", "-v", "--uprobe", uprobe], "events"),
        "bstack --ip-stacks, uprobe":
            (["bstack", "record", "-v", "--uprobe", uprobe, "--ip-stacks"], "events"),
        "none, 5-byte nop": (None, "events-nop5"),
        "record -g, " + NOP5: (["record", "-e", PROBE_NOP5, "-g"], "events-nop5"),
        "bstack, " + NOP5: (["bstack", "record", "-v", "--uprobe", nop5], "events-nop5"),
        "bstack --ip-stacks, " + NOP5:
            (["bstack", "record", "-v", "--uprobe", nop5, "--ip-stacks"], "events-nop5"),
    }


def kept_by_record(data):
    """Samples perf record wrote, and the events it says it lost."""
    r = sh([PERF, "report", "--stats", "-i", data])
    samples = lost = 0
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] == "SAMPLE" and f[1] == "events:":
            samples = int(f[2])
        elif len(f) >= 3 and f[0] in ("LOST", "LOST_SAMPLES") and f[1] == "events:":
            lost += int(f[2])
    return samples, lost


def kept_by_bstack(err):
    """Hits the BPF program counted, and those it lost (maps full, stacks lost)."""
    m = re.search(r"\[ perf bstack: (\d+) samples", err)
    hits = int(m.group(1)) if m else 0
    m = re.search(r"lost (\d+) samples \(counts map full\), (\d+) user stacks .*?, "
                  r"(\d+) kernel stacks", err)
    lost = sum(int(g) for g in m.groups()) if m else 0
    return hits, lost


def run_once(name, args, mode, n, data):
    cmd = [os.path.join(BUILD, "bench_work"), mode, str(n)]
    if args is not None:
        cmd = [PERF] + args + ["-o", data, "--"] + cmd
    r = sh(cmd)
    if r.returncode:
        sys.exit("bench: %s failed:\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    m = re.search(r"bench: wall ([\d.]+) cpu ([\d.]+)", r.stderr)
    res = {"wall": float(m.group(1)), "mode": mode}
    if args is None:
        return res
    res["bytes"] = os.path.getsize(data)
    if args[0] == "record":
        res["kept"], res["lost"] = kept_by_record(data)
    else:
        res["kept"], res["lost"] = kept_by_bstack(r.stderr)
        m = re.search(r"BPF program \S+ ran \d+ times, (\d+) ns per run", r.stderr)
        res["bpf_ns"] = int(m.group(1)) if m else None
    return res


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, digits=0):
    return "n/a" if v is None else "%.*f" % (digits, v)


def write_results(path, n, repeats, results):
    w = []
    w.append("## Events\n")
    w.append("`python3 bench/events.py`: `bench_work events %d` (%d calls of bench_event(), "
             "each a getppid() system call), medians of %d interleaved runs; "
             "kernel.bpf_stats_enabled=1. \"ns/event\" is the BPF program's run time "
             "per hit; --ip-stacks is the same program with a plain stack of IPs "
             "instead of build-id frames. \"kept\" is the events the recording holds, "
             "of %d. \"added wall vs record -g\" is the workload's wall time above the "
             "run without a profiler, against that of perf record -g on the same "
             "tracepoint or function (target of issue 22: at most 0.5×). The last rows "
             "probe bench_event_nop5() (`bench_work events-nop5`), whose first "
             "instruction is a 5-byte nop, which Linux 6.18 on x86-64 takes through a "
             "call instead of an int3 trap.\n" % (n, n, repeats, n))
    w.append("| profiler | workload wall s | slowdown | added wall vs record -g "
             "| BPF ns/event | vs --ip-stacks "
             "| events/s | kept | lost (counted) | perf.data bytes |")
    w.append("|---|---|---|---|---|---|---|---|---|---|")
    for name, rs in results.items():
        base = med([r["wall"] for r in results[BASE[rs[0]["mode"]]]])
        wall = med([r["wall"] for r in rs])
        # the time the profiler adds, against perf record -g at the same place
        peer = med([r["wall"] for r in results.get("record -g, " + name.split(", ")[-1], [])])
        added = "%.2f×" % ((wall - base) / (peer - base)) \
            if name.startswith("bstack") and base and peer and peer > base else ""
        ns = med([r.get("bpf_ns") for r in rs])
        floor_name = name.replace("bstack, ", "bstack --ip-stacks, ")
        floor = med([r.get("bpf_ns") for r in results.get(floor_name, [])]) \
            if floor_name != name else None
        w.append("| %s | %.3f | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, wall, "%.2f×" % (wall / base) if base else "n/a", added, fmt(ns),
            "%.2f×" % (ns / floor) if ns and floor else "",
            fmt(n / wall) if wall else "n/a",
            fmt(med([r.get("kept") for r in rs])) if name not in BASE.values() else "",
            fmt(med([r.get("lost") for r in rs])) if name not in BASE.values() else "",
            fmt(med([r.get("bytes") for r in rs])) if name not in BASE.values() else ""))
    w.append("")
    write_section(path, "## Events", "\n".join(w) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="few events, one repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--events", type=int, default=200000)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS.md"))
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF, tracepoints, uprobes)")
    n = 2000 if opts.smoke else opts.events
    repeats = 1 if opts.smoke else opts.repeats
    build_workloads()

    tmp = tempfile.mkdtemp(prefix="perf-bstack-events.")
    results = {}
    for func in ("bench_event", "bench_event_nop5"):
        probe = sh([PERF, "probe", "-q", "-x", os.path.join(BUILD, "bench_work"), func])
        if probe.returncode:
            sys.exit("bench: perf probe of %s failed:\n%s" % (func, probe.stderr[-2000:]))
    try:
        with bpf_stats_enabled():
            for _ in range(repeats):
                for name, (args, mode) in profilers().items():
                    data = os.path.join(tmp, "events.data")
                    results.setdefault(name, []).append(
                        run_once(name, args, mode, n, data))
        write_results(opts.out, n, repeats, results)
    finally:
        sh([PERF, "probe", "-q", "-d", PROBE])
        sh([PERF, "probe", "-q", "-d", PROBE_NOP5])
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
