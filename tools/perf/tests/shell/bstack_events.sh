#!/bin/bash
# perf bstack record -e tracepoints, uprobes and off-CPU time (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# A workload that calls a function an exact number of times, forks and
# execs children from known functions and sleeps in a known function.
# Each event's stacks must resolve to those functions after the workload's
# binary is deleted, through the build-id cache alone.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_feature libslang
bstack_require_tools tmux

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack events test"
cache=$tmp/cache
calls=1234
children=3
sleep_ms=500
group=bstack_test$$

bstack_test_cleanup() {
	perf probe -q -d "$group:*" 2> /dev/null
	tmux -L "bstack$$" kill-server 2> /dev/null
}

bstack_build_workload "$tmp" || exit 1
bin=$tmp/bstack_events
uprobe="uprobe:bstack_events:bstack_events_target"

echo "Recording tracepoints, a uprobe and off-CPU time of the workload"
perf --buildid-dir "$cache" bstack record -q -o "$tmp/ev.data" \
	-e syscalls:sys_enter_execve -e sched:sched_process_fork \
	--uprobe "$bin:bstack_events_target" --off-cpu -- \
	"$bin" $calls $children $sleep_ms > "$tmp/rec.out" 2>&1 ||
	{ fail "record: $(tail -1 "$tmp/rec.out")"; exit 1; }
cp "$bin" "$tmp/bstack_events.kept"
rm "$bin"	# from here on, only the build-id cache has it
perf --buildid-dir "$cache" bstack report -i "$tmp/ev.data" --folded > "$tmp/folded" 2>&1 ||
	fail "report --folded: $(tail -1 "$tmp/folded")"

test_uprobe() {
	echo "a uprobe counts each of the $calls calls, with its callers"
	n=$(bstack_folded_sum "$tmp/folded" \
	    "^$uprobe;bstack_events;.*;main;bstack_events_caller;bstack_events_target ")
	[ "$n" = $calls ] || fail "uprobe: $n hits from bstack_events_caller, not $calls"
	n=$(bstack_folded_sum "$tmp/folded" "^$uprobe;")
	[ "$n" = $calls ] || fail "uprobe: $n hits in all, not $calls"
}

# Linux 6.18 turns a uprobe on a 5-byte nop into a call to a trampoline
# after its first hit; the trampoline's system call rebuilds the task's
# registers as the trap would have left them, and the walk starts there
# (elsewhere than x86_64 the function is an ordinary one)
test_uprobe_nop5() {
	echo "a uprobe on a 5-byte nop counts each of the $calls calls, with its callers"
	perf --buildid-dir "$cache" bstack record -q -o "$tmp/nop5.data" \
		--uprobe "$tmp/bstack_events.kept:bstack_events_nop5" -- \
		"$tmp/bstack_events.kept" $calls 0 0 > "$tmp/nop5.out" 2>&1 ||
		{ fail "record of a uprobe on a nop: $(tail -1 "$tmp/nop5.out")"; return; }
	perf --buildid-dir "$cache" bstack report -i "$tmp/nop5.data" --folded \
		> "$tmp/nop5.folded" 2>&1 || fail "report --folded of a uprobe on a nop"
	n=$(bstack_folded_sum "$tmp/nop5.folded" \
	    "^bstack_events[^;]*;.*;main;bstack_events_caller;bstack_events_nop5 ")
	[ "$n" = $calls ] || fail "uprobe on a nop: $n hits from bstack_events_caller," \
		"not $calls: $(head -3 "$tmp/nop5.folded")"
}

# perf bstack asks the kernel for as many frames as it has seen so far,
# plus a margin: a stack that fills that is taken again, whole; and one
# taken after it, shallower, has none of its frames
test_deep_stack() {
	depth=60
	echo "a uprobe $depth frames of recursion deep has all its callers, the forks after none"
	perf --buildid-dir "$cache" bstack record -q -o "$tmp/deep.data" \
		--uprobe "$tmp/bstack_events.kept:bstack_events_target" \
		-e sched:sched_process_fork -- \
		"$tmp/bstack_events.kept" 3 2 0 $depth > "$tmp/deep.out" 2>&1 ||
		{ fail "record of a deep stack: $(tail -1 "$tmp/deep.out")"; return; }
	perf --buildid-dir "$cache" bstack report -i "$tmp/deep.data" --folded \
		> "$tmp/deep.folded" 2>&1 || fail "report --folded of a deep stack"
	n=$(bstack_folded_sum "$tmp/deep.folded" \
	    ";main(;bstack_events_deep){$depth};bstack_events_caller;bstack_events_target ")
	[ "$n" = 3 ] || fail "deep stack: $n of 3 hits with $depth levels of recursion:" \
		"$(awk '{ print NF ? gsub(/;/, ";") " frames" : "" }' "$tmp/deep.folded" | sort -u)"
	# below main, by frame pointer: __libc_start_call_main; with unwind
	# tables, once user space loaded them: _start and __libc_start_main too
	fork_site="main;bstack_events_fork_site;"
	n=$(bstack_folded_sum "$tmp/deep.folded" \
	    "^sched:sched_process_fork;bstack_events[^;]*;([^;]*;){0,3}$fork_site")
	[ "$n" = 2 ] || fail "shallow stacks after a deep one: $n of 2 forks with only" \
		"their own frames: $(grep "$fork_site" "$tmp/deep.folded" | cut -c1-200)"
}

