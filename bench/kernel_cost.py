#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The BPF cost of build-id stacks against plain IP stacks, on this kernel.

  python3 bench/kernel_cost.py [--repeats N] [--scale F] [--user-stack-only] [--out FILE]

Runs bench/'s workloads under perf bstack record --no-cfi (user stacks
walked by the kernel, with build-ids) and under the same BPF program
without build-ids (--ip-stacks), both recorders watching the same run
(-p of the run's first process, which waits for both to be attached),
with kernel.bpf_stats_enabled=1, and prints for each workload the median
BPF ns per sample of both, the median ratio of the two in a run, and the
share of user frames the kernel gave as IPs.  In separate runs of churn
and dlopen, which processes and mappings the samples fell on moved the
ratio more than the kernels differ.  make kernel-check runs it inside
the guest of the patched and of the unpatched kernel, and puts the two
side by side: under QEMU's TCG only ratios taken within one boot mean
anything.  --user-stack-only takes user stacks alone, in both: kernel
frames as build-ids (BPF_F_KERNEL_BUILD_ID) are a cost of their own, which
only a patched kernel pays.  The workloads must be built (bench/workloads)
beforehand.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from run import BUILD, PERF, PROFILERS, SMOKE_SIZES, bpf_stats_enabled, sh, workload

# The kernel's build-id walk is what the kernel series changes: --no-cfi
# keeps it, where perf bstack would walk user stacks with unwind tables.
PROFILERS["bstack --no-cfi"] = PROFILERS["bstack"] + ["--no-cfi"]
COMPARED = ("bstack --no-cfi", "bstack --ip-stacks")


def ip_frames_pct(err):
    """The share of user frames the kernel gave as IPs, not build-ids"""
    m = re.search(r"([\d.]+)% of \d+ user frames without build-id", err)
    return float(m.group(1)) if m else None


def clocksource():
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def prog_fdinfo(pid):
    """the fdinfo text of each BPF program perf bstack record pid holds"""
    fds = "/proc/%d/fdinfo" % pid
    out = []
    for fd in os.listdir(fds):
        try:
            with open(os.path.join(fds, fd)) as f:
                text = f.read()
        except OSError:
            continue
        if "prog_type:" in text or "link_type:" in text:
            out.append(text)
    return out


def attached(pid):
    """perf bstack record pid has its sampling program on every CPU"""
    try:
        links = sum("link_type:\tperf\n" in t for t in prog_fdinfo(pid))
    except OSError:
        return False
    return links >= os.cpu_count()


def sampling_runs(pid):
    """run_time_ns and run_cnt of the sampling (perf_event) program of pid"""
    ns = cnt = 0
    for t in prog_fdinfo(pid):
        if re.search(r"^prog_type:\s+7$", t, re.M):
            ns += int(re.search(r"^run_time_ns:\s+(\d+)", t, re.M).group(1))
            cnt += int(re.search(r"^run_cnt:\s+(\d+)", t, re.M).group(1))
    return ns, cnt


def recorder_result(rec, log, run_ns):
    """(BPF ns per sample, % IP frames) of a recorder that was stopped"""
    rec.wait()
    err = open(log).read()
    # perf record stopped by SIGINT raises it again on its way out
    if rec.returncode not in (0, -signal.SIGINT):
        sys.exit("kernel_cost: %s failed:\n%s" % (" ".join(rec.args), err[-2000:]))
    m = re.search(r"\[ perf bstack: (\d+) samples", err)
    samples = int(m.group(1)) if m else 0
    return (run_ns // samples if samples and run_ns else None, ip_frames_pct(err))


def run_side_by_side(mode, sizes, tmp, extra):
    """one run of the workload, recorded by both programs at once"""
    go = os.path.join(tmp, "go")
    gate = subprocess.Popen(["sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"',
                             go] + workload(mode, sizes),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    recs = []
    for i, prof in enumerate(COMPARED):
        log = os.path.join(tmp, "rec%d.log" % i)
        cmd = [PERF] + PROFILERS[prof] + extra.split() + \
              ["-p", str(gate.pid), "-o", os.path.join(tmp, "rec%d.data" % i)]
        recs.append((subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w")),
                     log))
    while not all(attached(rec.pid) for rec, _ in recs):
        if any(rec.poll() is not None for rec, _ in recs):
            gate.kill()
            for rec, log in recs:
                rec.kill()
                recorder_result(rec, log, 0)
            sys.exit("kernel_cost: a recorder exited before the run")
        time.sleep(0.1)
    # the BPF time of the run only: while a recorder loads (seconds under
    # TCG), the other's program runs on its samples and rejects them
    before = [sampling_runs(rec.pid) for rec, _ in recs]
    open(go, "w").close()
    gate.wait()
    after = [sampling_runs(rec.pid) for rec, _ in recs]
    for rec, _ in recs:
        rec.send_signal(signal.SIGINT)
    res = [recorder_result(rec, log, a[0] - b[0])
           for (rec, log), b, a in zip(recs, before, after)]
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    return res


def measure(sizes, repeats, tmp, extra):
    """{(workload, profiler): [(BPF ns per sample, % IP frames) of each run]}"""
    runs = {}
    for _ in range(repeats):
        for mode in sizes:
            for prof, res in zip(COMPARED, run_side_by_side(mode, sizes, tmp, extra)):
                runs.setdefault((mode, prof), []).append(res)
                print("run %s %s: %s ns, %s%% IP frames" % (
                    mode, prof.replace(" ", ""), *res), flush=True)
    return runs


def median(vals):
    vals = [v for v in vals if v]
    return statistics.median(vals) if vals else None


def median_ns(vals):
    m = median(vals)
    return round(m) if m else None


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
    assert all(p in PROFILERS for p in COMPARED)
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
    if not any(ns for r in runs.values() for ns, _ in r):
        # BPF run times come from sched_clock(), which counts jiffies when
        # the TSC is found unstable (a loaded host under TCG)
        sys.exit("kernel_cost: every BPF run took 0 ns: sched_clock() did not advance "
                 "(clocksource %s)" % clock)

    lines = ["| workload | build-id ns/sample | plain ns/sample | ratio | user frames as IPs |",
             "|---|---|---|---|---|"]
    for mode in sizes:
        bid_runs, ip_runs = runs[(mode, COMPARED[0])], runs[(mode, COMPARED[1])]
        bid = median_ns([ns for ns, _ in bid_runs])
        ip = median_ns([ns for ns, _ in ip_runs])
        pcts = [p for _, p in bid_runs if p is not None]
        pct = statistics.median(pcts) if pcts else None  # 0.0% is a share too
        # the median of the ratios of the two recorders of a run, which
        # saw the same processes, rather than of the medians
        ratio = median([b[0] / i[0] for b, i in zip(bid_runs, ip_runs) if b[0] and i[0]])
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
