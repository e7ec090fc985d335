#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""perf bstack on code without frame pointers: stacks, bytes and cost.

  python3 bench/unwind.py [--smoke] [--repeats N] [--long FACTOR [--long-only]]
                          [--programs LIST] [--profilers LIST]
                          [--out bench/RESULTS-unwind.md]

Programs: Debian's xz, perl, sort and python3 (built without frame
pointers, as the distribution builds them) and bstack_nofp, a gcc -O2
-fomit-frame-pointer workload whose hot function is called back by
libc's qsort().

Stacks: perf bstack record (unwind tables) watches the very run that perf
record --call-graph dwarf records (perf record runs perf bstack record,
which runs the program; only the program's samples are compared), and
so does perf bstack record --no-cfi with perf record -g.  A stack
"reaches main" when it holds a frame below __libc_start_call_main (the
programs are stripped: main has no name).

Cost: each profiler records the program alone, interleaved, --repeats
times: the perf.data bytes per sample, perf's own CPU time while
recording (all of it less the program's, which rusage_of reports from
wait4(), so that the program's own noise is not perf's), the BPF
programs' run time (kernel.bpf_stats_enabled) and the report's CPU time.
The programs run for seconds, as profiled programs do: what a profiler
costs once (loading, the header) is shown apart, as the bytes and CPU of
a recording of 'true'.  "bstack" reads the unwind tables a recording
before it left in the build-id cache; "bstack, tables built" records
with an empty cache, building every table.  --long adds the cost of the
CPU-bound programs run FACTOR times as long, where that once-only cost
weighs less (--programs: some of them; --profilers: dwarf and some of the
others).  This machine is noisy: read the ratios.
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERF = os.path.join(TOP, "perf")
BUILD = os.path.join(TOP, "build", "bench-unwind")
RUSAGE_OF = os.path.join(BUILD, "rusage_of")
FREQ = "499"


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)


def random_text(path, mb):
    with open(path, "wb") as f:
        data = sh(["sh", "-c", "head -c %d /dev/urandom | base64" % (mb * 750000)]).stdout
        f.write(data.encode())
    return path


def cpu_programs(smoke, factor=1):
    """the programs that need no input, factor times as long"""
    scale = 10 if smoke else 1
    perl_loop, py_loop = 30000000 * factor // scale, 15000000 * factor // scale
    return {
        "perl loop": ["perl", "-e", "my %%h; $h{$_ %% 1000} .= 'x' for 1..%d" % perl_loop],
        "python3 loop": ["python3", "-c",
                         "d = {}\nfor i in range(%d): d[i %% 997] = str(i)" % py_loop],
        "bstack_nofp": [os.path.join(BUILD, "bstack_nofp"), "1" if smoke else str(5 * factor)],
    }


