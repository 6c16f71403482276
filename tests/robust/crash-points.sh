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
# (three of them again with engine = uring, in a build with liburing),
# and once with a 16-page ring in a confined worker (as root), 300
# requests taken when it dies.  The line of a device closed after the
# kill names why: no journal (journal = 0), or a frontend that left
# Connected meanwhile.
# The guest (rawfront's survive scenario) keeps 24 writes and a flush (a
# barrier in barrier mode) in flight at a time, waits across the restart,
# and checks that every request is answered exactly once, OKAY, and that
# every page reads back as written; the restarted daemon must take the
# live ring over from its journal, leaving the device Connected.  As a
# control, the same kill with journal = 0 closes the device.
. "$top_srcdir/tests/robust/lib.sh"
grep -q XBD_TEST_CRASH "$XBD_BACK" ||
	skip "xbd-back is built without the test-only crash points (./configure --enable-test-hooks)"

# kill_at NAME POINT 'RAWFRONT OPTIONS' [XBD-BACK OPTIONS...]: a guest of its
# own (survive leaves its device Connected) with a 64 MiB disk, xbd-back
# started to kill itself at POINT, rawfront's survive scenario started on
# the disk (its output in $WORK/NAME.out); returns once the point killed
# xbd-back.  Sets G, dev and fpid (the guest's pid).
kill_at() {
	_name=$1 _point=$2 _fopts=$3
	shift 3
	G=$(new_domain)
	truncate -s 64M "$WORK/$_name.img"
	dev=$(add_disk "$G" xvdb "$WORK/$_name.img")
	: >"$LOG"
	(sim_env 0 && XBD_TEST_CRASH=$_point exec "$XBD_BACK" "$@" 2>>"$LOG") &
	BACK_PID=$!
	wait_state "$G" "$dev" 2
	# shellcheck disable=SC2086
	"$ASDOM" "$G" "$RAWFRONT" --dev "$dev" $_fopts survive >"$WORK/$_name.out" 2>&1 &
	fpid=$!
	wait "$BACK_PID"
	_st=$?
	[ "$_st" = 137 ] || { cat "$WORK/$_name.out"; bk_fail "$_name: xbd-back exited with $_st, not killed at $_point"; }
}

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
	# The crash point kills the daemon; then it is started again at once.
	# shellcheck disable=SC2086
	kill_at "s$i" "$point" "--qd 24" $opts
	[ "$(bstate "$G" "$dev")" = 4 ] || bk_fail "$point: the device is not Connected after the kill"
	# shellcheck disable=SC2086
	start_back $opts
	wait "$fpid" || { cat "$WORK/s$i.out"; bk_fail "$point: the guest saw more than a pause"; }
	grep -q "survive: 40 rounds" "$WORK/s$i.out" || bk_fail "$point: the guest did not finish"
	line=$(grep "vbd/$G/$dev: resumed after an unclean stop" "$LOG") ||
		bk_fail "$point: the restarted daemon did not take the ring over from its journal"
	n=$(echo "$line" | sed -n 's/.*: \([0-9]*\) requests* re-executed.*/\1/p')
	case $point in
	answered*|responded*|drain*) [ "$n" -ge 1 ] || bk_fail "$point: nothing re-executed ($line)" ;;
	esac
	[ "$(bstate "$G" "$dev")" = 4 ] || bk_fail "$point: the device left Connected"
	case $opts in
	*uring*) [ "$(grep -c "vbd/$G/$dev: opened .*(uring engine" "$LOG")" = 2 ] ||
		bk_fail "$point ($opts): not served by the uring engine before and after the kill" ;;
	esac
	echo "$point${opts:+ ($opts)}: killed, restarted, $n request(s) re-executed, guest verified"
	stop_back || bk_fail "$point: xbd-back exited with status $? after SIGTERM"
	"$XBD_SIM" domain destroy "$SIMDIR" "$G" || fail "domain destroy failed"
done

# A ring of 16 pages in a confined worker, 299 writes and a flush taken
# and none answered when it dies: the restarted daemon's new worker runs
# all 300 again (ordering that many must make no system call outside the
# worker's seccomp list: glibc 2.36's qsort asks sysinfo(2) above 1 KiB).
if [ "$(id -u)" = 0 ]; then
	kill_at big consumed:1 "--order 4 --qd 299" --workers 1
	start_back --workers 1
	wait "$fpid" || { cat "$WORK/big.out"; grep -a "worker" "$LOG" | tail -5; bk_fail "16 pages: the guest saw more than a pause"; }
	grep -q "survive: 40 rounds of 299 writes" "$WORK/big.out" || bk_fail "16 pages: the guest did not finish"
	line=$(grep "vbd/$G/$dev: resumed after an unclean stop" "$LOG") ||
		bk_fail "16 pages: the new worker did not take the ring over from its journal"
	n=$(echo "$line" | sed -n 's/.*: \([0-9]*\) requests* re-executed.*/\1/p')
	[ "$n" = 300 ] || bk_fail "16 pages: $n requests re-executed, not the 300 taken ($line)"
	! grep -q "killed by seccomp" "$LOG" || bk_fail "16 pages: a worker was killed by seccomp: $(grep -a 'not allowed' "$LOG" | head -1)"
	echo "16 pages, in a worker: killed with 300 requests taken, all 300 re-executed, guest verified"
	stop_back || bk_fail "16 pages: xbd-back exited with status $? after SIGTERM"
	"$XBD_SIM" domain destroy "$SIMDIR" "$G" || fail "domain destroy failed"
fi

# The control: without journals (journal = 0) the same kill cannot be
# survived, and the restarted daemon says so and closes the device.
kill_at nj responded:1 "--qd 24" --journal 0
start_back --journal 0
wait_state "$G" "$dev" 5
grep -q "vbd/$G/$dev: found Connected after an unclean stop and no journal (journal = 0)" "$LOG" ||
	bk_fail "journal = 0: no line saying why the device was closed"
kill "$fpid" 2>/dev/null
wait "$fpid" 2>/dev/null
echo "control: with journal = 0 the same kill closes the device"
stop_back || bk_fail "journal = 0: xbd-back exited with status $? after SIGTERM"
"$XBD_SIM" domain destroy "$SIMDIR" "$G" || fail "domain destroy failed"

# With journals, but the frontend left Connected while no daemon ran (its
# guest started over): the ring is not taken over (the device is closed,
# then offered to the frontend that starts over), and the line names the
# frontend's state as the reason, not a journal (it once said "no journal").
kill_at fe responded:1 "--qd 24"
kill "$fpid" 2>/dev/null
wait "$fpid" 2>/dev/null
xs write "$(bkey "$G" "$dev" frontend)/state" 1
start_back
sim_wait_for 10 grep -q "vbd/$G/$dev: found Connected after an unclean stop" "$LOG" ||
	bk_fail "frontend Initialising: no line saying why the device was closed"
line=$(grep "vbd/$G/$dev: found Connected after an unclean stop" "$LOG")
case $line in
*"and the frontend in state Initialising, not Connected:"*) ;;
*) bk_fail "frontend Initialising: the line does not name the frontend's state ($line)" ;;
esac
echo "a frontend no longer Connected: the device is closed, and the line says so"
bk_done
