#!/bin/sh
# xbd-back: 1 MiB indirect writes and reads (256 segments) read back intact,
# with persistent grants, grants mapped per batch and grant copy.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
for g in auto map; do
	run_back --grants $g --run "'$ASDOM' $dom '$RAWFRONT' --dev $a indirect &&
		'$ASDOM' $dom '$RAWFRONT' --dev $a --persistent 0 indirect" >"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "indirect scenario failed (grants = $g)"; }
done
[ "$(xs read "/local/domain/0/backend/vbd/$dom/$a/feature-max-indirect-segments")" = 256 ] ||
	fail "feature-max-indirect-segments != 256"
bk_done
