#!/bin/sh
# A worker that talks too much costs the main process a bounded amount
# (issue 34).  XBD_TEST_WORKER_MISBEHAVE=DOMID:flood (--enable-test-hooks)
# makes that domain's workers send log lines as fast as they can once they
# said READY, as a compromised one could (546,299 read in 5 s once, the
# main process at 13-25% CPU for as long as the worker liked).  Its guest
# connects again and again meanwhile.  Asserted:
#  - the flooding worker is killed for going over its budget, and each
#    such death counts against worker-restarts (3 here): its guest's disk
#    is then closed with one line;
#  - the main process's CPU over the whole time stays under a tenth of
#    the time that elapsed (the lines over the limit are dropped before
#    they are formatted, and the worker does not live long);
#  - another guest's disk connects in under 1 s, the control socket
#    answers in under 100 ms (lib.sh, innocent_figures), and SIGTERM ends
#    the daemon in under 2 s.
. "$top_srcdir/tests/robust/lib.sh"
misbehave_start flood --workers 1 --worker-restarts 3 --log-level verbose

cpu() { awk '{ print $14 + $15 }' "/proc/$BACK_PID/stat"; }
hz=$(getconf CLK_TCK)
# A's guest connects again and again meanwhile (lib.sh, beside).
c0=$(cpu)
w0=$(date +%s%N)
beside "A's worker flooded" "worker of domain $A starting"
c1=$(cpu)
w1=$(date +%s%N)
ms=$(( (w1 - w0) / 1000000 ))
used=$(( (c1 - c0) * 1000 / hz ))
deaths=$(grep -c "worker of domain $A (pid [0-9]*) " "$LOG")
echo "main process CPU $used ms over $ms ms; log lines $(wc -l <"$LOG"); A's worker's deaths $deaths"
grep -q "worker of domain $A (pid [0-9]*) sent more than" "$LOG" ||
	bk_fail "A's flooding worker was never killed for it"
grep -q "worker of domain $A died 3 times within 60 s" "$LOG" ||
	bk_fail "the restart limit did not engage for A's flooding worker"
[ "$used" -lt $((ms / 10)) ] || bk_fail "the main process used $used ms of CPU in $ms ms"
[ "$(wc -l <"$LOG")" -lt 2000 ] || bk_fail "the log grew to $(wc -l <"$LOG") lines"
back_alive
front_ok "$B" "$db" rw
sigterm_within_2s
bk_done
