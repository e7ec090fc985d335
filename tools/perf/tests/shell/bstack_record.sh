#!/bin/bash
# perf bstack record of a fork/exec/dlopen workload (exclusive)
# SPDX-License-Identifier: GPL-2.0

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack record test"
cache=$tmp/cache
data=$tmp/perf.data

bstack_build_workload "$tmp" || exit 1
work=$tmp/bstack_work
child=$tmp/bstack_child
lib=$tmp/libbstack_lib.so
other_lib=$tmp/libbstack_lib_other.so

echo "Recording the workload"
if ! BSTACK_WORK_CPU_FILE=$tmp/cpu_ms perf --buildid-dir "$cache" bstack record -o "$data" -- \
		"$work" 3 "$child" "$lib" 2> "$tmp/record.err"; then
	cat "$tmp/record.err"
	fail "record"
	exit 1
fi
cat "$tmp/record.err"
perf bstack script -i "$data" > "$tmp/script" 2> "$tmp/script.err" || fail "perf bstack script"

test_samples() {
	echo "bstack samples are in perf.data"
	perf evlist -i "$data" | grep -q '^bstack$' || fail "no bstack event"
	grep -q '^STACK ' "$tmp/script" || fail "no STACK records"
	grep -q '^COUNT ' "$tmp/script" || fail "no COUNT records"
	grep -q '^STATS ' "$tmp/script" || fail "no STATS record"
}

test_build_ids() {
	echo "build-ids of the binaries are in the header and the cache"
	perf buildid-list -i "$data" > "$tmp/buildids"
	for bin in "$work" "$child" "$lib"; do
		id=$(bstack_build_id "$bin")
		grep -q "^$id $bin\$" "$tmp/buildids" || fail "$bin ($id) not in HEADER_BUILD_ID"
		grep -q "VALID $id " "$tmp/script" || fail "no VALID frame of $bin"
		elf=$cache/.build-id/${id:0:2}/${id:2}/elf
		cmp -s "$elf" "$bin" || fail "$bin not in the build-id cache"
	done
}

# Each VALID frame of our binaries in their code must be in a function
# (samples at process start and exit land in crt code like _init), and the
# workload's functions must all be there.  The kernel's bogus offsets are
# shown, not mapped: return addresses below any mapping, or, for garbage
# frame pointers at process start, in a mapping of the file that is not
# code.
test_own_progs() {
	echo "the recorder's own BPF programs are not in the header"
	perf report -i "$data" --header-only > "$tmp/header" 2>&1 ||
		fail "perf report --header-only"
	grep -q 'bpf_prog_[0-9a-f]*_on_sample addr' "$tmp/header" &&
		fail "the bpf_prog_info of perf bstack's own on_sample is in the header"
	grep -q '^# cmdline' "$tmp/header" || fail "no header read"
}

test_time_order() {
	echo "the recording and its conversion are in time order"
	perf --buildid-dir "$cache" bstack report -i "$data" --stdio > /dev/null 2> "$tmp/order.err"
	grep 'out of order' "$tmp/order.err" && fail "report read events out of order"
	perf --buildid-dir "$cache" bstack inject -i "$data" -o "$tmp/inject.data" 2> /dev/null ||
		fail "inject"
	# as written: perf report -D shows the records sorted
	python3 "$(dirname "$0")"/lib/bstack_time_order.py "$tmp/inject.data" ||
		fail "the converted stream goes back in time"
}

test_offsets() {
	echo "VALID offsets map to the workload's functions"
	for bin in "$work" "$child" "$lib"; do
		id=$(bstack_build_id "$bin")
		awk -v id="$id" '$1 == "VALID" && $2 == id { print $3 }' "$tmp/script" |
			sort -u > "$tmp/offsets"
		: > "$tmp/syms"
		while read -r off; do
			if [ $((off)) -gt "$(stat -c %s "$bin")" ] || [ $((off)) -lt 0 ]; then
				echo "  bogus offset $off in $(basename "$bin")"
				continue
			fi
			if ! bstack_offset_in_code "$bin" "$off"; then
				echo "  bogus offset $off in $(basename "$bin"), not in its code"
				continue
			fi
			sym=$(bstack_sym_at_offset "$bin" "$off")
			if [ "$sym" = "?" ]; then
				fail "$(basename "$bin")+$off is in no function"
			fi
			echo "$sym" >> "$tmp/syms"
		done < "$tmp/offsets"
		sort -u "$tmp/syms" | tr '\n' ' ' > "$tmp/found"
		echo "  $(basename "$bin"): $(cat "$tmp/found")"
		case $bin in
		"$work")	want="bstack_work_leaf bstack_work_middle main" ;;
		"$child")	want="bstack_child_leaf bstack_child_spin main" ;;
		*)		want="bstack_lib_leaf bstack_lib_spin" ;;
		esac
		for f in $want; do
			grep -qw "$f" "$tmp/found" || fail "no frame in $f of $(basename "$bin")"
		done
	done
}

