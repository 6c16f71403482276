#!/bin/sh
# README.md's "Trying it by hand on the simulator", its commands as the
# README prints them (taken from it, so that this test breaks when the
# README drifts), run twice in a row in one directory: the second run
# must work as the first did (xbd-sim stop leaves nothing that makes the
# next start refuse), and each leaves nothing behind, its disk image
# included.  Only the build tree and the two paths in /tmp are changed.
: "${top_builddir:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/lib/sim.sh"
sim_need sim/xbd-sim xenstore/xbd-xenstored blkback/xbd-back xbdctl/xbdctl blkfront/xbd-front
command -v xenstore-ls >/dev/null 2>&1 || skip "xenstore-ls (xenstore-utils) not installed"
# The README's reader types into an interactive shell: bash's kill %1 and wait.
command -v bash >/dev/null 2>&1 || skip "bash not installed"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-readme.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT

sed -n '/^## Trying it by hand on the simulator/,/^## [^T]/p' "$top_srcdir/README.md" |
	sed -n 's/^    //p' >"$WORK/section.orig"
grep -q "xbd-sim stop /tmp/host" "$WORK/section.orig" || fail "no by-hand section in README.md"
sed -e "s|\$PWD/_build/demo|$top_builddir|g" -e "s|/tmp/host|$WORK/host|g" \
	-e "s|/tmp/guest.img|$WORK/guest.img|g" "$WORK/section.orig" >"$WORK/section.sh"
# An installed configuration must not change it (as for every test).
XBD_BACK_CONFIG=/dev/null
export XBD_BACK_CONFIG
unset XBD_SIM_DIR XBD_SIM_DOMID

for run in 1 2; do
	rc=0
	timeout 300 bash -e "$WORK/section.sh" >"$WORK/out.$run" 2>&1 </dev/null || rc=$?
	[ $rc = 0 ] || { cat "$WORK/out.$run"; fail "run $run of README's by-hand section failed (exit $rc)"; }
	grep -q "^PASS: " "$WORK/out.$run" || { cat "$WORK/out.$run"; fail "run $run: xbd-front check did not pass"; }
	left=$(ls -A "$WORK" | grep -v '^section\|^out\.')
	[ -z "$left" ] || { ls -lR "$WORK/host" 2>/dev/null | head -20; fail "run $run left behind: $left"; }
	echo "run $run: $(grep -c '^ok' "$WORK/out.$run") checks ok, nothing left"
done
exit 0
