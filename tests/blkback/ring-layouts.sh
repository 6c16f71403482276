#!/bin/sh
# xbd-back: multi-page rings (ring-page-order 2 and the deprecated
# num-ring-pages), two queues, and the x86_32 ABI all carry data intact.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
i=0
# Linux blkfront writes ring-page-order once at the top even with queues;
# a per-queue ring-page-order is accepted as well.
for args in "--order 2" "--num-ring-pages 4" "--queues 2" "--abi x86_32-abi" \
	"--order 4 --queues 2 --abi x86_32-abi" "--order 2 --queues 2 --order-per-queue" \
	"--num-ring-pages 2 --queues 2"; do
	i=$((i + 1))
	new_disk "$WORK/d$i.img" 16M
	dev=$(add_disk "$dom" "$((1000 + i))" "$WORK/d$i.img")
	run_back --max-queues 2 --run "'$ASDOM' $dom '$RAWFRONT' --dev $dev $args rw" >"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "rw with $args failed"; }
done
grep -q "connected: 1 queue, 4 ring pages" "$LOG" || bk_fail "no 4-page ring"
grep -q "connected: 2 queues" "$LOG" || bk_fail "no 2-queue connection"
grep -q "connected: 2 queues, 16 ring pages, protocol x86_32-abi" "$LOG" || bk_fail "no 16-page 32-bit 2-queue connection"
[ "$(xs read /local/domain/0/backend/vbd/$dom/1001/max-ring-page-order)" = 4 ] || fail "max-ring-page-order != 4"
[ "$(xs read /local/domain/0/backend/vbd/$dom/1001/multi-queue-max-queues)" = 2 ] || fail "multi-queue-max-queues != 2"
bk_done
