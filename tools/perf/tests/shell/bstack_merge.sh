#!/bin/bash
# perf bstack merge adds up the recordings of two machines (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# Two builds of one program at one path, each recorded on its own
# "machine" (a UTS namespace of its own hostname, a build-id cache of its
# own), the binary deleted after each.  The merge must keep every sample
# of both, and its report, through a cache that has both builds, must
# show the functions of each build under its machine, --host must pick
# one, and a third input of a newer payload version must be refused.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_tools gcc unshare hostname

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack merge test"

cat > "$tmp/work.c" << 'EOF'
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) void HOT(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * i;
}

int main(int argc, char **argv)
{
	for (int i = 0; i < 40; i++)
		HOT(atol(argv[1]));
	return 0;
}
EOF

# record_machine NAME HOT: build work.c with its hot function named HOT,
# record it on machine NAME into $tmp/NAME.data, then delete the binary
record_machine() {
	mkdir -p "$tmp/bin"
	gcc -O1 -g -fno-omit-frame-pointer -DHOT="$2" -o "$tmp/bin/work" "$tmp/work.c" ||
		return 1
	if ! unshare --uts sh -c "hostname $1 && perf --buildid-dir '$tmp/cache-$1' \
			bstack record -q -F 499 -o '$tmp/$1.data' -- '$tmp/bin/work' 20000000" \
			2> "$tmp/$1.err"; then
		echo "record on $1: $(tail -1 "$tmp/$1.err")"
		return 1
	fi
	rm "$tmp/bin/work"
	perf --buildid-dir "$tmp/cache-$1" bstack report -i "$tmp/$1.data" --folded \
		> "$tmp/$1.folded" 2> /dev/null
}

record_machine host-a hot_build_a || { fail "recording on host-a"; exit 1; }
record_machine host-b hot_build_b || { fail "recording on host-b"; exit 1; }
# in the hot function, whatever kernel frames follow (the merge leaves
# out the kernel stacks of all but the first machine)
a=$(bstack_folded_sum "$tmp/host-a.folded" "^work;.*;hot_build_a[; ]")
b=$(bstack_folded_sum "$tmp/host-b.folded" "^work;.*;hot_build_b[; ]")
echo "  host-a: $a samples in hot_build_a, host-b: $b in hot_build_b"
[ "$a" -ge 50 ] && [ "$b" -ge 50 ] || fail "too few samples to compare: $a and $b"

echo "merge"
perf bstack merge -o "$tmp/m.data" "$tmp/host-a.data" "$tmp/host-b.data" 2> "$tmp/merge.err" ||
	fail "merge: $(cat "$tmp/merge.err")"
cat "$tmp/merge.err"
grep -c '^HOST ' < <(perf bstack script -i "$tmp/m.data" 2> /dev/null) > "$tmp/hosts"
[ "$(cat "$tmp/hosts")" = 2 ] || fail "$(cat "$tmp/hosts") HOST records, not 2"

# a symbol server's worth of binaries: both machines' caches in one
cp -a "$tmp/cache-host-a" "$tmp/cache"
cp -an "$tmp/cache-host-b/." "$tmp/cache/"
report() {
	perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/m.data" "$@" 2> /dev/null
}

# the samples of file $1 with a stack (--folded) and without (the summary's
# count: a sample of the second machine whose only stack was a kernel IP
# stack loses it in the merge, and is counted there), after cache $2 and
# report options
all_samples() {
	f=$1 c=$2
	shift 2
	perf --buildid-dir "$c" bstack report -i "$f" --folded "$@" 2> /dev/null > "$tmp/all.folded"
	n=$(perf --buildid-dir "$c" bstack report -i "$f" --stdio "$@" 2> /dev/null |
	    sed -n 's/.* \([0-9]*\) samples without stacks$/\1/p')
	echo $(($(bstack_folded_sum "$tmp/all.folded" .) + ${n:-0}))
}

