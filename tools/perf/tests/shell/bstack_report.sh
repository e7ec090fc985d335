#!/bin/bash
# perf bstack report resolves stacks through the build-id cache (exclusive)
# SPDX-License-Identifier: GPL-2.0

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_feature libslang
bstack_require_feature debuginfod
bstack_require_tools tmux debuginfod debuginfod-find

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack report test"
bin=$tmp/bin
cache=$tmp/cache
data=$tmp/perf.data
dpid=

bstack_test_cleanup() {
	[ -n "$dpid" ] && kill "$dpid" 2> /dev/null
	tmux -L "bstack$$" kill-server 2> /dev/null
}

mkdir -p "$bin"
bstack_build_workload "$bin" || exit 1
work=$bin/bstack_work
child=$bin/bstack_child
lib=$bin/libbstack_lib.so
cp "$work" "$child" "$lib" "$tmp/"	# pristine copies, for debuginfod
id_work=$(bstack_build_id "$work")
id_child=$(bstack_build_id "$child")
id_lib=$(bstack_build_id "$lib")

echo "Recording the workload with bstack and perf record -a -g at once"
perf --buildid-dir "$cache" bstack record -q -a -o "$data" &
rec=$!
bstack_wait_for_file "$data"
perf record -q -e cpu-clock -F 99 -a -g -o "$tmp/ref.data" -- "$work" 3 "$child" "$lib" \
	2> /dev/null || fail "perf record -g"
kill -INT "$rec"
wait "$rec"
[ $? = 130 ] || fail "bstack record did not end on SIGINT"

report() {
	perf --buildid-dir "${BSTACK_CACHE:-$cache}" bstack report -i "${BSTACK_DATA:-$data}" "$@"
}

# self overhead per comm,dso,sym
flat() {
	report --stdio --no-children -g none --sort comm,dso,sym 2> /dev/null
}

expect_functions() {
	out=$1
	what=$2
	grep -qE 'bstack_work +bstack_work +\[\.\] bstack_work_leaf' "$out" ||
		fail "$what: bstack_work_leaf of bstack_work"
	grep -qE 'bstack_child +bstack_child +\[\.\] bstack_child_leaf' "$out" ||
		fail "$what: bstack_child_leaf of the exited children"
	grep -qE 'bstack_work +libbstack_lib.so +\[\.\] bstack_lib_leaf' "$out" ||
		fail "$what: bstack_lib_leaf of the dlclose()d library"
}

test_resolution() {
	echo "every function of the exited processes and the unloaded library resolves"
	flat > "$tmp/flat"
	expect_functions "$tmp/flat" "stdio"
	grep -q '^# bstack: .* samples in' "$tmp/flat" || fail "no summary"
	grep -q 'lost 0 samples' "$tmp/flat" || fail "summary of losses"
}

test_dso_size() {
	echo "a binary's map is as long as its file: --sort dso_size"
	size=$(stat -c %s "$work")
	report --stdio --no-children -g none --sort dso,dso_size -q 2> /dev/null > "$tmp/dso_size"
	grep -qE "^ +[0-9.]+% +bstack_work +$size\$" "$tmp/dso_size" ||
		fail "dso_size of bstack_work is not $size: $(grep bstack_work "$tmp/dso_size")"
}

test_chains() {
	echo "call chains are the real ones: leaf, its caller, main"
	report --folded > "$tmp/folded" 2> /dev/null
	grep -q '^bstack_work;.*main;bstack_work_middle;bstack_work_leaf [0-9]*$' "$tmp/folded" ||
		fail "folded chain of bstack_work_leaf"
	grep -q '^bstack_child;.*main;bstack_child_spin;bstack_child_leaf [0-9]*$' "$tmp/folded" ||
		fail "folded chain of bstack_child_leaf"
	grep -q '^bstack_work;.*main;bstack_work_library;bstack_lib_spin;bstack_lib_leaf [0-9]*$' \
		"$tmp/folded" || fail "folded chain of bstack_lib_leaf"
	echo "--folded refuses the perf report options it would not honour"
	report --folded --comms bstack_child > "$tmp/folded-comms" 2>&1 &&
		fail "--folded --comms: ignored, not refused"
	grep -q "unknown option .comms'" "$tmp/folded-comms" ||
		fail "--folded --comms: $(head -1 "$tmp/folded-comms")"
	report --stdio --no-children -g caller --comms bstack_child 2> /dev/null > "$tmp/graph"
	grep -A6 'bstack_child_leaf$' "$tmp/graph" | grep -q 'bstack_child_spin' ||
		fail "-g caller graph"
}

