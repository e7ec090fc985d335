#!/bin/bash
# perf bstack names Python functions of python -X perf (exclusive)
# SPDX-License-Identifier: GPL-2.0
#
# CPython 3.12 and later, run with -X perf, call each Python function
# through a trampoline of its own in anonymous memory ("sub $8,%rsp;
# call *%rcx; add $8,%rsp; ret": no frame pointer, no unwind table) and
# name it in /tmp/perf-PID.map.  The report must show outer -> middle ->
# leaf by name, on stacks whole down to main, after the process and its
# map file are gone.  CPython 3.13's -X perf_jit names them in a jitdump,
# /tmp/jit-PID.dump, instead.

# shellcheck source=lib/bstack.sh
. "$(dirname "$0")"/lib/bstack.sh

bstack_require_record

# CPython 3.12 and later: on the PATH, or built by pyenv (its shims are
# scripts, not interpreters)
pythons=()
for py in python3.12 python3.13 python3.14 \
	"${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3.1[2-9]; do
	py=$(command -v "$py") && py=$(readlink -f "$py") || continue
	[ "$(head -c 4 "$py" | tail -c 3)" = ELF ] || continue
	case " ${pythons[*]} " in *" $py "*) continue ;; esac
	pythons+=("$py")
done
if [ ${#pythons[@]} = 0 ]; then
	echo "perf bstack Python test [Skipped: no CPython 3.12 or later, which -X perf needs]"
	exit 2
fi

err=0
tmp=$(mktemp -d /tmp/__perf_test.bstack.XXXXX)
bstack_start_test "perf bstack Python test"

cat > "$tmp/three.py" <<'PY'
import os
import sys
import time

def leaf_work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

def middle(n):
    return leaf_work(n)

def outer(seconds):
    end = time.time() + seconds
    while time.time() < end:
        middle(20000)

open(sys.argv[1], "w").write(str(os.getpid()))
outer(2)
PY

# $1: the interpreter, $2: perf or perf_jit, $3: the file it names functions in
test_python() {
	py=$1
	name=$(basename "$py")-$2
	echo "$py -X $2: outer -> middle -> leaf_work, whole, after $3 is gone"
	perf --buildid-dir "$tmp/cache" bstack record -v -F 499 -o "$tmp/$name.data" -- \
		"$py" -X "$2" "$tmp/three.py" "$tmp/pid" > /dev/null 2> "$tmp/$name.err" ||
		{ fail "record: $(tail -1 "$tmp/$name.err")"; return; }
	pid=$(cat "$tmp/pid")
	names=${3/PID/$pid}
	[ -s "$names" ] || fail "$name wrote no $names"
	rm -f "$names"
	grep -q "frames through CPython's perf trampolines" "$tmp/$name.err" ||
		fail "the summary does not count the trampolines"
	perf --buildid-dir "$tmp/cache" bstack report -i "$tmp/$name.data" --folded \
		> "$tmp/$name.folded" 2> /dev/null
	leaf=';py::leaf_work:[^;]*;'
	chain='__libc_start_call_main;.*;py::outer:[^;]*;.*;py::middle:[^;]*;.*;py::leaf_work:'
	pct=$(bstack_folded_share "$tmp/$name.folded" "$leaf" "$chain")
	[ "$pct" -ge 90 ] || fail "$name: only $pct% of leaf_work's samples are whole, by name"
}

for py in "${pythons[@]}"; do
	test_python "$py" perf /tmp/perf-PID.map
	if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 13))'; then
		test_python "$py" perf_jit /tmp/jit-PID.dump
	fi
done

[ $err = 0 ] && echo "perf bstack Python test [Success]"
exit $err
