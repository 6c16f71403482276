#!/bin/sh
# xbd-back: --max-batch above 64 is honoured (it was silently capped at
# 64): a queue-depth-128 load on a 4-page ring with --max-batch 128 puts
# more than 64 iocbs into one io_submit call.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
a=$(add_disk "$dom" xvdb null:1G)
run_back -v -v --max-batch 128 --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --order 2 --qd 128 --secs 0.5 bench" \
	>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "bench with --max-batch 128 failed"; }
line=$(grep "vbd/$dom/$a: io_submit=" "$LOG" | tail -1)
echo "max-batch 128: $line"
echo "$line" | grep -q "batch_hist=[0-9]*,[0-9]*,[0-9]*,[0-9]*,[0-9]*,[0-9]*,[0-9]*,[1-9][0-9]* " ||
	bk_fail "no io_submit call with more than 64 iocbs: $line"
bk_done
