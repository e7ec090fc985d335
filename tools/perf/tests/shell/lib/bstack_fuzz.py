#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Send damaged perf.data files through every reader of perf bstack.

  bstack_fuzz.py [options] WORKDIR NAME=RECORDING...

COUNT variants (bstack_mutate.py's kinds) are shared out among the
recordings in turn; each variant, and each --file as it is, goes through
perf bstack report --stdio, --folded, --pprof and --flamegraph, script,
inject, and merge with the recording it was made from.  A reader may
refuse a file with a message and a non-zero exit; it must not die of a
signal, hang past --timeout, print a sanitizer report, or fail without a
word.  Files a reader died on are kept in --keep.  Prints what was tried
and what died; exits 1 if anything died.
"""
import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bstack_mutate  # noqa: E402

SANITIZER = re.compile(rb"AddressSanitizer|LeakSanitizer|runtime error:|stack smashing")


def readers(args, work, clean):
    """(name, argv) of each reader of a file F, with outputs in work"""
    perf = [args.perf, "--buildid-dir", args.buildid_dir, "bstack"]
    syms = ["--kallsyms", args.kallsyms] if args.kallsyms else []
    return [
        ("report --stdio", perf + ["report", "--stdio"] + syms + ["-i", "F"]),
        ("report --folded", perf + ["report", "--folded"] + syms + ["-i", "F"]),
        ("report --pprof", perf + ["report", "--pprof", work + "/out.pb.gz"] + syms +
         ["-i", "F"]),
        ("report --flamegraph", perf + ["report", "--flamegraph", work + "/out.html"] +
         syms + ["-i", "F"]),
        ("script", perf + ["script", "-i", "F"]),
        ("inject", perf + ["inject", "-i", "F", "-o", work + "/inject.data"]),
        ("merge", perf + ["merge", "-o", work + "/merge.data", "F", clean]),
    ]


def run_reader(argv, path, timeout):
    """None if the reader lived, else what killed it"""
    argv = [path if a == "F" else a for a in argv]
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hung (%d s)" % timeout, False
    m = SANITIZER.search(p.stderr)
    if m:
        line = p.stderr[m.start():].split(b"\n")[0]
        return line.decode(errors="replace")[:160], False
    if p.returncode < 0 or 128 < p.returncode < 160:
        return "signal %d" % (-p.returncode if p.returncode < 0 else p.returncode - 128), False
    if p.returncode and not p.stderr.strip():
        return "exit %d without a message" % p.returncode, False
    return None, p.returncode != 0


def try_file(args, name, path, clean):
    """Every reader of one file: [(reader, died, rejected)]"""
    # the outputs of the readers a thread runs, apart from the others'
    work = os.path.join(args.work, "w-" + threading.current_thread().name)
    os.makedirs(work, exist_ok=True)
    out = []
    for reader, argv in readers(args, work, clean):
        died, rejected = run_reader(argv, path, args.timeout)
        out.append((reader, died, rejected))
        if died and args.keep:
            os.makedirs(args.keep, exist_ok=True)
            shutil.copy(path, os.path.join(args.keep, "%s-%s" % (name, os.path.basename(path))))
    return out


def try_variant(args, i, recs, origs, layouts):
    name, src = recs[i % len(recs)]
    rng = random.Random("%d:%s:%d" % (args.seed, name, i))
    path = os.path.join(args.work, "v%06d.data" % i)
    with open(path, "wb") as f:
        f.write(bstack_mutate.variant(rng, origs[name], layouts[name]))
    try:
        return name, path, try_file(args, name, path, src)
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perf", default="perf")
    ap.add_argument("--buildid-dir", required=True)
    ap.add_argument("--kallsyms", help="kallsyms file for the reports (a small one is faster)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--keep", help="where the files a reader died on are copied")
    ap.add_argument("--file", action="append", default=[], help="also try FILE as it is")
    ap.add_argument("work")
    ap.add_argument("recordings", nargs="+", metavar="NAME=FILE")
    args = ap.parse_args()

    recs = [tuple(r.split("=", 1)) for r in args.recordings]
    origs = {n: open(f, "rb").read() for n, f in recs}
    layouts = {n: bstack_mutate.Layout(b) for n, b in origs.items()}
    os.makedirs(args.work, exist_ok=True)
    start = time.time()
    tried = {}          # reader -> [runs, rejected]
    per_rec = {n: 0 for n, _ in recs}
    deaths = []

    def account(name, path, results):
        for reader, died, rejected in results:
            t = tried.setdefault(reader, [0, 0])
            t[0] += 1
            t[1] += rejected
            if died:
                deaths.append("%s %s: %s: %s" % (name, os.path.basename(path), reader, died))

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for f in args.file:
            account("file", f, try_file(args, "file", f, recs[0][1]))
        futs = [pool.submit(try_variant, args, i, recs, origs, layouts)
                for i in range(args.count)]
        for fut in concurrent.futures.as_completed(futs):
            name, path, results = fut.result()
            per_rec[name] += 1
            account(name, path, results)

    runs = sum(t[0] for t in tried.values())
    print("fuzz: %d variants (seed %d) of %s, and %d files as they are: %d runs of %d readers "
          "in %d s" % (args.count, args.seed,
                       ", ".join("%s %d" % (n, per_rec[n]) for n, _ in recs),
                       len(args.file), runs, len(tried), time.time() - start))
    for reader, (n, rejected) in tried.items():
        died = sum(1 for d in deaths if ": %s: " % reader in d)
        print("  %-20s %6d runs, %6d refused with a message, %d died" % (reader, n, rejected, died))
    for d in deaths[:20]:
        print("  died: " + d)
    if len(deaths) > 20:
        print("  ... and %d more" % (len(deaths) - 20))
    print("fuzz: %d died" % len(deaths))
    return 1 if deaths else 0


if __name__ == "__main__":
    sys.exit(main())
