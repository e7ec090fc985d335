#!/bin/bash
# perf bstack record targets, drains, signals and errors (exclusive)
# SPDX-License-Identifier: GPL-2.0

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack record modes test"
chmod 755 "$tmp"

bstack_build_workload "$tmp" || exit 1
work=$tmp/bstack_work
child=$tmp/bstack_child
lib=$tmp/libbstack_lib.so
perf="perf --buildid-dir $tmp/cache"

script() {
	perf bstack script -i "$1" 2> /dev/null
}

# the samples the COUNT records of a perf bstack script output add up to
counts_sum() {
	awk '$1 == "COUNT" { n += $2 } END { print n + 0 }' "$1"
}

# the samples the recorder took, from the last STATS record of the output
samples_taken() {
	grep '^STATS ' "$1" | tail -n 1 | sed -n 's/.* 0=\([0-9]*\).*/\1/p'
}

test_interval() {
	echo "--interval drains periodically, each stack once, no sample lost"
	$perf bstack record -q --interval 300 -o "$tmp/int.data" -- \
		"$work" 2 "$child" "$lib" || { fail "interval record"; return; }
	script "$tmp/int.data" > "$tmp/int.script"
	drains=$(grep -c '^STATS ' "$tmp/int.script")
	[ "$drains" -ge 5 ] || fail "only $drains drains in 2 s at 300 ms"
	dups=$(awk '$1 == "STACK" { print $2 }' "$tmp/int.script" | sort | uniq -d | wc -l)
	[ "$dups" = 0 ] || fail "$dups stacks written twice"
	sum=$(counts_sum "$tmp/int.script")
	samples=$(samples_taken "$tmp/int.script")
	[ "$sum" = "$samples" ] || fail "counts add up to $sum, $samples samples taken"
	# every count refers to a stack written before it
	awk '$1 == "STACK" { seen[$2] = 1 }
	     $1 == "COUNT" && $9 != "0000000000000000" && !seen[$9] { bad++ }
	     END { exit bad > 0 }' "$tmp/int.script" || fail "count of an unwritten stack"
}

test_interval_aging() {
	echo "--interval forgets stacks unused for 16 drains and writes them again"
	$perf bstack record -v --interval 50 -o "$tmp/age.data" -- sh -c \
		"$work 1 $child $lib; sleep 1.5; $work 1 $child $lib" \
		> /dev/null 2> "$tmp/age.err" || { fail "aging record"; return; }
	grep -qE '^perf bstack: [1-9][0-9]* stack ids unused' "$tmp/age.err" ||
		fail "no stack id aged out"
	script "$tmp/age.data" > "$tmp/age.script"
	dups=$(awk '$1 == "STACK" { print $2 }' "$tmp/age.script" | sort | uniq -d | wc -l)
	[ "$dups" -gt 0 ] || fail "the second run did not rewrite the stacks of the first"
	# every count of both runs reaches the report
	$perf bstack report -i "$tmp/age.data" --stdio --no-children -g none \
		--sort sym 2> /dev/null > "$tmp/age.report"
	grep -q 'bstack_child_leaf' "$tmp/age.report" || fail "aged stacks do not resolve"
	sum=$(counts_sum "$tmp/age.script")
	grep -q "^# bstack: $sum samples" "$tmp/age.report" ||
		fail "report lost samples of rewritten stacks ($sum written)"
}

test_no_mmap_tracking() {
	echo "--no-mmap-tracking records no side-band and harvests live processes"
	$perf bstack record -v --no-mmap-tracking --interval 500 -o "$tmp/nomm.data" -- \
		"$work" 2 "$child" "$lib" 2> "$tmp/nomm.err" || { fail "record"; return; }
	# only the maps of the kernel and its modules (pid -1: a kernel with
	# bstack_testmod loaded has one more), and the workload's comm from
	# perf record
	perf report -D -i "$tmp/nomm.data" 2> /dev/null |
		grep -E '^[0-9]+ [0-9]+ 0x.* PERF_RECORD_(MMAP|MMAP2|COMM|FORK|EXIT)' |
		grep -v 'PERF_RECORD_MMAP -1/0: ' > "$tmp/nomm.side"
	n=$(grep -cv 'PERF_RECORD_COMM' "$tmp/nomm.side")
	[ "$n" = 0 ] || fail "$n mmap/task records"
	[ "$(grep -c 'PERF_RECORD_COMM' "$tmp/nomm.side")" -le 1 ] || fail "comm tracking"
	perf buildid-list -i "$tmp/nomm.data" | grep -q "^$(bstack_build_id "$work") $work\$" ||
		fail "the live workload's binary was not harvested"
	grep -q 'no mmap tracking' "$tmp/nomm.err" || fail "no summary line about exited binaries"
}

