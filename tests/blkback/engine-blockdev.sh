#!/bin/sh
# xbd-back: a block device (a loop device here) as storage: its size,
# sector sizes and discard support come from the device, data reads back
# intact, and BLKDISCARD leaves zeros (on uring: fallocate's zeroes).
. "$top_srcdir/tests/blkback/common.sh"

command -v losetup >/dev/null 2>&1 || skip "losetup not installed"
new_disk "$WORK/backing.img" 32M
loopdev=$(losetup -f --show "$WORK/backing.img" 2>/dev/null) || skip "cannot set up a loop device here"
sim_on_exit "losetup -d '$loopdev'"
dom=$(new_domain)
a=$(add_disk "$dom" xvdb "$loopdev")
# stress first: it needs a disk that still reads as zeros.
run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --qd 16 --secs 0.3 stress &&
	'$ASDOM' $dom '$RAWFRONT' --dev $a rw && '$ASDOM' $dom '$RAWFRONT' --dev $a discard" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "I/O on $loopdev failed"; }
be=/local/domain/0/backend/vbd/$dom/$a
[ "$(xs read "$be/sectors")" = 65536 ] || bk_fail "sectors of a 32 MiB device is not 65536"
[ "$(xs read "$be/sector-size")" = "$(blockdev --getss "$loopdev")" ] || bk_fail "sector-size differs from the device's"
[ "$(xs read "$be/feature-discard")" = 1 ] || bk_fail "loop device discard not offered"
# The same device on the uring engine (where the build has it): discard is
# fallocate(PUNCH_HOLE), a write of zeroes on a block device.
if "$XBD_BACK" --check-config --control none --disk "x:engine=uring" >/dev/null 2>&1; then
	: >"$LOG"
	run_back --engine uring --run "'$ASDOM' $dom '$RAWFRONT' --dev $a rw &&
		'$ASDOM' $dom '$RAWFRONT' --dev $a discard" >"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "I/O on $loopdev through uring failed"; }
	grep -q "vbd/$dom/$a: opened .*(uring engine" "$LOG" || bk_fail "$loopdev not served by uring"
fi
bk_done
