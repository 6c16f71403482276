#!/bin/bash
# dom0-init.sh: PID 1 of dom0 in make check-xen (after the stage-1 initramfs
# mounted the payload disk on /opt/xbd and switch_root'ed here).  Starts the
# Xen toolstack daemons, then runs the steps named by xbdt.steps= in one boot:
#   xbd      xbd-back as a service (xen-blkback not loadable), guest xbd1 from
#            an xl config with the README's disk line, fio jobs in the guest
#   mq       guest xbd2: 2 vCPUs, max_ring_page_order=4, max_indirect_segments=256,
#            max_queues=2; the jobs again; check what xenstore shows negotiated
#   hotplug  xl block-detach xvdb / block-attach xvdc on xbd1 while it runs
#   destroy  xl destroy xbd1 under I/O: xbd-back cleans up, keeps serving xbd2
#   blkback  the same jobs against kernel xen-blkback (loaded only now)
#   qdisk    the same jobs against QEMU's qdisk
#   front    xbd-front (dom0) on a disk served by kernel blkback: check + nbdkit/fio
#   pvgrub   a guest booted by pvgrub2 from a disk xbd-back serves (pvgrub.sh)
#   pvgrub-loop  N such boots, alternating with kernel blkback (the long target)
# Every outcome is printed on the serial console as a line
#   XBDT-STEP name PASS|FAIL|SKIP note          or
#   XBDT-RESULT backend=.. run=.. job=.. ...   (one per fio job)
# which xen-check.sh on the host turns into the results table.
mount -t proc proc /proc 2>/dev/null; mount -t sysfs sysfs /sys 2>/dev/null
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tail -1; }
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
X=/opt/xbd
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

up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "XBDT[$(up)]: $*"; }
since() { awk -v a="$1" -v b="$(up)" 'BEGIN{printf "%.1f", b-a}'; }
# The guests' xl type (xbdt.gtype: pv, pvh or hvm; xen-check.sh's
# GUEST_TYPE) and dom0's own (PV or PVH, as its kernel says)
GTYPE=$(arg xbdt.gtype); GTYPE=${GTYPE:-pv}
# the lifecycle guest's (xen-check.sh's LC_TYPE: PVH on Xen 4.20, where
# its live migration runs; the others' type elsewhere)
LCTYPE=$(arg xbdt.lctype); LCTYPE=${LCTYPE:-$GTYPE}
D0TYPE=$(tr 'A-Z' 'a-z' </sys/hypervisor/guest_type 2>/dev/null)
[ -n "$D0TYPE" ] || D0TYPE=$(dmesg | grep -q 'Booting kernel on Xen PVH' && echo pvh || echo pv)
FAILS=0
# Each step's line says which guest type it covered and on which dom0:
# "pvh/pv" (STEP_G: the guest type when it is not the boot's, "-" for a
# step of dom0's alone)
step() {  # NAME PASS|FAIL|SKIP NOTE...
	echo "XBDT-STEP $1 $2 ${STEP_G:-$GTYPE}/$D0TYPE ${*:3}"
	echo "$1 $2 ${STEP_G:-$GTYPE}/$D0TYPE ${*:3}" >>$L/steps.txt
	# the logs so far on the payload disk, should the boot hang later
	sync -f $L/steps.txt 2>/dev/null &
	[ "$2" = FAIL ] && FAILS=$((FAILS + 1))
	return 0
}
# Each step asked for must print a line of its own (the prefix of its
# step lines here): one that printed nothing has not run, and fails.
STEP_LINES="xbd:xbd-std-fio mq:xbd-mq- hotplug:hotplug- workers:workers- kill9:xbd-kill9
destroy:destroy- pvgrub:pvgrub-boot pvhgrub:pvhgrub-boot lifecycle:lc- lckill9:lc-kill9 vbd3:vbd3- nbd:xbd-nbd
blkback:blkback-std- qdisk:qdisk-std- front:front- pcache:xbd-pcache- nopoll:xbd-nopoll-
nopin:xbd-nopin- single:xbd-single- uring:xbd-uring- again:xbd-again- mqsingle:xbd-mqsg-
bbmq:blkback-mq- profile:xbd-\(perf-\|profile\) loop:xbd-loop- phy:xbd-phy- timeline:xbd-timeline-
hvm:hvm- ilv:\(mixed-ilv-\|ilv-cost\) pvgrub-loop:pvgrub-loop"
steps_said() {
	local s p
	for s in $STEPS; do
		p=$(echo "$STEP_LINES" | tr ' ' '\n' | sed -n "s/^$s://p")
		if [ -z "$p" ]; then
			STEP_G=- step step-$s FAIL "no such step (tests/xen/README.md lists them)"
		elif ! grep -q "^$p" $L/steps.txt 2>/dev/null; then
			STEP_G=- step step-$s FAIL "asked for, but it printed no line of its own ($p...): it did not run"
		fi
	done
}
# finish: the logs back to the payload disk, the verdict, power off.
finish() {
	[ -z "$STEPS_CHECKED" ] || steps_said
	dmesg >$L/dmesg.txt 2>&1
	say "steps failed: $FAILS"
	echo "XBDT-DONE fails=$FAILS"
	sync
	mount -o remount,ro /opt/xbd 2>/dev/null
	sync; sleep 1
	echo o >/proc/sysrq-trigger   # ACPI S5: QEMU exits
	sleep 30
	exit 0
}
RT=$(arg xbdt.rt); RT=${RT:-10}
DOMU_MEM=$(arg xbdt.mem); DOMU_MEM=${DOMU_MEM:-512}
STEPS=" $(arg xbdt.steps | tr + ' ') "
XBD_ARGS=$(arg xbdt.xbdargs | tr + ' ')   # make check-xen XBD_ARGS=...: every xbd-back start
want() { case "$STEPS" in *" $1 "*) return 0 ;; esac; return 1; }
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

# ---- helpers ---------------------------------------------------------------
XBD_PID=
# bdelta BACKEND BEFORE AFTER: CPU ticks the backend's tasks ran between
# two snapshots (snap), thread by thread, so that a kworker that changed
# its name or a thread that came or went does not skew the sum.  A task
# counts when its own name or its process's is the backend's.
# (xbdrN: the name a thread of xbd-back's has while it opens a ring's event
# channel, which Linux gives the interrupt.)
# Kernel blkback's ring kthreads are named DOMID.VDEV-QUEUE (6.xvdb-0); the
# loop device's work runs in kworkers whose name ends in -loopN (either
# backend's, on a loop device: nothing else uses one during its jobs).
bdelta() {
	awk -v be=$1 '
	function ours(c) {
		if (be == "xbd") return c ~ /^\(xbd-back(\.real)?\)$|^\(xbd-worker\)$|^\(xbdr[0-9]+\)$|[-+]loop[0-9]+\)$/
		if (be == "blkback") return c ~ /^\([0-9]+\.xvd[a-z]+-[0-9]+\)$|[-+]loop[0-9]+\)$/
		if (be == "qdisk") return c ~ /qemu/
		return 0
	}
	NR == FNR { b[$1] = $4; next }
	ours($2) || ours($3) { d = $4 - b[$1]; if (d > 0) s += d }
	END { printf "%.2f\n", s }' "$2" "$3"
}
# snap FILE: every dom0 thread's time on a CPU so far, in ticks
# (1/CLK_TCK s): "TID (COMM) (PROCESS'S COMM) TICKS".  From schedstat's
# run time, which the scheduler keeps to the nanosecond: the utime and
# stime of /proc/PID/stat are tick samples scaled to it, kept from going
# back, and under TCG a worker's came out 0 for a whole job and 30 s for
# the next one (Debian 13's PV dom0, a loaded host).
snap() {
	grep -s -H . /proc/[0-9]*/task/[0-9]*/comm /proc/[0-9]*/task/[0-9]*/schedstat |
	awk -F: -v tck=$TCK '
	{ n = split($1, p, "/"); v = substr($0, length($1) + 2) }
	p[n] == "comm" { gsub(/[ ()]/, "_", v); c[p[5]] = "(" v ")"; next }
	{ split(v, a, " "); ns[p[5]] = a[1]; pid[p[5]] = p[3] }
	END { for (t in ns) if (t in c) printf "%s %s %s %.2f\n", t, c[t], (pid[t] in c) ? c[pid[t]] : c[t], ns[t] * tck / 1e9 }' >"$1"
}
top_cpu() {  # BEFORE AFTER: "comm=ticks" of the 6 busiest processes in between
	awk 'NR == FNR { b[$1] = $4; next } { d = $4 - b[$1]; if (d > 0) t[$3] += d }
	     END { for (c in t) printf "%.0f %s\n", t[c], c }' "$1" "$2" | sort -rn | head -6 |
		awk '{ gsub(/[()]/, "", $2); printf "%s=%s ", $2, $1 }'
}
dticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }  # dom0 busy, no steal
# dom0's CPU time as Xen accounts it (its vCPUs' running time, ms; xl prints
# tenths of a second): unlike dom0's own tick-based /proc/stat, it includes
# the hypervisor's work for dom0 and every wake-up from idle
xticks() { xl vcpu-list Domain-0 2>/dev/null | awk 'NR > 1 { s += $6 } END { printf "%d", s * 1000 }'; }
# dom0's context switches, interrupts and each interrupt line by CPU (the
# ring's event channel, the disk's, the IPIs) and xbd-back's page faults,
# to count them per guest I/O
evsnap() {
	awk 'FILENAME ~ /stat/ { if ($1 == "ctxt" || $1 == "intr") print $1, $2; next }
	     FNR == 1 { ncpu = NF; next }
	     { s = ""; for (i = 2; i <= ncpu + 1; i++) s = s " " ($i + 0); print $1 $NF s }' \
		/proc/stat /proc/interrupts 2>/dev/null >"$1"
	# xbd-back's page faults (minor + major, its workers' too)
	awk '$2 ~ /^\((xbd-back(\.real)?|xbd-worker)\)$/ { f += $10 + $12 } END { print "xbd-faults", f + 0 }' \
		/proc/[0-9]*/stat 2>/dev/null >>"$1"
}
on_cpu() {  # the CPU each backend thread last ran on: "comm:cpu,..."
	awk '$2 ~ /^\((xbd-back(\.real)?|xbd-worker|[0-9]+\.xvd[a-z]+-[0-9]+)\)$/ { gsub(/[()]/, "", $2); printf "%s%s:%s", n++ ? "," : "", $2, $39 }' \
		/proc/[0-9]*/task/[0-9]*/stat 2>/dev/null
}
# sc_start BACKEND / sc_stop: the system calls xbd-back makes during a
# job (every thread of it and of its workers), from a histogram trigger
# on the raw_syscalls tracepoint keyed by thread, for tasks named xbd*,
# set once at start and read at each job's begin and end (no record, no
# process of ours counting meanwhile; a tracepoint switched on and off
# per job patches the kernel's text each time, which under TCG has
# stalled dom0).  Kernel blkback makes none; qdisk's are not counted (its
# QEMU's threads come and go).  sc_stop leaves the count in
# SC_COUNT (empty: none counted).  Only in the boots that measure costs
# (make check-xen-cost, check-xen-timeline: steps profile, phy, timeline):
# with the trigger set every system call of dom0 takes the traced path,
# which CI's boots, timed and compared with blkback, should not pay.
SC_TRIGGER=
if want profile || want phy || want timeline; then
	SC_TRIGGER=$TR/events/raw_syscalls/sys_enter/trigger
	echo 'hist:keys=common_pid:vals=hitcount:size=4096 if comm ~ "xbd*"' \
		>$SC_TRIGGER 2>/dev/null || SC_TRIGGER=
