#!/bin/sh
# A worker's death is its own guest's pause and nobody else's (worker.h).
# Guests A and B run fio (randwrite, verify=crc32c, an fsync every 16
# writes, through `nbdkit xbd`) on disks served by their own workers;
# A's worker is killed with SIGKILL WORKER_KILLS times (20) at random
# instants.  Asserted:
#  - each time a new worker serves A (a new pid) and A's ring resumes from
#    its journal ("resumed after its worker died" in the log);
#  - B's worker is the same process throughout and B's ring never pauses:
#    its request counter moves across every one of A's deaths;
#  - neither device leaves Connected, and every fio run of both guests
#    passes its verify with 0 errors;
#  - once A's guest is done, A has no request in flight (xbdctl's
#    xbd_requests_in_flight), whatever instants its workers died at
#    (tests/robust/workers-crash-points.sh kills one at each);
#  - the restart-storm limit: a worker that dies worker-restarts times (5)
#    within a minute is not started again, its device is closed (Closing)
#    with one log line, and the other guest goes on untouched.
. "$top_srcdir/tests/robust/lib.sh"
need_fio_nbd
[ "$(id -u)" = 0 ] || skip "workers change uid and mount namespace: needs root"
KILLS=${WORKER_KILLS:-20}
CTL=$SIMDIR/xbd-back.0.sock
ctl() { "$XBDCTL" --socket "$CTL" "$@"; }
# wpid DOMID DEVID: the pid of the worker serving that disk (empty: none,
# or one still starting).
wpid() {
	ctl stats --json "vbd/$1/$2" 2>/dev/null |
		jq -r '.devices[0].worker.pid | select(type == "number" and . > 1)'
}
# wkill PID: SIGKILL to one worker; never to 0 or -1 (kill's whole process
# group, or everything: the test's own make and CI's run with it).
wkill() {
	[ "$1" -gt 1 ] 2>/dev/null || bk_fail "refusing to kill pid '$1'"
	kill -KILL "$1"
}
# reqs DOMID DEVID: the disk's requests so far (reads + writes + flushes).
reqs() {
	ctl stats --json "vbd/$1/$2" | jq -r '.devices[0].stats.requests | .read + .write + .flush'
}

A=$(new_domain)
B=$(new_domain)
head -c 16777216 /dev/urandom >"$WORK/a.img"
head -c 16777216 /dev/urandom >"$WORK/b.img"
da=$(add_disk "$A" xvdb "$WORK/a.img")
db=$(add_disk "$B" xvdb "$WORK/b.img")
# More restarts than the kills within a minute: the storm limit comes last.
start_back --workers 1 --worker-restarts 64
VICTIM_FIO_OPTS="iodepth=16 fsync=16"
victim_start a "$A" xvdb 4m
victim_start b "$B" xvdb 4m
t=0
while [ -z "$(wpid "$B" "$db")" ] && [ $t -lt 100 ]; do sleep 0.1; t=$((t + 1)); done
[ -n "$(wpid "$B" "$db")" ] || bk_fail "B has no worker"
wb=$(wpid "$B" "$db")
wa=$(wpid "$A" "$da")
[ -n "$wa" ] && [ -n "$wb" ] && [ "$wa" != "$wb" ] || bk_fail "A and B have no workers of their own ($wa, $wb)"

i=0
while [ "$i" -lt "$KILLS" ]; do
	i=$((i + 1))
	sleep "0.$(( $(od -An -N2 -tu2 /dev/urandom) % 5 + 2 ))"
	before=$(reqs "$B" "$db")
	wkill "$wa" || bk_fail "kill $i: A's worker $wa is gone already"
	sim_wait_for 10 sh -c "[ \$(grep -c 'vbd/$A/$da: resumed after its worker died' '$LOG') -ge $i ]" ||
		bk_fail "kill $i: A's ring did not resume in a new worker"
	new=$(wpid "$A" "$da")
	[ -n "$new" ] && [ "$new" != "$wa" ] || bk_fail "kill $i: no new worker for A ($new)"
	wa=$new
	# B's ring went on meanwhile: its counter moves within a second.
	sim_wait_for 2 sh -c "[ \$(\"$XBDCTL\" --socket '$CTL' stats --json vbd/$B/$db | jq -r '.devices[0].stats.requests | .read + .write + .flush') -gt $before ]" ||
		bk_fail "kill $i: B's ring stood still"
	[ "$(wpid "$B" "$db")" = "$wb" ] || bk_fail "kill $i: B's worker changed"
	[ "$(bstate "$A" "$da")" = 4 ] && [ "$(bstate "$B" "$db")" = 4 ] ||
		bk_fail "kill $i: a device left Connected"
done
echo "ok: A's worker killed $KILLS times, each time a new one took A's ring over; B's worker $wb served on"
victim_stop a
victim_stop b
sim_wait_for 5 none_in_flight "$A" "$da" ||
	bk_fail "A's guest is done and $(in_flight "$A" "$da") of its requests are counted in flight"
[ "$(grep -c "worker of domain $B" "$LOG")" = 0 ] || bk_fail "B's worker is named in the log"
back_alive
stop_back || bk_fail "xbd-back exited with status $? after SIGTERM"

# ---- the restart-storm limit (worker-restarts = 5, the default) ----
start_back --workers 1
victim_start b2 "$B" xvdb 4m
rm -f "$WORK/go"
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
"$ASDOM" "$A" "$RAWFRONT" --dev "$da" pause >"$WORK/pa.out" 2>&1 &
pa=$!
sim_on_exit "kill $pa 2>/dev/null"
sim_wait_for 10 grep -q paused "$WORK/pa.out" || { cat "$WORK/pa.out"; bk_fail "guest A did not connect"; }
wa=$(wpid "$A" "$da")
n=0
while [ "$n" -lt 5 ]; do
	n=$((n + 1))
	[ -n "$wa" ] || bk_fail "death $n: A has no worker"
	wkill "$wa"
	if [ "$n" -lt 5 ]; then
		old=$wa
		t=0
		while { wa=$(wpid "$A" "$da"); [ -z "$wa" ] || [ "$wa" = "$old" ]; } && [ $t -lt 100 ]; do
			sleep 0.1
			t=$((t + 1))
		done
		[ -n "$wa" ] && [ "$wa" != "$old" ] || bk_fail "death $n: A's worker was not restarted"
	fi
done
sim_wait_for 10 grep -q "worker of domain $A died 5 times within 60 s: not restarted, its devices are closed" "$LOG" ||
	bk_fail "no line saying A's worker is not restarted"
t=0
while [ "$(bstate "$A" "$da")" = 4 ] && [ $t -lt 100 ]; do sleep 0.1; t=$((t + 1)); done
[ "$(bstate "$A" "$da")" -ge 5 ] || bk_fail "A's device was not closed (state $(bstate "$A" "$da"))"
[ -z "$(wpid "$A" "$da")" ] || bk_fail "a worker serves A after the storm limit"
[ "$(grep -c "not restarted, its devices are closed" "$LOG")" = 1 ] || bk_fail "the storm limit is not said once"
touch "$WORK/go"
wait "$pa"
[ "$(bstate "$B" "$db")" = 4 ] || bk_fail "B's device left Connected"
victim_stop b2
echo "ok: the fifth death within a minute closes A's device, with one line; B untouched"
bk_done
