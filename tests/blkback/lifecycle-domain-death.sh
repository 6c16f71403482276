#!/bin/sh
# xbd-back: when a guest dies (@releaseDomain) only its devices are torn
# down; another guest's disk keeps working.
. "$top_srcdir/tests/blkback/common.sh"

dom1=$(new_domain)
dom2=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom1" xvdb "$WORK/a.img")
b=$(add_disk "$dom2" xvdb "$WORK/b.img")
start_back
front "$dom1" --dev "$a" rw >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "dom1 rw failed"; }
"$XBD_SIM" domain destroy "$SIMDIR" "$dom1" || fail "domain destroy failed"
sim_wait_for 5 grep -q "vbd/$dom1/$a: domain $dom1 is \(gone\|dying\), tearing down" "$LOG" ||
	bk_fail "no teardown of the dead domain's device"
front "$dom2" --dev "$b" rw >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "dom2's disk broken by dom1's death"; }
grep -q "vbd/$dom2/$b: .*tearing down" "$LOG" && bk_fail "dom2's device was torn down too"
kill -0 "$BACK_PID" || bk_fail "xbd-back died"

# The domid comes back with the same disk (libxl rewrites the directory).
"$XBD_SIM" domain create "$SIMDIR" "$dom1" >/dev/null || fail "cannot recreate domain $dom1"
a2=$(add_disk "$dom1" xvdb "$WORK/a.img")
[ "$a2" = "$a" ] || fail "devid changed"
front "$dom1" --dev "$a" rw >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "the reused domid's disk is not served"; }
bk_done