fi
SC_TIDS= SC_COUNT=
sc_hist() {  # the counts per thread now: "TID COUNT" lines
	sed -n 's/^{ common_pid: *\([0-9]*\) } hitcount: *\([0-9]*\).*/\1 \2/p' \
		$TR/events/raw_syscalls/sys_enter/hist 2>/dev/null
}
sc_start() {
	local p
	SC_TIDS= SC_COUNT=
	[ -n "$SC_TRIGGER" ] || return 0
	case $1 in
	xbd) xbd_alive && for p in $XBD_PID $(pgrep -P $XBD_PID); do SC_TIDS="$SC_TIDS $(ls /proc/$p/task)"; done ;;
	esac
	[ -z "$SC_TIDS" ] || sc_hist >/tmp/sc0
}
sc_stop() {
	[ -n "$SC_TIDS" ] || return 0
	SC_COUNT=$(sc_hist | awk -v tids="$SC_TIDS" '
		BEGIN { n = split(tids, t, " "); for (i = 1; i <= n; i++) ours[t[i]] = 1 }
		FILENAME == "/tmp/sc0" { a[$1] = $2; next }
		$1 in ours { s += $2 - a[$1] } END { print s + 0 }' /tmp/sc0 -)
	SC_TIDS=
}
job_ios() {  # DOMU-JOB-RESULT line: the guest I/Os of the job
	echo "$1" | awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
		END { printf "%d", (f["rkb"] + f["wkb"]) * 1024 / (f["bs"] ? f["bs"] : 4096) }'
}
evdelta() {  # BEFORE AFTER IOS: the busiest, per I/O ("name=cpu0+cpu1")
	awk -v ios=$3 'NR == FNR { for (i = 2; i <= NF; i++) a[$1, i] = $i; next }
	     { t = 0; s = ""; for (i = 2; i <= NF; i++) { d = $i - a[$1, i]; t += d; s = s (i > 2 ? "+" : "") sprintf("%.2f", d / ios) }
	       if (t > 0 && ios > 0) print t, $1 "=" s }' "$1" "$2" | sort -rn | head -9 |
		awk '{ printf "%s ", $2 }'
}

# An HVM guest boots the same kernel and initramfs through QEMU (the
# device model in dom0) and SeaBIOS; it runs on the PV console too (hvc0).
# pci=noearly iommu=noaperture: without them Linux spent minutes probing
# PCI configuration space under TCG.  No display, no serial port.
HVM_CFG='vnc = 0
sdl = 0
vga = "none"
serial = "none"'
mkcfg() {  # NAME VCPUS MODE "EXTRA" 'DISK' (the guest's type: $GTYPE)
	local hx=
	[ $GTYPE != hvm ] || hx="pci=noearly iommu=noaperture "
	cat >/etc/xen/$1.cfg <<CFG
name = "$1"
type = "$GTYPE"
kernel = "$X/domu/vmlinuz"
ramdisk = "$X/domu/initrd.gz"
extra = "console=hvc0 ${hx}xbdt.rt=$RT xbdt.mode=$3 $4"
memory = $DOMU_MEM
vcpus = $2
on_poweroff = "destroy"
on_reboot = "destroy"
on_crash = "destroy"
disk = [ '$5' ]
$([ $GTYPE != hvm ] || echo "$HVM_CFG")
CFG
}
create() {  # NAME: xl create, logged; prints nothing, returns xl's status
	local t0; t0=$(up)
	rm -f /var/log/xen/console/guest-$1.log
	xl -vvv create /etc/xen/$1.cfg >$L/xl-create-$1.log 2>&1
	local rc=$?
	say "xl create $1 rc=$rc after $(since $t0)s"
	[ $rc = 0 ] || grep -v 'debug:' $L/xl-create-$1.log | tail -20
	return $rc
}
glog() { tr -d '\r' <"/var/log/xen/console/guest-$1.log" 2>/dev/null; }
wait_console() {  # NAME REGEX SECONDS: until the guest printed REGEX
	local i
	for i in $(seq $(($3 * 2))); do
		glog $1 | grep -q -E "$2" && return 0
		xl domid $1 >/dev/null 2>&1 || { glog $1 | grep -q -E "$2"; return; }
		case $1 in xbd*) [ -z "$XBD_PID" ] || xbd_alive || return 1 ;; esac
		sleep 0.5
	done
	return 1
}
dump_xs() {  # FILE
	{ xenstore-ls -fp /local/domain/0/backend; local d
	  for d in $(xenstore-list /local/domain); do
		[ $d = 0 ] || xenstore-ls -fp /local/domain/$d/device
	  done; } >"$1" 2>&1
}

# follow NAME BACKEND RUN SECONDS: read the guest's DOMU-JOB-* lines as they
# come (tail -F: no polling loop of ours burning dom0 CPU meanwhile), sample
# the backend's and dom0's CPU time at each job's begin and end, print one
# XBDT-RESULT per job.  Returns 0 when the guest said JOBS-DONE and every
# job passed.
# The profile step: PROF=perf records all of dom0 (cpu-clock samples: a PV
# dom0 has no PMU) and PROF=strace counts xbd-back's system calls (every
# thread of it and of its workers), from each job's begin to its result
# (either slows the job: its figures only count for what they profile)
PROF= PROF_PID=
# JOB_HOOK: a command run once, at the next job's begin (before its figures start)
JOB_HOOK=
prof_start() {
	case $PROF in
	perf) perf record -q -e cpu-clock -F 499 -a -g -o /tmp/prof.data >/dev/null 2>&1 & ;;
	xentrace)  # what dom0 asks of Xen: the scheduler's and the PV entry records
		rm -f /tmp/prof.bin
		xentrace -D -S 256 -e 0x0022f000 /tmp/prof.bin >/dev/null 2>&1 & ;;
	strace)  # xbd-back and its workers (its children), every thread of each
		# shellcheck disable=SC2046
		strace -c -f -qq -o /tmp/prof.txt -p $XBD_PID $(pgrep -P $XBD_PID | sed 's/^/-p /') \
			>/dev/null 2>&1 & ;;
	ftrace) ftrace_on; PROF_PID=ftrace; return ;;
	esac
	PROF_PID=$!
	sleep 1   # attached before fio starts (the guest waits 2 s)
}
prof_stop() {  # BACKEND RUN RESULT-LINE
	local job ios calls
	[ -n "$PROF_PID" ] || return 0
	[ $PROF_PID = ftrace ] || { kill -INT $PROF_PID 2>/dev/null; wait $PROF_PID 2>/dev/null; }
	PROF_PID=
	job=$(echo "$3" | sed -n 's/.* job=\([^ ]*\).*/\1/p')
	ios=$(job_ios "$3")
	case $PROF in
	ftrace)  # the timeline, read on the host (tests/xen/qd1-timeline.py)
		ftrace_off $L/ftrace-$1-$2-$job.txt
		echo "XBDT-FTRACE backend=$1 run=$2 job=$job ios=$ios lines=$(wc -l <$L/ftrace-$1-$2-$job.txt)" ;;
	xentrace)  # summed on the host (tests/xen/xentrace-sum.py): the raw file and its I/O count
		mv /tmp/prof.bin $L/xentrace-$1-$job.bin 2>/dev/null && echo $ios >$L/xentrace-$1-$job.ios
		echo "XBDT-XENTRACE backend=$1 job=$job ios=$ios bytes=$(stat -c %s $L/xentrace-$1-$job.bin 2>/dev/null)" ;;
	perf)
		perf report -i /tmp/prof.data --stdio --no-children --sort comm,dso,sym \
			--percent-limit 0.7 -g none 2>/dev/null | grep -v '^#' | grep -v '^$' |
			head -40 >$L/perf-$1-$job.txt
		# inclusive (children): which system call, interrupt or idle path the time went under
		perf report -i /tmp/prof.data --stdio --children --sort sym --percent-limit 1.5 \
			-g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -45 >$L/perfc-$1-$job.txt
		echo "XBDT-PERF backend=$1 job=$job lines=$(wc -l <$L/perf-$1-$job.txt)" ;;
	strace)
		cp /tmp/prof.txt $L/strace-$1-$job.txt
		# strace -c: "% time seconds usecs/call calls [errors] syscall", then "total"
		awk -v ios=$ios -v be=$1 -v job=$job '
			$NF == "total" { total = $4 }
			$1 ~ /^[0-9.]+$/ && $NF != "total" { c[$NF] = $4 }
			END { if (!ios) exit
				line = sprintf("XBDT-SYSCALLS backend=%s job=%s ios=%d per_io=%.2f", be, job, ios, total / ios)
				n = 0; for (k in c) { s[++n] = k }
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (c[s[j]] > c[s[i]]) { t = s[i]; s[i] = s[j]; s[j] = t }
				for (i = 1; i <= n && i <= 8; i++) line = line sprintf(" %s=%.2f", s[i], c[s[i]] / ios)
				print line }' /tmp/prof.txt | tee -a $L/results.txt
		grep -q -w -e io_submit -e io_uring_enter /tmp/prof.txt ||
			step xbd-strace-$job FAIL "strace saw no submission of xbd-back's: its ring threads were not traced" ;;
	esac
	rm -f /tmp/prof.data /tmp/prof.txt /tmp/prof.bin
}

