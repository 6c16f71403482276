# step mq: guest xbd2: 2 vCPUs, 2 queues, 16-page rings, indirect descriptors negotiated; the jobs
# needs: xbd-back
# lines: xbd-mq-

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
