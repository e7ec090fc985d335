#!/bin/bash
# perf bstack report of damaged and foreign perf.data files (exclusive)
# SPDX-License-Identifier: GPL-2.0

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack report errors test"
data=$tmp/perf.data

bstack_build_workload "$tmp" || exit 1
perf --buildid-dir "$tmp/cache" bstack record -q -o "$data" -- \
	"$tmp/bstack_work" 1 "$tmp/bstack_child" "$tmp/libbstack_lib.so" || exit 1

report() {
	timeout 60 perf --buildid-dir "$tmp/cache" bstack report --stdio -i "$@" > "$tmp/out" 2>&1
}

# Overwrite the first payload header of type $2 (COUNTS: 6) in a copy of the
# recording: version $3, a size $4 bytes past the record's
damage() {
	python3 "$(dirname "$0")"/lib/bstack_edit.py "$data" "$1" header "$2" "$3" "$4"
}

test_unprivileged() {
	echo "report needs no privileges"
	mkdir -p "$tmp/pub"
	cp "$data" "$tmp/pub/perf.data"
	cp -r "$tmp/cache" "$tmp/pub/cache"
	chmod -R a+rX "$tmp/pub"
	chmod a+x "$tmp"
	setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$tmp/pub" \
		perf --buildid-dir "$tmp/pub/cache" bstack report --stdio -i "$tmp/pub/perf.data" \
		> "$tmp/nobody.out" 2>&1 || fail "report as nobody: $(head -2 "$tmp/nobody.out")"
	grep -q 'bstack_child_leaf' "$tmp/nobody.out" || fail "report as nobody resolves nothing"
}

test_inject_output() {
	echo "inject writes a private file and never follows a planted symlink"
	ln -s "$tmp/victim" "$tmp/planted.data"
	if perf --buildid-dir "$tmp/cache" bstack inject -i "$data" -o "$tmp/planted.data" \
		2> "$tmp/inj.err"; then
		fail "inject wrote through a symlink"
	fi
	[ -e "$tmp/victim" ] && fail "the symlink's target was created"
	grep -q 'symbolic link' "$tmp/inj.err" || fail "message: $(head -1 "$tmp/inj.err")"
	perf --buildid-dir "$tmp/cache" bstack inject -i "$data" -o "$tmp/inj.data" 2> /dev/null ||
		fail "inject"
	mode=$(stat -c %a "$tmp/inj.data")
	[ "$mode" = 600 ] || fail "inject output has mode $mode"
}

test_no_bstack() {
	echo "a perf.data without bstack samples"
	perf record -q -o "$tmp/plain.data" -e cpu-clock -- true 2> /dev/null
	report "$tmp/plain.data" && fail "accepted"
	grep -q 'has no bstack samples' "$tmp/out" || fail "message: $(head -2 "$tmp/out")"
}

test_missing() {
	echo "a missing file"
	report "$tmp/nonexistent.data" && fail "accepted"
	[ -s "$tmp/out" ] || fail "no message"
}