# ftrace_on / ftrace_off FILE: the timeline step's trace of dom0's kernel
# during one job: every interrupt handler's entry (the ring's event
# channel, the disk's completion), the scheduler's wake-ups and switches,
# the disk's requests issued and completed, xbd-back's system calls (its
# threads and its workers': its notification is an ioctl) and, by a
# kprobe, kernel blkback's notification (notify_remote_via_irq); the first
# 8 MiB a CPU of it (overwrite off: the job's first requests), for
# tests/xen/qd1-timeline.py to cut into the stages of each request.  The
# events are switched on once, at the first run, and stay on: a run only
# starts and stops the recording.  Switching a tracepoint patches the
# kernel's text, which under TCG has stalled dom0 for tens of seconds
# (and the function tracer, which patches every function, more so).
FTRACE_ON=
ftrace_on() {
	local t filt=
	echo 0 >$TR/tracing_on; echo >$TR/trace
	if [ -z "$FTRACE_ON" ]; then
		FTRACE_ON=1
		echo 8192 >$TR/buffer_size_kb; echo 0 >$TR/options/overwrite
		for t in irq:irq_handler_entry sched:sched_switch sched:sched_wakeup block:block_rq_issue \
			block:block_rq_complete raw_syscalls:sys_enter raw_syscalls:sys_exit; do
			echo $t >>$TR/set_event 2>/dev/null
		done
		echo 'p:xbdt_notify notify_remote_via_irq' >>$TR/kprobe_events 2>/dev/null &&
			echo 1 >$TR/events/kprobes/xbdt_notify/enable
	fi
	# xbd-back's system calls only (none while it is not running)
	if xbd_alive; then
		for t in $(for p in $XBD_PID $(pgrep -P $XBD_PID); do ls /proc/$p/task; done); do
			filt="${filt:+$filt || }common_pid == $t"
		done
	fi
	echo "${filt:-common_pid == 0}" >$TR/events/raw_syscalls/filter
	echo 1 >$TR/tracing_on
}
ftrace_off() {
	echo 0 >$TR/tracing_on
	cat $TR/trace >$1 2>/dev/null
	echo >$TR/trace
}
# ftrace_quiet: the events off again, once the timeline runs of a backend
# are done and no guest runs, so that the other backend's untraced runs
# that follow do not pay for them (an enabled event costs a call even
# with tracing_on at 0); the next ftrace_on switches them on again
ftrace_quiet() {
	[ -n "$FTRACE_ON" ] || return 0
	FTRACE_ON=
	echo >$TR/set_event
	echo 0 >$TR/events/kprobes/xbdt_notify/enable 2>/dev/null
	echo '-:xbdt_notify' >>$TR/kprobe_events 2>/dev/null
}

