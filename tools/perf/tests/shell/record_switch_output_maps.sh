#!/bin/bash
# perf record --switch-output does not keep the files it rotated mapped
# SPDX-License-Identifier: GPL-2.0
#
# Asked to (--no-no-buildid), perf record reads each file it closes for
# its build-ids.  It kept every one of them mapped: memory that grew with
# each rotation, and the disk space of the files --switch-max-files removed.

tmp=$(mktemp -d /tmp/__perf_test.switch_maps.XXXXX)
trap 'kill -INT "$pid" 2> /dev/null; wait "$pid" 2> /dev/null; rm -rf "$tmp"' EXIT TERM INT

if ! perf record -q -o "$tmp/probe.data" -e cpu-clock true > /dev/null 2>&1; then
	echo "perf record --switch-output maps test [Skipped: perf record cannot sample here]"
	exit 2
fi

perf record -e cpu-clock -F 999 --switch-output=1s --switch-max-files 2 --no-no-buildid \
	-o "$tmp/perf.data" -- sh -c 'while :; do :; done' > /dev/null 2> "$tmp/err" &
pid=$!
sleep 4.5	# four rotations, two files removed
if ! kill -0 "$pid" 2> /dev/null; then
	echo "perf record --switch-output maps test [Failed: perf record exited]"
	cat "$tmp/err"
	exit 1
fi
rotated=$(grep -c 'Dump' "$tmp/err")
echo "$rotated files written"
mapped=$(grep -c "$tmp/perf.data\." "/proc/$pid/maps")
deleted=$(grep "$tmp/perf.data\." "/proc/$pid/maps" | grep -c '(deleted)')
echo "$mapped mappings of rotated files, $deleted of removed ones"
if [ "$mapped" -gt 0 ]; then
	echo "perf record --switch-output maps test [Failed: rotated files still mapped]"
	exit 1
fi
echo "perf record --switch-output maps test [Success]"
exit 0
