# tests/xen/lib/runs.sh: sourced by dom0-init.sh.  The runs that several
# steps make, each with its step lines: the multi-queue guest (mq_run: mq,
# mqsingle, bbmq), xbd-back restarted with options for a run (variant:
# nopoll, nopin, single, mqsingle, uring, again, pcache, timeline), the loop
# device with direct I/O (loop_run), dom0's own disk (phy_run), a GRUB
# boot (grub_step: pvgrub, pvhgrub).  Definitions only.
MQ_ARGS="xen_blkfront.max_ring_page_order=4 xen_blkfront.max_indirect_segments=256 xen_blkfront.max_queues=2 xen_blkfront.feature_persistent=0"

# The like-for-like disk of the loop runs: a loop device with direct I/O
# (losetup --direct-io=on) on guest2.img, served in turn by xbd-back and by
# kernel blkback, made for each run and detached after it (the variant runs
# have that file to themselves).  Kernel blkback's std disk is a file too,
# to which xl's block script gives a loop device without direct I/O (dom0's
# page cache), while xbd-back opens its file disks O_DIRECT: the loop rows
# compare the two backends on one storage path.
LOOP_JOBS=xbdt.jobs=rand4k+seq128k+qd1
TRACE_JOBS=xbdt.jobs=rand4k+qd1   # the xentrace runs of the profile step
loop_run() {  # BACKEND GUEST: the loop jobs on that device, or a FAIL step
	local be=$1 g=$2 dev
	dev=$(losetup --direct-io=on -f --show /srv/guest2.img 2>$L/losetup-$g.log)
	if [ -z "$dev" ] || [ "$(cat /sys/block/${dev#/dev/}/loop/dio 2>/dev/null)" != 1 ]; then
		step $be-loop-dio FAIL "no loop device with direct I/O: $(tr '\n' ' ' <$L/losetup-$g.log)"
		[ -z "$dev" ] || losetup -d $dev
		return 1
	fi
	step $be-loop-dio PASS "$dev: /srv/guest2.img with direct I/O (loop/dio = 1)"
	if [ $be = xbd ]; then mkcfg $g 1 none $LOOP_JOBS "$(xbd_disk xvdb $dev)"
	else mkcfg $g 1 none $LOOP_JOBS "format=raw, vdev=xvdb, access=rw, target=$dev"; fi
	guest_jobs $g $be loop
	xl destroy $g >/dev/null 2>&1
	for i in $(seq 20); do losetup -d $dev 2>/dev/null && break; sleep 0.5; done
}

# mq_run GUEST BACKEND 'DISK' SLOT: the guest with 2 vCPUs and blkfront's optional
# features on; check in xenstore and in the guest what was negotiated; the jobs
mq_run() {  # GUEST BACKEND 'DISK' SLOT [RUN]
	local g=$1 be=$2 run=${5:-mq} F B nq order refs refs1 seen segs hwq note
	# feature_persistent=0: with persistent grants Linux blkfront bounces
	# through preallocated pages, (256 + 2) per ring slot, 512 slots per
	# 16-page ring: 0.5 GiB per queue, and a 512 MiB guest panics
	# ("System is deadlocked on memory"); kernel blkback offers the same.
	mkcfg $g 2 none "xbdt.settle=20 xbdt.qd1=0 $MQ_ARGS" "$3"
	create $g && step $be-$run-create PASS "2 vCPUs, $MQ_ARGS" || step $be-$run-create FAIL "xl create $g"
	# the jobs are followed from the start, while the checks below run
	follow $g $be $run 480 &
	local fpid=$!
	if xl domid $g >/dev/null 2>&1 && wait_console $g 'DOMU-XVDB-PRESENT|DOMU-NO-XVDB' 300 &&
		glog $g | grep -q DOMU-XVDB-PRESENT; then
		F=$(fe_path $g 51728); B=$(be_path $4 $g 51728)
		dump_xs $L/xs-$g.txt
		nq=$(xenstore-read $F/multi-queue-num-queues 2>/dev/null)
		order=$(xenstore-read $F/ring-page-order 2>/dev/null)
		refs=$(xenstore-list $F/queue-0 2>/dev/null | grep -c '^ring-ref')
		refs1=$(xenstore-list $F/queue-1 2>/dev/null | grep -c '^ring-ref')
		seen=$(glog $g | sed -n 's/^DOMU-XVDB-PRESENT //p')
		segs=$(echo "$seen" | sed -n 's/.*max_segments=\([0-9]*\).*/\1/p')
		hwq=$(echo "$seen" | sed -n 's/.*hw_queues=\([0-9]*\).*/\1/p')
		note="frontend wrote multi-queue-num-queues=$nq ring-page-order=$order, queue-0/1 ring-refs=$refs/$refs1 feature-persistent=$(xenstore-read $F/feature-persistent 2>/dev/null); guest queue: max_segments=$segs hw_queues=$hwq; backend offered max-ring-page-order=$(xenstore-read $B/max-ring-page-order 2>/dev/null) multi-queue-max-queues=$(xenstore-read $B/multi-queue-max-queues 2>/dev/null) feature-max-indirect-segments=$(xenstore-read $B/feature-max-indirect-segments 2>/dev/null)"
		[ "$nq" = 2 ] && [ "$hwq" = 2 ] && step $be-$run-queues PASS "$note" || step $be-$run-queues FAIL "$note"
		[ "$order" = 4 ] && [ "$refs" = 16 ] && [ "$refs1" = 16 ] &&
			step $be-$run-ring-order PASS "ring-page-order=4, 16 ring-refs in each queue-N" ||
			step $be-$run-ring-order FAIL "ring-page-order=$order ring-refs=$refs/$refs1"
		[ "$segs" = 256 ] && step $be-$run-indirect PASS "guest queue max_segments=256: indirect descriptors in use" ||
			step $be-$run-indirect FAIL "guest queue max_segments=$segs"
		glog $g | grep '^DOMU-DMESG' | grep -i 'indirect' | head -2 | sed "s/^/  [$g] /"
		wait $fpid && step $be-$run-fio PASS "3 jobs (no qd1), verify ok" ||
			step $be-$run-fio FAIL "see logs/console-$g.log"
	else
		kill $fpid 2>/dev/null; wait $fpid 2>/dev/null
		step $be-$run-queues FAIL "guest $g never saw xvdb: $(glog $g | grep -a -m1 -E 'Kernel panic|NO-XVDB')"
	fi
	glog $g >$L/console-$g.log
	xl destroy $g >/dev/null 2>&1
}

