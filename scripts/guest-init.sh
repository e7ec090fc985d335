#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# init of the make kernel-check guest: the host's root is mounted read-only,
# so give the tests what they write to, run perf test, hand back the results
# over the "out" 9p share and power off.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2> /dev/null
mkdir -p /dev/pts
mount -t devpts devpts /dev/pts	# tmux, for the TUI tests
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t tracefs tracefs /sys/kernel/tracing
mkdir -p /run/out /tmp/home
mount -t 9p -o trans=virtio,version=9p2000.L out /run/out
ip link set lo up 2> /dev/null

. /run/out/args
HOME=/tmp/home
PATH=$perf_build:$PATH
PERF_EXEC_PATH=$perf_build
export HOME PATH PERF_EXEC_PATH
uname -r -v > /run/out/uname
{
	perf version
	mount
} > /run/out/guest.log 2>&1
cd "$tree" || echo "cannot cd to $tree" >> /run/out/guest.log
perf test -v "$@" > /run/out/perf-test.log 2>&1
touch /run/out/done
sync
echo o > /proc/sysrq-trigger
