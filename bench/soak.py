#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Always-on soak: perf bstack record system-wide while programs come and go.

  python3 bench/soak.py [--seconds 1800] [--interval 60] [--smoke] [--out FILE]

perf bstack record -a --no-mmap-tracking --interval 1000 -z, its output
rotated every --interval seconds (--switch-output), over a churn of real
programs, round after round: a parallel build of a generated C project
with gcc, then with clang-14 (libLLVM), Debian's python3, perl, ruby and
node, and a small program rebuilt in place each round, so that its
build-id changes.  Per interval (one rotated file): the share of the
churn's stacks that reach their process's first frames, the unwind table
rows in use, the tables reclaimed, evicted and loaded again, the memory
of the BPF maps and perf's RSS, the bytes a second, and the BPF time a
sample (kernel.bpf_stats_enabled).  The full run fails if whole stacks
in the last interval fall more than a point below the first, or if
memory grows after the warm-up (the first fifth).  Results go into the
"## Soak" section of bench/RESULTS.md (--smoke: build/RESULTS-soak-smoke.md).
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from run import BUILD, PERF, TOP, bpf_stats_enabled, whole_by_comm, write_section
from stress import bpf_maps_kb, rss_kb

# the comms of the churn, and the frames their stacks start from
COMMS = ("cc1", "gcc", "as", "ld", "collect2", "clang", "clang-14", "make", "sh",
         "python3", "perl", "ruby", "node", "soak_prog")
PERF_EVENT_PROG = "7"		# BPF_PROG_TYPE_PERF_EVENT: on_sample
GROWTH = 1.2
SLACK_KB = 4096

PY = """
def leaf(n):
    return sum(i * i for i in range(n))
def middle(n):
    return leaf(n)
for _ in range(20):
    middle(100000)
"""
PERL = 'my $x = 0; for my $i (1 .. 3000000) { $x += $i * $i }'
RUBY = 'x = 0; 2000000.times { |i| x += i * i }'
NODE = 'let x = 0; for (let i = 0; i < 3e8; i++) x += i % 7;'
PROG = r"""
#include <stdio.h>
#include <stdlib.h>
static int cmp(const void *a, const void *b)
{ return *(const int *)a - *(const int *)b + ROUND - ROUND; }
int main(void)
{
	static int v[1 << 20];
	for (int r = 0; r < 4; r++) {
		for (int i = 0; i < 1 << 20; i++)
			v[i] = (i * 2654435761u) >> 7;
		qsort(v, 1 << 20, sizeof(v[0]), cmp);
	}
	printf("%d\n", v[ROUND % 100]);
	return 0;
}
"""


def make_project(path, nfiles):
    """A C project of nfiles generated files with a Makefile: minutes of cc1"""
    os.makedirs(path, exist_ok=True)
    for i in range(nfiles):
        with open(os.path.join(path, "f%d.c" % i), "w") as f:
            for j in range(120):
                f.write("static int g%d_%d(int *a, int n) { int s = 0;\n"
                        "  for (int k = 0; k < n; k++) s += a[k] * %d ^ (s >> 3);\n"
                        "  return s + %d; }\n" % (i, j, j + 1, i))
            f.write("int f%d(int *a, int n) { return 0" % i +
                    "".join(" + g%d_%d(a, n)" % (i, j) for j in range(120)) + "; }\n")
    with open(os.path.join(path, "Makefile"), "w") as f:
        f.write("OBJS = %s\nall: $(OBJS)\n%%.o: %%.c\n\t$(CC) -O2 -c $< -o $@\n"
                "clean:\n\trm -f $(OBJS)\n" % " ".join("f%d.o" % i for i in range(nfiles)))


