#!/bin/sh
# xbd-back: a guest that resets and reconnects its frontend over and over
# makes us map rings and start threads each time; beyond a burst of 4 its
# connects are spaced 250 ms apart (each still succeeds), so the flapping
# costs the host a bounded rate of set-ups, and the log says so once each
# time the limit engages (measured against the time that elapsed).
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
a=$(add_disk "$dom" xvdb null:64M)
start_back -v
wait_state "$dom" "$a" 2
# The clock of each connect: a loaded machine may connect slower than the
# limit, which then never needs to engage; what is asserted follows from
# the times that actually elapsed.
t0=$(date +%s%N)
for i in 1 2 3 4 5 6 7 8; do
	front "$dom" --dev "$a" connect >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "connect $i failed"; }
	[ $i = 4 ] && t4=$(date +%s%N)
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
burst_ms=$(( (t4 - t0) / 1000000 ))
echo "8 reconnects took $ms ms, the first 4 (the burst) $burst_ms ms"
n=$(grep -c "vbd/$dom/$a: the frontend reconnects too often" "$LOG")
# The rate: 4 connects beyond the burst of 4, 250 ms apart at the least.
[ "$ms" -ge 750 ] || bk_fail "8 connects in $ms ms: not rate-limited"
# One line each time the limit engages, not one per connect it delays; it
# engages again only after the bucket refilled (750 ms without a connect).
[ "$n" -le $((1 + ms / 750)) ] || bk_fail "the reconnect rate limit was reported $n times in $ms ms"
# Connecting 2.5 times as fast as the limit allows (100 ms a connect), the
# bucket runs dry by the 6th connect: the limit engaged and said so.
if [ "$burst_ms" -lt 400 ]; then
	[ "$n" -ge 1 ] || bk_fail "the reconnect rate limit was reported $n times (4 connects in $burst_ms ms: it must engage)"
else
	echo "the burst took $burst_ms ms: this machine connects slower than the limit (reported $n times)"
fi
bk_done
