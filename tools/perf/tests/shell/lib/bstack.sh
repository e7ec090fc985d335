#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Helpers for the perf bstack shell tests.

# The bundled workload's sources, beside the shell tests in the perf tree
bstack_src_dir() {
	echo "$(cd "$(dirname "$0")/../bstack" 2>/dev/null && pwd)"
}

# Skip (exit 2) with a reason when bstack cannot record here
bstack_require_record() {
	if [ "$(id -u)" != 0 ]; then
		echo "perf bstack test [Skipped: recording needs root or CAP_BPF+CAP_PERFMON]"
		exit 2
	fi
	bstack_require_feature bpf_skeletons
}

# Skip (exit 2) unless perf was built with $1 (perf version --build-options)
bstack_require_feature() {
	if ! perf version --build-options 2>&1 | grep -qE "^ *$1: \[ on"; then
		echo "perf bstack test [Skipped: perf built without $1]"
		exit 2
	fi
}

# Skip (exit 2) with a reason when a tool the test needs is not installed
bstack_require_tools() {
	for t in "$@"; do
		if ! command -v "$t" > /dev/null; then
			echo "perf bstack test [Skipped: $t is not installed]"
			exit 2
		fi
	done
}

# Build the workload into $1: bstack_work, bstack_child, the libraries
# (the test is skipped without clang)
bstack_build_workload() {
	src=$(bstack_src_dir)
	if [ -z "$src" ] || [ ! -f "$src/bstack_work.c" ]; then
		echo "workload sources not found beside $0"
		return 1
	fi
	bstack_require_tools clang gcc make
	make -s -C "$src" OUT="$1"
}

bstack_build_id() {
	readelf -n "$1" | awk '/Build ID:/ { print $3 }'
}

# Is file offset $2 (hex) in an executable PT_LOAD of ELF file $1?
bstack_offset_in_code() {
	readelf -lW "$1" | gawk -v off=$(($2)) '
		$1 == "LOAD" && $(NF - 1) ~ /E/ {
			o = strtonum($2); sz = strtonum($5)
			if (off >= o && off < o + sz) { found = 1; exit }
		}
		END { exit !found }'
}

# Name of the function of ELF file $1 at file offset $2 (hex), or "?"
bstack_sym_at_offset() {
	readelf -lW "$1" | gawk -v off=$(($2)) -v bin="$1" '
		$1 == "LOAD" {
			o = strtonum($2); v = strtonum($3); sz = strtonum($5)
			if (off >= o && off < o + sz) {
				printf "%d\n", off - o + v
				found = 1
				exit
			}
		}
		END { if (!found) print -1 }' | {
		read -r vaddr
		if [ "$vaddr" -lt 0 ]; then
			echo "?"
			return
		fi
		nm -n --defined-only "$1" | gawk -v a="$vaddr" '
			$2 ~ /^[tTwW]$/ {
				s = strtonum("0x" $1)
				if (s <= a) { name = $3 } else { exit }
			}
			END { print name ? name : "?" }'
	}
}

# Build the workload into $tmp/bin, record its program without frame
# pointers, copied to $tmp/$1, into $tmp/p.data (build-id cache
# $tmp/cache), delete the copy, and write --folded of it to $tmp/p.folded:
# a profile whose binary is only in the cache
bstack_record_deleted_nofp() {
	mkdir -p "$tmp/bin"
	bstack_build_workload "$tmp/bin" || return 1
	cp "$tmp/bin/bstack_nofp" "$tmp/$1"
	if ! perf --buildid-dir "$tmp/cache" bstack record -q -F 499 -o "$tmp/p.data" -- \
		"$tmp/$1" 1 2> "$tmp/record.err"; then
		echo "record: $(tail -1 "$tmp/record.err")"
		return 1
	fi
	rm "$tmp/$1"
	perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/p.data" --folded \
		> "$tmp/p.folded" 2> /dev/null
}

# the sum of the counts of the folded lines matching $2 in file $1
bstack_folded_sum() {
	grep -E "$2" "$1" | awk '{ n += $NF } END { print n + 0 }'
}

# the share in % of the samples of folded file $1 matching $2 that also
# match $3; "N of M" on stderr
bstack_folded_share() {
	_all=$(bstack_folded_sum "$1" "$2")
	_part=$(bstack_folded_sum "$1" "$3")
	echo "$_part of $_all" >&2
	[ "$_all" -gt 0 ] || { echo 0; return; }
	echo $((_part * 100 / _all))
}

# perf record installs its signal handlers before it creates its output:
# wait for the file before signalling a recorder started in the background
bstack_wait_for_file() {
	for _ in $(seq 100); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	echo "$1 did not appear"
	return 1
}

# Record $1 at 34 system-call tracepoints: more events than the 32 that
# --pprof and --flamegraph once had room for (a recording may have 64)
bstack_record_many_events() {
	_ev=
	for _t in $(perf list --raw-dump tracepoint 2> /dev/null | tr ' ' '\n' |
		    grep '^syscalls:sys_enter_' | head -n 34); do
		_ev="$_ev -e $_t"
	done
	# shellcheck disable=SC2086
	perf --buildid-dir "$tmp/cache" bstack record -q $_ev -o "$1" -- \
		sh -c 'ls / > /dev/null; cat /proc/self/stat > /dev/null'
}

# Start a test named $1 whose private temporary directory is $tmp: it is
# removed at exit, after bstack_test_cleanup if the test defines one
bstack_start_test() {
	bstack_test_name=$1
	trap bstack_end_test EXIT TERM INT
}

bstack_end_test() {
	if command -v bstack_test_cleanup > /dev/null; then
		bstack_test_cleanup
	fi
	rm -rf "$tmp"
	trap - EXIT TERM INT
}

fail() {
	echo "$bstack_test_name [Failed: $*]"
	err=1
}
