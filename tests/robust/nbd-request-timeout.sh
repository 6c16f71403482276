#!/bin/sh
# nbd-request-timeout-ms: a request the NBD server accepted and never
# answers fails (the guest sees an I/O error, BLKIF_RSP_ERROR) once the
# timeout passes, and the connection is made again, instead of the guest
# waiting for ever (tests/robust/nbd-stall.py noreply: handshakes, then
# answers nothing).
. "$top_srcdir/tests/robust/lib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"

python3 "$top_srcdir/tests/robust/nbd-stall.py" "$WORK/nr.sock" noreply 2>"$WORK/nr.log" &
npid=$!
sim_on_exit "kill $npid 2>/dev/null"
sim_wait_for 10 test -S "$WORK/nr.sock" || bk_fail "the server that does not reply did not start"
dom=$(new_domain)
a=$(add_disk "$dom" xvdb "nbd+unix:///?socket=$WORK/nr.sock")
start_back --nbd-request-timeout-ms 1500 --nbd-retry-ms 200
wait_state "$dom" "$a" 2
t0=$(_ms)
front "$dom" --dev "$a" rw >"$WORK/out" 2>&1 && { cat "$WORK/out"; bk_fail "rw passed on a server that never replies"; }
t=$(($(_ms) - t0))
cat "$WORK/out"
echo "the guest's request failed after $t ms"
grep -q "status -1" "$WORK/out" || bk_fail "the guest did not see an I/O error (BLKIF_RSP_ERROR)"
[ "$t" -lt 8000 ] || bk_fail "the guest waited $t ms for its error (timeout 1500 ms)"
grep -q "connection to the NBD server lost (no reply within nbd-request-timeout-ms)" "$LOG" ||
	bk_fail "no line for the server that did not reply in time"
# A guest that connects again is served by a connection made again (the
# server handshakes again), and meets the same timeout.
front "$dom" --dev "$a" rw >"$WORK/out2" 2>&1
grep -q "status -1" "$WORK/out2" || { cat "$WORK/out2"; bk_fail "the second run did not see an I/O error"; }
[ "$(grep -c "connection to the NBD server lost (no reply within" "$LOG")" = 2 ] ||
	bk_fail "the connection was not made again after the timeout"
bk_done
