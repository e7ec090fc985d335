#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Lay perf-bstack over the upstream perf sources:
#   build/upstream  the files of tools/perf/MANIFEST (plus checkpatch) taken
#                   from Debian's linux-source-6.12 tarball, never modified;
#   build/linux     the tree perf is built from: upstream + our overlay files
#                   (tools/..., kernel/...) + patches/*.patch in order.
# Only files whose contents changed are rewritten in build/linux, so make
# rebuilds only what an edit touched.
set -e

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
tarball=${TARBALL:-/usr/src/linux-source-6.12.tar.xz}
up=$build/upstream
tree=$build/linux
stage=$build/stage

extract_upstream() {
	if [ ! -r "$tarball" ]; then
		echo "error: $tarball not found (install linux-source-6.12: make deps)" >&2
		exit 1
	fi
	echo "  EXTRACT $tarball"
	rm -rf "$up" "$up.tmp"
	mkdir -p "$up.tmp"
	tar -xJf "$tarball" -C "$up.tmp" --strip-components=1 \
		--wildcards '*/tools/perf/MANIFEST' '*/Makefile'
	# shellcheck disable=SC2046
	tar -xJf "$tarball" -C "$up.tmp" --strip-components=1 --wildcards \
		$(sed 's|^|linux-source-6.12/|' "$up.tmp/tools/perf/MANIFEST") \
		linux-source-6.12/scripts/checkpatch.pl \
		linux-source-6.12/scripts/spelling.txt \
		linux-source-6.12/scripts/const_structs.checkpatch
	# A perf source tree outside git takes its version from this file,
	# as in 'make perf-tar-src-pkg'; the kernel Makefile is not needed.
	version=$(awk '/^VERSION =/ {v=$3} /^PATCHLEVEL =/ {p=$3}
		/^SUBLEVEL =/ {s=$3} END {print v "." p "." s}' "$up.tmp/Makefile")
	echo "#define PERF_VERSION \"$version\"" > "$up.tmp/PERF-VERSION-FILE"
	rm "$up.tmp/Makefile"
	mv "$up.tmp" "$up"
}

# Files a patch touches, as paths relative to the tree.
patch_files() {
	sed -n 's|^+++ b/\([^	]*\).*|\1|p; s|^--- a/\([^	]*\).*|\1|p' "$1" | sort -u
}

overlay_files() {
	(cd "$top" && find tools kernel include lib -type f 2>/dev/null) | sort
}

# Copy $1 to $2 only when the contents or the mode differ.
sync_file() {
	if ! cmp -s "$1" "$2" || [ "$(stat -c %a "$1")" != "$(stat -c %a "$2")" ]; then
		mkdir -p "$(dirname "$2")"
		rm -f "$2"
		cp --preserve=mode "$1" "$2"
	fi
}

[ -f "$up/PERF-VERSION-FILE" ] || extract_upstream
if [ ! -d "$tree" ]; then
	echo "  COPY    build/upstream -> build/linux"
	cp -a "$up" "$tree.tmp"
	mv "$tree.tmp" "$tree"
fi

rm -rf "$stage"
mkdir -p "$stage"
overlay_files > "$build/overlay.list"
while read -r f; do
	mkdir -p "$stage/$(dirname "$f")"
	cp --preserve=mode "$top/$f" "$stage/$f"
done < "$build/overlay.list"

: > "$build/patched.list"
upstream_part=$(mktemp)
trap 'rm -f "$upstream_part"' EXIT
for p in "$top"/patches/*.patch; do
	[ -e "$p" ] || continue
	# sections of a patch that change our own files are in the overlay already
	python3 "$top/scripts/series-overlay.py" upstream "$p" > "$upstream_part"
	grep -q '^+++ ' "$upstream_part" || continue	# nothing for upstream files
	for f in $(patch_files "$upstream_part"); do
		echo "$f" >> "$build/patched.list"
		[ -e "$stage/$f" ] && continue
		[ -e "$up/$f" ] || continue
		mkdir -p "$stage/$(dirname "$f")"
		cp --preserve=mode "$up/$f" "$stage/$f"
	done
	if ! out=$(patch -d "$stage" -p1 -s -N -F0 --no-backup-if-mismatch \
			< "$upstream_part" 2>&1); then
		echo "error: patches/$(basename "$p") does not apply to upstream perf:" >&2
		echo "$out" >&2
		exit 1
	fi
done

(cd "$stage" && find . -type f | sed 's|^\./||' | sort) > "$build/managed.new"
while read -r f; do
	sync_file "$stage/$f" "$tree/$f"
done < "$build/managed.new"

# Files we managed before but no longer do go back to upstream (or away).
if [ -f "$build/managed.list" ]; then
	comm -23 "$build/managed.list" "$build/managed.new" | while read -r f; do
		if [ -e "$up/$f" ]; then
			sync_file "$up/$f" "$tree/$f"
		else
			rm -f "$tree/$f"
		fi
	done
fi
mv "$build/managed.new" "$build/managed.list"
rm -rf "$stage"
