#!/bin/sh
# xbd-back: the null engine (params null:SIZE) reports SIZE and reads zeros.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
a=$(add_disk "$dom" xvdb null:1G)
run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a zeros" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "null engine scenario failed"; }
[ "$(xs read "/local/domain/0/backend/vbd/$dom/$a/sectors")" = 2097152 ] || bk_fail "null:1G is not 2097152 sectors"
bk_done
