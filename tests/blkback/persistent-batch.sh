#!/bin/sh
# xbd-back: with persistent grants the misses of a batch are mapped with
# one call (the data path's batch map, blkback/README.md), not one call
# per segment, also once the cache (1056 grants) is full and every miss
# evicts: 1100 distinct grants cycled twice in 11-segment requests take
# one map call per request, and the data stays intact (regions shared by
# several cache entries are unmapped only when their last entry goes).
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
run_back -v -v --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --persistent 1 lru" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "lru scenario failed"; }
line=$(grep "vbd/$dom/$a: grant_map=" "$LOG" | tail -1)
echo "$line"
maps=$(echo "$line" | sed -n 's/.*grant_map=\([0-9]*\).*/\1/p')
unmaps=$(echo "$line" | sed -n 's/.*grant_unmap=\([0-9]*\).*/\1/p')
misses=$(echo "$line" | sed -n 's/.*persistent_misses=\([0-9]*\).*/\1/p')
[ -n "$misses" ] && [ "$misses" -ge 4000 ] || bk_fail "expected about 4400 persistent misses: $line"
# 400 requests of 11 segments: at most one map call per request.
[ "$maps" -le $((misses / 11)) ] || bk_fail "$maps map calls for $misses misses: not batched"
[ "$unmaps" -le "$maps" ] || bk_fail "more unmap calls ($unmaps) than map calls ($maps)"
bk_done