# bklat BACKEND RUN JOB BEFORE AFTER: xbd-back's own latency of the job's
# reads and writes (its histograms, xbdctl stats --json, the difference
# between two snapshots), from taking a request off the ring to pushing its
# answer: beside fio's in the guest, what the notifications and the
# guest's side add
bklat() {
	python3 - "$@" <<'PY' 2>/dev/null
import json, sys
be, run, job, a, b = sys.argv[1:6]
def hist(path):
    h = {}
    for d in json.load(open(path)).get("devices", []):
        for op in ("read", "write"):
            for k, v in (((d.get("stats") or {}).get("latency") or {}).get(op) or {}).get("buckets", {}).items():
                h[(op, k)] = h.get((op, k), 0) + v
    return h
h0, h1 = hist(a), hist(b)
out = []
for op in ("read", "write"):
    bs = sorted(((float("inf") if k == "+Inf" else int(k)), h1[(o, k)] - h0.get((o, k), 0))
                for (o, k) in h1 if o == op)
    n = sum(c for _, c in bs)
    if not n:
        continue
    q = {}
    for p in (0.5, 0.99):
        acc = 0
        for bound, c in bs:
            acc += c
            if acc >= p * n:
                q[p] = bound / 1000
                break
    out.append("%s_n=%d %s_p50_le_us=%.0f %s_p99_le_us=%.0f" % (op, n, op, q[0.5], op, q[0.99]))
if out:
    print("XBDT-BKLAT backend=%s run=%s job=%s %s" % (be, run, job, " ".join(out)))
PY
}
# BACKEND "mixed": the interleave runs' guest, whose disks are served by
# several backends; BE_OF_DEV ("xvdb=blkback xvdc=xbd ...") says whose
# each disk is, and each job is counted for the backend of its disk
BE_OF_DEV=
dev_be() {  # a DOMU-JOB-* line: the backend of its dev=
	local d; d=$(echo "$1" | sed -n 's/.* dev=\([^ ]*\).*/\1/p')
	echo " $BE_OF_DEV " | sed -n "s/.* $d=\([^ ]*\) .*/\1/p"
}
follow() {
	local g=$1 be=$2 run=$3 log=/var/log/xen/console/guest-$1.log
	local t0 line part= b0=0 d0=0 b1 d1 bad=0 rc= fifo=/tmp/follow.$1 tp fd i j init= jb=$2
	t0=$(up)
	for i in $(seq 600); do [ -e $log ] && break; sleep 0.5; done
	rm -f $fifo; mkfifo $fifo
	tail -n +1 -F $log >$fifo 2>/dev/null &
	tp=$!
	exec {fd}<$fifo
	while [ -z "$rc" ]; do
		if ! IFS= read -r -t 5 -u $fd line; then
			part=$part$line   # a line cut by the timeout continues next time
			xl domid $g >/dev/null 2>&1 || { say "guest $g is gone"; rc=3; }
			case " $be $BE_OF_DEV " in *[\ =]xbd\ *) xbd_alive || { say "xbd-back died while $g ran its jobs"; rc=5; } ;; esac
			[ "$(since $t0 | cut -d. -f1)" -lt $4 ] || { say "timeout following $g"; rc=4; }
			continue
		fi
		line=$part${line%$'\r'}; part=
		case $line in
		DOMU-JOB-BEGIN*) [ -z "$JOB_HOOK" ] || { $JOB_HOOK; JOB_HOOK=; }
			jb=$be; [ $be != mixed ] || jb=$(dev_be "$line")
			[ "$jb" != xbd ] || xbdctl stats --json >/tmp/xj0.json 2>/dev/null
			sc_start $jb; d0=$(dticks); snap /tmp/snap0; evsnap /tmp/ev0; x0=$(xticks)
			[ -z "$PROF" ] || prof_start ;;
		DOMU-JOB-RESULT*)
			d1=$(dticks); x1=$(xticks); snap /tmp/snap1; evsnap /tmp/ev1; sc_stop
			[ -z "$PROF" ] || prof_stop $jb $run "$line"
			if [ "$jb" = xbd ] && xbdctl stats --json >/tmp/xj1.json 2>/dev/null; then
				bklat $jb $run "$(echo "$line" | sed -n 's/.* job=\([^ ]*\).*/\1/p')" /tmp/xj0.json /tmp/xj1.json |
					tee -a $L/results.txt
			fi
			echo "$line" | awk -v be=$jb -v run=$run -v b=$(bdelta $jb /tmp/snap0 /tmp/snap1) -v d=$((d1 - d0)) -v x=$((x1 - x0)) -v tck=$TCK -v sc="$SC_COUNT" '
			{ for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
			END {
				ios = (f["rkb"] + f["wkb"]) * 1024 / (f["bs"] ? f["bs"] : 4096)
				bc = b / tck; dc = d / tck; xc = x / 1000
				printf "XBDT-RESULT backend=%s run=%s job=%s round=%s rc=%s iops=%.0f bw_kib=%d ios=%d verify=%s bcpu=%.2f dcpu=%.2f bus=%.0f dus=%.0f p50=%s p99=%s xcpu=%.1f xus=%.0f sys=%s\n",
				  be, run, f["job"], f["round"] == "" ? "-" : f["round"], f["rc"], f["riops"] + f["wiops"], f["rbw"] + f["wbw"], ios,
				  f["verify"], bc, dc, ios ? bc * 1e6 / ios : 0, ios ? dc * 1e6 / ios : 0, f["p50"], f["p99"],
				  xc, ios ? xc * 1e6 / ios : 0, sc != "" && ios ? sprintf("%.2f", sc / ios) : "-"
			}' | tee -a $L/results.txt
			j=$(echo "$line" | sed -n 's/.*job=\([^ ]*\).*/\1/p')
			echo "XBDT-CPUTOP $jb $run $j $(top_cpu /tmp/snap0 /tmp/snap1)" | tee -a $L/results.txt
			echo "XBDT-EVENTS $jb $run $j $(evdelta /tmp/ev0 /tmp/ev1 "$(job_ios "$line")") on_cpu=$(on_cpu)" |
				tee -a $L/results.txt
			case $line in *" rc=0 "*) ;; *) bad=1 ;; esac
			# xbd-back makes system calls for every request: a job of
			# a thousand I/Os and more that it spent no CPU tick on
			# was not counted (a process of it the sampling missed)
			if [ "$jb" = xbd ] && [ "$(job_ios "$line")" -ge 1000 ] &&
				[ "$(bdelta xbd /tmp/snap0 /tmp/snap1)" = 0.00 ]; then
				step xbd-$run-$j-cpu FAIL "xbd-back's tasks used no CPU tick over $(job_ios "$line") I/Os: its processes were not all counted ($(top_cpu /tmp/snap0 /tmp/snap1))"
			fi
			case $line in *verify=FAIL*) bad=1 ;; esac
			;;
		DOMU-JOBS-DONE*) rc=$bad ;;
		DOMU-NO-XVDB*) rc=2 ;;
		DOMU-*) init=1 ;;
		# the guest's kernel crashed before its init said anything: rc 6
		*"] Kernel panic - not syncing"* | *"] Oops: "* | *"] BUG: "*) [ -n "$init" ] || rc=6 ;;
		esac
	done
	exec {fd}<&-
	kill $tp 2>/dev/null; wait $tp 2>/dev/null
	rm -f $fifo
	return $rc
}
guest_jobs() {  # NAME BACKEND RUN: create the guest, run the jobs, step result
	local g=$1 be=$2 run=$3 rc
	if ! create $g; then
		step $be-$run-create FAIL "xl create rc!=0 (log: logs/xl-create-$g.log)"
		return 1
	fi
	step $be-$run-create PASS "xl create $g"
	follow $g $be $run ${FOLLOW_FOR:-480}; rc=$?
	if [ $rc = 6 ]; then
		# Its own kernel crashed while it booted, before its init ran or
		# its disk connected: not the backend's doing.  Debian 13's kernel
		# did so under TCG (a NULL call in crng_make_state, as dom0's once
		# took an int3 there).  Booted once more; the log keeps the crash.
		glog $g >$L/console-$g-crashed.log
		say "guest $g's kernel crashed while it booted (logs/console-$g-crashed.log): created again"
		xl destroy $g >/dev/null 2>&1
		if ! create $g; then
			step $be-$run-create FAIL "xl create rc!=0 after a crashed boot (log: logs/xl-create-$g.log)"
			return 1
		fi
		follow $g $be $run ${FOLLOW_FOR:-480}; rc=$?
	fi
	glog $g >$L/console-$g.log
	grep -E '^DOMU-(XVDB|DMESG|FIO-ERR|NO-)' $L/console-$g.log | sed "s/^/  [$g] /" | head -20
	if [ $rc = 0 ]; then step $be-$run-fio PASS "$(grep -c '^DOMU-JOB-RESULT' $L/console-$g.log) jobs, verify ok"
	else step $be-$run-fio FAIL "follow rc=$rc (see logs/console-$g.log)"; fi
	return $rc
}
be_path() { echo /local/domain/0/backend/$1/$(xl domid $2 2>/dev/null)/$3; }
fe_path() { echo /local/domain/$(xl domid $1 2>/dev/null)/device/vbd/$2; }
connected() {  # BEPATH FEPATH: both ends in state 4
	[ "$(xenstore-read $1/state 2>/dev/null)" = 4 ] && [ "$(xenstore-read $2/state 2>/dev/null)" = 4 ]
}
# kernel_clean WHEN: dom0's kernel logged no BUG/WARNING/Oops since the last call.
# One warning is the emulator's, not a bug: a single-step debug trap taken
# in kernel mode ("WARNING: ... at arch/x86/kernel/traps.c:N
# exc_debug_kernel"; the trapped context had TF set).  Linux never sets TF
# in the kernel, Xen clears it in the frames it bounces into a PV kernel,
# and Linux's comment at the warning names QEMU leaking a #DB into its
# guest as a known way to get one.  Seen
# once under TCG (a deb13 CI boot, Dec 4: in the hotplug script's exit,
# as a PVH guest booted).  It is counted and named in the step's line
# (KEMU, for the whole boot), never a pass of anything else.
: "${KLINES:=0}" "${KEMU:=0}"
kernel_clean() {
	local n new emu
	dmesg >/tmp/dmesg.now 2>/dev/null
	n=$(wc -l </tmp/dmesg.now)
	tail -n +$((KLINES + 1)) /tmp/dmesg.now >/tmp/dmesg.new
	KLINES=$n
	emu=$(grep -a -c 'WARNING: .* at arch/x86/kernel/traps.c:[0-9]* exc_debug_kernel' /tmp/dmesg.new)
	KEMU=$((KEMU + emu))
	new=$(grep -a -E 'BUG:|WARNING:|Oops|general protection|segfault|hung_task|blocked for more than' /tmp/dmesg.new |
		grep -a -v 'WARNING: .* at arch/x86/kernel/traps.c:[0-9]* exc_debug_kernel' | head -4 | tr '\n' '|')
	[ $emu = 0 ] || emu="; the emulator's single-step traps in kernel mode (WARNING in exc_debug_kernel, TCG's doing, not a bug of Linux or xbd): $emu"
	[ "$emu" != 0 ] || emu=
	if [ -n "$new" ]; then STEP_G=- step dom0-kernel-$1 FAIL "$new$emu"
	else STEP_G=- step dom0-kernel-$1 PASS "no BUG/WARNING/Oops in dom0's kernel log$emu"; fi
}
xbd_alive() { [ -n "$XBD_PID" ] && kill -0 $XBD_PID 2>/dev/null; }
XBD_STARTS=0
xbd_start() {  # as the service runs it: foreground, default types (vbd,vbd3), real Xen
	XBD_STARTS=$((XBD_STARTS + 1))
	# shellcheck disable=SC2086
	xbd-back --platform xen -v $XBD_ARGS "$@" >>$L/xbd-back.log 2>&1 &
	XBD_PID=$!
	sleep 2
	xbd_alive
}
# xbd_crashed WHEN: if xbd-back died, a FAIL step with its last words, and a
# restart so that the later steps still say something (the failure stays)
xbd_crashed() {
	[ -n "$XBD_PID" ] && ! xbd_alive || return 1
	wait $XBD_PID 2>/dev/null; local rc=$?
	cp $L/xbd-back.log $L/xbd-back-crash$XBD_STARTS.log
	step xbd-back-died FAIL "during $1: exit status $rc; last log lines: $(tail -3 $L/xbd-back.log | tr '\n' '|') $(dmesg | grep -a 'xbd-back.*segfault' | tail -1)"
	echo "---- xbd-back restarted after it died during $1" >>$L/xbd-back.log
	xbd_start && say "xbd-back restarted (pid $XBD_PID)" || say "xbd-back restart failed"
	return 0
}
xbdctl_stats() {  # LABEL
	if command -v xbdctl >/dev/null; then
		if xbdctl stats >$L/xbdctl-stats-$1.txt 2>&1; then
			STEP_G=- step xbdctl-stats-$1 PASS "$(wc -l <$L/xbdctl-stats-$1.txt) lines (logs/xbdctl-stats-$1.txt)"
			sed "s/^/  [stats $1] /" $L/xbdctl-stats-$1.txt | head -30
		else STEP_G=- step xbdctl-stats-$1 FAIL "$(head -3 $L/xbdctl-stats-$1.txt)"; fi
	else
		STEP_G=- step xbdctl-stats-$1 SKIP "xbdctl is not built yet"
	fi
}
# ring_cpu_check: pin-rings (the default on real Xen) while xbd1 runs: each
# of its rings has its event channel's interrupt on the CPU the daemon's
# verbose line names (the kernel's effective affinity), a thread of
# xbd-back or of a worker bound to that CPU alone, and the same CPU in
# xbdctl; the interrupts' counts by CPU for the log
ring_cpu_check() {
	local d cpu irq eff n=0 bad= tcpus xcpus
	d=$(xl domid xbd1 2>/dev/null)
	# shellcheck disable=SC2046
	tcpus=" $(for p in $XBD_PID $(pgrep -P $XBD_PID); do
		for t in /proc/$p/task/*; do
			sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9][0-9]*\)$/\1/p' $t/status 2>/dev/null
		done; done | sort -u | tr '\n' ' ')"
	xcpus=$(xbdctl stats --json $XBD_SLOT/$d/51728 2>/dev/null | grep -o '"cpu":[0-9a-z]*' | sed 's/.*://' | tr '\n' ' ' | sed 's/ $//')
	while read -r cpu irq; do
		n=$((n + 1))
		eff=$(cat /proc/irq/$irq/effective_affinity_list 2>/dev/null || cat /proc/irq/$irq/smp_affinity_list 2>/dev/null)
		[ "$eff" = "$cpu" ] || bad="$bad irq $irq is on CPU ${eff:-?}, not $cpu;"
		case "$tcpus" in *" $cpu "*) ;; *) bad="$bad no thread bound to CPU $cpu alone (bound:$tcpus);" ;; esac
		case " $xcpus " in *" $cpu "*) ;; *) bad="$bad xbdctl gives CPUs '$xcpus', not $cpu;" ;; esac
	done < <(grep -a "^.*vbd3\?/$d/51728: on CPU [0-9]* with its event channel's interrupt" $L/xbd-back.log |
		sed -n 's/.*on CPU \([0-9]*\) .*(irq \([0-9]*\)).*/\1 \2/p')
	grep -a 'evtchn:xbdr' /proc/interrupts | sed 's/^/  [interrupts] /' | head -4
	grep -a "event channel's interrupt .*stays" $L/xbd-back.log | head -1 | sed 's/^/  [xbd-back] /'
	if [ $n = 0 ]; then step xbd-ring-cpu FAIL "xbd-back named no CPU for $XBD_SLOT/$d/51728's ring"
	elif [ -n "$bad" ]; then step xbd-ring-cpu FAIL "$bad"
	else step xbd-ring-cpu PASS "$n ring(s) on CPU(s) $xcpus, each with its event channel's interrupt and its thread"; fi
}
. $X/pvgrub.sh
. $X/lifecycle.sh
PVGRUB_BOUND=$(arg xbdt.pvgrub-bound); PVGRUB_BOUND=${PVGRUB_BOUND:-300}

