#!/bin/sh
# xbd-back: every malformed request gets BLKIF_RSP_ERROR and one log line
# naming the device and the reason, and the device keeps working after it.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
b=$(add_disk "$dom" xvdc "$WORK/b.img")
# Two disks: each gets fewer refusals than the per-device log rate limit.
cmd=true
for sc in bad-op nseg0 nseg12 first-gt-last last8; do
	cmd="$cmd && '$ASDOM' $dom '$RAWFRONT' --dev $a $sc"
done
for sc in beyond-end overflow indirect-too-many; do
	cmd="$cmd && '$ASDOM' $dom '$RAWFRONT' --dev $b $sc"
done
run_back --run "$cmd" >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "a hostile request was not refused"; }
for reason in "unknown operation" "bad segment count" "first_sect > last_sect" \
	"beyond end of disk" "more indirect segments than advertised" \
	"indirect request wraps an operation other than read or write"; do
	grep -q "xbd-back: vbd/$dom/[0-9]*: request refused: .*$reason" "$LOG" ||
		bk_fail "no log line for: $reason"
done
bk_done
