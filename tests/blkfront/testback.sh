#!/bin/sh
# xbd-front says why it cannot attach (no backend, no such vbd), then runs
# against a second, minimal backend (tests/blkfront/testback: one queue,
# no persistent grants, 64 indirect segments): check passes (also with a
# budget of 32 grants, where requests wait for pages), and
# a backend answering flush/discard with EOPNOTSUPP makes xbd-front drop
# those features as Linux blkfront does instead of failing, and a disk
# with 4096-byte logical sectors works in whole sectors.
. "$top_srcdir/tests/blkfront/testback-lib.sh"
tb_setup

# no backend yet: a clear message within the timeout, not a hang
start=$(date +%s)
out=$("$ASDOM" "$DOMU" timeout 20 "$XBD_FRONT" info --vdev xvdb --timeout 1 2>&1)
rc=$?
echo "$out"
[ $rc -eq 1 ] || fail "attach without a backend exited $rc, expected 1"
echo "$out" | grep -q 'vbd xvdb: cannot attach: .*in time' || fail "no timeout message"
[ $(( $(date +%s) - start )) -le 5 ] || fail "attach without a backend took too long"
out=$("$ASDOM" "$DOMU" "$XBD_FRONT" info --vdev xvdz 2>&1)
[ $? -eq 1 ] || fail "attach to a vbd that does not exist did not fail"
echo "$out" | grep -q 'vbd xvdz: cannot attach: .*no such vbd' || fail "no 'no such vbd' message: $out"

tb_start --indirect 64
out=$("$ASDOM" "$DOMU" timeout 60 "$XBD_FRONT" check --vdev xvdb 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "xbd-front check against testback exited $rc"
echo "$out" | grep -q '^ok   \[default\] largest indirect request (64 segments)' || fail "no indirect check"
echo "$out" | grep -q '^ok   .*largest direct request (11 segments)' || fail "no direct-request check"
echo "$out" | grep -q '^ok   .*discard then read' || fail "discard check did not pass"
echo "$out" | grep -q '^ok   \[32 grants\] concurrent requests' || fail "tight grant budget failed"
wait $TB_PID

# the backend is gone: make the vbd fresh for the second run
xs write "$BE/state" 1 || fail "cannot reset backend state"
tb_start --evil eopnotsupp --after 0
out=$("$ASDOM" "$DOMU" timeout 60 "$XBD_FRONT" check --vdev xvdb --no-reopen 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "xbd-front check against an EOPNOTSUPP backend exited $rc"
echo "$out" | grep -q 'flush after write: backend answered EOPNOTSUPP: flush dropped' ||
	fail "flush was not dropped after EOPNOTSUPP"
echo "$out" | grep -q 'discard then read: backend answered EOPNOTSUPP: discard dropped' ||
	fail "discard was not dropped after EOPNOTSUPP"
wait $TB_PID

# a 4096-byte logical block size: every offset and length in 4 KiB units
xs write "$BE/state" 1 || fail "cannot reset backend state"
tb_start --sector-size 4096
out=$("$ASDOM" "$DOMU" timeout 60 "$XBD_FRONT" check --vdev xvdb --no-reopen 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "xbd-front check against a 4096-byte-sector disk exited $rc"
echo "$out" | grep -q '^ok   .*attach: 8192 sectors, sector-size 4096' || fail "sector-size 4096 not seen"
echo "$out" | grep -q '^ok   .*write+read last sector: 4096 bytes at 4190208' ||
	fail "last 4 KiB sector not written and read back"
echo "$out" | grep -q '^ok   .*misaligned read: backend refuses' || fail "misaligned read not refused"
exit 0
