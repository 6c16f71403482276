#!/bin/sh
# The whole test suite, as the README gives it: installs what is needed,
# builds xbd with warnings as errors, AddressSanitizer,
# UndefinedBehaviorSanitizer and the test-only crash points
# (--enable-test-hooks), runs `make check`; then, in a second build
# without sanitizers (its binaries run in an emulated dom0), `make
# check-xen`: real Xen booted in QEMU, Debian 12 with Xen 4.17 and Debian 13
# with Xen 4.20, PV guests on a PV dom0 (tests/xen/README.md; under 40
# minutes on a quiet 2-core host),
# counted as one more test.  Ends with one line of totals
# ("N passed, N failed, N skipped").
#
# BUILD_DIR (default: _build/check), XEN_BUILD_DIR (default: _build/xen),
# CONFIGURE_FLAGS and XBD_CHECK_XEN (0: leave check-xen out) may be set.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/_build/check}
xbuild=${XEN_BUILD_DIR:-$top/_build/xen}
jobs=$(nproc 2>/dev/null || echo 2)

"$top/scripts/install-deps.sh" || exit 1
[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh >/dev/null) || exit 1

# check-xen's cached stages (debootstraps of each Debian release, the
# kernel and hypervisor packages, xbd built in a Debian 13 chroot: about
# 5 minutes on a fresh machine, mostly downloading and unpacking) need no
# build tree, so they are made beside the build and make check instead
# of after them; make check-xen makes whatever is still missing itself.
# (Their host packages come from install-deps.sh, before: no apt-get of
# theirs runs beside make check's dpkg -i.)
stages=
if [ "${XBD_CHECK_XEN:-1}" != 0 ] && [ "$(id -u)" = 0 ] && mkdir -p "$xbuild"; then
	BOOT=stages bash "$top/tests/xen/xen-check.sh" >"$xbuild/check-xen-stages.log" 2>&1 &
	stages=$!
fi

mkdir -p "$build" && cd "$build" || exit 1
if [ ! -f Makefile ]; then
	"$top/configure" -q --enable-werror --enable-sanitizers --enable-test-hooks \
		${CONFIGURE_FLAGS:-} || exit 1
fi
make -s -j"$jobs" || exit 1
make -j"$jobs" check
rc=$?

# check-xen: pass, fail or skip (77: QEMU cannot run here), one test.
xen_pass=0 xen_fail=0 xen_skip=0
if [ "${XBD_CHECK_XEN:-1}" != 0 ]; then
	if [ -n "$stages" ]; then
		wait "$stages" || echo "check-xen: its stages beside make check failed (make check-xen tries again): $(tail -1 "$xbuild/check-xen-stages.log")"
	fi
	echo "check-xen: real Xen in QEMU (log: $xbuild/check-xen.log)"
	if mkdir -p "$xbuild" && cd "$xbuild" &&
		{ [ -f Makefile ] || "$top/configure" -q --enable-werror ${CONFIGURE_FLAGS:-}; } &&
		make -s -j"$jobs" >/dev/null; then
		make check-xen >check-xen.log 2>&1
		xrc=$?
		# The results table and the verdict.
		grep -a -E '^[a-z0-9-]+ +FAIL |ERROR: |SKIP: ' check-xen.log | head -20
		sed -n '/^backend  *run  *job/,/^(xbd\*/p' check-xen.log
		# the counted table's short form (deb12-count): its rows and a system call's cost
		sed -n '/^  backend run  *job  *n  *dom0-k/,/^one system call in dom0/p' check-xen.log
	else
		xrc=1
		echo "check-xen: the build without sanitizers failed"
	fi
	case $xrc in
	0) xen_pass=1; echo "PASS: check-xen" ;;
	77) xen_skip=1; echo "SKIP: check-xen" ;;
	*) xen_fail=1; echo "FAIL: check-xen (exit $xrc)" ;;
	esac
	cd "$build" || exit 1
fi

# Totals from the automake harness, as one plain line.
if [ -f test-suite.log ]; then
	get() { sed -n "s/^# $1: *\([0-9]*\)/\1/p" test-suite.log | head -n 1; }
	pass=$(get PASS); fail=$(get FAIL); skip=$(get SKIP)
	xfail=$(get XFAIL); xpass=$(get XPASS); err=$(get ERROR)
	failed=$(( ${fail:-0} + ${xpass:-0} + ${err:-0} + xen_fail ))
	echo "$(( ${pass:-0} + xen_pass )) passed, ${failed} failed, $(( ${skip:-0} + xen_skip )) skipped"
	[ "$failed" -eq 0 ] || rc=1
else
	echo "0 passed, 1 failed"
	rc=1
fi
exit $rc
