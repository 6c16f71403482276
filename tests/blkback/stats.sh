#!/bin/sh
# xbd-back: SIGUSR1 prints every ring's counters to stderr, and they count
# what the frontend did.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
start_back -v -v
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
front "$dom" --dev "$a" pause >"$WORK/out" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid"
sim_wait_for 10 grep -q paused "$WORK/out" || { cat "$WORK/out"; bk_fail "rawfront did not start"; }
kill -USR1 "$BACK_PID"
sim_wait_for 5 grep -q "vbd/$dom/$a: .*persistent_hits=" "$LOG" || bk_fail "no counters printed on SIGUSR1"
line=$(grep "vbd/$dom/$a: rd_req=" "$LOG" | tail -1)
echo "$line"
# still_works: one 2-page write and one 2-page read so far.
echo "$line" | grep -q "rd_req=1 wr_req=1 .* rd_sect=16 wr_sect=16" || bk_fail "wrong request counts: $line"
touch "$WORK/go"
wait "$fpid" || { cat "$WORK/out"; bk_fail "rawfront failed"; }
# At teardown (debug level) the final counts are printed.
sim_wait_for 5 grep -q "vbd/$dom/$a: rd_req=2 wr_req=2 " "$LOG" || bk_fail "no counters at teardown"
grep "vbd/$dom/$a: io_submit=" "$LOG" | grep -qv "io_submit=0 " || bk_fail "io_submit not counted"
bk_done
