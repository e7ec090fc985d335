#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Print a patch (git diff format) of build/linux against build/upstream for
# the given paths: edit a file in build/linux, then refresh its patch with
#   scripts/diff-upstream.sh tools/perf/perf.c ... > diff.txt
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top/build"
for f in "$@"; do
	if [ -e "upstream/$f" ]; then
		diff -u --label "a/$f" --label "b/$f" "upstream/$f" "linux/$f" || true
	else
		diff -u --label /dev/null --label "b/$f" /dev/null "linux/$f" || true
	fi
done