def churn_round(tmp, n, project):
    """One round of the churn; the program rebuilt in place with a new build-id"""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    for cc in ("gcc", "clang-14"):
        subprocess.run(["make", "-s", "-C", project, "clean"], **quiet)
        subprocess.run(["make", "-s", "-j2", "-C", project, "CC=" + cc], **quiet)
    subprocess.run(["/usr/bin/python3", "-c", PY], **quiet)
    subprocess.run(["perl", "-e", PERL], **quiet)
    subprocess.run(["ruby", "-e", RUBY], **quiet)
    subprocess.run(["node", "-e", NODE], **quiet)
    src = os.path.join(tmp, "soak_prog.c")
    with open(src, "w") as f:
        f.write(PROG)
    prog = os.path.join(tmp, "soak_prog")
    subprocess.run(["gcc", "-O2", "-DROUND=%d" % n, "-o", prog, src], **quiet)
    subprocess.run([prog], **quiet)


def bpf_sample_prog(pid):
    """(run_time_ns, run_cnt) of the perf_event programs perf holds"""
    ns = cnt = 0
    fddir = "/proc/%d/fd" % pid
    for fd in os.listdir(fddir):
        try:
            if os.readlink(os.path.join(fddir, fd)) != "anon_inode:bpf-prog":
                continue
            info = dict(line.split(":", 1) for line in open("/proc/%d/fdinfo/%s" % (pid, fd))
                        if ":" in line)
        except OSError:
            continue
        if info.get("prog_type", "").strip() == PERF_EVENT_PROG:
            ns += int(info.get("run_time_ns", "0"))
            cnt += int(info.get("run_cnt", "0"))
    return ns, cnt


def whole_share(path):
    """Share of the churn's samples whose user stack reaches its first frames"""
    counts = [v for comm, v in whole_by_comm(path).items() if comm in COMMS]
    return sum(ok for ok, _ in counts), sum(tot for _, tot in counts)


