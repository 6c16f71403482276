#!/bin/sh
# xbd-back: discard punches a hole that reads back as zeros; discard-enable=0
# from the toolstack turns feature-discard off.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
b=$(add_disk "$dom" xvdc "$WORK/b.img" --discard-enable 0)
run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a discard && '$ASDOM' $dom '$RAWFRONT' --dev $b connect" \
	>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "discard scenario failed"; }
be=/local/domain/0/backend/vbd/$dom
[ "$(xs read "$be/$a/feature-discard")" = 1 ] || fail "feature-discard != 1"
xs read "$be/$a/discard-granularity" >/dev/null || fail "no discard-granularity"
xs read "$be/$a/discard-alignment" >/dev/null || fail "no discard-alignment"
[ "$(xs read "$be/$b/feature-discard")" = 0 ] || fail "discard-enable=0 not honoured"
bk_done