test_execve() {
	echo "sys_enter_execve is taken in each child, at the exec site"
	site="main;bstack_events_fork_site;bstack_events_exec_site"
	n=$(bstack_folded_sum "$tmp/folded" "^syscalls:sys_enter_execve;bstack_events;.*;$site;")
	[ "$n" = $children ] || fail "execve: $n stacks from bstack_events_exec_site, not $children"
}

test_fork() {
	echo "sched_process_fork is taken in the parent, at the fork site"
	n=$(bstack_folded_sum "$tmp/folded" \
	    "^sched:sched_process_fork;bstack_events;.*;main;bstack_events_fork_site;")
	[ "$n" = $children ] || fail "fork: $n stacks from bstack_events_fork_site, not $children"
}

test_off_cpu() {
	echo "off-CPU time: the sleeping thread's ${sleep_ms} ms, in nanoseconds"
	ns=$(bstack_folded_sum "$tmp/folded" \
	     "^offcpu-time;bstack_events;.*;bstack_events_sleeper;bstack_events_sleep_site;")
	# blocked at least as long as asked, and woken up within as long again
	if [ "$ns" -lt $((sleep_ms * 1000000)) ] || [ "$ns" -gt $((2 * sleep_ms * 1000000)) ]; then
		fail "off-CPU: $ns ns in bstack_events_sleep_site, not about ${sleep_ms} ms"
	fi
}

test_report_event() {
	echo "report --event keeps one event, and names those there are when it is not one"
	perf --buildid-dir "$cache" bstack report -i "$tmp/ev.data" --stdio \
		--event "$uprobe" > "$tmp/one" 2>&1 || fail "report --event: exit $?"
	grep -q "of event '$uprobe'" "$tmp/one" || fail "report --event: no $uprobe section"
	grep -q "of event 'offcpu-time'" "$tmp/one" && fail "report --event: other events shown"
	grep -q 'bstack_events_target' "$tmp/one" || fail "report --event: the uprobe's stacks"
	if perf --buildid-dir "$cache" bstack report -i "$tmp/ev.data" --stdio \
		--event sched:no_such_event > "$tmp/none" 2>&1; then
		fail "report --event of a missing event succeeded"
	fi
	grep -q "no event 'sched:no_such_event'; it has .*'offcpu-time'" "$tmp/none" ||
		fail "report --event of a missing event: $(head -1 "$tmp/none")"
}

test_tui_events() {
	echo "the TUI opens on the list of the recorded events"
	tmux -L "bstack$$" new-session -d -s tui -x 200 -y 50 \
		"$(command -v perf) --buildid-dir $cache bstack report -i $tmp/ev.data; sleep 90" ||
		{ fail "tmux"; return; }
	for _ in $(seq 120); do	# 60 s: an ASan perf is slow to start
		sleep 0.5
		tmux -L "bstack$$" capture-pane -p -t tui > "$tmp/tui"
		grep -q 'offcpu-time' "$tmp/tui" && break
		if grep -q 'Press any key' "$tmp/tui"; then
			tmux -L "bstack$$" send-keys -t tui Escape
		fi
	done
	tmux -L "bstack$$" kill-server
	for ev in syscalls:sys_enter_execve sched:sched_process_fork "$uprobe" offcpu-time; do
		grep -q "$ev" "$tmp/tui" || fail "TUI: $ev not in the list of events"
	done
}

