#!/bin/sh
# The whole test suite, as the README gives it: installs what is needed,
# builds xbd with warnings as errors and with AddressSanitizer and
# UndefinedBehaviorSanitizer, runs `make check`, and ends with one line of
# totals ("N passed, N failed, N skipped").
#
# BUILD_DIR (default: _build/check) and CONFIGURE_FLAGS may be set.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/_build/check}
jobs=$(nproc 2>/dev/null || echo 2)

"$top/scripts/install-deps.sh" || exit 1
[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh >/dev/null) || exit 1

mkdir -p "$build" && cd "$build" || exit 1
if [ ! -f Makefile ]; then
	"$top/configure" -q --enable-werror --enable-sanitizers ${CONFIGURE_FLAGS:-} || exit 1
fi
make -s -j"$jobs" || exit 1
make -j"$jobs" check
rc=$?

# Totals from the automake harness, as one plain line.
if [ -f test-suite.log ]; then
	get() { sed -n "s/^# $1: *\([0-9]*\)/\1/p" test-suite.log | head -n 1; }
	pass=$(get PASS); fail=$(get FAIL); skip=$(get SKIP)
	xfail=$(get XFAIL); xpass=$(get XPASS); err=$(get ERROR)
	failed=$(( ${fail:-0} + ${xpass:-0} + ${err:-0} ))
	echo "${pass:-0} passed, ${failed} failed, ${skip:-0} skipped"
	[ "$failed" -eq 0 ] || rc=1
else
	echo "0 passed, 1 failed"
	rc=1
fi
exit $rc
