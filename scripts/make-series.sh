#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Write perf-bstack as a git format-patch series against the pristine
# upstream tree: one commit per line of patches/series (the patch's diff
# to upstream files and to new files of earlier patches, plus the new files
# it lists, see scripts/series-overlay.py), into build/series/.
# Then check that the series applies with 'git am' to the pristine tree,
# that perf builds at each commit (incrementally, in build/series-build
# with objects in build/series-perf, both kept between runs) and passes
# there the tests that exist by then and need no privileges (the payload
# unit test, perf report of damaged files), and that each patch is
# checkpatch-clean.  The kernel patches (patches/kernel) are checked the
# same way, into build/series/kernel/.
set -e

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
git_tree=$build/series-git
out=$build/series
list=$top/patches/series

git_q() {
	d=$1
	shift
	git -C "$d" -c user.name="perf-bstack" -c user.email="perf-bstack@invalid" \
		-c commit.gpgsign=false "$@"
}

# message of a patch file: its Subject without [PATCH], then the body
patch_message() {
	sed -n '/^Subject: /{s/^Subject: \(\[PATCH[^]]*\] \)\{0,1\}//;p;n;:b;/^---$/q;p;n;bb}' "$1"
}

patch_author() {
	sed -n 's/^From: //p;/^Subject: /q' "$1" | head -n 1
}

rm -rf "$git_tree" "$out"
cp -a "$build/upstream" "$git_tree"
git -C "$git_tree" init -q
git -C "$git_tree" add -A
git_q "$git_tree" commit -q -m "upstream $(cut -d'"' -f2 "$build/upstream/PERF-VERSION-FILE")"
base=$(git -C "$git_tree" rev-parse HEAD)

