#!/bin/sh
# xbd-back: one guest's stalled storage holds up nobody else.  Guest A's
# disk completes every operation only 5 s after it was submitted
# (null:SIZE:delay_ms=5000, storage that hangs); A sends a write and resets
# its frontend (state 1) while the write is in flight.  A new disk for
# guest B must still reach InitWait within 2 s (libxl gives up after
# 10 s), and A's device is offered again (InitWait) only once its write
# completed and its old ring was released, after which A connects again.
. "$top_srcdir/tests/blkback/common.sh"

adom=$(new_domain)
bdom=$(new_domain)
new_disk "$WORK/b.img" 16M
a=$(add_disk "$adom" xvdb null:64M:delay_ms=5000)
start_back -v
wait_state "$adom" "$a" 2
"$ASDOM" "$adom" "$RAWFRONT" --dev "$a" rw >"$WORK/out.a" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid 2>/dev/null"
wait_state "$adom" "$a" 4
sleep 0.5 # the first write is now in flight for another 4.5 s
kill "$fpid" 2>/dev/null
wait "$fpid" 2>/dev/null
xs write "/local/domain/$adom/device/vbd/$a/state" 1 || fail "cannot reset A's frontend"
t0=$(date +%s%N)
b=$(add_disk "$bdom" xvdb "$WORK/b.img")
sim_wait_for 5 state_is "$bdom" "$b" 2 || bk_fail "B's new disk did not reach InitWait"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "B's disk reached InitWait $ms ms after A's reset (A's I/O still stalled)"
[ "$ms" -le 2000 ] || bk_fail "B's disk waited $ms ms for A's stalled I/O (limit 2000 ms)"
[ "$(bstate "$adom" "$a")" != 2 ] ||
	bk_fail "A was offered again (InitWait) while its old ring still had I/O in flight"
grep -q "vbd/$adom/$a: I/O still in flight" "$LOG" || bk_fail "no asynchronous teardown logged for A"
# B works meanwhile.
front "$bdom" --dev "$b" rw >"$WORK/out.b" 2>&1 || { cat "$WORK/out.b"; bk_fail "B's disk does not work while A drains"; }
# A's write completes, its ring is released, and A is offered the device again.
wait_state "$adom" "$a" 2
grep -q "vbd/$adom/$a: rings drained and released" "$LOG" || bk_fail "A's drain not logged"
front "$adom" --dev "$a" connect >"$WORK/out.a2" 2>&1 || { cat "$WORK/out.a2"; bk_fail "A cannot connect again after the drain"; }

# A dies with a write in flight: @releaseDomain is handled at once, and
# SIGTERM still waits for the stalled write (every consumed request answered).
"$ASDOM" "$adom" "$RAWFRONT" --dev "$a" rw >"$WORK/out.a3" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid 2>/dev/null"
sleep 0.5
kill "$fpid" 2>/dev/null
wait "$fpid" 2>/dev/null
"$XBD_SIM" domain destroy "$SIMDIR" "$adom" || fail "domain destroy failed"
sim_wait_for 2 grep -q "vbd/$adom/$a: domain $adom is \(gone\|dying\), tearing down" "$LOG" ||
	bk_fail "A's death not handled within 2 s while its I/O stalls"
front "$bdom" --dev "$b" rw >"$WORK/out.b" 2>&1 || { cat "$WORK/out.b"; bk_fail "B's disk broken by A's death"; }
bk_done
