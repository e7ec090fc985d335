#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# init of the make kernel-check guest: the host's root is mounted read-only,
# so give the tests what they write to, run perf test, and as the args say
# the cost comparison and a recording of kernel frames; hand back the
# results over the "out" 9p share and power off.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2> /dev/null
mkdir -p /dev/pts
mount -t devpts devpts /dev/pts	# tmux, for the TUI tests
mount -t tmpfs tmpfs /run
mount -t tracefs tracefs /sys/kernel/tracing
mkdir -p /run/out /run/hosttmp
mount -t 9p -o trans=virtio,version=9p2000.L out /run/out
ip link set lo up 2> /dev/null

cost=
record=
repeat=
testmod=
. /run/out/args

# a writable /tmp, where the tree stays visible if it is below the host's
mount --bind /tmp /run/hosttmp
mount -t tmpfs tmpfs /tmp
mkdir -p /tmp/home
case $top in
/tmp/*)
	mkdir -p "$top"
	mount --bind "/run/hosttmp/${top#/tmp/}" "$top"
	;;
esac
HOME=/tmp/home
PATH=$perf_build:$PATH
PERF_EXEC_PATH=$perf_build
BSTACK_TESTMOD=$testmod	# the module of the module-frames tests
export HOME PATH PERF_EXEC_PATH BSTACK_TESTMOD
uname -r -v > /run/out/uname
{
	perf version
	mount
} > /run/out/guest.log 2>&1
cd "$tree" || echo "cannot cd to $tree" >> /run/out/guest.log
# repeat: runs of the tests, to catch one that fails now and then
: > /run/out/perf-test.log
i=0
while [ $# -gt 0 ] && [ $i -lt "${repeat:-1}" ]; do
	perf test -v "$@" >> /run/out/perf-test.log 2>&1
	i=$((i + 1))
done
if [ -n "$cost" ]; then
	# shellcheck disable=SC2086
	python3 "$top/bench/kernel_cost.py" $cost > /run/out/cost.txt 2>&1
fi
if [ -n "$record" ]; then
	# the fork system call of a shell: kernel frames down to kernel_clone;
	# written on tmpfs, as perf cannot mmap files of the 9p share
	perf bstack record -o /tmp/guest.data -e sched:sched_process_fork -- \
		sh -c 'for i in 1 2 3 4; do /bin/true; done' > /run/out/record.log 2>&1
	cp /tmp/guest.data /run/out/guest.data
	# and frames in a module, bstack_testmod's
	if [ -n "$testmod" ] && { [ -e /proc/bstack_testmod ] || insmod "$testmod"; }; then
		perf bstack record -F 999 -o /tmp/kmod.data -- \
			sh -c 'echo 500 > /proc/bstack_testmod' >> /run/out/record.log 2>&1
		cp /tmp/kmod.data /run/out/kmod.data
	fi
fi
touch /run/out/done
sync
echo o > /proc/sysrq-trigger
