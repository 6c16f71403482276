#!/bin/sh
# blkback/xbd-hotplug: on add it reports hotplug-status=connected for an
# existing file, and hotplug-error plus hotplug-status=error for a missing
# one, the way Xen's block scripts do; remove is harmless.
. "$top_srcdir/tests/lib/sim.sh"
sim_need sim/xbd-sim xenstore/xbd-xenstored
command -v xenstore-read >/dev/null 2>&1 || skip "xenstore-read (xenstore-utils) not installed"
sim_start
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-bk.XXXXXXXX") || fail "mktemp failed"
sim_on_exit "rm -rf '$WORK'"
SCRIPT="$top_srcdir/blkback/xbd-hotplug"
dom=$("$XBD_SIM" domain create "$SIMDIR") || fail "domain create"
truncate -s 1M "$WORK/a.img"
a=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdb "$WORK/a.img") || fail "disk add"
b=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdc "$WORK/missing.img") || fail "disk add"
(
	sim_env 0
	XENBUS_PATH=backend/vbd/$dom/$a sh "$SCRIPT" add || fail "add of an existing file failed"
	[ "$(xenstore-read "backend/vbd/$dom/$a/hotplug-status")" = connected ] || fail "hotplug-status not connected"
	XENBUS_PATH=backend/vbd/$dom/$b sh "$SCRIPT" add 2>"$WORK/err" && fail "add of a missing file succeeded"
	[ "$(xenstore-read "backend/vbd/$dom/$b/hotplug-status")" = error ] || fail "hotplug-status not error"
	xenstore-read "backend/vbd/$dom/$b/hotplug-error" | grep -q "missing.img is not a file or block device" ||
		fail "hotplug-error does not say why"
	XENBUS_PATH=backend/vbd/$dom/$a sh "$SCRIPT" remove || fail "remove failed"
	[ "$(xenstore-read "backend/vbd/$dom/$a/params")" = "$WORK/a.img" ] || fail "remove changed the device"
) || exit 1
exit 0
