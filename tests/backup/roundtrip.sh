#!/bin/sh
# An incremental backup of a running guest and its restore, end to end.
# A guest runs fio verify jobs on its disk (through `nbdkit xbd`, each on
# a region of its own); xbd-back tracks the disk's changed blocks (cbt=1).
#  1. job A fills region A; job B runs on region B with writes in flight
#     while checkpoint c1 is made with its view (its drained section), and
#     through the full backup: nbdcopy of the view's export (nbdkit
#     xbdview) while the guest writes;
#  2. job C runs on region C; the guest is paused, its image captured
#     (sha256) and checkpoint c2 made with its view, the guest goes on;
#     the incremental is the extents `xbdctl changes c1 c2 --json` lists,
#     read from c2's export while job C writes; XAPI's base64 form lists
#     the same blocks;
#  3. restore = full + incremental into a new image: its sha256 is c2's;
#  4. the restored image serves a new guest, whose fio verify of jobs A
#     and B (verify_only) passes, and every job passed its own verify.
# Prints the sizes of the full and the incremental backup.
. "$top_srcdir/tests/backup/lib.sh"
need_backup

MB=1048576
G=$(new_domain)
new_disk "$WORK/g.img" 64M
gd=$(add_disk "$G" xvdb "$WORK/g.img")
start_cbt --disk "$WORK/g.img:cbt=1,cbt-scratch=33554432"
wait_state "$G" "$gd" 2
D=$(dev_of "$G" "$gd")

job() { # NAME OFFSET RATE: a 12 MiB randwrite job with verify, at RATE writes a second
	fio_job "$WORK/$1.fio" 12m "offset=$2" "iodepth=8" "rate_iops=$3"
	sed 's/^\[global\]$/[global]\nverify_only=1/' "$WORK/$1.fio" | sed '/^rate_iops/d' >"$WORK/$1.verify.fio"
}
job a 0 0
job b 16m 1000
job c 32m 1000
sed -i '/^rate_iops=0/d' "$WORK/a.fio"

fio_nbd "$G" xvdb "$WORK/a.json" "$WORK/a.fio" && fio_ok "$WORK/a.json" || bk_fail "job A failed"

# ---- 1. c1 with its view while job B writes; the full backup from it ----
base=$(writes "$D")
fio_nbd "$G" xvdb "$WORK/b.json" "$WORK/b.fio" &
bpid=$!
sim_wait_for 20 writing "$D" $((base + 300)) || bk_fail "job B did not start writing"
ctl checkpoint "$D" c1 --view >"$WORK/c1.out" || { cat "$WORK/c1.out"; bk_fail "checkpoint c1 failed"; }
cat "$WORK/c1.out"
V1=$(view_file "$WORK/c1.out")
[ -n "$V1" ] || bk_fail "checkpoint c1 --view named no view file"
export_run "$V1" c1 "nbdcopy \"\$uri\" '$WORK/full.img'" || bk_fail "the full backup (nbdcopy of c1's view) failed"
held=$(ctl stats --json "$D" | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["stats"]["tracking"]["held"])')
wait "$bpid" || bk_fail "job B failed"
fio_ok "$WORK/b.json" || bk_fail "job B's verify failed"
ctl checkpoints "$D"
ctl release "$D" c1 || bk_fail "release of c1's view failed"

# ---- 2. c2 with the guest paused and its image hashed; the incremental ----
base=$(writes "$D")
fio_nbd "$G" xvdb "$WORK/c.json" "$WORK/c.fio" &
cpid=$!
sim_wait_for 20 writing "$D" $((base + 1000)) || bk_fail "job C did not start writing"
guest_pause "$cpid" "$G" "$gd"
want=$(sha256sum <"$WORK/g.img" | cut -d' ' -f1)
cp --sparse=always "$WORK/g.img" "$WORK/at-c2.img"
ctl checkpoint "$D" c2 --view >"$WORK/c2.out" || { cat "$WORK/c2.out"; bk_fail "checkpoint c2 failed"; }
guest_resume
V2=$(view_file "$WORK/c2.out")
ctl changes "$D" c1 c2 --json >"$WORK/changes.json" || bk_fail "changes c1 c2 failed"
ctl changes "$D" c1 c2 --xapi >"$WORK/changes.xapi" || bk_fail "changes --xapi failed"
ctl changes "$D" c1 c2 | tail -1
cp --sparse=always "$WORK/full.img" "$WORK/restored.img"
inc=$(incremental "$V2" c2 "$WORK/changes.json" "$WORK/restored.img") ||
	bk_fail "the incremental (c1 to c2 from c2's view) failed"
wait "$cpid" || bk_fail "job C failed"
fio_ok "$WORK/c.json" || bk_fail "job C's verify failed"

# ---- 3. the restore is the disk at c2 ----
got=$(sha256sum <"$WORK/restored.img" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
	covers "$WORK/changes.json" "$WORK/full.img" "$WORK/at-c2.img" >&2
	cmp "$WORK/restored.img" "$WORK/at-c2.img" | head -3 >&2
	bk_fail "restore (full + incremental) is not the disk at c2: sha256 $got, want $want"
fi
# XAPI's form: the same blocks, and the same restore.
cp --sparse=always "$WORK/full.img" "$WORK/restored-xapi.img"
incremental "$V2" c2 "$WORK/changes.xapi" "$WORK/restored-xapi.img" >/dev/null ||
	bk_fail "the incremental from XAPI's bitmap failed"
cmp "$WORK/restored-xapi.img" "$WORK/restored.img" ||
	bk_fail "the restore from XAPI's bitmap differs from the one from the extents"
ctl release "$D" c2 || bk_fail "release of c2's view failed"
echo "full backup $(stat -c %s "$WORK/full.img") bytes (64 MiB disk); incremental c1 to c2:" \
	"$(echo "$inc" | cut -d' ' -f1) extents, $(echo "$inc" | cut -d' ' -f2) bytes;" \
	"writes held by the checkpoints' drained sections: $held"
echo "ok: restore = full + incremental equals the disk at c2 (sha256 $want)"

# ---- 4. the restored image serves a guest: the earlier jobs' data verifies ----
R=$(new_domain)
rd=$(add_disk "$R" xvdb "$WORK/restored.img")
sim_wait_for 20 state_is "$R" "$rd" 2 || bk_fail "the restored disk's device did not come up"
for j in a b; do
	fio_nbd "$R" xvdb "$WORK/r$j.json" "$WORK/$j.verify.fio" && fio_ok "$WORK/r$j.json" ||
		{ cat "$WORK/r$j.json" >&2; bk_fail "fio verify of job $(echo $j | tr ab AB)'s data on the restored disk failed"; }
done
echo "ok: a guest on the restored image verifies jobs A and B"
bk_done
