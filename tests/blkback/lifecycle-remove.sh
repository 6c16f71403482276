#!/bin/sh
# xbd-back: libxl-style removal (online=0, state=5) of a connected disk is
# answered with state 6 at once, and the daemon forgets the device once the
# toolstack removed its directory.  A second disk is unaffected.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
b=$(add_disk "$dom" xvdc "$WORK/b.img")
start_back -v
front "$dom" --dev "$a" connect >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "connect failed"; }
wait_state "$dom" "$a" 4
"$XBD_SIM" disk remove "$SIMDIR" "$dom" "$a" --timeout 5 || bk_fail "xbd-sim disk remove: backend did not reach Closed"
sim_wait_for 5 grep -q "vbd/$dom/$a: removed" "$LOG" || bk_fail "device not forgotten after removal"
front "$dom" --dev "$b" rw >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "second disk broken by the removal"; }
bk_done