covered=$(mktemp)
# our files as the patch that adds them has them: later patches change some
versions=$(mktemp -d)
trap 'rm -rf "$covered" "$versions"' EXIT
python3 "$top/scripts/series-overlay.py" versions "$versions"
# lines naming the same patch add files to it; a patch no line names adds none
(cd "$top/patches" && ls ./*.patch | sed 's|^\./||'; cat "$list") | awk '!/^#/ && NF {
	if (!($1 in files)) order[n++] = $1
	files[$1] = files[$1] " " substr($0, length($1) + 2)
} END { for (i = 0; i < n; i++) print order[i] files[order[i]] }' | sort |
while read -r patch files; do
	[ -n "$patch" ] || continue
	p=$top/patches/$patch
	if grep -q '^+++ ' "$p"; then
		(cd "$git_tree" && git apply --whitespace=error-all "$p") || {
			echo "error: patches/$patch does not apply" >&2
			exit 1
		}
	fi
	for f in $files; do
		mkdir -p "$git_tree/$(dirname "$f")"
		cp --preserve=mode "$versions/$f" "$git_tree/$f"
		echo "$f" >> "$covered"
	done
	git -C "$git_tree" add -A
	patch_message "$p" | git_q "$git_tree" commit -q --author="$(patch_author "$p")" -F -
done

# every new file of ours must belong to some patch
(cd "$top" && find tools kernel include lib -type f 2>/dev/null) | sort > "$covered.all"
missing=$(sort "$covered" | comm -13 - "$covered.all")
rm -f "$covered.all"
if [ -n "$missing" ]; then
	echo "error: files in no patch of patches/series:" >&2
	echo "$missing" >&2
	exit 1
fi

git -C "$git_tree" format-patch -q -o "$out" "$base"..HEAD

# the series must apply to the pristine tree as posted
check=$build/series-check
rm -rf "$check"
git clone -q "$git_tree" "$check"
git -C "$check" checkout -q -b check "$base"
git_q "$check" am -q "$out"/*.patch
if ! git -C "$check" diff --quiet HEAD "$(git -C "$git_tree" rev-parse HEAD)"; then
	echo "error: git am of build/series gives a different tree" >&2
	exit 1
fi
rm -rf "$check"

# perf builds, and its unit tests pass, at every commit: a bisection can
# stop anywhere.  The build tree is a git checkout of each commit in turn,
# so only the files a commit changes get new times and are rebuilt.
bisect_tree=$build/series-build
bisect_out=$build/series-perf
bisect_log=$build/series-build.log
[ -d "$bisect_tree/.git" ] || { rm -rf "$bisect_tree"; git init -q "$bisect_tree"; }
git -C "$bisect_tree" fetch -q "$git_tree" HEAD
mkdir -p "$bisect_out"
: > "$bisect_log"
nr=0
start=$(date +%s)
for c in $(git -C "$git_tree" rev-list --reverse "$base"..HEAD); do
	nr=$((nr + 1))
	subject=$(git -C "$git_tree" log -1 --format=%s "$c")
	git -C "$bisect_tree" checkout -q -f "$c"
	echo "== $nr $subject ($(($(date +%s) - start)) s)" >> "$bisect_log"
	if ! make -C "$bisect_tree/tools/perf" O="$bisect_out" NO_LIBPYTHON=1 NO_LIBPERL=1 \
			NO_LIBLLVM=1 -j"$(nproc)" >> "$bisect_log" 2>&1; then
		tail -n 20 "$bisect_log"
		echo "error: perf does not build at commit $nr, $subject" >&2
		exit 1
	fi
	# the C suite and the damaged-file test, where the commit has them
	for t in 'bstack payload' 'damaged perf.data'; do
		(cd "$bisect_tree" && "$bisect_out/perf" test list 2>&1) | grep -q "$t" || continue
		(cd "$bisect_tree" && PATH=$bisect_out:$PATH "$bisect_out/perf" test "$t") \
			> "$bisect_log.test" 2>&1 || true
		cat "$bisect_log.test" >> "$bisect_log"
		if ! grep -q ': Ok$' "$bisect_log.test" || grep -q 'FAILED' "$bisect_log.test"; then
			cat "$bisect_log.test"
			echo "error: perf test '$t' fails at commit $nr, $subject" >&2
			exit 1
		fi
	done
done

echo "== built and tested $nr commits in $(($(date +%s) - start)) s" >> "$bisect_log"

bad=0
for p in "$out"/*.patch; do
	# New files always draw "does MAINTAINERS need updating?": MAINTAINERS
	# is not part of the perf sources.  perf's shell tests must have their
	# description on line 2 (tests/tests-scripts.c), so their SPDX tag is on
	# line 3, as in every upstream perf shell test.
	# --no-tree has no history to find the commits of Fixes: tags in.
	# The load-time settings of BPF programs are const volatile, as
	# libbpf needs them (util/bpf_skel/*.bpf.c).
	if ! res=$(perl "$git_tree/scripts/checkpatch.pl" --no-tree --terse \
			--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG,UNKNOWN_COMMIT_ID,VOLATILE \
			"$p" 2>&1); then
		echo "$res"
		bad=1
	fi
done
if [ $bad = 0 ]; then
	echo "series: $nr commits; each applies, builds and passes checkpatch"
else
	echo "series: $nr commits; each applies and builds; checkpatch: ERRORS"
fi

# The kernel series (patches/kernel): it must apply with git am to the
# files it touches, taken from the same linux-source-6.12 tarball
kpatches=$(ls "$top"/patches/kernel/*.patch 2> /dev/null || true)
[ -n "$kpatches" ] || exit $bad
tarball=${TARBALL:-/usr/src/linux-source-6.12.tar.xz}
kout=$out/kernel
ktree=$build/series-kernel
rm -rf "$ktree"
mkdir -p "$ktree" "$kout"
# shellcheck disable=SC2086
kfiles=$(sed -n 's|^--- a/\([^	]*\).*|linux-source-6.12/\1|p' $kpatches | sort -u)
# shellcheck disable=SC2086
tar -xJf "$tarball" -C "$ktree" --strip-components=1 $kfiles
git -C "$ktree" init -q
git -C "$ktree" add -A
git_q "$ktree" commit -q -m "linux-source-6.12: the files the kernel patches touch"
kbad=0
for p in $kpatches; do
	cp "$p" "$kout/"
	if ! git_q "$ktree" am -q "$p"; then
		echo "error: patches/kernel/$(basename "$p") does not apply" >&2
		exit 1
	fi
	if ! res=$(perl "$git_tree/scripts/checkpatch.pl" --no-tree --terse "$p" 2>&1); then
		echo "$res"
		kbad=1
	fi
done
rm -rf "$ktree"
echo "series: $(ls "$kout" | wc -l) kernel patches; each applies with git am$([ $kbad = 0 ] && echo " and passes checkpatch" || echo "; checkpatch: ERRORS")"
[ $bad = 0 ] && [ $kbad = 0 ]