# the record types of perf.data $1 as written, not as perf report -D
# shows them after decompression: "type count" lines
raw_record_types() {
	python3 - "$1" <<'PY'
import collections, struct, sys
d = open(sys.argv[1], "rb").read()
start, size = struct.unpack_from("<QQ", d, 40)
pos, types = start, collections.Counter()
while pos + 8 <= start + size:
    typ, _, sz = struct.unpack_from("<IHH", d, pos)
    if sz < 8:
        break
    types[typ] += 1
    pos += sz
for typ, n in sorted(types.items()):
    print(typ, n)
PY
}

test_compressed() {
	if ! perf version --build-options 2>&1 | grep -qE "^ *zstd: \[ on"; then
		echo "-z: not tested, perf is built without zstd"
		return
	fi
	echo "-z compresses the drained records too, and the binaries are still cached"
	cp "$work" "$tmp/zwork"
	$perf bstack record -q -z --interval 300 --no-mmap-tracking -o "$tmp/z.data" -- \
		"$tmp/zwork" 2 "$child" "$lib" || { fail "record -z"; return; }
	rm "$tmp/zwork"
	raw_record_types "$tmp/z.data" > "$tmp/z.types"
	# 9: PERF_RECORD_SAMPLE, the payload; 81: PERF_RECORD_COMPRESSED
	grep -q '^9 ' "$tmp/z.types" && fail "$(grep '^9 ' "$tmp/z.types" | cut -d' ' -f2)" \
		"payload records written uncompressed"
	grep -q '^81 ' "$tmp/z.types" || fail "no compressed records"
	script "$tmp/z.data" > "$tmp/z.script"
	sum=$(counts_sum "$tmp/z.script")
	samples=$(samples_taken "$tmp/z.script")
	[ "$sum" -gt 0 ] && [ "$sum" = "$samples" ] ||
		fail "-z: counts add up to $sum, $samples samples taken"
	# perf record -z skips the build-id pass; with bstack it must not
	perf buildid-list -i "$tmp/z.data" | grep -q "^$(bstack_build_id "$work") $tmp/zwork\$" ||
		fail "-z: the workload is not in the build-id table"
	$perf bstack report -i "$tmp/z.data" --folded > "$tmp/z.folded" 2> /dev/null
	grep -q "^zwork;.*;main;bstack_work_middle;bstack_work_leaf " "$tmp/z.folded" ||
		fail "-z: the deleted workload's functions are not named"

	# a reader decompresses a record into a buffer of perf record's mmap
	# size, 68 KiB with -m 16: the drain of 50 processes' stacks is more
	$perf record --bstack=count=100000 -e dummy -z -m 16 -o "$tmp/zbig.data" -- \
		sh -c 'for i in $(seq 50); do /bin/true; done' > "$tmp/zbig.err" 2>&1 ||
		{ fail "record -z of 50 processes: $(tail -1 "$tmp/zbig.err")"; return; }
	$perf bstack report --stdio -i "$tmp/zbig.data" > "$tmp/zbig.out" 2>&1 ||
		fail "-z: a big drain cannot be read: $(grep -m1 -i 'fail\|error' "$tmp/zbig.out")"
}

test_pid_target() {
	echo "-p follows the process and its children, nothing else"
	# for 3 s of a workload that outlives perf's start, however slow
	# (under an emulator, make kernel-check, loading BPF takes seconds)
	"$work" 60 "$child" "$lib" &
	pid=$!
	$perf bstack record -q -p "$pid" -d 3 -o "$tmp/pid.data" || fail "record -p"
	kill "$pid"
	wait "$pid" 2> /dev/null
	script "$tmp/pid.data" > "$tmp/pid.script"
	comms=$(awk '$1 == "COUNT" { print $7 }' "$tmp/pid.script" | sort -u | tr '\n' ' ')
	[ "$comms" = "bstack_child bstack_work " ] || fail "comms of -p: '$comms'"
}

