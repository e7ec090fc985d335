#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make check: run perf-bstack's perf tests (the C suite, the shell tests
# whose description starts with "perf bstack", and perf report of damaged
# perf.data files), then checkpatch on our own
# C files, and print one closing line: N passed, N failed[, N skipped].
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
# --tests-only: the perf tests alone (make asan, make fuzz); --only PATTERN:
# the perf tests matching it.  PERF_BUILD: the perf build to test.
perf_build=${PERF_BUILD:-$build/perf}
tests_only=
# the bstack tests, and the tests of the upstream fixes: damaged files, annotate
pattern=bstack
pattern2='damaged perf.data'
pattern3='perf annotate basic'
while [ $# -gt 0 ]; do
	case $1 in
	--tests-only) tests_only=1 ;;
	--only) pattern=$2; pattern2=$2; pattern3=$2; shift ;;
	esac
	shift
done
log=$build/check.log
pass=0
fail=0
skip=0

: > "$log"
failures=
kernel_log=

# failed NAME: one more check failed; NAME is listed again at the end
failed() {
	fail=$((fail + 1))
	failures="$failures
  $1"
}

# The log of each perf test that failed (perf test -v prints a test's
# output between its start and end lines, then its result): CI shows
# the end of the output, so the end must say what failed
failed_test_logs() {
	awk '/^--- start ---$/ { buf = ""; keep = 1 }
	     keep { buf = buf $0 "\n" }
	     /^---- end\(/ { keep = 0 }
	     /: FAILED!$/ { printf "%s%s\n", buf, $0; buf = "" }' "$1" | tail -n 60
}

# the end of the output: the logs of what failed, then every check that
# failed, with the perf tests' own words for why, last
print_failures() {
	[ "$fail" -gt 0 ] || return 0
	if grep -q ': FAILED!$' "$build/perf-test.log" 2> /dev/null; then
		echo "--- perf tests that failed:"
		failed_test_logs "$build/perf-test.log"
	fi
	if [ -n "$kernel_log" ] && grep -q 'FAILED!$' "$kernel_log"; then
		echo "--- make kernel-check:"
		grep -A 40 'FAILED!$' "$kernel_log" | tail -n 60
	fi
	echo "failed:"
	echo "$failures" | sed '/^$/d'
	grep -h '\[Failed' "$build/perf-test.log" 2> /dev/null | cut -c 1-400 | sed 's/^/    /'
}

# perf test looks for tools/perf/tests/shell below the current directory,
# and the shell tests run the perf in PATH
cd "$build/linux" || exit 1
PATH=$perf_build:$PATH
PERF_EXEC_PATH=$perf_build	# perf archive and other script commands
export PATH PERF_EXEC_PATH
"$perf_build/perf" test -v "$pattern" "$pattern2" "$pattern3" > "$build/perf-test.log" 2>&1
cat "$build/perf-test.log" >> "$log"
results=$(grep -E '^ *[0-9]+(\.[0-9]+)?: .*: (Ok|FAILED!|Skip.*)$' "$build/perf-test.log")
echo "$results"
pass=$(echo "$results" | grep -c ': Ok$')
fail=$(echo "$results" | grep -c ': FAILED!$')
failures=$(echo "$results" | grep ': FAILED!$' | sed 's/^ */  perf test /')
skip=$(echo "$results" | grep -c ': Skip')
if [ -z "$results" ]; then
	echo "error: perf test ran no bstack test, see build/perf-test.log"
	failed "perf test ran no bstack test"
fi

if [ -n "$tests_only" ]; then
	print_failures
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
	exit
fi

cd "$top" || exit 1
for f in $(find tools kernel -name '*.[ch]' 2>/dev/null | sort); do
	# load-time settings of BPF programs are const volatile, as libbpf needs
	case $f in
	*.bpf.c) ignore=--ignore=VOLATILE ;;
	*) ignore= ;;
	esac
	# shellcheck disable=SC2086
	if out=$(perl "$build/linux/scripts/checkpatch.pl" --no-tree --terse $ignore -f "$f" 2>&1) &&
	   ! echo "$out" | grep -qE 'ERROR|WARNING'; then
		pass=$((pass + 1))
	else
		echo "checkpatch: $f"
		echo "$out" | grep -E 'ERROR|WARNING'
		failed "checkpatch: $f"
	fi
