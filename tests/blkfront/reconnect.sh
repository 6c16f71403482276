#!/bin/sh
# xbd-back restarts in the middle of verified I/O, once stopped cleanly
# (SIGTERM) and once killed (SIGKILL): whichever way the new xbd-back
# takes the device back (resuming the live ring, or closing so that
# xbd-front negotiates again and resubmits), the run ends with no error,
# no verify mismatch and nothing completed twice.
. "$top_srcdir/tests/blkfront/front-lib.sh"
front_setup

for sig in TERM KILL; do
	as_domu "$XBD_FRONT" bench --vdev xvdb --rw randrw --bs 16k --iodepth 8 --runtime 2.5 \
		--verify >"$WORK/bench.out" 2>&1 &
	bench=$!
	sim_on_exit "kill $bench"
	sim_wait_for 10 back_state_is "$DEVID" 4 || front_fail "xbd-front never connected"
	sleep 0.7
	back_stop $sig
	back_start
	wait $bench
	rc=$?
	echo "--- SIG$sig"
	cat "$WORK/bench.out"
	[ $rc -eq 0 ] || front_fail "bench across a backend restart (SIG$sig) exited $rc"
	grep -q 'verify: 0 mismatches' "$WORK/bench.out" || front_fail "verify mismatches"
	grep -q 'errors: 0$' "$WORK/bench.out" || front_fail "I/O errors"
	grep -q 'completed twice' "$WORK/bench.out" && front_fail "a request completed twice"
	sim_wait_for 10 back_state_is "$DEVID" 6 || front_fail "xbd-front did not close"
done
exit 0
