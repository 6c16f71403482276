# step ilv: the backends side by side: one guest, a disk on each, each job on each disk in turn
# needs: none
# lines: ilv-cost mixed-ilv-

# ---- the backends side by side: one guest, a disk on each, jobs in turn ----
# Jobs of two backends run one block after the other are not side by side
# when the host's load changes between the blocks (TCG's pace follows it):
# here one guest has a disk on kernel blkback (xvdb, backend/vbd), one on
# xbd-back (xvdc, backend/vbd3) and, with ILV_QDISK, one on qdisk (xvdd),
# and runs each job on each disk in turn, xbdt.rounds times (A B C A B C).
# Each job is counted for its disk's backend (follow's "mixed"); the host
# prints the medians and each round's ratio (xen-check.sh).  Xen 4.19+:
# on 4.17 xbd-back and kernel blkback both want backend/vbd.
if [ $XBD_SLOT != vbd3 ]; then
	step ilv-cost SKIP "Xen $XENVER: xbd-back and kernel blkback cannot serve one guest side by side (both backend/vbd; 4.19+ has vbd3)"
else
	rm -f /etc/modprobe.d/xbd-check.conf
	[ -d /sys/module/xen_blkback ] || modprobe xen-blkback || STEP_G=- step blkback-load FAIL "modprobe xen-blkback"
	xbd_alive || xbd_start
	dd if=/dev/zero of=/srv/guest4.img bs=1M count=256 conv=fsync status=none
	ilv_disks="format=raw, vdev=xvdb, access=rw, target=/srv/guest.img', '$(xbd_disk xvdc /srv/guest2.img)"
	BE_OF_DEV="xvdb=blkback xvdc=xbd"
	if [ "$(arg xbdt.ilv-qdisk)" = 1 ]; then
		ilv_disks="$ilv_disks', 'format=raw, vdev=xvdd, access=rw, backendtype=qdisk, target=/srv/guest4.img"
		BE_OF_DEV="$BE_OF_DEV xvdd=qdisk"
	fi
	ilv_devs=$(echo $BE_OF_DEV | sed 's/=[a-z]*//g; s/ /+/g')
	r=$(arg xbdt.ilv-rounds); r=${r:-3}
	mkcfg ilv 1 interleave "xbdt.devs=$ilv_devs xbdt.rounds=$r xbdt.jobs=verify+rand4k+seq128k+qd1" "$ilv_disks"
	# each timed job takes RT s and about 15 more under TCG
	FOLLOW_FOR=$((480 + r * 3 * $(echo $BE_OF_DEV | wc -w) * (RT + 20))) guest_jobs ilv mixed ilv
	xl destroy ilv >/dev/null 2>&1
	cp /var/log/xen/qemu-dm-ilv.log $L/ 2>/dev/null
	BE_OF_DEV=
	rm -f /srv/guest4.img
	xbd_crashed "the side-by-side runs"
	if xbd_alive; then kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null; XBD_PID=; fi
fi