test_time() {
	echo "--time selects by the times the counts carry"
	for half in 0%-50% 50%-100%; do
		report --stdio --no-children -g none --sort comm -q --time "$half" \
			--comms bstack_child 2> /dev/null | grep -q bstack_child ||
			fail "--time $half has no bstack_child samples"
	done
	n=$(report --stdio --no-children -g none --sort comm -q --time 1,2 2> /dev/null |
		grep -c '%')
	[ "$n" = 0 ] || fail "--time before the recording has $n entries"
}

# --ip-stacks (a benchmark option) records every user frame as an IP, as
# the kernel's fallback does: they resolve through the recorded maps
test_ip_frames() {
	echo "IP frames resolve through the recorded maps"
	perf --buildid-dir "$cache" bstack record -q --ip-stacks -o "$tmp/ip.data" -- \
		"$work" 2 "$child" "$lib" || { fail "record --ip-stacks"; return; }
	BSTACK_DATA=$tmp/ip.data flat > "$tmp/ip.txt"
	# not the dlclose()d library: its IPs may be another mapping's by the end
	grep -qE 'bstack_work +bstack_work +\[\.\] bstack_work_leaf' "$tmp/ip.txt" ||
		fail "IP frames: bstack_work_leaf"
	grep -qE 'bstack_child +bstack_child +\[\.\] bstack_child_leaf' "$tmp/ip.txt" ||
		fail "IP frames: bstack_child_leaf of the exited children"
	grep -qE '^# bstack: user frames: 0.0% with build-id, 100.0% as IP \([1-9]' "$tmp/ip.txt" ||
		fail "summary of IP frames: $(grep 'user frames' "$tmp/ip.txt")"
}

test_agrees_with_perf_record() {
	echo "the leaves' shares agree with perf record -g of the same run"
	# shares among the workload's samples: the two recorders ran for different times
	perf report -i "$tmp/ref.data" --stdio --no-children -g none --sort comm,sym \
		--comms bstack_work,bstack_child --percentage relative -q \
		2> /dev/null > "$tmp/ref.txt"
	report --stdio --no-children -g none --sort comm,sym --comms bstack_work,bstack_child \
		--percentage relative -q 2> /dev/null > "$tmp/our.txt"
	for f in bstack_work_leaf bstack_child_leaf bstack_lib_leaf; do
		a=$(awk -v f="$f" '$NF == f { sub("%", "", $1); print $1; exit }' "$tmp/ref.txt")
		b=$(awk -v f="$f" '$NF == f { sub("%", "", $1); print $1; exit }' "$tmp/our.txt")
		echo "  $f: perf record -g ${a:-0}%, bstack ${b:-0}%"
		awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN { d = a - b; exit (d > 6 || d < -6) }' &&
			continue
		fail "$f differs by more than 6 points"
		# what each recorder saw of the workload, to tell why
		head -n 12 "$tmp/ref.txt" "$tmp/our.txt"
		report --stdio 2>&1 | grep '^# bstack'
	done
}

# samples of bstack_child_leaf in the report of "$@", -n
leaf_samples() {
	"$@" --stdio --no-children -g none -n -q 2> /dev/null |
		awk '$NF == "bstack_child_leaf" { n += $2 } END { print n + 0 }'
}

# the pid of the last child with bstack_child_leaf in the report of "$@"
child_pid() {
	"$@" --stdio --no-children -g none --sort pid,sym -n -q --comms bstack_child 2> /dev/null |
		awk '$NF == "bstack_child_leaf" { sub(":.*", "", $3); print $3 }' | tail -n 1
}

