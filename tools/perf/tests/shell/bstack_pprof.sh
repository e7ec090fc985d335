#!/bin/bash
# perf bstack report --pprof is read by pprof (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# A profile of a workload whose binary is deleted before the report,
# written with --pprof and read by its real clients: go tool pprof (the
# samples, the stacks and the mappings' build-ids agree with --folded),
# protoc --decode against pprof's own profile.proto, and, for --pprof-raw,
# the standalone pprof, which symbolizes by build-id from the binaries
# --pprof-binaries copied (go tool pprof cannot: its build has no
# build-id support).

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record
bstack_require_tools go protoc gzip
proto_dir=/usr/share/gocode/src/github.com/google/pprof
if [ ! -f "$proto_dir/proto/profile.proto" ]; then
	echo "perf bstack test [Skipped: golang-github-google-pprof-dev is not installed]"
	exit 2
fi

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack pprof test"
bstack_record_deleted_nofp exp_nofp || { fail "no profile"; exit 1; }
bid=$(bstack_build_id "$tmp/bin/bstack_nofp")

report() {
	perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/p.data" "$@"
}
total=$(bstack_folded_sum "$tmp/p.folded" .)
leaf=$(bstack_folded_sum "$tmp/p.folded" ";nofp_compare [0-9]+$")
outer=$(bstack_folded_sum "$tmp/p.folded" ";nofp_outer;")
[ "$leaf" -ge 100 ] || fail "only $leaf samples in nofp_compare"
echo "  folded: $total samples, $leaf in nofp_compare, $outer under nofp_outer"

# the flat and cumulative count of function $2 in pprof -top output $1
top_count() {
	awk -v f="$2" -v col="$3" '$NF == f { print $col; found = 1 }
		END { if (!found) print 0 }' "$1"
}

check_top() {
	what=$1
	out=$2
	grep -q "^File: exp_nofp$" "$out" || fail "$what: exp_nofp is not the main binary"
	grep -q "Total samples = $total\b" "$out" ||
		fail "$what: not the $total samples of --folded"
	n=$(top_count "$out" nofp_compare 1)
	[ "$n" = "$leaf" ] || fail "$what: nofp_compare has $n samples, not $leaf"
	n=$(top_count "$out" nofp_outer 4)
	[ "$n" = "$outer" ] || fail "$what: nofp_outer has $n samples under it, not $outer"
}

echo "--pprof, read by go tool pprof"
report --pprof "$tmp/p.pb.gz" 2> /dev/null || fail "--pprof failed"
go tool pprof -top -nodecount=1000 "$tmp/p.pb.gz" > "$tmp/top" 2>&1
check_top "go tool pprof -top" "$tmp/top"
go tool pprof -raw "$tmp/p.pb.gz" > "$tmp/raw" 2>&1
grep -qE "exp_nofp\b.*\b$bid\b|\b$bid\b.*exp_nofp" "$tmp/raw" ||
	fail "go tool pprof -raw: no mapping of exp_nofp with build-id $bid"

echo "--pprof, decoded by protoc with pprof's profile.proto"
decode() {
	gzip -dc "$1" | protoc --proto_path="$proto_dir/proto" \
		--decode=perftools.profiles.Profile profile.proto
}
decode "$tmp/p.pb.gz" > "$tmp/decoded" 2> "$tmp/decode.err" ||
	fail "protoc --decode: $(head -1 "$tmp/decode.err")"
for s in '"nofp_compare"' "\"$bid\"" '"comm"' '"pid"' '"tid"' '"cpu"' '"event"' \
	 '"cpu-clock"' '"count"' 'has_functions: true' 'duration_nanos:'; do
	grep -qF "$s" "$tmp/decoded" || fail "protoc --decode: no $s"
done

echo "--pprof-raw, symbolized by build-id by the standalone pprof"
report --pprof "$tmp/raw.pb.gz" --pprof-raw --pprof-binaries "$tmp/bins" 2> /dev/null ||
	fail "--pprof-raw failed"
[ -f "$tmp/bins/$bid/exp_nofp" ] || fail "--pprof-binaries: no $bid/exp_nofp"
decode "$tmp/raw.pb.gz" > "$tmp/raw_decoded" 2> /dev/null
grep -qF '"nofp_compare"' "$tmp/raw_decoded" && fail "--pprof-raw has the symbols of user code"
GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE=$tmp/gocache GOFLAGS='' \
	go build -o "$tmp/pprof" github.com/google/pprof 2> "$tmp/build.err" ||
	fail "cannot build pprof: $(head -1 "$tmp/build.err")"
PPROF_BINARY_PATH=$tmp/bins "$tmp/pprof" -symbolize=local -top -nodecount=1000 \
	"$tmp/raw.pb.gz" > "$tmp/raw_top" 2>&1
check_top "pprof -symbolize=local" "$tmp/raw_top"

echo "--pprof of a recording of 34 events: a sample type each"
if bstack_record_many_events "$tmp/many.data"; then
	perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/many.data" \
		--pprof "$tmp/many.pb.gz" 2> "$tmp/many.err" ||
		fail "--pprof of 34 events: exit $?: $(tail -1 "$tmp/many.err")"
	n=$(decode "$tmp/many.pb.gz" 2> /dev/null | grep -c '^sample_type')
	[ "$n" = 34 ] || fail "--pprof of 34 events has $n sample types"
else
	fail "cannot record 34 events"
fi

[ $err = 0 ] && echo "perf bstack pprof test [Success]"
exit $err
