#!/bin/sh
# The noisy neighbour, on the simulator: guest H keeps 32 reads of 1 MiB
# in flight on its disk while guest V does small durable writes (4 KiB,
# each followed by a flush: xbd-front bench --fua) at queue depth 1, both
# disks files on the same host filesystem, each guest's disks in a worker
# of its own.  V's rate alone, beside H unlimited, and beside H limited
# (bps-read set on H's disk at run time with xbdctl set): with H limited,
# V keeps at least half the rate it had alone.  Where H does not even
# slow V down (a filesystem that answers H from memory), there is nothing
# to show: the test skips, saying so.  Each figure is what the
# bench counted over the time it measured itself; a pair (alone, beside H
# limited) is tried up to 3 times, since a shared machine can slow one
# phase by itself, and every attempt is printed.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
sim_need blkfront/xbd-front
FRONT="$top_builddir/blkfront/xbd-front"
CTL=$WORK/ctl.sock
ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}
# vbench NAME: V's load for 2 s, its IOPS in $WORK/NAME.json
vbench() {
	"$ASDOM" "$v" "$FRONT" bench --vdev xvdb --queues 1 --json --rw randwrite --bs 4k \
		--iodepth 1 --fua --runtime 2 >"$WORK/$1.json" 2>"$WORK/$1.err" ||
		{ cat "$WORK/$1.err"; bk_fail "V's bench ($1) failed"; }
	jq -e '.errors == 0' "$WORK/$1.json" >/dev/null || bk_fail "V's bench ($1): I/O errors"
}
# beside NAME: V's load while H reads (H runs before, through and after it)
beside() {
	"$ASDOM" "$h" "$FRONT" bench --vdev xvdb --queues 1 --json --rw read --bs 1m --iodepth 32 \
		--runtime 4.5 >"$WORK/$1.h.json" 2>"$WORK/$1.h.err" &
	hp=$!
	sleep 1.5
	vbench "$1"
	wait "$hp" || { cat "$WORK/$1.h.err"; bk_fail "H's bench ($1) failed"; }
}
iops() { jq '.iops' "$WORK/$1.json"; }
hmib() { jq '.read_bw_mib_s' "$WORK/$1.h.json"; }

h=$(new_domain)
v=$(new_domain)
new_disk "$WORK/h.img" 256M
new_disk "$WORK/v.img" 64M
# H's file is read for real, not as a hole the filesystem answers from nothing.
dd if=/dev/urandom of="$WORK/h.img" bs=1M count=256 conv=notrunc status=none ||
	bk_fail "cannot fill H's image"
start_back --types vbd --control "$CTL"
sim_wait_for 10 test -S "$CTL" || bk_fail "no control socket $CTL"
hd=$(add_disk "$h" xvdb "$WORK/h.img")
vd=$(add_disk "$v" xvdb "$WORK/v.img")
wait_state "$h" "$hd" 2
wait_state "$v" "$vd" 2

vbench alone
beside unlimited
echo "V alone: $(iops alone) IOPS; beside H unlimited: $(iops unlimited) IOPS (H: $(hmib unlimited) MiB/s)"
awk -v a="$(iops alone)" -v b="$(iops unlimited)" 'BEGIN { exit !(b < a * 0.7) }' ||
	skip "H does not slow V down here ($(iops unlimited) IOPS beside it, $(iops alone) alone): no noisy neighbour to tame"
ctl set "vbd/$h/$hd" bps-read=16777216 >/dev/null || bk_fail "xbdctl set bps-read on H failed"
ok=
for try in 1 2 3; do
	vbench "alone$try"
	beside "limited$try"
	echo "try $try: V alone $(iops "alone$try") IOPS; beside H limited to 16 MiB/s:" \
		"$(iops "limited$try") IOPS (H: $(hmib "limited$try") MiB/s)"
	awk -v h="$(hmib "limited$try")" 'BEGIN { exit !(h <= 16 * 1.1 + 2) }' ||
		bk_fail "H read $(hmib "limited$try") MiB/s under its 16 MiB/s limit"
	if awk -v a="$(iops "alone$try")" -v b="$(iops "limited$try")" 'BEGIN { exit !(b >= a / 2) }'; then
		ok=1
		break
	fi
done
[ -n "$ok" ] || bk_fail "V kept less than half its solo rate beside H limited, 3 times"
ctl stats "vbd/$h/$hd" | grep -E "^  (limits|throttled)"
bk_done