test_stack_kinds() {
	echo "--user-stack-only and -C"
	$perf bstack record -q --user-stack-only -C 0 -o "$tmp/user.data" -- \
		"$work" 1 "$child" "$lib" || { fail "record"; return; }
	script "$tmp/user.data" > "$tmp/user.script"
	grep -q '^STACK .* kernel ' "$tmp/user.script" &&
		fail "kernel stacks with --user-stack-only"
	awk '$1 == "COUNT" && $5 != 0 { bad++ } END { exit bad > 0 }' "$tmp/user.script" ||
		fail "samples of other CPUs than -C 0"
	grep -q '^COUNT ' "$tmp/user.script" || fail "no samples on CPU 0"
}

# All CPUs' jiffies, then those idle (idle and iowait), from /proc/stat
cpu_jiffies() {
	awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $5 + $6 }' /proc/stat
}

# --walk-cost (bench/kernel_cost.py) has the kernel walk each user stack
# twice, as IPs and with build-ids, and times both: the build-id walk does
# the IP walk's work and more.  The recording is the one without it.
test_walk_cost() {
	echo "--walk-cost times both walks of the same user stacks"
	$perf bstack record -F 999 --no-cfi --walk-cost -o "$tmp/walk.data" -- \
		"$work" 1 "$child" "$lib" 2> "$tmp/walk.err" ||
		{ fail "record --walk-cost: $(tail -n 1 "$tmp/walk.err")"; return; }
	line=$(grep 'each walked twice by the kernel' "$tmp/walk.err")
	ip=$(echo "$line" | sed -n 's/.* \([0-9]*\) ns per sample as IPs.*/\1/p')
	bid=$(echo "$line" | sed -n 's/.* \([0-9]*\) ns with build-ids.*/\1/p')
	[ "${ip:-0}" -gt 0 ] && [ "${bid:-0}" -gt "$ip" ] || fail "walk times: $line"
	$perf bstack report -i "$tmp/walk.data" --folded 2> /dev/null |
		grep -q ";main;bstack_work_middle;bstack_work_leaf" ||
		fail "no stacks through main in the recording"
	echo "--walk-cost with the unwind tables times each part of a sample"
	stat0=$(cpu_jiffies)
	$perf bstack record -F 999 --walk-cost -o "$tmp/walk-cfi.data" -- \
		"$work" 1 "$child" "$lib" 2> "$tmp/walk-cfi.err" ||
		{ fail "record --walk-cost: $(tail -n 1 "$tmp/walk-cfi.err")"; return; }
	stat1=$(cpu_jiffies)
	line=$(grep 'ns per sample by part: ' "$tmp/walk-cfi.err") ||
		{ fail "no parts of a sample: $(tail -n 1 "$tmp/walk-cfi.err")"; return; }
	# the parts take some of the time of the program that holds them
	total=$(sed -n 's/.*on_sample ran .* \([0-9]*\) ns per sample taken.*/\1/p' \
		"$tmp/walk-cfi.err")
	echo "$line" | awk -v total="${total:-0}" '{
		s = $0; sub(/.*by part: /, "", s); sub(/;.*/, "", s)
		n = split(s, part, ", ")
		for (i = 1; i <= n; i++) {
			k = split(part[i], w, " "); sum += w[k]
			if (w[1] == "walk") walk = w[k]
		}
		frames = $0; sub(/.*; /, "", frames); sub(/ user frames.*/, "", frames)
		exit !(n == 6 && walk > 0 && frames >= 3 && sum <= total)
	}' || fail "parts of a sample (on_sample ${total:-?} ns a sample): $line"
	# a command's recording does not run the program for the idle task of
	# the CPUs the command is not on: about one run a sample, not one a CPU.
	# Other work on the machine runs it too (filtered): judged where the
	# CPUs were idle 40 % of the time or more.
	runs=$(sed -n 's/.*on_sample ran \([0-9]*\) times.*/\1/p' "$tmp/walk-cfi.err")
	taken=$(sed -n 's/^\[ perf bstack: \([0-9]*\) samples,.*/\1/p' "$tmp/walk-cfi.err")
	idle=$(echo "$stat0 $stat1" | awk '{ d = $3 - $1; print d ? int(100 * ($4 - $2) / d) : 0 }')
	if [ "$idle" -lt 40 ]; then
		echo "  runs a sample not judged: the CPUs were idle $idle % of the time"
	elif [ "${taken:-0}" -eq 0 ] || [ $((${runs:-0} * 2)) -gt $((taken * 3)) ]; then
		fail "on_sample ran ${runs:-?} times for ${taken:-?} samples ($idle % idle)"
	fi
	if $perf bstack record --walk-cost --ip-stacks -o "$tmp/walk-ip.data" -- true \
		2> "$tmp/walk-ip.err"; then
		fail "--walk-cost with --ip-stacks accepted"
	fi
	grep -q -- '--walk-cost .*--ip-stacks' "$tmp/walk-ip.err" ||
		fail "--walk-cost with --ip-stacks: $(cat "$tmp/walk-ip.err")"
}