test_perf_probe() {
	echo "a uprobe made by perf probe, given with -e, counts each call"
	cp "$tmp/bstack_events.kept" "$bin"
	if ! perf probe -q -x "$bin" -a "$group:target=bstack_events_target" \
		2> "$tmp/probe.err"; then
		fail "perf probe: $(head -1 "$tmp/probe.err")"
		return
	fi
	perf --buildid-dir "$cache" bstack record -q -o "$tmp/probe.data" -e "$group:target" -- \
		"$bin" $calls 0 1 > "$tmp/rec.out" 2>&1 ||
		{ fail "record -e $group:target: $(tail -1 "$tmp/rec.out")"; return; }
	perf --buildid-dir "$cache" bstack report -i "$tmp/probe.data" --folded \
		> "$tmp/probe.folded" 2>&1
	n=$(bstack_folded_sum "$tmp/probe.folded" "bstack_events_caller;bstack_events_target ")
	[ "$n" = $calls ] || fail "-e $group:target: $n hits, not $calls"
	perf probe -q -d "$group:*"
}

# $1 what, $2 the message expected, then the record options
test_bad_event() {
	what=$1 msg=$2
	shift 2
	echo "$what: a clear error"
	if perf --buildid-dir "$cache" bstack record -o "$tmp/bad.data" "$@" -- true \
		> "$tmp/bad.out" 2>&1; then
		fail "$what: record succeeded"
	fi
	grep -q -- "$msg" "$tmp/bad.out" || fail "$what: $(grep -v '^ *$' "$tmp/bad.out" | head -2)"
}

test_uprobe_storm() {
	echo "sampling at 999 Hz inside a uprobe storm keeps each stack to its hit"
	n=1000000
	perf --buildid-dir "$cache" bstack record -o "$tmp/storm.data" -F 999 \
		-e cpu-clock --uprobe "$tmp/bstack_events.kept:bstack_events_target" -- \
		"$tmp/bstack_events.kept" $n 0 0 > /dev/null 2> "$tmp/storm.err" ||
		{ fail "storm record: $(tail -1 "$tmp/storm.err")"; return; }
	perf --buildid-dir "$cache" bstack report -i "$tmp/storm.data" --folded \
		> "$tmp/storm.folded" 2> /dev/null
	# samples did land in the uprobe program: its buffers were kept apart
	nested=$(perf bstack script -i "$tmp/storm.data" 2> /dev/null |
		 sed -n 's/^STATS .* 21=\([0-9]*\).*/\1/p' | tail -n 1)
	[ "${nested:-0}" -gt 0 ] || fail "no sample interrupted the uprobe program"
	hits=$(bstack_folded_sum "$tmp/storm.folded" "^uprobe:[^;]*;bstack_events[^;]*;")
	[ "$hits" = $n ] || fail "$hits uprobe hits, not $n"
	# a sample's stack written over the hit's would bring the timer interrupt
	bad=$(bstack_folded_sum "$tmp/storm.folded" \
	      "^uprobe:[^;]*;.*(hrtimer_interrupt|perf_swevent_hrtimer|sysvec_apic_timer)")
	[ "$bad" = 0 ] || fail "$bad uprobe hits hold a sample's kernel stack"
	bad=$(grep -E "^uprobe:" "$tmp/storm.folded" | grep -vcE \
	      ";main;bstack_events_caller;bstack_events_target[; ]")
	[ "$bad" = 0 ] || fail "$bad uprobe stacks are not the call site's"
}

# a hit with the registers of the CPU's last walk is not walked again if
# the words that walk read are still there: half the twins' hits are
# recalled, and none takes the other twin's stack
test_recalled_walks() {
	n=200000
	echo "$n uprobe hits from two callers of the same code, two by two, each has its own"
	perf --buildid-dir "$cache" bstack record -o "$tmp/twins.data" \
		--uprobe "$tmp/bstack_events.kept:bstack_events_target" -- \
		"$tmp/bstack_events.kept" $n 0 0 twins > /dev/null 2> "$tmp/twins.err" ||
		{ fail "record of the twins: $(tail -1 "$tmp/twins.err")"; return; }
	perf --buildid-dir "$cache" bstack report -i "$tmp/twins.data" --folded \
		> "$tmp/twins.folded" 2> /dev/null
	for twin in a b; do
		hits=$(bstack_folded_sum "$tmp/twins.folded" \
		       ";main;bstack_events_twins;bstack_events_twin_$twin;bstack_events_target ")
		[ "$hits" = $((n / 2)) ] || fail "$hits hits from bstack_events_twin_$twin," \
			"not $((n / 2)): $(head -3 "$tmp/twins.folded")"
	done
	recalled=$(perf bstack script -i "$tmp/twins.data" 2> /dev/null |
		   sed -n "s/^  user stacks recalled from the CPU's last walk *\([0-9]*\)$/\1/p" |
		   tail -n 1)
	[ "${recalled:-0}" -ge $((n * 2 / 5)) ] ||
		fail "${recalled:-no} of $n hits recalled from the last walk, not about half"
}

