#!/bin/bash
# perf bstack report --flamegraph draws in a browser (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# The page of a workload whose binary is deleted before the report,
# rendered by headless Chromium with every host name unresolvable: the
# drawn flame graph must name the workload's functions, with the counts
# --folded has for them.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_tools chromium

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack flame graph test"
bstack_record_deleted_nofp fg_nofp || { fail "no profile"; exit 1; }
total=$(bstack_folded_sum "$tmp/p.folded" .)
compare=$(bstack_folded_sum "$tmp/p.folded" ";nofp_compare( |;)")
outer=$(bstack_folded_sum "$tmp/p.folded" ";nofp_outer;")
[ "$compare" -ge 100 ] || fail "only $compare samples in nofp_compare"

# perf finds the page's scripts by itself, installed or in its build directory
env -u PERF_EXEC_PATH perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/p.data" \
	--flamegraph "$tmp/fg.html" 2> "$tmp/fg.err" ||
	{ fail "--flamegraph: $(tail -1 "$tmp/fg.err")"; exit 1; }
env -u PERF_EXEC_PATH perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/p.data" \
	--stdio 2>&1 | grep -m1 'Cannot load tips.txt' && fail "perf report found no tips"
grep -qiE '<(script|link|img)[^>]* (src|href)=' "$tmp/fg.html" &&
	fail "the page loads something from elsewhere"

# root refuses chromium's sandbox; the page's scripts run before the dump
timeout 120 chromium --headless --no-sandbox --disable-gpu \
	--host-resolver-rules="MAP * ~NOTFOUND" --user-data-dir="$tmp/chromium" \
	--virtual-time-budget=10000 --dump-dom "file://$tmp/fg.html" \
	> "$tmp/dom.html" 2> "$tmp/chromium.err" ||
	fail "chromium failed: $(grep -v dbus "$tmp/chromium.err" | tail -1)"

# the total under each frame of a function, from the drawn frames' titles
drawn() {
	grep -oE "<title>$1 \\([0-9]+ samples\\)" "$tmp/dom.html" |
		grep -oE '[0-9]+ samples' | awk '{ n += $1 } END { print n + 0 }'
}
grep -qF "cpu-clock: $total samples" "$tmp/dom.html" || fail "no graph of the $total samples"
n=$(drawn nofp_compare)
[ "$n" = "$compare" ] || fail "nofp_compare drawn with $n samples, not $compare"
n=$(drawn nofp_outer)
[ "$n" = "$outer" ] || fail "nofp_outer drawn with $n samples, not $outer"
grep -qE 'class="d3-flame-graph-label"[^>]*>fg_nofp<' "$tmp/dom.html" ||
	fail "no frame labelled with the comm"
echo "  drawn: $total samples, $compare in nofp_compare, $outer under nofp_outer"

echo "--flamegraph of a recording of 34 events: a graph each"
if bstack_record_many_events "$tmp/many.data"; then
	perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/many.data" \
		--flamegraph "$tmp/many.html" 2> "$tmp/many.err" ||
		fail "--flamegraph of 34 events: exit $?: $(tail -1 "$tmp/many.err")"
	n=$(grep -oE '"syscalls:sys_enter_[a-z0-9_]+"' "$tmp/many.html" | sort -u | wc -l)
	[ "$n" = 34 ] || fail "--flamegraph of 34 events names $n of them"
else
	fail "cannot record 34 events"
fi

[ $err = 0 ] && echo "perf bstack flame graph test [Success]"
exit $err