test_pid_filter() {
	echo "--pid keeps the samples of one child, not the entry of the first"
	# the children's samples meet in one entry of -s sym: a filter must hide
	# or show each sample, not the entry as its first sample was
	pid=$(child_pid report)
	[ -n "$pid" ] || { fail "no bstack_child samples"; return; }
	all=$(leaf_samples report --sort sym --comms bstack_child)
	own=$(leaf_samples report --sort pid,sym --pid "$pid")
	one=$(leaf_samples report --sort sym --pid "$pid")
	echo "  bstack_child_leaf: $all samples, $own of child $pid, $one with --pid $pid -s sym"
	[ "$own" -gt 0 ] && [ "$own" -lt "$all" ] || fail "no other child to tell apart"
	[ "$one" = "$own" ] || fail "--pid $pid -s sym counts $one samples, not $own"
	# perf report of perf record -g of the same run, the same way
	pid=$(child_pid perf report -i "$tmp/ref.data")
	[ -n "$pid" ] || { fail "no bstack_child samples in perf record -g"; return; }
	own=$(leaf_samples perf report -i "$tmp/ref.data" --sort pid,sym --pid "$pid")
	one=$(leaf_samples perf report -i "$tmp/ref.data" --sort sym --pid "$pid")
	[ "$one" = "$own" ] || fail "perf report --pid $pid -s sym: $one samples, not $own"
}

test_tui() {
	echo "the TUI shows the workload's functions and the summary"
	# a private server, running this perf whatever PATH an older server has
	tmux -L "bstack$$" new-session -d -s tui -x 200 -y 50 \
		"$(command -v perf) --buildid-dir $cache bstack report -i $data --no-children \
		 --sort sym; sleep 90" || {
		fail "tmux"
		return
	}
	for _ in $(seq 120); do	# 60 s: an ASan perf is slow to start
		sleep 0.5
		tmux -L "bstack$$" capture-pane -p -t tui > "$tmp/tui"
		grep -q 'bstack_child_leaf' "$tmp/tui" && break
		# a warning box (kptr_restrict in some builds) waits for a key
		if grep -q 'Press any key' "$tmp/tui"; then
			tmux -L "bstack$$" send-keys -t tui Escape
		fi
	done
	tmux -L "bstack$$" send-keys -t tui q
	sleep 0.5
	tmux -L "bstack$$" kill-server
	grep -q "of event 'bstack: [0-9]* samples, 0 lost" "$tmp/tui" || fail "TUI title"
	grep -q 'bstack_child_leaf' "$tmp/tui" || fail "TUI entries"
}

test_inject() {
	echo "perf bstack inject writes a perf.data that plain perf report reads"
	perf --buildid-dir "$cache" bstack inject -i "$data" -o "$tmp/plain.data" 2> /dev/null ||
		fail "inject"
	perf --buildid-dir "$cache" report -i "$tmp/plain.data" --stdio --no-children -g none \
		--sort comm,dso,sym 2> /dev/null > "$tmp/plain.txt"
	expect_functions "$tmp/plain.txt" "perf report of inject output"
	perf --buildid-dir "$cache" script -i "$tmp/plain.data" -F comm,ip,sym 2> /dev/null |
		grep -q 'bstack_child_leaf' || fail "perf script of inject output"
}

test_rebuilt_and_deleted() {
	echo "a binary rebuilt at the same path, or deleted, resolves from the cache"
	clang -O1 -g -fno-omit-frame-pointer -fno-inline -Dbstack_work_leaf=rebuilt_leaf \
		-Dbstack_work_middle=rebuilt_middle -o "$work" \
		"$(bstack_src_dir)/bstack_work.c" -ldl
	[ "$(bstack_build_id "$work")" != "$id_work" ] || fail "rebuild kept the build-id"
	rm -f "$child"
	flat > "$tmp/rebuilt"
	expect_functions "$tmp/rebuilt" "after rebuild and delete"
	grep -q 'rebuilt_' "$tmp/rebuilt" && fail "symbols of the rebuilt binary used"
}

test_not_in_cache() {
	echo "a build-id in no cache shows with its offset and in the summary"
	rm -f "$lib"
	mkdir -p "$tmp/empty"
	BSTACK_CACHE=$tmp/empty flat > "$tmp/nocache"
	grep -q "^# bstack:   $id_lib $lib" "$tmp/nocache" || fail "summary misses $id_lib"
	grep -q 'bstack_lib_leaf' "$tmp/nocache" && fail "lib resolved from nowhere"
	grep -qE 'bstack_work +libbstack_lib.so +\[\.\] 0x0000' "$tmp/nocache" ||
		fail "unresolved lib frames not shown as offsets"
}

