#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Unwind tables that come and go: programs one after another, system-wide.

  python3 bench/tables_seq.py [--cfi-rows 200000] [--seconds 4] [--out FILE]

perf bstack record -a --cfi-rows N while Debian's python3, ruby, perl and
gawk run one after another, twice over, then sqlite3 and xz: their tables
add up to more than the budget, so each program's table is loaded in the
room the ones before it gave back.  Each run is started through a symlink
of its own name (python3-1, python3-2...), so that its comm tells it apart
and the file, and its table, stay the same.  Per run: the share of its
samples whose user stack reaches the process's first frames.  Results go
into the "## Tables one after another" section of bench/RESULTS.md.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from run import PERF, TOP, whole_by_comm, write_section

TARGET = 90.0


def programs(tmp, seconds):
    """(name, argv) of each run, in order"""
    data = os.path.join(tmp, "random")
    with open(data, "wb") as f:
        f.write(os.urandom(12 << 20))
    n = int(seconds)
    loops = {
        "python3": ["/usr/bin/python3", "-c",
                    "import time\nt = time.time() + %d\n"
                    "def leaf(n):\n    return sum(i * i for i in range(n))\n"
                    "while time.time() < t:\n    leaf(100000)\n" % n],
        "ruby": ["/usr/bin/ruby", "-e",
                 "t = Time.now + %d; x = 0; while Time.now < t do "
                 "100000.times { |i| x += i * i } end" % n],
        "perl": ["/usr/bin/perl", "-e",
                 "my $t = time + %d; my $x = 0; while (time < $t) "
                 "{ for my $i (1 .. 100000) { $x += $i * $i } }" % n],
        "gawk": ["/usr/bin/gawk", "BEGIN { t = systime() + %d; while (systime() < t) "
                 "for (i = 0; i < 100000; i++) x += i * i }" % n],
        "sqlite3": ["/usr/bin/sqlite3", ":memory:",
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                    "WHERE x < %d) SELECT sum(x * x) FROM c;" % (1500000 * n)],
        "xz": ["/usr/bin/xz", "-9e", "-k", "-c", "-T1", data],
    }
    order = ["python3", "ruby", "perl", "gawk"] * 2 + ["sqlite3", "xz"]
    runs, seen = [], {}
    for prog in order:
        seen[prog] = seen.get(prog, 0) + 1
        name = "%s-%d" % (prog, seen[prog])
        link = os.path.join(tmp, name)
        os.symlink(loops[prog][0], link)
        runs.append((name, [link] + loops[prog][1:]))
    return runs


def tables_line(path):
    r = subprocess.run([PERF, "bstack", "report", "-i", path, "--stdio", "--header-only"],
                       capture_output=True, text=True)
    m = re.search(r"unwind tables: .*", r.stdout)
    return m.group(0) if m else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cfi-rows", type=int, default=200000)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--out", default=os.path.join(TOP, "bench", "RESULTS.md"))
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("tables_seq: needs root")

    tmp = tempfile.mkdtemp(prefix="perf-bstack-tables.")
    data = os.path.join(tmp, "seq.data")
    runs = programs(tmp, opts.seconds)
    rec = subprocess.Popen([PERF, "bstack", "record", "-q", "-a", "--cfi-rows",
                            str(opts.cfi_rows), "-o", data],
                           stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    for _, argv in runs:
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rec.send_signal(signal.SIGINT)
    err = rec.communicate(timeout=300)[1]
    if rec.returncode not in (0, -signal.SIGINT, 130):
        sys.exit("tables_seq: perf bstack record failed: " + err[-500:])

    got = whole_by_comm(data)
    rows, ok_all = [], True
    for name, _ in runs:
        ok, tot = got.get(name, (0, 0))
        pct = 100.0 * ok / tot if tot else 0.0
        ok_all &= pct >= TARGET
        rows.append("| %s | %d | %.1f %% |" % (name, tot, pct))
        print("%-10s %6d samples  %5.1f %% whole" % (name, tot, pct))
    tables = tables_line(data)
    print(tables)
    text = ["## Tables one after another\n",
            "`python3 bench/tables_seq.py --cfi-rows %d --seconds %g`: `perf bstack record -a "
            "--cfi-rows %d` while Debian's python3, ruby, perl and gawk run one after another, "
            "twice over, then sqlite3 and xz, each about %g s (xz: one file), started through "
            "symlinks named after the run. Whole: the share of the run's samples whose user "
            "stack reaches the process's first frames; target %d %% each. %s\n"
            % (opts.cfi_rows, opts.seconds, opts.cfi_rows, opts.seconds, TARGET,
               "**All met.**" if ok_all else "**Not all met.**"),
            "| run | samples | whole |", "|---|---|---|"] + rows + \
           ["", "Report header: `%s`\n" % tables]
    write_section(opts.out, "## Tables one after another", "\n".join(text) + "\n")
    subprocess.run(["rm", "-rf", tmp])
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
