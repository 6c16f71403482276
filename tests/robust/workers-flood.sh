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
#    answers in under 100 ms, and SIGTERM ends the daemon in under 2 s.
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
(sim_env 0 && XBD_TEST_WORKER_MISBEHAVE=$A:flood exec $BK_SETSID "$XBD_BACK" --workers 1 \
	--worker-restarts 3 --log-level verbose) >>"$LOG" 2>&1 &
BACK_PID=$!
wait_state "$B" "$db" 2
front_ok "$B" "$db" rw

cpu() { awk '{ print $14 + $15 }' "/proc/$BACK_PID/stat"; }
hz=$(getconf CLK_TCK)
# A's guest: one connect after another, each failing, for 10 s.
cat >"$WORK/a.loop" <<EOS
#!/bin/sh
end=\$((\$(date +%s) + 10))
while [ \$(date +%s) -lt \$end ]; do
	"$RAWFRONT" --dev $da rw
	sleep 0.2
done
EOS
c0=$(cpu)
w0=$(date +%s%N)
"$ASDOM" "$A" sh "$WORK/a.loop" >"$WORK/pa.out" 2>&1 &
aloop=$!
sim_on_exit "kill $aloop 2>/dev/null"
sim_wait_for 10 grep -q "worker of domain $A starting" "$LOG" || bk_fail "A's worker did not start"
ctl_answers 8
innocent_connects "$B" "$db" 8
ctl_answers_wait
wait "$aloop"
c1=$(cpu)
w1=$(date +%s%N)
ms=$(( (w1 - w0) / 1000000 ))
used=$(( (c1 - c0) * 1000 / hz ))
deaths=$(grep -c "worker of domain $A (pid [0-9]*) " "$LOG")
echo "while A's worker flooded: B's slowest connect $WORST_MS ms; control socket max $CTL_MAX_MS ms;" \
	"main process CPU $used ms over $ms ms; log lines $(wc -l <"$LOG"); A's worker's deaths $deaths"
[ "$WORST_MS" -lt 1000 ] || bk_fail "B took $WORST_MS ms to connect while A's worker flooded"
[ -n "$CTL_MAX_MS" ] && [ "$CTL_MAX_MS" -lt 100 ] ||
	bk_fail "the control socket took ${CTL_MAX_MS:-?} ms to answer"
grep -q "worker of domain $A (pid [0-9]*) sent more than" "$LOG" ||
	bk_fail "A's flooding worker was never killed for it"
grep -q "worker of domain $A died 3 times within 60 s" "$LOG" ||
	bk_fail "the restart limit did not engage for A's flooding worker"
[ "$used" -lt $((ms / 10)) ] || bk_fail "the main process used $used ms of CPU in $ms ms"
[ "$(wc -l <"$LOG")" -lt 2000 ] || bk_fail "the log grew to $(wc -l <"$LOG") lines"
back_alive
front_ok "$B" "$db" rw
sigterm_time
echo "SIGTERM: exited in $SIGTERM_MS ms"
[ "$SIGTERM_MS" -lt 2000 ] || bk_fail "xbd-back took $SIGTERM_MS ms to exit on SIGTERM"
bk_done
