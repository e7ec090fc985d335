#!/bin/bash
# perf script's flamegraph and gecko reports read perf bstack inject output (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# perf bstack inject writes a sample per sample taken, so that perf's own
# Python reports, which count records, weigh stacks right: flamegraph
# (its JSON output) and gecko (Firefox Profiler) must have the workload's
# functions with the counts --folded has, its binary deleted before.  So
# does perf bstack report, which hands perf report a record per stack
# weighted by its samples: its title, its -n column and the counts of its
# call graphs count samples, as perf report of inject's output does.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_feature libpython
bstack_require_tools python3

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack scripts test"
bstack_record_deleted_nofp sc_nofp || { fail "no profile"; exit 1; }
total=$(bstack_folded_sum "$tmp/p.folded" .)
leaf=$(bstack_folded_sum "$tmp/p.folded" ";nofp_compare [0-9]+$")
[ "$leaf" -ge 100 ] || fail "only $leaf samples in nofp_compare"
perf --buildid-dir "$tmp/cache" bstack inject -i "$tmp/p.data" -o "$tmp/inject.data" \
	2> /dev/null || fail "inject failed"

echo "perf bstack report counts samples as perf report does"
perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/p.data" --stdio --no-children -n \
	--sort sym -g none > "$tmp/report" 2> /dev/null
grep -q "^# Samples: $total " "$tmp/report" || fail "report: not '# Samples: $total'"
n=$(awk '$NF == "nofp_compare" { print $2 }' "$tmp/report")
[ "$n" = "$leaf" ] || fail "report -n: nofp_compare has ${n:-no} samples, not $leaf"

echo "... from a record per stack, weighted by its samples, as from a record per sample"
records=$(perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/p.data" -D 2> /dev/null |
	  grep -c 'PERF_RECORD_SAMPLE')
[ "$records" -lt "$total" ] || fail "report: $records records for $total samples"
# Call graph nodes of equal counts come in the order of their DSOs'
# addresses in perf's memory (match_chain()): the lines of each view, the
# tree's edges taken out, are compared as a whole, not in their order.
report_lines() {
	grep -v '^#' | sed 's/|/ /g' | sort
}
for g in "caller,0.5,count" "callee,0.5,count" "folded,0.5,caller,count"; do
	for mode in --children --no-children; do
		perf --buildid-dir "$tmp/cache" report -i "$tmp/inject.data" --stdio -n $mode \
			--sort comm,sym -g "$g" 2> /dev/null | report_lines > "$tmp/per-sample"
		perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/p.data" --stdio -n $mode \
			--sort comm,sym -g "$g" 2> /dev/null | report_lines > "$tmp/weighted"
		grep -q 'nofp_compare' "$tmp/weighted" || fail "report -g $g $mode: no nofp_compare"
		cmp -s "$tmp/per-sample" "$tmp/weighted" ||
			fail "report -g $g $mode differs from perf report of a record per sample"
	done
done
echo "  $records records for $total samples"

# What 'perf script report NAME' runs, with the test's build-id cache,
# which perf script report does not pass on to the perf it runs
run_report() {
	script=$(perf --exec-path)/scripts/python/$1.py
	shift
	(cd "$tmp" && perf --buildid-dir "$tmp/cache" script -i inject.data -s "$script" -- "$@")
}

echo "perf script report flamegraph"
run_report flamegraph -f json -o flamegraph.json > /dev/null 2> "$tmp/flamegraph.err" ||
	fail "flamegraph: $(tail -1 "$tmp/flamegraph.err")"
python3 - "$tmp/flamegraph.json" > "$tmp/fg.counts" <<'PY' || fail "flamegraph.json unreadable"
import json, sys
def walk(n, acc):
    acc[0] += n["v"]
    if n["n"] == "nofp_compare":
        acc[1] += n["v"]
    for c in n["c"]:
        walk(c, acc)
acc = [0, 0]
walk(json.load(open(sys.argv[1])), acc)
print(*acc)
PY
read -r n_total n_leaf < "$tmp/fg.counts"
[ "$n_total" = "$total" ] || fail "flamegraph: $n_total samples, not $total"
[ "$n_leaf" = "$leaf" ] || fail "flamegraph: $n_leaf samples in nofp_compare, not $leaf"

echo "perf script report gecko"
run_report gecko --save-only gecko.json > /dev/null 2> "$tmp/gecko.err" ||
	fail "gecko: $(tail -1 "$tmp/gecko.err")"
python3 - "$tmp/gecko.json" > "$tmp/gecko.counts" <<'PY' || fail "gecko.json unreadable"
import json, sys
p = json.load(open(sys.argv[1]))
samples = sum(len(t["samples"]["data"]) for t in p["threads"])
names = any("nofp_compare" in s for t in p["threads"] for s in t["stringTable"])
print(samples, int(names))
PY
read -r g_samples g_names < "$tmp/gecko.counts"
[ "$g_samples" = "$total" ] || fail "gecko: $g_samples samples, not $total"
[ "$g_names" = 1 ] || fail "gecko: no nofp_compare"
echo "  $total samples, $leaf in nofp_compare, in both"

[ $err = 0 ] && echo "perf bstack scripts test [Success]"
exit $err
