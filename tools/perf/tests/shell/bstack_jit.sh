#!/bin/bash
# perf bstack names JIT code from perf-PID.map (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# node --perf-basic-prof writes the symbols of the JavaScript it compiles
# to /tmp/perf-PID.map.  The report must name the hot JavaScript function
# after node and its map file are gone, on stacks that go through the JIT
# code and V8's interpreter (builtins with frame pointers and no unwind
# rules) down to node's main.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_tools node

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack JIT test"

bstack_test_cleanup() {
	[ -n "$node_pid" ] && rm -f "/tmp/perf-$node_pid.map"
}

cat > "$tmp/hot.js" <<'JS'
require('fs').writeFileSync(process.argv[2], String(process.pid));
function accJitHotLoop(n) {
	let s = 0;
	for (let i = 0; i < n; i++)
		s += (i * 7) % 13;
	return s;
}
function outerJsCaller() {
	let t = 0;
	const end = Date.now() + 1500;
	while (Date.now() < end)
		t += accJitHotLoop(100000);
	return t;
}
console.log(outerJsCaller());
JS

perf --buildid-dir "$tmp/cache" bstack record -v -F 499 -o "$tmp/jit.data" -- \
	node --perf-basic-prof "$tmp/hot.js" "$tmp/pid" > /dev/null 2> "$tmp/record.err" ||
	{ fail "record: $(tail -1 "$tmp/record.err")"; exit 1; }
node_pid=$(cat "$tmp/pid")
grep -q "JIT symbols (perf-PID.map, jit-PID.dump) of 1 processes" "$tmp/record.err" ||
	fail "the summary does not count node's perf map"
[ -s "/tmp/perf-$node_pid.map" ] || fail "node wrote no /tmp/perf-$node_pid.map"
rm -f "/tmp/perf-$node_pid.map"

perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/jit.data" --folded \
	> "$tmp/jit.folded" 2> /dev/null
js='JS:\*?(accJitHotLoop|outerJsCaller) '
pct=$(bstack_folded_share "$tmp/jit.folded" "^node;" "^node;.*;$js")
[ "$pct" -ge 50 ] || fail "only $pct% of node's samples name the hot JavaScript function"
pct=$(bstack_folded_share "$tmp/jit.folded" "^node;.*;$js" "^node;.*node::Start.*;$js")
[ "$pct" -ge 90 ] || fail "only $pct% of the JavaScript samples have whole stacks"

# perf's own tools read the converted file through the same build-id cache
perf --buildid-dir "$tmp/cache" bstack inject -i "$tmp/jit.data" -o "$tmp/inject.data" \
	2> /dev/null || fail "inject failed"
perf --buildid-dir "$tmp/cache" script -i "$tmp/inject.data" -F ip,sym,dso 2> /dev/null |
	grep -qE "JS:\*?(accJitHotLoop|outerJsCaller) .*\(//jit/perf-$node_pid.map\)" ||
	fail "perf script of the injected file does not name the JIT code"

[ $err = 0 ] && echo "perf bstack JIT test [Success]"
exit $err
