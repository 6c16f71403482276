#!/bin/sh
# xbd-back: SIGTERM answers what it consumed, exits 0 and leaves the device
# Connected; a restarted xbd-back maps the same ring and the guest's I/O
# simply continues.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
start_back
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
front "$dom" --dev "$a" pause >"$WORK/out" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid"
sim_wait_for 10 grep -q paused "$WORK/out" || { cat "$WORK/out"; bk_fail "rawfront did not start"; }
stop_back || bk_fail "xbd-back did not exit 0 on SIGTERM"
[ "$(bstate "$dom" "$a")" = 4 ] || bk_fail "state after SIGTERM is $(bstate "$dom" "$a"), not 4"
start_back
sim_wait_for 10 grep -q "vbd/$dom/$a: connected" "$LOG" || bk_fail "restarted xbd-back did not reconnect"
touch "$WORK/go"
wait "$fpid" || { cat "$WORK/out"; bk_fail "I/O after the restart failed"; }
bk_done
