#!/bin/bash
# perf bstack kernel frames as build-id + offset, or as IPs (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# On a kernel with BPF_F_KERNEL_BUILD_ID, kernel frames must come back
# with the running kernel's build-id and offsets from _text that are the
# functions kallsyms has there; on a kernel without it, as IPs, said so
# at the end of the recording.  Either way the report shows the kernel
# functions of a known path: the fork system call of the workload.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack kernel frames test"
cache=$tmp/cache

bstack_build_workload "$tmp" || exit 1
perf --buildid-dir "$cache" bstack record -o "$tmp/k.data" -e sched:sched_process_fork -- \
	"$tmp/bstack_events" 0 3 1 > "$tmp/rec.out" 2>&1 ||
	{ fail "record: $(tail -1 "$tmp/rec.out")"; exit 1; }
perf bstack script -i "$tmp/k.data" > "$tmp/script" 2>&1 || fail "script"
perf --buildid-dir "$cache" bstack report -i "$tmp/k.data" --folded > "$tmp/folded" 2>&1 ||
	fail "report --folded"

test_report() {
	echo "the report shows the kernel functions of the fork system call"
	grep -q '__x64_sys_fork;kernel_clone' "$tmp/folded" ||
		fail "no __x64_sys_fork -> kernel_clone in $(grep -m1 fork_site "$tmp/folded")"
}

# every VALID kernel frame: the running kernel's build-id, and an offset
# from _text that lands in a function of kallsyms (printed, for the caller)
check_bid_frames() {
	kbid=$(perf buildid-list -k 2> /dev/null)
	python3 - "$tmp/script" "$kbid" > "$tmp/resolved" <<'PY'
import bisect, sys
script, kbid = sys.argv[1], sys.argv[2]
syms = []
text = None
for line in open("/proc/kallsyms"):
    addr, kind, name = line.split()[:3]
    if name == "_text":
        text = int(addr, 16)
    if kind in "tTwW":
        syms.append((int(addr, 16), name))
syms.sort()
addrs = [a for a, _ in syms]
bad = 0
kernel = False
for line in open(script):
    f = line.split()
    if f and f[0] == "STACK":
        kernel = f[2] == "kernel-bid"
    elif kernel and f and f[0] == "VALID":
        if f[1] != kbid.ljust(40, "0")[:40]:
            print("foreign build-id", f[1])
            bad += 1
            continue
        i = bisect.bisect_right(addrs, text + int(f[2], 16)) - 1
        print(syms[i][1] if i >= 0 else "?")
sys.exit(1 if bad else 0)
PY
}

test_kernel_frames() {
	if grep -q 'kernel frames as IPs: this kernel has no BPF_F_KERNEL_BUILD_ID' \
		"$tmp/rec.out"; then
		echo "a kernel without BPF_F_KERNEL_BUILD_ID: kernel frames as IPs, said so"
		grep -q '^STACK .* kernel-bid ' "$tmp/script" && fail "build-id stacks anyway"
		grep -q '^STACK .* kernel ' "$tmp/script" || fail "no kernel stacks as IPs"
		return
	fi
	echo "kernel frames as build-id + offset: the running kernel's, at kallsyms' functions"
	grep -q 'kernel frames as build-id + offset' "$tmp/rec.out" ||
		fail "record does not say how it took kernel frames: $(tail -1 "$tmp/rec.out")"
	grep -q '^STACK .* kernel-bid ' "$tmp/script" || fail "no kernel-bid stacks"
	check_bid_frames || fail "kernel frames of another build-id: $(head -1 "$tmp/resolved")"
	grep -qx kernel_clone "$tmp/resolved" ||
		fail "no frame at kernel_clone: $(sort -u "$tmp/resolved" | tr '\n' ' ')"
}

test_kernel_frames
test_report

[ $err = 0 ] && echo "perf bstack kernel frames test [Success]"
exit $err
