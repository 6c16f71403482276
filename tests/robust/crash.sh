#!/bin/sh
# xbd-back killed with SIGKILL at random instants while two guests run fio
# (randwrite, verify=crc32c, an fsync every 16 writes, through `nbdkit
# xbd`), and restarted each time: CRASH_KILLS times (10; make check-long
# runs 100).  Nothing in xenstore changes on SIGKILL; the restarted daemon
# takes each live ring over from its crash journal (journal.h) and
# executes again what was taken and not answered as the guest sees it.
# Asserted:
#  - a ring idle at the kill is taken over: the device stays Connected and
#    the guest's next I/O works;
#  - every fio run passes its verify with 0 errors (libxbdfront fails a
#    run on a response to an unknown or already answered id);
#  - neither device's backend or frontend leaves Connected (sampled every
#    20 ms from before the first kill to 1 s after the last), and the log
#    says each restart took both rings over;
#  - no sanitizer report from any of the daemons.
. "$top_srcdir/tests/robust/lib.sh"
need_fio_nbd
KILLS=${CRASH_KILLS:-10}

G=$(new_domain)
H=$(new_domain)
truncate -s 16M "$WORK/idle.img"
head -c 16777216 /dev/urandom >"$WORK/g.img"
head -c 16777216 /dev/urandom >"$WORK/h.img"
idle=$(add_disk "$G" xvdc "$WORK/idle.img")
gd=$(add_disk "$G" xvdb "$WORK/g.img")
hd=$(add_disk "$H" xvdb "$WORK/h.img")

# ---- an idle ring across SIGKILL ----
start_back
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
"$ASDOM" "$G" "$RAWFRONT" --dev "$idle" pause >"$WORK/pause.out" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid"
sim_wait_for 10 grep -q paused "$WORK/pause.out" || { cat "$WORK/pause.out"; bk_fail "rawfront did not start"; }
kill -KILL "$BACK_PID"
wait "$BACK_PID" 2>/dev/null
[ "$(bstate "$G" "$idle")" = 4 ] || bk_fail "state after SIGKILL is $(bstate "$G" "$idle"), not 4"
start_back
sim_wait_for 10 grep -q "vbd/$G/$idle: resumed after an unclean stop: 0 requests re-executed" "$LOG" ||
	bk_fail "the restarted xbd-back did not take the idle ring over"
touch "$RAWFRONT_GO"
wait "$fpid" || { cat "$WORK/pause.out"; bk_fail "the guest's I/O after the restart failed"; }
[ "$(bstate "$G" "$idle")" != 5 ] || bk_fail "the idle device was closed"
echo "ok: an idle ring across SIGKILL is taken over; the guest's I/O goes on"

# ---- fio on two guests across SIGKILLs at random instants ----
VICTIM_FIO_OPTS="iodepth=16 fsync=16"
victim_start g "$G" xvdb 4m
victim_start h "$H" xvdb 4m
# Sample both ends of both devices until told to stop.
cat >"$WORK/sample.sh" <<EOS
#!/bin/sh
eval "\$('$XBD_SIM' env '$SIMDIR' 0)"
while [ ! -e '$WORK/sample.stop' ]; do
	for p in /local/domain/0/backend/vbd/$G/$gd /local/domain/0/backend/vbd/$H/$hd \
		 /local/domain/$G/device/vbd/$gd /local/domain/$H/device/vbd/$hd; do
		echo "\$p \$(xenstore-read \$p/state 2>/dev/null)"
	done
	sleep 0.02
done
EOS
sh "$WORK/sample.sh" >"$WORK/states" 2>&1 &
spid=$!
sim_on_exit "touch '$WORK/sample.stop'"
i=0
t0=$(date +%s)
while [ "$i" -lt "$KILLS" ]; do
	i=$((i + 1))
	# A random instant: 0.2 to 1.2 s of I/O, then 0 to 0.3 s dead.
	sleep "0.$(( $(od -An -N2 -tu2 /dev/urandom) % 10 + 2 ))"
	kill -KILL "$BACK_PID"
	wait "$BACK_PID" 2>/dev/null
	sleep "0.$(( $(od -An -N1 -tu1 /dev/urandom) % 4 ))"
	start_back
	sim_wait_for 20 sh -c "[ \$(grep -c 'resumed after an unclean stop' '$LOG') -ge $((2 * i + 1)) ]" ||
		bk_fail "kill $i: the restarted daemon did not take both rings over"
done
echo "$KILLS kills in $(( $(date +%s) - t0 )) s; fio runs so far: g $(victim_runs g), h $(victim_runs h)"
sleep 1
# (the guests close their devices when fio is done: sampled up to here)
touch "$WORK/sample.stop"
wait "$spid"
victim_stop g
victim_stop h
bad=$(awk '$2 != 4' "$WORK/states" | sort | uniq -c)
[ -z "$bad" ] || { echo "$bad"; bk_fail "a device left Connected (state samples above)"; }
echo "both ends of both devices Connected in all $(wc -l <"$WORK/states") state samples"
redo=$(sed -n 's/.*resumed after an unclean stop: \([0-9]*\) request.*/\1/p' "$LOG" |
	awk '{ s += $1 } END { print s + 0 }')
echo "requests executed again after the kills: $redo"
grep -q "cannot take the live ring over\|found Connected after an unclean stop" "$LOG" &&
	bk_fail "a restart could not take a ring over"
back_alive
bk_done