# Each drain takes the stacks it wrote out of the maps, and a rotated file
# holds only the stacks its own counts name: the hits of one loop, nearly
# all recalled from the last walk, have their stack in every file.  A
# recall after a drain stores its stack again: no drain finds a count
# whose stack is gone from the maps (a stack stored again later in the
# file would hide it from the report)
test_recalled_rotated() {
	n=2000000
	echo "$n uprobe hits of one stack, recalled, in files rotated every second"
	mkdir "$tmp/rot"
	perf --buildid-dir "$cache" bstack record --interval 20 --switch-output=1s \
		-o "$tmp/rot/perf.data" \
		--uprobe "$tmp/bstack_events.kept:bstack_events_target" -- \
		"$tmp/bstack_events.kept" $n 0 0 > /dev/null 2> "$tmp/rot.err" ||
		{ fail "record: $(tail -1 "$tmp/rot.err")"; return; }
	grep -q 'vanished' "$tmp/rot.err" && fail "$(grep -m1 vanished "$tmp/rot.err")"
	set -- "$tmp"/rot/perf.data.*
	[ $# -ge 2 ] || fail "the recording was written in $# files, not several"
	for f in "$@"; do
		perf --buildid-dir "$cache" bstack report -i "$f" --folded 2> /dev/null
	done > "$tmp/rot.folded"
	hits=$(bstack_folded_sum "$tmp/rot.folded" \
	       ";main;bstack_events_caller;bstack_events_target ")
	[ "$hits" = $n ] || fail "$hits of $n hits with their stack in $# files:" \
		"$(grep -v ';bstack_events_target ' "$tmp/rot.folded" | head -2)"
}

# the kernel stack at a system call's entry tracepoint is walked once per
# user stack and remembered, also across drains, which take it out of
# its map: every hit still has the entry path under its own user stack
test_syscall_entry() {
	n=20000
	echo "dd's $n reads and writes each have their user stack and the entry path"
	perf --buildid-dir "$cache" bstack record -v -o "$tmp/sys.data" --interval 100 \
		-e syscalls:sys_enter_read -e syscalls:sys_enter_write -- \
		dd if=/dev/zero of=/dev/null bs=1 count=$n > /dev/null 2> "$tmp/sys.err" ||
		{ fail "record of dd: $(tail -1 "$tmp/sys.err")"; return; }
	perf --buildid-dir "$cache" bstack report -i "$tmp/sys.data" --folded \
		> "$tmp/sys.folded" 2> /dev/null
	for ev in read write; do
		all=$(bstack_folded_sum "$tmp/sys.folded" "^syscalls:sys_enter_$ev;dd;")
		# dd is stripped: its own frames have no names
		entry=$(bstack_folded_sum "$tmp/sys.folded" \
			"^syscalls:sys_enter_$ev;dd;([^;]+;)+entry_SYSCALL_64[^;]*;do_syscall_64;")
		[ "$all" -ge $n ] || fail "$all hits of sys_enter_$ev, not $n or more"
		[ "$entry" = "$all" ] || fail "$entry of $all sys_enter_$ev hits have user" \
			"frames and the entry path: $(grep -m1 -v do_syscall_64 "$tmp/sys.folded")"
	done
	recalled=$(sed -n 's/.* \([0-9]*\) kernel stacks at system call entries known.*/\1/p' \
		   "$tmp/sys.err")
	[ "${recalled:-0}" -gt $n ] ||
		fail "${recalled:-no} kernel stacks of $((2 * n)) hits not walked again"
}

test_uprobe
test_uprobe_nop5
test_uprobe_storm
test_recalled_walks
test_recalled_rotated
test_syscall_entry
test_deep_stack
test_execve
test_fork
test_off_cpu
test_report_event
test_tui_events
test_perf_probe
test_bad_event "an unknown tracepoint" "cannot use event 'sched:no_such_tracepoint'" \
	-e sched:no_such_tracepoint
test_bad_event "a tracepoint group this kernel lacks" "cannot use event 'no_such_group:x'" \
	-e no_such_group:x
test_bad_event "a uprobe on a missing function" \
	"no function 'no_such_function' in $tmp/bstack_events.kept" \
	--uprobe "$tmp/bstack_events.kept:no_such_function"
test_bad_event "a uprobe on a missing binary" "cannot read $tmp/missing" \
	--uprobe "$tmp/missing:main"
test_bad_event "a uprobe without a function" "give it as BINARY:FUNCTION" \
	--uprobe "$tmp/bstack_events.kept"

[ $err = 0 ] && echo "perf bstack events test [Success]"
exit $err
