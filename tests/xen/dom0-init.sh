#!/bin/bash
# dom0-init.sh: PID 1 of dom0 in make check-xen (after the stage-1 initramfs
# mounted the payload disk on /opt/xbd and switch_root'ed here).  Starts the
# Xen toolstack daemons, then runs the steps named by xbdt.steps= in one
# boot, in the fixed order below, then powers off.  The runner only:
#   lib/base.sh     arg, up, say, step, want, finish
#   lib/steps.sh    the step files' headers, their needs, run_step, the check
#                   that each step asked for printed a line
#   lib/measure.sh  all the measuring (CPU, events, system calls, profilers)
#   lib/guests.sh   xl configs, guests, following their jobs, dom0's kernel log
#   lib/xbd.sh      xbd-back: start, alive, crashed, stats, ring CPUs, disk line
#   lib/runs.sh     runs several steps make (mq_run, variant, loop_run, ...)
#   lib/pvgrub.sh, lib/lifecycle.sh   the pvgrub and lifecycle steps' code
#   steps/NAME.sh   one step: its header says what it needs and the prefix
#                   of its lines (tests/xen/README.md: how to add one)
# Every outcome is printed on the serial console as a line
#   XBDT-STEP name PASS|FAIL|SKIP GTYPE/D0TYPE note          or
#   XBDT-RESULT backend=.. run=.. job=.. ...   (one per fio job)
# which xen-check.sh on the host turns into the results table.
X=/opt/xbd
H=$X/harness   # lib/ and steps/ (xen-check.sh installs them there)
. $H/lib/base.sh
. $H/lib/steps.sh
. $H/lib/measure.sh
. $H/lib/guests.sh
. $H/lib/xbd.sh
. $H/lib/runs.sh
. $H/lib/pvgrub.sh
. $H/lib/lifecycle.sh
mount -t proc proc /proc 2>/dev/null; mount -t sysfs sysfs /sys 2>/dev/null
XENVER=$(arg xbdt.xenver); XENVER=${XENVER:-4.17}
export PATH=/usr/lib/xen-$XENVER/bin:/opt/xbd/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t devtmpfs devtmpfs /dev 2>/dev/null; mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp
mount -o remount,rw /
# the system-call counts (sc_start) and the timeline step's ftrace
TR=/sys/kernel/tracing
mount -t tracefs nodev $TR 2>/dev/null
hostname dom0
# devtmpfs lacks these; Xen's locking.sh (block script) spins without /dev/stdin
ln -sf /proc/self/fd /dev/fd; ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
L=$X/logs
rm -rf $L; mkdir -p $L
# our kernel modules (the rootfs may hold none, or other ones; a rootfs
# fresh from debootstrap has no /lib/modules at all)
mkdir -p /lib/modules
mount --bind $X/modroot/lib/modules /lib/modules
# Linux patches its own text (a static key, through int3) when its random
# pool becomes ready, about 40 s into a boot here: in the middle of the
# first guests' start.  A Debian 13 dom0 under TCG once took that int3 as
# an Oops in crng_make_state (xl's getrandom) and crashed.  The host's
# bytes, credited now (RNDADDENTROPY), make it happen while init alone runs.
python3 -c 'import fcntl, os, struct, sys
d = open(sys.argv[1], "rb").read()
fd = os.open("/dev/random", os.O_WRONLY)
fcntl.ioctl(fd, 0x40085203, struct.pack("ii", 8 * len(d), len(d)) + d)' $X/entropy 2>/dev/null ||
	echo "XBDT: no entropy credited (the pool becomes ready later)"

