# tests/xen/lib/guests.sh: sourced by dom0-init.sh.  The guests: an xl
# config (mkcfg), its creation (create), its console (glog, wait_console),
# its xenstore (dump_xs, be_path, fe_path, connected), following its fio
# jobs into XBDT-RESULT lines (follow) and a whole run of them with its
# step lines (guest_jobs); and dom0's kernel log between steps
# (kernel_clean).  Definitions only: sourcing it runs nothing.
# An HVM guest boots the same kernel and initramfs through QEMU (the
# device model in dom0) and SeaBIOS; it runs on the PV console too (hvc0).
# pci=noearly iommu=noaperture: without them Linux spent minutes probing
# PCI configuration space under TCG.  No display, no serial port.
HVM_CFG='vnc = 0
sdl = 0
vga = "none"
serial = "none"'
# In a boot that counts instructions (xen-check.sh's COUNT: xbdt.count),
# dom0's vCPUs are pinned to the first CPUs (dom0_vcpus_pin) and step
# count's guests to the others (GUEST_CPUS, set around them), so that a
# CPU's count is one side's work; a guest whose EXTRA has xbdt.mark= runs
# the counter's cut marks around its jobs (domu-init.sh), and follow
# samples its jobs the counted way (COUNT_FOLLOW: count_begin, count_result)
GUEST_CPUS=
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
$([ -z "$GUEST_CPUS" ] || echo "cpus = \"$GUEST_CPUS\"")
CFG
}
create() {  # NAME: xl create, logged; prints nothing, returns xl's status
	local t0; t0=$(up)
	rm -f /var/log/xen/console/guest-$1.log
	xl -vvv create /etc/xen/$1.cfg >$L/xl-create-$1.log 2>&1
	local rc=$?
	LAST_DOMID=$(xl domid $1 2>/dev/null)
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
# JOB_HOOK: a command run once, at the next job's begin (before its figures start)
JOB_HOOK=
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
	local tmo=5 injob=
	while [ -z "$rc" ]; do
		# a counted job's window holds no work of ours: no look every 5 s inside it
		tmo=5; [ -z "$COUNT_FOLLOW" ] || [ -z "$injob" ] || tmo=60
		if ! IFS= read -r -t $tmo -u $fd line; then
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
			injob=1
			if [ -n "$COUNT_FOLLOW" ]; then
				count_begin $jb "$line"
				continue
			fi
			[ "$jb" != xbd ] || xbdctl stats --json >/tmp/xj0.json 2>/dev/null
			sc_start $jb; d0=$(dticks); snap /tmp/snap0; evsnap /tmp/ev0; x0=$(xticks)
			[ -z "$PROF" ] || prof_start ;;
		DOMU-JOB-RESULT*)
			injob=
			if [ -n "$COUNT_FOLLOW" ]; then
				count_result $jb $run "$line" || bad=1
				continue
			fi
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
