#!/bin/bash
# perf bstack keeps unwind tables within --cfi-rows (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# --cfi-rows bounds the tables in use, not every table a recording sees.
# Debian's python3, perl and gawk, run one after another, take more rows
# in all than the recording has: the tables of a program that exited make
# room for the next, and each keeps its stacks whole.  A program that
# sleeps has its tables evicted for one that runs, and loaded again when
# it runs again.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_tools python3 perl gawk

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack tables test"
perf="perf --buildid-dir $tmp/cache"
py=/usr/bin/python3
[ -x $py ] || py=$(command -v python3)

# Debian 12's python3 takes 105,000 rows with libc's and the dynamic
# linker's (25,000), perl 70,000, gawk 69,000, the sh that runs them
# 8,000 more: in 140,000 rows any one fits with room to spare, python3
# and another do not; in 120,000, python3 asleep leaves too few for perl
rows=140000
# about a second each
py_busy="x = 0
for i in range(15000000): x += i * i"
perl_busy='my $x = 0; $x += $_ * $_ for 1 .. 40000000'
gawk_busy='BEGIN { for (i = 0; i < 20000000; i++) x += i * i }'

# "comm pct" for each comm of folded stacks $1 with 20 samples or more: the
# share of samples whose stack reaches the process's first frames
whole_by_comm() {
	awk '{ n = $NF; split($0, f, ";"); tot[f[1]] += n
	       if ($0 ~ /;__libc_start_call_main;/) ok[f[1]] += n }
	     END { for (c in tot) if (tot[c] >= 20) print c, int(100 * ok[c] / tot[c]) }' "$1"
}

# the count before the words $2 in the tables' summary line of file $1
summary_count() {
	grep 'unwind tables:' "$1" | sed -n "s/.* \([0-9][0-9]*\) $2.*/\1/p"
}

# record sh -c $2 in ${3:-$rows} rows into $tmp/$1.data, its messages in $tmp/$1.err
record_in_rows() {
	$perf bstack record -v -F 499 --cfi-rows "${3:-$rows}" -o "$tmp/$1.data" -- sh -c "$2" \
		2> "$tmp/$1.err" || { fail "record"; cat "$tmp/$1.err"; return 1; }
	grep 'unwind tables:' "$tmp/$1.err" | sed 's/^/  /'
}

# at least $3 of the tables' count $2 in the summary of file $1, or fail with $4
count_at_least() {
	n=$(summary_count "$1" "$2")
	[ "${n:-0}" -ge "$3" ] || fail "${n:-no} $4"
}

check_whole() {
	$perf bstack report -i "$1" --folded > "$1.folded" 2> /dev/null
	whole_by_comm "$1.folded" > "$1.whole"
	for comm in $2; do
		pct=$(awk -v c="$comm" '$1 == c { print $2 }' "$1.whole")
		echo "  $comm: ${pct:-no}% whole"
		[ "${pct:-0}" -ge 90 ] || fail "$3: ${pct:-no}% of $comm's stacks whole"
	done
}

# The tables built once, into the build-id cache, as an always-on recorder
# has them: the tests count rows, not the time it takes to build them
warm_cache() {
	echo 'int main(void) { return 0; }' > "$tmp/warm.c"
	$perf bstack record -q -o "$tmp/warm.data" -- sh -c \
		"$py -c pass; perl -e 1; gawk 'BEGIN { }'; gcc -O2 -o $tmp/warm $tmp/warm.c" \
		2> /dev/null
}

test_one_after_another() {
	echo "programs run one after another in $rows rows: each whole"
	record_in_rows seq \
		"$py -c '$py_busy'; perl -e '$perl_busy'; gawk '$gawk_busy'; $py -c '$py_busy'" ||
		return
	check_whole "$tmp/seq.data" "python3 perl gawk" "one after another"
	count_at_least "$tmp/seq.err" reclaimed 2 "tables of exited programs reclaimed"
	count_at_least "$tmp/seq.err" 'loaded again' 1 "tables of python3 loaded again"
}

test_evicted_and_loaded_again() {
	echo "the tables of a program that sleeps make room, and come back when it runs"
	# python3 sleeps from 1 s to 7 s: perl, from 4 s to 5 s, needs its rows
	record_in_rows evict "$py -c 'import time
$py_busy
time.sleep(6)
$py_busy' & sleep 4; perl -e '$perl_busy'; wait" 120000 || return
	check_whole "$tmp/evict.data" "python3 perl" "evicted"
	count_at_least "$tmp/evict.err" evicted 1 "tables evicted"
	count_at_least "$tmp/evict.err" 'loaded again' 1 "tables loaded again"
	$perf bstack report -i "$tmp/evict.data" --header-only 2> /dev/null |
		grep -qE '^# bstack: unwind tables: .*[1-9][0-9]* evicted' ||
		fail "perf bstack report --header does not count the evicted tables"
}

# gcc -o over a binary writes the same inode: the run after the rebuild
# must be unwound with its own table and named by its own build-id.  Each
# run takes a second or two: with a cold cache, building cc1's table keeps
# the loader thread from the new program for half a second
test_rebuilt_in_place() {
	echo "a binary rebuilt in place is unwound as itself"
	mkdir "$tmp/rb"
	cat > "$tmp/rb/prog.c" <<EOT
static volatile unsigned long sink;
__attribute__((noinline)) static void NAME(void)
{
	for (unsigned long i = 0; i < 1500000000UL; i++)
		sink += i * K;
}
int main(void) { NAME(); return 0; }
EOT
	build="gcc -O2 -fomit-frame-pointer -o $tmp/rb/prog $tmp/rb/prog.c"
	$build -DNAME=spin_one -DK=3 || { fail "cannot build"; return; }
	ino=$(stat -c %i "$tmp/rb/prog")
	$perf bstack record -v -F 499 -o "$tmp/rb.data" -- sh -c \
		"$tmp/rb/prog; $build -DNAME=spin_two -DK=5; $tmp/rb/prog" 2> "$tmp/rb.err" ||
		{ fail "record"; cat "$tmp/rb.err"; return; }
	[ "$(stat -c %i "$tmp/rb/prog")" = "$ino" ] ||
		echo "  (gcc wrote a new inode here: the rebuild is an ordinary new file)"
	$perf bstack report -i "$tmp/rb.data" --folded > "$tmp/rb.folded" 2> /dev/null
	for f in spin_one spin_two; do
		n=$(bstack_folded_sum "$tmp/rb.folded" "^prog;.*;main;$f [0-9]+$")
		echo "  $f: $n samples under main"
		[ "$n" -ge 50 ] || fail "$n samples of $f under main"
	done
}

warm_cache
test_one_after_another
test_evicted_and_loaded_again
test_rebuilt_in_place

[ $err = 0 ] && echo "perf bstack tables test [Success]"
exit $err
