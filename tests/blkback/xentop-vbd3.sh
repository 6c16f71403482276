#!/bin/sh
# xbd-back publishes a vbd3 disk's counters where Xen 4.19+'s libxenstat
# (xentop) reads tapdisk3's, read back here the way xenstat_linux.c does:
# kthread-pid in /local/domain/0/backend/vbd3/DOMID/DEVID names the daemon,
# td3-PID/vbd-DOMID-DEVID (on the simulator under its host's run/shm,
# else /dev/shm) holds 96 bytes, version 1, the requests and sectors the
# guest's I/O made; a vbd disk gets nothing; the file goes with the device.
. "$top_srcdir/tests/blkback/common.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img" --type vbd3)
b=$(add_disk "$dom" xvdc "$WORK/b.img")
start_back
wait_state "$dom" "$a" 2 vbd3
# pause: one 2-page write and one 2-page read, then it waits.
front_paused "$dom" "$a" "$WORK/out"
front_paused "$dom" "$b" "$WORK/out-b"
sim_wait_for 10 sh -c "'$ASDOM' 0 xenstore-read /local/domain/0/backend/vbd3/$dom/$a/kthread-pid >/dev/null 2>&1" ||
	bk_fail "no kthread-pid in the vbd3 disk's backend directory"
pid=$(xs read "/local/domain/0/backend/vbd3/$dom/$a/kthread-pid")
[ "$pid" = "$BACK_PID" ] || bk_fail "kthread-pid is $pid, not xbd-back's pid $BACK_PID"
f=$SIMDIR/run/shm/td3-$pid/vbd-$dom-$a
# What xenstat's read_attributes_vbd3 takes: 96 bytes, version 1.
read_vbd3() {
	python3 -c '
import struct, sys
d = open(sys.argv[1], "rb").read()
assert len(d) == 96, len(d)
v = struct.unpack("=II11Q", d)
print("version=%d oo=%d rd_req=%d rd_sect=%d wr_req=%d wr_sect=%d io_errors=%d" %
      (v[0], v[2], v[3], v[5], v[7], v[9], v[11]))' "$f"
}
sim_wait_for 10 sh -c "[ -s '$f' ]" || bk_fail "no $f"
sim_wait_for 10 sh -c "python3 -c 'import struct,sys; v=struct.unpack(\"=II11Q\", open(sys.argv[1],\"rb\").read()); sys.exit(not (v[3] == 1 and v[7] == 1))' '$f'" ||
	bk_fail "the counters did not reach 1 read and 1 write: $(read_vbd3)"
got=$(read_vbd3) || bk_fail "$f is not 96 bytes"
echo "$f: $got"
[ "$got" = "version=1 oo=0 rd_req=1 rd_sect=16 wr_req=1 wr_sect=16 io_errors=0" ] ||
	bk_fail "xentop would read: $got"
ls "$SIMDIR/run/shm/td3-$pid" | grep -qv "^vbd-$dom-$a\$" && bk_fail "a file for a vbd disk: $(ls "$SIMDIR/run/shm/td3-$pid")"
xs read "/local/domain/0/backend/vbd/$dom/$b/kthread-pid" >/dev/null 2>&1 && bk_fail "kthread-pid for a vbd disk"
touch "$WORK/go"
wait "$FRONT_PID"
"$XBD_SIM" disk remove "$SIMDIR" "$dom" "$a" --timeout 10 || bk_fail "detach of $a"
sim_wait_for 20 sh -c "[ ! -e '$f' ]" || bk_fail "$f stays after the device went"
stop_back || bk_fail "xbd-back exited $? on SIGTERM"
[ ! -e "$SIMDIR/run/shm/td3-$pid" ] || bk_fail "td3-$pid stays after xbd-back stopped"
bk_done
