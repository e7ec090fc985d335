#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""perf bstack through the unwind rules of hand-written assembly and JITs.

  python3 bench/rules.py [--repeats N] [--out bench/RESULTS-unwind.md]

Stacks, each profiler recording a run of its own: Debian's openssl
speed (OpenSSL's perlasm code, whose CFA is in rax, rsi, r9 or r11, or
read from the stack), and CPython 3.12 and 3.13
from pyenv run with -X perf (a trampoline without frame pointer or table
for each Python call) and, 3.13, -X perf_jit (names in a jitdump).  For
Python, the share of the leaf function's samples that hold outer ->
middle -> leaf by name is shown too.  (Not the same run, as
bench/unwind.py's stacks table does: perf record beside perf bstack
record gets MMAP2 records whose build-ids are not: the kernel leaves
PERF_RECORD_MISC_MMAP_BUILD_ID set on the records of the events after
one that asked for build-ids.)

Cost of deep stacks in a big binary: clang-14 -O2 of a generated C file
(libLLVM, 2.5 M table rows), the wall time each profiler adds to a bare
run, in pairs alternating bare, perf record -g and perf bstack record
(tables read from the build-id cache), --repeats times.

Writes the "## Unwind rules" section of RESULTS-unwind.md, which
bench/unwind.py keeps.
"""
import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from run import write_section
from unwind import BUILD, FREQ, PERF, TOP, folded_bstack, folded_script, reach, sh

THREE = """
import time
def leaf_work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def middle(n):
    return leaf_work(n)
def outer(seconds):
    end = time.time() + seconds
    while time.time() < end:
        middle(20000)
outer(4)
"""
CHAIN = re.compile(r";py::outer:[^;]*;.*;py::middle:[^;]*;.*;py::leaf_work:[^;]*(;|$)")


def pythons():
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    return sorted(glob.glob(os.path.join(root, "versions", "3.1[2-9]*", "bin", "python3.1[2-9]")))


def programs(tmp):
    script = os.path.join(tmp, "three.py")
    with open(script, "w") as f:
        f.write(THREE)
    progs = {"openssl speed": ["openssl", "speed", "-seconds", "2", "-evp", "aes-128-gcm",
                               "rsa2048"]}
    for py in pythons():
        ver = os.path.basename(py)
        progs["%s -X perf" % ver] = [py, "-X", "perf", script]
        if ver >= "python3.13":
            progs["%s -X perf_jit" % ver] = [py, "-X", "perf_jit", script]
    return progs


def chain_share(stacks, comm):
    """% of the leaf function's samples that hold outer -> middle -> leaf by name"""
    leaf = chain = 0
    for stack, n in stacks.items():
        if not stack.startswith(comm + ";") or ";py::leaf_work:" not in stack:
            continue
        leaf += n
        if CHAIN.search(stack):
            chain += n
    return "%.0f %%" % (100.0 * chain / leaf) if leaf else "-"


def alone(cmd, tmp, record):
    """{stack: count} of one profiler recording cmd by itself"""
    data = os.path.join(tmp, "alone.data")
    if record[0] == "bstack":
        sh([PERF] + record + ["-q", "-F", FREQ, "-o", data, "--"] + cmd)
        return folded_bstack(data)
    sh([PERF, "record", "-q", "-F", FREQ, "-e", "cpu-clock", "-o", data] + record + ["--"] + cmd)
    return folded_script(data)


def stacks_rows(progs, tmp):
    rows = ["| program | record -g | --call-graph dwarf | bstack | "
            "bstack: outer -> middle -> leaf | dwarf: outer -> middle -> leaf |",
            "|---|---|---|---|---|---|"]
    for prog, cmd in progs.items():
        comm = os.path.basename(cmd[0])[:15]
        g = alone(cmd, tmp, ["-g"])
        d = alone(cmd, tmp, ["--call-graph", "dwarf"])
        b = alone(cmd, tmp, ["bstack", "record"])
        cells = ["%.0f %%, %.1f (%d)" % reach(st, comm) for st in (g, d, b)]
        python = "-X" in cmd
        cells += [chain_share(b, comm) if python else "-", chain_share(d, comm) if python else "-"]
        for f in glob.glob("/tmp/perf-*.map") + glob.glob("/tmp/jit-*.dump"):
            os.unlink(f)		# the names come from the recording's images
        rows.append("| %s | %s |" % (prog, " | ".join(cells)))
        print(rows[-1], flush=True)
    return rows


def wall(cmd):
    t = time.monotonic()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t


def clang_cost(tmp, repeats):
    src = os.path.join(tmp, "big.c")
    with open(src, "w") as f:
        for i in range(3000):
            f.write("int f%d(int x) { int s = 0; for (int i = 0; i < x; i++) "
                    "{ s += i * %d; if (s %% 7 == 3) s ^= x; } return s; }\n" % (i, i))
    cc = ["clang-14", "-O2", "-c", "-o", os.devnull, src]
    data = os.path.join(tmp, "cost.data")
    runs = {"bare": cc,
            "perf record -g": [PERF, "record", "-q", "-F", FREQ, "-e", "cpu-clock", "-g",
                               "-o", data, "--"] + cc,
            "perf bstack record": [PERF, "bstack", "record", "-q", "-F", FREQ, "-o", data,
                                   "--"] + cc}
    wall(runs["perf bstack record"])	# the tables into the build-id cache
    times = {k: [] for k in runs}
    for _ in range(repeats):
        for k, cmd in runs.items():
            times[k].append(wall(cmd))
    bare = statistics.median(times["bare"])
    added = {k: statistics.median(v) - bare for k, v in times.items() if k != "bare"}
    ratio = added["perf bstack record"] / added["perf record -g"] \
        if added["perf record -g"] > 0 else float("nan")
    line = ("clang-14 -O2 of 3,000 generated functions, %d alternating runs each: bare %.2f s; "
            "perf record -g adds %.2f s, perf bstack record %.2f s (%.1fx what -g adds); "
            "all runs: %s." % (repeats, bare, added["perf record -g"],
                               added["perf bstack record"], ratio,
                               "; ".join("%s %s" % (k, ", ".join("%.2f" % t for t in v))
                                         for k, v in times.items())))
    print(line, flush=True)
    return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS-unwind.md"))
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("rules: needs root")
    os.makedirs(BUILD, exist_ok=True)
    open("/proc/sys/kernel/bpf_stats_enabled", "w").write("1")
    with tempfile.TemporaryDirectory() as tmp:
        rows = stacks_rows(programs(tmp), tmp)
        cost = clang_cost(tmp, opts.repeats)
    text = ["## Unwind rules\n",
            "`python3 bench/rules.py --repeats %d`, %s Hz: %s\n" %
            (opts.repeats, FREQ, " ".join(__doc__.split("\n\n")[2:4]).replace("\n", " "))]
    text += rows + ["", "Cells: share of the program's samples reaching main, mean frames, "
                    "(samples); for Python, the share of leaf_work's samples that name "
                    "the three functions in order.", "", cost, ""]
    write_section(opts.out, "## Unwind rules", "\n".join(text) + "\n", before="## Cost")


if __name__ == "__main__":
    main()
