#!/bin/sh
# xbd-back: random reads, writes (direct and indirect), discards and
# flushes at queue depth 32, every read checked against what was written,
# across the data path's variants: batching off, mapped instead of
# persistent grants, grant copy (forced, and auto without persistent grants), two queues of 4-page rings, the x86_32
# ABI, barrier mode.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
i=0
while IFS='|' read -r back front; do
	i=$((i + 1))
	new_disk "$WORK/d$i.img" 32M
	dev=$(add_disk "$dom" "$((2000 + i))" "$WORK/d$i.img")
	# shellcheck disable=SC2086
	run_back $back --run "'$ASDOM' $dom '$RAWFRONT' --dev $dev --qd 32 --secs 0.5 $front stress" \
		>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "stress failed: back '$back' front '$front'"; }
	grep "stress:" "$WORK/out"
done <<EOS
--max-batch 32|--persistent 1
--max-batch 1 --grants map|--persistent 0
--grant-copy|--persistent 0
--cache writethrough --fua-mode fdatasync|--persistent 0
--max-batch 8|--persistent 0
--max-queues 2|--queues 2 --order 2
--cache writethrough|--abi x86_32-abi
--barrier --cache unsafe|
EOS
bk_done