# The slot xbd-back serves: backend/vbd with script= on Xen 4.17/4.18 (no
# kernel blkback beside it); from 4.19 backendtype=tap writes backend/vbd3.
# These are the README's xl disk lines.
case $XENVER in
4.1[0-8]) XBD_SLOT=vbd XBD_OPTS="script=/etc/xen/scripts/xbd" ;;
*) XBD_SLOT=vbd3 XBD_OPTS="backendtype=tap, script=/etc/xen/scripts/xbd" ;;
esac
xbd_disk() { echo "format=raw, vdev=$1, access=rw, $XBD_OPTS, target=$2"; }  # VDEV TARGET

MQ_ARGS="xen_blkfront.max_ring_page_order=4 xen_blkfront.max_indirect_segments=256 xen_blkfront.max_queues=2 xen_blkfront.feature_persistent=0"
XBD_DISK=$(xbd_disk xvdb /srv/guest.img)

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

# ---- xbd-back ---------------------------------------------------------------
if want xbd; then
	if [ -d /sys/module/xen_blkback ]; then
		STEP_G=- step xbd-no-blkback FAIL "xen-blkback is loaded before the xbd run"
	else
		STEP_G=- step xbd-no-blkback PASS "xen-blkback not loaded, modprobe blocked"
	fi
	if xbd_start; then STEP_G=- step xbd-start PASS "xbd-back --platform xen -v${XBD_ARGS:+ $XBD_ARGS} (pid $XBD_PID), disks on backend/$XBD_SLOT: $XBD_DISK"
	else STEP_G=- step xbd-start FAIL "xbd-back exited: $(tail -3 $L/xbd-back.log)"; fi
	xbdctl_stats before

	mode=none; want hotplug && mode=hotplug
	mkcfg xbd1 1 $mode "" "$XBD_DISK"
	(	# how the device comes up, seen from xenstore, while libxl waits
		for i in $(seq 600); do xenstore-read /local/domain/0/backend/$XBD_SLOT >/dev/null 2>&1 && break; sleep 0.1; done
		for i in $(seq 300); do   # until both ends are connected: not during the jobs
			# (the paths again each time: a guest created again has a new domid)
			b=$(be_path $XBD_SLOT xbd1 51728); f=$(fe_path xbd1 51728)
			be=$(xenstore-read $b/state 2>&1); fe=$(xenstore-read $f/state 2>&1)
			echo "t=$(up) be=$be fe=$fe"
			if [ "$be$fe" = 44 ]; then
				# what the backend wrote, while the guest still runs
				for k in sectors sector-size feature-flush-cache feature-persistent max-ring-page-order multi-queue-max-queues feature-max-indirect-segments; do
					printf '%s=%s ' $k "$(xenstore-read $b/$k 2>/dev/null)"
				done >$L/xbd1-connected.txt
				break
			fi
			sleep 0.2
		done >$L/states-xbd1.txt 2>&1
	) &
	STATES=$!
	case " $XBD_ARGS " in *" --pin-rings 0 "*) ;; *) JOB_HOOK=ring_cpu_check ;; esac
	guest_jobs xbd1 xbd std
	xbdctl_stats after-jobs
	kill $STATES 2>/dev/null
	dump_xs $L/xs-xbd1.txt
	awk '!seen[$0]++ { print }' $L/states-xbd1.txt | awk '{ k = $2 " " $3; if (k != p) print; p = k }' |
		head -20 | sed 's/^/  [states xbd1] /'
	if [ -s $L/xbd1-connected.txt ]; then
		step xbd-connected PASS "backend+frontend state 4; backend wrote: $(cat $L/xbd1-connected.txt)"
	else
		step xbd-connected FAIL "never both Connected: $(tail -1 $L/states-xbd1.txt)"
	fi
fi

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

if want xbd; then kernel_clean xbd-std; fi
if want mq && xbd_alive; then
	mq_run xbd2 xbd "${XBD_DISK/guest.img/guest2.img}" $XBD_SLOT
	grep -a 'vbd3\?/[0-9]*/51728: connected' $L/xbd-back.log | tail -1 | sed 's/^/  [xbd-back] /'
	xbd_crashed "the multi-queue guest" ||
	if grep -q '^xbd-mq-fio FAIL' $L/steps.txt; then
		# a hung data path would make every later step wait for its timeout
		say "restarting xbd-back after the failed multi-queue run"
		kill -KILL $XBD_PID; wait $XBD_PID 2>/dev/null
		echo "---- killed and restarted after the failed multi-queue run" >>$L/xbd-back.log
		xbd_start || step xbd-restart FAIL "xbd-back did not come back"
	fi
	kernel_clean xbd-mq
fi

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

# the same guest with xbd-back's adaptive polling off: what polling costs
if want nopoll && xbd_alive; then
	variant nopoll xbdnp "the no-polling run" --poll-max-ns 0
fi
# the same jobs with threads and interrupts where the kernel puts them: what
# pin-rings (the default on Xen) gains
if want nopin && xbd_alive; then
	variant nopin xbdnpn "the pin-rings = 0 run" --pin-rings 0
fi
# the same jobs with every disk in the main process (workers = 0): what
# the per-domain confined workers (the default) cost, same boot
if want single && xbd_alive; then
	variant single xbdsg "the workers = 0 run" --workers 0
fi
# the multi-queue guest with its disk in the main process
if want mqsingle && xbd_alive; then
	variant mqsg xbdms "the multi-queue guest without a worker" --workers 0
fi
# the same jobs with io_uring (engine = uring) instead of libaio, same boot
if want uring && xbd_alive; then
	variant uring xbdur "the io_uring run" --engine uring
	grep -a -q "opened /srv/guest2.img (uring engine" $L/xbd-back.log ||
		step xbd-uring-engine FAIL "the disk was not served by io_uring: $(grep -a 'guest2.img' $L/xbd-back.log | tail -2 | tr '\n' '|')"
fi

# the std run again, on its own disk, after the other variants: how far
# the order of the runs moves a figure in one boot
if want again && xbd_alive; then
	VARIANT_DISK=$XBD_DISK variant again xbdag "the std run again"
fi
# xbd-back on the loop device with direct I/O (kernel blkback's loop run
# serves the same device): the two backends on one storage path
if want loop && xbd_alive; then
	loop_run xbd xbdlp
	xbd_crashed "the loop-device run"
fi

