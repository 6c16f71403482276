#!/bin/sh
# xbd-back: writes read back byte for byte (a pattern per sector), through
# persistent grants, through grants mapped per batch (grants = map) and,
# for a frontend without persistent grants under the default grants =
# auto, through grant copy; one daemon serves all three.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 64M
new_disk "$WORK/b.img" 64M
new_disk "$WORK/m.img" 64M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
b=$(add_disk "$dom" xvdc "$WORK/b.img")
m=$(add_disk "$dom" xvde "$WORK/m.img")
run_back -v --disk "$WORK/m.img:grants=map" --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --persistent 1 rw &&
	'$ASDOM' $dom '$RAWFRONT' --dev $b --persistent 0 rw &&
	'$ASDOM' $dom '$RAWFRONT' --dev $m --persistent 0 rw" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "write/read-back failed"; }
grep -q "vbd/$dom/$a: connected: .*persistent grants" "$LOG" || bk_fail "persistent grants not used"
grep -q "vbd/$dom/$b: connected: .*copied grants" "$LOG" ||
	bk_fail "grants = auto did not copy for a frontend without persistent grants"
grep -q "vbd/$dom/$m: connected: .*mapped grants" "$LOG" || bk_fail "grants = map did not map"
# tmpfs refused O_DIRECT before Linux 6.6: xbd-back falls back to the page
# cache and says so.
if [ -d /dev/shm ] && shm=$(mktemp /dev/shm/xbd-bk.XXXXXXXX); then
	sim_on_exit "rm -f '$shm'"
	truncate -s 16M "$shm"
	c=$(add_disk "$dom" xvdd "$shm")
	run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $c rw" >"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "write/read-back on tmpfs failed"; }
	if dd if=/dev/zero of="$shm" bs=4096 count=1 oflag=direct conv=notrunc 2>/dev/null; then
		echo "tmpfs takes O_DIRECT here: no fallback to check"
	else
		grep -q "O_DIRECT refused by the filesystem, using the page cache" "$LOG" ||
			bk_fail "no warning about the O_DIRECT fallback"
	fi
fi
# The file itself holds the data at the right offset (sector 8 = byte 4096).
od -A n -t x8 -j 4096 -N 16 "$WORK/a.img" | grep -q "[1-9a-f]" ||
	fail "nothing reached the backing file at sector 8"
bk_done