# The other library is mapped where the first one was, as soon as that is
# unmapped, with the same code at the same offsets: its frames must come
# with its own build-id, not with one remembered from the mapping before,
# and IP frames (taken when the kernel cannot read the build-id, which
# happens now and then, or all of them with --ip-stacks) must resolve
# through the library mapped at the time of the sample, not the one that
# replaced it.  With --ip-stacks, a count of samples of both libraries'
# times can hold neither: its frames must then be unknown, never wrong.
# At 999 Hz, and with children that exit at once, each library is sampled
# several times in a row.  $1: the record options, $2: the samples each
# library must have.
test_reloaded_library() {
	echo "frames of a library loaded where another was are in that library${1:+ ($1)}"
	# shellcheck disable=SC2086
	if ! perf --buildid-dir "$cache" bstack record -q -F 999 $1 -o "$tmp/reload.data" -- \
			"$work" 2 /bin/true "$lib" "$other_lib" > "$tmp/reload.out" 2>&1 ||
	   ! perf --buildid-dir "$cache" bstack report -i "$tmp/reload.data" --folded \
			> "$tmp/reload.folded" 2>> "$tmp/reload.out"; then
		fail "record and report${1:+ $1}: $(tail -1 "$tmp/reload.out")"
		return
	fi
	other="bstack_work_other_library;bstack_work_library;"
	n=$(bstack_folded_sum "$tmp/reload.folded" "${other}bstack_lib_other_spin;")
	[ "$n" -ge "$2" ] || fail "$n stacks in bstack_lib_other_spin${1:+ ($1)}, not $2 or more"
	n=$(bstack_folded_sum "$tmp/reload.folded" "main;bstack_work_library;bstack_lib_spin;")
	[ "$n" -ge "$2" ] || fail "$n stacks in bstack_lib_spin${1:+ ($1)}, not $2 or more"
	wrong="${other}bstack_lib_(spin|leaf)|main;bstack_work_library;bstack_lib_other_"
	n=$(bstack_folded_sum "$tmp/reload.folded" "$wrong")
	[ "$n" = 0 ] || fail "$n samples in the wrong library${1:+ ($1)}:" \
		"$(grep -m1 -E "$wrong" "$tmp/reload.folded")"
}

test_comms() {
	echo "exec'd children are counted under their own comm"
	# each child spins 40 ms: at 99 Hz, 1 in 50 has no sample
	nr_child=$(awk '$1 == "COUNT" && $7 == "bstack_child" { print $3 }' "$tmp/script" |
		cut -d/ -f1 | sort -u | wc -l)
	ran=$(cut -d' ' -f2 "$tmp/cpu_ms" 2> /dev/null)
	[ "${ran:-0}" -gt 0 ] && [ "$nr_child" -ge $((ran / 2)) ] ||
		fail "$nr_child of ${ran:-?} bstack_child processes have samples"
	grep -q '^COUNT .* comm bstack_work ' "$tmp/script" || fail "no bstack_work counts"
	# a child's stack is never counted under the parent's name
	child_stack=$(awk -v id="$(bstack_build_id "$child")" '
		$1 == "STACK" { s = $2 } $1 == "VALID" && $2 == id { print s }' "$tmp/script" |
		sort -u)
	for s in $child_stack; do
		if grep -q "^COUNT .* comm bstack_work user $s " "$tmp/script"; then
			fail "bstack_child stack $s counted as bstack_work"
		fi
	done
}

# perf report shows the tasks of one comm as one entry, unless a sort key
# or view sets them apart: the many bstack_child processes, which have the
# same stacks, are one sample per stack for such a report, and what it
# shows is what perf report shows of a sample per sample.
report_view() {
	grep -v '^#' | grep -v '^$' | tr -s ' ' | sort
}

