#!/bin/sh
# xbd-back: a frontend sending bad request after bad request gets every one
# answered with BLKIF_RSP_ERROR, but the log gets at most 10 lines per 5 s
# for that device.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a bad-burst" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "bad requests not all refused"; }
[ "$(grep -c "status -1 as expected" "$WORK/out")" -eq 30 ] || fail "not all 30 bad requests were answered"
n=$(grep -c "vbd/$dom/$a: request refused" "$LOG")
echo "$n log lines for 30 bad requests"
[ "$n" -ge 1 ] && [ "$n" -le 10 ] || bk_fail "$n log lines for 30 bad requests (limit 10)"
bk_done
