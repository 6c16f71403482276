#!/bin/sh
# xbd-back: the uring engine (engine = uring, io_uring): data reads back
# through persistent grants and through grant copy (the bounce pool as a
# registered buffer), flush and barrier, discard, read-only, a verified
# stress run (grant copy); EIO injected by the fault engine over uring,
# and its partial submissions; where io_uring cannot run (the test hook
# XBD_TEST_URING=ENOSYS|EPERM) the disk is served by aio with one line
# saying why.
. "$top_srcdir/tests/blkback/common.sh"

"$XBD_BACK" --check-config --control none --disk "x:engine=uring" >/dev/null 2>"$WORK/cc.err" ||
	skip "xbd-back was built without liburing: $(cat "$WORK/cc.err")"

dom=$(new_domain)
for d in a b c r e; do new_disk "$WORK/$d.img" 16M; done
a=$(add_disk "$dom" xvdb "$WORK/a.img")
b=$(add_disk "$dom" xvdc "$WORK/b.img")
c=$(add_disk "$dom" xvdd "$WORK/c.img")
r=$(add_disk "$dom" xvde "$WORK/r.img" --mode r)
e=$(add_disk "$dom" xvdh "$WORK/e.img")
run_back -v --engine uring --disk "$WORK/c.img:barrier=1" \
	--run "'$ASDOM' $dom '$RAWFRONT' --dev $a --persistent 1 rw &&
	'$ASDOM' $dom '$RAWFRONT' --dev $b --persistent 0 rw &&
	'$ASDOM' $dom '$RAWFRONT' --dev $a flush && '$ASDOM' $dom '$RAWFRONT' --dev $c flush &&
	'$ASDOM' $dom '$RAWFRONT' --dev $a discard &&
	'$ASDOM' $dom '$RAWFRONT' --dev $r readonly &&
	'$ASDOM' $dom '$RAWFRONT' --dev $e --persistent 0 --qd 16 --secs 0.3 stress" \
	>"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "I/O on the uring engine failed"; }
for d in $a $b $c $r $e; do
	grep -q "vbd/$dom/$d: opened .*(uring engine" "$LOG" || bk_fail "vbd $d was not served by the uring engine"
done
grep -q "vbd/$dom/$b: connected: .*copied grants" "$LOG" || bk_fail "disk b did not copy grants"
grep -q "cannot register the bounce buffers" "$LOG" && bk_fail "the bounce pool was not registered"
od -A n -t x8 -j 4096 -N 16 "$WORK/a.img" | grep -q "[1-9a-f]" ||
	fail "nothing reached the backing file at sector 8"
cmp -s -n 16777216 "$WORK/r.img" /dev/zero || bk_fail "the read-only image changed"

# The fault engine over uring: an injected EIO reaches the guest as ERROR
# (and one line); partial submissions (eagain@all) lose nothing.  Each
# faulted disk in a domain of its own: the first one's frontend dies with
# its disk Connected, the next xbd-back takes that ring over and binds the
# event-channel port its xenstore names, and a new frontend of the same
# domain may have been given that port meanwhile (seen failing so: "vbd/1/
# 5002: cannot bind event channel 1" at load 12).
fd1=$(new_domain)
fd2=$(new_domain)
new_disk "$WORK/f1.img" 16M
new_disk "$WORK/f2.img" 16M
f1=$(add_disk "$fd1" 5001 "fault:eio@write-sector=8-15:$WORK/f1.img")
f2=$(add_disk "$fd2" 5002 "fault:eagain@all:$WORK/f2.img")
: >"$LOG"
run_back --engine uring --run "'$ASDOM' $fd1 '$RAWFRONT' --dev $f1 rw" >"$WORK/out-f1" 2>&1 &&
	{ cat "$WORK/out-f1"; bk_fail "rw on a faulted disk succeeded"; }
grep -q "rawfront: write: status -1, expected 0" "$WORK/out-f1" "$LOG" ||
	{ cat "$WORK/out-f1"; bk_fail "the injected EIO did not reach the guest as ERROR"; }
grep -q "vbd/$fd1/$f1: I/O error on op 1 sector 8: Input/output error" "$LOG" || bk_fail "no log line for the EIO write"
run_back --engine uring --run "'$ASDOM' $fd2 '$RAWFRONT' --dev $f2 --qd 32 --secs 0.5 stress" \
	>"$WORK/out-f2" 2>&1 || { cat "$WORK/out-f2"; bk_fail "stress with partial submissions on uring failed"; }
[ "$(grep -c "fault engine: 1 rule(s) .* over uring engine" "$LOG")" -ge 2 ] ||
	bk_fail "the fault engine did not wrap the uring engine"

# io_uring unavailable: aio serves the disk, and one line says why.  A
# domain of its own each time: the faulted disks' frontends above died
# Connected, and a backend that reconnects them may take the event-channel
# port their xenstore still names, which a new frontend of the same
# domain may have been given.
if grep -q XBD_TEST_URING "$XBD_BACK"; then
	for why in ENOSYS EPERM; do
		: >"$LOG"
		dom=$(new_domain)
		new_disk "$WORK/fb-$why.img" 16M
		a=$(add_disk "$dom" xvdb "$WORK/fb-$why.img")
		(XBD_TEST_URING=$why; export XBD_TEST_URING
		 run_back --engine uring --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --persistent 1 rw") \
			>"$WORK/out-fb" 2>&1 || { cat "$WORK/out-fb"; bk_fail "$why: I/O after the fallback failed"; }
		grep -q "vbd/$dom/$a: opened .*(aio engine" "$LOG" || bk_fail "$why: disk not served by aio"
		[ "$(grep -c "/fb-$why.img: the uring engine cannot run here (.*$why.*): served by the aio engine" "$LOG")" = 1 ] ||
			bk_fail "$why: not exactly one line naming the reason"
	done
else
	echo "xbd-back built without --enable-test-hooks: fallback not checked"
fi
bk_done
