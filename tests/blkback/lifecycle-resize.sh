#!/bin/sh
# xbd-back: growing the backing file and sending SIGHUP updates sectors
# while connected; without any signal, growing or shrinking it is noticed
# by itself within a few seconds (sectors, the log line, and the state
# rewritten for the frontend's watch).
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
start_back
front "$dom" --dev "$a" connect >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "connect failed"; }
wait_state "$dom" "$a" 4
truncate -s 32M "$WORK/a.img"
kill -HUP "$BACK_PID"
be=/local/domain/0/backend/vbd/$dom/$a
sim_wait_for 5 sh -c "[ \"\$('$ASDOM' 0 xenstore-read $be/sectors)\" = 65536 ]" ||
	bk_fail "sectors not updated after resize"
grep -q "vbd/$dom/$a: resized: 32768 -> 65536 sectors" "$LOG" || bk_fail "no resize log line"

# No signal: noticed within the size-check interval (1 s), 10 s allowed.
sectors_are() {
	[ "$("$ASDOM" 0 xenstore-read "$be/sectors")" = "$1" ]
}
truncate -s 48M "$WORK/a.img"
sim_wait_for 10 sectors_are 98304 || bk_fail "growing without SIGHUP not noticed (sectors $(bkey "$dom" "$a" sectors))"
grep -q "vbd/$dom/$a: resized: 65536 -> 98304 sectors" "$LOG" || bk_fail "no log line for the grown disk"
truncate -s 40M "$WORK/a.img"
sim_wait_for 10 sectors_are 81920 || bk_fail "shrinking without SIGHUP not noticed (sectors $(bkey "$dom" "$a" sectors))"
state_is "$dom" "$a" 4 || bk_fail "the device left Connected"
bk_done
