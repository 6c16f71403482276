#!/bin/sh
# xbd-back: growing the backing file and sending SIGHUP updates sectors
# while connected, and requests up to the new end are accepted.
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
grep -q "vbd $dom/$a: resized: 32768 -> 65536 sectors" "$LOG" || bk_fail "no resize log line"
bk_done
