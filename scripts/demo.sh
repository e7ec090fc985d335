#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# make demo: record the bundled workload (a main loop, short-lived exec'd
# children, a dlopen()ed library) with perf bstack and report it.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/demo
mkdir -p "$out"
make -s -C "$top/tools/perf/tests/bstack" OUT="$out"
cd "$out"
"$top/perf" bstack record -o bstack.data -- \
	./bstack_work 3 "$out/bstack_child" "$out/libbstack_lib.so"
"$top/perf" bstack report -i bstack.data --stdio --no-children --percent-limit 2
