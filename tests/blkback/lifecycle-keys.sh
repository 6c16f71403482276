#!/bin/sh
# xbd-back: reaches InitWait within libxl's 10 s of the toolstack writing
# the device (it says how long it took: well under a second on a quiet
# machine, but a loaded one stretches any wait) with every blkif.h feature key written (booleans
# as 0 or 1), serves backend/vbd3 as well, and publishes the disk geometry.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
start_back
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
t0=$(date +%s%N)
sim_wait_for 10 state_is "$dom" "$a" 2 || bk_fail "no InitWait within 10 s"
echo "InitWait after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
be=/local/domain/0/backend/vbd/$dom/$a
check() {
	v=$(xs read "$be/$1" 2>/dev/null) || bk_fail "$1 not written"
	[ "$v" = "$2" ] || bk_fail "$1 is '$v', expected '$2'"
}
check feature-persistent 1
check feature-flush-cache 1
check feature-barrier 0
check feature-discard 1
check discard-alignment 0
check discard-secure 0
check max-ring-page-order 4
check feature-max-indirect-segments 256
check sectors 32768
check sector-size 512
check physical-sector-size 512
check info 0
xs read "$be/multi-queue-max-queues" >/dev/null || bk_fail "multi-queue-max-queues not written"

# backend/vbd3 (xl backendtype=tap on Xen 4.19+), a cdrom.
new_disk "$WORK/c.iso" 4M
c=$(add_disk "$dom" xvdc "$WORK/c.iso" --type vbd3 --device-type cdrom --mode r)
sim_wait_for 2 state_is "$dom" "$c" 2 vbd3 || bk_fail "vbd3 device not picked up"
front "$dom" --dev "$c" connect >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "vbd3 connect failed"; }
# libxl writes removable=1 for a cdrom: VDISK_CDROM|VDISK_REMOVABLE|VDISK_READONLY.
[ "$(xs read "/local/domain/0/backend/vbd3/$dom/$c/info")" = 7 ] || bk_fail "cdrom info is not 7"
[ "$(xs read "/local/domain/0/backend/vbd3/$dom/$c/sectors")" = 8192 ] || bk_fail "vbd3 sectors wrong"
bk_done
