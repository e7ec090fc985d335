#!/bin/bash
# perf report and perf inject survive damaged perf.data files
# SPDX-License-Identifier: GPL-2.0
#
# Each file of tests/perf-data-damaged crashed or hung perf before the fix
# that added it.  perf may refuse a file, with a message, but must not die
# of a signal or hang on it.

err=0
data_dir=$(cd "$(dirname "$0")"/../perf-data-damaged 2> /dev/null && pwd)
if [ -z "$data_dir" ]; then
	echo "perf data damaged test [Skipped: no tests/perf-data-damaged beside $0]"
	exit 2
fi
tmp=$(mktemp -d /tmp/__perf_test.damaged.XXXXX)
trap 'rm -rf "$tmp"' EXIT TERM INT

# $1: the file, the rest: the perf command
run() {
	f=$1
	shift
	timeout 60 perf "$@" -i "$f" > /dev/null 2> "$tmp/err"
	st=$?
	if [ $st = 124 ] || { [ $st -gt 128 ] && [ $st -lt 160 ]; } ||
	   grep -qE 'AddressSanitizer|runtime error:|stack smashing' "$tmp/err"; then
		echo "perf $* -i $(basename "$f"): exit $st"
		tail -n 5 "$tmp/err"
		err=1
	fi
}

for f in "$data_dir"/*.data; do
	echo "$(basename "$f")"
	run "$f" report --stdio
	run "$f" report --stdio --header-only
	run "$f" report -D
	run "$f" script
	run "$f" inject -o "$tmp/out.data"
done

# A newer perf's file: perf inject leaves out, with a warning, the features
# this perf does not know, and keeps every sample
f=$data_dir/feature-unknown-to-this-perf.data
echo "perf inject of $(basename "$f")"
if ! perf inject -i "$f" -o "$tmp/out.data" 2> "$tmp/err"; then
	echo "perf inject failed: $(cat "$tmp/err")"
	err=1
elif ! grep -q 'unknown header features' "$tmp/err"; then
	echo "perf inject gave no warning of the unknown features"
	err=1
elif [ "$(perf report --stdio -i "$f" 2> /dev/null | grep '^# Samples')" != \
       "$(perf report --stdio -i "$tmp/out.data" 2> /dev/null | grep '^# Samples')" ]; then
	echo "perf inject did not keep the samples"
	err=1
fi

# A binary gone, its separate debug file all there is of it in the
# build-id cache: its .plt.got is a section without bytes there
debug_only() {
	cat > "$tmp/lib.c" <<EOT
#include <stdio.h>
int (*fp)(const char *) = puts;
int work(int n)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += i * 3;
	return s + fp("");
}
EOT
	cat > "$tmp/main.c" <<EOT
int work(int n);
int main(void) { for (int i = 0; i < 3000; i++) work(1 << 20); return 0; }
EOT
	gcc -O2 -shared -fPIC -o "$tmp/libdbg.so" "$tmp/lib.c" &&
	gcc -O2 -o "$tmp/main" "$tmp/main.c" -L"$tmp" -ldbg -Wl,-rpath,"$tmp" &&
	objcopy --only-keep-debug "$tmp/libdbg.so" "$tmp/libdbg.debug" || return 2
	perf --buildid-dir "$tmp/cache" record -q -N -e cpu-clock -o "$tmp/dbg.data" \
		"$tmp/main" > /dev/null 2>&1 || return 2
	bid=$(readelf -n "$tmp/libdbg.so" | awk '/Build ID/ { print $3 }')
	dir=$tmp/cache/$tmp/libdbg.so/$bid
	mkdir -p "$dir" "$tmp/cache/.build-id/${bid%"${bid#??}"}"
	cp "$tmp/libdbg.debug" "$dir/debug"
	ln -s "$dir" "$tmp/cache/.build-id/${bid%"${bid#??}"}/${bid#??}"
	rm "$tmp/libdbg.so"
	timeout 60 perf --buildid-dir "$tmp/cache" report --stdio -i "$tmp/dbg.data" \
		> /dev/null 2> "$tmp/err"
	st=$?
	if [ $st -gt 128 ] && [ $st -lt 160 ]; then
		echo "perf report with only a separate debug file of a binary: exit $st"
		err=1
	fi
}
if command -v gcc > /dev/null && command -v objcopy > /dev/null; then
	echo "perf report with only a separate debug file of a binary"
	debug_only || echo "  (could not build or record the program: skipped)"
fi

[ $err = 0 ] && echo "perf data damaged test [Success]"
exit $err
