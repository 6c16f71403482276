#!/bin/sh
# xbd-back --fua-mode: how a write that must be durable on completion is
# made so.  Under a disk whose every flush fails (the fault engine), the
# writes of --cache writethrough succeed with fua-mode dsync (RWF_DSYNC,
# no flush) and fail with fua-mode fdatasync (each write is followed by a
# flush); on a healthy disk both modes read back what they wrote, in
# writethrough and in barrier mode.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/f.img" 16M
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
f=$(add_disk "$dom" xvdb "fault:eio@flush-after=0:$WORK/f.img")
a=$(add_disk "$dom" xvdc "$WORK/a.img")
b=$(add_disk "$dom" xvdd "$WORK/b.img")

run_back --cache writethrough --run "'$ASDOM' $dom '$RAWFRONT' --dev $f rw" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "fua-mode dsync: writethrough writes needed a flush"; }
: >"$LOG"
if run_back --cache writethrough --fua-mode fdatasync \
	--run "'$ASDOM' $dom '$RAWFRONT' --dev $f rw" >"$WORK/out" 2>&1; then
	cat "$WORK/out"
	bk_fail "fua-mode fdatasync: writes succeeded although every flush fails"
fi
grep -q "vbd/$dom/$f: I/O error on op 1 " "$LOG" ||
	bk_fail "fua-mode fdatasync: the failed flush was not reported on the write"
# That rawfront exited on the failed write and left its ring Connected,
# with an event channel whose number the simulator gives the next rawfront
# of the domain: the next xbd-back would take that dead ring over (a clean
# stop's resume) and bind the new frontend's port under it.  A frontend
# that goes away says Closed.
xs write "/local/domain/$dom/device/vbd/$f/state" 6

run_back --fua-mode fdatasync --disk "$WORK/b.img:barrier=1" --cache writethrough \
	--run "'$ASDOM' $dom '$RAWFRONT' --dev $a rw && '$ASDOM' $dom '$RAWFRONT' --dev $a flush &&
	'$ASDOM' $dom '$RAWFRONT' --dev $b flush" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "fua-mode fdatasync: data did not read back"; }

out=$(sim_env 0 && "$XBD_BACK" --fua-mode fdatasync --check-config --config /dev/null 2>&1)
echo "$out" | grep -qx "fua-mode = fdatasync" || bk_fail "--check-config does not show fua-mode"
bk_done
