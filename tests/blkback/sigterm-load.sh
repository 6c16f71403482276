#!/bin/sh
# SIGTERM under load: a guest keeps 32 requests in flight (random reads,
# writes, flushes and discards, every read checked); xbd-back gets
# SIGTERM in the middle, answers every request it consumed, exits 0,
# leaves the device Connected and removes its control socket.  A
# restarted xbd-back takes the requests left in the ring, and the guest
# ends with every one of its requests answered and its data intact.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"

dom=$(new_domain)
new_disk "$WORK/a.img" 64M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
CTL=$WORK/ctl.sock
printf '%s\n' "control = $CTL" "types = vbd" >"$WORK/xbd-back.conf"
writes() {
	"$XBDCTL" --socket "$CTL" stats --json "$dom/$a" | jq -e '.devices[0].stats.requests.write'
}
start_back --config "$WORK/xbd-back.conf"
front "$dom" --dev "$a" --qd 32 --secs 4 stress >"$WORK/out" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid"
sim_wait_for 10 grep -q "vbd/$dom/$a: connected" "$LOG" || bk_fail "not connected"
sleep 1
w1=$(writes) || bk_fail "no counters"
sleep 0.3
w2=$(writes) || bk_fail "no counters"
[ "$w2" -gt "$w1" ] && [ "$w1" -gt 0 ] || bk_fail "no load before SIGTERM ($w1, then $w2 writes)"
stop_back || bk_fail "xbd-back exited $? on SIGTERM under load"
grep "vbd/$dom/$a: stopped" "$LOG"
grep -q "vbd/$dom/$a: stopped: every consumed request answered ([0-9]* in flight at the stop), [0-9]* left in the ring" "$LOG" ||
	bk_fail "not every consumed request was answered at SIGTERM"
grep -q "NOT answered" "$LOG" && bk_fail "requests left unanswered"
[ "$(bstate "$dom" "$a")" = 4 ] || bk_fail "state after SIGTERM is $(bstate "$dom" "$a"), not 4"
[ ! -e "$CTL" ] || bk_fail "control socket left behind"
kill -0 "$fpid" 2>/dev/null || { cat "$WORK/out"; bk_fail "the guest did not survive the SIGTERM"; }
# The next daemon answers the rest.
start_back --config "$WORK/xbd-back.conf"
wait "$fpid" || { cat "$WORK/out"; bk_fail "guest I/O failed across the restart"; }
cat "$WORK/out" | tail -1
grep -q "stress: .* all verified" "$WORK/out" || bk_fail "stress did not finish"
[ "$(writes)" -gt 0 ] || bk_fail "the restarted daemon served nothing"
bk_done