test_full_maps() {
	echo "full maps lose samples and stacks, counted per cause"
	# a process starting makes dozens of system calls, each from a stack of
	# its own, within a millisecond: maps of two entries fill before perf,
	# woken at the first, drains them
	$perf bstack record --map-entries 2 --count-entries 2 -e raw_syscalls:sys_enter \
		-o "$tmp/full.data" -- "$work" 1 "$child" "$lib" 2> "$tmp/full.err" ||
		{ fail "record"; return; }
	grep -qE 'lost [1-9][0-9]* samples \(counts map full\), [1-9][0-9]* user stacks \([1-9]' \
		"$tmp/full.err" || fail "end-of-run line: $(grep lost "$tmp/full.err")"
	stats=$(script "$tmp/full.data" | grep '^STATS ' | tail -n 1)
	echo "$stats" | grep -qE ' 4=[1-9]' || fail "user stack map full not counted: $stats"
	echo "$stats" | grep -qE ' 6=[1-9]' || fail "counts map full not counted: $stats"
	perf bstack report -i "$tmp/full.data" --stdio 2> /dev/null |
		grep -qE '^# bstack: lost [1-9]' || fail "report summary of losses"
}

test_drain_before_full() {
	echo "maps half filled since the last drain are drained: no sample lost"
	$perf bstack record -v -F 999 --count-entries 64 -o "$tmp/fill.data" -- \
		"$work" 2 "$child" "$lib" 2> "$tmp/fill.err" || { fail "record"; return; }
	grep -q 'lost 0 samples (counts map full)' "$tmp/fill.err" ||
		fail "end-of-run line: $(grep lost "$tmp/fill.err")"
	grep -qE '^\[ perf bstack: [1-9][0-9]* of [0-9]+ drains before the maps filled' \
		"$tmp/fill.err" || fail "no drain before the maps filled"
	script "$tmp/fill.data" > "$tmp/fill.script"
	counts=$(grep -c '^COUNT ' "$tmp/fill.script")
	# the workload takes 120-150 distinct counts in 2 s
	[ "$counts" -gt 64 ] || fail "only $counts counts: the map never had to be drained"
	sum=$(counts_sum "$tmp/fill.script")
	samples=$(samples_taken "$tmp/fill.script")
	[ "$sum" = "$samples" ] || fail "counts add up to $sum, $samples samples taken"
}

