#!/bin/sh
# xbd-back: while a ring polls for completions it looks at the kernel's aio
# completion ring in its own memory, and calls into the kernel (eventfd
# read, io_getevents) only when something completed: at queue depth 1 on a
# loop device the reap calls stay a few per completion (one poll used to
# make about 90 per completion, each a read and an io_getevents).
. "$top_srcdir/tests/blkback/common.sh"

command -v losetup >/dev/null 2>&1 || skip "losetup not installed"
new_disk "$WORK/backing.img" 64M
loopdev=$(losetup -f --show "$WORK/backing.img" 2>/dev/null) || skip "cannot set up a loop device here"
sim_on_exit "losetup -d '$loopdev'"
dom=$(new_domain)
a=$(add_disk "$dom" xvdb "$loopdev")
run_back -v -v --poll-max-ns 32000 --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --qd 1 --secs 0.5 bench" \
	>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "bench on $loopdev failed"; }
line=$(grep "vbd/$dom/$a: io_submit=" "$LOG" | tail -1)
echo "$line"
grep "vbd/$dom/$a: .*poll_hits=" "$LOG" | tail -1
reaped=$(echo "$line" | sed -n 's/.* reaped=\([0-9]*\).*/\1/p')
calls=$(echo "$line" | sed -n 's/.* reap_calls=\([0-9]*\).*/\1/p')
[ -n "$reaped" ] && [ "$reaped" -gt 100 ] || bk_fail "too few completions: $line"
[ "$calls" -le $((reaped * 10)) ] || bk_fail "$calls reap calls for $reaped completions: polling calls the kernel"
bk_done