echo "every sample of both machines, each build's functions under its machine"
report --folded > "$tmp/m.folded" || fail "report --folded of the merge"
total_a=$(all_samples "$tmp/host-a.data" "$tmp/cache-host-a")
total_b=$(all_samples "$tmp/host-b.data" "$tmp/cache-host-b")
total=$(all_samples "$tmp/m.data" "$tmp/cache")
[ "$total" = $((total_a + total_b)) ] ||
	fail "the merge has $total samples, not $total_a + $total_b"
ma=$(bstack_folded_sum "$tmp/m.folded" "^host-a:work;.*;hot_build_a[; ]")
mb=$(bstack_folded_sum "$tmp/m.folded" "^host-b:work;.*;hot_build_b[; ]")
[ "$ma" = "$a" ] || fail "host-a:work has $ma samples in hot_build_a, not $a"
[ "$mb" = "$b" ] || fail "host-b:work has $mb samples in hot_build_b, not $b"
grep -q "^host-a:.*hot_build_b\|^host-b:.*hot_build_a" "$tmp/m.folded" &&
	fail "a build's function under the other machine"
report --stdio > "$tmp/m.stdio" || fail "report --stdio of the merge"
grep -q "a merge of 2 machines" "$tmp/m.stdio" || fail "the summary does not list the machines"
grep -q "host-b:work.*hot_build_b" "$tmp/m.stdio" || fail "no host-b:work hot_build_b in --stdio"

echo "--host picks one machine"
report --folded --host host-b > "$tmp/b.folded" || fail "report --host host-b"
n=$(all_samples "$tmp/m.data" "$tmp/cache" --host host-b)
[ "$n" = "$total_b" ] || fail "--host host-b has $n samples, not $total_b"
grep -q "^host-a:" "$tmp/b.folded" && fail "--host host-b shows host-a"
report --folded --host host-c > /dev/null 2> /dev/null && fail "--host of no machine accepted"

echo "a merge of merges keeps the machines apart"
perf bstack merge -o "$tmp/mm.data" "$tmp/m.data" "$tmp/host-a.data" 2> /dev/null ||
	fail "merge of a merge"
perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/mm.data" --folded > "$tmp/mm.folded" \
	2> /dev/null
[ "$(bstack_folded_sum "$tmp/mm.folded" "^host-a#2:work;.*;hot_build_a[; ]")" = "$a" ] ||
	fail "the second host-a is not host-a#2 with its $a samples"

echo "an output that is an input is refused, the input left whole"
cp "$tmp/host-a.data" "$tmp/same.data"
perf bstack merge -o "$tmp/same.data" "$tmp/same.data" "$tmp/host-b.data" 2> /dev/null &&
	fail "a merge into one of its inputs"
cmp -s "$tmp/host-a.data" "$tmp/same.data" || fail "a refused merge changed its input"

echo "an input of another payload version is refused"
python3 - "$tmp/host-a.data" "$tmp/v9.data" << 'EOF'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
# the data section (perf_file_header), where every bstack record starts
# with u16 version 1 and u16 type 1..6, in this machine's byte order
start, size = struct.unpack_from("<QQ", data, 40)
for t in range(1, 7):
    pat = struct.pack("<HH", 1, t)
    i = data.find(pat, start, start + size)
    while i >= 0:
        data[i] = 9
        i = data.find(pat, i + 4, start + size)
open(sys.argv[2], "wb").write(data)
EOF
if perf bstack merge -o "$tmp/bad.data" "$tmp/host-a.data" "$tmp/v9.data" 2> "$tmp/bad.err"; then
	fail "an input of payload version 9 was merged"
fi
grep -q "v9.data" "$tmp/bad.err" ||
	fail "the refusal does not name the input: $(cat "$tmp/bad.err")"
[ -e "$tmp/bad.data" ] && fail "a refused merge left its output"
cat "$tmp/bad.err"

[ $err = 0 ] && echo "perf bstack merge test [Success]"
exit $err
