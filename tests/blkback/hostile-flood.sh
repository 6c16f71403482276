#!/bin/sh
# xbd-back: a flood of notifications with no requests behind them does not
# spin: the CPU time (utime+stime from /proc) of the processes that do the
# work stays well below the flood's wall time, and they use (almost) none
# once the flood stops.  With workers (the default) the ring's thread runs
# in its domain's worker, so that is measured with the main process: a
# second disk of the guest stays connected throughout (its worker lives
# from before the flood to after it), and the test says which pids it
# measured.  With workers = 0 (or none possible here) it is the main
# process alone.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
b=$(add_disk "$dom" xvdc "$WORK/b.img")
start_back
wait_state "$dom" "$a" 2
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
"$ASDOM" "$dom" "$RAWFRONT" --dev "$b" pause >"$WORK/keep.out" 2>&1 &
keep=$!
sim_on_exit "kill $keep 2>/dev/null"
sim_wait_for 10 grep -q paused "$WORK/keep.out" || { cat "$WORK/keep.out"; bk_fail "the second disk did not connect"; }
worker=$(pgrep -P "$BACK_PID" -f -- "--worker" || :)
if grep -q "served by the main process\|workers = 0\|cannot prepare the workers" "$LOG" ||
	! grep -q "workers: each domain's disks are served" "$LOG"; then
	pids=$BACK_PID
	echo "measuring the main process (pid $BACK_PID): no workers here"
else
	[ -n "$worker" ] || bk_fail "workers are on, and the guest's disk has no worker"
	pids="$BACK_PID $worker"
	echo "measuring the main process (pid $BACK_PID) and the guest's worker (pid $worker)"
fi
cpu() {
	for _p in $pids; do
		awk '{ print $14 + $15 }' "/proc/$_p/stat" || bk_fail "pid $_p is gone"
	done | awk '{ t += $1 } END { print t + 0 }'
}
hz=$(getconf CLK_TCK)
t0=$(cpu)
w0=$(date +%s%N)
front "$dom" --dev "$a" --secs 1 flood >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "flood scenario failed"; }
w1=$(date +%s%N)
t1=$(cpu)
sleep 1
t2=$(cpu)
ms=$(( (w1 - w0) / 1000000 ))
echo "CPU of $pids: flood $((t1 - t0)) ticks over $ms ms (of $hz a second), idle after it $((t2 - t1)) ticks"
# A spinning ring thread would use about one tick per tick of wall time.
# xbd-back leaves a port that keeps notifying with no request behind it
# masked for a growing delay (Linux's lateeoi rule), so a flood costs it
# almost nothing: 0 or 1 tick per 1.1 s flood measured, with or without the
# sanitizers, under load.  Allow a tenth of a CPU.  still_works() in the
# scenario proves the ring is served again right after the flood.
[ $((t2 - t1)) -le $((hz / 10)) ] || bk_fail "xbd-back kept using CPU after the flood: $((t2 - t1)) ticks in 1 s"
[ $((t1 - t0)) -le $((hz * ms / 10000)) ] ||
	bk_fail "xbd-back used $((t1 - t0)) ticks during a $ms ms flood (limit $((hz * ms / 10000)))"
touch "$WORK/go"
wait "$keep" || { cat "$WORK/keep.out"; bk_fail "the second disk's I/O failed"; }
bk_done
