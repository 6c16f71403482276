# tests/xen/lib/xbd.sh: sourced by dom0-init.sh.  xbd-back in dom0: started
# as the service runs it (xbd_start), alive (xbd_alive), restarted with a
# FAIL step when it died (xbd_crashed), its counters (xbdctl_stats), its
# rings' CPUs (ring_cpu_check) and the xl disk line of a disk it serves
# (xbd_disk; XBD_SLOT and XBD_OPTS are set by dom0-init.sh from Xen's
# version).  Definitions only: sourcing it runs nothing.
XBD_PID=
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
xbd_disk() { echo "format=raw, vdev=$1, access=rw, $XBD_OPTS, target=$2"; }  # VDEV TARGET
