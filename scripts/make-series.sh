#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Write perf-bstack as a git format-patch series against the pristine
# upstream tree: one commit per line of patches/series (the patch's diff
# to upstream files plus the new files it lists), into build/series/.
# Then check that the series applies with 'git am' to the pristine tree
# and that each patch is checkpatch-clean.  The kernel patches
# (patches/kernel) are checked the same way, into build/series/kernel/.
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
trap 'rm -f "$covered"' EXIT
# lines naming the same patch add files to it
awk '!/^#/ && NF {
	if (!($1 in files)) order[n++] = $1
	files[$1] = files[$1] " " substr($0, length($1) + 2)
} END { for (i = 0; i < n; i++) print order[i] files[order[i]] }' "$list" | sort |
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
		cp --preserve=mode "$top/$f" "$git_tree/$f"
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

bad=0
for p in "$out"/*.patch; do
	# New files always draw "does MAINTAINERS need updating?": MAINTAINERS
	# is not part of the perf sources.  perf's shell tests must have their
	# description on line 2 (tests/tests-scripts.c), so their SPDX tag is on
	# line 3, as in every upstream perf shell test.
	if ! res=$(perl "$git_tree/scripts/checkpatch.pl" --no-tree --terse \
			--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG "$p" 2>&1); then
		echo "$res"
		bad=1
	fi
done
echo "  SERIES  $(ls "$out" | wc -l) patches in build/series (git am: ok, checkpatch: $([ $bad = 0 ] && echo clean || echo ERRORS))"

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
for p in $kpatches; do
	cp "$p" "$kout/"
	if ! git_q "$ktree" am -q "$p"; then
		echo "error: patches/kernel/$(basename "$p") does not apply" >&2
		exit 1
	fi
	if ! res=$(perl "$git_tree/scripts/checkpatch.pl" --no-tree --terse "$p" 2>&1); then
		echo "$res"
		bad=1
	fi
done
rm -rf "$ktree"
echo "  SERIES  $(ls "$kout" | wc -l) kernel patches in build/series/kernel (git am: ok, checkpatch: $([ $bad = 0 ] && echo clean || echo ERRORS))"
exit $bad
