#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Fuzz the bstack payload decoder with libFuzzer (clang, ASan, UBSan),
# seeded with the payloads of a real recording of the bundled workload.
#   scripts/fuzz.sh SECONDS
# Exits non-zero on any crash or sanitizer report; crashing inputs are
# left in build/fuzz/ to become regression files in tools/perf/tests/bstack/.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/fuzz
tree=$top/build/linux/tools
secs=${1:-60}
mkdir -p "$out/corpus"

clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-I"$tree/perf" -I"$tree/perf/util" -I"$tree/include" -I"$tree/include/uapi" \
	-I"$tree/arch/x86/include" -D_GNU_SOURCE \
	-o "$out/fuzz_payload" "$top/tools/perf/tests/bstack/fuzz_payload.c" \
	"$tree/perf/util/bstack-payload.c" "$tree/lib/zalloc.c"

# seeds: every bstack record of a short recording, and the regression files
if [ "$(id -u)" = 0 ] && [ ! -e "$out/seeded" ]; then
	make -s -C "$top/tools/perf/tests/bstack" OUT="$out"
	"$top/perf" bstack record -q -o "$out/seed.data" -- \
		"$out/bstack_work" 1 "$out/bstack_child" "$out/libbstack_lib.so"
	"$top/perf" script -i "$out/seed.data" -F bpf-output 2> /dev/null |
		python3 "$top/scripts/bpf-output-seeds.py" "$out/corpus"
	touch "$out/seeded"
fi

"$out/fuzz_payload" -max_total_time="$secs" -max_len=8192 -artifact_prefix="$out/" \
	-print_final_stats=1 "$out/corpus" 2>&1 | tail -n 12
