#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Fetch the scripts perf bstack report --flamegraph inlines into its pages,
# at pinned versions, checked against their sha256, from npm:
#   d3 7.9.0             dist/d3.min.js             (ISC license)
#   d3-flame-graph 5.0.0 dist/d3-flamegraph.umd.min.js (Apache-2.0)
# into $1 (perf's exec path)/bstack/flamegraph, with their licenses.  The
# tarballs are kept in build/npm: a rebuild needs no network.
set -e

top=$(cd "$(dirname "$0")/.." && pwd)
cache=$top/build/npm
dest=$1/bstack/flamegraph

fetch() {	# name version sha256
	tgz=$cache/$1-$2.tgz
	if [ ! -f "$tgz" ] || ! echo "$3  $tgz" | sha256sum -c --status; then
		mkdir -p "$cache"
		(cd "$cache" && npm pack --silent "$1@$2" > /dev/null) || {
			echo "error: cannot fetch $1@$2 with npm" >&2
			return 1
		}
		echo "$3  $tgz" | sha256sum -c --status || {
			echo "error: $tgz does not have the expected sha256" >&2
			rm -f "$tgz"
			return 1
		}
	fi
	rm -rf "$cache/$1"
	mkdir -p "$cache/$1"
	tar -xzf "$tgz" -C "$cache/$1" --strip-components=1
}

fetch d3 7.9.0 7e36605710a2ba54846797c8c6d888911341b215ae53257dc32a49a0b824355e
fetch d3-flame-graph 5.0.0 f12f7540b6e6e787277908d70b7169da7ced5be8737bcff2bd27f3fe4b9961c9
mkdir -p "$dest"
cp "$cache/d3/dist/d3.min.js" "$cache/d3-flame-graph/dist/d3-flamegraph.umd.min.js" "$dest/"
cp "$cache/d3/LICENSE" "$dest/LICENSE.d3"
cp "$cache/d3-flame-graph/LICENSE" "$dest/LICENSE.d3-flame-graph"
