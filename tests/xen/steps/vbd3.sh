# step vbd3: Xen 4.19+: one guest, xvdb on kernel blkback (backend/vbd), xvdc on xbd-back (backend/vbd3)
# needs: none
# lines: vbd3-

# ---- Xen 4.19+: xbd-back on backend/vbd3 beside kernel blkback on backend/vbd ----
if [ $XBD_SLOT != vbd3 ]; then
	step vbd3-beside-blkback SKIP "Xen $XENVER's libxl has no backendtype=tap slot (4.19 and later)"
else
	rm -f /etc/modprobe.d/xbd-check.conf
	modprobe xen-blkback || step vbd3-blkback-load FAIL "modprobe xen-blkback"
	xbd_alive || xbd_start
	# one guest, both backends: xvdb on kernel blkback (backend/vbd),
	# xvdc on xbd-back (backend/vbd3), the verify job on both at once
	mkcfg v3 1 twodisks "" "format=raw, vdev=xvdb, access=rw, target=/srv/guest.img', '$(xbd_disk xvdc /srv/guest2.img)"
	xtpid=
	if create v3; then
		# both ends' directories while the guest runs (it powers off when done)
		wait_console v3 '^DOMU-XVDC-PRESENT |^DOMU-NO-XVD' 300
		d3=$(xl domid v3 2>/dev/null)
		dump_xs $L/xs-vbd3.txt
		# xentop as an operator runs it, through the verify jobs: both disks' counters
		if command -v xentop >/dev/null; then
			xentop -b -x -d 2 -i 300 >$L/xentop-v3.txt 2>&1 &
			xtpid=$!
		fi
		wait_console v3 '^DOMU-TWODISKS-DONE |^DOMU-NO-XVD' 480
		[ -z "$xtpid" ] || { kill $xtpid; wait $xtpid; } 2>/dev/null
		glog v3 >$L/console-v3.log
		bb=$(grep -o "/local/domain/0/backend/[a-z0-9]*/$d3/51728 " $L/xs-vbd3.txt | head -1)
		bx=$(grep -o "/local/domain/0/backend/[a-z0-9]*/$d3/51744 " $L/xs-vbd3.txt | head -1)
		rb=$(grep -a '^DOMU-JOB-RESULT job=verify-b ' $L/console-v3.log | sed -n 's/.* rc=\([0-9]*\) .*/\1/p')
		rx=$(grep -a '^DOMU-JOB-RESULT job=verify-c ' $L/console-v3.log | sed -n 's/.* rc=\([0-9]*\) .*/\1/p')
		nx=$(grep -a -c "vbd3\?/$d3/51728" $L/xbd-back.log)
		note="one guest: xvdb on ${bb:-no backend} (kernel blkback, verify rc=${rb:-none}), xvdc on ${bx:-no backend} (xbd-back, verify rc=${rx:-none}); xbd-back's log lines about xvdb: $nx"
		case "$bb:$bx" in
		*/backend/vbd/*:*/backend/vbd3/*) slots=ok ;;
		*) slots=bad ;;
		esac
		if [ "$rb" = 0 ] && [ "$rx" = 0 ] && [ $slots = ok ] && [ "$nx" = 0 ]; then
			step vbd3-beside-blkback PASS "$note"
		else
			step vbd3-beside-blkback FAIL "$note; $(grep -a '^DOMU-FIO-ERR\|^DOMU-NO-XVD' $L/console-v3.log | head -3 | tr '\n' '|')"
		fi
	else
		step vbd3-beside-blkback FAIL "xl create failed (logs/xl-create-v3.log)"
	fi
	xl destroy v3 >/dev/null 2>&1
	# xentop (libxenstat, 4.19+) lists a vbd3 disk as Tapdisk3 from the
	# counters xbd-back publishes where tapdisk3's are (vbd3-stats.c),
	# beside kernel blkback's disk (BlkBack, from sysfs) as the control
	if [ -z "$xtpid" ]; then
		step vbd3-xentop SKIP "no xentop in dom0"
	else
		# "VBD Tapdisk3 51744 [ca:20]  OO: N   RD: N   WR: N ...": the most I/O seen
		most() { awk -v t="$1" -v d="$2" '$1 == "VBD" && $2 == t && $3 == d {
			for (i = 4; i < NF; i++) if ($i == "RD:" || $i == "WR:") n += $(i + 1)
			if (n > m) m = n; n = 0 } END { print m + 0 }' $L/xentop-v3.txt; }
		xt=$(most Tapdisk3 51744) xb=$(most BlkBack 51728)
		note="xentop -b -x: xvdc (xbd-back, vbd3) as Tapdisk3 with up to $xt requests, xvdb (kernel blkback) as BlkBack with up to $xb (logs/xentop-v3.txt)"
		if [ "$xt" -gt 0 ] && [ "$xb" -gt 0 ]; then
			step vbd3-xentop PASS "$note"
		else
			step vbd3-xentop FAIL "$note"
		fi
	fi
	xbd_crashed "the vbd3 step"
fi
