#!/bin/sh
# xbd-back restarts in the middle of verified I/O, once stopped cleanly
# (SIGTERM) and once killed (SIGKILL): whichever way the new xbd-back
# takes the device back (resuming the live ring, or closing so that
# xbd-front negotiates again and resubmits), the run ends with no error,
# no verify mismatch and nothing completed twice.
. "$top_srcdir/tests/blkfront/front-lib.sh"
front_setup

for sig in TERM KILL; do
	"$ASDOM" "$DOMU" "$XBD_FRONT" bench --vdev xvdb --rw randrw --bs 16k --iodepth 8 --runtime 2.5 \
		--verify >"$WORK/bench.out" 2>&1 &
	bench=$!
	sim_on_exit "kill $bench"
	sim_wait_for 10 state_is "$DOMU" "$DEVID" 4 || bk_fail "xbd-front never connected"
	sleep 0.7
	stop_back $sig
	start_back
	front_bench_done $bench "across a backend restart (SIG$sig)"
	grep -q 'completed twice' "$WORK/bench.out" && bk_fail "a request completed twice"
	sim_wait_for 10 state_is "$DOMU" "$DEVID" 6 || bk_fail "xbd-front did not close"
done
exit 0
