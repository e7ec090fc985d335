#!/bin/bash
# perf bstack report survives mutated perf.data files (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# BSTACK_FUZZ_COUNT variants (default 300) of real recordings of four
# kinds, fixed seed BSTACK_FUZZ_SEED: bit flips, byte runs and cuts
# anywhere, lying sizes, damaged headers, attributes and feature sections.
# Each goes through every reader (report in each of its outputs, script,
# inject, merge) with a timeout: no crash, no hang, no sanitizer report,
# and an exit status that is not 0 comes with a message.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack report fuzz test"
count=${BSTACK_FUZZ_COUNT:-300}
seed=${BSTACK_FUZZ_SEED:-1}

bstack_build_workload "$tmp" || exit 1
w="$tmp/bstack_work 1 $tmp/bstack_child $tmp/libbstack_lib.so"
# recordings of each kind the readers take: of a command, system-wide over
# processes that come and go (drained at an interval), compressed, merged
# shellcheck disable=SC2086
perf --buildid-dir "$tmp/cache" bstack record -q -o "$tmp/cmd.data" -- $w || exit 1
# shellcheck disable=SC2086
perf --buildid-dir "$tmp/cache" bstack record -q -a --interval 300 -o "$tmp/sys.data" -- \
	sh -c "for i in \$(seq 100); do /bin/true; done; $w" || exit 1
# shellcheck disable=SC2086
perf --buildid-dir "$tmp/cache" bstack record -q -z -o "$tmp/z.data" -- $w || exit 1
perf --buildid-dir "$tmp/cache" bstack merge -o "$tmp/merge.data" "$tmp/cmd.data" \
	"$tmp/z.data" > /dev/null || exit 1

# the reports need the kernel's symbols only to resolve them: a few
# hundred of them read in a tenth of the time of all of /proc/kallsyms
{ grep -E ' (_text|_stext|_etext)$' /proc/kallsyms
  awk '$2 == "T" && NR % 200 == 0' /proc/kallsyms; } | sort > "$tmp/kallsyms"

# files that crashed perf before, as they are, then the variants
regressions=$(cd "$(dirname "$0")"/.. 2> /dev/null && pwd)
set --
for f in "$regressions"/perf-data-damaged/*.data "$regressions"/bstack/regressions/*.data; do
	set -- "$@" --file "$f"
done
echo "$count variants (seed $seed) of 4 recordings, and the regression files, through every reader"
python3 "$(dirname "$0")"/lib/bstack_fuzz.py --buildid-dir "$tmp/cache" \
	--kallsyms "$tmp/kallsyms" --seed "$seed" --count "$count" \
	--keep /tmp/bstack-fuzz-crash-"$seed" "$@" "$tmp/fuzz" \
	cmd="$tmp/cmd.data" sys="$tmp/sys.data" z="$tmp/z.data" merge="$tmp/merge.data" \
	> "$tmp/fuzz.out"
st=$?
cat "$tmp/fuzz.out"
[ $st = 0 ] || fail "$(tail -n 1 "$tmp/fuzz.out"): the files are in /tmp/bstack-fuzz-crash-$seed"

[ $err = 0 ] && echo "perf bstack report fuzz test [Success]"
exit $err
