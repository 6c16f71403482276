#!/bin/sh
# xbd-back killed (SIGKILL) at each instant where a ring is at risk, then
# restarted: its guest sees a pause and nothing else.  The test-only
# crash points (./configure --enable-test-hooks; XBD_TEST_CRASH=POINT:N
# makes the daemon kill itself the Nth time a ring thread reaches POINT)
# choose the instant:
#   consumed     requests taken from the ring and journaled, none answered
#   answered     the journal says answered, the response not yet written
#   responded    a response written, not yet pushed (the first of a batch)
#   responded:5  ... in the middle of a batch of responses
#   drain        a barrier taken while the writes before it are in flight
# (three of them again with engine = uring, in a build with liburing).
# The guest (rawfront's survive scenario) keeps 24 writes and a flush (a
# barrier in barrier mode) in flight at a time, waits across the restart,
# and checks that every request is answered exactly once, OKAY, and that
# every page reads back as written; the restarted daemon must take the
# live ring over from its journal, leaving the device Connected.  As a
# control, the same kill with journal = 0 closes the device.
. "$top_srcdir/tests/robust/lib.sh"
grep -q XBD_TEST_CRASH "$XBD_BACK" ||
	skip "xbd-back is built without the test-only crash points (./configure --enable-test-hooks)"

i=0
# The same kills with engine = uring where the build has it: the journal's
# requests are executed again on uring.
cases='"consumed:3" "answered:10" "responded:1" "responded:5" "drain:2 --barrier"'
"$XBD_BACK" --check-config --control none --disk "x:engine=uring" >/dev/null 2>&1 &&
	cases="$cases \"answered:10 --engine uring\" \"responded:5 --engine uring\" \"drain:2 --barrier --engine uring\""
eval "set -- $cases"
for case; do
	i=$((i + 1))
	point=${case%% *}
	opts=
	[ "$point" = "$case" ] || opts=${case#* }
	# A guest of its own each time: survive leaves its device Connected.
	G=$(new_domain)
	truncate -s 64M "$WORK/d$i.img"
	dev=$(add_disk "$G" xvdb "$WORK/d$i.img")
	: >"$LOG"
	# shellcheck disable=SC2086
	(sim_env 0 && XBD_TEST_CRASH=$point exec "$XBD_BACK" $opts 2>>"$LOG") &
	BACK_PID=$!
	wait_state "$G" "$dev" 2
	"$ASDOM" "$G" "$RAWFRONT" --dev "$dev" --qd 24 survive >"$WORK/s$i.out" 2>&1 &
	fpid=$!
	# The crash point kills the daemon; then it is started again at once.
	wait "$BACK_PID"
	st=$?
	[ "$st" = 137 ] || { cat "$WORK/s$i.out"; bk_fail "$point: xbd-back exited with $st, not killed at the point"; }
	[ "$(bstate "$G" "$dev")" = 4 ] || bk_fail "$point: the device is not Connected after the kill"
	# shellcheck disable=SC2086
	start_back $opts
	wait "$fpid" || { cat "$WORK/s$i.out"; bk_fail "$point: the guest saw more than a pause"; }
	grep -q "survive: 40 rounds" "$WORK/s$i.out" || bk_fail "$point: the guest did not finish"
	line=$(grep "vbd $G/$dev: resumed after an unclean stop" "$LOG") ||
		bk_fail "$point: the restarted daemon did not take the ring over from its journal"
	n=$(echo "$line" | sed -n 's/.*: \([0-9]*\) requests* re-executed.*/\1/p')
	case $point in
	answered*|responded*|drain*) [ "$n" -ge 1 ] || bk_fail "$point: nothing re-executed ($line)" ;;
	esac
	[ "$(bstate "$G" "$dev")" = 4 ] || bk_fail "$point: the device left Connected"
	case $opts in
	*uring*) [ "$(grep -c "vbd $G/$dev: opened .*(uring engine" "$LOG")" = 2 ] ||
		bk_fail "$point ($opts): not served by the uring engine before and after the kill" ;;
	esac
	echo "$point${opts:+ ($opts)}: killed, restarted, $n request(s) re-executed, guest verified"
	stop_back || bk_fail "$point: xbd-back exited with status $? after SIGTERM"
	"$XBD_SIM" domain destroy "$SIMDIR" "$G" || fail "domain destroy failed"
done

# The control: without journals (journal = 0) the same kill cannot be
# survived, and the restarted daemon says so and closes the device.
G=$(new_domain)
truncate -s 64M "$WORK/nj.img"
dev=$(add_disk "$G" xvdb "$WORK/nj.img")
: >"$LOG"
(sim_env 0 && XBD_TEST_CRASH=responded:1 exec "$XBD_BACK" --journal 0 2>>"$LOG") &
BACK_PID=$!
wait_state "$G" "$dev" 2
"$ASDOM" "$G" "$RAWFRONT" --dev "$dev" --qd 24 survive >"$WORK/nj.out" 2>&1 &
fpid=$!
wait "$BACK_PID"
[ $? = 137 ] || bk_fail "journal = 0: xbd-back was not killed at the point"
start_back --journal 0
wait_state "$G" "$dev" 5
grep -q "vbd $G/$dev: found Connected after an unclean stop and no journal" "$LOG" ||
	bk_fail "journal = 0: no line saying why the device was closed"
kill "$fpid" 2>/dev/null
wait "$fpid" 2>/dev/null
echo "control: with journal = 0 the same kill closes the device"
bk_done
