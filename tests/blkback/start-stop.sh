#!/bin/sh
# xbd-back says when it starts and stops, and systemd's status counts:
#  - one information line at start: what it serves, its disks and guests;
#  - sd_notify's STATUS "serving N disks of M guests", following disks
#    added and removed (systemctl status shows it);
#  - SIGTERM with a guest's I/O in flight: one line "stopping" with the
#    signal, no "disconnected" for a disk that stays Connected (its guest
#    resumes with the next xbd-back), and one line "stopped" saying how
#    many disks were left Connected and that every request consumed was
#    answered (or that rings were left to their journals).
. "$top_srcdir/tests/blkback/common.sh"
grep -q "define HAVE_SYSTEMD 1" "$top_builddir/config.h" || skip "built without libsystemd"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"

A=$(new_domain)
B=$(new_domain)
for d in a b c d; do
	new_disk "$WORK/$d.img" 16M
done
a=$(add_disk "$A" xvdb "$WORK/a.img")
b=$(add_disk "$A" xvdc "$WORK/b.img")
c=$(add_disk "$B" xvdb "$WORK/c.img")

notify_listen
NOTIFY_SOCKET=$WORK/notify start_back
for d in "$A $a" "$A $b" "$B $c"; do
	wait_state $d 2
done
# Information, not -v: the line is there without it.
grep -q "^xbd-back: started: serving vbd,vbd3 on the sim platform as domain 0: 3 disks of 2 guests$" "$LOG" ||
	bk_fail "no start line saying 3 disks of 2 guests"
status() {
	grep -o "STATUS=.*" "$WORK/notified" | tail -1
}
status_is() {
	[ "$(status)" = "STATUS=$1" ]
}
sim_wait_for 10 status_is "serving 3 disks of 2 guests" || bk_fail "status: $(status)"
echo "start: one line, and a status with 3 disks of 2 guests"

C=$(new_domain)
d=$(add_disk "$C" xvdb "$WORK/d.img")
wait_state "$C" "$d" 2
sim_wait_for 10 status_is "serving 4 disks of 3 guests" || bk_fail "status after an add: $(status)"
"$XBD_SIM" disk remove "$SIMDIR" "$A" "$b" --timeout 5 || bk_fail "disk remove"
sim_wait_for 10 status_is "serving 3 disks of 3 guests" || bk_fail "status after a remove: $(status)"
echo "the status follows a disk added and one removed"

front "$A" --dev "$a" --qd 16 --secs 4 stress >"$WORK/out" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid"
sim_wait_for 10 grep -q "vbd/$A/$a: connected" "$LOG" || bk_fail "not connected"
sleep 1
stop_back || bk_fail "xbd-back exited $? on SIGTERM"
grep -q "^xbd-back: stopping on SIGTERM: 3 disks of 3 guests$" "$LOG" || bk_fail "no stopping line"
grep -q "^xbd-back: stopped: 1 disk left Connected for the next xbd-back (its guest resumes then), 2 not connected; every request consumed was answered$" "$LOG" ||
	bk_fail "no stopped line"
[ "$(bstate "$A" "$a")" = 4 ] || bk_fail "state after SIGTERM is $(bstate "$A" "$a"), not 4"
sed -n '/stopping on SIGTERM/,$p' "$LOG" | grep "vbd/$A/$a: disconnected" &&
	bk_fail "a disk that stays Connected was said to be disconnected"
grep -q "STATUS=stopped" "$WORK/notified" || bk_fail "no stopped status"
echo "SIGTERM under I/O: stopping, stopped with the disk left Connected, no 'disconnected'"
# The guest resumes with the next xbd-back.
start_back
wait "$fpid" || { cat "$WORK/out"; bk_fail "guest I/O failed across the restart"; }
bk_done
