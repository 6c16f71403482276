#!/bin/sh
# xbd-back: with persistent grants, more distinct grants than the per-ring
# cache holds (1056, Linux's default) are evicted least-recently-used and
# the data stays intact.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
run_back -v -v --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --persistent 1 lru" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "lru scenario failed"; }
line=$(grep "vbd/$dom/$a: grant_map=" "$LOG" | tail -1)
echo "$line"
misses=$(echo "$line" | sed -n 's/.*persistent_misses=\([0-9]*\).*/\1/p')
[ -n "$misses" ] && [ "$misses" -gt 1056 ] || bk_fail "expected more than 1056 persistent misses: $line"
bk_done