test_non_pie() {
	echo "unresolved frames of a non-PIE executable show the addresses addr2line takes"
	clang -O1 -g -fno-omit-frame-pointer -fno-inline -no-pie -o "$tmp/nopie" \
		"$(bstack_src_dir)/bstack_child.c"
	strip -o "$tmp/nopie.stripped" "$tmp/nopie"
	perf --buildid-dir "$cache" bstack record -q -o "$tmp/nopie.data" -- \
		"$tmp/nopie.stripped" 300 2> /dev/null || { fail "record"; return; }
	# the call chain of the hottest entry: its leaf and the leaf's caller
	BSTACK_DATA=$tmp/nopie.data report --stdio --no-children --sort dso,sym 2> /dev/null |
		grep -A1 -m1 -E -e '---0x[0-9a-f]+$' | grep -oE '0x[0-9a-f]+$' > "$tmp/nopie.ips"
	funcs=$(xargs addr2line -f -e "$tmp/nopie" < "$tmp/nopie.ips" | sed -n "1p;3p" | xargs)
	[ "$funcs" = "bstack_child_leaf bstack_child_spin" ] ||
		fail "the chain $(xargs < "$tmp/nopie.ips") is in: $funcs"
}

test_many_binaries() {
	echo "frames of 5,000 binaries, more than the 4,096 that once had room, all show"
	python3 "$(dirname "$0")"/lib/bstack_edit.py "$data" "$tmp/many.data" many-binaries 5000 ||
		{ fail "the recording has too few user stacks to edit"; return; }
	n=$(BSTACK_DATA=$tmp/many.data report --stdio --max-stack 1024 --children --sort dso \
		2> /dev/null | grep -c '^ .*buildid:')
	[ "$n" = 5000 ] || fail "$n of 5000 binaries in the report"
}

test_archive() {
	echo "perf archive, unpacked elsewhere with the binaries gone, gives the same report"
	(cd "$tmp" && PERF_BUILDID_DIR=$cache perf --buildid-dir "$cache" archive perf.data \
		> /dev/null 2>&1) || { fail "perf archive"; return; }
	mkdir -p "$tmp/other"
	tar xf "$tmp/perf.data.tar.bz2" -C "$tmp/other" || { fail "tar"; return; }
	rm -rf "$bin"
	BSTACK_CACHE=$tmp/other flat > "$tmp/archived"
	expect_functions "$tmp/archived" "from the archive"
}

test_debuginfod() {
	echo "binaries in no local cache are fetched from debuginfod"
	mkdir -p "$tmp/dfiles" "$tmp/dcache" "$tmp/empty2"
	cp "$tmp/bstack_work" "$tmp/bstack_child" "$tmp/libbstack_lib.so" "$tmp/dfiles/"
	port=$((20000 + $$ % 20000))
	debuginfod -F "$tmp/dfiles" -p "$port" -d "$tmp/dfiles.sqlite" \
		> "$tmp/debuginfod.log" 2>&1 &
	dpid=$!
	url=http://127.0.0.1:$port
	for _ in $(seq 60); do
		DEBUGINFOD_URLS=$url DEBUGINFOD_CACHE_PATH=$tmp/dprobe \
			debuginfod-find executable "$id_lib" > /dev/null 2>&1 && break
		sleep 0.5
	done
	DEBUGINFOD_URLS=$url DEBUGINFOD_CACHE_PATH=$tmp/dcache BSTACK_CACHE=$tmp/empty2 \
		flat > "$tmp/dfetched"
	expect_functions "$tmp/dfetched" "through debuginfod"
	grep -q 'fetched from debuginfod' "$tmp/dfetched" || fail "summary of fetches"

	kill "$dpid"
	wait "$dpid" 2> /dev/null
	dpid=
	mkdir -p "$tmp/empty3"
	DEBUGINFOD_URLS=$url DEBUGINFOD_CACHE_PATH=$tmp/dcache3 BSTACK_CACHE=$tmp/empty3 \
		flat > "$tmp/dstopped"
	grep -q "^# bstack:   $id_child " "$tmp/dstopped" ||
		fail "with the server stopped, the summary does not name $id_child"
}

test_resolution
test_dso_size
test_chains
test_time
test_ip_frames
test_agrees_with_perf_record
test_pid_filter
test_tui
test_inject
test_rebuilt_and_deleted
test_not_in_cache
test_non_pie
test_many_binaries
test_debuginfod
test_archive

[ $err = 0 ] && echo "perf bstack report test [Success]"
exit $err
