#!/bin/sh
# A worker that makes a system call outside its seccomp allow-list is
# killed by the kernel (SIGSYS), and its guest sees only a pause: the
# supervisor says so, starts a new worker, and the ring resumes from its
# journal.  The forbidden call is made on purpose by a test-build hook
# (XBD_TEST_WORKER_CALL=open:N or exec:N: the domain's first worker makes
# it once its rings have taken N requests; --enable-test-hooks).  Asserted
# for an open() of /etc/passwd and for an execve(): the worker names the
# call (its number, arguments and return addresses) before it dies, the
# log names the seccomp kill, a new worker (another pid) serves the guest, and fio's
# verify=crc32c passes every run with 0 errors.
. "$top_srcdir/tests/robust/lib.sh"
need_fio_nbd
[ "$(id -u)" = 0 ] || skip "workers change uid and mount namespace: needs root"
# (XBD_TEST_CRASH marks a test-hooks build; one without workers then fails below.)
strings "$XBD_BACK" | grep -q XBD_TEST_CRASH ||
	skip "xbd-back was built without --enable-test-hooks"
CTL=$SIMDIR/xbd-back.0.sock
wpid() {
	"$XBDCTL" --socket "$CTL" stats --json "vbd/$1/$2" 2>/dev/null |
		jq -r '.devices[0].worker.pid // empty'
}

for call in open exec; do
	G=$(new_domain)
	head -c 8388608 /dev/urandom >"$WORK/g$call.img"
	dev=$(add_disk "$G" xvdb "$WORK/g$call.img")
	: >"$LOG"
	(sim_env 0 && XBD_TEST_WORKER_CALL=$call:300 exec $BK_SETSID "$XBD_BACK" --workers 1) >>"$LOG" 2>&1 &
	BACK_PID=$!
	VICTIM_FIO_OPTS="iodepth=16 fsync=16"
	victim_start "v$call" "$G" xvdb 4m
	sim_wait_for 30 grep -q "worker of domain $G (pid [0-9]*) was killed by seccomp (SIGSYS" "$LOG" ||
		bk_fail "$call: the worker was not killed by seccomp"
	sim_wait_for 10 grep -q "vbd/$G/$dev: resumed after its worker died" "$LOG" ||
		bk_fail "$call: the ring did not resume in a new worker"
	! grep -q "TEST: a forbidden" "$LOG" || bk_fail "$call: the forbidden call returned"
	old=$(sed -n "s/.*worker of domain $G (pid \([0-9]*\)) was killed by seccomp.*/\1/p" "$LOG" | head -1)
	# The worker named the call and where it came from before it died.
	said=$(grep "worker (pid $old): system call" "$LOG" | head -1)
	[ -n "$said" ] || bk_fail "$call: the worker did not name the forbidden call"
	case "$call:$(uname -m)" in
	open:x86_64) nr=257 ;; # openat: glibc's open()
	exec:x86_64) nr=59 ;;  # execve
	*) nr='[0-9]*' ;;
	esac
	echo "$said" | grep -q "system call $nr (.*called from .*xbd-back+0x" ||
		bk_fail "$call: not the call made, or no frame in xbd-back: $said"
	echo "$said"
	new=$(wpid "$G" "$dev")
	[ -n "$new" ] && [ "$new" != "$old" ] || bk_fail "$call: no new worker ($old -> $new)"
	# The new worker takes more I/O before fio stops.
	runs=$(victim_runs "v$call")
	sim_wait_for 30 sh -c "[ \$(wc -l <'$WORK/v$call.runs') -gt $runs ]" ||
		bk_fail "$call: fio made no progress after the restart"
	[ "$(bstate "$G" "$dev")" = 4 ] || bk_fail "$call: the device left Connected"
	victim_stop "v$call"
	echo "ok: a forbidden $call killed the worker by SIGSYS; a new one ($new) took the ring over"
	stop_back || bk_fail "$call: xbd-back exited with status $? after SIGTERM"
done
bk_done
