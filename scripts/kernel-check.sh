#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make kernel-check: build a small 6.12 kernel with our kernel patches and
# run the perf bstack tests in it under QEMU (TCG: this machine's KVM hangs).
#
#   scripts/kernel-check.sh [PERF_TEST_PATTERN...]
#
# KERNEL_PATCHES=none builds (and caches) the same kernel without our
# kernel patches, to compare with.
# The kernel comes from Debian's linux-source-6.12 with patches/kernel/*.patch
# and our kernel/ files laid over it, configured as tinyconfig plus
# scripts/kernel-guest.config.  It is cached outside the clone, in
# $PERF_BSTACK_CACHE (default ~/.cache/perf-bstack), under the hash of what
# goes into it, so that it is rebuilt only when that changes.  The guest
# mounts the host's root read-only over virtio-9p and runs the perf built
# on the host; results come back over a second 9p share.  Prints
# "N passed, N failed" and fails when a test does.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
tarball=${TARBALL:-/usr/src/linux-source-6.12.tar.xz}
cache=${PERF_BSTACK_CACHE:-$HOME/.cache/perf-bstack}
fragment=$top/scripts/kernel-guest.config
perf_build=${PERF_BUILD:-$build/perf}
kpatches=$top/patches/kernel
[ "${KERNEL_PATCHES:-}" = none ] && kpatches=/nonexistent
[ $# -gt 0 ] || set -- bstack

if ! command -v qemu-system-x86_64 > /dev/null; then
	echo "error: qemu-system-x86_64 not found (make deps installs it)" >&2
	exit 1
fi

# what the kernel is made of: the tarball, our kernel patches and files, the
# config; bump the version when build_kernel() changes what it builds
kernel_key() {
	{
		echo "build_kernel 1"
		ls -l "$tarball"
		find "$kpatches" "$top/kernel" -type f 2>/dev/null | sort | xargs cat
		cat "$fragment"
	} | sha256sum | cut -c1-16
}

build_kernel() {
	src=$build/kernel
	echo "  KERNEL  extracting $tarball"
	rm -rf "$src"
	mkdir -p "$src"
	tar -xJf "$tarball" -C "$src" --strip-components=1
	for p in "$kpatches"/*.patch; do
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
	echo "  KERNEL  building bzImage (several minutes), log in build/kernel-build.log"
	if ! make -C "$src" -j"$(nproc)" bzImage > "$build/kernel-build.log" 2>&1; then
		tail -n 30 "$build/kernel-build.log"
		echo "error: the kernel build failed" >&2
		exit 1
	fi
	mkdir -p "$kdir.tmp"
	cp "$src/arch/x86/boot/bzImage" "$src/vmlinux" "$src/.config" "$kdir.tmp/"
	rm -rf "$kdir"
	mv "$kdir.tmp" "$kdir"
	rm -rf "$src"
}

kdir=$cache/kernel-$(kernel_key)
mkdir -p "$cache" "$build"
if [ -f "$kdir/bzImage" ]; then
	echo "  KERNEL  $kdir (cached)"
else
	build_kernel
fi

out=$build/guest-out
rm -rf "$out"
mkdir -p "$out"
{
	echo "perf_build='$perf_build'"
	echo "tree='$build/linux'"
	printf 'set --'
	printf " '%s'" "$@"
	echo
} > "$out/args"

echo "  QEMU    booting the test kernel, running perf test $*"
timeout "${KERNEL_CHECK_TIMEOUT:-3600}" qemu-system-x86_64 -accel tcg -m 4G -smp 2 \
	-nographic -no-reboot -kernel "$kdir/bzImage" \
	-append "console=ttyS0 root=hostroot rootfstype=9p rootflags=trans=virtio,version=9p2000.L ro init=$top/scripts/guest-init.sh panic=-1 quiet" \
	-fsdev local,id=r,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=r,mount_tag=hostroot \
	-fsdev local,id=o,path="$out",security_model=none \
	-device virtio-9p-pci,fsdev=o,mount_tag=out > "$build/guest-console.log" 2>&1 || true

if [ ! -f "$out/done" ]; then
	tail -n 30 "$build/guest-console.log"
	echo "error: the guest did not finish its tests, see build/guest-console.log" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
cat "$out/perf-test.log" >> "$build/guest-console.log"
results=$(grep -E '^ *[0-9]+(\.[0-9]+)?: .*: (Ok|FAILED!|Skip.*)$' "$out/perf-test.log" || true)
echo "$results"
pass=$(echo "$results" | grep -c ': Ok$' || true)
fail=$(echo "$results" | grep -c -e ': FAILED!$' -e ': Skip' || true)
[ -n "$results" ] || fail=1
echo "  GUEST   $(cat "$out/uname")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
