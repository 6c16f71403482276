# pvgrub.sh: sourced by dom0-init.sh (it uses its helpers: say, step, up,
# since, glog, xbd_start, xbd_alive, ...).  A PV guest booted by pvgrub2,
# Debian's grub-xen-host (GRUB built as a PV kernel, with a blkfront of its
# own: one page, one request at a time, polling for the answer), from an
# ext2 disk that holds grub.cfg, the guest kernel and a small initramfs
# (xen-check.sh makes it: $X/pvgrub.img).  GRUB reads both files through
# its blkfront, writes Closed, then Initialising, and boots Linux, whose
# blkfront connects to the same disk again; the guest's init reads the
# whole disk back and prints its md5sum, which must be the image's.
#
#   pvgrub_boot NAME BACKEND N BOUND   one boot; one XBDT-PVGRUB line
#   pvgrub_loop N BOUND BACKEND...     N rounds of one boot per backend
# When a boot stops making progress before Linux starts, or Linux has not
# started BOUND seconds after `xl create`, the state of both ends goes to
# logs/pvgrub-hang-BACKEND-N/ (pvgrub_dump) before the guest is destroyed.
PVGRUB_BIN=/usr/lib/grub-xen/grub-x86_64-xen.bin
PVGRUB_IMG=/srv/pvgrub.img
PVGRUB_MD5=

pvgrub_setup() {
	[ -f "$(pvgrub_bin)" ] || { say "no $(pvgrub_bin) (grub-xen-host) in dom0"; return 1; }
	[ -f $X/pvgrub.img ] || { say "no $X/pvgrub.img in the payload"; return 1; }
	[ -n "$PVGRUB_MD5" ] && return 0
	cp $X/pvgrub.img $PVGRUB_IMG || return 1
	PVGRUB_MD5=$(md5sum <$PVGRUB_IMG | cut -d' ' -f1)
}

pvgrub_disk() {  # BACKEND: the xl disk line of the boot disk
	case $1 in
	# the image on tmpfs: xbd-back reads it through the page cache, as
	# kernel blkback's loop device does, instead of with O_DIRECT
	xbd-shm) [ -f /dev/shm/pvgrub.img ] || cp $PVGRUB_IMG /dev/shm/pvgrub.img
		xbd_disk xvda /dev/shm/pvgrub.img ;;
	xbd) xbd_disk xvda $PVGRUB_IMG ;;
	blkback) echo "format=raw, vdev=xvda, access=rw, target=$PVGRUB_IMG" ;;
	esac
}

# PVGRUB_TYPE=pvh: GRUB's PVH image (grub-xen-host has it) in a PVH guest
# instead of pvgrub2 in a PV one; the same disk, grub.cfg and checks
PVGRUB_TYPE=pv
pvgrub_bin() {
	case $PVGRUB_TYPE in pvh) echo /usr/lib/grub-xen/grub-i386-xen_pvh.bin ;; *) echo $PVGRUB_BIN ;; esac
}
pvgrub_cfg() {  # NAME BACKEND
	cat >/etc/xen/$1.cfg <<CFG
name = "$1"
type = "$PVGRUB_TYPE"
kernel = "$(pvgrub_bin)"
memory = $DOMU_MEM
vcpus = 1
on_poweroff = "destroy"
on_reboot = "destroy"
on_crash = "destroy"
disk = [ '$(pvgrub_disk $2)' ]
CFG
}

