#!/bin/sh
# A checkpoint on a disk whose writes do not drain gives up with one clear
# error that says what is still out, changes nothing, and holds up no other
# disk.  Guest A's disk is on an NBD server that completes the handshake
# and answers no request (tests/robust/nbd-stall.py noreply), so its
# writes stay out (for nbd-request-timeout-ms, 30 s); guest B's disk is a
# file, tracked too, with fio verify loops running throughout.  Asserted:
#  - `xbdctl checkpoint` of A's disk fails after the drain's 5 s with
#    "did not drain within 5000 ms", the writes still out by ring ("ring
#    0: N"), and "nothing was changed"; xbd-back's log says it once;
#  - A's disk has no checkpoint after it; B's checkpoint, asked while A's
#    waits, is answered while A's still waits; B's fio runs all pass.
. "$top_srcdir/tests/backup/lib.sh"
need_backup

python3 "$top_srcdir/tests/robust/nbd-stall.py" "$WORK/nr.sock" noreply 2>"$WORK/nr.log" &
npid=$!
sim_on_exit "kill $npid 2>/dev/null"
sim_wait_for 10 test -S "$WORK/nr.sock" || bk_fail "the server that does not reply did not start"
two_guests
xs write "/local/domain/0/backend/vbd/$A/$da/params" "nbd+unix:///?socket=$WORK/nr.sock"
start_cbt --disk "nbd+unix:///?socket=$WORK/nr.sock:cbt=1" --disk "$WORK/b.img:cbt=1"
wait_state "$A" "$da" 2
wait_state "$B" "$db" 2
TA=$(dev_of "$A" "$da")
TB=$(dev_of "$B" "$db")
victim_start b "$B" xvdb 8m
"$ASDOM" "$A" "$RAWFRONT" --dev "$da" survive >"$WORK/pa.out" 2>&1 &
pa=$!
sim_on_exit "kill $pa 2>/dev/null"
wait_state "$A" "$da" 4
some_out() { [ "$(in_flight "$A" "$da")" -gt 0 ] 2>/dev/null; }
sim_wait_for 20 some_out || bk_fail "guest A's writes are not out on its disk ($(in_flight "$A" "$da") in flight)"

t0=$(date +%s%N)
ctl checkpoint "$TA" c1 >"$WORK/a.out" 2>&1 &
apid=$!
sleep 1
tb0=$(date +%s%N)
ctl checkpoint "$TB" c1 >"$WORK/b.out" 2>&1 || { cat "$WORK/b.out"; bk_fail "B's checkpoint failed while A's waited"; }
tb=$((($(date +%s%N) - tb0) / 1000000))
kill -0 "$apid" 2>/dev/null || { cat "$WORK/a.out"; bk_fail "A's checkpoint was answered before B's (its writes cannot have drained)"; }
wait "$apid" && { cat "$WORK/a.out"; bk_fail "A's checkpoint succeeded with its writes out"; }
ta=$((($(date +%s%N) - t0) / 1000000))
cat "$WORK/a.out"
grep -q "did not drain within 5000 ms" "$WORK/a.out" || bk_fail "A's error does not say that its writes did not drain"
grep -q "writes out: ring 0: [1-9]" "$WORK/a.out" || bk_fail "A's error does not say which writes are still out"
grep -q "nothing was changed" "$WORK/a.out" || bk_fail "A's error does not say that nothing was changed"
[ "$(grep -c "vbd/$A/$da: a checkpoint operation gave up: writes did not drain" "$LOG")" = 1 ] ||
	bk_fail "xbd-back's log does not say once that A's checkpoint gave up"
ctl checkpoints "$TA" >"$WORK/acp.out" 2>&1
grep -q "c1" "$WORK/acp.out" && { cat "$WORK/acp.out"; bk_fail "A has a checkpoint c1 after the error"; }
ctl checkpoints "$TB" | grep -q "c1" || bk_fail "B has no checkpoint c1"
victim_stop b
echo "ok: A's checkpoint failed after $ta ms, saying what was out; B's took $tb ms meanwhile"
