#!/bin/sh
# xbd-back: with requests in flight, new ones are taken when a completion
# wakes the ring thread, without the guest's notification (notify-defer-us,
# default 1000): the guest's notifications per request at QD32 fall from
# about one a completion to next to none, and each one it saves is, on a
# PV dom0, two system calls of xbd-back's (the pending port's read, its
# unmask) and an upcall of Xen's.  Asserted with 4k random reads at QD32
# for a second on storage that takes 1 ms a request (null:...:delay_ms=1,
# where the simulator's guest refills its 32 in a batch, one notification
# each, about 0.031 a request): notify_sent/req of rawfront's bench, with
# deferral at most half of what it is with --notify-defer-us 0 (0.008
# against 0.031 here; that one at least 0.015, or the measure is void);
# every read answered in both.  (On real Xen fio's guest refills one
# request a completion: there it is 0.6-0.7 a request against next to
# none, make check-xen-cost's c-pers1 and c-nodefer rows.)  Storage that
# stalls: with 4 requests in flight that take 2 s, a 5th queued behind them
# is still taken within the deferral's bound, not when they complete
# (answered 2.2 s after the first, not 4 s).
. "$top_srcdir/tests/blkback/common.sh"

# sent_per_req [OPTIONS]: the guest's notifications per request, x1000
sent_per_req() {
	dom=$(new_domain)
	a=$(add_disk "$dom" xvdb "null:256M:delay_ms=1")
	run_back -v "$@" --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --qd 32 --secs 1 bench" \
		>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "bench failed ($*)"; }
	line=$(grep "^bench: qd=32 " "$WORK/out" | tail -1)
	[ -n "$line" ] || { cat "$WORK/out"; bk_fail "no bench line ($*)"; }
	echo "${*:-default}: $line" >&2
	reqs=$(echo "$line" | sed -n 's/.* reqs=\([0-9]*\).*/\1/p')
	[ "${reqs:-0}" -ge 1000 ] || bk_fail "too few requests ($*): $line"
	echo "$line" | sed -n 's/.* notify_sent\/req=\([0-9.]*\).*/\1/p' | awk '{ printf "%d\n", $1 * 1000 }'
}
off=$(sent_per_req --notify-defer-us 0)
on=$(sent_per_req)
[ "$off" -ge 15 ] || bk_fail "without deferral the guest notified only $off/1000 a request: the measure is void"
[ $((on * 2)) -le "$off" ] || bk_fail "with deferral the guest notified $on/1000 a request, against $off/1000 without (at most half)"

# Stalled storage: 4 reads held 2 s, a fifth 200 ms after them (rawfront late): taken when it
# came (answered near 2.2 s, 2.2 s after the first), not when the four completed (near 4 s).
dom=$(new_domain)
a=$(add_disk "$dom" xvdb "null:64M:delay_ms=2000")
run_back -v --run "'$ASDOM' $dom '$RAWFRONT' --dev $a late" >"$WORK/late.out" 2>&1 ||
	{ cat "$WORK/late.out"; bk_fail "rawfront late failed"; }
line=$(grep "^late: answered after " "$WORK/late.out")
echo "$line"
fifth=$(echo "$line" | awk '{ print $(NF - 1) }')
[ -n "$fifth" ] && [ "$fifth" -lt 3500 ] ||
	bk_fail "the fifth read waited for the four in flight before it was taken: $line"
bk_done