done

# make install puts perf where a user finds it: the binary, perf's scripts,
# tips and bash completion, the man page of perf bstack, and the scripts
# perf bstack report --flamegraph inlines, found through the exec path
dest=$build/install-check
p=$dest/usr/local
rm -rf "$dest"
if out=$(make -C "$top" --no-print-directory install DESTDIR="$dest" 2>&1) &&
   [ -x "$p/bin/perf" ] && [ -f "$p/share/doc/perf-tip/tips.txt" ] &&
   [ -f "$p/etc/bash_completion.d/perf" ] && [ -f "$p/share/man/man1/perf-bstack.1" ] &&
   [ -f "$p/libexec/perf-core/scripts/python/flamegraph.py" ] &&
   [ -f "$p/libexec/perf-core/bstack/flamegraph/d3.min.js" ] &&
   PERF_EXEC_PATH=$p/libexec/perf-core "$p/bin/perf" bstack report -h 2>&1 |
	grep -q -- '--flamegraph'; then
	pass=$((pass + 1))
else
	echo "make install failed or left files out: $out"
	find "$dest" -maxdepth 4 | head -n 40
	failed "make install"
fi
rm -rf "$dest"

# bench/ works and writes every row; a smoke run, not a timed test
smoke=$build/RESULTS-smoke.md
if out=$(python3 "$top/bench/run.py" --smoke --out "$smoke" 2>&1) &&
   [ "$(grep -cE '^\| (cpu|churn|dlopen|threads) \| ' "$smoke")" = 26 ] &&
   [ "$(sed -n '/^## Targets/,$p' "$smoke" | grep -cE '^\| [^-|t]')" = 9 ]; then
	pass=$((pass + 1))
else
	echo "bench smoke run failed: $out"
	failed "bench smoke run"
fi

# bench/same_run.py works and writes every row
smoke=$build/RESULTS-same-run-smoke.md
if out=$(python3 "$top/bench/same_run.py" --smoke --out "$smoke" 2>&1) &&
   [ "$(grep -cE '^\| (cpu|churn|dlopen|threads), all repeats \| [0-9]+ \| [0-9]+ ' "$smoke")" = 4 ]; then
	pass=$((pass + 1))
else
	echo "bench same-run smoke run failed: $out"
	failed "bench same-run smoke run"
fi

# bench/events.py works, and every bstack recorder kept all 2000 events
smoke=$build/RESULTS-events-smoke.md
rm -f "$smoke"
if out=$(python3 "$top/bench/events.py" --smoke --out "$smoke" 2>&1) &&
   [ "$(grep -cE '^\| (none|record -g|bstack)' "$smoke")" = 11 ] &&
   [ "$(grep -E '^\| bstack' "$smoke" | awk -F'|' '$9 + 0 == 2000' | wc -l)" = 6 ]; then
	pass=$((pass + 1))
else
	echo "bench events smoke run failed: $out"
	failed "bench events smoke run"
fi

# bench/export.py works: every output, and a merge of ten recordings
smoke=$build/RESULTS-export-smoke.md
if out=$(python3 "$top/bench/export.py" --smoke --out "$smoke" 2>&1) &&
   [ "$(grep -cE '^\| (report --stdio|--folded|--pprof|--flamegraph|inject)' "$smoke")" = 8 ] &&
   grep -qE '^\| perf bstack merge \| [0-9.]+ \| [0-9]+ ' "$smoke"; then
	pass=$((pass + 1))
else
	echo "bench export smoke run failed: $out"
	failed "bench export smoke run"
fi

# bench/volume.py works, and -z writes less than half the bytes
smoke=$build/RESULTS-volume-smoke.md
rm -f "$smoke"
if out=$(python3 "$top/bench/volume.py" --smoke --out "$smoke" 2>&1) &&
   [ "$(grep -cE '^\| (plain|-z)' "$smoke")" = 3 ] &&
   grep -E '^\| -z \(level 1\)' "$smoke" | awk -F'|' '{ exit !($4 + 0 < 0.5) }'; then
	pass=$((pass + 1))
