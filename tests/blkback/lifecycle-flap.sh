#!/bin/sh
# xbd-back: a guest that resets and reconnects its frontend over and over
# makes us map rings and start threads each time; beyond a burst of 4 its
# connects are spaced 250 ms apart (each still succeeds), so the flapping
# costs the host a bounded rate of set-ups, and the log says so once.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
a=$(add_disk "$dom" xvdb null:64M)
start_back -v
wait_state "$dom" "$a" 2
t0=$(date +%s%N)
for i in 1 2 3 4 5 6 7 8; do
	front "$dom" --dev "$a" connect >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "connect $i failed"; }
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "8 reconnects took $ms ms"
# One line when the limit engages, not one per connect it delays.
n=$(grep -c "vbd $dom/$a: the frontend reconnects too often" "$LOG")
[ "$n" -eq 1 ] || bk_fail "the reconnect rate limit was reported $n times (expected once)"
# 4 connects beyond the burst, 250 ms apart.
[ "$ms" -ge 900 ] || bk_fail "8 connects in $ms ms: not rate-limited"
bk_done