# voluntary context switches of all the threads of process $1
wakeups() {
	cat /proc/"$1"/task/*/status 2> /dev/null |
		awk '/^voluntary_ctxt_switches/ { n += $2 } END { print n + 0 }'
}

# The BPF program wakes perf when its maps need a drain; the unwind table
# thread sleeps until asked: an idle recording is not polled ten times a
# second by each (about 20 wake-ups a second before).
test_idle_wakeups() {
	echo "an idle recording wakes perf about once a second"
	$perf bstack record -o "$tmp/idle.data" -- sleep 5 2> "$tmp/idle.err" &
	rec=$!
	sleep 2
	before=$(wakeups $rec)
	sleep 2
	after=$(wakeups $rec)
	wait $rec || fail "record: $(tail -1 "$tmp/idle.err")"
	echo "  $((after - before)) wake-ups in 2 s"
	[ "$((after - before))" -le 10 ] || fail "$((after - before)) wake-ups in 2 s of sleep"
}

# Counts are taken out of the map in batches of a thousand: a drain of
# many more, one count per short-lived process, must have them all.
test_drain_batches() {
	echo "a drain of thousands of counts takes every one"
	$perf bstack record -F 999 -o "$tmp/many.data" -- \
		sh -c 'for i in $(seq 5000); do /bin/true; done' 2> "$tmp/many.err" ||
		{ fail "record"; cat "$tmp/many.err"; return; }
	script "$tmp/many.data" > "$tmp/many.script"
	drains=$(grep -c '^STATS ' "$tmp/many.script")
	counts=$(grep -c '^COUNT ' "$tmp/many.script")
	echo "  $counts counts in $drains drains"
	[ "$counts" -gt $((2 * 1024 * drains)) ] ||
		fail "only $counts counts in $drains drains: no drain of several batches"
	sum=$(counts_sum "$tmp/many.script")
	samples=$(samples_taken "$tmp/many.script")
	[ "$sum" = "$samples" ] || fail "counts add up to $sum, $samples samples taken"
	dups=$(awk '$1 == "COUNT" { print $3, $5, $7, $9, $11, $NF }' "$tmp/many.script" |
	       sort | uniq -d | wc -l)
	[ "$dups" = 0 ] || fail "$dups counts written twice"
}

# the BPF programs perf holds while recording: "TYPE COUNT" per bpf_prog_type
loaded_programs() {
	local out=$1 pid _

	shift
	rm -f "$tmp/started"
	$perf bstack record -q -o "$out" "$@" -- sh -c "touch $tmp/started; sleep 1" \
		> /dev/null 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		[ -e "$tmp/started" ] && break
		sleep 0.1
	done
	grep -h '^prog_type:' /proc/$pid/fdinfo/* 2> /dev/null |
		awk '{ n[$2]++ } END { for (t in n) print t, n[t] }'
	wait $pid
}

test_programs_loaded() {
	echo "only the BPF programs with events to run for are loaded"
	# bpf_prog_type: 2 kprobe/uprobe, 5 tracepoint, 7 perf_event
	loaded_programs "$tmp/progs.data" > "$tmp/progs.sample"
	grep -qx '7 1' "$tmp/progs.sample" || fail "sampling: no perf_event program"
	grep -q '^5 ' "$tmp/progs.sample" && fail "sampling: a tracepoint program"
	# dlopen()'s, for the unwind tables; none for --uprobe
	grep -qx '2 1' "$tmp/progs.sample" ||
		fail "sampling: uprobe programs: $(grep '^2 ' "$tmp/progs.sample")"
	loaded_programs "$tmp/progs.data" -e sched:sched_process_fork > "$tmp/progs.tp"
	grep -qx '5 1' "$tmp/progs.tp" || fail "tracepoint: no tracepoint program"
	grep -q '^7 ' "$tmp/progs.tp" && fail "tracepoint: a perf_event program"
}

test_signal() {
	echo "SIG$1 mid-run leaves a complete perf.data"
	$perf bstack record -q -a -o "$tmp/sig.data" 2> "$tmp/sig.err" &
	pid=$!
	bstack_wait_for_file "$tmp/sig.data"
	"$work" 1 "$child" "$lib"
	kill -"$1" "$pid"
	wait "$pid"
	st=$?
	# perf record ends with the signal that stopped it, once the file is complete
	[ $st = $((128 + $(kill -l "$1"))) ] || fail "exit status $st after SIG$1"
	perf report -D -i "$tmp/sig.data" > "$tmp/sig.dump" 2>&1 ||
		fail "perf report -D after SIG$1"
	grep -q 'PERF_RECORD_SAMPLE' "$tmp/sig.dump" || fail "no samples after SIG$1"
	script "$tmp/sig.data" | grep -q '^STATS ' || fail "no STATS after SIG$1"
}

test_sigkill() {
	echo "SIGKILL leaves a file that report rejects as truncated"
	$perf bstack record -q -a -o "$tmp/kill.data" 2> /dev/null &
	pid=$!
	bstack_wait_for_file "$tmp/kill.data"
	sleep 0.5
	kill -KILL "$pid"
	wait "$pid" 2> /dev/null
	if perf bstack report --stdio -i "$tmp/kill.data" > /dev/null 2> "$tmp/kill.err"; then
		fail "a killed record was reported"
	fi
	grep -q 'is truncated' "$tmp/kill.err" || fail "killed record: $(head -1 "$tmp/kill.err")"
}

test_full_disk() {
	echo "a full disk gives a clear error and no file that looks complete"
	mkdir -p "$tmp/small"
	# one page: smaller than any perf.data, however few samples it has
	if ! mount -t tmpfs -o size=4k tmpfs "$tmp/small" 2> /dev/null; then
		fail "cannot mount a small tmpfs"
		return
	fi
	if $perf bstack record -o "$tmp/small/full.data" -- "$work" 1 "$child" "$lib" \
		2> "$tmp/full.err"; then
		fail "record onto a full disk succeeded"
	fi
	grep -q 'No space left on device' "$tmp/full.err" ||
		fail "full disk: $(head -1 "$tmp/full.err")"
	perf bstack report --stdio -i "$tmp/small/full.data" > /dev/null 2> "$tmp/full.rep" &&
		fail "the file of a full disk was reported"
	grep -q 'is truncated' "$tmp/full.rep" ||
		fail "full disk report: $(head -1 "$tmp/full.rep")"
	umount "$tmp/small"
}

test_errors() {
	echo "bad input gives a clear error, a non-zero exit and no perf.data"
	cd "$tmp" || return
	if setpriv --reuid=65534 --regid=65534 --clear-groups \
		perf bstack record -o "$tmp/nobody.data" -- true 2> "$tmp/nobody.err"; then
		fail "unprivileged record succeeded"
	fi
	grep -q 'CAP_BPF and CAP_PERFMON' "$tmp/nobody.err" ||
		fail "unprivileged error: $(cat "$tmp/nobody.err")"
	[ -e "$tmp/nobody.data" ] && fail "unprivileged record left a file"

	if perf bstack record -e no_such_event -o "$tmp/bad.data" -- true 2> "$tmp/bad.err"; then
		fail "bad event accepted"
	fi
	grep -q "no_such_event" "$tmp/bad.err" || fail "bad event not named"

	if perf bstack record -p 999999999 -o "$tmp/bad.data" 2> "$tmp/bad.err"; then
		fail "unknown pid accepted"
	fi
	if perf bstack record -o "$tmp/bad.data" -- /no/such/command 2> "$tmp/bad.err"; then
		fail "missing command accepted"
	fi

	# a zombie has a pid but no events: perf record's open fails after ours
	sh -c 'sleep 0 & exec sleep 10' &
	zparent=$!
	sleep 0.5
	zombie=$(ps -o pid= --ppid "$zparent" | tr -d ' ')
	perf bstack record -p "$zombie" -o "$tmp/zombie.data" > "$tmp/zombie.err" 2>&1
	st=$?
	kill "$zparent"
	[ "$st" = 0 ] && fail "record -p of a zombie succeeded"
	[ "$st" -gt 128 ] && [ "$st" -lt 160 ] && fail "record -p of a zombie crashed (exit $st)"
	grep -q 'No such process' "$tmp/zombie.err" ||
		fail "record -p of a zombie: $(head -2 "$tmp/zombie.err")"
	[ -e "$tmp/bad.data" ] && perf report -i "$tmp/bad.data" --stdio > /dev/null 2>&1 &&
		perf bstack script -i "$tmp/bad.data" 2> /dev/null | grep -q '^STATS' &&
		fail "a failed record left a perf.data that looks complete"
	cd - > /dev/null || return
}

# -z with --switch-output: every file starts its own zstd streams, perf
# record's and bstack's, so that each decompresses by itself
test_switch_output_compressed() {
	echo "-z --switch-output: each file decompresses by itself"
	mkdir "$tmp/zrot" "$tmp/zrot-g"
	perf record -q -z --switch-output=1s -e cpu-clock -g -o "$tmp/zrot-g/perf.data" -- \
		"$work" 3 "$child" "$lib" 2> /dev/null || { fail "perf record -z"; return; }
	$perf bstack record -q -z --switch-output=1s -o "$tmp/zrot/perf.data" -- \
		"$work" 3 "$child" "$lib" || { fail "perf bstack record -z"; return; }
	for f in "$tmp"/zrot-g/perf.data.* "$tmp"/zrot/perf.data.*; do
		perf report -i "$f" --stdio > /dev/null 2> "$f.err"
		grep -q "decompress" "$f.err" &&
			fail "perf report of ${f#"$tmp"/}: $(grep -m1 decompress "$f.err")"
	done
	set -- "$tmp"/zrot/perf.data.*
	[ $# -ge 2 ] || fail "bstack -z --switch-output wrote $# files"
}

# perf record --bstack=CONFIG alone, as perf bstack record runs it
test_record_config() {
	echo "perf record --bstack=CONFIG takes its settings, and refuses bad ones"
	$perf record -q --bstack=event=cpu-clock,freq=199,max-stack=32,user-stack-only \
		-e dummy -o "$tmp/cfg.data" -- "$work" 1 "$child" "$lib" 2> "$tmp/cfg.err" ||
		{ fail "record --bstack=CONFIG: $(tail -1 "$tmp/cfg.err")"; return; }
	# maps resized to max-stack are created as they are, without retries
	grep -q '^libbpf' "$tmp/cfg.err" && fail "libbpf: $(grep -m1 '^libbpf' "$tmp/cfg.err")"
	script "$tmp/cfg.data" > "$tmp/cfg.script"
	# user stacks only, at 199 Hz for 1 s, none deeper than 32 frames
	grep -q '^STACK .* kernel' "$tmp/cfg.script" && fail "kernel stacks with user-stack-only"
	awk '$1 == "STACK" && $4 > 32 { bad = 1 } END { exit bad }' "$tmp/cfg.script" ||
		fail "a stack deeper than max-stack=32"
	samples=$(samples_taken "$tmp/cfg.script")
	# the workload is on CPU about half of its second
	[ "${samples:-0}" -ge 50 ] || fail "${samples:-0} samples in 1 s at freq=199"
	if perf record -q --bstack=freq=99,no-such-setting -e dummy -o "$tmp/cfg2.data" \
			-- true 2> "$tmp/cfg2.err"; then
		fail "a bad setting was accepted"
	fi
	grep -q "bad setting 'no-such-setting'" "$tmp/cfg2.err" ||
		fail "bad setting not named: $(head -1 "$tmp/cfg2.err")"
}

# --switch-output: each file holds the stacks, events and counters of its
# own counts, and reports alone; --switch-max-files keeps the last ones
test_switch_output() {
	echo "--switch-output writes files that each report whole stacks"
	whole='^bstack_nofp;.*;main;nofp_outer;nofp_sort;[^;]*qsort[^;]*;(.*;)?nofp_compare [0-9]+$'
	mkdir "$tmp/rot"
	$perf bstack record -F 499 --switch-output=1s --switch-max-files 3 \
		-o "$tmp/rot/perf.data" -- "$tmp/bstack_nofp" 4 2> "$tmp/rot.err" ||
		{ fail "record --switch-output"; cat "$tmp/rot.err"; return; }
	set -- "$tmp"/rot/perf.data.*
	[ $# = 3 ] || fail "--switch-max-files 3 left $# files"
	all=0
	taken_all=0
	last=$(ls "$@" | tail -n 1)	# what came after the last switch: a moment
	for f in "$@"; do
		$perf bstack report -i "$f" --stdio --header-only > "$f.header" 2> /dev/null
		grep -q 'counts of missing stacks' "$f.header" &&
			fail "$(basename "$f") names stacks it does not hold"
		$perf bstack report -i "$f" --folded > "$f.folded" 2> /dev/null ||
			fail "perf bstack report of $(basename "$f")"
		pct=$(bstack_folded_share "$f.folded" 'nofp_compare [0-9]+$' "$whole")
		script "$f" > "$f.script"
		n=$(counts_sum "$f.script")
		echo "  $(basename "$f"): $n samples, $pct% of nofp_compare's reach main"
		if [ "$f" != "$last" ]; then
			[ "$n" -gt 50 ] || fail "$(basename "$f") has $n samples"
			[ "$pct" -ge 90 ] ||
				fail "$(basename "$f"): $pct% of nofp_compare's stacks whole"
		fi
		all=$((all + n))
		taken_all=$((taken_all + $(samples_taken "$f.script")))
	done
	# a sample taken while the maps switch may count in the next file
	[ "$taken_all" = "$all" ] ||
		fail "the files count $taken_all samples taken, and hold $all"
	$perf bstack merge -o "$tmp/rot.merged" "$@" 2> /dev/null ||
		{ fail "merge of the files"; return; }
	n=$(script "$tmp/rot.merged" | counts_sum /dev/stdin)
	[ "$n" = "$all" ] || fail "the merge of the files has $n samples, not $all"
}

test_record_config
test_interval
test_switch_output
test_switch_output_compressed
test_compressed
test_interval_aging
test_no_mmap_tracking
test_pid_target
test_stack_kinds
test_walk_cost
test_full_maps
test_drain_before_full
test_idle_wakeups
test_drain_batches
test_programs_loaded
test_signal INT
test_signal TERM
test_sigkill
test_full_disk
test_errors

[ $err = 0 ] && echo "perf bstack record modes test [Success]"
exit $err
