#!/bin/bash
# perf bstack follows containers, deleted binaries and exiting tasks (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# A binary that only existed in a private mount namespace (a container's
# image) and a binary deleted while its process ran: neither can be read
# at the end of the recording, yet the report must resolve their frames,
# from the copies perf saved while the processes mapped them.  And a
# process's samples are counted to the end of its exit.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_tools gcc unshare python3

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack targets test"
chmod 755 "$tmp"

bstack_build_workload "$tmp" || exit 1
test_mount_namespace() {
	echo "a binary on a tmpfs of a private mount namespace, gone with it"
	mkdir "$tmp/mnt"
	perf --buildid-dir "$tmp/cache" bstack record -q -F 499 -o "$tmp/ns.data" -- \
		unshare -m sh -c "mount -t tmpfs none $tmp/mnt &&
			cp $tmp/bstack_nofp $tmp/mnt/ns_nofp && $tmp/mnt/ns_nofp 1" \
		2> "$tmp/ns.err" || { fail "record: $(tail -1 "$tmp/ns.err")"; return; }
	[ -e "$tmp/mnt/ns_nofp" ] && { fail "the tmpfs was not private"; return; }
	perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/ns.data" --folded \
		> "$tmp/ns.folded" 2> /dev/null
	pct=$(bstack_folded_share "$tmp/ns.folded" "^ns_nofp;" \
	      "^ns_nofp;.*;main;nofp_outer;")
	[ "$pct" -ge 90 ] || fail "only $pct% of the container's samples resolve"
}

test_deleted_binary() {
	echo "a binary deleted while its process runs"
	cp "$tmp/bstack_nofp" "$tmp/del_nofp"
	perf --buildid-dir "$tmp/cache" bstack record -q -F 499 -o "$tmp/del.data" -- \
		sh -c "$tmp/del_nofp 2 & sleep 0.5; rm $tmp/del_nofp; wait" \
		2> "$tmp/del.err" || { fail "record: $(tail -1 "$tmp/del.err")"; return; }
	perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/del.data" --folded \
		> "$tmp/del.folded" 2> /dev/null
	pct=$(bstack_folded_share "$tmp/del.folded" "^del_nofp;" \
	      "^del_nofp;.*;main;nofp_outer;")
	[ "$pct" -ge 90 ] || fail "only $pct% of the deleted binary's samples resolve"
}

# Tearing a process's memory down at exit (exit_mm()) is cost of that
# process, a large part of it for short-lived ones (a sixth of python3's
# samples on this test's machine): recent kernels trace sched_process_exit
# before it, so a task filter that forgets the process there loses it.
test_exit_path() {
	echo "samples of processes tearing their memory down at exit"
	perf bstack record -q -F 999 -o "$tmp/exit.data" -- \
		sh -c 'for i in $(seq 20); do python3 -c "import os; os._exit(0)"; done' \
		2> "$tmp/exit.err" || { fail "record: $(tail -1 "$tmp/exit.err")"; return; }
	perf bstack report -i "$tmp/exit.data" --folded > "$tmp/exit.folded" 2> /dev/null
	n=$(bstack_folded_sum "$tmp/exit.folded" "^python3;.*do_exit;.*(exit_mmap|mmput)")
	[ "$n" -ge 5 ] || fail "$n samples of python3 in exit_mmap()"
	echo "  $n samples in exit_mmap()"
}

test_mount_namespace
test_deleted_binary
test_exit_path

[ $err = 0 ] && echo "perf bstack targets test [Success]"
exit $err
