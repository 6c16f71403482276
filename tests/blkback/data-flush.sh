#!/bin/sh
# xbd-back: flush (feature-flush-cache, the default) and barrier mode
# (--barrier: feature-barrier=1, feature-flush-cache=0, no indirect), each
# answered as offered and BLKIF_RSP_EOPNOTSUPP for the op not offered.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
for cache in writeback writethrough unsafe; do
	run_back --cache $cache --run "'$ASDOM' $dom '$RAWFRONT' --dev $a flush" >"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "flush scenario failed (cache $cache)"; }
done
[ "$(xs read "/local/domain/0/backend/vbd/$dom/$a/feature-flush-cache")" = 1 ] || fail "feature-flush-cache != 1"
[ "$(xs read "/local/domain/0/backend/vbd/$dom/$a/feature-barrier")" = 0 ] || fail "feature-barrier != 0"

new_disk "$WORK/b.img" 16M
b=$(add_disk "$dom" xvdc "$WORK/b.img")
for cache in writeback writethrough unsafe; do
	run_back --barrier --cache $cache --run "'$ASDOM' $dom '$RAWFRONT' --dev $b flush" >"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "barrier scenario failed (cache $cache)"; }
done
# Per disk: one daemon, disk a in flush mode, disk c in barrier mode.
new_disk "$WORK/c.img" 16M
c=$(add_disk "$dom" xvdd "$WORK/c.img")
run_back --disk "$WORK/c.img:barrier=1,cache=writethrough" \
	--run "'$ASDOM' $dom '$RAWFRONT' --dev $a flush && '$ASDOM' $dom '$RAWFRONT' --dev $c flush" \
	>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "per-disk barrier mode failed"; }
grep -q "vbd/$dom/$c: opened .*cache writethrough, barrier mode" "$LOG" || bk_fail "--disk settings not applied"
[ "$(xs read "/local/domain/0/backend/vbd/$dom/$c/feature-barrier")" = 1 ] || fail "--disk barrier=1: feature-barrier != 1"
[ "$(xs read "/local/domain/0/backend/vbd/$dom/$a/feature-barrier")" = 0 ] || fail "--disk applied to the wrong disk"
[ "$(xs read "/local/domain/0/backend/vbd/$dom/$b/feature-flush-cache")" = 0 ] || fail "barrier mode: feature-flush-cache != 0"
[ "$(xs read "/local/domain/0/backend/vbd/$dom/$b/feature-barrier")" = 1 ] || fail "barrier mode: feature-barrier != 1"
xs read "/local/domain/0/backend/vbd/$dom/$b/feature-max-indirect-segments" >/dev/null 2>&1 &&
	fail "barrier mode still offers indirect descriptors"
bk_done
