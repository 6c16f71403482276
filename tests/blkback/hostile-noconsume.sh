#!/bin/sh
# xbd-back: a frontend that fills the ring and never consumes responses gets
# every request answered, nothing more, and the daemon stays responsive.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
b=$(add_disk "$dom" xvdc "$WORK/b.img")
run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a noconsume && '$ASDOM' $dom '$RAWFRONT' --dev $b rw" \
	>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "noconsume scenario failed"; }
grep -q "answered all" "$WORK/out" || fail "rawfront did not confirm the answers"
bk_done
