#!/bin/sh
# What goes wrong around a backup gets one clear error, and the guest's
# I/O goes on: two guests run fio verify loops throughout (one on a
# tracked disk, cbt-scratch of 4 blocks and at most 2 checkpoints; one on
# a disk without tracking), and every run must pass.  Asserted, each with
# the line xbdctl or nbdkit prints (the tracked disk's guest starts
# once the view is exported, to fill its scratch store):
#  - an unknown disk, a disk without tracking, a bad name, an unknown
#    checkpoint (take a full backup), a name made twice, one checkpoint
#    past cbt-max-checkpoints, FROM after TO;
#  - two exports of one view (the second refused: exported already), an
#    export naming another checkpoint;
#  - a scratch store that fills up: the view fails (the export's reads
#    fail, saying so), the guest's writes go on;
#  - a release without a view, a drop of an unknown checkpoint;
#  - tracking turned off at run time: the changes since are not known;
#    turned on at run time on a connected disk: its worker tracks it;
#  - a guest destroyed while its view is exported: the export fails with
#    the reason, xbd-back goes on, the dead disk's journals are gone, and
#    its tracking, reopened for the same image, still has the checkpoint.
. "$top_srcdir/tests/backup/lib.sh"
need_backup

G=$(new_domain)
new_disk "$WORK/t.img" 16M
new_disk "$WORK/n.img" 16M
td=$(add_disk "$G" xvdb "$WORK/t.img")
nd=$(add_disk "$G" xvdc "$WORK/n.img")
start_cbt --disk "$WORK/t.img:cbt=1,cbt-scratch=262144,cbt-max-checkpoints=2" \
	--disk "$WORK/h.img:cbt=1"
wait_state "$G" "$td" 2
T=$(dev_of "$G" "$td")
N=$(dev_of "$G" "$nd")
victim_start n "$G" xvdc 8m