# pvgrub_dump NAME BACKEND N: everything that says where a boot that did
# not reach Linux is stuck.  Both ends' xenstore directories; xbd-back's
# ring indexes, consumed/pushed counts and port state (xbdctl stats
# --json) or kernel blkback's counters; Xen's event-channel table of every
# domain, with each port's pending and masked bits, and its vCPU states
# (debug keys e and q); the guest vCPU's registers three times a second
# apart (is GRUB spinning, and where) and its CPU time.
pvgrub_dump() {
	local g=$1 be=$2 d=$L/pvgrub-hang-$2-$3 id xctx ring
	id=$(xl domid $g 2>/dev/null) || return 0
	mkdir -p $d
	{ echo "# uptime $(up): guest $g (domid $id) on $be, Linux not started"
	  xenstore-ls -fp /local/domain/0/backend 2>&1 | grep "/$id/"
	  xenstore-ls -fp /local/domain/$id/device 2>&1
	  xenstore-ls -fp /libxl/$id/device 2>&1; } >$d/xenstore.txt
	xl vcpu-list $g >$d/vcpu-list.txt 2>&1
	case $be in
	xbd*)
		xbdctl stats --json >$d/xbdctl-stats.json 2>&1
		xbdctl stats >$d/xbdctl-stats.txt 2>&1
		tail -40 $L/xbd-back.log >$d/xbd-back-tail.txt ;;
	blkback)
		for f in /sys/bus/xen-backend/devices/vbd-$id-*/statistics/* \
			/sys/bus/xen-backend/devices/vbd-$id-*/state; do
			[ -f "$f" ] && echo "$f = $(cat $f)"
		done >$d/blkback-stats.txt 2>&1 ;;
	esac
	xctx=$(command -v xenctx || echo /usr/lib/xen-$XENVER/bin/xenctx)
	for i in 1 2 3; do echo "== $(up)"; $xctx -a $id 0 2>&1; sleep 1; done >$d/xenctx.txt
	xl vcpu-list $g >>$d/vcpu-list.txt 2>&1
	xl dmesg -c >/dev/null 2>&1
	xl debug-keys e; xl debug-keys q; sleep 2
	xl dmesg >$d/xen-debug-keys.txt 2>&1
	glog $g | cat -v >$d/console.txt
	ring=$(sed -n 's/.*"ring":{\([^}]*\)}.*/\1/p' $d/xbdctl-stats.json 2>/dev/null | tail -1)
	echo "XBDT-HANG backend=$be n=$3 domid=$id be-state=$(xenstore-read $(pvgrub_bpath $be $id)/state 2>&1) fe-state=$(xenstore-read /local/domain/$id/device/vbd/51712/state 2>&1) rip=$(grep -o 'rip: *[0-9a-f]*' $d/xenctx.txt | awk '{ print $2 }' | tr '\n' ,) vcpu=[$(awk '$1 == "'$g'" { print $5 "/" $6 "s" }' $d/vcpu-list.txt | tr '\n' ' ')] ring={$ring} console-tail=\"$(glog $g | tail -2 | tr -cd '[:print:] ' | cut -c1-120)\"" |
		tee -a $L/pvgrub.txt
}
pvgrub_bpath() {  # BACKEND DOMID
	case $1 in xbd*) echo /local/domain/0/backend/$XBD_SLOT/$2/51712 ;; *) echo /local/domain/0/backend/vbd/$2/51712 ;; esac
}

