#!/bin/sh
# SIGTERM is honoured within 2 s whatever the storage does (issue 34).  An
# NBD server that completes the handshake and then answers no request
# (tests/robust/nbd-stall.py noreply) holds a guest's writes; the daemon
# used to wait for them for ever at SIGTERM (12 s later it still ran, every
# other ring already stopped; systemd would SIGKILL it at 30 s).  Asserted:
#  - SIGTERM ends the daemon in under 2 s, the stuck ring left to its
#    journal with one line, the device still Connected;
#  - another guest's ring stops cleanly meanwhile (its I/O goes on after
#    the restart);
#  - with the server replaced by one that answers, the next xbd-back
#    executes the stuck requests again from the journal and the guest's
#    writes all complete, OKAY, once each, and read back (rawfront survive).
. "$top_srcdir/tests/robust/lib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
command -v nbdkit >/dev/null 2>&1 || skip "nbdkit is not installed"

python3 "$top_srcdir/tests/robust/nbd-stall.py" "$WORK/nr.sock" noreply 2>"$WORK/nr.log" &
npid=$!
sim_on_exit "kill $npid 2>/dev/null"
sim_wait_for 10 test -S "$WORK/nr.sock" || bk_fail "the server that does not reply did not start"
two_guests
rm -f "$WORK/a.img"
xs write "/local/domain/0/backend/vbd/$A/$da/params" "nbd+unix:///?socket=$WORK/nr.sock"
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
start_back
wait_state "$A" "$da" 2
wait_state "$B" "$db" 2
"$ASDOM" "$B" "$RAWFRONT" --dev "$db" pause >"$WORK/pb.out" 2>&1 &
pb=$!
sim_on_exit "kill $pb 2>/dev/null"
"$ASDOM" "$A" "$RAWFRONT" --dev "$da" survive >"$WORK/pa.out" 2>&1 &
pa=$!
sim_on_exit "kill $pa 2>/dev/null"
sim_wait_for 10 grep -q paused "$WORK/pb.out" || { cat "$WORK/pb.out"; bk_fail "guest B did not connect"; }
wait_state "$A" "$da" 4
sleep 1
grep -q "round" "$WORK/pa.out" && { cat "$WORK/pa.out"; bk_fail "A's writes were answered by a server that never replies"; }
sigterm_within_2s
grep -q "vbd/$A/$da: its storage still has requests at the stop deadline: left to its journal" "$LOG" ||
	bk_fail "no line for the ring left to its journal"
[ "$(bstate "$A" "$da")" = 4 ] || bk_fail "A's disk left Connected at SIGTERM (state $(bstate "$A" "$da"))"
[ "$(bstate "$B" "$db")" = 4 ] || bk_fail "B's disk left Connected at SIGTERM (state $(bstate "$B" "$db"))"

# A server that answers in its place; the next daemon re-executes A's writes.
kill "$npid"
wait "$npid" 2>/dev/null
rm -f "$WORK/nr.sock"
nbdkit -U "$WORK/nr.sock" -f memory 64M 2>"$WORK/nbdkit.log" &
kpid=$!
sim_on_exit "kill $kpid 2>/dev/null"
sim_wait_for 10 test -S "$WORK/nr.sock" || bk_fail "nbdkit did not start"
start_back
sim_wait_for 10 grep -q "vbd/$A/$da: resumed after an unclean stop: [1-9][0-9]* requests* re-executed" "$LOG" ||
	bk_fail "A's ring was not taken over from its journal with its requests"
wait "$pa" || { cat "$WORK/pa.out"; bk_fail "guest A's writes did not all complete after the restart"; }
touch "$WORK/go"
wait "$pb" || { cat "$WORK/pb.out"; bk_fail "guest B's I/O failed after the restart"; }
grep "re-executed" "$LOG"
bk_done