else
	echo "bench volume smoke run failed: $out"
	failed "bench volume smoke run"
fi

# bench/report_time.py works, and bstack kept about as many samples as perf record
smoke=$build/RESULTS-report-smoke.md
rm -f "$smoke"
if out=$(python3 "$top/bench/report_time.py" --smoke --out "$smoke" 2>&1) &&
   [ "$(grep -cE '^\| (steady|churn) ' "$smoke")" = 2 ] &&
   grep -E '^\| (steady|churn) ' "$smoke" |
	awk -F'|' '{ split($3, n, "/"); if (n[1] + 0 < 0.9 * n[2]) bad = 1 } END { exit bad }'; then
	pass=$((pass + 1))
else
	echo "bench report time smoke run failed: $out"
	cat "$smoke" 2> /dev/null
	failed "bench report time smoke run"
fi

# bench/soak.py works: every rotated file reports, with its tables' counts
# and most stacks whole, and memory stays flat
smoke=$build/RESULTS-soak-smoke.md
rm -f "$smoke"
if out=$(python3 "$top/bench/soak.py" --smoke --out "$smoke" 2>&1) &&
   [ "$(grep -cE '^\| [0-9]+ \| [0-9]+ \| [1-9][0-9]* \| [0-9.]+ % \| [0-9]+ of ' "$smoke")" -ge 3 ] &&
   grep -E '^\| [0-9]+ \| ' "$smoke" | awk -F'|' '{ if ($5 + 0 < 70) bad = 1 } END { exit bad }' &&
   [ "$(grep -c 'flat after the warm-up: ok' "$smoke")" = 2 ]; then
	pass=$((pass + 1))
else
	echo "bench soak smoke run failed: $out"
	cat "$smoke" 2> /dev/null
	failed "bench soak smoke run"
fi

# the payload decoder under libFuzzer, ASan and UBSan, briefly
if out=$("$top/scripts/fuzz.sh" 15 2>&1) && echo "$out" | grep -q '^Done [0-9]* runs'; then
	pass=$((pass + 1))
else
	echo "fuzzing the payload decoder failed:"
	echo "$out" | tail -n 20
	failed "fuzzing the payload decoder"
fi

# the series as it would be posted: applies with git am, builds and passes
# its unit tests at every commit, checkpatch-clean
if out=$("$top/scripts/make-series.sh" 2>&1); then
	echo "$out" | grep '^series: '
	pass=$((pass + 1))
else
	echo "$out"
	failed "make series"
fi

# the kernel patches, in QEMU guests of the patched and the unpatched kernel
# (make kernel-check), with the tests that need them; KERNEL_TESTS picks
# the perf tests run in the patched guest
if command -v qemu-system-x86_64 > /dev/null; then
	# shellcheck disable=SC2086
	KERNEL_RESULTS=$build/RESULTS-kernel.md "$top/scripts/kernel-check.sh" \
		${KERNEL_TESTS:-'kernel frames' 'fork/exec/dlopen'} > "$build/kernel-check.log" 2>&1
	grep -v '^[0-9]* passed, [0-9]* failed$' "$build/kernel-check.log" | grep -v '^  [A-Z]*  '
	last=$(tail -n 1 "$build/kernel-check.log")
	if echo "$last" | grep -qE '^[0-9]+ passed, [0-9]+ failed$'; then
		pass=$((pass + $(echo "$last" | cut -d' ' -f1)))
		kernel_log=$build/kernel-check.log
		n=$(echo "$last" | cut -d' ' -f3)
		fail=$((fail + n))
		[ "$n" -eq 0 ] || failures="$failures
  make kernel-check: $n failed"
	else
		echo "make kernel-check did not finish, see build/kernel-check.log"
		failed "make kernel-check did not finish"
	fi
else
	echo "kernel-check: qemu-system-x86_64 not found (make deps installs it)"
	failed "kernel-check: no qemu"
fi

print_failures
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