# uptime in centiseconds, and seconds since such a value ("12.3"), with
# builtins only
cs() { local u r; read -r u r </proc/uptime; echo $((10#${u%.*} * 100 + 10#${u#*.})); }
cs_since() { local d=$(( $(cs) - $1 )); echo "$((d / 100)).$(((d % 100) / 10))"; }

# pvgrub_reqs BACKEND DOMID: requests the backend has taken from the
# guest's xvda so far (every connection: GRUB's, then Linux's)
pvgrub_reqs() {
	case $1 in
	xbd*) xbdctl stats --json $(pvgrub_bpath $1 $2 | sed 's|/local/domain/0/backend/||') 2>/dev/null |
		sed -n 's/.*"stats":{"requests":{"read":\([0-9]*\).*/\1/p' ;;
	blkback)
		[ -e $L/blkback-sysfs.txt ] || ls -l /sys/bus/xen-backend/devices/ /sys/bus/xen-backend/devices/vbd-$2-51712/ \
			/sys/bus/xen-backend/devices/vbd-$2-51712/statistics/ >$L/blkback-sysfs.txt 2>&1
		cat /sys/bus/xen-backend/devices/vbd-$2-51712/statistics/rd_req 2>/dev/null ;;
	esac
}

# pvgrub_boot NAME BACKEND N BOUND [RUN]: xl create, then the time (seconds since
# xl create began) at which the console first showed each stage: GRUB read
# grub.cfg, loaded the kernel, the initramfs; Linux started; the guest's
# init ran and read xvda back.  Every 10 s the backend's request count and
# the console's length are sampled: a boot that moves neither for 40 s
# before Linux started is stuck, one that has not reached Linux after
# BOUND s is too slow; both are dumped (pvgrub_dump).  rc: 0 booted and
# read the disk back intact, 1 xl create failed, 2 stuck, 3 the guest read
# back other bytes or saw no xvda, 4 it did not finish, 5 too slow,
# 6 GRUB stopped at its prompt.
pvgrub_boot() {
	local g=$1 be=$2 n=$3 bound=$4 run=${5:-step} t0 t c rc=0 tc cfg= kern= ird= lnx= init= done= md5=- id
	local next=10 still=0 p lp=x lc=x reqs=- creqs=- ms=- f=/var/log/xen/console/guest-$1.log
	local hi=0 v bbst
	rm -f $f
	pvgrub_cfg $g $be
	t0=$(cs)
	xl -vvv create /etc/xen/$g.cfg >$L/xl-create-$g.log 2>&1 || rc=1
	tc=$(cs_since $t0)
	id=$(xl domid $g 2>/dev/null)
	# shell builtins only, twice a second: the watch must not take the CPU
	# from the backend it watches (dom0 is 2 emulated CPUs)
	while [ $rc = 0 ]; do
		c=; [ -f $f ] && read -r -d '' c <$f
		t=$(cs_since $t0)
		# Kernel blkback frees a ring's counters when its frontend
		# disconnects, as GRUB does before it starts Linux, and its
		# sysfs reads 0 until Linux connects: the counter the console's
		# initramfs line is set beside is the most it read before Linux
		# (one more sample a loop, a builtin: up to half a second of
		# GRUB's last requests may be missing from it)
		if [ $be = blkback ] && [ -z "$ird" ]; then
			bbst=/sys/bus/xen-backend/devices/vbd-$id-51712/statistics/rd_req v=
			[ -r $bbst ] && read -r v <$bbst
			[ "${v:-0}" -le $hi ] 2>/dev/null || hi=$v
		fi
		[ -n "$cfg" ] || case $c in *"Reading ("*) cfg=$t; creqs=$(pvgrub_reqs $be $id) ;; esac
		[ -n "$kern" ] || case $c in *XBDG-KERNEL*) kern=$t ;; esac
		if [ -z "$ird" ]; then
			case $c in *XBDG-INITRD*)
				ird=$t; reqs=$(pvgrub_reqs $be $id)
				[ $be != blkback ] || [ "${reqs:-0}" -ge $hi ] 2>/dev/null || reqs=$hi ;;
			esac
		fi
		[ -n "$lnx" ] || case $c in *"Linux version"*) lnx=$t ;; esac
		[ -n "$init" ] || case $c in *DOMU-INIT*) init=$t ;; esac
		case $c in
		*DOMU-XVDA-MD5*)
			done=$t
			md5=bad; [ "$(echo "$c" | tr -d '\r' | sed -n 's/^DOMU-XVDA-MD5 \([0-9a-f]*\).*/\1/p')" = "$PVGRUB_MD5" ] && md5=ok
			[ $md5 = ok ] || rc=3
			break ;;
		*DOMU-NO-XVDA*) rc=3; break ;;
		# GRUB gave up (its errors are in the console log) and waits for a user
		*"grub> "*) rc=6; break ;;
		esac
		if [ ${t%.*} -ge $next ]; then
			next=$((next + 10))
			xl domid $g >/dev/null 2>&1 || { rc=4; break; }
			p=$(pvgrub_reqs $be $id)
			if [ "$p" = "$lp" ] && [ ${#c} = "$lc" ]; then still=$((still + 10)); else still=0; fi
			lp=$p lc=${#c}
		fi
		if [ -z "$lnx" ] && [ $still -ge 40 ]; then rc=2; pvgrub_dump $g $be $n; break; fi
		if [ -z "$lnx" ] && [ ${t%.*} -ge $bound ]; then rc=5; pvgrub_dump $g $be $n; break; fi
		[ ${t%.*} -lt $((bound + 120)) ] || { rc=4; break; }
		sleep 0.5
	done
	# GRUB's pace: ms per request from xl create to the initramfs loaded
	[ -n "$ird" ] && [ "$reqs" -gt 0 ] 2>/dev/null &&
		ms=$(awk -v t="$ird" -v c="$tc" -v r="$reqs" 'BEGIN { printf "%.1f", (t - c) * 1000 / r }')
	glog $g >$L/console-$g-$n.log
	[ $rc = 0 ] || cp $L/xl-create-$g.log $L/xl-create-$g-$n.log
	echo "XBDT-PVGRUB backend=$be run=$run n=$n rc=$rc create=$tc cfg=${cfg:--} kernel=${kern:--} initrd=${ird:--} linux=${lnx:--} init=${init:--} done=${done:--} md5=$md5 cfg-reqs=$creqs grub-reqs=$reqs ms-per-req=$ms" |
		tee -a $L/pvgrub.txt
	xl destroy $g >/dev/null 2>&1
	for t in $(seq 40); do
		[ -n "$id" ] && xenstore-read $(pvgrub_bpath $be $id) >/dev/null 2>&1 || break
		sleep 0.5
	done
	return $rc
}

# pvgrub_use BACKEND: only that backend serves backend/vbd (Xen 4.17's
# libxl puts both xbd-back's and kernel blkback's disks there)
pvgrub_use() {
	local i
	case $1 in
	xbd*)
		if [ -d /sys/module/xen_blkback ]; then
			for i in $(seq 20); do modprobe -r xen-blkback 2>/dev/null && break; sleep 0.5; done
		fi
		echo "install xen-blkback /bin/false" >/etc/modprobe.d/xbd-check.conf
		xbd_alive || xbd_start ;;
	blkback)
		if xbd_alive; then
			kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null; XBD_PID=
		fi
		rm -f /etc/modprobe.d/xbd-check.conf
		[ -d /sys/module/xen_blkback ] || modprobe xen-blkback ;;
	esac
}