# where xbd-back's dom0 CPU goes: a profile of all of dom0 and a count of
# xbd-back's system calls per guest I/O, each on a guest of its own
if want profile && xbd_alive && command -v perf >/dev/null && command -v strace >/dev/null; then
	# what one system call costs dom0 (getppid: the cheapest), and
	# xbd-back's own measure of a clock read (a system call without vDSO)
	c=$(perf bench syscall basic --loop 20000 2>/dev/null | awk '/usecs\/op/ { print $1 }')
	k=$(grep -a -o 'a clock read costs [0-9]* ns' $L/xbd-back.log | head -1 | awk '{ print $5 }')
	# a round trip between two processes over pipes: 2 context switches, 4 system calls
	pp=$(perf bench sched pipe -l 2000 2>/dev/null | awk '/usecs\/op/ { print $1 }')
	echo "XBDT-SYSCOST getppid_us=${c:--} clock_read_ns=${k:--} pipe_roundtrip_us=${pp:--}" | tee -a $L/results.txt
	for PROF in perf strace xentrace; do
		j=; [ $PROF != xentrace ] || j=$TRACE_JOBS
		mkcfg xbd$PROF 1 none "$j" "${XBD_DISK/guest.img/guest2.img}"
		guest_jobs xbd$PROF xbd $PROF
		xl destroy xbd$PROF >/dev/null 2>&1
	done
	PROF=
	xbd_crashed "the profile runs"
elif want profile; then
	step xbd-profile SKIP "no perf or strace in this dom0"
fi

# xbd-back through dom0's page cache (direct = 0) on std's disk, as
# kernel blkback's std disk is served (xl's block script gives it a loop
# device without direct I/O): the two backends on one storage path
if want pcache && xbd_alive; then
	VARIANT_DISK=$XBD_DISK variant pcache xbdpc "the page-cache run" --direct 0
fi
# the direct path of both backends: a disk of dom0's own (QEMU's third
# virtio disk), opened O_DIRECT by xbd-back and a phy disk of kernel
# blkback's (its bios), as hosts serve LVM volumes and partitions
PHY_DEV=/dev/vdc
phy_run() {  # BACKEND GUEST [RUN JOBS]
	local be=$1 g=$2 run=${3:-phy} jobs=${4:-xbdt.jobs=rand4k+seq128k+qd1}
	if [ ! -b $PHY_DEV ]; then
		step $be-$run-dev FAIL "no $PHY_DEV in dom0 (QEMU's third disk)"
		return 1
	fi
	if [ $be = xbd ]; then mkcfg $g 1 none $jobs "$(xbd_disk xvdb $PHY_DEV)"
	else mkcfg $g 1 none $jobs "format=raw, vdev=xvdb, access=rw, target=$PHY_DEV"; fi
	guest_jobs $g $be $run
	xl destroy $g >/dev/null 2>&1
}
if want phy && xbd_alive; then
	phy_run xbd xbdph
	xbd_crashed "the phy run"
fi
# single requests (QD1) as dom0's kernel sees them (ftrace: the ring's
# interrupt, the wake-ups, the disk's request, the notification), xbd-back
# on a file, on dom0's disk and through the page cache; kernel blkback's
# come in its section, and tests/xen/qd1-timeline.py cuts both into stages
if want timeline && xbd_alive; then
	PROF=ftrace
	mkcfg xbdtl 1 none xbdt.jobs=qd1 "${XBD_DISK/guest.img/guest2.img}"
	guest_jobs xbdtl xbd timeline
	xl destroy xbdtl >/dev/null 2>&1
	phy_run xbd xbdtlp tphy xbdt.jobs=qd1
	VARIANT_JOBS=xbdt.jobs=qd1 VARIANT_DISK=$XBD_DISK variant tpcache xbdtlpc \
		"the page-cache timeline run" --direct 0
	PROF=
	ftrace_quiet
	xbd_crashed "the timeline runs"
fi

# a third guest, only there to be served while xbd1 is hot-plugged and destroyed
# (the workers and kill9 steps act on it too: each brings it up when it is asked for alone)
if { want hotplug || want destroy || want workers || want kill9; } && xbd_alive; then
	mkcfg xbd3 1 rounds "" "$(xbd_disk xvdb /srv/guest3.img)"
	create xbd3 && wait_console xbd3 '^DOMU-ROUND n=1 ' 300 &&
		step xbd-other-guest PASS "xbd3 does write+verify rounds on its own disk" ||
		step xbd-other-guest FAIL "xbd3 did not start its rounds"
	xbd_crashed "the third guest's start"
fi

# ---- confinement: each guest domain's disks in a worker of its own ---------
# (xbd-back restarted with --workers 1, the default, taking the live
# rings over, whatever XBD_ARGS says): its uid, no
# capabilities, no new privileges, seccomp filter mode, its own mount
# namespace; the worker of xbd3 killed under its write+verify rounds comes
# back and they verify
if want workers && xbd_alive && xl domid xbd3 >/dev/null 2>&1; then
	d3=$(xl domid xbd3)
	kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null
	echo "---- restarted with --workers 1" >>$L/xbd-back.log
	xbd_start --workers 1
	sleep 3
	xbdctl stats --json >$L/xbdctl-workers.json 2>&1
	wpids=$(grep -o '"worker":{"pid":[0-9]*' $L/xbdctl-workers.json | sed 's/.*://' | sort -u)
	bad= note=
	[ -n "$wpids" ] || bad="no worker in xbdctl stats --json"
	for p in $wpids; do
		st=/proc/$p/status
		uid=$(awk '/^Uid:/ { print $2 }' $st); cap=$(awk '/^CapEff:/ { print $2 }' $st)
		nnp=$(awk '/^NoNewPrivs:/ { print $2 }' $st); sc=$(awk '/^Seccomp:/ { print $2 }' $st)
		mns=no; [ "$(readlink /proc/$p/ns/mnt)" != "$(readlink /proc/$XBD_PID/ns/mnt)" ] && mns=yes
		note="$note pid $p: uid=$uid CapEff=$cap NoNewPrivs=$nnp Seccomp=$sc own-mnt-ns=$mns;"
		[ "$uid" -ge 1879048192 ] 2>/dev/null && [ "$cap" = 0000000000000000 ] && [ "$nnp" = 1 ] && [ "$sc" = 2 ] &&
			[ $mns = yes ] || bad="${bad:+$bad, }pid $p not confined"
	done
	skipped=$(grep -a 'confinement steps not possible here' $L/xbd-back.log | tail -1 | sed 's/.*here: //')
	if [ -z "$bad" ]; then step workers-confined PASS "$(echo $wpids | wc -w) workers:$note skipped steps: ${skipped:-none}"
	else step workers-confined FAIL "$bad:$note skipped: ${skipped:-none}"; fi
	# the device's own record: from its "id" to the next device's
	w3=$(sed 's/{"id":/\n&/g' $L/xbdctl-workers.json | grep -F '"id":"'$XBD_SLOT/$d3'/51728"' |
		grep -o '"worker":{"pid":[0-9]*' | head -1 | sed 's/.*"pid"://')
	r0=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0')
	# (never kill 0: this script's whole process group)
	if [ "${w3:-0}" -gt 1 ]; then
		kill -KILL $w3
		r1=$r0
		for i in $(seq 240); do
			r1=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0'); [ $r1 -ge $((r0 + 2)) ] && break
			glog xbd3 | grep -q '^DOMU-ROUND .*rc=[1-9]' && break
			sleep 0.5
		done
		bad=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=[1-9]')
		res=$(grep -a "$XBD_SLOT/$d3/51728: resumed after its worker died" $L/xbd-back.log | tail -1 | sed 's/^xbd-back: //')
		note="xbd3's worker (pid $w3) killed under its rounds: $((r1 - r0)) more verified, $bad failed; ${res:-no resume line}; xbd-back alive: $(xbd_alive && echo yes || echo no)"
		[ $r1 -ge $((r0 + 2)) ] && [ $bad = 0 ] && [ -n "$res" ] && xbd_alive &&
			step workers-kill PASS "$note" || step workers-kill FAIL "$note"
	else
		step workers-kill FAIL "no worker pid for $XBD_SLOT/$d3/51728 in xbdctl stats --json"
	fi
	# a call outside a worker's list: its own line in xbd-back's log, and the supervisor's
	sc=$(dmesg | grep -a -c 'type=1326')
	sl=$(grep -a -c 'is not allowed; called from\|killed by seccomp' $L/xbd-back.log)
	[ "$sc" = 0 ] && [ "$sl" = 0 ] &&
		step workers-seccomp-clean PASS "no seccomp report in xbd-back's log, no audit type=1326 line in dom0's kernel log" ||
		step workers-seccomp-clean FAIL "$sl seccomp lines in xbd-back's log: $(grep -a 'is not allowed; called from\|killed by seccomp' $L/xbd-back.log | head -2 | tr '\n' '|') $sc audit type=1326 lines: $(dmesg | grep -a 'type=1326' | tail -2 | tr '\n' '|')"
	xbd_crashed "the workers step"
	kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null
	xbd_start || step xbd-restart FAIL "xbd-back did not come back"
fi

