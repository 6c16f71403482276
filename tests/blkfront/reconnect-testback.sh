#!/bin/sh
# The backend goes away with requests unanswered, once by restarting
# (back to InitWait) and once through Closing/Closed: xbd-front
# negotiates again, resubmits what was in flight, and the verified run
# ends with no error, no mismatch and nothing completed twice.
. "$top_srcdir/tests/blkfront/testback-lib.sh"
tb_setup

for how in restart close; do
	( sim_env 0; xenstore-write "$BE/state" 1 ) || fail "cannot reset backend state"
	: >"$WORK/testback.log"
	tb_start --$how-after 300
	out=$(as_domu timeout 60 "$XBD_FRONT" bench --vdev xvdb --rw randrw --bs 8k --iodepth 8 \
		--runtime 1.5 --verify 2>&1)
	rc=$?
	echo "--- $how: exit $rc"
	echo "$out"
	cat "$WORK/testback.log"
	[ $rc -eq 0 ] || fail "$how: bench across the backend going away exited $rc"
	grep -q "dropped" "$WORK/testback.log" || fail "$how: testback never went away"
	echo "$out" | grep -q 'verify: 0 mismatches' || fail "$how: verify mismatches"
	echo "$out" | grep -q 'errors: 0' || fail "$how: I/O errors"
	echo "$out" | grep -q 'reconnects: [1-9]' || fail "$how: no reconnect seen"
	echo "$out" | grep -q 'resubmitted: [1-9]' || fail "$how: nothing resubmitted"
	wait "$TB_PID"
done
exit 0
