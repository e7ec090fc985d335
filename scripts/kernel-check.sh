#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make kernel-check: build a small 6.12 kernel with our kernel patches, and
# the same kernel without them, and test both under QEMU (TCG: this
# machine's KVM hangs).
#
#   scripts/kernel-check.sh [PERF_TEST_PATTERN...]
#
# In the guest of the patched kernel: the perf tests matching the patterns
# (default: every bstack test), and recordings of kernel frames, in vmlinux
# and in bstack_testmod.ko (tools/perf/tests/bstack_testmod, built with
# each kernel; the kernel frames test loads it too).  In the guest of the
# unpatched kernel: the kernel frames test, which must see the flag
# refused and fall back.  Then, here, reports of the guest's recordings:
# its kernel is not the one running here, so its frames must resolve
# through the guest's vmlinux, and those of the module through its .ko, in
# a build-id cache, and only through them.  Last, in one more guest of
# each kernel whose clock counts instructions, the cost of build-id stacks
# against plain ones (bench/kernel_cost.py); the two are put side by side
# in $KERNEL_RESULTS (default bench/RESULTS-kernel.md).
#
#   KERNEL_PATCHES=none      only the unpatched kernel, running the tests
#   KERNEL_TEST_REPEAT=N     run the perf tests N times in each guest
#   KERNEL_COST=0            no cost runs (KERNEL_COST_SCALE: work per run,
#                            times bench/'s smoke sizes; KERNEL_COST_REPEATS);
#                            they boot each kernel once more, under -icount;
#                            KERNEL_COST=only: the cost runs alone
#
# The kernels come from Debian's linux-source-6.12 with patches/kernel/*.patch
# and our kernel/ files laid over it, configured as tinyconfig plus
# scripts/kernel-guest.config.  They are cached outside the clone, in
# $PERF_BSTACK_CACHE (default ~/.cache/perf-bstack), under the hash of what
# goes into them, so that each is rebuilt only when that changes.  The
# guest mounts the host's root read-only over virtio-9p and runs the perf
# built on the host; results come back over a second 9p share.  Prints
# "N passed, N failed" and fails when a test does.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
tarball=${TARBALL:-/usr/src/linux-source-6.12.tar.xz}
cache=${PERF_BSTACK_CACHE:-$HOME/.cache/perf-bstack}
fragment=$top/scripts/kernel-guest.config
testmod=$top/tools/perf/tests/bstack_testmod
perf_build=${PERF_BUILD:-$build/perf}
results=${KERNEL_RESULTS:-$top/bench/RESULTS-kernel.md}
cost=${KERNEL_COST:-1}
cost_scale=${KERNEL_COST_SCALE:-0.5}
cost_repeats=${KERNEL_COST_REPEATS:-3}
[ $# -gt 0 ] || set -- bstack
pass=0
fail=0

if ! command -v qemu-system-x86_64 > /dev/null; then
	echo "error: qemu-system-x86_64 not found (make deps installs it)" >&2
	exit 1
fi

# what a kernel is made of: the tarball, our kernel patches (in $1) and
# files, the config; bump the version when build_kernel() changes what it
# builds
kernel_key() {
	{
		echo "build_kernel 2"
		ls -l "$tarball"
		find "$1" "$top/kernel" "$testmod" -type f 2>/dev/null | sort | xargs cat
		cat "$fragment"
	} | sha256sum | cut -c1-16
}

# build_kernel PATCHES_DIR KDIR
build_kernel() {
	src=$build/kernel
	echo "  KERNEL  extracting $tarball"
	rm -rf "$src"
	mkdir -p "$src"
	tar -xJf "$tarball" -C "$src" --strip-components=1
	for p in "$1"/*.patch; do
		[ -e "$p" ] || continue
		echo "  KERNEL  applying $(basename "$p")"
		patch -d "$src" -p1 -s -N -F0 --no-backup-if-mismatch < "$p"
	done
	(cd "$top" && find kernel -type f 2> /dev/null) | while read -r f; do
		mkdir -p "$src/$(dirname "$f")"
		cp "$top/$f" "$src/$f"
	done
	echo "  KERNEL  configuring (tinyconfig + $(basename "$fragment"))"
	make -s -C "$src" tinyconfig > /dev/null
	(cd "$src" && scripts/kconfig/merge_config.sh -m .config "$fragment" > /dev/null)
	make -s -C "$src" olddefconfig > /dev/null
	# an option kconfig dropped (a missing dependency) would fail the tests obscurely
	missing=$(grep '^CONFIG_.*=y$' "$fragment" | while read -r opt; do
		grep -qx "$opt" "$src/.config" || echo "$opt"
	done)
	if [ -n "$missing" ]; then
		echo "error: the kernel config lost: $missing" >&2
		exit 1
	fi
	# modules too, for the Module.symvers of bstack_testmod.ko's build
	echo "  KERNEL  building bzImage (several minutes), log in build/kernel-build.log"
	if ! make -C "$src" -j"$(nproc)" bzImage modules > "$build/kernel-build.log" 2>&1; then
		tail -n 30 "$build/kernel-build.log"
		echo "error: the kernel build failed" >&2
		exit 1
	fi
	# the module of the module-frames tests, built out of tree against it
	rm -rf "$build/testmod"
	cp -r "$testmod" "$build/testmod"
	if ! make -C "$src" M="$build/testmod" modules >> "$build/kernel-build.log" 2>&1; then
		tail -n 30 "$build/kernel-build.log"
		echo "error: the build of bstack_testmod.ko failed" >&2
		exit 1
	fi
	mkdir -p "$2.tmp"
	cp "$src/arch/x86/boot/bzImage" "$src/vmlinux" "$src/.config" \
		"$build/testmod/bstack_testmod.ko" "$2.tmp/"
	rm -rf "$2"
	mv "$2.tmp" "$2"
	rm -rf "$src"
}

# kernel_dir PATCHES_DIR: the cached kernel built with them, built if need be
kernel_dir() {
	kdir=$cache/kernel-$(kernel_key "$1")
	if [ -f "$kdir/bzImage" ]; then
		echo "  KERNEL  $kdir (cached)" >&2
	else
		build_kernel "$1" "$kdir" >&2
	fi
	echo "$kdir"
}

# boot KDIR OUT COST RECORD PERF_TEST_PATTERN...: run them in a guest.
# A cost run has a guest of its own, whose clock counts instructions
# (-icount): it is then the same whatever the load of this machine, and
# the guest's TSC cannot be found unstable, which leaves BPF run times at 0
# (jiffies).  Tests run without it, on both vCPUs at once.
boot() {
	kdir=$1 out=$2 want_cost=$3 record=$4
	shift 4
	accel="-accel tcg"
	[ "$want_cost" = 1 ] && accel="$accel -icount shift=0,sleep=off"
	rm -rf "$out"
	mkdir -p "$out"
	{
		echo "perf_build='$perf_build'"
		echo "tree='$build/linux'"
		echo "top='$top'"
		# user stacks only: kernel frames as build-ids would weigh on one side
		[ "$want_cost" = 1 ] &&
			echo "cost='--scale $cost_scale --repeats $cost_repeats --user-stack-only'"
		[ "$record" = 1 ] && echo "record=1"
		echo "repeat=${KERNEL_TEST_REPEAT:-1}"
		[ -f "$kdir/bstack_testmod.ko" ] && echo "testmod='$kdir/bstack_testmod.ko'"
		printf 'set --'
		[ $# -eq 0 ] || printf " '%s'" "$@"
		echo
	} > "$out/args"
	echo "  QEMU    $(basename "$kdir"): $([ "$want_cost" = 1 ] && echo 'cost' || echo "perf test $*")"
	# shellcheck disable=SC2086
	timeout "${KERNEL_CHECK_TIMEOUT:-3600}" qemu-system-x86_64 $accel -m 4G -smp 2 \
		-nographic -no-reboot -kernel "$kdir/bzImage" \
		-append "console=ttyS0 root=hostroot rootfstype=9p rootflags=trans=virtio,version=9p2000.L ro init=$top/scripts/guest-init.sh panic=-1 quiet" \
		-fsdev local,id=r,path=/,security_model=none,readonly=on,multidevs=remap \
		-device virtio-9p-pci,fsdev=r,mount_tag=hostroot \
		-fsdev local,id=o,path="$out",security_model=none \
		-device virtio-9p-pci,fsdev=o,mount_tag=out > "$out/console.log" 2>&1 &
	qemu=$!
	# the guest powers off once it wrote done, and QEMU under -icount has
	# been seen to stay up after that: stop it
	while kill -0 "$qemu" 2> /dev/null; do
		if [ -f "$out/done" ]; then
			sleep 10
			kill "$qemu" 2> /dev/null || true
			break
		fi
		sleep 2
	done
	wait "$qemu" || true
	if [ ! -f "$out/done" ]; then
		tail -n 30 "$out/console.log"
		echo "error: the guest did not finish, see $out/console.log" >&2
		fail=$((fail + 1))
		return 1
	fi
	echo "  GUEST   $(cat "$out/uname")"
	[ $# -eq 0 ] || count_tests "$out/perf-test.log"
}

count_tests() {
	res=$(grep -E '^ *[0-9]+(\.[0-9]+)?: .*: (Ok|FAILED!|Skip.*)$' "$1" || true)
	if [ -z "$res" ]; then
		echo "error: the guest ran no test, see $1"
		fail=$((fail + 1))
		return
	fi
	echo "$res"
	# a failed test's own lines, so that a CI log says why
	if echo "$res" | grep -q -e ': FAILED!$'; then
		grep -B 40 -e ': FAILED!$' "$1" | grep -v -e '^ *[0-9.]*: .*: Ok$' |
			tail -n 40 | sed 's/^/    /'
	fi
	pass=$((pass + $(echo "$res" | grep -c ': Ok$' || true)))
	fail=$((fail + $(echo "$res" | grep -c -e ': FAILED!$' -e ': Skip' || true)))
}

# check NAME COMMAND...: one more test, run here
check() {
	name=$1
	shift
	if out=$("$@" 2>&1); then
		echo "  $name: Ok"
		pass=$((pass + 1))
	else
		echo "  $name: FAILED!"
		echo "$out" | tail -n 20 | sed 's/^/    /'
		fail=$((fail + 1))
	fi
}

# the cost run of a guest printed "cost WORKLOAD BUILD_ID_NS PLAIN_NS RATIO IP%"
cost_ok() {
	[ "$(grep -c '^cost [a-z]* [1-9][0-9]* [1-9][0-9]* [0-9.]* [0-9.]*%$' "$1/cost.txt")" = 4 ] ||
		{ cat "$1/cost.txt"; return 1; }
}

# report_to NAME BUILDID_DIR DATA REPORT_ARGS...: perf bstack report of
# DATA with that build-id cache into $dir/NAME.txt, its errors shown
report_to() {
	name=$1 cachedir=$2 data=$3
	shift 3
	"$perf_build/perf" --buildid-dir "$cachedir" bstack report -i "$data" "$@" \
		> "$dir/$name.txt" 2> "$dir/$name.err" || { cat "$dir/$name.err"; return 1; }
}

# The guest's recording, reported here, where another kernel runs: its
# frames resolve through its vmlinux in a build-id cache, or given with
# -k, and only then
report_elsewhere() {
	data=$1 vmlinux=$2 dir=$build/kernel-report
	rm -rf "$dir"
	mkdir -p "$dir"
	report_to without "$dir/empty" "$data" --stdio || return 1
	grep -q '^# bstack: kernel [0-9a-f]*: no symbols: its vmlinux is in no build-id cache' \
		"$dir/without.txt" || { echo "no missing-vmlinux line:"; head "$dir/without.txt"; return 1; }
	if grep -q 'kernel_clone' "$dir/without.txt"; then
		echo "kernel symbols without the guest's vmlinux"
		return 1
	fi
	"$perf_build/perf" --buildid-dir "$dir/cache" buildid-cache -a "$vmlinux" || return 1
	report_to with "$dir/cache" "$data" --stdio || return 1
	grep -q '^# bstack: kernel [0-9a-f]*: symbols from the build-id cache' "$dir/with.txt" ||
		{ echo "no cached-kernel line:"; head "$dir/with.txt"; return 1; }
	report_to with-folded "$dir/cache" "$data" --folded || return 1
	grep -q 'kernel_clone' "$dir/with-folded.txt" ||
		{ echo "no kernel_clone:"; head -5 "$dir/with-folded.txt"; return 1; }
	report_to given "$dir/empty" "$data" --stdio -k "$vmlinux" || return 1
	grep -q '^# bstack: kernel [0-9a-f]*: symbols from --vmlinux' "$dir/given.txt" &&
		grep -q 'kernel_clone' "$dir/given.txt" ||
		{ echo "-k vmlinux:"; head "$dir/given.txt"; return 1; }
	report_to given-folded "$dir/empty" "$data" --folded -k "$vmlinux" || return 1
	grep -q 'kernel_clone' "$dir/given-folded.txt" ||
		{ echo "--folded -k vmlinux:"; head -5 "$dir/given-folded.txt"; return 1; }
}

# The same for the guest's recording of frames in bstack_testmod: they
# resolve through its .ko in a build-id cache, and only through it
report_module_elsewhere() {
	data=$1 ko=$2 dir=$build/kernel-report
	report_to kmod-without "$dir/empty" "$data" --stdio || return 1
	grep -q '^# bstack: .* of them in 1 module (1 without symbols)' "$dir/kmod-without.txt" &&
		grep -q '^# bstack:   [0-9a-f]* \[bstack_testmod\]' "$dir/kmod-without.txt" ||
		{ echo "the module is not missing:"; head -12 "$dir/kmod-without.txt"; return 1; }
	if grep -q 'bstack_testmod_spin' "$dir/kmod-without.txt"; then
		echo "module symbols without its .ko"
		return 1
	fi
	"$perf_build/perf" --buildid-dir "$dir/kmod-cache" buildid-cache -a "$ko" || return 1
	report_to kmod-with "$dir/kmod-cache" "$data" --stdio || return 1
	grep -q '^# bstack: .* of them in 1 module (0 without symbols)' "$dir/kmod-with.txt" &&
		grep -q 'bstack_testmod_spin' "$dir/kmod-with.txt" ||
		{ echo "no module symbols from its .ko:"; head -30 "$dir/kmod-with.txt"; return 1; }
}

write_results() {
	# the sections below the table (past runs, what they show) are kept
	notes=$(sed -n '/^## /,$p' "$results" 2> /dev/null || true)
	{
		echo "# perf bstack: BPF cost of build-id stacks, unpatched vs patched kernel"
		echo
		echo "Written by \`make kernel-check\` ($(date -u +%Y-%m-%d)): bench/kernel_cost.py"
		echo "--user-stack-only in two QEMU guests of the same 6.12 config, one without"
		echo "and one with patches/kernel, each under TCG with -icount shift=0: the"
		echo "guest's clock counts instructions (1 ns each), so that the load of the"
		echo "host does not move it; memory and cache latencies are not counted. BPF"
		echo "ns per sample (kernel.bpf_stats_enabled, medians of $cost_repeats interleaved"
		echo "runs after one round of warm-up runs, work $cost_scale × bench/'s smoke"
		echo "sizes) of perf bstack record --no-cfi --walk-cost: the kernel walks"
		echo "each user stack twice, as build-id + offset and as plain IPs, the"
		echo "program times both walks, and its run time less one walk or the other"
		echo "is what it costs with that walk alone, on the same samples. The ratio"
		echo "is the median of the ratios within a run. Target: patched ratio"
		echo "≤ 1.30×. \"IP\" is the share of user frames the kernel gave as IPs,"
		echo "without a build-id."
		echo
		echo "| workload | unpatched build-id | plain | ratio | IP | patched build-id | plain | ratio | IP |"
		echo "|---|---|---|---|---|---|---|---|---|"
		for w in cpu churn dlopen threads; do
			u=$(grep "^cost $w " "$1/cost.txt" | cut -d' ' -f3-)
			p=$(grep "^cost $w " "$2/cost.txt" | cut -d' ' -f3-)
			# shellcheck disable=SC2086
			echo "| $w | $(printf '%s ns | %s ns | %s× | %s' $u) | $(printf '%s ns | %s ns | %s× | %s' $p) |"
		done
		[ -z "$notes" ] || printf '\n%s\n' "$notes"
	} > "$results.tmp"
	mv "$results.tmp" "$results"
}

mkdir -p "$cache" "$build"
if [ "${KERNEL_PATCHES:-}" = none ]; then
	kdir=$(kernel_dir /nonexistent)
	boot "$kdir" "$build/guest-unpatched" 0 0 "$@" || true
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
	exit
fi

patched=$(kernel_dir "$top/patches/kernel")
unpatched=$(kernel_dir /nonexistent)
# the workloads of the cost runs, built here: the guest's root is read-only
make -s -C "$top/bench/workloads" OUT="$build/bench"

if [ "$cost" != only ] && boot "$patched" "$build/guest-patched" 0 1 "$@"; then
	check "patched kernel: its recording reported on another kernel" \
		report_elsewhere "$build/guest-patched/guest.data" "$patched/vmlinux"
	check "patched kernel: its module frames reported on another kernel" \
		report_module_elsewhere "$build/guest-patched/kmod.data" "$patched/bstack_testmod.ko"
fi
[ "$cost" = only ] || boot "$unpatched" "$build/guest-unpatched" 0 0 'kernel frames' || true
if [ "$cost" != 0 ]; then
	boot "$patched" "$build/cost-patched" 1 0 &&
		check "patched kernel: cost run" cost_ok "$build/cost-patched"
	boot "$unpatched" "$build/cost-unpatched" 1 0 &&
		check "unpatched kernel: cost run" cost_ok "$build/cost-unpatched"
fi
if [ "$cost" != 0 ] && [ -f "$build/cost-unpatched/cost.txt" ] &&
   [ -f "$build/cost-patched/cost.txt" ]; then
	write_results "$build/cost-unpatched" "$build/cost-patched"
	sed -n '/^| workload/,$p' "$results"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
