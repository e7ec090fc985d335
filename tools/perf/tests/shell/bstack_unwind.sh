#!/bin/bash
# perf bstack unwinds code without frame pointers (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# Distribution binaries have no frame pointers: the BPF program walks
# their stacks with the unwind tables of .eh_frame.  A workload built with
# gcc -O2 -fomit-frame-pointer, whose hot function is called back by
# libc's qsort(), and Debian's xz must give whole stacks, from the sampled
# function down to main, resolved after the workload's binary is deleted.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_tools gcc xz python3

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack unwind test"

bstack_build_workload "$tmp" || exit 1
perf="perf --buildid-dir $tmp/cache"

# a whole stack of the workload, caller first: main down to the callback
whole='^bstack_nofp;.*;main;nofp_outer;nofp_sort;[^;]*qsort[^;]*;(.*;)?nofp_compare [0-9]+$'

test_whole_stacks() {
	echo "stacks through libc's qsort() reach main, the binary deleted"
	mkdir "$tmp/run"
	cp "$tmp/bstack_nofp" "$tmp/run/"
	$perf bstack record -v -F 499 -o "$tmp/nofp.data" -- "$tmp/run/bstack_nofp" 3 signal \
		2> "$tmp/nofp.err" || { fail "record"; cat "$tmp/nofp.err"; return; }
	rm -r "$tmp/run"
	grep -q 'walked with unwind tables' "$tmp/nofp.err" ||
		fail "the summary does not say how stacks were walked"
	$perf bstack report -i "$tmp/nofp.data" --stdio 2> /dev/null |
		grep -qE '^# bstack: user stacks: [1-9][0-9]* walked with unwind tables' ||
		fail "the report's summary does not say how stacks were walked"
	$perf bstack report -i "$tmp/nofp.data" --folded > "$tmp/nofp.folded" 2> /dev/null
	pct=$(bstack_folded_share "$tmp/nofp.folded" 'nofp_compare [0-9]+$' "$whole")
	[ "$pct" -ge 90 ] || fail "only $pct% of the samples in nofp_compare reach main"
	# the handler's stacks go on through the signal frame into main's
	grep -qE '^bstack_nofp;.*;main;nofp_outer;.*;__restore_rt;nofp_handler;nofp_sort;' \
		"$tmp/nofp.folded" || fail "no stack goes through the signal frame"
}

# The tables built by one recording are kept in the build-id cache, beside
# each binary, and read by the next: none is built again, the stacks are
# as whole.  A damaged table is built again, not used.
# Stacks deeper than the short stacks' map holds, drained while recorded
test_deep_stacks() {
	echo "stacks of more than 50 frames, drained every 200 ms"
	$perf bstack record -v -F 499 --interval 200 -o "$tmp/deep.data" -- \
		"$tmp/bstack_nofp" 2 deep 2> "$tmp/deep.err" ||
		{ fail "record"; cat "$tmp/deep.err"; return; }
	grep -q ' 0 user stacks (0 map full)' "$tmp/deep.err" ||
		fail "user stacks lost: $(grep lost "$tmp/deep.err")"
	$perf bstack report -i "$tmp/deep.data" --folded > "$tmp/deep.folded" 2> /dev/null
	deep='^bstack_nofp;.*;main;(nofp_deep;){49}nofp_outer;nofp_sort;[^;]*qsort[^;]*;'
	pct=$(bstack_folded_share "$tmp/deep.folded" 'nofp_compare [0-9]+$' \
		"$deep(.*;)?nofp_compare [0-9]+\$")
	echo "  $pct% of nofp_compare's samples through the 49 nofp_deep frames to main"
	[ "$pct" -ge 90 ] || fail "only $pct% of the deep stacks whole"
}