test_truncated() {
	echo "files cut in their data are rejected as truncated, never crash"
	# the middle of the data section (its offset and size follow the
	# magic, the header size and the attribute section), not of the file,
	# whose header features may be the larger part
	mid=$(python3 -c 'import struct, sys
off, size = struct.unpack_from("<QQ", open(sys.argv[1], "rb").read(56), 40)
print(off + size // 2)' "$data")
	for cut in 8 100 4096 "$mid"; do
		head -c "$cut" "$data" > "$tmp/cut.data"
		report "$tmp/cut.data"
		st=$?
		if [ $st = 124 ] || { [ $st -gt 128 ] && [ $st -lt 160 ]; }; then
			fail "cut at $cut: exit $st (crash or hang)"
		fi
		[ $st = 0 ] && fail "cut at $cut: accepted"
		if [ "$cut" -ge 4096 ]; then
			grep -q 'is truncated' "$tmp/out" ||
				fail "cut at $cut: $(head -1 "$tmp/out")"
		else
			[ -s "$tmp/out" ] || fail "cut at $cut: no message"
		fi
	done
}

test_cut_features() {
	echo "a file cut in its header features still reads or fails cleanly"
	head -c $(($(stat -c %s "$data") - 100)) "$data" > "$tmp/feat.data"
	report "$tmp/feat.data"
	st=$?
	if [ $st = 124 ] || { [ $st -gt 128 ] && [ $st -lt 160 ]; }; then
		fail "exit $st (crash or hang)"
	fi
}

# the counts of a drain, packed, made to lie: $1 what, $2 version, $3 bytes
# added to its size, $4 the warning
test_damaged_counts() {
	echo "$1 is skipped and counted"
	damage "$tmp/damaged.data" 6 "$2" "$3" || { fail "no COUNTS record found"; return; }
	report "$tmp/damaged.data" || fail "$1: exit $?"
	grep -q "$4" "$tmp/out" || fail "$1: no warning"
	grep -q '^# bstack: 1 damaged records skipped' "$tmp/out" || fail "$1: not counted"
}

test_huge_count() {
	echo "a count above the recorder's total is weighted, not expanded"
	python3 "$(dirname "$0")"/lib/bstack_edit.py "$data" "$tmp/huge.data" huge-count ||
		{ fail "no COUNTS record found"; return; }
	report "$tmp/huge.data" || fail "huge count: exit $?"
	n=$(sed -n "s/^# Samples: \([0-9]*\) .*/\1/p" "$tmp/out" | head -1)
	[ -n "$n" ] && [ "$n" -lt 100000 ] || fail "huge count: 'Samples: $n'"
	grep -q 'counts too big to write sample by sample' "$tmp/out" ||
		fail "huge count: not counted as weighted"
}

test_unknown_build_id() {
	echo "a build-id in no header and no cache is a user binary named by its build-id"
	report "$(dirname "$0")"/../bstack/regressions/unknown-build-id-named-like-module.data \
		--children -g none --sort dso,sym || { fail "report exit $?"; return; }
	# perf takes any "[name]" for a kernel module: such a name broke map__new()
	grep -qE ' buildid:93ac61ec588eb1396f9fbd350e3169a558528a40 +\[\.\]' "$tmp/out" ||
		fail "unknown build-id not shown as a user binary"
}

# a copy of the recording whose build-id table lies: $1 kind, $2 output, $3 name
lying_table() {
	python3 "$(dirname "$0")"/lib/bstack_build_id_table.py "$1" "$data" "$2" "${3-}"
}

test_build_id_table() {
	echo "a build-id table entry that lies ($1) is refused with a warning"
	lying_table "$1" "$tmp/table.data" || { fail "$1: cannot write the file"; return; }
	report "$tmp/table.data" || { fail "$1: exit $? ($(tail -1 "$tmp/out"))"; return; }
	grep -q "$2" "$tmp/out" || fail "$1: no warning"
	# the binaries are still found in the cache by the build-ids of the stacks
	grep -q 'bstack_child_leaf' "$tmp/out" || fail "$1: the stacks no longer resolve"
}

test_build_id_table_name() {
	echo "a name that fills its build-id table entry ends there"
	lying_table unterminated "$tmp/name.data" || { fail "cannot write the file"; return; }
	perf buildid-list -i "$tmp/name.data" > "$tmp/names" 2>&1 || fail "buildid-list exit $?"
	# the entry has room for 64 bytes: '/' and 63 'A', then nothing of the stack
	grep -qx '[0-9a-f]\{40\} /A\{63\}' "$tmp/names" ||
		fail "the name is not cut at its entry: $(grep ' /A' "$tmp/names" | cut -c1-120)"
	report "$tmp/name.data" || fail "report exit $?"
}

# all files of the test but the report's output and these lists
list_files() {
	find "$tmp" | grep -v -e "^$tmp/files\." -e "^$tmp/out\$" | sort
}

test_build_id_table_path() {
	echo "a name with .. in the build-id table reaches nothing outside the cache"
	mkdir -p "$tmp/outside"
	lying_table rename "$tmp/path.data" "/../../..$tmp/outside/escape/bstack_child" ||
		{ fail "cannot write the file"; return; }
	list_files > "$tmp/files.before"
	report "$tmp/path.data" || { fail "exit $?"; return; }
	list_files > "$tmp/files.after"
	diff "$tmp/files.before" "$tmp/files.after" > "$tmp/files.diff" ||
		fail "report changed files: $(head -3 "$tmp/files.diff")"
	grep -q 'bstack_child_leaf' "$tmp/out" || fail "the stacks no longer resolve"
}

test_unprivileged
test_unknown_build_id
test_inject_output
test_no_bstack
test_missing
test_truncated
test_cut_features
test_damaged_counts "an unknown payload version" 9 0 'unknown payload version'
test_damaged_counts "a size that does not fit the record" 1 8 'record size does not match'
test_huge_count
test_build_id_table long-name 'build-id table entry at .* has a bad size (65535)'
test_build_id_table short-entry 'build-id table entry at .* has a bad size (8)'
test_build_id_table id-size 'has a build-id of 255 bytes'
test_build_id_table_name
test_build_id_table_path

[ $err = 0 ] && echo "perf bstack report errors test [Success]"
exit $err
