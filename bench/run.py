#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""perf bstack benchmarks: every comparison is measured side by side in one run.

  python3 bench/run.py [--smoke] [--repeats N] [--out bench/RESULTS.md]

Workloads (bench/workloads, fixed amounts of work), profilers (none,
perf record -g, perf record --call-graph dwarf, perf bstack record, with
--interval, and with --ip-stacks: the same BPF program without build-ids),
runs interleaved so that the machine's noise hits every profiler alike.
This machine is noisy: read the ratios, not the absolute times.
"""
import argparse
import contextlib
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERF = os.path.join(TOP, "perf")
BUILD = os.path.join(TOP, "build", "bench")

SIZES = {"cpu": 8000, "churn": 1500, "dlopen": 15000, "threads": 5000}
SMOKE_SIZES = {"cpu": 300, "churn": 60, "dlopen": 600, "threads": 200}

PROFILERS = {
    "none": None,
    "record -g": ["record", "-e", "cpu-clock", "-F", "999", "-g"],
    "record dwarf": ["record", "-e", "cpu-clock", "-F", "999", "--call-graph", "dwarf"],
    "bstack": ["bstack", "record", "-v", "-F", "999"],
    "bstack --interval": ["bstack", "record", "-v", "-F", "999", "--interval", "1000"],
    "bstack --ip-stacks": ["bstack", "record", "-v", "-F", "999", "--ip-stacks"],
}
# the churn's peers that see every task of it, whatever it forks
SYSTEM_WIDE = {
    "record -a -g": ["record", "-a", "-e", "cpu-clock", "-F", "999", "-g"],
    "bstack -a": ["bstack", "record", "-v", "-a", "-F", "999"],
}


def profilers_of(mode):
    """The profilers a workload runs under: the system-wide ones for the churn only"""
    return {**PROFILERS, **SYSTEM_WIDE} if mode == "churn" else PROFILERS


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@contextlib.contextmanager
def bpf_stats_enabled():
    """kernel.bpf_stats_enabled=1 for the BPF ns per run, then as it was."""
    path = "/proc/sys/kernel/bpf_stats_enabled"
    old = open(path).read().strip()
    open(path, "w").write("1")
    try:
        yield
    finally:
        open(path, "w").write(old)


# the churn of the always-on benchmarks (stress.py, volume.py): fork/exec and
# dlopen() in a loop, until killed
CHURN_LOOP = ["sh", "-c", "while :; do %s/bench_work churn 300; "
              "%s/bench_work dlopen 2000; done 2> /dev/null" % (BUILD, BUILD)]


def write_section(path, title, text, before="## Stress"):
    """Put text, the section `title` of a results file, in place of the
    old one, or else before the section `before`, or at the end."""
    old = open(path).read() if os.path.exists(path) else ""
    if title in old:
        start = old.index(title)
        end = old.find("\n## ", start + 1)
        new = old[:start] + text + (old[end + 1:] if end >= 0 else "")
    elif before in old:
        i = old.index(before)
        new = old[:i] + text + "\n" + old[i:]
    else:
        new = old + "\n" + text
    open(path, "w").write(new)
    print("bench: wrote %s" % path)


# a user stack is whole when it reaches the first frames of its process or thread
WHOLE_ROOTS = re.compile(r";(__libc_start_call_main|start_thread|clone3|_start);")


def whole_by_comm(path):
    """{comm: (samples whose user stack is whole, samples)} of a perf bstack recording"""
    r = subprocess.run([PERF, "bstack", "report", "-i", path, "--folded"],
                       capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        comm = stack.split(";", 1)[0]
        ok, tot = out.get(comm, (0, 0))
        out[comm] = (ok + (int(n) if WHOLE_ROOTS.search(stack + ";") else 0), tot + int(n))
    return out


def build_workloads():
    os.makedirs(BUILD, exist_ok=True)
    r = sh(["make", "-s", "-C", os.path.join(TOP, "bench", "workloads"), "OUT=" + BUILD])
    if r.returncode:
        sys.exit("bench: building the workloads failed:\n" + r.stderr)


def workload(mode, sizes):
    return [os.path.join(BUILD, "bench_work"), mode, str(sizes[mode])]


def parse_samples(err):
    m = re.search(r"\[ perf bstack: (\d+) samples", err)
    if m:
        return int(m.group(1))
    m = re.search(r"\((\d+) samples\)", err)
    return int(m.group(1)) if m else 0


def run_once(profiler, mode, sizes, data):
    """One profiled run: the workload's own wall/cpu, perf's cpu, bytes, samples."""
    cmd = workload(mode, sizes)
    args = profilers_of(mode)[profiler]
    if args is not None:
        cmd = [PERF] + args + ["-o", data, "--"] + cmd
    t0 = os.times()
    r = sh(cmd)
    t1 = os.times()
    if r.returncode:
        sys.exit("bench: %s failed:\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    m = re.search(r"bench: wall ([\d.]+) cpu ([\d.]+)", r.stderr)
    wall, cpu = float(m.group(1)), float(m.group(2))
    total = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    res = {"wall": wall, "cpu": cpu, "perf_cpu": max(total - cpu, 0.0),
           "err": r.stderr, "cmd": cmd}
    if args is not None:
        res["bytes"] = os.path.getsize(data)
        res["samples"] = parse_samples(r.stderr)
        m = re.search(r"(\d+) ns per sample taken", r.stderr)
        if m:
            res["bpf_ns"] = int(m.group(1))
    return res


def stats(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return (min(vals), statistics.median(vals), max(vals))


def fmt3(s, unit="", scale=1.0, digits=3):
    if s is None:
        return "n/a"
    return "/".join("%.*f" % (digits, v * scale) for v in s) + unit


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt_ratio(x):
    return "n/a" if x is None else "%.2f×" % x


def sigint_exit_time(args, tmp, sizes):
    """Seconds from SIGINT to exit for a system-wide recorder after churn."""
    data = os.path.join(tmp, "sigint.data")
    if os.path.exists(data):
        os.unlink(data)
    p = subprocess.Popen([PERF] + args + ["-a", "-o", data],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(data):
            break
        time.sleep(0.05)
    sh(workload("churn", sizes))
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.wait()
    return time.monotonic() - t0


def timed(cmd):
    t0 = time.monotonic()
    r = sh(cmd)
    if r.returncode:
        sys.exit("bench: %s failed:\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    return time.monotonic() - t0, r.stdout


def resolved_share(report_cmd):
    """Share of bench_child samples whose leaf is a function, from report output."""
    r = sh(report_cmd + ["--stdio", "--no-children", "-g", "none", "--sort", "sym", "-q",
                         "--comms", "bench_child", "--percentage", "relative"])
    total = named = 0.0
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(\S+)", line)
        if not m:
            continue
        pct = float(m.group(1))
        total += pct
        if not m.group(3).startswith("0x"):
            named += pct
    return named / total if total else None


def workload_samples(report_cmd):
    """Samples of the workload's tasks (bench_work and bench_child)."""
    r = sh(report_cmd + ["--stdio", "--no-children", "-g", "none", "--sort", "comm", "-q",
                         "-n", "--percentage", "relative"])
    n = 0
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 3 and f[-1] in ("bench_work", "bench_child"):
            n += int(f[1])
    return n


