#!/bin/sh
# xbd-back: a mode=r disk says so in info and answers writes with an error.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img" --mode r)
chmod 0444 "$WORK/a.img"
run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a readonly" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "read-only scenario failed"; }
grep -q "request refused: .*read-only" "$LOG" || bk_fail "no log line for the refused write"
[ "$(xs read "/local/domain/0/backend/vbd/$dom/$a/feature-discard")" = 0 ] || fail "read-only disk offers discard"
bk_done
