#!/bin/sh
# tests/sim/disk-add.sh: `xbd-sim disk add` writes the backend directory,
# the frontend directory and libxl's private copy with the nodes, values
# and permissions libxl 4.17 writes (as sim/xbd-sim-disk.c records them,
# after libxl's device_disk_add), for vbd and vbd3, disks and cdroms, in
# dom0 or a driver domain; and the permissions work for the guests.
. "$top_srcdir/tests/lib/sim.sh"

sim_start
sim_env 0
tmp=$(mktemp -d) || fail "mktemp"
sim_on_exit "rm -rf '$tmp'"

# ls DIR: "path = "value" (perms)" for every node below DIR, sorted, blanks squeezed.
ls_nodes() {
	xenstore-ls -fp "$1" | sed 's/   */ /g; s/ *$//' | sort
}

check_nodes() { # DIR EXPECTED-FILE
	ls_nodes "$1" >"$tmp/got"
	sort "$2" >"$tmp/want"
	diff -u "$tmp/want" "$tmp/got" >"$tmp/diff" || fail "nodes under $1 differ from libxl's:
$(cat "$tmp/diff")"
}

[ "$("$XBD_SIM" domain create "$SIMDIR")" = 1 ] || fail "domain create"

# The README's exact case: xvdb, custom script, target file.
devid=$("$XBD_SIM" disk add "$SIMDIR" 1 xvdb /var/lib/xenlab/disk.img \
	--script /etc/xen/scripts/xenlab-custom) || fail "disk add"
[ "$devid" = 51728 ] || fail "xvdb is devid $devid, want 51728"

be=/local/domain/0/backend/vbd/1/51728
fe=/local/domain/1/device/vbd/51728
cat >"$tmp/be" <<END
$be/frontend = "$fe" (n0,r1)
$be/params = "/var/lib/xenlab/disk.img" (n0,r1)
$be/script = "/etc/xen/scripts/xenlab-custom" (n0,r1)
$be/frontend-id = "1" (n0,r1)
$be/online = "1" (n0,r1)
$be/removable = "0" (n0,r1)
$be/bootable = "1" (n0,r1)
$be/state = "1" (n0,r1)
$be/dev = "xvdb" (n0,r1)
$be/type = "phy" (n0,r1)
$be/mode = "w" (n0,r1)
$be/device-type = "disk" (n0,r1)
$be/discard-enable = "1" (n0,r1)
$be/specification = "xen" (n0,r1)
END
check_nodes $be "$tmp/be"
cat >"$tmp/fe" <<END
$fe/backend = "$be" (n1,r0)
$fe/backend-id = "0" (n1,r0)
$fe/state = "1" (n1,r0)
$fe/virtual-device = "51728" (n1,r0)
$fe/device-type = "disk" (n1,r0)
$fe/trusted = "1" (n1,r0)
$fe/protocol = "x86_64-abi" (n1,r0)
END
check_nodes $fe "$tmp/fe"
lx=/libxl/1/device/vbd/51728
sed "s|^$be/|$lx/|; s|(n0,r1)|(n0)|" "$tmp/be" >"$tmp/lx"
echo "$lx/backend = \"$be\" (n0)" >>"$tmp/lx"
check_nodes $lx "$tmp/lx"
# The directories themselves.
[ "$(xenstore-ls -fp "$(dirname $be)" | sed -n "s|^$be = .*(\(.*\))\$|\1|p")" = n0,r1 ] ||
	fail "permissions of $be"
[ "$(xenstore-ls -fp "$(dirname $fe)" | sed -n "s|^$fe = .*(\(.*\))\$|\1|p")" = n1,r0 ] ||
	fail "permissions of $fe"

# The frontend may write its own directory and read the backend's, not write it.
sim_env 1
xenstore-write $fe/state 3 || fail "domain 1 cannot write $fe/state"
[ "$(xenstore-read $be/state)" = 1 ] || fail "domain 1 cannot read $be/state"
if xenstore-write $be/state 4 2>/dev/null; then fail "domain 1 wrote $be/state"; fi
sim_env 0

# The same disk twice is refused.
if "$XBD_SIM" disk add "$SIMDIR" 1 xvdb /x 2>"$tmp/err"; then fail "duplicate disk accepted"; fi
grep -q "already has a vbd 51728" "$tmp/err" || fail "duplicate: $(cat "$tmp/err")"

# vbd3 (the tap slot), a default script and the aio: prefix.
[ "$("$XBD_SIM" disk add "$SIMDIR" 1 xvdc /img --type vbd3)" = 51744 ] || fail "vbd3 add"
be3=/local/domain/0/backend/vbd3/1/51744
[ "$(xenstore-read $be3/params)" = aio:/img ] || fail "vbd3 params"
[ "$(xenstore-read $be3/type)" = vbd3 ] || fail "vbd3 type"
[ "$(xenstore-read $be3/script)" = /etc/xen/scripts/block-tap ] || fail "vbd3 script"
[ "$(xenstore-read /local/domain/1/device/vbd/51744/backend)" = $be3 ] || fail "vbd3 frontend"

# A cdrom: read-only and removable by default; no discard when asked; relative script.
[ "$("$XBD_SIM" disk add "$SIMDIR" 1 hdc /iso --device-type cdrom --discard-enable 0 \
	--script my-script)" = 5632 ] || fail "cdrom add (hdc = 22<<8)"
becd=/local/domain/0/backend/vbd/1/5632
[ "$(xenstore-read $becd/mode $becd/removable $becd/device-type $becd/discard-enable $becd/script)" = \
"r
1
cdrom
0
/etc/xen/scripts/my-script" ] || fail "cdrom nodes"
[ "$(xenstore-read /local/domain/1/device/vbd/5632/device-type)" = cdrom ] || fail "cdrom frontend"

# A driver domain as backend: the backend directory belongs to it.
[ "$("$XBD_SIM" domain create "$SIMDIR")" = 2 ] || fail "driver domain"
[ "$("$XBD_SIM" disk add "$SIMDIR" 1 xvdd /dev/sdz --backend-domid 2 --mode r)" = 51760 ] ||
	fail "driver-domain disk add"
bedd=/local/domain/2/backend/vbd/1/51760
[ "$(xenstore-ls -fp $bedd | sed -n "s|^$bedd/state = .*(\(.*\))\$|\1|p")" = n2,r1 ] ||
	fail "driver domain backend permissions: $(xenstore-ls -fp $bedd)"
[ "$(xenstore-read /local/domain/1/device/vbd/51760/backend-id)" = 2 ] || fail "backend-id"
sim_env 2
xenstore-write $bedd/state 2 || fail "driver domain cannot write its backend state"
sim_env 0

# Other names and plain numbers.
for pair in sdb:2064 xvdq:268439552 d0p1:51713 xvdb3:51731 4242:4242; do
	[ "$("$XBD_SIM" disk add "$SIMDIR" 1 "${pair%%:*}" /x)" = "${pair##*:}" ] ||
		fail "vdev ${pair%%:*} is not devid ${pair##*:}"
done
[ "$(xenstore-read /local/domain/0/backend/vbd/1/4242/dev)" = 4242 ] || fail "numeric dev"
exit 0