def bstack_workload_samples(data, comms=("bench_work", "bench_child")):
    """Samples of a bstack recording's tasks with these comms (None: all)."""
    r = sh([PERF, "bstack", "script", "-i", data])
    n = 0
    for line in r.stdout.splitlines():
        f = line.split()
        if f and f[0] == "COUNT" and (comms is None or f[6] in comms):
            n += int(f[1])
    return n


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return "%s, %d CPUs (%s), %.0f GiB, kernel %s, %s" % (
        platform.node(), os.cpu_count(), cpu, mem, platform.release(),
        sh([PERF, "version"]).stdout.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS.md"))
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF, system-wide perf)")
    sizes = SMOKE_SIZES if opts.smoke else SIZES
    repeats = 1 if opts.smoke else max(opts.repeats, 5)
    build_workloads()

    tmp = tempfile.mkdtemp(prefix="perf-bstack-bench.")
    results = {}
    try:
        with bpf_stats_enabled():
            # interleaved: each repeat runs every (workload, profiler) once
            for rep in range(repeats):
                for mode in sizes:
                    for prof in profilers_of(mode):
                        data = os.path.join(tmp, "%s-%s.data" % (mode, prof.replace(" ", "_")))
                        results.setdefault((mode, prof), []).append(
                            run_once(prof, mode, sizes, data))
            exit_times = {}
            for name, args in (("record -g", ["record", "-q", "-e", "cpu-clock", "-F", "999", "-g"]),
                               ("bstack", ["bstack", "record", "-q", "-F", "999"]),
                               ("bstack --interval", ["bstack", "record", "-q", "-F", "999",
                                                      "--interval", "1000"])):
                exit_times[name] = stats([sigint_exit_time(args, tmp, sizes)
                                          for _ in range(repeats)])
            churn_b = os.path.join(tmp, "churn-bstack.data")
            churn_g = os.path.join(tmp, "churn-record_-g.data")
            # perf record -a -g of the same churn: per-task record samples it too little
            # to compare report times or resolution with
            churn_a = os.path.join(tmp, "churn-record-a.data")
            sh([PERF, "record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-a", "-o", churn_a,
                "--"] + workload("churn", sizes))
            rep_b = stats([timed([PERF, "bstack", "report", "--stdio", "-i", churn_b])[0]
                           for _ in range(repeats)])
            rep_g = stats([timed([PERF, "report", "--stdio", "-i", churn_a])[0]
                           for _ in range(repeats)])
            share_b = resolved_share([PERF, "bstack", "report", "-i", churn_b])
            share_g = resolved_share([PERF, "report", "-i", churn_a])
            # samples of a -- cmd churn target: per-CPU bstack vs perf record -a vs per-task
            n_b = bstack_workload_samples(churn_b)
            n_g = workload_samples([PERF, "report", "-i", churn_g])
            n_a = workload_samples([PERF, "report", "-i", churn_a])
            write_results(opts, sizes, repeats, results, exit_times, rep_b, rep_g,
                          share_b, share_g, n_b, n_g, n_a)
    finally:
        subprocess.run(["rm", "-rf", tmp])


