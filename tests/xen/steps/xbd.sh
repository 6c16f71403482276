# step xbd: xbd-back started as the service runs it, guest xbd1 from the README's disk line, the fio jobs
# needs: none
# lines: xbd-std-fio

# ---- xbd-back ---------------------------------------------------------------
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
kernel_clean xbd-std
