#!/bin/bash
# perf bstack kernel frames as build-id + offset, or as IPs (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# On a kernel with BPF_F_KERNEL_BUILD_ID, kernel frames must come back
# with the running kernel's build-id and offsets from _text that are the
# functions kallsyms has there; on a kernel without it, as IPs, said so
# at the end of the recording.  Either way the report shows the kernel
# functions of a known path: the fork system call of the workload.  With
# BSTACK_TESTMOD (the guests of make kernel-check), frames of a module too.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack kernel frames test"
cache=$tmp/cache

bstack_build_workload "$tmp" || exit 1
perf --buildid-dir "$cache" bstack record -v -o "$tmp/k.data" -e sched:sched_process_fork -- \
	"$tmp/bstack_events" 0 3 1 > "$tmp/rec.out" 2>&1 ||
	{ fail "record: $(tail -1 "$tmp/rec.out")"; exit 1; }
perf bstack script -i "$tmp/k.data" > "$tmp/script" 2>&1 || fail "script"
perf --buildid-dir "$cache" bstack report -i "$tmp/k.data" --folded > "$tmp/folded" 2>&1 ||
	fail "report --folded"

test_report() {
	echo "the report shows the kernel functions of the fork system call"
	# the system call's entry point is named by the architecture
	case $(uname -m) in
	x86_64)	want='__x64_sys_fork;kernel_clone' ;;
	*)	want='sys_fork;kernel_clone' ;;
	esac
	grep -q "$want" "$tmp/folded" ||
		fail "no $want in $(grep -m1 fork_site "$tmp/folded")"
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

# the build-id of a loaded module, from its notes in sysfs
module_build_id() {
	python3 - "/sys/module/$1/notes/.note.gnu.build-id" <<'PY'
import struct, sys
d, off = open(sys.argv[1], "rb").read(), 0
while off + 12 <= len(d):
    namesz, descsz, kind = struct.unpack_from("<III", d, off)
    name = d[off + 12:off + 12 + namesz]
    off += 12 + (namesz + 3) // 4 * 4
    if kind == 3 and name.startswith(b"GNU"):
        print(d[off:off + descsz].hex())
    off += (descsz + 3) // 4 * 4
PY
}

# every VALID kernel frame of the module: an offset from its text that
# lands in one of its functions in kallsyms (printed, for the caller)
check_module_frames() {
	python3 - "$tmp/mscript" "$1" "$2" "$3" > "$tmp/mresolved" <<'PY'
import bisect, sys
script, mod, bid, text = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4], 16)
syms = sorted((int(f[0], 16), f[2]) for f in map(str.split, open("/proc/kallsyms"))
              if len(f) > 3 and f[3] == "[%s]" % mod and f[1] in "tT")
addrs = [a for a, _ in syms]
kernel = False
for line in open(script):
    f = line.split()
    if f and f[0] == "STACK":
        kernel = f[2] == "kernel-bid"
    elif kernel and f and f[0] == "VALID" and f[1] == bid.ljust(40, "0")[:40]:
        i = bisect.bisect_right(addrs, text + int(f[2], 16)) - 1
        print(syms[i][1] if i >= 0 else "?")
PY
}