def write_results(opts, sizes, repeats, results, exit_times, rep_b, rep_g,
                  share_b, share_g, n_b, n_g, n_a):
    med = lambda s: s[1] if s else None
    out = []
    w = out.append
    w("# perf bstack benchmarks\n")
    w("Generated by `%s`%s. Machine: %s.\n" % (
        "python3 bench/run.py" + (" --smoke" if opts.smoke else ""),
        " (smoke run: tiny sizes, 1 repeat; numbers mean nothing)" if opts.smoke else "",
        machine()))
    w("Each cell is min/median/max over %d interleaved repeats. Workloads "
      "(`bench/workloads/bench_work MODE N`): %s. Sampling at 999 Hz with cpu-clock "
      "(no hardware PMU here); kernel.bpf_stats_enabled=1 during the runs.\n" % (
          repeats, ", ".join("%s %d" % kv for kv in sizes.items())))
    w("Profiler command lines (`-o FILE -- bench_work MODE N` appended):\n")
    for prof, args in profilers_of("churn").items():
        w("- %s: `%s`" % (prof, "bench_work MODE N" if args is None else "perf " + " ".join(args)))
    w("\n%s run the churn only.\n" % " and ".join(SYSTEM_WIDE))
    w("")
    w("## Per workload\n")
    w("| workload | profiler | wall s | workload cpu s | slowdown (wall) | slowdown (cpu) "
      "| perf cpu s | samples | bytes/sample | BPF ns/sample |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for mode in sizes:
        base = results[(mode, "none")]
        bw, bc = stats([r["wall"] for r in base]), stats([r["cpu"] for r in base])
        for prof in profilers_of(mode):
            rs = results[(mode, prof)]
            wall, cpu = stats([r["wall"] for r in rs]), stats([r["cpu"] for r in rs])
            pcpu = stats([r["perf_cpu"] for r in rs]) if prof != "none" else None
            samples = stats([r.get("samples") for r in rs])
            bps = stats([r["bytes"] / r["samples"] for r in rs if r.get("samples")])
            bpf = stats([r.get("bpf_ns") for r in rs])
            sw, sc = ratio(med(wall), med(bw)), ratio(med(cpu), med(bc))
            # the CPU the profiler adds: the workload's own above the bare run, and perf's
            added = med(stats([r["cpu"] + r["perf_cpu"] for r in rs]))
            summary[(mode, prof)] = {"slow_wall": sw, "bps": med(bps), "bpf": med(bpf),
                                     "err": rs[-1]["err"],
                                     "added_cpu": added - med(bc) if added else None}
            w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                mode, prof, fmt3(wall), fmt3(cpu), fmt_ratio(sw), fmt_ratio(sc),
                fmt3(pcpu), fmt3(samples, digits=0), fmt3(bps, digits=0),
                fmt3(bpf, digits=0)))
    w("")
    w("## End of record, report, correctness\n")
    w("| measurement | value |")
    w("|---|---|")
    for name, s in exit_times.items():
        w("| SIGINT to exit, `%s -a`, after a churn run (s) | %s |" % (name, fmt3(s)))
    w("| `perf bstack report --stdio` of the churn profile (s) | %s |" % fmt3(rep_b))
    w("| `perf report --stdio` of the perf record -a -g churn profile (s) | %s |" % fmt3(rep_g))
    w("| bench_child samples whose leaf is a function: bstack | %s |" % (
        "n/a" if share_b is None else "%.1f%%" % (100 * share_b)))
    w("| bench_child samples whose leaf is a function: perf record -a -g | %s |" % (
        "n/a" if share_g is None else "%.1f%%" % (100 * share_g)))
    w("| samples of the churn target's tasks: bstack `-- cmd` | %d |" % n_b)
    w("| samples of the churn target's tasks: perf record -a -g `-- cmd` | %d |" % n_a)
    w("| samples of the churn target's tasks: perf record -g `-- cmd` (per task) | %d |" % n_g)
    churn_err = summary[("churn", "bstack")]["err"]
    for line in churn_err.splitlines():
        if line.startswith("[ perf bstack:"):
            w("| bstack churn run: end-of-run line | `%s` |" % line.strip("[] "))
    w("")
    w("## Targets\n")
    w("| target | measured | met |")
    w("|---|---|---|")

    def target(name, value, ok, why=""):
        w("| %s | %s | %s |" % (name, value, "yes" if ok else "no" + (": " + why if why else "")))

    ab = summary[("churn", "bstack -a")]["added_cpu"]
    ag = summary[("churn", "record -a -g")]["added_cpu"]
    x = ratio(ab, ag)
    target("churn: added CPU (workload + perf) ≤ 0.5× that of perf record -a -g",
           "%s s / %s s = %s" % (ab and "%.2f" % ab, ag and "%.2f" % ag, fmt_ratio(x)),
           x is not None and x <= 0.5,
           "bstack's start (loading and verifying its BPF programs, the maps: about "
           "0.25 s) is most of perf's side and about what perf record -a -g spends in "
           "all; the workload pays the BPF programs (the sample's table walk, the exec "
           "and _dl_debug_state programs, two uprobe traps per process)")
    b1, b2 = summary[("churn", "bstack")]["bps"], summary[("churn", "record -g")]["bps"]
    x = ratio(b1, b2)
    target("bytes/sample ≤ 0.1× perf record -g (churn)", "%s / %s = %s" % (
        b1 and "%.0f" % b1, b2 and "%.0f" % b2, fmt_ratio(x)), x is not None and x <= 0.1)
    for mode in sizes:
        nb, ni = summary[(mode, "bstack")]["bpf"], summary[(mode, "bstack --ip-stacks")]["bpf"]
        x = ratio(nb, ni)
        target("BPF ns/sample ≤ 1.3× the plain map (%s)" % mode, "%s / %s = %s" % (
            nb, ni, fmt_ratio(x)), x is not None and x <= 1.3,
            "the kernel resolves build-ids per frame on every sample (issue: kernel/bpf)")
    x = ratio(med(rep_b), med(rep_g))
    target("report time ≤ 0.5× perf report (this churn profile)", fmt_ratio(x),
           x is not None and x <= 0.5,
           "on a profile this small start-up dominates, and each short-lived task's "
           "stacks are its own; large profiles: the Report time section")
    target("100% of VALID frames of exited processes resolved", "%s (leaf named)" % (
        "n/a" if share_b is None else "%.1f%%" % (100 * share_b)),
        share_b is not None and share_b >= 0.999,
        "IP-fallback and bogus frames at exec/exit are counted apart")
    x = ratio(n_b, n_a)
    target("≥ 0.95× the samples perf record -a takes of the churn target",
           "%d / %d = %s" % (n_b, n_a, fmt_ratio(x)), x is not None and x >= 0.95)
    w("")
    # keep the results of bench/events.py and bench/stress.py
    old = open(opts.out).read() if os.path.exists(opts.out) else ""
    kept = [old.index(s) for s in ("## Events", "## Stress") if s in old]
    rest = old[min(kept):] if kept else ""
    open(opts.out, "w").write("\n".join(out) + "\n" + ("\n" + rest if rest else ""))
    print("bench: wrote %s" % opts.out)


if __name__ == "__main__":
    main()
