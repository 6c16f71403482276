#!/bin/sh
# The storage file changes under a running disk.
#  - Unlinked: xbd-back keeps serving the open file (as the kernel's loop
#    and blkback do: the inode lives while it is open); a fio verify job
#    running across the unlink passes with 0 errors, and a new connection
#    to the same device still works (the store stays open while the device
#    exists).
#  - Truncated from 16 to 8 MiB under a connected disk: nothing crashes,
#    reads below the new end still return the data, and xbd-back notices
#    the new size by itself within its size check (sectors 16384, a log
#    line, no SIGHUP), so a new connection through nbdkit sees 8 MiB.
. "$top_srcdir/tests/robust/lib.sh"
need_fio_nbd

G=$(new_domain)
head -c 16777216 /dev/urandom >"$WORK/u.img"
head -c 16777216 /dev/urandom >"$WORK/t.img"
cp "$WORK/t.img" "$WORK/t.orig"
u=$(add_disk "$G" xvdb "$WORK/u.img")
t=$(add_disk "$G" xvdc "$WORK/t.img")
start_back

# ---- unlink under fio ----
victim_start u "$G" xvdb 4m
sleep 1
rm -f "$WORK/u.img"
echo "unlinked the storage of xvdb after $(victim_runs u) fio run(s)"
sim_wait_for 30 sh -c "[ \$(wc -l <'$WORK/u.runs') -ge $(( $(victim_runs u) + 2 )) ]" ||
	bk_fail "fio did not complete two more runs after the unlink"
victim_stop u
fio_job "$WORK/again.fio" 4m
fio_nbd "$G" xvdb "$WORK/again.json" "$WORK/again.fio" || { cat "$WORK/again.json"; bk_fail "new connection after the unlink failed"; }
fio_ok "$WORK/again.json" || bk_fail "fio on a new connection after the unlink reports errors"
echo "ok: a new connection after the unlink verifies too"

# ---- truncate under a connected disk ----
cat >"$WORK/trunc.sh" <<EOS
rd() { # OFFSET JSON
	fio --output-format=json --output="\$2" --name=r --ioengine=nbd --uri="\$NBDURI" \
		--rw=read --bs=4k --size=4k --offset=\$1 --verify=0
}
rd 4m '$WORK/before.json' || exit 10
truncate -s 8M '$WORK/t.img'
rd 4m '$WORK/low.json' || exit 11
rd 8188k '$WORK/edge.json' || exit 13
# Noticed without a signal (the size check runs every second; 20 s allowed).
i=0
until grep -q 'vbd/$G/$t: resized: 32768 -> 16384 sectors' '$LOG'; do
	i=\$((i + 1)); [ \$i -lt 200 ] || exit 14; sleep 0.1
done
# A new NBD connection (a new frontend open) sees the new size.
i=0
until nbdinfo --size "\$NBDURI" >'$WORK/size' && [ "\$(cat '$WORK/size')" = 8388608 ]; do
	i=\$((i + 1)); [ \$i -lt 100 ] || exit 15; sleep 0.1
done
rd 4m '$WORK/low2.json' || exit 16
exit 0
EOS
nbd_run "$G" xvdc "NBDURI=\"\$uri\" sh '$WORK/trunc.sh'" >"$WORK/trunc.out" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$WORK/trunc.out" "$WORK/size"; bk_fail "truncate sequence failed at step $rc"; }
python3 - "$WORK" <<'PY' || bk_fail "unexpected fio results around the truncation"
import json, sys
d = sys.argv[1]
def err(n):
    t = open(f"{d}/{n}.json").read()
    return json.loads(t[t.index("{"):])["jobs"][0]["error"]
assert err("low") == 0 and err("edge") == 0 and err("low2") == 0
print("ok: after truncation reads below the new end work, and the new size is noticed without SIGHUP")
PY
sectors=$(xs read "/local/domain/0/backend/vbd/$G/$t/sectors")
[ "$sectors" = 16384 ] || bk_fail "sectors is $sectors after the shrink, not 16384"
cmp -n 8388608 "$WORK/t.img" "$WORK/t.orig" || bk_fail "data below the new end changed"
back_alive
bk_done
