#!/bin/sh
# One Ceph RBD image is not served read-write by two xbd-backs (two
# simulated hosts on one throwaway cluster, tests/lib/ceph-cluster.sh):
# the first holds the image's exclusive lock (librbd's exclusive mode,
# which never hands it over), the second's disk is refused ("in use
# read-write by another client") in its log, xbdctl list, xbd-storage and
# hotplug script; read-only disks of the image are served beside it;
# with shared-write = 1 on both, both serve it; once the first lets go,
# the second's disk opens after SIGHUP.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
SCRIPT="$top_srcdir/blkback/installed/xbd-hotplug"
ceph_cluster 268435456
rbd create --size 16M rbd/one || fail "rbd create one"
rbd create --size 16M rbd/two || fail "rbd create two"
P=":conf=$CEPH_CONF"

other_host
A=$(new_domain --name web1)
start_back_ctl --disk "rbd:rbd/two$P:shared-write=1"
a=$(add_disk "$A" xvdb "rbd:rbd/one$P")
wait_storage 30 here "$A" "$a" open
start_other_back --control "$WORK/other.sock" --disk "rbd:rbd/two$P:shared-write=1"
B=$("$XBD_SIM" domain create "$OTHER" --name db1) || fail "domain create on the other host"
b=$("$XBD_SIM" disk add "$OTHER" "$B" xvdb "rbd:rbd/one$P") || fail "disk add on the other host"
wait_storage 60 other "$B" "$b" "refused: "
why="is in use read-write by another client"
storage other "$B" "$b" | grep -q "$why" || bk_fail "the other host's refusal: $(storage other "$B" "$b")"
grep -q "vbd/$B/$b: refused: .*$why" "$WORK/other.log" || { cat "$WORK/other.log"; bk_fail "no refusal in the other log"; }
"$XBDCTL" --socket "$WORK/other.sock" list | grep -q "^vbd/$B/$b: refused: .*$why" ||
	bk_fail "the other xbdctl list does not say why"
(eval "$("$XBD_SIM" env "$OTHER" 0)" && XENBUS_PATH=backend/vbd/$B/$b sh "$SCRIPT" add) 2>/dev/null &&
	bk_fail "the other host's hotplug script passed it"
as_other 0 xenstore-read "/local/domain/0/backend/vbd/$B/$b/hotplug-error" | grep -q "$why" ||
	bk_fail "the other host's hotplug-error does not say why"
echo "a second xbd-back is refused the image the first has read-write"

# Read-only beside it, on the other host: served.
r=$("$XBD_SIM" disk add "$OTHER" "$B" xvdc "rbd:rbd/one$P" --mode r) || fail "disk add"
wait_storage 60 other "$B" "$r" open
# shared-write = 1 on both: both serve it.
s1=$(add_disk "$A" xvdc "rbd:rbd/two$P")
wait_storage 30 here "$A" "$s1" open
s2=$("$XBD_SIM" disk add "$OTHER" "$B" xvdd "rbd:rbd/two$P") || fail "disk add"
wait_storage 60 other "$B" "$s2" open
echo "read-only beside the writer, and shared-write on both: served"

# The first lets go; the refused one is tried again on SIGHUP and opens.
"$XBD_SIM" disk remove "$SIMDIR" "$A" "$a" --timeout 10 || bk_fail "disk remove"
sim_wait_for 20 sh -c '! rbd lock ls rbd/one | grep -q lock' || bk_fail "the image's lock stays after its disk went"
kill -HUP "$OTHER_PID"
wait_storage 60 other "$B" "$b" open
echo "let go, then SIGHUP: the second opens it"
stop_pid "$OTHER_PID" TERM 30 || { cat "$WORK/other.log"; bk_fail "the other xbd-back exited with status $?"; }
grep -q "Sanitizer\|runtime error:" "$WORK/other.log" && { cat "$WORK/other.log"; bk_fail "sanitizer report from the other xbd-back"; }
bk_done