def programs(tmp, smoke):
    """each a few seconds long (smoke: a tenth)"""
    scale = 10 if smoke else 1
    small = random_text(os.path.join(tmp, "text"), 10 // scale or 1)
    big = random_text(os.path.join(tmp, "big"), 120 // scale)
    cpu = cpu_programs(smoke)
    return {
        "xz -6 -T1": ["xz", "-6", "-T1", "-k", "-f", small],
        "perl loop": cpu["perl loop"],
        "sort": ["sort", "-S", "64M", "-o", os.devnull, big],
        "python3 loop": cpu["python3 loop"],
        "bstack_nofp": cpu["bstack_nofp"],
    }


def comm_of(cmd):
    return os.path.basename(cmd[0])[:15]


def folded_bstack(data):
    """{stack: count} of perf bstack report --folded"""
    out = sh([PERF, "bstack", "report", "-i", data, "--folded"]).stdout
    stacks = {}
    for line in out.splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            stacks[stack] = stacks.get(stack, 0) + int(n)
    return stacks


def folded_script(data):
    """{stack: count} of perf script's callchains, outermost first"""
    out = sh([PERF, "script", "-i", data, "-F", "comm,ip,sym"]).stdout
    stacks, comm, frames = {}, None, []

    def flush():
        if comm is not None:
            key = ";".join([comm] + frames[::-1])
            stacks[key] = stacks.get(key, 0) + 1

    for line in out.splitlines():
        if not line.strip():
            flush()
            comm, frames = None, []
        elif not line[0].isspace():
            flush()
            comm, frames = line.strip().split()[0], []
        else:
            parts = line.split(None, 1)
            frames.append(parts[1].strip() if len(parts) > 1 else "[unknown]")
    flush()
    return stacks


def reach(stacks, comm):
    """(% of comm's samples reaching main, mean depth, samples)"""
    total = main = depth = 0
    for stack, n in stacks.items():
        frames = stack.split(";")
        if frames[0] != comm:
            continue
        total += n
        depth += n * (len(frames) - 1)
        names = frames[1:]
        if "__libc_start_call_main" in names and \
                names.index("__libc_start_call_main") < len(names) - 1:
            main += n
    if not total:
        return 0.0, 0.0, 0
    return 100.0 * main / total, depth / total, total


def top_chains(stacks, comm, n=3):
    own = sorted(((c, s) for s, c in stacks.items() if s.split(";")[0] == comm), reverse=True)
    return [(c, s) for c, s in own[:n]]


def same_run(cmd, tmp, bstack_extra, record_args):
    """bstack and perf record watching one run of cmd: perf record outside,
    so that bstack's process tree is cmd's alone (perf record follows its
    child perf bstack record and cmd, and only cmd's samples are compared)"""
    b = os.path.join(tmp, "same-b.data")
    r = os.path.join(tmp, "same-r.data")
    sh([PERF, "record", "-q", "-F", FREQ, "-e", "cpu-clock", "-o", r] + record_args +
       ["--", PERF, "bstack", "record", "-q", "-F", FREQ, "-o", b] + bstack_extra +
       ["--"] + cmd)
    return folded_bstack(b), folded_script(r)


def cpu_of(fn):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    fn()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# every report the same view: the callers of each function's own samples
REPORT = ["--stdio", "--no-children"]
PROFILERS = {
    "record dwarf": (["record", "-F", FREQ, "-e", "cpu-clock", "--call-graph", "dwarf"],
                     ["report"] + REPORT),
    "record -g": (["record", "-F", FREQ, "-e", "cpu-clock", "-g"], ["report"] + REPORT),
    "bstack": (["bstack", "record", "-v", "-F", FREQ], ["bstack", "report"] + REPORT),
    # an empty build-id cache: every unwind table built while recording
    "bstack, tables built": (["bstack", "record", "-v", "-F", FREQ],
                             ["bstack", "report"] + REPORT),
    "bstack --no-cfi": (["bstack", "record", "-v", "-F", FREQ, "--no-cfi"],
                        ["bstack", "report"] + REPORT),
}


def bpf_ns(err):
    """total BPF run time of the end-of-run lines of perf bstack record"""
    ns = 0
    for m in re.finditer(r"ran (\d+) times, (\d+) ns per run", err):
        ns += int(m.group(1)) * int(m.group(2))
    return ns, re.search(r"on_sample ran \d+ times, (\d+) ns per run", err)


def cost_once(name, cmd, tmp):
    rec, rep = PROFILERS[name]
    data = os.path.join(tmp, "cost.data")
    res = {}
    r = None

    if name == "bstack, tables built":
        cache = os.path.join(tmp, "empty-cache")
        shutil.rmtree(cache, ignore_errors=True)
        rec = ["--buildid-dir", cache] + rec
        rep = ["--buildid-dir", cache] + rep

    def record():
        nonlocal r
        r = sh([PERF] + rec + ["-o", data, "--", RUSAGE_OF, own] + cmd)

    own = os.path.join(tmp, "program.cpu")
    # perf's own: all of it less the program's
    res["record cpu"] = max(cpu_of(record) - float(open(own).read()), 0)
    res["bpf s"], per_run = bpf_ns(r.stderr)
    res["bpf s"] /= 1e9
    res["bpf ns/sample"] = int(per_run.group(1)) if per_run else None
    res["bytes"] = os.path.getsize(data)
    m = re.search(r"\((\d+) samples\)", r.stderr)
    res["samples"] = int(m.group(1)) if m else None
    if name.startswith("bstack"):
        m = re.search(r"perf bstack: (\d+) samples", r.stderr)
        res["samples"] = int(m.group(1)) if m else None
    res["report cpu"] = cpu_of(lambda: sh([PERF] + rep + ["-i", data]))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS-unwind.md"))
    ap.add_argument("--long", type=int, default=0, metavar="FACTOR",
                    help="also the cost of the CPU-bound programs run FACTOR times longer")
    ap.add_argument("--long-only", action="store_true",
                    help="with --long: that table alone")
    ap.add_argument("--programs", metavar="LIST",
                    help="with --long: these CPU-bound programs, comma-separated names")
    ap.add_argument("--profilers", metavar="LIST",
                    help="these profilers alone, comma-separated (record dwarf always)")
    opts = ap.parse_args()
    if opts.profilers:
        keep = ["record dwarf"] + opts.profilers.split(",")
        for p in [p for p in PROFILERS if p not in keep]:
            del PROFILERS[p]
    os.makedirs(BUILD, exist_ok=True)
    r = sh(["make", "-s", "-C", os.path.join(TOP, "tools/perf/tests/bstack"), "OUT=" + BUILD])
    if r.returncode:
        sys.exit(r.stderr)
    r = sh(["cc", "-O2", "-o", RUSAGE_OF, os.path.join(TOP, "bench", "workloads", "rusage_of.c")])
    if r.returncode:
        sys.exit(r.stderr)
    open("/proc/sys/kernel/bpf_stats_enabled", "w").write("1")
    lines = ["# perf bstack on code without frame pointers", "",
             "`python3 bench/unwind.py%s --repeats %d`, %d Hz.  %s" %
             ((" --smoke" if opts.smoke else "") +
              (" --long %d" % opts.long if opts.long else "") +
              (" --long-only" if opts.long_only else "") +
              (" --programs '%s'" % opts.programs if opts.programs else "") +
              (" --profilers '%s'" % opts.profilers if opts.profilers else ""),
              opts.repeats, int(FREQ),
              __doc__.split("\n\n")[2].replace("\n", " ")), ""]
    with tempfile.TemporaryDirectory() as tmp:
        progs = {} if opts.long_only else programs(tmp, opts.smoke)
        if progs:
            stacks_table(lines, progs, tmp)
        lines += ["## Cost, each profiler alone, interleaved", ""]
        fixed = cost_table(lines, [("true", ["true"])] + list(progs.items()), tmp,
                           opts.repeats)
        lines += ["", "Targets: bytes per sample <= 0.05x dwarf; total cost (perf's own CPU "
                  "while recording, + BPF run time + report CPU) <= 0.25x dwarf's. Every report "
                  "is `--stdio --no-children`.", "",
                  "What each profiler costs once, a recording of `true`: " +
                  ", ".join("%s %.0f KB, %.2f s CPU" % (p, m["bytes"] / 1024.0, m["total"])
                            for p, m in fixed.items()) + ".", ""]
        if opts.long:
            long_progs = cpu_programs(False, opts.long)
            if opts.programs:
                names = opts.programs.split(",")
                long_progs = {n: c for n, c in long_progs.items() if n in names}
            lines += ["## Cost of runs %d times longer, once each" % opts.long, "",
                      "The CPU-bound programs of the cost table, %d times as long: what "
                      "a profiler costs once weighs less here." % opts.long, ""]
            cost_table(lines, list(long_progs.items()), tmp, 1)
            lines.append("")
    # bench/rules.py's section stays
    old = open(opts.out).read() if os.path.exists(opts.out) else ""
    if "\n## Unwind rules" in old:
        start = old.index("\n## Unwind rules") + 1
        end = old.find("\n## ", start)
        lines.append(old[start:end + 1 if end >= 0 else len(old)].rstrip("\n") + "\n")
    with open(opts.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def stacks_table(lines, progs, tmp):
    """How far each profiler's stacks reach, profilers watching the same run"""
    lines += ["## Stacks, profilers watching the same run", "",
              "| program | record -g | --call-graph dwarf | bstack --no-cfi | bstack | bstack vs dwarf |",
              "|---|---|---|---|---|---|"]
    chains = []
    for prog, cmd in progs.items():
        comm = comm_of(cmd)
        b, d = same_run(cmd, tmp, [], ["--call-graph", "dwarf"])
        fb, g = same_run(cmd, tmp, ["--no-cfi"], ["-g"])
        cells = []
        for st in (g, d, fb, b):
            pct, depth, n = reach(st, comm)
            cells.append("%.0f %%, %.1f (%d)" % (pct, depth, n))
        rb, rd = reach(b, comm)[0], reach(d, comm)[0]
        cells.append("%.2fx" % (rb / rd) if rd else "-")
        lines.append("| %s | %s |" % (prog, " | ".join(cells)))
        chains.append((prog, top_chains(b, comm), top_chains(d, comm)))
    lines += ["", "Cells: share of the program's samples reaching main, mean frames, "
              "(samples).  Target: bstack reaches main in >= 90 % of the samples where "
              "dwarf does (last column >= 0.90).", "",
              "### Top call chains, side by side", ""]
    for prog, cb, cd in chains:
        lines.append("%s:" % prog)
        lines.append("")
        lines.append("```")
        for who, cs in (("bstack", cb), ("dwarf ", cd)):
            for c, s in cs:
                lines.append("%s %6d %s" % (who, c, s[-300:]))
        lines.append("```")
        lines.append("")


def cost_table(lines, progs, tmp, repeats):
    """Rows of the cost of each program under each profiler, interleaved;
    the medians of a program named "true" are returned, not shown"""
    lines += ["| program | profiler | bytes/sample | x dwarf | record CPU s | BPF s | report CPU s | total x dwarf | BPF ns/sample |",
              "|---|---|---|---|---|---|---|---|---|"]
    fixed = {}
    for prog, cmd in progs:
        res = {p: [] for p in PROFILERS}
        # the tables of the program's binaries in the build-id cache, as a
        # recording before this one left them: "bstack" reads them from there
        sh([PERF, "bstack", "record", "-q", "-o", os.path.join(tmp, "prime.data"), "--",
            "timeout", "1"] + cmd)
        for _ in range(repeats):
            for p in PROFILERS:
                res[p].append(cost_once(p, cmd, tmp))
        med = {}
        for p, rs in res.items():
            med[p] = {}
            for k in rs[0]:
                vals = [x[k] for x in rs if x[k] is not None]
                med[p][k] = statistics.median(vals) if vals else None
            m = med[p]
            m["bps"] = m["bytes"] / m["samples"] if m["samples"] else None
            m["total"] = m["record cpu"] + m["bpf s"] + m["report cpu"]
        if prog == "true":
            fixed = med
            continue
        dw = med["record dwarf"]
        for p, m in med.items():
            lines.append("| %s | %s | %s | %s | %.2f | %.3f | %.2f | %s | %s |" % (
                prog, p, "%.0f" % m["bps"] if m["bps"] else "-",
                "%.3f" % (m["bps"] / dw["bps"]) if m["bps"] and dw["bps"] else "-",
                m["record cpu"], m["bpf s"], m["report cpu"],
                "%.2f" % (m["total"] / dw["total"]) if dw["total"] else "-",
                m["bpf ns/sample"] if m["bpf ns/sample"] else "-"))
    return fixed


if __name__ == "__main__":
    main()
