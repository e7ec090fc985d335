#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Install the Debian packages perf-bstack builds and tests with.  The list
# lives in scripts/deps.txt; apt is only run when something is missing.
set -e
list=$(dirname "$0")/deps.txt
missing=
for pkg in $(grep -v '^#' "$list"); do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
	[ "$status" = installed ] || missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0
echo "  DEPS    installing:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "error: missing packages:$missing (run 'make deps' as root)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
