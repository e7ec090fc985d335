#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Report time of large system-wide profiles: perf bstack report against
perf report of perf record -a -g, the two recorders watching the same run.

  python3 bench/report_time.py [--seconds 600] [--repeats 3] [--smoke]
                               [--out bench/RESULTS.md]

Two profiles, each recorded by perf bstack record -a -F 999 and by
perf record -a -g -F 999 side by side:
  steady  --seconds of two Debian programs that run all along (a perl
          and a python3 loop, without frame pointers: unwound by tables);
  churn   a fifth of that of the fork/exec and dlopen() churn of
          bench/stress.py: thousands of short-lived processes.
Then each file is reported with --stdio, interleaved, --repeats times:
the CPU time (user + system) of the report, medians.  Writes the
"## Report time" section of RESULTS.md.
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

from run import BUILD, CHURN_LOOP, PERF, TOP, build_workloads, sh, write_section

STEADY = [
    ["perl", "-e", "my %h; while (1) { $h{$_ % 1000} .= 'x' for 1..3000000; %h = () }"],
    ["python3", "-c", "while True:\n    d = {}\n    for i in range(1500000): "
     "d[i % 997] = str(i)"],
]


def record(tmp, name, seconds, loads):
    """Record loads for seconds with both recorders; their files"""
    files = {"bstack": os.path.join(tmp, name + ".bstack.data"),
             "record": os.path.join(tmp, name + ".record.data")}
    recs = [subprocess.Popen([PERF, "bstack", "record", "-q", "-a", "-F", "999", "-o",
                              files["bstack"]], stderr=subprocess.PIPE, text=True),
            subprocess.Popen([PERF, "record", "-q", "-a", "-g", "-e", "cpu-clock", "-F",
                              "999", "-o", files["record"]], stderr=subprocess.PIPE,
                             text=True)]
    time.sleep(3)	# loaded and attached
    work = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True) for cmd in loads]
    time.sleep(seconds)
    for p in work:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    sh(["pkill", "-f", BUILD + "/bench_work"])
    for p in recs:
        if p.poll() is not None:
            sys.exit("bench: a recorder died: %s" % p.stderr.read()[-2000:])
        p.send_signal(signal.SIGINT)
        p.communicate()
    return files


def report_cpu(cmd):
    """CPU seconds (user + system) of a report, its stdout thrown away"""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read()
    p.stderr.close()
    if status:
        sys.exit("bench: %s failed:\n%s" % (" ".join(cmd), err[-2000:]))
    return ru.ru_utime + ru.ru_stime


def nr_samples(report_cmd):
    """samples of a report, summed from its -n column; and the report's text"""
    r = sh(report_cmd + ["--stdio", "--no-children", "-n", "-g", "none", "--sort", "comm"])
    return sum(int(f[1]) for f in (line.split() for line in r.stdout.splitlines())
               if len(f) >= 3 and f[1].isdigit()), r.stdout


def samples(files):
    """samples in each file, and the counts of the bstack one, from its summary, and
    the samples its report hands perf report (counts of tasks alike merged)"""
    n, text = nr_samples([PERF, "bstack", "report", "-i", files["bstack"]])
    m = re.search(r"# bstack: \d+ samples in (\d+) counts", text)
    counts = int(m.group(1)) if m else 0
    r = sh([PERF, "bstack", "report", "-v", "--stdio", "-i", files["bstack"]])
    m = re.search(r"(\d+) counts of tasks alike merged, (\d+) samples written", r.stderr)
    return ((n, counts, int(m.group(2)) if m else counts),
            nr_samples([PERF, "report", "-i", files["record"]])[0])


def measure(files, repeats):
    cmds = {"bstack": [PERF, "bstack", "report", "--stdio", "-i", files["bstack"]],
            "record": [PERF, "report", "--stdio", "-i", files["record"]]}
    times = {k: [] for k in cmds}
    for _ in range(repeats):
        for k, cmd in cmds.items():
            times[k].append(report_cpu(cmd))
    return {k: statistics.median(v) for k, v in times.items()}


def write_results(path, opts, rows):
    w = ["## Report time\n",
         "`python3 bench/report_time.py --seconds %d --repeats %d`: profiles recorded "
         "system-wide at 999 Hz by `perf bstack record -a` and `perf record -a -g` "
         "watching the same run: \"steady\" is %d s of a perl and a python3 loop "
         "(Debian's, without frame pointers) running all along, \"churn\" %d s of "
         "bench/stress.py's fork/exec and dlopen() loop. "
         "CPU time (user + system) of `perf bstack report --stdio` and of `perf report "
         "--stdio` of the perf record file, medians of %d interleaved runs. bstack report "
         "hands perf report one record per task and stack, its weight the samples it "
         "stands for, and the counts of tasks alike (the same comm, CPU and stacks) as one "
         "(\"samples written\"). Target of issue 22: at most 0.5× on a large profile.\n"
         % (opts.seconds, opts.repeats, opts.seconds, opts.seconds // 5, opts.repeats),
         "| profile | samples: bstack / record -a -g | bstack counts | samples written | "
         "MB: bstack / record | bstack report CPU s | perf report CPU s | ratio |",
         "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        w.append("| %s | %d / %d | %d | %d | %.1f / %.1f | %.2f | %.2f | %.2f× |" % (
            name, r["samples"][0], r["samples_g"], r["samples"][1], r["samples"][2],
            r["mb"][0], r["mb"][1],
            r["cpu"]["bstack"], r["cpu"]["record"], r["cpu"]["bstack"] / r["cpu"]["record"]))
    w.append("")
    write_section(path, "## Report time", "\n".join(w) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="10 s profiles, one report each")
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS.md"))
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF, -a)")
    if opts.smoke:
        opts.seconds, opts.repeats = 10, 1
    build_workloads()

    tmp = tempfile.mkdtemp(prefix="perf-bstack-report.")
    try:
        rows = {}
        for name, seconds, loads in (("steady", opts.seconds, STEADY),
                                     ("churn", max(opts.seconds // 5, 2), [CHURN_LOOP])):
            files = record(tmp, name, seconds, loads)
            b, g = samples(files)
            rows[name] = {"samples": b, "samples_g": g,
                          "mb": [os.path.getsize(files[k]) / 1e6 for k in ("bstack", "record")],
                          "cpu": measure(files, opts.repeats)}
            for f in files.values():
                os.unlink(f)
        write_results(opts.out, opts, rows)
    finally:
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
