#!/bin/sh
# A guest's worker killed at each instant of a request's end, its
# successor taking the ring over: once the guest is done, xbd-back counts
# none of its requests in flight (xbdctl's xbd_requests_in_flight).  The
# test-only crash points (--enable-test-hooks; XBD_TEST_CRASH_WORKER=
# POINT:N kills a worker, not its successor, the Nth time its ring
# reaches POINT) choose the instant:
#   consumed   requests taken and journaled, none counted yet
#   answered   the journal says answered, the response not yet written
#   responded  responses written, not yet pushed (the fifth of a batch)
#   pushed     responses pushed (the guest may read them), their answers
#              not yet recorded in the counters
# The guest (rawfront's survive scenario: 40 rounds of 24 writes and a
# flush in flight at a time) waits across the restart and checks every
# request is answered once and every page reads back.  Each worker death
# is asserted (a new worker resumed the ring: "resumed after its worker
# died"), the device stays Connected.  Before the in-flight figure came
# from the ring's indexes, "pushed" left the batch it had pushed counted
# in flight for the connection's life.
. "$top_srcdir/tests/robust/lib.sh"
[ "$(id -u)" = 0 ] || skip "workers change uid and mount namespace: needs root"
grep -q XBD_TEST_CRASH_WORKER "$XBD_BACK" ||
	skip "xbd-back is built without the test-only crash points (./configure --enable-test-hooks)"

for point in consumed:3 answered:10 responded:5 pushed:3; do
	G=$(new_domain)
	truncate -s 64M "$WORK/$G.img"
	dev=$(add_disk "$G" xvdb "$WORK/$G.img")
	: >"$LOG"
	(sim_env 0 && XBD_TEST_CRASH_WORKER=$point exec $BK_SETSID "$XBD_BACK" --workers 1) \
		>>"$LOG" 2>&1 &
	BACK_PID=$!
	wait_state "$G" "$dev" 2
	"$ASDOM" "$G" "$RAWFRONT" --dev "$dev" --qd 24 survive >"$WORK/$G.out" 2>&1 ||
		{ cat "$WORK/$G.out"; bk_fail "$point: the guest saw more than a pause"; }
	grep -q "survive: 40 rounds" "$WORK/$G.out" || bk_fail "$point: the guest did not finish"
	grep -q "worker of domain $G (pid [0-9]*) was killed by signal 9" "$LOG" ||
		bk_fail "$point: the worker was not killed there"
	line=$(grep "vbd/$G/$dev: resumed after its worker died" "$LOG") ||
		bk_fail "$point: no new worker took the ring over"
	[ "$(bstate "$G" "$dev")" = 4 ] || bk_fail "$point: the device left Connected"
	sim_wait_for 5 none_in_flight "$G" "$dev" ||
		bk_fail "$point: the guest is done and $(in_flight "$G" "$dev") of its requests are counted in flight"
	echo "$point: worker killed, ${line#*: }; guest verified, 0 in flight"
	back_alive
	stop_back || bk_fail "$point: xbd-back exited with status $? after SIGTERM"
	"$XBD_SIM" domain destroy "$SIMDIR" "$G" || fail "domain destroy failed"
done
bk_done
