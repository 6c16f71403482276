#!/bin/sh
# Backups of a Ceph RBD disk (a throwaway one-node memstore cluster,
# tests/lib/ceph-cluster.sh): whatever the engine, the same tracking and
# views.  A guest writes (fio through `nbdkit xbd`); checkpoint c1 is made
# with its view while the guest is paused and the image exported with
# `rbd export` (what the disk holds then); the guest writes on; the view's
# export (nbdkit xbdview, which reads the image through librbd and the
# blocks xbd-back kept) must equal that export, and `xbdctl changes c1`
# must cover every block the guest wrote since (rbd export again).  RBD's
# own snapshots are not used: no snapshot is left on the image.
. "$top_srcdir/tests/backup/lib.sh"
need_backup
ceph_cluster 536870912
rbd create --size 32M rbd/g || fail "rbd create"
P="rbd:rbd/g:conf=$CEPH_CONF"

G=$(new_domain)
start_cbt --disk "$P:cbt=1"
sim_wait_for 5 test -S "$SIMDIR/xbd-back.0.sock" || bk_fail "xbd-back did not start"
gd=$(add_disk "$G" xvdb "$P")
wait_state "$G" "$gd" 2
D=$(dev_of "$G" "$gd")
image_open() {
	ctl list | grep "^$D " | grep -q ' open '
}
sim_wait_for 20 image_open || bk_fail "the image did not open"
fio_job "$WORK/a.fio" 8m
fio_nbd "$G" xvdb "$WORK/a.json" "$WORK/a.fio" && fio_ok "$WORK/a.json" || bk_fail "fio A failed"
rbd export rbd/g "$WORK/at-c1.img" >/dev/null 2>&1 || bk_fail "rbd export"
ctl checkpoint "$D" c1 --view >"$WORK/c1.out" || { cat "$WORK/c1.out"; bk_fail "checkpoint c1"; }
fio_job "$WORK/b.fio" 8m offset=4m
fio_nbd "$G" xvdb "$WORK/b.json" "$WORK/b.fio" && fio_ok "$WORK/b.json" || bk_fail "fio B failed"
rbd export rbd/g "$WORK/now.img" >/dev/null 2>&1 || bk_fail "rbd export"
cmp -s "$WORK/at-c1.img" "$WORK/now.img" && bk_fail "the guest's writes did not change the image"
export_run "$(view_file "$WORK/c1.out")" c1 "nbdcopy \"\$uri\" '$WORK/view.img'" ||
	bk_fail "the view's export of the RBD disk failed"
cmp "$WORK/view.img" "$WORK/at-c1.img" || bk_fail "the view of c1 is not the image at c1"
ctl changes "$D" c1 --json >"$WORK/ch.json" || bk_fail "changes failed"
r=$(covers "$WORK/ch.json" "$WORK/at-c1.img" "$WORK/now.img") ||
	bk_fail "a block the guest wrote is missing from the tracking"
echo "RBD: $(echo "$r" | cut -d' ' -f1) blocks changed since c1, $(echo "$r" | cut -d' ' -f2) reported"
[ -z "$(rbd snap ls rbd/g)" ] || bk_fail "a snapshot was left on the image"
ctl release "$D" c1 >/dev/null || bk_fail "release failed"
echo "ok: the view of an RBD disk is the image at its checkpoint, read through librbd"
bk_done
