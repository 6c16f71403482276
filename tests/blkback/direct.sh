#!/bin/sh
# xbd-back --direct: files are opened O_DIRECT by default and through dom0's
# page cache with direct = 0 (here a --disk rule for one disk): the
# disk's descriptors in xbd-back and in its domain's worker carry O_DIRECT
# or not, the "opened" line says "dom0's page cache" for that disk only,
# and on both engines what the guest writes reads back, reaches the file
# and survives a flush.
. "$top_srcdir/tests/blkback/common.sh"

# fd_flags FILE: the open flags (octal, as fdinfo gives them) of each
# descriptor xbd-back and its workers hold on FILE, one a line
fd_flags() {
	f=$(readlink -f "$1")
	for p in $(back_pids); do
		for fd in /proc/"$p"/fd/*; do
			[ "$(readlink "$fd" 2>/dev/null)" = "$f" ] || continue
			sed -n 's/^flags:[[:space:]]*//p' "/proc/$p/fdinfo/${fd##*/}"
		done
	done
}
# the flag's value differs between architectures (040000 on x86)
O_DIRECT=$(python3 -c 'import os; print("0%o" % os.O_DIRECT)')

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
b=$(add_disk "$dom" xvdc "$WORK/b.img")
# Where this filesystem refuses O_DIRECT (tmpfs before Linux 6.6) xbd-back
# uses the page cache for every disk, and says so.
dio=1
dd if=/dev/zero of="$WORK/probe" bs=4096 count=1 oflag=direct 2>/dev/null || dio=0

start_back -v --disk "$WORK/b.img:direct=0"
# Verified random I/O on both (stress wants disks of zeros: first).
front "$dom" --dev "$a" --qd 4 --secs 3 stress >"$WORK/out-a" 2>&1 &
fa_pid=$!
front "$dom" --dev "$b" --qd 4 --secs 3 stress >"$WORK/out-b" 2>&1 &
fb_pid=$!
wait $fa_pid || { rc=$?; cat "$WORK/out-a"; bk_fail "stress on disk a (O_DIRECT) failed (rawfront exit $rc)"; }
wait $fb_pid || { rc=$?; cat "$WORK/out-b"; bk_fail "stress on disk b (the page cache) failed (rawfront exit $rc)"; }
# Then frontends that stay connected until the descriptors were looked at
# (a loaded machine may take longer than any fixed stress time to get there).
front_paused "$dom" "$a" "$WORK/out-a"
fa_pid=$FRONT_PID
front_paused "$dom" "$b" "$WORK/out-b"
fb_pid=$FRONT_PID
fa=$(fd_flags "$WORK/a.img")
fb=$(fd_flags "$WORK/b.img")
[ -n "$fa" ] && [ -n "$fb" ] || bk_fail "no descriptor of xbd-back's on the disks (a: '$fa', b: '$fb')"
for f in $fa; do
	if [ $dio = 1 ] && [ $(( 0$f & O_DIRECT )) = 0 ]; then
		bk_fail "disk a (direct = 1, the default) has a descriptor without O_DIRECT (flags $f)"
	fi
done
for f in $fb; do
	[ $(( 0$f & O_DIRECT )) = 0 ] || bk_fail "disk b (direct = 0) has a descriptor with O_DIRECT (flags $f)"
done
touch "$WORK/go"
wait $fa_pid || { cat "$WORK/out-a"; bk_fail "I/O on disk a (O_DIRECT) failed"; }
wait $fb_pid || { cat "$WORK/out-b"; bk_fail "I/O on disk b (the page cache) failed"; }
front "$dom" --dev "$b" --persistent 0 rw >"$WORK/out" 2>&1 && front "$dom" --dev "$b" flush >>"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "rw or flush through the page cache failed"; }
grep -q "vbd/$dom/$b: opened .*(aio engine, .*, dom0's page cache" "$LOG" ||
	bk_fail "disk b's opened line does not say dom0's page cache"
if [ $dio = 1 ] && grep "vbd/$dom/$a: opened " "$LOG" | grep -q "page cache"; then
	bk_fail "disk a's opened line says page cache"
fi
stop_back || bk_fail "xbd-back did not stop cleanly"
od -A n -t x8 -j 4096 -N 16 "$WORK/b.img" | grep -q "[1-9a-f]" ||
	bk_fail "what the guest wrote through the page cache is not in the file"

# io_uring through the page cache, where xbd-back has it
if "$XBD_BACK" --check-config --control none --disk "x:engine=uring" >/dev/null 2>&1; then
	: >"$LOG"
	new_disk "$WORK/c.img" 16M
	new_disk "$WORK/d.img" 16M   # stress wants a disk of zeros
	c=$(add_disk "$dom" xvdd "$WORK/c.img")
	d=$(add_disk "$dom" xvde "$WORK/d.img")
	run_back -v --engine uring --direct 0 \
		--run "'$ASDOM' $dom '$RAWFRONT' --dev $c rw && '$ASDOM' $dom '$RAWFRONT' --dev $c flush &&
		'$ASDOM' $dom '$RAWFRONT' --dev $d --qd 8 --secs 0.5 stress" >"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "the uring engine through the page cache failed"; }
	for v in $c $d; do
		grep -q "vbd/$dom/$v: opened .*(uring engine, .*, dom0's page cache" "$LOG" ||
			bk_fail "the uring disk $v's opened line does not say dom0's page cache"
	done
fi

out=$(sim_env 0 && "$XBD_BACK" --check-config --config /dev/null --direct 0 2>&1)
echo "$out" | grep -qx "direct = 0" || bk_fail "--check-config does not show direct = 0: $out"
bk_done
