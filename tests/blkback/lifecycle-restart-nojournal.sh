#!/bin/sh
# xbd-back with journal = 0 stopped by SIGTERM leaves its clean-stop
# marker, and the next one takes the live ring over at the shared
# indexes: its first start finds no journal and starts the ring afresh.
# That second start of the same ring (a grant-copy ring, whose bounce
# pool is refilled) once wrote past the pool's free list: the worker died
# of its sanitizer's report and the guest's disk came back only through a
# new worker, and with workers = 0 the daemon itself would have died.
# Asserted, in a worker and in the main process: the log says the ring
# was resumed after a clean stop, no worker died, the guest's I/O after
# the restart succeeds, and no sanitizer report.
. "$top_srcdir/tests/blkback/common.sh"

# connected_twice DOMID DEVID: both daemons connected the device.
connected_twice() {
	[ "$(grep -c "vbd/$1/$2: connected" "$LOG")" -ge 2 ]
}

# restart_once WORKERS: connect, SIGTERM, restart, I/O.
restart_once() {
	dom=$(new_domain)
	new_disk "$WORK/$1.img" 16M
	a=$(add_disk "$dom" xvdb "$WORK/$1.img")
	: >"$LOG"
	start_back --journal 0 --grants copy --workers "$1"
	RAWFRONT_GO=$WORK/go.$1
	export RAWFRONT_GO
	front "$dom" --dev "$a" pause >"$WORK/out.$1" 2>&1 &
	fpid=$!
	sim_on_exit "kill $fpid"
	sim_wait_for 10 grep -q paused "$WORK/out.$1" || { cat "$WORK/out.$1"; bk_fail "workers = $1: rawfront did not start"; }
	stop_back || bk_fail "workers = $1: xbd-back did not exit 0 on SIGTERM"
	start_back --journal 0 --grants copy --workers "$1"
	sim_wait_for 10 connected_twice "$dom" "$a" ||
		bk_fail "workers = $1: the restarted xbd-back did not reconnect"
	grep -q "vbd/$dom/$a: resumed after a clean stop" "$LOG" ||
		bk_fail "workers = $1: the ring was not resumed after the clean stop"
	! grep -q "worker of domain $dom (pid [0-9]*) \(was killed\|exited\|died\)" "$LOG" ||
		bk_fail "workers = $1: a worker died on the restart"
	touch "$RAWFRONT_GO"
	wait "$fpid" || { cat "$WORK/out.$1"; bk_fail "workers = $1: I/O after the restart failed"; }
	stop_back || bk_fail "workers = $1: xbd-back did not exit 0 on SIGTERM"
	! grep -q "ERROR: AddressSanitizer\|runtime error:" "$LOG" ||
		bk_fail "workers = $1: a sanitizer report"
}

restart_once 1
restart_once 0
echo "journal = 0: a clean stop's ring resumed, in a worker and in the main process"
bk_done