# median of the numbers on stdin ('-' lines are left out)
median() { grep -v '^-' | sort -n | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "-" }'; }
pvgrub_field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

# pvgrub_loop N BOUND BACKEND...: round i boots once on each backend in
# turn; one step per backend with the count and the median times.
pvgrub_loop() {
	local n=$1 bound=$2 be i t0 lines ok; shift 2
	t0=$(up)
	for i in $(seq $n); do
		for be in "$@"; do
			pvgrub_use $be
			pvgrub_boot pvg-$be $be $i $bound loop
			case $be in xbd*) xbd_crashed "pvgrub boot $i" ;; esac
		done
		say "pvgrub loop: round $i of $n done after $(since $t0)s"
	done
	for be in "$@"; do
		lines=$(grep "^XBDT-PVGRUB backend=$be run=loop " $L/pvgrub.txt)
		ok=$(echo "$lines" | grep -c ' rc=0 ')
		note="$ok/$n booted and read xvda back; stuck before Linux: $(echo "$lines" | grep -c ' rc=2 '), too slow: $(echo "$lines" | grep -c ' rc=5 '); medians, s since xl create: grub.cfg $(echo "$lines" | pvgrub_field cfg | median), Linux $(echo "$lines" | pvgrub_field linux | median) [$(echo "$lines" | pvgrub_field linux | grep -v '^-' | sort -n | sed -n '1p;$p' | tr '\n' ' ' | sed 's/ $//; s/ /../')], disk read back $(echo "$lines" | pvgrub_field done | median); GRUB $(echo "$lines" | pvgrub_field ms-per-req | median) ms a request; loop wall time $(since $t0)s"
		[ "$ok" = "$n" ] && step pvgrub-loop-$be PASS "$note" || step pvgrub-loop-$be FAIL "$note"
	done
}
