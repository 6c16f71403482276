#!/bin/sh
# xbd-front against a second, minimal backend (tests/blkfront/testback:
# single page ring, no persistent grants, no indirect): check passes, and
# a backend answering flush/discard with EOPNOTSUPP makes xbd-front drop
# those features as Linux blkfront does instead of failing.
. "$top_srcdir/tests/blkfront/testback-lib.sh"
tb_setup

tb_start
out=$(as_domu timeout 60 "$XBD_FRONT" check --vdev xvdb --no-reopen 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "xbd-front check against testback exited $rc"
echo "$out" | grep -q '^ok   .*largest direct request (11 segments)' || fail "no direct-request check"
echo "$out" | grep -q '^ok   .*discard then read' || fail "discard check did not pass"
wait $TB_PID

# the backend is gone: make the vbd fresh for the second run
( sim_env 0; xenstore-write "$BE/state" 1 ) || fail "cannot reset backend state"
tb_start --evil eopnotsupp --after 0
out=$(as_domu timeout 60 "$XBD_FRONT" check --vdev xvdb --no-reopen 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "xbd-front check against an EOPNOTSUPP backend exited $rc"
echo "$out" | grep -q 'flush after write: backend answered EOPNOTSUPP: flush dropped' ||
	fail "flush was not dropped after EOPNOTSUPP"
echo "$out" | grep -q 'discard then read: backend answered EOPNOTSUPP: discard dropped' ||
	fail "discard was not dropped after EOPNOTSUPP"
exit 0