# The call chains of each entry (-g folded), their counts summed: perf
# report may keep equal chains of different processes apart, as its DSO
# lookup by name and inode may not find the DSO another process made.
chains_view() {
	grep -v '^#' | tr -s ' ' | awk '/^ *[0-9.]+%/ { entry = $0; print; next }
		NF == 2 { n[entry " " $2] += $1 }
		END { for (k in n) print k, n[k] }' | sort
}

test_tasks_merged() {
	echo "the counts of tasks alike are one sample where the report tells no task apart"
	perf --buildid-dir "$cache" bstack inject -i "$data" -o "$tmp/inject.data" 2> /dev/null ||
		{ fail "inject"; return; }
	perf --buildid-dir "$cache" bstack report -v -i "$data" --stdio --sort comm,dso,sym \
		> /dev/null 2> "$tmp/merged.err"
	merged=$(sed -n 's/.* \([0-9]*\) counts of tasks alike merged.*/\1/p' "$tmp/merged.err")
	[ "${merged:-0}" -gt 0 ] || fail "no counts merged"
	for g in none folded,0,caller,count; do
		view=report_view
		[ $g = none ] || view=chains_view
		# -v would add symbol addresses: not the same view
		perf --buildid-dir "$cache" bstack report -i "$data" --stdio -n \
			--sort comm,dso,sym -g $g 2> /dev/null | $view > "$tmp/merged.view"
		perf --buildid-dir "$cache" report -i "$tmp/inject.data" --stdio -n \
			--sort comm,dso,sym -g $g 2> /dev/null | $view > "$tmp/per-sample.view"
		grep -q bstack_child "$tmp/merged.view" || fail "report -g $g: no bstack_child"
		cmp -s "$tmp/merged.view" "$tmp/per-sample.view" ||
			fail "report -g $g of merged counts differs from a sample per sample"
	done
	echo "  ${merged:-0} counts merged"
	perf --buildid-dir "$cache" bstack report -v -i "$data" --stdio --sort pid -g none \
		> "$tmp/pid.report" 2> "$tmp/pid.err"
	! grep -q 'counts of tasks alike merged' "$tmp/pid.err" || fail "merged for --sort pid"
	n=$(grep -c 'bstack_child' "$tmp/pid.report")
	[ "$n" -gt 1 ] || fail "--sort pid: $n bstack_child tasks"
}

test_lost() {
	echo "lost counters are saved, and zero for this workload"
	stats=$(grep '^STATS ' "$tmp/script" | tail -n 1)
	for i in 2 3 4 5 6 10 11; do
		echo "$stats" | grep -q " $i=0\( \|\$\)" || fail "counter $i is not zero: $stats"
	done
	# a sample every 1/99 s of the workload's CPU time, not of the 3 s:
	# it also waits (exec, dlopen, in a guest files read over 9p).  Half
	# of that is the timers' slack (an hrtimer late by several periods, as
	# a guest's vCPU can be, fires once); fewer is samples dropped.
	samples=$(echo "$stats" | sed -n 's/.* 0=\([0-9]*\).*/\1/p')
	cpu_ms=$(cut -d' ' -f1 "$tmp/cpu_ms" 2> /dev/null)
	[ -n "$cpu_ms" ] || { fail "the workload did not write its CPU time"; cpu_ms=0; }
	want=$((cpu_ms * 99 / 2 / 1000))
	[ "${samples:-0}" -ge "$want" ] && [ "${samples:-0}" -gt 0 ] ||
		fail "only ${samples:-0} samples in $cpu_ms ms of CPU time at 99 Hz, not $want"
	echo "  ${samples:-0} samples in $cpu_ms ms of CPU time"
	# a recording that lost nothing says so in one line of its own
	grep -qE '^\[ perf bstack: [0-9]+ samples, .*, nothing lost \]$' "$tmp/record.err" ||
		fail "end-of-run line: $(grep -m1 '^\[ perf bstack' "$tmp/record.err")"
	n=$(grep -c '^\[ perf bstack' "$tmp/record.err")
	if [ "$n" -gt 2 ]; then
		# the details say which trouble it was: show them near the end
		grep '^\[ perf bstack' "$tmp/record.err" | tail -n +2 | cut -c 1-300
		fail "$n summary lines of a clean recording"
	fi
}

test_samples
test_build_ids
test_own_progs
test_time_order
test_offsets
test_reloaded_library "" 10
test_reloaded_library --ip-stacks 0
test_comms
test_tasks_merged
test_lost

[ $err = 0 ] && echo "perf bstack record test [Success]"
exit $err
