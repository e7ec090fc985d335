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

Then ten short recordings (the cpu and churn modes, a tenth of the
sizes each) merged into one with perf bstack merge: its time and size
against the inputs', and perf bstack report --stdio of the merge against
the ten reports of the inputs, one after the other.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import (PERF, SIZES, SMOKE_SIZES, TOP, build_workloads,  # noqa: E402
                 machine, sh, timed, workload)

# --flamegraph reads its scripts below perf's exec path: the build's
os.environ.setdefault("PERF_EXEC_PATH", os.path.join(TOP, "build", "perf"))

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


def record_many(tmp, sizes, nr):
    small = {k: max(v // 10, 1) for k, v in sizes.items()}
    paths = []
    for i in range(nr):
        data = os.path.join(tmp, "r%d.data" % i)
        r = sh([PERF, "bstack", "record", "-q", "-F", "999", "-o", data, "--",
                "sh", "-c", " ".join(workload("cpu", small)) + " && " +
                " ".join(workload("churn", small))])
        if r.returncode:
            sys.exit("export: record failed:\n" + r.stderr[-2000:])
        paths.append(data)
    return paths


def measure_merge(tmp, paths, repeats):
    merged = os.path.join(tmp, "merged.data")
    merge = statistics.median(timed([PERF, "bstack", "merge", "-o", merged] + paths)[0]
                              for _ in range(repeats))
    one = statistics.median(timed([PERF, "bstack", "report", "--stdio", "-i", merged])[0]
                            for _ in range(repeats))
    each = statistics.median(sum(timed([PERF, "bstack", "report", "--stdio", "-i", p])[0]
                                 for p in paths) for _ in range(repeats))
    return {"merge": merge, "bytes": os.path.getsize(merged),
            "inputs": sum(os.path.getsize(p) for p in paths),
            "report merged": one, "report each": each}


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
        nr = 10
        merge = measure_merge(tmp, record_many(tmp, sizes, nr), repeats)
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
        f.write("\n## A merge of %d recordings\n\n" % nr)
        f.write("%d recordings of the cpu and churn modes at a tenth of the sizes, %d "
                "bytes in all, merged by `perf bstack merge` (median of %d):\n\n"
                % (nr, merge["inputs"], repeats))
        f.write("| | time (s) | bytes |\n|---|---|---|\n")
        f.write("| perf bstack merge | %.3f | %d (%.2fx the inputs) |\n"
                % (merge["merge"], merge["bytes"], merge["bytes"] / merge["inputs"]))
        f.write("| report --stdio of the merge | %.3f | |\n" % merge["report merged"])
        f.write("| report --stdio of each input, in turn | %.3f | |\n" % merge["report each"])
        f.write("\nThe merge is reported in %.2fx the time of the %d reports: it "
                "symbolizes each binary once.\n"
                % (merge["report merged"] / merge["report each"], nr))
    print("wrote " + opts.out)


if __name__ == "__main__":
    main()
