#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What the outputs of perf bstack report cost, on one recording.

  python3 bench/export.py [--smoke] [--repeats N] [--out bench/RESULTS-export.md]

One recording of the bundled workload's cpu and dlopen modes (perf bstack
record -F 999), then each output made from it REPEATS times: the time
(median) and the size of perf report --stdio, --folded, --pprof,
--pprof --pprof-raw, --flamegraph and inject (a sample per sample), as
ratios against perf report --stdio of the same file, which starts up and
symbolizes the same way.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import (PERF, SIZES, SMOKE_SIZES, TOP, build_workloads,  # noqa: E402
                 machine, sh, timed, workload)

OUTPUTS = [
    ("report --stdio", ["--stdio"], None),
    ("--folded", ["--folded"], None),
    ("--pprof", ["--pprof", "{out}"], "out.pb.gz"),
    ("--pprof --pprof-raw", ["--pprof", "{out}", "--pprof-raw"], "raw.pb.gz"),
    ("--flamegraph", ["--flamegraph", "{out}"], "flame.html"),
]


def record(tmp, sizes):
    data = os.path.join(tmp, "perf.data")
    cmd = [PERF, "bstack", "record", "-q", "-F", "999", "-o", data, "--",
           "sh", "-c", " ".join(workload("cpu", sizes)) + " && " +
           " ".join(workload("dlopen", sizes))]
    r = sh(cmd)
    if r.returncode:
        sys.exit("export: record failed:\n" + r.stderr[-2000:])
    return data


def measure(tmp, data, repeats):
    rows = []
    for name, args, out in OUTPUTS:
        path = os.path.join(tmp, out) if out else None
        cmd = [PERF, "bstack", "report", "-i", data] + [a.format(out=path) for a in args]
        times, size = [], 0
        for _ in range(repeats):
            t, stdout = timed(cmd)
            times.append(t)
            size = os.path.getsize(path) if path else len(stdout.encode())
        rows.append((name, statistics.median(times), size))
    inject = os.path.join(tmp, "inject.data")
    times = [timed([PERF, "bstack", "inject", "-i", data, "-o", inject])[0]
             for _ in range(repeats)]
    rows.append(("inject", statistics.median(times), os.path.getsize(inject)))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS-export.md"))
    opts = ap.parse_args()
    sizes = SMOKE_SIZES if opts.smoke else SIZES
    repeats = 1 if opts.smoke else opts.repeats
    build_workloads()
    with tempfile.TemporaryDirectory(prefix="bstack-export.") as tmp:
        data = record(tmp, sizes)
        data_size = os.path.getsize(data)
        rows = measure(tmp, data, repeats)
    base = rows[0][1]
    with open(opts.out, "w") as f:
        f.write("# perf bstack report outputs: time and size\n\n")
        f.write("Machine: %s\n\n" % machine())
        f.write("One recording (`perf bstack record -F 999` of the workload's cpu and "
                "dlopen modes, sizes %s), %d bytes; each output made %d times from it, "
                "median time, as a ratio to `perf bstack report --stdio` of the same "
                "file.\n\n" % (sizes, data_size, repeats))
        f.write("| output | time (s) | vs report --stdio | bytes |\n|---|---|---|---|\n")
        for name, t, size in rows:
            f.write("| %s | %.3f | %.2fx | %d |\n" % (name, t, t / base if base else 0, size))
    print("wrote " + opts.out)


if __name__ == "__main__":
    main()
