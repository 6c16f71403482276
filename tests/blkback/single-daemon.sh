#!/bin/sh
# xbd-back: one daemon per host.  A second xbd-back finds the first's lock
# in the host's run directory and exits 1 with one line naming the first's
# pid, before it touches xenstore, so the next guest's disk is opened and
# its event channel bound once (two daemons both served it, and the
# guest's attach failed: "cannot bind event channel", Closed).  The lock
# goes with the holder, even killed: the next daemon starts at once.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
start_back --types vbd
wait_state "$dom" "$a" 2
first=$BACK_PID

(sim_env 0 && exec "$XBD_BACK" --types vbd) >"$WORK/second.log" 2>&1 &
second=$!
sim_on_exit "kill -KILL $second 2>/dev/null"
sim_wait_for 10 sh -c "! kill -0 $second 2>/dev/null" ||
	bk_fail "a second xbd-back still runs 10 s after it started: $(cat "$WORK/second.log")"
wait "$second"
rc=$?
cat "$WORK/second.log"
[ "$rc" = 1 ] || bk_fail "the second xbd-back exited $rc, not 1"
[ "$(wc -l <"$WORK/second.log")" = 1 ] || bk_fail "the second xbd-back said more than one line"
grep -q "another xbd-back (pid $first) " "$WORK/second.log" ||
	bk_fail "the second xbd-back's line does not name pid $first"

# The first serves a disk that appears now, alone.
b=$(add_disk "$dom" xvdc "$WORK/b.img")
wait_state "$dom" "$b" 2
front_ok "$dom" "$b" rw
back_alive

# Killed, it leaves no lock behind.
stop_back KILL
: >"$LOG"
start_back --types vbd
sim_wait_for 10 grep -q "vbd/$dom/$b: opened" "$LOG" || bk_fail "no daemon after the first was killed"
sleep 0.5
back_alive
bk_done
