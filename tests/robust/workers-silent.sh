#!/bin/sh
# A worker that stops answering holds up no guest but its own (issue 34).
# XBD_TEST_WORKER_MISBEHAVE=DOMID:silent (--enable-test-hooks) makes that
# domain's workers read and answer nothing once they said READY, as a
# compromised one could.  Its guest connects again and again meanwhile.
# Asserted, while that goes on:
#  - another guest's disk connects in under 1 s, every time;
#  - the control socket answers in under 100 ms (the slowest of every
#    sample; the main process never waits for the worker's answer);
#  - the silent worker is killed for each missed answer and every such
#    death counts against worker-restarts (3 here): its guest's disk is
#    then closed with one line (a killed worker was once taken for one
#    that exited as told, and the limit never engaged);
#  - SIGTERM ends the daemon in under 2 s.
. "$top_srcdir/tests/robust/lib.sh"
[ "$(id -u)" = 0 ] || skip "workers change uid and mount namespace: needs root"
strings "$XBD_BACK" | grep -q XBD_TEST_WORKER_MISBEHAVE ||
	skip "xbd-back was built without --enable-test-hooks"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"

A=$(new_domain)
B=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
da=$(add_disk "$A" xvdb "$WORK/a.img")
db=$(add_disk "$B" xvdb "$WORK/b.img")
(sim_env 0 && XBD_TEST_WORKER_MISBEHAVE=$A:silent exec $BK_SETSID "$XBD_BACK" --workers 1 \
	--worker-restarts 3 --log-level verbose) >>"$LOG" 2>&1 &
BACK_PID=$!
wait_state "$B" "$db" 2
front_ok "$B" "$db" rw

# A's guest: one connect after another, each failing, for 10 s (B's runs
# and the control socket's samples take about 8 s from its first).
cat >"$WORK/a.loop" <<EOS
#!/bin/sh
end=\$((\$(date +%s) + 10))
while [ \$(date +%s) -lt \$end ]; do
	"$RAWFRONT" --dev $da rw
	sleep 0.2
done
EOS
"$ASDOM" "$A" sh "$WORK/a.loop" >"$WORK/pa.out" 2>&1 &
aloop=$!
sim_on_exit "kill $aloop 2>/dev/null"
sim_wait_for 10 grep -q "worker of domain $A starting" "$LOG" || bk_fail "A's worker did not start"
ctl_answers 8
innocent_connects "$B" "$db" 8
worst=$WORST_MS
ctl_answers_wait
ctl=$CTL_MAX_MS
wait "$aloop"
kills=$(grep -c "worker of domain $A (pid [0-9]*) did not answer" "$LOG")
echo "while A's worker was silent: B's slowest connect $worst ms; control socket max $ctl ms;" \
	"A's worker killed $kills times"
[ "$worst" -lt 1000 ] || bk_fail "B took $worst ms to connect while A's worker was silent"
[ -n "$ctl" ] && [ "$ctl" -lt 100 ] || bk_fail "the control socket took ${ctl:-?} ms to answer"
grep -q "worker of domain $A died 3 times within 60 s" "$LOG" ||
	bk_fail "the restart limit did not engage for A's silent worker ($kills kills)"
[ "$kills" -ge 3 ] && [ "$kills" -le 4 ] || bk_fail "A's worker was killed $kills times, not 3"
back_alive
front_ok "$B" "$db" rw
sigterm_time
echo "SIGTERM: exited in $SIGTERM_MS ms"
[ "$SIGTERM_MS" -lt 2000 ] || bk_fail "xbd-back took $SIGTERM_MS ms to exit on SIGTERM"
bk_done
