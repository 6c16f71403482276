#!/bin/sh
# xbd-back: where a clock read is a system call (a PV dom0 has no vDSO
# clock unless Xen calls its TSC stable, and under QEMU it does not;
# XBD_TEST_CLOCK=syscall makes every read one here) a ring reads the clock
# about twice per request at queue depth 1 (the consume and the completion
# the latency histograms need), not three or four times: its sleep and its
# poll start at its latest read since it woke, and a poll counts its window
# in spins.  Where the clock is a vDSO read nothing changes.  Asserted from
# the ring's clock_reads counter, with 4k random reads at QD1 on a file and
# on a loop device (3.0 and 3.6 a request before).  A ring that sleeps and
# is woken by an event reads the clock once on waking (what the polling
# windows learn from); how often that happens follows the host's load (a
# completion later than the poll window), so the reads of those wake-ups,
# the ring's notify_recv, are counted apart and the rest per request is
# what is bounded.  The old code's extra reads were per sleep and per poll,
# one of each per request at QD1, so it stays above 3 either way.
. "$top_srcdir/tests/blkback/common.sh"
strings "$XBD_BACK" | grep -q XBD_TEST_CRASH ||
	skip "xbd-back was built without --enable-test-hooks"

# reads_per_req TARGET CLOCK: clock reads per request, x100
reads_per_req() {
	dom=$(new_domain)
	a=$(add_disk "$dom" xvdb "$1")
	XBD_TEST_CLOCK=$2 run_back -v -v --poll-max-ns 32000 \
		--run "'$ASDOM' $dom '$RAWFRONT' --dev $a --qd 1 --secs 0.5 bench" \
		>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "bench on $1 failed"; }
	reqs=$(grep "vbd/$dom/$a: rd_req=" "$LOG" | tail -1 | sed -n 's/.* rd_req=\([0-9]*\).*/\1/p')
	line=$(grep "vbd/$dom/$a: .*clock_reads=" "$LOG" | tail -1)
	reads=$(echo "$line" | sed -n 's/.* clock_reads=\([0-9]*\).*/\1/p')
	wakes=$(echo "$line" | sed -n 's/.* notify_recv=\([0-9]*\).*/\1/p')
	[ -n "$reqs" ] && [ "$reqs" -ge 100 ] || bk_fail "too few requests on $1: ${reqs:-none}"
	[ -n "$reads" ] && [ -n "$wakes" ] || bk_fail "no clock_reads or notify_recv for $1: $line"
	echo "$1, clock $2: $reads clock reads ($wakes of them on waking) for $reqs requests" >&2
	echo $(((reads - wakes) * 100 / reqs))
}

new_disk "$WORK/disk.img" 64M
r=$(reads_per_req "$WORK/disk.img" syscall)
grep -q "a clock read costs [0-9]* ns here (a system call" "$LOG" ||
	bk_fail "xbd-back did not say its clock is a system call: $(grep 'clock read' "$LOG")"
[ "$r" -le 230 ] || bk_fail "a file at QD1: $r/100 clock reads a request, besides those of wake-ups, where a read is a system call (at most 2.3)"
# An image of its own: the first guest's disk, still there, has disk.img
# read-write, which refuses it to a second guest.
new_disk "$WORK/disk2.img" 64M
r=$(reads_per_req "$WORK/disk2.img" vdso)
grep -q "a clock read costs [0-9]* ns here$" "$LOG" ||
	bk_fail "xbd-back took its vDSO clock for a system call: $(grep 'clock read' "$LOG")"

if command -v losetup >/dev/null 2>&1 && loopdev=$(losetup -f --show "$WORK/disk.img" 2>/dev/null); then
	sim_on_exit "losetup -d '$loopdev'"
	# 1.4-1.9 besides wake-ups, alone and beside three busy loops (2.26 to
	# 2.61 with them, which is why they are counted apart).
	r=$(reads_per_req "$loopdev" syscall)
	[ "$r" -le 230 ] || bk_fail "a loop device at QD1: $r/100 clock reads a request, besides those of wake-ups (at most 2.3)"
fi
bk_done
