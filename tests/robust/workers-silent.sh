#!/bin/sh
# A worker that stops answering holds up no guest but its own (issue 34).
# XBD_TEST_WORKER_MISBEHAVE=DOMID:silent (--enable-test-hooks) makes that
# domain's workers read and answer nothing once they said READY, as a
# compromised one could.  Its guest connects again and again meanwhile.
# Asserted, while that goes on:
#  - another guest's disk connects in under 1 s, every time;
#  - the control socket answers in under 100 ms (nine samples in ten,
#    none over 500 ms: lib.sh, innocent_figures; the main process never
#    waits for the worker's answer);
#  - the silent worker is killed for each missed answer and every such
#    death counts against worker-restarts (3 here): its guest's disk is
#    then closed with one line (a killed worker was once taken for one
#    that exited as told, and the limit never engaged);
#  - SIGTERM ends the daemon in under 2 s.
. "$top_srcdir/tests/robust/lib.sh"
misbehave_start silent --workers 1 --worker-restarts 3 --log-level verbose

# A's guest connects again and again meanwhile (lib.sh, beside).
beside "A's worker was silent" "worker of domain $A starting"
kills=$(grep -c "worker of domain $A (pid [0-9]*) did not answer" "$LOG")
echo "A's worker killed $kills times"
grep -q "worker of domain $A died 3 times within 60 s" "$LOG" ||
	bk_fail "the restart limit did not engage for A's silent worker ($kills kills)"
[ "$kills" -ge 3 ] && [ "$kills" -le 4 ] || bk_fail "A's worker was killed $kills times, not 3"
back_alive
front_ok "$B" "$db" rw
sigterm_within_2s
bk_done
