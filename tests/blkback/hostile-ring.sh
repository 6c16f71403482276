#!/bin/sh
# xbd-back: a frontend whose req_prod runs past the ring gets its device
# disconnected (Closing), and a second disk of another domain served by the
# same daemon keeps working.
. "$top_srcdir/tests/blkback/common.sh"

dom1=$(new_domain)
dom2=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom1" xvdb "$WORK/a.img")
b=$(add_disk "$dom2" xvdb "$WORK/b.img")
run_back --run "'$ASDOM' $dom1 '$RAWFRONT' --dev $a ring-overflow &&
	'$ASDOM' $dom2 '$RAWFRONT' --dev $b rw" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "corrupt ring scenario failed"; }
grep -q "vbd/$dom1/$a: frontend corrupted the ring" "$LOG" || bk_fail "no log line for the corrupt ring"
grep -q "vbd/$dom2/$b: frontend corrupted" "$LOG" && bk_fail "the other device was disconnected too"
st=$(bstate "$dom1" "$a")
[ "$st" = 5 ] || [ "$st" = 6 ] || bk_fail "corrupt device in state $st, not Closing/Closed"
bk_done