# refused CMD... PATTERN: xbdctl CMD fails, saying PATTERN
refused() {
	_pat=$(eval echo "\${$#}")
	_n=$(($# - 1))
	_args=
	for _a in "$@"; do
		[ "$_n" -gt 0 ] || break
		_args="$_args '$_a'"
		_n=$((_n - 1))
	done
	eval "ctl $_args" >"$WORK/r.out" 2>&1 && { cat "$WORK/r.out"; bk_fail "xbdctl$_args succeeded"; }
	grep -q -- "$_pat" "$WORK/r.out" || { cat "$WORK/r.out"; bk_fail "xbdctl$_args: no '$_pat'"; }
	echo "refused:$_args: $(cat "$WORK/r.out")"
}

refused checkpoint vbd/99/99 c1 "no device 'vbd/99/99'"
refused checkpoint "$N" c1 "has no changed-block tracking (cbt = 0"
refused checkpoint "$T" 'bad name' "a checkpoint's name"
refused changes "$T" nope "no checkpoint 'nope'.*take a full backup"
ctl checkpoint "$T" c1 >/dev/null || bk_fail "checkpoint c1 failed"
refused checkpoint "$T" c1 "checkpoint c1 exists already"
ctl checkpoint "$T" c2 --view >"$WORK/c2.out" || bk_fail "checkpoint c2 --view failed"
refused checkpoint "$T" c3 "2 checkpoints already, the most it keeps"
refused changes "$T" c2 c1 "need the earlier first"
refused release "$T" c1 "checkpoint c1 has no open view"
refused drop "$T" nope "no checkpoint 'nope'"

# ---- two exports of one view; one of another checkpoint ----
V=$(view_file "$WORK/c2.out")
env $NBDKIT_PRELOAD nbdkit -f -U "$WORK/x.sock" "$VIEW_PLUGIN" view="$V" checkpoint=c2 \
	>"$WORK/x1.log" 2>&1 &
xpid=$!
sim_on_exit "kill $xpid 2>/dev/null"
sim_wait_for 20 test -S "$WORK/x.sock" || { cat "$WORK/x1.log"; bk_fail "the export did not start"; }
if env $NBDKIT_PRELOAD nbdkit -f -U - "$VIEW_PLUGIN" view="$V" checkpoint=c2 --run true \
	>"$WORK/x2.log" 2>&1; then
	bk_fail "a second export of the same view started"
fi
grep -q "checkpoint c2 of $T is exported already" "$WORK/x2.log" ||
	{ cat "$WORK/x2.log"; bk_fail "the second export did not say the view is exported already"; }
echo "refused: a second export: $(grep -o 'xbdview: .*' "$WORK/x2.log")"
env $NBDKIT_PRELOAD nbdkit -f -U - "$VIEW_PLUGIN" view="$V" checkpoint=c1 --run true \
	>"$WORK/x3.log" 2>&1 && bk_fail "an export of c2's view as c1 started"
grep -q "holds the view of checkpoint c2 of $T, not of c1" "$WORK/x3.log" ||
	{ cat "$WORK/x3.log"; bk_fail "no line for the view of another checkpoint"; }

# ---- the scratch store fills up: the view fails, the guest does not ----
victim_start t "$G" xvdb 8m
view_failed() {
	ctl checkpoints --json "$T" | grep -q '"state":"failed"'
}
sim_wait_for 30 view_failed ||
	bk_fail "the view did not fail once its scratch store was full"
ctl checkpoints "$T"
grep -q "the view of checkpoint 'c2' failed (the guest's writes go on; its export fails): its scratch store is full" "$LOG" ||
	bk_fail "no log line for the failed view"
# The export that was running fails its reads, saying why; a new one is refused.
env -u LD_PRELOAD nbdcopy "nbd+unix://?socket=$WORK/x.sock" "$WORK/x.img" 2>/dev/null &&
	bk_fail "the export of a failed view was read"
grep -q "the view of checkpoint c2 of $T failed: its scratch store is full" "$WORK/x1.log" ||
	{ cat "$WORK/x1.log"; bk_fail "the export of a failed view did not say why its reads fail"; }
kill "$xpid"
wait "$xpid" 2>/dev/null
export_run "$V" c2 true >"$WORK/x4.log" 2>&1 && bk_fail "a failed view was exported"
grep -q "holds no open view (failed: its scratch store is full" "$WORK/x4.log" ||
	{ cat "$WORK/x4.log"; bk_fail "an export of a failed view was not refused with why"; }
echo "refused: reads of a view whose scratch store filled up: $(grep -o 'xbdview: the view.*' "$WORK/x1.log" | head -1)"
ctl release "$T" c2 >/dev/null || bk_fail "release of the failed view failed"

# ---- tracking off and on at run time ----
ctl set "$T" cbt=0 >/dev/null || bk_fail "set cbt=0 failed"
refused changes "$T" c1 "has no changed-block tracking (cbt = 0"
ctl set "$T" cbt=1 >/dev/null || bk_fail "set cbt=1 failed"
refused changes "$T" c1 "are not known: the tracking was turned off (xbdctl set cbt=0)"
ctl set "$N" cbt=1 >/dev/null || bk_fail "set cbt=1 failed"
ctl checkpoint "$N" n1 >/dev/null || bk_fail "checkpoint of a disk tracked from now on failed"
base=$(writes "$N")
sim_wait_for 20 writing "$N" $((base + 200)) || bk_fail "the guest on xvdc stopped writing"
ctl changes "$N" n1 | tail -1 | grep -qv ' 0 extents' ||
	bk_fail "the worker does not mark a disk tracked at run time"
echo "ok: cbt=0 at run time ends what checkpoints can compare; cbt=1 tracks a connected disk"
victim_stop t
victim_stop n

# ---- a guest destroyed while its view is exported ----
H=$(new_domain)
new_disk "$WORK/h.img" 16M
hd=$(add_disk "$H" xvdb "$WORK/h.img")
wait_state "$H" "$hd" 2
fio_job "$WORK/h.fio" 4m
fio_nbd "$H" xvdb "$WORK/h.json" "$WORK/h.fio" && fio_ok "$WORK/h.json" || bk_fail "H's fio failed"
ctl checkpoint "$(dev_of "$H" "$hd")" h1 --view >"$WORK/h1.out" || bk_fail "checkpoint h1 failed"
HV=$(view_file "$WORK/h1.out")
env $NBDKIT_PRELOAD nbdkit -f -U "$WORK/h.sock" "$VIEW_PLUGIN" view="$HV" checkpoint=h1 \
	>"$WORK/h-export.log" 2>&1 &
hpid=$!
sim_on_exit "kill $hpid 2>/dev/null"
sim_wait_for 20 test -S "$WORK/h.sock" || bk_fail "H's export did not start"
env -u LD_PRELOAD nbdcopy "nbd+unix://?socket=$WORK/h.sock" "$WORK/h-before.img" ||
	bk_fail "H's export could not be read before the guest was destroyed"
"$XBD_SIM" domain destroy "$SIMDIR" "$H" || bk_fail "domain destroy failed"
h_closed() { # its storage (and so its tracking) closed
	ctl list | grep "^vbd/$H/$hd " | grep -qv ' open '
}
sim_wait_for 20 h_closed || bk_fail "the destroyed guest's disk stayed open"
env -u LD_PRELOAD nbdcopy "nbd+unix://?socket=$WORK/h.sock" "$WORK/h-after.img" 2>"$WORK/h-copy.err" &&
	bk_fail "H's export was read after its guest was destroyed"
grep -q "the view of checkpoint h1 of vbd/$H/$hd ended: its guest's domain is gone" "$WORK/h-export.log" ||
	{ cat "$WORK/h-export.log"; bk_fail "the export did not say its guest is gone"; }
echo "ok: the export fails: $(grep -o 'xbdview: the view of checkpoint h1.*' "$WORK/h-export.log" | head -1)"
kill "$hpid"
wait "$hpid" 2>/dev/null
back_alive
ls "$SIMDIR"/run/xbd-journal.*/ 2>/dev/null | grep -q "vbd.$H\." && bk_fail "the dead disk's journals stayed"
H2=$(new_domain)
hd2=$(add_disk "$H2" xvdb "$WORK/h.img")
wait_state "$H2" "$hd2" 2
ctl changes "$(dev_of "$H2" "$hd2")" h1 | tail -1 | grep -q ': h1 to now: 0 extents' ||
	{ ctl changes "$(dev_of "$H2" "$hd2")" h1; bk_fail "the image's tracking lost checkpoint h1"; }
echo "ok: the same image attached again keeps its tracking: changes since h1 are known (none)"
bk_done
