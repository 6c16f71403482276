#!/bin/sh
# xbd-back --grant-copy: data copied through grant copy reads back intact,
# direct and indirect.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
run_back --grant-copy --run "'$ASDOM' $dom '$RAWFRONT' --dev $a rw && '$ASDOM' $dom '$RAWFRONT' --dev $a indirect" \
	>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "grant copy rw failed"; }
grep -q "vbd/$dom/$a: connected: .*copied grants" "$LOG" || bk_fail "grant copy not used"
bk_done