test_tables_cached() {
	echo "unwind tables are kept in the build-id cache and read from there"
	table=$(find "$tmp/cache" -path '*bstack_nofp/*/bstack-cfi')
	[ -n "$table" ] || { fail "no table of bstack_nofp in the build-id cache"; return; }
	$perf bstack record -v -F 499 -o "$tmp/cached.data" -- "$tmp/bstack_nofp" 2 \
		2> "$tmp/cached.err" || { fail "record"; cat "$tmp/cached.err"; return; }
	# the workload's binary, libc and the dynamic linker; perf's own process
	# may be sampled too, before it execs the workload, and its tables built
	grep -qE 'unwind tables: [0-9]+ files \(([3-9]|[1-9][0-9]+) read from the build-id cache' \
		"$tmp/cached.err" || fail "tables not read from the cache: $(grep \
		'unwind tables:' "$tmp/cached.err")"
	$perf bstack report -i "$tmp/cached.data" --folded > "$tmp/cached.folded" 2> /dev/null
	pct=$(bstack_folded_share "$tmp/cached.folded" 'nofp_compare [0-9]+$' "$whole")
	[ "$pct" -ge 90 ] || fail "with cached tables, only $pct% reach main"

	# rows out of order (the size still right) in bstack_nofp's, the others cut short
	python3 -c 'import sys
d = open(sys.argv[1], "rb").read()
rows = [d[i:i + 8] for i in range(24, len(d), 8)]
sys.stdout.buffer.write(d[:24] + b"".join(reversed(rows)))' "$table" > "$tmp/damaged"
	if [ "$(stat -c %s "$tmp/damaged")" != "$(stat -c %s "$table")" ] ||
	   cmp -s "$tmp/damaged" "$table"; then
		fail "cannot make a damaged table of the same size"
		return
	fi
	cp "$tmp/damaged" "$table"
	find "$tmp/cache" -name bstack-cfi ! -path '*bstack_nofp/*' -exec truncate -s -3 {} +
	$perf bstack record -v -F 499 -o "$tmp/rebuilt.data" -- "$tmp/bstack_nofp" 2 \
		2> "$tmp/rebuilt.err" || { fail "record, damaged tables"; return; }
	grep -q '(0 read from the build-id cache' "$tmp/rebuilt.err" ||
		fail "a damaged table was read: $(grep 'unwind tables' "$tmp/rebuilt.err")"
	$perf bstack report -i "$tmp/rebuilt.data" --folded > "$tmp/rebuilt.folded" 2> /dev/null
	pct=$(bstack_folded_share "$tmp/rebuilt.folded" 'nofp_compare [0-9]+$' "$whole")
	[ "$pct" -ge 90 ] || fail "with the tables built again, only $pct% reach main"
	cmp -s "$tmp/damaged" "$table" && fail "the damaged table was not written again"
}

# perf loads the tables of the command it starts, of its dynamic linker
# and of the libraries it needs before the command runs: a command that
# ends within milliseconds is walked with them from its first stack on,
# not by frame pointer until user space has read its mappings
test_short_command() {
	echo "a short command is unwound with tables from its first stack"
	$perf bstack record -v -o "$tmp/short.data" -e sched:sched_process_fork \
		--uprobe "$tmp/bstack_events:bstack_events_target" -- \
		"$tmp/bstack_events" 3 2 0 2> "$tmp/short.err" ||
		{ fail "record: $(tail -n 1 "$tmp/short.err")"; return; }
	grep -qE 'unwind tables: .* [1-9][0-9]* loaded before the command ran' "$tmp/short.err" ||
		fail "no table loaded beforehand: $(grep 'unwind tables' "$tmp/short.err")"
	grep -qE 'user stacks: [1-9][0-9]* walked with unwind tables .*, 0 by frame pointer' \
		"$tmp/short.err" ||
		fail "stacks walked by frame pointer: $(grep 'user stacks:' "$tmp/short.err")"
	# by frame pointer, the fork stacks ended at __libc_start_call_main
	$perf bstack report -i "$tmp/short.data" --folded > "$tmp/short.folded" 2> /dev/null
	n=$(bstack_folded_sum "$tmp/short.folded" "^sched:sched_process_fork;bstack_events;\
_start;__libc_start_main[^;]*;__libc_start_call_main;main;bstack_events_fork_site;")
	[ "$n" = 2 ] ||
		fail "$n of 2 fork stacks from _start: $(grep fork_site "$tmp/short.folded")"
}

# A task sampled inside execve(), past the point where the new image
# replaced the old one, has no user stack left to walk, and the exec's
# tracepoint is about to read the new image's mappings in BPF: such
# samples must not make perf read /proc/PID/maps of each exec'd process.
test_exec_churn() {
	echo "exec'd processes are not read from /proc one by one"
	$perf bstack record -v -F 999 -o "$tmp/exec.data" -- \
		sh -c 'for i in $(seq 500); do /bin/true; done' 2> "$tmp/exec.err" ||
		{ fail "record"; cat "$tmp/exec.err"; return; }
	grep -qE ' [1-9][0-9]* inside execve\(\)' "$tmp/exec.err" ||
		fail "no sample inside execve() counted: $(grep 'user stacks' "$tmp/exec.err")"
	loads=$(sed -n 's/.* \([0-9]*\) process loads.*/\1/p' "$tmp/exec.err")
	echo "  ${loads:-?} process loads for 500 execs"
	# 70-100 here, 130 while a build ran; 200-260 when each exec was read
	[ "${loads:-500}" -le 160 ] || fail "${loads:-?} process loads for 500 execs"
}