# variant RUN GUEST WHEN XBD-BACK-OPTION...: xbd-back restarted with the
# options, the jobs on a guest of their own (run RUN in the table; an mq*
# run is the multi-queue guest), then xbd-back as the service runs it
# again.  A worker's seccomp report (a call outside its list) is shown.
variant() {
	local run=$1 g=$2 when=$3 n0
	shift 3
	kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null
	echo "---- restarted with $*" >>$L/xbd-back.log
	n0=$(wc -l <$L/xbd-back.log)
	xbd_start "$@"
	case $run in
	mq*) mq_run $g xbd "${XBD_DISK/guest.img/guest2.img}" $XBD_SLOT $run ;;
	*)	mkcfg $g 1 none "${VARIANT_JOBS:-}" "${VARIANT_DISK:-${XBD_DISK/guest.img/guest2.img}}"
		guest_jobs $g xbd $run
		xl destroy $g >/dev/null 2>&1 ;;
	esac
	tail -n +$n0 $L/xbd-back.log | grep -a 'is not allowed; called from' | head -2 |
		sed 's/^/  [xbd-back] /'
	xbd_crashed "$when"
	kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null
	xbd_start || step xbd-restart FAIL "xbd-back did not come back"
}

# the direct path of both backends: a disk of dom0's own (QEMU's third
# virtio disk), opened O_DIRECT by xbd-back and a phy disk of kernel
# blkback's (its bios), as hosts serve LVM volumes and partitions.  It is
# the one disk dom0 has not mounted: vdc on x86, vda on Arm, where
# virtio-mmio numbers QEMU's disks the other way round (vdc is dom0's root
# there, which the jobs would write over).  phy_dev sets PHY_DEV (once
# dom0-init.sh has mounted /proc and /dev: not when this file is read)
PHY_DEV=
phy_dev() {
	local d
	[ -z "$PHY_DEV" ] || return 0
	PHY_DEV=/dev/no-unmounted-disk
	for d in /dev/vdc /dev/vda /dev/vdb; do
		[ -b $d ] && ! grep -q "^$d " /proc/mounts && { PHY_DEV=$d; return 0; }
	done
}
phy_run() {  # BACKEND GUEST [RUN JOBS]
	local be=$1 g=$2 run=${3:-phy} jobs=${4:-xbdt.jobs=rand4k+seq128k+qd1}
	phy_dev
	if [ ! -b $PHY_DEV ]; then
		step $be-$run-dev FAIL "no $PHY_DEV in dom0 (QEMU's third disk)"
		return 1
	fi
	if [ $be = xbd ]; then mkcfg $g 1 none $jobs "$(xbd_disk xvdb $PHY_DEV)"
	else mkcfg $g 1 none $jobs "format=raw, vdev=xvdb, access=rw, target=$PHY_DEV"; fi
	guest_jobs $g $be $run
	xl destroy $g >/dev/null 2>&1
}

# grub_step STEP GUEST: one boot from xbd-back's disk, with GRUB's image
# for PVGRUB_TYPE (pvgrub2 in a PV guest; GRUB's PVH image in a PVH one)
grub_step() {
	local st=$1 g=$2 rc r
	STEP_G=$PVGRUB_TYPE   # the guest GRUB boots in, whatever the boot's guests are
	if ! pvgrub_setup; then
		step $st FAIL "no $(pvgrub_bin) or no boot disk"
	else
		pvgrub_use xbd
		pvgrub_boot $g xbd 1 $PVGRUB_BOUND $PVGRUB_TYPE; rc=$?
		r=$(tail -1 $L/pvgrub.txt)
		f() { echo "$r" | pvgrub_field $1; }
		if [ $rc = 0 ]; then
			step $st PASS "kernel=$(pvgrub_bin) (type $PVGRUB_TYPE), xvda on xbd-back: GRUB read grub.cfg after $(f cfg)s, the kernel and the initramfs by $(f initrd)s; Linux started after $(f linux)s and read xvda back intact (md5) after $(f done)s"
		else
			step $st FAIL "rc=$rc: $r; GRUB: $(tr -d '\r' <$L/console-$g-1.log | grep -a -o 'error: [^^]*' | head -2 | tr '\n' '|') (logs/console-$g-1.log, logs/pvgrub-hang-xbd-1/)"
		fi
		xbd_crashed "the $PVGRUB_TYPE GRUB boot"
	fi
	STEP_G=
}