# ---- kill -9 of xbd-back under I/O: the guests see a pause, not a lost disk ----
# (the crash journal: a restart re-executes what was taken and not answered)
if want kill9 && xbd_alive && xl domid xbd3 >/dev/null 2>&1; then
	d3=$(xl domid xbd3)
	B3=$(be_path $XBD_SLOT xbd3 51728); F3=$(fe_path xbd3 51728)
	r0=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0')
	sleep 1   # into a round's writes
	t0=$(up)
	kill -KILL $XBD_PID; wait $XBD_PID 2>/dev/null
	echo "---- killed with SIGKILL under I/O, restarted 1.5 s later" >>$L/xbd-back.log
	sleep 1.5
	if xbd_start; then
		r1=$r0
		for i in $(seq 240); do
			r1=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0'); [ $r1 -ge $((r0 + 2)) ] && break
			glog xbd3 | grep -q '^DOMU-ROUND .*rc=[1-9]' && break
			xl domid xbd3 >/dev/null 2>&1 || break
			sleep 0.5
		done
		dt=$(since $t0)
		bad=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=[1-9]')
		st="$(xenstore-read $B3/state 2>&1)/$(xenstore-read $F3/state 2>&1)"
		res=$(sed -n '/^---- killed with SIGKILL/,$p' $L/xbd-back.log | grep -a "$XBD_SLOT/$d3/51728: resumed after an unclean stop" | tail -1 | sed "s/^xbd-back: //")
		redo=$(echo "$res" | sed -n 's/.*: \([0-9]*\) requests\{0,1\} re-executed.*/\1/p')
		note="xbd3's write+verify rounds: $((r1 - r0)) more verified after the kill, $bad failed; backend/frontend state $st; xbd-back: ${res:-no resume line} (${dt}s from the kill to the second verified round)"
		if [ $r1 -ge $((r0 + 2)) ] && [ $bad = 0 ] && [ "$st" = 4/4 ] && [ -n "$res" ]; then
			step xbd-kill9 PASS "$note"
		else
			step xbd-kill9 FAIL "$note"
		fi
		echo "XBDT-RESULT-KILL9 redo=${redo:-?} pause_s=$dt" >>$L/results.txt
	else
		step xbd-kill9 FAIL "xbd-back did not come back after SIGKILL: $(tail -3 $L/xbd-back.log | tr '\n' '|')"
	fi
	xbd_crashed "the kill -9 step"
fi

if want hotplug && xbd_alive && xl domid xbd1 >/dev/null 2>&1; then
	B=$(be_path $XBD_SLOT xbd1 51728)
	t0=$(up)
	xl block-detach xbd1 xvdb >$L/xl-block-detach.log 2>&1; rc=$?
	gone=no; wait_console xbd1 DOMU-XVDB-GONE 120 && gone=yes
	xenstore-read $B/state >/dev/null 2>&1 && left=yes || left=no
	if [ $rc = 0 ] && [ $gone = yes ] && [ $left = no ] && xbd_alive; then
		step hotplug-detach PASS "xl block-detach rc=0 in $(since $t0)s; guest lost xvdb; backend dir removed"
	else
		step hotplug-detach FAIL "rc=$rc guest-saw-removal=$gone backend-dir-left=$left: $(tail -3 $L/xl-block-detach.log)"
	fi
	t0=$(up)
	xl block-attach xbd1 "$(xbd_disk xvdc /srv/guest-c.img)" \
		>$L/xl-block-attach.log 2>&1; rc=$?
	wait_console xbd1 'DOMU-XVDC-DONE|DOMU-NO-XVDC' 300
	res=$(glog xbd1 | grep '^DOMU-JOB-RESULT job=verify-c')
	if [ $rc = 0 ] && echo "$res" | grep -q 'rc=0 .*verify=ok'; then
		step hotplug-attach PASS "xl block-attach xvdc rc=0; guest wrote+verified 16M on xvdc ($(since $t0)s)"
	else
		step hotplug-attach FAIL "rc=$rc: $(tail -3 $L/xl-block-attach.log) guest: ${res:-no result}"
	fi
fi

if want destroy && xbd_alive && xl domid xbd1 >/dev/null 2>&1; then
	wait_console xbd1 DOMU-IOLOOP-START 60
	sleep 3
	d1=$(xl domid xbd1)
	r0=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0')
	t0=$(up)
	xl destroy xbd1 >$L/xl-destroy.log 2>&1; rc=$?
	dt=$(since $t0)
	for i in $(seq 40); do
		xenstore-read /local/domain/0/backend/$XBD_SLOT/$d1 >/dev/null 2>&1 || break; sleep 0.5
	done
	xenstore-ls -fp /local/domain/0/backend/$XBD_SLOT/$d1 >$L/xs-after-destroy.txt 2>&1 && left=yes || left=no
	if [ $rc = 0 ] && [ $left = no ] && xbd_alive; then
		step destroy-cleanup PASS "xl destroy under I/O rc=0 in ${dt}s; backend/$XBD_SLOT/$d1 gone; xbd-back alive"
	else
		step destroy-cleanup FAIL "rc=$rc (${dt}s) backend-dir-left=$left xbd-back-alive=$(xbd_alive && echo yes || echo no)"
	fi
	grep -i -E "dom(ain)?[ =]*$d1|/$d1/" $L/xbd-back.log | tail -8 | sed 's/^/  [xbd-back] /'
	if xl domid xbd3 >/dev/null 2>&1; then
		r1=$r0
		for i in $(seq 120); do
			r1=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0'); [ $r1 -ge $((r0 + 3)) ] && break
			glog xbd3 | grep -q '^DOMU-ROUND .*rc=[1-9]' && break
			sleep 1
		done
		bad=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=[1-9]')
		if [ $r1 -ge $((r0 + 3)) ] && [ $bad = 0 ]; then
			step destroy-others-served PASS "xbd3 completed $((r1 - r0)) more write+verify rounds after xbd1's destroy"
		else
			step destroy-others-served FAIL "xbd3: $((r1 - r0)) rounds ok after destroy, $bad failed"
		fi
	else
		step destroy-others-served SKIP "no second guest running"
	fi
fi

# ---- pvgrub2: GRUB's own blkfront, then Linux's, on one disk served by xbd-back ----
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
if want pvgrub; then
	PVGRUB_TYPE=pv grub_step pvgrub-boot pvg
fi
# GRUB's PVH image (grub-i386-xen_pvh.bin) in a PVH guest: its blkfront
# reads grub.cfg, the bzImage and the initramfs from xbd-back's disk
if want pvhgrub; then
	PVGRUB_TYPE=pvh grub_step pvhgrub-boot pvhg
fi

# ---- the guest lifecycle with fio verify in flight (lifecycle.sh) ----------
if want lifecycle; then
	pvgrub_use xbd
	lifecycle_steps
	xbd_crashed "the lifecycle steps"
	kernel_clean lifecycle
fi

# ---- Xen 4.19+: xbd-back on backend/vbd3 beside kernel blkback on backend/vbd ----
if want vbd3; then
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
fi

# ---- a qcow2 image served over NBD by qemu-storage-daemon in dom0 ----------
if want nbd; then
	QSD_SOCK=/run/qsd-guest.sock
	if ! command -v qemu-storage-daemon >/dev/null; then
		step xbd-nbd-qcow2 SKIP "no qemu-storage-daemon in dom0"
	elif [ ! -f $X/guest.qcow2 ]; then
		step xbd-nbd-qcow2 FAIL "no qcow2 image in the payload"
	else
		xbd_alive || xbd_start
		cp $X/guest.qcow2 /srv/guest.qcow2
		q0=$(du -k /srv/guest.qcow2 | cut -f1)
		rm -f $QSD_SOCK
		qemu-storage-daemon --blockdev driver=file,node-name=f,filename=/srv/guest.qcow2,cache.direct=on \
			--blockdev driver=qcow2,node-name=q,file=f \
			--nbd-server addr.type=unix,addr.path=$QSD_SOCK \
			--export type=nbd,id=e,node-name=q,name=disk,writable=on >$L/qsd.log 2>&1 &
		QSD=$!
		for i in $(seq 100); do [ -S $QSD_SOCK ] && break; sleep 0.2; done
		# the table's jobs in the boot that measures costs (make check-xen-cost), else the verify job
		want profile && nj= || nj=xbdt.jobs=verify
		mkcfg xnb 1 none "$nj" "$(xbd_disk xvdb "nbd+unix:///disk?socket=$QSD_SOCK")"
		guest_jobs xnb xbd nbd; rc=$?
		eng=$(grep -a -o "$XBD_SLOT/[0-9]*/51728: opened nbd+unix:///disk[^ ]* (nbd engine[^)]*)" $L/xbd-back.log | tail -1)
		xl destroy xnb >/dev/null 2>&1
		kill $QSD 2>/dev/null; wait $QSD 2>/dev/null
		q1=$(du -k /srv/guest.qcow2 | cut -f1)
		rm -f /srv/guest.qcow2   # dom0's disk is small: the later steps need the room
		note="the guest's xvdb is /srv/guest.qcow2 through qemu-storage-daemon (nbd+unix); xbd-back: ${eng:-no NBD open in its log}; the qcow2 file ${q0}k -> ${q1}k allocated"
		if [ $rc = 0 ] && [ -n "$eng" ] && [ $q1 -gt $q0 ]; then step xbd-nbd-qcow2 PASS "$note"
		else step xbd-nbd-qcow2 FAIL "jobs rc=$rc; $note (logs/qsd.log)"; fi
		xbd_crashed "the NBD step"
	fi
fi

