#!/bin/sh
# xbd-back: --max-batch 1 turns io_submit batching off (every call submits
# one iocb); the default batches a queue-depth-32 load (more than one iocb
# per call on average).
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
a=$(add_disk "$dom" xvdb null:1G)
submits() {
	grep "vbd/$dom/$a: io_submit=" "$LOG" | tail -1
}
run_back -v -v --max-batch 1 --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --qd 32 --secs 0.3 bench" \
	>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "bench with --max-batch 1 failed"; }
line=$(submits)
echo "max-batch 1: $line"
echo "$line" | grep -q "batch_hist=[0-9]*,0,0,0,0,0,0,0 " || bk_fail "--max-batch 1 still batched: $line"
calls=$(echo "$line" | sed -n 's/.*io_submit=\([0-9]*\) submitted=\([0-9]*\).*/\1 \2/p')
set -- $calls
[ "$1" = "$2" ] && [ "$1" -gt 0 ] || bk_fail "io_submit calls ($1) != iocbs ($2)"

: >"$LOG"
run_back -v -v --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --qd 32 --secs 0.3 bench" \
	>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "bench with default batching failed"; }
line=$(submits)
echo "default: $line"
calls=$(echo "$line" | sed -n 's/.*io_submit=\([0-9]*\) submitted=\([0-9]*\).*/\1 \2/p')
set -- $calls
[ "$2" -gt "$1" ] || bk_fail "no batching at queue depth 32: $line"
bk_done
