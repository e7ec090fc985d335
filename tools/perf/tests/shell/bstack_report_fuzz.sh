#!/bin/bash
# perf bstack report survives mutated perf.data files (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# BSTACK_FUZZ_COUNT variants (default 300) of a real recording, fixed seed
# BSTACK_FUZZ_SEED: bit flips, cuts, lying sizes.  Each is reported with a
# timeout: no crash, no hang, no sanitizer report, and an exit status that
# is not 0 comes with a message.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack report fuzz test"
count=${BSTACK_FUZZ_COUNT:-300}
seed=${BSTACK_FUZZ_SEED:-1}

bstack_build_workload "$tmp" || exit 1
perf --buildid-dir "$tmp/cache" bstack record -q -o "$tmp/perf.data" -- \
	"$tmp/bstack_work" 1 "$tmp/bstack_child" "$tmp/libbstack_lib.so" || exit 1
mkdir -p "$tmp/m"
python3 "$(dirname "$0")"/lib/bstack_mutate.py "$seed" "$count" "$tmp/perf.data" "$tmp/m" ||
	exit 1

# files that crashed perf before, then the variants
regressions=$(cd "$(dirname "$0")"/.. 2> /dev/null && pwd)
echo "reporting $count variants (seed $seed) and the regression files"
bad=0
rejected=0
for f in "$regressions"/perf-data-damaged/*.data "$regressions"/bstack/regressions/*.data \
	 "$tmp"/m/*.data; do
	# a count the damage made huge is written as up to 2^22 samples: a few
	# seconds, half a minute with ASan; a hang takes longer
	timeout 60 perf --buildid-dir "$tmp/cache" bstack report --stdio -i "$f" \
		> /dev/null 2> "$tmp/err"
	st=$?
	if [ $st = 124 ] || { [ $st -gt 128 ] && [ $st -lt 160 ]; } ||
	   grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' "$tmp/err"; then
		bad=$((bad + 1))
		cp "$f" "/tmp/bstack-fuzz-crash-$seed-$(basename "$f")" 2> /dev/null
		fail "$(basename "$f"): exit $st: $(grep -m1 -E 'Sanitizer|error' "$tmp/err")"
	elif [ $st != 0 ]; then
		rejected=$((rejected + 1))
		[ -s "$tmp/err" ] || fail "$(basename "$f"): exit $st without a message"
	fi
done
echo "  $count variants: $rejected rejected with a message, $bad crashed or hung"

[ $err = 0 ] && echo "perf bstack report fuzz test [Success]"
exit $err