test_no_cfi() {
	echo "--no-cfi walks by frame pointer only, as before"
	$perf bstack record -q --no-cfi -F 499 -o "$tmp/fp.data" -- "$tmp/bstack_nofp" 1 \
		2> /dev/null || { fail "record --no-cfi"; return; }
	$perf bstack report -i "$tmp/fp.data" --folded > "$tmp/fp.folded" 2> /dev/null
	pct=$(bstack_folded_share "$tmp/fp.folded" 'nofp_compare [0-9]+$' "$whole")
	[ "$pct" -lt 50 ] ||
		fail "$pct% reach main by frame pointer: was the workload built with them?"
}

# A uprobe on an instruction the kernel does not emulate (nofp_compare
# starts with a load) makes the task run a copy of it in the [uprobes]
# page; samples taken there must still have their callers.
test_uprobe_single_step() {
	echo "samples in a uprobe's single-step have the probed function's callers"
	$perf bstack record -F 999 -e cpu-clock --uprobe "$tmp/bstack_nofp:nofp_compare" \
		-o "$tmp/xol.data" -- "$tmp/bstack_nofp" 1 2> "$tmp/xol.err" ||
		{ fail "record: $(tail -1 "$tmp/xol.err")"; return; }
	$perf bstack report -i "$tmp/xol.data" --folded --event cpu-clock \
		> "$tmp/xol.folded" 2> /dev/null
	n=$(bstack_folded_sum "$tmp/xol.folded" "${whole%% \[0-9]+\$};asm_exc_debug;")
	[ "$n" -gt 0 ] || fail "no sample of a single-step under nofp_compare's callers"
	# before, none was whole and most were one unknown frame; some still are, taken
	# before the tables were loaded (the kernel walks those): more of them in a slow perf
	bad=$(bstack_folded_sum "$tmp/xol.folded" '^bstack_nofp;\[unknown\]( |;)')
	[ "$bad" -lt "$n" ] ||
		fail "$bad samples have a user stack of one unknown frame, $n whole"
	echo "  $n samples in single-steps, $bad stacks of one unknown frame"
}

test_debian_xz() {
	echo "Debian's xz: stacks from liblzma down to main"
	head -c 3000000 /dev/urandom | base64 > "$tmp/xz.in"
	$perf bstack record -F 499 -o "$tmp/xz.data" -- xz -6 -T1 -k -f "$tmp/xz.in" \
		2> /dev/null || { fail "record xz"; return; }
	$perf bstack report -i "$tmp/xz.data" --folded > "$tmp/xz.folded" 2> /dev/null
	# xz is stripped: main is the frame after __libc_start_call_main
	pct=$(bstack_folded_share "$tmp/xz.folded" '^xz;' \
	      '^xz;.*__libc_start_call_main;[^;]+;.*lzma_code;')
	[ "$pct" -ge 90 ] || fail "only $pct% of xz's samples go from lzma_code to main"
}

# OpenSSL's perlasm code keeps its CFA in rax, rsi, r9 or r11, and in the
# stack as an expression (breg7 N; deref; plus_uconst M)
test_debian_openssl() {
	echo "Debian's openssl speed: stacks from the AES-GCM and RSA assembly down to main"
	if ! command -v openssl > /dev/null; then
		echo "  skipped: openssl is not installed"
		return
	fi
	$perf bstack record -F 499 -o "$tmp/ossl.data" -- \
		openssl speed -seconds 1 -evp aes-128-gcm rsa2048 > /dev/null 2>&1 ||
		{ fail "record openssl speed"; return; }
	$perf bstack report -i "$tmp/ossl.data" --folded > "$tmp/ossl.folded" 2> /dev/null
	pct=$(bstack_folded_share "$tmp/ossl.folded" '^openssl;' \
	      '^openssl;.*__libc_start_call_main;')
	[ "$pct" -ge 95 ] || fail "only $pct% of openssl's samples reach main"
	pct=$(bstack_folded_share "$tmp/ossl.folded" '^openssl;.*;EVP_EncryptUpdate;' \
	      '^openssl;.*__libc_start_call_main;.*;EVP_EncryptUpdate;')
	[ "$pct" -ge 95 ] || fail "only $pct% of the AES-GCM samples reach main"
}

test_whole_stacks
test_deep_stacks
test_tables_cached
test_short_command
test_exec_churn
test_no_cfi
test_uprobe_single_step
test_debian_xz
test_debian_openssl

[ $err = 0 ] && echo "perf bstack unwind test [Success]"
exit $err