# ---- an HVM guest with PV drivers (Windows' and most clouds' kind) ---------
# Its disk is xvdb on xbd-back: below xvde, so libxl also hands the image
# to QEMU as an emulated IDE disk, which Linux's PV drivers unplug at boot
# (xen_platform_pci) before blkfront connects; the guest must see xvdb and
# no emulated disk, and the verify job must pass.  Slow under TCG
# (SeaBIOS loads the kernel and initramfs through port I/O): make
# check-xen-long.
if want hvm; then
	if ! grep -q '^virt_caps *:.*hvm' $L/xl-info.txt; then
		STEP_G=hvm step hvm-guest SKIP "Xen cannot run HVM guests here: $(grep virt_caps $L/xl-info.txt)"
	else
		xbd_alive || xbd_start
		GTYPE=hvm mkcfg hvm1 1 none xbdt.jobs=verify+rand4k+qd1 "$(xbd_disk xvdb /srv/guest2.img)"
		STEP_G=hvm FOLLOW_FOR=1200 guest_jobs hvm1 xbd hvm
		devs=$(grep -a '^DOMU-BLOCKDEVS' $L/console-hvm1.log | head -1 | sed 's/^DOMU-BLOCKDEVS //')
		emu=$(echo " $devs " | grep -o ' \(sd\|hd\)[a-z]* ' | tr -d '\n')
		if [ -n "$devs" ] && [ -z "$emu" ] && echo " $devs " | grep -q ' xvdb '; then
			STEP_G=hvm step hvm-unplug PASS "the guest's block devices: $devs (the emulated IDE twin of xvdb was unplugged)"
		else
			STEP_G=hvm step hvm-unplug FAIL "the guest's block devices: ${devs:-none reported}; emulated:${emu:- none}"
		fi
		cp /var/log/xen/qemu-dm-hvm1.log $L/ 2>/dev/null
		xl destroy hvm1 >/dev/null 2>&1
		xbd_crashed "the HVM guest"
	fi
fi

if want xbd || want pvgrub || want pvhgrub || want lifecycle || want vbd3 || want nbd || want hvm; then
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

# ---- qdisk (QEMU in dom0) --------------------------------------------------
if want qdisk; then
	mkcfg qd 1 none "" "format=raw, vdev=xvdb, access=rw, backendtype=qdisk, target=/srv/guest.img"
	guest_jobs qd qdisk std
	xl destroy qd >/dev/null 2>&1
	cp /var/log/xen/qemu-dm-qd.log $L/ 2>/dev/null
fi

# ---- kernel blkback ---------------------------------------------------------
if want blkback || want front || want loop || want phy || want timeline; then
	rm -f /etc/modprobe.d/xbd-check.conf
	modprobe xen-blkback && STEP_G=- step blkback-load PASS "xen-blkback loaded" || STEP_G=- step blkback-load FAIL "modprobe xen-blkback"
fi
if want blkback; then
	mkcfg bb 1 none "" "format=raw, vdev=xvdb, access=rw, target=/srv/guest.img"
	guest_jobs bb blkback std
	xl destroy bb >/dev/null 2>&1
	# the multi-queue guest on kernel blkback: only a comparison (make check-xen-cost)
	want bbmq && mq_run bbmq blkback "format=raw, vdev=xvdb, access=rw, target=/srv/guest2.img" vbd
	if want profile && command -v perf >/dev/null; then
		PROF=perf
		mkcfg bbperf 1 none "" "format=raw, vdev=xvdb, access=rw, target=/srv/guest.img"
		guest_jobs bbperf blkback perf
		xl destroy bbperf >/dev/null 2>&1
		PROF=xentrace
		mkcfg bbxentrace 1 none $TRACE_JOBS "format=raw, vdev=xvdb, access=rw, target=/srv/guest.img"
		guest_jobs bbxentrace blkback xentrace
		xl destroy bbxentrace >/dev/null 2>&1
		PROF=
	fi
fi

# kernel blkback on the loop device with direct I/O that xbd-back's loop run had
if want loop; then
	loop_run blkback bblp
fi
# kernel blkback on dom0's disk, as xbd-back's phy run had it
if want phy; then
	phy_run blkback bbph
fi
# kernel blkback's single requests as dom0's kernel sees them: on its std
# disk (dom0's page cache) and on dom0's disk
if want timeline; then
	PROF=ftrace
	mkcfg bbtl 1 none xbdt.jobs=qd1 "format=raw, vdev=xvdb, access=rw, target=/srv/guest.img"
	guest_jobs bbtl blkback timeline
	xl destroy bbtl >/dev/null 2>&1
	phy_run blkback bbtlp tphy xbdt.jobs=qd1
	PROF=
fi

# ---- the backends side by side: one guest, a disk on each, jobs in turn ----
# Jobs of two backends run one block after the other are not side by side
# when the host's load changes between the blocks (TCG's pace follows it):
# here one guest has a disk on kernel blkback (xvdb, backend/vbd), one on
# xbd-back (xvdc, backend/vbd3) and, with ILV_QDISK, one on qdisk (xvdd),
# and runs each job on each disk in turn, xbdt.rounds times (A B C A B C).
# Each job is counted for its disk's backend (follow's "mixed"); the host
# prints the medians and each round's ratio (xen-check.sh).  Xen 4.19+:
# on 4.17 xbd-back and kernel blkback both want backend/vbd.
if want ilv; then
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
fi

# ---- xbd-front in dom0 against kernel blkback ---------------------------------
if want front; then
	if ! command -v xbd-front >/dev/null; then
		STEP_G=- step front-check SKIP "xbd-front is not built"
	else
		xl block-attach 0 "format=raw, vdev=xvdd, access=rw, target=/srv/front.img" >$L/xl-attach-dom0.log 2>&1
		rc=$?
		if [ $rc != 0 ]; then
			STEP_G=- step front-attach FAIL "xl block-attach 0 xvdd rc=$rc: $(grep -v debug: $L/xl-attach-dom0.log | tail -3)"
		else
			STEP_G=- step front-attach PASS "kernel blkback serves dom0's device/vbd/51760"
			timeout 300 xbd-front check --vdev xvdd --platform xen >$L/front-check.log 2>&1; rc=$?
			sed 's/^/  [xbd-front check] /' $L/front-check.log | head -40
			[ $rc = 0 ] && STEP_G=- step front-check PASS "$(grep -c '^ok' $L/front-check.log) ok, $(grep -c '^skip' $L/front-check.log) skipped" ||
				STEP_G=- step front-check FAIL "rc=$rc, $(grep -c '^FAIL \[' $L/front-check.log) failed: $(grep '^FAIL \[' $L/front-check.log | head -2 | tr '\n' '|') (logs/front-check.log)"
			if command -v nbdkit >/dev/null && [ -f $X/nbdkit-xbd-plugin.so ]; then
				cat >/tmp/nbd.fio <<FIO
[global]
ioengine=nbd
uri=\${NBDURI}
rw=randwrite
bs=4k
size=16m
iodepth=8
verify=crc32c
verify_fatal=1
do_verify=1
[nbd-verify]
FIO
				d0=$(dticks); snap /tmp/snap0
				LD_LIBRARY_PATH=$X/lib timeout 300 nbdkit -f -U - $X/nbdkit-xbd-plugin.so vdev=xvdd platform=xen \
					--run 'NBDURI="$uri" fio --minimal /tmp/nbd.fio' >$L/front-nbd.log 2>&1; rc=$?
				d1=$(dticks); snap /tmp/snap1
				tail -1 $L/front-nbd.log | awk -F';' -v rc=$rc -v b=$(bdelta blkback /tmp/snap0 /tmp/snap1) -v d=$((d1 - d0)) -v tck=$TCK '
				{ ios = ($6 + $47) / 4; bc = b / tck; dc = d / tck
				  printf "XBDT-RESULT backend=blkback run=front job=nbd-verify rc=%s iops=%.0f bw_kib=%d ios=%d verify=%s bcpu=%.2f dcpu=%.2f bus=%.0f dus=%.0f\n",
				    rc, $8 + $49, $7 + $48, ios, rc == 0 ? "ok" : "FAIL", bc, dc, ios ? bc * 1e6 / ios : 0, ios ? dc * 1e6 / ios : 0 }' |
					tee -a $L/results.txt
				[ $rc = 0 ] && STEP_G=- step front-nbd-fio PASS "nbdkit xbd + fio ioengine=nbd verify=crc32c (16M)" ||
					STEP_G=- step front-nbd-fio FAIL "rc=$rc: $(grep -v '^3;' $L/front-nbd.log | tail -5)"
			else
				STEP_G=- step front-nbd-fio SKIP "no nbdkit in dom0 or no xbd plugin in the payload"
			fi
			xl block-detach 0 xvdd >>$L/xl-attach-dom0.log 2>&1 || say "block-detach 0 xvdd failed"
		fi
	fi
fi

# ---- the long target: pvgrub2 boots in a loop, kernel blkback as the control ----
if want pvgrub-loop; then
	STEP_G=pv
	if pvgrub_setup; then
		n=$(arg xbdt.pvgrub-n)
		b=$(arg xbdt.pvgrub-backends)
		pvgrub_loop ${n:-20} $PVGRUB_BOUND $(echo ${b:-xbd+blkback} | tr + ' ')
	else
		step pvgrub-loop FAIL "no pvgrub2 image or no boot disk"
	fi
	if xbd_alive; then kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null; fi
	XBD_PID=
fi

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
