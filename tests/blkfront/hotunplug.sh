#!/bin/sh
# The toolstack detaches the disk while xbd-front has I/O in flight
# (`xbd-sim disk remove`, as libxl does: online=0, backend Closing): the
# frontend completes the Closing/Closed handshake so that the backend
# reaches Closed in time, and xbd-front stops with "device removed"
# instead of hanging or asking for a new connection.
. "$top_srcdir/tests/blkfront/front-lib.sh"
front_setup

"$ASDOM" "$DOMU" "$XBD_FRONT" bench --vdev xvdb --rw randrw --iodepth 8 --runtime 20 >"$WORK/bench.out" 2>&1 &
bench=$!
sim_on_exit "kill $bench"
sim_wait_for 10 state_is "$DOMU" "$DEVID" 4 || bk_fail "xbd-front never connected"
sleep 0.5
start=$(date +%s)
"$XBD_SIM" disk remove "$SIMDIR" "$DOMU" "$DEVID" --timeout 5 ||
	bk_fail "xbd-sim disk remove: the backend did not reach Closed"
wait $bench
rc=$?
cat "$WORK/bench.out"
[ $rc -eq 1 ] || bk_fail "xbd-front bench exited $rc after the disk was removed, expected 1"
[ $(( $(date +%s) - start )) -lt 10 ] || bk_fail "xbd-front took too long to notice the removal"
grep -q 'device removed' "$WORK/bench.out" || bk_fail "no 'device removed' message"
xs exists "/local/domain/$DOMU/device/vbd/$DEVID" &&
	bk_fail "the frontend directory came back after removal"
exit 0
