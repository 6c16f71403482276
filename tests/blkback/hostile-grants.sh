#!/bin/sh
# xbd-back: a request using a grant that was never made, one made to
# another domain, or a read-only one for a read (the backend must write
# into it) fails alone; nothing stays mapped (rawfront can end the grant),
# with mapped, persistent and copied grants alike.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
for mode in "--grants map" "" "--grant-copy"; do
	for p in 0 1; do
		cmd=true
		for sc in gref-bad gref-other gref-ro; do
			cmd="$cmd && '$ASDOM' $dom '$RAWFRONT' --dev $a --persistent $p $sc"
		done
		run_back $mode --run "$cmd" >"$WORK/out" 2>&1 ||
			{ cat "$WORK/out"; bk_fail "grant abuse not refused ($mode persistent=$p)"; }
	done
done
grep -q "vbd/$dom/$a: request refused: grant [0-9]* not usable" "$LOG" || bk_fail "no log line for a bad grant"
bk_done