# A module loaded while recording is not in the recorded module list.  As
# build-id + offset its frames still resolve, from the .ko in the build-id
# cache alone; as IPs they cannot, as with perf record.  Run before
# test_module_frames loads the module: the guests' kernels cannot unload it.
test_late_module() {
	mod=bstack_testmod
	[ -n "${BSTACK_TESTMOD:-}" ] || return	# test_module_frames says why
	if [ -e /proc/$mod ]; then
		echo "module loaded while recording: not tested, $mod was loaded before" \
			"(and this kernel cannot unload it)"
		return
	fi
	perf --buildid-dir "$cache" bstack record -v -F 999 -o "$tmp/late.data" -- \
		sh -c "insmod $BSTACK_TESTMOD && echo 500 > /proc/$mod" > "$tmp/lrec.out" 2>&1 ||
		{ fail "record while loading $mod: $(tail -1 "$tmp/lrec.out")"; return; }
	perf --buildid-dir "$cache" bstack report -i "$tmp/late.data" --stdio \
		> "$tmp/lreport" 2>&1 || fail "report of a module loaded while recording"
	if grep -q 'kernel frames as IPs' "$tmp/lrec.out"; then
		echo "module loaded while recording, frames as IPs: reported, up to the write"
		perf bstack report -i "$tmp/late.data" --folded > "$tmp/lfolded" 2>&1
		grep -q 'ksys_write;vfs_write' "$tmp/lfolded" ||
			fail "no ksys_write -> vfs_write: $(grep -m1 -- '-sh\|sh;' "$tmp/lfolded")"
		return
	fi

	echo "module loaded while recording: placed by build-id, missing without its .ko"
	mbid=$(module_build_id $mod)
	[ -n "$mbid" ] || { fail "no build-id in /sys/module/$mod/notes"; return; }
	grep -q 'of them in 1 module (1 without symbols)' "$tmp/lreport" ||
		fail "not counted as missing: $(grep 'bstack: .* kernel frames' "$tmp/lreport")"
	grep -q "bstack:   $mbid \[buildid:$mbid\]" "$tmp/lreport" ||
		fail "not listed as missing by its build-id: $(grep -A3 'no build-id cache' \
			"$tmp/lreport")"

	echo "module loaded while recording: resolved from the .ko added to the cache"
	perf --buildid-dir "$cache" buildid-cache -a "$BSTACK_TESTMOD" ||
		{ fail "buildid-cache -a $BSTACK_TESTMOD"; return; }
	perf --buildid-dir "$cache" bstack report -i "$tmp/late.data" --stdio \
		> "$tmp/lreport" 2>&1 || fail "report with the .ko in the cache"
	perf --buildid-dir "$cache" bstack report -i "$tmp/late.data" --folded \
		> "$tmp/lfolded" 2>&1 || fail "report --folded with the .ko in the cache"
	grep -q 'of them in 1 module (0 without symbols)' "$tmp/lreport" ||
		fail "still missing: $(grep 'bstack: .* kernel frames' "$tmp/lreport")"
	grep -q "bstack_testmod_write;bstack_testmod_spin" "$tmp/lfolded" ||
		fail "no bstack_testmod_write -> _spin: $(grep -m1 "vfs_write" "$tmp/lfolded")"
}

# Frames in a module: make kernel-check's guests have bstack_testmod.ko,
# named by BSTACK_TESTMOD, which spins in its functions when its /proc
# file is written to.  Elsewhere (no modules, or not this one) only said.
test_module_frames() {
	mod=bstack_testmod
	if [ -z "${BSTACK_TESTMOD:-}" ]; then
		echo "module frames: not tested here, BSTACK_TESTMOD names no $mod.ko" \
			"(make kernel-check sets it)"
		return
	fi
	if [ ! -e /proc/$mod ] && ! insmod "$BSTACK_TESTMOD" 2> "$tmp/insmod.err"; then
		fail "cannot load $BSTACK_TESTMOD: $(cat "$tmp/insmod.err")"
		return
	fi
	perf --buildid-dir "$cache" bstack record -v -F 999 -o "$tmp/m.data" -- \
		sh -c "echo 500 > /proc/$mod" > "$tmp/mrec.out" 2>&1 ||
		{ fail "record of module frames: $(tail -1 "$tmp/mrec.out")"; return; }
	perf bstack script -i "$tmp/m.data" > "$tmp/mscript" 2>&1 || fail "script of module frames"
	perf --buildid-dir "$cache" bstack report -i "$tmp/m.data" --stdio > "$tmp/mreport" 2>&1 ||
		fail "report of module frames"
	perf --buildid-dir "$cache" bstack report -i "$tmp/m.data" --folded > "$tmp/mfolded" 2>&1 ||
		fail "report --folded of module frames"
	echo "the report shows the module's functions"
	grep -q "bstack_testmod_write;bstack_testmod_spin" "$tmp/mfolded" ||
		fail "no bstack_testmod_write -> _spin: $(grep -m1 "$mod" "$tmp/mfolded")"
	if grep -q 'kernel frames as IPs' "$tmp/mrec.out"; then
		return
	fi

	echo "module frames as build-id + offset: the module's, at kallsyms' functions"
	mbid=$(module_build_id $mod)
	[ -n "$mbid" ] || { fail "no build-id in /sys/module/$mod/notes"; return; }
	perf buildid-list -i "$tmp/m.data" 2> /dev/null | grep -q "^$mbid " ||
		fail "the recording's header has no build-id of $mod"
	check_module_frames $mod "$mbid" "$(cat /sys/module/$mod/sections/.text)"
	grep -q bstack_testmod_spin "$tmp/mresolved" ||
		fail "no frame at bstack_testmod_spin: $(sort -u "$tmp/mresolved" | tr '\n' ' ')"
	grep -q 'of them in 1 module (0 without symbols)' "$tmp/mreport" ||
		fail "the module is not counted: $(grep 'bstack: .* kernel frames' "$tmp/mreport")"
}

test_kernel_frames
test_report
test_late_module
test_module_frames

[ $err = 0 ] && echo "perf bstack kernel frames test [Success]"
exit $err