def tables_of(path):
    """rows in use, reclaimed, evicted, loaded again, from the report's header"""
    r = subprocess.run([PERF, "bstack", "report", "-i", path, "--stdio", "--header-only"],
                       capture_output=True, text=True)
    m = re.search(r"unwind tables: (\d+) loaded \((\d+) again.*?, (\d+) reclaimed.*?"
                  r"(\d+) evicted.*?(\d+) rows of (\d+) in use", r.stdout)
    if not m:
        return None
    loaded, again, reclaimed, evicted, rows, rows_max = map(int, m.groups())
    return {"loaded": loaded, "again": again, "reclaimed": reclaimed,
            "evicted": evicted, "rows": rows, "rows_max": rows_max}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=1800)
    ap.add_argument("--interval", type=int, default=60)
    ap.add_argument("--files", type=int, default=20, help="C files of the project")
    ap.add_argument("--smoke", action="store_true", help="80 s, rotated every 20 s")
    ap.add_argument("--out", default=None)
    opts = ap.parse_args()
    if opts.smoke:
        opts.seconds, opts.interval, opts.files = 80, 20, 6
    out = opts.out or os.path.join(TOP, "build" if opts.smoke else "bench",
                                   "RESULTS-soak-smoke.md" if opts.smoke else "RESULTS.md")
    if os.geteuid() != 0:
        sys.exit("soak: needs root")
    for tool in ("gcc", "clang-14", "make", "perl", "ruby", "node"):
        if not shutil.which(tool):
            sys.exit("soak: %s is not installed" % tool)

    tmp = tempfile.mkdtemp(prefix="perf-bstack-soak.")
    project = os.path.join(tmp, "project")
    make_project(project, opts.files)
    data = os.path.join(tmp, "soak.data")
    with bpf_stats_enabled():
        rec = subprocess.Popen([PERF, "bstack", "record", "-q", "-a", "--no-mmap-tracking",
                                "--interval", "1000", "-z",
                                "--switch-output=%ds" % opts.interval, "-o", data],
                               stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        marks = []		# (time, rss, maps, bpf ns, bpf runs) at each interval's end
        rounds = 0
        next_mark = t0 + opts.interval
        try:
            while time.monotonic() - t0 < opts.seconds:
                churn_round(tmp, rounds, project)
                rounds += 1
                while time.monotonic() >= next_mark:
                    if rec.poll() is not None:
                        sys.exit("soak: perf bstack record died: " + rec.stderr.read())
                    marks.append((time.monotonic() - t0, rss_kb(rec.pid),
                                  bpf_maps_kb(rec.pid)) + bpf_sample_prog(rec.pid))
                    next_mark += opts.interval
        finally:
            rec.send_signal(signal.SIGINT)
            err = rec.communicate(timeout=300)[1]
    files = sorted(glob.glob(data + ".*"))[:len(marks)]
    rows = []
    prev_ns = prev_cnt = 0
    for i, (f, mark) in enumerate(zip(files, marks)):
        ok, tot = whole_share(f)
        tab = tables_of(f) or {}
        t, rss, maps, ns, cnt = mark
        rows.append({"i": i + 1, "t": t, "whole": 100.0 * ok / tot if tot else 0.0,
                     "samples": tot, "rss": rss, "maps": maps,
                     "bytes_s": os.path.getsize(f) / opts.interval,
                     "ns": (ns - prev_ns) / (cnt - prev_cnt) if cnt > prev_cnt else 0.0,
                     **tab})
        prev_ns, prev_cnt = ns, cnt
    shutil.rmtree(tmp, ignore_errors=True)
    if len(rows) < 2:
        sys.exit("soak: %d intervals recorded: %s" % (len(rows), err[-500:]))

    warm = max(1, len(rows) // 5)
    verdicts = []
    drop = rows[0]["whole"] - rows[-1]["whole"]
    verdicts.append(("whole stacks in the last interval within a point of the first",
                     drop <= 1.0, "%.1f %% then %.1f %%" % (rows[0]["whole"], rows[-1]["whole"])))
    for key, name in (("rss", "perf RSS"), ("maps", "BPF maps")):
        early = max(r[key] for r in rows[:warm])
        late = max(r[key] for r in rows[warm:])
        verdicts.append(("%s flat after the warm-up" % name,
                         late <= early * GROWTH + SLACK_KB,
                         "%d KiB, then at most %d KiB" % (early, late)))

    text = ["## Soak\n",
            "`python3 bench/soak.py%s`: %d s, %d rounds of the churn (gcc and clang-14 builds "
            "of %d generated files, Debian's python3, perl, ruby and node, a program rebuilt "
            "with a new build-id each round), recorded with `perf bstack record -a "
            "--no-mmap-tracking --interval 1000 -z --switch-output=%ds`, one row per rotated "
            "file.  Whole: the share of the churn's samples that reach their process's first "
            "frames.  Tables: rows in use at the end of the file, and the tables reclaimed "
            "(their programs gone), evicted (not walked for a while) and loaded again in it.  "
            "BPF: on_sample's ns a run (kernel.bpf_stats_enabled).\n"
            % (" --smoke" if opts.smoke else "", opts.seconds, rounds, opts.files,
               opts.interval),
            "| interval | end (s) | samples | whole | table rows | reclaimed | evicted "
            "| loaded again | BPF maps (KiB) | perf RSS (KiB) | bytes/s | BPF ns a sample |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        text.append("| %d | %.0f | %d | %.1f %% | %s | %s | %s | %s | %d | %d | %.0f | %.0f |"
                    % (r["i"], r["t"], r["samples"], r["whole"],
                       "%d of %d" % (r["rows"], r["rows_max"]) if "rows" in r else "?",
                       r.get("reclaimed", "?"), r.get("evicted", "?"), r.get("again", "?"),
                       r["maps"], r["rss"], r["bytes_s"], r["ns"]))
    text.append("")
    for what, good, detail in verdicts:
        text.append("- %s: %s (%s)" % (what, "ok" if good else "NO", detail))
    text.append("")
    write_section(out, "## Soak", "\n".join(text) + "\n")
    print("\n".join(text))
    if not opts.smoke and not all(good for _, good, _ in verdicts):
        sys.exit(1)


if __name__ == "__main__":
    main()