# The guests' xl type (xbdt.gtype: pv, pvh or hvm; xen-check.sh's
# GUEST_TYPE) and dom0's own (PV or PVH, as its kernel says)
GTYPE=$(arg xbdt.gtype); GTYPE=${GTYPE:-pv}
# the lifecycle guest's (xen-check.sh's LC_TYPE: PVH on Xen 4.20, where
# its live migration runs; the others' type elsewhere)
LCTYPE=$(arg xbdt.lctype); LCTYPE=${LCTYPE:-$GTYPE}
# its time budget in seconds (xen-check.sh's LC_BUDGET; lib/lifecycle.sh)
LC_BUDGET=$(arg xbdt.lc-budget)
D0TYPE=$(tr 'A-Z' 'a-z' </sys/hypervisor/guest_type 2>/dev/null)
[ -n "$D0TYPE" ] || D0TYPE=$(dmesg | grep -q 'Booting kernel on Xen PVH' && echo pvh || echo pv)
# Xen on Arm has one kind of domain, dom0 included (Linux says "HVM")
[ "$(uname -m)" != aarch64 ] || D0TYPE=arm
RT=$(arg xbdt.rt); RT=${RT:-10}
DOMU_MEM=$(arg xbdt.mem); DOMU_MEM=${DOMU_MEM:-512}
STEPS=" $(arg xbdt.steps | tr + ' ') "
XBD_ARGS=$(arg xbdt.xbdargs | tr + ' ')   # make check-xen XBD_ARGS=...: every xbd-back start
# which step prints which lines: from the step files' headers
STEP_LINES=$(step_lines)
TCK=$(getconf CLK_TCK)
say "dom0 userspace up; steps:$STEPS rt=${RT}s"
# what a seccomp-confined task costs at a context switch (spectre_v2_user=seccomp: IBPB, STIBP)
grep -H . /sys/devices/system/cpu/vulnerabilities/* >$L/cpu-vulnerabilities.txt 2>&1

# xen-blkback must not be loaded (nor loadable) while xbd-back serves backend/vbd
echo "install xen-blkback /bin/false" >/etc/modprobe.d/xbd-check.conf
for m in xenfs xen-evtchn xen-gntdev xen-gntalloc xen-privcmd loop; do
	modprobe $m || say "modprobe $m failed"
done
mount -t xenfs xenfs /proc/xen || say "mount xenfs failed"
mkdir -p /run/xen /run/xenstored /var/log/xen/console /var/lib/xen /srv
export XENSTORED_ROOTDIR=/run/xenstored
xenstored --pid-file /run/xenstore.pid || say "xenstored failed"
for i in $(seq 50); do xenstore-read -s / >/dev/null 2>&1 && break; sleep 0.2; done
timeout 60 xen-init-dom0 >/dev/null || say "xen-init-dom0 failed"
xenconsoled --pid-file /run/xenconsoled.pid --log=guest --log-dir=/var/log/xen/console ||
	say "xenconsoled failed"
if timeout 60 xl info >$L/xl-info.txt 2>&1; then
	STEP_G=- step dom0-ready PASS "xen $(sed -n 's/^xen_version *: //p' $L/xl-info.txt), $D0TYPE dom0 $(uname -r), virt_caps: $(sed -n 's/^virt_caps *: //p' $L/xl-info.txt)"
	# a guest type the hypervisor cannot run (no SVM/VMX in QEMU's CPU
	# model: virt_caps "pv") fails here once, not in every step
	case " $GTYPE $LCTYPE " in
	*" pvh "* | *" hvm "*) grep -q '^virt_caps *:.*hvm' $L/xl-info.txt ||
		STEP_G=- step dom0-virt-caps FAIL "PVH and HVM guests need virt_caps hvm (QEMU's -cpu with svm and npt): $(grep virt_caps $L/xl-info.txt)" ;;
	esac
else
	# without a working toolstack every later step would only wait for its timeout
	STEP_G=- step dom0-ready FAIL "xl info failed: $(tail -2 $L/xl-info.txt | tr '\n' '|')"
	finish
fi
KLINES=$(dmesg | wc -l)   # boot messages are not the backends' doing
# the hotplug script, where the README's disk line expects it
install -m 0755 $X/xbd-hotplug /etc/xen/scripts/xbd
# guest disks, written once with zeros (not sparse, no unwritten extents),
# so that no backend pays for block allocation that another one did not
for img in guest guest2 guest3 guest-c front; do
	mb=256; case $img in guest3 | guest-c | front) mb=64 ;; esac
	dd if=/dev/zero of=/srv/$img.img bs=1M count=$mb conv=fsync status=none
done

# xbd-back's system calls, counted in the boots that measure costs (lib/measure.sh)
sc_setup
# a boot that counts instructions (xen-check.sh's COUNT): dom0's vCPUs are
# pinned to DOM0_CPUS, step count's guests to COUNT_GUEST_CPUS (the other
# steps' guests run where Xen puts them), and step count cuts the counts
# at its guests' marks (lib/measure.sh: count_begin)
if [ "$(arg xbdt.count)" = 1 ]; then
	COUNTING=1 DOM0_CPUS=$(arg xbdt.dom0-cpus) COUNT_GUEST_CPUS=$(arg xbdt.guest-cpus)
	say "counting instructions: dom0 on CPUs $DOM0_CPUS, step count's guests on $COUNT_GUEST_CPUS"
	# the harness's own logs are not flushed in the background every few
	# seconds (the flusher's and ext4's commit timers), which would land in
	# the jobs' windows by chance; its steps sync them anyway
	echo 0 >/proc/sys/vm/dirty_writeback_centisecs
	mount -o remount,commit=900 / 2>/dev/null; mount -o remount,commit=900 /opt/xbd 2>/dev/null
fi
PVGRUB_BOUND=$(arg xbdt.pvgrub-bound); PVGRUB_BOUND=${PVGRUB_BOUND:-300}

# The slot xbd-back serves: backend/vbd with script= on Xen 4.17/4.18 (no
# kernel blkback beside it); from 4.19 backendtype=tap writes backend/vbd3.
# These are the README's xl disk lines.
case $XENVER in
4.1[0-8]) XBD_SLOT=vbd XBD_OPTS="script=/etc/xen/scripts/xbd" ;;
*) XBD_SLOT=vbd3 XBD_OPTS="backendtype=tap, script=/etc/xen/scripts/xbd" ;;
esac
XBD_DISK=$(xbd_disk xvdb /srv/guest.img)

# ---- the steps, in their fixed order (each: steps/NAME.sh) ------------------
# xbd-back and the variants of it
run_step xbd
run_step mq
run_step nopoll
run_step nopin
run_step single
run_step mqsingle
run_step uring
run_step again
run_step loop
run_step profile
run_step pcache
run_step phy
run_step timeline

# phase (not a step): the third guest, xbd3, that workers, kill9, hotplug and destroy need
# a third guest, only there to be served while xbd1 is hot-plugged and destroyed
# (the workers and kill9 steps act on it too: each brings it up when it is asked for alone)
if { want hotplug || want destroy || want workers || want kill9; } && xbd_alive; then
	mkcfg xbd3 1 rounds "" "$(xbd_disk xvdb /srv/guest3.img)"
	create xbd3 && wait_console xbd3 '^DOMU-ROUND n=1 ' 300 &&
		step xbd-other-guest PASS "xbd3 does write+verify rounds on its own disk" ||
		step xbd-other-guest FAIL "xbd3 did not start its rounds"
	xbd_crashed "the third guest's start"
fi

run_step workers
run_step kill9
run_step hotplug
run_step destroy

# GRUB boots, the guest lifecycle, the other disks and guest types on xbd-back
run_step pvgrub
run_step pvhgrub
run_step lifecycle
run_step lckill9
run_step vbd3
run_step nbd
run_step backup
run_step hvm
run_step bootloop

# phase (not a step): the end of xbd-back's steps, the guests stopped, xbd-back too
if want xbd || want pvgrub || want pvhgrub || want lifecycle || want vbd3 || want nbd || want backup || want hvm; then
	xbd_crashed "the hotplug/destroy steps"
	kernel_clean xbd-hotplug-destroy
	for g in xbd1 xbd2 xbd3; do
		xl domid $g >/dev/null 2>&1 || continue
		d=$(xl domid $g); xl destroy $g >>$L/xl-destroy.log 2>&1
		for i in $(seq 40); do xenstore-read /local/domain/0/backend/$XBD_SLOT/$d >/dev/null 2>&1 || break; sleep 0.5; done
	done
	glog xbd3 >$L/console-xbd3.log 2>/dev/null
	xbdctl_stats after
	left=$(xenstore-list /local/domain/0/backend/$XBD_SLOT 2>/dev/null | tr '\n' ' ')
	if xbd_alive; then
		kill -TERM $XBD_PID
		for i in $(seq 20); do xbd_alive || break; sleep 0.5; done
		wait $XBD_PID 2>/dev/null; xrc=$?
		xbd_alive && { STEP_G=- step xbd-stop FAIL "xbd-back ignores SIGTERM"; kill -KILL $XBD_PID; } ||
			STEP_G=- step xbd-stop PASS "all guests gone (backend/$XBD_SLOT left: [${left}]); SIGTERM -> exit $xrc"
	else
		STEP_G=- step xbd-stop FAIL "xbd-back died during the run: $(tail -5 $L/xbd-back.log)"
	fi
	XBD_PID=
	grep -i -E 'error|warn|fail' $L/xbd-back.log | head -15 | sed 's/^/  [xbd-back] /'
fi

# the counted table: after xbd-back's steps, with their guests gone, so that
# nothing but its own guest runs beside it (it starts xbd-back itself)
run_step count
run_step qdisk

# ---- kernel blkback ---------------------------------------------------------
# phase (not a step): kernel blkback loaded for the steps that use it
if want blkback || want front || want loop || want phy || want timeline; then
	rm -f /etc/modprobe.d/xbd-check.conf
	modprobe xen-blkback && STEP_G=- step blkback-load PASS "xen-blkback loaded" || STEP_G=- step blkback-load FAIL "modprobe xen-blkback"
fi
run_step blkback
run_step bbmq
run_step profile.blkback
run_step loop.blkback
run_step phy.blkback
run_step timeline.blkback

# the backends side by side, xbd-front in dom0, the long pvgrub2 target
run_step ilv
run_step front
run_step pvgrub-loop

# phase (not a step): the whole boot's checks, then the verdict
# every worker of the whole boot (they serve every step by default): none
# made a system call outside its seccomp list
if [ -s $L/xbd-back.log ]; then
	sl=$(grep -a -c 'is not allowed; called from\|killed by seccomp' $L/xbd-back.log)
	[ "$sl" = 0 ] && STEP_G=- step xbd-seccomp-end PASS "no seccomp report in xbd-back's log over the whole boot ($XBD_STARTS starts of xbd-back)" ||
		STEP_G=- step xbd-seccomp-end FAIL "$sl seccomp lines in xbd-back's log: $(grep -a 'is not allowed; called from\|killed by seccomp' $L/xbd-back.log | head -2 | tr '\n' '|')"
fi
kernel_clean end
STEPS_CHECKED=1
finish
