#!/bin/sh
# blkback/installed/xbd-hotplug: on add it reports hotplug-status=connected for an
# existing file, and hotplug-error plus hotplug-status=error for a missing
# one, the way Xen's block scripts do; every params form xbd-back takes
# (aio:PATH, uring:PATH, null:SIZE, NBD URIs, rbd:) is checked as xbd-back
# reads it; remove is harmless.
. "$top_srcdir/tests/lib/sim.sh"
sim_need sim/xbd-sim xenstore/xbd-xenstored
command -v xenstore-read >/dev/null 2>&1 || skip "xenstore-read (xenstore-utils) not installed"
sim_start
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-bk.XXXXXXXX") || fail "mktemp failed"
sim_on_exit "rm -rf '$WORK'"
SCRIPT="$top_srcdir/blkback/installed/xbd-hotplug"
dom=$("$XBD_SIM" domain create "$SIMDIR") || fail "domain create"
truncate -s 1M "$WORK/a.img"
a=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdb "$WORK/a.img") || fail "disk add"
b=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdc "$WORK/missing.img") || fail "disk add"
# NBD URIs: a unix socket that exists, one that does not, a TCP server, a bad URI;
# RBD images: good, without a pool, with a secret in params.
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$WORK/nbd.sock" ||
	fail "cannot make a unix socket"
n1=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdd "nbd+unix:///disk?socket=$WORK/nbd.sock") || fail "disk add"
n2=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvde "nbd+unix:///disk?socket=$WORK/gone.sock") || fail "disk add"
n3=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdf "nbd://127.0.0.1:10809/disk") || fail "disk add"
n4=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdg "nbd+unix:///disk") || fail "disk add"
r1=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdh "rbd:rbd/guest@snap:id=xen:conf=/etc/ceph/ceph.conf") || fail "disk add"
r2=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdi "rbd:guest-without-pool") || fail "disk add"
r3=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdj "rbd:rbd/guest:key=AQBsecret==") || fail "disk add"
# backend/vbd3 (libxl's backendtype=tap): params "aio:" + what the xl line says
t1=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdk "nbd+unix:///disk?socket=$WORK/nbd.sock" --type vbd3) || fail "disk add"
t2=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdl "$WORK/a.img" --type vbd3) || fail "disk add"
# The engine named in params (xbd-back.conf(5)): the path after it is checked.
u1=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdm "uring:$WORK/a.img") || fail "disk add"
u2=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdn "aio:$WORK/a.img") || fail "disk add"
u3=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdo "null:1G") || fail "disk add"
u4=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdp "uring:$WORK/missing.img") || fail "disk add"
u5=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdq "qcow2:$WORK/a.img") || fail "disk add"
(
	sim_env 0
	XENBUS_PATH=backend/vbd/$dom/$a sh "$SCRIPT" add || fail "add of an existing file failed"
	[ "$(xenstore-read "backend/vbd/$dom/$a/hotplug-status")" = connected ] || fail "hotplug-status not connected"
	XENBUS_PATH=backend/vbd/$dom/$b sh "$SCRIPT" add 2>"$WORK/err" && fail "add of a missing file succeeded"
	[ "$(xenstore-read "backend/vbd/$dom/$b/hotplug-status")" = error ] || fail "hotplug-status not error"
	xenstore-read "backend/vbd/$dom/$b/hotplug-error" | grep -q "missing.img does not exist" ||
		fail "hotplug-error does not say why"
	for n in $n1 $n3 $r1; do
		XENBUS_PATH=backend/vbd/$dom/$n sh "$SCRIPT" add || fail "add of NBD disk $n failed"
		[ "$(xenstore-read "backend/vbd/$dom/$n/hotplug-status")" = connected ] || fail "NBD $n not connected"
	done
	XENBUS_PATH=backend/vbd/$dom/$n2 sh "$SCRIPT" add 2>"$WORK/err" && fail "add with a missing NBD socket succeeded"
	xenstore-read "backend/vbd/$dom/$n2/hotplug-error" | grep -q "NBD socket $WORK/gone.sock does not exist" ||
		fail "hotplug-error for a missing NBD socket: $(xenstore-read "backend/vbd/$dom/$n2/hotplug-error")"
	XENBUS_PATH=backend/vbd/$dom/$n4 sh "$SCRIPT" add 2>"$WORK/err" && fail "add of nbd+unix without socket= succeeded"
	xenstore-read "backend/vbd/$dom/$n4/hotplug-error" | grep -q "has no ?socket=PATH" ||
		fail "hotplug-error for nbd+unix without a socket"
	XENBUS_PATH=backend/vbd/$dom/$r2 sh "$SCRIPT" add 2>"$WORK/err" && fail "add of rbd: without a pool succeeded"
	xenstore-read "backend/vbd/$dom/$r2/hotplug-error" | grep -q "is not rbd:POOL" || fail "hotplug-error for rbd: without a pool"
	XENBUS_PATH=backend/vbd/$dom/$r3 sh "$SCRIPT" add 2>"$WORK/err" && fail "add of rbd: with key= succeeded"
	xenstore-read "backend/vbd/$dom/$r3/hotplug-error" | grep -q "use keyring=FILE" || fail "hotplug-error for key="
	for n in $t1 $t2; do
		[ "$(xenstore-read "backend/vbd3/$dom/$n/params" | cut -c1-4)" = aio: ] || fail "vbd3 params without aio:"
		XENBUS_PATH=backend/vbd3/$dom/$n sh "$SCRIPT" add || fail "add of vbd3 disk $n failed"
		[ "$(xenstore-read "backend/vbd3/$dom/$n/hotplug-status")" = connected ] || fail "vbd3 $n not connected"
	done
	for n in $u1 $u2 $u3; do
		XENBUS_PATH=backend/vbd/$dom/$n sh "$SCRIPT" add 2>"$WORK/err" ||
			fail "add of $(xenstore-read "backend/vbd/$dom/$n/params") failed: $(cat "$WORK/err")"
		[ "$(xenstore-read "backend/vbd/$dom/$n/hotplug-status")" = connected ] || fail "disk $n not connected"
	done
	XENBUS_PATH=backend/vbd/$dom/$u4 sh "$SCRIPT" add 2>"$WORK/err" && fail "add of uring: with a missing file succeeded"
	xenstore-read "backend/vbd/$dom/$u4/hotplug-error" | grep -q "^$WORK/missing.img does not exist" ||
		fail "hotplug-error for uring: with a missing file: $(xenstore-read "backend/vbd/$dom/$u4/hotplug-error")"
	XENBUS_PATH=backend/vbd/$dom/$u5 sh "$SCRIPT" add 2>"$WORK/err" && fail "add of an unknown engine succeeded"
	xenstore-read "backend/vbd/$dom/$u5/hotplug-error" | grep -q "names no storage engine" ||
		fail "hotplug-error for an unknown engine: $(xenstore-read "backend/vbd/$dom/$u5/hotplug-error")"
	XENBUS_PATH=backend/vbd/$dom/$a sh "$SCRIPT" remove || fail "remove failed"
	[ "$(xenstore-read "backend/vbd/$dom/$a/params")" = "$WORK/a.img" ] || fail "remove changed the device"
) || exit 1
exit 0
